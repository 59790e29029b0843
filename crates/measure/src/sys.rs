//! The Linux system-call wrappers of the lab, each written once: CPU placement and
//! pinning (and a thread's affinity mask, and a CPU slot that forked children write where
//! they run into, for [`crate::placement`]), pipes, EINTR-safe raw reads and writes, forked
//! helper processes that cannot outlive us, and the per-thread scheduling settings the
//! timeline scenarios use (nice, policy, timer slack, an absolute-deadline sleep).
//!
//! # Why here
//! Both the probes and the timelines (`schedlab-trace`) pin threads and fork helpers, and
//! both already depend on this crate; nothing else is shared by both. Keeping the wrappers
//! here gives each one copy without an arrow between `probes` and `trace` (probes brings
//! tokio and the catalog, which a timeline does not need). They belong with measuring: how a
//! result was obtained (pinned where, beside which helper) is part of the measurement.
//!
//! This is one of the few places with `unsafe` outside the runtime; each block says why it is
//! sound. Probes and scenarios build on these rather than calling libc for the common cases.
//!
//! # Forked children
//! The process may have other threads (a test harness, a scenario's workers), so after
//! `fork` the child may only do async-signal-safe work: no allocation, no locks, no
//! `println!`. [`Child::fork`] runs a closure in the child under that contract; callers
//! prepare every buffer and file descriptor before forking. A child asks the kernel to kill
//! it when its parent dies (`PR_SET_PDEATHSIG`), and [`Child`]'s `Drop` kills and reaps it, so
//! an error, a panic or a Ctrl-C in the parent leaves no process behind.
//!
//! # Per-thread settings
//! Linux keeps nice, scheduling policy and timer slack per thread: [`set_nice`],
//! [`set_policy`] and [`set_timer_slack`] change the calling thread only, so a scenario's
//! worker sets itself up and nothing leaks to the caller.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::ProbeError;

/// The CPUs this process may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    affinity_of(0).unwrap_or_else(|| vec![0])
}

/// The affinity mask of thread `tid` (0: the calling thread; a child's pid names its main
/// thread) as CPUs in ascending order; `None` when the kernel refuses (the thread is gone).
/// A mask of one CPU is a pin, which is how the placement recorder tells pinned parties.
pub fn affinity_of(tid: libc::pid_t) -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes; a wrong `tid` fails with ESRCH and
    // touches nothing.
    let rc = unsafe { libc::sched_getaffinity(tid, size, &mut set) };
    if rc != 0 {
        return None;
    }
    Some(
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `i` is below CPU_SETSIZE, the bound CPU_ISSET requires.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect(),
    )
}

/// Pins the calling thread (in a child: the child process) to `cpu`.
pub fn pin_to(cpu: usize) -> Result<(), ProbeError> {
    pin_thread(0, cpu)
}

/// Pins thread `tid` of this process to `cpu` (`tid` 0: the calling thread).
/// `sched_setaffinity` takes any thread id, so a thread can be pinned from outside, as the
/// probes pin schedlab-rt's processors, which have no affinity setting of their own.
pub fn pin_thread(tid: libc::pid_t, cpu: usize) -> Result<(), ProbeError> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(ProbeError::Failed(format!("cpu {cpu} beyond CPU_SETSIZE")));
    }
    if !pin_raw(tid, cpu) {
        return Err(ProbeError::last_os(&match tid {
            0 => format!("sched_setaffinity(cpu {cpu})"),
            _ => format!("sched_setaffinity(thread {tid}, cpu {cpu})"),
        }));
    }
    Ok(())
}

/// [`pin_thread`] without the error message: async-signal-safe (no allocation), for a
/// forked child. False when `cpu` is out of range or the kernel refused (errno says why).
fn pin_raw(tid: libc::pid_t, cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE (checked above) and `set` is valid.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size we pass; `tid` is 0 (the caller) or a
    // thread id, and a wrong one fails with ESRCH: no memory is touched but `set`.
    unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// Restores the calling thread's affinity to `cpus` (after a probe pinned it).
pub fn set_affinity(cpus: &[usize]) -> Result<(), ProbeError> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: `c` < CPU_SETSIZE and `set` is valid.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size we pass.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(ProbeError::last_os("sched_setaffinity(restore)"));
    }
    Ok(())
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

/// Where the two parties of a ping-pong run: the same CPU or two different ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Both pinned to one CPU: every hand-off is a switch on that CPU.
    Same,
    /// Pinned to two CPUs: every hand-off wakes the other CPU.
    Cross,
}

impl Placement {
    /// Parses a `placement` parameter's value (default `same`). The probes call it through
    /// `Placement::from_params` (in `model`, beside `Params`), so this file needs no model.
    pub fn parse(value: Option<&str>) -> Result<Placement, ProbeError> {
        match value.unwrap_or("same") {
            "same" => Ok(Placement::Same),
            "cross" => Ok(Placement::Cross),
            other => Err(ProbeError::Failed(format!("bad placement {other:?}: use same or cross"))),
        }
    }

    /// The two CPUs to use, from the allowed set.
    ///
    /// # Errors
    /// Skip when `Cross` is asked for on a machine (or affinity mask) with one CPU.
    pub fn cpus(self) -> Result<(usize, usize), ProbeError> {
        let cpus = allowed_cpus();
        match self {
            Placement::Same => Ok((cpus[0], cpus[0])),
            Placement::Cross if cpus.len() >= 2 => Ok((cpus[0], cpus[1])),
            Placement::Cross => {
                Err(ProbeError::Skip("placement=cross needs two usable CPUs".into()))
            }
        }
    }
}

/// Creates a pipe; both ends close-on-exec.
pub fn pipe() -> Result<(OwnedFd, OwnedFd), ProbeError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(ProbeError::last_os("pipe2"));
    }
    // SAFETY: pipe2 succeeded, so both are fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes all of `buf` to `fd`, retrying on EINTR and short writes. Async-signal-safe.
pub fn write_all(fd: RawFd, buf: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length describe the unwritten tail of `buf`.
        let n = unsafe { libc::write(fd, buf[done..].as_ptr().cast(), buf.len() - done) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// Fills all of `buf` from `fd`, retrying on EINTR and short reads; EOF is an error.
/// Async-signal-safe.
pub fn read_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        done += n as usize;
    }
    Ok(())
}

/// A forked helper process, killed and reaped when dropped.
#[derive(Debug)]
pub struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

impl Child {
    /// Forks; the child pins itself to `cpu` (if given), arranges to die with its parent, runs
    /// `body` and exits with its return value. Never returns in the child.
    ///
    /// `body` runs after fork in a possibly multi-threaded process: it must be
    /// async-signal-safe (no allocation, no locks, no stdio); use [`read_exact`],
    /// [`write_all`] and raw libc calls on descriptors prepared before the fork.
    pub fn fork(cpu: Option<usize>, body: impl FnOnce() -> i32) -> Result<Child, ProbeError> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: fork has no memory-safety preconditions; the child below only runs
        // async-signal-safe code (see the contract above) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(ProbeError::last_os("fork"));
        }
        if pid == 0 {
            // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number; async-signal-safe.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
            // If the parent died before prctl took effect, we were re-parented: leave.
            // SAFETY: getppid and _exit have no preconditions.
            if unsafe { libc::getppid() } != parent {
                // SAFETY: _exit ends the process without running destructors.
                unsafe { libc::_exit(1) };
            }
            // Default SIGINT handling: a Ctrl-C reaches the whole foreground group and
            // the child just dies; the parent notices the closed pipe.
            // SAFETY: restoring default dispositions is async-signal-safe.
            unsafe {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            }
            if let Some(c) = cpu {
                if !pin_raw(0, c) {
                    // SAFETY: as above.
                    unsafe { libc::_exit(2) };
                }
            }
            let code = body();
            // SAFETY: _exit skips atexit handlers and destructors that belong to the parent.
            unsafe { libc::_exit(code) };
        }
        Ok(Child { pid, reaped: false })
    }

    /// The child's process id.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Waits for the child to exit and returns its exit status (or 128 + signal).
    pub fn wait(&mut self) -> Result<i32, ProbeError> {
        let status = wait_pid(self.pid)?;
        self.reaped = true;
        Ok(status)
    }
}

/// waitpid, retrying on EINTR; returns the exit code or 128 + the terminating signal.
pub fn wait_pid(pid: libc::pid_t) -> Result<i32, ProbeError> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if rc < 0 && e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return Err(ProbeError::Failed(format!("waitpid({pid}): {e}")));
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    })
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: `pid` is our child, not yet reaped, so the id cannot have been reused.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = wait_pid(self.pid);
        }
    }
}

/// A file descriptor's raw number, for use in a forked child's closure.
pub fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

/// One CPU number in memory shared with forked children: a child that lives inside one
/// iteration of a timed loop (fork's) writes where it runs with [`CpuSlot::record`], and the
/// parent takes the last one written after the sample ([`crate::placement`]). An anonymous
/// `MAP_SHARED` page, so a fork inherits the mapping and the parent sees the child's store.
#[derive(Debug)]
pub struct CpuSlot {
    word: std::ptr::NonNull<std::sync::atomic::AtomicU32>,
}

// SAFETY: the slot is an atomic in a mapping that lives as long as the value; every access
// goes through the atomic.
unsafe impl Send for CpuSlot {}
// SAFETY: as above: shared access is atomic.
unsafe impl Sync for CpuSlot {}

/// The slot's value when no child has written since the last take.
const NO_CPU: u32 = u32::MAX;

impl CpuSlot {
    /// Maps the shared page.
    pub fn new() -> Result<CpuSlot, ProbeError> {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ProbeError::last_os("mmap(shared cpu slot)"));
        }
        let word = std::ptr::NonNull::new(p.cast::<std::sync::atomic::AtomicU32>())
            .ok_or_else(|| ProbeError::Failed("mmap returned null".into()))?;
        // SAFETY: the page is mapped, writable, page-aligned (so aligned for a u32) and ours.
        unsafe { word.as_ptr().write(std::sync::atomic::AtomicU32::new(NO_CPU)) };
        Ok(CpuSlot { word })
    }

    fn atomic(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: initialised in `new`, mapped until `drop`.
        unsafe { self.word.as_ref() }
    }

    /// Writes the CPU the calling thread runs on. Async-signal-safe (`sched_getcpu` reads
    /// the rseq area or the vDSO, no lock, no allocation), for a forked child: one load and
    /// one store, a few nanoseconds in a child whose fork costs a hundred microseconds.
    #[inline]
    pub fn record(&self) {
        if let Some(c) = current_cpu() {
            self.atomic().store(c as u32, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The CPU last recorded since the previous take, if any.
    pub fn take(&self) -> Option<usize> {
        let c = self.atomic().swap(NO_CPU, std::sync::atomic::Ordering::Relaxed);
        (c != NO_CPU).then_some(c as usize)
    }
}

impl Drop for CpuSlot {
    fn drop(&mut self) {
        // SAFETY: the page mapped in `new`, unmapped once; no reference outlives `self`.
        unsafe { libc::munmap(self.word.as_ptr().cast(), 4096) };
    }
}

/// Keeps the calling thread pinned to one CPU and restores the old mask when dropped.
#[derive(Debug)]
pub struct PinGuard {
    old: Vec<usize>,
}

impl PinGuard {
    /// Pins the calling thread to `cpu`.
    pub fn pin(cpu: usize) -> Result<PinGuard, ProbeError> {
        let old = allowed_cpus();
        pin_to(cpu)?;
        Ok(PinGuard { old })
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        let _ = set_affinity(&self.old);
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread, ns (`CLOCK_THREAD_CPUTIME_ID`).
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Sets the calling thread's nice value (per thread on Linux).
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority with a thread id affects only that thread; no memory is passed.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, gettid() as libc::id_t, nice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's scheduling policy (`SCHED_OTHER`, `SCHED_IDLE`, `SCHED_FIFO`...)
/// with `priority` (0 for the non-real-time policies).
pub fn set_policy(policy: i32, priority: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: `param` is a valid sched_param; 0 means the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Puts the calling thread under `SCHED_DEADLINE`: `runtime` of CPU every `period`, due
/// within `deadline` of each period's start (`sched_setattr`, which libc does not wrap).
/// Refused without `CAP_SYS_NICE` (EPERM) and by admission control (EBUSY), and for a thread
/// whose affinity does not cover its root domain's CPUs.
pub fn set_deadline(
    runtime: std::time::Duration,
    deadline: std::time::Duration,
    period: std::time::Duration,
) -> io::Result<()> {
    /// `struct sched_attr`, its first version (48 bytes).
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    const SCHED_DEADLINE: u32 = 6;
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: SCHED_DEADLINE,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: runtime.as_nanos() as u64,
        deadline: deadline.as_nanos() as u64,
        period: period.as_nanos() as u64,
    };
    // SAFETY: sched_setattr reads a sched_attr of the size it states from the pointer, which
    // lives across the call; 0 names the calling thread; the last argument (flags) must be 0.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's timer slack in ns (`PR_SET_TIMERSLACK`; 0 restores the default).
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer; it only affects the calling thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (retrying after signals).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remainder is not written.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// (sysname, nodename, release, version, machine) of `uname(2)`; `unknown` each when it
/// fails.
pub fn uname() -> (String, String, String, String, String) {
    // SAFETY: utsname is plain old data; all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        let unknown = || "unknown".to_string();
        return (unknown(), unknown(), unknown(), unknown(), unknown());
    }
    let s = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (s(&u.sysname), s(&u.nodename), s(&u.release), s(&u.version), s(&u.machine))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_runs_and_reports_its_status() {
        let mut c = Child::fork(None, || 7).unwrap();
        assert_eq!(c.wait().unwrap(), 7);
    }

    #[test]
    fn dropping_a_child_kills_and_reaps_it() {
        let (r, w) = pipe().unwrap();
        let rfd = raw(&r);
        let c = Child::fork(None, move || {
            let mut b = [0u8; 1];
            // Blocks forever: nobody writes.
            let _ = read_exact(rfd, &mut b);
            0
        })
        .unwrap();
        let pid = c.pid();
        drop(c);
        // SAFETY: kill with signal 0 only checks for existence.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "child {pid} survived its handle");
        drop(w);
    }

    #[test]
    fn pipe_round_trip_through_a_child() {
        let (r1, w1) = pipe().unwrap();
        let (r2, w2) = pipe().unwrap();
        let (a, b) = (raw(&r1), raw(&w2));
        let mut c = Child::fork(None, move || {
            let mut x = [0u8; 4];
            if read_exact(a, &mut x).is_err() {
                return 1;
            }
            x.reverse();
            if write_all(b, &x).is_err() {
                return 1;
            }
            0
        })
        .unwrap();
        write_all(raw(&w1), b"abcd").unwrap();
        let mut back = [0u8; 4];
        read_exact(raw(&r2), &mut back).unwrap();
        assert_eq!(&back, b"dcba");
        assert_eq!(c.wait().unwrap(), 0);
    }

    #[test]
    fn timer_slack_is_set_for_the_calling_thread_only() {
        // SAFETY: PR_GET_TIMERSLACK takes no pointers and returns the value.
        let slack = || unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        let before = slack();
        let inside = std::thread::spawn(move || {
            set_timer_slack(1).unwrap();
            slack()
        })
        .join()
        .unwrap();
        assert_eq!(inside, 1);
        assert_eq!(slack(), before);
    }

    #[test]
    fn sleep_until_does_not_wake_early() {
        let now = || {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `ts` is a valid, writable timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let deadline = now() + 2_000_000;
        sleep_until(deadline);
        assert!(now() >= deadline);
    }

    #[test]
    fn a_forked_child_reports_its_cpu_through_the_slot() {
        let slot = CpuSlot::new().unwrap();
        assert_eq!(slot.take(), None);
        let s = &slot;
        let mut c = Child::fork(None, move || {
            s.record();
            0
        })
        .unwrap();
        assert_eq!(c.wait().unwrap(), 0);
        let cpu = slot.take().expect("the child wrote its cpu");
        assert!(allowed_cpus().contains(&cpu), "cpu {cpu}");
        assert_eq!(slot.take(), None, "taken once");
    }

    #[test]
    fn pin_guard_restores_affinity() {
        let before = allowed_cpus();
        {
            let _g = PinGuard::pin(before[0]).unwrap();
            assert_eq!(allowed_cpus(), vec![before[0]]);
        }
        assert_eq!(allowed_cpus(), before);
    }
}
