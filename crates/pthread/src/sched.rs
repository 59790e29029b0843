//! Yielding and sleeping: `sched_yield`, `nanosleep`, `clock_nanosleep`,
//! `usleep`, `sleep`.
//!
//! On a user thread a yield is the runtime's (a switch, no system call) and
//! a sleep parks the thread on the runtime's timers: it holds no kernel
//! thread, its processor runs others meanwhile. Sleeps are cancellation
//! points. Signals do not interrupt a user thread's sleep (no `EINTR`, and
//! the remaining time is always 0). On a kernel thread every function is
//! glibc's.

use crate::thread::on_user_thread;
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
    if on_user_thread() {
        schedlab_rt::yield_now();
    } else {
        std::thread::yield_now();
    }
}

/// `sched_yield`.
#[no_mangle]
pub extern "C" fn sched_yield() -> c_int {
    if on_user_thread() {
        schedlab_rt::yield_now();
        0
    } else {
        // SAFETY: glibc's, unchanged.
        unsafe { next::sched_yield()() }
    }
}

/// `pthread_yield` (glibc's deprecated alias of `sched_yield`).
#[no_mangle]
pub extern "C" fn pthread_yield() -> c_int {
    sched_yield()
}

/// Parks the calling user thread until `deadline`, acting on a cancellation
/// that arrives meanwhile.
fn sleep_until(deadline: &Deadline) {
    loop {
        crate::cancel::test();
        match deadline.remaining() {
            Some(left) => schedlab_rt::park_timeout(left),
            None => return,
        }
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
pub unsafe extern "C-unwind" fn nanosleep(req: *const libc::timespec, rem: *mut libc::timespec) -> c_int {
    if !on_user_thread() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::nanosleep()(req, rem) };
    }
    // SAFETY: the caller's request.
    let Some(d) = duration(unsafe { &*req }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    sleep_until(&relative(d));
    if !rem.is_null() {
        // SAFETY: the caller's out-parameter.
        unsafe { *rem = libc::timespec { tv_sec: 0, tv_nsec: 0 } };
    }
    0
}

/// `clock_nanosleep`: relative or absolute (`TIMER_ABSTIME`) on the
/// realtime, monotonic, boot-time and TAI clocks; a CPU-time clock is
/// `EINVAL` for a user thread (as glibc says of the calling thread's).
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
    if !on_user_thread() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::clock_nanosleep()(clock, flags, req, rem) };
    }
    if !matches!(
        clock,
        libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI
    ) {
        return if clock == libc::CLOCK_THREAD_CPUTIME_ID { libc::EINVAL } else { libc::ENOTSUP };
    }
    // SAFETY: the caller's request.
    let ts = unsafe { &*req };
    if !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return libc::EINVAL;
    }
    if flags & libc::TIMER_ABSTIME != 0 {
        sleep_until(&Deadline { clock, at: *ts });
    } else {
        let Some(d) = duration(ts) else { return libc::EINVAL };
        sleep_until(&relative(d));
        if !rem.is_null() {
            // SAFETY: the caller's out-parameter.
            unsafe { *rem = libc::timespec { tv_sec: 0, tv_nsec: 0 } };
        }
    }
    0
}

/// `usleep`.
#[no_mangle]
pub extern "C-unwind" fn usleep(us: libc::useconds_t) -> c_int {
    if !on_user_thread() {
        // SAFETY: glibc's, unchanged.
        return unsafe { next::usleep()(us) };
    }
    sleep_until(&relative(Duration::from_micros(us.into())));
    0
}

/// `sleep`.
#[no_mangle]
pub extern "C-unwind" fn sleep(s: c_uint) -> c_uint {
    if !on_user_thread() {
        // SAFETY: glibc's, unchanged.
        return unsafe { next::sleep()(s) };
    }
    sleep_until(&relative(Duration::from_secs(s.into())));
    0
}
