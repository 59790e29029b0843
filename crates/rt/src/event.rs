//! Scheduling events, named after the scheduler-activations upcalls where
//! they match (Anderson et al.; Williams, "An Implementation of Scheduler
//! Activations on the NetBSD Operating System", 2002).
//!
//! A runtime built with [`RuntimeBuilder::on_event`](crate::RuntimeBuilder::on_event)
//! calls the hook synchronously, on the kernel thread of the processor where
//! the event happens, in the middle of the scheduler: the hook must be quick,
//! must not block, and must not call into the runtime (no spawning, no
//! locking of `sync` primitives). Record and return. Without a hook, emitting
//! an event costs one predictable branch.
//!
//! Later issues add the upcalls of the blocking and preemption paths
//! (`Preempted`, `Blocked`, `Unblocked`); the enum is `#[non_exhaustive]` for that.

use crate::task::ThreadId;
use std::sync::Arc;

/// Something the scheduler did. `processor` is the index of a virtual
/// processor, `0..processors`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A virtual processor started running (its kernel thread is up); the
    /// "new processor" upcall.
    NewProcessor {
        /// The processor.
        processor: usize,
    },
    /// A user thread was created and made runnable.
    Spawned {
        /// The new thread.
        thread: ThreadId,
        /// The processor it was spawned from, `None` from outside the runtime.
        processor: Option<usize>,
    },
    /// A processor switched from one context to another. `None` stands for
    /// the processor's own scheduler context (idle, stealing, sleeping).
    Switched {
        /// The context suspended.
        from: Option<ThreadId>,
        /// The context resumed.
        to: Option<ThreadId>,
        /// The processor.
        processor: usize,
    },
    /// A user thread blocked (its park was committed: it is in no run queue).
    Parked {
        /// The thread.
        thread: ThreadId,
        /// The processor it last ran on.
        processor: usize,
    },
    /// A parked user thread was made runnable again.
    Unparked {
        /// The thread.
        thread: ThreadId,
        /// The processor that woke it, `None` from outside the runtime.
        processor: Option<usize>,
    },
    /// A user thread finished (returned or panicked).
    Exited {
        /// The thread.
        thread: ThreadId,
        /// The processor it finished on.
        processor: usize,
    },
}

/// The hook a runtime calls for every [`Event`].
pub(crate) type Hook = Arc<dyn Fn(&Event) + Send + Sync + 'static>;
