//! The two futex calls the runtime's sleeping places use (idle processors,
//! spare kernel threads, the monitor), in one place.
//!
//! Both leave `errno` as they found it: a kernel thread that carries a
//! detached user thread sleeps here in that thread's context, and in the
//! `shared-library` build `errno` is the user thread's own (its TLS block),
//! where an `EAGAIN` of ours would overwrite the value a C program was
//! about to read.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` holds `expected`, until woken, `timeout` passes, or a
/// spurious wake-up (callers re-check their state). Returns at once if the
/// word holds something else.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT reads the u32 behind the caller's atomic (valid for
    // the call) and the optional timespec on our stack; errno is the calling
    // thread's.
    unsafe {
        let errno = *libc::__errno_location();
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
        );
        *libc::__errno_location() = errno;
    }
}

/// Wakes up to `n` threads sleeping on `word`. Async-signal-safe.
pub(crate) fn wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key; errno is the
    // calling thread's.
    unsafe {
        let errno = *libc::__errno_location();
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
        *libc::__errno_location() = errno;
    }
}
