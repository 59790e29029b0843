#define _GNU_SOURCE
/* Stacks: a thread given its own memory (pthread_attr_setstack) runs on it, and
 * pthread_getattr_np tells every thread the stack it runs on, as garbage collectors and
 * stack-overflow checkers read it. Memory lent to threads that were joined is the
 * caller's again: a second wave of threads runs on the same memory, and a thread created
 * on the memory of the one joined a moment ago, thousands of times over, while two
 * processors run both. */
#include "check.h"
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define THREADS 64
#define SMALL 16384 /* PTHREAD_STACK_MIN on x86-64 glibc */
#define BIG (256 * 1024)

struct lent {
    char *base;
    size_t size;
    int wave;
    int ok;
};

/* Where the calling thread's stack is, as pthread_getattr_np says. */
static void own_stack(char **base, size_t *size) {
    pthread_attr_t a;
    void *addr;
    PT(pthread_getattr_np(pthread_self(), &a));
    PT(pthread_attr_getstack(&a, &addr, size));
    PT(pthread_attr_destroy(&a));
    *base = addr;
}

static int inside(const void *p, const char *base, size_t size) {
    return (const char *)p >= base && (const char *)p < base + size;
}

/* Uses about `depth` KiB of stack, writing a pattern it then checks. */
static int deep(int depth, int seed) {
    volatile char frame[1024];
    memset((char *)frame, seed, sizeof frame);
    int sum = depth > 1 ? deep(depth - 1, seed) : 0;
    return sum + (frame[0] == (char)seed && frame[1023] == (char)seed);
}

static void *on_lent(void *arg) {
    struct lent *l = arg;
    int local = 0;
    char *base;
    size_t size;
    own_stack(&base, &size);
    /* Half the smallest stack for frames; the rest is the library's and libc's. */
    int depth = (int)(l->size / 1024 / 2) - 2;
    l->ok = inside(&local, l->base, l->size) && base == l->base && size == l->size &&
            deep(depth > 32 ? 32 : depth, l->wave) == (depth > 32 ? 32 : depth);
    return NULL;
}

static void *on_default(void *arg) {
    int local = 0;
    char *base;
    size_t size;
    own_stack(&base, &size);
    *(int *)arg = inside(&local, base, size) && size >= SMALL;
    return NULL;
}

static volatile int finishing;

static void *brief(void *arg) {
    volatile char frame[2048];
    memset((char *)frame, (int)(long)arg, sizeof frame);
    sched_yield();
    finishing = 1; /* its creator, spinning on the other processor, joins now */
    return (void *)(long)(frame[0] + frame[2047]);
}

/* Creates and joins a thread on the same memory, again and again, from a created thread
 * (so that the exits run on the other processor while the next create follows). */
static void *reuse(void *arg) {
    char *mem = arg;
    for (int i = 0; i < 3000; i++) {
        pthread_attr_t a;
        pthread_t t;
        void *r;
        PT(pthread_attr_init(&a));
        PT(pthread_attr_setstack(&a, mem, BIG));
        finishing = 0;
        PT(pthread_create(&t, &a, brief, (void *)(long)(i & 63)));
        PT(pthread_attr_destroy(&a));
        while (!finishing)
            ;
        PT(pthread_join(t, &r));
        CHECK((long)r == 2 * (i & 63), "round %d returned %ld", i, (long)r);
    }
    return NULL;
}

int main(void) {
    /* A thread on the library's stack knows where its stack is. */
    int ok = 0;
    pthread_t t;
    PT(pthread_create(&t, NULL, on_default, &ok));
    PT(pthread_join(t, NULL));
    CHECK(ok, "pthread_getattr_np's stack does not hold the thread's locals");

    /* Threads on lent memory, two sizes, all alive at once; then again on the same
     * memory once they were joined. */
    size_t total = (size_t)THREADS / 2 * (SMALL + BIG);
    char *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED, "mmap of %zu bytes", total);
    for (int wave = 1; wave <= 2; wave++) {
        pthread_t ts[THREADS];
        struct lent ls[THREADS];
        char *next = mem;
        for (int i = 0; i < THREADS; i++) {
            size_t size = i % 2 ? BIG : SMALL;
            ls[i] = (struct lent){next, size, wave, 0};
            next += size;
            pthread_attr_t a;
            PT(pthread_attr_init(&a));
            PT(pthread_attr_setstack(&a, ls[i].base, size));
            PT(pthread_create(&ts[i], &a, on_lent, &ls[i]));
            PT(pthread_attr_destroy(&a));
        }
        for (int i = 0; i < THREADS; i++) {
            PT(pthread_join(ts[i], NULL));
            CHECK(ls[i].ok, "wave %d thread %d did not run on its %zu bytes at %p", wave, i,
                  ls[i].size, (void *)ls[i].base);
        }
        /* Joined: the memory is ours again; scribble over it before the next wave. */
        memset(mem, 0xa5, total);
    }
    munmap(mem, total);

    char *one = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(one != MAP_FAILED, "mmap");
    pthread_t r;
    PT(pthread_create(&r, NULL, reuse, one));
    PT(pthread_join(r, NULL));
    munmap(one, BIG);
    printf("ok\n");
    return 0;
}
