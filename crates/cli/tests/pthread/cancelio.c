/* Deferred cancellation of threads blocked in cancellation points that wait for the outside
 * world, with no data ever coming: a read on a pipe, a write on a full pipe, an accept on a listening socket, a poll,
 * a nanosleep, a sigwait, a connect whose handshake never completes (glibc treats each as a
 * cancellation point). Each thread is cancelled and joined: its cleanup handler ran and the
 * join gives PTHREAD_CANCELED. Then a read racing with data and a cancellation: the thread
 * either read the byte (and returns it, acting on the cancellation at its next point) or was
 * cancelled with the byte still in the pipe — never both, never neither. That last check runs
 * under the library only (the harness passes an argument there): glibc 2.36 itself can lose
 * the byte, acting on a cancellation that arrives after its read returned (glibc bug 12683,
 * fixed in 2.39). Last, a thread with a cancellation pending that overflows its stack still
 * ends its process (the runtime's overflow message is a plain system call: through the
 * library's `write` it acted on the cancellation from the fault handler, and the process went
 * on). */
#include "check.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { READ, WRITE, ACCEPT, POLL, SLEEP, SIGWAIT, CONNECT, CASES };
static const char *names[CASES] = {"read",      "write",   "accept", "poll",
                                   "nanosleep", "sigwait", "connect"};

static int pipe_fds[2], full_pipe[2], listener, full_listener;
static struct sockaddr_in full_addr;
#include "cancel_cases.h"

static void *blocked(void *arg) {
    long which = (long)arg;
    char b;
    pthread_cleanup_push(cleanup, arg);
    started[which] = 1;
    switch (which) {
    case READ:
        read(pipe_fds[0], &b, 1);
        break;
    case WRITE:
        write(full_pipe[1], "x", 1);
        break;
    case ACCEPT:
        accept(listener, NULL, NULL);
        break;
    case POLL: {
        struct pollfd p = {pipe_fds[0], POLLIN, 0};
        poll(&p, 1, -1);
        break;
    }
    case SLEEP: {
        struct timespec ts = {1000, 0};
        nanosleep(&ts, NULL);
        break;
    }
    case SIGWAIT: {
        sigset_t set;
        int sig;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR2);
        sigwait(&set, &sig);
        break;
    }
    case CONNECT: {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        connect(s, (struct sockaddr *)&full_addr, sizeof full_addr);
        break;
    }
    }
    pthread_cleanup_pop(0);
    return (void *)1L; /* reached only if the call returned */
}

/* A listening socket on the loopback; its address in *addr. */
static int listening(int backlog, struct sockaddr_in *addr) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", strerror(errno));
    CHECK(listen(s, backlog) == 0, "listen: %s", strerror(errno));
    socklen_t len = sizeof a;
    CHECK(getsockname(s, (struct sockaddr *)&a, &len) == 0, "getsockname");
    if (addr)
        *addr = a;
    return s;
}

/* Races a cancellation with data: the reader either got the byte or was cancelled before
 * taking it (the byte then still in the pipe). */
static volatile int race_got;
static void *race_reader(void *arg) {
    (void)arg;
    char b;
    race_got = 0;
    if (read(pipe_fds[0], &b, 1) == 1)
        race_got = 1;
    return (void *)2L;
}

static void race(int strict) {
    int read_it = 0, cancelled = 0;
    for (int i = 0; i < 300; i++) {
        pthread_t t;
        void *r;
        PT(pthread_create(&t, NULL, race_reader, NULL));
        for (int k = 0; k < i % 7; k++)
            sched_yield();
        CHECK(write(pipe_fds[1], "x", 1) == 1, "write");
        PT(pthread_cancel(t));
        PT(pthread_join(t, &r));
        char b;
        struct pollfd p = {pipe_fds[0], POLLIN, 0};
        int left = poll(&p, 1, 0) == 1 && read(pipe_fds[0], &b, 1) == 1;
        if (!strict)
            continue;
        if (r == PTHREAD_CANCELED) {
            CHECK(!race_got && left, "round %d: cancelled, read %d, byte left %d", i, race_got, left);
            cancelled++;
        } else {
            CHECK(r == (void *)2L && race_got && !left, "round %d: returned %p, read %d, left %d", i,
                  r, race_got, left);
            read_it++;
        }
    }
    (void)read_it;
    (void)cancelled;
}

/* Recursion the compiler keeps (each frame's array is used after the call), bounded only
 * by a limit the stack never reaches. */
static volatile int limit = 1 << 30;
static int deep(int n) {
    volatile char frame[512];
    frame[0] = (char)n;
    if (n >= limit)
        return 0;
    return deep(n + 1) + frame[0];
}

static volatile int overflow_go, overflow_started;
static void *overflower(void *arg) {
    (void)arg;
    overflow_started = 1;
    while (!overflow_go)
        ; /* no cancellation point: the request stays pending */
    return (void *)(long)deep(0);
}

/* In a child: the thread is cancelled (deferred, pending), then overflows its stack. The
 * child must die of the overflow (SIGSEGV on glibc's threads, the runtime's abort under the
 * library), not exit as if the thread had been cancelled. */
static void overflow_with_a_cancel_pending(void) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        pthread_t t;
        pthread_attr_t a;
        PT(pthread_attr_init(&a));
        PT(pthread_attr_setstacksize(&a, 256 * 1024));
        PT(pthread_create(&t, &a, overflower, NULL));
        while (!overflow_started)
            usleep(1000);
        PT(pthread_cancel(t));
        overflow_go = 1;
        pthread_join(t, NULL);
        _exit(0); /* not reached: the process dies first */
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGABRT),
          "a thread that overflowed its stack with a cancellation pending: status %#x", status);
}

int main(int argc, char **argv) {
    (void)argv;
    CHECK(pipe(pipe_fds) == 0 && pipe(full_pipe) == 0, "pipe");
    /* Filled without blocking, then blocking again: the next write waits. */
    int fl = fcntl(full_pipe[1], F_GETFL);
    CHECK(fcntl(full_pipe[1], F_SETFL, fl | O_NONBLOCK) == 0, "fcntl");
    while (write(full_pipe[1], "fill", 4) > 0)
        ;
    CHECK(fcntl(full_pipe[1], F_SETFL, fl) == 0, "fcntl");
    listener = listening(8, NULL);
    /* A listener with a backlog of 0 and one connection already queued: the next connect's
     * handshake is not answered (Linux drops its SYN while the queue is full). */
    full_listener = listening(0, &full_addr);
    int first = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(first, (struct sockaddr *)&full_addr, sizeof full_addr) == 0, "first connect");
    int second = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(second, (struct sockaddr *)&full_addr, sizeof full_addr);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    PT(pthread_sigmask(SIG_BLOCK, &set, NULL));
    for (long w = 0; w < CASES; w++)
        cancel_blocked(w, 50000);
    race(argc > 1);
    overflow_with_a_cancel_pending();
    printf("ok\n");
    return 0;
}
