/* A pthread_kill of a thread that leaves its kernel thread before the signal is delivered
 * there: the signal follows the thread, and its handler runs on that thread.
 *
 * Thread T yields again and again, so that it is forever leaving the kernel thread it ran
 * on; three spinners, which accept SIGUSR2 too, yield beside it, and run on the kernel
 * threads T leaves. Thread B sends T 1,000 SIGUSR2s with pthread_kill, one at a time, each
 * after the last one's handler ran. Every handler must run on T.
 *
 * Under the library pthread_kill sent the signal to T's kernel thread by tgkill and forgot
 * it: when T had left that kernel thread before the kernel delivered it, the handler ran on
 * whatever ran there next with the signal open (here a spinner), or the signal was passed on
 * as if sent to the process (the Open POSIX suite's pthread_kill/1-2, whose target goes to
 * sleep at once, failed now and then: "The signal handler was not trigged in the killed
 * thread"). */
#define _GNU_SOURCE
#include "check.h"
#include "moves.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#define SIGNALS 1000
#define SPINNERS 3

static atomic_int handled, wrong_thread;
static pthread_t t_thread;

static void on_usr2(int sig) {
    (void)sig;
    if (!pthread_equal(pthread_self(), t_thread))
        atomic_fetch_add(&wrong_thread, 1);
    atomic_fetch_add(&handled, 1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void) {
    struct sigaction sa = {0};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_usr2;
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
    pthread_t spinners[SPINNERS];
    PT(pthread_create(&t_thread, NULL, yield_until_stopped, NULL));
    for (int i = 0; i < SPINNERS; i++)
        PT(pthread_create(&spinners[i], NULL, yield_until_stopped, NULL));
    /* This thread is B. */
    for (int i = 0; i < SIGNALS; i++) {
        PT(pthread_kill(t_thread, SIGUSR2));
        double until = now() + 5;
        while (atomic_load(&handled) == i && now() < until)
            sched_yield();
        CHECK(atomic_load(&handled) == i + 1, "signal %d: handled %d times after 5 s", i,
              atomic_load(&handled));
        CHECK(atomic_load(&wrong_thread) == 0, "signal %d: a handler ran on another thread", i);
    }
    stop_yielders();
    PT(pthread_join(t_thread, NULL));
    for (int i = 0; i < SPINNERS; i++)
        PT(pthread_join(spinners[i], NULL));
    printf("ok: %d signals, each handled on its thread\n", SIGNALS);
    return 0;
}
