/* Signals sent to a busy thread by two others, each waiting for its handler to answer
 * through a semaphore before sending the next (the Open POSIX suite's pthread_mutex_lock/3-1
 * shape): for a second the worker locks and unlocks mutexes while SIGUSR1 and SIGUSR2 arrive;
 * every signal's handler runs, so neither sender is left waiting. Under the library this hung
 * when a handler's signal stayed blocked and pending on an idle kernel thread. */
#include "check.h"
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

static volatile int sending = 1, working = 1;
static sem_t answered[2];
static pthread_t worker;
static volatile long handled[2], sent[2];

static void on_usr1(int sig) {
    (void)sig;
    handled[0]++;
    sem_post(&answered[0]);
}

static void on_usr2(int sig) {
    (void)sig;
    handled[1]++;
    sem_post(&answered[1]);
}

static void *work(void *arg) {
    (void)arg;
    pthread_mutex_t m[4];
    for (int i = 0; i < 4; i++)
        PT(pthread_mutex_init(&m[i], NULL));
    while (working)
        for (int i = 0; i < 4; i++) {
            PT(pthread_mutex_lock(&m[i]));
            PT(pthread_mutex_unlock(&m[i]));
        }
    return NULL;
}

static void *send_signals(void *arg) {
    int which = (int)(long)arg;
    while (sending) {
        while (sem_wait(&answered[which]) != 0)
            CHECK(errno == EINTR, "sem_wait");
        sent[which]++;
        PT(pthread_kill(worker, which ? SIGUSR2 : SIGUSR1));
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
    for (int i = 0; i < 2; i++)
        CHECK(sem_init(&answered[i], 0, 1) == 0, "sem_init");
    PT(pthread_create(&worker, NULL, work, NULL));
    pthread_t s[2];
    for (int i = 0; i < 2; i++)
        PT(pthread_create(&s[i], NULL, send_signals, (void *)(long)i));
    sleep(1);
    sending = 0;
    /* A sender may wait for the answer to its last signal: the worker, still working, runs
     * its handler. Then the worker stops. */
    for (int i = 0; i < 2; i++)
        PT(pthread_join(s[i], NULL));
    working = 0;
    PT(pthread_join(worker, NULL));
    CHECK(handled[0] > 0 && handled[1] > 0, "handled %ld and %ld", handled[0], handled[1]);
    printf("ok: %ld and %ld signals handled\n", handled[0], handled[1]);
    return 0;
}
