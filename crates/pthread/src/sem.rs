//! Unnamed semaphores: `sem_init`, `sem_destroy`, `sem_wait`,
//! `sem_trywait`, `sem_timedwait`, `sem_clockwait`, `sem_post`,
//! `sem_getvalue`.
//!
//! # Whose semaphore
//!
//! A `sem_t` keeps glibc's size (32 bytes) and glibc's `private` field (an
//! `int` at byte 8): glibc's `sem_init` stores 0 (`FUTEX_PRIVATE`, which is
//! glibc's `LLL_PRIVATE`) there for a semaphore private to the process and
//! 128 (`FUTEX_SHARED`, the futex flag glibc then leaves off) for a
//! process-shared one, and `sem_open`'s named semaphores have 128. Ours are
//! made by `sem_init` with `pshared` 0 and store 0 too; every operation on
//! a semaphore whose byte 8 is anything else goes to glibc (its waiters may
//! be in another process, where a waiter linked on this process's stack
//! means nothing), and `sem_open`, `sem_close` and `sem_unlink` stay glibc's.
//!
//! | bytes | ours                                                        |
//! |-------|-------------------------------------------------------------|
//! | 0     | the value (where glibc keeps it too)                        |
//! | 4     | `word`: bit 0 the wait queue's lock, bit 1 `WAITERS`, bits 8-31 pending wake-ups |
//! | 8     | 0 (glibc's `private`, above)                                |
//! | 16, 24| the queue's head and tail (`wait.rs`)                       |
//!
//! # The protocol
//!
//! The value changes only by compare-and-swap: a wait takes 1 if it is
//! positive, a post adds 1 (`EOVERFLOW` at `SEM_VALUE_MAX`). Waiting, slow
//! path: take the queue lock, set `WAITERS`, look at the value once more
//! (positive: drop the lock and try again), link a waiter, drop the lock,
//! wait; woken, try again from the top (a woken waiter that finds the value
//! taken waits again; no wake-up is handed over, so none is lost when the
//! waiter gives up at the same time). Posting: after its add, a post that
//! sees `WAITERS` wakes the first waiter. The post's add then its look at
//! `WAITERS`, and the waiter's set of `WAITERS` then its look at the value,
//! are all sequentially consistent, so one of the two sees the other: no
//! waiter sleeps through a post. `WAITERS` is cleared under the queue lock
//! when the queue is found empty.
//!
//! # `sem_post` in a signal handler
//!
//! POSIX makes `sem_post` async-signal-safe, and a handler may interrupt
//! its own thread anywhere — in a `sem_wait` or another `sem_post` of the
//! same semaphore, holding its queue lock. A post that spun on that lock
//! would wait for a holder that cannot run until the handler returns. So a
//! post never waits for the queue lock: it counts a *pending wake-up* in
//! `word` and tries the lock once; whoever holds the lock, after releasing
//! it, looks for pending wake-ups and, if it can take the lock again, does
//! them (the poster itself, if it got the lock). A pending count added
//! while the lock is held is seen by the holder's look after its release
//! (both are changes of the one word, which every thread sees in one
//! order); every path of this file that holds the lock, including the wait
//! in `wait.rs`, which takes it to give up, is followed by that look. A
//! post allocates nothing and takes no lock, and the value and `WAITERS`
//! are atomics.
//!
//! What remains is the wake-up itself: a waiting kernel thread is woken by
//! `FUTEX_WAKE`, safe anywhere; a waiting user thread is made runnable by
//! the runtime's `unpark`, which puts it on the calling processor's run
//! queue (and a kernel thread's first wake-up of a user thread allocates
//! its runtime block, `runtime::enter`). A handler that interrupted the runtime's own code on the same
//! kernel thread in the middle of a change of that queue would corrupt it;
//! the runtime's preemption signal never lands there (its code is not a
//! safe point), but an ordinary signal may. Making that case safe needs a
//! signal-safe unpark in the runtime (an atomic hand-over list the
//! processor drains), which this library cannot add from outside.
//!
//! `sem_wait`, `sem_timedwait` and `sem_clockwait` are cancellation points
//! (acted on before taking the value, and while waiting).

use crate::wait::{Cancel, Deadline, Outcome, Queue, Waiter};
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

/// glibc's definitions, for process-shared and named semaphores.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_uint, c_void};
    crate::glibc::real!(sem_init: fn(*mut libc::sem_t, c_int, c_uint) -> c_int);
    crate::glibc::real!(sem_destroy: fn(*mut libc::sem_t) -> c_int);
    crate::glibc::real!(sem_wait: fn(*mut libc::sem_t) -> c_int);
    crate::glibc::real!(sem_trywait: fn(*mut libc::sem_t) -> c_int);
    crate::glibc::real!(sem_timedwait: fn(*mut libc::sem_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(sem_clockwait: fn(*mut libc::sem_t, libc::clockid_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(sem_post: fn(*mut libc::sem_t) -> c_int);
    crate::glibc::real!(sem_getvalue: fn(*mut libc::sem_t, *mut c_int) -> c_int);
}

/// glibc's `private` for a process-private semaphore (`FUTEX_PRIVATE`, 0;
/// a process-shared or named one has 128).
const PRIVATE: c_int = 0;
/// `SEM_VALUE_MAX`.
const VALUE_MAX: u32 = i32::MAX as u32;

const QUEUE_LOCK: u32 = 1;
const WAITERS: u32 = 2;
const PENDING_ONE: u32 = 1 << 8;

/// Our view of a `sem_t` (module docs).
#[repr(C)]
struct Raw {
    value: AtomicU32,
    word: AtomicU32,
    private: AtomicI32,
    _spare: u32,
    head: AtomicPtr<Waiter>,
    tail: AtomicPtr<Waiter>,
}

const _: () = assert!(std::mem::size_of::<Raw>() == std::mem::size_of::<libc::sem_t>());
const _: () = assert!(std::mem::size_of::<libc::sem_t>() == 32);

/// Our view of `s`, or `None` if it is glibc's.
///
/// # Safety
///
/// `s` points to a `sem_t` that outlives `'a`.
#[inline(always)]
unsafe fn ours<'a>(s: *const libc::sem_t) -> Option<&'a Raw> {
    // SAFETY: same size, alignment 8; atomics over plain bytes.
    let r = unsafe { &*s.cast::<Raw>() };
    (r.private.load(Ordering::Relaxed) == PRIVATE).then_some(r)
}

fn set_errno(e: c_int) -> c_int {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
    -1
}

/// How a slow wait ended.
enum Waited {
    Taken,
    Failed(c_int),
    Cancelled,
}

impl Raw {
    fn queue(&self) -> Queue<'_> {
        Queue::new(&self.word, QUEUE_LOCK, &self.head, &self.tail)
    }

    #[inline]
    fn try_take(&self) -> bool {
        let mut v = self.value.load(Ordering::Relaxed);
        while v > 0 {
            match self.value.compare_exchange_weak(v, v - 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
        false
    }

    /// Does the pending wake-ups, if the queue lock can be had without
    /// waiting (module docs, "`sem_post` in a signal handler"). Called
    /// after every release of the queue lock.
    fn drain(&self) {
        let q = self.queue();
        while self.word.load(Ordering::SeqCst) >= PENDING_ONE {
            // Held: its holder drains after its release.
            let Some(g) = q.try_lock() else { return };
            if self.word.load(Ordering::Relaxed) < PENDING_ONE {
                continue;
            }
            self.word.fetch_sub(PENDING_ONE, Ordering::Relaxed);
            let w = g.pop();
            if g.is_empty() {
                self.word.fetch_and(!WAITERS, Ordering::Relaxed);
            }
            drop(g);
            if let Some(w) = w {
                w.wake();
            }
        }
    }

    /// Waiting, slow path (module docs).
    fn wait_slow(&self, deadline: Option<&Deadline>) -> Waited {
        let q = self.queue();
        loop {
            if self.try_take() {
                return Waited::Taken;
            }
            if deadline.is_some_and(|d| d.remaining().is_none()) {
                return Waited::Failed(libc::ETIMEDOUT);
            }
            let w = Waiter::new(0).interruptible();
            {
                let g = q.lock();
                self.word.fetch_or(WAITERS, Ordering::SeqCst);
                if self.value.load(Ordering::SeqCst) > 0 {
                    drop(g);
                    self.drain();
                    continue;
                }
                g.push(&w);
            }
            self.drain();
            let outcome = w.wait(&q, deadline, Cancel::Point);
            if outcome != Outcome::Woken {
                let g = q.lock();
                if g.is_empty() {
                    self.word.fetch_and(!WAITERS, Ordering::Relaxed);
                }
            }
            self.drain();
            match outcome {
                Outcome::Woken => {}
                Outcome::TimedOut => {
                    return if self.try_take() {
                        Waited::Taken
                    } else {
                        Waited::Failed(libc::ETIMEDOUT)
                    };
                }
                Outcome::Cancelled => return Waited::Cancelled,
                Outcome::Interrupted => return Waited::Failed(libc::EINTR),
            }
        }
    }
}

/// The end of every waiting function: 0, -1 with `errno`, or the
/// cancellation acted on (no value with a `Drop` is alive in the callers'
/// frames up to the exported function, which is `extern "C-unwind"`: with
/// no cleanup handler to `longjmp` to, the thread ends by unwinding
/// through it).
fn finish(w: Waited) -> c_int {
    match w {
        Waited::Taken => 0,
        Waited::Failed(e) => set_errno(e),
        Waited::Cancelled => crate::cancel::act(),
    }
}

/// A process-shared or named semaphore (glibc's) waited for by a user
/// thread: glibc's own algorithm on glibc's layout (`struct new_sem` with
/// 64-bit atomics, unchanged since 2.21: the value in the low 32 bits of the
/// first word, the number of waiters in the high 32, the futex flag at byte
/// 8), with the futex wait made through `cancel::syscall_unless_cancelled`
/// so that a `pthread_cancel` stops it — glibc's own wait is a cancellation
/// point only for glibc's threads. A waiter counts itself in the high word
/// while it may sleep, so that glibc's `sem_post` (in this process or
/// another) wakes it, and uncounts itself however it leaves (glibc's
/// `__sem_wait_cleanup`). `at`: an absolute time on `clock`.
///
/// # Safety
///
/// `s` is a live glibc semaphore; `at` null or readable.
unsafe fn shared_wait(
    s: *mut libc::sem_t,
    clock: libc::clockid_t,
    at: *const libc::timespec,
) -> c_int {
    const VALUE: u64 = 0xffff_ffff;
    const ONE_WAITER: u64 = 1 << 32;
    // SAFETY: glibc's `data`, 8-aligned at the start of the `sem_t`.
    let data = unsafe { &*s.cast::<std::sync::atomic::AtomicU64>() };
    // SAFETY: glibc's `private` at byte 8: 0 (private) or 128 (shared).
    let private = unsafe { s.cast::<u8>().add(8).cast::<c_int>().read() };
    let take = |d: u64, with_waiter: u64| {
        data.compare_exchange_weak(d, d - 1 - with_waiter, Ordering::Acquire, Ordering::Relaxed)
    };
    let mut d = data.load(Ordering::Relaxed);
    while d & VALUE != 0 {
        match take(d, 0) {
            Ok(_) => return 0,
            Err(now) => d = now,
        }
    }
    // glibc's futex operation: private unless the semaphore's flag says
    // shared; an absolute time on CLOCK_REALTIME says so.
    let mut op = libc::FUTEX_WAIT_BITSET | (private ^ libc::FUTEX_PRIVATE_FLAG);
    if !at.is_null() && clock == libc::CLOCK_REALTIME {
        op |= libc::FUTEX_CLOCK_REALTIME;
    }
    let mut d = data.fetch_add(ONE_WAITER, Ordering::Relaxed) + ONE_WAITER;
    loop {
        if d & VALUE == 0 {
            // SAFETY: the caller's time, if any.
            if !at.is_null() && unsafe { (*at).tv_sec } < 0 {
                // Long past (glibc's answer; the kernel's would be EINVAL).
                data.fetch_sub(ONE_WAITER, Ordering::Relaxed);
                return set_errno(libc::ETIMEDOUT);
            }
            let args = [data.as_ptr() as usize, op as usize, 0, at as usize, 0, u32::MAX as usize];
            // SAFETY: a futex wait on the value word (the low half, first on
            // little-endian) while it is 0.
            let r = unsafe { crate::cancel::syscall_unless_cancelled(libc::SYS_futex, args) };
            match r.map(|r| -r as c_int) {
                None => {
                    data.fetch_sub(ONE_WAITER, Ordering::Relaxed);
                    crate::cancel::act();
                }
                Some(e @ (libc::ETIMEDOUT | libc::EINTR | libc::EOVERFLOW)) => {
                    data.fetch_sub(ONE_WAITER, Ordering::Relaxed);
                    return set_errno(e);
                }
                Some(_) => {}
            }
            d = data.load(Ordering::Relaxed);
        } else if let Err(now) = take(d, ONE_WAITER) {
            d = now;
        } else {
            return 0;
        }
    }
}

/// `sem_init`: `pshared` 0 makes one of ours, anything else glibc's.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sem_init(s: *mut libc::sem_t, pshared: c_int, value: u32) -> c_int {
    if value > VALUE_MAX {
        return set_errno(libc::EINVAL);
    }
    if pshared != 0 {
        // SAFETY: glibc's from now on, made by glibc.
        return unsafe { next::sem_init()(s, pshared, value) };
    }
    // SAFETY: the caller's object, unused while it is initialised.
    unsafe { std::ptr::write_bytes(s.cast::<u8>(), 0, std::mem::size_of::<Raw>()) };
    // SAFETY: as above.
    let r = unsafe { &*s.cast::<Raw>() };
    r.value.store(value, Ordering::Relaxed);
    r.private.store(PRIVATE, Ordering::Release);
    0
}

/// `sem_destroy`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sem_destroy(s: *mut libc::sem_t) -> c_int {
    // SAFETY: the caller's semaphore.
    match unsafe { ours(s) } {
        Some(_) => 0,
        // SAFETY: glibc's, forwarded unchanged.
        None => unsafe { next::sem_destroy()(s) },
    }
}

/// `sem_post`: async-signal-safe (module docs).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sem_post(s: *mut libc::sem_t) -> c_int {
    // SAFETY: the caller's semaphore.
    let Some(r) = (unsafe { ours(s) }) else {
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::sem_post()(s) };
    };
    let mut v = r.value.load(Ordering::Relaxed);
    loop {
        if v >= VALUE_MAX {
            return set_errno(libc::EOVERFLOW);
        }
        match r.value.compare_exchange_weak(v, v + 1, Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => v = now,
        }
    }
    if r.word.load(Ordering::SeqCst) & WAITERS != 0 {
        r.word.fetch_add(PENDING_ONE, Ordering::SeqCst);
        r.drain();
    }
    0
}

/// `sem_wait`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sem_wait(s: *mut libc::sem_t) -> c_int {
    // SAFETY: the caller's semaphore.
    let Some(r) = (unsafe { ours(s) }) else {
        if crate::thread::user_path() {
            crate::cancel::test();
            // SAFETY: glibc's semaphore, waited for as glibc does.
            return unsafe { shared_wait(s, libc::CLOCK_REALTIME, std::ptr::null()) };
        }
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::sem_wait()(s) };
    };
    crate::cancel::test();
    if r.try_take() {
        return 0;
    }
    finish(r.wait_slow(None))
}

/// `sem_trywait`: `EAGAIN` when the value is 0.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sem_trywait(s: *mut libc::sem_t) -> c_int {
    // SAFETY: the caller's semaphore.
    let Some(r) = (unsafe { ours(s) }) else {
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::sem_trywait()(s) };
    };
    if r.try_take() {
        0
    } else {
        set_errno(libc::EAGAIN)
    }
}

/// The timed waits' body: glibc checks the time first, then the
/// cancellation, then the value.
///
/// # Safety
///
/// `at` is readable.
unsafe fn timed(r: &Raw, clock: libc::clockid_t, at: *const libc::timespec) -> c_int {
    // SAFETY: the caller's time.
    let at = unsafe { *at };
    if !Deadline::valid(&at) {
        return set_errno(libc::EINVAL);
    }
    crate::cancel::test();
    if r.try_take() {
        return 0;
    }
    finish(r.wait_slow(Some(&Deadline { clock, at })))
}

/// The timed waits on glibc's semaphore for a user thread: glibc checks
/// the time first, then the cancellation.
///
/// # Safety
///
/// `s` is a live glibc semaphore; `at` readable.
unsafe fn shared_timed(
    s: *mut libc::sem_t,
    clock: libc::clockid_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's time.
    if !Deadline::valid(unsafe { &*at }) {
        return set_errno(libc::EINVAL);
    }
    crate::cancel::test();
    // SAFETY: the caller's semaphore and time.
    unsafe { shared_wait(s, clock, at) }
}

/// `sem_timedwait` (`CLOCK_REALTIME`).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sem_timedwait(
    s: *mut libc::sem_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's semaphore.
    let Some(r) = (unsafe { ours(s) }) else {
        if crate::thread::user_path() {
            // SAFETY: glibc's semaphore and the caller's time.
            return unsafe { shared_timed(s, libc::CLOCK_REALTIME, at) };
        }
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::sem_timedwait()(s, at) };
    };
    // SAFETY: the caller's time.
    unsafe { timed(r, libc::CLOCK_REALTIME, at) }
}

/// `sem_clockwait`: `CLOCK_REALTIME` or `CLOCK_MONOTONIC`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sem_clockwait(
    s: *mut libc::sem_t,
    clock: libc::clockid_t,
    at: *const libc::timespec,
) -> c_int {
    // SAFETY: the caller's semaphore.
    let Some(r) = (unsafe { ours(s) }) else {
        if crate::thread::user_path()
            && (clock == libc::CLOCK_REALTIME || clock == libc::CLOCK_MONOTONIC)
        {
            // SAFETY: glibc's semaphore and the caller's time.
            return unsafe { shared_timed(s, clock, at) };
        }
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::sem_clockwait()(s, clock, at) };
    };
    if clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC {
        return set_errno(libc::EINVAL);
    }
    // SAFETY: the caller's time.
    unsafe { timed(r, clock, at) }
}

/// `sem_getvalue`: the value (never negative, as glibc's).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sem_getvalue(s: *mut libc::sem_t, out: *mut c_int) -> c_int {
    // SAFETY: the caller's semaphore.
    let Some(r) = (unsafe { ours(s) }) else {
        // SAFETY: glibc's, forwarded unchanged.
        return unsafe { next::sem_getvalue()(s, out) };
    };
    // SAFETY: the caller's out-parameter.
    unsafe { *out = r.value.load(Ordering::Relaxed) as c_int };
    0
}
