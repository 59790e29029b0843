/* A signal handler that ends on another kernel thread than it began on: the kernel's
 * sigreturn restores the alternate signal stack recorded in the handler's frame, which
 * is the one of the kernel thread the signal was delivered on. Thread A's SIGUSR1
 * handler yields until it runs on another kernel thread, then returns: afterwards each
 * kernel thread must still have its own alternate stack (the runtime gives each one of
 * its kernel threads one, for its own handlers). Before the library rewrote the frame,
 * the second kernel thread got the first one's, the two ran the runtime's handlers on
 * the same memory at once, and a Java program whose threads catch null dereferences and
 * stack overflows died in the runtime's preemption handler about one run in ten.
 *
 * Then the same with two signals the kernel delivers in one return to user space:
 * SIGUSR1 and SIGUSR2 pending together on the thread's kernel thread when it unblocks
 * them. The kernel builds SIGUSR1's frame, then SIGUSR2's on top of it, interrupting
 * SIGUSR1's handler before its first instruction; SIGUSR2's handler moves to another
 * kernel thread, where SIGUSR1's handler then begins and ends. Its frame, built on the
 * first kernel thread, still names that one's alternate stack: the library compared the
 * kernel thread the handler ended on with the one it *began* on (the same), and the
 * second kernel thread got the first one's alternate stack (the Open POSIX suite's
 * pthread_setschedparam/5-1, whose two senders' signals arrive this way, crashed in
 * about one run in five, two kernel threads running the runtime's handlers on the same
 * memory).
 *
 * On glibc's threads nothing moves and no thread has an alternate stack: nothing to
 * compare, the rounds just run. */
#define _GNU_SOURCE
#include "check.h"
#include "moves.h"
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 30
#define SPINNERS 3

static volatile pid_t began_tid;
static void *volatile began_stack;
static volatile int began_enabled;
static long moved;

/* The calling kernel thread's alternate signal stack, or NULL if it has none. */
static void *alt_stack(void) {
    stack_t ss;
    CHECK(sigaltstack(NULL, &ss) == 0, "sigaltstack");
    return (ss.ss_flags & SS_DISABLE) ? NULL : ss.ss_sp;
}

/* Which kernel thread the caller is on and that thread's alternate stack, read together
 * (a preemption between the two reads would pair one thread's id with another's stack). */
static void where(pid_t *t, void **stack) {
    for (;;) {
        pid_t before = kernel_tid();
        *stack = alt_stack();
        *t = kernel_tid();
        if (*t == before)
            return;
    }
}

static void handler(int sig) {
    (void)sig;
    pid_t t;
    void *s;
    where(&t, &s);
    began_tid = t;
    began_stack = s;
    began_enabled = s != NULL;
    /* Yield until this handler runs on another kernel thread. */
    if (yield_until_moved(t))
        moved++;
}

static volatile int outer_ran, inner_ran;

static void outer(int sig) {
    (void)sig;
    outer_ran++;
}

static void inner(int sig) {
    handler(sig);
    inner_ran++;
}

/* After a round's handlers: kernel threads never share an alternate stack, so the one the
 * (inner) handler began on has the stack it had then, any other a different one. */
static void check_own_stack(const char *kind, int round) {
    pid_t t;
    void *s;
    where(&t, &s);
    if (began_enabled && s != NULL) {
        CHECK((t == began_tid) == (s == began_stack),
              "%sround %d: after a handler begun on kernel thread %d (alternate stack %p), "
              "kernel thread %d has alternate stack %p",
              kind, round, (int)began_tid, began_stack, (int)t, s);
    }
}

static void *a_main(void *arg) {
    (void)arg;
    for (int round = 0; round < ROUNDS; round++) {
        CHECK(raise(SIGUSR1) == 0, "raise");
        check_own_stack("", round);
    }
    /* Both signals pending in the kernel at once (raw tgkill: the library's raise would
     * keep a blocked one itself), then opened together by ppoll's mask, whose return to
     * user space delivers both (a timeout, not sigsuspend: if the thread moved before the
     * call, the signals go on to another thread and nothing ends the wait here). */
    struct sigaction sa = {0};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = outer;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    sa.sa_handler = inner;
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
    sigset_t both;
    sigemptyset(&both);
    sigaddset(&both, SIGUSR1);
    sigaddset(&both, SIGUSR2);
    for (int round = 0; round < ROUNDS; round++) {
        int o = outer_ran, i = inner_ran;
        began_enabled = 0;
        PT(pthread_sigmask(SIG_BLOCK, &both, NULL));
        CHECK(syscall(SYS_tgkill, getpid(), kernel_tid(), SIGUSR1) == 0, "tgkill");
        CHECK(syscall(SYS_tgkill, getpid(), kernel_tid(), SIGUSR2) == 0, "tgkill");
        sigset_t none;
        sigemptyset(&none);
        struct timespec second = {1, 0};
        CHECK(ppoll(NULL, 0, &second, &none) != -1 || errno == EINTR, "ppoll");
        PT(pthread_sigmask(SIG_UNBLOCK, &both, NULL));
        /* Both handlers have run here unless the thread moved between the system calls
         * and the signals went on to another thread: wait for them (5 s bound). */
        for (int w = 0; w < 50000 && (outer_ran == o || inner_ran == i); w++)
            usleep(100);
        CHECK(outer_ran != o && inner_ran != i, "round %d: a handler never ran", round);
        check_own_stack("nested ", round);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int expect = argc > 1 && strcmp(argv[1], "expect-migration") == 0;
    struct sigaction sa = {0};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    pthread_t spinners[SPINNERS], a;
    for (int i = 0; i < SPINNERS; i++)
        PT(pthread_create(&spinners[i], NULL, yield_until_stopped, NULL));
    PT(pthread_create(&a, NULL, a_main, NULL));
    PT(pthread_join(a, NULL));
    stop_yielders();
    for (int i = 0; i < SPINNERS; i++)
        PT(pthread_join(spinners[i], NULL));
    if (expect)
        CHECK(moved > 0, "no handler ever moved to another kernel thread");
    printf("ok (%ld of %d handlers moved)\n", moved, 2 * ROUNDS);
    return 0;
}
