//! The mutexes' priority protocols (`PTHREAD_PRIO_INHERIT`, `PTHREAD_PRIO_PROTECT`): what
//! each protocol mutex a thread holds lends it, the PI mutex each thread waits on, and
//! the priority the holders run at — along whole chains of holders that wait themselves.
//!
//! # The record
//!
//! [`Record`], one for the process under one lock ([`lock`]), has two tables:
//! - **held**: a row per protocol mutex held now: the mutex's address, its holder's
//!   `ThreadData`, and what the mutex lends the holder — a PI mutex the priority of its
//!   first waiter (`wait.rs` orders a queue by priority, so the first is the highest; 0
//!   with none), a PP mutex its ceiling. A thread's rows are its list of the protocol
//!   mutexes it holds and what each lends (what a PI futex's owner keeps in the kernel
//!   as its `pi_waiters`); `ThreadData::lent` is the highest of them, and the thread runs
//!   at the higher of that and its own priority (`schedparam::take_effect`, through
//!   `schedlab_rt::Thread::set_realtime`, which moves a thread that waits to run at once;
//!   a kernel thread through the kernel, [`apply_kernel`]).
//! - **blocked**: a row per thread waiting on a PI mutex now: the thread, the mutex, and
//!   its `Waiter` in the mutex's queue (the kernel's `task->pi_blocked_on`).
//!
//! One table keyed by mutex rather than a list in each thread: a waiter must find the
//! holder from the mutex, and the mutex keeps only the holder's 32-bit id (glibc's 40
//! bytes have no room for a pointer). Only protocol mutexes touch it.
//!
//! # The protocol
//!
//! 1. **Locked** ([`Record::hold`]): the new holder of a protocol mutex, once it holds
//!    it, takes the record, then the mutex's queue lock, reads its first waiter's
//!    priority (PI) and adds its row, then raises itself.
//! 2. **A PI waiter** takes the record, then the queue lock; links itself at its own
//!    priority or what it is lent, whichever is higher; adds its blocked row; then sets
//!    the mutex's loan to the first waiter's priority and walks the chain
//!    ([`Record::lend`]). One that leaves without the mutex (timed out, cancelled) takes
//!    the record, unlinks, and walks again with the first waiter left, so a loan ends
//!    with its waiter all along the chain. Woken by an unlock, it only drops its blocked
//!    row: the unlock took the mutex's row away first.
//! 3. **Unlocked** ([`Record::unhold`]): the row goes before the mutex is released, and
//!    the holder's lowering is applied after the release, so that the waiter the release
//!    woke is what the lowered holder yields to (`realtime.rs`, rule 3).
//!
//! Steps 1 and 2 both hold the record and the queue lock, so whichever comes second sees
//! the other: a waiter that finds no row (the new holder is between its compare-and-swap
//! and step 1) is counted by step 1.
//!
//! **Lock order**: the record, then one mutex's queue lock at a time, then a thread's
//! handle lock (inside `set_realtime` on another thread, which never yields). The paths
//! that take a queue lock without the record (an unlock's wake-up, a waiter's give-up in
//! `wait.rs`) take nothing under it. A thread's own lowering may yield, so it runs with
//! no lock held ([`apply_self`]).
//!
//! # Chains (the kernel's `rt_mutex_adjust_prio_chain`, kernel/locking/rtmutex.c)
//!
//! A loan that changes (a waiter came or left, a waiter's own priority changed) is passed
//! down the chain: the mutex's holder is raised or lowered; if it waits on a PI mutex
//! itself, its waiter there is moved to its new place in that queue ([`Locked::reposition`](crate::wait::Locked::reposition)),
//! which may change what that mutex lends its holder, and so on, until a loan does not
//! change, a holder does not wait, or [`MAX_CHAIN`] links (Linux's `max_lock_depth`). The
//! whole walk runs under the record's lock: the kernel walks with a lock per task and per
//! mutex, taken and dropped link by link, for scalability; one lock over the few protocol
//! mutexes of a program keeps the walk simple and free of lock-order cycles (each queue
//! lock is taken alone under it), and a waiter that the walk would move either is still
//! linked (its frame alive: it drops its blocked row under the record before it returns)
//! or is left alone.
//!
//! **Deadlock**: a PI lock whose holder waits, through the chain, for the caller is a
//! cycle. An error-checking mutex answers `EDEADLK` (POSIX's "a deadlock condition was
//! detected"; glibc gets the kernel's `EDEADLK` from `FUTEX_LOCK_PI` there and stops on
//! an assertion); the other kinds wait for good (or until their deadline), as glibc makes
//! its thread do. A walk round a cycle stops when the loans stop changing, or at
//! [`MAX_CHAIN`].
//!
//! # Kernel threads
//!
//! The program's initial thread (and any thread the library did not create) is a kernel
//! thread, which the runtime does not schedule: lent a priority above its own, it is
//! raised by the kernel (`sched_setscheduler` to `SCHED_FIFO` at the loan, its policy and
//! priority saved and given back when the loan ends), so that it runs before the
//! processors' kernel threads on its CPU, as a PI futex's owner is boosted. The move is
//! planned under the record's lock and made after it ([`plan_kernel`]): raised, the thread
//! may preempt the caller on its CPU, and would then spin, as `SCHED_FIFO`, on a lock the
//! caller held. That needs
//! the privilege to (root, `CAP_SYS_NICE`, or `RLIMIT_RTPRIO`): without it a PI loan
//! leaves the thread as it was, and a PP lock fails with the kernel's `EPERM`, as glibc's
//! does (`__pthread_tpp_change_priority`). Its own waits lend by the priority the library
//! knows (0 for a kernel thread).

use crate::thread::{Kind, ThreadData};
use crate::wait::Waiter;
use schedlab_rt::shared::{SpinGuard, SpinLock};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many links one walk follows at most: Linux's `max_lock_depth`.
const MAX_CHAIN: usize = 1024;

/// A protocol mutex held now (module docs).
struct Held {
    mutex: usize,
    holder: *const ThreadData,
    /// The holder's runtime handle, taken by the holder itself ([`Record::hold`]):
    /// another thread's `ThreadData` gives its handle only once its creator stored it,
    /// which a thread that locks at once may be ahead of.
    thread: Option<schedlab_rt::Thread>,
    /// The holder is a kernel thread (moved through the kernel, [`apply_kernel`]).
    kernel: bool,
    lends: i32,
}

/// A thread waiting on a PI mutex now (module docs).
struct Blocked {
    thread: *const ThreadData,
    mutex: usize,
    waiter: *const Waiter,
}

/// The record (module docs).
pub(crate) struct Record {
    held: Vec<Held>,
    blocked: Vec<Blocked>,
    /// Kernel threads whose new policy and priority ([`plan_kernel`]) are to be given to
    /// the kernel once the lock is dropped ([`Locked`]'s drop).
    pending: Vec<*const ThreadData>,
}

// SAFETY: the pointers are to threads' data and waiters, alive while their rows are (a
// thread's rows go at its end, [`forget`], before its data can be freed; a waiter drops
// its blocked row before its frame goes); read only under the record's lock.
unsafe impl Send for Record {}

static RECORD: SpinLock<Record> =
    SpinLock::new(Record { held: Vec::new(), blocked: Vec::new(), pending: Vec::new() });

/// Set at the first row ever (read without the lock by [`forget`] and [`adjust`]; a
/// thread's own rows were added by itself, so it sees the store).
static USED: AtomicBool = AtomicBool::new(false);

/// The record, locked ([`lock`]). Dropped, it applies the kernel threads' planned moves
/// after the lock.
pub(crate) struct Locked {
    record: Option<SpinGuard<'static, Record>>,
    section: Option<schedlab_rt::shared::Section>,
}

impl Drop for Locked {
    fn drop(&mut self) {
        let mut record = self.record.take().expect("held until dropped");
        let pending = std::mem::take(&mut record.pending);
        drop(record);
        drop(self.section.take());
        for d in pending {
            // SAFETY: a kernel thread's data is never freed (`thread::adopt`).
            let _ = apply_kernel(unsafe { &*d });
        }
    }
}

impl std::ops::Deref for Locked {
    type Target = Record;
    fn deref(&self) -> &Record {
        self.record.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut Record {
        self.record.as_mut().expect("held until dropped")
    }
}

/// The record, locked (the first lock of the order in the module docs). A user thread
/// holds it inside a runtime section (`schedlab_rt::shared::section`): a thread it raises
/// above itself takes its processor only once the lock is dropped, not while it holds it
/// (the threads spinning on it then, all above it, yielded only to each other for good).
pub(crate) fn lock() -> Locked {
    let section = match crate::thread::current().kind.get() {
        Kind::User => Some(schedlab_rt::shared::section()),
        Kind::Kernel => None,
    };
    let record = RECORD.lock();
    USED.store(true, Ordering::Relaxed);
    Locked { record: Some(record), section }
}

/// Recomputes `d`'s loan from its rows; whether it changed.
fn refresh(rows: &[Held], d: *const ThreadData) -> bool {
    let top = rows.iter().filter(|h| std::ptr::eq(h.holder, d)).map(|h| h.lends).max().unwrap_or(0);
    // SAFETY: a row's holder is alive (`Record`).
    unsafe { &*d }.lent.swap(top, Ordering::Relaxed) != top
}

/// The place `d` takes in a PI mutex's queue: its own priority or what it is lent.
fn queue_prio(d: &ThreadData) -> i32 {
    crate::schedparam::wait_priority(d.sched.load(Ordering::Relaxed))
        .max(d.lent.load(Ordering::Relaxed))
}

/// Moves `d` (not the caller), whose row is `row`, to its priority now: under the
/// record's lock, so that two threads moving it cannot apply their answers in the wrong
/// order; a kernel thread's move is planned here and made once the lock is dropped
/// ([`plan_kernel`]).
fn apply_other(pending: &mut Vec<*const ThreadData>, d: &ThreadData, row: &Held) {
    if row.kernel {
        if plan_kernel(d) {
            pending.push(d);
        }
    } else if let Some(t) = &row.thread {
        let (rt, fifo) = crate::schedparam::effective(d);
        t.set_realtime(rt, fifo);
    }
}

/// Moves the calling thread `me` to its priority now, with no lock held (lowered, it may
/// yield); again if its loan changed meanwhile (a waiter that raised it under the lock
/// just before this lowering landed). A kernel thread through the kernel: the error
/// number if it may not be raised.
pub(crate) fn apply_self(me: &ThreadData) -> c_int {
    if me.kind.get() != Kind::User {
        let planned = {
            let _g = RECORD.lock();
            plan_kernel(me)
        };
        return if planned { apply_kernel(me) } else { 0 };
    }
    loop {
        let lent = me.lent.load(Ordering::Relaxed);
        crate::schedparam::take_effect(me);
        if me.lent.load(Ordering::Relaxed) == lent {
            return 0;
        }
    }
}

/// `ThreadData::kernel_sched` of a kernel thread the record has not raised.
pub(crate) const NOT_RAISED: i32 = -1;

/// The kernel's policy and priority of kernel thread `tid`, [`pack`](crate::schedparam::pack)ed.
fn kernel_sched(tid: c_int) -> i32 {
    // SAFETY: plain queries of a thread of this process.
    unsafe {
        let policy = libc::sched_getscheduler(tid);
        let mut p = libc::sched_param { sched_priority: 0 };
        if policy < 0 || libc::sched_getparam(tid, &mut p) != 0 {
            return crate::schedparam::pack(libc::SCHED_OTHER, 0);
        }
        crate::schedparam::pack(policy & !libc::SCHED_RESET_ON_FORK, p.sched_priority)
    }
}

/// Plans the kernel thread `d`'s move (module docs, "Kernel threads"), under the record's
/// lock: raised to its loan if that is above its own policy and priority (saved), or given
/// those back once the loan is no higher. Whether there is a move to make
/// ([`apply_kernel`], with no lock held: the thread raised may preempt the caller on its
/// CPU, and then spin, as `SCHED_FIFO`, on a lock the caller would hold).
fn plan_kernel(d: &ThreadData) -> bool {
    let saved = d.kernel_sched.load(Ordering::Relaxed);
    let own = if saved == NOT_RAISED { kernel_sched(crate::glibc::tid_of(d.tcb)) } else { saved };
    let lent = d.lent.load(Ordering::Relaxed);
    let target = if lent > crate::schedparam::wait_priority(own) {
        let policy = if own >> 16 == libc::SCHED_RR { libc::SCHED_RR } else { libc::SCHED_FIFO };
        d.kernel_sched.store(own, Ordering::Relaxed);
        crate::schedparam::pack(policy, lent)
    } else if saved != NOT_RAISED {
        d.kernel_sched.store(NOT_RAISED, Ordering::Relaxed);
        saved
    } else {
        return false;
    };
    d.kernel_target.store(target, Ordering::Relaxed);
    d.kernel_plans.fetch_add(1, Ordering::Release);
    true
}

/// Makes the kernel thread `d`'s planned move ([`plan_kernel`]), with no lock held; again
/// if another was planned meanwhile, so the last plan is the one that lands. 0, or the
/// kernel's error number (`EPERM` without the privilege).
fn apply_kernel(d: &ThreadData) -> c_int {
    let tid = crate::glibc::tid_of(d.tcb);
    loop {
        let plan = d.kernel_plans.load(Ordering::Acquire);
        let sched = d.kernel_target.load(Ordering::Relaxed);
        let p = libc::sched_param { sched_priority: crate::schedparam::wait_priority(sched) };
        // SAFETY: a plain request about a thread of this process; the calling thread's
        // errno kept as it was (a pthread function that succeeds leaves it alone).
        let e = unsafe {
            let errno = *libc::__errno_location();
            let e = match libc::sched_setscheduler(tid, sched >> 16, &p) {
                0 => 0,
                _ => *libc::__errno_location(),
            };
            *libc::__errno_location() = errno;
            e
        };
        if d.kernel_plans.load(Ordering::Acquire) == plan {
            return e;
        }
    }
}

impl Record {
    /// Step 1: the caller `me` now holds `mutex`, which lends `lends`; whether its loan
    /// changed (the caller then calls [`apply_self`], after dropping the locks).
    pub(crate) fn hold(&mut self, mutex: usize, me: &ThreadData, lends: i32) -> bool {
        let kernel = me.kind.get() != Kind::User;
        let thread = if kernel { None } else { me.own_handle().cloned() };
        self.held.push(Held { mutex, holder: me, thread, kernel, lends });
        refresh(&self.held, me)
    }

    /// Step 3: `mutex` is about to be released; its row goes. Whether the caller's loan
    /// fell (it then calls [`apply_self`] after the release). Unlocked by a thread that
    /// does not hold it (a normal mutex checks nothing), the holder's loan falls at once.
    pub(crate) fn unhold(&mut self, mutex: usize) -> bool {
        let Some(i) = self.held.iter().position(|h| h.mutex == mutex) else { return false };
        let row = self.held.swap_remove(i);
        if !refresh(&self.held, row.holder) {
            return false;
        }
        if std::ptr::eq(row.holder, crate::thread::current()) {
            return true;
        }
        // SAFETY: a row's holder is alive (`Record`).
        apply_other(&mut self.pending, unsafe { &*row.holder }, &row);
        // The holder may wait on a PI mutex itself (unlocked by another thread).
        self.walk_from(row.holder);
        false
    }

    /// Step 2: `me` waits on the PI mutex `mutex` with `waiter`, linked.
    pub(crate) fn block(&mut self, me: &ThreadData, mutex: usize, waiter: &Waiter) {
        self.blocked.push(Blocked { thread: me, mutex, waiter });
    }

    /// Step 2: `me` no longer waits (woken, timed out, cancelled).
    pub(crate) fn unblock(&mut self, me: &ThreadData) {
        if let Some(i) = self.blocked.iter().position(|b| std::ptr::eq(b.thread, me)) {
            self.blocked.swap_remove(i);
        }
    }

    /// Whether `me` waiting on `mutex` would close a cycle of PI waits (module docs,
    /// "Deadlock").
    pub(crate) fn would_deadlock(&self, mutex: usize, me: &ThreadData) -> bool {
        let mut m = mutex;
        for _ in 0..MAX_CHAIN {
            let Some(row) = self.held.iter().find(|h| h.mutex == m) else { return false };
            if std::ptr::eq(row.holder, me) {
                return true;
            }
            let Some(b) = self.blocked.iter().find(|b| std::ptr::eq(b.thread, row.holder)) else {
                return false;
            };
            m = b.mutex;
        }
        false
    }

    /// Step 2: the PI mutex `mutex` (its queue unlocked by the caller) lends `front` now,
    /// its first waiter's priority: passed down the chain (module docs, "Chains").
    /// Whether the caller's own loan changed (a normal mutex relocked by its holder, or a
    /// cycle through the caller), which it applies with [`apply_self`] once it holds no
    /// lock.
    pub(crate) fn lend(&mut self, mutex: usize, front: i32) -> bool {
        let me: *const ThreadData = crate::thread::current();
        let (mut mutex, mut front) = (mutex, front);
        let mut moved_self = false;
        for _ in 0..MAX_CHAIN {
            let Some(row) = self.held.iter_mut().find(|h| h.mutex == mutex) else { break };
            if row.lends == front {
                break;
            }
            row.lends = front;
            let d = row.holder;
            if !refresh(&self.held, d) {
                break;
            }
            if std::ptr::eq(d, me) {
                moved_self = true;
            } else if let Some(row) = self.held.iter().find(|h| h.mutex == mutex) {
                // SAFETY: a row's holder is alive (`Record`).
                apply_other(&mut self.pending, unsafe { &*d }, row);
            }
            match self.requeue(d) {
                Some(next) => (mutex, front) = next,
                None => break,
            }
        }
        moved_self
    }

    /// If `d` waits on a PI mutex, moves its waiter to its place for `d`'s priority now;
    /// that mutex and the priority of its first waiter then.
    fn requeue(&self, d: *const ThreadData) -> Option<(usize, i32)> {
        let b = self.blocked.iter().find(|b| std::ptr::eq(b.thread, d))?;
        // SAFETY: a blocked row's thread is alive (`Record`).
        let prio = queue_prio(unsafe { &*d });
        // SAFETY: a blocked row's waiter is linked in, or just taken out of, the queue of
        // a mutex its thread's lock call borrows (`Record`).
        let front = crate::mutex::reposition(b.mutex, unsafe { &*b.waiter }, prio)?;
        Some((b.mutex, front))
    }

    /// Passes a change of `d`'s own priority or loan on, if `d` waits on a PI mutex.
    fn walk_from(&mut self, d: *const ThreadData) -> bool {
        match self.requeue(d) {
            Some((mutex, front)) => self.lend(mutex, front),
            None => false,
        }
    }

    /// `pthread_mutex_setprioceiling` by the holder of the PP mutex `mutex`: it lends
    /// `ceiling` from now on; whether the caller's loan changed (it then calls
    /// [`apply_self`]).
    pub(crate) fn set_ceiling(&mut self, mutex: usize, ceiling: i32) -> bool {
        let Some(row) = self.held.iter_mut().find(|h| h.mutex == mutex) else { return false };
        row.lends = ceiling;
        let d = row.holder;
        refresh(&self.held, d)
    }

    /// The policy and priority, [`pack`](crate::schedparam::pack)ed, that a kernel thread
    /// whose control block is `tcb` had before the record raised it, if it did: what
    /// `pthread_getschedparam` reports (Linux does not show a PI boost there).
    pub(crate) fn kernel_own(&self, tcb: usize) -> Option<i32> {
        let row = self.held.iter().find(|h| {
            // SAFETY: a row's holder is alive (`Record`).
            h.kernel && unsafe { &*h.holder }.tcb == tcb
        })?;
        // SAFETY: as above.
        let saved = unsafe { &*row.holder }.kernel_sched.load(Ordering::Relaxed);
        (saved != NOT_RAISED).then_some(saved)
    }

    /// A raised kernel thread's own policy and priority set by the program
    /// (`pthread_setschedparam`): kept as what it goes back to, and applied under the
    /// loan (the higher wins). Whether the record raised the thread (otherwise the
    /// caller forwards the call to glibc).
    pub(crate) fn set_kernel_own(&mut self, tcb: usize, sched: i32) -> bool {
        let Some(row) = self.held.iter().find(|h| {
            // SAFETY: a row's holder is alive (`Record`).
            h.kernel && unsafe { &*h.holder }.tcb == tcb
        }) else {
            return false;
        };
        // SAFETY: as above.
        let d = unsafe { &*row.holder };
        if d.kernel_sched.load(Ordering::Relaxed) == NOT_RAISED {
            return false;
        }
        d.kernel_sched.store(sched, Ordering::Relaxed);
        if plan_kernel(d) {
            self.pending.push(d);
        }
        true
    }
}

/// Whether any protocol mutex was ever locked (else nothing here has anything to say).
pub(crate) fn used() -> bool {
    USED.load(Ordering::Relaxed)
}

/// A user thread's own policy or priority was changed (`pthread_setschedparam`): if it
/// waits on a PI mutex, its place there and the loans down the chain follow (the
/// kernel's `rt_mutex_adjust_pi`).
pub(crate) fn adjust(d: &ThreadData) {
    if !USED.load(Ordering::Relaxed) {
        return;
    }
    let moved_self = lock().walk_from(d);
    if moved_self {
        apply_self(crate::thread::current());
    }
}

/// The rows of a thread that ends (`thread.rs`'s `finish`): its protocol mutexes stay
/// locked (or robust ones are released next) and lend it nothing more.
pub(crate) fn forget(d: &ThreadData) {
    // A program that never locked a protocol mutex pays one load per thread's end.
    if !USED.load(Ordering::Relaxed) {
        return;
    }
    let mut rows = RECORD.lock();
    rows.held.retain(|h| !std::ptr::eq(h.holder, d));
    rows.blocked.retain(|b| !std::ptr::eq(b.thread, d));
    d.lent.store(0, Ordering::Relaxed);
}

/// The calling thread's own priority, for `PTHREAD_PRIO_PROTECT`'s check against a
/// ceiling (POSIX: `EINVAL` if it is higher): a user thread's as the library keeps it, a
/// kernel thread's as the kernel does (its `SCHED_FIFO`/`SCHED_RR` priority, else 0; as
/// it was before the record raised it).
pub(crate) fn own_priority(me: &ThreadData) -> c_int {
    match me.kind.get() {
        Kind::User => crate::schedparam::wait_priority(me.sched.load(Ordering::Relaxed)),
        Kind::Kernel => {
            let saved = me.kernel_sched.load(Ordering::Relaxed);
            let sched = if saved == NOT_RAISED { kernel_sched(0) } else { saved };
            crate::schedparam::wait_priority(sched)
        }
    }
}
