/* fork from a created thread: the child has one thread (the caller), can create and join
 * threads of its own, and the parent's threads go on; and forks while other threads create
 * and join threads (the library's kept control blocks are under a lock a child must not
 * inherit taken) leave every child able to create threads. */
#include "check.h"
#include <dirent.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static int threads_in_process(void) {
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL, "opendir /proc/self/task");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static void *child_thread(void *arg) { return (void *)((long)arg * 2); }

static void *forker(void *arg) {
    (void)arg;
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        int n = threads_in_process();
        if (n != 1) {
            fprintf(stderr, "child: %d threads after fork, not 1\n", n);
            _exit(3);
        }
        pthread_t t[4];
        for (long i = 0; i < 4; i++)
            if (pthread_create(&t[i], NULL, child_thread, (void *)i) != 0)
                _exit(4);
        for (long i = 0; i < 4; i++) {
            void *r;
            if (pthread_join(t[i], &r) != 0 || (long)r != i * 2)
                _exit(5);
        }
        exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    return (void *)1L;
}

static void *busy(void *arg) {
    volatile long *stop = arg;
    long n = 0;
    while (!*stop)
        n++, usleep(100);
    return (void *)n;
}

static void *nothing(void *arg) { return arg; }

/* Creates and joins threads until told to stop: the library takes its kept blocks' lock
 * on both sides. */
static void *churn(void *arg) {
    volatile long *stop = arg;
    long n = 0;
    while (!*stop) {
        pthread_t t;
        PT(pthread_create(&t, NULL, nothing, NULL));
        PT(pthread_join(t, NULL));
        n++;
    }
    return (void *)n;
}

/* Forks `rounds` times beside the churners; each child creates and joins one thread. */
static void *churn_forker(void *arg) {
    long rounds = (long)arg;
    for (long i = 0; i < rounds; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0, "fork failed");
        if (pid == 0) {
            pthread_t t;
            if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
                _exit(6);
            _exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %ld status %#x", i, status);
    }
    return NULL;
}

int main(void) {
    volatile long stop = 0;
    pthread_t b, f;
    PT(pthread_create(&b, NULL, busy, (void *)&stop));
    PT(pthread_create(&f, NULL, forker, NULL));
    void *r;
    PT(pthread_join(f, &r));
    CHECK(r == (void *)1L, "forker returned %p", r);
    stop = 1;
    PT(pthread_join(b, NULL));

    volatile long stop_churn = 0;
    pthread_t c[2], cf;
    for (int i = 0; i < 2; i++)
        PT(pthread_create(&c[i], NULL, churn, (void *)&stop_churn));
    PT(pthread_create(&cf, NULL, churn_forker, (void *)30L));
    PT(pthread_join(cf, NULL));
    stop_churn = 1;
    for (int i = 0; i < 2; i++)
        PT(pthread_join(c[i], NULL));
    printf("ok\n");
    return 0;
}
