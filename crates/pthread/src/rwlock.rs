//! Read-write locks: `pthread_rwlock_*` and `pthread_rwlockattr_*`.
//!
//! # The object
//!
//! A `pthread_rwlock_t` keeps glibc's size (56 bytes) and the fields glibc's
//! initializers and attributes set: `__shared` (an `int` at byte 28,
//! nonzero for a process-shared lock, which is then glibc's: made by its
//! `pthread_rwlock_init`, every operation forwarded) and `__flags` (a `u32`
//! at byte 48, the kind: 0 `PTHREAD_RWLOCK_PREFER_READER_NP`, 1
//! `PREFER_WRITER_NP`, which glibc treats as reader preference and so do
//! we, 2 `PREFER_WRITER_NONRECURSIVE_NP`). So `PTHREAD_RWLOCK_INITIALIZER`
//! (zeros) and `PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP` (flags 2)
//! work unchanged. The rest is ours:
//!
//! | bytes | ours                                                       |
//! |-------|------------------------------------------------------------|
//! | 0     | `state` (table below)                                      |
//! | 4     | the wait queue's lock (bit 0)                              |
//! | 8, 16 | the queue's head and tail (`wait.rs`)                      |
//! | 24    | the writer's thread id, 0 when none (glibc's `__cur_writer`) |
//! | 28    | glibc's `__shared`                                         |
//! | 32    | writers waiting (queued, or woken and not yet in)          |
//! | 36    | writers queued                                             |
//! | 48    | glibc's `__flags`                                          |
//!
//! # The state word
//!
//! | bits  | name      | meaning                                         |
//! |-------|-----------|-------------------------------------------------|
//! | 0-28  | readers   | read locks held                                 |
//! | 29    | `WWAIT`   | a writer waits (blocks new readers when writers are preferred) |
//! | 30    | `PARKED`  | the queue is not empty                          |
//! | 31    | `WRITER`  | a writer holds the lock                         |
//!
//! `PARKED` and `WWAIT` change only under the queue lock, so they always
//! describe the queue; the other bits change by compare-and-swap, also
//! without it (the fast paths: a read lock is one CAS adding a reader, a
//! write lock one CAS `0 -> WRITER`, and their unlocks one atomic each when
//! nobody is queued).
//!
//! # The protocol
//!
//! Locking, slow path:
//! 1. Take the queue lock. If the lock can be had now, take it by CAS
//!    (barging past queued waiters, as the fast path does).
//! 2. Otherwise set `PARKED` (and, for a writer, count it as waiting and
//!    set `WWAIT`) by a CAS from the state just read — so an unlock that
//!    comes between the check and the set makes the CAS fail and step 1 run
//!    again — link a waiter tagged reader or writer, drop the queue lock
//!    and wait (`wait.rs`).
//! 3. Woken, go back to 1: the waker gave nothing away, so a thread that
//!    came meanwhile may have the lock first, and the woken one queues
//!    again. A writer stays counted as waiting from its first queueing
//!    until it has the lock, so with writer preference new readers keep
//!    out while it is on its way.
//! 4. A waiter whose deadline passes while it is linked unlinks itself and
//!    returns `ETIMEDOUT`; a writer uncounts itself and wakes the readers at
//!    the queue's front, which it may have been holding back. One that a
//!    release already unlinked counts as woken (`wait.rs` step 4) and tries
//!    once more (step 1) before it gives up, so the wake-up it took is not
//!    lost: if the lock is taken again, it queues with `PARKED` once more,
//!    and that holder's release wakes the queue.
//!
//! Unlocking: the unlock that leaves the lock free (the last reader's, or
//! the writer's) with `PARKED` set wakes the front of the queue: the first
//! waiter, and if it is a reader every reader right behind it. With writer
//! preference and a writer queued, readers cannot go, so the readers in
//! front of the first writer are moved to the tail and the writer is woken
//! (else a woken reader would find `WWAIT`, queue again behind the writer,
//! and nobody would be left to wake it: the lock is free). The woken are
//! unlinked under the queue lock (which updates `PARKED`) and woken after it
//! is dropped.
//!
//! No waiter sleeps through a release: a waiter links itself only with
//! `PARKED` set in the very state it found blocking (step 2's CAS), so the
//! unlock that ends that state sees `PARKED` and wakes, under the queue
//! lock, after the waiter is linked.
//!
//! Why no hand-off (the releaser granting the lock to the woken waiter): a
//! granted waiter holds the lock until it runs, and a kernel thread (the
//! program's initial thread) may wait milliseconds for a CPU; every other
//! thread then waits too. Measured with 12 threads and the initial thread
//! reading under writer preference: 60 ms to 1.5 s with hand-off, against
//! 13 ms for glibc's barging lock.
//!
//! Preferences: with reader preference (the default) a reader gets the
//! lock whenever no writer holds it, even with writers queued, so a thread
//! may take its read lock recursively; writers may starve, as with glibc.
//! With `PREFER_WRITER_NONRECURSIVE` a queued writer (`WWAIT`) makes new
//! readers queue behind it, so a reader relocking while a writer waits
//! deadlocks, as that kind's name warns. A writer relocking, or a writer
//! asking for a read lock, gets `EDEADLK`, as from glibc.

use crate::wait::{Cancel, Deadline, Outcome, Queue, Unlinked, Waiter};
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

/// glibc's definitions, for process-shared locks.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_void};
    crate::glibc::real!(pthread_rwlock_init: fn(*mut libc::pthread_rwlock_t, *const libc::pthread_rwlockattr_t) -> c_int);
    crate::glibc::real!(pthread_rwlock_destroy: fn(*mut libc::pthread_rwlock_t) -> c_int);
    crate::glibc::real!(pthread_rwlock_rdlock: fn(*mut libc::pthread_rwlock_t) -> c_int);
    crate::glibc::real!(pthread_rwlock_tryrdlock: fn(*mut libc::pthread_rwlock_t) -> c_int);
    crate::glibc::real!(pthread_rwlock_timedrdlock: fn(*mut libc::pthread_rwlock_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_rwlock_clockrdlock: fn(*mut libc::pthread_rwlock_t, libc::clockid_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_rwlock_wrlock: fn(*mut libc::pthread_rwlock_t) -> c_int);
    crate::glibc::real!(pthread_rwlock_trywrlock: fn(*mut libc::pthread_rwlock_t) -> c_int);
    crate::glibc::real!(pthread_rwlock_timedwrlock: fn(*mut libc::pthread_rwlock_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_rwlock_clockwrlock: fn(*mut libc::pthread_rwlock_t, libc::clockid_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_rwlock_unlock: fn(*mut libc::pthread_rwlock_t) -> c_int);
}

const WRITER: u32 = 1 << 31;
const PARKED: u32 = 1 << 30;
const WWAIT: u32 = 1 << 29;
const READERS: u32 = WWAIT - 1;

const QUEUE_LOCK: u32 = 1;

/// Waiter tags.
const READ: u32 = 0;
const WRITE: u32 = 1;

/// glibc's kinds (`__flags`).
const PREFER_WRITER_NONRECURSIVE: u32 = 2;

/// Waiters granted per turn of the queue lock.
const BATCH: usize = 16;

/// Our view of a `pthread_rwlock_t` (module docs).
#[repr(C)]
struct Raw {
    state: AtomicU32,
    lock: AtomicU32,
    head: AtomicPtr<Waiter>,
    tail: AtomicPtr<Waiter>,
    writer: AtomicU32,
    shared: AtomicI32,
    writers_waiting: AtomicU32,
    writers_queued: AtomicU32,
    _spare: [u32; 2],
    flags: AtomicU32,
    _spare2: u32,
}

const _: () = assert!(std::mem::size_of::<Raw>() == std::mem::size_of::<libc::pthread_rwlock_t>());
const _: () = assert!(std::mem::size_of::<libc::pthread_rwlock_t>() == 56);

/// Our view of `l`.
///
/// # Safety
///
/// `l` points to a `pthread_rwlock_t` that outlives `'a`.
#[inline(always)]
unsafe fn raw<'a>(l: *const libc::pthread_rwlock_t) -> &'a Raw {
    // SAFETY: same size, alignment 8; atomics over plain bytes.
    unsafe { &*l.cast::<Raw>() }
}

/// What a lock call may do when it cannot have the lock at once.
#[derive(Clone, Copy)]
enum Mode {
    Block,
    Try,
    Until(Deadline),
}

impl Raw {
    fn queue(&self) -> Queue<'_> {
        Queue::new(&self.lock, QUEUE_LOCK, &self.head, &self.tail)
    }

    fn prefer_writer(&self) -> bool {
        self.flags.load(Ordering::Relaxed) == PREFER_WRITER_NONRECURSIVE
    }

    /// Whether a new reader may take the lock in state `s`.
    #[inline]
    fn can_read(&self, s: u32) -> bool {
        s & WRITER == 0 && (s & WWAIT == 0 || !self.prefer_writer())
    }

    /// One attempt at a read lock: `Some(0)` taken, `Some(EAGAIN)` too many
    /// readers, `None` blocked.
    #[inline]
    fn try_read(&self) -> Option<c_int> {
        let mut s = self.state.load(Ordering::Relaxed);
        while self.can_read(s) {
            if s & READERS == READERS {
                return Some(libc::EAGAIN);
            }
            match self.state.compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Some(0),
                Err(now) => s = now,
            }
        }
        None
    }

    /// One attempt at the write lock.
    #[inline]
    fn try_write(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & (WRITER | READERS) == 0 {
            match self.state.compare_exchange_weak(
                s,
                s | WRITER,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Locking, slow path (module docs, steps 1 to 4). Returns 0,
    /// `EAGAIN` (readers), `ETIMEDOUT`, or [`CANCELLED`] when an
    /// asynchronous cancellation came while it waited (the caller acts on
    /// it once this frame is gone).
    #[cold]
    fn lock_slow(&self, write: bool, deadline: Option<&Deadline>) -> c_int {
        let q = self.queue();
        // Whether this writer is counted in `writers_waiting`.
        let mut counted = false;
        loop {
            let w = Waiter::new(if write { WRITE } else { READ });
            {
                // Step 1.
                let g = q.lock();
                if write {
                    if self.try_write() {
                        if counted {
                            self.writers_waiting.fetch_sub(1, Ordering::Relaxed);
                            self.fix_bits(&g);
                        }
                        return 0;
                    }
                } else if let Some(e) = self.try_read() {
                    return e;
                }
                // Step 2.
                let s = self.state.load(Ordering::Relaxed);
                let blocked = if write { s & (WRITER | READERS) != 0 } else { !self.can_read(s) };
                if !blocked {
                    continue;
                }
                let set = PARKED | if write { WWAIT } else { 0 };
                if self
                    .state
                    .compare_exchange(s, s | set, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                if write {
                    if !counted {
                        self.writers_waiting.fetch_add(1, Ordering::Relaxed);
                        counted = true;
                    }
                    self.writers_queued.fetch_add(1, Ordering::Relaxed);
                }
                g.push(&w);
            }
            let outcome = w.wait(&q, deadline, Cancel::Async);
            match outcome {
                // Step 3.
                Outcome::Woken => {}
                // Step 4.
                Outcome::TimedOut | Outcome::Cancelled | Outcome::Interrupted => {
                    {
                        let g = q.lock();
                        if counted {
                            self.writers_waiting.fetch_sub(1, Ordering::Relaxed);
                            self.writers_queued.fetch_sub(1, Ordering::Relaxed);
                        }
                        self.fix_bits(&g);
                    }
                    if counted {
                        // It may have been what held queued readers back.
                        self.wake_front();
                    }
                    return if outcome == Outcome::Cancelled { CANCELLED } else { libc::ETIMEDOUT };
                }
            }
        }
    }

    /// Makes `PARKED` and `WWAIT` describe the queue and the writers
    /// waiting (under the queue lock).
    fn fix_bits(&self, g: &crate::wait::Locked<'_, '_>) {
        let mut clear = 0;
        if g.is_empty() {
            clear |= PARKED;
        }
        if self.writers_waiting.load(Ordering::Relaxed) == 0 {
            clear |= WWAIT;
        }
        if clear != 0 {
            self.state.fetch_and(!clear, Ordering::Relaxed);
        }
    }

    /// Wakes the waiters at the front of the queue that the lock's release
    /// may let in: the first one, and if it is a reader every reader right
    /// behind it; with writer preference and a writer queued, that writer
    /// (module docs, "Unlocking").
    #[cold]
    fn wake_front(&self) {
        let q = self.queue();
        loop {
            let mut batch: [Option<Unlinked>; BATCH] = std::array::from_fn(|_| None);
            let mut n = 0;
            let mut more = false;
            {
                let g = q.lock();
                if self.prefer_writer() && self.writers_queued.load(Ordering::Relaxed) > 0 {
                    // Readers cannot go while a writer waits: the first
                    // writer is the one to wake.
                    while g.front_tag() == Some(READ) {
                        g.rotate();
                    }
                }
                while let Some(tag) = g.front_tag() {
                    if n == BATCH {
                        more = true;
                        break;
                    }
                    if tag == WRITE && n > 0 {
                        break;
                    }
                    batch[n] = g.pop();
                    n += 1;
                    if tag == WRITE {
                        self.writers_queued.fetch_sub(1, Ordering::Relaxed);
                        break;
                    }
                }
                self.fix_bits(&g);
            }
            for w in batch.into_iter().flatten() {
                w.wake();
            }
            if !more {
                return;
            }
        }
    }
}

/// The read-lock functions' body.
fn rdlock(r: &Raw, mode: Mode) -> c_int {
    if let Some(e) = r.try_read() {
        return e;
    }
    match mode {
        Mode::Try => libc::EBUSY,
        Mode::Block | Mode::Until(_) => {
            if r.writer.load(Ordering::Relaxed) == crate::thread::current().id {
                return libc::EDEADLK;
            }
            let d = match &mode {
                Mode::Until(d) => Some(d),
                _ => None,
            };
            match r.lock_slow(false, d) {
                CANCELLED => crate::cancel::act(),
                e => e,
            }
        }
    }
}

/// [`Raw::lock_slow`]'s "an asynchronous cancellation came" (no errno value).
const CANCELLED: c_int = -1;

/// The write-lock functions' body.
fn wrlock(r: &Raw, mode: Mode) -> c_int {
    let me = crate::thread::current().id;
    if !r.try_write() {
        match mode {
            Mode::Try => return libc::EBUSY,
            Mode::Block | Mode::Until(_) => {
                if r.writer.load(Ordering::Relaxed) == me {
                    return libc::EDEADLK;
                }
                let d = match &mode {
                    Mode::Until(d) => Some(d),
                    _ => None,
                };
                let e = r.lock_slow(true, d);
                if e == CANCELLED {
                    crate::cancel::act();
                }
                if e != 0 {
                    return e;
                }
            }
        }
    }
    r.writer.store(me, Ordering::Relaxed);
    0
}

/// A deadline from the caller's clock and absolute time, or `EINVAL` (glibc
/// checks both before anything else).
///
/// # Safety
///
/// `at` is readable.
unsafe fn until(clock: libc::clockid_t, at: *const libc::timespec) -> Result<Mode, c_int> {
    // SAFETY: the caller's time.
    let at = unsafe { *at };
    if (clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC) || !Deadline::valid(&at) {
        return Err(libc::EINVAL);
    }
    Ok(Mode::Until(Deadline { clock, at }))
}

macro_rules! forward_if_shared {
    ($r:expr, $glibc:expr) => {
        if $r.shared.load(Ordering::Relaxed) != 0 {
            // SAFETY: glibc's lock, forwarded unchanged.
            return unsafe { $glibc };
        }
    };
}

/// `pthread_rwlock_rdlock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_rdlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_rdlock()(l));
    rdlock(r, Mode::Block)
}

/// `pthread_rwlock_tryrdlock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_tryrdlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_tryrdlock()(l));
    rdlock(r, Mode::Try)
}

/// `pthread_rwlock_timedrdlock` (`CLOCK_REALTIME`).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_timedrdlock(
    l: *mut libc::pthread_rwlock_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_timedrdlock()(l, at));
    // SAFETY: the caller's time.
    match unsafe { until(libc::CLOCK_REALTIME, at) } {
        Ok(mode) => rdlock(r, mode),
        Err(e) => e,
    }
}

/// `pthread_rwlock_clockrdlock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_clockrdlock(
    l: *mut libc::pthread_rwlock_t,
    clock: libc::clockid_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_clockrdlock()(l, clock, at));
    // SAFETY: the caller's time.
    match unsafe { until(clock, at) } {
        Ok(mode) => rdlock(r, mode),
        Err(e) => e,
    }
}

/// `pthread_rwlock_wrlock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_wrlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_wrlock()(l));
    wrlock(r, Mode::Block)
}

/// `pthread_rwlock_trywrlock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_trywrlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_trywrlock()(l));
    wrlock(r, Mode::Try)
}

/// `pthread_rwlock_timedwrlock` (`CLOCK_REALTIME`).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_timedwrlock(
    l: *mut libc::pthread_rwlock_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_timedwrlock()(l, at));
    // SAFETY: the caller's time.
    match unsafe { until(libc::CLOCK_REALTIME, at) } {
        Ok(mode) => wrlock(r, mode),
        Err(e) => e,
    }
}

/// `pthread_rwlock_clockwrlock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_clockwrlock(
    l: *mut libc::pthread_rwlock_t,
    clock: libc::clockid_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_clockwrlock()(l, clock, at));
    // SAFETY: the caller's time.
    match unsafe { until(clock, at) } {
        Ok(mode) => wrlock(r, mode),
        Err(e) => e,
    }
}

/// `pthread_rwlock_unlock`: the writer's unlock when a writer holds the
/// lock, else a reader's; `EPERM` when nobody holds it.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_unlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_unlock()(l));
    let s = r.state.load(Ordering::Relaxed);
    if s & WRITER != 0 {
        r.writer.store(0, Ordering::Relaxed);
        if r.state.compare_exchange(WRITER, 0, Ordering::Release, Ordering::Relaxed).is_err() {
            r.state.fetch_and(!WRITER, Ordering::Release);
            r.wake_front();
        }
        return 0;
    }
    if s & READERS == 0 {
        return libc::EPERM;
    }
    let was = r.state.fetch_sub(1, Ordering::Release);
    if was & READERS == 1 && was & PARKED != 0 {
        r.wake_front();
    }
    0
}

/// `pthread_rwlock_init`: a process-shared lock is glibc's.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_init(
    l: *mut libc::pthread_rwlock_t,
    a: *const libc::pthread_rwlockattr_t,
) -> c_int {
    let (kind, pshared) = if a.is_null() {
        (0, 0)
    } else {
        // SAFETY: glibc's attribute: `{ int lockkind; int pshared; }`.
        unsafe { (a.cast::<u32>().read(), a.cast::<c_int>().add(1).read()) }
    };
    if pshared != libc::PTHREAD_PROCESS_PRIVATE {
        // SAFETY: glibc's from now on, made by glibc.
        return unsafe { next::pthread_rwlock_init()(l, a) };
    }
    // SAFETY: the caller's object, unused while it is initialised.
    unsafe { std::ptr::write_bytes(l.cast::<u8>(), 0, std::mem::size_of::<Raw>()) };
    // SAFETY: as above.
    unsafe { raw(l) }.flags.store(kind, Ordering::Release);
    0
}

/// `pthread_rwlock_destroy`: nothing to free (glibc's answers 0 too).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlock_destroy(l: *mut libc::pthread_rwlock_t) -> c_int {
    // SAFETY: the caller's lock.
    let r = unsafe { raw(l) };
    forward_if_shared!(r, next::pthread_rwlock_destroy()(l));
    0
}

/// The attribute's two words (glibc's `{ int lockkind; int pshared; }`).
///
/// # Safety
///
/// `a` is a `pthread_rwlockattr_t`.
unsafe fn attr<'a>(a: *const libc::pthread_rwlockattr_t) -> &'a [AtomicI32; 2] {
    // SAFETY: two aligned ints the caller owns.
    unsafe { &*a.cast::<[AtomicI32; 2]>() }
}

/// `pthread_rwlockattr_init`: reader preference, private.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlockattr_init(
    a: *mut libc::pthread_rwlockattr_t,
) -> c_int {
    // SAFETY: the caller's attribute.
    let w = unsafe { attr(a) };
    w[0].store(0, Ordering::Relaxed);
    w[1].store(libc::PTHREAD_PROCESS_PRIVATE, Ordering::Relaxed);
    0
}

/// `pthread_rwlockattr_destroy`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlockattr_destroy(
    _a: *mut libc::pthread_rwlockattr_t,
) -> c_int {
    0
}

/// `pthread_rwlockattr_setkind_np`: `PTHREAD_RWLOCK_PREFER_READER_NP` (0),
/// `PREFER_WRITER_NP` (1, read as reader preference, as glibc does) or
/// `PREFER_WRITER_NONRECURSIVE_NP` (2).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlockattr_setkind_np(
    a: *mut libc::pthread_rwlockattr_t,
    kind: c_int,
) -> c_int {
    if !(0..=2).contains(&kind) {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attribute.
    let w = unsafe { attr(a) };
    w[0].store(kind, Ordering::Relaxed);
    0
}

/// `pthread_rwlockattr_getkind_np`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlockattr_getkind_np(
    a: *const libc::pthread_rwlockattr_t,
    kind: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute and out-parameter.
    unsafe { *kind = attr(a)[0].load(Ordering::Relaxed) };
    0
}

/// `pthread_rwlockattr_setpshared`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlockattr_setpshared(
    a: *mut libc::pthread_rwlockattr_t,
    pshared: c_int,
) -> c_int {
    if pshared != libc::PTHREAD_PROCESS_PRIVATE && pshared != libc::PTHREAD_PROCESS_SHARED {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attribute.
    let w = unsafe { attr(a) };
    w[1].store(pshared, Ordering::Relaxed);
    0
}

/// `pthread_rwlockattr_getpshared`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_rwlockattr_getpshared(
    a: *const libc::pthread_rwlockattr_t,
    pshared: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute and out-parameter.
    unsafe { *pshared = attr(a)[1].load(Ordering::Relaxed) };
    0
}

crate::glibc::alias!(__pthread_rwlock_init = pthread_rwlock_init: fn(l: *mut libc::pthread_rwlock_t, a: *const libc::pthread_rwlockattr_t) -> c_int);
crate::glibc::alias!(__pthread_rwlock_destroy = pthread_rwlock_destroy: fn(l: *mut libc::pthread_rwlock_t) -> c_int);
crate::glibc::alias!(__pthread_rwlock_rdlock = pthread_rwlock_rdlock: fn(l: *mut libc::pthread_rwlock_t) -> c_int);
crate::glibc::alias!(__pthread_rwlock_tryrdlock = pthread_rwlock_tryrdlock: fn(l: *mut libc::pthread_rwlock_t) -> c_int);
crate::glibc::alias!(__pthread_rwlock_wrlock = pthread_rwlock_wrlock: fn(l: *mut libc::pthread_rwlock_t) -> c_int);
crate::glibc::alias!(__pthread_rwlock_trywrlock = pthread_rwlock_trywrlock: fn(l: *mut libc::pthread_rwlock_t) -> c_int);
crate::glibc::alias!(__pthread_rwlock_unlock = pthread_rwlock_unlock: fn(l: *mut libc::pthread_rwlock_t) -> c_int);
