/* Priority inheritance along a chain of PI mutexes, and a kernel thread as a holder, on one
 * CPU and one virtual processor, by the order the threads record their steps (never by
 * timing):
 * 1. A raise that comes while the holder itself waits is passed down the chain: L1
 *    (SCHED_FIFO 10) holds A; L2 (20) holds B and waits on A; M (30) starts, and H (50)
 *    waits on B. H's 50 reaches L1 through L2, so L1 runs before M, unlocks A, and L2, then
 *    H, get their mutexes before M ends. Without it M computes for good (a hang guard of
 *    seconds ends it) while the three wait. L1 raised still reads its own policy and
 *    priority with pthread_getschedparam (Linux does not show a PI boost there), and so
 *    does a holder of a PP mutex.
 * 2. The loan is taken back along the chain: the same chain with H's lock timed; when its
 *    deadline passes, L1 drops back to 20 (L2's loan), so a thread of 30 it created
 *    meanwhile runs before L1 goes on.
 * 3. Under the library only: a PI error-checking mutex whose holder waits, through the
 *    chain, for the caller answers EDEADLK (glibc's own stops on an assertion there).
 * 4. The program's initial thread (a kernel thread, SCHED_OTHER) holding a PI mutex that
 *    a thread of 50 waits on is raised: a thread of 30 that computes does not run while it
 *    computes, and it reads its own policy (SCHED_OTHER) meanwhile. Needs the privilege to
 *    make a thread SCHED_FIFO (root, or CAP_SYS_NICE): without it that part says so.
 * Creating SCHED_FIFO threads needs that privilege on glibc's threads: without it the test
 * says so and passes. */
#define _GNU_SOURCE
#include "check.h"
#include "rt.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { L1_LOCKED = 1, L2_WAITS, M_STARTED, H_WAITS, L1_UNLOCKS, L2_LOCKED, H_LOCKED, M_ENDED,
       H_TIMED_OUT, M2_RAN, L1_WENT_ON };
static const char *names[] = { "?", "L1 locked A", "L2 waits on A", "M started",
                               "H waits on B", "L1 unlocks A", "L2 locked A", "H locked B",
                               "M ended", "H timed out", "M2 ran", "L1 went on" };
static int events[64], nevents;
static pthread_mutex_t a, b, pp, x, y, k;
static volatile int h_done, m_gave_up, h_timed_out, h_timedlock, under_library;
static volatile int k_started, k_done;
static volatile long k_count;

static void record(int e) {
    int i = __atomic_fetch_add(&nevents, 1, __ATOMIC_SEQ_CST);
    if (i < 64)
        events[i] = e;
}

static void expect(const int *want, int n, int from, const char *what) {
    int same = nevents >= from + n;
    for (int i = 0; same && i < n; i++)
        same = events[from + i] == want[i];
    if (same)
        return;
    fprintf(stderr, "%s: the steps ran in this order:", what);
    for (int i = from; i < nevents && i < 64; i++)
        fprintf(stderr, " [%s]", names[events[i]]);
    fprintf(stderr, "\nexpected:");
    for (int i = 0; i < n; i++)
        fprintf(stderr, " [%s]", names[want[i]]);
    fprintf(stderr, "\n");
    exit(1);
}

static void own_sched(int want_policy, int want_prio, const char *what) {
    int policy;
    struct sched_param sp;
    PT(pthread_getschedparam(pthread_self(), &policy, &sp));
    CHECK(policy == want_policy && sp.sched_priority == want_prio,
          "%s: pthread_getschedparam reports policy %d priority %d, not its own (%d, %d)", what,
          policy, sp.sched_priority, want_policy, want_prio);
}

/* Priority 20: holds B, waits on A. */
static void *l2(void *arg) {
    (void)arg;
    PT(pthread_mutex_lock(&b));
    record(L2_WAITS);
    PT(pthread_mutex_lock(&a));
    record(L2_LOCKED);
    PT(pthread_mutex_unlock(&a));
    PT(pthread_mutex_unlock(&b));
    return NULL;
}

/* Priority 50. */
static void *high(void *arg) {
    (void)arg;
    record(H_WAITS);
    PT(pthread_mutex_lock(&b));
    record(H_LOCKED);
    h_done = 1;
    PT(pthread_mutex_unlock(&b));
    return NULL;
}

/* Priority 30: computes until H has had B (a hang guard ends it otherwise). */
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

/* Priority 50: waits 200 ms for B. */
static void *high_timed(void *arg) {
    (void)arg;
    struct timespec at = realtime_after_ms(200);
    h_timedlock = pthread_mutex_timedlock(&b, &at);
    record(H_TIMED_OUT);
    h_timed_out = 1;
    return NULL;
}

static void *medium2(void *arg) {
    record(M2_RAN);
    return arg;
}

/* Priority 20: holds Y, waits on X. */
static void *cycle(void *arg) {
    (void)arg;
    PT(pthread_mutex_lock(&y));
    PT(pthread_mutex_lock(&x));
    PT(pthread_mutex_unlock(&x));
    PT(pthread_mutex_unlock(&y));
    return NULL;
}

/* Priority 10. */
static void *l1(void *arg) {
    (void)arg;
    pthread_t t2, m, h;

    PT(pthread_mutex_lock(&a));
    record(L1_LOCKED);
    PT(fifo_thread(&t2, 20, l2, NULL));
    PT(fifo_thread(&m, 30, medium, NULL));
    /* Here only once H's loan, passed through L2, let L1 run before M. */
    own_sched(SCHED_FIFO, 10, "L1 lent 50 through a PI chain");
    record(L1_UNLOCKS);
    PT(pthread_mutex_unlock(&a));
    PT(pthread_join(m, NULL));
    PT(pthread_join(t2, NULL));
    int chain_steps[] = { L1_LOCKED, L2_WAITS, M_STARTED, H_WAITS, L1_UNLOCKS, L2_LOCKED,
                          H_LOCKED, M_ENDED };
    expect(chain_steps, 8, 0, "a raise passed down a chain of PI mutexes");
    CHECK(!m_gave_up, "M gave up");

    PT(pthread_mutex_lock(&pp));
    own_sched(SCHED_FIFO, 10, "L1 raised to a PP mutex's ceiling of 50");
    PT(pthread_mutex_unlock(&pp));

    int from = nevents;
    PT(pthread_mutex_lock(&a));
    PT(fifo_thread(&t2, 20, l2, NULL));
    PT(fifo_thread(&h, 50, high_timed, NULL));
    /* H waits on B (it ran when it was created): L1 runs at 50, so M2 waits. */
    PT(fifo_thread(&m, 30, medium2, NULL));
    while (!h_timed_out)
        sched_yield(); /* to H once its deadline has passed (both at 50) */
    record(L1_WENT_ON);
    PT(pthread_mutex_unlock(&a));
    PT(pthread_join(h, NULL));
    PT(pthread_join(m, NULL));
    PT(pthread_join(t2, NULL));
    CHECK(h_timedlock == ETIMEDOUT, "pthread_mutex_timedlock returned %d", h_timedlock);
    int timed_steps[] = { L2_WAITS, H_TIMED_OUT, M2_RAN, L1_WENT_ON, L2_LOCKED };
    expect(timed_steps, 5, from, "a loan taken back along a chain of PI mutexes");

    if (under_library) {
        PT(pthread_mutex_lock(&x));
        PT(fifo_thread(&t2, 20, cycle, NULL)); /* holds Y, waits on X */
        int e = pthread_mutex_lock(&y);
        CHECK(e == EDEADLK, "locking Y, whose holder waits for X that the caller holds: %d, "
                            "not EDEADLK", e);
        PT(pthread_mutex_unlock(&x));
        PT(pthread_join(t2, NULL));
    }
    return NULL;
}

/* Priority 30: counts until the initial thread is done. */
static void *counter(void *arg) {
    (void)arg;
    k_started = 1;
    while (!k_done)
        k_count++;
    return NULL;
}

/* Priority 50: creates the counter, then waits on K, which the initial thread holds. */
static void *high_k(void *arg) {
    pthread_t *c = arg;
    PT(fifo_thread(c, 30, counter, NULL));
    PT(pthread_mutex_lock(&k));
    PT(pthread_mutex_unlock(&k));
    return NULL;
}

static void init(pthread_mutex_t *m, int protocol, int type, int ceiling) {
    pthread_mutexattr_t at;
    PT(pthread_mutexattr_init(&at));
    PT(pthread_mutexattr_setprotocol(&at, protocol));
    PT(pthread_mutexattr_settype(&at, type));
    if (ceiling)
        PT(pthread_mutexattr_setprioceiling(&at, ceiling));
    PT(pthread_mutex_init(m, &at));
    PT(pthread_mutexattr_destroy(&at));
}

int main(int argc, char **argv) {
    under_library = argc > 1 && strcmp(argv[1], "expect-migration") == 0;
    one_cpu_one_processor();
    init(&a, PTHREAD_PRIO_INHERIT, PTHREAD_MUTEX_NORMAL, 0);
    init(&b, PTHREAD_PRIO_INHERIT, PTHREAD_MUTEX_NORMAL, 0);
    init(&pp, PTHREAD_PRIO_PROTECT, PTHREAD_MUTEX_NORMAL, 50);
    init(&x, PTHREAD_PRIO_INHERIT, PTHREAD_MUTEX_ERRORCHECK, 0);
    init(&y, PTHREAD_PRIO_INHERIT, PTHREAD_MUTEX_ERRORCHECK, 0);
    init(&k, PTHREAD_PRIO_INHERIT, PTHREAD_MUTEX_NORMAL, 0);

    pthread_t t;
    int e = fifo_thread(&t, 10, l1, NULL);
    if (e == EPERM) {
        printf("ok (skipped: no privilege to create SCHED_FIFO threads)\n");
        return 0;
    }
    CHECK(e == 0, "pthread_create returned %d", e);
    PT(pthread_join(t, NULL));

    /* 4: the initial thread as the holder. */
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
        printf("ok (the initial thread's raise not checked: no privilege to make it "
               "SCHED_FIFO)\n");
        return 0;
    }
    sp.sched_priority = 0;
    CHECK(sched_setscheduler(0, SCHED_OTHER, &sp) == 0, "sched_setscheduler: errno %d", errno);
    pthread_t h, c;
    PT(pthread_mutex_lock(&k));
    PT(fifo_thread(&h, 50, high_k, &c));
    /* The counter (30) starts once H (50) waits on K. */
    while (!k_started)
        usleep(1000);
    own_sched(SCHED_OTHER, 0, "the initial thread lent 50");
    long before = k_count;
    for (double end = now() + 0.05; now() < end;)
        ;
    long after = k_count;
    k_done = 1;
    PT(pthread_mutex_unlock(&k));
    PT(pthread_join(h, NULL));
    PT(pthread_join(c, NULL));
    CHECK(after == before, "a thread of 30 ran (counted %ld) while the initial thread, lent 50 "
                           "by a waiter of its PI mutex, computed",
          after - before);
    printf("ok\n");
    return 0;
}
