/* A PTHREAD_PROCESS_SHARED mutex in a MAP_SHARED page, locked by a created thread in each
 * of two processes: every increment of the shared counter survives. */
#include "check.h"
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 100000

struct shared {
    pthread_mutex_t mutex;
    long counter;
};

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

int main(void) {
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED, "mmap");
    pthread_mutexattr_t a;
    PT(pthread_mutexattr_init(&a));
    PT(pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED));
    PT(pthread_mutex_init(&sh->mutex, &a));
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    run_one();
    if (pid == 0)
        exit(0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    CHECK(sh->counter == 2L * ROUNDS, "counter %ld, not %ld", sh->counter, 2L * ROUNDS);
    printf("ok\n");
    return 0;
}
