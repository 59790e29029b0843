/* A signal handler that interrupts a thread blocked in a system call ends the call as the
 * kernel ends a kernel thread's (signal(7), "Interruption of system calls and library
 * functions by signal handlers"):
 * - a waitpid on a sleeping child and a read of a terminal (a pseudo-terminal) go on after a
 *   handler with SA_RESTART and end with EINTR after one without, for a pthread_kill of the
 *   thread and for a kill of the process whose only thread not blocking the signal is the
 *   blocked one (a child process per case); so does a sem_wait, which Linux restarts too and
 *   the library's waits in user space (it ended with EINTR after a handler with SA_RESTART
 *   before: the Open POSIX suite's sigaction/16-1);
 * - pause, sigsuspend and msgrcv end with EINTR whatever SA_RESTART says;
 * - and none of them ends without a signal of the program's: sigtimedwait, semtimedop, pause,
 *   msgrcv and waitpid, on threads sharing two processors with threads that compute under a
 *   1 ms quantum (so the runtime's own signal reaches them, handing off their processor or
 *   preempting), return only what the program asked for (the runtime's signal ended
 *   sigtimedwait with EINTR in every run, and could end pause, semtimedop and msgrcv so). */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

enum { WAITPID, TTY, PAUSE, SIGSUSPEND, MSGRCV, SEM_WAIT, CASES };
static const char *names[CASES] = {"waitpid",    "a terminal read", "pause",
                                   "sigsuspend", "msgrcv",          "sem_wait"};

static volatile int handled;
static void handler(int sig) {
    (void)sig;
    handled++;
}

static void on_usr1(int restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
}

static int pty_master, tty, msq, semid;
static sem_t sem; /* 0: sem_wait waits */
static int gate[2]; /* the sleeping child exits when a byte comes */
static pid_t child;

/* A child that exits when the parent writes a byte to gate. */
static pid_t sleeping_child(void) {
    CHECK(pipe(gate) == 0, "pipe");
    pid_t p = fork();
    CHECK(p >= 0, "fork");
    if (p == 0) {
        char b;
        close(gate[1]);
        read(gate[0], &b, 1);
        _exit(7);
    }
    close(gate[0]);
    return p;
}

struct call {
    int which;
    volatile int started;
    long ret;
    int err;
};

static void *blocked(void *arg) {
    struct call *c = arg;
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    PT(pthread_sigmask(SIG_UNBLOCK, &usr1, NULL));
    c->started = 1;
    char b;
    int st;
    errno = 0;
    switch (c->which) {
    case WAITPID:
        c->ret = waitpid(child, &st, 0);
        break;
    case TTY:
        c->ret = read(tty, &b, 1);
        break;
    case PAUSE:
        c->ret = pause();
        break;
    case SIGSUSPEND: {
        sigset_t none;
        sigemptyset(&none);
        c->ret = sigsuspend(&none);
        break;
    }
    case MSGRCV: {
        struct {
            long type;
            char text[8];
        } m;
        c->ret = msgrcv(msq, &m, sizeof m.text, 0, 0);
        break;
    }
    case SEM_WAIT:
        c->ret = sem_wait(&sem);
        break;
    }
    c->err = errno;
    return NULL;
}

/* Blocks a thread in `which`, sends SIGUSR1 (to the thread, or to the process when
 * `process`), then, if the call goes on, gives it what it waits for; checks the call's end. */
static void one(int which, int restart, int process) {
    on_usr1(restart);
    if (which == WAITPID)
        child = sleeping_child();
    struct call c = {.which = which};
    pthread_t t;
    handled = 0;
    PT(pthread_create(&t, NULL, blocked, &c));
    while (!c.started)
        usleep(1000);
    usleep(30000); /* let it block in its call */
    if (process)
        CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
    else
        PT(pthread_kill(t, SIGUSR1));
    while (!handled)
        usleep(1000);
    usleep(30000); /* the call ends now, or goes on */
    int restarts = restart && (which == WAITPID || which == TTY || which == SEM_WAIT);
    if (which == WAITPID)
        CHECK(write(gate[1], "x", 1) == 1, "write");
    if (which == SEM_WAIT && restarts)
        CHECK(sem_post(&sem) == 0, "sem_post");
    if (which == TTY)
        CHECK(write(pty_master, "x", 1) == 1, "write");
    PT(pthread_join(t, NULL));
    const char *how = process ? "kill of the process" : "pthread_kill";
    if (restarts) {
        long want = which == WAITPID ? child : which == SEM_WAIT ? 0 : 1;
        CHECK(c.ret == want, "%s, SA_RESTART, %s: returned %ld (errno %s), not %ld", names[which],
              how, c.ret, strerror(c.err), want);
    } else {
        CHECK(c.ret == -1 && c.err == EINTR, "%s, %s, %s: returned %ld (errno %s), not EINTR",
              names[which], restart ? "SA_RESTART" : "no SA_RESTART", how, c.ret, strerror(c.err));
    }
    if (which == WAITPID) {
        int st;
        if (!restarts)
            waitpid(child, &st, 0);
        close(gate[1]);
    }
    if (which == TTY && !restarts) {
        char b;
        CHECK(read(tty, &b, 1) == 1, "the byte typed is left");
    }
}

/* Threads that compute until told, so that the runtime preempts and hands off. */
static volatile int stop;
static void *compute(void *arg) {
    (void)arg;
    while (!stop)
        ;
    return NULL;
}

static volatile int spurious;
static void *waits(void *arg) {
    long which = (long)arg;
    for (int i = 0; i < 30; i++) {
        errno = 0;
        if (which == 0) {
            sigset_t s;
            sigemptyset(&s);
            sigaddset(&s, SIGUSR2);
            struct timespec ts = {0, 3000000};
            int r = sigtimedwait(&s, NULL, &ts);
            if (!(r == -1 && errno == EAGAIN)) {
                fprintf(stderr, "sigtimedwait: %d (errno %s)\n", r, strerror(errno));
                spurious++;
            }
        } else if (which == 1) {
            struct sembuf take = {.sem_num = 0, .sem_op = -1, .sem_flg = 0};
            struct timespec ts = {0, 3000000};
            int r = semtimedop(semid, &take, 1, &ts);
            if (!(r == -1 && errno == EAGAIN)) {
                fprintf(stderr, "semtimedop: %d (errno %s)\n", r, strerror(errno));
                spurious++;
            }
            pid_t p = fork();
            CHECK(p >= 0, "fork");
            if (p == 0) {
                usleep(3000);
                _exit(0);
            }
            int st;
            pid_t w = waitpid(p, &st, 0);
            if (w != p) {
                fprintf(stderr, "waitpid: %d (errno %s)\n", (int)w, strerror(errno));
                spurious++;
                waitpid(p, &st, 0);
            }
        }
    }
    return NULL;
}

static volatile int paused_out;
static void *pauses(void *arg) {
    (void)arg;
    pause();
    paused_out = 1;
    return NULL;
}

static struct {
    long type;
    char text[8];
} message;
static long received;
static void *receives(void *arg) {
    (void)arg;
    errno = 0;
    received = msgrcv(msq, &message, sizeof message.text, 0, 0);
    if (received < 0)
        fprintf(stderr, "msgrcv: errno %s\n", strerror(errno));
    return NULL;
}

/* The runtime's own signal ends none of the calls. */
static void no_spurious_eintr(void) {
    setenv("SCHEDLAB_RT_QUANTUM_MS", "1", 1); /* read when the runtime starts */
    pthread_t c[3], w[2], p, m;
    for (int i = 0; i < 3; i++)
        PT(pthread_create(&c[i], NULL, compute, NULL));
    PT(pthread_create(&p, NULL, pauses, NULL));
    PT(pthread_create(&m, NULL, receives, NULL));
    for (long i = 0; i < 2; i++)
        PT(pthread_create(&w[i], NULL, waits, (void *)i));
    for (int i = 0; i < 2; i++)
        PT(pthread_join(w[i], NULL));
    CHECK(!spurious, "%d calls ended without the program's signal", spurious);
    CHECK(!paused_out, "pause returned without a signal");
    struct {
        long type;
        char text[8];
    } hello = {1, "hello"};
    CHECK(msgsnd(msq, &hello, sizeof hello.text, 0) == 0, "msgsnd: %s", strerror(errno));
    PT(pthread_join(m, NULL));
    CHECK(received == sizeof hello.text, "msgrcv returned %ld", received);
    PT(pthread_cancel(p));
    PT(pthread_join(p, NULL));
    stop = 1;
    for (int i = 0; i < 3; i++)
        PT(pthread_join(c[i], NULL));
}

int main(void) {
    alarm(60); /* a hang guard */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigaddset(&s, SIGUSR2);
    /* Blocked here before any thread exists: every thread but the blocked one inherits it. */
    PT(pthread_sigmask(SIG_BLOCK, &s, NULL));
    msq = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    CHECK(msq >= 0, "msgget: %s", strerror(errno));
    semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600); /* one semaphore, 0 */
    CHECK(sem_init(&sem, 0, 0) == 0, "sem_init");
    CHECK(semid >= 0, "semget: %s", strerror(errno));
    no_spurious_eintr();

    pty_master = posix_openpt(O_RDWR | O_NOCTTY);
    CHECK(pty_master >= 0 && grantpt(pty_master) == 0 && unlockpt(pty_master) == 0,
          "posix_openpt: %s", strerror(errno));
    tty = open(ptsname(pty_master), O_RDWR | O_NOCTTY);
    CHECK(tty >= 0, "open %s: %s", ptsname(pty_master), strerror(errno));
    struct termios raw;
    CHECK(tcgetattr(tty, &raw) == 0, "tcgetattr");
    cfmakeraw(&raw); /* a read returns each byte as it comes; nothing echoed */
    CHECK(tcsetattr(tty, TCSANOW, &raw) == 0, "tcsetattr");
    for (int restart = 0; restart <= 1; restart++)
        for (int which = 0; which < CASES; which++)
            one(which, restart, 0);
    /* A kill of the process, each in a child of its own whose one thread that does not block
     * the signal is the blocked one. (Here, the runtime's kernel threads that ran the earlier
     * cases' threads keep their masks while idle, and may take the signal: docs/PTHREAD.md,
     * "Not done yet".) */
    for (int restart = 0; restart <= 1; restart++)
        for (int which = 0; which < CASES; which++) {
            if (which == SEM_WAIT)
                continue; /* parked in the library: docs/PTHREAD.md, "Not done yet" */
            fflush(stdout);
            pid_t p = fork();
            CHECK(p >= 0, "fork");
            if (p == 0) {
                one(which, restart, 1);
                _exit(0);
            }
            int st;
            CHECK(waitpid(p, &st, 0) == p, "waitpid");
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s, %s, kill of the process: status %#x",
                  names[which], restart ? "SA_RESTART" : "no SA_RESTART", st);
        }
    msgctl(msq, IPC_RMID, NULL);
    semctl(semid, 0, IPC_RMID);
    printf("ok\n");
    return 0;
}
