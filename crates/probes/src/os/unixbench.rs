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
//! `umask` changes the process's file-creation mask; the loop restores the caller's mask
//! when it ends.

use std::hint::black_box;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::{ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    SyscallMix,
    PipeThroughput,
}

struct UnixBenchProbe(Row);

/// The UnixBench rows, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(UnixBenchProbe(Row::SyscallMix)), Box::new(UnixBenchProbe(Row::PipeThroughput))]
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
                let mut fds = [0; 2];
                // SAFETY: `fds` has room for the two descriptors pipe2 writes.
                if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                    return Err(ProbeError::last_os("pipe2"));
                }
                // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
                let (r, w) =
                    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
                Ok(Box::new(PipeLoop { r, w, buf: [0u8; PIPE_BYTES] }))
            }
        }
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
