/*
 * libschedlab_clears.so: where real programs clear memory (seed 004, issue 26).
 *
 * Loaded with LD_PRELOAD by the mem.clears probe. It interposes memset, calloc, bzero and
 * explicit_bzero, counts each call in a size histogram (calls and bytes per size class) and
 * hands it on to the C library's own function; at exit it adds the process's minor page
 * faults (getrusage: each fresh anonymous page is cleared by the kernel when first touched,
 * 4 KiB at a time) and appends one line per non-empty class to
 * $SCHEDLAB_CLEARS_OUT (a file every process of the program tree appends to, O_APPEND).
 *
 * What it cannot see, by construction: calls the compiler inlined (a memset of a small
 * constant size becomes a few stores) and the C library's calls to itself (they do not go
 * through the PLT). So the histogram is of the calls that reach libc's symbols: the clears
 * a faster libc routine could speed up, which is the seed's question.
 *
 * Size classes: sizes below 64 each their own; above, eight classes per power of two
 * (the lower bound of each is printed), so any crossover is resolved within 12.5%.
 *
 * Why C, not the pthread library's Rust: this must be loadable under every program, with no
 * runtime of its own and no allocation; it must not slow libschedlab_pthread.so either, so
 * it is a library of its own. Counters are relaxed atomics: threads of one process add to
 * the same histogram.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

enum { K_MEMSET0, K_MEMSET_OTHER, K_CALLOC, K_BZERO, K_EXPLICIT_BZERO, KINDS };
static const char *const KIND_NAME[KINDS] = {"memset", "memset_nonzero", "calloc", "bzero",
                                             "explicit_bzero"};
#define CLASSES (64 + 8 * 64)

static uint64_t calls[KINDS][CLASSES];
static uint64_t bytes[KINDS][CLASSES];

static unsigned class_of(size_t n) {
    if (n < 64) return (unsigned)n;
    unsigned p = 63 - (unsigned)__builtin_clzll((unsigned long long)n); /* >= 6 */
    unsigned sub = (unsigned)((n >> (p - 3)) & 7);
    unsigned c = 64 + (p - 6) * 8 + sub;
    return c < CLASSES ? c : CLASSES - 1;
}

static size_t class_low(unsigned c) {
    if (c < 64) return c;
    unsigned p = (c - 64) / 8 + 6, sub = (c - 64) % 8;
    return ((size_t)1 << p) + ((size_t)sub << (p - 3));
}

static void count(int kind, size_t n) {
    unsigned c = class_of(n);
    __atomic_fetch_add(&calls[kind][c], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&bytes[kind][c], n, __ATOMIC_RELAXED);
}

/* The C library's functions, found once. Until then (dlsym itself may clear or allocate), a
 * plain loop clears and calloc comes from glibc's exported __libc_calloc. */
static void *(*real_memset)(void *, int, size_t);
static void (*real_explicit_bzero)(void *, size_t);
extern void *__libc_calloc(size_t, size_t);
static int resolving;

static void resolve(void) {
    if (real_memset || resolving) return;
    resolving = 1;
    void *m = dlsym(RTLD_NEXT, "memset");
    void *e = dlsym(RTLD_NEXT, "explicit_bzero");
    __atomic_store_n(&real_explicit_bzero, (void (*)(void *, size_t))e, __ATOMIC_RELEASE);
    __atomic_store_n(&real_memset, (void *(*)(void *, int, size_t))m, __ATOMIC_RELEASE);
    resolving = 0;
}

static void *slow_set(void *s, int c, size_t n) {
    volatile unsigned char *p = s;
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)c;
    return s;
}

static void *do_memset(void *s, int c, size_t n) {
    resolve();
    void *(*f)(void *, int, size_t) = __atomic_load_n(&real_memset, __ATOMIC_ACQUIRE);
    return f ? f(s, c, n) : slow_set(s, c, n);
}

void *memset(void *s, int c, size_t n) {
    count(c == 0 ? K_MEMSET0 : K_MEMSET_OTHER, n);
    return do_memset(s, c, n);
}

void bzero(void *s, size_t n) {
    count(K_BZERO, n);
    do_memset(s, 0, n);
}

void explicit_bzero(void *s, size_t n) {
    count(K_EXPLICIT_BZERO, n);
    resolve();
    void (*f)(void *, size_t) = __atomic_load_n(&real_explicit_bzero, __ATOMIC_ACQUIRE);
    if (f) {
        f(s, n);
    } else {
        slow_set(s, 0, n);
    }
}

void *calloc(size_t n, size_t size) {
    size_t total;
    if (!__builtin_mul_overflow(n, size, &total)) count(K_CALLOC, total);
    return __libc_calloc(n, size);
}

/* Appends the histogram and the fault count, one write per line batch. */
__attribute__((destructor)) static void report(void) {
    const char *path = getenv("SCHEDLAB_CLEARS_OUT");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    char buf[8192];
    size_t len = 0;
    struct rusage ru;
    long pid = (long)getpid();
    char exe[256];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[el > 0 ? el : 0] = 0;
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%ld %s minflt %ld %ld\n", pid, base,
                                (long)ru.ru_minflt, (long)ru.ru_minflt * 4096L);
    for (int k = 0; k < KINDS; k++) {
        for (unsigned c = 0; c < CLASSES; c++) {
            uint64_t n = __atomic_load_n(&calls[k][c], __ATOMIC_RELAXED);
            if (!n) continue;
            if (len + 128 > sizeof buf) {
                if (write(fd, buf, len) < 0) break;
                len = 0;
            }
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%ld %s %s %zu %llu %llu\n", pid,
                                    base, KIND_NAME[k], class_low(c), (unsigned long long)n,
                                    (unsigned long long)__atomic_load_n(&bytes[k][c],
                                                                        __ATOMIC_RELAXED));
        }
    }
    if (len && write(fd, buf, len) < 0) { /* nothing to do: the program's exit goes on */
    }
    close(fd);
}
