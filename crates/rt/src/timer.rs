//! Timers for [`sleep`](crate::sleep): one heap per runtime.
//!
//! A sleeping user thread puts an entry (deadline, its own task) in the heap
//! and parks for a `Sync` token; processors fire due entries when they look
//! for work (always when idle, every few dozen scheduling decisions when
//! busy), and an idle processor sleeps on its futex no longer than the next
//! deadline. `next` mirrors the earliest deadline so the busy path checks it
//! with one load.

use crate::task::TaskRef;
use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Entry {
    at: u64,
    seq: u64,
    task: TaskRef,
    /// Unpark the task (`park_timeout`) rather than hand it a `Sync` token
    /// (`sleep`).
    unpark: bool,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct Heap {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    /// The latest `now` a firing pass used: every entry due by then is off
    /// the heap, so an entry due later is still on it ([`Timers::cancel`]).
    fired_up_to: u64,
    /// Entries cancelled while on the heap: skipped when they come due, and
    /// taken off all at once when they are half of it.
    cancelled: std::collections::HashSet<u64>,
}

/// A timer registered by [`Timers::insert_unpark`], for [`Timers::cancel`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimerKey {
    at: u64,
    seq: u64,
}

/// The timers of one runtime. Times are nanoseconds since `epoch`.
pub(crate) struct Timers {
    epoch: Instant,
    heap: Mutex<Heap>,
    next: AtomicU64,
    /// Timers taken off the heap whose threads are not yet woken. Counted as
    /// pending, so the deadlock check never sees a thread as parked for good
    /// while its timer is firing on another processor.
    firing: AtomicU64,
}

impl Timers {
    pub(crate) fn new() -> Timers {
        Timers {
            epoch: Instant::now(),
            heap: Mutex::new(Heap::default()),
            next: AtomicU64::new(u64::MAX),
            firing: AtomicU64::new(0),
        }
    }

    /// Nanoseconds since the epoch, now.
    pub(crate) fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos().min(u64::MAX as u128 - 1) as u64
    }

    /// Registers `task` to be woken (with a `Sync` token) `after` from now.
    pub(crate) fn insert(&self, after: Duration, task: TaskRef) {
        self.push(after, task, false);
    }

    /// Registers `task` to be unparked (its park token made available, as
    /// [`crate::Thread::unpark`] does) `after` from now: `park_timeout`.
    pub(crate) fn insert_unpark(&self, after: Duration, task: TaskRef) -> TimerKey {
        self.push(after, task, true)
    }

    /// Withdraws a timer whose wait ended otherwise (a parked I/O wait,
    /// `poll.rs`): it will not unpark its thread, and its reference to the
    /// thread goes when the cancelled entries are half the heap, so a server
    /// whose reads have timeouts does not fill the heap with entries due
    /// long after their reads. A timer already firing is left alone (its
    /// unpark is one spurious return, which the waits absorb).
    pub(crate) fn cancel(&self, key: TimerKey) {
        let mut h = self.heap.lock().unwrap();
        if key.at <= h.fired_up_to {
            return;
        }
        h.cancelled.insert(key.seq);
        if h.cancelled.len() > h.heap.len() / 2 + 16 {
            let Heap { heap, cancelled, .. } = &mut *h;
            heap.retain(|e| !cancelled.contains(&e.0.seq));
            cancelled.clear();
            self.next.store(h.heap.peek().map_or(u64::MAX, |e| e.0.at), Ordering::SeqCst);
        }
    }

    fn push(&self, after: Duration, task: TaskRef, unpark: bool) -> TimerKey {
        let at = self
            .now()
            .saturating_add(after.as_nanos().min(u64::MAX as u128) as u64)
            .min(u64::MAX - 1);
        let mut h = self.heap.lock().unwrap();
        h.seq += 1;
        let seq = h.seq;
        h.heap.push(Reverse(Entry { at, seq, task, unpark }));
        self.next.store(h.heap.peek().map_or(u64::MAX, |e| e.0.at), Ordering::SeqCst);
        TimerKey { at, seq }
    }

    /// Whether any timer is pending.
    pub(crate) fn pending(&self) -> bool {
        self.firing.load(Ordering::SeqCst) != 0 || self.next.load(Ordering::SeqCst) != u64::MAX
    }

    /// Time until the earliest deadline, if any.
    pub(crate) fn until_next(&self) -> Option<Duration> {
        let next = self.next.load(Ordering::SeqCst);
        (next != u64::MAX).then(|| Duration::from_nanos(next.saturating_sub(self.now())))
    }

    /// Removes the due timers and hands their tasks to `f`, or unparks them
    /// (`insert_unpark`).
    #[inline]
    pub(crate) fn fire(&self, mut f: impl FnMut(TaskRef)) {
        let next = self.next.load(Ordering::Relaxed);
        if next == u64::MAX || next > self.now() {
            return;
        }
        let now = self.now();
        let mut due = Vec::new();
        {
            let mut h = self.heap.lock().unwrap();
            self.firing.fetch_add(1, Ordering::SeqCst);
            while h.heap.peek().is_some_and(|e| e.0.at <= now) {
                let e = h.heap.pop().expect("peeked").0;
                if !h.cancelled.is_empty() && h.cancelled.remove(&e.seq) {
                    continue;
                }
                due.push((e.task, e.unpark));
            }
            h.fired_up_to = h.fired_up_to.max(now);
            self.next.store(h.heap.peek().map_or(u64::MAX, |e| e.0.at), Ordering::SeqCst);
        }
        for (t, unpark) in due {
            if unpark {
                crate::hooks::unpark_user(&t);
            } else {
                f(t);
            }
        }
        self.firing.fetch_sub(1, Ordering::SeqCst);
    }

    /// Drops every timer (shutdown).
    pub(crate) fn clear(&self) {
        let mut h = self.heap.lock().unwrap();
        h.heap.clear();
        h.cancelled.clear();
        self.next.store(u64::MAX, Ordering::SeqCst);
    }
}
