//! The program's own `SIGURG`, beside the runtime's: the kernel keeps the
//! runtime's handler, and the library keeps the program's disposition and
//! runs its handler for every `SIGURG` that is not the runtime's.
//!
//! The runtime preempts, hands off and cancels with `SIGURG`
//! (`schedlab_rt::preempt`, "The signal"). A program's `sigaction(SIGURG)`
//! used to replace the runtime's handler in the kernel like any other:
//! preemption and hand-off stopped and the program's handler ran for every
//! runtime request (a C program with a `SIGURG` handler and four computing
//! threads saw it run 3,600 times in 0.3 s; `schedlab-probes`' own runtime,
//! in a test binary under `schedlab exec`, hung). So:
//!
//! - **The disposition.** Once the runtime has installed its handler (it
//!   comes through this library's `sigaction`, as a function of this
//!   library), a program's `sigaction(SIGURG)` is recorded here (handler,
//!   flags, mask; `SIG_IGN` and `SIG_DFL` too) and not given to the kernel,
//!   and a query answers with the program's, as the kernel would have. What
//!   the program installed before the runtime started (the kernel held it,
//!   through `handlers.rs`'s wrapper) is taken over as the runtime installs
//!   its own. A program handler is kept in `handlers.rs`'s record too, so its
//!   wrapper runs it (the mask bookkeeping, the alternate stack); without
//!   `SA_RESETHAND`, which is done here ([`accept`]).
//! - **Which signal is whose.** The runtime sends its own as a queued signal
//!   from this process carrying a cookie and hands every other one — `kill`,
//!   `tgkill`, `pthread_kill`, `raise`, `sigqueue`, the kernel's `SI_KERNEL`
//!   for out-of-band data — to [`accept`], in its handler; [`accept`] answers
//!   whether the program's handler runs and with what mask, and the runtime
//!   runs [`entry`] with the signal's own `siginfo` on the interrupted stack
//!   (`schedlab_rt`'s `sigframe.rs`), which calls the program's handler
//!   through `handlers.rs`'s wrapper.
//! - **The thread's mask.** The runtime never blocks `SIGURG` in the kernel,
//!   so a user thread that blocks it (its mask as the runtime keeps it) does
//!   not get it from the kernel's hands: [`accept`] keeps it pending in the
//!   thread's own pending set with its `siginfo`, as `pthread_kill` keeps a
//!   blocked signal (`signal.rs`), and `deliver_pending` raises it again with
//!   that `siginfo` when the thread unblocks it ([`raise_kept`]). A thread
//!   waiting in `sigwait` for `SIGURG` gets it the same way: kept, its wait
//!   ended with `EINTR`, and the wait takes it from the pending set.
//! - **Coalescing.** `SIGURG` is a standard signal: the kernel keeps one
//!   pending per kernel thread (and one for the process), and a second sent
//!   meanwhile is lost. The runtime's request word survives a lost signal (a
//!   program `SIGURG` that carried one does the runtime's work too, and the
//!   monitor asks again), so the runtime is made the side that loses: a
//!   `SIGURG` the library raises on the calling thread (`raise`, a kept one,
//!   `pthread_kill` of itself) carries a mark in its `siginfo` and is raised
//!   again until [`accept`] has seen the mark ([`raise_self`]); a
//!   `pthread_kill` of another thread goes into that thread's pending set,
//!   which the thread delivers itself at its next safe point (the runtime's
//!   `shared::interrupt`), or, in a call the runtime's signal ends, before
//!   the call is made again (`points::retrying`); and a doorbell goes to the
//!   kernel thread it is on (running, or blocked in a `pause`, a `read`, a
//!   `sigwait`): a queued `SIGURG` naming the thread, which [`accept`] turns
//!   into the pending one with its `siginfo` if the thread is still there
//!   and has not taken it, and drops otherwise.
//!   What remains: a `SIGURG` the program sends to a kernel thread itself
//!   (the `tgkill` system call or glibc's `tgkill`, with a `gettid`), or the
//!   kernel's for a socket owned by one thread (`F_SETOWN_EX`,
//!   `F_OWNER_TID`), lost when it comes while a request of the runtime's is
//!   pending on that kernel thread. Process-directed ones (`kill`,
//!   `sigqueue`, a socket owned by the process) are queued apart from
//!   thread-directed ones and never coalesce with the runtime's.
//!
//! Not done: a process-directed `SIGURG` that lands on a user thread that
//! blocks it waits for that thread (the kernel would have chosen a thread
//! that does not block it; it cannot tell, the kernel thread's mask never
//! blocking `SIGURG`); `sigpending` does not report a kept one (it asks the
//! kernel); a program handler installed with `SA_ONSTACK` runs on the
//! interrupted stack, not on an alternate stack (a kernel thread's is the
//! runtime's, shared by every user thread it runs); a `pthread_kill` of a
//! thread blocked in a call the kernel restarts, whose doorbell a request of
//! the runtime's hid, runs its handler when the call returns.

use crate::thread::{current, on_user_thread, ThreadData};
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// glibc's definitions.
mod next {
    crate::glibc::real!(sigaction: fn(std::ffi::c_int, *const libc::sigaction, *mut libc::sigaction) -> std::ffi::c_int);
    crate::glibc::real!(raise: fn(std::ffi::c_int) -> std::ffi::c_int);
}

const SIG: c_int = libc::SIGURG;

fn bit() -> u64 {
    1u64 << (SIG - 1)
}

/// The kernel holds the runtime's handler for `SIGURG`; the program's
/// disposition is [`PROGRAM`].
static RUNTIME_HOLDS: AtomicBool = AtomicBool::new(false);

/// The program's disposition for `SIGURG` while the runtime holds the
/// kernel's.
struct Disposition {
    /// `sa_sigaction` (`SIG_DFL` 0, `SIG_IGN` 1, or a handler).
    handler: AtomicUsize,
    flags: AtomicI32,
    /// The first word of `sa_mask`.
    mask: AtomicU64,
}

static PROGRAM: Disposition =
    Disposition { handler: AtomicUsize::new(0), flags: AtomicI32::new(0), mask: AtomicU64::new(0) };

fn word(set: &libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t is at least 8 bytes on Linux.
    unsafe { std::ptr::read_unaligned((set as *const libc::sigset_t).cast::<u64>()) }
}

/// Records `handler`, `flags`, `mask` as the program's, here and (for a
/// handler to run) in `handlers.rs`'s record, without `SA_RESETHAND`, which
/// [`accept`] does.
fn record(handler: usize, flags: c_int, mask: u64) {
    PROGRAM.flags.store(flags, Ordering::Relaxed);
    PROGRAM.mask.store(mask, Ordering::Relaxed);
    PROGRAM.handler.store(handler, Ordering::Release);
    let run = if handler > 2 { handler } else { 0 };
    crate::handlers::record(SIG, run, flags & !libc::SA_RESETHAND, mask);
}

/// Fills `old` with the program's disposition.
fn answer(old: *mut libc::sigaction) {
    // SAFETY: `old`, if not null, is the caller's.
    let Some(o) = (unsafe { old.as_mut() }) else { return };
    // SAFETY: an all-zero sigaction is valid; filled below.
    *o = unsafe { std::mem::zeroed() };
    o.sa_sigaction = PROGRAM.handler.load(Ordering::Acquire);
    o.sa_flags = PROGRAM.flags.load(Ordering::Relaxed);
    // SAFETY: the caller's set, cleared, then its first word written.
    unsafe {
        libc::sigemptyset(&mut o.sa_mask);
        std::ptr::write_unaligned(
            (&mut o.sa_mask as *mut libc::sigset_t).cast::<u64>(),
            PROGRAM.mask.load(Ordering::Relaxed),
        );
    }
}

/// `sigaction(SIGURG)`, from `handlers::sigaction`: `None` while the kernel
/// holds the program's disposition (`handlers.rs` does as for any signal);
/// otherwise the result (module docs, "The disposition").
///
/// # Safety
/// As `sigaction(2)`.
pub(crate) unsafe fn sigaction(
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<c_int> {
    // SAFETY: `act`, if not null, is the caller's valid action.
    let wanted = unsafe { act.as_ref() };
    let runtimes = wanted
        .is_some_and(|a| a.sa_sigaction > 2 && crate::thread::in_this_library(a.sa_sigaction));
    if runtimes {
        if !RUNTIME_HOLDS.load(Ordering::Acquire) {
            // The program's disposition so far, from the kernel or, for a
            // handler, the record behind `handlers.rs`'s wrapper.
            // SAFETY: an all-zero sigaction is valid; a query into it.
            let mut k: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: a query through the library's own `sigaction`.
            if unsafe { crate::handlers::sigaction(SIG, std::ptr::null(), &mut k) } == 0 {
                record(k.sa_sigaction, k.sa_flags & !SA_RESTORER, word(&k.sa_mask));
            }
        }
        // SAFETY: the runtime's own action.
        let r = unsafe { next::sigaction()(SIG, act, std::ptr::null_mut()) };
        if r == 0 {
            RUNTIME_HOLDS.store(true, Ordering::Release);
        }
        answer(old);
        return Some(r);
    }
    if !RUNTIME_HOLDS.load(Ordering::Acquire) {
        return None;
    }
    answer(old);
    if let Some(a) = wanted {
        record(a.sa_sigaction, a.sa_flags, word(&a.sa_mask));
    }
    Some(0)
}

/// glibc adds it to a query's flags; the program never gave it.
const SA_RESTORER: c_int = 0x0400_0000;

/// A user thread's kept `SIGURG`: its `siginfo`, while the pending bit for
/// `SIGURG` in `ThreadData::pending_signals` is set, and a count of its own
/// raises [`accept`] saw ([`raise_self`]). Written and read by the
/// thread itself only (in [`accept`], in its signal handler, and in
/// [`raise_kept`]), so one flag guards the `siginfo` against a signal that
/// comes in the middle of a read.
pub(crate) struct Kept {
    full: AtomicU32,
    info: UnsafeCell<MaybeUninit<libc::siginfo_t>>,
    raised: AtomicU32,
}

const EMPTY: u32 = 0;
const BUSY: u32 = 1;
const FULL: u32 = 2;

impl Kept {
    pub(crate) const fn new() -> Kept {
        Kept {
            full: AtomicU32::new(EMPTY),
            info: UnsafeCell::new(MaybeUninit::uninit()),
            raised: AtomicU32::new(0),
        }
    }

    /// Keeps `info` unless one is kept (a standard signal is kept once).
    fn put(&self, info: &libc::siginfo_t) {
        if self.full.compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            // SAFETY: claimed above; only this thread writes or reads it.
            unsafe { (*self.info.get()).write(*info) };
            self.full.store(FULL, Ordering::Release);
        }
    }

    /// Takes the kept `siginfo`, if any.
    fn take(&self) -> Option<libc::siginfo_t> {
        if self.full.compare_exchange(FULL, BUSY, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return None;
        }
        // SAFETY: claimed above; written before `FULL`.
        let i = unsafe { (*self.info.get()).assume_init_read() };
        self.full.store(EMPTY, Ordering::Release);
        Some(i)
    }
}

// SAFETY: the cell is touched by its thread only (`Kept`'s docs).
unsafe impl Sync for Kept {}

/// In the runtime's handler, for a `SIGURG` it did not send
/// (`schedlab_rt::shared::set_foreign_signal_hook`): `None` drops it (the
/// program ignores it, or it is kept for the thread, which blocks it or
/// waits for it in `sigwait`); otherwise the signals the program's handler
/// runs with blocked. Async-signal-safe: atomics.
pub(crate) fn accept(info: &mut libc::siginfo_t) -> Option<u64> {
    let user = on_user_thread().then(current);
    if take_mark(info, doorbell() + 1) {
        if let Some(d) = user {
            d.urg.raised.fetch_add(1, Ordering::AcqRel);
        }
    }
    let bell = doorbell_for(info);
    if bell.is_some() && bell != user.map(|d| d as *const ThreadData as usize) {
        // For a thread that left this kernel thread: its pending set has
        // it, for its next resumption.
        return None;
    }
    let handler = PROGRAM.handler.load(Ordering::Acquire);
    if handler <= 2 {
        // `SIG_DFL` (ignore, for `SIGURG`) or `SIG_IGN`.
        return None;
    }
    let flags = PROGRAM.flags.load(Ordering::Relaxed);
    if let Some(d) = user {
        let waits = d.sigwait_set.load(Ordering::Acquire) & bit() != 0;
        if waits || schedlab_rt::shared::signal_mask() & bit() != 0 {
            if bell.is_none() {
                keep(d, info);
            }
            if waits {
                // Its wait ends with `EINTR` and takes it (`signal.rs`).
                crate::signal::count_delivery(d, SIG);
            }
            return None;
        }
        // One kept meanwhile is this one too (a standard signal); a
        // doorbell delivers the kept one, with its own `siginfo`.
        if d.pending_signals.fetch_and(!bit(), Ordering::AcqRel) & bit() != 0 {
            let kept = d.urg.take();
            if bell.is_some() {
                *info = kept.unwrap_or_else(tkill_info);
            }
        } else if bell.is_some() {
            // Delivered already, by its thread's own raise.
            return None;
        }
        crate::signal::count_delivery(d, SIG);
    }
    if flags & libc::SA_RESETHAND != 0 {
        // Reset as it is delivered; `entry` clears the wrapper's record
        // after the handler, unless the program installed one again.
        PROGRAM.handler.store(libc::SIG_DFL, Ordering::Release);
    }
    let own = if flags & libc::SA_NODEFER != 0 { 0 } else { bit() };
    Some(PROGRAM.mask.load(Ordering::Relaxed) | own)
}

/// The thread a doorbell ([`send`]) is for, when `info` is one: a queued
/// signal from this process whose value is a thread's data and whose next
/// word (past `si_value`, in the 32 bytes of fields the kernel passes on
/// as given, which `sigqueue` leaves zero) is [`DOORBELL`]'s address.
pub(crate) fn doorbell_for(info: &libc::siginfo_t) -> Option<usize> {
    if info.si_code != libc::SI_QUEUE {
        return None;
    }
    // SAFETY: `si_pid` and `si_value` are valid for `SI_QUEUE`; the word
    // after them is within the siginfo.
    let (pid, v, mark) = unsafe {
        let mark = (info as *const libc::siginfo_t).cast::<u8>().add(MARK).cast::<usize>().read();
        (info.si_pid(), info.si_value().sival_ptr as usize, mark)
    };
    // SAFETY: getpid cannot fail.
    (mark == doorbell() && pid == unsafe { libc::getpid() }).then_some(v)
}

/// Whether `info` carries `mark` (after `si_value`), which is cleared: the
/// handler gets the `siginfo` as it was.
fn take_mark(info: &mut libc::siginfo_t, mark: usize) -> bool {
    // SAFETY: a word within the siginfo.
    let w = unsafe { &mut *(info as *mut libc::siginfo_t).cast::<u8>().add(MARK).cast::<usize>() };
    let marked = *w == mark;
    if marked {
        *w = 0;
    }
    marked
}

/// Where a doorbell's mark lies in a `siginfo_t`: after `si_value`, in the
/// fields the kernel passes on as given (zero in any `siginfo` a sender
/// other than this library makes).
const MARK: usize = 32;

/// A doorbell's mark is this byte's address.
static DOORBELL: u8 = 0;

fn doorbell() -> usize {
    std::ptr::addr_of!(DOORBELL) as usize
}

/// Keeps a `SIGURG` for `d` with its `siginfo`.
pub(crate) fn keep(d: &ThreadData, info: &libc::siginfo_t) {
    d.urg.put(info);
    d.pending_signals.fetch_or(bit(), Ordering::AcqRel);
}

/// The program's handler, run by the runtime as if the kernel had
/// delivered the signal (`accept` said it runs): through `handlers.rs`'s
/// wrapper.
///
/// # Safety
/// Called as a signal handler, with the signal's own frame.
pub(crate) unsafe extern "C" fn entry(
    sig: c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    // SAFETY: the frame's arguments, passed on.
    unsafe { crate::handlers::wrapper(sig, info, ctx) };
    if PROGRAM.handler.load(Ordering::Acquire) == libc::SIG_DFL {
        // `SA_RESETHAND`: the handler did not install one again.
        crate::handlers::record(SIG, 0, 0, 0);
    }
}

/// A `siginfo` as `tgkill` from this process gives it.
fn tkill_info() -> libc::siginfo_t {
    // SAFETY: a zeroed siginfo is valid; the fields `tgkill` sets are set.
    let mut i: libc::siginfo_t = unsafe { MaybeUninit::zeroed().assume_init() };
    i.si_signo = SIG;
    i.si_code = libc::SI_TKILL;
    crate::procsig::set_own_sender(&mut i);
    i
}

/// Raises `SIGURG` with `info` on the calling user thread's kernel thread
/// (`rt_tgsigqueueinfo`, which lets a thread give itself any `siginfo`),
/// marked as its own, and again until [`accept`] has seen that mark: one the
/// kernel dropped beside a pending request of the runtime's, or a doorbell
/// (module docs, "Coalescing"). Not while the kernel blocks `SIGURG` here
/// (inside a program handler whose mask blocks it): the kernel keeps it for
/// the handler's end.
fn raise_self(d: &ThreadData, info: &libc::siginfo_t) {
    let mut marked = *info;
    // SAFETY: a word within our own copy.
    unsafe {
        (&mut marked as *mut libc::siginfo_t)
            .cast::<u8>()
            .add(MARK)
            .cast::<usize>()
            .write(doorbell() + 1)
    };
    for _ in 0..16 {
        let before = d.urg.raised.load(Ordering::Acquire);
        crate::procsig::raise_with(SIG, &marked);
        if d.urg.raised.load(Ordering::Acquire) != before || kernel_blocks() {
            return;
        }
    }
}

/// Whether the calling kernel thread's mask blocks `SIGURG` in the kernel.
fn kernel_blocks() -> bool {
    schedlab_rt::shared::sigprocmask(libc::SIG_BLOCK, None) & bit() != 0
}

/// `signal.rs`'s `deliver_pending`, for a pending `SIGURG` it has taken
/// from the calling user thread's set: raised with its own `siginfo`.
pub(crate) fn raise_kept() {
    let d = current();
    let info = d.urg.take().unwrap_or_else(tkill_info);
    raise_self(d, &info);
}

/// The `siginfo` of a `SIGURG` a `sigwait` took from the calling thread's
/// pending set.
pub(crate) fn take_info() -> libc::siginfo_t {
    current().urg.take().unwrap_or_else(tkill_info)
}

/// `pthread_kill(thread, SIGURG)` of another user thread `d`, once
/// `signal.rs` has checked it (module docs, "Coalescing"): pending in its
/// set, and asked to run its hook; and when it is on a kernel thread (running,
/// or blocked in the kernel in a call the handler must interrupt), a
/// doorbell sent there: a `SIGURG` queued from this process whose value
/// names `d`, which [`accept`] turns into the pending one if `d` is still
/// there, and drops otherwise (the thread moved: its hook delivers it).
pub(crate) fn send(d: &ThreadData, thread: &schedlab_rt::Thread) {
    d.pending_signals.fetch_or(bit(), Ordering::AcqRel);
    if let Some(tid) = schedlab_rt::shared::kernel_thread_of(thread) {
        ring(tid, d, SIG);
    }
    schedlab_rt::shared::interrupt(thread);
    thread.unpark();
}

/// A doorbell for user thread `d` on kernel thread `tid`, where it runs or
/// is blocked in a call: `sig` queued with `d` and the mark in its
/// `siginfo` ([`doorbell_for`]), which ends or restarts the call as the
/// kernel does for any signal; where it comes, `d`'s pending `sig` is
/// delivered if `d` is still there, and it is dropped otherwise (`d` takes
/// its pending set at its next safe point). `SIGURG` here, and every other
/// signal's `pthread_kill` (`signal.rs`).
pub(crate) fn ring(tid: i32, d: &ThreadData, sig: c_int) {
    // SAFETY: a zeroed siginfo is valid; a queued signal's fields are set
    // below.
    let mut i: libc::siginfo_t = unsafe { MaybeUninit::zeroed().assume_init() };
    i.si_signo = sig;
    i.si_code = libc::SI_QUEUE;
    crate::procsig::set_own_sender(&mut i);
    // SAFETY: `si_value` follows `si_pid` and `si_uid` (byte 24), the mark
    // is within the 128 bytes; a signal to a kernel thread of our own
    // process.
    unsafe {
        let f = (&mut i as *mut libc::siginfo_t).cast::<u8>().add(16);
        f.add(8).cast::<usize>().write(d as *const ThreadData as usize);
        f.add(MARK - 16).cast::<usize>().write(doorbell());
        libc::syscall(libc::SYS_rt_tgsigqueueinfo, libc::getpid(), tid, sig, &i);
    }
}

/// `pthread_kill` of the calling thread itself, or `raise`: kept if it
/// blocks `SIGURG`, else raised here until seen.
pub(crate) fn raise_own() {
    let d = current();
    if schedlab_rt::shared::signal_mask() & bit() != 0 {
        keep(d, &tkill_info());
        return;
    }
    raise_self(d, &tkill_info());
}

/// `raise`: `SIGURG` on a user thread while the runtime holds the kernel's
/// handler goes through [`raise_own`]; anything else is glibc's.
#[no_mangle]
pub extern "C" fn raise(sig: c_int) -> c_int {
    if sig == SIG && RUNTIME_HOLDS.load(Ordering::Acquire) && on_user_thread() {
        raise_own();
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { next::raise()(sig) }
}
