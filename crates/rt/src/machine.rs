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
//! Every kernel thread of the process has a `Machine` in a thread-local,
//! constant-initialised and without a destructor, so reading it is one
//! `fs`-relative access and it is valid from a signal handler. Other threads
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
//! holds a processor reference with the counter at zero. It is raised through
//! the thread-local in `#[inline(never)]` functions (the address of a
//! thread-local must not be reused after a switch, which may move the user
//! thread to another kernel thread) and lowered through the processor's
//! `machine` pointer once the section ends, on whichever kernel thread that
//! is: a switch hands the raised counter to the context it resumes, which
//! lowers it (`after_switch`).

use crate::arch::StackPointer;
use crate::processor::{Pending, Processor};
use crate::task::Task;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{
    compiler_fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    Ordering,
};

/// Set in `Machine::guard` when a preemption request arrived inside a
/// runtime section; taken when the counter returns to zero.
pub(crate) const DEFERRED: u32 = 1 << 31;

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
    pub(crate) exit_shared: AtomicPtr<crate::runtime::Shared>,
}

// SAFETY: the fields are atomics, or cells owned by this kernel thread by
// protocol (`sched_ctx`, `leave`: only its own contexts touch them); other
// threads only read the atomics.
unsafe impl Sync for Machine {}

thread_local! {
    static MACHINE: Machine = const { Machine::new() };
}

/// Offset of `MACHINE` from the thread pointer, or 0 until computed.
static TLS_OFFSET: AtomicUsize = AtomicUsize::new(0);

/// The offset of this thread's `MACHINE` from its thread pointer (`fs:0`).
#[inline(always)]
pub(crate) fn tls_offset() -> usize {
    let off = TLS_OFFSET.load(Ordering::Relaxed);
    if off != 0 {
        return off;
    }
    compute_tls_offset()
}

#[cold]
#[inline(never)]
fn compute_tls_offset() -> usize {
    let tp: usize;
    // SAFETY: reads the thread pointer, which x86_64 keeps at fs:0.
    unsafe { std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly)) };
    let off = (Machine::here() as *const Machine as usize).wrapping_sub(tp);
    TLS_OFFSET.store(off, Ordering::Relaxed);
    off
}

/// Checks, on a new kernel thread of the runtime, that its `MACHINE` lies at
/// the same offset from its thread pointer as everybody's (static TLS, as in
/// every executable); `Machine::enter_section` depends on it.
pub(crate) fn check_tls_offset() {
    let tp: usize;
    // SAFETY: as in `compute_tls_offset`.
    unsafe { std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly)) };
    let off = (Machine::here() as *const Machine as usize).wrapping_sub(tp);
    assert_eq!(
        off,
        tls_offset(),
        "schedlab-rt needs its thread-local in static TLS (link it into the executable)"
    );
}

impl Machine {
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
        }
    }

    /// The calling kernel thread's machine. Inline: for functions that are
    /// themselves `#[inline(never)]` and do not use it across a switch.
    #[inline(always)]
    pub(crate) fn here() -> &'static Machine {
        // SAFETY: a thread-local without destructor lives as long as its
        // thread; callers use it only on this thread, before any switch.
        MACHINE.with(|m| unsafe { &*(m as *const Machine) })
    }

    /// [`Machine::here`], never inlined: for callers that may run on
    /// different kernel threads before and after a switch.
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
    /// that thread's own. (In a debug build even `AtomicU32::load` is a
    /// call, outside any code range the handler could refuse.) So the counter
    /// is raised by one instruction addressed through `fs` — the thread
    /// pointer at the moment it executes — with the thread-local's offset
    /// from the thread pointer, the same in every thread of an executable
    /// (static TLS). A signal lands before or after that instruction, never
    /// inside it; after it, this kernel thread cannot be left.
    #[inline(always)]
    pub(crate) fn enter_section() -> &'static Machine {
        let off = tls_offset();
        let m: usize;
        // SAFETY: `off` is the offset of this thread's `MACHINE` from the
        // thread pointer (`tls_offset`), so `fs:[off]` is this thread's
        // counter (the first field, `repr(C)`), and `fs:0` holds the thread
        // pointer itself (the x86_64 TLS ABI). The add is an ordinary,
        // unlocked read-modify-write: only this thread and its own signal
        // handler touch the counter.
        unsafe {
            std::arch::asm!(
                "add dword ptr fs:[{off}], 1",
                "mov {m}, qword ptr fs:[0]",
                "add {m}, {off}",
                off = in(reg) off,
                m = out(reg) m,
                options(nostack, preserves_flags)
            );
        }
        compiler_fence(Ordering::SeqCst);
        // SAFETY: this thread's machine, a thread-local without destructor.
        unsafe { &*(m as *const Machine) }
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
    #[inline(always)]
    pub(crate) fn lower(&self) {
        compiler_fence(Ordering::SeqCst);
        let g = self.guard.load(Ordering::Relaxed) - 1;
        self.guard.store(g, Ordering::Relaxed);
        if g == DEFERRED {
            crate::preempt::take_deferred(self);
        }
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
        let g = self.guard.load(Ordering::Relaxed);
        self.guard.store(g | DEFERRED, Ordering::Relaxed);
    }

    /// Clears the deferral flag; returns whether it was set.
    #[inline(always)]
    pub(crate) fn clear_deferred(&self) -> bool {
        let g = self.guard.load(Ordering::Relaxed);
        self.guard.store(g & !DEFERRED, Ordering::Relaxed);
        g & DEFERRED != 0
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
