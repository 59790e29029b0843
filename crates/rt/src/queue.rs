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
//!
//! # Newest first: the next slot and the fresh part
//!
//! Yields and preemptions go to the back, as above. A thread the running one
//! *spawns or wakes* goes to the processor's next slot ([`LifoSlot`], Go's
//! `runnext`) and runs at the next decision; the thread it displaces from
//! the slot goes *ahead* of the FIFO order, newest first (the head of the
//! private part with one processor, the stealable LIFO `fresh` deque with
//! several). So a spawn tree runs depth-first: a node's children wait as a
//! stack while the newest one's subtree runs, and only the current path is
//! alive. Measured (skynet, 10^6 leaves, fan-out 10): 14.3 s and 3.1 GB of
//! RSS with the slot alone (displaced threads to the back, which starts
//! nearly every node of the upper levels before any finishes), 0.10 s and
//! 5 MB with both; with two processors 10.9 s / 1.95 GB against 0.09 s /
//! 4 MB. Thieves take the slot and the fresh part's *oldest* thread (the
//! root of the largest pending subtree, as Cilk steals).
//!
//! The slot is bounded like tokio's LIFO slot: at most [`MAX_LIFO_STREAK`]
//! decisions in a row take it, then its thread goes to the back and the
//! queue runs (`tests/lifo.rs`: a ping-pong through the slot cannot starve
//! a queued thread). The fresh part is not bounded: a tree that keeps
//! spawning runs before older queued threads, the price of depth-first
//! order; yields, preemptions and the streak bound still reach the back.

use crate::slot::RawSlot;
use crate::task::{Task, TaskRef};
use crossbeam_deque::{Steal, Stealer, Worker};
use std::cell::{Cell, UnsafeCell};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Makes crossbeam-epoch's process-wide collector, which every steal uses
/// and which would otherwise be made at the first steal, under a
/// `std::sync::Once`. Called by `RuntimeBuilder::build` before any
/// processor exists: a processor making it while a user thread forked left
/// the `Once` running for good in the child, whose processors then waited
/// on it at their first steal (the child of a program that forks early
/// hung, one in a few hundred).
pub(crate) fn make_steal_collector() {
    crossbeam_epoch::default_collector();
}

/// Bits of [`RunQueue::used`]: which parts besides the private one may hold
/// a thread, as the owner knows it.
const FRESH: u8 = 1;
const SHARED: u8 = 2;
/// The owner's next slot may hold a thread (kept here for the owner, so one
/// test of `used` tells a decision that only the private part matters).
const SLOT: u8 = 4;

/// One processor's run queue. See the module docs.
///
/// Not `Sync` (the private part is unsynchronized): only the owning
/// processor's kernel thread may call its methods. Thieves use the
/// [`Stealer`] from [`RunQueue::stealer`].
pub(crate) struct RunQueue {
    shared: Worker<TaskRef>,
    /// Threads displaced from the next slot on a runtime of several
    /// processors: a LIFO deque, popped newest-first by the owner (a spawn
    /// tree runs depth-first) and stolen oldest-first by thieves (the largest
    /// pending subtree, as in Cilk). One processor uses the head of the
    /// private part instead.
    fresh: Worker<TaskRef>,
    /// [`FRESH`], [`SHARED`], [`SLOT`]: a bit is clear only if that part is
    /// empty. Only the owner pushes to the stealable parts (thieves only
    /// take), so the owner keeps this exact enough without atomics, and a
    /// pop skips those parts (a pointer chase and two loads of a line
    /// thieves write) while they are known empty.
    used: Cell<u8>,
    /// The private part: a ring of a power-of-two size, `len` threads from
    /// `head` (indices masked). A `VecDeque` did the same with a branchy wrap
    /// and a growth check on every push, and a separate length store for
    /// the monitor: a yield cost 10 instructions more.
    private: UnsafeCell<Box<[Option<TaskRef>]>>,
    head: Cell<usize>,
    /// Length of the private part. Written by the owner only (relaxed loads
    /// and stores: plain moves), read by the monitor as a hint.
    len: AtomicUsize,
    private_cap: usize,
}

/// Fills an empty element of the private ring. (An assignment would drop the
/// old value, which the compiler cannot see is always `None`: a call.)
#[inline(always)]
fn put(slot: &mut Option<TaskRef>, t: TaskRef) {
    let old = slot.replace(t);
    debug_assert!(old.is_none(), "a thread overwritten in the private ring");
    std::mem::forget(old);
}

/// The private ring's first size.
const RING_START: usize = 64;

impl RunQueue {
    /// A queue over `shared` whose private part keeps at most `private_cap`
    /// threads (0: none, every push goes to the shared part).
    pub(crate) fn new(shared: Worker<TaskRef>, private_cap: usize) -> RunQueue {
        let size = if private_cap == 0 { 1 } else { RING_START };
        RunQueue {
            used: Cell::new(if shared.is_empty() { 0 } else { SHARED }),
            shared,
            fresh: Worker::new_lifo(),
            private: UnsafeCell::new((0..size).map(|_| None).collect()),
            head: Cell::new(0),
            len: AtomicUsize::new(0),
            private_cap,
        }
    }

    /// Handles for other processors to steal from the shared parts.
    pub(crate) fn stealer(&self) -> QueueStealer {
        QueueStealer { fifo: self.shared.stealer(), fresh: self.fresh.stealer() }
    }

    /// The shared part, as a destination for batch steals.
    #[inline]
    pub(crate) fn shared(&self) -> &Worker<TaskRef> {
        self.mark(SHARED);
        &self.shared
    }

    #[inline]
    fn mark(&self, bit: u8) {
        self.used.set(self.used.get() | bit);
    }

    #[inline]
    fn unmark(&self, bit: u8) {
        self.used.set(self.used.get() & !bit);
    }

    /// Whether only the private part can hold a thread (and the owner's next
    /// slot is empty): then a decision needs nothing but
    /// [`RunQueue::pop_private`] or [`RunQueue::rotate`].
    #[inline(always)]
    pub(crate) fn only_private(&self) -> bool {
        self.used.get() == 0
    }

    /// Whether the owner's next slot may hold a thread (the owner's own
    /// flag, kept here; `Processor::take_lifo`).
    #[inline(always)]
    pub(crate) fn slot_used(&self) -> bool {
        self.used.get() & SLOT != 0
    }

    #[inline(always)]
    pub(crate) fn set_slot_used(&self, used: bool) {
        if used {
            self.mark(SLOT);
        } else {
            self.unmark(SLOT);
        }
    }

    #[allow(clippy::mut_from_ref)] // owner-only access, see the type docs
    #[inline(always)]
    fn ring(&self) -> &mut [Option<TaskRef>] {
        // SAFETY: only the owner's kernel thread calls methods of the queue
        // (type docs), and no method calls out while holding this borrow.
        unsafe { &mut *self.private.get() }
    }

    #[inline(always)]
    fn private_len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// The next runnable thread: the newest displaced from the next slot
    /// (several processors), else the oldest queued.
    #[inline]
    pub(crate) fn pop(&self) -> Option<TaskRef> {
        let used = self.used.get();
        if used & FRESH != 0 {
            if let Some(t) = self.fresh.pop() {
                return Some(t);
            }
            self.unmark(FRESH);
        }
        if used & SHARED != 0 {
            if let Some(t) = self.shared.pop() {
                return Some(t);
            }
            self.unmark(SHARED);
        }
        self.pop_private()
    }

    /// The oldest thread of the private part.
    #[inline(always)]
    pub(crate) fn pop_private(&self) -> Option<TaskRef> {
        let len = self.private_len();
        if len == 0 {
            return None;
        }
        let ring = self.ring();
        let mask = ring.len() - 1;
        let head = self.head.get();
        let t = ring[head & mask].take();
        self.head.set((head + 1) & mask);
        self.len.store(len - 1, Ordering::Relaxed);
        t
    }

    /// Takes the private part's oldest thread and appends `t` (a yield on one
    /// processor, with only the private part in use). Gives `t` back if the
    /// private part is empty.
    ///
    /// A pop and a push, not one exchange in place: the in-place version
    /// (read the head, write the tail, move the head; 14 fewer instructions)
    /// made a yield *slower* on the lab's Intel host, 11.4 ns against 8.5
    /// ns, alternated — a stall of a dozen cycles per yield, most likely the
    /// CPU's memory-ordering speculation on the ring element the previous
    /// yield had just written (the VM has no performance counters to say).
    #[inline(always)]
    pub(crate) fn rotate(&self, t: TaskRef) -> Result<TaskRef, TaskRef> {
        match self.pop_private() {
            Some(n) => {
                self.ring_push_back(t);
                Ok(n)
            }
            None => Err(t),
        }
    }

    /// Whether nothing waits here, as the owner sees it: exact for the private
    /// part; while a stealable part may hold something (thieves only take, so
    /// the owner's flags err towards it), `false`.
    #[inline]
    pub(crate) fn is_empty_owner(&self) -> bool {
        self.used.get() & (FRESH | SHARED) == 0 && self.private_len() == 0
    }

    /// Threads waiting in the private part (a hint, for another thread; the
    /// shared part is seen through its `Stealer`).
    pub(crate) fn len_hint(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// The private ring, grown if full, with its index mask and length.
    #[allow(clippy::mut_from_ref)] // owner-only access, see the type docs
    #[inline(always)]
    fn ring_with_room(&self) -> (&mut [Option<TaskRef>], usize, usize) {
        let len = self.private_len();
        if len == self.ring().len() {
            self.grow();
        }
        let ring = self.ring();
        let mask = ring.len() - 1;
        (ring, mask, len)
    }

    /// Appends `t` to the private part.
    #[inline(always)]
    fn ring_push_back(&self, t: TaskRef) {
        let (ring, mask, len) = self.ring_with_room();
        put(&mut ring[(self.head.get() + len) & mask], t);
        self.len.store(len + 1, Ordering::Relaxed);
    }

    /// Puts `t` at the head of the private part.
    #[inline(always)]
    fn ring_push_front(&self, t: TaskRef) {
        let (ring, mask, len) = self.ring_with_room();
        let head = self.head.get().wrapping_sub(1) & mask;
        put(&mut ring[head], t);
        self.head.set(head);
        self.len.store(len + 1, Ordering::Relaxed);
    }

    /// Doubles the private ring, keeping the order (the threads start at 0).
    #[cold]
    #[inline(never)]
    fn grow(&self) {
        // SAFETY: as in `ring`.
        let ring = unsafe { &mut *self.private.get() };
        let (len, mask, head) = (self.private_len(), ring.len() - 1, self.head.get());
        let mut bigger: Box<[Option<TaskRef>]> = (0..ring.len() * 2).map(|_| None).collect();
        for (i, slot) in bigger.iter_mut().take(len).enumerate() {
            *slot = ring[(head + i) & mask].take();
        }
        *ring = bigger;
        self.head.set(0);
    }

    /// Appends `t`, keeping it private if the private part has room (else
    /// it goes where thieves can take it, after the private threads).
    /// Returns `true` if that made a thread stealable.
    #[inline]
    pub(crate) fn push_private(&self, t: TaskRef) -> bool {
        if self.private_len() < self.private_cap {
            self.ring_push_back(t);
            return false;
        }
        match self.pop_private() {
            Some(oldest) => {
                self.shared.push(oldest);
                self.ring_push_back(t);
            }
            None => self.shared.push(t),
        }
        self.mark(SHARED);
        true
    }

    /// Appends `t` where thieves can take it (after the private threads, so
    /// the order stays FIFO). Out of line: it keeps the private paths of a
    /// one-processor runtime short.
    #[inline(never)]
    pub(crate) fn push_shared(&self, t: TaskRef) {
        while let Some(p) = self.pop_private() {
            self.shared.push(p);
        }
        self.shared.push(t);
        self.mark(SHARED);
    }

    /// Queues a thread displaced from the next slot to run before everything
    /// queued, newest first (`Processor::schedule_next`): at the head of the
    /// private part when it has room (one processor), else on the stealable
    /// LIFO deque. Returns `true` if that made a thread stealable.
    #[inline]
    pub(crate) fn push_fresh(&self, t: TaskRef) -> bool {
        if self.private_len() < self.private_cap {
            self.ring_push_front(t);
            return false;
        }
        self.fresh.push(t);
        self.mark(FRESH);
        true
    }

    /// Takes `want` if it is the thread [`RunQueue::push_fresh`] queued last
    /// and it is still here (a joiner taking back its child,
    /// `processor/inline.rs`): the head of the private part, or the newest of
    /// the fresh deque (crossbeam's owner `pop` decides against a thief's
    /// steal; another thread popped meanwhile is pushed back where it was).
    #[inline]
    pub(crate) fn take_fresh_if(&self, want: *const Task) -> Option<TaskRef> {
        if self.private_len() > 0 {
            let ring = self.ring();
            let head = self.head.get() & (ring.len() - 1);
            if ring[head].as_ref().is_some_and(|t| std::ptr::eq(&**t, want)) {
                return self.pop_private();
            }
        }
        if self.used.get() & FRESH == 0 {
            return None;
        }
        match self.fresh.pop() {
            Some(t) if std::ptr::eq(&*t, want) => Some(t),
            Some(t) => {
                self.fresh.push(t);
                None
            }
            None => {
                self.unmark(FRESH);
                None
            }
        }
    }

    /// Takes `want` out of the private part wherever it waits there, the
    /// threads queued before it keeping their order (`yield_to`, a hand-off
    /// to a named thread). A scan of at most the part's length, owner-only
    /// like every private operation, so nothing races it; `None` when `want`
    /// is not in the private part.
    pub(crate) fn take_private(&self, want: *const Task) -> Option<TaskRef> {
        let len = self.private_len();
        let ring = self.ring();
        let mask = ring.len().wrapping_sub(1);
        let head = self.head.get();
        let at = (0..len).find(|&i| {
            ring[(head + i) & mask].as_ref().is_some_and(|t| std::ptr::eq(&**t, want))
        })?;
        let t = ring[(head + at) & mask].take();
        // Close the gap from the head's side: the `at` older threads move
        // one place back, and the head follows them.
        for i in (0..at).rev() {
            ring[(head + i + 1) & mask] = ring[(head + i) & mask].take();
        }
        self.head.set((head + 1) & mask);
        self.len.store(len - 1, Ordering::Relaxed);
        t
    }

    /// Takes every queued thread, oldest first (shutdown).
    pub(crate) fn drain(&self) -> impl Iterator<Item = TaskRef> + '_ {
        std::iter::from_fn(move || self.pop())
    }
}

/// What other processors may take from a [`RunQueue`].
pub(crate) struct QueueStealer {
    fifo: Stealer<TaskRef>,
    fresh: Stealer<TaskRef>,
}

impl QueueStealer {
    /// Whether both stealable parts look empty (a hint).
    pub(crate) fn is_empty(&self) -> bool {
        self.fifo.is_empty() && self.fresh.is_empty()
    }

    /// Steals for processor `dest`: the oldest displaced thread (the root
    /// of the largest pending subtree), else half the FIFO part (one
    /// returned, the rest moved to `dest`).
    pub(crate) fn steal_into(&self, dest: &Worker<TaskRef>) -> Steal<TaskRef> {
        match self.fresh.steal() {
            Steal::Success(t) => Steal::Success(t),
            Steal::Retry => Steal::Retry,
            Steal::Empty => self.fifo.steal_batch_and_pop(dest),
        }
    }
}

/// A processor's *next* slot (Go's `runnext`, tokio's LIFO slot): the thread
/// it just spawned or woke, run before the queue so that a spawn tree runs
/// depth-first (only the current path alive, not the whole tree) and a woken
/// thread runs while what it needs is still in the cache.
///
/// The owner puts and takes; other processors may take (steal) it, so a
/// thread in the slot is never stuck behind a long-running owner beside an
/// idle processor (the flaw of tokio's unstealable slot). One word: the
/// thread's raw reference, or null. Put releases the thread's published
/// context (step 3 of `processor/switch.rs`), a take acquires it; a
/// one-processor runtime has no thieves and uses plain loads and stores.
///
/// Starvation is bounded by the owner, not here: `Processor::next_local`
/// takes from the slot at most [`MAX_LIFO_STREAK`] times in a row.
pub(crate) struct LifoSlot(RawSlot<Task>);

/// How many scheduling decisions in a row may take the next slot before the
/// queue gets a turn (tokio's `MAX_LIFO_POLLS_PER_TICK` is 3 as well): two
/// threads waking each other can delay a queued thread by at most this many
/// switches.
pub(crate) const MAX_LIFO_STREAK: u32 = 3;

impl LifoSlot {
    pub(crate) fn new() -> LifoSlot {
        LifoSlot(RawSlot::new())
    }

    /// Puts `t` in the slot and returns the thread it displaced. `shared`:
    /// other processors may steal (`slot.rs`: a plain store into an empty
    /// slot, a locked exchange to displace); else plain accesses.
    #[inline]
    pub(crate) fn put(&self, t: TaskRef, shared: bool) -> Option<TaskRef> {
        let old = self.0.put(t.into_raw(), shared);
        // SAFETY: the slot owned this reference, and `put` gave it to us alone.
        old.map(|p| unsafe { TaskRef::from_raw(p) })
    }

    /// Takes the thread in the slot, if any (the owner).
    #[inline]
    pub(crate) fn take(&self, shared: bool) -> Option<TaskRef> {
        // SAFETY: the slot owned this reference, and `take` gave it to us alone.
        self.0.take(shared).map(|p| unsafe { TaskRef::from_raw(p) })
    }

    /// The owner takes `want` back if the slot still holds it (`slot.rs`,
    /// [`RawSlot::take_back`]: against a thief, exactly one gets it).
    #[inline]
    pub(crate) fn take_back(&self, want: NonNull<Task>, shared: bool) -> Option<TaskRef> {
        // SAFETY: the slot owned this reference, and `take_back` gave it to us alone.
        self.0.take_back(want, shared).map(|p| unsafe { TaskRef::from_raw(p) })
    }

    /// Whether a thread waits in the slot (a hint, for other threads).
    #[inline]
    pub(crate) fn is_occupied(&self) -> bool {
        !self.0.peek().is_null()
    }

    /// The thread in the slot, as an address to compare only (a hint).
    #[inline]
    pub(crate) fn peek(&self) -> *mut Task {
        self.0.peek()
    }

    /// Takes the thread in the slot if it is still `seen` (from [`LifoSlot::peek`]);
    /// for thieves.
    #[inline]
    pub(crate) fn take_if(&self, seen: *mut Task) -> Option<TaskRef> {
        // SAFETY: the slot owned this reference, and the exchange gave it to us alone.
        self.0.take_if(seen).map(|p| unsafe { TaskRef::from_raw(p) })
    }
}

impl Drop for LifoSlot {
    fn drop(&mut self) {
        // Shutdown empties the slot (`Processor::shut_down`). A reference
        // left here is leaked rather than dropped: dropping a task may need
        // the runtime this slot is part of.
        debug_assert!(!self.is_occupied(), "a thread left in a next slot at drop");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::Stack;
    use crate::task::{Task, ThreadId};

    fn task(id: u64) -> TaskRef {
        let shared = crate::state::Shared::for_tests();
        shared.acquire_refs(1);
        // SAFETY: just counted.
        let shared = unsafe { crate::state::SharedRef::counted(&shared) };
        let stack = Stack::new(crate::stack::MIN_STACK_SIZE).unwrap();
        Task::allocate(ThreadId::from_u64(id).unwrap(), None, shared, Some(stack), || (), None).0
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
        assert_eq!(s.fifo.steal().success().map(|t| t.id.as_u64()), Some(1));
        assert!(q.pop().is_none());
    }

    #[test]
    fn fresh_threads_run_newest_first_before_the_fifo_part() {
        // One processor: at the head of the private part.
        let q = RunQueue::new(Worker::new_fifo(), usize::MAX);
        q.push_private(task(1));
        assert!(!q.push_fresh(task(2)));
        assert!(!q.push_fresh(task(3)));
        assert_eq!(ids(&q), [3, 2, 1]);
        // Several: on the LIFO deque, whose oldest a thief takes.
        let q = RunQueue::new(Worker::new_fifo(), 0);
        let s = q.stealer();
        q.push_private(task(1));
        assert!(q.push_fresh(task(2)));
        assert!(q.push_fresh(task(3)));
        assert!(q.push_fresh(task(4)));
        let dest = Worker::new_fifo();
        assert_eq!(s.steal_into(&dest).success().map(|t| t.id.as_u64()), Some(2));
        assert_eq!(ids(&q), [4, 3, 1]);
    }

    #[test]
    fn a_named_thread_leaves_the_private_part_and_the_rest_keep_their_order() {
        let q = RunQueue::new(Worker::new_fifo(), usize::MAX);
        // Wrap the ring first, so the scan and the shift cross its end.
        for i in 0..6 {
            q.push_private(task(100 + i));
        }
        for _ in 0..6 {
            q.pop_private();
        }
        let ts: Vec<TaskRef> = (1..=5).map(task).collect();
        let ptrs: Vec<*const Task> = ts.iter().map(|t| &**t as *const Task).collect();
        for t in ts {
            q.push_private(t);
        }
        assert_eq!(q.take_private(ptrs[3]).map(|t| t.id.as_u64()), Some(4));
        assert!(q.take_private(ptrs[3]).is_none(), "taken once");
        assert_eq!(q.take_private(ptrs[0]).map(|t| t.id.as_u64()), Some(1), "the head");
        assert_eq!(q.take_private(ptrs[4]).map(|t| t.id.as_u64()), Some(5), "the tail");
        assert_eq!(ids(&q), [2, 3]);
        assert!(RunQueue::new(Worker::new_fifo(), 4).take_private(ptrs[0]).is_none());
    }

    #[test]
    fn the_next_slot_hands_back_what_it_displaces() {
        for shared in [false, true] {
            let slot = LifoSlot::new();
            assert!(!slot.is_occupied());
            assert!(slot.put(task(1), shared).is_none());
            assert!(slot.is_occupied());
            assert_eq!(slot.put(task(2), shared).map(|t| t.id.as_u64()), Some(1));
            assert_eq!(slot.take(shared).map(|t| t.id.as_u64()), Some(2));
            assert!(slot.take(shared).is_none());
        }
    }

    #[test]
    fn the_private_ring_keeps_order_across_wraps_and_growth() {
        // One processor: everything private, the ring grows past its first size.
        let q = RunQueue::new(Worker::new_fifo(), usize::MAX);
        let mut expect = std::collections::VecDeque::new();
        let mut next = 1;
        // Interleave pushes at both ends, pops and rotations so the head wraps
        // round the ring several times and the ring doubles twice.
        for round in 0..800u64 {
            match round % 5 {
                0 | 1 => {
                    q.push_private(task(next));
                    expect.push_back(next);
                }
                2 => {
                    q.push_fresh(task(next));
                    expect.push_front(next);
                }
                3 => {
                    let got = q.pop().map(|t| t.id.as_u64());
                    assert_eq!(got, expect.pop_front(), "pop in round {round}");
                    continue;
                }
                _ => match q.rotate(task(next)) {
                    Ok(t) => {
                        assert_eq!(
                            Some(t.id.as_u64()),
                            expect.pop_front(),
                            "rotate in round {round}"
                        );
                        expect.push_back(next);
                    }
                    Err(t) => {
                        assert!(expect.is_empty());
                        assert_eq!(t.id.as_u64(), next);
                    }
                },
            }
            next += 1;
            assert_eq!(q.len_hint(), expect.len());
        }
        assert!(expect.len() > 4 * RING_START, "the ring grew twice ({} queued)", expect.len());
        assert_eq!(ids(&q), Vec::from(expect));
        assert_eq!(q.len_hint(), 0);
    }

    #[test]
    fn rotating_an_empty_private_part_gives_the_thread_back() {
        let q = RunQueue::new(Worker::new_fifo(), usize::MAX);
        assert_eq!(q.rotate(task(7)).err().map(|t| t.id.as_u64()), Some(7));
        q.push_private(task(1));
        assert_eq!(q.rotate(task(2)).ok().map(|t| t.id.as_u64()), Some(1));
        assert_eq!(ids(&q), [2]);
    }

    #[test]
    fn the_owner_flags_say_which_parts_to_look_at() {
        let q = RunQueue::new(Worker::new_fifo(), 0);
        assert!(q.only_private());
        q.set_slot_used(true);
        assert!(!q.only_private() && q.slot_used());
        q.set_slot_used(false);
        assert!(q.only_private() && !q.slot_used());
        q.push_private(task(1));
        assert!(!q.only_private(), "a stealable thread is seen");
        assert!(!q.is_empty_owner());
        assert_eq!(ids(&q), [1]);
        assert!(q.only_private(), "an empty shared part is forgotten by the pop that finds it");
        q.push_fresh(task(2));
        assert!(!q.only_private());
        assert_eq!(ids(&q), [2]);
        assert!(q.only_private() && q.is_empty_owner());
    }

    #[test]
    fn thieves_see_only_the_shared_part() {
        let q = RunQueue::new(Worker::new_fifo(), 1);
        let s = q.stealer();
        q.push_private(task(1));
        assert!(s.is_empty(), "a private thread cannot be stolen");
        q.push_private(task(2));
        assert_eq!(s.fifo.steal().success().map(|t| t.id.as_u64()), Some(1));
        assert_eq!(ids(&q), [2]);
    }
}
