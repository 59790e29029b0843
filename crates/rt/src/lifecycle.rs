//! A task's state word: its join state and its reference count in one
//! atomic word, so that a thread's exit completes the join *and* drops the
//! exiting thread's own reference with one atomic instruction.
//!
//! Before, the exit swapped a join word and then, after its last switch,
//! decremented a reference count: two locked instructions (~5 ns each on the
//! lab machine) on every spawn+join, the only two left once the run queue,
//! the allocator and the registry stopped needing any.
//!
//! # The word
//!
//! | bits  | name       | set by                               | cleared by |
//! |-------|------------|--------------------------------------|------------|
//! | 0     | `WAITING`  | the joiner, registering (`joiner`)   | never      |
//! | 1     | `COMPLETE` | the task, at its exit (result written)| never     |
//! | 2..   | references | `acquire_ref` / the spawn (two)      | `release_ref`, `complete` |
//!
//! A task starts with two references: the one its processors run it through
//! (the run queue, `current`, a park word...) and its `JoinHandle`'s.
//!
//! # Protocol
//!
//! Joining (the holder of the `JoinHandle`, the only joiner):
//! 1. If `COMPLETE` is set (acquire), take the result.
//! 2. Otherwise write the `joiner` slot of the task, then set `WAITING`
//!    ([`TaskState::register_joiner`], acq-rel). If `COMPLETE` was already
//!    set, the task finished meanwhile and never looks at `joiner`: take the
//!    result. Otherwise wait to be woken.
//!
//! Exiting (the task, after writing its result, and after taking its stack
//! out of the task: from here on it never touches the task again except as
//! below): [`TaskState::complete`] sets `COMPLETE` and drops the running
//! reference in one `fetch_sub` (acq-rel; the two fields never carry into
//! each other: `COMPLETE` is clear before, and a reference is held). From
//! the old value:
//! - `WAITING` set: a joiner registered (its `joiner` write is visible, by
//!   the acquire) and holds the handle's reference, so the task is alive
//!   while it is woken;
//! - one reference left before (ours): the handle is gone; the exit frees
//!   the task.
//!
//! Why it is correct: `register_joiner` and `complete` are read-modify-writes
//! of one word, so they are ordered. If `register_joiner` comes first,
//! `complete` sees `WAITING` and wakes the joiner; if `complete` comes first,
//! `register_joiner` sees `COMPLETE` and the joiner does not wait. Exactly
//! one side wakes or skips, and the result written before `complete`
//! (release) is read after an acquire of `COMPLETE`. The references follow
//! `Arc`'s argument; a drop that finds the count at one owns the only
//! reference, so nobody can make another, and frees without a locked
//! instruction (the usual case for the last of the handle and the exit).
//! `loom` checks the join race and the last-reference race below.

use crate::loom::{AtomicUsize, Ordering};

const WAITING: usize = 1;
const COMPLETE: usize = 2;
const REF: usize = 4;

/// What [`TaskState::complete`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Completed {
    /// A joiner registered and waits: wake it.
    pub(crate) joiner_waits: bool,
    /// The exit held the last reference: free the task.
    pub(crate) last: bool,
}

/// The state word of one task. See the module docs.
#[derive(Debug)]
pub(crate) struct TaskState {
    word: AtomicUsize,
}

impl TaskState {
    /// Not complete, nobody waiting, two references.
    pub(crate) fn new() -> TaskState {
        TaskState { word: AtomicUsize::new(2 * REF) }
    }

    /// Adds a reference (made from an existing one, so relaxed, as `Arc`).
    #[cfg_attr(loom, allow(dead_code))] // the models make no extra references
    #[inline]
    pub(crate) fn acquire_ref(&self) {
        if self.word.fetch_add(REF, Ordering::Relaxed) > isize::MAX as usize {
            std::process::abort();
        }
    }

    /// Drops a reference. Returns `true` if it was the last: the caller must
    /// free the task (everything other owners wrote is visible to it).
    #[inline]
    pub(crate) fn release_ref(&self) -> bool {
        // Alone? Then nobody else can touch the count: no locked instruction.
        if self.word.load(Ordering::Acquire) < 2 * REF {
            return true;
        }
        if self.word.fetch_sub(REF, Ordering::Release) < 2 * REF {
            crate::loom::fence(Ordering::Acquire);
            return true;
        }
        false
    }

    /// Whether the task completed (its result is then visible).
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.word.load(Ordering::Acquire) & COMPLETE != 0
    }

    /// Joining step 2: registers the joiner (whose `joiner` slot write this
    /// publishes). Returns `false` if the task completed meanwhile (then the
    /// joiner must not wait).
    #[inline]
    pub(crate) fn register_joiner(&self) -> bool {
        // Sets `WAITING`, which only the one joiner sets, once: an add is
        // the same as an or here, and one `lock xadd` where a `fetch_or`
        // whose result is used is a compare-and-swap loop.
        self.word.fetch_add(WAITING, Ordering::AcqRel) & COMPLETE == 0
    }

    /// The exit: sets `COMPLETE` and drops the running reference.
    #[inline]
    pub(crate) fn complete(&self) -> Completed {
        // `COMPLETE` is clear and the count is at least one: adding COMPLETE
        // and subtracting REF is one subtraction with no borrow across fields.
        let old = self.word.fetch_sub(REF - COMPLETE, Ordering::AcqRel);
        debug_assert_eq!(old & COMPLETE, 0, "a task completes once");
        Completed { joiner_waits: old & WAITING != 0, last: old < 2 * REF }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_joiner_that_registers_first_is_woken() {
        let s = TaskState::new();
        assert!(!s.is_complete());
        assert!(s.register_joiner());
        assert_eq!(s.complete(), Completed { joiner_waits: true, last: false });
        assert!(s.is_complete());
        assert!(s.release_ref(), "the handle's reference is the last");
    }

    #[test]
    fn a_joiner_that_comes_late_does_not_wait() {
        let s = TaskState::new();
        assert_eq!(s.complete(), Completed { joiner_waits: false, last: false });
        assert!(!s.register_joiner());
        assert!(s.release_ref());
    }

    #[test]
    fn a_detached_task_is_freed_by_its_exit() {
        let s = TaskState::new();
        s.acquire_ref(); // a `Thread` clone
        assert!(!s.release_ref());
        assert!(!s.release_ref()); // the handle
        assert_eq!(s.complete(), Completed { joiner_waits: false, last: true });
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Models: the joiner registering against the exit, and the handle's drop
    //! against the exit; in each, the task is freed exactly once, and a
    //! waiting joiner is woken exactly when it registered before the exit.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    struct Task {
        state: TaskState,
        result: UnsafeCell<u32>,
        joiner: UnsafeCell<bool>,
    }

    #[test]
    fn loom_join_races_exit() {
        loom::model(|| {
            let t = Arc::new(Task {
                state: TaskState::new(),
                result: UnsafeCell::new(0),
                joiner: UnsafeCell::new(false),
            });
            let exiting = {
                let t = t.clone();
                loom::thread::spawn(move || {
                    // SAFETY: loom checks the accesses against the joiner's.
                    t.result.with_mut(|r| unsafe { *r = 42 });
                    let c = t.state.complete();
                    if c.joiner_waits {
                        // SAFETY: as above; published by `register_joiner`.
                        t.joiner.with(|j| assert!(unsafe { *j }));
                    }
                    c
                })
            };
            // The joiner.
            let waits = if t.state.is_complete() {
                false
            } else {
                // SAFETY: loom checks this write against the exit's read.
                t.joiner.with_mut(|j| unsafe { *j = true });
                t.state.register_joiner()
            };
            let c = exiting.join().unwrap();
            assert_eq!(waits, c.joiner_waits, "woken exactly when it waits");
            assert!(!c.last, "the handle still holds a reference");
            // Woken (or not waiting): the result is visible.
            // SAFETY: as above.
            t.result.with(|r| assert_eq!(unsafe { *r }, 42));
            assert!(t.state.release_ref(), "the handle's drop frees");
        });
    }

    #[test]
    fn loom_handle_drop_races_exit() {
        loom::model(|| {
            let t = Arc::new(Task {
                state: TaskState::new(),
                result: UnsafeCell::new(0),
                joiner: UnsafeCell::new(false),
            });
            let exiting = {
                let t = t.clone();
                loom::thread::spawn(move || {
                    // SAFETY: loom checks this write against the freeing side's read.
                    t.result.with_mut(|r| unsafe { *r = 42 });
                    t.state.complete().last
                })
            };
            let handle_last = t.state.release_ref();
            let exit_last = exiting.join().unwrap();
            assert!(handle_last ^ exit_last, "freed exactly once");
            // Whoever frees sees everything: here, the result.
            // SAFETY: as above.
            t.result.with(|r| assert_eq!(unsafe { *r }, 42));
        });
    }
}
