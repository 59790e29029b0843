//! Condition variables: `pthread_cond_*` and `pthread_condattr_*`.
//!
//! # The object
//!
//! A `pthread_cond_t` keeps glibc's size (48 bytes); `PTHREAD_COND_INITIALIZER`
//! (all zeros) is an empty condition variable on `CLOCK_REALTIME`. glibc
//! keeps its two attribute bits in `__wrefs` (byte 36): bit 0
//! process-shared, bit 1 `CLOCK_MONOTONIC`. We keep them there too, and a
//! process-shared condition variable is glibc's (made by glibc's
//! `pthread_cond_init`, every operation forwarded: its waiters may be in
//! another process). Such a condition variable needs a process-shared
//! mutex too, as it would in any real use (both live in shared memory):
//! glibc's wait unlocks and relocks the mutex with its own internal
//! functions, which know nothing of the library's mutexes. The rest is ours:
//!
//! | bytes | ours                                                        |
//! |-------|-------------------------------------------------------------|
//! | 0, 8  | the wait queue's head and tail (`wait.rs`)                  |
//! | 16    | the queue's lock (bit 0)                                    |
//! | 20    | `seq`: the broadcast generation                             |
//! | 36    | glibc's attribute bits (above)                              |
//!
//! # The protocol
//!
//! Waiting (the caller holds the mutex):
//! 1. Take the queue lock, link a waiter tagged with the current `seq`,
//!    drop the queue lock.
//! 2. Unlock the mutex (our `pthread_mutex_unlock`, so every kind and a
//!    process-shared mutex work). If that fails (`EPERM` of an
//!    error-checking mutex the caller does not hold), unlink again and
//!    return the error, as glibc does; a signal taken meanwhile is passed on.
//! 3. Wait (`wait.rs`): woken, timed out, or — `pthread_cond_wait` and
//!    `pthread_cond_timedwait` are cancellation points — cancelled.
//! 4. Lock the mutex again, whatever happened, and return: 0, `ETIMEDOUT`,
//!    or the mutex's error (`EOWNERDEAD`); a cancelled thread acts on its
//!    cancellation only now, with the mutex held, as POSIX says (its
//!    cleanup handlers may unlock it).
//!
//! Signalling unlinks the first waiter and wakes it; broadcasting bumps `seq`
//! and wakes every waiter tagged with an older one, in batches (so it
//! allocates nothing, and waiters that wait again meanwhile, with the new
//! tag, are not woken twice). Broadcast does not requeue waiters onto the
//! mutex: a waiter's give-up (step 3's timeout) unlinks it from the queue it
//! waited on, which must stay the condition variable's.
//!
//! No signal is lost: the waiter is linked (1) before it unlocks the mutex
//! (2), so a signaller that takes the mutex after the waiter's check finds
//! it; and a waiter whose deadline or cancellation races with a signal that
//! already unlinked it counts as woken (`wait.rs` step 4), returning 0 (a
//! cancellation then waits for the next cancellation point).
//!
//! A woken waiter touches the condition variable no more, so
//! `pthread_cond_destroy` right after a broadcast is safe; with waiters
//! still linked it answers `EBUSY`.
//!
//! # Cancelling a process-shared wait
//!
//! A user thread waiting on a process-shared condition variable waits in
//! glibc's code, whose cancellation (its `SIGCANCEL` handler and unwinder)
//! knows nothing of user threads. So the wait is made cancellable from
//! outside: the waiter records the condition variable and mutex
//! (`ThreadData::shared_cond`), checks for a pending cancellation, waits in
//! glibc, clears the record, and acts on a cancellation that came meanwhile
//! — glibc relocked the mutex, so the cleanup handlers run with it held, as
//! POSIX says. A canceller that finds the record broadcasts on the
//! condition variable: the waiter wakes (the other waiters too, a spurious
//! wake-up POSIX allows them). No cancellation is lost:
//! 1. The waiter records, then checks; the canceller marks the cancellation
//!    pending, then reads the record (both sequentially consistent): one of
//!    them sees the other.
//! 2. A waiter that saw nothing pending may not be in glibc's queue yet when
//!    the broadcast comes; it holds the mutex until it is. A canceller that
//!    holds the mutex itself (glibc's `__owner` is its `tid`) therefore
//!    broadcasts after that point; any other broadcasts again, after 50 µs,
//!    200 µs, 0.8 ms and 3.2 ms, until the waiter cleared its record (the
//!    window is a few instructions of glibc's; longer only if the waiter's
//!    kernel thread is descheduled inside them).
//! 3. The waiter clears its record and then waits for the cancellers still
//!    broadcasting (`shared_waking`), so that none touches a condition
//!    variable its cleanup handlers may destroy.

use crate::wait::{Cancel, Deadline, Outcome, Queue, Unlinked, Waiter};
use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// glibc's definitions, for process-shared condition variables.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_void};
    crate::glibc::real!(pthread_cond_init: fn(*mut libc::pthread_cond_t, *const libc::pthread_condattr_t) -> c_int);
    crate::glibc::real!(pthread_cond_destroy: fn(*mut libc::pthread_cond_t) -> c_int);
    crate::glibc::real!(pthread_cond_wait: fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t) -> c_int);
    crate::glibc::real!(pthread_cond_timedwait: fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_cond_clockwait: fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t, libc::clockid_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_cond_signal: fn(*mut libc::pthread_cond_t) -> c_int);
    crate::glibc::real!(pthread_cond_broadcast: fn(*mut libc::pthread_cond_t) -> c_int);
}

/// glibc's `__wrefs` bits (byte 36) and `pthread_condattr_t` bits.
const SHARED: u32 = 1;
const MONOTONIC: u32 = 2;

const QUEUE_LOCK: u32 = 1;

/// Waiters woken per turn of the queue lock by a broadcast.
const BATCH: usize = 16;

/// Our view of a `pthread_cond_t` (module docs).
#[repr(C)]
struct Raw {
    head: AtomicPtr<Waiter>,
    tail: AtomicPtr<Waiter>,
    lock: AtomicU32,
    seq: AtomicU32,
    _spare: [u32; 3],
    flags: AtomicU32,
    _spare2: [u32; 2],
}

const _: () = assert!(std::mem::size_of::<Raw>() == std::mem::size_of::<libc::pthread_cond_t>());
const _: () = assert!(std::mem::size_of::<libc::pthread_cond_t>() == 48);

/// Our view of `c`.
///
/// # Safety
///
/// `c` points to a `pthread_cond_t` that outlives `'a`.
#[inline(always)]
unsafe fn raw<'a>(c: *const libc::pthread_cond_t) -> &'a Raw {
    // SAFETY: same size, alignment 8; atomics over plain bytes.
    unsafe { &*c.cast::<Raw>() }
}

impl Raw {
    fn queue(&self) -> Queue<'_> {
        Queue::new(&self.lock, QUEUE_LOCK, &self.head, &self.tail)
    }

    fn shared(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & SHARED != 0
    }

    /// Wakes the first waiter, if any.
    fn signal(&self) {
        if self.head.load(Ordering::Acquire).is_null() {
            return;
        }
        let q = self.queue();
        let w = q.lock().pop();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Wakes every waiter linked before this call (module docs).
    fn broadcast(&self) {
        if self.head.load(Ordering::Acquire).is_null() {
            return;
        }
        let q = self.queue();
        let mut bumped = false;
        loop {
            let mut batch: [Option<Unlinked>; BATCH] = std::array::from_fn(|_| None);
            let mut n = 0;
            {
                let g = q.lock();
                if !bumped {
                    self.seq
                        .store(self.seq.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
                    bumped = true;
                }
                let now = self.seq.load(Ordering::Relaxed);
                while n < BATCH && g.front_tag().is_some_and(|t| t != now) {
                    batch[n] = g.pop();
                    n += 1;
                }
            }
            for w in batch.into_iter().flatten() {
                w.wake();
            }
            if n < BATCH {
                return;
            }
        }
    }
}

/// How a wait ended, for the exported function to act on.
enum Ended {
    Return(c_int),
    /// Cancelled, the mutex locked again: the caller must act on it.
    Cancelled,
}

/// Steps 1 to 4 of the module docs. Holds the waiter (which has a `Drop`),
/// so the caller acts on a cancellation only after this returns.
fn wait(r: &Raw, m: *mut libc::pthread_mutex_t, deadline: Option<&Deadline>) -> Ended {
    let q = r.queue();
    let w = Waiter::new(0);
    {
        let g = q.lock();
        w.tag.set(r.seq.load(Ordering::Relaxed));
        g.push(&w);
    }
    // SAFETY: the caller's mutex (C's contract).
    let e = unsafe { crate::mutex::unlock(m) };
    if e != 0 {
        let past =
            Deadline { clock: libc::CLOCK_MONOTONIC, at: libc::timespec { tv_sec: 0, tv_nsec: 0 } };
        if w.wait(&q, Some(&past), Cancel::Never) == Outcome::Woken {
            // A signal meant for a waiter: pass it on.
            r.signal();
        }
        return Ended::Return(e);
    }
    let outcome = w.wait(&q, deadline, Cancel::Point);
    // SAFETY: as above.
    let e = unsafe { crate::mutex::lock(m, Cancel::Never) };
    match outcome {
        Outcome::Cancelled => Ended::Cancelled,
        _ if e != 0 => Ended::Return(e),
        // Not asked for (the wait is not interruptible): a spurious return.
        Outcome::Woken | Outcome::Interrupted => Ended::Return(0),
        Outcome::TimedOut => Ended::Return(libc::ETIMEDOUT),
    }
}

/// The end of every waiting function: acts on a cancellation (no value
/// with a `Drop` is alive in the callers' frames up to the exported function,
/// which is `extern "C-unwind"`: with no cleanup handler to `longjmp` to,
/// the thread ends by unwinding through it).
fn finish(e: Ended) -> c_int {
    match e {
        Ended::Return(e) => e,
        Ended::Cancelled => crate::cancel::act(),
    }
}

/// A deadline from the caller's absolute time, or `EINVAL`.
///
/// # Safety
///
/// `at` is readable.
unsafe fn deadline(clock: libc::clockid_t, at: *const libc::timespec) -> Result<Deadline, c_int> {
    // SAFETY: the caller's time.
    let at = unsafe { *at };
    if Deadline::valid(&at) {
        Ok(Deadline { clock, at })
    } else {
        Err(libc::EINVAL)
    }
}

/// A wait on a process-shared condition variable (glibc's, `wait`), made
/// cancellable for a user thread (module docs, "Cancelling a process-shared
/// wait").
fn shared_wait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    wait: impl FnOnce() -> c_int,
) -> c_int {
    let d = crate::thread::current();
    if d.kind.get() != crate::thread::Kind::User {
        return wait();
    }
    d.shared_mutex.store(m, Ordering::SeqCst);
    d.shared_cond.store(c, Ordering::SeqCst);
    if crate::cancel::cancel_pending(d) {
        forget_shared_wait(d);
        crate::cancel::act();
    }
    let r = wait();
    forget_shared_wait(d);
    // Acted on with the mutex held: glibc relocked it (not so after an
    // error such as `EPERM`, where the wait never began).
    if matches!(r, 0 | libc::ETIMEDOUT | libc::EOWNERDEAD) && crate::cancel::cancel_pending(d) {
        crate::cancel::act();
    }
    r
}

/// Step 3 of "Cancelling a process-shared wait".
fn forget_shared_wait(d: &crate::thread::ThreadData) {
    d.shared_cond.store(std::ptr::null_mut(), Ordering::SeqCst);
    while d.shared_waking.load(Ordering::SeqCst) != 0 {
        // A canceller may sleep between its broadcasts (up to 4 ms): give
        // the processor away meanwhile (the library's `sched_yield`).
        std::thread::yield_now();
    }
}

/// For `pthread_cancel` of user thread `d`, its cancellation just marked
/// pending: wakes it if it waits on a process-shared condition variable
/// (module docs, "Cancelling a process-shared wait", step 2).
pub(crate) fn wake_shared_waiter(d: &crate::thread::ThreadData) {
    d.shared_waking.fetch_add(1, Ordering::SeqCst);
    let c = d.shared_cond.load(Ordering::SeqCst);
    if !c.is_null() {
        let m = d.shared_mutex.load(Ordering::SeqCst);
        // SAFETY: the waiter's mutex, alive while it waits (it waits for
        // us before it returns); `__owner` is glibc's third int.
        let owner = unsafe { (*m.cast::<AtomicU32>().add(2)).load(Ordering::Relaxed) };
        let mine = owner as i32 == crate::glibc::own_tid();
        let mut pause_us = 50;
        loop {
            // SAFETY: glibc's condition variable, alive as above.
            unsafe { next::pthread_cond_broadcast()(c) };
            if mine || pause_us > 3200 || d.shared_cond.load(Ordering::SeqCst) != c {
                break;
            }
            let ts = libc::timespec { tv_sec: 0, tv_nsec: pause_us * 1000 };
            // SAFETY: the system call itself, not the library's `nanosleep`,
            // which is a cancellation point: the count above must be dropped.
            unsafe {
                libc::syscall(libc::SYS_nanosleep, &ts, std::ptr::null_mut::<libc::timespec>())
            };
            pause_us *= 4;
        }
    }
    d.shared_waking.fetch_sub(1, Ordering::SeqCst);
}

/// `pthread_cond_wait`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_wait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
) -> c_int {
    // SAFETY: the caller's condition variable.
    let r = unsafe { raw(c) };
    if r.shared() {
        // SAFETY: glibc's, forwarded unchanged.
        return shared_wait(c, m, || unsafe { next::pthread_cond_wait()(c, m) });
    }
    finish(wait(r, m, None))
}

/// `pthread_cond_timedwait`: on the condition variable's clock.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_timedwait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's condition variable.
    let r = unsafe { raw(c) };
    if r.shared() {
        // SAFETY: glibc's, forwarded unchanged.
        return shared_wait(c, m, || unsafe { next::pthread_cond_timedwait()(c, m, at) });
    }
    let clock = if r.flags.load(Ordering::Relaxed) & MONOTONIC != 0 {
        libc::CLOCK_MONOTONIC
    } else {
        libc::CLOCK_REALTIME
    };
    // SAFETY: the caller's time.
    match unsafe { deadline(clock, at) } {
        Ok(d) => finish(wait(r, m, Some(&d))),
        Err(e) => e,
    }
}

/// `pthread_cond_clockwait`: `CLOCK_REALTIME` or `CLOCK_MONOTONIC`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_clockwait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    clock: libc::clockid_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's condition variable.
    let r = unsafe { raw(c) };
    if r.shared() {
        // SAFETY: glibc's, forwarded unchanged.
        return shared_wait(c, m, || unsafe { next::pthread_cond_clockwait()(c, m, clock, at) });
    }
    if clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC {
        return libc::EINVAL;
    }
    // SAFETY: the caller's time.
    match unsafe { deadline(clock, at) } {
        Ok(d) => finish(wait(r, m, Some(&d))),
        Err(e) => e,
    }
}

/// `pthread_cond_signal`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_signal(c: *mut libc::pthread_cond_t) -> c_int {
    // SAFETY: the caller's condition variable.
    let r = unsafe { raw(c) };
    if r.shared() {
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::pthread_cond_signal()(c) };
    }
    r.signal();
    0
}

/// `pthread_cond_broadcast`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_broadcast(c: *mut libc::pthread_cond_t) -> c_int {
    // SAFETY: the caller's condition variable.
    let r = unsafe { raw(c) };
    if r.shared() {
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::pthread_cond_broadcast()(c) };
    }
    r.broadcast();
    0
}

/// `pthread_cond_init`: a process-shared one is glibc's (module docs).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_init(
    c: *mut libc::pthread_cond_t,
    a: *const libc::pthread_condattr_t,
) -> c_int {
    // SAFETY: glibc's `pthread_condattr_t` is one int (module docs).
    let v = if a.is_null() { 0 } else { unsafe { a.cast::<u32>().read() } };
    if v & SHARED != 0 {
        // SAFETY: glibc's from now on, made by glibc.
        return unsafe { next::pthread_cond_init()(c, a) };
    }
    // SAFETY: the caller's object, unused while it is initialised.
    unsafe { std::ptr::write_bytes(c.cast::<u8>(), 0, std::mem::size_of::<Raw>()) };
    // SAFETY: as above.
    unsafe { raw(c) }.flags.store(v & MONOTONIC, Ordering::Release);
    0
}

/// `pthread_cond_destroy`: `EBUSY` while threads wait (module docs).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_destroy(c: *mut libc::pthread_cond_t) -> c_int {
    // SAFETY: the caller's condition variable.
    let r = unsafe { raw(c) };
    if r.shared() {
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::pthread_cond_destroy()(c) };
    }
    let q = r.queue();
    let busy = !q.lock().is_empty();
    if busy {
        libc::EBUSY
    } else {
        0
    }
}

/// The attribute's word (glibc's `pthread_condattr_t`: one `int`, bit 0
/// process-shared, bit 1 the clock).
///
/// # Safety
///
/// `a` is a `pthread_condattr_t`.
unsafe fn attr<'a>(a: *const libc::pthread_condattr_t) -> &'a AtomicU32 {
    // SAFETY: an aligned int the caller owns.
    unsafe { AtomicU32::from_ptr(a.cast::<u32>().cast_mut()) }
}

/// `pthread_condattr_init`: private, `CLOCK_REALTIME`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_condattr_init(a: *mut libc::pthread_condattr_t) -> c_int {
    // SAFETY: the caller's attribute.
    unsafe { attr(a) }.store(0, Ordering::Relaxed);
    0
}

/// `pthread_condattr_destroy`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_condattr_destroy(
    _a: *mut libc::pthread_condattr_t,
) -> c_int {
    0
}

/// `pthread_condattr_setclock`: `CLOCK_REALTIME` or `CLOCK_MONOTONIC`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_condattr_setclock(
    a: *mut libc::pthread_condattr_t,
    clock: libc::clockid_t,
) -> c_int {
    let bit = match clock {
        libc::CLOCK_REALTIME => 0,
        libc::CLOCK_MONOTONIC => MONOTONIC,
        _ => return libc::EINVAL,
    };
    // SAFETY: the caller's attribute.
    let w = unsafe { attr(a) };
    w.store((w.load(Ordering::Relaxed) & !MONOTONIC) | bit, Ordering::Relaxed);
    0
}

/// `pthread_condattr_getclock`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_condattr_getclock(
    a: *const libc::pthread_condattr_t,
    clock: *mut libc::clockid_t,
) -> c_int {
    // SAFETY: the caller's attribute and out-parameter.
    unsafe {
        *clock = if attr(a).load(Ordering::Relaxed) & MONOTONIC != 0 {
            libc::CLOCK_MONOTONIC
        } else {
            libc::CLOCK_REALTIME
        }
    };
    0
}

/// `pthread_condattr_setpshared`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_condattr_setpshared(
    a: *mut libc::pthread_condattr_t,
    pshared: c_int,
) -> c_int {
    // SAFETY: the caller's attribute.
    let w = unsafe { attr(a) };
    match pshared {
        libc::PTHREAD_PROCESS_PRIVATE => w.fetch_and(!SHARED, Ordering::Relaxed),
        libc::PTHREAD_PROCESS_SHARED => w.fetch_or(SHARED, Ordering::Relaxed),
        _ => return libc::EINVAL,
    };
    0
}

/// `pthread_condattr_getpshared`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_condattr_getpshared(
    a: *const libc::pthread_condattr_t,
    pshared: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute and out-parameter.
    unsafe { *pshared = c_int::from(attr(a).load(Ordering::Relaxed) & SHARED != 0) };
    0
}
