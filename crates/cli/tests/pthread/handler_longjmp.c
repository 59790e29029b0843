/* A signal handler left by siglongjmp: a thread turns a fault into a jump back to a
 * sigsetjmp that saved its mask, over and over, switching away between faults. glibc's
 * siglongjmp restores the saved mask with a system call of its own; the library must tell
 * the runtime, which otherwise kept the handler's mask (SIGSEGV blocked) for the thread and
 * applied it at the thread's next switch, where the next fault killed the process. */
#define _GNU_SOURCE
#include "check.h"
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread sigjmp_buf back;
static __thread volatile int faults;
static char *forbidden;

static uint64_t kernel_mask(void) {
    uint64_t set = 0;
    CHECK(syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &set, 8) == 0, "rt_sigprocmask");
    return set;
}

static void on_segv(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    (void)ctx;
    CHECK(info->si_addr == forbidden, "fault at %p, not %p", info->si_addr, (void *)forbidden);
    faults++;
    siglongjmp(back, 1);
}

static void *faulter(void *arg) {
    (void)arg;
    const uint64_t segv = 1ull << (SIGSEGV - 1);
    for (int i = 0; i < 200; i++) {
        if (sigsetjmp(back, 1) == 0)
            *(volatile char *)forbidden = 1;
        CHECK(faults == i + 1, "fault %d not caught", i);
        CHECK((kernel_mask() & segv) == 0, "after the jump SIGSEGV is blocked");
        sched_yield(); /* a switch, where the runtime applies what it knows of the mask */
        CHECK((kernel_mask() & segv) == 0, "after a switch SIGSEGV is blocked (round %d)", i);
    }
    return NULL;
}

static void *yielder(void *arg) {
    volatile int *stop = arg;
    while (!*stop)
        sched_yield();
    return NULL;
}

int main(void) {
    forbidden = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(forbidden != MAP_FAILED, "mmap");
    struct sigaction sa = {0};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");
    volatile int stop = 0;
    pthread_t f[2], y;
    PT(pthread_create(&y, NULL, yielder, (void *)&stop));
    for (int i = 0; i < 2; i++)
        PT(pthread_create(&f[i], NULL, faulter, NULL));
    for (int i = 0; i < 2; i++)
        PT(pthread_join(f[i], NULL));
    stop = 1;
    PT(pthread_join(y, NULL));
    printf("ok\n");
    return 0;
}
