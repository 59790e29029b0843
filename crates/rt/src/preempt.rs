//! Preemption: a user thread that runs past its quantum while other work
//! waits is interrupted by a signal and switched away at a safe point.
//!
//! There is no periodic tick. The monitor (`monitor.rs`) sends `SIGURG` to a
//! processor's kernel thread only when its current user thread has run
//! longer than the quantum *and* other work waits; a runtime where every
//! processor has one runnable thread receives no signal at all. (A blind
//! 10 kHz tick cost 25% of a compute loop on the lab machine.) `SIGURG` is
//! the signal the Go runtime chose for the same job: ignored by default,
//! rarely used by programs, harmless when it arrives unexpectedly.
//!
//! # The signal
//!
//! What the runtime asks of a kernel thread is in that thread's request word
//! (`Machine::request`: preempt, rejoin, release); the signal only makes the
//! thread look. It is sent as a queued signal from this process
//! (`signal_thread`: `rt_tgsigqueueinfo`, `SI_QUEUE`, `si_pid` this
//! process, `si_value` the address of `COOKIE`, a byte of this copy of the
//! runtime), so the handler tells the runtime's own — and a CPU budget's
//! timer's (`cputimer.rs`, its own cookie) — from any other `SIGURG`: a
//! program's `kill`, `tgkill`, `raise` or `sigqueue`, the kernel's
//! `SI_KERNEL` for a socket's out-of-band data, or another copy of the
//! runtime in the same process (a Rust program with its own, run under
//! `libschedlab_pthread.so`). The handler acts on the request word whatever
//! the signal, and in the `shared-library` build passes every signal that is
//! not its own to the library after that (`shared.rs`, "The program's
//! `SIGURG`"); in an executable one it is dropped, as before.
//!
//! `SIGURG` is a standard signal: a second one sent to a kernel thread while
//! one is pending there is lost. A program's signal that comes first carries
//! the runtime's request with it (the word is read at every delivery), so
//! the runtime is the side that loses (the library raises its own again,
//! `libschedlab_pthread`'s `urg.rs`). `rt_tgsigqueueinfo` costs the same
//! system call as `tgkill` plus the copy of a 128-byte `siginfo`, on the
//! monitor's path, not a hot one (docs/PERFORMANCE.md, "The runtime's signal
//! as a queued signal").
//!
//! # Safe points
//!
//! The handler switches the interrupted user thread away only when:
//! 1. no runtime section is open on this kernel thread (`machine.rs`); a
//!    request that arrives inside one is remembered and taken when the
//!    section ends, seed 003's critical-section recovery;
//! 2. the thread is preemptible (`Builder::preemptible`) and not inside a
//!    [`no_preempt`] region (taken at the region's end);
//! 3. the interrupted instruction is in the program's own code (the main
//!    executable's text, which holds the Rust code and `std`), not in libc,
//!    the vDSO or the dynamic loader, whose locks and thread-local state we
//!    cannot see; the monitor retries shortly;
//! 4. the interrupted context was not itself in a signal handler (its signal
//!    mask is the kernel thread's ordinary one);
//! 5. the interrupted code runs on the user thread's own stack (not an
//!    alternate signal stack), which has room for the trampoline's frame.
//!
//! At a safe point the handler redirects the thread, on return from the
//! signal, into `schedlab_rt_preempt` (`arch/x86_64.rs`): as if the
//! interrupted instruction had called it, past the 128-byte red zone. The
//! trampoline saves every register (general-purpose, flags, and the whole
//! `xsave` state: x87, SSE, AVX, AVX-512), calls `preempted`, which yields
//! as `yield_now` would, and on resumption — perhaps on another kernel
//! thread — restores everything and returns to the interrupted instruction.
//!
//! The handler is installed with `SA_RESTART`, so a system call interrupted
//! by a request that turned out not to need it is restarted by the kernel
//! where it can be; our own blocking wrappers (`blocking::sys`) retry `EINTR`.
//!
//! # Where the signal may land
//!
//! A runtime section is opened by raising a per-kernel-thread counter
//! (`machine.rs`) with a single `fs`-relative instruction, so no preemption
//! can split the raise from the thread it counts for; every function that
//! opens one also lives in the `schedlab_rt_np` link section, which the
//! handler treats as not a safe point (defence in depth).
//!
//! # Hazards a Rust user thread has and a Go goroutine does not
//!
//! - A `thread_local!` value belongs to the kernel thread, and a preempted
//!   user thread may resume on another one. Code that keeps a reference to a
//!   thread-local across a point where it can be preempted (the compiler may
//!   keep the thread-local's address in a register) can touch another kernel
//!   thread's value. Use [`LocalKey`](crate::LocalKey) for per-user-thread
//!   state, or wrap the access in [`no_preempt`].
//! - A kernel-thread-affine resource — a lock that records its owner
//!   thread (the standard library's reentrant lock behind `stdout`), a
//!   foreign library's per-thread context, tokio's runtime context — must
//!   not be held across a preemption: another user thread on the same kernel
//!   thread would be taken for its owner. Hold such resources inside
//!   [`no_preempt`], or run the thread with `Builder::preemptible(false)`.
//!   For tokio that means the whole life of the runtime: building it, every
//!   `block_on`, and dropping it (the drop enters its context too). A thread
//!   that is not preemptible, or inside `no_preempt`, also keeps its kernel
//!   thread when it blocks in the kernel (tokio's runtime parks it when idle):
//!   after the hand-off (`blocking.rs`) it runs on, detached, rather than
//!   rejoin by being queued for another kernel thread, until it leaves the
//!   region or calls into the runtime. Without the workaround, a thread
//!   preempted inside a tokio runtime leaves tokio's context on its kernel
//!   thread: the next user thread there to use tokio panics, and its panic is
//!   returned by `join` as a message naming the workaround
//!   (`explain_panic`, matched on tokio's own messages).
//! - The standard library's panic state (the panic count, "inside the panic
//!   hook") is the kernel thread's too: a thread preempted inside its panic
//!   hook left the flag set there, and the next panic on that kernel thread
//!   aborted the process ("thread panicked while processing panic"). A
//!   panicking thread is therefore never preempted, nor moved off its kernel
//!   thread at a rejoin, until its panic is caught. A `Drop` that blocks on a
//!   runtime primitive while unwinding still switches: keep such drops short.
//! - Code that is not async-signal-safe is never interrupted *into* other
//!   code by us: the handler itself only reads and writes atomics and the
//!   signal frame, and the switch runs after the handler has returned.

use crate::event::Event;
use crate::machine::{Machine, REQ_NONE, REQ_PREEMPT, REQ_REJOIN, REQ_RELEASE};
use crate::processor;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::Duration;

pub use crate::state::{Preemption, DEFAULT_QUANTUM, MIN_QUANTUM};

/// The signal the monitor sends.
pub(crate) const SIGNAL: libc::c_int = libc::SIGURG;

/// Runs `f` so that the calling user thread is not preempted inside it (a
/// request that arrives meanwhile is taken when `f` returns), nor moved to
/// another kernel thread when it blocks in the kernel inside it (module docs,
/// "Hazards"): so `f` may hold kernel-thread-affine state, a tokio runtime's
/// whole life among them. Voluntary switches (`yield_now`, blocking on a
/// runtime primitive) still happen. On an OS thread, just calls `f`.
pub fn no_preempt<R>(f: impl FnOnce() -> R) -> R {
    struct Region(Option<crate::task::TaskRef>);
    impl Drop for Region {
        fn drop(&mut self) {
            if let Some(t) = &self.0 {
                if t.leave_no_preempt() {
                    preempted();
                }
            }
        }
    }
    let region = Region(processor::current_task_ref());
    if let Some(t) = &region.0 {
        t.enter_no_preempt();
    }
    let r = f();
    drop(region);
    r
}

/// The program's own code: the executable segments of the main executable.
struct Text {
    ranges: [(usize, usize); 8],
    n: usize,
}

static TEXT: OnceLock<Text> = OnceLock::new();

/// Bytes the trampoline may need below the interrupted stack pointer: the
/// red zone, the registers, the `xsave` area, and the frames of a yield.
fn frame_bytes() -> usize {
    128 + 8 * 18 + crate::arch::xsave_area_bytes() + 8 * 1024
}

/// Adds the executable segments of the object `info` describes to `text`
/// (as many as fit).
fn add_executable(info: &libc::dl_phdr_info, text: &mut Text) {
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: `dlpi_phdr` has `dlpi_phnum` entries.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 && text.n < text.ranges.len()
        {
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            text.ranges[text.n] = (start, start + ph.p_memsz as usize);
            text.n += 1;
        }
    }
}

fn program_text() -> &'static Text {
    TEXT.get_or_init(|| {
        let mut text = Text { ranges: [(0, 0); 8], n: 0 };
        unsafe extern "C" fn each(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: the loader passes a valid info struct; `data` is our `Text`.
            let (info, text) = unsafe { (&*info, &mut *data.cast::<Text>()) };
            add_executable(info, text);
            1 // the first object is the main executable: stop
        }
        /// The `shared-library` build: the text of the objects no user
        /// thread may be preempted in — ours (found by this function's
        /// address), the C library, the dynamic loader, the unwinder and the
        /// vDSO (found by name) — collected as ranges to exclude.
        #[cfg(feature = "shared-library")]
        unsafe extern "C" fn own(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: the loader passes a valid info struct; `data` is our `Text`.
            let (info, text) = unsafe { (&*info, &mut *data.cast::<Text>()) };
            let here = own as *const () as usize;
            let name = if info.dlpi_name.is_null() {
                &b""[..]
            } else {
                // SAFETY: the loader's NUL-terminated name of the object.
                unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
            };
            let base = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
            let named = [&b"libc.so"[..], b"ld-linux", b"libgcc_s.so", b"linux-vdso"]
                .iter()
                .any(|p| base.starts_with(p));
            let mut found = Text { ranges: [(0, 0); 8], n: 0 };
            add_executable(info, &mut found);
            let ours = found.ranges[..found.n].iter().any(|&(a, b)| (a..b).contains(&here));
            if ours || named {
                add_executable(info, text);
            }
            0
        }
        #[cfg(not(feature = "shared-library"))]
        let callback = each;
        #[cfg(feature = "shared-library")]
        let callback = {
            let _ = each;
            own
        };
        // SAFETY: a callback that only reads the headers it is given.
        unsafe { libc::dl_iterate_phdr(Some(callback), (&mut text as *mut Text).cast()) };
        text
    })
}

extern "C" {
    // Defined by the linker around the functions marked
    // `#[link_section = "schedlab_rt_np"]`: those that open a runtime
    // section (`machine.rs`), whose counter is raised by a load and a store
    // that a preemption must not split.
    static __start_schedlab_rt_np: u8;
    static __stop_schedlab_rt_np: u8;
}

/// Whether `pc` is in a function that opens a runtime section.
pub(crate) fn in_section_opener(pc: usize) -> bool {
    // Only the addresses of the linker's symbols are taken.
    let (a, b) = (
        std::ptr::addr_of!(__start_schedlab_rt_np) as usize,
        std::ptr::addr_of!(__stop_schedlab_rt_np) as usize,
    );
    (a..b).contains(&pc)
}

#[cfg(not(feature = "shared-library"))]
fn in_program_text(pc: usize) -> bool {
    let t = program_text();
    t.ranges[..t.n].iter().any(|&(a, b)| (a..b).contains(&pc))
}

/// The `shared-library` build (`libschedlab_pthread.so`): every user thread
/// carries its own TLS block and thread control block, so per-thread state is
/// no hazard any more, and the program's own code and its libraries (a
/// compressor's `libz`, `liblzma`) are safe points. Not the C library, the
/// dynamic loader, the unwinder or our own object: the scheduler context
/// itself takes their locks (malloc's arenas, the loader's lock when it
/// first registers a thread-local destructor), and a user thread preempted
/// while holding one, queued on the very processor whose scheduler context
/// then blocks on it, would never run again (seen: `stress-ng --pthread`
/// hung on the loader's lock).
#[cfg(feature = "shared-library")]
fn in_program_text(pc: usize) -> bool {
    let t = program_text();
    !t.ranges[..t.n].iter().any(|&(a, b)| (a..b).contains(&pc))
}

/// Installs the handler, once per process, and computes what it needs.
pub(crate) fn install_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: getpid cannot fail.
        PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
        program_text();
        crate::arch::init_preemption();
        // SAFETY: a zeroed, then filled, action with our SA_SIGINFO handler.
        unsafe {
            let mut action: libc::sigaction = MaybeUninit::zeroed().assume_init();
            action.sa_sigaction = handler as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
            crate::guard::block_all_but_faults(&mut action.sa_mask);
            libc::sigaction(SIGNAL, &action, std::ptr::null_mut());
        }
    });
}

/// Records the calling kernel thread's ordinary signal mask (safe point 4).
pub(crate) fn init_thread() {
    // SAFETY: queries the mask into a zeroed set on our stack.
    let mask = unsafe {
        let mut set: libc::sigset_t = MaybeUninit::zeroed().assume_init();
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut set);
        first_word(&set)
    };
    Machine::here().sigmask.store(mask, Ordering::Relaxed);
}

fn first_word(set: &libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t is at least 8 bytes on Linux.
    unsafe { std::ptr::read_unaligned((set as *const libc::sigset_t).cast::<u64>()) }
}

/// Asks `m`'s kernel thread for a preemption, unless a request is pending
/// there (a signal in flight takes the new one too).
pub(crate) fn ask(m: &Machine) {
    if m.request
        .compare_exchange(REQ_NONE, REQ_PREEMPT, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        signal_thread(m.tid.load(Ordering::Relaxed));
    }
}

/// The value the runtime's own signal carries (`si_value.sival_ptr`): this
/// byte's address, so that two copies of the runtime in one process (a
/// program with its own, under `libschedlab_pthread.so`) tell theirs apart.
static COOKIE: u8 = 0;

/// This process's id, kept by [`install_handler`] (and [`after_fork`]): the
/// sender the handler expects the runtime's own signal to name (`si_pid`).
static PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// In a child after `fork` (the `shared-library` build, whose child may
/// start a runtime of its own): this process's id again.
#[cfg(feature = "shared-library")]
pub(crate) fn after_fork() {
    // SAFETY: getpid cannot fail.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
}

fn cookie() -> usize {
    std::ptr::addr_of!(COOKIE) as usize
}

/// Sends the preemption signal to kernel thread `tid` of this process, as a
/// queued signal (`rt_tgsigqueueinfo`, `SI_QUEUE`) from this process that
/// carries [`COOKIE`], so the handler tells it from a `SIGURG` of the
/// program's (module docs, "The signal").
pub(crate) fn signal_thread(tid: i32) -> bool {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    // SAFETY: a zeroed siginfo is valid; the fields a queued signal carries
    // are set below.
    let mut info: libc::siginfo_t = unsafe { MaybeUninit::zeroed().assume_init() };
    info.si_signo = SIGNAL;
    info.si_code = libc::SI_QUEUE;
    // SAFETY: a queued signal's fields (`si_pid`, `si_uid`, `si_value`)
    // follow the three ints of the header; ours to write.
    unsafe {
        let fields = (&mut info as *mut libc::siginfo_t).cast::<u8>().add(QUEUED_FIELDS);
        fields.cast::<i32>().write(pid);
        fields.add(8).cast::<usize>().write(cookie());
    }
    // SAFETY: a signal to a thread of our own process, with our own
    // siginfo; a thread that exited makes it fail with ESRCH, harmlessly.
    unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, SIGNAL, &info) == 0 }
}

/// Where a queued signal's `si_pid`, `si_uid` and `si_value` start in a
/// `siginfo_t` (after `si_signo`, `si_errno`, `si_code` and padding).
const QUEUED_FIELDS: usize = 16;

/// Whether `info` is this runtime's own signal ([`signal_thread`]).
///
/// # Safety
/// `info` is the `siginfo_t` the kernel passed to an `SA_SIGINFO` handler.
unsafe fn is_own_signal(info: *const libc::siginfo_t) -> bool {
    // SAFETY: the caller passes the kernel's siginfo; `si_pid` and
    // `si_value` are valid for `SI_QUEUE`, the code checked first.
    unsafe {
        !info.is_null()
            && (*info).si_code == libc::SI_QUEUE
            && (*info).si_value().sival_ptr as usize == cookie()
            && (*info).si_pid() == PID.load(Ordering::Relaxed)
    }
}

unsafe extern "C" fn handler(
    _sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    // A thread the runtime never saw (`shared-library` build: a kernel
    // thread of the program's own with no block): not ours to act on.
    if !crate::arch::thread_block_present() {
        // Not the runtime's signal either: the program's, passed on.
        #[cfg(feature = "shared-library")]
        // SAFETY: this handler's own arguments.
        unsafe {
            crate::shared::pass_on(None, info, ctx)
        };
        return;
    }
    // SAFETY: errno is thread-local; we restore it so the interrupted code
    // never sees a change.
    let errno = unsafe { *libc::__errno_location() };
    let m = Machine::here();
    // SAFETY: the kernel's siginfo for this SA_SIGINFO handler.
    let from_timer = unsafe { crate::cputimer::is_timer_signal(info) };
    // SAFETY: as above.
    let own = from_timer || unsafe { is_own_signal(info) };
    // Every `SIGURG`: one the library passes on to a program handler is
    // counted by the library too, and a call it ends returns `EINTR`; one it
    // drops (ignored, kept for later) is retried as the runtime's own.
    #[cfg(feature = "shared-library")]
    crate::shared::count_interruption(m);
    let mut req = m.request.swap(REQ_NONE, Ordering::Acquire);
    if req == REQ_NONE && from_timer && (m.guard_word() != 0 || budgeted_here(m)) {
        // A CPU budget's timer (`budget.rs`): the kernel saw the running
        // thread's allowance used up. Taken as a preemption, whose path
        // throttles the thread once its budget says it is spent. Inside a
        // runtime section the current thread may be changing: deferred
        // without a look, and `preempted` decides at the section's end.
        req = REQ_PREEMPT;
    }
    match req {
        REQ_RELEASE => {
            // SAFETY: the kernel passes the interrupted context.
            let pc = unsafe {
                (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RIP as usize]
            };
            crate::blocking::release_from_signal(m, pc as usize)
        }
        req @ (REQ_PREEMPT | REQ_REJOIN) => {
            // SAFETY: the kernel passes the interrupted context.
            unsafe { redirect(m, ctx.cast(), req) }
        }
        _ => {}
    }
    // A cancellable system call not yet finished tests its word again
    // (`shared::syscall_cancellable`); after the redirect above, which
    // never takes a context there (not the program's text).
    #[cfg(feature = "shared-library")]
    crate::shared::rewind_cancellable(ctx.cast());
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    // The program's own `SIGURG`, passed on to the library last: the
    // context may be moved to its handler (`sigframe.rs`), after every
    // change above (module docs, "The signal").
    #[cfg(feature = "shared-library")]
    if !own {
        // SAFETY: this handler's own arguments.
        unsafe { crate::shared::pass_on(Some(m), info, ctx) };
    }
    #[cfg(not(feature = "shared-library"))]
    let _ = own;
}

/// The user thread running on `m`'s processor has a CPU budget: a budget
/// timer's signal is for it (one queued before a disarm may land on the next
/// thread, which is left alone). Outside a runtime section, so the current
/// thread is the interrupted one. Async-signal-safe.
fn budgeted_here(m: &Machine) -> bool {
    let p = m.processor();
    // SAFETY: our processor, read by its own kernel thread; its current
    // thread is alive while it is current.
    !p.is_null() && unsafe { (*p).current_task() }.is_some_and(|t| t.budget().is_some())
}

/// Redirects the interrupted user thread into the trampoline if it is at a
/// safe point (module docs). Async-signal-safe.
unsafe fn redirect(m: &Machine, uc: *mut libc::ucontext_t, req: u8) {
    if m.guard_word() != 0 {
        // Safe point 1: inside a runtime section; taken at its end.
        m.defer();
        return;
    }
    let p = m.processor();
    let task = if p.is_null() {
        match std::ptr::NonNull::new(m.detached.load(Ordering::Relaxed)) {
            // SAFETY: the detached thread runs on this kernel thread.
            Some(t) if req == REQ_REJOIN && !m.explicit.load(Ordering::Relaxed) => unsafe {
                &*t.as_ptr()
            },
            _ => return,
        }
    } else {
        // SAFETY: our processor; no runtime section is open, so its current
        // thread is the one interrupted.
        match unsafe { (*p).current_task() } {
            Some(t) => t,
            None => return,
        }
    };
    // Safe point 2.
    if req == REQ_PREEMPT && !task.preemptible() {
        return;
    }
    if task.in_no_preempt() {
        task.defer_preemption();
        return;
    }
    // SAFETY: `uc` is the kernel's signal frame for this thread.
    let uc = unsafe { &mut *uc };
    let pc = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    let sp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as usize;
    // Safe point 3 (and not inside the opening of a runtime section).
    if !in_program_text(pc) || in_section_opener(pc) {
        return;
    }
    // Safe point 4.
    if first_word(&uc.uc_sigmask) != m.sigmask.load(Ordering::Relaxed) {
        return;
    }
    // Safe point 5: the interrupted code runs on the thread's own stack (not
    // a kernel thread's alternate signal stack, where a program's handler
    // may run: switched away there, it would go on on another kernel thread
    // while this one's next signal reused the same stack), and that stack
    // holds the trampoline's frame above the guard page.
    let Some(stack) = task.stack_range() else { return };
    if sp < stack.start + frame_bytes() || sp > stack.end {
        return;
    }
    // As if the interrupted instruction had called the trampoline, below the
    // red zone: the return address at sp - 136, which `ret 128` pops.
    let new_sp = sp - 128 - 8;
    // SAFETY: within the thread's own stack, below everything live (the red
    // zone included), checked above to be mapped.
    unsafe { (new_sp as *mut u64).write(pc as u64) };
    uc.uc_mcontext.gregs[libc::REG_RSP as usize] = new_sp as i64;
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] = crate::arch::preempt_trampoline() as i64;
}

/// Called by the trampoline with every register saved: yields the processor
/// (or, for a detached thread, rejoins one), then returns to be restored.
/// In the `shared-library` build the library's preemption hook runs last,
/// and may end the thread by unwinding through here (`C-unwind`).
#[no_mangle]
pub(crate) extern "C-unwind" fn schedlab_rt_preempted() {
    preempted();
    #[cfg(feature = "shared-library")]
    crate::shared::run_preempt_hook();
}

/// The body of a preemption (also for a request deferred to the end of a
/// runtime section or `no_preempt` region).
#[inline(never)]
pub(crate) fn preempted() {
    match processor::here_raw() {
        processor::HereRaw::Processor(vp) => {
            if let Some(t) = vp.current_task() {
                // The request that CPU-time accounting sends a thread already
                // running when it is switched on (`cputime.rs`, "When"): its
                // stint starts here. A flag test otherwise.
                vp.start_own_stint(t);
                // A request deferred to the end of a runtime section was
                // deferred before the handler's safe-point 2 (the section
                // comes first): apply it now. Not preemptible: dropped, as
                // the handler drops it; inside a region: kept for the
                // region's end.
                if !t.preemptible() {
                    vp.machine().lower_quietly();
                    return;
                }
                if t.in_no_preempt() {
                    t.defer_preemption();
                    vp.machine().lower_quietly();
                    return;
                }
                if std::thread::panicking() {
                    // The panic's state is the kernel thread's (module docs,
                    // "Hazards"): dropped, the monitor asks again.
                    vp.machine().lower_quietly();
                    return;
                }
                #[cfg(feature = "shared-library")]
                if crate::shared::in_signal_handler() {
                    // Safe point 4 for a request deferred to the end of a
                    // section (a program's handler calling the library):
                    // dropped, the monitor asks again.
                    vp.machine().lower_quietly();
                    return;
                }
                if let Some(b) = t.budget() {
                    let ran = t.cpu.checkpoint();
                    if let Some(left) = b.spent(vp.shared.timers.now(), ran) {
                        return throttle(vp, t, b, left);
                    }
                }
                if stale_for_high(vp, t) {
                    // Perhaps asked for by a change of `t`'s priority from another
                    // thread (`realtime.rs`, rule 3): the monitor reads the new one.
                    crate::realtime::republish(vp, t);
                    vp.machine().lower_quietly();
                    return;
                }
                let ran = Duration::from_nanos(vp.preempt_ran.load(Ordering::Relaxed));
                vp.emit(|| Event::Preempted { thread: t.id, processor: vp.index, ran });
                if vp.halt.load(Ordering::Relaxed) {
                    // Removed (or shutting down): the thread goes back to
                    // the queue this processor is about to hand over
                    // (`runtime.rs`, "Resizing", step 2).
                    return vp.yield_to_scheduler();
                }
            }
            // The task's own record, alive while it runs, across the switch
            // (after which `vp` may be another processor's).
            let me = vp.current_task().map(|t| t as *const crate::task::Task);
            // SAFETY: as above; the calling task itself.
            let me = me.map(|t| unsafe { &*t });
            if me.is_some_and(|t| t.preempting.load(Ordering::Relaxed)) {
                // Resumed from a preemption with another already asked for:
                // taken here it would nest (`Task::preempting`); dropped, the
                // monitor asks again.
                vp.machine().lower_quietly();
                return;
            }
            if let Some(t) = me {
                t.preempting.store(true, Ordering::Relaxed);
            }
            vp.machine().lower_quietly();
            processor::yield_current();
            if let Some(t) = me {
                t.preempting.store(false, Ordering::Relaxed);
            }
            // A request of the library's (`shared::interrupt`) that found
            // nothing else to run: its hook runs here.
            #[cfg(feature = "shared-library")]
            crate::shared::run_hook_if_asked();
        }
        processor::HereRaw::Detached(m) => {
            // SAFETY: the detached thread is the caller: alive.
            if let Some(t) = unsafe { m.detached.load(Ordering::Relaxed).as_ref() } {
                // Rejoining may leave this kernel thread for good (no
                // processor free: the thread is queued, to resume on another
                // one), so it waits where a preemption would: a thread that
                // is not preemptible, in a region, or panicking keeps running
                // here without a processor (module docs, "Hazards").
                if t.in_no_preempt() {
                    t.defer_preemption();
                }
                if !t.preemptible() || t.in_no_preempt() || std::thread::panicking() {
                    m.lower_quietly();
                    return;
                }
            }
            crate::blocking::rejoin_in(m, crate::event::Detection::Transparent)
        }
        processor::HereRaw::Os => {}
    }
}

/// The panic of a user thread caught at its base, explained when it is one of
/// tokio's complaints about its runtime context on a preemptible thread of a
/// preempting runtime: tokio keeps that context per kernel thread, so it was
/// left behind by a thread preempted inside a tokio runtime, or found one left
/// by another (module docs, "Hazards"). The new payload, a `String`, names the
/// workaround and quotes tokio. Matched on tokio 1's messages, since this
/// crate must not depend on tokio to ask it.
#[cold]
pub(crate) fn explain_panic(
    payload: Box<dyn std::any::Any + Send>,
    task: &crate::task::Task,
) -> Box<dyn std::any::Any + Send> {
    const TOKIO_CONTEXT: [&str; 4] = [
        "Cannot start a runtime from within a runtime",
        "must be called from the context of a Tokio 1.x runtime",
        "`EnterGuard` values dropped out of order",
        // Leaving a runtime on another kernel thread than the one entered.
        "c.runtime.get().is_entered()",
    ];
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied());
    let preempting = matches!(task.shared.preemption, Preemption::Quantum(_));
    match text {
        Some(said)
            if preempting
                && task.preemptible()
                && TOKIO_CONTEXT.iter().any(|m| said.contains(m)) =>
        {
            Box::new(format!(
                "schedlab-rt: tokio was used on a preemptible user thread, and a preemption \
                 moved a user thread away from its kernel thread inside a tokio runtime \
                 (tokio keeps its runtime context per kernel thread). Spawn the threads that \
                 use tokio with Builder::preemptible(false), or run each tokio runtime's \
                 whole life (build, block_on, drop) inside schedlab_rt::no_preempt. \
                 tokio said: {said}"
            ))
        }
        _ => payload,
    }
}

/// A preemption of a `High` thread that nothing asked for: no other `High`
/// thread waits, the monitor did not ask for the turn of the work under it,
/// and its processor is not being removed (its budget was looked at first).
/// Then the request was meant for the thread before it (the monitor's
/// signal for a lower level, landing after a local switch had already given
/// the processor to this one), and taking it would hand the processor to
/// `Normal` work: the decision is made before the thread is queued again
/// (`priority.rs`). Seen under load: a woken `High` thread preempted at once
/// in favour of a `Normal` one.
///
/// A real-time thread's preemption is likewise stale unless a thread it would pass the
/// processor to waits (`realtime.rs`, rule 1: never a lower priority, never an equal one
/// under `SCHED_FIFO`).
fn stale_for_high(vp: &processor::Processor, t: &crate::task::Task) -> bool {
    vp.prios.load(Ordering::Relaxed)
        && t.priority() == crate::Priority::High
        && !crate::realtime::preemptable(t, &vp.shared.prio)
        && !vp.normal_turn.load(Ordering::Relaxed)
        && !vp.halt.load(Ordering::Relaxed)
}

/// A request deferred inside a runtime section, taken as the section ends
/// (`Machine::lower`, on `m`, the calling thread's machine).
#[cold]
#[inline(never)]
pub(crate) fn take_deferred(m: &Machine) {
    let preempt = m.clear_deferred();
    // Program signal handlers that came inside the section (the library's
    // wrapper left them for its end): outside any section now.
    #[cfg(feature = "shared-library")]
    crate::shared::hand_over_deferred_signals(m);
    if preempt {
        // In the scheduler context (no user thread) this does nothing.
        preempted();
    }
}

/// Throttles `t` (`budget.rs`), the running thread of `vp`, whose budget `b` is spent for
/// the `left` rest of its period: it sleeps on the runtime's timers until
/// the period ends. Called at a safe point (`preempt::preempted`) inside the
/// runtime section `vp` was entered with, which this ends.
fn throttle(
    vp: &processor::Processor,
    t: &crate::task::Task,
    b: &crate::budget::Budget,
    left: Duration,
) {
    b.throttled();
    vp.emit(|| Event::Throttled {
        thread: t.id,
        processor: vp.index,
        used: b.used_in_period(),
        resume_in: left,
    });
    // SAFETY: `t` is the running thread (the caller), alive; a new counted
    // reference for the timer.
    let me = unsafe { crate::task::TaskRef::clone_from_raw(std::ptr::NonNull::from(t)) };
    t.shared.timers.insert(left, me);
    vp.machine().lower_quietly();
    // Exactly one Sync token comes, from the timer (as in `sleep`).
    processor::park_current(crate::park::Kind::Sync, crate::task::WaitReason::Throttled);
}

#[cfg(test)]
mod tests {
    //! The handler's decisions, with the signal sent at chosen moments: the
    //! thread signals its own kernel thread, so the handler runs as the
    //! `tgkill` returns, exactly there.
    use super::*;
    use crate::machine::REQ_PREEMPT;
    use crate::{spawn, Runtime};
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::Arc;

    /// A runtime of one processor whose monitor never preempts on its own.
    fn runtime(preempted: Arc<AtomicUsize>) -> Runtime {
        Runtime::builder()
            .processors(1)
            .preemption(Preemption::Quantum(Duration::from_secs(3600)))
            .transparent_blocking(false)
            .on_event(move |e| {
                if matches!(e, Event::Preempted { .. }) {
                    preempted.fetch_add(1, Ordering::SeqCst);
                }
            })
            .build()
            .unwrap()
    }

    /// Asks for a preemption of the calling user thread, as the monitor does.
    fn request_preemption() {
        let m = Machine::here_fresh();
        m.request.store(REQ_PREEMPT, Ordering::Release);
        assert!(signal_thread(m.tid.load(Ordering::Relaxed)));
    }

    /// Sends preemption requests to kernel thread `m`'s user thread from an
    /// OS thread, every 200 µs, until `stop` (or 5 s).
    fn pester(m: &'static Machine, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
        let tid = m.tid.load(Ordering::Relaxed);
        let m = m as *const Machine as usize;
        std::thread::spawn(move || {
            let t = std::time::Instant::now();
            while !stop.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(5) {
                // SAFETY: the runtime's kernel thread outlives this helper
                // (joined before the runtime is dropped).
                unsafe { &*(m as *const Machine) }.request.store(REQ_PREEMPT, Ordering::Release);
                signal_thread(tid);
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    }

    #[test]
    fn a_request_nobody_made_for_a_high_thread_is_dropped() {
        // The High thread asks for its own preemption, as a late signal meant for the
        // thread before it would: taken, it handed the processor to the Normal thread
        // waiting in the next slot.
        let rt = runtime(Arc::default());
        let log = rt
            .block_on(|| {
                let log = Arc::new(std::sync::Mutex::new(Vec::new()));
                let l = log.clone();
                let normal = spawn(move || l.lock().unwrap().push("normal"));
                let l = log.clone();
                let high = crate::Builder::new()
                    .priority(crate::Priority::High)
                    .spawn(move || {
                        // Inside a section, so that the request is taken at its end (in
                        // our own code), not dropped where `tgkill` returns (in libc).
                        let m = Machine::enter_section();
                        request_preemption();
                        m.lower();
                        l.lock().unwrap().push("high");
                    })
                    .unwrap();
                high.join().unwrap();
                normal.join().unwrap();
                let v = log.lock().unwrap().clone();
                v
            })
            .unwrap();
        assert_eq!(log, ["high", "normal"]);
    }

    #[test]
    fn a_thread_spinning_in_its_own_code_is_switched_by_the_signal() {
        let preempted = Arc::new(AtomicUsize::new(0));
        let rt = runtime(preempted.clone());
        let n = rt
            .block_on(move || {
                let ran = Arc::new(AtomicBool::new(false));
                let r = ran.clone();
                let other = spawn(move || r.store(true, Ordering::SeqCst));
                let sender = pester(Machine::here_fresh(), ran.clone());
                // Never yields: only the signal can let the other thread run.
                while !ran.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                sender.join().unwrap();
                other.join().unwrap();
                preempted.load(Ordering::SeqCst)
            })
            .unwrap();
        assert!(n >= 1);
    }

    #[test]
    fn a_signal_inside_a_runtime_section_waits_for_its_end() {
        let preempted = Arc::new(AtomicUsize::new(0));
        let rt = runtime(preempted.clone());
        rt.block_on(move || {
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            let other = spawn(move || r.store(true, Ordering::SeqCst));
            let m = Machine::enter_section();
            request_preemption();
            // Deferred: nothing switched, and the request is remembered.
            assert!(!ran.load(Ordering::SeqCst), "switched inside a runtime section");
            assert_ne!(m.guard_word() & crate::machine::DEFERRED, 0);
            assert_eq!(preempted.load(Ordering::SeqCst), 0);
            // Ending the section takes it.
            m.lower();
            assert!(ran.load(Ordering::SeqCst), "the deferred preemption was not taken");
            assert_eq!(preempted.load(Ordering::SeqCst), 1);
            other.join().unwrap();
        })
        .unwrap();
    }

    /// A request deferred to a runtime section's end, inside a `no_preempt`
    /// region, waits for the region's end too (the handler defers to the
    /// section before it looks at the region).
    #[test]
    fn a_signal_inside_a_section_inside_no_preempt_waits_for_the_region() {
        let preempted = Arc::new(AtomicUsize::new(0));
        let rt = runtime(preempted.clone());
        rt.block_on(move || {
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            let other = spawn(move || r.store(true, Ordering::SeqCst));
            no_preempt(|| {
                let m = Machine::enter_section();
                request_preemption();
                m.lower();
                assert!(!ran.load(Ordering::SeqCst), "switched inside a no_preempt region");
                assert_eq!(preempted.load(Ordering::SeqCst), 0);
            });
            assert!(ran.load(Ordering::SeqCst), "the deferred preemption was not taken");
            assert_eq!(preempted.load(Ordering::SeqCst), 1);
            other.join().unwrap();
        })
        .unwrap();
    }

    /// A non-preemptible thread drops a request deferred to a section's end,
    /// as the handler drops one outside sections.
    #[test]
    fn a_non_preemptible_thread_ignores_a_signal_deferred_in_a_section() {
        let preempted = Arc::new(AtomicUsize::new(0));
        let rt = runtime(preempted.clone());
        rt.block_on(move || {
            crate::Builder::new()
                .preemptible(false)
                .spawn(move || {
                    let ran = Arc::new(AtomicBool::new(false));
                    let r = ran.clone();
                    let other = spawn(move || r.store(true, Ordering::SeqCst));
                    let m = Machine::enter_section();
                    request_preemption();
                    m.lower();
                    assert!(!ran.load(Ordering::SeqCst), "a non-preemptible thread was switched");
                    other.join().unwrap();
                })
                .unwrap()
                .join()
                .unwrap();
            assert_eq!(preempted.load(Ordering::SeqCst), 0);
        })
        .unwrap();
    }

    #[test]
    fn a_non_preemptible_thread_ignores_the_signal() {
        let preempted = Arc::new(AtomicUsize::new(0));
        let rt = runtime(preempted.clone());
        rt.block_on(move || {
            let inner = crate::Builder::new()
                .preemptible(false)
                .spawn(move || {
                    let ran = Arc::new(AtomicBool::new(false));
                    let r = ran.clone();
                    let other = spawn(move || r.store(true, Ordering::SeqCst));
                    let stop = Arc::new(AtomicBool::new(false));
                    let sender = pester(Machine::here_fresh(), stop.clone());
                    let t = std::time::Instant::now();
                    while t.elapsed() < Duration::from_millis(30) {
                        std::hint::spin_loop();
                    }
                    let before = ran.load(Ordering::SeqCst);
                    stop.store(true, Ordering::SeqCst);
                    sender.join().unwrap();
                    other.join().unwrap();
                    before
                })
                .unwrap();
            assert!(!inner.join().unwrap(), "a non-preemptible thread was switched");
            assert_eq!(preempted.load(Ordering::SeqCst), 0);
        })
        .unwrap();
    }
}
