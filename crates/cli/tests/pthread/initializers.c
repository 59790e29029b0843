/* Objects set up by the static initializers, never by an init call: a mutex and a
 * read-write lock guarding counters, a condition variable handing a token around, and
 * pthread_once running its routine exactly once. */
#include "check.h"
#include <pthread.h>

#define THREADS 4
#define ROUNDS 20000

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static long counter, guarded, inits;
static int turn;

static void init(void) { inits++; }

static void *run(void *arg) {
    long id = (long)arg;
    PT(pthread_once(&once, init));
    for (int i = 0; i < ROUNDS; i++) {
        PT(pthread_mutex_lock(&mutex));
        counter++;
        PT(pthread_mutex_unlock(&mutex));
        if (i % 16 == 0) {
            PT(pthread_rwlock_wrlock(&rwlock));
            guarded++;
            PT(pthread_rwlock_unlock(&rwlock));
        } else {
            PT(pthread_rwlock_rdlock(&rwlock));
            long g = guarded;
            (void)g;
            PT(pthread_rwlock_unlock(&rwlock));
        }
    }
    /* The token goes round the threads in order, 50 times. */
    for (int k = 0; k < 50; k++) {
        PT(pthread_mutex_lock(&mutex));
        while (turn % THREADS != id)
            PT(pthread_cond_wait(&cond, &mutex));
        turn++;
        PT(pthread_cond_broadcast(&cond));
        PT(pthread_mutex_unlock(&mutex));
    }
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        PT(pthread_create(&t[i], NULL, run, (void *)i));
    for (int i = 0; i < THREADS; i++)
        PT(pthread_join(t[i], NULL));
    CHECK(counter == (long)THREADS * ROUNDS, "counter %ld", counter);
    CHECK(guarded == (long)THREADS * (ROUNDS / 16 + (ROUNDS % 16 != 0)), "guarded %ld", guarded);
    CHECK(inits == 1, "the once routine ran %ld times", inits);
    CHECK(turn == THREADS * 50, "turn %d", turn);
    printf("ok\n");
    return 0;
}
