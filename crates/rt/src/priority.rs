//! Priorities: three levels of user threads ([`Priority`], `Builder::priority`), strict
//! between levels, with aging so that no level starves forever.
//!
//! # The rule
//!
//! - A processor choosing what to run takes a waiting `High` thread first, then its
//!   `Normal` work (next slot, run queue, injection queue, other processors' queues), and
//!   a `Low` thread only when it has nothing else.
//! - A thread becoming runnable while a lower level runs is not left waiting for the
//!   quantum: woken on a processor that runs a lower-priority thread, it takes that
//!   processor as soon as the waker leaves the runtime's code (the waker is preempted at
//!   the end of its runtime section); woken elsewhere (a timer the monitor fired, an OS
//!   thread), the monitor preempts a processor running a lower level at once: seed 003's
//!   `sa_preempt` of a lower-priority activation for a higher-priority one, with the
//!   `Preempted` event on its timeline.
//! - **Aging.** A level under a saturating one gets *turns*. A turn is one stint that no
//!   level takes away: it ends when the thread blocks, yields or exits, or at its quantum
//!   if anything waits (a `High` thread included, which so waits at most one quantum for
//!   it). Two kinds:
//!   - A `Low` thread that has waited [`AGING`] at its level is moved by the monitor to
//!     the *aged* queue, which every decision takes from after `High` threads and before
//!     its `Normal` work, unless the last turn on that processor went to an aged thread
//!     and no `Normal` thread has run there since (so `Normal` work keeps at least every
//!     other stint). After its turn the thread goes back to its level and waits `AGING`
//!     again.
//!   - A processor that has run `High` threads for [`AGING`] while `Normal` work (or an
//!     aged thread) waited on it gives that work one turn: an aged thread on the same
//!     condition, else its next `Normal` thread.
//!
//! # What aging guarantees
//!
//! With quantum `q` (`Preemption::Quantum`), on a processor saturated by `Normal`
//! threads (no `High` ones), a `Low` thread that stays runnable **starts within
//! `AGING + q`** of reaching its level's queue, **runs a full quantum**, and does so
//! again every `AGING + 2q` at most: at least `q / (AGING + 2q)` of the processor (8.3%
//! with the default 10 ms quantum), however many `Normal` threads there are, and no more
//! than one quantum per `AGING` while `Normal` work waits. Likewise `Normal` work under a
//! saturating `High` thread gets a quantum every `AGING + q`, `q / (AGING + q)` (9.1%).
//! Under both a saturating `High` level and `Normal` threads, aged `Low` threads and
//! `Normal` work share those turns, alternating. Each bound is plus the monitor's and
//! the signal's delays (µs, unless the kernel deschedules the runtime's threads).
//! `tests/priority.rs` checks these in the runtime's own counts (`Preempted` events).
//! With `Preemption::Cooperative` nothing is preempted, for a level or a turn: aging
//! takes effect at the next scheduling decision, and a turn lasts until the thread
//! yields.
//!
//! A decision made for a thread that yields (or is preempted) is taken before that
//! thread is queued again, so it must not hand the processor to a lower level: a `Low`
//! thread that is not aged is taken only by the scheduler context or by a `Low`
//! thread's own decision, and a `High` thread's quantum ends only for another `High`
//! thread (the monitor's turn aside); a request nobody made for a `High` thread (a late
//! signal meant for the thread before it) is dropped (`preempt.rs`, `stale_for_high`). Before, one `Normal` spinner's preemption handed
//! the processor to a waiting `Low` thread, which then kept it until the monitor next
//! looked (up to `AGING`), while with two spinners an aged thread put among the `Normal`
//! work was sent back to its level at the next decision and never ran.

//! # Inheritance
//!
//! A thread waiting on a [`Mutex`](crate::sync::Mutex) lends its level to the holder
//! (seed 001's closing warning: the loader "captures objects required by the first
//! thread"; the Mars Pathfinder's inversion). Without it a `Low` holder under saturating
//! `Normal` threads keeps a `High` waiter waiting until aging gives it a turn ([`AGING`]
//! plus a quantum), and a `Normal` one until the `Normal` threads before it have had their
//! quanta. With it:
//!
//! 1. A parking waiter whose level is higher than the holder's raises the holder's
//!    effective level to its own (`Task::inherit`; the holder's own level is kept beside
//!    it), under the mutex's queue lock. If the holder waits in the `Low` or aged queue it
//!    is moved to its new level's queue at once ([`inherit`]); a holder that is running
//!    keeps running, and one queued on a processor (a `Normal` holder) runs at the new
//!    level from its next switch. A level the holder inherits while it is being queued is
//!    seen under the `Low` queue's lock ([`PrioQueues::push`]), so it is never left there.
//! 2. A thread that takes a mutex with higher-level waiters still queued inherits at once
//!    (the next holder of a contended lock), so the lock's waiters are never behind it.
//! 3. The unlock gives the level back ([`give_back`]) *before* it wakes the first
//!    waiter, so the waker, now at its own level again, is preempted at the end of its
//!    runtime section by the higher-level thread it woke (the rule above). A holder of
//!    several contended locks keeps the highest level the others still lend: each mutex
//!    records the level it lends its holder and counts it in the holder's [`Lent`], and
//!    the holder runs at the highest level counted, or its own (Linux's PI futexes keep
//!    the top of a tree of the task's waiters over all its locks; with three levels two
//!    counts do).
//! 4. Transitively: a holder that is itself blocked on another mutex passes the level on
//!    to that one's holder, and so on down the chain (`sync/chain.rs`: each thread in a
//!    mutex's slow path records the mutex, and a bounded walk — Linux's
//!    `rt_mutex_adjust_prio_chain` — raises each holder and its entry in the next queue;
//!    a cycle of holders is walked once and left to the deadlock check). Each holder
//!    gives the level back at its own unlock (step 3), so a chain comes apart link by
//!    link: the thread that released runs at its own level again, the next holder takes
//!    the lock at the level it was lent.
//!
//! The mutex must know its holder, and its uncontended path must not pay for that: the
//! holder is recorded (a counted reference, under the queue lock) only once a runtime of
//! the process has levels ([`LEVELS`], one load of a flag that is never cleared on the
//! lock's fast path; without levels the lock is otherwise unchanged: 15 instructions per
//! uncontended lock and unlock against 11 before). With levels that record costs ~95
//! instructions more per pair (docs/PERFORMANCE.md, "Locks and loaders"). A lock taken before the first
//! thread with a level was spawned has no recorded holder, and lends nothing until it is
//! taken again.

//! # Real-time order
//!
//! POSIX's `SCHED_FIFO` and `SCHED_RR` have 99 priorities with no aging, strictly
//! ordered; `libschedlab_pthread` runs such threads as `High` threads with a real-time
//! priority ([`crate::Builder::realtime`], `Task::rt_priority`; 0, a plain `High`
//! thread, is below every real-time one). Among `High` threads:
//!
//! - The `High` queue is ordered by real-time priority, first come, first served among
//!   equals ([`PrioQueues::push`]).
//! - A thread made runnable (spawned, woken) on a processor whose running `High` thread
//!   has a lower real-time priority takes the processor when the waker's runtime section
//!   ends, as between levels (`Processor::divert`).
//! - A decision made while a real-time thread is current (its yield, its quantum, or the
//!   first decision of its park) takes only a `High` thread of the same or a higher
//!   real-time priority, else nothing: a yield or a quantum goes on with the thread, and
//!   a park passes to the scheduler context, whose decision takes the best waiting
//!   (`Processor::prio_first`). So a real-time thread that yields in a loop keeps its
//!   processor against lower ones, as under the kernel's `SCHED_FIFO`.
//! - `realtime.rs` adds POSIX's two policies on top: under `SCHED_FIFO`
//!   ([`crate::Builder::fifo`]) a preemption never passes the processor to an equal; a
//!   thread preempted by a higher one goes back to the head of its priority's list; the
//!   monitor preempts the processor running the lowest real-time priority for a higher
//!   waiting one; and a running or waiting thread's priority can be changed
//!   ([`crate::Thread::set_realtime`]).
//!
//! Left as they are: aging (work under a saturating `High` level still gets its turn
//! every [`AGING`]) and inheritance (of levels, not of real-time priorities). Plain `High`
//! threads (the Rust API's) are unchanged: every test above is of a real-time priority of
//! 0 on their paths, and no path without levels reads it.

//! # Where the levels live
//!
//! `Normal` threads live where every thread lived before priorities: the per-processor
//! queues and next slots, stolen between processors. `High` and `Low` threads wait in
//! runtime-wide FIFO queues ([`PrioQueues`]: `High`, `Low`, and the aged `Low` threads),
//! under one lock each: they are expected to be few (a main loop, a loader), and one
//! queue per level makes the levels strict across processors without a steal protocol.
//! Every path that makes a thread runnable diverts a non-`Normal` thread there once the
//! runtime has spawned one (a processor flag, tested only on those paths), so a runtime
//! without priorities pays nothing else. A thread taken for a turn carries a mark
//! (`task::TURN`) from the decision to its first switch, where its processor publishes
//! the stint as a turn for the monitor (`Processor::cur_prio`).

use crate::task::{Task, TaskRef};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long a thread of a level under a busy higher one waits before it gets a turn (a
/// stint of up to a quantum that no level preempts). So a `Low` thread under saturating
/// `Normal` ones starts within `AGING` plus a quantum and gets at least a quantum per
/// `AGING` plus two quanta; see `priority.rs`, "What aging guarantees".
pub const AGING: Duration = Duration::from_millis(100);

/// Set (for good) once any runtime of the process has spawned a thread with a level other
/// than `Normal`: from then on a `Mutex` records its holder, for inheritance ("Inheritance").
pub(crate) static LEVELS: AtomicBool = AtomicBool::new(false);

/// Whether mutexes record their holders now ([`LEVELS`]).
#[inline(always)]
pub(crate) fn levels_in_use() -> bool {
    LEVELS.load(Ordering::Relaxed)
}

/// Step 1 of "Inheritance": raises `holder`'s effective level to `to` and, if it waits in
/// the `Low` or aged queue, moves it to the queue of that level (or to its runtime's
/// injection queue, for `Normal`). Whether its level changed. The caller holds a runtime
/// section (`sync/chain.rs`, `raise`): the move must not be preempted.
pub(crate) fn inherit(holder: &Task, to: Priority) -> bool {
    if !holder.inherit(to) {
        return false;
    }
    let shared = &**holder.shared;
    if let Some(t) = shared.prio.take_low(holder) {
        // Routed by its level, which is now `to`.
        shared.inject(t);
    }
    true
}

/// How many of the mutexes a thread holds lend it each level above `Low` (step 3 of
/// "Inheritance"): its inherited level is the highest with a count, as a PI futex's
/// holder runs at the top of its waiters over every lock it holds (Linux's
/// `pi_waiters`; counts suffice with three levels). Changed under the queue lock of the
/// mutex whose lend it counts.
#[derive(Default)]
pub(crate) struct Lent {
    high: AtomicUsize,
    normal: AtomicUsize,
}

impl Lent {
    fn count(&self, level: Priority) -> Option<&AtomicUsize> {
        match level {
            Priority::High => Some(&self.high),
            Priority::Normal => Some(&self.normal),
            Priority::Low => None,
        }
    }

    /// A mutex the thread holds now lends it `to`, and no longer `from` (`None`: it
    /// lent nothing before). Followed by a `SeqCst` fence, so that a holder giving a
    /// level back ([`give_back`]) either sees this count or its lowering comes before
    /// the caller's raise (the store-buffering pattern, fenced on both sides).
    pub(crate) fn moved(&self, from: Option<Priority>, to: Priority) {
        if let Some(c) = from.and_then(|f| self.count(f)) {
            c.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some(c) = self.count(to) {
            c.fetch_add(1, Ordering::SeqCst);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// The highest level lent, if any.
    fn top(&self) -> Option<Priority> {
        if self.high.load(Ordering::SeqCst) != 0 {
            Some(Priority::High)
        } else if self.normal.load(Ordering::SeqCst) != 0 {
            Some(Priority::Normal)
        } else {
            None
        }
    }
}

/// Step 3 of "Inheritance": `holder`, which is releasing a mutex that lent it `level`,
/// goes to the highest level the mutexes it still holds lend, or its own. Called by the
/// holder itself, running (so it waits in no queue), after the mutex's queue lock is
/// dropped. A waiter of another of its mutexes may lend meanwhile: it counts its lend
/// ([`Lent::moved`], fenced) before it raises the holder, so either the look after this
/// lowering sees the count and the holder goes up again, or the raise comes after the
/// lowering.
pub(crate) fn give_back(holder: &Task, level: Priority) {
    if let Some(c) = holder.lent.count(level) {
        c.fetch_sub(1, Ordering::SeqCst);
    }
    let mut top = holder.lent.top();
    loop {
        holder.set_inherited(top);
        std::sync::atomic::fence(Ordering::SeqCst);
        let now = holder.lent.top();
        if now == top {
            return;
        }
        top = now;
    }
}

/// The scheduling level of a user thread ([`crate::Builder::priority`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Runs before everything else; for threads that block most of the time and must
    /// run as soon as they are woken (a frame loop, an event handler).
    High,
    /// The default.
    #[default]
    Normal,
    /// Runs when nothing else would (background work); gets a turn after waiting
    /// [`AGING`].
    Low,
}

impl Priority {
    pub(crate) fn as_u8(self) -> u8 {
        self as u8
    }

    pub(crate) fn from_u8(v: u8) -> Priority {
        match v {
            0 => Priority::High,
            2 => Priority::Low,
            _ => Priority::Normal,
        }
    }
}

/// The runtime-wide queues of the `High` and `Low` levels, and of the `Low` threads
/// aged for a turn.
#[derive(Default)]
pub(crate) struct PrioQueues {
    high: Mutex<VecDeque<TaskRef>>,
    /// With the timer-clock time each thread was queued, for aging.
    low: Mutex<VecDeque<(TaskRef, u64)>>,
    /// `Low` threads that waited [`AGING`], each for one turn (module docs).
    aged: Mutex<VecDeque<TaskRef>>,
    high_len: AtomicUsize,
    /// The first `High` thread's real-time priority, while `high_len` is not 0.
    high_top: AtomicU8,
    low_len: AtomicUsize,
    aged_len: AtomicUsize,
}

/// Locks one of the queues; a panic cannot leave a `VecDeque` half changed.
fn lock<T>(q: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    q.lock().unwrap_or_else(|e| e.into_inner())
}

impl PrioQueues {
    /// Queues `t` (of level `p`, not `Normal`) at the tail of its level, queued at `now`.
    pub(crate) fn push(&self, t: TaskRef, p: Priority, now: u64) {
        match p {
            Priority::High => {
                let mut q = lock(&self.high);
                // Behind every thread of its real-time priority or a higher one ("Real-time
                // order"): first come, first served among equals. Among plain `High`
                // threads (all 0) the first comparison ends the search: a push at the back.
                let rt = t.rt_priority();
                let at = if t.take_rt_head() {
                    // At the head of its priority's list instead (a preempted real-time
                    // thread, or one whose priority was lowered: `realtime.rs`).
                    q.iter().position(|o| o.rt_priority() <= rt).unwrap_or(q.len())
                } else {
                    q.iter().rposition(|o| o.rt_priority() >= rt).map_or(0, |i| i + 1)
                };
                q.insert(at, t);
                self.high_changed(&q);
            }
            Priority::Low => {
                let mut q = lock(&self.low);
                if t.priority() != Priority::Low {
                    // It inherited a level since its caller looked ("Inheritance", step 1):
                    // `inherit` may have searched this queue before it arrived. (A `Normal`
                    // one runs at `High` for this stint rather than wait here.)
                    drop(q);
                    return self.push(t, Priority::High, now);
                }
                q.push_back((t, now));
                self.low_len.store(q.len(), Ordering::Release);
            }
            Priority::Normal => unreachable!("Normal threads live in the processors' queues"),
        }
    }

    /// Whether a `High` thread waits (a hint).
    #[inline]
    pub(crate) fn high_waiting(&self) -> bool {
        self.high_len.load(Ordering::Acquire) != 0
    }

    /// Whether a `Low` thread waits, aged or not (a hint).
    #[inline]
    pub(crate) fn low_waiting(&self) -> bool {
        self.low_len.load(Ordering::Acquire) != 0 || self.aged_waiting()
    }

    /// Whether an aged `Low` thread waits for its turn (a hint).
    #[inline]
    pub(crate) fn aged_waiting(&self) -> bool {
        self.aged_len.load(Ordering::Acquire) != 0
    }

    /// The first `High` thread if its real-time priority is at least `min` ("Real-time
    /// order": what a real-time thread's yield or quantum may hand its processor to).
    pub(crate) fn pop_high_from(&self, min: u8) -> Option<TaskRef> {
        if !self.high_waiting() {
            return None;
        }
        let mut q = lock(&self.high);
        if min != 0 && q.front().is_some_and(|t| t.rt_priority() < min) {
            return None;
        }
        let t = q.pop_front();
        self.high_changed(&q);
        t
    }

    /// Publishes the `High` queue's length and first real-time priority (the hints
    /// [`PrioQueues::high_waiting`] and [`PrioQueues::top_rt`] read). Under its lock.
    fn high_changed(&self, q: &VecDeque<TaskRef>) {
        self.high_top.store(q.front().map_or(0, |t| t.rt_priority()), Ordering::Relaxed);
        self.high_len.store(q.len(), Ordering::Release);
    }

    /// The real-time priority of the first waiting `High` thread, if one waits (a hint:
    /// what the monitor and a preemption compare the running thread's with, `realtime.rs`).
    #[inline]
    pub(crate) fn top_rt(&self) -> Option<u8> {
        self.high_waiting().then(|| self.high_top.load(Ordering::Relaxed))
    }

    /// Takes `t` out of the `High` queue, if it waits there (`realtime.rs`: a thread
    /// whose real-time priority changed is queued again at its new place).
    pub(crate) fn take_high(&self, t: &Task) -> Option<TaskRef> {
        if !self.high_waiting() {
            return None;
        }
        let mut q = lock(&self.high);
        let i = q.iter().position(|r| std::ptr::eq(&**r, t))?;
        let taken = q.remove(i);
        self.high_changed(&q);
        taken
    }

    pub(crate) fn pop_low(&self) -> Option<TaskRef> {
        if self.low_len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut q = lock(&self.low);
        let t = q.pop_front().map(|(t, _)| t);
        self.low_len.store(q.len(), Ordering::Release);
        t
    }

    /// The oldest aged `Low` thread, for its turn.
    pub(crate) fn pop_aged(&self) -> Option<TaskRef> {
        if !self.aged_waiting() {
            return None;
        }
        let mut q = lock(&self.aged);
        let t = q.pop_front();
        self.aged_len.store(q.len(), Ordering::Release);
        t
    }

    /// Moves the `Low` threads queued at or before `before` to the aged queue, oldest
    /// first. Returns whether any moved, and when the next one was queued, if any waits.
    pub(crate) fn age(&self, before: u64) -> (bool, Option<u64>) {
        if self.low_len.load(Ordering::Acquire) == 0 {
            return (false, None);
        }
        let mut low = lock(&self.low);
        let mut moved = false;
        if low.front().is_some_and(|(_, at)| *at <= before) {
            let mut aged = lock(&self.aged);
            while low.front().is_some_and(|(_, at)| *at <= before) {
                aged.push_back(low.pop_front().expect("peeked").0);
                moved = true;
            }
            self.aged_len.store(aged.len(), Ordering::Release);
        }
        self.low_len.store(low.len(), Ordering::Release);
        (moved, low.front().map(|(_, at)| *at))
    }

    /// Takes `t` out of the `Low` or the aged queue, if it waits in one ("Inheritance").
    pub(crate) fn take_low(&self, t: &Task) -> Option<TaskRef> {
        let is_t = |r: &TaskRef| std::ptr::eq(&**r, t);
        {
            let mut low = lock(&self.low);
            if let Some(i) = low.iter().position(|(r, _)| is_t(r)) {
                let taken = low.remove(i).map(|(r, _)| r);
                self.low_len.store(low.len(), Ordering::Release);
                return taken;
            }
        }
        let mut aged = lock(&self.aged);
        let i = aged.iter().position(is_t)?;
        let taken = aged.remove(i);
        self.aged_len.store(aged.len(), Ordering::Release);
        taken
    }

    /// Every queued thread (at shutdown).
    pub(crate) fn drain(&self) -> Vec<TaskRef> {
        let mut all: Vec<TaskRef> = lock(&self.high).drain(..).collect();
        self.high_top.store(0, Ordering::Relaxed);
        all.extend(lock(&self.aged).drain(..));
        all.extend(lock(&self.low).drain(..).map(|(t, _)| t));
        self.high_len.store(0, Ordering::Release);
        self.aged_len.store(0, Ordering::Release);
        self.low_len.store(0, Ordering::Release);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_round_trip() {
        assert!(Priority::High < Priority::Normal && Priority::Normal < Priority::Low);
        for p in [Priority::High, Priority::Normal, Priority::Low] {
            assert_eq!(Priority::from_u8(p.as_u8()), p);
        }
        assert_eq!(Priority::default(), Priority::Normal);
    }
}
