/* The initial thread (a kernel thread, outside the library's runtime) wakes many user
 * threads at once, round after round: 1,000 threads on 16 KiB stacks wait on one
 * condition variable, half of them with a deadline, and the initial thread broadcasts and
 * joins them all (the Open POSIX suite's pthread_cond_broadcast/1-2 shape). Every wake-up
 * goes through the runtime's injection queue while the processors take from it; a
 * processor that found a push half done there waited with `sched_yield`, which is the
 * library's, and switched away in the middle of its scheduling decision: the thread then
 * finished that decision on the other processor's kernel thread, two kernel threads ran
 * one processor, and the run ended in a hang, an abort or a stack overflow (issue 21;
 * 16 in 100 runs of 50 rounds before the fix). Run with a round count to loop longer. */
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#define N 1000

static pthread_mutex_t mtx;
static pthread_cond_t cnd;
static int waiting, predicate;

static void *waiter(void *arg) {
    (void)arg;
    PT(pthread_mutex_lock(&mtx));
    int timed = ++waiting & 1;
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_REALTIME, &ts) == 0, "clock_gettime");
    ts.tv_sec += 600;
    int r = 0;
    while (r == 0 && !predicate)
        r = timed ? pthread_cond_timedwait(&cnd, &mtx, &ts) : pthread_cond_wait(&cnd, &mtx);
    CHECK(r == 0, "the wait returned %d", r);
    PT(pthread_mutex_unlock(&mtx));
    return NULL;
}

int main(int argc, char **argv) {
    /* Not the harness's "expect-migration": a number here is a round count. */
    int rounds = argc > 1 ? atoi(argv[1]) : 0;
    if (rounds <= 0)
        rounds = 100;
    static pthread_t t[N];
    pthread_attr_t a;
    PT(pthread_attr_init(&a));
    PT(pthread_attr_setstacksize(&a, 16384));
    for (int round = 0; round < rounds; round++) {
        PT(pthread_mutex_init(&mtx, NULL));
        PT(pthread_cond_init(&cnd, NULL));
        waiting = 0;
        predicate = 0;
        for (int i = 0; i < N; i++)
            PT(pthread_create(&t[i], &a, waiter, NULL));
        PT(pthread_mutex_lock(&mtx));
        while (waiting < N) {
            PT(pthread_mutex_unlock(&mtx));
            sched_yield();
            PT(pthread_mutex_lock(&mtx));
        }
        predicate = 1;
        PT(pthread_cond_broadcast(&cnd));
        PT(pthread_mutex_unlock(&mtx));
        for (int i = 0; i < N; i++)
            PT(pthread_join(t[i], NULL));
        PT(pthread_cond_destroy(&cnd));
        PT(pthread_mutex_destroy(&mtx));
    }
    printf("ok\n");
    return 0;
}
