//! The rows: each reference tool's command line beside the probe that measures the same thing.
//!
//! One entry per comparison, in the order they are run and printed. A row names the program
//! and its arguments (`{file}` is the scratch file of [`super::tool::Scratch`]), whether the
//! tool is pinned the way the probe's `placement=same` is, the server it needs, how its
//! output is read, and the probe and parameters it is compared with — and says whether the
//! two definitions are the same, or how they differ (read from the tools' sources: perf's
//! `bench/sched-pipe.c`, `bench/syscall.c`, `bench/mem-functions.c`; lmbench's `lat_*.c`,
//! `bw_*.c` and `lib_timing.c`).
//!
//! lmbench times with `ENOUGH` µs per repetition (crosscheck sets 10 ms, like a schedlab sample,
//! unless the environment has one: lmbench's own calibration picks 1 s on a VM and then takes
//! minutes per row) and reports the median of 11 repetitions (`-N`); the rows whose tests
//! insist on 1–2 s per repetition (lat_pipe, lat_udp: SHORT; lat_tcp, bw_pipe, bw_unix:
//! MEDIUM) take 3 repetitions.

use super::parse::Parser;

/// Which suite of tools a row's program belongs to (how it is found).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `perf`, on PATH.
    Perf,
    /// An lmbench binary, in `--lmbench-dir` or on PATH.
    Lmbench,
    /// `cyclictest` (rt-tests), on PATH.
    Cyclictest,
}

impl Family {
    /// `perf`, `lmbench` or `cyclictest`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Perf => "perf",
            Family::Lmbench => "lmbench",
            Family::Cyclictest => "cyclictest",
        }
    }
}

/// Is the tool's definition the probe's?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Definition {
    /// The same operation, the same unit: the figures should agree. The text says what was
    /// checked (and any difference too small to matter).
    Matches(&'static str),
    /// A known difference in what is measured; the text says what it is.
    Differs(&'static str),
    /// No probe measures what the tool measures; the text says why none is close enough.
    NoProbe(&'static str),
}

/// What a row needs besides its program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing.
    Nothing,
    /// `/tmp/hello`, lat_proc's hard-coded program (copied from lmbench's `hello`, as the
    /// lmbench script does).
    Hello,
    /// The scratch file `{file}` (16 MiB written in 8 KiB blocks: lmdd's, small folios).
    File,
}

/// One comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// Stable id: `perf.sched.pipe`, `lmbench.lat_syscall.null`.
    pub id: &'static str,
    /// Where its program comes from.
    pub family: Family,
    /// The program (`perf`, `lat_pipe`).
    pub program: &'static str,
    /// Its arguments; `{file}` is replaced by the scratch file.
    pub args: &'static [&'static str],
    /// Run the tool pinned to the CPU `placement=same` uses (children inherit the mask).
    pub pin: bool,
    /// A server started with these arguments before the tool and stopped with the second
    /// ones after it (lmbench's `-s` and `-S localhost`).
    pub server: Option<(&'static [&'static str], &'static [&'static str])>,
    /// A file or program the tool expects.
    pub needs: Needs,
    /// How its output is read.
    pub parser: Parser,
    /// Bytes per operation, for a rate compared with a time per call (`mem.clear`).
    pub bytes_per_op: Option<f64>,
    /// Invocations per pair, the tool's figure for the pair being their median. perf bench
    /// times one run and prints its mean, so a preemption anywhere in it lands whole in the
    /// figure; the probe takes the median of its samples and lmbench the median of its
    /// repetitions (`-N`), so perf is run [`PERF_RUNS`] times. 1 for the others.
    pub runs: usize,
    /// The probe and its parameters; `None` when no probe matches.
    pub probe: Option<(&'static str, &'static [(&'static str, &'static str)])>,
    /// Same definition or not, and why.
    pub definition: Definition,
}

impl Row {
    /// The command line as shown: program and arguments, `taskset -c CPU` when pinned.
    pub fn command(&self, file: &str) -> String {
        let mut parts = Vec::new();
        if self.pin {
            parts.push("(pinned)".to_string());
        }
        parts.push(self.program.to_string());
        parts.extend(self.args.iter().map(|a| a.replace("{file}", file)));
        if self.runs > 1 {
            parts.push(format!("(median of {} runs)", self.runs));
        }
        parts.join(" ")
    }
}

/// cyclictest invocations per pair: as many as the probe's quick samples.
pub const CYCLICTEST_RUNS: usize = 11;

/// perf bench invocations per pair (see [`Row::runs`]).
pub const PERF_RUNS: usize = 5;

const SAME: &[(&str, &str)] = &[("placement", "same")];

// Issue 25, wake-up latency (branch wakeup): the sched.wakeup_latency variants cyclictest
// runs the same way. Under load cyclictest has no row: crosscheck runs one tool beside one
// probe and starts no load of its own.
const WAKE_OTHER: &[(&str, &str)] = &[
    ("backend", "os"),
    ("policy", "other"),
    ("load", "idle"),
    ("slack", "default"),
    ("other", "none"),
];
const WAKE_FIFO: &[(&str, &str)] = &[
    ("backend", "os"),
    ("policy", "fifo"),
    ("load", "idle"),
    ("slack", "default"),
    ("other", "none"),
];
const WAKE_DMA0: &[(&str, &str)] = &[
    ("backend", "os"),
    ("policy", "other"),
    ("load", "idle"),
    ("slack", "default"),
    ("other", "dma0"),
];

/// A cyclictest row: pinned to the probe's CPU (its one thread inherits the mask), the
/// average read in ns, compared with `sched.wakeup_latency` under `params`. The probe's
/// figure is the median of its samples, each the mean of about 100 wakes; so cyclictest runs
/// 100 loops (`-l 100`) [`CYCLICTEST_RUNS`] times a pair and the median of its averages is
/// kept. One run of 1000 loops gave the mean of 1000 wakes instead, which one 5 ms stall of a
/// loaded machine moves by 5 µs while the probe's median does not move (the first study run:
/// 1.08 ms against 108 µs at load 28).
macro_rules! cyclictest {
    ($id:expr, $args:expr, $params:expr, $same:expr) => {
        Row {
            id: $id,
            family: Family::Cyclictest,
            program: "cyclictest",
            args: $args,
            pin: true,
            server: None,
            needs: Needs::Nothing,
            parser: Parser::CyclictestAvgNs,
            bytes_per_op: None,
            runs: CYCLICTEST_RUNS,
            probe: Some(("sched.wakeup_latency", $params)),
            definition: Definition::Matches($same),
        }
    };
}
const NONE: &[(&str, &str)] = &[];

/// A `perf bench mem` row: `-l` loops so one invocation lasts 20 ms or more (perf times the
/// loop with gettimeofday; 3 ms runs read up to twice the time under load). perf's buffers
/// come from calloc: at 1 MiB and more they are mmap'd chunks, 16 bytes past a page
/// boundary, hence `align=16` for `mem.clear`; at 4 KiB they are heap blocks at whatever
/// offset the heap gives (an 8% effect at most: 17.5 ns at 0, 19.0 ns at 16–48 past a line).
macro_rules! perf_mem {
    ($id:literal, $fun:literal, $size:literal, $loops:literal, $bytes:expr, $probe:expr) => {
        perf_mem!($id, $fun, $size, $loops, $bytes, $probe, Definition::Matches(
            "glibc's function on a buffer written once before timing, bytes over time (perf: gettimeofday around -l calls)",
        ))
    };
    ($id:literal, $fun:literal, $size:literal, $loops:literal, $bytes:expr, $probe:expr, $def:expr) => {
        Row {
            id: $id,
            family: Family::Perf,
            program: "perf",
            args: &["bench", "mem", $fun, "-f", "default", "-s", $size, "-l", $loops],
            pin: false,
            server: None,
            needs: Needs::Nothing,
            parser: Parser::PerfRate,
            bytes_per_op: $bytes,
            runs: PERF_RUNS,
            probe: Some($probe),
            definition: $def,
        }
    };
}

/// A row of `lat_syscall`.
macro_rules! lat_syscall {
    ($id:literal, $args:expr, $label:literal, $probe:literal, $what:literal) => {
        Row {
            id: $id,
            family: Family::Lmbench,
            program: "lat_syscall",
            args: $args,
            pin: false,
            server: None,
            needs: Needs::Nothing,
            parser: Parser::LmbenchMicros($label),
            bytes_per_op: None,
            runs: 1,
            probe: Some(($probe, NONE)),
            definition: Definition::Matches($what),
        }
    };
}

/// Every row, in order. The memory rows come after the lmbench rows: their 64 MiB buffers
/// leave glibc's heap larger (its mmap threshold rises after a large free), and fork, which
/// copies the parent's mappings, then costs more (lat_proc fork read 1.7x and 2.1x after
/// them, against 1.08x from a fresh `schedlab run`).
pub const ROWS: &[Row] = &[
    Row {
        id: "perf.sched.pipe",
        family: Family::Perf,
        program: "perf",
        args: &["bench", "sched", "pipe", "-l", "100000"],
        pin: true,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::PerfUsecsPerOp,
        bytes_per_op: None,
        runs: PERF_RUNS,
        probe: Some(("os.pipe.latency", SAME)),
        definition: Definition::Matches(
            "one op = one round trip of a 4-byte int between two processes over two pipes, both on one CPU",
        ),
    },
    Row {
        id: "perf.sched.pipe.threads",
        family: Family::Perf,
        program: "perf",
        args: &["bench", "sched", "pipe", "-T", "-l", "100000"],
        pin: true,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::PerfUsecsPerOp,
        bytes_per_op: None,
        runs: PERF_RUNS,
        probe: Some(("os.pipe.latency", SAME)),
        definition: Definition::Differs(
            "-T: two threads of one process, so no address-space switch per hand-off; the probe uses two processes",
        ),
    },
    Row {
        id: "perf.sched.pipe.unpinned",
        family: Family::Perf,
        program: "perf",
        args: &["bench", "sched", "pipe", "-l", "5000"],
        pin: false,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::PerfUsecsPerOp,
        bytes_per_op: None,
        runs: PERF_RUNS,
        probe: Some(("os.pipe.latency", &[("placement", "cross")])),
        definition: Definition::Differs(
            "unpinned: the kernel places the two ends, on one CPU (same-CPU speed) or two; the probe pins them to two CPUs",
        ),
    },
    Row {
        id: "perf.syscall.basic",
        family: Family::Perf,
        program: "perf",
        args: &["bench", "syscall", "basic", "-l", "2000000"],
        pin: false,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::PerfUsecsPerOp,
        bytes_per_op: None,
        runs: PERF_RUNS,
        probe: Some(("os.syscall.null", NONE)),
        definition: Definition::Matches("getppid() in a loop, time per call, both"),
    },
    lat_syscall!(
        "lmbench.lat_syscall.null",
        &["null"],
        "Simple syscall",
        "os.syscall.null",
        "getppid() in a loop, both"
    ),
    lat_syscall!(
        "lmbench.lat_syscall.read",
        &["read"],
        "Simple read",
        "os.syscall.read",
        "read() of 1 byte from /dev/zero, both"
    ),
    lat_syscall!(
        "lmbench.lat_syscall.write",
        &["write"],
        "Simple write",
        "os.syscall.write",
        "write() of 1 byte to /dev/null, both"
    ),
    lat_syscall!(
        "lmbench.lat_syscall.stat",
        &["stat", "/etc/passwd"],
        "Simple stat",
        "os.syscall.stat",
        "stat() of /etc/passwd, both (given to lat_syscall as its file)"
    ),
    lat_syscall!(
        "lmbench.lat_syscall.fstat",
        &["fstat", "/etc/passwd"],
        "Simple fstat",
        "os.syscall.fstat",
        "fstat() of an open /etc/passwd, both"
    ),
    lat_syscall!(
        "lmbench.lat_syscall.open",
        &["open", "/etc/passwd"],
        "Simple open/close",
        "os.syscall.open_close",
        "open() then close() of /etc/passwd, both"
    ),
    Row {
        id: "lmbench.lat_sig.install",
        family: Family::Lmbench,
        program: "lat_sig",
        args: &["install"],
        pin: false,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("Signal handler installation"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.signal.install", NONE)),
        definition: Definition::Matches("sigaction() installing a SIGUSR1 handler, both"),
    },
    Row {
        id: "lmbench.lat_sig.catch",
        family: Family::Lmbench,
        program: "lat_sig",
        args: &["catch"],
        pin: false,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("Signal handler overhead"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.signal.catch", NONE)),
        definition: Definition::Matches(
            "SIGUSR1 to oneself and caught, minus sending signal 0 (lmbench: kill(getpid()); the probe: tgkill to its thread, the same delivery in a single-threaded process)",
        ),
    },
    Row {
        id: "lmbench.lat_pipe",
        family: Family::Lmbench,
        program: "lat_pipe",
        args: &["-N", "3"],
        pin: true,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("Pipe latency"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.pipe.latency", SAME)),
        definition: Definition::Matches(
            "round trip between two processes over two pipes, both on one CPU (1-byte message there, 4 here: the same copy path)",
        ),
    },
    Row {
        id: "lmbench.lat_unix",
        family: Family::Lmbench,
        program: "lat_unix",
        args: &[],
        pin: true,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("AF_UNIX sock stream latency"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.unix.latency", SAME)),
        definition: Definition::Matches(
            "1-byte round trip over an AF_UNIX stream socketpair between two processes, both on one CPU",
        ),
    },
    Row {
        id: "lmbench.lat_tcp",
        family: Family::Lmbench,
        program: "lat_tcp",
        args: &["-N", "3", "localhost"],
        pin: true,
        server: Some((&["-s"], &["-S", "localhost"])),
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("TCP latency using"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.tcp.latency", SAME)),
        definition: Definition::Matches(
            "1-byte round trip over TCP on loopback to a server process, both on one CPU (the probe sets TCP_NODELAY, which a 1-byte ping-pong never waits on)",
        ),
    },
    Row {
        id: "lmbench.lat_udp",
        family: Family::Lmbench,
        program: "lat_udp",
        args: &["-N", "3", "localhost"],
        pin: true,
        server: Some((&["-s"], &["-S", "localhost"])),
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("UDP latency using"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.udp.latency", SAME)),
        definition: Definition::Matches(
            "round trip of a 4-byte sequence number over UDP on loopback to a server process, both on one CPU",
        ),
    },
    Row {
        id: "lmbench.lat_ctx.2",
        family: Family::Lmbench,
        program: "lat_ctx",
        args: &["-s", "0", "2"],
        pin: true,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LatCtx(2),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.ctx.switch", &[("procs", "2"), ("size", "0k")])),
        definition: Definition::Matches(
            "a token round a ring of 2 processes over pipes, per switch, the pipe overhead removed; all on one CPU",
        ),
    },
    Row {
        id: "lmbench.lat_ctx.8.16k",
        family: Family::Lmbench,
        program: "lat_ctx",
        args: &["-s", "16", "8"],
        pin: true,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LatCtx(8),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.ctx.switch", &[("procs", "8"), ("size", "16k")])),
        definition: Definition::Matches(
            "8 processes each summing 16 KiB between hand-offs, per switch, pipe and sum overhead removed; all on one CPU",
        ),
    },
    Row {
        id: "lmbench.lat_proc.fork",
        family: Family::Lmbench,
        program: "lat_proc",
        args: &["fork"],
        pin: false,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("Process fork+exit"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.proc.fork_exit", NONE)),
        definition: Definition::Differs(
            "fork copies the parent's page tables and mappings: lat_proc's parent is a small C program, schedlab's a large Rust binary (parent_rss_kib about 9 MiB; 13 MiB after the perf mem rows, when this row read 1.7-2.1x, hence their place at the end)",
        ),
    },
    Row {
        id: "lmbench.lat_proc.exec",
        family: Family::Lmbench,
        program: "lat_proc",
        args: &["exec"],
        pin: false,
        server: None,
        needs: Needs::Hello,
        parser: Parser::LmbenchMicros("Process fork+execve"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.proc.fork_exec", &[("def", "lmbench")])),
        definition: Definition::Differs(
            "fork + execve of a tiny C program with stdout closed and an empty environment, then wait (lmbench's hello, /bin/true here); the fork is of the parent, as in fork+exit: schedlab's is larger",
        ),
    },
    Row {
        id: "lmbench.lat_proc.shell",
        family: Family::Lmbench,
        program: "lat_proc",
        args: &["shell"],
        pin: false,
        server: None,
        needs: Needs::Hello,
        parser: Parser::LmbenchMicros("Process fork+/bin/sh -c"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.proc.fork_sh", &[("def", "lmbench")])),
        definition: Definition::Differs(
            "fork + /bin/sh -c PROGRAM, the shell execs it (lmbench's hello, /bin/true here); the first fork is of the parent, as in fork+exit: schedlab's is larger",
        ),
    },
    Row {
        id: "lmbench.lat_pagefault",
        family: Family::Lmbench,
        program: "lat_pagefault",
        args: &["{file}"],
        pin: false,
        server: None,
        needs: Needs::File,
        parser: Parser::LmbenchMicros("Pagefaults on"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.mm.pagefault", &[("folios", "small"), ("def", "lmbench")])),
        definition: Definition::Matches(
            "touch every page of a cached file mapped shared + munmap + mmap, minus untouched munmap + mmap, per page; the file written in 8 KiB blocks (small folios) for both",
        ),
    },
    Row {
        id: "lmbench.lat_mmap",
        family: Family::Lmbench,
        program: "lat_mmap",
        args: &["512k", "{file}"],
        pin: true,
        server: None,
        needs: Needs::File,
        parser: Parser::LatMmap,
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.mm.mmap", &[("size", "512k")])),
        definition: Definition::Differs(
            "the same mmap of 512 KiB of a cached file, a store every 16 KiB of its first tenth and munmap, both on one CPU, but not the same address space: lat_mmap's is a fresh single-threaded child that never ran elsewhere, schedlab's has threads that ran on the other CPU, and while that CPU idles with it still loaded every munmap also flushes that CPU's TLB (an interrupt to an idle vCPU), so the probe reads 7.5 or 9.7 µs by what that CPU last ran. A C loop of lat_mmap's shows it: 7.5 µs when its process never left CPU 0, 9.6-9.8 µs when it started on CPU 1 and moved, the same 2.2 µs step",
        ),
    },
    Row {
        id: "lmbench.lat_select.file.10",
        family: Family::Lmbench,
        program: "lat_select",
        args: &["-n", "10", "file"],
        pin: false,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("Select on 10 fd"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.select.fds", &[("kind", "file"), ("fds", "10"), ("def", "lmbench")])),
        definition: Definition::Matches(
            "select() with a zero timeout, nfds = 10 over lmbench's own descriptor numbers, per call",
        ),
    },
    Row {
        id: "lmbench.lat_select.tcp.100",
        family: Family::Lmbench,
        program: "lat_select",
        args: &["-n", "100", "tcp"],
        pin: false,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMicros("Select on 100 tcp fd"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.select.fds", &[("kind", "tcp"), ("fds", "100"), ("def", "lmbench")])),
        definition: Definition::Matches(
            "select() with a zero timeout on connected TCP sockets, nfds = 100 over lmbench's descriptor numbers, per call",
        ),
    },
    Row {
        id: "lmbench.bw_pipe",
        family: Family::Lmbench,
        program: "bw_pipe",
        args: &["-N", "3"],
        pin: true,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMbPerSec("Pipe bandwidth"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.pipe.bandwidth", SAME)),
        definition: Definition::Matches(
            "64 KiB writes through a pipe from a child to the reading parent, both on one CPU",
        ),
    },
    Row {
        id: "lmbench.bw_unix",
        family: Family::Lmbench,
        program: "bw_unix",
        args: &["-N", "3"],
        pin: true,
        server: None,
        needs: Needs::Nothing,
        parser: Parser::LmbenchMbPerSec("AF_UNIX sock stream bandwidth"),
        bytes_per_op: None,
        runs: 1,
        probe: Some(("os.unix.bandwidth", SAME)),
        definition: Definition::Matches(
            "64 KiB transfers over an AF_UNIX stream socketpair from a child to the parent, both on one CPU",
        ),
    },
    perf_mem!(
        "perf.mem.memset.4k",
        "memset",
        "4KB",
        "1048576",
        Some(4096.0),
        ("mem.clear", &[("routine", "memset"), ("size", "4096"), ("align", "0")])
    ),
    perf_mem!(
        "perf.mem.memset.1m",
        "memset",
        "1MB",
        "2048",
        Some(1048576.0),
        ("mem.clear", &[("routine", "memset"), ("size", "1048576"), ("align", "16")])
    ),
    perf_mem!(
        "perf.mem.memset.64m",
        "memset",
        "64MB",
        "16",
        Some(67108864.0),
        ("mem.clear", &[("routine", "memset"), ("size", "67108864"), ("align", "16")]),
        Definition::Differs(
            "perf clears a fresh process's first 64 MiB mapping, the probe a mapping in a process that has mapped and freed others; on this VM a C loop doing what perf does (calloc, memset once, 16 timed calls) took 3.21 ms per call on its first buffer and 2.55-2.68 ms on the next three, and this row read 0.81-0.97 over five runs",
        )
    ),
    perf_mem!(
        "perf.mem.memcpy.4k",
        "memcpy",
        "4KB",
        "1048576",
        None,
        ("mem.copy", &[("size", "4096")]),
        Definition::Differs(
            "perf's source and destination are two calloc'd 4 KiB heap blocks 4112 bytes apart, so every load 4K-aliases the store 16 bytes before it (a C loop: 143.6 GiB/s at that distance, 195 GiB/s at 4160 or 8192); mem.copy's buffers do not alias",
        )
    ),
    perf_mem!("perf.mem.memcpy.1m", "memcpy", "1MB", "2048", None, ("mem.copy", &[("size", "1048576")])),
    perf_mem!("perf.mem.memcpy.64m", "memcpy", "64MB", "16", None, ("mem.copy", &[("size", "67108864")])),
    // Issue 25, wake-up latency (branch wakeup): cyclictest beside sched.wakeup_latency.
    cyclictest!(
        "cyclictest",
        &["-q", "-t", "1", "-i", "1000", "-l", "100", "-N", "--laptop"],
        WAKE_OTHER,
        "one thread woken every 1 ms by clock_nanosleep(TIMER_ABSTIME) on CLOCK_MONOTONIC, SCHED_OTHER, default timer slack, on one CPU, nothing holding /dev/cpu_dma_latency (--laptop); mean lateness of 100 wakes (cyclictest's Avg of -l 100, the probe's per-sample mean), the median of 11 of them each side; cyclictest computes its next due time the same way (rt-tests src/cyclictest/cyclictest.c, timerthread)"
    ),
    cyclictest!(
        "cyclictest.fifo",
        &["-q", "-t", "1", "-p", "80", "-i", "1000", "-l", "100", "-N", "--laptop"],
        WAKE_FIFO,
        "the same timer under SCHED_FIFO priority 80 (-p 80), where timer slack does not apply"
    ),
    cyclictest!(
        "cyclictest.dma0",
        &["-q", "-t", "1", "-i", "1000", "-l", "100", "-N"],
        WAKE_DMA0,
        "the SCHED_OTHER timer with /dev/cpu_dma_latency held at 0: cyclictest holds it itself (its default as root), the probe's is held by another process; a PM QoS request is system-wide, so the two are the same"
    ),
];
