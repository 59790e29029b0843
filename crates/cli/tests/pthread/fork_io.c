/* fork while a thread of the parent waits in a pipe read (under the library, parked on the
 * runtime's poller), twenty times: each child's threads pass a thousand bytes through a pipe
 * of their own while the parent's do the same, and the parent's first reader gets its byte
 * at the end. Under the library the child inherited the parent's poller (its epoll instance
 * shared with the parent, its place held by a parent's processor): its first read waited
 * for good. */
#include "check.h"
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static void *reader(void *arg) {
    int fd = (int)(long)arg;
    char c;
    long n = 0;
    while (read(fd, &c, 1) == 1 && c != 'q')
        n++;
    return (void *)n;
}

static void *writer(void *arg) {
    int fd = (int)(long)arg;
    for (int i = 0; i < 1000; i++) {
        CHECK(write(fd, "x", 1) == 1, "write");
        if (i % 10 == 0) usleep(50);
    }
    CHECK(write(fd, "q", 1) == 1, "write");
    return NULL;
}

static int relay(void) {
    int p[2];
    if (pipe(p) != 0) return 1;
    pthread_t r, w;
    if (pthread_create(&r, NULL, reader, (void *)(long)p[0]) != 0) return 2;
    if (pthread_create(&w, NULL, writer, (void *)(long)p[1]) != 0) return 3;
    void *n;
    if (pthread_join(w, NULL) != 0 || pthread_join(r, &n) != 0) return 4;
    close(p[0]); close(p[1]);
    return (long)n == 1000 ? 0 : 5;
}

int main(void) {
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    pthread_t r;
    PT(pthread_create(&r, NULL, reader, (void *)(long)p[0]));
    usleep(20000); /* the reader waits in read */
    for (int k = 0; k < 20; k++) {
        /* parent relays too, while the child does */
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0)
            _exit(relay());
        CHECK(relay() == 0, "parent relay");
        int status;
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d status %#x", k, status);
    }
    CHECK(write(p[1], "aq", 2) == 2, "write");
    void *n;
    PT(pthread_join(r, &n));
    CHECK((long)n == 1, "reader got %ld", (long)n);
    printf("ok\n");
    return 0;
}
