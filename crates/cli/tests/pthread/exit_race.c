/* A process-directed signal sent while its one accepting thread is still there, which then
 * ends at once: the kernel runs the handler on that thread before it ends (it accepted the
 * signal when it was sent), so the sender's answer always comes. Round after round a new
 * accepting thread spins (with sched_yield) until the signal has been sent and the initial
 * thread, which like every other thread blocks SIGUSR1, has told it to go; the initial thread
 * then waits for the handler's sem_post, and checks it ran on that thread. The signal is sent
 * first by the initial thread itself (kill(getpid(), SIGUSR1)), then, as many rounds again, by
 * a child process, which says so through a pipe.
 *
 * Under the library the signal went to whichever kernel thread accepted it (an idle
 * processor's, or the library's forwarder) and was placed a moment later, when the accepting
 * thread might have ended: it then stayed pending for the process with no thread to take it,
 * and the wait for the answer timed out (5 runs of 5, at rounds 1 to 200). With the kill made
 * by another process, which the library cannot place at once, the kernel queued the signal and
 * chose the forwarder as readily as the accepting thread's kernel thread, and the accepting
 * thread ended before the forwarder took it (8 runs of 8 failed). */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 300 };

static sem_t answered;
static atomic_int go, wrong_thread;
static pthread_t accepting;

static void on_usr1(int sig) {
    (void)sig;
    if (!pthread_equal(pthread_self(), accepting))
        atomic_fetch_add(&wrong_thread, 1);
    sem_post(&answered);
}

static void *accept_then_end(void *arg) {
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    PT(pthread_sigmask(SIG_UNBLOCK, &s, NULL));
    while (!atomic_load(&go))
        sched_yield();
    return NULL;
}

/* The child: for each byte read, one kill(parent, SIGUSR1), then a byte back once it is sent. */
static void sender(int in, int out) {
    char c;
    while (read(in, &c, 1) == 1) {
        if (kill(getppid(), SIGUSR1) != 0)
            _exit(2);
        if (write(out, &c, 1) != 1)
            _exit(3);
    }
    _exit(0);
}

/* ROUNDS rounds; the signal is sent by this process, or (to_child >= 0) by the child. */
static void rounds(const char *by, int to_child, int from_child) {
    for (int r = 0; r < ROUNDS; r++) {
        atomic_store(&go, 0);
        PT(pthread_create(&accepting, NULL, accept_then_end, NULL));
        /* Let it run and open its mask. */
        for (int i = 0; i < r % 7; i++)
            sched_yield();
        if (to_child < 0) {
            CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
        } else {
            char c = 's';
            CHECK(write(to_child, &c, 1) == 1, "write to the child");
            CHECK(read(from_child, &c, 1) == 1, "read from the child");
        }
        atomic_store(&go, 1);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 5;
        int e;
        while ((e = sem_timedwait(&answered, &t)) != 0 && errno == EINTR)
            ;
        CHECK(e == 0, "round %d, sent by %s: the signal's handler never ran (errno %d)", r, by,
              errno);
        PT(pthread_join(accepting, NULL));
    }
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    CHECK(sem_init(&answered, 0, 0) == 0, "sem_init");
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    PT(pthread_sigmask(SIG_BLOCK, &s, NULL));
    int to_child[2], from_child[2];
    CHECK(pipe(to_child) == 0 && pipe(from_child) == 0, "pipe");
    /* Before any thread: the child is a plain one-threaded process. */
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
        close(to_child[1]);
        close(from_child[0]);
        sender(to_child[0], from_child[1]);
    }
    close(to_child[0]);
    close(from_child[1]);
    rounds("this process", -1, -1);
    rounds("another process", to_child[1], from_child[0]);
    close(to_child[1]);
    int status;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child failed (status %d)", status);
    CHECK(atomic_load(&wrong_thread) == 0, "%d handlers ran on another thread",
          atomic_load(&wrong_thread));
    printf("ok\n");
    return 0;
}
