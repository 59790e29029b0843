//! A spin lock around a value, for the library's own short critical
//! sections on the thread create and join path (the kept control blocks, a
//! thread's join handle).
//!
//! `std::sync::Mutex` costs about twice the instructions of an uncontended
//! take and release here (its poison flag reads the panic count on each
//! side), and every `pthread_create` and `pthread_join` took three of them.
//! Nothing held under these locks blocks or allocates for long, and no
//! panic can poison them (the library aborts on a Rust panic). A waiter
//! spins a little, then yields its processor: the holder may be a user
//! thread preempted, or a kernel thread descheduled, inside the section.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A value behind a spin lock.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, one at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as for any owned value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// An unlocked `value`.
    pub(crate) const fn new(value: T) -> SpinLock<T> {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Takes the lock.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self.locked.swap(true, Ordering::Acquire) {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    // The holder's kernel thread was descheduled, or the
                    // holder is a user thread preempted on this processor.
                    crate::sched::yield_any();
                }
            }
            if !self.locked.swap(true, Ordering::Acquire) {
                return;
            }
        }
    }

    /// The value, through exclusive access (no lock needed).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// The value, locked; the lock is let go on drop.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.locked_release();
    }
}

impl<T> SpinGuard<'_, T> {
    #[inline]
    fn locked_release(&self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}
