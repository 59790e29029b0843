/* Deferred cancellation: acted on at pthread_testcancel and in sleep (cancellation points),
 * not before; the cleanup handlers run innermost first; the joiner gets PTHREAD_CANCELED.
 * Asynchronous cancellation of a thread blocked in a mutex lock: acted on at once. */
#include "check.h"
#include <pthread.h>
#include <string.h>
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
    printf("ok\n");
    return 0;
}
