/* What the C tests that need a thread to change kernel threads share: the caller's kernel
 * thread, a loop that yields until the caller runs on another one, and yielders that keep
 * the other kernel threads busy (so the runtime has somewhere else to put the caller).
 * Under glibc's threads nothing ever moves: the loop gives up and the test says so. */
#ifndef SCHEDLAB_MOVES_H
#define SCHEDLAB_MOVES_H
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The kernel thread the caller runs on now. */
static inline pid_t kernel_tid(void) {
    return (pid_t)syscall(SYS_gettid);
}

/* Yields (every eighth turn sleeping 100 us) until the caller runs on another kernel
 * thread than `from`, for at most 2,000 turns or 100 ms (a loaded machine makes each turn
 * slow); whether it moved. Async-signal-safe: handlers call it. */
static inline int yield_until_moved(pid_t from) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 2000 && kernel_tid() == from; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) > 100000000L)
            break;
        if (i % 8 == 7)
            usleep(100);
        else
            sched_yield();
    }
    return kernel_tid() != from;
}

static atomic_int yielders_stop;

/* A thread body that yields until `stop_yielders`. */
static inline void *yield_until_stopped(void *arg) {
    (void)arg;
    while (!atomic_load(&yielders_stop))
        sched_yield();
    return NULL;
}

static inline void stop_yielders(void) {
    atomic_store(&yielders_stop, 1);
}

#endif
