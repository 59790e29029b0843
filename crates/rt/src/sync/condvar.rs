//! [`Condvar`]: a condition variable for user threads.
//!
//! `wait` queues a waiter *before* unlocking the mutex, so a `notify` made
//! after the waiter's condition check (which needs the mutex) always finds
//! it in the queue: no wake-up is lost. Spurious wake-ups do not happen, but
//! callers should loop on their condition anyway (or use `wait_while`),
//! since another thread may change it between the notify and the re-lock.

use crate::spin::SpinLock;
use crate::sync::{wake_all, MutexGuard};
use crate::task::WaitReason;
use crate::wait::{Waiter, WaiterRef};
use std::collections::VecDeque;
use std::fmt;

/// A condition variable, used with [`Mutex`](crate::sync::Mutex).
#[derive(Default)]
pub struct Condvar {
    queue: SpinLock<VecDeque<WaiterRef>>,
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}

impl Condvar {
    /// A condition variable with no waiters.
    pub const fn new() -> Condvar {
        Condvar { queue: SpinLock::new(VecDeque::new()) }
    }

    /// Unlocks the guard's mutex, parks until notified, and locks it again.
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let mutex = guard.mutex();
        let waiter = Waiter::new();
        let mut q = self.queue.lock();
        q.push_back(waiter.as_ref());
        // Unlock the mutex while queued: a notify from now on finds us. (The
        // condvar's lock is held meanwhile; the mutex's unlock may take the
        // mutex's own queue lock: always in this order, never the other.)
        drop(guard);
        waiter.wait_unlocking(q, WaitReason::Condvar(self as *const Self as usize));
        mutex.lock()
    }

    /// Waits while `condition` holds.
    pub fn wait_while<'a, T>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> MutexGuard<'a, T> {
        while condition(&mut guard) {
            guard = self.wait(guard);
        }
        guard
    }

    /// Wakes the longest-waiting thread, if any.
    pub fn notify_one(&self) {
        let w = super::pop_live(&mut self.queue.lock());
        if let Some(w) = w {
            // SAFETY: dequeued under the lock: woken only here.
            unsafe { w.wake() };
        }
    }

    /// Wakes every waiting thread.
    pub fn notify_all(&self) {
        let mut q = self.queue.lock();
        let all = std::mem::take(&mut *q);
        wake_all(q, all);
    }
}
