/* errno and __thread belong to the thread, not to the kernel thread it runs on: 8 threads
 * on 2 virtual processors yield and sleep many times, each checking that its own values
 * survived every resumption. With the argument `expect-migration` (given under `schedlab
 * exec`), at least one thread must also have resumed on another kernel thread (its
 * gettid changed), or the test proved nothing: a batch that saw no move (the other processor's
 * kernel thread left unrun by a loaded machine, seen once in a whole-suite run) is followed by
 * another, up to BATCHES. */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 8
#define ROUNDS 400
#define BATCHES 20

static __thread long mine = -1;
static __thread char name[32];

static void *run(void *arg) {
    long id = (long)arg;
    mine = id * 1000;
    snprintf(name, sizeof name, "thread %ld", id);
    long moves = 0;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    for (int i = 0; i < ROUNDS; i++) {
        errno = (int)(100 + id);
        if (i % 4 == 0)
            usleep(50);
        else
            sched_yield();
        CHECK(errno == 100 + id, "thread %ld round %d: errno %d", id, i, errno);
        CHECK(mine == id * 1000 + i, "thread %ld round %d: __thread %ld", id, i, mine);
        char want[32];
        snprintf(want, sizeof want, "thread %ld", id);
        CHECK(strcmp(name, want) == 0, "thread %ld: __thread name %s", id, name);
        mine++;
        pid_t now = (pid_t)syscall(SYS_gettid);
        if (now != tid)
            moves++;
        tid = now;
    }
    return (void *)moves;
}

int main(int argc, char **argv) {
    int expect = argc > 1 && strcmp(argv[1], "expect-migration") == 0;
    long moves = 0;
    int batch = 0;
    do {
        pthread_t t[THREADS];
        for (long i = 0; i < THREADS; i++)
            PT(pthread_create(&t[i], NULL, run, (void *)i));
        for (int i = 0; i < THREADS; i++) {
            void *r;
            PT(pthread_join(t[i], &r));
            moves += (long)r;
        }
        CHECK(mine == -1, "the main thread's __thread changed: %ld", mine);
    } while (expect && moves == 0 && ++batch < BATCHES);
    if (expect)
        CHECK(moves > 0, "no thread ever resumed on another kernel thread in %d batches", BATCHES);
    printf("ok: %ld resumptions on another kernel thread\n", moves);
    return 0;
}
