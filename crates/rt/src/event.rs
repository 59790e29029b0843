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
//! The upcalls of the preemption and blocking paths (`Preempted`, `Blocked`,
//! `Unblocked`) are delivered the same way: `Preempted` on the preempted
//! thread's processor, `Blocked` from the monitor thread, `Unblocked` on the
//! kernel thread that returned from the kernel. The enum is
//! `#[non_exhaustive]`: more may come.

use crate::task::ThreadId;
use std::sync::Arc;
use std::time::Duration;

/// How the runtime learned that a user thread blocked in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detection {
    /// The thread said so: [`blocking`](crate::blocking()) or a wrapper of
    /// [`mod@crate::blocking`].
    Explicit,
    /// The monitor saw its kernel thread stop running (CPU clock still).
    Transparent,
}

/// Something the scheduler did. `processor` is the index of a virtual
/// processor, `0..max_processors`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A virtual processor started running (its kernel thread is up), ran
    /// again after `ProcessorLost`, or was added back by
    /// [`Runtime::set_processors`](crate::Runtime::set_processors); the "new
    /// processor" upcall.
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
    /// A user thread ran past its quantum while work waited and was switched
    /// away by the preemption signal (seed 003's PREEMPTED upcall).
    Preempted {
        /// The thread.
        thread: ThreadId,
        /// The processor it ran on.
        processor: usize,
        /// How long it had run, as the monitor saw it.
        ran: Duration,
    },
    /// A user thread spent its CPU budget for the period
    /// ([`Builder::cpu_budget`](crate::Builder::cpu_budget)) and sleeps until
    /// the period ends.
    Throttled {
        /// The thread.
        thread: ThreadId,
        /// The processor it ran on.
        processor: usize,
        /// What it was charged in this period.
        used: Duration,
        /// How long until its period ends and it is runnable again.
        resume_in: Duration,
    },
    /// A user thread blocked in the kernel and its processor went to another
    /// kernel thread (seed 003's BLOCKED upcall). Emitted by the monitor.
    Blocked {
        /// The thread.
        thread: ThreadId,
        /// The processor it left, which runs on.
        processor: usize,
        /// Explicit or transparent.
        detection: Detection,
    },
    /// A user thread that blocked in the kernel returned (seed 003's
    /// UNBLOCKED upcall).
    Unblocked {
        /// The thread.
        thread: ThreadId,
        /// The processor it took back at once, or `None`: it was queued.
        processor: Option<usize>,
        /// How its blocking was detected.
        detection: Detection,
    },
    /// The kernel took a virtual processor away: its kernel thread is
    /// runnable but has not run (its CPU clock stood still) while a user
    /// thread was current and work waited. `NewProcessor` follows when it
    /// runs again. Emitted by the monitor.
    ProcessorLost {
        /// The processor.
        processor: usize,
    },
    /// A virtual processor removed by
    /// [`Runtime::set_processors`](crate::Runtime::set_processors) stopped:
    /// its running thread's stint is over, its queued threads went to the
    /// injection queue, and its kernel thread parks until it is added back
    /// (seed 003: a change in the size of the virtual processor set).
    /// Emitted on that kernel thread.
    ProcessorRemoved {
        /// The processor.
        processor: usize,
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
