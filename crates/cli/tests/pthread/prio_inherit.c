/* The mutexes' priority protocols end priority inversion, on one CPU and one virtual
 * processor, by the order the threads record their steps (never by timing):
 * - PTHREAD_PRIO_INHERIT: L (SCHED_FIFO 10) locks a PI mutex and creates M (30), which
 *   runs at once and creates H (50), which runs at once and blocks on the mutex. M then
 *   computes until H got the mutex. With inheritance H lends L 50: L runs before M, unlocks,
 *   drops back to 10 and H runs, then M ends. Without it M computes for good (a hang guard
 *   of seconds ends it) while L and H wait: unbounded priority inversion.
 * - PTHREAD_PRIO_PROTECT: L locks a mutex of ceiling 50 and runs at 50 while it holds it: a
 *   thread of 30 it creates runs only once L unlocks. H (50) locking a mutex of ceiling 20
 *   gets EINVAL (POSIX: the caller's priority is above the ceiling).
 * - A loan ends with its waiter: H (50) waits on L's PI mutex with a deadline, so L (10)
 *   runs at 50 and a thread of 30 it creates meanwhile waits; when H's wait times out, L
 *   drops back to 10 and that thread runs before L goes on.
 * Creating SCHED_FIFO threads needs the privilege to (root, or CAP_SYS_NICE) on glibc's
 * threads: without it the test says so and passes. */
#define _GNU_SOURCE
#include "check.h"
#include "rt.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { L_LOCKED = 1, M_STARTED, H_WAITS, L_UNLOCKS, H_LOCKED, M_ENDED,
       PP_LOCKED, PP_CREATED, M2_RAN, PP_UNLOCKED, H_TIMED_OUT, L_WENT_ON };
static const char *names[] = { "?", "L locked", "M started", "H waits", "L unlocks",
                               "H locked", "M ended", "L locked PP", "L created M2",
                               "M2 ran", "L unlocked PP", "H timed out", "L went on" };
static int events[32], nevents;
static pthread_mutex_t pi, pp50, pp20;
static volatile int h_done, m_gave_up, h_pp20, h_timed_out, h_timedlock;

static void record(int e) {
    int i = __atomic_fetch_add(&nevents, 1, __ATOMIC_SEQ_CST);
    if (i < 32)
        events[i] = e;
}

static void expect(const int *want, int n, int from, const char *what) {
    int same = nevents >= from + n;
    for (int i = 0; same && i < n; i++)
        same = events[from + i] == want[i];
    if (same)
        return;
    fprintf(stderr, "%s: the steps ran in this order:", what);
    for (int i = from; i < nevents && i < 32; i++)
        fprintf(stderr, " [%s]", names[events[i]]);
    fprintf(stderr, "\nexpected:");
    for (int i = 0; i < n; i++)
        fprintf(stderr, " [%s]", names[want[i]]);
    fprintf(stderr, "\n");
    exit(1);
}

/* Priority 50. */
static void *high(void *arg) {
    (void)arg;
    record(H_WAITS);
    PT(pthread_mutex_lock(&pi));
    record(H_LOCKED);
    h_done = 1;
    PT(pthread_mutex_unlock(&pi));
    h_pp20 = pthread_mutex_lock(&pp20);
    return NULL;
}

/* Priority 30: computes until H has had the mutex (a hang guard ends it otherwise). */
static void *medium(void *arg) {
    (void)arg;
    pthread_t h;
    record(M_STARTED);
    PT(fifo_thread(&h, 50, high, NULL));
    m_gave_up = compute_until(&h_done, 5);
    record(M_ENDED);
    PT(pthread_join(h, NULL));
    return NULL;
}

/* Priority 50: waits 200 ms for the PI mutex L holds. */
static void *high_timed(void *arg) {
    (void)arg;
    struct timespec at = realtime_after_ms(200);
    h_timedlock = pthread_mutex_timedlock(&pi, &at);
    record(H_TIMED_OUT);
    h_timed_out = 1;
    return NULL;
}

static void *medium2(void *arg) {
    record(M2_RAN);
    return arg;
}

/* Priority 10. */
static void *low(void *arg) {
    (void)arg;
    pthread_t m;
    PT(pthread_mutex_lock(&pi));
    record(L_LOCKED);
    PT(fifo_thread(&m, 30, medium, NULL));
    /* Here only once H's loan let L run before M. */
    record(L_UNLOCKS);
    PT(pthread_mutex_unlock(&pi));
    PT(pthread_join(m, NULL));
    int pi_steps[] = { L_LOCKED, M_STARTED, H_WAITS, L_UNLOCKS, H_LOCKED, M_ENDED };
    expect(pi_steps, 6, 0, "PTHREAD_PRIO_INHERIT");
    CHECK(!m_gave_up, "M gave up");
    CHECK(h_pp20 == EINVAL, "a priority-50 thread locking a mutex of ceiling 20: %d, not EINVAL",
          h_pp20);

    int from = nevents;
    PT(pthread_mutex_lock(&pp50));
    record(PP_LOCKED);
    PT(fifo_thread(&m, 30, medium2, NULL));
    record(PP_CREATED);
    PT(pthread_mutex_unlock(&pp50));
    record(PP_UNLOCKED);
    PT(pthread_join(m, NULL));
    int pp_steps[] = { PP_LOCKED, PP_CREATED, M2_RAN, PP_UNLOCKED };
    expect(pp_steps, 4, from, "PTHREAD_PRIO_PROTECT");

    from = nevents;
    pthread_t h;
    PT(pthread_mutex_lock(&pi));
    PT(fifo_thread(&h, 50, high_timed, NULL));
    /* H waits now (it ran when it was created): L runs at 50, so M2 waits. */
    PT(fifo_thread(&m, 30, medium2, NULL));
    while (!h_timed_out)
        sched_yield(); /* to H once its deadline has passed (both at 50) */
    record(L_WENT_ON);
    PT(pthread_mutex_unlock(&pi));
    PT(pthread_join(h, NULL));
    PT(pthread_join(m, NULL));
    CHECK(h_timedlock == ETIMEDOUT, "pthread_mutex_timedlock returned %d", h_timedlock);
    int timed_steps[] = { H_TIMED_OUT, M2_RAN, L_WENT_ON };
    expect(timed_steps, 3, from, "a loan ends with its waiter");
    return NULL;
}

static void init(pthread_mutex_t *m, int protocol, int ceiling) {
    pthread_mutexattr_t a;
    PT(pthread_mutexattr_init(&a));
    PT(pthread_mutexattr_setprotocol(&a, protocol));
    if (ceiling)
        PT(pthread_mutexattr_setprioceiling(&a, ceiling));
    PT(pthread_mutex_init(m, &a));
    PT(pthread_mutexattr_destroy(&a));
}

int main(void) {
    one_cpu_one_processor();
    init(&pi, PTHREAD_PRIO_INHERIT, 0);
    init(&pp50, PTHREAD_PRIO_PROTECT, 50);
    init(&pp20, PTHREAD_PRIO_PROTECT, 20);
    return run_as_fifo(10, low, NULL);
}
