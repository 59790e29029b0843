/* System V's and BSD's signal functions on user threads: sighold, sigrelse, sigset,
 * sigblock, sigsetmask, siggetmask, siginterrupt, sigpause. glibc builds them on its
 * internal sigprocmask and sigaction, which an LD_PRELOADed library does not see; before
 * the library defined them, on one virtual processor:
 * - a mask changed by sighold stayed on the kernel thread and went to the next user
 *   thread that ran there, while pthread_sigmask answered with the old one;
 * - a handler installed by sigset ran without the runtime knowing its mask;
 * - siginterrupt's flags were not the ones sigaction answered with;
 * - a thread in sigpause was neither woken by a pthread_kill of the signal it waits for
 *   nor cancelled (glibc's own cancellation point). */
#define _GNU_SOURCE
#include "check.h"
#include "rt.h"
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* A BSD mask's bit for signal s (glibc's sigmask macro, deprecated). */
#define BSD_BIT(s) (1 << ((s) - 1))

static const uint64_t USR1 = 1ull << (SIGUSR1 - 1), USR2 = 1ull << (SIGUSR2 - 1);

/* The calling kernel thread's mask, as the kernel has it. */
static uint64_t kernel_mask(void) {
    uint64_t set = 0;
    CHECK(syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &set, 8) == 0, "rt_sigprocmask");
    return set;
}

/* The calling thread's mask, as pthread_sigmask answers. */
static uint64_t thread_mask(void) {
    sigset_t s;
    PT(pthread_sigmask(SIG_BLOCK, NULL, &s));
    uint64_t m = 0;
    for (int sig = 1; sig <= 64; sig++)
        if (sigismember(&s, sig) == 1)
            m |= 1ull << (sig - 1);
    return m;
}

/* Both views agree that the signals of `want` are blocked (or not: `blocked` 0). */
static void expect(uint64_t want, int blocked, const char *after) {
    uint64_t k = kernel_mask(), t = thread_mask();
    CHECK((k & want) == (blocked ? want : 0), "after %s the kernel's mask is %#llx", after,
          (unsigned long long)k);
    CHECK((t & want) == (blocked ? want : 0), "after %s pthread_sigmask says %#llx", after,
          (unsigned long long)t);
}

static volatile int turn, neighbour_ran;

/* The other user thread on the one processor: runs where the first ran, between its
 * mask changes, and must have its own mask there (nothing blocked). */
static void *neighbour(void *arg) {
    (void)arg;
    for (int round = 1; round <= 3; round++) {
        while (turn != 2 * round - 1)
            sched_yield();
        uint64_t k = kernel_mask();
        CHECK((k & (USR1 | USR2)) == 0, "round %d: the neighbour runs with mask %#llx", round,
              (unsigned long long)k);
        neighbour_ran = round;
        turn = 2 * round;
    }
    return NULL;
}

/* Hands the processor to the neighbour and back (round `round`). */
static void hand_over(int round) {
    turn = 2 * round - 1;
    while (turn != 2 * round)
        sched_yield();
}

static volatile int in_handler;
static uint64_t handler_saw;

static void on_usr2(int sig) {
    (void)sig;
    handler_saw = thread_mask();
    in_handler = 1;
}

static void on_usr1(int sig) {
    (void)sig;
}

static void *masks(void *arg) {
    (void)arg;
    pthread_t n;
    PT(pthread_create(&n, NULL, neighbour, NULL));

    CHECK(sighold(SIGUSR1) == 0, "sighold");
    expect(USR1, 1, "sighold");
    hand_over(1);
    expect(USR1, 1, "sighold and a switch");
    CHECK(sigrelse(SIGUSR1) == 0, "sigrelse");
    expect(USR1, 0, "sigrelse");

    CHECK(sigset(SIGUSR2, SIG_HOLD) == SIG_DFL, "sigset(SIG_HOLD) gives the old disposition");
    expect(USR2, 1, "sigset(SIGUSR2, SIG_HOLD)");
    hand_over(2);
    expect(USR2, 1, "sigset(SIG_HOLD) and a switch");
    CHECK(sigset(SIGUSR2, on_usr2) == SIG_HOLD, "sigset of a held signal gives SIG_HOLD");
    expect(USR2, 0, "sigset(SIGUSR2, handler)");

    /* The handler sigset installed runs with its own signal blocked, as the kernel
     * and the library both say. */
    CHECK(raise(SIGUSR2) == 0, "raise");
    CHECK(in_handler, "the handler ran");
    CHECK(handler_saw & USR2, "in sigset's handler pthread_sigmask says %#llx",
          (unsigned long long)handler_saw);
    expect(USR2, 0, "the handler");

    /* BSD's masks: bit n-1 is signal n. */
    int old = sigblock(BSD_BIT(SIGUSR1) | BSD_BIT(SIGUSR2));
    CHECK((old & (BSD_BIT(SIGUSR1) | BSD_BIT(SIGUSR2))) == 0, "sigblock's old mask %#x", old);
    expect(USR1 | USR2, 1, "sigblock");
    CHECK((siggetmask() & BSD_BIT(SIGUSR1)) != 0, "siggetmask");
    hand_over(3);
    expect(USR1 | USR2, 1, "sigblock and a switch");
    sigsetmask(old);
    expect(USR1 | USR2, 0, "sigsetmask");

    /* siginterrupt changes the flags sigaction answers with. */
    CHECK(signal(SIGUSR1, on_usr1) != SIG_ERR, "signal");
    struct sigaction sa;
    CHECK(siginterrupt(SIGUSR1, 1) == 0, "siginterrupt");
    CHECK(sigaction(SIGUSR1, NULL, &sa) == 0 && sa.sa_handler == on_usr1, "sigaction query");
    CHECK(!(sa.sa_flags & SA_RESTART), "after siginterrupt(1) the flags are %#x", sa.sa_flags);
    CHECK(siginterrupt(SIGUSR1, 0) == 0, "siginterrupt");
    CHECK(sigaction(SIGUSR1, NULL, &sa) == 0, "sigaction query");
    CHECK(sa.sa_flags & SA_RESTART, "after siginterrupt(0) the flags are %#x", sa.sa_flags);

    PT(pthread_join(n, NULL));
    CHECK(neighbour_ran == 3, "the neighbour ran %d rounds", neighbour_ran);
    return NULL;
}

static volatile int pausing;

/* Waits in sigpause for SIGUSR1, which it blocks otherwise; once more to be cancelled. */
static void *pauser(void *arg) {
    (void)arg;
    CHECK(sighold(SIGUSR1) == 0, "sighold");
    pausing = 1;
    int r = sigpause(SIGUSR1);
    CHECK(r == -1 && errno == EINTR, "sigpause returned %d (errno %d)", r, errno);
    expect(USR1, 1, "sigpause");
    pausing = 2;
    sigpause(SIGUSR1); /* a cancellation point: pthread_cancel ends the thread here */
    CHECK(0, "sigpause returned instead of being cancelled");
    return NULL;
}

int main(void) {
    alarm(20); /* a hang guard: SIGALRM's default action ends the process */
    one_cpu_one_processor();
    pthread_t t;
    PT(pthread_create(&t, NULL, masks, NULL));
    PT(pthread_join(t, NULL));

    CHECK(signal(SIGUSR1, on_usr1) != SIG_ERR, "signal");
    PT(pthread_create(&t, NULL, pauser, NULL));
    while (pausing != 1)
        usleep(1000);
    usleep(20000); /* into sigpause, most likely; a signal before it stays pending */
    PT(pthread_kill(t, SIGUSR1));
    while (pausing != 2)
        usleep(1000);
    usleep(20000);
    PT(pthread_cancel(t));
    void *ret;
    PT(pthread_join(t, &ret));
    CHECK(ret == PTHREAD_CANCELED, "the thread in sigpause returned %p", ret);
    printf("ok\n");
    return 0;
}
