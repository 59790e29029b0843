//! The mutexes' priority protocols (`PTHREAD_PRIO_INHERIT`, `PTHREAD_PRIO_PROTECT`): what
//! each protocol mutex a thread holds lends it, and the priority the holder runs at.
//!
//! # The record
//!
//! [`HELD`] has a row per protocol mutex held now: the mutex's address, its holder's
//! `ThreadData`, and what the mutex lends the holder — a PI mutex the priority of its first
//! waiter (`wait.rs` orders a queue by priority, so the first is the highest; 0 with
//! none), a PP mutex its ceiling. A thread's rows are its list of the protocol mutexes it
//! holds and what each lends (what a PI futex's owner keeps in the kernel as its
//! `pi_waiters`); `ThreadData::lent` is the highest of them, and a user thread runs at the
//! higher of that and its own priority (`schedparam::take_effect`, through
//! `schedlab_rt::Thread::set_realtime`, which moves a thread that waits to run at once).
//! One table keyed by mutex rather than a list in each thread: a waiter must find the
//! holder from the mutex, and the mutex keeps only the holder's 32-bit id (glibc's 40
//! bytes have no room for a pointer). Only protocol mutexes touch it.
//!
//! # The protocol
//!
//! 1. **Locked** ([`hold`]): the new holder of a protocol mutex, once it holds it, takes
//!    the mutex's queue lock, reads its first waiter's priority (PI) and adds its row, then
//!    raises itself.
//! 2. **A PI waiter** ([`lend`]), once linked and still under the queue lock, sets the
//!    row's loan to the first waiter's priority and moves the holder at once; a waiter
//!    that gives up (timed out, cancelled) does the same with the first waiter left, so a
//!    loan ends with its waiter.
//! 3. **Unlocked** ([`unhold`]): the row goes before the mutex is released, and the
//!    holder's lowering is applied after the release, so that the waiter the release woke
//!    is what the lowered holder yields to (`realtime.rs`, rule 3).
//!
//! Steps 1 and 2 both run under the mutex's queue lock, so whichever comes second sees the
//! other: a waiter that finds no row (the new holder is between its compare-and-swap and
//! step 1) is counted by step 1. Lock order: a mutex's queue lock, then [`HELD`], then a
//! thread's handle lock (inside `set_realtime` on another thread, which never yields). A
//! thread's own lowering may yield, so it runs with no lock held ([`apply_self`]).
//!
//! # Chains
//!
//! A PI waiter queues at its own priority or what it is lent, whichever is higher: a
//! holder raised by a waiter that then waits on a second PI mutex lends the raise on
//! (transitively, one link per wait). A raise that comes while the holder already waits is
//! not passed on to the next holder: that would mean re-sorting the holder's place in
//! another mutex's queue from another thread, against the holder's own give-up.
//!
//! # Not covered
//!
//! A kernel thread (the program's initial thread) holding a protocol mutex is not raised:
//! the runtime does not schedule it. Its waits lend as any thread's do (by the priority
//! the library knows: 0 for a kernel thread).

use crate::thread::{Kind, ThreadData};
use schedlab_rt::shared::SpinLock;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

/// A protocol mutex held now (module docs).
struct Held {
    mutex: usize,
    holder: *const ThreadData,
    /// The holder's runtime handle, taken by the holder itself ([`hold`]): another
    /// thread's `ThreadData` gives its handle only once its creator stored it, which a
    /// thread that locks at once may be ahead of.
    thread: Option<schedlab_rt::Thread>,
    lends: i32,
}

// SAFETY: `holder` is a thread's data, alive while its row is (a thread's rows go at its
// end, [`forget`], before its data can be freed); read only under [`HELD`]'s lock.
unsafe impl Send for Held {}

/// Every protocol mutex held now (module docs).
static HELD: SpinLock<Vec<Held>> = SpinLock::new(Vec::new());

/// Set at the first row ever (read without the lock by [`forget`]; a thread's own rows
/// were added by itself, so it sees the store).
static USED: AtomicBool = AtomicBool::new(false);

/// Recomputes `d`'s loan from its rows; whether it changed.
fn refresh(rows: &[Held], d: &ThreadData) -> bool {
    let top = rows.iter().filter(|h| std::ptr::eq(h.holder, d)).map(|h| h.lends).max().unwrap_or(0);
    d.lent.swap(top, Ordering::Relaxed) != top
}

/// Moves `d` (not the caller), whose runtime handle is `t`, to its priority now: under
/// [`HELD`]'s lock, so that two threads moving it cannot apply their answers in the wrong
/// order.
fn apply_other(d: &ThreadData, t: Option<&schedlab_rt::Thread>) {
    if let Some(t) = t {
        let (rt, fifo) = crate::schedparam::effective(d);
        t.set_realtime(rt, fifo);
    }
}

/// Moves the calling thread `me` to its priority now, with no lock held (lowered, it may
/// yield); again if its loan changed meanwhile (a waiter that raised it under the lock
/// just before this lowering landed).
pub(crate) fn apply_self(me: &ThreadData) {
    if me.kind.get() != Kind::User {
        return;
    }
    loop {
        let lent = me.lent.load(Ordering::Relaxed);
        crate::schedparam::take_effect(me);
        if me.lent.load(Ordering::Relaxed) == lent {
            return;
        }
    }
}

/// Step 1: the caller `me` now holds `mutex`, which lends `lends`; whether its loan rose
/// (the caller then calls [`apply_self`], after dropping the queue lock).
pub(crate) fn hold(mutex: usize, me: &ThreadData, lends: i32) -> bool {
    let mut rows = HELD.lock();
    USED.store(true, Ordering::Relaxed);
    let thread = match me.kind.get() {
        Kind::User => me.own_handle().cloned(),
        Kind::Kernel => None,
    };
    rows.push(Held { mutex, holder: me, thread, lends });
    refresh(&rows, me)
}

/// Step 2: `mutex` (a PI mutex, its queue locked by the caller) lends `lends` now, its
/// first waiter's priority; its holder, if it has a row, moves at once. Whether the
/// holder is the caller itself (a normal mutex relocked by its holder), whose move the
/// caller makes with [`apply_self`] once it holds no lock.
pub(crate) fn lend(mutex: usize, lends: i32) -> bool {
    let mut rows = HELD.lock();
    let Some(row) = rows.iter_mut().find(|h| h.mutex == mutex) else { return false };
    if row.lends == lends {
        return false;
    }
    row.lends = lends;
    // SAFETY: a row's holder is alive (`Held`).
    let d = unsafe { &*row.holder };
    let t = row.thread.clone();
    if !refresh(&rows, d) {
        return false;
    }
    if std::ptr::eq(d, crate::thread::current()) {
        return true;
    }
    apply_other(d, t.as_ref());
    false
}

/// Step 3: `mutex` is about to be released; its row goes. Whether the caller's loan fell
/// (it then calls [`apply_self`] after the release). Unlocked by a thread that does not
/// hold it (a normal mutex checks nothing), the holder's loan falls at once.
pub(crate) fn unhold(mutex: usize) -> bool {
    let mut rows = HELD.lock();
    let Some(i) = rows.iter().position(|h| h.mutex == mutex) else { return false };
    let row = rows.swap_remove(i);
    // SAFETY: a row's holder is alive (`Held`); just removed, under the lock.
    let d = unsafe { &*row.holder };
    if !refresh(&rows, d) {
        return false;
    }
    if std::ptr::eq(d, crate::thread::current()) {
        return true;
    }
    apply_other(d, row.thread.as_ref());
    false
}

/// `pthread_mutex_setprioceiling` by the holder of the PP mutex `mutex`: it lends
/// `ceiling` from now on; whether the caller's loan changed (it then calls [`apply_self`]).
pub(crate) fn set_ceiling(mutex: usize, ceiling: i32) -> bool {
    let mut rows = HELD.lock();
    let Some(row) = rows.iter_mut().find(|h| h.mutex == mutex) else { return false };
    row.lends = ceiling;
    // SAFETY: a row's holder is alive (`Held`).
    let d = unsafe { &*row.holder };
    refresh(&rows, d)
}

/// The rows of a thread that ends (`thread.rs`'s `finish`): its protocol mutexes stay
/// locked (or robust ones are released next) and lend it nothing more.
pub(crate) fn forget(d: &ThreadData) {
    // A program that never locked a protocol mutex pays one load per thread's end.
    if !USED.load(Ordering::Relaxed) {
        return;
    }
    let mut rows = HELD.lock();
    rows.retain(|h| !std::ptr::eq(h.holder, d));
    d.lent.store(0, Ordering::Relaxed);
}

/// The calling thread's own priority, for `PTHREAD_PRIO_PROTECT`'s check against a
/// ceiling (POSIX: `EINVAL` if it is higher): a user thread's as the library keeps it, a
/// kernel thread's as the kernel does (its `SCHED_FIFO`/`SCHED_RR` priority, else 0).
pub(crate) fn own_priority(me: &ThreadData) -> c_int {
    match me.kind.get() {
        Kind::User => crate::schedparam::wait_priority(me.sched.load(Ordering::Relaxed)),
        Kind::Kernel => {
            // SAFETY: plain queries of the calling thread.
            unsafe {
                let policy = libc::sched_getscheduler(0);
                let mut p = libc::sched_param { sched_priority: 0 };
                if (policy == libc::SCHED_FIFO || policy == libc::SCHED_RR)
                    && libc::sched_getparam(0, &mut p) == 0
                {
                    p.sched_priority
                } else {
                    0
                }
            }
        }
    }
}
