//! Mutexes: `pthread_mutex_*` and `pthread_mutexattr_*`.
//!
//! # The object
//!
//! A `pthread_mutex_t` keeps glibc's size (40 bytes) and the one field its
//! static initializers set, `__kind` (an `int` at byte 16): all zeros is an
//! unlocked mutex of the default kind, and
//! `PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP` / `..._ERRORCHECK_...` /
//! `..._ADAPTIVE_...` (kind 1 / 2 / 3) work unchanged. The rest is ours:
//!
//! | bytes | glibc's field        | ours                                          |
//! |-------|----------------------|-----------------------------------------------|
//! | 0     | `__lock`             | `state`: the lock word (table below)          |
//! | 4     | `__count`            | recursion count (recursive kinds)             |
//! | 8     | `__owner`            | the holder's thread id (`ThreadData::id`), 0 when free |
//! | 12    | `__nusers`           | `flags`: bit 0 the wait queue's lock, `INCONSISTENT`, `NOTRECOVERABLE` |
//! | 16    | `__kind`             | glibc's kind bits, unchanged                  |
//! | 20    | `__spins`, `__elision` | the priority ceiling (`PTHREAD_PRIO_PROTECT`) |
//! | 24    | `__list`             | the wait queue's head and tail (`wait.rs`)    |
//!
//! `__kind` holds the type in its low two bits (normal 0, recursive 1,
//! errorcheck 2, adaptive 3), and glibc's flags: robust 16, priority
//! inheritance 32, priority protection 64, process-shared 128. A mutex whose
//! kind has the process-shared bit is glibc's: made by glibc's
//! `pthread_mutex_init` (its waiters may be in another process) and handed
//! to glibc for every operation. `pthread_mutex_destroy` stores -1 there, as
//! glibc's does, so a destroyed mutex goes to glibc, which answers `EINVAL`.
//!
//! # The state word (as `schedlab_rt::sync::Mutex`)
//!
//! | value             | meaning                                         |
//! |-------------------|-------------------------------------------------|
//! | 0                 | unlocked, nobody queued                         |
//! | `LOCKED`          | locked, nobody queued                           |
//! | `LOCKED \| PARKED` | locked, waiters queued                          |
//! | `PARKED`          | unlocked, waiters queued (one was just woken)   |
//!
//! Uncontended, a lock and an unlock are one compare-and-swap each
//! (`0 -> LOCKED`, `LOCKED -> 0`). Contended:
//!
//! Locking, slow path (after a short spin, which helps only when the holder
//! runs on another processor):
//! 1. Take the queue lock. If the mutex is unlocked now, drop it and try
//!    again (keeping `PARKED`).
//! 2. Set `PARKED` with a CAS (retry from 1 if the state moved), link a
//!    waiter, drop the queue lock, wait (`wait.rs`: a user thread parks, a
//!    kernel thread waits on a futex).
//! 3. Woken, try again from the top: a thread that arrives meanwhile may
//!    take the lock first (no hand-off, so no convoys).
//! 4. A timed lock whose deadline passes while it is linked unlinks itself
//!    and clears `PARKED` if the queue is now empty. One that an unlock
//!    already unlinked counts as woken (`wait.rs` step 4) and tries the lock
//!    once more before it may give up, so the wake-up it took is never lost.
//!
//! Unlocking, slow path (`PARKED` was set so the fast CAS failed): take the
//! queue lock, unlink the first waiter, store `PARKED` if more remain or 0
//! otherwise (this also unlocks), drop the queue lock, wake the waiter.
//!
//! No waiter sleeps through an unlock: a waiter links itself only while
//! `LOCKED | PARKED` holds (step 2, under the queue lock), so that unlock
//! takes the slow path, which cannot run before the queue lock is free.
//!
//! # Kinds
//!
//! As glibc's: a normal (or default, or adaptive) mutex relocked by its
//! holder deadlocks (the thread waits for good; `pthread_mutex_timedlock`
//! times out), and its unlock checks nothing; an error-checking one answers
//! `EDEADLK` to a relock and `EPERM` to an unlock by a thread that does not
//! hold it; a recursive one counts (`EAGAIN` past `u32::MAX`); `trylock` of
//! a held mutex is `EBUSY` except for a recursive mutex's holder.
//!
//! # Robust mutexes
//!
//! A user thread that ends holding robust mutexes (each holder keeps a list
//! of them in its `ThreadData`) releases them on its way out
//! ([`release_robust`], from `thread.rs`'s `finish`) with `INCONSISTENT`
//! set: the next locker gets the mutex with `EOWNERDEAD`;
//! `pthread_mutex_consistent` clears the flag; an unlock without it marks
//! the mutex `NOTRECOVERABLE`, wakes every waiter, and every later lock
//! fails with `ENOTRECOVERABLE`. The program's initial thread is a kernel
//! thread whose end ends the process, so only user threads need this. (glibc
//! makes its robust mutexes process-shared too, for the kernel's robust
//! list; ours are private unless the attribute says otherwise.)
//!
//! # Priority protocols
//!
//! `PTHREAD_PRIO_INHERIT`: a waiter lends its priority (its `SCHED_FIFO`/`SCHED_RR`
//! priority, or what it is lent itself) to the holder, which runs at the highest priority
//! any waiter of any PI mutex it holds lends, and drops back to the highest still lent (or
//! its own) at unlock; a holder that waits on another PI mutex passes a loan on down the
//! chain, and a waiter that leaves takes it back along it (`prio.rs`, "Chains").
//! `PTHREAD_PRIO_PROTECT`: the holder runs at least at the mutex's ceiling
//! (`pthread_mutexattr_setprioceiling`, `pthread_mutex_setprioceiling`), and a caller whose
//! own priority is above the ceiling gets `EINVAL`. Both through `prio.rs` (its record and
//! protocol), from [`lock_full`] and [`unlock_full`] only: mutexes without a protocol
//! never reach it. A PI mutex's slow path is its own copy ([`Raw::acquire_slow_pi`]), which
//! takes `prio.rs`'s record before the queue lock. The holder moves at once in the
//! runtime's queues (`schedlab_rt::Thread::set_realtime`; a kernel thread through the
//! kernel). A waiter is still queued by priority, and an unlock still wakes the first (no
//! hand-off).

use crate::thread::{current, ThreadData};
use crate::wait::{Cancel, Deadline, Outcome, Queue, Waiter};
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

/// glibc's definitions, for process-shared mutexes.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_void};
    crate::glibc::real!(pthread_mutex_init: fn(*mut libc::pthread_mutex_t, *const libc::pthread_mutexattr_t) -> c_int);
    crate::glibc::real!(pthread_mutex_destroy: fn(*mut libc::pthread_mutex_t) -> c_int);
    crate::glibc::real!(pthread_mutex_lock: fn(*mut libc::pthread_mutex_t) -> c_int);
    crate::glibc::real!(pthread_mutex_trylock: fn(*mut libc::pthread_mutex_t) -> c_int);
    crate::glibc::real!(pthread_mutex_timedlock: fn(*mut libc::pthread_mutex_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_mutex_clocklock: fn(*mut libc::pthread_mutex_t, libc::clockid_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_mutex_unlock: fn(*mut libc::pthread_mutex_t) -> c_int);
    crate::glibc::real!(pthread_mutex_consistent: fn(*mut libc::pthread_mutex_t) -> c_int);
    crate::glibc::real!(pthread_mutex_getprioceiling: fn(*const libc::pthread_mutex_t, *mut c_int) -> c_int);
    crate::glibc::real!(pthread_mutex_setprioceiling: fn(*mut libc::pthread_mutex_t, c_int, *mut c_int) -> c_int);
}

const LOCKED: u32 = 1;
const PARKED: u32 = 2;

/// `flags` bits (bit 0 is the queue's lock).
const QUEUE_LOCK: u32 = 1;
const INCONSISTENT: u32 = 2;
const NOTRECOVERABLE: u32 = 4;

/// `__kind` bits (glibc's `PTHREAD_MUTEX_*_NP`).
const TYPE_MASK: i32 = 3;
const RECURSIVE: i32 = 1;
const ERRORCHECK: i32 = 2;
const ROBUST: i32 = 16;
const PRIO_INHERIT: i32 = 32;
const PRIO_PROTECT: i32 = 64;
const PSHARED: i32 = 128;
/// `PTHREAD_MUTEX_ELISION_NP | PTHREAD_MUTEX_NO_ELISION_NP`: hints glibc's
/// `pthread_mutexattr_settype` adds, which we ignore.
const ELISION: i32 = 256 | 512;

/// glibc's `pthread_mutexattr_t` bits (one `int`).
const ATTR_PROTOCOL_SHIFT: u32 = 28;
const ATTR_PROTOCOL_MASK: u32 = 0x3000_0000;
const ATTR_CEILING_SHIFT: u32 = 12;
const ATTR_CEILING_MASK: u32 = 0x00ff_f000;
const ATTR_ROBUST: u32 = 0x4000_0000;
const ATTR_PSHARED: u32 = 0x8000_0000;
const ATTR_FLAG_BITS: u32 = ATTR_ROBUST | ATTR_PSHARED | ATTR_PROTOCOL_MASK | ATTR_CEILING_MASK;

/// Rounds of the spin before queueing; round `k` pauses `SPIN_PAUSES << k`
/// times, then looks at the lock (124 pauses in all, a few microseconds),
/// as `schedlab_rt::sync::Mutex` does.
const SPIN_ROUNDS: u32 = 5;
/// Pauses of the spin's first round.
const SPIN_PAUSES: u32 = 4;

/// Our view of a `pthread_mutex_t` (module docs).
#[repr(C)]
pub(crate) struct Raw {
    state: AtomicU32,
    count: AtomicU32,
    owner: AtomicU32,
    flags: AtomicU32,
    kind: AtomicI32,
    ceiling: AtomicI32,
    head: AtomicPtr<Waiter>,
    tail: AtomicPtr<Waiter>,
}

const _: () = assert!(std::mem::size_of::<Raw>() == std::mem::size_of::<libc::pthread_mutex_t>());
const _: () = assert!(std::mem::size_of::<libc::pthread_mutex_t>() == 40);

/// Our view of `m`.
///
/// # Safety
///
/// `m` points to a `pthread_mutex_t` (40 bytes, 8-aligned) that outlives `'a`.
#[inline(always)]
unsafe fn raw<'a>(m: *const libc::pthread_mutex_t) -> &'a Raw {
    // SAFETY: same size and alignment; every field is an atomic over plain bytes.
    unsafe { &*m.cast::<Raw>() }
}

/// How a slow lock ended.
enum Acquired {
    Yes,
    TimedOut,
    NotRecoverable,
    /// An asynchronous cancellation came while it waited: the caller acts
    /// on it (`cancel::act`) once its own frame holds nothing to drop.
    Cancelled,
    /// An error-checking PI mutex whose holder waits, through a chain of PI
    /// mutexes, for the caller (`prio.rs`, "Deadlock").
    Deadlock,
}

impl Raw {
    /// The mutex's address: its key in `prio.rs`'s record.
    fn addr(&self) -> usize {
        self as *const Raw as usize
    }

    fn queue(&self) -> Queue<'_> {
        Queue::new(&self.flags, QUEUE_LOCK, &self.head, &self.tail)
    }

    #[inline]
    fn try_acquire(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & LOCKED == 0 {
            match self.state.compare_exchange_weak(
                s,
                s | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// What a slow-path lock does before it queues, each time round: a robust
    /// mutex made unrecoverable ends it, then up to `SPIN_ROUNDS` backed-off
    /// spins, then one more try. `Some` ends the lock; `None` goes on to queue.
    #[inline(always)]
    fn before_queueing(&self, round: &mut u32, robust: bool) -> Option<Acquired> {
        loop {
            if robust && self.flags.load(Ordering::Acquire) & NOTRECOVERABLE != 0 {
                return Some(Acquired::NotRecoverable);
            }
            if *round < SPIN_ROUNDS {
                // Back off before looking (the fast path's compare-and-swap
                // just failed): a spinner that reads the line at every pause
                // keeps taking it from the holder, whose unlock then waits
                // for it.
                for _ in 0..SPIN_PAUSES << *round {
                    std::hint::spin_loop();
                }
                *round += 1;
                if self.try_acquire() {
                    return Some(Acquired::Yes);
                }
                continue;
            }
            return self.try_acquire().then_some(Acquired::Yes);
        }
    }

    /// Locking, slow path (module docs, steps 1 to 4).
    #[cold]
    fn acquire_slow(&self, deadline: Option<&Deadline>, robust: bool, cancel: Cancel) -> Acquired {
        let mut round = 0;
        loop {
            if let Some(done) = self.before_queueing(&mut round, robust) {
                return done;
            }
            let w = Waiter::new(0);
            let q = self.queue();
            {
                // Step 1.
                let g = q.lock();
                if robust && self.flags.load(Ordering::Relaxed) & NOTRECOVERABLE != 0 {
                    continue;
                }
                let s = self.state.load(Ordering::Relaxed);
                if s & LOCKED == 0 {
                    continue;
                }
                // Step 2.
                if self
                    .state
                    .compare_exchange(s, s | PARKED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                g.push(&w);
            }
            let outcome = w.wait(&q, deadline, cancel);
            match outcome {
                // Step 3.
                Outcome::Woken => {}
                // Step 4.
                Outcome::TimedOut | Outcome::Cancelled | Outcome::Interrupted => {
                    let g = q.lock();
                    if g.is_empty() {
                        self.state.fetch_and(!PARKED, Ordering::Relaxed);
                    }
                    return match outcome {
                        Outcome::Cancelled => Acquired::Cancelled,
                        _ => Acquired::TimedOut,
                    };
                }
            }
        }
    }

    /// [`Raw::acquire_slow`] of a `PTHREAD_PRIO_INHERIT` mutex: the same steps, with
    /// `prio.rs`'s record taken before the queue lock. A waiter queues at its own
    /// priority or what it is lent, lends to the holder down the chain once it is linked,
    /// and takes the loan back, down the chain, if it gives up (`prio.rs`, step 2). An
    /// error-checking mutex (`errorcheck`) whose holder waits, through the chain, for the
    /// caller answers `EDEADLK` (`prio.rs`, "Deadlock").
    #[cold]
    fn acquire_slow_pi(
        &self,
        deadline: Option<&Deadline>,
        robust: bool,
        cancel: Cancel,
        errorcheck: bool,
    ) -> Acquired {
        let me = current();
        let mut round = 0;
        loop {
            if let Some(done) = self.before_queueing(&mut round, robust) {
                return done;
            }
            let w = Waiter::new(0);
            let q = self.queue();
            let moved_self = {
                let mut record = crate::prio::lock();
                // Step 1.
                let g = q.lock();
                if robust && self.flags.load(Ordering::Relaxed) & NOTRECOVERABLE != 0 {
                    continue;
                }
                let s = self.state.load(Ordering::Relaxed);
                if s & LOCKED == 0 {
                    continue;
                }
                if errorcheck && record.would_deadlock(self.addr(), me) {
                    return Acquired::Deadlock;
                }
                // Step 2.
                if self
                    .state
                    .compare_exchange(s, s | PARKED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                w.at_least(me.lent.load(Ordering::Relaxed));
                g.push(&w);
                let front = g.front_prio();
                drop(g);
                record.block(me, self.addr(), &w);
                record.lend(self.addr(), front)
            };
            if moved_self {
                crate::prio::apply_self(me);
            }
            let outcome = w.wait(&q, deadline, cancel);
            let moved_self = {
                let mut record = crate::prio::lock();
                record.unblock(me);
                match outcome {
                    // Step 3: the unlock took the mutex's row away before it woke us.
                    Outcome::Woken => false,
                    // Step 4, and the loan taken back down the chain.
                    Outcome::TimedOut | Outcome::Cancelled | Outcome::Interrupted => {
                        let g = q.lock();
                        if g.is_empty() {
                            self.state.fetch_and(!PARKED, Ordering::Relaxed);
                        }
                        let front = g.front_prio();
                        drop(g);
                        record.lend(self.addr(), front)
                    }
                }
            };
            if moved_self {
                crate::prio::apply_self(me);
            }
            match outcome {
                Outcome::Woken => {}
                Outcome::Cancelled => return Acquired::Cancelled,
                _ => return Acquired::TimedOut,
            }
        }
    }

    /// Unlocks (the owner fields already cleared).
    #[inline]
    fn release(&self) {
        if self.state.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_err() {
            self.release_slow();
        }
    }

    #[cold]
    fn release_slow(&self) {
        let q = self.queue();
        let g = q.lock();
        let w = g.pop();
        self.state.store(if g.is_empty() { 0 } else { PARKED }, Ordering::Release);
        drop(g);
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Unlocks a robust mutex for good: `NOTRECOVERABLE`, every waiter woken
    /// (they find the flag and fail).
    #[cold]
    fn release_unrecoverable(&self) {
        let q = self.queue();
        let g = q.lock();
        self.flags.fetch_or(NOTRECOVERABLE, Ordering::Release);
        self.state.store(if g.is_empty() { 0 } else { PARKED }, Ordering::Release);
        drop(g);
        loop {
            let g = q.lock();
            let w = g.pop();
            if g.is_empty() {
                self.state.fetch_and(!PARKED, Ordering::Relaxed);
            }
            drop(g);
            match w {
                Some(w) => w.wake(),
                None => break,
            }
        }
    }
}

/// What a lock call may do when the mutex is held.
#[derive(Clone, Copy)]
enum Mode<'d> {
    Block,
    Try,
    Until(&'d libc::timespec, libc::clockid_t),
}

/// Runs `f` on the calling thread's robust list (`ThreadData::robust`).
fn robust_list<R>(d: &ThreadData, f: impl FnOnce(&mut Vec<usize>) -> R) -> R {
    // SAFETY: only the thread itself touches its list, never re-entrantly
    // (`f` calls nothing that could reach it).
    f(unsafe { &mut *d.robust.get() })
}

/// Every lock function's body for a mutex that is not a plain normal one,
/// or is held (module docs, "Kinds" and "Robust mutexes").
#[cold]
fn lock_full(r: &Raw, mode: Mode<'_>, cancel: Cancel) -> c_int {
    let kind = r.kind.load(Ordering::Relaxed) & !ELISION;
    if kind & !(TYPE_MASK | ROBUST) != 0 {
        return lock_protocol(r, kind, mode, cancel);
    }
    lock_kind::<false>(r, kind, mode, cancel)
}

/// [`lock_full`] for a mutex with a priority protocol (or an invalid kind): its own
/// copy of the body, so that the mutexes without one pay nothing for the protocols.
#[cold]
fn lock_protocol(r: &Raw, kind: i32, mode: Mode<'_>, cancel: Cancel) -> c_int {
    if kind & !(TYPE_MASK | ROBUST | PRIO_INHERIT | PRIO_PROTECT) != 0 {
        return libc::EINVAL;
    }
    lock_kind::<true>(r, kind, mode, cancel)
}

/// The body of [`lock_full`]; `PROTOCOL`: `kind` may have a priority protocol.
#[inline(always)]
fn lock_kind<const PROTOCOL: bool>(r: &Raw, kind: i32, mode: Mode<'_>, cancel: Cancel) -> c_int {
    let ty = kind & TYPE_MASK;
    let robust = kind & ROBUST != 0;
    let me = current();
    if r.owner.load(Ordering::Relaxed) == me.id && r.state.load(Ordering::Relaxed) & LOCKED != 0 {
        match ty {
            RECURSIVE => {
                let c = r.count.load(Ordering::Relaxed);
                if c == u32::MAX {
                    return libc::EAGAIN;
                }
                r.count.store(c + 1, Ordering::Relaxed);
                return 0;
            }
            ERRORCHECK if !matches!(mode, Mode::Try) => return libc::EDEADLK,
            _ => {}
        }
    }
    if robust && r.flags.load(Ordering::Acquire) & NOTRECOVERABLE != 0 {
        return libc::ENOTRECOVERABLE;
    }
    if PROTOCOL
        && kind & PRIO_PROTECT != 0
        && crate::prio::own_priority(me) > r.ceiling.load(Ordering::Relaxed)
    {
        // POSIX: the caller's priority is above the ceiling.
        return libc::EINVAL;
    }
    if !r.try_acquire() {
        let deadline = match mode {
            Mode::Try => return libc::EBUSY,
            Mode::Block => None,
            Mode::Until(ts, clock) => {
                if !Deadline::valid(ts) {
                    return libc::EINVAL;
                }
                Some(Deadline { clock, at: *ts })
            }
        };
        let acquired = if PROTOCOL && kind & PRIO_INHERIT != 0 {
            r.acquire_slow_pi(deadline.as_ref(), robust, cancel, ty == ERRORCHECK)
        } else {
            r.acquire_slow(deadline.as_ref(), robust, cancel)
        };
        match acquired {
            Acquired::Yes => {}
            Acquired::TimedOut => return libc::ETIMEDOUT,
            Acquired::NotRecoverable => return libc::ENOTRECOVERABLE,
            Acquired::Deadlock => return libc::EDEADLK,
            Acquired::Cancelled => crate::cancel::act(),
        }
    }
    r.owner.store(me.id, Ordering::Relaxed);
    if ty == RECURSIVE {
        r.count.store(1, Ordering::Relaxed);
    }
    if PROTOCOL && kind & (PRIO_INHERIT | PRIO_PROTECT) != 0 {
        let e = protocol_held(r, kind, me);
        if e != 0 {
            // A kernel thread the kernel may not raise to a PP mutex's ceiling: not
            // locked, as glibc's (`prio.rs`, "Kernel threads").
            if ty == RECURSIVE {
                r.count.store(0, Ordering::Relaxed);
            }
            let lowered = crate::prio::lock().unhold(r.addr());
            r.owner.store(0, Ordering::Relaxed);
            r.release();
            if lowered {
                let _ = crate::prio::apply_self(me);
            }
            return e;
        }
    }
    if robust {
        robust_list(me, |l| l.push(r as *const Raw as usize));
        if r.flags.load(Ordering::Acquire) & INCONSISTENT != 0 {
            return libc::EOWNERDEAD;
        }
    }
    0
}

/// Locks `m` (the body of `pthread_mutex_lock`, for `cond.rs` too, which
/// relocks with `Cancel::Never`: a cancelled condition wait acts only once
/// it holds the mutex again). With `Cancel::Async`, a thread whose
/// cancellation type is asynchronous acts on a cancellation that comes while
/// it waits for the mutex, as it would at any other moment.
///
/// # Safety
///
/// C's contract for `pthread_mutex_lock`.
#[inline]
pub(crate) unsafe fn lock(m: *mut libc::pthread_mutex_t, cancel: Cancel) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    let kind = r.kind.load(Ordering::Relaxed);
    if kind == 0 || kind == 3 {
        let me = current().id;
        if r.state.compare_exchange_weak(0, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err()
            && !r.try_acquire()
        {
            // (A normal mutex relocked by its holder waits for good, as glibc's.)
            if let Acquired::Cancelled = r.acquire_slow(None, false, cancel) {
                crate::cancel::act();
            }
        }
        r.owner.store(me, Ordering::Relaxed);
        return 0;
    }
    if kind & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_lock()(m) };
    }
    lock_full(r, Mode::Block, cancel)
}

/// Unlocks `m` (the body of `pthread_mutex_unlock`, for `cond.rs` too).
///
/// # Safety
///
/// C's contract for `pthread_mutex_unlock`.
#[inline]
pub(crate) unsafe fn unlock(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    let kind = r.kind.load(Ordering::Relaxed);
    if kind == 0 || kind == 3 {
        r.owner.store(0, Ordering::Relaxed);
        r.release();
        return 0;
    }
    if kind & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_unlock()(m) };
    }
    unlock_full(r)
}

#[cold]
fn unlock_full(r: &Raw) -> c_int {
    let kind = r.kind.load(Ordering::Relaxed) & !ELISION;
    if kind & !(TYPE_MASK | ROBUST) != 0 {
        return unlock_protocol(r, kind);
    }
    unlock_kind::<false>(r, kind)
}

/// [`unlock_full`] for a mutex with a priority protocol (or an invalid kind), as
/// [`lock_protocol`].
#[cold]
fn unlock_protocol(r: &Raw, kind: i32) -> c_int {
    if kind & !(TYPE_MASK | ROBUST | PRIO_INHERIT | PRIO_PROTECT) != 0 {
        return libc::EINVAL;
    }
    unlock_kind::<true>(r, kind)
}

/// The body of [`unlock_full`]; `PROTOCOL` as in [`lock_kind`].
#[inline(always)]
fn unlock_kind<const PROTOCOL: bool>(r: &Raw, kind: i32) -> c_int {
    let ty = kind & TYPE_MASK;
    let robust = kind & ROBUST != 0;
    let protocol = PROTOCOL && kind & (PRIO_INHERIT | PRIO_PROTECT) != 0;
    if ty == RECURSIVE || ty == ERRORCHECK || robust {
        let me = current();
        if r.owner.load(Ordering::Relaxed) != me.id || r.state.load(Ordering::Relaxed) & LOCKED == 0
        {
            return libc::EPERM;
        }
        if ty == RECURSIVE {
            let c = r.count.load(Ordering::Relaxed);
            if c > 1 {
                r.count.store(c - 1, Ordering::Relaxed);
                return 0;
            }
            r.count.store(0, Ordering::Relaxed);
        }
        if robust {
            let at = r.addr();
            robust_list(me, |list| {
                if let Some(i) = list.iter().rposition(|&p| p == at) {
                    list.swap_remove(i);
                }
            });
            let lower = protocol && crate::prio::lock().unhold(at);
            r.owner.store(0, Ordering::Relaxed);
            if r.flags.fetch_and(!INCONSISTENT, Ordering::AcqRel) & INCONSISTENT != 0 {
                r.release_unrecoverable();
            } else {
                r.release();
            }
            if lower {
                let _ = crate::prio::apply_self(me);
            }
            return 0;
        }
    }
    // Released for good: the mutex lends nothing from now on, and a holder it raised is
    // lowered once the mutex is free (`prio.rs`, step 3).
    let lower = protocol && crate::prio::lock().unhold(r.addr());
    r.owner.store(0, Ordering::Relaxed);
    r.release();
    if lower {
        let _ = crate::prio::apply_self(current());
    }
    0
}

/// Step 1 of `prio.rs`: the caller `me` has just locked the protocol mutex `r`, which
/// lends it its ceiling (PP) or its first waiter's priority (PI, read under the queue
/// lock, inside the record's, so that a waiter linking meanwhile either sees the row or
/// is seen here). 0, or the kernel's error number for a kernel thread it may not raise.
#[cold]
fn protocol_held(r: &Raw, kind: i32, me: &ThreadData) -> c_int {
    let raised = {
        let mut record = crate::prio::lock();
        let lends = if kind & PRIO_PROTECT != 0 {
            r.ceiling.load(Ordering::Relaxed)
        } else {
            r.queue().lock().front_prio()
        };
        record.hold(r.addr(), me, lends)
    };
    if !raised {
        return 0;
    }
    let e = crate::prio::apply_self(me);
    // A PI loan the kernel refuses leaves a kernel thread as it was; a ceiling fails
    // the lock, as glibc's.
    if kind & PRIO_PROTECT != 0 {
        e
    } else {
        0
    }
}

/// Moves the waiter `w`, linked in the queue of the mutex at `mutex`, to its place for
/// priority `prio` (`prio.rs`, "Chains"); the priority of the queue's first waiter then,
/// or `None` if `w` is no longer linked.
pub(crate) fn reposition(mutex: usize, w: &Waiter, prio: i32) -> Option<i32> {
    // SAFETY: a mutex a thread waits on is alive while it waits (`prio.rs`, `Record`).
    let r = unsafe { &*(mutex as *const Raw) };
    let q = r.queue();
    let g = q.lock();
    g.reposition(w, prio).then(|| g.front_prio())
}

/// Releases the robust mutexes a user thread still holds as it ends (module
/// docs, "Robust mutexes"); called by `thread.rs` on the exiting thread.
pub(crate) fn release_robust(d: &ThreadData) {
    let held = robust_list(d, std::mem::take);
    for p in held {
        // SAFETY: a robust mutex this thread locked and has not unlocked:
        // still initialised (destroying a locked mutex is undefined).
        let r = unsafe { &*(p as *const Raw) };
        if r.owner.load(Ordering::Relaxed) != d.id {
            continue;
        }
        r.count.store(0, Ordering::Relaxed);
        r.owner.store(0, Ordering::Relaxed);
        r.flags.fetch_or(INCONSISTENT, Ordering::Release);
        r.release();
    }
}

/// `pthread_mutex_lock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_lock(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: forwarded.
    unsafe { lock(m, Cancel::Async) }
}

/// `pthread_mutex_unlock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_unlock(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: forwarded.
    unsafe { unlock(m) }
}

/// `pthread_mutex_trylock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_trylock(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    let kind = r.kind.load(Ordering::Relaxed);
    if kind & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_trylock()(m) };
    }
    if (kind == 0 || kind == 3) && r.try_acquire() {
        r.owner.store(current().id, Ordering::Relaxed);
        return 0;
    }
    lock_full(r, Mode::Try, Cancel::Never)
}

/// `pthread_mutex_timedlock`: `pthread_mutex_clocklock` on `CLOCK_REALTIME`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_timedlock(
    m: *mut libc::pthread_mutex_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    if r.kind.load(Ordering::Relaxed) & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_timedlock()(m, at) };
    }
    // SAFETY: the caller's time (C's contract: valid to read).
    lock_full(r, Mode::Until(unsafe { &*at }, libc::CLOCK_REALTIME), Cancel::Async)
}

/// `pthread_mutex_clocklock`: `CLOCK_REALTIME` or `CLOCK_MONOTONIC`
/// (`EINVAL` for another clock, as glibc).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_clocklock(
    m: *mut libc::pthread_mutex_t,
    clock: libc::clockid_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    if r.kind.load(Ordering::Relaxed) & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_clocklock()(m, clock, at) };
    }
    if clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC {
        return libc::EINVAL;
    }
    // SAFETY: the caller's time (C's contract: valid to read).
    lock_full(r, Mode::Until(unsafe { &*at }, clock), Cancel::Async)
}

/// Reads a mutex attribute's word (glibc's layout), or 0 for none.
///
/// # Safety
///
/// `a` is null or an initialised attribute.
unsafe fn attr_word(a: *const libc::pthread_mutexattr_t) -> u32 {
    if a.is_null() {
        0
    } else {
        // SAFETY: glibc's `pthread_mutexattr_t` starts with its `int mutexkind`.
        unsafe { a.cast::<u32>().read() }
    }
}

/// `pthread_mutex_init`: a process-shared mutex is glibc's (module docs).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_init(
    m: *mut libc::pthread_mutex_t,
    a: *const libc::pthread_mutexattr_t,
) -> c_int {
    // SAFETY: the caller's attribute.
    let v = unsafe { attr_word(a) };
    let protocol = (v & ATTR_PROTOCOL_MASK) >> ATTR_PROTOCOL_SHIFT;
    if protocol == libc::PTHREAD_PRIO_PROTECT as u32 && v & ATTR_ROBUST != 0 {
        // glibc: no robust priority-protected mutexes.
        return libc::ENOTSUP;
    }
    if v & ATTR_PSHARED != 0 {
        // SAFETY: glibc's mutex from now on, made by glibc.
        return unsafe { next::pthread_mutex_init()(m, a) };
    }
    let mut kind = (v & !ATTR_FLAG_BITS) as i32 & !ELISION;
    if v & ATTR_ROBUST != 0 {
        kind |= ROBUST;
    }
    let mut ceiling = 0;
    match protocol as c_int {
        libc::PTHREAD_PRIO_INHERIT => kind |= PRIO_INHERIT,
        libc::PTHREAD_PRIO_PROTECT => {
            kind |= PRIO_PROTECT;
            ceiling = ((v & ATTR_CEILING_MASK) >> ATTR_CEILING_SHIFT) as i32;
            ceiling = ceiling.max(fifo_range().0);
        }
        _ => {}
    }
    // SAFETY: the caller's mutex, which nobody uses while it is initialised.
    unsafe { std::ptr::write_bytes(m.cast::<u8>(), 0, std::mem::size_of::<Raw>()) };
    // SAFETY: as above.
    let r = unsafe { raw(m) };
    r.ceiling.store(ceiling, Ordering::Relaxed);
    r.kind.store(kind, Ordering::Release);
    0
}

/// `pthread_mutex_destroy`: `EBUSY` while locked; then an invalid kind, as
/// glibc's.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_destroy(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    if r.kind.load(Ordering::Relaxed) & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_destroy()(m) };
    }
    if r.state.load(Ordering::Relaxed) & LOCKED != 0 {
        return libc::EBUSY;
    }
    r.kind.store(-1, Ordering::Relaxed);
    0
}

/// `pthread_mutex_consistent`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_consistent(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    let kind = r.kind.load(Ordering::Relaxed);
    if kind & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_consistent()(m) };
    }
    if kind & ROBUST == 0
        || r.flags.load(Ordering::Acquire) & INCONSISTENT == 0
        || r.owner.load(Ordering::Relaxed) != current().id
    {
        return libc::EINVAL;
    }
    r.flags.fetch_and(!INCONSISTENT, Ordering::Release);
    0
}

/// The valid priority range of `SCHED_FIFO` (what a ceiling must be in).
fn fifo_range() -> (c_int, c_int) {
    // SAFETY: plain queries.
    unsafe {
        (
            libc::sched_get_priority_min(libc::SCHED_FIFO),
            libc::sched_get_priority_max(libc::SCHED_FIFO),
        )
    }
}

/// `pthread_mutex_getprioceiling`: `EINVAL` unless the mutex is
/// `PTHREAD_PRIO_PROTECT` (module docs, "Priority protocols").
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_getprioceiling(
    m: *const libc::pthread_mutex_t,
    out: *mut c_int,
) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    let kind = r.kind.load(Ordering::Relaxed);
    if kind & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_getprioceiling()(m, out) };
    }
    if kind & PRIO_PROTECT == 0 {
        return libc::EINVAL;
    }
    // SAFETY: the caller's out-parameter.
    unsafe { *out = r.ceiling.load(Ordering::Relaxed) };
    0
}

/// `pthread_mutex_setprioceiling`: locks the mutex (unless the caller holds
/// it; then the new ceiling raises or lowers it at once), changes the ceiling,
/// unlocks; the old ceiling in `old`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutex_setprioceiling(
    m: *mut libc::pthread_mutex_t,
    ceiling: c_int,
    old: *mut c_int,
) -> c_int {
    // SAFETY: the caller's mutex.
    let r = unsafe { raw(m) };
    let kind = r.kind.load(Ordering::Relaxed);
    if kind & PSHARED != 0 {
        // SAFETY: glibc's mutex, forwarded unchanged.
        return unsafe { next::pthread_mutex_setprioceiling()(m, ceiling, old) };
    }
    let (lo, hi) = fifo_range();
    if kind & PRIO_PROTECT == 0 || !(lo..=hi).contains(&ceiling) {
        return libc::EINVAL;
    }
    let held = r.owner.load(Ordering::Relaxed) == current().id
        && r.state.load(Ordering::Relaxed) & LOCKED != 0;
    if !held {
        // Locked without the protocol, as glibc's: no ceiling check against the caller's
        // priority and no raise (a priority-protected mutex is never robust).
        if !r.try_acquire() {
            let _ = r.acquire_slow(None, false, Cancel::Never);
        }
        r.owner.store(current().id, Ordering::Relaxed);
    }
    let was = r.ceiling.swap(ceiling, Ordering::Relaxed);
    if held && crate::prio::lock().set_ceiling(r.addr(), ceiling) {
        let _ = crate::prio::apply_self(current());
    }
    if !old.is_null() {
        // SAFETY: the caller's out-parameter.
        unsafe { *old = was };
    }
    if !held {
        r.owner.store(0, Ordering::Relaxed);
        r.release();
    }
    0
}

/// The attribute's word, to change.
///
/// # Safety
///
/// `a` is a `pthread_mutexattr_t` (glibc's: one `int`).
unsafe fn attr<'a>(a: *const libc::pthread_mutexattr_t) -> &'a AtomicU32 {
    // SAFETY: an aligned int the caller owns.
    unsafe { AtomicU32::from_ptr(a.cast::<u32>().cast_mut()) }
}

/// `pthread_mutexattr_init`: a normal, private, robust-less, `PRIO_NONE` mutex.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_init(a: *mut libc::pthread_mutexattr_t) -> c_int {
    // SAFETY: the caller's attribute.
    unsafe { attr(a) }.store(0, Ordering::Relaxed);
    0
}

/// `pthread_mutexattr_destroy`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_destroy(
    _a: *mut libc::pthread_mutexattr_t,
) -> c_int {
    0
}

/// `pthread_mutexattr_settype`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_settype(
    a: *mut libc::pthread_mutexattr_t,
    kind: c_int,
) -> c_int {
    if !(0..=3).contains(&kind) {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attribute.
    let w = unsafe { attr(a) };
    let v = w.load(Ordering::Relaxed);
    w.store((v & ATTR_FLAG_BITS) | kind as u32, Ordering::Relaxed);
    0
}

/// `pthread_mutexattr_gettype`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_gettype(
    a: *const libc::pthread_mutexattr_t,
    kind: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute and out-parameter.
    unsafe { *kind = (attr(a).load(Ordering::Relaxed) & !ATTR_FLAG_BITS) as c_int & !ELISION };
    0
}

/// Sets or clears `bit` of the attribute for a 0/1 `value`; `EINVAL` otherwise.
///
/// # Safety
///
/// `a` is a `pthread_mutexattr_t`.
unsafe fn set_flag(a: *mut libc::pthread_mutexattr_t, bit: u32, value: c_int) -> c_int {
    // SAFETY: forwarded.
    let w = unsafe { attr(a) };
    match value {
        0 => w.fetch_and(!bit, Ordering::Relaxed),
        1 => w.fetch_or(bit, Ordering::Relaxed),
        _ => return libc::EINVAL,
    };
    0
}

/// `pthread_mutexattr_setpshared`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_setpshared(
    a: *mut libc::pthread_mutexattr_t,
    pshared: c_int,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { set_flag(a, ATTR_PSHARED, pshared) }
}

/// `pthread_mutexattr_getpshared`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_getpshared(
    a: *const libc::pthread_mutexattr_t,
    pshared: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute and out-parameter.
    unsafe { *pshared = c_int::from(attr(a).load(Ordering::Relaxed) & ATTR_PSHARED != 0) };
    0
}

/// `pthread_mutexattr_setrobust`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_setrobust(
    a: *mut libc::pthread_mutexattr_t,
    robust: c_int,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { set_flag(a, ATTR_ROBUST, robust) }
}

/// `pthread_mutexattr_getrobust`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_getrobust(
    a: *const libc::pthread_mutexattr_t,
    robust: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute and out-parameter.
    unsafe { *robust = c_int::from(attr(a).load(Ordering::Relaxed) & ATTR_ROBUST != 0) };
    0
}

/// `pthread_mutexattr_setprotocol`: `PTHREAD_PRIO_NONE`, `_INHERIT` or
/// `_PROTECT` (module docs, "Priority protocols").
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_setprotocol(
    a: *mut libc::pthread_mutexattr_t,
    protocol: c_int,
) -> c_int {
    if !(libc::PTHREAD_PRIO_NONE..=libc::PTHREAD_PRIO_PROTECT).contains(&protocol) {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attribute.
    let w = unsafe { attr(a) };
    let v = w.load(Ordering::Relaxed);
    w.store(
        (v & !ATTR_PROTOCOL_MASK) | ((protocol as u32) << ATTR_PROTOCOL_SHIFT),
        Ordering::Relaxed,
    );
    0
}

/// `pthread_mutexattr_getprotocol`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_getprotocol(
    a: *const libc::pthread_mutexattr_t,
    protocol: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute and out-parameter.
    unsafe {
        *protocol =
            ((attr(a).load(Ordering::Relaxed) & ATTR_PROTOCOL_MASK) >> ATTR_PROTOCOL_SHIFT) as c_int
    };
    0
}

/// `pthread_mutexattr_setprioceiling`: within `SCHED_FIFO`'s range.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_setprioceiling(
    a: *mut libc::pthread_mutexattr_t,
    ceiling: c_int,
) -> c_int {
    let (lo, hi) = fifo_range();
    if !(lo..=hi).contains(&ceiling) {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attribute.
    let w = unsafe { attr(a) };
    let v = w.load(Ordering::Relaxed);
    w.store((v & !ATTR_CEILING_MASK) | ((ceiling as u32) << ATTR_CEILING_SHIFT), Ordering::Relaxed);
    0
}

/// `pthread_mutexattr_getprioceiling`: unset reads as `SCHED_FIFO`'s minimum.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_mutexattr_getprioceiling(
    a: *const libc::pthread_mutexattr_t,
    ceiling: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute.
    let v = unsafe { attr(a) }.load(Ordering::Relaxed);
    let c = ((v & ATTR_CEILING_MASK) >> ATTR_CEILING_SHIFT) as c_int;
    // SAFETY: the caller's out-parameter.
    unsafe { *ceiling = c.max(fifo_range().0) };
    0
}

crate::glibc::alias!(__pthread_mutex_init = pthread_mutex_init: fn(m: *mut libc::pthread_mutex_t, a: *const libc::pthread_mutexattr_t) -> c_int);
crate::glibc::alias!(__pthread_mutex_destroy = pthread_mutex_destroy: fn(m: *mut libc::pthread_mutex_t) -> c_int);
crate::glibc::alias!(__pthread_mutex_lock = pthread_mutex_lock: fn(m: *mut libc::pthread_mutex_t) -> c_int);
crate::glibc::alias!(__pthread_mutex_trylock = pthread_mutex_trylock: fn(m: *mut libc::pthread_mutex_t) -> c_int);
crate::glibc::alias!(__pthread_mutex_unlock = pthread_mutex_unlock: fn(m: *mut libc::pthread_mutex_t) -> c_int);
crate::glibc::alias!(pthread_mutex_consistent_np = pthread_mutex_consistent: fn(m: *mut libc::pthread_mutex_t) -> c_int);
crate::glibc::alias!(__pthread_mutexattr_init = pthread_mutexattr_init: fn(a: *mut libc::pthread_mutexattr_t) -> c_int);
crate::glibc::alias!(__pthread_mutexattr_destroy = pthread_mutexattr_destroy: fn(a: *mut libc::pthread_mutexattr_t) -> c_int);
crate::glibc::alias!(__pthread_mutexattr_settype = pthread_mutexattr_settype: fn(a: *mut libc::pthread_mutexattr_t, kind: c_int) -> c_int);
crate::glibc::alias!(pthread_mutexattr_setkind_np = pthread_mutexattr_settype: fn(a: *mut libc::pthread_mutexattr_t, kind: c_int) -> c_int);
crate::glibc::alias!(pthread_mutexattr_getkind_np = pthread_mutexattr_gettype: fn(a: *const libc::pthread_mutexattr_t, kind: *mut c_int) -> c_int);
crate::glibc::alias!(pthread_mutexattr_setrobust_np = pthread_mutexattr_setrobust: fn(a: *mut libc::pthread_mutexattr_t, robust: c_int) -> c_int);
crate::glibc::alias!(pthread_mutexattr_getrobust_np = pthread_mutexattr_getrobust: fn(a: *const libc::pthread_mutexattr_t, robust: *mut c_int) -> c_int);
