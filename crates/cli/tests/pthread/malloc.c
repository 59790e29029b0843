/* malloc in short-lived threads: a program that creates thread after thread, each
 * allocating and freeing, holds as much memory after the 20,000th as after the 200th
 * (glibc's thread exit gives back the thread's malloc cache; under the library the next
 * thread on a kept control block takes it over). Blocks allocated in one thread and freed
 * in another, and the reverse, come back intact. */
#include "check.h"
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define WARM 200
#define THREADS 20000

static void *work(void *arg) {
    /* Frees what the previous thread left, then leaves one block for the next. */
    unsigned char *prev = arg;
    if (prev) {
        for (int i = 0; i < 100; i++)
            CHECK(prev[i] == (unsigned char)i, "byte %d of the handed-over block is %d", i, prev[i]);
        free(prev);
    }
    void *small[8];
    for (int i = 0; i < 8; i++) {
        small[i] = malloc(16 + 48 * i);
        CHECK(small[i] != NULL, "malloc");
        memset(small[i], 0xa5, 16 + 48 * i);
    }
    for (int i = 0; i < 8; i++)
        free(small[i]);
    unsigned char *next = malloc(100);
    CHECK(next != NULL, "malloc");
    for (int i = 0; i < 100; i++)
        next[i] = (unsigned char)i;
    return next;
}

static long resident_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f != NULL, "open /proc/self/statm");
    long size, resident;
    CHECK(fscanf(f, "%ld %ld", &size, &resident) == 2, "read /proc/self/statm");
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(void) {
    void *carry = NULL;
    long warm = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_t t;
        PT(pthread_create(&t, NULL, work, carry));
        PT(pthread_join(t, &carry));
        CHECK(carry != NULL, "thread %d returned no block", i);
        if (i == WARM)
            warm = resident_kib();
    }
    free(carry);
    long grew = resident_kib() - warm;
    /* A 640-byte cache left behind by each thread would be 12 MiB here. */
    CHECK(grew < 4096, "resident memory grew by %ld KiB over %d threads", grew, THREADS - WARM);
    printf("ok (resident memory grew by %ld KiB over %d threads)\n", grew, THREADS - WARM);
    return 0;
}
