/* A signal that comes while its handler runs is delivered when the handler returns, on the
 * thread that ran it, even if a second handler moved that thread to another kernel thread
 * in between.
 *
 * Thread A (the only thread that accepts SIGUSR1 and SIGUSR2) raises SIGUSR1. Its handler
 * sends the process SIGUSR1 again, which it blocks while it runs, so the signal waits for
 * its end; and it makes SIGUSR2 pending too: it blocks SIGUSR2, has thread B send it SIGUSR2
 * with pthread_kill, and opens SIGUSR2 again with the raw system call (glibc's threads
 * deliver it at once, nested; the library, whose record of the mask still blocks it, keeps
 * it until the handler ends). SIGUSR2's handler yields until it runs on another kernel
 * thread. When raise() returns, the second SIGUSR1 has been handled: the kernel delivers it
 * as sigreturn opens it.
 *
 * Under the library the handler's end raised the waiting SIGUSR1 on its kernel thread,
 * where the handler's mask held it, and then SIGUSR2, which nested at once and moved the
 * thread: sigreturn opened SIGUSR1 on the other kernel thread, and the one holding it never
 * delivered it (the Open POSIX suite's pthread_setschedparam/5-1 hung about one run in 25:
 * a second SIGUSR1 sent to that kernel thread merged with the held one, and one sender
 * waited for its answer for good).
 *
 * On glibc's threads nothing moves; the rounds just run. */
#define _GNU_SOURCE
#include "check.h"
#include "moves.h"
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 30
#define SPINNERS 3

static atomic_int usr1_ran, usr2_ran;
static long moved;
static pthread_t a;
static sem_t please, done;

/* Yields until the caller runs on another kernel thread (gives up on glibc's threads). */
static void on_usr2(int sig) {
    (void)sig;
    if (yield_until_moved(kernel_tid()))
        moved++;
    atomic_fetch_add(&usr2_ran, 1);
}

static void on_usr1(int sig) {
    (void)sig;
    if (atomic_fetch_add(&usr1_ran, 1) % 2 == 1)
        return; /* the second of the round */
    sigset_t two;
    sigemptyset(&two);
    sigaddset(&two, SIGUSR2);
    PT(pthread_sigmask(SIG_BLOCK, &two, NULL));
    CHECK(sem_post(&please) == 0, "sem_post");
    while (sem_wait(&done) != 0)
        ;
    uint64_t bit = 1ull << (SIGUSR2 - 1);
    CHECK(syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &bit, NULL, 8) == 0, "rt_sigprocmask");
    CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
}

/* Thread B: sends A SIGUSR2 when asked. */
static void *b_main(void *arg) {
    (void)arg;
    for (int round = 0; round < ROUNDS; round++) {
        while (sem_wait(&please) != 0)
            ;
        PT(pthread_kill(a, SIGUSR2));
        CHECK(sem_post(&done) == 0, "sem_post");
    }
    return NULL;
}

static void *a_main(void *arg) {
    (void)arg;
    sigset_t both;
    sigemptyset(&both);
    sigaddset(&both, SIGUSR1);
    sigaddset(&both, SIGUSR2);
    PT(pthread_sigmask(SIG_UNBLOCK, &both, NULL));
    for (int round = 0; round < ROUNDS; round++) {
        CHECK(raise(SIGUSR1) == 0, "raise");
        CHECK(atomic_load(&usr1_ran) == 2 * (round + 1) && atomic_load(&usr2_ran) == round + 1,
              "round %d: SIGUSR1 handled %d times and SIGUSR2 %d times when raise() returned "
              "(%ld of the SIGUSR2 handlers moved)",
              round, atomic_load(&usr1_ran), atomic_load(&usr2_ran), moved);
    }
    return NULL;
}

int main(void) {
    struct sigaction sa = {0};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_usr1;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    sa.sa_handler = on_usr2;
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
    /* Every thread but A blocks both (they inherit this mask). */
    sigset_t both;
    sigemptyset(&both);
    sigaddset(&both, SIGUSR1);
    sigaddset(&both, SIGUSR2);
    PT(pthread_sigmask(SIG_BLOCK, &both, NULL));
    CHECK(sem_init(&please, 0, 0) == 0 && sem_init(&done, 0, 0) == 0, "sem_init");
    pthread_t spinners[SPINNERS], b;
    for (int i = 0; i < SPINNERS; i++)
        PT(pthread_create(&spinners[i], NULL, yield_until_stopped, NULL));
    PT(pthread_create(&a, NULL, a_main, NULL));
    PT(pthread_create(&b, NULL, b_main, NULL));
    PT(pthread_join(a, NULL));
    PT(pthread_join(b, NULL));
    stop_yielders();
    for (int i = 0; i < SPINNERS; i++)
        PT(pthread_join(spinners[i], NULL));
    printf("ok (%ld of %d SIGUSR2 handlers moved)\n", moved, ROUNDS);
    return 0;
}
