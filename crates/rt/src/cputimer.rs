//! A kernel thread's CPU clock and a timer on it: what CPU budgets charge and
//! how they are enforced (`budget.rs`).
//!
//! [`thread_cpu_ns`] reads the calling kernel thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`): the time the kernel actually ran it, which
//! stands still while it waits for a CPU on a loaded machine. [`CpuTimer`] is
//! a POSIX timer on that same clock (`timer_create(CLOCK_THREAD_CPUTIME_ID)`),
//! made by the kernel thread for itself and delivering a signal to it alone
//! (`SIGEV_THREAD_ID`), so it expires after the thread has *consumed* a given
//! CPU time, however late that comes in wall time. Linux checks CPU timers
//! from its scheduler tick (`run_posix_cpu_timers`, kernel/time/posix-cpu-timers.c),
//! so a timer fires up to one tick (1–4 ms, `CONFIG_HZ`) after its expiry;
//! `budget.rs` carries such an overrun into the next period.
//!
//! The timer's signal carries [`TIMER_COOKIE`]'s address as its value, so the
//! signal handler tells it from the monitor's request of the same signal
//! ([`is_timer_signal`]). Nothing here knows the runtime: the signal is the
//! caller's, and the machine (`machine.rs`) keeps the timer, one per kernel
//! thread, made the first time the thread runs a budgeted user thread and
//! deleted when it exits.

use std::mem::MaybeUninit;

/// The value the timer's signal carries (`si_value.sival_ptr`) is this
/// byte's address: two copies of the runtime in one process (a program with
/// its own, under `libschedlab_pthread.so`) each know their own.
static TIMER_COOKIE: u8 = 0;

fn timer_cookie() -> usize {
    std::ptr::addr_of!(TIMER_COOKIE) as usize
}

/// The calling kernel thread's CPU time, in nanoseconds.
#[inline]
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: the calling thread's own CPU clock; an out-parameter on our
    // stack. It cannot fail for a live thread. The system call itself (the
    // vDSO has no CPU clocks): in the pthread library's process
    // `clock_gettime` is the library's, which answers a user thread's own
    // clock, not its kernel thread's.
    unsafe {
        libc::syscall(libc::SYS_clock_gettime, libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A one-kernel-thread CPU-time timer (module docs). Its id is kept by the
/// caller as a `u64` (a field of the zero-filled machine block): see
/// [`CpuTimer::to_word`].
#[derive(Clone, Copy)]
pub(crate) struct CpuTimer(libc::timer_t);

impl CpuTimer {
    /// Makes a timer on the calling kernel thread's CPU clock that sends
    /// `signal` (with [`TIMER_COOKIE`]) to this kernel thread, thread `tid`
    /// (its `gettid`). Disarmed.
    pub(crate) fn new(signal: libc::c_int, tid: i32) -> std::io::Result<CpuTimer> {
        // SAFETY: a zeroed sigevent is valid; the fields we use are set below.
        let mut ev: libc::sigevent = unsafe { MaybeUninit::zeroed().assume_init() };
        ev.sigev_notify = libc::SIGEV_THREAD_ID;
        ev.sigev_signo = signal;
        ev.sigev_value = libc::sigval { sival_ptr: timer_cookie() as *mut libc::c_void };
        ev.sigev_notify_thread_id = tid;
        let mut id: libc::timer_t = std::ptr::null_mut();
        // SAFETY: a valid sigevent and an out-parameter, both on our stack.
        if unsafe { libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut ev, &mut id) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(CpuTimer(id))
    }

    /// Fires once after `ns` more nanoseconds of this thread's CPU time
    /// (at once if 0), then every `every_ns` of it until disarmed: the
    /// repeats retry a signal that found the thread where it could not act.
    pub(crate) fn arm(self, ns: u64, every_ns: u64) {
        let ts = |ns: u64| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // A zero `it_value` would disarm: 1 ns fires at the next check.
        let spec = libc::itimerspec { it_interval: ts(every_ns), it_value: ts(ns.max(1)) };
        // SAFETY: our own timer; a valid spec on our stack.
        unsafe { libc::timer_settime(self.0, 0, &spec, std::ptr::null_mut()) };
    }

    /// Stops the timer (a signal already queued is still delivered).
    pub(crate) fn disarm(self) {
        // SAFETY: a zeroed itimerspec is valid and disarms.
        let spec: libc::itimerspec = unsafe { MaybeUninit::zeroed().assume_init() };
        // SAFETY: our own timer; a valid spec on our stack.
        unsafe { libc::timer_settime(self.0, 0, &spec, std::ptr::null_mut()) };
    }

    /// Deletes the timer.
    pub(crate) fn delete(self) {
        // SAFETY: our own timer, not used after this.
        unsafe { libc::timer_delete(self.0) };
    }

    /// The timer as a non-zero word (0 is "none" in a zero-filled block).
    pub(crate) fn to_word(self) -> u64 {
        self.0 as usize as u64 + 1
    }

    /// The timer a non-zero word from [`CpuTimer::to_word`] names.
    pub(crate) fn from_word(w: u64) -> CpuTimer {
        debug_assert!(w != 0);
        CpuTimer((w - 1) as usize as libc::timer_t)
    }
}

/// The signal described by `info` came from a [`CpuTimer`].
///
/// # Safety
///
/// `info` is the `siginfo_t` the kernel passed to an `SA_SIGINFO` handler.
pub(crate) unsafe fn is_timer_signal(info: *const libc::siginfo_t) -> bool {
    // SAFETY: the caller passes the kernel's siginfo; `si_value` is valid
    // for SI_TIMER, the code checked first.
    unsafe {
        !info.is_null()
            && (*info).si_code == libc::SI_TIMER
            && (*info).si_value().sival_ptr as usize == timer_cookie()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_clock_advances_with_work_only() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() - a < 2_000_000 {
            x = std::hint::black_box(x + 1);
        }
        let b = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Sleeping costs a few µs of CPU, not 20 ms.
        assert!(thread_cpu_ns() - b < 5_000_000);
    }

    #[test]
    fn a_word_round_trips() {
        let t = CpuTimer(7usize as libc::timer_t);
        assert_eq!(CpuTimer::from_word(t.to_word()).0, t.0);
        assert_ne!(CpuTimer(std::ptr::null_mut()).to_word(), 0);
    }
}
