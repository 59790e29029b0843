//! Barriers: `pthread_barrier_*` and `pthread_barrierattr_*`.
//!
//! # The object
//!
//! A `pthread_barrier_t` keeps glibc's size (32 bytes) and glibc's `shared`
//! field (an `int` at byte 12), which glibc sets to 0 (`FUTEX_PRIVATE`,
//! glibc's `LLL_PRIVATE`) for a private barrier and to 128 (`FUTEX_SHARED`)
//! for a process-shared one. Ours are private and set it to 0 as well; a
//! barrier with anything else there is glibc's
//! (made by glibc's `pthread_barrier_init` for a process-shared attribute,
//! every operation forwarded). There is no static initializer.
//!
//! | bytes | ours                                                        |
//! |-------|-------------------------------------------------------------|
//! | 0     | bit 0 the wait queue's lock; bits 1-31 the round number     |
//! | 4     | threads arrived in this round                               |
//! | 8     | the count the barrier was made for                          |
//! | 12    | 0 (glibc's `shared`, above)                                 |
//! | 16, 24| the queue's head and tail (`wait.rs`)                       |
//!
//! # The protocol
//!
//! Under the queue lock, an arriving thread counts itself. Not the last, it
//! links a waiter tagged with the round and waits (not a cancellation point,
//! and with no time limit). The last one starts the next round (count back
//! to 0, round + 1) and wakes every waiter tagged with the round that ended,
//! in batches (a thread released early may already wait in the next round,
//! with the next tag, and must stay). It alone returns
//! `PTHREAD_BARRIER_SERIAL_THREAD`; the others return 0. A woken thread
//! touches the barrier no more, so it may be destroyed as soon as the
//! serial thread has returned; `pthread_barrier_destroy` while threads wait
//! is `EBUSY`.

use crate::wait::{Cancel, Queue, Unlinked, Waiter};
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

/// glibc's definitions, for process-shared barriers.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_uint, c_void};
    crate::glibc::real!(pthread_barrier_init: fn(*mut libc::pthread_barrier_t, *const libc::pthread_barrierattr_t, c_uint) -> c_int);
    crate::glibc::real!(pthread_barrier_destroy: fn(*mut libc::pthread_barrier_t) -> c_int);
    crate::glibc::real!(pthread_barrier_wait: fn(*mut libc::pthread_barrier_t) -> c_int);
}

/// glibc's `shared` value of a private barrier (`FUTEX_PRIVATE`, 0; a
/// process-shared one has 128).
const PRIVATE: c_int = 0;
const QUEUE_LOCK: u32 = 1;
/// One round, in the lock word (above the lock bit).
const ROUND: u32 = 2;
/// glibc's limit on the count (`BARRIER_IN_THRESHOLD`).
const MAX_COUNT: u32 = u32::MAX / 2;
/// Waiters woken per turn of the queue lock.
const BATCH: usize = 16;

/// Our view of a `pthread_barrier_t` (module docs).
#[repr(C)]
struct Raw {
    lock: AtomicU32,
    arrived: AtomicU32,
    count: AtomicU32,
    shared: AtomicI32,
    head: AtomicPtr<Waiter>,
    tail: AtomicPtr<Waiter>,
}

const _: () = assert!(std::mem::size_of::<Raw>() == std::mem::size_of::<libc::pthread_barrier_t>());
const _: () = assert!(std::mem::size_of::<libc::pthread_barrier_t>() == 32);

/// Our view of `b`.
///
/// # Safety
///
/// `b` points to a `pthread_barrier_t` that outlives `'a`.
unsafe fn raw<'a>(b: *const libc::pthread_barrier_t) -> &'a Raw {
    // SAFETY: same size, alignment 8; atomics over plain bytes.
    unsafe { &*b.cast::<Raw>() }
}

impl Raw {
    fn queue(&self) -> Queue<'_> {
        Queue::new(&self.lock, QUEUE_LOCK, &self.head, &self.tail)
    }
}

/// `pthread_barrier_wait`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_barrier_wait(b: *mut libc::pthread_barrier_t) -> c_int {
    // SAFETY: the caller's barrier.
    let r = unsafe { raw(b) };
    if r.shared.load(Ordering::Relaxed) != PRIVATE {
        // SAFETY: glibc's barrier, forwarded unchanged.
        return unsafe { next::pthread_barrier_wait()(b) };
    }
    let q = r.queue();
    let g = q.lock();
    let round = r.lock.load(Ordering::Relaxed) & !QUEUE_LOCK;
    let n = r.arrived.load(Ordering::Relaxed) + 1;
    if n < r.count.load(Ordering::Relaxed) {
        r.arrived.store(n, Ordering::Relaxed);
        let w = Waiter::new(round);
        g.push(&w);
        drop(g);
        w.wait(&q, None, Cancel::Never);
        return 0;
    }
    r.arrived.store(0, Ordering::Relaxed);
    r.lock.fetch_add(ROUND, Ordering::Relaxed);
    let mut g = Some(g);
    loop {
        let mut batch: [Option<Unlinked>; BATCH] = std::array::from_fn(|_| None);
        let mut n = 0;
        {
            let g = g.take().unwrap_or_else(|| q.lock());
            while n < BATCH && g.front_tag() == Some(round) {
                batch[n] = g.pop();
                n += 1;
            }
        }
        for w in batch.into_iter().flatten() {
            w.wake();
        }
        if n < BATCH {
            return libc::PTHREAD_BARRIER_SERIAL_THREAD;
        }
    }
}

/// `pthread_barrier_init`: `EINVAL` for a count of 0 (or past glibc's
/// limit); a process-shared barrier is glibc's.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_barrier_init(
    b: *mut libc::pthread_barrier_t,
    a: *const libc::pthread_barrierattr_t,
    count: u32,
) -> c_int {
    if count == 0 || count > MAX_COUNT {
        return libc::EINVAL;
    }
    // SAFETY: glibc's `pthread_barrierattr_t` is one int, `pshared`.
    let pshared = if a.is_null() { 0 } else { unsafe { a.cast::<c_int>().read() } };
    if pshared != libc::PTHREAD_PROCESS_PRIVATE {
        // SAFETY: glibc's from now on, made by glibc.
        return unsafe { next::pthread_barrier_init()(b, a, count) };
    }
    // SAFETY: the caller's object, unused while it is initialised.
    unsafe { std::ptr::write_bytes(b.cast::<u8>(), 0, std::mem::size_of::<Raw>()) };
    // SAFETY: as above.
    let r = unsafe { raw(b) };
    r.count.store(count, Ordering::Relaxed);
    r.shared.store(PRIVATE, Ordering::Release);
    0
}

/// `pthread_barrier_destroy`: `EBUSY` while threads wait in it.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_barrier_destroy(b: *mut libc::pthread_barrier_t) -> c_int {
    // SAFETY: the caller's barrier.
    let r = unsafe { raw(b) };
    if r.shared.load(Ordering::Relaxed) != PRIVATE {
        // SAFETY: glibc's barrier, forwarded unchanged.
        return unsafe { next::pthread_barrier_destroy()(b) };
    }
    let q = r.queue();
    let g = q.lock();
    if r.arrived.load(Ordering::Relaxed) != 0 || !g.is_empty() {
        return libc::EBUSY;
    }
    0
}

/// `pthread_barrierattr_init`: private.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_barrierattr_init(
    a: *mut libc::pthread_barrierattr_t,
) -> c_int {
    // SAFETY: the caller's attribute (one int).
    unsafe { a.cast::<c_int>().write(libc::PTHREAD_PROCESS_PRIVATE) };
    0
}

/// `pthread_barrierattr_destroy`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_barrierattr_destroy(
    _a: *mut libc::pthread_barrierattr_t,
) -> c_int {
    0
}

/// `pthread_barrierattr_setpshared`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_barrierattr_setpshared(
    a: *mut libc::pthread_barrierattr_t,
    pshared: c_int,
) -> c_int {
    if pshared != libc::PTHREAD_PROCESS_PRIVATE && pshared != libc::PTHREAD_PROCESS_SHARED {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attribute (one int).
    unsafe { a.cast::<c_int>().write(pshared) };
    0
}

/// `pthread_barrierattr_getpshared`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_barrierattr_getpshared(
    a: *const libc::pthread_barrierattr_t,
    pshared: *mut c_int,
) -> c_int {
    // SAFETY: the caller's attribute (one int) and out-parameter.
    unsafe { *pshared = a.cast::<c_int>().read() };
    0
}
