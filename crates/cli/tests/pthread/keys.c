/* Key destructors: run at a thread's exit for every non-null value; a destructor that sets
 * a value again gets another round, up to PTHREAD_DESTRUCTOR_ITERATIONS rounds in all. */
#include "check.h"
#include <limits.h>
#include <pthread.h>

static pthread_key_t again, once, never;
static int rounds, once_calls, never_calls;
static void *once_value;

static void dtor_again(void *v) {
    CHECK(v == (void *)&rounds, "destructor got %p", v);
    rounds++;
    if (rounds < PTHREAD_DESTRUCTOR_ITERATIONS + 3)
        pthread_setspecific(again, &rounds); /* asks for one more round */
}

static void dtor_once(void *v) {
    once_calls++;
    once_value = v;
}

static void dtor_never(void *v) {
    (void)v;
    never_calls++;
}

static void *run(void *arg) {
    (void)arg;
    PT(pthread_setspecific(again, &rounds));
    PT(pthread_setspecific(once, &once_calls));
    PT(pthread_setspecific(never, NULL));
    CHECK(pthread_getspecific(once) == &once_calls, "getspecific");
    return NULL;
}

int main(void) {
    PT(pthread_key_create(&again, dtor_again));
    PT(pthread_key_create(&once, dtor_once));
    PT(pthread_key_create(&never, dtor_never));
    pthread_t t;
    PT(pthread_create(&t, NULL, run, NULL));
    PT(pthread_join(t, NULL));
    CHECK(rounds == PTHREAD_DESTRUCTOR_ITERATIONS, "%d rounds, not %d", rounds,
          PTHREAD_DESTRUCTOR_ITERATIONS);
    CHECK(once_calls == 1 && once_value == &once_calls, "once: %d calls", once_calls);
    CHECK(never_calls == 0, "a null value's destructor ran %d times", never_calls);
    CHECK(pthread_getspecific(once) == NULL, "the main thread's value is its own");
    PT(pthread_key_delete(again));
    printf("ok: %d rounds\n", rounds);
    return 0;
}
