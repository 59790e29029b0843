//! Yielding and sleeping: `sched_yield`, `nanosleep`, `clock_nanosleep`,
//! `usleep`, `sleep`.
//!
//! On a user thread a yield is the runtime's (a switch, no system call) and
//! a sleep parks the thread on the runtime's timers: it holds no kernel
//! thread, its processor runs others meanwhile. Sleeps are cancellation
//! points. A signal delivered to the sleeping thread (`signal.rs`) ends the
//! sleep with `EINTR` and the time left. On a kernel thread every function
//! is glibc's.

use crate::thread::user_path;
use crate::wait::Deadline;
use std::ffi::{c_int, c_uint};
use std::time::Duration;

/// glibc's definitions of what this file stands in front of.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_uint, c_void};
    crate::glibc::real!(sched_yield: fn() -> c_int);
    crate::glibc::real!(nanosleep: fn(*const libc::timespec, *mut libc::timespec) -> c_int);
    crate::glibc::real!(clock_nanosleep: fn(libc::clockid_t, c_int, *const libc::timespec, *mut libc::timespec) -> c_int);
    crate::glibc::real!(usleep: fn(libc::useconds_t) -> c_int);
    crate::glibc::real!(sleep: fn(c_uint) -> c_uint);
}

/// Yields the processor whatever the calling thread is (the wait queues'
/// spin locks, whose holder's kernel thread was descheduled).
pub(crate) fn yield_any() {
    sched_yield();
}

/// `sched_yield`: a user thread gives its processor to another user thread;
/// a kernel thread, or a user thread inside the runtime's own code, yields
/// its kernel thread. The runtime's code reaches this too (its dependencies
/// spin with `std::thread::yield_now`, which is this function in the
/// library's process); a switch in the middle of a scheduling decision broke
/// the processor it was made on (`schedlab_rt::shared::yield_if_free`).
#[no_mangle]
pub extern "C-unwind" fn sched_yield() -> c_int {
    if user_path() && schedlab_rt::shared::yield_if_free() {
        0
    } else {
        // SAFETY: glibc's, unchanged.
        unsafe { next::sched_yield()() }
    }
}

/// `pthread_yield` (glibc's deprecated alias of `sched_yield`).
#[no_mangle]
pub extern "C-unwind" fn pthread_yield() -> c_int {
    sched_yield()
}

/// Parks the calling user thread until `deadline`, acting on a cancellation
/// that arrives meanwhile. `Err(remaining)` when a signal was delivered to
/// the thread first (`signal.rs`): the sleep is interrupted (`EINTR`).
///
/// A sleep that ends as asked leaves `errno` as it found it: the runtime's
/// timers take a `std` mutex, whose contended path makes a `futex` system
/// call that can fail with `EAGAIN` and write it to the calling thread's
/// `errno` — the user thread's own here (`migration.c`, which checks that a
/// thread's `errno` survives its sleeps and yields, failed so with `EAGAIN`
/// after a `usleep` in 3 of 320 runs, four at once; 0 of 320 after).
fn sleep_until(deadline: &Deadline) -> Result<(), Duration> {
    // SAFETY: the calling thread's errno.
    let errno = unsafe { *libc::__errno_location() };
    let r = sleep_until_inner(deadline);
    if r.is_ok() {
        set_errno(errno);
    }
    r
}

fn sleep_until_inner(deadline: &Deadline) -> Result<(), Duration> {
    let d = crate::thread::current();
    let seen = d.signals_seen.load(std::sync::atomic::Ordering::Acquire);
    crate::signal::deliver_pending();
    loop {
        crate::cancel::test();
        let left = deadline.remaining();
        if d.signals_seen.load(std::sync::atomic::Ordering::Acquire) != seen {
            return Err(left.unwrap_or_default());
        }
        match left {
            Some(left) => schedlab_rt::park_timeout(left),
            None => return Ok(()),
        }
    }
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

fn relative(d: Duration) -> Deadline {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-parameter on our stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let total = now.tv_nsec as u128 + d.subsec_nanos() as u128;
    let secs =
        (now.tv_sec as u128 + d.as_secs() as u128 + total / 1_000_000_000).min(i64::MAX as u128);
    Deadline {
        clock: libc::CLOCK_MONOTONIC,
        at: libc::timespec {
            tv_sec: secs as libc::time_t,
            tv_nsec: (total % 1_000_000_000) as libc::c_long,
        },
    }
}

fn duration(ts: &libc::timespec) -> Option<Duration> {
    (ts.tv_sec >= 0 && (0..1_000_000_000).contains(&ts.tv_nsec))
        .then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// `nanosleep`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn nanosleep(
    req: *const libc::timespec,
    rem: *mut libc::timespec,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::nanosleep()(req, rem) };
    }
    // SAFETY: the caller's request.
    let Some(d) = duration(unsafe { &*req }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let r = sleep_until(&relative(d));
    if !rem.is_null() {
        // SAFETY: the caller's out-parameter.
        unsafe { *rem = timespec(r.err().unwrap_or_default()) };
    }
    match r {
        Ok(()) => 0,
        Err(_) => {
            set_errno(libc::EINTR);
            -1
        }
    }
}

/// `clock_nanosleep`: relative or absolute (`TIMER_ABSTIME`) on the
/// realtime, monotonic, boot-time and TAI clocks; on the caller's
/// `CLOCK_THREAD_CPUTIME_ID` `EINVAL` (as glibc), on a user thread's clock
/// from `pthread_getcpuclockid` `ENOTSUP` (`cpuclock.rs`); any other clock
/// (the process's CPU time, a kernel thread's, an invalid id) glibc's, which
/// sleeps on the kernel thread or gives its error.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn clock_nanosleep(
    clock: libc::clockid_t,
    flags: c_int,
    req: *const libc::timespec,
    rem: *mut libc::timespec,
) -> c_int {
    if let Some(e) = crate::cpuclock::no_sleep_on(clock) {
        return e;
    }
    if !user_path()
        || !matches!(
            clock,
            libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI
        )
    {
        // SAFETY: forwarded unchanged.
        return unsafe { next::clock_nanosleep()(clock, flags, req, rem) };
    }
    // SAFETY: the caller's request.
    let ts = unsafe { &*req };
    if !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return libc::EINVAL;
    }
    let r = if flags & libc::TIMER_ABSTIME != 0 {
        sleep_until(&Deadline { clock, at: *ts })
    } else {
        let Some(d) = duration(ts) else { return libc::EINVAL };
        let r = sleep_until(&relative(d));
        if !rem.is_null() {
            // SAFETY: the caller's out-parameter.
            unsafe { *rem = timespec(r.err().unwrap_or_default()) };
        }
        r
    };
    match r {
        Ok(()) => 0,
        Err(_) => libc::EINTR,
    }
}

/// `usleep`.
#[no_mangle]
pub extern "C-unwind" fn usleep(us: libc::useconds_t) -> c_int {
    if !user_path() {
        // SAFETY: glibc's, unchanged.
        return unsafe { next::usleep()(us) };
    }
    match sleep_until(&relative(Duration::from_micros(us.into()))) {
        Ok(()) => 0,
        Err(_) => {
            set_errno(libc::EINTR);
            -1
        }
    }
}

/// `sleep`.
#[no_mangle]
pub extern "C-unwind" fn sleep(s: c_uint) -> c_uint {
    if !user_path() {
        // SAFETY: glibc's, unchanged.
        return unsafe { next::sleep()(s) };
    }
    match sleep_until(&relative(Duration::from_secs(s.into()))) {
        Ok(()) => 0,
        // The seconds left, rounded up as glibc's `sleep` does.
        Err(left) => (left.as_secs() + u64::from(left.subsec_nanos() > 0)) as c_uint,
    }
}
