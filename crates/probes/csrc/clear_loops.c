/*
 * The seed's clearing loops as plain C, for the memory lab's compiler study (seed 004, issue
 * 26: "CW7 against Gold 11"): crates/probes/build.rs compiles this file once per compiler
 * (gcc, and clang where installed) and optimisation level (-O0, -O2, -O3), each with its own
 * TAG and one loop (LOOP_BYTE or LOOP_WORD) per object, so the loops appear as
 * schedlab_loop_byte_gcc_O2 and so on; it then reads each object's undefined symbols (nm)
 * to say whether the compiler turned that loop into a call to memset.
 *
 * Nothing here asks the compiler for anything: no volatile, no -fno-builtin. That is the
 * point: what an ordinary build of ordinary C makes of these loops is what is measured.
 */
#include <stddef.h>
#include <stdint.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

#ifdef LOOP_BYTE
/* Seed 004's MemorySetByteCounter: a byte, then count down. */
void CAT(schedlab_loop_byte_, TAG)(void *p, size_t n) {
    unsigned char *q = p;
    while (n != 0) {
        *q++ = 0;
        n--;
    }
}
#endif

#ifdef LOOP_WORD
/* The Metrowerks calloc loop of the seed's thread ("for (...; --size; ) *p++ = 0;"), with
 * 32-bit words: bytes to a 4-byte boundary, then words, then the bytes left. */
void CAT(schedlab_loop_word_, TAG)(void *p, size_t n) {
    unsigned char *q = p;
    unsigned char *end = q + n;
    while (q != end && ((uintptr_t)q & 3) != 0) *q++ = 0;
    uint32_t *w = (uint32_t *)q;
    size_t words = (size_t)(end - q) / 4;
    while (words != 0) {
        *w++ = 0;
        words--;
    }
    q = (unsigned char *)w;
    while (q != end) *q++ = 0;
}
#endif
