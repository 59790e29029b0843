//! Transitive priority inheritance: the walk along a chain of [`Mutex`](super::Mutex)
//! holders that are themselves blocked on another `Mutex` (`priority.rs`, "Inheritance",
//! step 4). A `High` thread waits on lock A held by a `Normal` thread, which waits on
//! lock B held by a `Low` one: the `Low` one runs at `High` until it releases B.
//!
//! # The links
//!
//! A user thread in a mutex's slow path, once the process has levels, records the mutex's
//! lock core (the spin lock over its waiters and holder) in `Task::blocked_on`, under that
//! word's own spin lock, *before* it takes the queue lock, and clears it before it returns
//! holding the mutex. So while a walker holds a thread's `blocked_on` lock and finds a core
//! there, the thread is still inside `lock`, which borrows the mutex: the core is alive.
//! (Linux's `task->pi_blocked_on` under `task->pi_lock`.)
//!
//! # The walk
//!
//! Linux's `rt_mutex_adjust_prio_chain` (kernel/locking/rtmutex.c), cut down to what a
//! three-level runtime needs. From a thread `T` that lends `level`:
//!
//! 1. Lock `T.blocked_on`; nothing there: stop (`T` runs or is runnable).
//! 2. Lock that mutex's queue; raise `T`'s entry among its waiters to `level` (so the
//!    holder the lock goes to next inherits it: "Inheritance", step 2).
//! 3. The holder `H`: none (or an OS thread), or already at `level` or higher: stop.
//!    Levels only rise while a chain stands (a waiter leaves a queue only when an unlock
//!    wakes it), so whoever raised `H` walks on from it, or walked before.
//! 4. Count the level as lent to `H` by the mutex (its unlock gives it back; counted
//!    before step 3's test too, so a holder raised through another of its mutexes keeps
//!    the level when it releases that one), raise `H`; drop both locks; `T = H`; again
//!    from 1, at most [`MAX_CHAIN`] links (Linux's `max_lock_depth`).
//!
//! A thread holds at most one `blocked_on` lock and one queue lock, in that order. The
//! only other nesting is the slow path's (`mutex.rs`): under a queue lock it *tries* the
//! holder's `blocked_on` lock ([`lend_here`]) and, if that is busy or names a mutex,
//! drops the queue lock and walks from itself instead. So no two threads wait for each
//! other's spin locks, even when the holders form a cycle.
//!
//! # Cycles
//!
//! Holders each blocked on the next one's mutex, round to the first, are a deadlock. The
//! walk raises each once and stops at the first it finds already raised (step 3, the
//! second time round), so it ends; [`MAX_CHAIN`] bounds it anyway. The threads then park
//! for good and the runtime's deadlock check reports them (`runtime.rs`). Linux's
//! walk can also return `EDEADLK` to the locker; `Mutex::lock` has no error path.

use super::mutex::Queue;
use crate::priority::{inherit, Priority};
use crate::spin::SpinLock;
use crate::task::{Task, TaskRef};

/// How many links one walk follows at most: Linux's `max_lock_depth`. A chain that long
/// is a bug in the program (or a cycle); the walk stops rather than hold the thread.
pub(super) const MAX_CHAIN: usize = 1024;

/// [`inherit`] in a runtime section. Its callers are user code (a mutex's lock path),
/// which a preemption signal may interrupt: interrupted inside the injection queue's push
/// (a `Low` holder raised to `Normal` is moved there), its yield's own decision drained
/// that queue and waited, for good, for the slot it was itself writing (seen twice in
/// ~1,400 runs of `tests/inheritance.rs`'s `contend` on two and four processors, under
/// load; none in 1,200 since).
pub(super) fn raise(holder: &Task, level: Priority) -> bool {
    let _section = crate::processor::here();
    inherit(holder, level)
}

/// Records that `me` is in the slow path of the mutex whose core is `core` (step 0).
pub(super) fn mark(me: &Task, core: &SpinLock<Queue>) {
    *me.blocked_on.lock() = core as *const SpinLock<Queue> as usize;
}

/// Clears what [`mark`] recorded; before `me` returns from the mutex's `lock`.
pub(super) fn unmark(me: &Task) {
    *me.blocked_on.lock() = 0;
}

/// Under the queue lock of a mutex `holder` holds: raises `holder` to `level` if it is
/// not itself blocked on a mutex, under its link's lock, so that a link it records after
/// this finds the raised level (`mutex.rs` reads the level it queues with after [`mark`]).
/// `Some(whether it was raised)`, or `None` if the holder may be blocked (or its link is
/// busy): the caller then drops the queue lock and [`walk`]s from itself.
pub(super) fn lend_here(holder: &Task, level: Priority) -> Option<bool> {
    let link = holder.blocked_on.try_lock()?;
    if *link != 0 {
        return None;
    }
    let raised = raise(holder, level);
    drop(link);
    Some(raised)
}

/// Lends `level` along the chain that starts at `from`, a thread that has [`mark`]ed
/// itself (module docs, "The walk"). Holds no lock when called.
pub(super) fn walk(from: TaskRef, level: Priority) {
    let mut t = from;
    for _ in 0..MAX_CHAIN {
        let link = t.blocked_on.lock();
        if *link == 0 {
            return;
        }
        // SAFETY: `t` set its link to this core before taking the mutex's queue lock and
        // clears it, under the link's lock we hold, before it returns from `lock`, which
        // borrows the mutex: the mutex is alive until we drop the link's lock.
        let core = unsafe { &*(*link as *const SpinLock<Queue>) };
        let mut q = core.lock();
        let me = &*t as *const Task as usize;
        for w in q.waiters.iter_mut().filter(|w| w.task == me) {
            w.level = w.level.min(level.as_u8());
        }
        let Some(holder) = q.owner.clone() else { return };
        q.record(level);
        if !raise(&holder, level) {
            return;
        }
        drop(q);
        drop(link);
        t = holder;
    }
}
