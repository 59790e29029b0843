//! Waiting for a wake-up: the [`Waiter`] every blocking operation of the
//! runtime uses, for user threads and for ordinary OS threads alike.
//!
//! A blocking operation puts a `Waiter` on its own stack, registers a
//! [`WaiterRef`] to it in some queue (under that queue's lock), releases the
//! lock and calls [`Waiter::wait`]. Whoever dequeues the reference later
//! calls [`WaiterRef::wake`] exactly once.
//!
//! - On a user thread, `wait` parks the user thread for a `Sync` token
//!   (`park.rs`) and the processor runs something else. `wake` delivers the
//!   token; by the argument in `park.rs` the waiter and its task stay alive
//!   until that delivery, which is the waker's last access to them.
//! - On an OS thread outside any runtime (a `main` thread receiving from a
//!   channel, say), `wait` parks the kernel thread with `std::thread::park`
//!   until a flag is set. `wake` clones the `std::thread::Thread` handle first,
//!   then sets the flag, then unparks the clone: after the flag is set the
//!   waiter may return and free its frame, so it is not touched again.

use crate::processor;
use crate::task::{Task, WaitReason};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

enum Who {
    /// A user thread (raw: kept alive by the protocol, see module docs).
    Task(NonNull<Task>),
    /// An OS thread outside the runtime.
    Os { thread: std::thread::Thread, woken: AtomicBool },
}

/// A pending wake-up for the current thread. Lives on the waiting thread's stack.
pub(crate) struct Waiter {
    who: Who,
}

impl Waiter {
    /// A waiter for the calling thread (user thread or OS thread).
    #[inline]
    pub(crate) fn new() -> Waiter {
        let who = match processor::current_task_ptr() {
            Some(t) => Who::Task(t),
            None => Who::Os { thread: std::thread::current(), woken: AtomicBool::new(false) },
        };
        Waiter { who }
    }

    /// A reference to register in a queue.
    #[inline]
    pub(crate) fn as_ref(&self) -> WaiterRef {
        WaiterRef(NonNull::from(self))
    }

    /// Blocks until the registered reference is woken. Must be called exactly
    /// once per registration, after the reference is visible to wakers.
    #[inline]
    pub(crate) fn wait(&self, reason: WaitReason) {
        match &self.who {
            Who::Task(_) => processor::park_current(crate::park::Kind::Sync, reason),
            Who::Os { woken, .. } => {
                while !woken.load(Ordering::Acquire) {
                    std::thread::park();
                }
            }
        }
    }
}

/// A registered [`Waiter`], as stored in wait queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WaiterRef(NonNull<Waiter>);

// SAFETY: a WaiterRef is an address handed from the waiting thread to its
// waker; it is dereferenced only under the protocol of the module docs.
unsafe impl Send for WaiterRef {}
// SAFETY: as above.
unsafe impl Sync for WaiterRef {}

impl WaiterRef {
    /// Wakes the waiter.
    ///
    /// # Safety
    ///
    /// The reference must have been registered for a wait that is in progress
    /// (or about to start) and not yet woken, and must be woken only this once.
    #[inline]
    pub(crate) unsafe fn wake(self) {
        // SAFETY: by the caller's guarantee the waiter is alive until woken.
        let waiter = unsafe { self.0.as_ref() };
        match &waiter.who {
            Who::Task(t) => {
                let t = *t;
                // SAFETY: the task waits for this token, so it is alive (park.rs).
                unsafe { processor::unpark_sync(t) };
            }
            Who::Os { thread, woken } => {
                let thread = thread.clone();
                woken.store(true, Ordering::Release);
                thread.unpark();
            }
        }
    }
}
