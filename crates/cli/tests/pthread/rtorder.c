/* Real-time priorities order who runs (POSIX's priority scheduling, the Open POSIX Test
 * Suite's pthread_create/1-6), on one CPU and one virtual processor:
 * - a SCHED_FIFO thread of priority 10 creates one of priority 20: the new thread runs
 *   before pthread_create returns to its creator, and its sched_yield calls do not hand
 *   the processor back to the lower-priority creator;
 * - a thread of priority 20 waiting on a semaphore that one of priority 10 posts runs
 *   before sem_post returns.
 * Creating SCHED_FIFO threads needs the privilege to (root, or CAP_SYS_NICE) on glibc's
 * threads: without it the test says so and passes. */
#define _GNU_SOURCE
#include "check.h"
#include "rt.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <unistd.h>

static volatile int creator_went_on, high_yields, high_saw_creator, woken_ran;
static sem_t sem;

static void *high_yielder(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        if (creator_went_on)
            high_saw_creator = 1;
        sched_yield();
        high_yields++;
    }
    return NULL;
}

static void *high_waiter(void *arg) {
    (void)arg;
    while (sem_wait(&sem) != 0)
        CHECK(errno == EINTR, "sem_wait: errno %d", errno);
    woken_ran = 1;
    return NULL;
}

/* Priority 10. */
static void *low(void *arg) {
    (void)arg;
    pthread_t t;
    PT(fifo_thread(&t, 20, high_yielder, NULL));
    creator_went_on = 1;
    CHECK(high_yields == 1000 && !high_saw_creator,
          "the creator (priority 10) went on after %d of 1000 yields of its priority-20 thread",
          high_yields);
    PT(pthread_join(t, NULL));

    PT(fifo_thread(&t, 20, high_waiter, NULL));
    /* It waits now: it ran when it was created, and its wait is the only way it stops. */
    CHECK(!woken_ran, "the waiter ran past an empty semaphore");
    PT(sem_post(&sem));
    CHECK(woken_ran, "sem_post returned to the priority-10 poster before its priority-20 "
                     "waiter ran");
    PT(pthread_join(t, NULL));
    return NULL;
}

int main(void) {
    one_cpu_one_processor();
    PT(sem_init(&sem, 0, 0));
    return run_as_fifo(10, low, NULL);
}
