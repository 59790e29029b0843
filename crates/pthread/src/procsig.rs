//! Process-directed signals (`kill`, `sigqueue`, a child's `SIGCHLD`, a
//! `timer_create` timer's) reach a thread that does not block them, with
//! their own `siginfo`, as the kernel gives them to a kernel thread —
//! seed 003's `SA_UPCALL_SIGNAL` for signals to the process.
//!
//! The kernel delivers a process-directed signal to one of the process's
//! kernel threads that does not block it. The runtime applies each user
//! thread's mask to the kernel thread that runs it, so a kernel thread
//! running a user thread (on a processor, or blocked in the kernel after a
//! hand-off) takes exactly what that thread accepts, and the program's
//! initial thread what its own mask accepts. Two gaps remain, both closed
//! here:
//!
//! 1. **Kernel threads that run no user thread.** The runtime blocks the
//!    program's signals on its own kernel threads when they start, before an
//!    idle processor sleeps and before a spare waits
//!    (`schedlab_rt::shared`, "Signals"): one `rt_sigprocmask` on paths that
//!    sleep anyway, and one more when a processor woken from a sleep resumes
//!    a thread. It does not do so on every idle transition (a processor
//!    that finds its queue empty spins a while first, and a condition
//!    variable's cross-processor ping-pong goes idle and back at every turn:
//!    a system call each way there). So a processor spinning for work still
//!    has the mask of the last user thread it ran, and a signal may land
//!    there. The handler wrapper (`handlers.rs`) tells that case
//!    (`schedlab_rt::shared::on_idle_runtime_thread`) and, instead of
//!    running the program's handler on no thread of the program, saves the
//!    `siginfo` here and wakes the forwarder (2).
//! 2. **User threads that are on no kernel thread.** A user thread parked in
//!    one of the library's waits (a condition variable, a sleep, a pipe read
//!    through the poller, a join) or queued is on no kernel thread, so the
//!    kernel cannot choose it: with every kernel thread blocking the signal
//!    it stays pending for good. So the library has one kernel thread of its
//!    own, the forwarder, started with the runtime, that blocks every signal
//!    but those with a program handler (`handlers.rs` keeps that set,
//!    [`set_handled`]), and sleeps. The kernel may give it such a signal as
//!    it may give it any other thread that accepts it; its wrapper saves the
//!    `siginfo` here, as in 1. (A design where the forwarder accepted none
//!    and took from a signalfd what no thread had taken 1 ms after it came
//!    was tried: it let `sigwaitinfo` in `procsig.c` end with `EINTR` in a
//!    third of the runs, unexplained when this was written.)
//!
//! The runtime also runs [`take_stranded`] each time one of its kernel
//! threads blocks the program's signals for want of a user thread: a signal
//! the forwarder sent that kernel thread by `tgkill` for a running thread
//! that moved away in that instant, blocked by the next thread there, is
//! taken from the kernel and passed on again. And a user thread that ends
//! takes first the signals it accepts that still wait in the library
//! (`signal::before_exit`), as the kernel would have delivered them to it.
//!
//! The forwarder then picks a user thread that accepts the signal (does not
//! block it, or waits for it in `sigwait`): first one blocked in the kernel
//! (a `waitpid`, `pause`, `read` of a terminal), whose call must end with
//! `EINTR` or restart by the handler's `SA_RESTART`; then one running; then
//! the program's initial thread if it accepts it; then a queued or parked
//! one. A thread on a kernel thread gets the signal by `tgkill` of that
//! kernel thread (the kernel then interrupts its call as it would), and
//! the wrapper there, seeing a `SI_TKILL` from this process, takes the saved
//! `siginfo` recorded for that kernel thread and passes it to the program's
//! handler in place of the kernel's; `sigwaitinfo` and `sigtimedwait` do the
//! same. A parked or queued thread gets it through `pthread_kill`'s path
//! (its pending set, `schedlab_rt::shared::interrupt`, which wakes it): in
//! its own context `signal::deliver_pending` raises it with the saved
//! `siginfo` by `rt_tgsigqueueinfo` to itself, which Linux allows to
//! impersonate `kill` (`si_code >= 0`) only there, on the caller's own
//! thread (kernel/signal.c, `do_rt_tgsigqueueinfo`).
//!
//! When no thread accepts it, the signal stays pending for the process here
//! ([`keep_for_process`]), as the kernel would keep it: `sigpending` reports
//! it, a `sigwait` family call takes it with its `siginfo`, and a thread
//! that unblocks it (`pthread_sigmask`, the end of a handler whose mask
//! blocked it, or a new thread that starts with it open) takes it. The
//! forwarder looks again every [`LOOK_AGAIN`] while any is kept (a mask the
//! library did not see change; for a running thread it reads the kernel's
//! mask of its kernel thread, [`running_and_open`]). A standard signal
//! already pending is not kept twice, as the kernel keeps one of each.
//!
//! The `siginfo` records live in a fixed table, claimed and released with
//! atomics only: the wrapper saves and takes them in a signal handler.
//!
//! # When the thread that accepts it ends
//!
//! The kernel chooses a signal's thread when the signal is sent, and that
//! thread takes it before it ends. Here a signal is placed a moment after
//! it was sent (the forwarder must wake), when the one thread that accepted
//! it may have ended. Four things close that gap:
//! - a process's `kill` of itself, for a signal with a program handler that
//!   the caller blocks, is placed by the caller at once ([`kill`]), under the
//!   list's lock, on a thread that accepts it then;
//! - a thread that ends and accepts such signals waits while one is on its
//!   way to it (saved for the forwarder, being placed, or sent to its kernel
//!   thread by `tgkill` for it and not yet taken there), still listed, so
//!   that it may be the taker ([`settle_before_exit`]); then takes what
//!   waits in the library for it or for the process. The wait ends when the
//!   signal arrives; its bound ([`SETTLE`], 1 s) is for one that cannot
//!   move on;
//! - after it left the list, it waits for the placements under way and
//!   takes again what was kept for the process meanwhile
//!   ([`settle_after_unlisted`]);
//! - a signal taken back from a kernel thread its user thread has left, to
//!   be placed again, counts as on its way from before its record goes
//!   until it is saved again ([`InTransit`]);
//! - a signal from another process (or the kernel) still pending in the
//!   kernel, given to a kernel thread that has not run to take it (the
//!   forwarder, an idle processor's), is taken by the ending thread itself
//!   (`take_from_kernel`); one that kernel thread has taken counts as on
//!   its way from its handler wrapper's first step ([`Arriving`]).
//!
//! Not covered: such a signal in the kernel's own part of its delivery to
//! the forwarder or an idle processor's kernel thread (taken from the
//! kernel's queue, its handler not yet entered) when the one accepting
//! thread ends (`exit_race_external.c` still fails in some runs); a
//! handler installed with the `rt_sigaction` system call directly, which
//! does not go through the wrapper (docs/PTHREAD.md, "Not done yet").

use crate::thread::ThreadData;
use schedlab_rt::ring::{event, Event};
use schedlab_rt::shared::SpinLock;
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// glibc's definitions.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_void};
    crate::glibc::real!(pthread_create: fn(*mut libc::pthread_t, *const libc::pthread_attr_t, extern "C" fn(*mut c_void) -> *mut c_void, *mut c_void) -> c_int);
    crate::glibc::real!(pthread_detach: fn(libc::pthread_t) -> c_int);
}

/// Whom a saved `siginfo` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum For {
    /// The forwarder, which has not placed it yet.
    Forwarder,
    /// The process: no thread accepted it.
    Process,
    /// Whoever takes it on this kernel thread (by id), where it was sent by
    /// `tgkill`.
    KernelThread(i32),
    /// This user thread (`ThreadData::id`), in whose pending set it is.
    User(u32),
}

impl For {
    fn key(self, sig: c_int) -> u64 {
        let (kind, id) = match self {
            For::Forwarder => (1u64, 0u64),
            For::Process => (2, 0),
            For::KernelThread(t) => (3, t as u32 as u64),
            For::User(id) => (4, id as u64),
        };
        kind << 48 | id << 8 | sig as u64
    }
}

fn bit(sig: c_int) -> u64 {
    1u64 << (sig - 1)
}

/// The first real-time signal the kernel has (glibc keeps 32 and 33).
const KERNEL_SIGRTMIN: c_int = 32;

/// How many `siginfo` records may wait at once.
const SLOTS: usize = 256;

/// A record's states: free, being written or taken, ready.
const FREE: u32 = 0;
const BUSY: u32 = 1;
const READY: u32 = 2;

struct Slot {
    state: AtomicU32,
    key: AtomicU64,
    /// The order records were saved in: the oldest is taken first.
    seq: AtomicU64,
    /// For a record `For::KernelThread`: the user thread (`ThreadData::id`)
    /// the forwarder chose, which was running there; 0 otherwise.
    target: AtomicU32,
    info: UnsafeCell<MaybeUninit<libc::siginfo_t>>,
}

// SAFETY: `info` is written only by the claimer that moved `state` from
// `FREE` to `BUSY`, and read only by the taker that moved it from `READY` to
// `BUSY`; the state's release and acquire order the accesses.
unsafe impl Sync for Slot {}

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        state: AtomicU32::new(FREE),
        key: AtomicU64::new(0),
        seq: AtomicU64::new(0),
        target: AtomicU32::new(0),
        info: UnsafeCell::new(MaybeUninit::uninit()),
    }
}; SLOTS];
static SEQ: AtomicU64 = AtomicU64::new(1);
/// How many records are ready: 0 lets the wrapper skip the table.
static READY_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Index of the oldest ready record for `key` (`None` if none), or with
/// `any_kind`, the oldest whose kind is `key`'s.
fn find(key: u64, any_sig_of_kind: bool) -> Option<usize> {
    let mut best: Option<(u64, usize)> = None;
    for (i, s) in TABLE.iter().enumerate() {
        if s.state.load(Ordering::Acquire) != READY {
            continue;
        }
        let k = s.key.load(Ordering::Relaxed);
        let matches = if any_sig_of_kind { k & !0xff == key & !0xff } else { k == key };
        if matches {
            let seq = s.seq.load(Ordering::Relaxed);
            if best.is_none_or(|(b, _)| seq < b) {
                best = Some((seq, i));
            }
        }
    }
    best.map(|(_, i)| i)
}

/// Saves `info` for `whom`; `false` when the table is full. A standard
/// signal that already has a record for `whom` is not saved again (the
/// kernel keeps one of each), which counts as saved. Async-signal-safe.
pub(crate) fn save(whom: For, sig: c_int, info: &libc::siginfo_t) -> bool {
    save_aimed(whom, sig, info, 0)
}

/// [`save`], for a signal aimed at user thread `target` (its id; 0: none).
fn save_aimed(whom: For, sig: c_int, info: &libc::siginfo_t, target: u32) -> bool {
    let key = whom.key(sig);
    if sig < KERNEL_SIGRTMIN && find(key, false).is_some() {
        return true;
    }
    for s in TABLE.iter() {
        if s.state.compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            // SAFETY: claimed (`BUSY`), ours alone until `READY`.
            unsafe { (*s.info.get()).write(*info) };
            s.key.store(key, Ordering::Relaxed);
            s.seq.store(SEQ.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
            s.target.store(target, Ordering::Relaxed);
            if key >> 48 == For::KernelThread(0).key(0) >> 48 {
                schedlab_rt::shared::SENT_TO_KERNEL_THREADS.fetch_add(1, Ordering::AcqRel);
            }
            READY_COUNT.fetch_add(1, Ordering::AcqRel);
            s.state.store(READY, Ordering::Release);
            return true;
        }
    }
    false
}

/// Takes the record at `i` if it is still ready and still for `key` (its
/// kind's with `any_sig_of_kind`): it may have been taken and the slot
/// saved again since [`find`] read it. Its signal and `siginfo`.
fn take_at(i: usize, key: u64, any_sig_of_kind: bool) -> Option<(c_int, libc::siginfo_t)> {
    let s = &TABLE[i];
    if s.state.compare_exchange(READY, BUSY, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return None;
    }
    let k = s.key.load(Ordering::Relaxed);
    if !(k == key || any_sig_of_kind && k & !0xff == key & !0xff) {
        s.state.store(READY, Ordering::Release);
        return None;
    }
    // SAFETY: taken (`BUSY`): written before `READY` was stored.
    let info = unsafe { (*s.info.get()).assume_init() };
    let sig = (k & 0xff) as c_int;
    if k >> 48 == For::KernelThread(0).key(0) >> 48 {
        schedlab_rt::shared::SENT_TO_KERNEL_THREADS.fetch_sub(1, Ordering::AcqRel);
    }
    READY_COUNT.fetch_sub(1, Ordering::AcqRel);
    s.state.store(FREE, Ordering::Release);
    Some((sig, info))
}

/// Takes the oldest `siginfo` saved for `whom` and `sig`. Async-signal-safe.
pub(crate) fn take(whom: For, sig: c_int) -> Option<libc::siginfo_t> {
    if READY_COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    loop {
        let i = find(whom.key(sig), false)?;
        if let Some((_, info)) = take_at(i, whom.key(sig), false) {
            return Some(info);
        }
    }
}

/// For a signal the kernel delivered with `SI_TKILL` from this process (a
/// `tgkill`, which the forwarder sends): the `siginfo` the forwarder saved
/// for the calling kernel thread, if any, with the signal marked in transit
/// until the caller drops the mark — once the signal is placed again
/// ([`pass_on`], a thread's pending set) or its handler is about to run: in
/// between, no record of it exists, and a thread that ends must still see it
/// as on its way ([`on_its_way`]). `SI_USER` is taken for `SI_TKILL` too:
/// glibc's `sigwaitinfo` and `sigtimedwait` fold one into the other.
/// Async-signal-safe.
pub(crate) fn original_info(
    sig: c_int,
    info: &libc::siginfo_t,
) -> Option<(libc::siginfo_t, InTransit)> {
    if info.si_code != libc::SI_TKILL && info.si_code != libc::SI_USER
        || READY_COUNT.load(Ordering::Acquire) == 0
    {
        return None;
    }
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid(), libc::syscall(libc::SYS_gettid) as i32) };
    // SAFETY: a `SI_TKILL` siginfo carries the sender's pid.
    if unsafe { info.si_pid() } != pid {
        return None;
    }
    // Marked before its record goes.
    let mark = InTransit::begin();
    take(For::KernelThread(tid), sig).map(|i| (i, mark))
}

/// For a signal a `sigwait` family call of user thread `me` returned (not a
/// handler, which runs on the kernel thread that took it): as
/// [`original_info`], from a record sent for `me` to any kernel thread —
/// the wait may have returned on one the thread has left since.
pub(crate) fn original_info_aimed_at(
    sig: c_int,
    info: &libc::siginfo_t,
    me: u32,
) -> Option<libc::siginfo_t> {
    if info.si_code != libc::SI_TKILL && info.si_code != libc::SI_USER
        || READY_COUNT.load(Ordering::Acquire) == 0
    {
        return None;
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    // SAFETY: a `SI_TKILL` or `SI_USER` siginfo carries the sender's pid.
    if unsafe { info.si_pid() } != pid {
        return None;
    }
    loop {
        let mut best: Option<(u64, usize, u64)> = None;
        for (i, s) in TABLE.iter().enumerate() {
            if s.state.load(Ordering::Acquire) != READY {
                continue;
            }
            let k = s.key.load(Ordering::Relaxed);
            if k >> 48 == For::KernelThread(0).key(0) >> 48
                && (k & 0xff) as c_int == sig
                && s.target.load(Ordering::Relaxed) == me
            {
                let seq = s.seq.load(Ordering::Relaxed);
                if best.is_none_or(|(b, ..)| seq < b) {
                    best = Some((seq, i, k));
                }
            }
        }
        let (_, i, k) = best?;
        if let Some((_, info)) = take_at(i, k, false) {
            return Some(info);
        }
    }
}

/// How many signals are between two places: their record for a kernel
/// thread taken ([`original_info`]), not yet saved again or handled.
static IN_TRANSIT: AtomicU32 = AtomicU32::new(0);

/// A signal in transit ([`IN_TRANSIT`]) while this lives. Async-signal-safe.
pub(crate) struct InTransit(());

impl InTransit {
    fn begin() -> InTransit {
        IN_TRANSIT.fetch_add(1, Ordering::SeqCst);
        InTransit(())
    }
}

impl Drop for InTransit {
    fn drop(&mut self) {
        IN_TRANSIT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How many signals the kernel has handed a kernel thread of the program
/// whose handler wrapper has not yet handled them there or recorded them
/// in the library ([`Arriving`]).
static ARRIVING: AtomicU32 = AtomicU32::new(0);

/// A signal in the handler wrapper's first steps ([`ARRIVING`]) while this
/// lives: one the kernel gave the forwarder or an idle processor's kernel
/// thread is on its way to a thread that may be ending, with no record yet.
/// What it does not cover is the kernel's own part, from its take of the
/// signal to the wrapper's first instruction. Async-signal-safe.
pub(crate) struct Arriving(());

impl Arriving {
    pub(crate) fn begin() -> Arriving {
        ARRIVING.fetch_add(1, Ordering::SeqCst);
        Arriving(())
    }
}

impl Drop for Arriving {
    fn drop(&mut self) {
        ARRIVING.fetch_sub(1, Ordering::SeqCst);
    }
}

// The process's pending signals.

/// Signals kept for the process (each with records `For::Process`, unless
/// the table was full).
static PROCESS: AtomicU64 = AtomicU64::new(0);

/// The signals pending for the process here.
pub(crate) fn process_pending() -> u64 {
    PROCESS.load(Ordering::Acquire)
}

/// The signals the forwarder is placing now.
static FORWARDING: AtomicU64 = AtomicU64::new(0);

/// How many placements ([`forward`]) are under way: the forwarder's, and
/// those of threads that `kill` their own process. A thread that ends waits
/// for them ([`settle_after_unlisted`]).
static PLACING: AtomicU32 = AtomicU32::new(0);

/// For `sigpending`: the signals pending for the process here, and those
/// on their way there (waiting for the forwarder, or being placed by it).
/// Not one the kernel has just handed to a kernel thread whose wrapper has
/// not saved it yet.
pub(crate) fn pending_or_in_flight() -> u64 {
    let mut set = 0;
    for s in TABLE.iter() {
        if s.state.load(Ordering::Acquire) == READY {
            let k = s.key.load(Ordering::Relaxed);
            if k >> 48 == For::Forwarder.key(0) >> 48 {
                set |= bit((k & 0xff) as c_int);
            }
        }
    }
    set | FORWARDING.load(Ordering::Acquire) | PROCESS.load(Ordering::Acquire)
}

/// Keeps `sig` pending for the process: no thread accepts it now.
pub(crate) fn keep_for_process(sig: c_int, info: &libc::siginfo_t) {
    event(Event::KeepForProcess, sig as u64);
    // Without room for its record it is still kept; its taker then gets a
    // `siginfo` naming the signal alone.
    save(For::Process, sig, info);
    PROCESS.fetch_or(bit(sig), Ordering::AcqRel);
}

/// Takes one signal of `set` pending for the process: the lowest, with its
/// `siginfo`.
pub(crate) fn take_process(set: u64) -> Option<(c_int, libc::siginfo_t)> {
    loop {
        let ready = PROCESS.load(Ordering::Acquire) & set;
        if ready == 0 {
            return None;
        }
        let b = ready & ready.wrapping_neg();
        if PROCESS.fetch_and(!b, Ordering::AcqRel) & b == 0 {
            continue;
        }
        let sig = b.trailing_zeros() as c_int + 1;
        let info = take(For::Process, sig).unwrap_or_else(|| bare_info(sig));
        // A real-time signal queued more than once stays pending.
        if find(For::Process.key(sig), false).is_some() {
            PROCESS.fetch_or(b, Ordering::AcqRel);
        }
        return Some((sig, info));
    }
}

/// A `siginfo` naming `sig` alone, sent by `kill` from this process.
pub(crate) fn bare_info(sig: c_int) -> libc::siginfo_t {
    // SAFETY: an all-zero siginfo is valid.
    let mut i: libc::siginfo_t = unsafe { std::mem::zeroed() };
    i.si_signo = sig;
    i.si_code = libc::SI_USER;
    i
}

/// Raises `sig` on the calling kernel thread with `info` as its `siginfo`
/// (`rt_tgsigqueueinfo` to oneself, which may carry any `si_code`).
pub(crate) fn raise_with(sig: c_int, info: &libc::siginfo_t) {
    // SAFETY: our own process and kernel thread; the kernel copies `info`.
    unsafe {
        let mut i = *info;
        i.si_signo = sig;
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            libc::getpid(),
            libc::syscall(libc::SYS_gettid),
            sig,
            &i as *const libc::siginfo_t,
        );
    }
}

/// How long a thread that ends waits at most for the signals on their way
/// to it ([`settle_before_exit`], [`settle_after_unlisted`]). Each step of
/// a signal's way (a `tgkill`'s delivery, a take from a kernel thread, the
/// forwarder's placement) ends in microseconds when its kernel thread runs,
/// so the wait ends when the signal arrives, not at this bound: the bound is
/// for a signal that cannot move on — sent to a kernel thread whose next
/// user thread blocks it and then blocks in a long system call, where the
/// signal waits until that call returns. (It was 5 ms, taken as "a few
/// scheduling steps": with two test programs sharing two CPUs, a kernel
/// thread of the way was not run within it, the thread ended first, and
/// `exit_storm.c`'s sender waited for its handler for good.)
const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// For user thread `me` as it ends, still listed, if it accepts some
/// signal with a program handler (`open`, its mask's complement): waits, up
/// to [`SETTLE`], while such a signal is on its way to it ([`on_its_way`]).
/// Still listed, the thread may be the one it goes to: the kernel would
/// have run its handler on the thread before it ended, since it accepted
/// the signal when it was sent. Without the wait, a signal the forwarder
/// aimed at the thread's kernel thread just as the thread left it came back
/// after the thread had gone, and stayed pending for the process with no
/// thread to take it (the Open POSIX suite's `pthread_cond_wait/4-1` and
/// `pthread_cond_timedwait/4-3`, whose one accepting thread ends at the
/// end, hung now and then: a sender waited for that signal's handler).
/// No wait when nothing is on its way (one load when no record waits). The
/// thread first has the kernel deliver to it what waits in the kernel's
/// queue for the process ([`take_from_kernel`]), unless another listed
/// thread accepts each of those signals too: one queued now then still
/// finds a taker. Not covered: a signal in the kernel's part of its
/// delivery to another kernel thread (module docs).
pub(crate) fn settle_before_exit(me: u32, open: u64) {
    let mine = HANDLED.load(Ordering::Acquire) & open;
    if mine == 0 {
        return;
    }
    if !others_accept(me, mine) {
        take_from_kernel(mine);
    }
    if on_its_way(me, mine).is_none() {
        return;
    }
    let until = std::time::Instant::now() + SETTLE;
    while let Some(at) = on_its_way(me, mine) {
        if std::time::Instant::now() >= until {
            return;
        }
        settle_step(at);
    }
}

/// For user thread `me` as it ends, after it left the list the forwarder
/// chooses from (`open`, its mask's complement): waits, up to [`SETTLE`],
/// while a signal is being placed ([`PLACING`]: one that finds no taker now
/// is kept for the process, for the thread to take after) or is on its way
/// to it ([`on_its_way`]).
pub(crate) fn settle_after_unlisted(me: u32, open: u64) {
    let mine = HANDLED.load(Ordering::Acquire) & open;
    if mine == 0 {
        return;
    }
    // Against a placement's look at the list (Dekker's, with the fence in
    // `kill`'s and the forwarder's `PLACING` increment).
    std::sync::atomic::fence(Ordering::SeqCst);
    let busy = || {
        if PLACING.load(Ordering::SeqCst) != 0 {
            Some(None)
        } else {
            on_its_way(me, mine)
        }
    };
    if busy().is_none() {
        return;
    }
    let until = std::time::Instant::now() + SETTLE;
    while let Some(at) = busy() {
        if std::time::Instant::now() >= until {
            return;
        }
        settle_step(at);
    }
}

/// For a thread that ends, on its kernel thread, whose mask opens `set`:
/// has the kernel deliver here now a signal of `set` that waits in the
/// kernel for the process — sent by another process or by the kernel, and
/// given to a kernel thread that runs no thread of the program (the
/// forwarder, or an idle processor's with the mask of the last thread it
/// ran) and has not run to take it yet. Taken there later, it would reach
/// the library after this thread ended, and find no taker
/// (`exit_race_external.c`: the sender's answer never came, 5 runs of 5).
/// A change of mask makes the kernel look at the process's pending signals
/// for the caller (`recalc_sigpending`), and the return to user space
/// delivers one the mask opens; an unchanged mask is not looked at, so
/// `set` is blocked and opened again: two system calls. (Nothing between
/// them can switch the thread: the library's own code is no safe point
/// for preemption.)
fn take_from_kernel(set: u64) {
    crate::signal::set_kernel_mask(crate::signal::block_in_kernel(set));
}

/// Whether, for each signal of `set`, a listed user thread other than `me`
/// accepts it (does not block it, or waits for it in `sigwait`). One look
/// at the list, which ends at the first threads that cover `set` (most
/// threads block nothing).
fn others_accept(me: u32, set: u64) -> bool {
    let list = THREADS.lock();
    let mut covered = 0u64;
    for &p in list.iter() {
        // SAFETY: listed threads' data is alive while listed, and the list is
        // locked.
        let d = unsafe { &*(p as *const ThreadData) };
        if d.id == me || d.has_exited() {
            continue;
        }
        let Some(t) = d.rt_thread() else { continue };
        covered |= !schedlab_rt::shared::signal_mask_of(&t) | d.sigwait_set.load(Ordering::Acquire);
        if covered & set == set {
            return true;
        }
    }
    false
}

/// One step of a settling wait for a signal on its way, `at` the kernel
/// thread it was sent to (if known). Ends with a system call, where the
/// kernel delivers a signal sent to the calling kernel thread. Off that
/// kernel thread, the thread first yields its processor: the signal may
/// wait for a thread of this processor's queue (its placement), and a
/// thread there that blocks it would strand it. On it, it stays: leaving,
/// it would strand the signal itself, and the next thread there would
/// likely block it. (Only the system call off a user thread: a unit test's.)
fn settle_step(at: Option<i32>) {
    // SAFETY: gettid has no preconditions.
    let here = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    if at != Some(here) && crate::thread::on_user_thread() {
        schedlab_rt::yield_now();
    }
    // SAFETY: no arguments; a point where the kernel delivers.
    unsafe { libc::syscall(libc::SYS_sched_yield) };
}

/// Whether a signal of `open` may be on its way to user thread `me`, and if
/// so, `Some` of the kernel thread it was sent to when that is known: sent
/// by `tgkill` to a kernel thread for `me` (a record `For::KernelThread`
/// aimed at it) and not taken there yet; waiting for the forwarder, or
/// being placed by it (which may choose `me`); or in transit from a kernel
/// thread's record to its next place ([`InTransit`]: any signal, counted
/// alone; seen: a thread that ended looked in the instant between
/// `take_stranded`'s take of a record and its save for the forwarder,
/// found nothing on its way, and the signal, placed a moment later, found
/// no thread that accepted it — the Open POSIX suite's
/// `pthread_cond_timedwait/4-3` hung); or taken from the kernel by a kernel
/// thread whose handler wrapper has not recorded it yet ([`Arriving`]: any
/// signal, counted alone). A record sent to a kernel thread for another
/// user thread is that thread's: it does not hold `me` up.
fn on_its_way(me: u32, open: u64) -> Option<Option<i32>> {
    // After the caller's look at the kernel's pending signals
    // (`take_from_kernel`): one taken by another kernel thread since is in
    // its handler wrapper, or recorded.
    std::sync::atomic::fence(Ordering::SeqCst);
    if IN_TRANSIT.load(Ordering::SeqCst) != 0
        || ARRIVING.load(Ordering::SeqCst) != 0
        || FORWARDING.load(Ordering::Acquire) & open != 0
    {
        return Some(None);
    }
    if READY_COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    let mut found = None;
    for s in TABLE.iter() {
        if s.state.load(Ordering::Acquire) != READY {
            continue;
        }
        let k = s.key.load(Ordering::Relaxed);
        if open & bit((k & 0xff) as c_int) == 0 {
            continue;
        }
        let kind = k >> 48;
        if kind == For::Forwarder.key(0) >> 48 {
            found = Some(found.flatten());
        } else if kind == For::KernelThread(0).key(0) >> 48
            && s.target.load(Ordering::Relaxed) == me
        {
            return Some(Some(((k >> 8) & 0xffff_ffff) as u32 as i32));
        }
    }
    found
}

/// Moves into user thread `d`'s own pending set (with their `siginfo`) the
/// signals of `open` waiting for the forwarder: for a thread that ends,
/// which is a taker of them now and will be none in a moment.
pub(crate) fn take_inbox_for(d: &ThreadData, open: u64) {
    if READY_COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    while let Some(i) = TABLE.iter().position(|s| {
        s.state.load(Ordering::Acquire) == READY && {
            let k = s.key.load(Ordering::Relaxed);
            k >> 48 == For::Forwarder.key(0) >> 48 && open & bit((k & 0xff) as c_int) != 0
        }
    }) {
        if let Some((sig, info)) = take_at(i, For::Forwarder.key(0), true) {
            save(For::User(d.id), sig, &info);
            d.pending_signals.fetch_or(bit(sig), Ordering::AcqRel);
        }
    }
}

// The user threads the forwarder chooses from.

static THREADS: SpinLock<Vec<usize>> = SpinLock::new(Vec::new());

/// Lists user thread `d` (at its start, on itself).
pub(crate) fn register(d: &ThreadData) {
    let mut l = THREADS.lock();
    l.push(d as *const ThreadData as usize);
    d.listed.store(l.len(), Ordering::Relaxed);
}

/// Unlists user thread `d` (as it ends, on itself): the forwarder, which
/// reads the list under its lock, no longer sees it.
pub(crate) fn unregister(d: &ThreadData) {
    let mut l = THREADS.lock();
    let i = d.listed.swap(0, Ordering::Relaxed);
    if i == 0 {
        return;
    }
    l.swap_remove(i - 1);
    if let Some(&moved) = l.get(i - 1) {
        // SAFETY: listed threads' data is alive while listed.
        unsafe { &*(moved as *const ThreadData) }.listed.store(i, Ordering::Relaxed);
    }
}

// The forwarder.

/// Bumped (and woken) when a record waits for the forwarder or the handled
/// set changed.
static WAKE: AtomicU32 = AtomicU32::new(0);
/// The forwarder's kernel thread id (0 before it runs).
static FORWARDER: AtomicI32 = AtomicI32::new(0);
static STARTED: AtomicBool = AtomicBool::new(false);
/// The signals with a program handler (`handlers.rs`), which the forwarder
/// accepts.
static HANDLED: AtomicU64 = AtomicU64::new(0);

/// `handlers.rs`: the signals with a program handler are now `set`.
pub(crate) fn set_handled(set: u64) {
    if HANDLED.swap(set, Ordering::AcqRel) != set {
        wake_forwarder();
    }
}

fn wake_forwarder() {
    WAKE.fetch_add(1, Ordering::Release);
    crate::wait::futex_wake(&WAKE, 1);
}

/// Whether the calling kernel thread is the forwarder. Async-signal-safe.
pub(crate) fn on_forwarder() -> bool {
    let f = FORWARDER.load(Ordering::Relaxed);
    // SAFETY: gettid has no preconditions.
    f != 0 && unsafe { libc::syscall(libc::SYS_gettid) } as i32 == f
}

/// In the wrapper, on a kernel thread that must not run the program's
/// handler (module docs, 1 and 2): hands `sig` to the forwarder. `false`
/// when there is no room to save its `siginfo` (the caller runs the handler
/// where it is, as before). Async-signal-safe.
pub(crate) fn pass_on(sig: c_int, info: &libc::siginfo_t) -> bool {
    event(Event::PassOn, sig as u64);
    if !save(For::Forwarder, sig, info) {
        return false;
    }
    wake_forwarder();
    true
}

/// The forwarder's mask before the handled signals are opened: every
/// signal a runtime kernel thread running no user thread blocks, and the
/// runtime's own too (the forwarder runs no user thread to preempt).
fn quiet_mask() -> u64 {
    schedlab_rt::shared::quiet_mask() | bit(schedlab_rt::shared::runtime_signal())
}

/// Starts the forwarder (once per runtime: with it, after a `fork` too).
pub(crate) fn start() {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    // Started with every signal blocked, so none lands on it before it
    // sets its own mask.
    let old = schedlab_rt::shared::sigprocmask(libc::SIG_SETMASK, Some(!0));
    let mut t: libc::pthread_t = 0;
    // SAFETY: glibc's thread creation, with our function and no argument.
    let r = unsafe {
        next::pthread_create()(&mut t, std::ptr::null(), forwarder, std::ptr::null_mut())
    };
    schedlab_rt::shared::sigprocmask(libc::SIG_SETMASK, Some(old));
    if r == 0 {
        // SAFETY: the thread just made, never joined.
        unsafe { next::pthread_detach()(t) };
    } else {
        STARTED.store(false, Ordering::Release);
    }
}

/// In the child after `fork`: no forwarder, no thread, nothing pending (the
/// kernel clears a child's pending signals).
pub(crate) fn after_fork_child() {
    STARTED.store(false, Ordering::Release);
    FORWARDER.store(0, Ordering::Release);
    PROCESS.store(0, Ordering::Release);
    // Marks of the parent's other threads, which the child does not have.
    IN_TRANSIT.store(0, Ordering::Release);
    for s in TABLE.iter() {
        s.state.store(FREE, Ordering::Relaxed);
    }
    READY_COUNT.store(0, Ordering::Release);
    schedlab_rt::shared::SENT_TO_KERNEL_THREADS.store(0, Ordering::Release);
}

/// The list of user threads, held across a `fork` (`fork.rs`), which empties
/// it in the child.
pub(crate) fn hold_threads_for_fork() -> schedlab_rt::shared::SpinGuard<'static, Vec<usize>> {
    THREADS.lock()
}

extern "C" fn forwarder(_: *mut c_void) -> *mut c_void {
    // SAFETY: gettid has no preconditions.
    FORWARDER.store(unsafe { libc::syscall(libc::SYS_gettid) } as i32, Ordering::Release);
    crate::runtime::enter();
    let mut applied = None;
    loop {
        let seen = WAKE.load(Ordering::Acquire);
        let handled = HANDLED.load(Ordering::Acquire);
        if applied != Some(handled) {
            schedlab_rt::shared::sigprocmask(libc::SIG_SETMASK, Some(quiet_mask() & !handled));
            applied = Some(handled);
        }
        retry_kept();
        while let Some(i) = find(For::Forwarder.key(0), true) {
            // Marked before it leaves the table, for `sigpending`.
            let sig = (TABLE[i].key.load(Ordering::Relaxed) & 0xff) as c_int;
            FORWARDING.fetch_or(bit(sig), Ordering::AcqRel);
            PLACING.fetch_add(1, Ordering::SeqCst);
            if let Some((sig, info)) = take_at(i, For::Forwarder.key(0), true) {
                event(Event::Forward, sig as u64);
                forward(sig, &info);
            }
            PLACING.fetch_sub(1, Ordering::SeqCst);
            FORWARDING.fetch_and(!bit(sig), Ordering::AcqRel);
        }
        // While signals are kept for the process, looked at again every
        // `LOOK_AGAIN`: a thread may have opened one where the library does
        // not see it (a mask the runtime's record has wrong).
        let again = (PROCESS.load(Ordering::Acquire) != 0).then_some(LOOK_AGAIN);
        crate::wait::futex_wait(&WAKE, seen, again);
    }
}

/// How often the forwarder looks again for a taker of the signals kept for
/// the process.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_millis(10);

/// Gives each signal kept for the process to a thread that accepts it now,
/// if one does.
fn retry_kept() {
    let kept = PROCESS.load(Ordering::Acquire);
    if kept == 0 {
        return;
    }
    let list = THREADS.lock();
    let mut left = kept;
    while left != 0 {
        let b = left & left.wrapping_neg();
        left &= !b;
        let sig = b.trailing_zeros() as c_int + 1;
        let taker = choose(&list, sig).or_else(|| running_and_open(&list, sig));
        if let Some(t) = taker {
            if let Some((s, i)) = take_process(b) {
                event(Event::Retry, s as u64);
                if !give(t, s, &i) {
                    keep_for_process(s, &i);
                }
            }
        }
    }
}

/// A user thread running on a kernel thread whose mask, as the kernel has
/// it (`/proc`), opens `sig` though the runtime's record of the thread's
/// mask does not: the record drifted (seen: a thread's record kept its
/// handler's signal blocked after the handler, with the kernel's mask
/// open; the Open POSIX suite's `pthread_cond_broadcast/4-2` then hung once
/// in a dozen runs). The kernel delivers there; the handler's start and end
/// make the record true again. For the forwarder's slow look only (a file
/// read per running thread).
fn running_and_open<'a>(threads: &'a [usize], sig: c_int) -> Option<Taker<'a>> {
    threads.iter().find_map(|&p| {
        // SAFETY: as in `choose`.
        let d = unsafe { &*(p as *const ThreadData) };
        if d.has_exited() {
            return None;
        }
        let t = d.rt_thread()?;
        let tid = schedlab_rt::shared::kernel_thread_of(&t)?;
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
        let blocked = status
            .lines()
            .find_map(|l| l.strip_prefix("SigBlk:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())?;
        // Still there after the read (a thread just switched in on a kernel
        // thread has the last one's mask there for a moment).
        let still = schedlab_rt::shared::kernel_thread_of(&t) == Some(tid);
        let waits = d.sigwait_set.load(Ordering::Acquire) & bit(sig) != 0;
        (still && blocked & bit(sig) == 0).then_some(Taker::OnKernelThread(d, tid, waits))
    })
}

/// Whether the program's initial thread, a kernel thread, accepts `sig` (its
/// mask, from `/proc`): the forwarder's ordinary context may read a file.
fn initial_thread_accepts(sig: c_int) -> Option<i32> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let status = std::fs::read_to_string(format!("/proc/self/task/{pid}/status")).ok()?;
    let mut blocked = None;
    for line in status.lines() {
        if let Some(s) = line.strip_prefix("State:") {
            if s.trim_start().starts_with('Z') || s.trim_start().starts_with('X') {
                return None;
            }
        }
        if let Some(s) = line.strip_prefix("SigBlk:") {
            blocked = u64::from_str_radix(s.trim(), 16).ok();
        }
    }
    (blocked? & bit(sig) == 0).then_some(pid)
}

/// Where a signal can go now, best first (module docs).
enum Taker<'a> {
    /// A user thread on a kernel thread: blocked in the kernel, or running.
    OnKernelThread(&'a ThreadData, i32, bool),
    /// A kernel thread of the program's in the `sigwait` family.
    KernelWaiter(i32),
    /// The program's initial thread.
    Initial(i32),
    /// A user thread queued or parked.
    Parked(&'a ThreadData, schedlab_rt::Thread),
}

/// The best taker of `sig` among `threads` (the locked list) and the
/// program's kernel threads.
fn choose(threads: &[usize], sig: c_int) -> Option<Taker<'_>> {
    let b = bit(sig);
    let mut best: Option<(u8, &ThreadData, schedlab_rt::Thread, bool)> = None;
    for &p in threads {
        // SAFETY: listed threads' data is alive while listed, and the list is
        // locked.
        let d = unsafe { &*(p as *const ThreadData) };
        if d.has_exited() {
            continue;
        }
        let Some(t) = d.rt_thread() else { continue };
        let waits = d.sigwait_set.load(Ordering::Acquire) & b != 0;
        if schedlab_rt::shared::signal_mask_of(&t) & b != 0 && !waits {
            continue;
        }
        let rank = if schedlab_rt::shared::blocked_kernel_thread_of(&t).is_some() {
            0
        } else if schedlab_rt::shared::kernel_thread_of(&t).is_some() {
            1
        } else {
            2
        };
        if best.as_ref().is_none_or(|(r, ..)| rank < *r) {
            best = Some((rank, d, t, waits));
            if rank == 0 {
                break;
            }
        }
    }
    if let Some((rank, d, t, waits)) = best.take() {
        if rank < 2 {
            if let Some(tid) = schedlab_rt::shared::kernel_thread_of(&t) {
                return Some(Taker::OnKernelThread(d, tid, waits));
            }
        }
        best = Some((2, d, t, waits));
    }
    if let Some(tid) = KernelWaiter::waiting_for(b) {
        return Some(Taker::KernelWaiter(tid));
    }
    if let Some(pid) = initial_thread_accepts(sig) {
        return Some(Taker::Initial(pid));
    }
    best.map(|(_, d, t, _)| Taker::Parked(d, t))
}

/// Gives `sig` to `taker`; `false` if its kernel thread is gone.
fn give(taker: Taker<'_>, sig: c_int, info: &libc::siginfo_t) -> bool {
    match taker {
        Taker::OnKernelThread(d, tid, waits) => {
            event(Event::GiveRunning, u64::from(d.id) << 32 | (tid as u64) << 8 | sig as u64);
            if !send_to_kernel_thread(tid, sig, info, d.id) {
                return false;
            }
            if !waits {
                crate::signal::count_delivery(d, sig);
            }
            true
        }
        Taker::KernelWaiter(tid) | Taker::Initial(tid) => send_to_kernel_thread(tid, sig, info, 0),
        Taker::Parked(d, t) => {
            event(Event::GiveParked, u64::from(d.id) << 32 | sig as u64);
            // Without room for its record it goes with a bare `siginfo`.
            save(For::User(d.id), sig, info);
            d.pending_signals.fetch_or(bit(sig), Ordering::AcqRel);
            schedlab_rt::shared::interrupt(&t);
            t.unpark();
            true
        }
    }
}

/// Places `sig` (module docs): on the best thread that accepts it, or keeps
/// it for the process.
///
/// # The forwarder's last look
///
/// A thread may open the signal (unblock it, or start waiting for it in
/// `sigwait`) just after the forwarder looked at it. So the forwarder keeps
/// the signal for the process first, then (after a full fence) looks again,
/// and takes it back for a thread that now accepts it; the thread, after
/// its own store and a full fence, looks at the signals kept for the
/// process (`signal::take_process_pending`, `KernelWaiter::announce`). One
/// of the two sees the other's store (Dekker's argument); if both do, the
/// kept signal's bit goes to the first to clear it.
fn forward(sig: c_int, info: &libc::siginfo_t) {
    let list = THREADS.lock();
    // A second look if the first taker's kernel thread was gone.
    for _ in 0..2 {
        if choose(&list, sig).is_some_and(|t| give(t, sig, info)) {
            return;
        }
    }
    keep_for_process(sig, info);
    std::sync::atomic::fence(Ordering::SeqCst);
    if let Some(t) = choose(&list, sig) {
        if let Some((s, i)) = take_process(bit(sig)) {
            if !give(t, s, &i) {
                keep_for_process(s, &i);
            }
        }
    }
}

/// A kernel thread of the program waiting in the `sigwait` family, announced
/// for the forwarder while it waits (module docs, "The forwarder's last
/// look").
pub(crate) struct KernelWaiter {
    tid: i32,
}

static KERNEL_WAITERS: SpinLock<Vec<(i32, u64)>> = SpinLock::new(Vec::new());

impl KernelWaiter {
    /// Announces the calling kernel thread as waiting for `set` until the
    /// value is dropped; nothing before the runtime (and the forwarder)
    /// started.
    pub(crate) fn announce(set: u64) -> Option<KernelWaiter> {
        crate::runtime::started()?;
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        KERNEL_WAITERS.lock().push((tid, set));
        std::sync::atomic::fence(Ordering::SeqCst);
        Some(KernelWaiter { tid })
    }

    fn waiting_for(b: u64) -> Option<i32> {
        KERNEL_WAITERS.lock().iter().find(|(_, set)| set & b != 0).map(|&(tid, _)| tid)
    }
}

impl Drop for KernelWaiter {
    fn drop(&mut self) {
        let mut l = KERNEL_WAITERS.lock();
        if let Some(i) = l.iter().position(|&(t, _)| t == self.tid) {
            l.swap_remove(i);
        }
    }
}

/// The runtime's quiet hook (`schedlab_rt::shared::set_quiet_hook`), on a
/// runtime kernel thread that has just blocked the program's signals for
/// want of a user thread: a signal the forwarder sent here by `tgkill` for a
/// running user thread that moved away just before it came, and that the
/// next thread here blocked, would stay pending on this kernel thread for
/// good. Each such signal (it has a saved `siginfo` for this kernel thread)
/// is taken from the kernel and passed on again. One load when none waits.
pub(crate) fn take_stranded() {
    if READY_COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    let mut set = 0u64;
    for s in TABLE.iter() {
        if s.state.load(Ordering::Acquire) == READY {
            let k = s.key.load(Ordering::Relaxed);
            if k & !0xff == For::KernelThread(tid).key(0) {
                set |= bit((k & 0xff) as c_int);
            }
        }
    }
    if set == 0 {
        return;
    }
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    loop {
        let mut info = bare_info(0);
        // SAFETY: our own set (the kernel's 8 bytes), siginfo and timeout.
        let sig = unsafe {
            libc::syscall(
                libc::SYS_rt_sigtimedwait,
                &set as *const u64,
                &mut info as *mut libc::siginfo_t,
                &zero as *const libc::timespec,
                8,
            )
        } as c_int;
        if sig <= 0 {
            return;
        }
        // In transit from its record's take to its save for the forwarder.
        let (info, _mark) = match original_info(sig, &info) {
            Some((i, mark)) => (i, Some(mark)),
            None => (info, None),
        };
        if !pass_on(sig, &info) {
            // No room: back to this kernel thread, where the next thread
            // that accepts it takes it.
            raise_with(sig, &info);
            return;
        }
    }
}

/// `tgkill` of kernel thread `tid` with `info` saved for it, aimed at user
/// thread `target` (its id; 0 for a kernel thread of the program's);
/// `false` (and nothing saved) if it failed.
fn send_to_kernel_thread(tid: i32, sig: c_int, info: &libc::siginfo_t, target: u32) -> bool {
    let saved = save_aimed(For::KernelThread(tid), sig, info, target);
    // SAFETY: tgkill to a kernel thread of our own process.
    if unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, sig) } == 0 {
        return true;
    }
    if saved {
        take(For::KernelThread(tid), sig);
    }
    false
}

/// `kill`. A signal the process sends itself, with a program handler, that
/// the calling thread blocks (or that it accepts while another thread
/// accepts it too), is placed here at once, as the kernel chooses its thread
/// when the signal is sent: on a thread that accepts it now (module docs).
/// Left to the kernel, it was taken by whichever kernel thread accepted it
/// (an idle processor's, or the forwarder), and placed a moment later, when
/// the one thread that had accepted it might have ended (`exit_race.c`: the
/// handler never ran). Everything else goes to the kernel as it is.
///
/// # Safety
/// As `kill(2)`.
#[no_mangle]
pub unsafe extern "C" fn kill(pid: libc::pid_t, sig: c_int) -> c_int {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    if pid == me
        && (1..=64).contains(&sig)
        && sig != libc::SIGURG
        && STARTED.load(Ordering::Acquire)
        && HANDLED.load(Ordering::Acquire) & bit(sig) != 0
        && !caller_takes(sig)
    {
        let mut info = bare_info(sig);
        set_own_sender(&mut info);
        PLACING.fetch_add(1, Ordering::SeqCst);
        event(Event::Kill, sig as u64);
        forward(sig, &info);
        PLACING.fetch_sub(1, Ordering::SeqCst);
        return 0;
    }
    // SAFETY: the caller's arguments, to the kernel.
    unsafe { libc::syscall(libc::SYS_kill, pid, sig) as c_int }
}

/// Whether the kernel would deliver `sig`, sent by the calling thread to its
/// own process, to the calling thread itself: POSIX has `kill` deliver it
/// there before it returns when the caller does not block it and no other
/// thread accepts it. The caller not blocking it is enough here: the kernel
/// then chooses the caller's kernel thread first.
fn caller_takes(sig: c_int) -> bool {
    let mask = if crate::thread::on_user_thread() {
        schedlab_rt::shared::signal_mask()
    } else {
        schedlab_rt::shared::sigprocmask(libc::SIG_BLOCK, None)
    };
    mask & bit(sig) == 0
}

/// Writes `kill`'s sender fields (`si_pid`, `si_uid`) into `info`, for a
/// signal this process sends: its own process id and user id.
pub(crate) fn set_own_sender(info: &mut libc::siginfo_t) {
    // SAFETY: getpid and getuid have no preconditions.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    // x86-64 Linux: the union after `si_signo`, `si_errno`, `si_code` and
    // padding starts at byte 16; `kill`'s fields are its first two.
    let p = (info as *mut libc::siginfo_t).cast::<u8>();
    // SAFETY: both within the 128-byte siginfo, 4-byte aligned.
    unsafe {
        p.add(16).cast::<libc::pid_t>().write(pid);
        p.add(20).cast::<libc::uid_t>().write(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Ids no thread of the test program has: a user thread's, and a kernel
    /// thread's.
    const ME: u32 = 0xfff0_0001;
    const OTHER: u32 = 0xfff0_0002;
    const KERNEL_THREAD: i32 = 0x3fff_fff0;

    /// A thread that ends waits for a signal sent to a kernel thread for it
    /// until the signal is taken there, however long its way takes (here
    /// 100 ms: two test programs on two CPUs left a kernel thread of the way
    /// unrun for longer than the 5 ms the wait once had, and `exit_storm.c`'s
    /// sender waited for that signal's handler for good).
    #[test]
    fn a_thread_that_ends_waits_for_a_signal_aimed_at_it_until_it_is_taken() {
        let sig = libc::SIGUSR1;
        HANDLED.fetch_or(bit(sig), Ordering::AcqRel);
        let kt = For::KernelThread(KERNEL_THREAD);
        assert!(save_aimed(kt, sig, &bare_info(sig), ME));
        let taken = Arc::new(AtomicBool::new(false));
        let taker = {
            let taken = taken.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(100));
                taken.store(true, Ordering::Release);
                take(kt, sig).is_some()
            })
        };
        settle_before_exit(ME, bit(sig));
        assert!(taken.load(Ordering::Acquire), "the wait ended before the signal was taken");
        assert!(taker.join().unwrap(), "the record was gone before its taker came");
    }

    /// A signal sent to a kernel thread for another user thread is that
    /// thread's: it holds up no other thread's end, while one waiting for
    /// the forwarder, which may choose any thread, holds up every thread
    /// that accepts it.
    #[test]
    fn only_the_signals_that_may_come_to_a_thread_hold_up_its_end() {
        let sig = libc::SIGUSR2;
        let kt = For::KernelThread(KERNEL_THREAD + 1);
        assert!(save_aimed(kt, sig, &bare_info(sig), OTHER));
        assert_eq!(on_its_way(ME, bit(sig)), None);
        assert_eq!(on_its_way(OTHER, bit(sig)), Some(Some(KERNEL_THREAD + 1)));
        assert_eq!(on_its_way(OTHER, bit(libc::SIGUSR1)), None, "a signal it blocks");
        assert!(take(kt, sig).is_some());
        assert_eq!(on_its_way(OTHER, bit(sig)), None);
        // Saved for the forwarder (not woken here: no forwarder runs).
        assert!(save(For::Forwarder, sig, &bare_info(sig)));
        assert_eq!(on_its_way(ME, bit(sig)), Some(None));
        assert!(take(For::Forwarder, sig).is_some());
        assert_eq!(on_its_way(ME, bit(sig)), None);
    }
}
