/* A thread's CPU-time clock is its own: CLOCK_THREAD_CPUTIME_ID, the clock
 * pthread_getcpuclockid gives (read by another thread), and getrusage(RUSAGE_THREAD).
 *
 * 1. Four threads on two processors spin briefly and yield (so they move between kernel
 *    threads under the library): each one's clock never goes back.
 * 2. On one CPU and one virtual processor, two threads alternately spin and yield, a
 *    spinning 0.5 ms of CPU a round and b 2 ms: each one's clock advances by its own
 *    spinning (measured with that same clock across each spin, where nothing else runs)
 *    and never by the other's, which would make a's advance 5 times its spinning and b's
 *    1.25. Each reads the other's clock (pthread_getcpuclockid) every round: it never
 *    goes back; the main thread reads both at the end, with getrusage's figures beside.
 *    Bounds are ratios with generous slack, never absolute times.
 *
 * Under the library before per-thread accounting, every user thread read its kernel
 * thread's clock (which counts the other's spinning and jumps between kernel threads) and
 * pthread_getcpuclockid of another user thread failed with ENOENT. */
#define _GNU_SOURCE
#include "check.h"
#include "rt.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int64_t ns_of(clockid_t c) {
    struct timespec ts;
    CHECK(clock_gettime(c, &ts) == 0, "clock_gettime(%d): errno %d", (int)c, errno);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t self_ns(void) {
    return ns_of(CLOCK_THREAD_CPUTIME_ID);
}

/* Spins until the calling thread's own clock advanced `ns`; nothing else runs on its
 * processor meanwhile in part 2 (no preemption within 10 ms); returns the advance. */
static int64_t spin_ns(int64_t ns) {
    int64_t a = self_ns(), d;
    volatile uint64_t x = 0;
    do {
        x++;
        d = self_ns() - a;
    } while (d < ns);
    return d;
}

/* Part 1. */
static void *wander(void *arg) {
    (void)arg;
    int64_t last = self_ns();
    for (int i = 0; i < 300; i++) {
        int64_t until = (int64_t)(now() * 1e9) + 30000;
        volatile uint64_t x = 0;
        while ((int64_t)(now() * 1e9) < until)
            x++;
        sched_yield();
        int64_t t = self_ns();
        CHECK(t >= last, "a thread's clock went back from %lld to %lld ns", (long long)last,
              (long long)t);
        last = t;
    }
    return NULL;
}

/* Part 2. */
enum { ROUNDS = 40 };
static pthread_barrier_t start, done, leave;
static clockid_t clock_of[2];
static int64_t per_round[2] = {500000, 2000000};
static int64_t mine[2], advance[2], own_final[2];

static void *pair(void *arg) {
    int me = (int)(intptr_t)arg, other = 1 - me;
    pthread_barrier_wait(&start);
    int64_t first = self_ns(), seen = 0;
    for (int i = 0; i < ROUNDS; i++) {
        mine[me] += spin_ns(per_round[me]);
        sched_yield();
        int64_t o = ns_of(clock_of[other]);
        CHECK(o >= seen, "thread %d's clock read from the other went back from %lld to %lld",
              other, (long long)seen, (long long)o);
        seen = o;
    }
    int64_t last = self_ns();
    advance[me] = last - first;
    /* getrusage agrees with the clock (within its microseconds and the calls' own time). */
    struct rusage ru;
    CHECK(getrusage(RUSAGE_THREAD, &ru) == 0, "getrusage: errno %d", errno);
    int64_t after = self_ns();
    int64_t ru_ns = ((int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                     ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) *
                    1000;
    CHECK(ru_ns >= last - 1000000 && ru_ns <= after + 1000000,
          "thread %d: getrusage says %lld ns between clock readings %lld and %lld", me,
          (long long)ru_ns, (long long)last, (long long)after);
    own_final[me] = self_ns();
    pthread_barrier_wait(&done);
    pthread_barrier_wait(&leave);
    return NULL;
}

int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        PT(pthread_create(&t[i], NULL, wander, NULL));
    for (int i = 0; i < 4; i++)
        PT(pthread_join(t[i], NULL));

    one_cpu_one_processor();
    PT(pthread_barrier_init(&start, NULL, 3));
    PT(pthread_barrier_init(&done, NULL, 3));
    PT(pthread_barrier_init(&leave, NULL, 3));
    for (int i = 0; i < 2; i++) {
        PT(pthread_create(&t[i], NULL, pair, (void *)(intptr_t)i));
        PT(pthread_getcpuclockid(t[i], &clock_of[i]));
        struct timespec res;
        CHECK(clock_getres(clock_of[i], &res) == 0, "clock_getres: errno %d", errno);
        CHECK(res.tv_sec == 0 && res.tv_nsec > 0 && res.tv_nsec <= 1000000, "resolution %ld ns",
              res.tv_nsec);
    }
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&done);
    for (int i = 0; i < 2; i++) {
        double r = (double)advance[i] / (double)mine[i];
        CHECK(r >= 0.95 && r < 1.2,
              "thread %d's clock advanced %lld ns over %lld ns of its own spinning (%.2f times)", i,
              (long long)advance[i], (long long)mine[i], r);
        /* Read here, from another thread, while it waits: what it last saw of itself, and
         * not much more. */
        int64_t seen = ns_of(clock_of[i]);
        CHECK(seen >= own_final[i] && (double)seen < 1.2 * (double)own_final[i],
              "thread %d's clock read by main says %lld ns, the thread itself %lld", i,
              (long long)seen, (long long)own_final[i]);
    }
    pthread_barrier_wait(&leave);
    for (int i = 0; i < 2; i++)
        PT(pthread_join(t[i], NULL));
    printf("ok\n");
    return 0;
}
