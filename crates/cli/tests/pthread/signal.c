/* A signal sent to one thread with pthread_kill is handled by that thread: its handler
 * sees that thread's pthread_self. (Bounded: the target gives up after 5 s, and the test
 * fails, rather than hang.) */
#include "check.h"
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static pthread_t handled_by;
static volatile int ready;

static void on_usr1(int sig) {
    (void)sig;
    handled_by = pthread_self();
    handled = 1;
}

static void *target(void *arg) {
    (void)arg;
    ready = 1;
    for (int i = 0; i < 5000 && !handled; i++)
        usleep(1000);
    return NULL;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    pthread_t t;
    PT(pthread_create(&t, NULL, target, NULL));
    while (!ready)
        usleep(100);
    PT(pthread_kill(t, SIGUSR1));
    PT(pthread_join(t, NULL));
    CHECK(handled, "the signal was never handled");
    CHECK(pthread_equal(handled_by, t), "handled by another thread (%s)",
          pthread_equal(handled_by, pthread_self()) ? "the main thread" : "an unknown one");
    printf("ok\n");
    return 0;
}
