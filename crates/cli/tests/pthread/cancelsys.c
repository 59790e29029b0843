/* Deferred cancellation of threads blocked in the system calls that are cancellation points
 * (POSIX XSH 2.9.5.2, and glibc's) other than the pipe and socket ones of cancelio.c: a
 * waitpid on a sleeping child, a waitid, pause, sigsuspend, a read of a terminal (a
 * pseudo-terminal with nothing typed), an open of a FIFO nobody opens for writing,
 * fcntl(F_SETLKW) and lockf(F_LOCK) on a lock a child process holds, msgrcv on an empty
 * System V queue, mq_receive on an empty POSIX queue (where the system has them), sem_wait on
 * a process-shared semaphore (glibc's, whose own wait acts only for glibc's threads), a
 * terminal read through __read_chk (what read becomes under _FORTIFY_SOURCE), epoll_pwait2 on
 * an empty set. Each
 * thread is cancelled and joined: its cleanup handler ran and the join gives PTHREAD_CANCELED.
 * A regular file's read never waits long, so a terminal stands for "a descriptor the poller
 * cannot watch". An alarm ends the test if a cancellation never acts (the thread would wait
 * for good). */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    WAITPID,
    WAITID,
    PAUSE,
    SIGSUSPEND,
    TTY,
    READ_CHK,
    FIFO,
    SETLKW,
    LOCKF,
    SEM,
    EPOLL2,
    MSGRCV,
    MQ,
    CASES
};
static const char *names[CASES] = {
    "waitpid",         "waitid",        "pause",          "sigsuspend",       "a terminal read",
    "__read_chk",      "a FIFO open",   "fcntl(F_SETLKW)", "lockf(F_LOCK)",   "a shared sem_wait",
    "epoll_pwait2",    "msgrcv",        "mq_receive"};

/* glibc's fortified read (<bits/unistd.h> calls it under _FORTIFY_SOURCE). */
extern ssize_t __read_chk(int fd, void *buf, size_t n, size_t size);

static pid_t sleeper;      /* a child that waits for the end of the test */
static int tty;            /* a pseudo-terminal's slave side, nothing typed */
static char fifo_path[64]; /* a FIFO nobody writes */
static int lock_fd;        /* a file a child holds locked */
static int msq = -1;       /* an empty System V message queue */
static mqd_t mq = (mqd_t)-1;
static sem_t shared_sem;   /* process-shared, 0 */
#include "cancel_cases.h"

static void *blocked(void *arg) {
    long which = (long)arg;
    char b;
    pthread_cleanup_push(cleanup, arg);
    started[which] = 1;
    switch (which) {
    case WAITPID: {
        int st;
        waitpid(sleeper, &st, 0);
        break;
    }
    case WAITID: {
        siginfo_t si;
        waitid(P_PID, sleeper, &si, WEXITED | WNOWAIT);
        break;
    }
    case PAUSE:
        pause();
        break;
    case SIGSUSPEND: {
        sigset_t none;
        sigemptyset(&none);
        sigsuspend(&none);
        break;
    }
    case TTY:
        read(tty, &b, 1);
        break;
    case READ_CHK:
        __read_chk(tty, &b, 1, sizeof b);
        break;
    case FIFO:
        open(fifo_path, O_RDONLY);
        break;
    case SETLKW: {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
        fcntl(lock_fd, F_SETLKW, &fl);
        break;
    }
    case LOCKF:
        lseek(lock_fd, 0, SEEK_SET);
        lockf(lock_fd, F_LOCK, 1);
        break;
    case SEM:
        sem_wait(&shared_sem);
        break;
    case EPOLL2: {
        struct epoll_event e;
        int ep = epoll_create1(EPOLL_CLOEXEC);
        epoll_pwait2(ep, &e, 1, NULL, NULL);
        break;
    }
    case MSGRCV: {
        struct {
            long type;
            char text[8];
        } m;
        msgrcv(msq, &m, sizeof m.text, 0, 0);
        break;
    }
    case MQ: {
        char buf[64];
        mq_receive(mq, buf, sizeof buf, NULL);
        break;
    }
    }
    pthread_cleanup_pop(0);
    return (void *)1L; /* reached only if the call returned */
}

int main(void) {
    alarm(30); /* a hang guard: a cancellation that never acts */
    /* A child that holds a lock on the file and lives until the pipe closes. */
    char lock_path[] = "/tmp/cancelsys-lock-XXXXXX";
    lock_fd = mkstemp(lock_path);
    CHECK(lock_fd >= 0, "mkstemp: %s", strerror(errno));
    unlink(lock_path);
    int gate[2], ready[2];
    CHECK(pipe(gate) == 0 && pipe(ready) == 0, "pipe");
    sleeper = fork();
    CHECK(sleeper >= 0, "fork");
    if (sleeper == 0) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
        close(gate[1]);
        if (fcntl(lock_fd, F_SETLK, &fl) != 0)
            _exit(2);
        write(ready[1], "r", 1);
        char b;
        read(gate[0], &b, 1); /* until the parent closes its end */
        _exit(0);
    }
    close(gate[0]);
    char b;
    CHECK(read(ready[0], &b, 1) == 1, "the child did not take its lock");

    int ptm = posix_openpt(O_RDWR | O_NOCTTY);
    CHECK(ptm >= 0 && grantpt(ptm) == 0 && unlockpt(ptm) == 0, "posix_openpt: %s", strerror(errno));
    tty = open(ptsname(ptm), O_RDWR | O_NOCTTY);
    CHECK(tty >= 0, "open %s: %s", ptsname(ptm), strerror(errno));

    snprintf(fifo_path, sizeof fifo_path, "/tmp/cancelsys-fifo-%d", (int)getpid());
    CHECK(mkfifo(fifo_path, 0600) == 0, "mkfifo: %s", strerror(errno));

    CHECK(sem_init(&shared_sem, 1, 0) == 0, "sem_init: %s", strerror(errno));
    for (long w = WAITPID; w <= EPOLL2; w++)
        cancel_blocked(w, 30000);
    /* The cancelled waiter left: a post and a wait still pass the value on. */
    CHECK(sem_post(&shared_sem) == 0 && sem_wait(&shared_sem) == 0, "the semaphore after");

    msq = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    if (msq >= 0) {
        cancel_blocked(MSGRCV, 30000);
        msgctl(msq, IPC_RMID, NULL);
    } else {
        fprintf(stderr, "msgrcv not checked: msgget: %s\n", strerror(errno));
    }
    char mq_name[64];
    snprintf(mq_name, sizeof mq_name, "/cancelsys-%d", (int)getpid());
    struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 64};
    mq = mq_open(mq_name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
    if (mq != (mqd_t)-1) {
        cancel_blocked(MQ, 30000);
        mq_close(mq);
        mq_unlink(mq_name);
    } else {
        fprintf(stderr, "mq_receive not checked: mq_open: %s\n", strerror(errno));
    }

    unlink(fifo_path);
    close(gate[1]);
    int st;
    CHECK(waitpid(sleeper, &st, 0) == sleeper && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the lock holder: status %#x", st);
    printf("ok\n");
    return 0;
}
