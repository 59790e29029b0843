//! The program's signal handlers, run through one wrapper that tells the
//! runtime the signal mask the kernel gives them: `sigaction`, `signal`,
//! `bsd_signal`, `sysv_signal`.
//!
//! The kernel blocks a handler's `sa_mask` and its own signal while the
//! handler runs, and `sigreturn` restores the interrupted mask: changes the
//! runtime does not see. The runtime applies each user thread's mask to the
//! kernel thread that resumes it, skipping the system call when its record
//! of that kernel thread's mask already matches (`schedlab_rt::shared`,
//! "Signals"). A handler that waits on one of the library's primitives — the
//! Java virtual machine's `SIGSEGV` handler takes a lock while it turns a
//! fault into a `StackOverflowError` or a `NullPointerException` — switched
//! its kernel thread to another user thread, which then ran with the
//! handler's mask (`SIGSEGV` blocked), and its own next fault killed the
//! process (a `java` program whose 16 threads each caught a thousand null
//! dereferences and one stack overflow died in 6 runs of 8 on two
//! processors).
//!
//! So a handler the program installs is recorded here, and the kernel is
//! given [`wrapper`] in its place, with the program's flags (and
//! `SA_SIGINFO`) and mask. On a user thread the wrapper records the
//! handler's mask for the runtime (`schedlab_rt::shared::handler_mask`:
//! the interrupted mask, the handler's `sa_mask` and its signal unless
//! `SA_NODEFER`) before it calls the program's handler, and the mask
//! `sigreturn` will restore after, so a switch inside the handler applies
//! the right mask on each side; a `pthread_kill` the handler's mask kept
//! pending in the library is raised as the handler ends, with every signal
//! blocked until `sigreturn` (so nothing nests and moves the thread), for the
//! kernel to deliver once `sigreturn` unblocks it on the same kernel thread.
//! Asking for a disposition answers with the
//! program's handler and flags, as the kernel would have. The runtime's own
//! handlers (the preemption signal, stack-overflow reports), which are
//! functions of this library, and `SIG_DFL`/`SIG_IGN` go to the kernel as
//! they are.
//!
//! # Process-directed signals
//!
//! The wrapper is also where a process-directed signal is told apart from
//! the program's threads' (`procsig.rs`). On a kernel thread of the runtime
//! that runs no user thread (a processor spinning for work with the mask of
//! the last thread it ran), the program's handler is not run: the `siginfo` is saved and the forwarder places the
//! signal on a thread that accepts it. A signal the forwarder sent by
//! `tgkill` (a `SI_TKILL` from this process with a saved `siginfo` for this
//! kernel thread) reaches the handler with the original `siginfo` (the
//! `si_pid` of `kill`, the `si_value` of `sigqueue`, the `si_status` of a
//! `SIGCHLD`). `SA_RESETHAND` is done here, as the handler starts, and not
//! given to the kernel, which would reset the disposition on the kernel
//! thread that first took the signal.
//!
//! # The alternate stack
//!
//! `sigreturn` restores one more piece of kernel-thread state from the
//! handler's frame: the alternate signal stack (`uc_stack`), which the kernel
//! recorded there as the one of the kernel thread the signal was delivered
//! on. A handler that waited and ended on another kernel thread gave that one
//! the first one's alternate stack, where the runtime runs its own handlers
//! (`SA_ONSTACK`): two kernel threads then ran the preemption handler on the
//! same memory at once, each overwriting the other's frames (the `java`
//! program above died in the runtime's preemption handler about one run in
//! ten, with another kernel thread's registers). So the wrapper writes the
//! current kernel thread's alternate stack into the frame at every handler's
//! end, as the last thing before `sigreturn`: this library and the C library
//! are no safe points, so nothing moves the thread again before it returns.
//! At every end, not only when the handler ended on another kernel thread
//! than it began on: the frame may have been built on another one than the
//! wrapper begins on. Two signals delivered in one return to user space get
//! two frames, the second interrupting the first handler before its first
//! instruction; if the second handler moves the thread, the first begins and
//! ends on the new kernel thread with a frame built on the old one (the Open
//! POSIX suite's `pthread_setschedparam/5-1`, whose two senders' signals
//! come in together while its thread is in a system call, died so about one
//! run in five: two kernel threads ran the runtime's handlers on one
//! alternate stack).
//!
//! A handler may also leave by `siglongjmp` (or `longjmp`) to a `sigsetjmp`
//! that saved the mask, which glibc restores with a system call of its own:
//! the jump functions are interposed too, and tell the runtime the mask the
//! jump restores before glibc's jump applies it (without, the runtime kept
//! the handler's mask for the thread, with the handled signal blocked, and
//! applied it at the thread's next switch: a second fault then killed the
//! process).
//!
//! # A handler that interrupts the runtime
//!
//! A signal may land while the user thread runs the runtime's own code (a
//! runtime section: a wake-up's push on the processor's run queue, a
//! switch), which is not re-entrant. A handler that calls the runtime there
//! (`sem_post` waking a thread, the usual way a handler hands work on) lost
//! a thread of the program or corrupted the processor. So the wrapper runs
//! no program handler inside a section: the signal is kept pending for the
//! thread, with its `siginfo`, and delivered at the section's end, where
//! this wrapper runs again for it (`signal::defer_in_section`). A fault
//! (`SIGSEGV` from the instruction itself) is not deferred; nor is a
//! process-directed signal the thread blocks (its kernel thread's mask was
//! still another thread's, mid-switch): that one goes to a thread that
//! accepts it (`procsig.rs`).
//!
//! System V's `sigset` and its kin are made of this `sigaction` (`sysv.rs`).
//! Not covered: a handler installed with the `rt_sigaction` system call
//! directly. A handler that
//! runs on an alternate signal stack and waits on a library primitive
//! still switches its kernel thread (its frames would then be on that
//! kernel thread's alternate stack while another thread's signal may use
//! it); the runtime never preempts one there.

use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

/// glibc's definitions.
mod next {
    crate::glibc::real!(sigaction: fn(std::ffi::c_int, *const libc::sigaction, *mut libc::sigaction) -> std::ffi::c_int);
    crate::glibc::real!(siglongjmp: fn(*mut std::ffi::c_void, std::ffi::c_int) -> ());
    crate::glibc::real!(longjmp: fn(*mut std::ffi::c_void, std::ffi::c_int) -> ());
    crate::glibc::real!(__longjmp_chk: fn(*mut std::ffi::c_void, std::ffi::c_int) -> ());
}

/// Signals 1 to 64.
const SIGNALS: usize = 65;

/// What the program gave `sigaction` for one signal, while its disposition
/// is [`wrapper`].
struct Installed {
    /// The program's handler (`sa_sigaction`, or `sa_handler` without
    /// `SA_SIGINFO`); 0 when the kernel holds the program's disposition
    /// itself.
    handler: AtomicUsize,
    /// The program's `sa_flags`.
    flags: AtomicI32,
    /// The first word of the program's `sa_mask`.
    mask: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Installed =
    Installed { handler: AtomicUsize::new(0), flags: AtomicI32::new(0), mask: AtomicU64::new(0) };

static INSTALLED: [Installed; SIGNALS] = [EMPTY; SIGNALS];

fn word(set: &libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t is at least 8 bytes on Linux.
    unsafe { std::ptr::read_unaligned((set as *const libc::sigset_t).cast::<u64>()) }
}

fn bit(sig: c_int) -> u64 {
    1u64 << (sig - 1)
}

/// Whether `handler` is a real function the program wants run (not
/// `SIG_DFL`, `SIG_IGN` or `SIG_HOLD`), and not one of the runtime's.
fn wrappable(handler: usize) -> bool {
    handler > 2 && !crate::thread::in_this_library(handler)
}

/// The kernel runs every program handler through this: on a user thread it
/// tells the runtime the mask the handler runs with, and the one
/// `sigreturn` restores, and keeps the alternate stack of the kernel thread
/// the handler ends on (module docs).
pub(crate) unsafe extern "C" fn wrapper(
    sig: c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    let Some(slot) = usize::try_from(sig).ok().and_then(|s| INSTALLED.get(s)) else { return };
    let handler = slot.handler.load(Ordering::Acquire);
    if handler == 0 {
        return;
    }
    // Taken from the kernel, and not yet handled here or recorded in the
    // library: a thread that ends waits while this lives (`procsig::Arriving`).
    let arriving = crate::procsig::Arriving::begin();
    let flags = slot.flags.load(Ordering::Relaxed);
    let uc = ctx.cast::<libc::ucontext_t>();
    let on_user = crate::thread::on_user_thread();
    // A process-directed signal the forwarder sent here by `tgkill`
    // (`procsig.rs`): the handler gets its own `siginfo`, not the `tgkill`'s.
    // It is in transit (`procsig::InTransit`) until it is passed on,
    // deferred, or about to be handled here.
    let mut original = MaybeUninit::<libc::siginfo_t>::uninit();
    let mut info = info;
    let mut in_transit = None;
    // SAFETY: the kernel's siginfo for this delivery (`SA_SIGINFO`).
    let given = unsafe { info.as_ref() };
    if let Some((o, mark)) = given.and_then(|i| crate::procsig::original_info(sig, i)) {
        info = original.write(o);
        in_transit = Some(mark);
    }
    // A `pthread_kill`'s doorbell (`signal::answer_doorbell`): the pending
    // signal it rang for, if its thread is the one here; nothing otherwise.
    let me = on_user.then(crate::thread::current);
    match given.and_then(|i| crate::signal::answer_doorbell(sig, i, me)) {
        Some(Some(own)) => info = original.write(own),
        Some(None) => return,
        None => {}
    }
    // On a kernel thread that runs no thread of the program (a runtime
    // processor spinning for work with the mask of the last user thread it
    // ran, or the library's forwarder): the signal is the process's, and
    // goes to a thread that accepts it (`procsig.rs`).
    if !on_user
        && crate::runtime::started().is_some()
        && (schedlab_rt::shared::on_idle_runtime_thread() || crate::procsig::on_forwarder())
    {
        // SAFETY: as above, or our own copy.
        let i = match unsafe { info.as_ref() } {
            Some(i) => *i,
            None => crate::procsig::bare_info(sig),
        };
        if crate::procsig::pass_on(sig, &i) {
            return;
        }
    }
    // Inside a runtime section on a user thread: at the section's end
    // (`signal::defer_in_section`), where this wrapper runs again for it.
    if on_user && crate::signal::defer_in_section(sig, info) {
        return;
    }
    // Handled here from now on (and the handler may never return).
    drop(in_transit);
    drop(arriving);
    if flags & libc::SA_RESETHAND != 0 {
        reset_to_default(sig, slot);
    }
    let user = on_user && !uc.is_null();
    if user {
        // SAFETY: the kernel's signal frame for this delivery.
        let interrupted = word(unsafe { &(*uc).uc_sigmask });
        let own = if flags & libc::SA_NODEFER != 0 { 0 } else { bit(sig) };
        schedlab_rt::shared::handler_mask(interrupted | slot.mask.load(Ordering::Relaxed) | own);
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program installed this three-argument handler.
        let h: unsafe extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        // SAFETY: the kernel's arguments, passed on.
        unsafe { h(sig, info, ctx) };
    } else {
        // SAFETY: the program installed this one-argument handler.
        let h: unsafe extern "C" fn(c_int) = unsafe { std::mem::transmute(handler) };
        // SAFETY: as above.
        unsafe { h(sig) };
    }
    if user {
        // What follows must leave the interrupted code's `errno` as the
        // handler left it.
        // SAFETY: the calling thread's errno.
        let errno = unsafe { *libc::__errno_location() };
        // The handler may have changed the mask `sigreturn` restores.
        // SAFETY: as above.
        schedlab_rt::shared::handler_mask(word(unsafe { &(*uc).uc_sigmask }));
        // Nothing nests from here on, so nothing moves the thread to another
        // kernel thread before `sigreturn` (this library and the C library
        // are no safe points): what is raised below is held by the kernel on
        // this kernel thread, where `sigreturn` opens it. (Raised first and
        // blocked after, a signal that nested in between could move the
        // thread, whose `sigreturn` then opened the raised signal on another
        // kernel thread than the one holding it: it stayed there, never
        // delivered, and its sender waited for its answer for good — the
        // Open POSIX suite's `pthread_setschedparam/5-1` hung about one run
        // in 25.) A nested handler's end would also have recorded its own
        // mask in place of the one `sigreturn` restores.
        block_until_sigreturn();
        // A signal that nested between the record above and the block left
        // its own record (this handler's mask) in place of the one
        // `sigreturn` restores: recorded again, now that nothing nests
        // (without, the thread kept this handler's signal blocked in its
        // record for good, and the forwarder found no taker: the suite's
        // `pthread_cond_timedwait/4-3` hung about one run in ten).
        // SAFETY: as above.
        schedlab_rt::shared::handler_mask(word(unsafe { &(*uc).uc_sigmask }));
        // A `pthread_kill` that came while the handler's mask blocked its
        // signal is still pending in the library, where nothing else would
        // look again (a sender waiting for its answer hung): raised now, the
        // kernel holds it until `sigreturn` unblocks it, as it would have.
        // So is a process-directed one that no thread accepted meanwhile
        // (`procsig.rs`; the Open POSIX suite's `pthread_cond_signal/4-2`,
        // whose one accepting thread is in a handler at every other `kill`,
        // hung without).
        std::sync::atomic::fence(Ordering::SeqCst);
        crate::signal::take_process_pending();
        crate::signal::deliver_pending();
        // SAFETY: as above; last, so that nothing can move the thread again
        // before `sigreturn` (this library and the C library are no safe
        // points).
        unsafe { keep_alternate_stack(uc) };
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
    }
}

/// The signals whose disposition is a program handler run by [`wrapper`].
fn handled() -> u64 {
    (1..SIGNALS)
        .filter(|&s| INSTALLED[s].handler.load(Ordering::Acquire) != 0)
        .fold(0, |m, s| m | bit(s as c_int))
}

/// `SA_RESETHAND`, done as the handler starts: the disposition goes back to
/// `SIG_DFL` (with `SA_NODEFER`, which the kernel gives it too, the program
/// asked for it with `sysv_signal`).
fn reset_to_default(sig: c_int, slot: &Installed) {
    // SAFETY: an all-zero sigaction is `SIG_DFL` with no flags and an empty
    // mask.
    let dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a valid action; glibc's sigaction is async-signal-safe.
    if unsafe { next::sigaction()(sig, &dfl, std::ptr::null_mut()) } == 0 {
        slot.handler.store(0, Ordering::Release);
        crate::procsig::set_handled(handled());
    }
}

/// Makes the frame `sigreturn` will restore name the calling kernel thread's
/// alternate signal stack, in case the signal was delivered on another
/// kernel thread (module docs, "The alternate stack"): one system call, a
/// query, per handler.
///
/// # Safety
/// `uc` is the kernel's signal frame of the handler that is ending.
unsafe fn keep_alternate_stack(uc: *mut libc::ucontext_t) {
    // SAFETY: a zeroed stack_t is valid; the kernel fills it.
    let mut own: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: a query into our own struct.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut own) } == 0 {
        // SAFETY: the caller's frame, ours until `sigreturn`.
        unsafe { (*uc).uc_stack = own };
    }
}

/// `sigaction`: a program handler is recorded and [`wrapper`] installed for
/// it; a query answers with the program's own disposition.
///
/// # Safety
/// As `sigaction(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if sig == libc::SIGURG {
        // The runtime's signal: its handler stays in the kernel (`urg.rs`).
        // SAFETY: the caller's arguments.
        if let Some(r) = unsafe { crate::urg::sigaction(act, old) } {
            return r;
        }
    }
    let slot = usize::try_from(sig).ok().filter(|&s| s > 0).and_then(|s| INSTALLED.get(s));
    let Some(slot) = slot else {
        // SAFETY: the caller's arguments; glibc reports EINVAL.
        return unsafe { next::sigaction()(sig, act, old) };
    };
    let before = (
        slot.handler.load(Ordering::Acquire),
        slot.flags.load(Ordering::Relaxed),
        slot.mask.load(Ordering::Relaxed),
    );
    // SAFETY: `act`, if not null, is the caller's valid action.
    let wanted = unsafe { act.as_ref() };
    let r = match wanted {
        Some(a) if wrappable(a.sa_sigaction) => {
            let mut given = *a;
            given.sa_sigaction = wrapper as *const () as usize;
            // `SA_RESETHAND` is the wrapper's to do, where the handler runs:
            // the kernel would reset the disposition on the kernel thread
            // that first took a signal it passes on (`procsig.rs`).
            given.sa_flags = (given.sa_flags | libc::SA_SIGINFO) & !libc::SA_RESETHAND;
            slot.flags.store(a.sa_flags, Ordering::Relaxed);
            slot.mask.store(word(&a.sa_mask), Ordering::Relaxed);
            slot.handler.store(a.sa_sigaction, Ordering::Release);
            // SAFETY: a valid action made from the caller's.
            let r = unsafe { next::sigaction()(sig, &given, old) };
            if r != 0 {
                slot.handler.store(before.0, Ordering::Release);
                slot.flags.store(before.1, Ordering::Relaxed);
                slot.mask.store(before.2, Ordering::Relaxed);
            }
            r
        }
        Some(_) => {
            // SAFETY: the caller's arguments.
            let r = unsafe { next::sigaction()(sig, act, old) };
            if r == 0 {
                slot.handler.store(0, Ordering::Release);
            }
            r
        }
        // SAFETY: a query, into the caller's `old`.
        None => unsafe { next::sigaction()(sig, act, old) },
    };
    if r == 0 && wanted.is_some() {
        crate::procsig::set_handled(handled());
    }
    if r == 0 {
        // SAFETY: `old`, if not null, is the caller's, just filled.
        if let Some(o) = unsafe { old.as_mut() } {
            if o.sa_sigaction == wrapper as *const () as usize && before.0 != 0 {
                o.sa_sigaction = before.0;
                o.sa_flags = before.1;
            }
        }
    }
    r
}

/// Records `handler` (0: none) with `flags` and `mask` as what [`wrapper`]
/// runs for `sig`, for a signal whose disposition in the kernel is not the
/// program's (`urg.rs`: `SIGURG`, whose kernel handler is the runtime's).
pub(crate) fn record(sig: c_int, handler: usize, flags: c_int, mask: u64) {
    if let Some(slot) = usize::try_from(sig).ok().and_then(|s| INSTALLED.get(s)) {
        slot.flags.store(flags, Ordering::Relaxed);
        slot.mask.store(mask, Ordering::Relaxed);
        slot.handler.store(handler, Ordering::Release);
    }
}

/// The classic `signal`, with BSD's semantics as glibc gives them (the
/// handler stays, its signal is blocked while it runs, calls restart).
fn install(
    sig: c_int,
    handler: libc::sighandler_t,
    flags: c_int,
    block_own: bool,
) -> libc::sighandler_t {
    // SAFETY: an all-zero sigaction is valid; filled below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: our own set.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        if block_own && sig > 0 && sig < SIGNALS as c_int {
            libc::sigaddset(&mut act.sa_mask, sig);
        }
    }
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid action and out-parameter.
    if unsafe { sigaction(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// `signal`: BSD's semantics, glibc's default.
#[no_mangle]
pub extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    install(sig, handler, libc::SA_RESTART, true)
}

/// `bsd_signal`: as `signal`.
#[no_mangle]
pub extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    install(sig, handler, libc::SA_RESTART, true)
}

/// `sysv_signal`: System V's semantics (the handler is reset on delivery,
/// its signal not blocked, calls not restarted).
#[no_mangle]
pub extern "C" fn sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    install(sig, handler, libc::SA_RESETHAND | libc::SA_NODEFER, false)
}

/// `__sysv_signal`, what `<signal.h>` maps `signal` to under `_XOPEN_SOURCE`
/// without `_DEFAULT_SOURCE`.
#[no_mangle]
pub extern "C" fn __sysv_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    sysv_signal(sig, handler)
}

/// glibc's `jmp_buf` (`struct __jmp_buf_tag` on x86-64): the registers, then
/// whether the mask was saved, then the mask.
const MASK_WAS_SAVED: usize = 64;
const SAVED_MASK: usize = 72;

/// Before a jump that restores a saved mask: tells the runtime the mask the
/// jump restores (module docs).
///
/// # Safety
/// `env` is a `jmp_buf` filled by `setjmp` or `sigsetjmp`.
unsafe fn before_jump(env: *mut std::ffi::c_void) {
    if env.is_null() || !crate::thread::on_user_thread() {
        return;
    }
    // SAFETY: a filled `jmp_buf`: these fields are glibc's layout.
    let (saved, mask) = unsafe {
        let b = env.cast::<u8>();
        (
            std::ptr::read_unaligned(b.add(MASK_WAS_SAVED).cast::<c_int>()),
            std::ptr::read_unaligned(b.add(SAVED_MASK).cast::<u64>()),
        )
    };
    if saved != 0 {
        schedlab_rt::shared::handler_mask(mask);
        // As at a handler's end: what the restored mask opens, the kernel
        // delivers once glibc's jump applies it.
        std::sync::atomic::fence(Ordering::SeqCst);
        crate::signal::take_process_pending();
        crate::signal::deliver_pending();
        // As at a handler's end: a nested handler's end recorded another;
        // nothing nests until the jump restores the mask.
        block_until_sigreturn();
        schedlab_rt::shared::handler_mask(mask);
    }
}

/// Blocks every signal but the runtime's own and the synchronous faults on
/// the calling kernel thread, at a handler's end (or before a jump that
/// restores a mask), so that no handler nests before the mask the runtime
/// recorded is the kernel's again.
fn block_until_sigreturn() {
    let open = [
        schedlab_rt::shared::runtime_signal(),
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
        libc::SIGTRAP,
    ];
    let block = !open.iter().fold(0u64, |m, &s| m | bit(s));
    schedlab_rt::shared::sigprocmask(libc::SIG_BLOCK, Some(block));
}

/// `siglongjmp`: glibc's, after [`before_jump`].
///
/// # Safety
/// As `siglongjmp(3)`.
#[no_mangle]
pub unsafe extern "C" fn siglongjmp(env: *mut std::ffi::c_void, val: c_int) -> ! {
    // SAFETY: the caller's `jmp_buf`.
    unsafe {
        before_jump(env);
        next::siglongjmp()(env, val);
    }
    std::process::abort()
}

/// `longjmp`: glibc's, after [`before_jump`] (glibc's `longjmp` restores a
/// mask `sigsetjmp` saved, as `siglongjmp` does).
///
/// # Safety
/// As `longjmp(3)`.
#[no_mangle]
pub unsafe extern "C" fn longjmp(env: *mut std::ffi::c_void, val: c_int) -> ! {
    // SAFETY: the caller's `jmp_buf`.
    unsafe {
        before_jump(env);
        next::longjmp()(env, val);
    }
    std::process::abort()
}

/// `__longjmp_chk`, what `_FORTIFY_SOURCE` makes of `longjmp` and
/// `siglongjmp`: glibc's, after [`before_jump`].
///
/// # Safety
/// As `longjmp(3)`.
#[no_mangle]
pub unsafe extern "C" fn __longjmp_chk(env: *mut std::ffi::c_void, val: c_int) -> ! {
    // SAFETY: the caller's `jmp_buf`.
    unsafe {
        before_jump(env);
        next::__longjmp_chk()(env, val);
    }
    std::process::abort()
}
