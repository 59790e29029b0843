//! Running a handler for a signal on the stack the signal interrupted, as the
//! kernel would have run it without `SA_ONSTACK`: from inside a handler that
//! runs on the alternate signal stack, the kernel's frame is copied below the
//! interrupted stack pointer, and the interrupted context is made to call the
//! new handler there as the running one returns. Nothing here knows the
//! runtime: the caller names the handler, the mask it runs with and the
//! stack's bounds.
//!
//! The runtime's `SIGURG` handler runs on its kernel thread's alternate stack,
//! which every user thread that kernel thread runs shares (`guard.rs`,
//! `block_all_but_faults`). A program's own `SIGURG` handler, which the
//! runtime passes a signal that is not its own to (`shared.rs`, "The
//! program's `SIGURG`"), must not run there: one that waits on a library
//! primitive switches its user thread away with its frames on that stack, for
//! the kernel thread's next signal to overwrite. Moved to the interrupted
//! stack (the user thread's own), its frames go with the thread.
//!
//! The frame is x86-64 Linux's (arch/x86/kernel/signal_64.c, `struct
//! rt_sigframe`): the restorer's address (`pretcode`, glibc's `__restore_rt`),
//! the kernel's `ucontext` (whose `uc_sigmask` is 8 bytes, not glibc's 128),
//! the `siginfo`; the `xsave` area `uc_mcontext.fpregs` points to lies above
//! it, 64-byte aligned, its size in its software-reserved bytes
//! (`_fpx_sw_bytes.extended_size`, `FP_XSTATE_MAGIC1`), or 512 bytes of a
//! plain `fxsave` area. `rt_sigreturn` finds the frame 8 bytes below the stack
//! pointer (the handler's `ret` popped `pretcode`). The move:
//!
//! 1. below the interrupted stack pointer and its 128-byte red zone, a copy of
//!    the `xsave` area, 64-byte aligned; below it a copy of the frame, aligned
//!    as the kernel aligns one (`align_sigframe`: the stack pointer plus 8 a
//!    multiple of 16, as at a function's entry); the copy's `fpregs` names
//!    the copied area;
//! 2. the running frame's registers become the handler's entry: `rip` the
//!    handler, `rsp` the copy (whose first word is the restorer), `rdi`,
//!    `rsi`, `rdx` the signal, the copy's `siginfo` and `ucontext`, `rax` 0,
//!    the direction, trap and resume flags cleared (as the kernel clears
//!    them); its mask, which the running handler's return applies, the new
//!    handler's;
//! 3. the running handler returns: its `rt_sigreturn` starts the new handler
//!    on the interrupted stack with that mask; the new handler's return runs
//!    the restorer, whose `rt_sigreturn` restores the copy — the interrupted
//!    registers, mask, alternate-stack setting and `xsave` state — exactly as
//!    if the kernel had delivered the signal there.
//!
//! Moved only when the running frame is on the alternate stack and the
//! interrupted code is not: otherwise the frame already sits where the
//! kernel would have put the new handler's, and the caller calls it in place.

// Used by the `shared-library` build (`shared::pass_on`) and the tests.
#![cfg_attr(not(feature = "shared-library"), allow(dead_code))]

use std::ops::Range;

/// A three-argument (`SA_SIGINFO`) signal handler.
pub(crate) type Handler =
    unsafe extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// The System V ABI's red zone below the stack pointer, which the kernel
/// leaves alone when it pushes a frame.
const RED_ZONE: usize = 128;
/// A legacy `fxsave` area.
const FXSAVE_BYTES: usize = 512;
/// `_fpx_sw_bytes`, the software-reserved bytes at the end of the `fxsave`
/// image, say the area is an `xsave` one and how long it is.
const SW_BYTES: usize = 464;
const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
/// Room left below a moved frame for the handler itself (the kernel checks
/// none; a handler that then ran past the guard page would fault).
const HANDLER_ROOM: usize = 4096;
/// The flags the kernel clears for a handler: trap, direction, resume.
const CLEARED_FLAGS: i64 = 0x100 | 0x400 | 0x1_0000;

/// The calling kernel thread's alternate signal stack, as a range, when it
/// has one enabled. A system call (`sigaltstack`; not libc's, which a
/// preloaded library may define).
fn alternate_stack() -> Option<Range<usize>> {
    // SAFETY: a zeroed stack_t is valid; the kernel fills it.
    let mut ss: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: a query into our own struct.
    let r =
        unsafe { libc::syscall(libc::SYS_sigaltstack, std::ptr::null::<libc::stack_t>(), &mut ss) };
    (r == 0 && ss.ss_flags & libc::SS_DISABLE == 0)
        .then(|| ss.ss_sp as usize..ss.ss_sp as usize + ss.ss_size)
}

/// The length of the `xsave` (or `fxsave`) image at `fp`.
///
/// # Safety
/// `fp` is the kernel's image of a signal frame.
unsafe fn fp_bytes(fp: usize) -> usize {
    // SAFETY: the image is at least the 512 bytes of an `fxsave` area, whose
    // software-reserved words the kernel fills.
    let (magic, size) = unsafe {
        let sw = (fp + SW_BYTES) as *const u32;
        (sw.read_unaligned(), sw.add(1).read_unaligned() as usize)
    };
    if magic == FP_XSTATE_MAGIC1 && size >= FXSAVE_BYTES {
        size
    } else {
        FXSAVE_BYTES
    }
}

/// Makes the signal whose frame is `uc`/`info` (the running handler's, on
/// the alternate stack) call `handler` on the interrupted stack with `mask`
/// blocked, as the running handler returns (module docs). `bounds` is the
/// usable range of the interrupted stack when it is known (a user thread's);
/// `None` trusts it, as the kernel does. `false`, with nothing changed, when
/// the frame is not on the alternate stack, the interrupted code is, or the
/// stack has no room: the caller then calls `handler` in place.
///
/// # Safety
/// `uc` and `info` are the running handler's arguments (an `SA_SIGINFO`
/// handler's frame the kernel built); nothing touches the frame after this
/// but the handler's return.
pub(crate) unsafe fn call_on_interrupted_stack(
    uc: *mut libc::ucontext_t,
    info: *mut libc::siginfo_t,
    handler: Handler,
    mask: u64,
    bounds: Option<Range<usize>>,
) -> bool {
    let (ucp, infop) = (uc as usize, info as usize);
    // The kernel's `ucontext` sits between `pretcode` and the `siginfo`.
    if infop <= ucp || infop - ucp > 1024 {
        return false;
    }
    let frame = ucp - 8;
    let frame_bytes = 8 + (infop - ucp) + std::mem::size_of::<libc::siginfo_t>();
    let Some(alt) = alternate_stack() else { return false };
    // SAFETY: the kernel's frame, ours until the handler returns.
    let ucr = unsafe { &mut *uc };
    let sp = ucr.uc_mcontext.gregs[libc::REG_RSP as usize] as usize;
    if !alt.contains(&frame) || alt.contains(&sp) {
        return false;
    }
    let fp = ucr.uc_mcontext.fpregs as usize;
    // SAFETY: the kernel's image, named by its own frame.
    let fp_len = if fp == 0 { 0 } else { unsafe { fp_bytes(fp) } };
    let Some(top) = sp.checked_sub(RED_ZONE + fp_len + frame_bytes + 64) else { return false };
    let fp_new = (sp - RED_ZONE - fp_len) & !63;
    let new = (((fp_new - frame_bytes) + 8) & !15) - 8;
    debug_assert!(new >= top);
    if let Some(b) = &bounds {
        if sp > b.end || new < b.start + HANDLER_ROOM {
            return false;
        }
    }
    // SAFETY: below the interrupted code's stack pointer and red zone, on
    // its own stack (checked against its bounds when known): memory nothing
    // live uses, which the kernel would have written its frame to; the
    // sources are the kernel's frame and image, on another stack.
    unsafe {
        std::ptr::copy_nonoverlapping(frame as *const u8, new as *mut u8, frame_bytes);
        if fp != 0 {
            std::ptr::copy_nonoverlapping(fp as *const u8, fp_new as *mut u8, fp_len);
        }
    }
    let (new_uc, new_info) = (new + 8, new + 8 + (infop - ucp));
    if fp != 0 {
        // SAFETY: the copy just written, laid out as the original.
        unsafe { (*(new_uc as *mut libc::ucontext_t)).uc_mcontext.fpregs = fp_new as *mut _ };
    }
    let g = &mut ucr.uc_mcontext.gregs;
    g[libc::REG_RIP as usize] = handler as usize as i64;
    g[libc::REG_RSP as usize] = new as i64;
    g[libc::REG_RDI as usize] = i64::from(
        // SAFETY: the kernel's siginfo.
        unsafe { (*info).si_signo },
    );
    g[libc::REG_RSI as usize] = new_info as i64;
    g[libc::REG_RDX as usize] = new_uc as i64;
    g[libc::REG_RAX as usize] = 0;
    g[libc::REG_EFL as usize] &= !CLEARED_FLAGS;
    // SAFETY: the kernel's 8-byte mask, the first word of glibc's.
    unsafe { std::ptr::write_unaligned((&mut ucr.uc_sigmask as *mut libc::sigset_t).cast(), mask) };
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

    /// A real-time signal no other test of this crate uses.
    fn sig() -> libc::c_int {
        libc::SIGRTMIN() + 7
    }
    fn other() -> libc::c_int {
        libc::SIGRTMIN() + 8
    }

    static ALT: AtomicUsize = AtomicUsize::new(0);
    static MOVED: AtomicI32 = AtomicI32::new(0);
    static RAN_AT: AtomicUsize = AtomicUsize::new(0);
    static MASK_SEEN: AtomicU64 = AtomicU64::new(0);
    static VALUE: AtomicUsize = AtomicUsize::new(0);

    fn mask_now() -> u64 {
        let mut old = 0u64;
        // SAFETY: a query of 8 bytes into our own word.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_BLOCK,
                std::ptr::null::<u64>(),
                &mut old,
                8,
            )
        };
        old
    }

    unsafe extern "C" fn moved(s: libc::c_int, info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
        let here = 0u8;
        RAN_AT.store(&here as *const u8 as usize, Ordering::SeqCst);
        MASK_SEEN.store(mask_now(), Ordering::SeqCst);
        // SAFETY: the copied siginfo of a queued signal.
        VALUE.store(unsafe { (*info).si_value().sival_ptr } as usize, Ordering::SeqCst);
        MOVED.store(s, Ordering::SeqCst);
    }

    unsafe extern "C" fn on_alt(
        _s: libc::c_int,
        info: *mut libc::siginfo_t,
        uc: *mut libc::c_void,
    ) {
        let here = 0u8;
        ALT.store(&here as *const u8 as usize, Ordering::SeqCst);
        let uc = uc.cast::<libc::ucontext_t>();
        // SAFETY: the kernel's first mask word.
        let interrupted = unsafe {
            std::ptr::read_unaligned((&(*uc).uc_sigmask as *const libc::sigset_t).cast::<u64>())
        };
        let extra = 1u64 << (other() - 1);
        // SAFETY: our own frame.
        if !unsafe { call_on_interrupted_stack(uc, info, moved, interrupted | extra, None) } {
            MOVED.store(-1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_handler_runs_on_the_interrupted_stack_with_its_mask_and_returns_there() {
        std::thread::spawn(|| {
            // SAFETY: an alternate stack of our own, kept until the thread
            // removes it below; a handler with the SA_SIGINFO signature.
            unsafe {
                let len = 64 * 1024;
                let mem = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(mem, libc::MAP_FAILED);
                let ss = libc::stack_t { ss_sp: mem, ss_flags: 0, ss_size: len };
                assert_eq!(
                    libc::syscall(
                        libc::SYS_sigaltstack,
                        &ss,
                        std::ptr::null_mut::<libc::stack_t>()
                    ),
                    0
                );
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_alt as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut sa.sa_mask);
                assert_eq!(libc::sigaction(sig(), &sa, std::ptr::null_mut()), 0);
                let before = mask_now();
                let x = std::hint::black_box(1.25f64);
                let mut si: libc::siginfo_t = std::mem::zeroed();
                si.si_signo = sig();
                si.si_code = libc::SI_QUEUE;
                // `si_value` of a queued signal: after si_pid and si_uid.
                let words = (&mut si as *mut libc::siginfo_t).cast::<u64>();
                *words.add(3) = 0x5eed;
                let tid = libc::syscall(libc::SYS_gettid);
                let r = libc::syscall(libc::SYS_rt_tgsigqueueinfo, libc::getpid(), tid, sig(), &si);
                assert_eq!(r, 0);
                assert_eq!(std::hint::black_box(x) * 2.0, 2.5);
                assert_eq!(MOVED.load(Ordering::SeqCst), sig(), "the handler was not moved");
                let ran = RAN_AT.load(Ordering::SeqCst);
                let here = 0u8;
                let alt = mem as usize..mem as usize + len;
                assert!(
                    alt.contains(&ALT.load(Ordering::SeqCst)),
                    "the first handler not on the alternate stack"
                );
                assert!(!alt.contains(&ran), "the moved handler ran on the alternate stack");
                // On this thread's own stack, below this frame.
                let me = &here as *const u8 as usize;
                assert!(
                    ran < me && me - ran < 256 * 1024,
                    "ran at {ran:#x}, the thread is at {me:#x}"
                );
                assert_eq!(MASK_SEEN.load(Ordering::SeqCst), before | 1u64 << (other() - 1));
                assert_eq!(VALUE.load(Ordering::SeqCst), 0x5eed);
                assert_eq!(mask_now(), before, "the interrupted mask was not restored");
                let off = libc::stack_t {
                    ss_sp: std::ptr::null_mut(),
                    ss_flags: libc::SS_DISABLE,
                    ss_size: 0,
                };
                libc::syscall(libc::SYS_sigaltstack, &off, std::ptr::null_mut::<libc::stack_t>());
                libc::munmap(mem, len);
            }
        })
        .join()
        .unwrap();
    }
}
