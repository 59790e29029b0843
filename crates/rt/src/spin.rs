//! A small spin lock for the runtime's short internal critical sections
//! (wait queues of the `sync` primitives).
//!
//! Held only for a few dozen instructions and never across a context switch.
//! A holder can still lose its CPU to the kernel, so a waiter that has spun
//! for a while yields its kernel thread instead of burning the time slice
//! (the backoff of crossbeam-utils). When preemption of user threads arrives,
//! holding one of these will also hold off preemption on that processor.

use crossbeam_utils::Backoff;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// A spin lock protecting a `T`.
#[derive(Debug, Default)]
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `value` to one holder at a time, as a
// mutex does, so it is Sync when `T` may be sent between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock owns the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// An unlocked lock around `value`.
    pub(crate) const fn new(value: T) -> SpinLock<T> {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Acquires the lock.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    /// Spins, then gives way. On a user thread outside any runtime section
    /// it gives way to the *runtime* (a user-level yield), not to the kernel:
    /// the holder may be a user thread preempted on this very processor,
    /// which only a switch lets finish; a `sched_yield` would also keep the
    /// spinner in the kernel, where the preemption signal cannot find a safe
    /// point (preempt.rs).
    #[cold]
    fn lock_contended(&self) {
        let backoff = Backoff::new();
        loop {
            while self.locked.load(Ordering::Relaxed) {
                if !backoff.is_completed() {
                    backoff.snooze();
                } else if !crate::processor::yield_if_free() {
                    std::thread::yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// Holds a [`SpinLock`]; unlocks on drop.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinGuard<'_, T> {
    /// Gives up the guard *without* unlocking; returns the lock word, which
    /// the caller must later unlock with [`unlock_word`] (`wait.rs`: a user
    /// thread parks holding its wait queue's lock, and the next context on
    /// its processor unlocks it).
    #[inline]
    pub(crate) fn into_locked_word(self) -> NonNull<AtomicBool> {
        let word = NonNull::from(&self.lock.locked);
        std::mem::forget(self);
        word
    }
}

/// Unlocks a lock given up by [`SpinGuard::into_locked_word`].
///
/// # Safety
///
/// `word` must come from `into_locked_word` and be unlocked once; its lock
/// must be alive (its owner cannot free it while it is locked).
#[inline]
pub(crate) unsafe fn unlock_word(word: NonNull<AtomicBool>) {
    // SAFETY: the caller's guarantee.
    unsafe { word.as_ref() }.store(false, Ordering::Release);
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and `&mut self` makes this the only access.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn spin_lock_counts_across_os_threads() {
        let l = Arc::new(SpinLock::new(0u64));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 20_000);
    }
}
