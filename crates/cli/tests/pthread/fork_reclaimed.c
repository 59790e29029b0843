/* A forked child reads an idle thread's stack as it was: thread A waits in a pipe read long
 * enough for the runtime to move its stack's live page out (issue 29's idle-stack reclaim,
 * userfaultfd), holding a local whose address main has; main forks, and the child reads the
 * local through that address (the child does not inherit the parent's userfaultfd
 * registration: the page read as zeros there). Prints "ok reclaimed" when mincore(2) showed
 * the page gone before the fork (under the library, where userfaultfd is allowed), "ok
 * resident" otherwise (glibc's threads). */
#include "check.h"
#include "reclaim.h"
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int wake[2];
static volatile long *volatile shared_word;
static char *volatile shared_text;

static void *idle_reader(void *arg) {
    (void)arg;
    volatile long word = 0x5ca1ab1e;
    char text[32];
    strcpy(text, "kept on an idle stack");
    shared_text = text;
    shared_word = &word;
    char b;
    CHECK(read(wake[0], &b, 1) == 1, "read of the wake-up byte");
    CHECK(word == 0x5ca1ab1e, "word is %lx in the parent", word);
    return (void *)1L;
}

int main(void) {
    CHECK(pipe(wake) == 0, "pipe");
    pthread_t t;
    PT(pthread_create(&t, NULL, idle_reader, NULL));
    while (shared_word == NULL)
        usleep(1000);
    int gone = wait_given_back((const void *)shared_word);
    for (int round = 0; round < 3; round++) {
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            long w = *shared_word;
            int same = strcmp(shared_text, "kept on an idle stack") == 0;
            _exit(w == 0x5ca1ab1e && same ? 0 : 3);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "round %d: the child read the idle thread's local as %s (status %d)", round,
              WIFEXITED(status) && WEXITSTATUS(status) == 3 ? "something else" : "?", status);
    }
    CHECK(write(wake[1], "x", 1) == 1, "write of the wake-up byte");
    void *r;
    PT(pthread_join(t, &r));
    CHECK(r == (void *)1L, "reader returned %p", r);
    printf("ok %s\n", gone ? "reclaimed" : "resident");
    return 0;
}
