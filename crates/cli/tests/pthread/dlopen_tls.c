/* Thread-locals of a library loaded with dlopen after threads exist: each new thread
 * sees the library's initial values (not the previous thread's), and the library's TLS
 * block that each thread allocates (glibc's dynamic TLS, malloc'd on first use) is freed
 * again when the thread's control block is reused — a program that creates thread after
 * thread holds as much memory after the 2,000th as after the 200th. Under the library a
 * control block that never had such a block skips that walk (glibc.rs, "reinit");
 * blocks made before the dlopen and reused after it must not.
 *
 * This file is also the library: compiled with -DAS_LIBRARY -shared -fPIC into
 * libdlopen_tls.so beside the program, which dlopens it from its own directory. */
#include "check.h"

#ifdef AS_LIBRARY
/* 256 KiB, so that a block left behind per thread shows at once. */
__thread unsigned char big[256 * 1024];
__thread int small = 42;

int touch(int v) {
    CHECK(small == 42, "a new thread's small is %d, not its initial 42", small);
    for (unsigned i = 0; i < sizeof big; i += 4096)
        CHECK(big[i] == 0, "a new thread's big[%u] is %d, not 0", i, big[i]);
    small = v;
    for (unsigned i = 0; i < sizeof big; i += 4096)
        big[i] = (unsigned char)v;
    return small;
}
#else
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define WARM 200
#define THREADS 2000

static int (*touch)(int);

static void *nothing(void *arg) {
    return arg;
}

static void *use(void *arg) {
    int v = (int)(long)arg;
    CHECK(touch(v) == v, "touch");
    return NULL;
}

static void run(pthread_t *t, int n, void *(*fn)(void *), int base) {
    for (int i = 0; i < n; i++)
        PT(pthread_create(&t[i], NULL, fn, (void *)(long)(base + i % 100 + 1)));
    for (int i = 0; i < n; i++)
        PT(pthread_join(t[i], NULL));
}

int main(void) {
    pthread_t t[8];
    /* Control blocks made before the dlopen, to be reused after it. */
    run(t, 8, nothing, 0);

    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    CHECK(n > 0, "readlink /proc/self/exe");
    path[n] = 0;
    strcpy(strrchr(path, '/') + 1, "libdlopen_tls.so");
    void *lib = dlopen(path, RTLD_NOW);
    CHECK(lib != NULL, "dlopen %s: %s", path, dlerror());
    touch = (int (*)(int))dlsym(lib, "touch");
    CHECK(touch != NULL, "dlsym touch");

    for (int i = 0; i < WARM; i += 8)
        run(t, 8, use, i);
    /* Both malloc's heap and its own mappings (a 256 KiB block may be either). */
    struct mallinfo2 m = mallinfo2();
    size_t warm = m.uordblks + m.hblkhd;
    for (int i = 0; i < THREADS; i += 8)
        run(t, 8, use, i);
    m = mallinfo2();
    size_t after = m.uordblks + m.hblkhd;
    /* A block left behind per thread would be 2,000 × 256 KiB = 500 MiB. */
    CHECK(after < warm + 16 * 1024 * 1024,
          "%zu bytes in use after %d threads, %zu after %d", after, THREADS + WARM, warm, WARM);
    printf("ok\n");
    return 0;
}
#endif
