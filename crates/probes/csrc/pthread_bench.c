/*
 * pthread_bench: the C program behind the threads probes' pthread-os and pthread-rt
 * backends. The same binary runs under glibc's threads (pthread-os) and with
 * libschedlab_pthread.so preloaded (pthread-rt), so the two rows differ only in the
 * thread library.
 *
 *   pthread_bench OP ITERS [N]
 *
 * prints "elapsed_ns <ns>", the time of the timed part only (setup and teardown are
 * not timed), then "pthread_create_from <object>", the file of the pthread_create the
 * program's calls bind to (libc's, or the preloaded library's: the probe checks the
 * library was loaded, since ld.so runs a program without a preload it cannot load), and
 * exits 0; 1 on a failure (a message on stderr, and a wrong count is a failure), 2 on bad
 * arguments.
 *
 * Every measured loop runs in a thread the program created (the "driver"), never in the
 * initial thread: under the library the initial thread stays a kernel thread and only the
 * threads it creates are user threads. The initial thread creates the driver, joins it
 * and prints.
 *
 * Operations (one "op" is what the probe divides by):
 *   create N    the driver creates N threads that return at once (default attributes),
 *               then joins the N; ITERS times. Timer: around the ITERS rounds, in the
 *               driver. Op: one thread created and joined.
 *   yield       two threads each call sched_yield ITERS times. They meet first at a gate
 *               (each yields until both are there). Timer: from the first thread's start
 *               after the gate to the last one's end. Op: one switch (2 per iteration,
 *               as the rt backend's threads.switch counts them).
 *   condvar     the driver and a partner pass a turn through one mutex and one condition
 *               variable, ITERS round trips. Timer: around the round trips, in the
 *               driver (the partner is created before). Op: one hand-off (2 per
 *               iteration).
 *   lock        the driver locks a mutex, increments a counter and unlocks, ITERS times.
 *               Timer: around the loop. Op: one lock+unlock.
 *   mutex N     N threads each lock one shared mutex, increment the shared counter and
 *               unlock, ITERS times, after a start gate (where they wait by yielding). Timer: first thread's start to
 *               last thread's end. Op: one lock+unlock (N per iteration). The counter must
 *               end at N * ITERS.
 *   messaging G hackbench -T's shape: G groups of 20 senders and 20 receivers; each
 *               receiver has a socketpair (AF_UNIX, SOCK_STREAM); each sender writes one
 *               100-byte message to each receiver of its group, ITERS times; each receiver
 *               reads 20 * ITERS messages. Timer: first thread's start after the gate to
 *               last thread's end. Op: one message (G * 400 per iteration).
 *   compress N  N threads each compress a 64 KiB block of generated text ITERS times
 *               with a small LZ77 compressor (greedy, one 4-byte hash probe per position,
 *               as LZ4's fast mode). Timer: first start after the gate to last end. Op:
 *               one block compressed (N per iteration). CPU-bound: the same code either
 *               way, so it shows what a thread library costs a computation.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static unsigned long long iters;
static unsigned long long param;
static unsigned long long elapsed;
static const char *op;

static void die(const char *what, int err)
{
    fprintf(stderr, "pthread_bench %s: %s: %s\n", op, what, strerror(err));
    exit(1);
}

static void check(int rc, const char *what)
{
    if (rc != 0)
        die(what, rc);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static pthread_t spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    check(pthread_create(&t, NULL, fn, arg), "pthread_create");
    return t;
}

static void join(pthread_t t)
{
    check(pthread_join(t, NULL), "pthread_join");
}

/* The span of a set of workers: each records when it started (after the gate) and ended. */
struct span {
    uint64_t start, end;
};

static uint64_t span_of(const struct span *s, size_t n)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i].start < lo)
            lo = s[i].start;
        if (s[i].end > hi)
            hi = s[i].end;
    }
    return hi > lo ? hi - lo : 0;
}

/* A start gate: workers wait until the driver has seen all of them arrive and opens it.
 * Everyone waits by yielding, so the gate never blocks in the kernel or in a lock: it
 * works the same under any thread library and leaves the measured mutex alone. */
static int gate_count, gate_open;

static void gate_pass(void)
{
    __atomic_add_fetch(&gate_count, 1, __ATOMIC_ACQ_REL);
    while (!__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void gate_open_when(int n)
{
    while (__atomic_load_n(&gate_count, __ATOMIC_ACQUIRE) < n)
        sched_yield();
    __atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
}

/* ---- create ---------------------------------------------------------------------------- */

static void *nothing(void *arg)
{
    return arg;
}

static void run_create(void)
{
    size_t batch = param ? param : 1;
    pthread_t *t = calloc(batch, sizeof *t);
    if (!t)
        die("calloc", ENOMEM);
    uint64_t start = now_ns();
    for (unsigned long long i = 0; i < iters; i++) {
        for (size_t j = 0; j < batch; j++)
            t[j] = spawn(nothing, NULL);
        for (size_t j = 0; j < batch; j++)
            join(t[j]);
    }
    elapsed = now_ns() - start;
    free(t);
}

/* ---- yield ----------------------------------------------------------------------------- */

static volatile int yield_arrived;

static void *yielder(void *arg)
{
    struct span *s = arg;
    __atomic_add_fetch(&yield_arrived, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&yield_arrived, __ATOMIC_ACQUIRE) < 2)
        sched_yield();
    s->start = now_ns();
    for (unsigned long long i = 0; i < iters; i++)
        sched_yield();
    s->end = now_ns();
    return NULL;
}

static void run_yield(void)
{
    struct span s[2];
    pthread_t a = spawn(yielder, &s[0]), b = spawn(yielder, &s[1]);
    join(a);
    join(b);
    elapsed = span_of(s, 2);
}

/* ---- condvar --------------------------------------------------------------------------- */

static pthread_mutex_t pp_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pp_c = PTHREAD_COND_INITIALIZER;
static int pp_turn; /* 0: the driver's, 1: the partner's */

static void *pp_partner(void *arg)
{
    (void)arg;
    for (unsigned long long i = 0; i < iters; i++) {
        pthread_mutex_lock(&pp_m);
        while (pp_turn != 1)
            pthread_cond_wait(&pp_c, &pp_m);
        pp_turn = 0;
        pthread_cond_signal(&pp_c);
        pthread_mutex_unlock(&pp_m);
    }
    return NULL;
}

static void run_condvar(void)
{
    pthread_t p = spawn(pp_partner, NULL);
    uint64_t start = now_ns();
    for (unsigned long long i = 0; i < iters; i++) {
        pthread_mutex_lock(&pp_m);
        pp_turn = 1;
        pthread_cond_signal(&pp_c);
        while (pp_turn != 0)
            pthread_cond_wait(&pp_c, &pp_m);
        pthread_mutex_unlock(&pp_m);
    }
    elapsed = now_ns() - start;
    join(p);
}

/* ---- lock and mutex -------------------------------------------------------------------- */

static pthread_mutex_t counter_m = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long counter;

static void run_lock(void)
{
    uint64_t start = now_ns();
    for (unsigned long long i = 0; i < iters; i++) {
        pthread_mutex_lock(&counter_m);
        counter++;
        pthread_mutex_unlock(&counter_m);
    }
    elapsed = now_ns() - start;
    if (counter != iters) {
        fprintf(stderr, "pthread_bench lock: counter %llu, expected %llu\n", counter, iters);
        exit(1);
    }
}

static void *contender(void *arg)
{
    struct span *s = arg;
    gate_pass();
    s->start = now_ns();
    for (unsigned long long i = 0; i < iters; i++) {
        pthread_mutex_lock(&counter_m);
        counter++;
        pthread_mutex_unlock(&counter_m);
    }
    s->end = now_ns();
    return NULL;
}

/* Starts n workers running fn on their own span, opens the gate, joins them all. */
static void crew(size_t n, void *(*fn)(void *), struct span *spans)
{
    pthread_t *t = calloc(n, sizeof *t);
    if (!t)
        die("calloc", ENOMEM);
    for (size_t i = 0; i < n; i++)
        t[i] = spawn(fn, &spans[i]);
    gate_open_when((int)n);
    for (size_t i = 0; i < n; i++)
        join(t[i]);
    free(t);
}

static void run_mutex(void)
{
    size_t n = param ? param : 2;
    struct span *s = calloc(n, sizeof *s);
    if (!s)
        die("calloc", ENOMEM);
    crew(n, contender, s);
    elapsed = span_of(s, n);
    if (counter != n * iters) {
        fprintf(stderr, "pthread_bench mutex: counter %llu, expected %llu\n", counter,
                (unsigned long long)(n * iters));
        exit(1);
    }
    free(s);
}

/* ---- messaging (hackbench -T) ---------------------------------------------------------- */

#define FDS 20       /* hackbench's default number of senders and receivers per group */
#define DATASIZE 100 /* hackbench's message size */

struct party {
    struct span span;
    int fd;          /* a receiver's end to read */
    const int *outs; /* a sender's FDS ends to write, one per receiver of its group */
};

static void *sender(void *arg)
{
    struct party *p = arg;
    char data[DATASIZE];
    memset(data, 'x', sizeof data);
    gate_pass();
    p->span.start = now_ns();
    for (unsigned long long i = 0; i < iters; i++) {
        for (int j = 0; j < FDS; j++) {
            size_t done = 0;
            while (done < DATASIZE) {
                ssize_t n = write(p->outs[j], data + done, DATASIZE - done);
                if (n < 0 && errno != EINTR)
                    die("write", errno);
                if (n > 0)
                    done += (size_t)n;
            }
        }
    }
    p->span.end = now_ns();
    return NULL;
}

static void *receiver(void *arg)
{
    struct party *p = arg;
    char data[DATASIZE];
    gate_pass();
    p->span.start = now_ns();
    for (unsigned long long i = 0; i < iters * FDS; i++) {
        size_t done = 0;
        while (done < DATASIZE) {
            ssize_t n = read(p->fd, data + done, DATASIZE - done);
            if (n == 0) {
                fprintf(stderr, "pthread_bench messaging: a sender's end closed early\n");
                exit(1);
            }
            if (n < 0 && errno != EINTR)
                die("read", errno);
            if (n > 0)
                done += (size_t)n;
        }
    }
    p->span.end = now_ns();
    return NULL;
}

static void run_messaging(void)
{
    size_t groups = param ? param : 1, n = groups * 2 * FDS;
    struct party *parties = calloc(n, sizeof *parties);
    int *outs = calloc(groups * FDS, sizeof *outs);
    pthread_t *t = calloc(n, sizeof *t);
    struct span *spans = calloc(n, sizeof *spans);
    if (!parties || !outs || !t || !spans)
        die("calloc", ENOMEM);
    for (size_t g = 0; g < groups; g++) {
        for (int j = 0; j < FDS; j++) {
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
                die("socketpair", errno);
            parties[g * 2 * FDS + j].fd = sv[0];
            outs[g * FDS + j] = sv[1];
        }
        for (int j = 0; j < FDS; j++)
            parties[g * 2 * FDS + FDS + j].outs = &outs[g * FDS];
    }
    for (size_t i = 0; i < n; i++)
        t[i] = spawn(i % (2 * FDS) < FDS ? receiver : sender, &parties[i]);
    gate_open_when((int)n);
    for (size_t i = 0; i < n; i++)
        join(t[i]);
    for (size_t i = 0; i < n; i++)
        spans[i] = parties[i].span;
    elapsed = span_of(spans, n);
    free(parties);
    free(outs);
    free(t);
    free(spans);
}

/* ---- compress -------------------------------------------------------------------------- */

#define BLOCK (64 * 1024)
#define HBITS 14

/* A varint, as LZ4 and protobuf write lengths. */
static size_t put_varint(uint8_t *out, size_t op, size_t v)
{
    while (v >= 0x80) {
        out[op++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[op++] = (uint8_t)v;
    return op;
}

static uint32_t read32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Greedy LZ77: literals as (count, bytes), matches as (16-bit offset, length - 4). */
static size_t lz_compress(const uint8_t *in, size_t n, uint8_t *out, uint32_t *table)
{
    size_t ip = 0, op = 0, anchor = 0;
    memset(table, 0, sizeof(uint32_t) << HBITS);
    while (ip + 4 <= n) {
        uint32_t seq = read32(in + ip);
        uint32_t h = (seq * 2654435761u) >> (32 - HBITS);
        size_t ref = table[h]; /* position + 1; 0 is empty */
        table[h] = (uint32_t)(ip + 1);
        if (ref && ip + 1 - ref < 65536 && read32(in + ref - 1) == seq) {
            size_t r = ref - 1, len = 4;
            while (ip + len < n && len < 255 + 4 && in[r + len] == in[ip + len])
                len++;
            op = put_varint(out, op, ip - anchor);
            memcpy(out + op, in + anchor, ip - anchor);
            op += ip - anchor;
            out[op++] = (uint8_t)(ip - r);
            out[op++] = (uint8_t)((ip - r) >> 8);
            out[op++] = (uint8_t)(len - 4);
            ip += len;
            anchor = ip;
        } else {
            ip++;
        }
    }
    op = put_varint(out, op, n - anchor);
    memcpy(out + op, in + anchor, n - anchor);
    return op + (n - anchor);
}

/* Text-like input: words of a small vocabulary chosen by xorshift64, so it compresses. */
static void fill_text(uint8_t *buf, size_t n, uint64_t seed)
{
    static const char *words[] = { "thread ", "user ", "kernel ", "processor ", "the ",
                                   "scheduler ", "activation ", "upcall ", "blocks ",
                                   "a ", "runs ", "on ", "virtual ", "mutex ", "of ",
                                   "queue ", "\n" };
    uint64_t x = seed | 1;
    size_t i = 0;
    while (i < n) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const char *w = words[x % (sizeof words / sizeof *words)];
        while (*w && i < n)
            buf[i++] = (uint8_t)*w++;
    }
}

struct compressor {
    struct span span;
    uint8_t *in, *out;
    uint32_t *table;
    unsigned long long bytes_out;
};

static void *compress_worker(void *arg)
{
    struct compressor *c = arg;
    gate_pass();
    c->span.start = now_ns();
    for (unsigned long long i = 0; i < iters; i++)
        c->bytes_out += lz_compress(c->in, BLOCK, c->out, c->table);
    c->span.end = now_ns();
    return NULL;
}

static void run_compress(void)
{
    size_t n = param ? param : 8;
    struct compressor *c = calloc(n, sizeof *c);
    pthread_t *t = calloc(n, sizeof *t);
    struct span *spans = calloc(n, sizeof *spans);
    if (!c || !t || !spans)
        die("calloc", ENOMEM);
    for (size_t i = 0; i < n; i++) {
        c[i].in = malloc(BLOCK);
        c[i].out = malloc(2 * BLOCK + 16);
        c[i].table = malloc(sizeof(uint32_t) << HBITS);
        if (!c[i].in || !c[i].out || !c[i].table)
            die("malloc", ENOMEM);
        fill_text(c[i].in, BLOCK, 0x9e3779b97f4a7c15u * (i + 1));
    }
    for (size_t i = 0; i < n; i++)
        t[i] = spawn(compress_worker, &c[i]);
    gate_open_when((int)n);
    for (size_t i = 0; i < n; i++)
        join(t[i]);
    for (size_t i = 0; i < n; i++) {
        spans[i] = c[i].span;
        /* Every block of a thread compresses to the same size: a mismatch is a fault. */
        if (iters && c[i].bytes_out % iters != 0) {
            fprintf(stderr, "pthread_bench compress: thread %zu's sizes differ\n", i);
            exit(1);
        }
        free(c[i].in);
        free(c[i].out);
        free(c[i].table);
    }
    elapsed = span_of(spans, n);
    free(c);
    free(t);
    free(spans);
}

/* ---- main ------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    void (*run)(void);
    int takes_n;
} ops[] = {
    { "create", run_create, 1 },     { "yield", run_yield, 0 },
    { "condvar", run_condvar, 0 },   { "lock", run_lock, 0 },
    { "mutex", run_mutex, 1 },       { "messaging", run_messaging, 1 },
    { "compress", run_compress, 1 },
};

static void *driver(void *arg)
{
    ((void (*)(void))arg)();
    return NULL;
}

static int parse(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno == 0 && *s >= '0' && *s <= '9' && *end == '\0';
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4 || !parse(argv[2], &iters) ||
        (argc == 4 && (!parse(argv[3], &param) || param == 0 || param > 100000))) {
        fprintf(stderr, "usage: pthread_bench OP ITERS [N]  (OP: create N, yield, condvar, "
                        "lock, mutex N, messaging GROUPS, compress N)\n");
        return 2;
    }
    op = argv[1];
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        if (strcmp(op, ops[i].name) != 0)
            continue;
        if (argc == 4 && !ops[i].takes_n) {
            fprintf(stderr, "pthread_bench: %s takes no N\n", op);
            return 2;
        }
        pthread_t d;
        check(pthread_create(&d, NULL, driver, (void *)ops[i].run), "pthread_create (driver)");
        check(pthread_join(d, NULL), "pthread_join (driver)");
        printf("elapsed_ns %llu\n", elapsed);
        Dl_info info;
        void *bound = dlsym(RTLD_DEFAULT, "pthread_create");
        if (bound && dladdr(bound, &info) && info.dli_fname)
            printf("pthread_create_from %s\n", info.dli_fname);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    fprintf(stderr, "pthread_bench: unknown operation %s\n", op);
    return 2;
}
