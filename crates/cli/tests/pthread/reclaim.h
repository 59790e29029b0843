/* What the C tests of idle-stack reclaim (reclaim.c, fork_reclaimed.c) share: whether a
 * page is resident, and a wait for the runtime to give an idle thread's stack page back. */
#ifndef SCHEDLAB_RECLAIM_H
#define SCHEDLAB_RECLAIM_H
#include "check.h"
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The page holding `p` is resident (mincore's low bit). */
static inline int resident(const void *p) {
    long page = sysconf(_SC_PAGESIZE);
    unsigned char v = 0;
    void *base = (void *)((unsigned long)p & ~(unsigned long)(page - 1));
    CHECK(mincore(base, (size_t)page, &v) == 0, "mincore");
    return v & 1;
}

/* Waits until the page holding `p` is given back: the reclaim takes a thread idle for
 * 1 s; looks for up to 3 s. Whether it went (it stays under glibc's threads, or where the
 * library's userfaultfd is refused). */
static inline int wait_given_back(const void *p) {
    int gone = 0;
    for (int i = 0; i < 30 && !gone; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        gone = !resident(p);
    }
    return gone;
}
#endif
