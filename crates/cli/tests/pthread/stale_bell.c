/* A sigtimedwait that dequeues a pthread_kill meant for another thread waits on.
 *
 * Thread U accepts SIGUSR2 and yields again and again, so it is forever leaving the kernel
 * thread it ran on; thread B sends it SIGUSR2 with pthread_kill, each after the last one's
 * handler ran. Thread W blocks SIGUSR2 and waits for it with sigtimedwait (1 ms) in a loop,
 * beside two more threads that yield. No SIGUSR2 is ever meant for W, and W runs no handler:
 * every wait must end with EAGAIN.
 *
 * Under the library a pthread_kill of a running thread also queues a "doorbell" SIGUSR2 on the
 * kernel thread it runs on, which the handler wrapper there drops if the thread has left. When
 * W's wait ran on that kernel thread first, the kernel handed the doorbell to W's wait, which
 * ended with EINTR, as if a handler had run. */
#define _GNU_SOURCE
#include "check.h"
#include "moves.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#define SIGNALS 3000

static atomic_int handled, waits_done, stop_w;
static pthread_t u;

static void on_usr2(int sig) {
    (void)sig;
    atomic_fetch_add(&handled, 1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *waiter(void *arg) {
    (void)arg;
    sigset_t two;
    sigemptyset(&two);
    sigaddset(&two, SIGUSR2);
    PT(pthread_sigmask(SIG_BLOCK, &two, NULL));
    struct timespec zero = {0, 0};
    while (!atomic_load(&stop_w)) {
        siginfo_t info;
        int r = sigtimedwait(&two, &info, &zero);
        CHECK(r == -1 && errno == EAGAIN, "sigtimedwait returned %d (errno %d) after %d waits", r,
              errno, atomic_load(&waits_done));
        atomic_fetch_add(&waits_done, 1);
        sched_yield();
    }
    return NULL;
}

int main(void) {
    struct sigaction sa = {0};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_usr2;
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
    pthread_t w, y[2];
    PT(pthread_create(&u, NULL, yield_until_stopped, NULL));
    PT(pthread_create(&w, NULL, waiter, NULL));
    for (int i = 0; i < 2; i++)
        PT(pthread_create(&y[i], NULL, yield_until_stopped, NULL));
    /* This thread is B. */
    for (int i = 0; i < SIGNALS; i++) {
        PT(pthread_kill(u, SIGUSR2));
        double until = now() + 5;
        while (atomic_load(&handled) == i && now() < until)
            sched_yield();
        CHECK(atomic_load(&handled) == i + 1, "signal %d: handled %d times after 5 s", i,
              atomic_load(&handled));
    }
    atomic_store(&stop_w, 1);
    PT(pthread_join(w, NULL));
    stop_yielders();
    PT(pthread_join(u, NULL));
    for (int i = 0; i < 2; i++)
        PT(pthread_join(y[i], NULL));
    printf("ok: %d signals, %d waits\n", SIGNALS, atomic_load(&waits_done));
    return 0;
}
