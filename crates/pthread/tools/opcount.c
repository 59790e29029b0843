/* Instructions per operation of a running program, where neither perf's counters (a VM with
 * no PMU) nor valgrind (no rdfsbase/wrfsbase) can count: runs PROG freely for DELAY_MS, then
 * single-steps every thread and records, per kernel thread, the instructions between two
 * consecutive entries of the function at FILE+OFFSET (one per operation of the loop); prints
 * the median and quartiles of SAMPLES intervals. Usage:
 *   opcount DELAY_MS FILE_SUBSTRING HEX_OFFSET SAMPLES PROG ARGS...
 * HEX_OFFSET is the function's address in that file (`nm`); the program runs without address
 * randomisation. The last interval's instruction addresses go to /tmp/opcount.rips and the
 * program's mappings to /tmp/opcount.maps, for attributing them to functions. A rep-prefixed
 * string instruction counts once per iteration (the CPU traps after each). Used for
 * docs/PTHREAD.md's instruction counts; build with `cc -O2 -o opcount opcount.c`. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define MAXT 512
static pid_t tids[MAXT]; static long cnt[MAXT]; static int seen[MAXT], nt;
static unsigned long rips[64][8192];
static int slot(pid_t t) { for (int i = 0; i < nt; i++) if (tids[i] == t) return i; tids[nt] = t; cnt[nt] = 0; seen[nt] = 0; return nt++; }
static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec / 1e9; }
static int cmp(const void *a, const void *b) { long x = *(long *)a, y = *(long *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage\n"); return 2; }
    double delay = atof(argv[1]) / 1000; const char *file = argv[2];
    unsigned long off = strtoul(argv[3], 0, 16); int want = atoi(argv[4]);
    pid_t child = fork();
    if (child == 0) { personality(ADDR_NO_RANDOMIZE); ptrace(PTRACE_TRACEME, 0, 0, 0); raise(SIGSTOP); execvp(argv[5], argv + 5); _exit(127); }
    int st; waitpid(child, &st, 0);
    ptrace(PTRACE_SETOPTIONS, child, 0, PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
    slot(child); ptrace(PTRACE_CONT, child, 0, 0);
    double t0 = now(); int stepping = 0; unsigned long target = 0;
    long *samples = calloc(want, sizeof(long)); int ns = 0; long steps = 0;
    for (;;) {
        if (!stepping && now() - t0 >= delay) {
            char path[64], line[512]; snprintf(path, sizeof path, "/proc/%d/maps", child);
            FILE *f = fopen(path, "r");
            while (f && fgets(line, sizeof line, f)) {
                unsigned long lo, o; if (strstr(line, file) && sscanf(line, "%lx-%*x %*s %lx", &lo, &o) == 2 && o == 0) { target = lo + off; break; }
            }
            if (f) fclose(f);
            if (!target) { fprintf(stderr, "no mapping of %s\n", file); kill(child, SIGKILL); return 1; }
            stepping = 1;
            for (int i = 0; i < nt; i++) syscall(SYS_tgkill, child, tids[i], SIGSTOP);
        }
        pid_t t = waitpid(-1, &st, __WALL | (stepping ? 0 : WNOHANG));
        if (t == 0) { usleep(1000); continue; }
        if (t < 0) { if (errno == EINTR) continue; break; }
        if (WIFEXITED(st) || WIFSIGNALED(st)) { if (t == child) break; continue; }
        int i = slot(t), sig = 0, s = WSTOPSIG(st);
        if ((st >> 16) != 0 || (s == SIGTRAP && !stepping)) { /* clone, exec: events, not signals */ }
        else if (s == SIGSTOP) { if (stepping) seen[i] = 1; }
        else if (s == SIGTRAP && stepping) {
            struct user_regs_struct r; ptrace(PTRACE_GETREGS, t, 0, &r); steps++;
            if (r.rip == target) {
                if (seen[i] == 2 && ns < want) {
                    samples[ns++] = cnt[i];
                    if (ns == want) { FILE *o = fopen("/tmp/opcount.rips", "w"); for (long k = 0; k < cnt[i] && k < 8192; k++) fprintf(o, "%lx\n", rips[i][k]); fclose(o);
                        char cmd[128]; snprintf(cmd, sizeof cmd, "cp /proc/%d/maps /tmp/opcount.maps", child); system(cmd); }
                }
                seen[i] = 2; cnt[i] = 0;
            }
            if (cnt[i] < 8192 && i < 64) rips[i][cnt[i]] = r.rip;
            cnt[i]++;
        } else sig = s;
        if (ns >= want) break;
        ptrace(stepping && seen[i] ? PTRACE_SINGLESTEP : PTRACE_CONT, t, 0, sig);
    }
    kill(child, SIGKILL);
    qsort(samples, ns, sizeof(long), cmp);
    if (ns) printf("samples %d steps %ld  median %ld  quartiles %ld %ld  min %ld\n", ns, steps, samples[ns / 2], samples[ns / 4], samples[3 * ns / 4], samples[0]);
    else printf("no samples (%ld steps)\n", steps);
    return 0;
}
