/* fork at once from a process's first threads, in 400 fresh processes one after another
 * (each execs the next): a child must never inherit process-wide state that a runtime
 * kernel thread was setting up at that moment. Before the runtime made its work-stealing
 * collector at start, a processor making it at its first steal while a thread forked left
 * the child's processors waiting on it for good (about one process in 200 with four
 * processors). */
#include "check.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKERS 4
#define PROCESSES 400

static void *nothing(void *arg) { return arg; }

static void *forker(void *arg) {
    (void)arg;
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        alarm(10); /* a hung child ends with SIGALRM, which the parent reports */
        pthread_t t;
        if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
            _exit(6);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x (%s)", status,
          WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited");
    return NULL;
}

int main(int argc, char **argv) {
    (void)argc;
    const char *left_s = getenv("FORK_EARLY_LEFT");
    int left = left_s ? atoi(left_s) : PROCESSES;
    if (!left_s) {
        /* Four processors under schedlab exec (ignored on glibc's threads): more
         * processors making their first steal as the threads fork. */
        CHECK(setenv("SCHEDLAB_RT_PROCESSORS", "4", 1) == 0, "setenv");
    }
    pthread_t t[FORKERS];
    for (int i = 0; i < FORKERS; i++)
        PT(pthread_create(&t[i], NULL, forker, NULL));
    for (int i = 0; i < FORKERS; i++)
        PT(pthread_join(t[i], NULL));
    if (left > 1) {
        char n[16];
        snprintf(n, sizeof n, "%d", left - 1);
        CHECK(setenv("FORK_EARLY_LEFT", n, 1) == 0, "setenv");
        execv("/proc/self/exe", argv);
        CHECK(0, "exec /proc/self/exe failed");
    }
    printf("ok\n");
    return 0;
}
