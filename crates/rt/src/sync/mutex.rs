//! [`Mutex`]: a lock whose contended path parks the user thread.
//!
//! # The state byte
//!
//! | value             | meaning                                         |
//! |-------------------|-------------------------------------------------|
//! | 0                 | unlocked, nobody queued                         |
//! | `LOCKED`          | locked, nobody queued                           |
//! | `LOCKED \| PARKED` | locked, waiters queued                          |
//! | `PARKED`          | unlocked, waiters queued (one was just woken)   |
//! | `\| OWNED`        | with `LOCKED`: the holder is recorded (below)   |
//! | `\| STARVING`     | with `LOCKED \| PARKED`: unlocks hand over (below) |
//!
//! The uncontended paths are one compare-and-swap each (`0 -> LOCKED`,
//! `LOCKED -> 0`). Those two locked instructions are the whole cost of an
//! uncontended lock+unlock (~97% of its profile; ~5.3 ns each on the lab
//! machine, 10 ns in all against 6 ns for one CAS and a plain store). An
//! unlock by plain store would need the unlocker to see a `PARKED` set
//! concurrently by a waiter on another processor: a store followed by a load
//! of another location, which x86 reorders unless one side fences. Moving
//! the fence to the waiter alone takes an asymmetric barrier
//! (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: 240 ns alone, 8.1 µs here
//! while another thread of the process runs, on every contended park), which
//! would wreck the contended case the seed cares about; so the unlock keeps
//! its CAS. `PARKED` is set and cleared only under the queue's spin
//! lock, which orders it against the queue's contents:
//!
//! # Spinning
//!
//! A contended lock is usually released within a few hundred nanoseconds,
//! far sooner than a park and a wake-up take, but only if its holder is
//! running. So the slow path first spins — [`SPIN_ROUNDS`] rounds of
//! doubling pauses (4 to 64 `pause`s; 124 in all, a few µs on a CPU whose
//! `pause` is long), each ending with a load and, if the lock looks free, one
//! compare-and-swap — but only while the holder may be on a processor right
//! now: some *other* processor of the runtime that was running user code
//! when the spin began is still in that same stint
//! (`processor::SpinWatch`). The spinner's own processor never runs the
//! holder, so on one processor nobody spins, and once every such processor
//! has switched (the holder parked, was preempted, or finished) or gone idle,
//! the spinner parks at once instead of burning its processor. Go's
//! `sync.Mutex` spins 4 rounds of 30 `pause`s when other Ps run and its
//! run queue is empty (`runtime_canSpin`), but cannot tell whether the
//! holder itself is among the running. An OS thread spins one round.
//!
//! Locking, slow path (after the spin):
//! 1. Take the queue lock. If the mutex is unlocked now, drop the queue lock
//!    and try to take the mutex (keeping `PARKED`).
//! 2. Set `PARKED` with a CAS (retry from 1 if the state moved), queue a
//!    waiter, park, dropping the queue lock (`wait.rs`).
//! 3. Woken, try again from the top: a thread that arrives meanwhile may
//!    take the lock first (no hand-off, so no convoys; as parking_lot).
//!    Unless it has waited [`STARVE_AFTER`] since it first queued: then it
//!    queues again at the front and sets `STARVING` (below).
//!
//! Unlocking, slow path (`PARKED` was set so the fast CAS failed):
//! 1. Take the queue lock, dequeue the first waiter, store `PARKED` if more
//!    remain or 0 otherwise (this also unlocks), drop the queue lock.
//! 2. Wake the dequeued waiter.
//!
//! # Starvation
//!
//! Barging lets a thread that releases and re-takes the lock at once keep it
//! for as long as it likes: measured with `sched.lock_fairness`, a waiter
//! waited up to 416 ms and the threads' shares ranged from 10% to 40%. So, as
//! Go's `sync.Mutex` does, a waiter that has waited [`STARVE_AFTER`] and is
//! beaten again puts the mutex in starvation mode: each unlock then hands
//! the lock to the first waiter without releasing it (`LOCKED` stays, so
//! neither the fast path, the spin nor `try_lock` can take it; the waiter
//! learns it from a flag the unlocker sets before the wake-up) until the
//! waiter handed to is the last, or had waited less than [`STARVE_AFTER`].
//!
//! No waiter sleeps through an unlock: a waiter queues itself only while
//! `LOCKED | PARKED` holds (step 2, under the queue lock), so that unlock
//! must take the slow path, which cannot run before the queue lock is free.
//!
//! # The holder, for priority inheritance
//!
//! Once a runtime of the process has levels (`priority.rs`, "Inheritance"),
//! a thread that takes the lock records itself as its holder: a counted
//! reference in the queue (under the queue lock) and `OWNED` in the state, so
//! that its unlock fails the fast compare-and-swap and releases the reference
//! under the queue lock too. A waiter reads the holder under that lock while
//! `LOCKED` holds (the holder cannot finish its unlock meanwhile), so the
//! task it lends its level to is alive. Each waiter is queued with its level;
//! a holder that records itself while higher-level waiters are queued
//! inherits their level at once. Before levels exist the lock's fast paths
//! are as above plus one load of a flag (`priority::LEVELS`); the unlock's is
//! unchanged. A user thread in the slow path also records this mutex as the
//! one it is blocked on (`Task::blocked_on`, from before its first look at
//! the queue to its return with the lock), and a waiter whose holder is itself
//! blocked lends along the chain (`chain.rs`) before it queues.

use super::chain;
use crate::priority::{levels_in_use, Priority};
use crate::spin::SpinLock;
use crate::task::{Task, TaskRef, WaitReason};
use crate::wait::{Waiter, WaiterRef};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering};

const LOCKED: u8 = 1;
const PARKED: u8 = 2;
const OWNED: u8 = 4;
const STARVING: u8 = 8;

/// How long a waiter waits before the mutex hands it the lock ("Starvation"): Go's
/// `starvationThresholdNs`.
const STARVE_AFTER: std::time::Duration = std::time::Duration::from_millis(1);

/// A queued waiter.
pub(super) struct Queued {
    waiter: WaiterRef,
    /// Its level ([`NO_LEVEL`] for an OS thread); raised by a chain walk
    /// (`chain.rs`) while it waits.
    pub(super) level: u8,
    /// The waiting user thread's address, for the chain walk to find its entry
    /// (0 when levels were off as it queued, or for an OS thread).
    pub(super) task: usize,
    /// Set by an unlock that hands it the lock; on the waiter's stack, which
    /// outlives the wait.
    handed: *const std::sync::atomic::AtomicBool,
    /// When it first queued.
    since: std::time::Instant,
}

/// A waiter's level in the queue: a user thread's `Priority::as_u8`, or this for an OS
/// thread, which lends none.
const NO_LEVEL: u8 = u8::MAX;

/// What the queue lock guards: the waiters, and the holder once levels exist.
pub(super) struct Queue {
    /// The waiters, first to be woken first.
    pub(super) waiters: VecDeque<Queued>,
    /// The holder, while `OWNED` (module docs).
    pub(super) owner: Option<TaskRef>,
    /// The level this mutex lends its holder, counted in the holder's `Task::lent`
    /// (`priority.rs`, "Inheritance", step 3): the highest a waiter lent it, whether or
    /// not the holder was already at that level through another mutex it holds.
    pub(super) lent: Option<Priority>,
}

impl Queue {
    /// The highest level among the waiters (the lowest value), if a user thread waits.
    fn top_level(&self) -> Option<Priority> {
        let l = self.waiters.iter().map(|q| q.level).min()?;
        (l != NO_LEVEL).then(|| Priority::from_u8(l))
    }

    /// Counts `level` as lent to the holder by this mutex, if it lends more than before
    /// (step 3's record); before the holder is raised (`priority::Lent::moved`).
    pub(super) fn record(&mut self, level: Priority) {
        let Some(o) = &self.owner else { return };
        if level == Priority::Low || self.lent.is_some_and(|l| l <= level) {
            return;
        }
        o.lent.moved(self.lent, level);
        self.lent = Some(level);
    }

    /// Lends the holder `level` if that is higher than its own ("Inheritance", step 1).
    fn lend(&mut self, level: Priority) {
        self.record(level);
        if let Some(o) = &self.owner {
            chain::raise(o, level);
        }
    }

    /// Lends the holder `level` (step 1) unless it is blocked on another mutex: then
    /// `Err`, and the caller walks the chain from itself instead (`chain.rs`).
    fn lend_or_walk(&mut self, level: Priority) -> Result<(), ()> {
        // Counted even when the holder is at `level` already, through another mutex it
        // holds: it must keep the level when it releases that one.
        self.record(level);
        let Some(o) = &self.owner else { return Ok(()) };
        if o.priority() <= level {
            return Ok(());
        }
        chain::lend_here(o, level).map(|_| ()).ok_or(())
    }
}

/// Rounds of the spin before parking; round `k` pauses `SPIN_PAUSES << k`
/// times, then looks at the lock and at whether its holder may still run.
const SPIN_ROUNDS: u32 = 5;
/// Pauses of the spin's first round.
const SPIN_PAUSES: u32 = 4;

/// A mutual exclusion lock for user threads.
pub struct Mutex<T> {
    state: AtomicU8,
    /// Rounds spun, for the tests of the spin's bounds.
    #[cfg(test)]
    spun: std::sync::atomic::AtomicU32,
    queue: SpinLock<Queue>,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives one thread at a time access to the value.
unsafe impl<T: Send> Send for Mutex<T> {}
// SAFETY: as above; sharing the mutex shares `&mut T` one holder at a time.
unsafe impl<T: Send> Sync for Mutex<T> {}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("Mutex").field("value", &*g).finish(),
            None => f.debug_struct("Mutex").field("value", &"<locked>").finish(),
        }
    }
}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            state: AtomicU8::new(0),
            #[cfg(test)]
            spun: std::sync::atomic::AtomicU32::new(0),
            queue: SpinLock::new(Queue { waiters: VecDeque::new(), owner: None, lent: None }),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks, parking the calling thread while another holds the lock.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if self
            .state
            .compare_exchange_weak(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        } else if levels_in_use() {
            self.own();
        }
        MutexGuard { mutex: self }
    }

    /// Records the calling user thread as the holder, which it just became, and
    /// lends it the level of the highest waiter still queued ("The holder").
    #[cold]
    #[inline(never)]
    fn own(&self) {
        let Some(me) = crate::processor::current_task_ref() else { return };
        let mut q = self.queue.lock();
        // Ours until our unlock, which `OWNED` sends to the slow path.
        self.state.fetch_or(OWNED, Ordering::Relaxed);
        q.owner = Some(me);
        if let Some(level) = q.top_level() {
            q.lend(level);
        }
    }

    /// Locks if that needs no waiting.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & LOCKED == 0 {
            match self.state.compare_exchange_weak(
                s,
                s | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if levels_in_use() {
                        self.own();
                    }
                    return Some(MutexGuard { mutex: self });
                }
                Err(now) => s = now,
            }
        }
        None
    }

    #[cold]
    fn lock_slow(&self) {
        if self.spin() {
            return;
        }
        let since = std::time::Instant::now();
        let mut woken = false;
        // This thread's link for the chain walk, once levels exist (`chain.rs`).
        let mut linked: Option<TaskRef> = None;
        loop {
            if let Some(g) = self.try_lock() {
                // The caller builds its own guard.
                std::mem::forget(g);
                if let Some(me) = &linked {
                    chain::unmark(me);
                }
                return;
            }
            if linked.is_none() && levels_in_use() {
                linked = crate::processor::current_task_ref();
                if let Some(me) = &linked {
                    chain::mark(me, &self.queue);
                }
            }
            let waiter = Waiter::new();
            let handed = std::sync::atomic::AtomicBool::new(false);
            // Beaten again after a long wait: to the front, and hand-offs from now on.
            let starving = woken && since.elapsed() >= STARVE_AFTER;
            {
                // Step 1.
                let mut q = self.queue.lock();
                let s = self.state.load(Ordering::Relaxed);
                if s & LOCKED == 0 {
                    continue;
                }
                // Read under the queue lock, after the link: a walk that raised us since
                // either finds our entry below or ran before this read (`chain.rs`).
                let level = if linked.is_some() { my_level() } else { NO_LEVEL };
                if level != NO_LEVEL && q.lend_or_walk(Priority::from_u8(level)).is_err() {
                    // The holder is blocked itself: lend along the chain with no queue
                    // lock held, then queue.
                    drop(q);
                    chain::walk(linked.clone().expect("linked"), Priority::from_u8(level));
                    continue;
                }
                // Step 2.
                let want = s | PARKED | if starving { STARVING } else { 0 };
                if self
                    .state
                    .compare_exchange(s, want, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                let task = linked.as_ref().map_or(0, |t| &**t as *const Task as usize);
                let me = Queued { waiter: waiter.as_ref(), level, task, handed: &handed, since };
                if starving {
                    q.waiters.push_front(me);
                } else {
                    q.waiters.push_back(me);
                }
                waiter.wait_unlocking(q, WaitReason::Mutex(self as *const Self as usize));
            }
            if handed.load(Ordering::Acquire) {
                // The unlocker kept it locked for us ("Starvation").
                if levels_in_use() {
                    self.own();
                }
                if let Some(me) = &linked {
                    chain::unmark(me);
                }
                return;
            }
            // Step 3: go round again.
            woken = true;
        }
    }

    /// The bounded adaptive spin before parking (see "Spinning" in the module
    /// docs); whether it took the lock.
    #[inline(never)]
    fn spin(&self) -> bool {
        let watch = crate::processor::SpinWatch::here();
        let rounds = match &watch {
            // An OS thread or a detached one: a short blind spin, as before.
            None => 1,
            Some(w) if !w.holder_may_run() => 0,
            Some(_) => SPIN_ROUNDS,
        };
        for round in 0..rounds {
            #[cfg(test)]
            self.spun.fetch_add(1, Ordering::Relaxed);
            for _ in 0..SPIN_PAUSES << round {
                std::hint::spin_loop();
            }
            // Test before the locked instruction: a spinner that writes the
            // line while it is held takes it from the holder.
            if self.state.load(Ordering::Relaxed) & LOCKED == 0 {
                if let Some(g) = self.try_lock() {
                    std::mem::forget(g);
                    return true;
                }
            }
            if watch.as_ref().is_some_and(|w| !w.holder_may_run()) {
                return false;
            }
        }
        false
    }

    #[inline]
    fn unlock(&self) {
        if self.state.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_err() {
            self.unlock_slow();
        }
    }

    #[cold]
    fn unlock_slow(&self) {
        let mut q = self.queue.lock();
        let first = q.waiters.pop_front();
        let owner = q.owner.take();
        let lent = q.lent.take();
        let more = !q.waiters.is_empty();
        let handed = match &first {
            Some(w) if self.state.load(Ordering::Relaxed) & STARVING != 0 => {
                // "Starvation": the lock goes to the first waiter, still locked. The mode
                // ends with the last waiter, or one that did not wait long.
                let starving = more && w.since.elapsed() >= STARVE_AFTER;
                let state = LOCKED | if more { PARKED } else { 0 };
                self.state.store(state | if starving { STARVING } else { 0 }, Ordering::Release);
                // SAFETY: the waiter is parked until the wake-up below, so its flag,
                // on its stack, is alive.
                unsafe { (*w.handed).store(true, Ordering::Release) };
                true
            }
            _ => false,
        };
        if !handed {
            self.state.store(if more { PARKED } else { 0 }, Ordering::Release);
        }
        drop(q);
        if let (Some(level), Some(o)) = (lent, &owner) {
            // "Inheritance", step 3: back to the level the mutexes it still holds lend,
            // or its own, before the wake-up.
            crate::priority::give_back(o, level);
        }
        drop(owner);
        if let Some(w) = first {
            // SAFETY: dequeued under the lock: woken only here, wait in progress.
            unsafe { w.waiter.wake() };
        }
    }

    /// How many threads are queued (parked) on the lock now. For tests that must
    /// know a waiter is queued before they go on, whatever order the scheduler ran
    /// the threads in; not a synchronisation primitive.
    #[doc(hidden)]
    pub fn queued_waiters(&self) -> usize {
        self.queue.lock().waiters.len()
    }

    /// The value, through exclusive access to the mutex.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

/// The calling thread's level as a waiter records it: a user thread's effective level,
/// [`NO_LEVEL`] for an OS thread.
fn my_level() -> u8 {
    crate::processor::current_task_ptr().map_or(NO_LEVEL, |t| {
        // SAFETY: the calling thread's own task, alive while it runs.
        unsafe { t.as_ref() }.priority().as_u8()
    })
}

/// Holds a [`Mutex`] locked; unlocks on drop.
#[must_use = "dropping the guard unlocks the mutex at once"]
pub struct MutexGuard<'a, T> {
    pub(crate) mutex: &'a Mutex<T>,
}

impl<'a, T> MutexGuard<'a, T> {
    /// The mutex this guard holds.
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.mutex
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` is unique.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.mutex.unlock();
    }
}

impl<T: fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{sleep, spawn, Runtime};
    use std::sync::Arc;
    use std::time::Duration;

    /// Locks `m` while its holder sleeps holding it; returns the rounds the
    /// locker spun.
    ///
    /// The locker starts only once the holder is parked (its context saved, off
    /// every processor), and it is the test's main thread, so no other user
    /// thread is on a processor then: a spin now could only be a wrong one.
    /// (Locking before the park, or from a thread spawned while the main thread
    /// still runs, rightly spins while some other processor may hold it.)
    fn spun_while_the_holder_sleeps(processors: usize) -> u32 {
        let rt = Runtime::builder().processors(processors).build().unwrap();
        rt.block_on(move || {
            let m = Arc::new(Mutex::new(0u32));
            let (held_tx, held_rx) = crate::sync::channel(1);
            let m2 = m.clone();
            let holder = spawn(move || {
                let mut g = m2.lock();
                held_tx.send(crate::processor::current_task_ref().expect("a user thread")).unwrap();
                // Descheduled, holding the lock: parked on the timers.
                sleep(Duration::from_millis(50));
                *g += 1;
            });
            let task = held_rx.recv().unwrap();
            while !task.is_parked() {
                crate::yield_now();
            }
            *m.lock() += 1;
            holder.join().unwrap();
            assert_eq!(*m.lock(), 2);
            m.spun.load(Ordering::Relaxed)
        })
        .unwrap()
    }

    #[test]
    fn a_waiter_does_not_spin_while_the_holder_is_off_every_processor() {
        assert_eq!(spun_while_the_holder_sleeps(2), 0, "the holder sleeps: nothing to wait for");
    }

    #[test]
    fn a_waiter_does_not_spin_on_one_processor() {
        assert_eq!(spun_while_the_holder_sleeps(1), 0, "the holder cannot run meanwhile");
    }
}
