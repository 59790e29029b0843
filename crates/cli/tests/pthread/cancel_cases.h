/* What the cancellation tests of blocking calls (cancelio.c, cancelsys.c) share: each
 * defines CASES, names[CASES] and blocked(which), a thread body that sets started[which],
 * pushes cleanup(which) and blocks in its call. Include after check.h. */
#ifndef SCHEDLAB_CANCEL_CASES_H
#define SCHEDLAB_CANCEL_CASES_H
#include <pthread.h>
#include <unistd.h>

static volatile int started[CASES], cleaned[CASES];

static void cleanup(void *arg) { cleaned[(long)arg] = 1; }

static void *blocked(void *arg);

/* Starts a thread blocked in case `which`, gives it `settle_us` to block, cancels it: it
 * must end cancelled, its cleanup handler run. */
static void cancel_blocked(long which, useconds_t settle_us) {
    pthread_t t;
    void *r;
    PT(pthread_create(&t, NULL, blocked, (void *)which));
    while (!started[which])
        usleep(1000);
    usleep(settle_us); /* let it block in its call */
    PT(pthread_cancel(t));
    PT(pthread_join(t, &r));
    CHECK(r == PTHREAD_CANCELED, "a thread blocked in %s gave %p", names[which], r);
    CHECK(cleaned[which], "the cleanup handler of the thread in %s did not run", names[which]);
}
#endif
