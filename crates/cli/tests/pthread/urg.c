/* A program's own SIGURG handler beside the runtime's, which preempts with SIGURG: the
 * program's handler runs for exactly the SIGURGs the program (or the kernel) sends — raise,
 * pthread_kill of a computing thread and of one blocked in pause, kill, sigqueue with its
 * value —, never for the runtime's; preemption goes on (computing threads, more than there are
 * processors, never yield, and a thread queued behind them must run to stop them), with the
 * handler installed before the first thread and after; a query answers with the program's
 * handler; SIG_IGN drops the program's SIGURGs and keeps preemption; SA_RESETHAND resets;
 * a SIGURG a thread blocks waits for it to unblock it, and sigwait takes one it blocks.
 * Before: the runtime's installation dropped a handler installed before it (raise counted 0),
 * and one installed after replaced the runtime's in the kernel (preemption stopped, the
 * handler ran thousands of times a second). */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t count, last_code;
static volatile intptr_t last_value;
static volatile int stop, started;

static void counted(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    CHECK(sig == SIGURG, "signal %d", sig);
    last_code = si->si_code;
    last_value = (intptr_t)si->si_value.sival_ptr;
    count++;
}

static void plain(int sig) {
    (void)sig;
    count++;
}

static void install(void (*h)(int, siginfo_t *, void *), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    CHECK(sigaction(SIGURG, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
}

static void disposition(void *want, int siginfo) {
    struct sigaction old;
    CHECK(sigaction(SIGURG, NULL, &old) == 0, "sigaction query");
    void *got = siginfo ? (void *)old.sa_sigaction : (void *)old.sa_handler;
    CHECK(got == want, "the query answers %p, not the program's %p", got, want);
    if (want != (void *)SIG_DFL && want != (void *)SIG_IGN) {
        CHECK(!!(old.sa_flags & SA_SIGINFO) == siginfo, "flags %#x", old.sa_flags);
        CHECK(sigismember(&old.sa_mask, SIGUSR2) == 1, "the program's mask was not kept");
    }
}

/* Waits (yielding) until the handler has run `want` times in all. */
static void wait_count(int want, const char *what) {
    for (long i = 0; count < want; i++) {
        CHECK(i < 20000000, "%s: the handler ran %d times, not %d", what, (int)count, want);
        sched_yield();
    }
    CHECK(count == want, "%s: the handler ran %d times, not %d", what, (int)count, want);
}

static void *spin(void *arg) {
    (void)arg;
    __atomic_fetch_add(&started, 1, __ATOMIC_SEQ_CST);
    while (!stop)
        ;
    return NULL;
}

static void *stopper(void *arg) {
    (void)arg;
    stop = 1;
    return NULL;
}

/* Three threads that never yield, more than the two processors `exec` gives, and a fourth
 * queued behind them that must run to stop them: only preemption lets it. */
static void preemption(const char *when) {
    int before = count;
    stop = 0;
    started = 0;
    pthread_t t[4];
    for (int i = 0; i < 3; i++)
        PT(pthread_create(&t[i], NULL, spin, NULL));
    while (started < 2)
        ;
    PT(pthread_create(&t[3], NULL, stopper, NULL));
    for (int i = 0; i < 4; i++)
        PT(pthread_join(t[i], NULL));
    CHECK(count == before, "%s: the program's handler ran %d times for SIGURGs it never sent",
          when, (int)(count - before));
}

/* Raises SIGURG 200 times on a user thread while three others compute (and are preempted). */
static void *raiser(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; i++) {
        int before = count;
        CHECK(raise(SIGURG) == 0, "raise");
        CHECK(count == before + 1, "raise %d: the handler ran %d times", i, (int)(count - before));
        CHECK(last_code == SI_TKILL, "raise: si_code %d", (int)last_code);
    }
    return NULL;
}

static void *computing(void *arg) {
    (void)arg;
    while (!stop)
        ;
    return NULL;
}

static void *pausing(void *arg) {
    int want = *(int *)arg;
    while (count < want) {
        int r = pause();
        CHECK(r == -1 && errno == EINTR, "pause: %d %s", r, strerror(errno));
    }
    return NULL;
}

static void *blocking(void *arg) {
    (void)arg;
    sigset_t urg;
    sigemptyset(&urg);
    sigaddset(&urg, SIGURG);
    PT(pthread_sigmask(SIG_BLOCK, &urg, NULL));
    int before = count;
    CHECK(raise(SIGURG) == 0, "raise");
    for (int i = 0; i < 50; i++)
        sched_yield();
    CHECK(count == before, "a blocked SIGURG ran its handler");
    sigset_t pending;
    PT(pthread_sigmask(SIG_UNBLOCK, &urg, NULL));
    CHECK(count == before + 1, "the blocked SIGURG was not delivered as it was unblocked: %d",
          (int)(count - before));
    /* sigwait takes one it blocks, raised, and its handler does not run. */
    PT(pthread_sigmask(SIG_BLOCK, &urg, NULL));
    CHECK(raise(SIGURG) == 0, "raise");
    int sig = 0;
    PT(sigwait(&urg, &sig));
    CHECK(sig == SIGURG, "sigwait returned %d", sig);
    siginfo_t si;
    struct timespec ts = {0, 0};
    CHECK(raise(SIGURG) == 0, "raise");
    CHECK(sigtimedwait(&urg, &si, &ts) == SIGURG, "sigtimedwait: %s", strerror(errno));
    CHECK(si.si_code == SI_TKILL || si.si_code == SI_USER, "sigtimedwait: si_code %d", si.si_code);
    CHECK(si.si_pid == getpid(), "sigtimedwait: si_pid %d", (int)si.si_pid);
    CHECK(count == before + 1, "a SIGURG taken by sigwait ran its handler");
    (void)pending;
    return NULL;
}

int main(void) {
    alarm(60); /* a hang guard */
    /* Before the first thread. */
    install(counted, 0);
    disposition((void *)counted, 1);
    preemption("handler installed before the first thread");
    disposition((void *)counted, 1);

    /* raise, from the initial thread and from a user thread among computing ones. */
    for (int i = 0; i < 100; i++) {
        CHECK(raise(SIGURG) == 0, "raise");
        CHECK(count == i + 1, "raise %d from the initial thread: %d", i, (int)count);
    }
    stop = 0;
    pthread_t c[3], r;
    for (int i = 0; i < 3; i++)
        PT(pthread_create(&c[i], NULL, computing, NULL));
    count = 0;
    PT(pthread_create(&r, NULL, raiser, NULL));
    PT(pthread_join(r, NULL));
    CHECK(count == 200, "raise from a user thread: %d", (int)count);

    /* pthread_kill of a computing thread, each one answered before the next. */
    count = 0;
    for (int i = 0; i < 30; i++) {
        PT(pthread_kill(c[i % 3], SIGURG));
        wait_count(i + 1, "pthread_kill of a computing thread");
    }
    stop = 1;
    for (int i = 0; i < 3; i++)
        PT(pthread_join(c[i], NULL));

    /* Installed after the first thread: a handler without SA_SIGINFO. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = plain;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    CHECK(sigaction(SIGURG, &sa, NULL) == 0, "sigaction");
    disposition((void *)plain, 0);
    count = 0;
    preemption("handler installed after the first thread");

    /* pthread_kill of a thread blocked in pause: its pause ends with EINTR. */
    int want = 20;
    count = 0;
    pthread_t p;
    PT(pthread_create(&p, NULL, pausing, &want));
    for (int i = 0; i < want; i++) {
        usleep(1000);
        PT(pthread_kill(p, SIGURG));
        wait_count(i + 1, "pthread_kill of a thread in pause");
    }
    PT(pthread_join(p, NULL));

    /* kill and sigqueue of the process, with their siginfo. */
    install(counted, 0);
    count = 0;
    for (int i = 0; i < 50; i++) {
        CHECK(kill(getpid(), SIGURG) == 0, "kill");
        wait_count(2 * i + 1, "kill");
        CHECK(last_code == SI_USER, "kill: si_code %d", (int)last_code);
        union sigval v = {.sival_ptr = (void *)(intptr_t)(1000 + i)};
        CHECK(sigqueue(getpid(), SIGURG, v) == 0, "sigqueue");
        wait_count(2 * i + 2, "sigqueue");
        CHECK(last_code == SI_QUEUE && last_value == 1000 + i, "sigqueue: si_code %d value %ld",
              (int)last_code, (long)last_value);
    }

    /* SIG_IGN: the program's SIGURGs are dropped, preemption goes on; nothing lost after. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    CHECK(sigaction(SIGURG, &ign, NULL) == 0, "sigaction SIG_IGN");
    disposition((void *)SIG_IGN, 0);
    count = 0;
    preemption("SIG_IGN");
    CHECK(raise(SIGURG) == 0, "raise");
    CHECK(count == 0, "an ignored SIGURG ran the handler");
    install(counted, 0);
    CHECK(raise(SIGURG) == 0, "raise");
    CHECK(count == 1, "after SIG_IGN, the handler ran %d times", (int)count);

    /* SA_RESETHAND: the first runs it, and resets the disposition to SIG_DFL (ignored). */
    install(counted, SA_RESETHAND);
    count = 0;
    CHECK(raise(SIGURG) == 0, "raise");
    CHECK(raise(SIGURG) == 0, "raise");
    CHECK(count == 1, "SA_RESETHAND: the handler ran %d times", (int)count);
    disposition((void *)SIG_DFL, 0);
    preemption("SIG_DFL after SA_RESETHAND");

    /* A SIGURG a user thread blocks waits for it to unblock it; sigwait takes one. */
    install(counted, 0);
    count = 0;
    pthread_t b;
    PT(pthread_create(&b, NULL, blocking, NULL));
    PT(pthread_join(b, NULL));
    printf("ok\n");
    return 0;
}
