/* Asynchronous cancellation of a thread that computes and calls nothing (no cancellation
 * point, no wait): it is acted on promptly, wherever the loop is. With a cleanup handler
 * the handler runs; without one the thread unwinds from inside its loop to its base and its
 * key destructor runs; the joiner gets PTHREAD_CANCELED either way. And a thread that spends
 * almost all its time inside the C library (`memset`), where the library does not stop a
 * thread: the request is asked again until it lands in the program's own code (under the
 * library it was taken only at the thread's next wait or preemption, so never here, where
 * nothing else runs). A thread that never answers fails the test after 20 s instead of
 * hanging. */
#include "check.h"
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static volatile int started, cleaned, destructed;
static volatile unsigned long spins;
static pthread_key_t key;

static void cleanup(void *arg) {
    (void)arg;
    cleaned = 1;
}

static void destructor(void *arg) {
    (void)arg;
    destructed = 1;
}

/* A frame of its own below the thread's start routine: the unwind crosses it. */
static __attribute__((noinline)) void compute(void) {
    for (;;)
        spins++;
}

static void *with_handler(void *arg) {
    (void)arg;
    PT(pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL));
    pthread_cleanup_push(cleanup, NULL);
    started = 1;
    compute();
    pthread_cleanup_pop(0);
    return NULL;
}

/* Called through a pointer, so that the compiler cannot inline the clear. */
static void *(*volatile clear)(void *, int, size_t) = memset;
static char buf[1 << 16];

static __attribute__((noinline)) void clear_forever(void) {
    for (;;)
        clear(buf, (int)spins++, sizeof buf);
}

static void *in_libc(void *arg) {
    (void)arg;
    PT(pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL));
    pthread_cleanup_push(cleanup, NULL);
    started = 1;
    clear_forever();
    pthread_cleanup_pop(0);
    return NULL;
}

static void *bare(void *arg) {
    PT(pthread_setspecific(key, arg));
    PT(pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL));
    started = 1;
    compute();
    return NULL;
}

/* Waits up to 20 s for `flag`, as a hang guard (a thread that is never cancelled). */
static int waited(volatile int *flag) {
    for (int i = 0; i < 20000 && !*flag; i++)
        usleep(1000);
    return *flag;
}

int main(void) {
    pthread_t t;
    void *r;
    PT(pthread_key_create(&key, destructor));

    PT(pthread_create(&t, NULL, with_handler, NULL));
    while (!started)
        usleep(100);
    usleep(20000); /* deep in its loop */
    PT(pthread_cancel(t));
    CHECK(waited(&cleaned), "a computing thread was not cancelled within 20 s (%lu spins)", spins);
    PT(pthread_join(t, &r));
    CHECK(r == PTHREAD_CANCELED, "join of the computing thread gave %p", r);

    started = 0;
    PT(pthread_create(&t, NULL, bare, (void *)1L));
    while (!started)
        usleep(100);
    usleep(20000);
    PT(pthread_cancel(t));
    CHECK(waited(&destructed), "a computing thread without handlers was not cancelled within 20 s");
    PT(pthread_join(t, &r));
    CHECK(r == PTHREAD_CANCELED, "join of the computing thread without handlers gave %p", r);

    started = 0;
    cleaned = 0;
    PT(pthread_create(&t, NULL, in_libc, NULL));
    while (!started)
        usleep(100);
    usleep(20000);
    PT(pthread_cancel(t));
    CHECK(waited(&cleaned), "a thread inside memset was not cancelled within 20 s (%lu clears)", spins);
    PT(pthread_join(t, &r));
    CHECK(r == PTHREAD_CANCELED, "join of the thread inside memset gave %p", r);
    printf("ok\n");
    return 0;
}
