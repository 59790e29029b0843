/* Reads and writes on pipes and sockets in created threads, as a blocking program makes
 * them: data written later arrives; a write larger than the pipe goes through whole; a
 * socket's SO_RCVTIMEO ends a read with EAGAIN; a descriptor the program made non-blocking
 * answers EAGAIN at once; a signal whose handler lacks SA_RESTART ends a waiting read with
 * EINTR, one with SA_RESTART does not. recvmsg with MSG_WAITALL waits for the whole
 * message sent in two parts; sendmsg of 1 MiB goes through whole and passes a descriptor
 * (SCM_RIGHTS) with its first part. Under schedlab exec ("expect-migration"), 64 threads
 * waiting in reads, and 64 in recvmsg, hold no kernel thread each: the process has far fewer
 * than 64. */
#define _GNU_SOURCE
#include "check.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define READERS 64
#define BIG (1 << 20)

static int pipes[READERS][2];
static volatile int started;

static void *reader(void *arg) {
    int i = (int)(long)arg;
    char c;
    __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
    ssize_t n = read(pipes[i][0], &c, 1);
    CHECK(n == 1 && c == (char)i, "reader %d got %zd bytes, %d", i, n, c);
    return NULL;
}

static int tasks(void) {
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL, "opendir /proc/self/task");
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 2;
}

static void *big_writer(void *arg) {
    int fd = (int)(long)arg;
    char *buf = malloc(BIG);
    CHECK(buf != NULL, "malloc");
    for (int i = 0; i < BIG; i++)
        buf[i] = (char)(i * 7);
    ssize_t n = write(fd, buf, BIG);
    CHECK(n == BIG, "a %d-byte write to a pipe returned %zd (%s)", BIG, n, strerror(errno));
    free(buf);
    return NULL;
}

static volatile int handled;
static void on_signal(int sig) {
    (void)sig;
    handled++;
}

struct waiting {
    int fd;
    ssize_t n;
    int err;
    volatile int ready;
};

static void *blocked_read(void *arg) {
    struct waiting *w = arg;
    char c;
    w->ready = 1;
    w->n = read(w->fd, &c, 1);
    w->err = errno;
    return NULL;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A thread blocked in read gets a signal whose handler has (or lacks) SA_RESTART. */
static void signal_case(int restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = restart ? SA_RESTART : 0;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    struct waiting w = {.fd = p[0]};
    pthread_t t;
    int before = handled;
    PT(pthread_create(&t, NULL, blocked_read, &w));
    while (!w.ready)
        sleep_ms(1);
    sleep_ms(50); /* let it block */
    PT(pthread_kill(t, SIGUSR1));
    sleep_ms(50);
    CHECK(write(p[1], "x", 1) == 1, "write");
    PT(pthread_join(t, NULL));
    CHECK(handled == before + 1, "the handler ran %d times", handled - before);
    if (restart)
        CHECK(w.n == 1, "with SA_RESTART the read returned %zd (%s)", w.n, strerror(w.err));
    else
        CHECK(w.n == -1 && w.err == EINTR, "without SA_RESTART the read returned %zd (%s)", w.n,
              strerror(w.err));
    close(p[0]);
    close(p[1]);
}

struct timed {
    int fd;
    ssize_t n;
    int err;
    double waited;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *timed_read(void *arg) {
    struct timed *w = arg;
    char c;
    double t0 = now();
    w->n = read(w->fd, &c, 1);
    w->err = errno;
    w->waited = now() - t0;
    return NULL;
}

static int socks[READERS][2];

/* Waits for 8 bytes with MSG_WAITALL: they come in two parts. */
static void *msg_reader(void *arg) {
    int i = (int)(long)arg;
    char buf[8];
    struct iovec v[2] = {{buf, 3}, {buf + 3, 5}};
    struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
    __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
    ssize_t n = recvmsg(socks[i][0], &m, MSG_WAITALL);
    CHECK(n == 8, "recvmsg with MSG_WAITALL returned %zd (%s)", n, strerror(errno));
    for (int k = 0; k < 8; k++)
        CHECK(buf[k] == (char)(i + k), "reader %d byte %d", i, k);
    return NULL;
}

/* Sends 1 MiB in one sendmsg, with a descriptor riding on it. */
static void *msg_writer(void *arg) {
    int *fds = arg; /* the socket, the descriptor to pass */
    char *buf = malloc(BIG);
    CHECK(buf != NULL, "malloc");
    for (int i = 0; i < BIG; i++)
        buf[i] = (char)(i * 3);
    struct iovec v[2] = {{buf, 1000}, {buf + 1000, BIG - 1000}};
    union {
        char bytes[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr m = {.msg_iov = v, .msg_iovlen = 2, .msg_control = control.bytes,
                       .msg_controllen = sizeof control.bytes};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fds[1], sizeof(int));
    ssize_t n = sendmsg(fds[0], &m, 0);
    CHECK(n == BIG, "a %d-byte sendmsg returned %zd (%s)", BIG, n, strerror(errno));
    free(buf);
    return NULL;
}

static void msg_cases(int under_library) {
    started = 0;
    for (int i = 0; i < READERS; i++)
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, socks[i]) == 0, "socketpair");
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++)
        PT(pthread_create(&t[i], NULL, msg_reader, (void *)(long)i));
    while (started < READERS)
        sleep_ms(1);
    sleep_ms(100);
    int n = tasks();
    if (under_library)
        CHECK(n < READERS / 2, "%d kernel threads while %d threads wait in recvmsg", n, READERS);
    for (int i = 0; i < READERS; i++) {
        char b[8];
        for (int k = 0; k < 8; k++)
            b[k] = (char)(i + k);
        CHECK(send(socks[i][1], b, 2, 0) == 2, "send");
    }
    sleep_ms(20); /* the first parts arrive alone */
    for (int i = 0; i < READERS; i++) {
        char b[8];
        for (int k = 0; k < 8; k++)
            b[k] = (char)(i + k);
        CHECK(send(socks[i][1], b + 2, 6, 0) == 6, "send");
    }
    for (int i = 0; i < READERS; i++) {
        PT(pthread_join(t[i], NULL));
        close(socks[i][0]);
        close(socks[i][1]);
    }

    /* 1 MiB through a socket pair whose buffer holds far less, with a pipe's write end. */
    int sv[2], p[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    CHECK(pipe(p) == 0, "pipe");
    int fds[2] = {sv[0], p[1]};
    pthread_t w;
    PT(pthread_create(&w, NULL, msg_writer, fds));
    char *got = malloc(BIG);
    CHECK(got != NULL, "malloc");
    size_t have = 0;
    int passed = -1;
    while (have < BIG) {
        union {
            char bytes[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } control;
        struct iovec v = {got + have, BIG - have > 65536 ? 65536 : BIG - have};
        struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = control.bytes,
                           .msg_controllen = sizeof control.bytes};
        ssize_t r = recvmsg(sv[1], &m, 0);
        CHECK(r > 0, "recvmsg returned %zd (%s)", r, strerror(errno));
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                CHECK(have == 0 && passed == -1, "a descriptor came after %zu bytes", have);
                memcpy(&passed, CMSG_DATA(c), sizeof(int));
            }
        have += (size_t)r;
    }
    PT(pthread_join(w, NULL));
    for (int i = 0; i < BIG; i++)
        CHECK(got[i] == (char)(i * 3), "byte %d", i);
    free(got);
    CHECK(passed >= 0, "no descriptor came with the data");
    CHECK(write(passed, "x", 1) == 1, "write to the passed descriptor");
    char x;
    CHECK(read(p[0], &x, 1) == 1 && x == 'x', "the passed descriptor is the pipe");
    close(passed);
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}

int main(int argc, char **argv) {
    int under_library = argc > 1 && strcmp(argv[1], "expect-migration") == 0;

    /* 64 readers wait on 64 empty pipes; then each gets its byte. */
    for (int i = 0; i < READERS; i++)
        CHECK(pipe(pipes[i]) == 0, "pipe");
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++)
        PT(pthread_create(&t[i], NULL, reader, (void *)(long)i));
    while (started < READERS)
        sleep_ms(1);
    sleep_ms(100); /* let them all block */
    int n = tasks();
    if (under_library)
        CHECK(n < READERS / 2, "%d kernel threads while %d threads wait in read", n, READERS);
    for (int i = 0; i < READERS; i++) {
        char c = (char)i;
        CHECK(write(pipes[i][1], &c, 1) == 1, "write");
    }
    for (int i = 0; i < READERS; i++) {
        PT(pthread_join(t[i], NULL));
        close(pipes[i][0]);
        close(pipes[i][1]);
    }

    /* A 1 MiB write into a pipe (64 KiB of room) goes through whole. */
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    pthread_t w;
    PT(pthread_create(&w, NULL, big_writer, (void *)(long)p[1]));
    char *got = malloc(BIG);
    CHECK(got != NULL, "malloc");
    size_t have = 0;
    while (have < BIG) {
        ssize_t r = read(p[0], got + have, 4096);
        CHECK(r > 0, "read returned %zd", r);
        have += (size_t)r;
    }
    PT(pthread_join(w, NULL));
    for (int i = 0; i < BIG; i++)
        CHECK(got[i] == (char)(i * 7), "byte %d", i);
    free(got);
    close(p[0]);
    close(p[1]);

    /* SO_RCVTIMEO: the read ends with EAGAIN after about the timeout. */
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    struct timeval tv = {0, 200000};
    CHECK(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0, "setsockopt");
    struct timed tw = {.fd = sv[0]};
    pthread_t tt;
    PT(pthread_create(&tt, NULL, timed_read, &tw));
    PT(pthread_join(tt, NULL));
    CHECK(tw.n == -1 && (tw.err == EAGAIN || tw.err == EWOULDBLOCK), "a read past SO_RCVTIMEO returned %zd (%s)",
          tw.n, strerror(tw.err));
    CHECK(tw.waited >= 0.15, "it returned after %.3f s, before its 0.2 s timeout", tw.waited);

    /* O_NONBLOCK set by the program: EAGAIN at once. */
    CHECK(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) == 0, "fcntl");
    struct timeval none = {0, 0};
    CHECK(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none) == 0, "setsockopt");
    tw = (struct timed){.fd = sv[0]};
    PT(pthread_create(&tt, NULL, timed_read, &tw));
    PT(pthread_join(tt, NULL));
    CHECK(tw.n == -1 && tw.err == EAGAIN, "a non-blocking read returned %zd (%s)", tw.n, strerror(tw.err));
    close(sv[0]);
    close(sv[1]);

    signal_case(0);
    signal_case(1);
    msg_cases(under_library);
    printf("ok\n");
    return 0;
}
