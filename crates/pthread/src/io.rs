//! Waiting for file descriptors without spurious `EINTR`: `poll`, `ppoll`,
//! `select`, `pselect`, `epoll_wait`, `epoll_pwait`, `epoll_pwait2`.
//!
//! The runtime interrupts a user thread blocked in the kernel with its own
//! signal when it hands the thread's processor to another kernel thread (and
//! to preempt it), and these calls are never restarted after a signal,
//! whatever `SA_RESTART` says: the program would see `EINTR` for a signal it
//! never got (`hackbench -T` and `perf bench sched messaging -t` stopped on
//! it). On a user thread each wrapper calls again, with the time left, when
//! the interruption was the runtime's own (`points::retrying`, the rule of
//! every call the kernel never restarts, `points.rs`).
//!
//! Each is a cancellation point: on a user thread the call is the kernel's
//! (`ppoll`, `select`, `pselect6`, `epoll_pwait`), made through
//! `cancel::syscall`, which a `pthread_cancel` stops while it waits.

use crate::points::retrying;
use crate::thread::user_path;
use std::ffi::c_int;
use std::time::{Duration, Instant};

/// glibc's definitions.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_void};
    crate::glibc::real!(poll: fn(*mut libc::pollfd, libc::nfds_t, c_int) -> c_int);
    crate::glibc::real!(ppoll: fn(*mut libc::pollfd, libc::nfds_t, *const libc::timespec, *const libc::sigset_t) -> c_int);
    crate::glibc::real!(select: fn(c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *mut libc::timeval) -> c_int);
    crate::glibc::real!(pselect: fn(c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *const libc::timespec, *const libc::sigset_t) -> c_int);
    crate::glibc::real!(epoll_wait: fn(c_int, *mut libc::epoll_event, c_int, c_int) -> c_int);
    crate::glibc::real!(epoll_pwait: fn(c_int, *mut libc::epoll_event, c_int, c_int, *const libc::sigset_t) -> c_int);
    crate::glibc::real!(epoll_pwait2: fn(c_int, *mut libc::epoll_event, c_int, *const libc::timespec, *const libc::sigset_t) -> c_int);
}

fn ms_deadline(timeout: c_int) -> Option<Instant> {
    (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64))
}

fn ms(left: Option<Duration>) -> c_int {
    // Rounded up, so a wait never ends before its time.
    left.map_or(-1, |d| d.as_nanos().div_ceil(1_000_000).min(c_int::MAX as u128) as c_int)
}

/// The deadline of a relative timeout (`None`: none, a null pointer).
pub(crate) fn ts_deadline(t: *const libc::timespec) -> Option<Instant> {
    if t.is_null() {
        return None;
    }
    // SAFETY: the caller's timeout.
    let t = unsafe { *t };
    let d = Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.clamp(0, 999_999_999) as u32);
    Some(Instant::now() + d)
}

/// A time left as the kernel takes it.
pub(crate) fn ts(left: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: left.as_secs() as libc::time_t,
        tv_nsec: left.subsec_nanos() as libc::c_long,
    }
}

/// The kernel's signal set size, which the `p` variants take beside the set.
const SIGSET: usize = 8;

/// A timeout's address for the kernel, or 0 (none).
pub(crate) fn opt(t: &Option<libc::timespec>) -> usize {
    t.as_ref().map_or(0, |t| t as *const libc::timespec as usize)
}

/// The system call as a cancellation point (`cancel::syscall`), with C's
/// result convention, as an `int`.
///
/// # Safety
///
/// The system call's contract.
unsafe fn kernel(nr: libc::c_long, args: [usize; 6]) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { crate::cancel::syscall_c(nr, args) as c_int }
}

/// glibc's `poll`, for the library's own zero-timeout looks (`fdio.rs`).
///
/// # Safety
///
/// C's contract for `poll`.
pub(crate) unsafe fn real_poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { next::poll()(fds, n, timeout) }
}

/// `poll`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn poll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::poll()(fds, n, timeout) };
    }
    retrying(ms_deadline(timeout), |left| {
        let t = left.map(ts);
        // SAFETY: `ppoll` with the caller's descriptors and the time left.
        unsafe { kernel(libc::SYS_ppoll, [fds as usize, n as usize, opt(&t), 0, SIGSET, 0]) }
    })
}

/// `ppoll`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn ppoll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::ppoll()(fds, n, timeout, mask) };
    }
    retrying(ts_deadline(timeout), |left| {
        let t = left.map(ts);
        // SAFETY: forwarded, with the time left (a copy: the kernel writes it).
        unsafe {
            kernel(libc::SYS_ppoll, [fds as usize, n as usize, opt(&t), mask as usize, SIGSET, 0])
        }
    })
}

/// `select` (Linux's: the timeout is updated to the time left).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::select()(nfds, r, w, e, timeout) };
    }
    // The sets are in-out: keep them for a call again.
    // SAFETY: the caller's sets (or null).
    let saved = unsafe { [r, w, e].map(|p| (!p.is_null()).then(|| *p)) };
    retrying(None, |_| {
        for (p, s) in [r, w, e].into_iter().zip(saved) {
            if let Some(s) = s {
                // SAFETY: the caller's set, restored before each call.
                unsafe { *p = s };
            }
        }
        // SAFETY: forwarded; the kernel leaves the time left in `timeout`.
        unsafe {
            kernel(
                libc::SYS_select,
                [nfds as usize, r as usize, w as usize, e as usize, timeout as usize, 0],
            )
        }
    })
}

/// `pselect`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pselect(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::pselect()(nfds, r, w, e, timeout, mask) };
    }
    // SAFETY: the caller's sets (or null).
    let saved = unsafe { [r, w, e].map(|p| (!p.is_null()).then(|| *p)) };
    retrying(ts_deadline(timeout), |left| {
        for (p, s) in [r, w, e].into_iter().zip(saved) {
            if let Some(s) = s {
                // SAFETY: the caller's set, restored before each call.
                unsafe { *p = s };
            }
        }
        let t = left.map(ts);
        // The kernel's sixth argument: the mask and its size.
        let m = [mask as usize, SIGSET];
        let mp = if mask.is_null() { 0 } else { m.as_ptr() as usize };
        // SAFETY: forwarded, with the time left (a copy: the kernel writes it).
        unsafe {
            kernel(
                libc::SYS_pselect6,
                [nfds as usize, r as usize, w as usize, e as usize, opt(&t), mp],
            )
        }
    })
}

/// `epoll_wait`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_wait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::epoll_wait()(epfd, events, max, timeout) };
    }
    // SAFETY: forwarded, with the time left (`epoll_pwait` with no mask).
    retrying(ms_deadline(timeout), |left| unsafe {
        let ms = ms(left) as usize;
        kernel(libc::SYS_epoll_pwait, [epfd as usize, events as usize, max as usize, ms, 0, SIGSET])
    })
}

/// `epoll_pwait`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_pwait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const libc::sigset_t,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::epoll_pwait()(epfd, events, max, timeout, mask) };
    }
    retrying(ms_deadline(timeout), |left| {
        let ms = ms(left) as usize;
        // SAFETY: forwarded, with the time left.
        unsafe {
            kernel(
                libc::SYS_epoll_pwait,
                [epfd as usize, events as usize, max as usize, ms, mask as usize, SIGSET],
            )
        }
    })
}

/// `epoll_pwait2` (a `timespec` timeout).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_pwait2(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::epoll_pwait2()(epfd, events, max, timeout, mask) };
    }
    retrying(ts_deadline(timeout), |left| {
        let t = left.map(ts);
        // SAFETY: forwarded, with the time left (a copy: the kernel reads it).
        unsafe {
            kernel(
                libc::SYS_epoll_pwait2,
                [epfd as usize, events as usize, max as usize, opt(&t), mask as usize, SIGSET],
            )
        }
    })
}
