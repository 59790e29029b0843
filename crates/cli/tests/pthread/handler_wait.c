/* A signal handler that waits: the kernel runs a handler with its signal and its
 * sa_mask blocked, which the library's runtime must know of. Thread A's SIGUSR1 handler
 * (SIGUSR2 in its sa_mask) locks a mutex thread B holds, so A waits inside the handler
 * and, on one virtual processor, B runs on A's kernel thread: B must run with its own
 * signal mask there, not the handler's (before the library told the runtime of handler
 * masks, B ran with SIGUSR1 and SIGUSR2 blocked: a Java program whose handler turns a
 * fault into an exception died of the next thread's fault), and A must get the handler's
 * back for the rest of it, and its own after it. Masks are read from the kernel. */
#define _GNU_SOURCE
#include "check.h"
#include "rt.h"
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile int held, in_handler, b_done;
static const uint64_t USR1 = 1ull << (SIGUSR1 - 1), USR2 = 1ull << (SIGUSR2 - 1);

/* The calling kernel thread's mask, as the kernel has it. */
static uint64_t kernel_mask(void) {
    uint64_t set = 0;
    CHECK(syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &set, 8) == 0, "rt_sigprocmask");
    return set;
}

static void handler(int sig) {
    (void)sig;
    uint64_t k = kernel_mask();
    CHECK((k & (USR1 | USR2)) == (USR1 | USR2), "handler starts with mask %#llx",
          (unsigned long long)k);
    in_handler = 1;
    PT(pthread_mutex_lock(&m)); /* B holds it: A waits here */
    k = kernel_mask();
    CHECK((k & (USR1 | USR2)) == (USR1 | USR2), "handler resumes with mask %#llx",
          (unsigned long long)k);
    PT(pthread_mutex_unlock(&m));
}

static void *a_main(void *arg) {
    (void)arg;
    while (!held)
        sched_yield();
    CHECK((kernel_mask() & (USR1 | USR2)) == 0, "A starts with them blocked");
    CHECK(raise(SIGUSR1) == 0, "raise");
    uint64_t k = kernel_mask();
    CHECK((k & (USR1 | USR2)) == 0, "A after its handler has mask %#llx", (unsigned long long)k);
    return NULL;
}

static void *b_main(void *arg) {
    (void)arg;
    PT(pthread_mutex_lock(&m));
    held = 1;
    while (!in_handler)
        sched_yield();
    /* A is in its handler, waiting for m; on one processor B runs where A ran. */
    uint64_t k = kernel_mask();
    CHECK((k & (USR1 | USR2)) == 0, "B runs with the handler's mask %#llx",
          (unsigned long long)k);
    PT(pthread_mutex_unlock(&m));
    b_done = 1;
    return NULL;
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    struct sigaction back;
    CHECK(sigaction(SIGUSR1, NULL, &back) == 0, "sigaction query");
    CHECK(back.sa_handler == handler, "sigaction answers with another handler");
    CHECK(sigismember(&back.sa_mask, SIGUSR2) == 1, "sigaction lost the handler's mask");
    one_cpu_one_processor();
    for (int round = 0; round < 20; round++) {
        held = in_handler = b_done = 0;
        pthread_t a, b;
        PT(pthread_create(&b, NULL, b_main, NULL));
        PT(pthread_create(&a, NULL, a_main, NULL));
        PT(pthread_join(a, NULL));
        PT(pthread_join(b, NULL));
        CHECK(b_done, "B did not finish");
    }
    printf("ok\n");
    return 0;
}
