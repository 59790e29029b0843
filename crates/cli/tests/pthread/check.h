/* What every C test of libschedlab_pthread.so shares: CHECK(cond, fmt...) prints the
 * failed condition with its file and line and exits 1. Each test prints "ok" and exits 0
 * when everything held, under glibc's threads and under `schedlab exec` alike. */
#ifndef SCHEDLAB_CHECK_H
#define SCHEDLAB_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: %s failed: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* pthread functions return an error number instead of setting errno. */
#define PT(call)                                                                \
    do {                                                                        \
        int pt_err_ = (call);                                                   \
        CHECK(pt_err_ == 0, "%s returned %d", #call, pt_err_);                  \
    } while (0)

#endif
