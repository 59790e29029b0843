/* What the real-time C tests (rtorder.c, rtchange.c, prio_inherit.c) share: SCHED_FIFO
 * threads, one CPU with one virtual processor, and a monotonic clock in seconds. Include
 * after check.h, with _GNU_SOURCE defined. */
#ifndef SCHEDLAB_RT_H
#define SCHEDLAB_RT_H
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

/* Creates a SCHED_FIFO thread of priority `prio` running f(arg); the error number
 * (EPERM without the privilege, on glibc's threads). */
static inline int fifo_thread(pthread_t *t, int prio, void *(*f)(void *), void *arg) {
    pthread_attr_t a;
    struct sched_param sp = {.sched_priority = prio};
    PT(pthread_attr_init(&a));
    PT(pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED));
    PT(pthread_attr_setschedpolicy(&a, SCHED_FIFO));
    PT(pthread_attr_setschedparam(&a, &sp));
    int e = pthread_create(t, &a, f, arg);
    PT(pthread_attr_destroy(&a));
    return e;
}

static inline void *rt_nothing(void *arg) {
    return arg;
}

/* Pins the process to the CPU it is on and, under the library (`schedlab exec
 * --processors 2` gives two), leaves one virtual processor: set once a first thread has
 * started the runtime, and given a moment to retire the other (a hint on glibc's
 * threads). */
static inline void one_cpu_one_processor(void) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity: errno %d", errno);
    pthread_t t;
    PT(pthread_create(&t, NULL, rt_nothing, NULL));
    PT(pthread_join(t, NULL));
    PT(pthread_setconcurrency(1));
    usleep(50000);
}

/* The test's body: runs f(arg) in a SCHED_FIFO thread of priority `prio` and joins it,
 * then prints "ok"; without the privilege to create one (glibc's threads, not root) says
 * so and passes. main's exit status. */
static inline int run_as_fifo(int prio, void *(*f)(void *), void *arg) {
    pthread_t t;
    int e = fifo_thread(&t, prio, f, arg);
    if (e == EPERM) {
        printf("ok (skipped: no privilege to create SCHED_FIFO threads)\n");
        return 0;
    }
    CHECK(e == 0, "pthread_create returned %d", e);
    PT(pthread_join(t, NULL));
    printf("ok\n");
    return 0;
}

/* CLOCK_MONOTONIC in seconds. */
static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The CLOCK_REALTIME instant `ms` milliseconds from now: a timed lock's deadline. */
static inline struct timespec realtime_after_ms(long ms) {
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += ms / 1000;
    at.tv_nsec += (ms % 1000) * 1000 * 1000;
    if (at.tv_nsec >= 1000000000) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000;
    }
    return at;
}

/* Computes (spins) until *done is set or `secs` have passed (a hang guard); whether it gave
 * up. */
static inline int compute_until(volatile int *done, double secs) {
    double give_up = now() + secs;
    while (!*done)
        if (now() > give_up)
            return 1;
    return 0;
}
#endif
