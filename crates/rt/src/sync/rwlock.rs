//! [`RwLock`]: many readers or one writer, for user threads.
//!
//! The whole state (reader count, writer flag, two waiter queues) sits under
//! one spin lock, and ownership is handed over directly: the releasing thread
//! updates the state on behalf of the threads it wakes. The policy is fair in
//! both directions: a new reader queues behind a waiting writer (writers do
//! not starve), and a writer's unlock admits all queued readers before the
//! next writer (readers do not starve).

use crate::spin::SpinLock;
use crate::sync::wake_all;
use crate::task::WaitReason;
use crate::wait::{Waiter, WaiterRef};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};

struct State {
    readers: usize,
    writer: bool,
    waiting_readers: VecDeque<WaiterRef>,
    waiting_writers: VecDeque<WaiterRef>,
}

/// A reader-writer lock for user threads.
pub struct RwLock<T> {
    state: SpinLock<State>,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives either shared access to many readers (needs `T: Sync`)
// or exclusive access to one writer (needs `T: Send`).
unsafe impl<T: Send + Sync> Sync for RwLock<T> {}
// SAFETY: owning the lock owns the value.
unsafe impl<T: Send> Send for RwLock<T> {}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock").finish_non_exhaustive()
    }
}

impl<T> RwLock<T> {
    /// An unlocked lock holding `value`.
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            state: SpinLock::new(State {
                readers: 0,
                writer: false,
                waiting_readers: VecDeque::new(),
                waiting_writers: VecDeque::new(),
            }),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks for reading, parking while a writer holds or waits for the lock.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        let waiter = Waiter::new();
        let mut s = self.state.lock();
        if !s.writer && s.waiting_writers.is_empty() {
            s.readers += 1;
            return RwLockReadGuard { lock: self };
        }
        s.waiting_readers.push_back(waiter.as_ref());
        // The waker counts us as a reader.
        waiter.wait_unlocking(s, WaitReason::RwLockRead(self as *const Self as usize));
        RwLockReadGuard { lock: self }
    }

    /// Locks for writing, parking while anyone holds the lock.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let waiter = Waiter::new();
        let mut s = self.state.lock();
        if !s.writer && s.readers == 0 {
            s.writer = true;
            return RwLockWriteGuard { lock: self };
        }
        s.waiting_writers.push_back(waiter.as_ref());
        // The waker makes us the writer.
        waiter.wait_unlocking(s, WaitReason::RwLockWrite(self as *const Self as usize));
        RwLockWriteGuard { lock: self }
    }

    /// Locks for reading if that needs no waiting.
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        let mut s = self.state.lock();
        (!s.writer && s.waiting_writers.is_empty()).then(|| {
            s.readers += 1;
            RwLockReadGuard { lock: self }
        })
    }

    /// Locks for writing if that needs no waiting.
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        let mut s = self.state.lock();
        (!s.writer && s.readers == 0).then(|| {
            s.writer = true;
            RwLockWriteGuard { lock: self }
        })
    }

    fn read_unlock(&self) {
        let mut s = self.state.lock();
        s.readers -= 1;
        if s.readers == 0 {
            if let Some(w) = crate::sync::pop_live(&mut s.waiting_writers) {
                s.writer = true;
                drop(s);
                // SAFETY: dequeued under the lock: woken only here.
                unsafe { w.wake() };
            }
        }
    }

    fn write_unlock(&self) {
        let mut s = self.state.lock();
        s.writer = false;
        if !s.waiting_readers.is_empty() {
            let mut readers = std::mem::take(&mut s.waiting_readers);
            // Readers of a dropped runtime would hold the lock for good.
            // SAFETY: queued, so registered and not yet woken.
            readers.retain(|w| !unsafe { w.is_cancelled() });
            if !readers.is_empty() {
                s.readers += readers.len();
                return wake_all(s, readers);
            }
        }
        if let Some(w) = crate::sync::pop_live(&mut s.waiting_writers) {
            s.writer = true;
            drop(s);
            // SAFETY: dequeued under the lock: woken only here.
            unsafe { w.wake() };
        }
    }

    /// The value, through exclusive access to the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The value, consuming the lock.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

/// Shared access to an [`RwLock`]'s value; unlocks on drop.
#[must_use = "dropping the guard unlocks at once"]
pub struct RwLockReadGuard<'a, T> {
    lock: &'a RwLock<T>,
}

impl<T> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a read guard means no writer holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.read_unlock();
    }
}

/// Exclusive access to an [`RwLock`]'s value; unlocks on drop.
#[must_use = "dropping the guard unlocks at once"]
pub struct RwLockWriteGuard<'a, T> {
    lock: &'a RwLock<T>,
}

impl<T> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the write guard is the only holder.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the write guard is the only holder, `&mut self` is unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.write_unlock();
    }
}
