/* A real-time priority changed while the thread runs on another processor takes effect at
 * once (POSIX XSH 2.8.4; Linux reschedules the thread's CPU), on two CPUs (under the
 * library, two virtual processors): a SCHED_FIFO driver of 30 keeps one computing, a
 * thread of 20 computes on the other, and a thread of 10 waits for either. The driver
 * lowers the computing thread to 5 with pthread_setschedprio: the waiting thread of 10 now
 * ranks above it and must take its processor while the driver computes on (a hang guard of
 * seconds ends the wait). Before, the lowered thread kept its processor until its next
 * switch, which a computing SCHED_FIFO thread never makes.
 * Creating SCHED_FIFO threads needs the privilege to (root, or CAP_SYS_NICE) on glibc's
 * threads, and the test needs two CPUs: without either it says so and passes. */
#define _GNU_SOURCE
#include "check.h"
#include "rt.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

static volatile int t_running, stop, w_ran;

/* Priority 20, then 5: computes until told to stop. */
static void *computing(void *arg) {
    (void)arg;
    t_running = 1;
    while (!stop)
        ;
    return NULL;
}

/* Priority 10. */
static void *waiting(void *arg) {
    (void)arg;
    w_ran = 1;
    return NULL;
}

/* Priority 30. */
static void *driver(void *arg) {
    (void)arg;
    pthread_t t, w;
    PT(fifo_thread(&t, 20, computing, NULL));
    double give_up = now() + 5;
    while (!t_running && now() < give_up)
        ;
    CHECK(t_running, "a thread of 20 did not start on the second processor in 5 s");
    PT(fifo_thread(&w, 10, waiting, NULL));
    CHECK(!w_ran, "a thread of 10 ran while threads of 30 and 20 computed on both processors");
    PT(pthread_setschedprio(t, 5));
    give_up = now() + 5;
    while (!w_ran && now() < give_up)
        ;
    int ran = w_ran;
    stop = 1;
    PT(pthread_join(t, NULL));
    PT(pthread_join(w, NULL));
    CHECK(ran, "lowered to 5 while it computed on another processor, a thread kept that "
               "processor from a waiting thread of 10 (5 s)");
    return NULL;
}

int main(void) {
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity: errno %d", errno);
    if (CPU_COUNT(&set) < 2) {
        printf("ok (skipped: one CPU)\n");
        return 0;
    }
    /* Two CPUs exactly: a third would run the waiting thread at once. */
    cpu_set_t two;
    CPU_ZERO(&two);
    for (int cpu = 0, n = 0; n < 2; cpu++)
        if (CPU_ISSET(cpu, &set)) {
            CPU_SET(cpu, &two);
            n++;
        }
    CHECK(sched_setaffinity(0, sizeof two, &two) == 0, "sched_setaffinity: errno %d", errno);
    return run_as_fifo(30, driver, NULL);
}
