/* A signal sent with pthread_kill to a thread that blocks it stays pending with that thread,
 * and is delivered to it when it unblocks it (POSIX: before pthread_sigmask returns), even
 * if it has moved meanwhile. The thread blocks SIGUSR1 and waits in waitpid while it is sent;
 * then it yields among two computing threads (under the library, it runs on other kernel
 * threads) and unblocks it. The library raised such a signal on the kernel thread the target
 * blocked on, where the kernel kept it when the thread moved: it was never delivered to it
 * (and would have run on whichever thread ran on that kernel thread next). */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int handled, in_call, stop;

static void handler(int sig) {
    (void)sig;
    handled++;
}

static void *compute(void *arg) {
    (void)arg;
    while (!stop)
        ;
    return NULL;
}

static void *target(void *arg) {
    (void)arg;
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    PT(pthread_sigmask(SIG_BLOCK, &usr1, NULL));
    pid_t c = fork();
    CHECK(c >= 0, "fork");
    if (c == 0) {
        usleep(100000);
        _exit(0);
    }
    in_call = 1;
    int st;
    CHECK(waitpid(c, &st, 0) == c, "waitpid: %s", strerror(errno));
    CHECK(handled == 0, "the handler ran while the signal was blocked");
    for (int i = 0; i < 50; i++)
        sched_yield();
    PT(pthread_sigmask(SIG_UNBLOCK, &usr1, NULL));
    CHECK(handled == 1, "the signal sent while blocked was not delivered at its unblocking: %d",
          handled);
    return NULL;
}

int main(void) {
    alarm(60); /* a hang guard */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    PT(pthread_sigmask(SIG_BLOCK, &usr1, NULL)); /* only the target ever takes it */
    pthread_t c1, c2;
    PT(pthread_create(&c1, NULL, compute, NULL));
    PT(pthread_create(&c2, NULL, compute, NULL));
    for (int round = 0; round < 3; round++) {
        pthread_t t;
        handled = 0;
        in_call = 0;
        PT(pthread_create(&t, NULL, target, NULL));
        while (!in_call)
            usleep(1000);
        usleep(30000); /* in its waitpid */
        PT(pthread_kill(t, SIGUSR1));
        PT(pthread_join(t, NULL));
    }
    stop = 1;
    PT(pthread_join(c1, NULL));
    PT(pthread_join(c2, NULL));
    printf("ok\n");
    return 0;
}
