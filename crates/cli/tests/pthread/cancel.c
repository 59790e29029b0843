/* Deferred cancellation: acted on at pthread_testcancel and in sleep (cancellation points),
 * not before; the cleanup handlers run innermost first; the joiner gets PTHREAD_CANCELED.
 * Asynchronous cancellation of a thread blocked in a mutex lock: acted on at once.
 * Cancellation of a thread waiting on a process-shared condition variable (glibc's, under
 * the library), the canceller holding the mutex or not, in pthread_cond_wait and in
 * pthread_cond_timedwait: acted on, its handler runs holding the mutex. A joiner cancelled
 * in pthread_join leaves the thread joinable, also when the cancellation races the exit. */
#include "check.h"
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char order[2][8];
static int ran[2];
static volatile int started[2];

static void cleanup(void *arg) {
    long v = (long)arg;
    int which = (int)(v / 10);
    order[which][ran[which]++] = (char)('0' + v % 10);
}

static void *at_testcancel(void *arg) {
    (void)arg;
    pthread_cleanup_push(cleanup, (void *)1L);
    pthread_cleanup_push(cleanup, (void *)2L);
    started[0] = 1;
    for (;;)
        pthread_testcancel();
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return NULL;
}

static void *in_sleep(void *arg) {
    (void)arg;
    pthread_cleanup_push(cleanup, (void *)11L);
    pthread_cleanup_push(cleanup, (void *)12L);
    pthread_cleanup_push(cleanup, (void *)13L);
    started[1] = 1;
    sleep(100);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    pthread_cleanup_pop(0);
    return NULL;
}

static void *disabled(void *arg) {
    int old;
    PT(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old));
    while (!*(volatile int *)arg)
        usleep(1000);
    pthread_testcancel(); /* still disabled: not acted on */
    PT(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old));
    pthread_testcancel();
    return (void *)7L; /* not reached */
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static volatile int async_started, async_cleaned, async_got_lock;

static void async_cleanup(void *arg) {
    (void)arg;
    async_cleaned = 1;
}

/* Asynchronous cancellation while blocked in a mutex lock (not a cancellation point): the
 * thread acts at once, without the lock, its handler runs. */
static void *async_in_lock(void *arg) {
    (void)arg;
    PT(pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL));
    pthread_cleanup_push(async_cleanup, NULL);
    async_started = 1;
    pthread_mutex_lock(&held);
    async_got_lock = 1;
    pthread_cleanup_pop(0);
    return NULL;
}

static void *lock_once(void *arg) {
    (void)arg;
    PT(pthread_mutex_lock(&held));
    PT(pthread_mutex_unlock(&held));
    return arg;
}

static pthread_mutex_t sh_mutex;
static pthread_cond_t sh_cond;
static volatile int sh_started, sh_cleaned, sh_unlocked;

/* Runs on cancellation: the mutex must be held (an error-checking one unlocks only for its
 * owner). */
static void sh_cleanup(void *arg) {
    (void)arg;
    sh_unlocked = pthread_mutex_unlock(&sh_mutex) == 0;
    sh_cleaned = 1;
}

static void *sh_wait(void *timed) {
    PT(pthread_mutex_lock(&sh_mutex));
    pthread_cleanup_push(sh_cleanup, NULL);
    sh_started = 1;
    for (;;) {
        if (timed) {
            struct timespec at;
            clock_gettime(CLOCK_REALTIME, &at);
            at.tv_sec += 100;
            pthread_cond_timedwait(&sh_cond, &sh_mutex, &at);
        } else {
            pthread_cond_wait(&sh_cond, &sh_mutex);
        }
    }
    pthread_cleanup_pop(0);
    return NULL;
}

/* Cancels a thread waiting on the process-shared condition variable; `hold`: with the mutex
 * held across the cancel (as the Open POSIX tests do). */
static void shared_case(int timed, int hold) {
    pthread_t t;
    void *r;
    sh_started = sh_cleaned = sh_unlocked = 0;
    PT(pthread_create(&t, NULL, sh_wait, timed ? (void *)1L : NULL));
    while (!sh_started)
        usleep(100);
    PT(pthread_mutex_lock(&sh_mutex)); /* it waits now */
    if (!hold)
        PT(pthread_mutex_unlock(&sh_mutex));
    PT(pthread_cancel(t));
    if (hold)
        PT(pthread_mutex_unlock(&sh_mutex));
    for (int i = 0; i < 20000 && !sh_cleaned; i++)
        usleep(1000);
    CHECK(sh_cleaned, "a process-shared %s wait (mutex %s) was not cancelled within 20 s",
          timed ? "timed" : "condition", hold ? "held" : "free");
    PT(pthread_join(t, &r));
    CHECK(r == PTHREAD_CANCELED, "join of the process-shared waiter gave %p", r);
    CHECK(sh_unlocked, "the handler did not hold the mutex");
}

static void shared_cases(void) {
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    PT(pthread_mutexattr_init(&ma));
    PT(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED));
    PT(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK));
    PT(pthread_mutex_init(&sh_mutex, &ma));
    PT(pthread_condattr_init(&ca));
    PT(pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED));
    PT(pthread_cond_init(&sh_cond, &ca));
    for (int timed = 0; timed < 2; timed++)
        for (int hold = 0; hold < 2; hold++)
            shared_case(timed, hold);
}

/* A joiner cancelled while it waits in pthread_join (a cancellation point): its join
 * gives up its claim, so the thread it joined can be joined again. */
static volatile int joinee_go, joiner_started;
static void *joinee(void *arg) {
    while (!joinee_go)
        usleep(100);
    return arg;
}
static void *joiner(void *arg) {
    void *r;
    joiner_started = 1;
    pthread_join(*(pthread_t *)arg, &r);
    return NULL; /* not reached: cancelled in the join */
}
static void joiner_case(void) {
    pthread_t je, jr;
    void *r;
    PT(pthread_create(&je, NULL, joinee, (void *)&joinee_go));
    PT(pthread_create(&jr, NULL, joiner, &je));
    while (!joiner_started)
        usleep(100);
    usleep(10000); /* let it park in its join */
    PT(pthread_cancel(jr));
    PT(pthread_join(jr, &r));
    CHECK(r == PTHREAD_CANCELED, "a joiner cancelled in its join gave %p", r);
    joinee_go = 1;
    PT(pthread_join(je, &r));
    CHECK(r == (void *)&joinee_go, "the thread whose joiner was cancelled gave %p", r);
}

/* The same, racing: the cancellation lands before, during or after the join's wait, and
 * the joined thread ends at about the same moment. Either the joiner's join succeeded (and
 * got the value) or it was cancelled and the thread is joined again here. */
static void *quick(void *arg) {
    for (long i = 0; i < (long)arg; i++)
        sched_yield();
    return (void *)7;
}
static void *racing_joiner(void *arg) {
    void *r = NULL;
    int e = pthread_join(*(pthread_t *)arg, &r);
    return (void *)(long)(e == 0 && r == (void *)7 ? 1 : 2);
}
static void join_race(void) {
    for (int i = 0; i < 3000; i++) {
        pthread_t je, jr;
        void *r, *v;
        PT(pthread_create(&je, NULL, quick, (void *)(long)(i % 5)));
        PT(pthread_create(&jr, NULL, racing_joiner, &je));
        for (int k = 0; k < i % 4; k++)
            sched_yield();
        PT(pthread_cancel(jr));
        PT(pthread_join(jr, &r));
        if (r == PTHREAD_CANCELED) {
            PT(pthread_join(je, &v));
            CHECK(v == (void *)7, "round %d: the thread whose joiner was cancelled gave %p", i, v);
        } else {
            CHECK(r == (void *)1, "round %d: the joiner's join failed (%p)", i, r);
        }
    }
}

int main(void) {
    pthread_t a, b, c;
    void *r;
    PT(pthread_create(&a, NULL, at_testcancel, NULL));
    while (!started[0])
        usleep(100);
    PT(pthread_cancel(a));
    PT(pthread_join(a, &r));
    CHECK(r == PTHREAD_CANCELED, "join at testcancel gave %p", r);
    CHECK(ran[0] == 2 && memcmp(order[0], "21", 2) == 0, "handlers ran %d: %.2s", ran[0], order[0]);

    PT(pthread_create(&b, NULL, in_sleep, NULL));
    while (!started[1])
        usleep(100);
    usleep(10000); /* let it reach its sleep */
    PT(pthread_cancel(b));
    PT(pthread_join(b, &r));
    CHECK(r == PTHREAD_CANCELED, "join in sleep gave %p", r);
    CHECK(ran[1] == 3 && memcmp(order[1], "321", 3) == 0, "handlers ran %d: %.3s", ran[1], order[1]);

    volatile int go = 0;
    PT(pthread_create(&c, NULL, disabled, (void *)&go));
    PT(pthread_cancel(c));
    usleep(10000);
    go = 1;
    PT(pthread_join(c, &r));
    CHECK(r == PTHREAD_CANCELED, "a cancel pending while disabled gave %p", r);

    pthread_t d, e;
    PT(pthread_mutex_lock(&held));
    PT(pthread_create(&d, NULL, async_in_lock, NULL));
    while (!async_started)
        usleep(100);
    usleep(10000); /* let it block in the lock */
    PT(pthread_cancel(d));
    PT(pthread_join(d, &r)); /* while the mutex is still held: the lock was not what ended */
    CHECK(r == PTHREAD_CANCELED, "asynchronous cancel in a mutex lock gave %p", r);
    CHECK(async_cleaned && !async_got_lock, "cleaned %d, got the lock %d", async_cleaned, async_got_lock);
    PT(pthread_mutex_unlock(&held));
    PT(pthread_create(&e, NULL, lock_once, &held)); /* the mutex's queue is whole */
    PT(pthread_join(e, &r));
    CHECK(r == &held, "lock after the cancelled waiter gave %p", r);
    shared_cases();
    joiner_case();
    join_race();
    printf("ok\n");
    return 0;
}
