/* A program with a malloc of its own, built as jemalloc's (which rustc links) is: a lock
 * (a pthread mutex) held at each call, per-thread state in a __thread variable, made at a
 * thread's first allocation and registered under a pthread key, whose destructor tears it
 * down at the thread's exit (glibc runs the key destructors last: nothing allocates on the
 * thread after them).
 *
 * Before the library made its own allocations with glibc's malloc (`alloc.rs`), they went
 * to this one: the first one, for the initial thread's own data, called it from inside its
 * own pthread_mutex_trylock (jemalloc's initialisation lock) and recursed until the stack
 * ran out; the runtime's scheduler allocated through it, taking its lock, where a user thread
 * preempted inside it held it; and the library's exit path allocated on a thread after its
 * teardown. This test died of a segmentation fault in every run, and rustc under schedlab
 * exec crashed or hung. Here an allocation after a thread's teardown is counted (it must be
 * none), and every thread's state must have been torn down. */
#define _GNU_SOURCE
#include "check.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static pthread_key_t key;
/* The allocator's lock, as jemalloc's arenas have: held a moment at each call (time enough
 * for a preemption to land inside, in the program's own code). */
static pthread_mutex_t arena = PTHREAD_MUTEX_INITIALIZER;
static volatile long sink;
static void arena_work(void) {
    for (int i = 0; i < 200; i++)
        sink += i;
}
static atomic_int key_made, after_teardown, torn_down;
static __thread int state; /* 0: none yet, 1: made, 2: torn down */

static void teardown(void *arg) {
    (void)arg;
    state = 2;
    atomic_fetch_add(&torn_down, 1);
}

/* What jemalloc's tsd_fetch does at each allocation. */
static void this_thread(void) {
    if (state == 1 || !atomic_load(&key_made))
        return;
    if (state == 2) {
        atomic_fetch_add(&after_teardown, 1);
        return;
    }
    state = 1;
    pthread_setspecific(key, &state);
}

void *malloc(size_t n) {
    this_thread();
    pthread_mutex_lock(&arena);
    arena_work();
    void *p = __libc_malloc(n);
    pthread_mutex_unlock(&arena);
    return p;
}
void *calloc(size_t n, size_t s) {
    this_thread();
    return __libc_calloc(n, s);
}
void *realloc(void *p, size_t n) {
    this_thread();
    return __libc_realloc(p, n);
}
void free(void *p) {
    if (p)
        this_thread();
    pthread_mutex_lock(&arena);
    arena_work();
    __libc_free(p);
    pthread_mutex_unlock(&arena);
}
void *memalign(size_t a, size_t n) {
    this_thread();
    return __libc_memalign(a, n);
}
void *aligned_alloc(size_t a, size_t n) {
    return memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = memalign(a, n);
    if (!p)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}

static void *worker(void *arg) {
    for (int i = 0; i < 200; i++) {
        char *p = malloc(100 + (size_t)arg);
        CHECK(p != NULL, "malloc");
        memset(p, 1, 100);
        free(p);
    }
    return NULL;
}

int main(void) {
    CHECK(pthread_key_create(&key, teardown) == 0, "pthread_key_create");
    atomic_store(&key_made, 1);
    enum { THREADS = 400 };
    for (long round = 0; round < THREADS / 8; round++) {
        pthread_t t[8];
        for (long i = 0; i < 8; i++)
            PT(pthread_create(&t[i], NULL, worker, (void *)i));
        for (int i = 0; i < 8; i++)
            PT(pthread_join(t[i], NULL));
    }
    CHECK(atomic_load(&after_teardown) == 0,
          "%d allocations on threads whose allocator state was torn down",
          atomic_load(&after_teardown));
    CHECK(atomic_load(&torn_down) >= THREADS, "%d of %d threads' states torn down",
          atomic_load(&torn_down), THREADS);
    printf("ok\n");
    return 0;
}
