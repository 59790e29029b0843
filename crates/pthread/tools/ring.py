#!/usr/bin/env python3
"""Prints the event ring of a process running a `debug-ring` build of the library.

    ring.py PID LIB [N]

PID: a process (hung, or still running) with LIB loaded; LIB: the path of that
`libschedlab_pthread.so`, built with `cargo build --release --features debug-ring` in
crates/pthread (its symbol table names the ring). Prints how often each event happened,
then the last N events (default 80), oldest first: time before the last event, kernel
thread, event, argument. Event names and numbers come from schedlab-rt's src/ring.rs
(`Name = number,`), which also says what each argument is. Needs the right to read
/proc/PID/mem (root, or the process's owner with ptrace allowed).
"""
import os
import re
import struct
import subprocess
import sys

RING_RS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "rt", "src", "ring.rs")


def names():
    text = open(RING_RS).read()
    out = {int(n): name for name, n in re.findall(r"^\s*(\w+) = (\d+),", text, re.M)}
    length = int(re.search(r"pub const LEN: usize = 1 << (\d+);", text).group(1))
    return out, 1 << length


def symbols(lib):
    out = {}
    nm = subprocess.run(["nm", lib], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        p = line.split()
        if len(p) == 3 and p[2].startswith("SCHEDLAB_RING"):
            out[p[2]] = int(p[0], 16)
    if "SCHEDLAB_RING" not in out:
        sys.exit(f"ring.py: {lib} has no SCHEDLAB_RING: build it with --features debug-ring")
    return out


def base(pid, lib):
    real = os.path.realpath(lib)
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and os.path.realpath(f[5]) == real and f[2] == "00000000":
            return int(f[0].split("-")[0], 16)
    sys.exit(f"ring.py: process {pid} has not loaded {lib}")


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    pid, lib = int(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) == 4 else 80
    event_names, length = names()
    syms = symbols(lib)
    at = base(pid, lib)
    mem = open(f"/proc/{pid}/mem", "rb")

    def read(sym, size):
        mem.seek(at + syms[sym])
        return mem.read(size)

    counts = struct.unpack("<256Q", read("SCHEDLAB_RING_COUNT", 256 * 8))
    print("counts:", ", ".join(f"{event_names.get(i, i)} {c}" for i, c in enumerate(counts) if c))
    written = struct.unpack("<Q", read("SCHEDLAB_RING_NEXT", 8))[0]
    ring = struct.unpack(f"<{2 * length}Q", read("SCHEDLAB_RING", 2 * length * 8))
    first = max(0, written - min(n, length))
    events = []
    for k in range(first, written):
        i = k % length
        a, b = ring[2 * i], ring[2 * i + 1]
        events.append((a >> 8, a & 0xFF, b >> 48, b & 0xFFFF_FFFF_FFFF))
    if not events:
        return
    last = events[-1][0]
    for ns, code, tid, arg in events:
        print(f"{(ns - last) / 1000:12.1f} us  tid {tid:5}  {event_names.get(code, code):15} {arg:#x}")


if __name__ == "__main__":
    main()
