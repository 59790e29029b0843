/* Real-time priorities order the waiters: threads created with SCHED_FIFO and explicit
 * priorities 5, 20 and 10 all wait for a mutex the initial thread holds; unlocked, it goes
 * to them highest priority first (20, 10, 5), as POSIX asks of priority scheduling.
 * Creating SCHED_FIFO threads needs the privilege to (root, or CAP_SYS_NICE) on glibc's
 * threads: without it the test says so and passes. */
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t arrived = PTHREAD_COND_INITIALIZER;
static int waiting, order[3], taken;

static void *waiter(void *arg) {
    int prio = (int)(long)arg;
    PT(pthread_mutex_lock(&gate));
    waiting++;
    PT(pthread_cond_signal(&arrived));
    PT(pthread_mutex_unlock(&gate));
    PT(pthread_mutex_lock(&mutex));
    order[taken++] = prio;
    PT(pthread_mutex_unlock(&mutex));
    return NULL;
}

int main(void) {
    static const int prios[3] = {5, 20, 10};
    pthread_t t[3];
    PT(pthread_mutex_lock(&mutex));
    for (int i = 0; i < 3; i++) {
        pthread_attr_t a;
        struct sched_param sp = {.sched_priority = prios[i]};
        PT(pthread_attr_init(&a));
        PT(pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED));
        PT(pthread_attr_setschedpolicy(&a, SCHED_FIFO));
        PT(pthread_attr_setschedparam(&a, &sp));
        int e = pthread_create(&t[i], &a, waiter, (void *)(long)prios[i]);
        if (e == EPERM) {
            printf("ok (skipped: no privilege to create SCHED_FIFO threads)\n");
            return 0;
        }
        CHECK(e == 0, "pthread_create returned %d", e);
        PT(pthread_attr_destroy(&a));
        /* Each is queued on the mutex before the next is made. */
        PT(pthread_mutex_lock(&gate));
        while (waiting < i + 1)
            PT(pthread_cond_wait(&arrived, &gate));
        PT(pthread_mutex_unlock(&gate));
        usleep(20000);
    }
    PT(pthread_mutex_unlock(&mutex));
    for (int i = 0; i < 3; i++)
        PT(pthread_join(t[i], NULL));
    CHECK(order[0] == 20 && order[1] == 10 && order[2] == 5, "the mutex went to %d, %d, %d",
          order[0], order[1], order[2]);
    printf("ok\n");
    return 0;
}
