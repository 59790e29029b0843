/* A thread idle in a pipe read long enough for the runtime to give its stack's pages back
 * (issue 29's idle-stack reclaim, on by default under `schedlab exec`) keeps what another
 * thread and the kernel put on its stack meanwhile: main reads from a pipe into a buffer on
 * the idle thread's stack (the kernel writes it) and stores to a local of that thread, then
 * wakes it; the thread sees both. Prints "ok reclaimed" when mincore(2) showed the idle
 * thread's stack page gone before main touched it (under the library, where userfaultfd is
 * allowed), "ok resident" otherwise (glibc's threads). */
#include "check.h"
#include "reclaim.h"
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int wake[2], data[2];
static char *volatile shared_buf;
static volatile long *volatile shared_word;

static void *idle_reader(void *arg) {
    (void)arg;
    char buf[64];
    volatile long word = 1;
    memset(buf, 0, sizeof buf);
    shared_word = &word;
    shared_buf = buf;
    char b;
    CHECK(read(wake[0], &b, 1) == 1, "read of the wake-up byte");
    CHECK(strcmp(buf, "the kernel wrote this") == 0, "buf holds \"%s\"", buf);
    CHECK(word == 42, "word is %ld, not 42", word);
    return (void *)1L;
}

int main(void) {
    CHECK(pipe(wake) == 0 && pipe(data) == 0, "pipe");
    const char msg[] = "the kernel wrote this";
    CHECK(write(data[1], msg, sizeof msg) == (ssize_t)sizeof msg, "write");
    pthread_t t;
    PT(pthread_create(&t, NULL, idle_reader, NULL));
    while (shared_buf == NULL)
        usleep(1000);
    int gone = wait_given_back(shared_buf);
    CHECK(read(data[0], shared_buf, sizeof msg) == (ssize_t)sizeof msg, "read into the idle stack");
    *shared_word = 42;
    CHECK(*shared_word == 42, "the store did not stay");
    CHECK(write(wake[1], "x", 1) == 1, "write of the wake-up byte");
    void *r;
    PT(pthread_join(t, &r));
    CHECK(r == (void *)1L, "reader returned %p", r);
    printf("ok %s\n", gone ? "reclaimed" : "resident");
    return 0;
}
