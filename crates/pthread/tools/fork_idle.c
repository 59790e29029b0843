/* The cost of fork with many idle threads whose stacks the runtime reclaimed: N threads wait in
 * a pipe read (reclaimed after the 1 s threshold; the program waits 3 s), then FORKS times a
 * fork whose child exits at once, and the parent's wait for it. Prints the mean time of one
 * fork+exit+wait. Used for docs/PERFORMANCE.md ("Forking beside reclaimed stacks"); build with
 * `cc -O2 -pthread -o fork_idle fork_idle.c`, run as `LD_PRELOAD=LIB fork_idle N FORKS`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int p[2];

static void *idle(void *a) {
    char b;
    (void)a;
    return (void *)(long)read(p[0], &b, 1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fork_idle THREADS FORKS\n");
        return 2;
    }
    int n = atoi(argv[1]), forks = atoi(argv[2]);
    if (n < 0 || forks <= 0 || pipe(p) != 0)
        return 2;
    pthread_t *t = malloc(sizeof *t * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, idle, NULL) != 0)
            return 1;
    sleep(3);
    double t0 = now();
    for (int i = 0; i < forks; i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        waitpid(pid, NULL, 0);
    }
    printf("%d threads: %.1f us per fork+exit+wait\n", n, (now() - t0) / forks * 1e6);
    for (int i = 0; i < n; i++)
        if (write(p[1], "x", 1) != 1)
            return 1;
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return 0;
}
