//! [`Semaphore`]: counting permits, FIFO among waiters.
//!
//! A release with waiters queued hands its permit straight to the first
//! waiter instead of putting it back in the count, so a steady stream of
//! `try_acquire` calls cannot starve a parked thread.

use crate::spin::SpinLock;
use crate::task::WaitReason;
use crate::wait::{Waiter, WaiterRef};
use std::collections::VecDeque;
use std::fmt;

struct Inner {
    permits: usize,
    waiters: VecDeque<WaiterRef>,
}

/// A counting semaphore for user threads.
pub struct Semaphore {
    inner: SpinLock<Inner>,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore").field("permits", &self.available_permits()).finish()
    }
}

impl Semaphore {
    /// A semaphore with `permits` permits.
    pub const fn new(permits: usize) -> Semaphore {
        Semaphore { inner: SpinLock::new(Inner { permits, waiters: VecDeque::new() }) }
    }

    /// Takes a permit, parking until one is available.
    pub fn acquire(&self) {
        let waiter = Waiter::new();
        let mut g = self.inner.lock();
        if g.permits > 0 {
            g.permits -= 1;
            return;
        }
        g.waiters.push_back(waiter.as_ref());
        // The releaser hands us its permit.
        waiter.wait_unlocking(g, WaitReason::Semaphore(self as *const Self as usize));
    }

    /// Takes a permit if one is available now.
    pub fn try_acquire(&self) -> bool {
        let mut g = self.inner.lock();
        if g.permits > 0 {
            g.permits -= 1;
            true
        } else {
            false
        }
    }

    /// Returns a permit (to the first waiter, if any).
    pub fn release(&self) {
        let mut g = self.inner.lock();
        match crate::sync::pop_live(&mut g.waiters) {
            Some(w) => {
                drop(g);
                // SAFETY: dequeued under the lock: woken only here.
                unsafe { w.wake() };
            }
            None => g.permits += 1,
        }
    }

    /// Permits available now.
    pub fn available_permits(&self) -> usize {
        self.inner.lock().permits
    }
}
