/* Real-time scheduling changed while threads run or wait, and SCHED_FIFO among equals
 * (POSIX XSH 2.8.4), on one CPU and one virtual processor. A SCHED_FIFO thread of
 * priority 10 (the driver) checks, by what the other threads record:
 * 1. pthread_setschedparam raising a waiting thread from 5 to 20 runs it before the call
 *    returns;
 * 2. the driver raising itself (to 15) goes on ahead of a waiting thread of 10, and
 *    lowering itself back to 10 makes it the head of that list (POSIX since 2008, Linux
 *    since 3.15): it still goes on; its sched_yield then passes the processor to it;
 * 3. the driver lowering itself (pthread_setschedprio to 5) below a waiting thread of 8
 *    runs that thread before the call returns;
 * 4. a waiting thread of its own priority does not run while the driver computes for
 *    100 ms (ten of the library's quanta): SCHED_FIFO keeps the processor;
 * 5. the driver moving itself to SCHED_OTHER runs a waiting SCHED_FIFO thread of 1 before
 *    the call returns.
 * Creating SCHED_FIFO threads needs the privilege to (root, or CAP_SYS_NICE) on glibc's
 * threads: without it the test says so and passes. */
#define _GNU_SOURCE
#include "check.h"
#include "rt.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

static volatile int ran[6];

static void *mark(void *arg) {
    ran[(long)arg] = 1;
    return NULL;
}

/* SCHED_FIFO, priority 10. */
static void *driver(void *arg) {
    (void)arg;
    pthread_t t;
    struct sched_param sp;

    PT(fifo_thread(&t, 5, mark, (void *)1));
    CHECK(!ran[1], "a thread of 5 ran before its creator (10) waited");
    sp.sched_priority = 20;
    PT(pthread_setschedparam(t, SCHED_FIFO, &sp));
    CHECK(ran[1], "pthread_setschedparam raised a waiting thread from 5 to 20, above its "
                  "caller (10), and returned before it ran");
    PT(pthread_join(t, NULL));

    PT(fifo_thread(&t, 10, mark, (void *)2));
    CHECK(!ran[2], "a thread of 10 ran before its creator (10) waited");
    PT(pthread_setschedprio(pthread_self(), 15));
    CHECK(!ran[2], "raised from 10 to 15, the caller passed its processor to a thread of 10");
    PT(pthread_setschedprio(pthread_self(), 10));
    CHECK(!ran[2], "lowered from 15 to 10, the caller went behind the thread of 10 that "
                   "waited (POSIX: it becomes the head of its new priority's list)");
    sched_yield();
    CHECK(ran[2], "sched_yield kept the processor from a waiting thread of equal priority");
    PT(pthread_join(t, NULL));

    PT(fifo_thread(&t, 8, mark, (void *)3));
    PT(pthread_setschedprio(pthread_self(), 5));
    CHECK(ran[3], "lowered from 10 to 5, the caller went on before the waiting thread of 8");
    PT(pthread_join(t, NULL));
    PT(pthread_setschedprio(pthread_self(), 10));

    PT(fifo_thread(&t, 10, mark, (void *)4));
    for (double end = now() + 0.1; now() < end && !ran[4];)
        ;
    CHECK(!ran[4], "a thread of the SCHED_FIFO caller's own priority ran while the caller "
                   "computed (a quantum passed the processor to it)");
    PT(pthread_join(t, NULL));

    PT(fifo_thread(&t, 1, mark, (void *)5));
    sp.sched_priority = 0;
    PT(pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp));
    CHECK(ran[5], "moved to SCHED_OTHER, the caller went on before a waiting SCHED_FIFO "
                  "thread");
    PT(pthread_join(t, NULL));
    return NULL;
}

int main(void) {
    one_cpu_one_processor();
    return run_as_fifo(10, driver, (void *)0);
}
