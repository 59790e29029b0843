/* fork from a created thread: the child has one thread (the caller), can create and join
 * threads of its own, and the parent's threads go on. */
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
    printf("ok\n");
    return 0;
}
