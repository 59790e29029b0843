//! Rows of UnixBench's table (seed 002, Table 1) that lmbench has no equivalent for, with
//! UnixBench's definitions:
//!
//! - `os.syscall.mix`: UnixBench's `syscall` test — one loop iteration is `close(dup(0))`,
//!   `getpid()`, `getuid()` and `umask(022)`: five system calls, the mix the seed describes.
//!   UnixBench counts iterations in 20 s (seed 002: Linux 28.8 M in 20 s, 695 ns each); we
//!   report the time per iteration, so its count per second is 10^9 / value.
//! - `os.pipe.throughput`: UnixBench's "pipe throughput" — one process writes 512 bytes to a
//!   pipe and reads them back; the time per write+read pair (UnixBench counts pairs in its
//!   run's time: seed 002's Linux column reads 45.4 M).
//!
//! - `os.pipe.context1`: UnixBench's "Pipe-based Context Switching" (`context1`) — two
//!   processes pass an increasing counter (an `unsigned long`, 8 bytes) back and forth through
//!   two pipes, each checking it against its own count; the time per round trip (UnixBench
//!   counts round trips: 10^6 / value per second). Unpinned, as UnixBench runs it: on a VM the
//!   result depends on where the kernel puts the two (same CPU: a few µs; two CPUs: tens), so
//!   the `placement` note gives where each was seen after every sample and whether they
//!   shared a CPU (`measure::placement`); `os.pipe.latency` is the pinned measurement of the
//!   same round trip.
//! - `os.cpu.hanoi`: UnixBench's `hanoi` — the recursive Towers of Hanoi, 10 disks (its
//!   default), moving the disk counts in a 4-slot array as `mov(n, f, t)` does; one iteration
//!   is one whole solve (1023 moves). UnixBench counts solves in 20 s (seed 002: Linux 4.36 M,
//!   4.58 µs each); a pure computation, on which the seed found every OS alike.
//!
//! `umask` changes the process's file-creation mask; the loop restores the caller's mask
//! when it ends.

use std::hint::black_box;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sys::{self, Child};
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    SyscallMix,
    PipeThroughput,
    Context1,
    Hanoi,
}

struct UnixBenchProbe(Row);

/// The UnixBench rows, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Row::SyscallMix, Row::PipeThroughput, Row::Context1, Row::Hanoi]
        .into_iter()
        .map(|r| Box::new(UnixBenchProbe(r)) as Box<dyn Probe>)
        .collect()
}

/// UnixBench's pipe message.
const PIPE_BYTES: usize = 512;

impl Probe for UnixBenchProbe {
    fn info(&self) -> Info {
        match self.0 {
            Row::SyscallMix => Info {
                id: "os.syscall.mix",
                doc: "close(dup(0)), getpid(), getuid(), umask(022): five system calls, per loop iteration",
                unit: Unit::Nanos,
                mirrors: "UnixBench syscall (its default mix; it counts iterations in 20 s: 10^9 / value per second)",
                requires: "",
            },
            Row::PipeThroughput => Info {
                id: "os.pipe.throughput",
                doc: "One process writes 512 bytes to a pipe and reads them back: per write+read pair",
                unit: Unit::Nanos,
                mirrors: "UnixBench pipe throughput (it counts pairs per second: 10^9 / value)",
                requires: "",
            },
            Row::Context1 => Info {
                id: "os.pipe.context1",
                doc: "Two unpinned processes pass an increasing 8-byte counter through two pipes, each checking it: per round trip",
                unit: Unit::Micros,
                mirrors: "UnixBench context1, Pipe-based Context Switching (unpinned as there; it counts round trips: 10^6 / value per second)",
                requires: "",
            },
            Row::Hanoi => Info {
                id: "os.cpu.hanoi",
                doc: "Recursive Towers of Hanoi, 10 disks (1023 moves): per solve",
                unit: Unit::Nanos,
                mirrors: "UnixBench hanoi (10 disks, its default; it counts solves in its run's time: 10^9 / value per second)",
                requires: "",
            },
        }
    }

    fn setup(&self, _params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        match self.0 {
            Row::SyscallMix => {
                // Fail in setup if descriptor 0 cannot be duplicated (closed stdin).
                // SAFETY: dup of a descriptor number; the result is checked and closed.
                let fd = unsafe { libc::dup(0) };
                if fd < 0 {
                    return Err(ProbeError::Skip(format!(
                        "dup(0) fails ({}): UnixBench's mix needs standard input open",
                        std::io::Error::last_os_error()
                    )));
                }
                // SAFETY: our own fresh descriptor, closed once.
                unsafe { libc::close(fd) };
                Ok(Box::new(Mix))
            }
            Row::PipeThroughput => {
                let (r, w) = sys::pipe()?;
                Ok(Box::new(PipeLoop { r, w, buf: [0u8; PIPE_BYTES] }))
            }
            Row::Context1 => Ok(Box::new(Context1::start()?)),
            Row::Hanoi => Ok(Box::new(Hanoi { disks: HANOI_DISKS })),
        }
    }
}

/// context1's child ("slave"): read the counter from `rd`, check it against its own, send
/// its own back on `wr`, count on; leave on end of file (0) or a sync error (2).
/// Async-signal-safe: runs in the forked child.
fn context1_child(rd: RawFd, wr: RawFd) -> i32 {
    let mut iter1: u64 = 0;
    loop {
        let mut b = [0u8; 8];
        if sys::read_exact(rd, &mut b).is_err() {
            return 0;
        }
        if u64::from_ne_bytes(b) != iter1 {
            return 2;
        }
        if sys::write_all(wr, &iter1.to_ne_bytes()).is_err() {
            return 1;
        }
        iter1 += 1;
    }
}

/// UnixBench's context1: the parent ("master") end of the two pipes and the child.
struct Context1 {
    /// Write end of p1 and read end of p2. Declared before `child`, so dropped first: the
    /// child sees end of file and leaves.
    to_child: OwnedFd,
    from_child: OwnedFd,
    child: Child,
    iter: u64,
}

impl Context1 {
    fn start() -> Result<Context1, ProbeError> {
        let (p1r, p1w) = sys::pipe()?;
        let (p2r, p2w) = sys::pipe()?;
        let (rd, wr, other_w, other_r) =
            (sys::raw(&p1r), sys::raw(&p2w), sys::raw(&p1w), sys::raw(&p2r));
        // Unpinned, as UnixBench forks it.
        let child = Child::fork(None, move || {
            // SAFETY: the child's copies of the parent's ends, which it does not use.
            unsafe {
                libc::close(other_w);
                libc::close(other_r);
            }
            context1_child(rd, wr)
        })?;
        drop((p1r, p2w));
        Ok(Context1 { to_child: p1w, from_child: p2r, child, iter: 0 })
    }
}

impl Workload for Context1 {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let (w, r) = (self.to_child.as_raw_fd(), self.from_child.as_raw_fd());
        let pid = self.child.pid();
        let gone = |what: &str, e: std::io::Error| {
            if interrupt::requested() {
                ProbeError::Interrupted
            } else {
                ProbeError::Failed(format!("context1 child (pid {pid}) {what}: {e}"))
            }
        };
        let start = std::time::Instant::now();
        for _ in 0..iters {
            sys::write_all(w, &self.iter.to_ne_bytes()).map_err(|e| gone("took no counter", e))?;
            let mut b = [0u8; 8];
            sys::read_exact(r, &mut b).map_err(|e| gone("sent no counter back", e))?;
            let check = u64::from_ne_bytes(b);
            if check != self.iter {
                return Err(ProbeError::Failed(format!(
                    "context1 sync error: expected {}, got {check}",
                    self.iter
                )));
            }
            self.iter += 1;
        }
        Ok(Timing::from_elapsed(start.elapsed()))
    }

    /// Neither process is pinned: the `placement` note says where each ran, sample by
    /// sample, and whether they shared a CPU (on a VM the round trip is several times
    /// slower when they did not).
    fn parties(&self) -> Vec<Party> {
        vec![Party::caller("parent"), Party::task("child", self.child.pid())]
    }
}

impl Instance for Context1 {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }

    fn notes(&self) -> Params {
        Params::new().with("message_bytes", 8)
    }
}

/// hanoi.c's default number of disks.
const HANOI_DISKS: u32 = 10;

/// hanoi.c's `mov(n, f, t)`: moves `n` disks from peg `f` to peg `t` (pegs 1-3), counting the
/// disks on each peg in `num` as it goes. Not inlined, so the recursion stays a recursion.
#[inline(never)]
fn mov(num: &mut [i64; 4], n: u32, f: usize, t: usize) {
    if n == 1 {
        num[f] -= 1;
        num[t] += 1;
        return;
    }
    let o = 6 - (f + t);
    mov(num, n - 1, f, o);
    mov(num, 1, f, t);
    mov(num, n - 1, o, t);
}

struct Hanoi {
    disks: u32,
}

impl Workload for Hanoi {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        // hanoi.c: num[1] = disk, and the counts carry on from solve to solve.
        let mut num = [0i64, i64::from(self.disks), 0, 0];
        let t = Timing::measure(|| {
            for _ in 0..iters {
                mov(black_box(&mut num), black_box(self.disks), 1, 3);
            }
        });
        // Every solve moves all the disks from peg 1 to peg 3.
        let want = [
            0,
            i64::from(self.disks) * (1 - iters as i64),
            0,
            i64::from(self.disks) * iters as i64,
        ];
        if black_box(num) != want {
            return Err(ProbeError::Failed(format!("hanoi ended with pegs {num:?}, not {want:?}")));
        }
        Ok(t)
    }
}

impl Instance for Hanoi {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }

    fn notes(&self) -> Params {
        Params::new().with("disks", self.disks).with("moves", (1u64 << self.disks) - 1)
    }
}

struct Mix;

impl Workload for Mix {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let mut failed = false;
        // SAFETY: umask has no preconditions; the old mask is put back below.
        let old = unsafe { libc::umask(0o022) };
        let t = Timing::measure(|| {
            for _ in 0..iters {
                // SAFETY: dup of descriptor 0 (checked open in setup); the copy is closed
                // at once, as UnixBench does; the other calls have no preconditions.
                unsafe {
                    failed |= libc::close(libc::dup(black_box(0))) != 0;
                    black_box(libc::getpid());
                    black_box(libc::getuid());
                    black_box(libc::umask(black_box(0o022)));
                }
            }
        });
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        if failed {
            return Err(ProbeError::last_os("close(dup(0)) in the timed loop"));
        }
        Ok(t)
    }
}

impl Instance for Mix {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }
}

struct PipeLoop {
    r: OwnedFd,
    w: OwnedFd,
    buf: [u8; PIPE_BYTES],
}

impl Workload for PipeLoop {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let (r, w) = (self.r.as_raw_fd(), self.w.as_raw_fd());
        let buf = self.buf.as_mut_ptr();
        let mut failed = false;
        let t = Timing::measure(|| {
            for _ in 0..iters {
                // SAFETY: `buf` is PIPE_BYTES long and ours; the descriptors are the two
                // ends of our pipe, whose buffer holds 512 bytes, so neither call blocks.
                unsafe {
                    failed |=
                        libc::write(w, black_box(buf).cast(), PIPE_BYTES) != PIPE_BYTES as isize;
                    failed |=
                        libc::read(r, black_box(buf).cast(), PIPE_BYTES) != PIPE_BYTES as isize;
                }
            }
        });
        if failed {
            return Err(ProbeError::last_os("pipe write/read in the timed loop"));
        }
        Ok(t)
    }
}

impl Instance for PipeLoop {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counter goes round and comes back checked, from call to call; a child that
    /// receives the wrong count leaves, which the parent reports.
    #[test]
    fn context1_passes_the_counter_and_catches_a_sync_error() {
        let mut c = Context1::start().unwrap();
        c.run(100).unwrap();
        c.run(50).unwrap();
        assert_eq!(c.iter, 150);
        let parties = c.parties();
        let names: Vec<&str> = parties.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["parent", "child"]);
        assert_eq!(parties[1].who, schedlab_measure::placement::Who::Task(c.child.pid()));
        // Skip a count: the child exits with 2, and the parent's read sees end of file.
        c.iter += 1;
        let e = c.run(1).unwrap_err();
        assert!(e.to_string().contains("sent no counter back"), "{e}");
        assert_eq!(c.child.wait().unwrap(), 2);
    }

    /// The recursion really moves the tower, every disk from peg 1 to peg 3 (which `run`
    /// checks after every call).
    #[test]
    fn hanoi_moves_the_whole_tower() {
        let mut num = [0, 3, 0, 0];
        mov(&mut num, 3, 1, 3);
        assert_eq!(num, [0, 0, 0, 3]);
        let mut h = Hanoi { disks: HANOI_DISKS };
        h.run(5).unwrap();
        assert_eq!(h.notes().get("moves"), Some("1023"));
    }
}
