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
        /// What it was charged in this period: CPU time, including what an
        /// overrun of the period before left owing (`BudgetStats::used`).
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

impl Event {
    /// The event as four words, for a recorder that must not allocate in the hook (a
    /// preallocated array, then a file: `libschedlab_pthread.so`'s `SCHEDLAB_RT_EVENTS`),
    /// read back by [`Event::from_words`]:
    ///
    /// | word | holds                                                                  |
    /// |------|------------------------------------------------------------------------|
    /// | 0    | the kind (low 32 bits: 1 `NewProcessor` ... 12 `Exited`, in the enum's order) and the processor + 1 (high 32 bits; 0: none) |
    /// | 1    | the thread's id (`Switched`: the one suspended), 0 for none               |
    /// | 2    | `Switched`: the thread resumed; `Preempted`: ns run; `Throttled`: ns used; `Blocked`/`Unblocked`: 1 if transparent |
    /// | 3    | `Throttled`: ns until it resumes                                        |
    pub fn to_words(&self) -> [u64; 4] {
        let id = |t: &ThreadId| t.as_u64();
        let opt = |t: &Option<ThreadId>| t.map_or(0, |t| t.as_u64());
        let ns = |d: &Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let how = |d: &Detection| u64::from(*d == Detection::Transparent);
        let (kind, p, thread, a, b): (u64, Option<usize>, u64, u64, u64) = match self {
            Event::NewProcessor { processor } => (1, Some(*processor), 0, 0, 0),
            Event::Spawned { thread, processor } => (2, *processor, id(thread), 0, 0),
            Event::Switched { from, to, processor } => (3, Some(*processor), opt(from), opt(to), 0),
            Event::Parked { thread, processor } => (4, Some(*processor), id(thread), 0, 0),
            Event::Unparked { thread, processor } => (5, *processor, id(thread), 0, 0),
            Event::Preempted { thread, processor, ran } => {
                (6, Some(*processor), id(thread), ns(ran), 0)
            }
            Event::Throttled { thread, processor, used, resume_in } => {
                (7, Some(*processor), id(thread), ns(used), ns(resume_in))
            }
            Event::Blocked { thread, processor, detection } => {
                (8, Some(*processor), id(thread), how(detection), 0)
            }
            Event::Unblocked { thread, processor, detection } => {
                (9, *processor, id(thread), how(detection), 0)
            }
            Event::ProcessorLost { processor } => (10, Some(*processor), 0, 0, 0),
            Event::ProcessorRemoved { processor } => (11, Some(*processor), 0, 0, 0),
            Event::Exited { thread, processor } => (12, Some(*processor), id(thread), 0, 0),
        };
        let p = p.map_or(0, |p| p as u64 + 1);
        [kind | p << 32, thread, a, b]
    }

    /// The event [`Event::to_words`] wrote, or `None` for words that are not one (an
    /// unknown kind, a thread id of 0 where one is required).
    pub fn from_words(w: [u64; 4]) -> Option<Event> {
        let kind = w[0] & 0xffff_ffff;
        let p = (w[0] >> 32).checked_sub(1).map(|p| p as usize);
        let thread = ThreadId::from_u64(w[1]);
        let how = if w[2] == 1 { Detection::Transparent } else { Detection::Explicit };
        Some(match kind {
            1 => Event::NewProcessor { processor: p? },
            2 => Event::Spawned { thread: thread?, processor: p },
            3 => Event::Switched { from: thread, to: ThreadId::from_u64(w[2]), processor: p? },
            4 => Event::Parked { thread: thread?, processor: p? },
            5 => Event::Unparked { thread: thread?, processor: p },
            6 => {
                Event::Preempted { thread: thread?, processor: p?, ran: Duration::from_nanos(w[2]) }
            }
            7 => Event::Throttled {
                thread: thread?,
                processor: p?,
                used: Duration::from_nanos(w[2]),
                resume_in: Duration::from_nanos(w[3]),
            },
            8 => Event::Blocked { thread: thread?, processor: p?, detection: how },
            9 => Event::Unblocked { thread: thread?, processor: p, detection: how },
            10 => Event::ProcessorLost { processor: p? },
            11 => Event::ProcessorRemoved { processor: p? },
            12 => Event::Exited { thread: thread?, processor: p? },
            _ => return None,
        })
    }
}

/// The hook a runtime calls for every [`Event`].
pub(crate) type Hook = Arc<dyn Fn(&Event) + Send + Sync + 'static>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_survives_its_words() {
        let t = |n| ThreadId::from_u64(n).unwrap();
        let ms = Duration::from_millis;
        let all = [
            Event::NewProcessor { processor: 0 },
            Event::Spawned { thread: t(3), processor: None },
            Event::Spawned { thread: t(3), processor: Some(1) },
            Event::Switched { from: None, to: Some(t(4)), processor: 1 },
            Event::Switched { from: Some(t(4)), to: None, processor: 0 },
            Event::Parked { thread: t(5), processor: 2 },
            Event::Unparked { thread: t(5), processor: None },
            Event::Preempted { thread: t(6), processor: 0, ran: ms(11) },
            Event::Throttled { thread: t(7), processor: 0, used: ms(2), resume_in: ms(8) },
            Event::Blocked { thread: t(8), processor: 1, detection: Detection::Transparent },
            Event::Unblocked { thread: t(8), processor: None, detection: Detection::Explicit },
            Event::ProcessorLost { processor: 3 },
            Event::ProcessorRemoved { processor: 3 },
            Event::Exited { thread: t(9), processor: 0 },
        ];
        for e in all {
            assert_eq!(Event::from_words(e.to_words()), Some(e.clone()), "{e:?}");
        }
        assert_eq!(Event::from_words([99, 0, 0, 0]), None);
        assert_eq!(Event::from_words([8, 0, 0, 0]), None, "Blocked needs a thread and processor");
    }
}
