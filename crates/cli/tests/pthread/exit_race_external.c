/* exit_race.c with the signal sent by another process: a process-directed signal sent while
 * its one accepting thread is still there, which then ends at once. The kernel runs the
 * handler on that thread before it ends (it accepted the signal when it was sent), so the
 * answer always comes. Round after round a new accepting thread spins (with sched_yield) until
 * a child process has sent kill(parent, SIGUSR1) and the initial thread, which like every other
 * thread blocks SIGUSR1, has heard so from it and told the thread to go; the initial thread
 * then waits for the handler's sem_post, and checks it ran on that thread.
 *
 * Under the library the kernel may give the signal to a kernel thread that runs no thread of
 * the program and accepts it (the library's forwarder, or an idle processor's with the mask of
 * the last thread it ran), whose handler wrapper hands it to the forwarder, which places it:
 * when that kernel thread was slow to run, the accepting thread had ended before the signal
 * reached the library, saw nothing on its way, and the signal stayed pending for the process
 * with no thread to take it. */
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
    for (int r = 0; r < ROUNDS; r++) {
        atomic_store(&go, 0);
        PT(pthread_create(&accepting, NULL, accept_then_end, NULL));
        /* Let it run and open its mask. */
        for (int i = 0; i < r % 7; i++)
            sched_yield();
        char c = 's';
        CHECK(write(to_child[1], &c, 1) == 1, "write to the child");
        CHECK(read(from_child[0], &c, 1) == 1, "read from the child");
        atomic_store(&go, 1);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 5;
        int e;
        while ((e = sem_timedwait(&answered, &t)) != 0 && errno == EINTR)
            ;
        CHECK(e == 0, "round %d: the signal's handler never ran (errno %d)", r, errno);
        PT(pthread_join(accepting, NULL));
    }
    close(to_child[1]);
    int status;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child failed (status %d)", status);
    CHECK(atomic_load(&wrong_thread) == 0, "%d handlers ran on another thread",
          atomic_load(&wrong_thread));
    printf("ok\n");
    return 0;
}
