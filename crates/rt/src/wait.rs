//! Waiting for a wake-up: the [`Waiter`] every blocking operation of the
//! runtime uses, for user threads and for ordinary OS threads alike.
//!
//! A blocking operation puts a `Waiter` on its own stack, registers a
//! [`WaiterRef`] to it in some queue under that queue's spin lock, and calls
//! [`Waiter::wait_unlocking`] with the lock still held. Whoever dequeues the
//! reference later (under the same lock) calls [`WaiterRef::wake`] exactly
//! once, after releasing the lock.
//!
//! # A user thread parks holding the queue's lock
//!
//! 1. The thread `T` registers itself under the lock and switches away
//!    *without unlocking*; the pending action of the switch (`processor.rs`)
//!    hands `T`'s reference to the queue entry, marks `T` parked
//!    (`Task::parked_in_queue`, for the deadlock detector), and only then
//!    unlocks.
//! 2. A waker takes the lock, so it can dequeue `T` only after step 1: `T`'s
//!    context is saved and published (the unlock is a release, the lock an
//!    acquire). It wakes `T` after unlocking: it clears the flag and puts `T`
//!    in a run queue with the reference the entry held.
//!
//! So a wait and its wake-up cost no atomic operation beyond the lock, where
//! parking on the park word (`park.rs`) adds a compare-and-swap on each side
//! (~11 ns on the lab machine): the park word exists to close the window
//! between registering and switching, and here the lock closes it. The price
//! is that the lock stays held for the switch (a few ns, on the waiter's
//! processor only). The waiter and its task stay alive until the wake-up,
//! which is the waker's last access to them.
//!
//! # An OS thread outside any runtime
//!
//! (A `main` thread receiving from a channel, say.) `wait_unlocking` drops
//! the lock and parks the kernel thread with `std::thread::park` until a flag
//! is set. `wake` clones the `std::thread::Thread` handle first, then sets
//! the flag, then unparks the clone: after the flag is set the waiter may
//! return and free its frame, so it is not touched again.

use crate::hooks;
use crate::spin::SpinGuard;
use crate::task::{Task, WaitReason};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set (for good) once a dropped runtime has cancelled a thread
/// (`runtime.rs`, `Drop`), after marking it; until then no waiter can be
/// cancelled, and [`WaiterRef::is_cancelled`] looks no further.
pub(crate) static ANY_CANCELLED: AtomicBool = AtomicBool::new(false);

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
        let who = match hooks::current_task_ptr() {
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

    /// Releases `guard` (the lock of the queue this waiter was just
    /// registered in) and blocks until the registered reference is woken.
    /// Must be called exactly once per registration, by the registering
    /// thread, with no switch in between (module docs).
    #[inline]
    pub(crate) fn wait_unlocking<T>(&self, guard: SpinGuard<'_, T>, reason: WaitReason) {
        match &self.who {
            Who::Task(_) => hooks::park_unlocking(guard.into_locked_word(), reason),
            Who::Os { .. } => {
                drop(guard);
                self.wait_os();
            }
        }
    }

    /// Whether the waiting thread is an OS thread outside any runtime.
    #[inline]
    pub(crate) fn is_os(&self) -> bool {
        matches!(self.who, Who::Os { .. })
    }

    /// [`Waiter::wait_unlocking`] for a wait an OS thread may end: when
    /// `external` (the primitive is reachable from OS threads, see
    /// `runtime.rs`, "Deadlock detection"), a user thread is marked for the
    /// deadlock detector as not stuck for good while it waits.
    #[inline(always)]
    pub(crate) fn wait_unlocking_maybe_external<T>(
        &self,
        guard: SpinGuard<'_, T>,
        reason: WaitReason,
        external: bool,
    ) {
        if external {
            self.wait_unlocking_external(guard, reason);
        } else {
            self.wait_unlocking(guard, reason);
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_unlocking_external<T>(&self, guard: SpinGuard<'_, T>, reason: WaitReason) {
        match &self.who {
            Who::Task(t) => {
                // SAFETY: `t` is the calling thread itself, alive while it runs.
                let task = unsafe { t.as_ref() };
                // Stored before the switch, so the detector (which reads
                // only when every processor is asleep, `registry.rs`) sees it.
                task.external_wait.store(true, Ordering::Relaxed);
                self.wait_unlocking(guard, reason);
                task.external_wait.store(false, Ordering::Relaxed);
            }
            Who::Os { .. } => self.wait_unlocking(guard, reason),
        }
    }

    /// Blocks an OS-thread waiter until woken, for a registration published
    /// without a lock (a task's state word, `thread.rs`).
    ///
    /// # Panics
    ///
    /// On a user thread, which waits only through `wait_unlocking`.
    pub(crate) fn wait_os(&self) {
        match &self.who {
            Who::Task(_) => unreachable!("a user thread waits through wait_unlocking"),
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
    /// Whether the waiter is a user thread of a dropped runtime, which will
    /// never run again (`runtime.rs`, `Drop`): it must not be handed
    /// anything, and it need not be woken.
    ///
    /// # Safety
    ///
    /// The reference must be registered and not yet woken.
    #[inline]
    pub(crate) unsafe fn is_cancelled(self) -> bool {
        // The common case, no runtime ever dropped with threads left: one
        // load of a line nobody writes, and no pointer chasing.
        if !ANY_CANCELLED.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: the caller's guarantee.
        unsafe { self.is_cancelled_slow() }
    }

    /// [`WaiterRef::is_cancelled`] once some thread was cancelled.
    ///
    /// # Safety
    ///
    /// As for `is_cancelled`.
    #[cold]
    #[inline(never)]
    unsafe fn is_cancelled_slow(self) -> bool {
        // SAFETY: by the caller's guarantee the waiter is alive.
        match &unsafe { self.0.as_ref() }.who {
            // SAFETY: a waiting task is alive until woken.
            Who::Task(t) => unsafe { t.as_ref() }.cancelled.load(Ordering::Relaxed),
            Who::Os { .. } => false,
        }
    }

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
                // SAFETY: the task is parked in the queue we dequeued it from,
                // which owned its reference (module docs).
                unsafe { hooks::wake_queued(t) };
            }
            Who::Os { thread, woken } => {
                let thread = thread.clone();
                woken.store(true, Ordering::Release);
                thread.unpark();
            }
        }
    }
}
