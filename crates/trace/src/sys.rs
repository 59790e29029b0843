//! The few system calls the scenarios need, each wrapped once: the calling thread's id,
//! CPU affinity, nice value, scheduling policy and timer slack, an absolute-deadline sleep,
//! and a CPU-burning child process that dies with us.
//!
//! Every setting applies to the *calling thread* only (Linux keeps nice, policy and timer
//! slack per thread), so a scenario's worker sets itself up and nothing leaks to the caller.

use std::io;

/// The calling thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// The CPUs this process may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return vec![0];
    }
    // SAFETY: CPU_ISSET reads the set we own, for indices below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE (it came from `allowed_cpus`), `set` is ours.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 means the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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

/// The calling thread's timer slack in ns.
pub fn timer_slack() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointers and returns the value.
    let v = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    v.max(0) as u64
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

/// A child process that burns CPU on one CPU until dropped (killed and reaped then), and
/// dies with us if we die first (`PR_SET_PDEATHSIG`).
#[derive(Debug)]
pub struct Hog {
    pid: libc::pid_t,
}

impl Hog {
    /// Forks the hog, pinned to `cpu`.
    pub fn start(cpu: usize) -> io::Result<Hog> {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the child only calls async-signal-safe functions (prctl, getppid,
        // sched_setaffinity through pin_to, which does not allocate, and _exit) and spins.
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                // SAFETY: prctl/getppid/_exit take no pointers; the child never returns.
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    if libc::getppid() != parent {
                        libc::_exit(0);
                    }
                }
                let _ = pin_to(cpu);
                let mut x = 0u64;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            pid => Ok(Hog { pid }),
        }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        // SAFETY: `pid` is our child; killing and reaping it touches nothing else.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}
