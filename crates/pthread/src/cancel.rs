//! Cancellation: `pthread_cancel` and its state and type, the cancellation
//! points of the library, and the C cleanup handlers.
//!
//! A cancelled user thread acts at the next cancellation point it reaches
//! with cancellation enabled: `pthread_testcancel`, `pthread_join`,
//! `pthread_cond_wait`/`timedwait`, `sem_wait`/`timedwait`, the sleeping
//! functions, and every system call that is one (POSIX XSH 2.9.5.2 and
//! glibc's: the pipe and socket calls of `fdio.rs`, the `poll` family of
//! `io.rs`, the `sigwait` family and `sigsuspend` of `signal.rs`, and the
//! table of `points.rs`: `open`, `pread`, the `wait` family, `pause`,
//! `fcntl(F_SETLKW)`, the message queues, `close`...); one waiting in such a
//! call is woken to act ("Cancellation points in the kernel", below). It
//! then runs its C
//! cleanup handlers, innermost first, and unwinds to its base
//! (`thread.rs`), which runs C++ destructors on the way, then its key
//! destructors; its joiner gets `PTHREAD_CANCELED`.
//!
//! # The C cleanup handlers
//!
//! glibc's `pthread_cleanup_push` macro (C without exceptions) puts a
//! `__pthread_unwind_buf_t` on the stack, `setjmp`s into it, and registers
//! it with `__pthread_register_cancel`; `pthread_cleanup_pop` unregisters
//! it. On cancellation or `pthread_exit` the library `longjmp`s into the
//! innermost buffer: the macro's code calls the handler, then
//! `__pthread_unwind_next(buf)`, which goes on to the next buffer, or, after
//! the last, unwinds to the thread's base. The buffers are chained through
//! `priv.data.prev` (the first word after the jump buffer and its
//! `mask_was_saved`, at byte 72), as in glibc. A kernel thread's buffers are
//! glibc's business: the functions forward them there.
//!
//! # Asynchronous cancellation
//!
//! A thread whose cancellation type is asynchronous acts on a cancellation
//! at once when it is waiting in the library — a mutex or read-write lock
//! wait too, which are not cancellation points (`wait::Cancel::Async`): the
//! wait unlinks itself, the lock function's frame ends, and the thread acts
//! from there (`mutex.rs`, `rwlock.rs`), without the lock. A condition
//! wait's relock of its mutex is never cut short: POSIX has the cancelled
//! waiter hold the mutex again before its handlers run.
//!
//! A thread that computes without calling the library is stopped where it
//! is, as glibc's cancellation signal stops it: `pthread_cancel` sends the
//! runtime's preemption request to its kernel thread
//! (`schedlab_rt::shared::interrupt`); at the safe point the request
//! reaches — an instruction of the program or of its libraries, never of
//! the C library, the loader or this library (`crates/rt/src/preempt.rs`,
//! safe point 3) — the thread runs the runtime's preemption hook,
//! [`at_preemption`], which acts: the cleanup handlers by `longjmp`, or the
//! unwind to the base through the preemption trampoline, whose unwind table
//! makes it a signal frame over the interrupted code (`arch/x86_64.rs`).
//! A request that lands where the thread may not be stopped (inside the C
//! library: `memcpy`, `libm`) is asked again by the runtime's monitor,
//! every 200 µs while the thread runs, until it lands in the program's code
//! (or the thread's next wait takes it).
//!
//! # Cancellation points in the kernel
//!
//! A user thread's pipe and socket reads, writes and accepts park in the
//! runtime's poller (`fdio.rs`), and its sleeps on the runtime's timers:
//! `pthread_cancel` unparks it, and the wait ends when it sees the request
//! (`schedlab_rt::io::wait_since_unless`). A call that data already went
//! through returns its count; the cancellation acts at the next point.
//!
//! Every other cancellation point that waits in the kernel (`points.rs`
//! has the list) goes through [`syscall`]: the
//! runtime's cancellable system call, musl's design, which tests the
//! thread's cancellation word and makes the call between two labels; the
//! canceller sets the word and signals the thread's kernel thread, whose
//! handler sends a call not yet finished back to the test. So a call that
//! finished keeps its result (POSIX: a call that transferred data is not
//! cancelled), and one that had not is not made. glibc 2.36's own points
//! switch to asynchronous cancellation around the call instead, which can
//! act after the call returned (glibc bug 12683, fixed in 2.39), and on a
//! user thread do nothing at all: they read the cancellation state glibc
//! keeps in its own thread control block, which a user thread's never gets.
//!
//! Not done: glibc's own internal calls (stdio's `__read`, `system`'s
//! wait) finish first.

use crate::thread::{current, Kind, ThreadData};
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

/// glibc's definitions of what this file stands in front of.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_uint, c_void};
    crate::glibc::real!(pthread_cancel: fn(libc::pthread_t) -> c_int);
    crate::glibc::real!(__pthread_register_cancel: fn(*mut c_void) -> ());
    crate::glibc::real!(__pthread_unregister_cancel: fn(*mut c_void) -> ());
    crate::glibc::real!(__pthread_unwind_next: fn(*mut c_void) -> ());
}

/// Cancellation disabled (`PTHREAD_CANCEL_DISABLE`).
const DISABLED: u32 = 1;
/// Asynchronous type (`PTHREAD_CANCEL_ASYNCHRONOUS`).
const ASYNC: u32 = 2;
/// A cancellation request is pending.
const PENDING: u32 = 4;
/// The thread is acting on it (never act twice).
const ACTING: u32 = 8;
/// The thread is in a cancellable system call ([`syscall`]): a canceller
/// signals its kernel thread.
const IN_CALL: u32 = 16;

extern "C" {
    fn siglongjmp(env: *mut c_void, val: c_int) -> !;
}

// glibc's <pthread.h> values (the libc crate lacks them).
const PTHREAD_CANCEL_ENABLE: c_int = 0;
const PTHREAD_CANCEL_DISABLE: c_int = 1;
const PTHREAD_CANCEL_DEFERRED: c_int = 0;
const PTHREAD_CANCEL_ASYNCHRONOUS: c_int = 1;
const PTHREAD_CANCELED: *mut c_void = usize::MAX as *mut c_void;

/// Byte offset of `priv.data.prev` in `__pthread_unwind_buf_t`.
const PREV: usize = 72;

/// Whether the calling thread must act on a cancellation at a cancellation point.
pub(crate) fn cancel_pending(d: &ThreadData) -> bool {
    let c = d.cancel.load(Ordering::Acquire);
    c & (PENDING | DISABLED | ACTING) == PENDING
}

/// Whether the calling user thread must act on a pending cancellation now:
/// at a cancellation point (`point`), or anywhere when its cancellation type
/// is asynchronous.
pub(crate) fn acts_here(point: bool) -> bool {
    let d = current();
    let c = d.cancel.load(Ordering::Acquire);
    d.kind.get() == Kind::User && cancel_pending(d) && (point || c & ASYNC != 0)
}

/// A cancellation point: acts on a pending cancellation (never returns then).
pub(crate) fn test() {
    let d = current();
    if d.kind.get() == Kind::User && cancel_pending(d) {
        act();
    }
}

/// Acts on the calling user thread's pending cancellation: its cleanup
/// handlers, then the unwind to its base. The caller must hold nothing that
/// needs dropping (the C cleanup handlers are reached by `longjmp`, which
/// skips the frames in between).
pub(crate) fn act() -> ! {
    let d = current();
    d.cancel.fetch_or(ACTING, Ordering::AcqRel);
    crate::thread::set_value(d, PTHREAD_CANCELED);
    unwind(d)
}

/// Runs the C cleanup handlers, innermost first, then unwinds to the base.
pub(crate) fn unwind(d: &ThreadData) -> ! {
    let top = d.cleanup.get();
    if top.is_null() {
        crate::thread::unwind_to_base()
    }
    // SAFETY: a registered buffer of a frame still on this thread's stack
    // (registered buffers are unregistered before their frame ends), set by
    // `setjmp` with no signal mask saved.
    unsafe { siglongjmp(top, 1) }
}

/// A system call that is a cancellation point, made on the calling thread:
/// the kernel's result (a negative error number on failure). On a user
/// thread, a deferred cancellation requested before the call enters the
/// kernel, or while it waits there, acts instead of it
/// (`schedlab_rt::shared::syscall_cancellable`); one that comes after the
/// call has finished (it may have transferred data) waits for the next
/// cancellation point.
///
/// # Safety
///
/// The system call's contract.
pub(crate) unsafe fn syscall(nr: libc::c_long, args: [usize; 6]) -> isize {
    // SAFETY: the caller's contract.
    match unsafe { syscall_unless_cancelled(nr, args) } {
        Some(r) => r,
        None => act(),
    }
}

/// [`syscall`], but a cancellation that stops the call is returned
/// (`None`) for the caller to act on once it has undone its own state (a
/// semaphore's waiter count, `sem.rs`).
///
/// # Safety
///
/// The system call's contract.
pub(crate) unsafe fn syscall_unless_cancelled(nr: libc::c_long, args: [usize; 6]) -> Option<isize> {
    let d = current();
    if d.kind.get() != Kind::User {
        // SAFETY: the caller's call.
        let r = unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]) };
        return Some(if r < 0 { -(errno() as isize) } else { r as isize });
    }
    // Set before the call's own test of the word, in the word: a canceller's
    // `fetch_or` sees it, or the test sees the canceller's request.
    d.cancel.fetch_or(IN_CALL, Ordering::AcqRel);
    let mask = PENDING | DISABLED | ACTING;
    // SAFETY: the caller's call.
    let r = unsafe { schedlab_rt::shared::syscall_cancellable(&d.cancel, mask, PENDING, nr, args) };
    d.cancel.fetch_and(!IN_CALL, Ordering::AcqRel);
    match r {
        Some(r) if r == -(libc::EINTR as isize) && cancel_pending(d) => None,
        r => r,
    }
}

fn errno() -> c_int {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// [`syscall`] with C's convention: -1 and `errno` on failure.
///
/// # Safety
///
/// As [`syscall`].
pub(crate) unsafe fn syscall_c(nr: libc::c_long, args: [usize; 6]) -> isize {
    // SAFETY: the caller's contract.
    let r = unsafe { syscall(nr, args) };
    if r < 0 {
        // SAFETY: the calling thread's errno.
        unsafe { *libc::__errno_location() = -r as c_int };
        return -1;
    }
    r
}

/// `pthread_cancel`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cancel(t: libc::pthread_t) -> c_int {
    let Some(d) = crate::thread::user_thread(t) else {
        if crate::thread::gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged to glibc.
        return unsafe { next::pthread_cancel()(t) };
    };
    let was = d.cancel.fetch_or(PENDING, Ordering::AcqRel);
    if was & PENDING == 0 {
        let me = current();
        if me.tcb == d.tcb {
            if was & (ASYNC | DISABLED) == ASYNC {
                act();
            }
        } else {
            if was & (ASYNC | DISABLED) == ASYNC {
                interrupt(d);
            }
            crate::thread::unpark(d);
            if was & DISABLED == 0 {
                crate::cond::wake_shared_waiter(d);
                stop_blocked_call(d);
            }
        }
    }
    0
}

/// Ends user thread `d`'s cancellable system call ([`syscall`]), if it is
/// in one, by signalling its kernel thread, whose handler sends the call
/// back to its test of the word (`schedlab_rt::shared::cancel_blocked_call`).
/// A thread between two kernel threads (a hand-off under way, queued to
/// rejoin a processor) is looked for again: in a call, it is on one, or it
/// will test the word before calling again.
fn stop_blocked_call(d: &ThreadData) {
    if d.cancel.load(Ordering::Acquire) & IN_CALL == 0 {
        return;
    }
    crate::runtime::enter();
    let Some(t) = d.rt_thread() else { return };
    while d.cancel.load(Ordering::Acquire) & IN_CALL != 0 {
        if schedlab_rt::shared::cancel_blocked_call(&t) {
            return;
        }
        crate::sched::yield_any();
    }
}

/// Asks user thread `d`, which may be computing, to stop at its next safe
/// point (`at_preemption`): the runtime's preemption request, sent to its
/// kernel thread if it is running.
fn interrupt(d: &ThreadData) {
    crate::runtime::enter();
    if let Some(t) = d.rt_thread() {
        schedlab_rt::shared::interrupt(&t);
    }
}

/// The runtime's preemption hook (`schedlab_rt::shared::set_preempt_hook`),
/// run by a user thread preempted in the program's own code: acts on a
/// pending cancellation there if its type is asynchronous.
pub(crate) fn at_preemption() {
    if acts_here(false) {
        act();
    }
}

/// `pthread_testcancel`.
#[no_mangle]
pub extern "C-unwind" fn pthread_testcancel() {
    test();
}

/// `pthread_setcancelstate`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int {
    let d = current();
    let set = match state {
        PTHREAD_CANCEL_ENABLE => false,
        PTHREAD_CANCEL_DISABLE => true,
        _ => return libc::EINVAL,
    };
    let was = if set {
        d.cancel.fetch_or(DISABLED, Ordering::AcqRel)
    } else {
        d.cancel.fetch_and(!DISABLED, Ordering::AcqRel)
    };
    if !old.is_null() {
        let v = if was & DISABLED != 0 { PTHREAD_CANCEL_DISABLE } else { PTHREAD_CANCEL_ENABLE };
        // SAFETY: the caller's out-parameter.
        unsafe { *old = v };
    }
    if !set && d.kind.get() == Kind::User && was & ASYNC != 0 && cancel_pending(d) {
        act();
    }
    0
}

/// `pthread_setcanceltype`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_setcanceltype(kind: c_int, old: *mut c_int) -> c_int {
    let d = current();
    let set = match kind {
        PTHREAD_CANCEL_DEFERRED => false,
        PTHREAD_CANCEL_ASYNCHRONOUS => true,
        _ => return libc::EINVAL,
    };
    let was = if set {
        d.cancel.fetch_or(ASYNC, Ordering::AcqRel)
    } else {
        d.cancel.fetch_and(!ASYNC, Ordering::AcqRel)
    };
    if !old.is_null() {
        let v =
            if was & ASYNC != 0 { PTHREAD_CANCEL_ASYNCHRONOUS } else { PTHREAD_CANCEL_DEFERRED };
        // SAFETY: the caller's out-parameter.
        unsafe { *old = v };
    }
    if set && d.kind.get() == Kind::User && cancel_pending(d) {
        act();
    }
    0
}

/// `__pthread_register_cancel` (`pthread_cleanup_push`).
///
/// # Safety
///
/// glibc's contract: `buf` is a `__pthread_unwind_buf_t` on the caller's stack.
#[no_mangle]
pub unsafe extern "C-unwind" fn __pthread_register_cancel(buf: *mut c_void) {
    let d = current();
    if d.kind.get() != Kind::User {
        // SAFETY: forwarded unchanged.
        return unsafe { next::__pthread_register_cancel()(buf) };
    }
    // SAFETY: the caller's buffer, 104 bytes.
    unsafe { buf.cast::<u8>().add(PREV).cast::<*mut c_void>().write(d.cleanup.get()) };
    d.cleanup.set(buf);
}

/// `__pthread_unregister_cancel` (`pthread_cleanup_pop`).
///
/// # Safety
///
/// As `__pthread_register_cancel`, for the innermost registered buffer.
#[no_mangle]
pub unsafe extern "C-unwind" fn __pthread_unregister_cancel(buf: *mut c_void) {
    let d = current();
    if d.kind.get() != Kind::User {
        // SAFETY: forwarded unchanged.
        return unsafe { next::__pthread_unregister_cancel()(buf) };
    }
    // SAFETY: a buffer registered above.
    d.cleanup.set(unsafe { buf.cast::<u8>().add(PREV).cast::<*mut c_void>().read() });
}

/// `__pthread_unwind_next`: called by the cleanup macro after a handler ran.
///
/// # Safety
///
/// As `__pthread_unregister_cancel`.
#[no_mangle]
pub unsafe extern "C-unwind" fn __pthread_unwind_next(buf: *mut c_void) -> ! {
    let d = current();
    if d.kind.get() != Kind::User {
        // SAFETY: forwarded unchanged.
        unsafe { next::__pthread_unwind_next()(buf) };
        unreachable!("__pthread_unwind_next returned");
    }
    // SAFETY: a buffer registered above.
    d.cleanup.set(unsafe { buf.cast::<u8>().add(PREV).cast::<*mut c_void>().read() });
    unwind(d)
}
