/* The Open POSIX suite's pthread_cond_timedwait/4-3 shape, in short rounds: one thread (the
 * waiter) accepts SIGUSR1 and SIGUSR2 and waits on a condition variable with a 1 us timeout,
 * again and again, while another signals it every 700 ns and two more kill(2) the process
 * with those signals, each waiting for its last signal's handler to answer (sem_post) before
 * it sends the next. Every other thread blocks both. At the end of each round the waiter
 * ends. A sender's signal is always sent while the waiter still runs (a sender sends only
 * after reading that the round goes on, and the waiter ends only after reading that it
 * ended), and the kernel runs its handler on the waiter before the waiter ends: so each
 * answer comes. The senders wait for one at most 5 s.
 *
 * Under the library a signal sent to the waiter's kernel thread just as the waiter left it is
 * taken back from there when that kernel thread goes quiet, and placed again; a waiter that
 * ended in the instant between the two steps saw nothing on its way to it, and the signal,
 * placed a moment later, found no thread that accepted it: the sender waited for its answer
 * for good (pthread_cond_timedwait/4-3 hung about one run in fifty). */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 150, ROUND_MS = 15 };

static atomic_int running;
static sem_t answered[2];
static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cnd = PTHREAD_COND_INITIALIZER;
static sigset_t usr;
static atomic_long handled;
static int round_no;

static void on_usr1(int sig) {
    (void)sig;
    atomic_fetch_add(&handled, 1);
    sem_post(&answered[0]);
}

static void on_usr2(int sig) {
    (void)sig;
    atomic_fetch_add(&handled, 1);
    sem_post(&answered[1]);
}

static void *waiter(void *arg) {
    (void)arg;
    PT(pthread_sigmask(SIG_UNBLOCK, &usr, NULL));
    PT(pthread_mutex_lock(&mtx));
    while (atomic_load(&running)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 1000;
        if (t.tv_nsec >= 1000000000) {
            t.tv_nsec -= 1000000000;
            t.tv_sec++;
        }
        int e;
        while ((e = pthread_cond_timedwait(&cnd, &mtx, &t)) == 0)
            ;
        CHECK(e == ETIMEDOUT, "pthread_cond_timedwait returned %d", e);
    }
    PT(pthread_mutex_unlock(&mtx));
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    while (atomic_load(&running)) {
        struct timespec t = {0, 700};
        while (nanosleep(&t, &t) != 0)
            CHECK(errno == EINTR, "nanosleep");
        PT(pthread_cond_signal(&cnd));
    }
    return NULL;
}

static void *sender(void *arg) {
    int which = (int)(long)arg;
    while (atomic_load(&running)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 5;
        int e;
        while ((e = sem_timedwait(&answered[which], &t)) != 0 && errno == EINTR)
            ;
        CHECK(e == 0, "round %d: the handler of a SIGUSR%d sent while its accepting thread ran "
                      "never answered (errno %d)",
              round_no, which + 1, errno);
        CHECK(kill(getpid(), which ? SIGUSR2 : SIGUSR1) == 0, "kill");
    }
    return NULL;
}

int main(void) {
    struct sigaction sa = {0};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_usr1;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    sa.sa_handler = on_usr2;
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
    sigemptyset(&usr);
    sigaddset(&usr, SIGUSR1);
    sigaddset(&usr, SIGUSR2);
    /* Inherited by every thread created; the waiter opens both for itself. */
    PT(pthread_sigmask(SIG_BLOCK, &usr, NULL));
    for (round_no = 0; round_no < ROUNDS; round_no++) {
        /* A signal sent after the last waiter ended stays pending for the process and goes to
         * this round's waiter: its answer is one more post, which is harmless. */
        for (int i = 0; i < 2; i++)
            CHECK(sem_init(&answered[i], 0, 1) == 0, "sem_init");
        atomic_store(&running, 1);
        pthread_t w, k, s[2];
        PT(pthread_create(&w, NULL, waiter, NULL));
        PT(pthread_create(&k, NULL, worker, NULL));
        for (int i = 0; i < 2; i++)
            PT(pthread_create(&s[i], NULL, sender, (void *)(long)i));
        struct timespec t = {0, ROUND_MS * 1000000L};
        while (nanosleep(&t, &t) != 0)
            ;
        atomic_store(&running, 0);
        for (int i = 0; i < 2; i++)
            PT(pthread_join(s[i], NULL));
        PT(pthread_join(k, NULL));
        PT(pthread_join(w, NULL));
    }
    CHECK(atomic_load(&handled) > ROUNDS, "only %ld signals handled", atomic_load(&handled));
    printf("ok: %ld signals handled in %d rounds\n", atomic_load(&handled), ROUNDS);
    return 0;
}
