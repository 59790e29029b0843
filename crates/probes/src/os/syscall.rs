//! System-call latency: lmbench's `lat_syscall` rows (null, read, write, stat, fstat,
//! open/close) and HBench-OS's getpid, getrusage and gettimeofday (seed 003's table).
//!
//! Each timed body is a tight loop of one system call on prepared arguments; the calibrated
//! empty-loop cost is subtracted by the sampler. `black_box` keeps the compiler from hoisting
//! or merging the calls; they are `extern "C"` calls into libc and cannot be elided anyway.
//!
//! `read`, `write`, `open` and `close` are made as raw system calls (`syscall(SYS_read, ...)`),
//! not through glibc's wrappers. Those four are cancellation points: once a process has had a
//! second thread — and schedlab always has, if only `doctor`'s scratch thread — glibc (2.34+)
//! wraps each in `__pthread_enable_asynccancel`/`disable`, two atomic operations it never
//! drops again when the threads are gone. On this VM that added 22 ns to a 104 ns `read`
//! (a C loop: 104 ns never threaded, 127 ns after one thread came and went, 104 ns as a raw
//! call), so `os.syscall.read` read 1.20× lmbench's `lat_syscall read`, whose process never
//! threads (`schedlab crosscheck` found it). The raw call is what lmbench times.

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
    Getrusage,
    Gettimeofday,
    Getpid,
}

struct SyscallProbe(Call);

/// The syscall probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [
        Call::Null,
        Call::Read,
        Call::Write,
        Call::Stat,
        Call::Fstat,
        Call::OpenClose,
        Call::Getrusage,
        Call::Gettimeofday,
        Call::Getpid,
    ]
    .into_iter()
    .map(|c| Box::new(SyscallProbe(c)) as Box<dyn Probe>)
    .collect()
}

/// The file that `stat`, `fstat` and `open/close` use, as lmbench does: a file that surely
/// exists and lives in the page and dentry caches.
const STAT_PATH: &str = "/etc/passwd";

impl Probe for SyscallProbe {
    fn variants(&self, _suite: crate::Suite) -> Vec<Params> {
        match self.0 {
            Call::Gettimeofday => {
                vec![Params::new().with("via", "vdso"), Params::new().with("via", "syscall")]
            }
            _ => vec![Params::new()],
        }
    }

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
            Call::Getrusage => (
                "os.syscall.getrusage",
                "getrusage(RUSAGE_SELF): a system call that gathers per-process accounting",
                "HBench-OS getrusage (seed 003's table)",
            ),
            Call::Gettimeofday => (
                "os.syscall.gettimeofday",
                "gettimeofday(): via=vdso is what programs get (libc, no kernel entry on Linux); via=syscall forces the kernel entry HBench-OS timed in 1997",
                "HBench-OS gettimeofday (seed 003's table), which was a real system call then",
            ),
            Call::Getpid => (
                "os.syscall.getpid",
                "getpid(): the kernel's cheapest answer (glibc has not cached it since 2.25)",
                "HBench-OS getpid (seed 003's table)",
            ),
        };
        Info { id, doc, unit: Unit::Nanos, mirrors, requires: "" }
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let vdso = match (self.0, params.get("via")) {
            (Call::Gettimeofday, None | Some("vdso")) => true,
            (Call::Gettimeofday, Some("syscall")) => false,
            (Call::Gettimeofday, Some(other)) => {
                return Err(ProbeError::Failed(format!("via={other:?}: use vdso or syscall")))
            }
            _ => false,
        };
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
            Call::Null | Call::Getrusage | Call::Gettimeofday | Call::Getpid => None,
        };
        Ok(Box::new(Syscall {
            call: self.0,
            fd,
            path: CString::new(STAT_PATH).expect("no NUL"),
            vdso,
        }))
    }
}

struct Syscall {
    call: Call,
    fd: Option<OwnedFd>,
    path: CString,
    /// gettimeofday through libc's vDSO rather than the system call.
    vdso: bool,
}

impl Workload for Syscall {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let fd = self.fd.as_ref().map_or(-1, |f| f.as_raw_fd());
        let path = self.path.as_ptr();
        let mut byte = [0u8; 1];
        // SAFETY: stat is plain data; all-zero is valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: rusage is plain data; all-zero is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
        let vdso = self.vdso;
        let mut failed = false;
        let t = Timing::measure(|| match self.call {
            Call::Null => {
                for _ in 0..iters {
                    // SAFETY: getppid has no preconditions. (glibc does not cache it.)
                    black_box(unsafe { libc::getppid() });
                }
            }
            Call::Getpid => {
                for _ in 0..iters {
                    // SAFETY: getpid has no preconditions; glibc 2.25+ makes the system call
                    // every time (the cache went with the fork/clone races it caused).
                    black_box(unsafe { libc::getpid() });
                }
            }
            Call::Read => {
                for _ in 0..iters {
                    // SAFETY: read(2) into `byte`, a writable 1-byte buffer; fd is open
                    // /dev/zero. The raw call: see the module doc.
                    failed |= unsafe {
                        libc::syscall(libc::SYS_read, fd, black_box(byte.as_mut_ptr()), 1usize)
                    } != 1;
                }
            }
            Call::Write => {
                for _ in 0..iters {
                    // SAFETY: write(2) from `byte`, a readable 1-byte buffer; fd is open
                    // /dev/null. The raw call: see the module doc.
                    failed |= unsafe {
                        libc::syscall(libc::SYS_write, fd, black_box(byte.as_ptr()), 1usize)
                    } != 1;
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
                    // SAFETY: openat(2) of `path`, NUL-terminated, relative to the working
                    // directory, as glibc's open makes it. The raw call: see the module doc.
                    let f = unsafe {
                        libc::syscall(
                            libc::SYS_openat,
                            libc::AT_FDCWD,
                            black_box(path),
                            libc::O_RDONLY | libc::O_CLOEXEC,
                        )
                    };
                    failed |= f < 0;
                    // SAFETY: close(2) of `f`, just opened by us, closed once (a failed
                    // open's -1 fails with EBADF and touches nothing).
                    unsafe { libc::syscall(libc::SYS_close, f) };
                }
            }
            Call::Getrusage => {
                for _ in 0..iters {
                    // SAFETY: `ru` is a writable rusage.
                    failed |= unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0;
                }
            }
            Call::Gettimeofday if vdso => {
                for _ in 0..iters {
                    // SAFETY: `tv` is a writable timeval; no time zone is asked for.
                    failed |=
                        unsafe { libc::gettimeofday(black_box(&mut tv), std::ptr::null_mut()) }
                            != 0;
                }
            }
            Call::Gettimeofday => {
                for _ in 0..iters {
                    // SAFETY: the raw system call with a writable timeval and no time zone.
                    failed |= unsafe {
                        libc::syscall(
                            libc::SYS_gettimeofday,
                            black_box(&mut tv as *mut libc::timeval),
                            std::ptr::null_mut::<libc::c_void>(),
                        )
                    } != 0;
                }
            }
        });
        black_box((&st, &ru, &tv));
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
