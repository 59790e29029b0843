//! Waiting and waking: the queue every primitive of the library parks its
//! waiters in, for user threads and kernel threads alike.
//!
//! A primitive keeps a [`Queue`] inside its C object (glibc's type sizes, so
//! the queue is three words it lends: a lock word and the two ends of a
//! doubly linked list of [`Waiter`]s that live on the waiting threads'
//! stacks). Zero bits are an empty, unlocked queue, so the static
//! initializers (`PTHREAD_MUTEX_INITIALIZER`...) need nothing else.
//!
//! # The protocol
//!
//! 1. A waiter takes the queue's lock, checks the condition it waits for,
//!    links a `Waiter` (its `woken` word 0) behind every waiter of its
//!    priority or higher (its `SCHED_FIFO`/`SCHED_RR` priority, 0 for the
//!    other policies: first come, first served among equals), drops the lock, and
//!    waits for `woken` to become 1: a user thread parks (the runtime's park
//!    token), a kernel thread waits on the word with `FUTEX_WAIT`.
//! 2. A waker takes the lock, unlinks waiters, drops the lock, and for each:
//!    clones the user thread's handle (if any), stores `woken = 1`, then
//!    unparks the clone or `FUTEX_WAKE`s the word. After the store the
//!    waiter may return and its frame be gone, so the waker touches nothing
//!    of it but the word's address (a stray `FUTEX_WAKE` on reused memory is
//!    at worst a spurious wake-up, which every waiter absorbs).
//! 3. No wake-up is lost: a waker can only unlink a waiter that is linked, so
//!    after step 1's unlock; the park token (or the futex word) remembers a
//!    wake-up that comes before the waiter parks.
//! 4. A waiter that gives up (its deadline passed, or it was cancelled)
//!    takes the lock: still linked, it unlinks itself and returns the
//!    reason; already unlinked, a waker has committed to it, so it waits for
//!    `woken` (a moment) and returns [`Outcome::Woken`] — the primitive then
//!    owns whatever the wake-up handed it, and a condition variable passes a
//!    signal on rather than lose it.
//!
//! The lock is a spin lock: it is held only for a few list operations, never
//! across a park, and never preempted (the runtime does not preempt the
//! library's own code, `schedlab_rt`'s `shared-library` preemption rule).

use schedlab_rt::ring::{event, Event};
use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// Why [`Waiter::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A waker unlinked this waiter (and possibly handed it something).
    Woken,
    /// The deadline passed first; the waiter is no longer linked.
    TimedOut,
    /// The thread was cancelled at this cancellation point; not linked.
    Cancelled,
    /// A signal handler without `SA_RESTART` ran on the thread during an
    /// interruptible wait ([`Waiter::interruptible`]: `sem_wait`'s `EINTR`);
    /// not linked.
    Interrupted,
}

/// A point in time on one of the clocks POSIX lets a wait name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    pub(crate) clock: libc::clockid_t,
    pub(crate) at: libc::timespec,
}

impl Deadline {
    /// Time left, or `None` once it has passed.
    pub(crate) fn remaining(&self) -> Option<std::time::Duration> {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: an out-parameter on our stack.
        unsafe { libc::clock_gettime(self.clock, &mut now) };
        let ns = |t: &libc::timespec| i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec);
        let left = ns(&self.at) - ns(&now);
        (left > 0).then(|| std::time::Duration::from_nanos(left.min(u64::MAX as i128) as u64))
    }

    /// Whether `ts` is a valid absolute time (`EINVAL` otherwise, as POSIX
    /// asks even when the wait would not block).
    pub(crate) fn valid(ts: &libc::timespec) -> bool {
        (0..1_000_000_000).contains(&ts.tv_nsec)
    }
}

/// A waiting thread, on its own stack while linked.
pub(crate) struct Waiter {
    next: Cell<*const Waiter>,
    prev: Cell<*const Waiter>,
    linked: Cell<bool>,
    woken: AtomicU32,
    /// A user thread's own handle (`ThreadData::own_handle`, alive while the
    /// thread waits), or null for a kernel thread.
    user: *const schedlab_rt::Thread,
    /// A signal handler that runs on the thread ends the wait
    /// ([`Outcome::Interrupted`]).
    interruptible: Cell<bool>,
    /// What the waiter waits as (a read-write lock's reader or writer...),
    /// or what a waker hands it; the primitive's own meaning.
    pub(crate) tag: Cell<u32>,
    /// Its place in the queue (`schedparam::wait_priority`, or more: [`Waiter::at_least`],
    /// [`Locked::reposition`]); changed only under the queue's lock while linked.
    prio: Cell<i32>,
}

// SAFETY: the cells are touched only under the owning queue's lock (links)
// or by the waiter itself before linking / after its wait returned.
unsafe impl Sync for Waiter {}

impl Waiter {
    /// A waiter for the calling thread.
    #[inline]
    pub(crate) fn new(tag: u32) -> Waiter {
        let me = crate::thread::current();
        let user = match me.kind.get() {
            crate::thread::Kind::User => me.own_handle().map_or(ptr::null(), |t| t as *const _),
            crate::thread::Kind::Kernel => {
                // Attaches the kernel thread if the runtime runs (a
                // wake-up it sends later reaches user threads).
                crate::runtime::enter();
                ptr::null()
            }
        };
        Waiter {
            next: Cell::new(ptr::null()),
            prev: Cell::new(ptr::null()),
            linked: Cell::new(false),
            woken: AtomicU32::new(0),
            user,
            interruptible: Cell::new(false),
            tag: Cell::new(tag),
            prio: Cell::new(crate::schedparam::wait_priority(me.sched.load(Ordering::Relaxed))),
        }
    }

    /// Makes the wait end when a signal handler without `SA_RESTART` runs on
    /// the thread, as `sem_wait` must (`EINTR`; with `SA_RESTART` Linux
    /// restarts it, signal(7)); other waits go on (a condition variable's
    /// may instead return, spuriously).
    pub(crate) fn interruptible(self) -> Waiter {
        self.interruptible.set(true);
        self
    }

    /// Queues the waiter at `prio` if that is higher than its own (before it is
    /// linked): a PI mutex's waiter that holds another PI mutex queues at what it is lent
    /// (`prio.rs`, "Chains").
    pub(crate) fn at_least(&self, prio: i32) {
        self.prio.set(self.prio.get().max(prio));
    }

    /// Step 1's wait (module docs): `self` must have been linked in `q` and
    /// the lock dropped. Waits until woken, until `deadline`, or until the
    /// thread is cancelled as `cancel` allows.
    #[inline]
    pub(crate) fn wait(
        &self,
        q: &Queue<'_>,
        deadline: Option<&Deadline>,
        cancel: Cancel,
    ) -> Outcome {
        if deadline.is_some() || self.interruptible.get() || self.user.is_null() {
            return self.wait_other(q, deadline, cancel);
        }
        // The common case, kept small enough to inline into the primitive:
        // an untimed, uninterruptible wait of a user thread.
        loop {
            if self.woken.load(Ordering::Acquire) != 0 {
                return Outcome::Woken;
            }
            if cancel != Cancel::Never && crate::cancel::acts_here(cancel == Cancel::Point) {
                return self.give_up(q, Outcome::Cancelled);
            }
            schedlab_rt::park();
        }
    }

    /// [`Waiter::wait`] with a deadline, interruptible, or on a kernel thread.
    #[inline(never)]
    fn wait_other(&self, q: &Queue<'_>, deadline: Option<&Deadline>, cancel: Cancel) -> Outcome {
        // An interruptible wait ends for a handler that would end a system
        // call with `EINTR`, and goes on after one with `SA_RESTART` (as
        // Linux restarts `sem_wait`: signal(7)). `signal.rs` counts a
        // restarting delivery in `signals_restart` before `signals_seen`:
        // read in that order, a delivery between the reads only makes the
        // first difference smaller.
        let d = crate::thread::current();
        let counts = || {
            let restart = d.signals_restart.load(Ordering::Acquire);
            (restart, d.signals_seen.load(Ordering::Acquire))
        };
        let (restart0, seen0) = if self.interruptible.get() { counts() } else { (0, 0) };
        let interrupted = || {
            let (restart, seen) = counts();
            seen.wrapping_sub(seen0) > restart.wrapping_sub(restart0)
        };
        loop {
            if self.woken.load(Ordering::Acquire) != 0 {
                return Outcome::Woken;
            }
            if self.interruptible.get() && interrupted() {
                return self.give_up(q, Outcome::Interrupted);
            }
            if cancel != Cancel::Never && crate::cancel::acts_here(cancel == Cancel::Point) {
                return self.give_up(q, Outcome::Cancelled);
            }
            let left = match deadline {
                None => None,
                Some(d) => match d.remaining() {
                    Some(left) => Some(left),
                    None => return self.give_up(q, Outcome::TimedOut),
                },
            };
            match (!self.user.is_null(), left) {
                (true, None) => schedlab_rt::park(),
                (true, Some(left)) => schedlab_rt::park_timeout(left),
                (false, left) => {
                    event(Event::FutexWait, self as *const Waiter as u64);
                    if futex_wait(&self.woken, 0, left) && self.interruptible.get() {
                        return self.give_up(q, Outcome::Interrupted);
                    }
                }
            }
        }
    }

    /// Step 4 (module docs).
    #[cold]
    fn give_up(&self, q: &Queue<'_>, why: Outcome) -> Outcome {
        let g = q.lock();
        if self.linked.get() {
            g.unlink(self);
            return why;
        }
        drop(g);
        while self.woken.load(Ordering::Acquire) == 0 {
            match !self.user.is_null() {
                true => schedlab_rt::yield_now(),
                false => {
                    futex_wait(&self.woken, 0, None);
                }
            }
        }
        Outcome::Woken
    }
}

/// Which cancellations end a wait with [`Outcome::Cancelled`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cancel {
    /// A cancellation point (`pthread_cond_wait`, `sem_wait`, `pthread_join`):
    /// any pending cancellation, deferred or asynchronous.
    Point,
    /// Not a cancellation point, but a thread whose cancellation type is
    /// asynchronous acts on one at any moment, so also while it waits here
    /// (a mutex or read-write lock).
    Async,
    /// None (the wait must finish: a barrier, a condition variable's
    /// hand-back of a signal).
    Never,
}

/// A waiter unlinked under the lock, to be woken after it is dropped.
pub(crate) struct Unlinked(*const Waiter);

impl Unlinked {
    /// Step 2's wake-up (module docs).
    pub(crate) fn wake(self) {
        let w = self.0;
        event(Event::Unlinked, w as u64);
        // SAFETY: the waiter waits until `woken` is set, so it is alive up to
        // the store; after it we only use the clone and the word's address.
        let user = unsafe { (*w).user.as_ref().cloned() };
        // SAFETY: as above.
        let word = unsafe { &(*w).woken } as *const AtomicU32;
        // SAFETY: as above.
        unsafe { (*word).store(1, Ordering::Release) };
        match user {
            Some(t) => {
                // A user thread exists, so the runtime does: the waker (perhaps
                // a kernel thread) must be attached to reach it.
                crate::runtime::enter();
                t.unpark()
            }
            None => futex_wake(word, 1),
        }
    }
}

/// A queue lent by a C object: its lock word and list ends.
pub(crate) struct Queue<'a> {
    lock: &'a AtomicU32,
    bit: u32,
    head: &'a AtomicPtr<Waiter>,
    tail: &'a AtomicPtr<Waiter>,
}

impl<'a> Queue<'a> {
    /// A view of the queue whose lock is `bit` of `lock`.
    pub(crate) fn new(
        lock: &'a AtomicU32,
        bit: u32,
        head: &'a AtomicPtr<Waiter>,
        tail: &'a AtomicPtr<Waiter>,
    ) -> Queue<'a> {
        Queue { lock, bit, head, tail }
    }

    /// Takes the queue's lock if it is free, without waiting: for callers
    /// that must never spin on it (`sem_post` in a signal handler, which may
    /// have interrupted the holder on its own thread).
    pub(crate) fn try_lock(&self) -> Option<Locked<'_, 'a>> {
        let s = self.lock.fetch_or(self.bit, Ordering::Acquire);
        // `then`, not `then_some`: a guard built and dropped when the lock
        // was taken would release the holder's lock.
        (s & self.bit == 0).then(|| Locked { q: self })
    }

    /// Takes the queue's lock. Inline, its wait apart: the primitives' paths (a condition
    /// variable's signal and wait) are counted in instructions (docs/PTHREAD.md, "Speed"),
    /// and a call with its prologue cost them 58 more per hand-off.
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_, 'a> {
        let s = self.lock.fetch_or(self.bit, Ordering::Acquire);
        if s & self.bit == 0 {
            return Locked { q: self };
        }
        self.lock_contended()
    }

    /// [`Queue::lock`] when it is held: spins, then yields.
    #[cold]
    fn lock_contended(&self) -> Locked<'_, 'a> {
        let mut spins = 0u32;
        loop {
            while self.lock.load(Ordering::Relaxed) & self.bit != 0 {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    // The holder's kernel thread was descheduled.
                    crate::sched::yield_any();
                }
            }
            let s = self.lock.fetch_or(self.bit, Ordering::Acquire);
            if s & self.bit == 0 {
                return Locked { q: self };
            }
        }
    }
}

/// The queue, locked.
pub(crate) struct Locked<'q, 'a> {
    q: &'q Queue<'a>,
}

impl Locked<'_, '_> {
    /// Links `w` behind every waiter of its priority or higher (module
    /// docs, step 1). The caller then drops the lock and calls
    /// [`Waiter::wait`].
    pub(crate) fn push(&self, w: &Waiter) {
        event(Event::Linked, w as *const Waiter as u64);
        // The waiter to link after: the tail, unless it has a lower priority
        // (never, when no thread has a real-time policy).
        let mut after = self.q.tail.load(Ordering::Relaxed).cast_const();
        // SAFETY: linked waiters are alive (they wait for their wake-up or
        // unlink themselves under this lock).
        while !after.is_null() && unsafe { (*after).prio.get() } < w.prio.get() {
            // SAFETY: as above.
            after = unsafe { (*after).prev.get() };
        }
        self.link_after(w, after);
    }

    /// Links `w` after `after` (at the head when null).
    fn link_after(&self, w: &Waiter, after: *const Waiter) {
        let next = if after.is_null() {
            self.q.head.load(Ordering::Relaxed).cast_const()
        } else {
            // SAFETY: as in `push`.
            unsafe { (*after).next.get() }
        };
        w.prev.set(after);
        w.next.set(next);
        w.linked.set(true);
        let p = w as *const Waiter;
        if after.is_null() {
            self.q.head.store(p.cast_mut(), Ordering::Relaxed);
        } else {
            // SAFETY: as in `push`.
            unsafe { (*after).next.set(p) };
        }
        if next.is_null() {
            self.q.tail.store(p.cast_mut(), Ordering::Relaxed);
        } else {
            // SAFETY: as in `push`.
            unsafe { (*next).prev.set(p) };
        }
    }

    /// Whether no waiter is linked.
    pub(crate) fn is_empty(&self) -> bool {
        self.q.head.load(Ordering::Relaxed).is_null()
    }

    /// The first waiter's tag, if any.
    pub(crate) fn front_tag(&self) -> Option<u32> {
        let h = self.q.head.load(Ordering::Relaxed);
        // SAFETY: as in `push`.
        (!h.is_null()).then(|| unsafe { (*h).tag.get() })
    }

    /// The first waiter's priority (the highest linked, step 1), 0 with none.
    pub(crate) fn front_prio(&self) -> i32 {
        let h = self.q.head.load(Ordering::Relaxed);
        if h.is_null() {
            return 0;
        }
        // SAFETY: as in `push`.
        unsafe { (*h).prio.get() }
    }

    /// Moves the linked waiter `w` to its place for priority `prio` (behind every waiter
    /// of that priority or higher, as [`Locked::push`]): a PI mutex's waiter whose loan
    /// changed while it waits (`prio.rs`, "Chains"). Whether `w` is still linked (an
    /// unlinked one was woken or gave up, and is left alone).
    pub(crate) fn reposition(&self, w: &Waiter, prio: i32) -> bool {
        if !w.linked.get() {
            return false;
        }
        if w.prio.get() != prio {
            self.unlink(w);
            w.prio.set(prio);
            self.push(w);
        }
        true
    }

    /// Unlinks the first waiter.
    pub(crate) fn pop(&self) -> Option<Unlinked> {
        let h = self.q.head.load(Ordering::Relaxed);
        if h.is_null() {
            return None;
        }
        // SAFETY: as in `push`.
        self.unlink(unsafe { &*h });
        Some(Unlinked(h))
    }

    fn unlink(&self, w: &Waiter) {
        let (prev, next) = (w.prev.get(), w.next.get());
        if prev.is_null() {
            self.q.head.store(next.cast_mut(), Ordering::Relaxed);
        } else {
            // SAFETY: as in `push`.
            unsafe { (*prev).next.set(next) };
        }
        if next.is_null() {
            self.q.tail.store(prev.cast_mut(), Ordering::Relaxed);
        } else {
            // SAFETY: as in `push`.
            unsafe { (*next).prev.set(prev) };
        }
        w.linked.set(false);
    }

    /// Moves the first waiter to the tail: one that cannot go yet, in front
    /// of one that can (a reader ahead of a writer, when writers are preferred).
    pub(crate) fn rotate(&self) {
        if let Some(Unlinked(w)) = self.pop() {
            // SAFETY: just unlinked, still waiting.
            self.link_after(unsafe { &*w }, self.q.tail.load(Ordering::Relaxed));
        }
    }
}

impl Drop for Locked<'_, '_> {
    fn drop(&mut self) {
        self.q.lock.fetch_and(!self.q.bit, Ordering::Release);
    }
}

/// `FUTEX_WAIT` on `word` while it holds `expected`, for at most `left`.
/// Returns whether a signal handler interrupted it (`EINTR`).
pub(crate) fn futex_wait(
    word: &AtomicU32,
    expected: u32,
    left: Option<std::time::Duration>,
) -> bool {
    let ts = left.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts.as_ref().map_or(ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: a futex wait on a word we hold a reference to; the kernel only
    // reads it and the timeout. errno is left as it was: a pthread function
    // that succeeds does not change it (glibc's do not).
    unsafe {
        let errno = *libc::__errno_location();
        let r = libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            tsp,
        );
        let interrupted = r == -1 && *libc::__errno_location() == libc::EINTR;
        *libc::__errno_location() = errno;
        interrupted
    }
}

/// `FUTEX_WAKE` of up to `n` waiters on `word` (which may be gone: the
/// kernel only uses the address as a key).
pub(crate) fn futex_wake(word: *const AtomicU32, n: i32) {
    // SAFETY: the kernel does not dereference the address for a wake; errno
    // is left as it was (a stale address may give EFAULT).
    unsafe {
        let errno = *libc::__errno_location();
        libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n);
        *libc::__errno_location() = errno;
    }
}
