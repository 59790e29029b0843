//! `pthread_once`.
//!
//! The control word (`PTHREAD_ONCE_INIT` = 0) goes 0 → `RUNNING` → `DONE`;
//! a cancelled or exiting initializer puts it back to 0 (its unwind passes
//! through here), so a later call runs it again, as POSIX asks. Latecomers
//! wait for `DONE`: a user thread yields to the runtime between looks, a
//! kernel thread waits on the word (`FUTEX_WAIT`), woken when it changes.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

const RUNNING: i32 = 1;
const DONE: i32 = 2;

/// `pthread_once`.
///
/// # Safety
///
/// C's contract: `once` is a `pthread_once_t` (an `int`) initialised to 0.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_once(
    once: *mut libc::pthread_once_t,
    init: unsafe extern "C-unwind" fn(),
) -> c_int {
    // SAFETY: an aligned int the caller owns, used atomically by every caller.
    let w = unsafe { AtomicI32::from_ptr(once) };
    loop {
        match w.compare_exchange(0, RUNNING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => break,
            Err(DONE) => return 0,
            Err(_) => wait(w),
        }
    }
    struct Reset<'a>(&'a AtomicI32);
    impl Drop for Reset<'_> {
        fn drop(&mut self) {
            self.0.store(0, Ordering::Release);
            wake(self.0);
        }
    }
    let reset = Reset(w);
    // SAFETY: the program's initializer.
    unsafe { init() };
    std::mem::forget(reset);
    w.store(DONE, Ordering::Release);
    wake(w);
    0
}

fn as_u32(w: &AtomicI32) -> &AtomicU32 {
    // SAFETY: same size and alignment; the futex only compares bits.
    unsafe { &*(w as *const AtomicI32).cast::<AtomicU32>() }
}

fn wait(w: &AtomicI32) {
    if crate::thread::on_user_thread() {
        schedlab_rt::yield_now();
    } else {
        crate::wait::futex_wait(as_u32(w), RUNNING as u32, None);
    }
}

fn wake(w: &AtomicI32) {
    crate::wait::futex_wake(as_u32(w), i32::MAX);
}
