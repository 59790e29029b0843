//! What a shared library built on the runtime needs (the `shared-library`
//! feature; `libschedlab_pthread.so` is the one user): kernel threads the
//! program made itself entering the runtime, and a thread pointer per user
//! thread.
//!
//! In that build the runtime's per-kernel-thread block is reached through
//! the `gs` segment base (`arch/x86_64.rs`), which a kernel thread gets the
//! first time it enters the runtime: the runtime's own kernel threads at
//! their start, any other thread when the library calls [`attach`] on its
//! behalf, before the first call that may reach the runtime. And each user
//! thread may carry its own thread pointer (`Builder::thread_pointer`),
//! switched with its stack, so that C's `errno` and `__thread` variables
//! belong to the user thread, as on kernel threads.
//!
//! # Signals
//!
//! A kernel thread's signal mask is the kernel's; a user thread's must
//! follow it from one kernel thread to another. Each user thread has a mask
//! (`Builder::signal_mask`, [`set_signal_mask`]), and the runtime applies it
//! to the kernel thread that resumes the thread (`after_switch`), with one
//! `rt_sigprocmask` only when it differs from what that kernel thread has —
//! so a kernel thread runs with the mask of the user thread it runs, and a
//! process-directed signal lands, as the kernel decides, on a kernel thread
//! whose current user thread does not block it. The preemption signal is
//! never blocked (a thread that blocks every signal stays preemptible).
//! A runtime kernel thread that runs no user thread blocks the program's
//! signals ([`quiet_signals`]) at its start, before an idle processor
//! sleeps and before a spare waits; it kept the mask of the last user
//! thread it ran, and took process-directed signals meant for the
//! program's threads (whose blocked calls then went on). Not on every idle
//! transition: a processor spinning for work still has the last mask (a
//! system call each way per transition would tax a cross-processor
//! ping-pong), and the library passes a signal that lands there on to a
//! user thread ([`on_idle_runtime_thread`]; `libschedlab_pthread`'s
//! `procsig.rs`, which also reaches user threads that are on no kernel
//! thread).
//!
//! A signal *for one user thread* (`pthread_kill`) cannot be sent to a
//! kernel thread: the user thread may be queued, parked or about to move.
//! The library keeps it pending and asks the runtime to run its resume hook
//! ([`set_resume_hook`]) in that thread's context: [`interrupt`] marks the
//! thread and, if it is running, asks its kernel thread for a preemption,
//! whose safe point runs the hook even when nothing else is runnable; a
//! queued or parked thread runs it when it is next resumed. The hook then
//! raises the signal on the thread's current kernel thread, where the
//! thread's own mask decides, as the kernel would. A preemption that finds
//! the thread outside a safe point (in the C library or in the library's own
//! code) is dropped, and the thread may have been resumed just before it was
//! marked: so the monitor keeps every marked thread on a list
//! ([`Interrupted`]) and asks again, every [`RETRY`] while the thread runs,
//! until its hook has run (seen without that: a thread locking and unlocking
//! mutexes, the only runnable one, kept a `pthread_kill`'s signal pending for
//! good while its sender waited for the handler's answer).
//!
//! # The program's `SIGURG`
//!
//! The runtime's signal is `SIGURG`, which programs use too (a socket's
//! out-of-band data, Go's runtime, a Rust program with its own copy of this
//! runtime). The library keeps the runtime's handler in the kernel and the
//! program's disposition itself; the runtime tells its own signals by their
//! cookie (`preempt.rs`, "The signal") and, after acting on its request
//! word, passes every other one to the library
//! ([`set_foreign_signal_hook`]): `accept` decides with the signal's
//! `siginfo` whether the program's handler runs (not if the program ignores
//! it, nor when the user thread blocks it, which the library then keeps) and
//! with what mask; the handler then runs as if the kernel had delivered the
//! signal to it, with its own frame on the interrupted stack rather than on
//! the kernel thread's alternate stack, which every user thread there shares
//! (`sigframe.rs`). The runtime's interruption count ([`interruptions`])
//! counts every `SIGURG`; the library counts those whose handler it runs,
//! so a call one of those ended returns `EINTR` and one a dropped signal
//! ended is made again. [`handler_mask`] never changes whether the thread's mask
//! blocks `SIGURG` (the kernel never blocks it, so its masks never tell).
//!
//! In this build the library defines libc's thread functions for the whole
//! process, the runtime's own calls included: the runtime uses system calls
//! where it would otherwise call one of them on a user thread's behalf
//! (`rt_sigprocmask` here).

/// The runtime's spin lock, for the library's own short critical sections
/// (its kept thread control blocks, a thread's join handle): a waiter spins,
/// then gives way to the runtime on a user thread (the holder may be a user
/// thread preempted on the same processor) or to the kernel elsewhere.
pub use crate::spin::{SpinGuard, SpinLock};

/// Whether this machine can run the `shared-library` build at all: the
/// kernel enabled the `rdfsbase`/`wrfsbase` family (FSGSBASE: a CPU that has
/// it and Linux 5.9 or later). Without it every switch would need a system
/// call to change the thread pointer; the library refuses to start instead.
pub fn fsgsbase_usable() -> bool {
    crate::arch::fsgsbase_usable()
}

/// Yields the calling user thread, as [`yield_now`](crate::yield_now())
/// does, unless the call comes from inside the runtime: then (or on a kernel
/// thread with no user thread) does nothing and returns `false`, and the
/// caller makes the kernel's yield instead. For the library's `sched_yield`,
/// which the runtime's own code reaches too: its dependencies spin with
/// `std::thread::yield_now` (crossbeam's `Backoff::snooze`, while the
/// injection queue's pusher finishes a push), and in this build that is the
/// library's. A yield there, in the middle of a scheduling decision, switched
/// the thread away with the decision half made; the thread then finished it
/// on another kernel thread, on the processor it had left, which two kernel
/// threads then ran at once (issue 21).
pub fn yield_if_free() -> bool {
    crate::processor::yield_if_free()
}

/// Whether the calling user thread is inside the runtime's own code (a
/// runtime section is open on its kernel thread: a scheduling decision, a
/// wait queue's lock, the poller's bookkeeping). The library's functions
/// that the runtime and its dependencies reach (`write` from a message,
/// `sched_yield` from a spin, `nanosleep`...) take their kernel-thread path
/// then: their user-thread path parks, yields or acts on a cancellation,
/// which in the middle of a decision broke the processor it was made on
/// (the `sched_yield` case, [`yield_if_free`]). Must be called on a
/// runtime kernel thread (one that runs user threads).
#[inline]
pub fn in_runtime() -> bool {
    // Without the deferral flag, which a section lowered quietly leaves set
    // with no section open.
    crate::machine::Machine::here().guard_word() & !crate::arch::DEFERRED != 0
}

/// A runtime section opened by the library around a short critical section of its own in
/// which it calls into the runtime ([`section`]).
pub struct Section {
    _here: crate::processor::Here<'static>,
    /// Closed on the kernel thread that opened it.
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Opens a runtime section on the calling user thread until the returned value is dropped,
/// for a critical section of the library's that calls into the runtime under a lock of its
/// own (`libschedlab_pthread`'s priority-inheritance record moving another thread with
/// [`Thread::set_realtime`](crate::Thread::set_realtime)): a switch the runtime defers to
/// the end of its own section (a thread made runnable above the caller takes the caller's
/// processor then) waits for this one's end, so the caller is not switched out holding
/// that lock, which threads of a higher priority would then spin on, yielding only to
/// each other. Nothing that parks or yields may run inside; the library's functions take
/// their kernel-thread paths there ([`in_runtime`]). On a kernel thread with no user
/// thread it opens nothing; the kernel thread must be attached ([`attach`]).
#[inline]
pub fn section() -> Section {
    Section { _here: crate::processor::here(), _not_send: std::marker::PhantomData }
}

/// Gives the calling kernel thread its runtime block, if it has none of its
/// own yet (a thread started by one with a block inherits that block's
/// address, which is not its own: `arch/x86_64.rs`, `thread_block_attach`).
/// Cheap when it has (two register reads and a load). Must be called on every
/// thread the runtime did not start, on its own context (not a user
/// thread's), before anything that may reach the runtime (spawning, parking,
/// a runtime primitive); [`fsgsbase_usable`] must hold.
#[inline]
pub fn attach() {
    crate::arch::thread_block_attach();
}

/// The calling context's thread pointer (`fs` base): on a user thread with a
/// thread pointer of its own, that one; otherwise the kernel thread's.
#[inline]
pub fn thread_pointer() -> usize {
    crate::arch::thread_pointer()
}

/// The calling kernel thread, as an identity (the address of its runtime
/// block; 0 on a thread the runtime never saw): one register read, for the
/// library to tell whether a user thread moved to another kernel thread
/// between two points of its own code (a program's signal handler that
/// waited). [`fsgsbase_usable`] must hold.
#[inline]
pub fn kernel_thread() -> usize {
    crate::arch::thread_block() as usize
}

/// In a child just after `fork`: the calling kernel thread, the child's only
/// one, gets a fresh runtime block. Its old one describes a processor of the
/// parent's runtime, none of whose other kernel threads exist here; nothing
/// of that runtime may be used in the child.
pub fn detach_after_fork() {
    crate::arch::thread_block_detach();
    crate::arch::thread_block_attach();
    crate::poll::after_fork_child();
    crate::preempt::after_fork();
}

/// The library's hook, run in a user thread's own context when
/// [`interrupt`] asked for it (see "Signals").
static HOOK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the hook [`interrupt`] makes a thread run (once, before any thread
/// is interrupted).
pub fn set_resume_hook(hook: fn()) {
    HOOK.store(hook as usize, std::sync::atomic::Ordering::Release);
}

/// The library's hook run by a preempted user thread at the safe point
/// itself, after the switch and back (`preempt.rs`), and nowhere else.
static PREEMPT_HOOK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the hook a preempted user thread runs at its safe point (once,
/// before any thread runs): in the program's own code, at an instruction
/// the runtime interrupted, with no runtime section open — where the
/// library may end the thread (asynchronous cancellation) by a `longjmp`
/// or an unwind, which the trampoline's unwind table lets pass through it
/// into the interrupted frame (`arch/x86_64.rs`). A request for a thread
/// to get there soon is [`interrupt`].
#[doc(hidden)]
pub fn set_preempt_hook(hook: fn()) {
    PREEMPT_HOOK.store(hook as usize, std::sync::atomic::Ordering::Release);
}

/// Runs the preemption hook, if one is set (`schedlab_rt_preempted`).
pub(crate) fn run_preempt_hook() {
    let h = PREEMPT_HOOK.load(std::sync::atomic::Ordering::Acquire);
    if h != 0 {
        // SAFETY: set from a `fn()` by `set_preempt_hook`.
        let h: fn() = unsafe { std::mem::transmute(h) };
        h();
    }
}

/// `rt_sigprocmask` on the calling kernel thread, with the kernel's 8-byte
/// set; returns the kernel thread's mask before the call (`set` `None`: a
/// query). A system call, not libc's `pthread_sigmask`: in this build the
/// library defines that one, for user threads, and would be called back.
pub fn sigprocmask(how: libc::c_int, set: Option<u64>) -> u64 {
    let mut old = 0u64;
    let set_ptr = set.as_ref().map_or(std::ptr::null(), |s| s as *const u64);
    // SAFETY: the kernel reads 8 bytes at `set_ptr` (or nothing) and writes
    // 8 at `old`, both ours.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, set_ptr, &mut old as *mut u64, 8) };
    old
}

/// The preemption signal's bit, which is never blocked.
fn preempt_bit() -> u64 {
    1u64 << (crate::preempt::SIGNAL - 1)
}

/// Applies `mask` to the calling kernel thread and records it where the
/// preemption handler compares (`Machine::sigmask`, safe point 4).
fn apply(m: &crate::machine::Machine, mask: u64) {
    let mask = mask & !preempt_bit();
    if m.sigmask.load(std::sync::atomic::Ordering::Relaxed) == mask {
        return;
    }
    sigprocmask(libc::SIG_SETMASK, Some(mask));
    m.sigmask.store(mask, std::sync::atomic::Ordering::Relaxed);
}

/// The signal mask of a runtime kernel thread that runs no user thread:
/// every signal blocked but the runtime's own, the synchronous faults (a
/// fault with its signal blocked kills the process) and glibc's two internal
/// ones (`SIGCANCEL`, and `SIGSETXID`, which `setuid` sends every thread
/// glibc knows and waits for; glibc's own `sigprocmask` never blocks them).
pub fn quiet_mask() -> u64 {
    let open = [
        crate::preempt::SIGNAL,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
        libc::SIGTRAP,
        libc::SIGSYS,
        libc::SIGKILL,
        libc::SIGSTOP,
        32,
        33,
    ];
    !open.iter().fold(0u64, |m, &s| m | 1u64 << (s - 1))
}

/// Blocks the program's signals on the calling kernel thread, which runs no
/// user thread now ([`quiet_mask`]), and records it (`Machine::sigmask`), so
/// that the next user thread resumed here has its own mask applied. At a
/// runtime kernel thread's start, before a processor's kernel thread sleeps
/// for want of work ([`before_idle_sleep`]) and before a spare waits for a
/// processor: such a kernel thread keeping the mask of the last user thread
/// it ran took process-directed signals meant for the program's threads
/// (module docs, "Signals").
pub(crate) fn quiet_signals() {
    let m = crate::machine::Machine::here();
    let q = quiet_mask();
    sigprocmask(libc::SIG_SETMASK, Some(q));
    m.sigmask.store(q, std::sync::atomic::Ordering::Relaxed);
    run_quiet_hook();
}

/// Runs the library's quiet hook, if set.
fn run_quiet_hook() {
    let h = QUIET_HOOK.load(std::sync::atomic::Ordering::Acquire);
    if h != 0 {
        // SAFETY: set from a `fn()` by `set_quiet_hook`.
        let h: fn() = unsafe { std::mem::transmute(h) };
        h();
    }
}

/// The library's hook run by [`quiet_signals`].
static QUIET_HOOK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the hook a runtime kernel thread runs each time it blocks the
/// program's signals for want of a user thread (at its start, before an idle
/// processor sleeps, before a spare waits), in its own context: where the
/// library takes the signals sent to that kernel thread for a user thread
/// that has left it, which its mask now blocks, and passes them on (a
/// `tgkill` that came just after the thread moved away stayed pending there
/// for good: the Open POSIX suite's `pthread_cond_signal/4-2` hung).
pub fn set_quiet_hook(hook: fn()) {
    QUIET_HOOK.store(hook as usize, std::sync::atomic::Ordering::Release);
}

/// Before a processor's kernel thread sleeps for want of work (`search`):
/// [`quiet_signals`], with one system call on a path that is about to sleep
/// anyway; the user thread it resumes next has its own mask applied then
/// (one system call more per wake-up from a sleep). The kernel's mask can
/// also drift from the recorded one (a program's handler that ran on this
/// kernel thread and ended elsewhere leaves its signal blocked here): seen as
/// `SIGUSR1` and `SIGUSR2` pending and blocked on an idle processor while the
/// thread that sent them waited for their handler's `sem_post` (the Open
/// POSIX suite's `pthread_mutex_lock/3-1` hung); setting the mask here makes
/// the record true again.
pub(crate) fn before_idle_sleep() {
    quiet_signals();
}

/// Whether the calling context is a kernel thread the runtime started
/// (a processor's, a spare's, the monitor's) running no user thread: its
/// scheduler's own context. A program's signal handler that runs there (a
/// process-directed signal that came while an idle processor spun with the
/// mask of the last user thread it ran) runs on no thread of the program;
/// the library passes the signal on to one that accepts it. `false` on the
/// program's own kernel threads and on a user thread. Async-signal-safe:
/// three register or memory reads. [`fsgsbase_usable`] must hold.
pub fn on_idle_runtime_thread() -> bool {
    let b = crate::arch::thread_block();
    if b.is_null() {
        return false;
    }
    // SAFETY: a block some thread attached; blocks are never freed. One that
    // `clone` copied from the creator is told apart by its owner's thread
    // pointer (`arch::thread_block_attach`).
    let m = unsafe { &*b.cast_const().cast::<crate::machine::Machine>() };
    m.owned.load(std::sync::atomic::Ordering::Relaxed)
        && m.native_tp.load(std::sync::atomic::Ordering::Relaxed) == crate::arch::thread_pointer()
}

/// Whether the calling kernel thread's signal mask differs from the one
/// recorded for it (`Machine::sigmask`): the running user thread is inside a
/// program's signal handler, for which the kernel blocks the handled signal.
/// A switch there would finish the handler, and restore its mask, on another
/// kernel thread, leaving the signal blocked on this one (seen: `SIGUSR1`
/// and `SIGUSR2` blocked and pending on a processor whose worker never took
/// them, while their senders waited for the handlers' `sem_post`). The
/// preemption handler checks this on the interrupted context's mask (safe
/// point 4); a request deferred to the end of a runtime section, which a
/// handler that calls the library opens, checks it here, with one system
/// call per preemption.
pub(crate) fn in_signal_handler() -> bool {
    let m = crate::machine::Machine::here();
    sigprocmask(libc::SIG_SETMASK, None) & !preempt_bit()
        != m.sigmask.load(std::sync::atomic::Ordering::Relaxed)
}

/// In `after_switch`, inside the resuming section: records the machine and
/// applies the thread's mask. Returns whether the hook is asked for.
#[inline]
pub(crate) fn resumed(vp: &crate::processor::Processor) -> bool {
    use std::sync::atomic::Ordering;
    let Some(t) = vp.current_task() else { return false };
    let m = vp.machine();
    t.machine.store((m as *const crate::machine::Machine).cast_mut(), Ordering::Relaxed);
    let mask = t.sigmask.load(Ordering::Relaxed) & !preempt_bit();
    if mask != m.sigmask.load(Ordering::Relaxed) {
        apply(m, mask);
    }
    if SENT_TO_KERNEL_THREADS.load(Ordering::Relaxed) != 0 {
        run_quiet_hook();
    }
    t.notify.load(Ordering::Relaxed)
}

/// How many signals the library has sent to a kernel thread for a user
/// thread running there that have not been taken yet (kept by the library,
/// `crates/pthread/src/procsig.rs`). While there are any, each kernel thread
/// runs the quiet hook ([`set_quiet_hook`]) at every resumption of a user
/// thread too, not only when it goes quiet: such a signal that came just
/// after its thread left, while the next one here blocked it, stayed pending
/// on this kernel thread as long as it ran threads that block it (130 ms in
/// `exit_storm.c`, past the 5 ms its thread, ending, waited for it, and the
/// signal then found no taker). One load per switch while there are none.
pub static SENT_TO_KERNEL_THREADS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Runs the hook if the calling user thread was asked to.
pub(crate) fn run_hook_if_asked() {
    let Some(t) = crate::processor::current_task_ref() else { return };
    if t.notify.load(std::sync::atomic::Ordering::Relaxed) {
        drop(t);
        run_hook();
    }
}

/// In a program's signal handler (the library's wrapper) on user thread
/// `thread`, the caller: whether the handler interrupted a runtime section on
/// this kernel thread — then the section's end hands the signal over
/// ([`hand_over_deferred_signals`]) and the caller must not run the program's
/// handler now. The runtime is not re-entrant: a handler that calls it (a
/// `sem_post` that wakes a thread pushes on this processor's run queue)
/// in the middle of its own push lost a thread (the Open POSIX suite's signal
/// storms hung now and then, a woken thread in no queue). The caller keeps
/// the signal pending for `thread` first. `false` outside a section, or if
/// this kernel thread already holds four such threads (then the caller runs
/// the handler where it is, as the kernel would). Async-signal-safe: atomics
/// only.
pub fn defer_signal_to_section_end(thread: &crate::hooks::Thread) -> bool {
    use std::sync::atomic::Ordering;
    let m = crate::machine::Machine::here();
    if m.guard_word() & !crate::arch::DEFERRED == 0 {
        return false;
    }
    let me = thread.task().as_ptr().as_ptr();
    if m.deferred_signals.iter().any(|s| s.load(Ordering::Relaxed) == me) {
        m.defer_flag();
        return true;
    }
    // A counted reference for the slot: the caller's own handle holds one,
    // so this one never drops the last.
    let raw = thread.task().clone().into_raw().as_ptr();
    for s in &m.deferred_signals {
        if s.compare_exchange(std::ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            m.defer_flag();
            return true;
        }
    }
    // SAFETY: the reference taken above, not stored.
    drop(unsafe { crate::task::TaskRef::from_raw(std::ptr::NonNull::new_unchecked(raw)) });
    false
}

/// At the end of a runtime section on `m`'s kernel thread (the caller's),
/// outside it: each user thread whose program signal handler came inside the
/// section ([`defer_signal_to_section_end`]) takes its pending signals now —
/// the calling thread itself through the hook, another one (it switched
/// away inside the section) as for a signal sent to it ([`interrupt`], and
/// unparked: a wait it began there ends for the handler, as it would have).
pub(crate) fn hand_over_deferred_signals(m: &crate::machine::Machine) {
    use std::sync::atomic::Ordering;
    for s in &m.deferred_signals {
        if s.load(Ordering::Relaxed).is_null() {
            continue;
        }
        let Some(p) = std::ptr::NonNull::new(s.swap(std::ptr::null_mut(), Ordering::AcqRel)) else {
            continue;
        };
        // SAFETY: the slot's counted reference, taken over.
        let t = unsafe { crate::task::TaskRef::from_raw(p) };
        if crate::processor::current_task_ptr() == Some(p) {
            drop(t);
            run_hook();
        } else {
            let thread = crate::hooks::Thread::from_task(t);
            interrupt(&thread);
            thread.unpark();
        }
    }
}

/// Clears the calling thread's request and runs the hook (outside any section).
pub(crate) fn run_hook() {
    if let Some(t) = crate::processor::current_task_ref() {
        t.notify.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let h = HOOK.load(std::sync::atomic::Ordering::Acquire);
    if h != 0 {
        // SAFETY: set from a `fn()` by `set_resume_hook`.
        let h: fn() = unsafe { std::mem::transmute(h) };
        h();
    }
}

/// Sets the calling user thread's signal mask and applies it at once; on a
/// kernel thread, sets the kernel thread's (as `pthread_sigmask` does).
/// Returns the previous mask.
pub fn set_signal_mask(mask: u64) -> u64 {
    use std::sync::atomic::Ordering;
    let mask = mask & !((1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1)));
    match crate::processor::current_task_ref() {
        Some(t) => {
            let _section = crate::processor::here();
            let old = t.sigmask.swap(mask, Ordering::Relaxed);
            apply(crate::machine::Machine::here(), mask);
            old
        }
        None => sigprocmask(libc::SIG_SETMASK, Some(mask)),
    }
}

/// A program's signal handler starts, or ends, on the calling user thread:
/// the kernel runs it with `mask` blocked (the library computes it from the
/// interrupted context's mask, the handler's `sa_mask` and its signal), or
/// `sigreturn` is about to restore `mask`. Records it as the thread's mask
/// and this kernel thread's, with no system call, because the kernel
/// changed the mask behind the runtime's back: a handler that waited on a
/// library primitive switched to another user thread, which then ran with
/// the handler's mask on this kernel thread (the signal being handled
/// blocked: its own fault, a Java thread's implicit null check or stack
/// bang, killed the process), while the handler went on elsewhere with the
/// other kernel thread's. With the records true, a switch inside the
/// handler applies the next thread's mask here and the handler's wherever
/// it resumes. On a kernel thread with no user thread, or inside a runtime
/// section (the handler interrupted the runtime, which switches nothing
/// until the section ends), nothing is recorded.
pub fn handler_mask(mask: u64) {
    use std::sync::atomic::Ordering;
    let m = crate::machine::Machine::here();
    if m.guard_word() & !crate::arch::DEFERRED != 0 {
        return;
    }
    let Some(t) = crate::processor::current_task_ptr() else { return };
    let _section = crate::processor::here();
    let mask = mask & !preempt_bit();
    // SAFETY: the running thread (the caller) is alive while it runs.
    let t = unsafe { t.as_ref() };
    // The kernel never blocks the preemption signal, so a mask it gives a
    // handler never says whether the program blocks it; the thread's own
    // record of that, which only `set_signal_mask` changes, is kept (the
    // library holds a program's `SIGURG` back by it, "The program's
    // `SIGURG`").
    let own = t.sigmask.load(Ordering::Relaxed) & preempt_bit();
    t.sigmask.store(mask | own, Ordering::Relaxed);
    m.sigmask.store(mask, Ordering::Relaxed);
}

/// `thread`'s signal mask, as its own `set_signal_mask` last gave it (or
/// [`handler_mask`], while it runs a signal handler): a snapshot (the thread may change it at once). A library sending `thread`
/// a signal keeps one it blocks with the thread rather than raise it on the
/// kernel thread it is on, where the kernel would keep it when the thread
/// moves.
pub fn signal_mask_of(thread: &crate::hooks::Thread) -> u64 {
    thread.task().sigmask.load(std::sync::atomic::Ordering::Relaxed)
}

/// The calling thread's signal mask (a user thread's own, as given).
pub fn signal_mask() -> u64 {
    match crate::processor::current_task_ptr() {
        // SAFETY: the running thread (the caller) is alive while it runs; no
        // counted reference is taken (two atomic operations per
        // `pthread_create`, which asks for its caller's mask).
        Some(t) => unsafe { t.as_ref() }.sigmask.load(std::sync::atomic::Ordering::Relaxed),
        None => sigprocmask(libc::SIG_SETMASK, None),
    }
}

/// Asks `thread` to run the resume hook in its own context soon (see
/// "Signals"): at once if it is running and at a safe point, else when it
/// is next resumed. The caller unparks it too if it waits for a wake-up.
pub fn interrupt(thread: &crate::hooks::Thread) {
    use std::sync::atomic::Ordering;
    let t = thread.task();
    if !t.notify.swap(true, Ordering::AcqRel) && !t.state.is_complete() {
        // Newly marked: listed for the monitor, which asks again until the
        // hook has run (module docs, "Signals"). In a runtime section:
        // preempted holding the lock, this thread would leave it to the next
        // thread of its kernel thread and to the monitor (as `reclaim.rs`).
        let first = {
            let _section = crate::hooks::here();
            let mut list = t.shared.interrupted.lock().unwrap_or_else(|e| e.into_inner());
            list.push(t.clone());
            list.len() == 1
        };
        if first {
            // A quiet monitor may sleep with no deadline.
            t.shared.monitor.poke();
        }
    }
    let m = t.machine.load(Ordering::Acquire);
    if m.is_null() || t.state.is_complete() {
        return;
    }
    // SAFETY: machines' blocks live as long as the process in this build.
    ask_preemption(unsafe { &*m });
}

/// `realtime.rs`, rule 3: `t`'s policy or priority was changed by another thread while
/// `t` may be running: the kernel thread that last resumed it is asked for a preemption,
/// whose decision follows the new values, and the processor it runs publishes them at
/// once, so that the monitor (rule 2) asks again if that request finds no safe point. If
/// `t` no longer runs there, the thread that does is preempted for nothing (a `High`
/// one's request is dropped and its own values published again, `preempt.rs`,
/// `stale_for_high`; a `Normal` one makes one switch more).
pub(crate) fn preempt_running(t: &crate::task::Task) {
    use std::sync::atomic::Ordering;
    let m = t.machine.load(Ordering::Acquire);
    if m.is_null() || t.state.is_complete() || t.park.is_parked() {
        return;
    }
    // SAFETY: machines' blocks live as long as the process in this build.
    let m = unsafe { &*m };
    let p = m.processor();
    if !p.is_null() {
        // SAFETY: a processor of `t`'s runtime, which `t` keeps alive; the words it
        // publishes are atomics any thread may store.
        crate::realtime::republish(unsafe { &*p }, t);
    }
    ask_preemption(m);
    t.shared.monitor.poke();
}

/// Asks `m`'s kernel thread for a preemption, unless a request is pending
/// there (a signal in flight takes the new one too).
fn ask_preemption(m: &crate::machine::Machine) {
    crate::preempt::ask(m);
}

/// How soon the monitor asks a running thread again whose hook has not run
/// (its preemption found it outside a safe point).
pub(crate) const RETRY: std::time::Duration = std::time::Duration::from_micros(200);

/// How often the monitor looks at a marked thread that is not running (queued,
/// parked, or blocked in the kernel): its next resumption runs the hook; the
/// look closes the window where it was resumed as it was being marked.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_millis(10);

/// The monitor's list of threads whose hook was asked for and has not run
/// (module docs, "Signals").
#[derive(Default)]
pub(crate) struct Interrupted {
    /// Each marked thread, with when the monitor last asked it.
    list: Vec<(crate::task::TaskRef, Option<std::time::Instant>)>,
}

impl Interrupted {
    /// Takes the newly marked threads, drops those whose hook has run, and
    /// asks again each one that runs; returns when to look next.
    pub(crate) fn tick(
        &mut self,
        shared: &crate::state::Shared,
        now: std::time::Instant,
    ) -> Option<std::time::Instant> {
        use std::sync::atomic::Ordering;
        {
            let mut inbox = shared.interrupted.lock().unwrap_or_else(|e| e.into_inner());
            for t in inbox.drain(..) {
                if !self.list.iter().any(|(l, _)| std::ptr::eq(&**l, &*t)) {
                    self.list.push((t, None));
                }
            }
        }
        let mut next: Option<std::time::Instant> = None;
        self.list.retain_mut(|(t, asked)| {
            if !t.notify.load(Ordering::Acquire) || t.state.is_complete() {
                return false;
            }
            let me = (&**t) as *const crate::task::Task;
            let m = t.machine.load(Ordering::Acquire);
            // SAFETY: machines' blocks live as long as the process in this
            // build.
            let running = unsafe { m.as_ref() }.filter(|m| {
                let p = m.processor();
                !p.is_null()
                    // SAFETY: processors outlive the runtime's kernel threads;
                    // the read of another processor's current thread is a
                    // snapshot, only compared (as `kernel_thread_of`).
                    && unsafe { (*p).current_task_ptr() }
                        .is_some_and(|c| c.as_ptr().cast_const() == me)
            });
            let again = match running {
                Some(m) => {
                    if asked.is_none_or(|at| now - at >= RETRY) {
                        ask_preemption(m);
                        *asked = Some(now);
                    }
                    now + RETRY
                }
                None => now + LOOK_AGAIN,
            };
            next = Some(next.map_or(again, |n| n.min(again)));
            true
        });
        next
    }
}

/// In the preemption signal's handler: counts the interruption against the
/// user thread the kernel thread runs (on a processor or detached), whose
/// system call it may have cut short with `EINTR` (`poll`, `select`,
/// `epoll_wait` and `sem_wait` are never restarted, whatever `SA_RESTART`
/// says). Async-signal-safe: atomics only.
pub(crate) fn count_interruption(m: &crate::machine::Machine) {
    use std::sync::atomic::Ordering;
    let p = m.processor();
    let task = if p.is_null() {
        m.detached.load(Ordering::Relaxed).cast_const()
    } else {
        // SAFETY: this kernel thread's processor, read from its own handler
        // as `redirect` does.
        unsafe { (*p).current_task() }.map_or(std::ptr::null(), |t| t as *const crate::task::Task)
    };
    if !task.is_null() {
        // SAFETY: the task running here is alive while it runs.
        unsafe { &*task }.interruptions.fetch_add(1, Ordering::Relaxed);
    }
}

/// The library's two functions for a program's `SIGURG` (module docs, "The
/// program's `SIGURG`"): whether to run its handler, and the handler.
static FOREIGN_ACCEPT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static FOREIGN_HANDLER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets what the runtime does with a `SIGURG` it did not send (module docs,
/// "The program's `SIGURG`"): in the runtime's handler, `accept` is given
/// the signal's `siginfo` (which it may replace: the one the handler gets)
/// and answers the signals to block while the program's handler runs
/// (beside the interrupted mask), or `None` to drop it (the program ignores
/// it, or the library keeps it for later);
/// `handler` then runs as if the kernel had delivered the signal to it, with
/// its own frame on the interrupted stack. `accept` runs in a signal handler
/// with every signal but the faults blocked: async-signal-safe code only.
/// Set once, before the runtime starts.
pub fn set_foreign_signal_hook(
    accept: fn(&mut libc::siginfo_t) -> Option<u64>,
    handler: unsafe extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
) {
    use std::sync::atomic::Ordering;
    FOREIGN_HANDLER.store(handler as usize, Ordering::Release);
    FOREIGN_ACCEPT.store(accept as usize, Ordering::Release);
}

/// In the preemption signal's handler, after the runtime's own work: a
/// `SIGURG` that was not the runtime's (`m` is the kernel thread's machine,
/// `None` on a thread the runtime never saw) goes to the library's hook
/// ([`set_foreign_signal_hook`]), and its handler runs on the interrupted
/// stack (`sigframe.rs`), or here when the frame is already there.
///
/// # Safety
/// `info` and `ctx` are the running `SA_SIGINFO` handler's arguments.
pub(crate) unsafe fn pass_on(
    m: Option<&crate::machine::Machine>,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    use std::sync::atomic::Ordering;
    let a = FOREIGN_ACCEPT.load(Ordering::Acquire);
    if a == 0 || info.is_null() || ctx.is_null() {
        return;
    }
    // SAFETY: set from such a function by `set_foreign_signal_hook`.
    let accept: fn(&mut libc::siginfo_t) -> Option<u64> = unsafe { std::mem::transmute(a) };
    // SAFETY: the kernel's siginfo, in this handler's frame.
    let Some(extra) = accept(unsafe { &mut *info }) else { return };
    // SAFETY: as above; stored before `FOREIGN_ACCEPT`.
    let handler: crate::sigframe::Handler =
        unsafe { std::mem::transmute(FOREIGN_HANDLER.load(Ordering::Acquire)) };
    let uc = ctx.cast::<libc::ucontext_t>();
    // SAFETY: the kernel's frame; its mask's first word.
    let interrupted = unsafe {
        std::ptr::read_unaligned((&(*uc).uc_sigmask as *const libc::sigset_t).cast::<u64>())
    };
    let mask = interrupted | extra;
    let bounds = m.and_then(|m| {
        let p = m.processor();
        let t = if p.is_null() {
            m.detached.load(Ordering::Relaxed).cast_const()
        } else {
            // SAFETY: this kernel thread's processor, read from its own
            // handler as `redirect` does.
            unsafe { (*p).current_task() }
                .map_or(std::ptr::null(), |t| t as *const crate::task::Task)
        };
        // SAFETY: the task running here is alive while it runs.
        unsafe { t.as_ref() }.and_then(|t| t.stack_range())
    });
    // SAFETY: this handler's own frame, not touched after this.
    if unsafe { crate::sigframe::call_on_interrupted_stack(uc, info, handler, mask, bounds) } {
        return;
    }
    // The frame is where the kernel would have put the handler's (or the
    // stack has no room): called here, with its mask, and the preemption
    // signal blocked (this handler is not reentrant); the return restores
    // the interrupted mask.
    sigprocmask(libc::SIG_SETMASK, Some(mask | preempt_bit()));
    // SAFETY: the kernel's arguments, passed on.
    unsafe { handler(crate::preempt::SIGNAL, info, ctx) };
}

/// How many times the runtime's own signal has interrupted the calling user
/// thread (0 on a kernel thread). A library wrapping a system call that the
/// signal can end with `EINTR` compares this before and after, and calls
/// again when the interruption was the runtime's (as Go's runtime retries
/// its own `EINTR`s).
pub fn interruptions() -> u32 {
    crate::processor::current_task_ref()
        .map_or(0, |t| t.interruptions.load(std::sync::atomic::Ordering::Relaxed))
}

/// The kernel thread id of the kernel thread `thread` is on now — running
/// on its processor, or blocked in the kernel on it after a hand-off — or
/// `None` when it is queued, parked or done. A snapshot: the thread may move
/// at once, unless it is blocked in the kernel (a detached thread stays on
/// its kernel thread until its call returns).
pub fn kernel_thread_of(thread: &crate::hooks::Thread) -> Option<i32> {
    use std::sync::atomic::Ordering;
    let (m, me) = last_machine(thread)?;
    let on = if m.detached.load(Ordering::Acquire).cast_const() == me {
        true
    } else {
        let p = m.processor();
        // SAFETY: processors outlive the runtime's kernel threads; the read
        // of another processor's current thread is a racy snapshot, which
        // the caller accepts.
        !p.is_null()
            && unsafe { (*p).current_task_ptr() }.is_some_and(|c| c.as_ptr().cast_const() == me)
    };
    on.then(|| m.tid.load(Ordering::Relaxed))
}

/// The machine `thread` last ran on and its task, unless it never ran or
/// is done.
fn last_machine(
    thread: &crate::hooks::Thread,
) -> Option<(&'static crate::machine::Machine, *const crate::task::Task)> {
    use std::sync::atomic::Ordering;
    let t = thread.task();
    let m = t.machine.load(Ordering::Acquire);
    if m.is_null() || t.state.is_complete() {
        return None;
    }
    // SAFETY: machines' blocks live as long as the process in this build.
    Some((unsafe { &*m }, (&**t) as *const crate::task::Task))
}

/// The kernel thread id of the kernel thread `thread` is blocked in the
/// kernel on after a hand-off (detached from its processor), or `None`. It
/// stays there until its call returns.
pub fn blocked_kernel_thread_of(thread: &crate::hooks::Thread) -> Option<i32> {
    use std::sync::atomic::Ordering;
    let (m, me) = last_machine(thread)?;
    (m.detached.load(Ordering::Acquire).cast_const() == me).then(|| m.tid.load(Ordering::Relaxed))
}

/// Makes system call `nr` with `args` on the calling user thread unless
/// `*word & mask == want` — a library's "cancellation requested and
/// enabled" — and lets another thread stop it with [`cancel_blocked_call`]
/// until the kernel has finished it: the test is made again after any
/// preemption signal that lands before the call is in the kernel or while
/// the kernel would restart it (`arch/x86_64.rs`, "A cancellable system
/// call"; musl's design). `None` when the call was not made; otherwise the
/// kernel's result, a negative error number on failure. A call the kernel
/// ends with `EINTR` whatever `SA_RESTART` says (`poll`, `sigtimedwait`)
/// returns `-EINTR`: the caller tests `word` then.
///
/// # Safety
///
/// The system call's own contract (its pointers valid for it).
pub unsafe fn syscall_cancellable(
    word: &std::sync::atomic::AtomicU32,
    mask: u32,
    want: u32,
    nr: libc::c_long,
    args: [usize; 6],
) -> Option<isize> {
    let a = args.map(|a| a as u64);
    crate::arch::syscall_cancellable(
        word,
        mask,
        want,
        [nr as u64, a[0], a[1], a[2], a[3], a[4], a[5]],
    )
    .map(|r| r as isize)
}

/// The signal the runtime sends its kernel threads (preemption, hand-off,
/// [`interrupt`], [`cancel_blocked_call`]): a library's `sigwait` on a user
/// thread must not take it from the kernel.
pub fn runtime_signal() -> libc::c_int {
    crate::preempt::SIGNAL
}

/// After setting the word a [`syscall_cancellable`] of `thread` tests:
/// sends the preemption signal to the kernel thread `thread` is on (running,
/// or blocked in the kernel after a hand-off), whose handler moves a call
/// that has not finished back to its test. `false` when `thread` is on no
/// kernel thread at this moment (queued, parked, between two kernel
/// threads): then it is not inside such a call, or will test the word before
/// making it again after it moves; the caller may look again.
pub fn cancel_blocked_call(thread: &crate::hooks::Thread) -> bool {
    kernel_thread_of(thread).is_some_and(crate::preempt::signal_thread)
}

/// In the preemption signal's handler: moves an interrupted context whose
/// rip lies between a [`syscall_cancellable`]'s test and the end of its
/// `syscall` instruction back to the test. Async-signal-safe.
pub(crate) fn rewind_cancellable(uc: *mut libc::ucontext_t) {
    let (begin, end) = crate::arch::cancellable_window();
    // SAFETY: the kernel's signal frame for this thread.
    let rip = unsafe { &mut (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] };
    if (begin..end).contains(&(*rip as usize)) {
        *rip = begin as i64;
    }
}
