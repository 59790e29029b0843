//! Synchronization for user threads: [`Mutex`], [`Condvar`], [`RwLock`],
//! [`Semaphore`], [`Barrier`] and a bounded MPMC [`channel()`] (capacity 0:
//! rendezvous).
//!
//! Blocking parks the *user thread* (its processor runs other user threads
//! meanwhile), never the kernel thread. Each primitive keeps its waiters in a
//! FIFO queue of waiters (`wait.rs`) under a short spin lock; a user thread
//! parks still holding that lock, which its processor releases after the
//! switch, and a waker dequeues a waiter and wakes it exactly once
//! (`wait.rs`). Uncontended, the `Mutex` costs two locked instructions, its
//! lock and its unlock (~10 ns on the lab machine; see `mutex.rs`). They also work
//! from ordinary OS threads, which block as they would on a `std` primitive,
//! so a `main` thread can talk to user threads over a channel (made on the
//! OS thread, so the deadlock detector knows an OS thread may wake its
//! waiters: `runtime.rs`, "Deadlock detection").
//!
//! Unlike `std::sync`, the locks do not poison: a panic while holding a
//! guard unlocks as the guard drops.

mod barrier;
mod chain;
mod channel;
mod condvar;
mod mutex;
mod rwlock;
mod semaphore;

pub use self::barrier::{Barrier, BarrierWaitResult};
pub use self::channel::{
    channel, Receiver, RecvError, SendError, Sender, TryRecvError, TrySendError,
};
pub use self::condvar::Condvar;
pub use self::mutex::{Mutex, MutexGuard};
pub use self::rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use self::semaphore::Semaphore;

use crate::spin::SpinGuard;
use crate::wait::WaiterRef;
use std::collections::VecDeque;

/// Wakes every waiter in `list` after releasing `guard`.
/// Dequeues the first waiter that can still run: threads of a dropped
/// runtime (`runtime.rs`, `Drop`) are dropped from the queue, unwoken, so a
/// permit, a lock or a notification is never handed to a thread that will
/// never use it.
#[inline]
fn pop_live(queue: &mut VecDeque<WaiterRef>) -> Option<WaiterRef> {
    loop {
        let w = queue.pop_front()?;
        // SAFETY: queued, so registered and not yet woken.
        if !unsafe { w.is_cancelled() } {
            return Some(w);
        }
    }
}

fn wake_all<T>(guard: SpinGuard<'_, T>, list: VecDeque<WaiterRef>) {
    drop(guard);
    for w in list {
        // SAFETY: each reference was dequeued under the lock, so it is woken
        // only here, and its wait is in progress.
        unsafe { w.wake() };
    }
}
