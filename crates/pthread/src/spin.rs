//! Spin locks: `pthread_spin_init`, `_destroy`, `_lock`, `_trylock`, `_unlock`.
//!
//! A `pthread_spinlock_t` is glibc's one `int`: 0 unlocked, 1 locked; a
//! lock is a compare-and-swap, an unlock a store. Nothing else is kept, so a
//! process-shared spin lock works as it is, and a lock glibc's code took is
//! ours to release and back.
//!
//! What differs from glibc's is what a waiter does when the lock stays
//! taken. A kernel thread's holder runs on a CPU of its own, but a user
//! thread's holder may have been preempted (the program's code is, the
//! library's is not) onto the very processor the spinner now occupies, and
//! with one processor it would never run again while the spinner spins. So
//! after a short spin the waiter yields — a user thread to the runtime (the
//! holder, if runnable here, runs), a kernel thread to the kernel — and
//! spins again.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

/// Spins between yields.
const SPINS: u32 = 100;

/// The lock word.
///
/// # Safety
///
/// `l` is a `pthread_spinlock_t` that outlives `'a`.
unsafe fn word<'a>(l: *const libc::pthread_spinlock_t) -> &'a AtomicI32 {
    // SAFETY: an aligned int the caller owns.
    unsafe { AtomicI32::from_ptr(l.cast_mut()) }
}

/// `pthread_spin_init`: both process-shared values are accepted (the word
/// works across processes as it is).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_spin_init(
    l: *mut libc::pthread_spinlock_t,
    _pshared: c_int,
) -> c_int {
    // SAFETY: the caller's lock.
    unsafe { word(l) }.store(0, Ordering::Release);
    0
}

/// `pthread_spin_destroy`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_spin_destroy(_l: *mut libc::pthread_spinlock_t) -> c_int {
    0
}

/// `pthread_spin_lock`: spins, yielding between bursts (module docs).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_spin_lock(l: *mut libc::pthread_spinlock_t) -> c_int {
    // SAFETY: the caller's lock.
    let w = unsafe { word(l) };
    if w.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
        return 0;
    }
    let mut spins = 0;
    loop {
        while w.load(Ordering::Relaxed) != 0 {
            spins += 1;
            if spins < SPINS {
                std::hint::spin_loop();
            } else {
                spins = 0;
                crate::sched::yield_any();
            }
        }
        if w.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return 0;
        }
    }
}

/// `pthread_spin_trylock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_spin_trylock(l: *mut libc::pthread_spinlock_t) -> c_int {
    // SAFETY: the caller's lock.
    match unsafe { word(l) }.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed) {
        Ok(_) => 0,
        Err(_) => libc::EBUSY,
    }
}

/// `pthread_spin_unlock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_spin_unlock(l: *mut libc::pthread_spinlock_t) -> c_int {
    // SAFETY: the caller's lock.
    unsafe { word(l) }.store(0, Ordering::Release);
    0
}
