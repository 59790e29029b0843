/* A process-directed signal sent while its one accepting thread is still there, which then
 * ends at once: the kernel runs the handler on that thread before it ends (it accepted the
 * signal when it was sent), so the sender's answer always comes. Round after round a new
 * accepting thread spins (with sched_yield) until the initial thread, which like every other
 * thread blocks SIGUSR1, has sent kill(SIGUSR1) and told it to go; the initial thread then
 * waits for the handler's sem_post, and checks it ran on that thread.
 *
 * Under the library the signal went to whichever kernel thread accepted it (an idle
 * processor's, or the library's forwarder) and was placed a moment later, when the accepting
 * thread might have ended: it then stayed pending for the process with no thread to take it,
 * and the wait for the answer timed out (5 runs of 5, at rounds 1 to 200). */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 300 };

static sem_t answered;
static atomic_int go, wrong_thread;
static pthread_t accepting;

static void on_usr1(int sig) {
    (void)sig;
    if (!pthread_equal(pthread_self(), accepting))
        atomic_fetch_add(&wrong_thread, 1);
    sem_post(&answered);
}

static void *accept_then_end(void *arg) {
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    PT(pthread_sigmask(SIG_UNBLOCK, &s, NULL));
    while (!atomic_load(&go))
        sched_yield();
    return NULL;
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    CHECK(sem_init(&answered, 0, 0) == 0, "sem_init");
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    PT(pthread_sigmask(SIG_BLOCK, &s, NULL));
    for (int r = 0; r < ROUNDS; r++) {
        atomic_store(&go, 0);
        PT(pthread_create(&accepting, NULL, accept_then_end, NULL));
        /* Let it run and open its mask. */
        for (int i = 0; i < r % 7; i++)
            sched_yield();
        CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
        atomic_store(&go, 1);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 5;
        int e;
        while ((e = sem_timedwait(&answered, &t)) != 0 && errno == EINTR)
            ;
        CHECK(e == 0, "round %d: the signal's handler never ran (errno %d)", r, errno);
        PT(pthread_join(accepting, NULL));
    }
    CHECK(atomic_load(&wrong_thread) == 0, "%d handlers ran on another thread",
          atomic_load(&wrong_thread));
    printf("ok\n");
    return 0;
}
