//! A processor's run queue: a *private* part only its owner touches, and a
//! *shared* part (a `crossbeam_deque::Worker`) that other processors steal
//! from.
//!
//! Why two parts: popping from a queue that thieves can also take from needs
//! a locked instruction (crossbeam's FIFO `pop` is a `lock xadd`, ~5.3 ns on
//! the lab machine, a fifth of a yield before this split), because the owner
//! and a thief race for the same element. A queue nobody else can see needs
//! no atomic at all. So the owner keeps the *newest* runnable threads to
//! itself and the older ones where thieves can reach them:
//!
//! ```text
//!   pop here                                          push here
//!   oldest  [ shared: a b c ... ] [ private: ... x y ]  newest
//! ```
//!
//! The queue as a whole stays FIFO: `pop` takes from the shared part while
//! it has anything, then from the private part; a push into a full private
//! part first moves the private part's oldest thread to the shared part.
//!
//! How big the private part is, is the processor's choice (`private_cap`):
//! - With one processor nobody can steal, so everything is private
//!   (unbounded) and no run-queue operation is atomic.
//! - With several, nothing is private (`private_cap` 0). A private thread
//!   cannot be stolen, and scheduling is cooperative: it would wait for its
//!   owner's next switch point however long the running thread computes,
//!   beside an idle processor (the problem of tokio's unstealable "LIFO
//!   slot"; `tests/progress.rs` checks that a spawned thread is taken up by
//!   an idle processor while its spawner spins). Go's `runnext` slot is
//!   stealable, which needs the locked instruction this split avoids.
//!
//! Every thread in either part is run by the owner eventually, and an owner
//! never goes to sleep with a non-empty queue (it pops before it searches).

use crate::task::TaskRef;
use crossbeam_deque::{Stealer, Worker};
use std::cell::{Cell, UnsafeCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One processor's run queue. See the module docs.
///
/// Not `Sync` (the private part is unsynchronized): only the owning
/// processor's kernel thread may call its methods. Thieves use the
/// [`Stealer`] from [`RunQueue::stealer`].
pub(crate) struct RunQueue {
    shared: Worker<TaskRef>,
    /// `false` only if the shared part is empty. Only the owner pushes to the
    /// shared part (thieves only take), so the owner keeps this exact enough
    /// without atomics, and a pop skips the shared part (a pointer chase and
    /// two loads of a line thieves write) while it is known empty.
    shared_used: Cell<bool>,
    private: UnsafeCell<VecDeque<TaskRef>>,
    private_cap: usize,
    /// Length of the private part, for other threads (the monitor): one
    /// plain store per push and pop, read as a hint.
    private_len: AtomicUsize,
}

impl RunQueue {
    /// A queue over `shared` whose private part keeps at most `private_cap`
    /// threads (0: none, every push goes to the shared part).
    pub(crate) fn new(shared: Worker<TaskRef>, private_cap: usize) -> RunQueue {
        RunQueue {
            shared_used: Cell::new(!shared.is_empty()),
            shared,
            private: UnsafeCell::new(VecDeque::with_capacity(private_cap.min(256))),
            private_cap,
            private_len: AtomicUsize::new(0),
        }
    }

    /// A handle for other processors to steal from the shared part.
    pub(crate) fn stealer(&self) -> Stealer<TaskRef> {
        self.shared.stealer()
    }

    /// The shared part, as a destination for batch steals.
    #[inline]
    pub(crate) fn shared(&self) -> &Worker<TaskRef> {
        self.shared_used.set(true);
        &self.shared
    }

    #[allow(clippy::mut_from_ref)] // owner-only access, see the type docs
    #[inline]
    fn private(&self) -> &mut VecDeque<TaskRef> {
        // SAFETY: only the owner's kernel thread calls methods of the queue
        // (type docs), and no method calls out while holding this borrow.
        unsafe { &mut *self.private.get() }
    }

    /// The oldest runnable thread.
    #[inline]
    pub(crate) fn pop(&self) -> Option<TaskRef> {
        if self.shared_used.get() {
            if let Some(t) = self.shared.pop() {
                return Some(t);
            }
            self.shared_used.set(false);
        }
        let private = self.private();
        let t = private.pop_front();
        self.private_len.store(private.len(), Ordering::Relaxed);
        t
    }

    /// Threads waiting in the private part (a hint, for another thread; the
    /// shared part is seen through its `Stealer`).
    pub(crate) fn len_hint(&self) -> usize {
        self.private_len.load(Ordering::Relaxed)
    }

    /// Appends `t`, keeping it private if the private part has room (else
    /// it goes where thieves can take it, after the private threads).
    /// Returns `true` if that made a thread stealable.
    #[inline]
    pub(crate) fn push_private(&self, t: TaskRef) -> bool {
        let private = self.private();
        if private.len() < self.private_cap {
            private.push_back(t);
            self.private_len.store(private.len(), Ordering::Relaxed);
            return false;
        }
        if let Some(oldest) = private.pop_front() {
            self.shared.push(oldest);
            private.push_back(t);
        } else {
            self.shared.push(t);
        }
        self.shared_used.set(true);
        true
    }

    /// Appends `t` where thieves can take it (after the private threads, so
    /// the order stays FIFO). Out of line: it keeps the private paths of a
    /// one-processor runtime short.
    #[inline(never)]
    pub(crate) fn push_shared(&self, t: TaskRef) {
        let private = self.private();
        while let Some(p) = private.pop_front() {
            self.shared.push(p);
        }
        self.private_len.store(0, Ordering::Relaxed);
        self.shared.push(t);
        self.shared_used.set(true);
    }

    /// Takes every queued thread, oldest first (shutdown).
    pub(crate) fn drain(&self) -> impl Iterator<Item = TaskRef> + '_ {
        std::iter::from_fn(move || self.pop())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::Stack;
    use crate::task::{Task, ThreadId};

    fn task(id: u64) -> TaskRef {
        let shared = crate::runtime::Shared::for_tests();
        shared.acquire_refs(1);
        // SAFETY: just counted.
        let shared = unsafe { crate::runtime::SharedRef::counted(&shared) };
        let stack = Stack::new(crate::stack::MIN_STACK_SIZE).unwrap();
        Task::allocate(ThreadId::from_u64(id).unwrap(), None, shared, stack, || (), None).0
    }

    fn ids(q: &RunQueue) -> Vec<u64> {
        q.drain().map(|t| t.id.as_u64()).collect()
    }

    #[test]
    fn queue_is_fifo_across_its_two_parts() {
        let q = RunQueue::new(Worker::new_fifo(), 2);
        assert!(!q.push_private(task(1)));
        assert!(!q.push_private(task(2)));
        assert!(q.push_private(task(3)), "a full private part spills its oldest");
        q.push_shared(task(4));
        assert!(!q.push_private(task(5)));
        assert_eq!(ids(&q), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn without_a_private_part_every_push_is_stealable() {
        let q = RunQueue::new(Worker::new_fifo(), 0);
        let s = q.stealer();
        assert!(q.push_private(task(1)));
        assert_eq!(s.steal().success().map(|t| t.id.as_u64()), Some(1));
        assert!(q.pop().is_none());
    }

    #[test]
    fn thieves_see_only_the_shared_part() {
        let q = RunQueue::new(Worker::new_fifo(), 1);
        let s = q.stealer();
        q.push_private(task(1));
        assert!(s.steal().is_empty(), "a private thread cannot be stolen");
        q.push_private(task(2));
        assert_eq!(s.steal().success().map(|t| t.id.as_u64()), Some(1));
        assert_eq!(ids(&q), [2]);
    }
}
