//! System-call latency: lmbench's `lat_syscall` rows (null, read, write, stat, fstat,
//! open/close).
//!
//! Each timed body is a tight loop of one system call on prepared arguments; the calibrated
//! empty-loop cost is subtracted by the sampler. `black_box` keeps the compiler from hoisting
//! or merging the calls; they are `extern "C"` calls into libc and cannot be elided anyway.

use std::ffi::CString;
use std::hint::black_box;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::{ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe};

/// The system calls measured, one probe each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Null,
    Read,
    Write,
    Stat,
    Fstat,
    OpenClose,
}

struct SyscallProbe(Call);

/// The syscall probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Call::Null, Call::Read, Call::Write, Call::Stat, Call::Fstat, Call::OpenClose]
        .into_iter()
        .map(|c| Box::new(SyscallProbe(c)) as Box<dyn Probe>)
        .collect()
}

/// The file that `stat`, `fstat` and `open/close` use, as lmbench does: a file that surely
/// exists and lives in the page and dentry caches.
const STAT_PATH: &str = "/etc/passwd";

impl Probe for SyscallProbe {
    fn info(&self) -> Info {
        let (id, doc, mirrors) = match self.0 {
            Call::Null => (
                "os.syscall.null",
                "getppid(): the cheapest real entry into the kernel and back",
                "lmbench lat_syscall null (getppid, not cached by libc)",
            ),
            Call::Read => (
                "os.syscall.read",
                "read() of 1 byte from /dev/zero",
                "lmbench lat_syscall read",
            ),
            Call::Write => (
                "os.syscall.write",
                "write() of 1 byte to /dev/null",
                "lmbench lat_syscall write",
            ),
            Call::Stat => (
                "os.syscall.stat",
                "stat() of /etc/passwd (path lookup, cached)",
                "lmbench lat_syscall stat (lmbench stats its own temp file; any cached file is equivalent)",
            ),
            Call::Fstat => (
                "os.syscall.fstat",
                "fstat() of an open file",
                "lmbench lat_syscall fstat",
            ),
            Call::OpenClose => (
                "os.syscall.open_close",
                "open() then close() of /etc/passwd",
                "lmbench lat_syscall open (reports open+close)",
            ),
        };
        Info { id, doc, unit: Unit::Nanos, mirrors, requires: "" }
    }

    fn setup(&self, _params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let open = |path: &str, flags| -> Result<OwnedFd, ProbeError> {
            let c = CString::new(path).expect("static path has no NUL");
            // SAFETY: `c` is a valid NUL-terminated path.
            let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(ProbeError::last_os(&format!("open {path}")));
            }
            // SAFETY: open returned a fresh descriptor that nothing else owns.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        };
        let fd = match self.0 {
            Call::Read => Some(open("/dev/zero", libc::O_RDONLY)?),
            Call::Write => Some(open("/dev/null", libc::O_WRONLY)?),
            Call::Fstat => Some(open(STAT_PATH, libc::O_RDONLY)?),
            Call::Stat | Call::OpenClose => {
                // Fail in setup, not in the timed loop, when the file is missing.
                drop(open(STAT_PATH, libc::O_RDONLY)?);
                None
            }
            Call::Null => None,
        };
        Ok(Box::new(Syscall { call: self.0, fd, path: CString::new(STAT_PATH).expect("no NUL") }))
    }
}

struct Syscall {
    call: Call,
    fd: Option<OwnedFd>,
    path: CString,
}

impl Workload for Syscall {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let fd = self.fd.as_ref().map_or(-1, |f| f.as_raw_fd());
        let path = self.path.as_ptr();
        let mut byte = [0u8; 1];
        // SAFETY: stat is plain data; all-zero is valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let mut failed = false;
        let t = Timing::measure(|| match self.call {
            Call::Null => {
                for _ in 0..iters {
                    // SAFETY: getppid has no preconditions. (glibc does not cache it.)
                    black_box(unsafe { libc::getppid() });
                }
            }
            Call::Read => {
                for _ in 0..iters {
                    // SAFETY: `byte` is a writable 1-byte buffer; fd is open /dev/zero.
                    failed |=
                        unsafe { libc::read(fd, black_box(byte.as_mut_ptr()).cast(), 1) } != 1;
                }
            }
            Call::Write => {
                for _ in 0..iters {
                    // SAFETY: `byte` is a readable 1-byte buffer; fd is open /dev/null.
                    failed |= unsafe { libc::write(fd, black_box(byte.as_ptr()).cast(), 1) } != 1;
                }
            }
            Call::Stat => {
                for _ in 0..iters {
                    // SAFETY: `path` is NUL-terminated and `st` is a writable stat.
                    failed |= unsafe { libc::stat(black_box(path), &mut st) } != 0;
                }
            }
            Call::Fstat => {
                for _ in 0..iters {
                    // SAFETY: fd is open and `st` is a writable stat.
                    failed |= unsafe { libc::fstat(black_box(fd), &mut st) } != 0;
                }
            }
            Call::OpenClose => {
                for _ in 0..iters {
                    // SAFETY: `path` is NUL-terminated.
                    let f =
                        unsafe { libc::open(black_box(path), libc::O_RDONLY | libc::O_CLOEXEC) };
                    failed |= f < 0;
                    // SAFETY: `f` was just opened by us and is closed once.
                    unsafe { libc::close(f) };
                }
            }
        });
        black_box(&st);
        if failed {
            return Err(ProbeError::last_os("system call in timed loop"));
        }
        Ok(t)
    }
}

impl Instance for Syscall {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }
}
