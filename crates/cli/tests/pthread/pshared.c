/* A PTHREAD_PROCESS_SHARED mutex in a MAP_SHARED page, locked by a created thread in each
 * of two processes: every increment of the shared counter survives. Then semaphores across
 * the two processes, each waited on by a created thread while the other process posts: a
 * process-shared one (sem_init with pshared 1, in the shared page) and a named one
 * (sem_open). Last, a process-shared barrier that a created thread of each process meets
 * again and again: neither gets a round ahead. */
#include "check.h"
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 100000

struct shared {
    pthread_mutex_t mutex;
    long counter;
    sem_t ping, pong; /* process-shared */
    pthread_barrier_t barrier; /* process-shared, count 2 */
    long arrivals[2];
};

#define HANDOFFS 2000

static sem_t *named_ping, *named_pong;

static struct shared *sh;

static void *add(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        PT(pthread_mutex_lock(&sh->mutex));
        sh->counter++;
        PT(pthread_mutex_unlock(&sh->mutex));
    }
    return NULL;
}

static void run_one(void) {
    pthread_t t;
    PT(pthread_create(&t, NULL, add, NULL));
    PT(pthread_join(t, NULL));
}

/* Hands a turn back and forth between the two processes: the child's thread waits on
 * `ping` and posts `pong`, the parent's the reverse. */
static sem_t *turn_wait, *turn_post;

static void *turns(void *arg) {
    (void)arg;
    for (int i = 0; i < HANDOFFS; i++) {
        CHECK(sem_wait(turn_wait) == 0, "sem_wait");
        CHECK(sem_post(turn_post) == 0, "sem_post");
    }
    return NULL;
}

static void run_turns(int child, sem_t *ping, sem_t *pong) {
    turn_wait = child ? ping : pong;
    turn_post = child ? pong : ping;
    pthread_t t;
    if (!child)
        CHECK(sem_post(ping) == 0, "first sem_post"); /* the parent starts */
    PT(pthread_create(&t, NULL, turns, NULL));
    PT(pthread_join(t, NULL));
}

#define ROUNDS_MET 2000

static int me;

static void *meet(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS_MET; i++) {
        sh->arrivals[me] = i;
        int r = pthread_barrier_wait(&sh->barrier);
        CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD, "pthread_barrier_wait returned %d", r);
        long other = sh->arrivals[!me];
        CHECK(other >= i, "round %d passed the barrier while the other process was at %ld", i, other);
        r = pthread_barrier_wait(&sh->barrier);
        CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD, "pthread_barrier_wait returned %d", r);
    }
    return NULL;
}

static void run_meetings(int child) {
    me = child;
    pthread_t t;
    PT(pthread_create(&t, NULL, meet, NULL));
    PT(pthread_join(t, NULL));
}

int main(void) {
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED, "mmap");
    pthread_mutexattr_t a;
    PT(pthread_mutexattr_init(&a));
    PT(pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED));
    PT(pthread_mutex_init(&sh->mutex, &a));
    CHECK(sem_init(&sh->ping, 1, 0) == 0 && sem_init(&sh->pong, 1, 0) == 0, "sem_init");
    pthread_barrierattr_t ba;
    PT(pthread_barrierattr_init(&ba));
    PT(pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED));
    PT(pthread_barrier_init(&sh->barrier, &ba, 2));
    char names[2][64];
    snprintf(names[0], sizeof names[0], "/schedlab-pshared-%d-ping", (int)getpid());
    snprintf(names[1], sizeof names[1], "/schedlab-pshared-%d-pong", (int)getpid());
    named_ping = sem_open(names[0], O_CREAT | O_EXCL, 0600, 0);
    named_pong = sem_open(names[1], O_CREAT | O_EXCL, 0600, 0);
    CHECK(named_ping != SEM_FAILED && named_pong != SEM_FAILED, "sem_open");
    CHECK(sem_unlink(names[0]) == 0 && sem_unlink(names[1]) == 0, "sem_unlink");
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    run_one();
    run_turns(pid == 0, &sh->ping, &sh->pong);
    run_turns(pid == 0, named_ping, named_pong);
    run_meetings(pid == 0);
    if (pid == 0)
        exit(0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    CHECK(sh->counter == 2L * ROUNDS, "counter %ld, not %ld", sh->counter, 2L * ROUNDS);
    int v;
    CHECK(sem_getvalue(&sh->ping, &v) == 0 && v == 1, "ping left at %d", v);
    CHECK(sem_getvalue(named_ping, &v) == 0 && v == 1, "named ping left at %d", v);
    printf("ok\n");
    return 0;
}
