//! Kernel threads as the runtime sees them ("machines", Go's M), apart from
//! the virtual processors they run.
//!
//! A [`Machine`] is the per-kernel-thread half of the scheduler: its own
//! native stack (the *scheduler context*, where a processor's loop searches,
//! steals and sleeps), the processor it runs now (if any), and the
//! **runtime-section counter** that preemption and hand-off respect. A
//! processor ([`Processor`]) is the other half: run queue, stack pool, current
//! user thread. The two are separate because a processor outlives its kernel
//! thread's stint: when a user thread blocks in the kernel, its processor is
//! handed to another (spare) machine and the blocked machine keeps only that
//! user thread, *detached* (`blocking.rs`).
//!
//! Every kernel thread of the process has a `Machine` in a block of static
//! TLS (`arch::thread_block`), zero-initialised and without a destructor, so
//! reading it is one `fs`-relative access at a link-time offset and it is
//! valid from a signal handler. (In the `shared-library` build the block is
//! the kernel thread's `gs` base instead, given when it first enters the
//! runtime: `fs` belongs to the user thread there; see `shared.rs`.) Other threads
//! (the monitor) reach a machine through the pointer its processor publishes.
//!
//! # The runtime-section counter
//!
//! `guard` counts, on this kernel thread, the nesting of runtime sections:
//! code that holds a reference to the processor or is in the middle of the
//! switch protocol. While it is non-zero neither the preemption signal nor a
//! hand-off request may act (seed 003's critical sections; docs/SOURCES.md): a
//! request that arrives then sets [`DEFERRED`] and is taken by the code that
//! lowers the counter to zero (NetBSD's "critical-section recovery", done
//! here by deferral rather than by running the section to its end).
//!
//! Only this kernel thread writes the counter, and only its own signal
//! handler reads it, so relaxed loads and stores (plain `mov`s) and compiler
//! fences suffice: a locked instruction would cost ~6 ns on every switch.
//!
//! The counter is *raised before* the processor is read, so no instruction
//! holds a processor reference with the counter at zero. It is raised by one
//! `fs`-relative instruction (`Machine::enter_section`; the compiler cannot
//! reuse its address after a switch, which may move the user thread to
//! another kernel thread) and lowered through the processor's
//! `machine` pointer once the section ends, on whichever kernel thread that
//! is: a switch hands the raised counter to the context it resumes, which
//! lowers it (`after_switch`).

use crate::arch::StackPointer;
use crate::cputimer::CpuTimer;
use crate::processor::{Pending, Processor};
use crate::task::Task;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{
    compiler_fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering,
};

/// Starts one of the runtime's own kernel threads (a processor's, a spare, the
/// monitor). In the `shared-library` build it first gives the new thread its
/// block (`arch::thread_block_attach`), before anything can ask for it: its
/// own, not the one of the thread that started it, whose `gs` base `clone`
/// copied; and it blocks the program's signals there, which a kernel thread
/// running no user thread must not take (`shared.rs`, "Signals").
pub(crate) fn spawn_kernel_thread<F, T>(
    name: String,
    f: F,
) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new().name(name).spawn(move || {
        #[cfg(feature = "shared-library")]
        {
            crate::arch::thread_block_attach();
            Machine::here().owned.store(true, Ordering::Relaxed);
            crate::hooks::quiet_signals();
        }
        let out = f();
        Machine::here().delete_budget_timer();
        out
    })
}

/// The rest of [`Machine::lower`] when a request was deferred: taken if the
/// section that ended was the outermost one.
#[cold]
#[inline(never)]
fn lower_deferred() {
    let m = Machine::here();
    if m.guard_word() == DEFERRED {
        crate::hooks::take_deferred(m);
    }
}

pub(crate) use crate::arch::DEFERRED;

/// No request pending ([`Machine::request`]).
pub(crate) const REQ_NONE: u8 = 0;
/// The monitor asks the running user thread to give up its processor (its
/// quantum is over and work waits).
pub(crate) const REQ_PREEMPT: u8 = 1;
/// The monitor saw this kernel thread blocked in the kernel with a user
/// thread on its processor: release the processor (`blocking.rs`).
pub(crate) const REQ_RELEASE: u8 = 2;
/// The monitor saw this detached kernel thread running user code again:
/// take a processor back or queue the user thread (`blocking.rs`).
pub(crate) const REQ_REJOIN: u8 = 3;

/// A kernel thread's scheduling state (see the module docs). `repr(C)`: the
/// counter is the first field (`Machine::enter_section`).
#[repr(C)]
pub(crate) struct Machine {
    /// Runtime-section depth, plus [`DEFERRED`].
    guard: AtomicU32,
    /// The processor this kernel thread runs, or null. Written only by this
    /// kernel thread (or its signal handler).
    processor: AtomicPtr<Processor>,
    /// The native context of this kernel thread while a user thread runs on it.
    pub(crate) sched_ctx: UnsafeCell<StackPointer>,
    /// The user thread running here without a processor (detached by a
    /// hand-off), as an owned `TaskRef::into_raw`, or null.
    pub(crate) detached: AtomicPtr<Task>,
    /// The processor the detached thread last ran on (to take it back).
    pub(crate) last_processor: AtomicPtr<Processor>,
    /// Kernel thread id, for `tgkill` and `/proc`; 0 until it runs the runtime.
    pub(crate) tid: AtomicI32,
    /// The clock id of this thread's CPU clock (`pthread_getcpuclockid`).
    pub(crate) cpu_clock: AtomicI32,
    /// What the monitor asks of the signal handler (`REQ_*`).
    pub(crate) request: AtomicU8,
    /// A spare's futex word: a processor is waiting in `assigned` when 1.
    pub(crate) wake: AtomicU32,
    /// The processor the monitor hands this spare.
    pub(crate) assigned: AtomicPtr<Processor>,
    /// What the native context must do with a detached thread that switched
    /// to it (`blocking.rs`); written before that switch, taken after it.
    pub(crate) leave: UnsafeCell<MaybeUninit<Pending>>,
    /// The signal mask of this kernel thread outside signal handlers (the
    /// first word), to recognise an interrupted handler (`preempt.rs`).
    pub(crate) sigmask: AtomicU64,
    /// The detached thread is inside an explicit `blocking` call.
    pub(crate) explicit: AtomicBool,
    /// This machine is counted in its runtime's `Shared::detached`.
    pub(crate) counted: AtomicBool,
    /// The runtime of a detached thread that is exiting (`Arc::into_raw`),
    /// for its native context to uncount it once the exit is complete.
    pub(crate) exit_shared: AtomicPtr<crate::state::Shared>,
    /// The kernel thread's own thread pointer (`shared-library` build, where
    /// each user thread has its own): what an exiting user thread switches
    /// to before it completes, so its TLS block can be freed at once. 0 in
    /// the executable build.
    pub(crate) native_tp: std::sync::atomic::AtomicUsize,
    /// Started by the runtime (`spawn_kernel_thread`): a processor's, a
    /// spare's, the monitor's; not the program's initial thread, which
    /// attaches a block when it enters the runtime (`shared.rs`, "Signals").
    pub(crate) owned: AtomicBool,
    /// A preemption was deferred to the end of the current section
    /// ([`Machine::defer`]); [`DEFERRED`] alone may also stand for the
    /// user threads a program's signal handler left there
    /// (`deferred_signals`).
    preempt_deferred: AtomicBool,
    /// User threads (owned `TaskRef::into_raw`) whose program signal handler
    /// came inside a runtime section on this kernel thread and waits for its
    /// end (`shared::defer_signal_to_section_end`); null slots are free.
    #[cfg(feature = "shared-library")]
    pub(crate) deferred_signals: [AtomicPtr<Task>; 4],
    /// This kernel thread's CPU-budget timer (`cputimer.rs`, `budget.rs`): 0
    /// until a budgeted user thread first runs here, then
    /// `CpuTimer::to_word`, or [`NO_TIMER`] if it could not be made. Only
    /// this kernel thread touches it.
    budget_timer: AtomicU64,
}

/// [`Machine::budget_timer`] could not be made (`timer_create` failed).
const NO_TIMER: u64 = u64::MAX;

// SAFETY: the fields are atomics, or cells owned by this kernel thread by
// protocol (`sched_ctx`, `leave`: only its own contexts touch them); other
// threads only read the atomics.
unsafe impl Sync for Machine {}

impl Machine {
    /// The state of a kernel thread that has never run a processor: what the
    /// zero-filled TLS block holds (checked by a test).
    #[cfg(test)]
    const fn new() -> Machine {
        Machine {
            guard: AtomicU32::new(0),
            processor: AtomicPtr::new(std::ptr::null_mut()),
            sched_ctx: UnsafeCell::new(std::ptr::null_mut()),
            detached: AtomicPtr::new(std::ptr::null_mut()),
            last_processor: AtomicPtr::new(std::ptr::null_mut()),
            tid: AtomicI32::new(0),
            cpu_clock: AtomicI32::new(0),
            request: AtomicU8::new(REQ_NONE),
            wake: AtomicU32::new(0),
            assigned: AtomicPtr::new(std::ptr::null_mut()),
            leave: UnsafeCell::new(MaybeUninit::uninit()),
            sigmask: AtomicU64::new(0),
            explicit: AtomicBool::new(false),
            counted: AtomicBool::new(false),
            exit_shared: AtomicPtr::new(std::ptr::null_mut()),
            native_tp: std::sync::atomic::AtomicUsize::new(0),
            owned: AtomicBool::new(false),
            preempt_deferred: AtomicBool::new(false),
            #[cfg(feature = "shared-library")]
            deferred_signals: [const { AtomicPtr::new(std::ptr::null_mut()) }; 4],
            budget_timer: AtomicU64::new(0),
        }
    }

    /// The calling kernel thread's machine (its block of static TLS,
    /// `arch::thread_block`). Computed afresh at every call (the compiler
    /// cannot reuse it across a switch); the caller must still not keep the
    /// reference across one, since the user thread may then run on another
    /// kernel thread.
    #[inline(always)]
    pub(crate) fn here() -> &'static Machine {
        // SAFETY: the block lives as long as its thread, is zero-initialised
        // (a valid idle `Machine`: `tests::a_new_thread_has_an_idle_machine`),
        // and is only touched through `Machine`'s atomics and cells.
        unsafe { &*crate::arch::thread_block().cast_const().cast::<Machine>() }
    }

    /// [`Machine::here`], never inlined (a stable function for debug
    /// assertions and cold paths).
    #[inline(never)]
    pub(crate) fn here_fresh() -> &'static Machine {
        Machine::here()
    }

    /// Opens a runtime section on the calling kernel thread and returns its
    /// machine, immune to preemption in the middle.
    ///
    /// A thread-local's address computed and then used is two steps, and a
    /// preemption between them (possible while the counter is still zero)
    /// may move the user thread to another kernel thread, which would then
    /// raise the first thread's counter with a plain load and store racing
    /// that thread's own. So the counter is raised by one instruction
    /// addressed through `fs` — the thread pointer at the moment it executes
    /// — with the block's link-time offset from it (`arch::thread_block_raise`).
    /// A signal lands before or after that instruction, never inside it;
    /// after it, this kernel thread cannot be left.
    #[inline(always)]
    pub(crate) fn enter_section() -> &'static Machine {
        let b = crate::arch::thread_block_raise();
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as in `here`.
        unsafe { &*b.cast_const().cast::<Machine>() }
    }

    /// Records the identity of the calling kernel thread (once per runtime
    /// kernel thread, before it runs user code).
    pub(crate) fn init_identity(&self) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        self.tid.store(tid, Ordering::Relaxed);
        let mut clock: libc::clockid_t = 0;
        // SAFETY: our own pthread handle and an out-parameter on our stack.
        if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
            self.cpu_clock.store(clock, Ordering::Relaxed);
        }
    }

    /// This kernel thread's CPU clock id (`cputime.rs`).
    pub(crate) fn cpu_clock(&self) -> i32 {
        match self.cpu_clock.load(Ordering::Relaxed) {
            0 => crate::cputime::kernel_thread_clock(self.tid.load(Ordering::Relaxed)),
            c => c,
        }
    }

    /// This thread's CPU time in nanoseconds, read from another thread.
    pub(crate) fn cpu_time_ns(&self) -> Option<u64> {
        let clock = self.cpu_clock.load(Ordering::Relaxed);
        if clock == 0 {
            return None;
        }
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid clock id of a live thread of ours; out-parameter on
        // our stack. A thread that exited makes the call fail, not fault.
        (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
            .then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// This kernel thread's CPU-budget timer, made at the first call (on this
    /// kernel thread, whose CPU clock it watches); `None` if the kernel refused
    /// one, and then at every later call without asking again.
    pub(crate) fn budget_timer(&self) -> Option<CpuTimer> {
        match self.budget_timer.load(Ordering::Relaxed) {
            NO_TIMER => None,
            0 => {
                let tid = self.tid.load(Ordering::Relaxed);
                let made = CpuTimer::new(crate::hooks::PREEMPT_SIGNAL, tid).ok();
                self.budget_timer
                    .store(made.map_or(NO_TIMER, CpuTimer::to_word), Ordering::Relaxed);
                made
            }
            w => Some(CpuTimer::from_word(w)),
        }
    }

    /// Deletes this kernel thread's CPU-budget timer, if it made one (as the
    /// kernel thread ends: a POSIX timer outlives its thread).
    pub(crate) fn delete_budget_timer(&self) {
        let w = self.budget_timer.swap(0, Ordering::Relaxed);
        if w != 0 && w != NO_TIMER {
            CpuTimer::from_word(w).delete();
        }
    }

    /// The processor this kernel thread runs, or null.
    #[inline(always)]
    pub(crate) fn processor(&self) -> *const Processor {
        self.processor.load(Ordering::Relaxed)
    }

    /// Makes `p` (or nothing) the processor of this kernel thread.
    #[inline]
    pub(crate) fn set_processor(&self, p: *const Processor) {
        self.processor.store(p.cast_mut(), Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
    }

    /// Enters a runtime section (module docs).
    #[inline(always)]
    pub(crate) fn raise(&self) {
        let g = self.guard.load(Ordering::Relaxed);
        self.guard.store(g + 1, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
    }

    /// Leaves a runtime section; takes a deferred preemption if this was the
    /// outermost one.
    ///
    /// `self` must be the calling kernel thread's machine (a section is
    /// always lowered on the kernel thread that holds it): the counter is
    /// lowered by one `fs`-relative instruction whose sign flag says whether
    /// a request was deferred, and only then is the count itself looked at.
    #[inline(always)]
    pub(crate) fn lower(&self) {
        debug_assert!(std::ptr::eq(self, Machine::here_fresh()), "a section lowered elsewhere");
        Machine::lower_here();
    }

    /// [`Machine::lower`] without a machine in hand: the section of the
    /// calling kernel thread ends. (Fetching the machine just to pass it, as
    /// `vp.machine().lower()` did on every switch, is an atomic load the
    /// compiler must keep.)
    #[inline(always)]
    pub(crate) fn lower_here() {
        compiler_fence(Ordering::SeqCst);
        crate::arch::thread_block_lower(lower_deferred);
    }

    /// Leaves a runtime section without taking a deferred request (for
    /// contexts that are about to take it themselves or cannot switch).
    #[inline(always)]
    pub(crate) fn lower_quietly(&self) {
        compiler_fence(Ordering::SeqCst);
        let g = self.guard.load(Ordering::Relaxed) - 1;
        self.guard.store(g, Ordering::Relaxed);
    }

    /// The counter with the deferral flag, for the signal handler.
    #[inline(always)]
    pub(crate) fn guard_word(&self) -> u32 {
        self.guard.load(Ordering::Relaxed)
    }

    /// Marks a request as deferred to the end of the current section (from
    /// the signal handler, which interrupted this thread).
    #[inline(always)]
    pub(crate) fn defer(&self) {
        self.preempt_deferred.store(true, Ordering::Relaxed);
        self.defer_flag();
    }

    /// Sets [`DEFERRED`] alone: the section's end runs
    /// `preempt::take_deferred`, which hands over the deferred signals
    /// (`shared-library` build) and preempts only if [`Machine::defer`] asked.
    #[inline(always)]
    pub(crate) fn defer_flag(&self) {
        let g = self.guard.load(Ordering::Relaxed);
        self.guard.store(g | DEFERRED, Ordering::Relaxed);
    }

    /// Asks for a preemption at the end of the current runtime section, if
    /// one is open on this (the calling) kernel thread.
    #[inline]
    pub(crate) fn defer_in_section(&self) {
        if self.guard_word() & !DEFERRED != 0 {
            self.defer();
        }
    }

    /// Clears the deferral flag; returns whether a preemption was deferred
    /// (signals deferred by a program's handler stay in `deferred_signals`
    /// for the caller to hand over).
    #[inline(always)]
    pub(crate) fn clear_deferred(&self) -> bool {
        let g = self.guard.load(Ordering::Relaxed);
        self.guard.store(g & !DEFERRED, Ordering::Relaxed);
        self.preempt_deferred.swap(false, Ordering::Relaxed) && g & DEFERRED != 0
    }

    /// Sleeps until a processor is assigned (`wake` set by the monitor) or
    /// `timeout` passes. Spurious returns are possible.
    pub(crate) fn wait_assigned(&self, timeout: Option<std::time::Duration>) {
        if self.wake.swap(0, Ordering::Acquire) == 1 {
            return;
        }
        crate::futex::wait(&self.wake, 0, timeout);
        self.wake.store(0, Ordering::Relaxed);
    }

    /// Wakes this machine from [`Machine::wait_assigned`].
    pub(crate) fn notify(&self) {
        self.wake.store(1, Ordering::Release);
        crate::futex::wake(&self.wake, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TLS block is zero-filled by the kernel and libc, not initialised
    /// by `Machine::new`: a new thread's block must read as an idle machine.
    #[test]
    fn a_new_thread_has_an_idle_machine() {
        std::thread::spawn(|| {
            let m = Machine::here();
            let idle = Machine::new();
            assert_eq!(m.guard_word(), idle.guard_word());
            assert_eq!(m.processor(), idle.processor());
            // SAFETY: this thread's own cell, not touched by anyone else here.
            assert!(unsafe { *m.sched_ctx.get() }.is_null());
            assert!(m.detached.load(Ordering::Relaxed).is_null());
            assert!(m.last_processor.load(Ordering::Relaxed).is_null());
            assert_eq!(m.tid.load(Ordering::Relaxed), 0);
            assert_eq!(m.cpu_clock.load(Ordering::Relaxed), 0);
            assert_eq!(m.request.load(Ordering::Relaxed), REQ_NONE);
            assert_eq!(m.wake.load(Ordering::Relaxed), 0);
            assert!(m.assigned.load(Ordering::Relaxed).is_null());
            assert_eq!(m.sigmask.load(Ordering::Relaxed), 0);
            assert!(!m.explicit.load(Ordering::Relaxed));
            assert!(!m.counted.load(Ordering::Relaxed));
            assert!(m.exit_shared.load(Ordering::Relaxed).is_null());
            // Distinct per thread, and the same address every time.
            assert!(std::ptr::eq(m, Machine::here_fresh()));
            m as *const Machine as usize
        })
        .join()
        .map(|a| assert_ne!(a, Machine::here() as *const Machine as usize))
        .unwrap();
    }

    /// `enter_section` raises this thread's counter and `lower` brings it back.
    #[test]
    fn a_section_raises_and_lowers_this_threads_counter() {
        std::thread::spawn(|| {
            let m = Machine::enter_section();
            assert!(std::ptr::eq(m, Machine::here()));
            assert_eq!(m.guard_word(), 1);
            let m2 = Machine::enter_section();
            assert_eq!(m2.guard_word(), 2);
            m2.lower_quietly();
            m.lower_quietly();
            assert_eq!(m.guard_word(), 0);
        })
        .join()
        .unwrap();
    }
}
