/* Deferred cancellation: acted on at pthread_testcancel and in sleep (cancellation points),
 * not before; the cleanup handlers run innermost first; the joiner gets PTHREAD_CANCELED. */
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
    printf("ok\n");
    return 0;
}
