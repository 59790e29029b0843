//! System V's and BSD's signal functions — `sigset`, `sighold`, `sigrelse`,
//! `sigignore`, `sigpause`, `sigblock`, `sigsetmask`, `siggetmask`,
//! `siginterrupt` — made of the library's POSIX ones.
//!
//! glibc builds them on its internal `__sigprocmask`, `__sigaction` and
//! `__sigsuspend`, which the dynamic linker does not bind to this library's
//! definitions. On a user thread that went behind the runtime's back:
//! - a mask changed by `sighold`, `sigrelse`, `sigset`, `sigblock` or
//!   `sigsetmask` changed the kernel thread's mask only; the runtime kept the
//!   user thread's old one (`pthread_sigmask` answered with it), applied it at
//!   the thread's next switch, and lent the changed one to the next user
//!   thread that ran on that kernel thread;
//! - a handler installed by `sigset` reached the kernel without the handler
//!   wrapper (`handlers.rs`), so a handler that waited and switched left its
//!   mask to another thread, as the Java virtual machine's did before the
//!   wrapper;
//! - `siginterrupt` rewrote the kernel's flags under the wrapper, leaving the
//!   program's recorded flags stale;
//! - `sigpause` waited in glibc's own cancellable `sigsuspend`, which the
//!   library's `pthread_cancel` does not reach, and outside the library's
//!   record of what the thread waits for.
//!
//! Each function here does what glibc 2.36's does, step by step, through
//! `sigprocmask`, `sigaction` and `sigsuspend` as this library defines them
//! (which pass to glibc's where the caller is no user thread).

use std::ffi::c_int;

/// glibc's `SIG_HOLD` (`<signal.h>`; the `libc` crate has none).
const SIG_HOLD: libc::sighandler_t = 2;

/// The number of signals a `sigset_t` bit may name (1 to 64 on Linux).
const NSIG: c_int = 65;

/// `sig` alone, as a set.
fn only(sig: c_int) -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is valid; `sigemptyset` and `sigaddset`
    // fill our own set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        set
    }
}

/// The BSD interfaces' mask: bit `n - 1` of an `int` is signal `n`, for the
/// first 32 signals (glibc's `sigset_set_old_mask`).
fn from_old_mask(mask: c_int) -> libc::sigset_t {
    // SAFETY: as in `only`; the first word of a sigset_t holds signals 1 to 64.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        std::ptr::write_unaligned(
            (&mut set as *mut libc::sigset_t).cast::<u64>(),
            u64::from(mask as u32),
        );
        set
    }
}

/// The first 32 signals of `set` as a BSD mask (glibc's `sigset_get_old_mask`).
fn to_old_mask(set: &libc::sigset_t) -> c_int {
    // SAFETY: a sigset_t is at least 8 bytes on Linux.
    let w = unsafe { std::ptr::read_unaligned((set as *const libc::sigset_t).cast::<u64>()) };
    w as u32 as c_int
}

/// `sigprocmask` as this library defines it; the old mask, or `None` with
/// `errno` set.
fn change_mask(how: c_int, set: Option<&libc::sigset_t>) -> Option<libc::sigset_t> {
    // SAFETY: an all-zero sigset_t is valid; filled by the call.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    let set = set.map_or(std::ptr::null(), |s| s as *const libc::sigset_t);
    // SAFETY: a valid set (or none) and our own out-parameter.
    (unsafe { crate::signal::sigprocmask(how, set, &mut old) } == 0).then_some(old)
}

/// `sigaction` as this library defines it; the old action, or `None` with
/// `errno` set.
fn change_action(sig: c_int, act: Option<&libc::sigaction>) -> Option<libc::sigaction> {
    // SAFETY: an all-zero sigaction is valid; filled by the call.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    let act = act.map_or(std::ptr::null(), |a| a as *const libc::sigaction);
    // SAFETY: a valid action (or none) and our own out-parameter.
    (unsafe { crate::handlers::sigaction(sig, act, &mut old) } == 0).then_some(old)
}

/// An action with `handler`, no flags and an empty mask (System V's).
fn plain_action(handler: libc::sighandler_t) -> libc::sigaction {
    // SAFETY: an all-zero sigaction is valid; its mask emptied below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    // SAFETY: our own set.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    act
}

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

fn is_member(set: &libc::sigset_t, sig: c_int) -> bool {
    // SAFETY: a valid set; `sig` checked by the callers.
    unsafe { libc::sigismember(set, sig) == 1 }
}

/// `sigset`: installs `disp` (System V's semantics: no flags, an empty
/// mask) and unblocks `sig`, or with `SIG_HOLD` blocks it; the previous
/// disposition, or `SIG_HOLD` when `sig` was blocked.
#[no_mangle]
pub extern "C" fn sigset(sig: c_int, disp: libc::sighandler_t) -> libc::sighandler_t {
    if disp == libc::SIG_ERR || !(1..NSIG).contains(&sig) {
        set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    let set = only(sig);
    if disp == SIG_HOLD {
        let Some(old) = change_mask(libc::SIG_BLOCK, Some(&set)) else { return libc::SIG_ERR };
        if is_member(&old, sig) {
            return SIG_HOLD;
        }
        return change_action(sig, None).map_or(libc::SIG_ERR, |a| a.sa_sigaction);
    }
    let Some(before) = change_action(sig, Some(&plain_action(disp))) else { return libc::SIG_ERR };
    let Some(old) = change_mask(libc::SIG_UNBLOCK, Some(&set)) else { return libc::SIG_ERR };
    if is_member(&old, sig) {
        SIG_HOLD
    } else {
        before.sa_sigaction
    }
}

/// Blocks or unblocks (`how`) the one signal `sig`: 0, or -1 with `errno`.
fn mask_one(how: c_int, sig: c_int) -> c_int {
    if !(1..NSIG).contains(&sig) {
        set_errno(libc::EINVAL);
        return -1;
    }
    change_mask(how, Some(&only(sig))).map_or(-1, |_| 0)
}

/// `sighold`: blocks `sig`.
#[no_mangle]
pub extern "C" fn sighold(sig: c_int) -> c_int {
    mask_one(libc::SIG_BLOCK, sig)
}

/// `sigrelse`: unblocks `sig`.
#[no_mangle]
pub extern "C" fn sigrelse(sig: c_int) -> c_int {
    mask_one(libc::SIG_UNBLOCK, sig)
}

/// `sigignore`: sets `sig`'s disposition to `SIG_IGN`.
#[no_mangle]
pub extern "C" fn sigignore(sig: c_int) -> c_int {
    change_action(sig, Some(&plain_action(libc::SIG_IGN))).map_or(-1, |_| 0)
}

/// `__sigpause`, what `<signal.h>`'s `sigpause` macro calls: waits for a
/// signal with the calling thread's mask less `sig_or_mask` (`is_sig`
/// non-zero, X/Open's) or with the BSD mask `sig_or_mask` (zero), in the
/// library's `sigsuspend` (a cancellation point).
#[no_mangle]
pub extern "C-unwind" fn __sigpause(sig_or_mask: c_int, is_sig: c_int) -> c_int {
    let Some(mut set) = change_mask(libc::SIG_BLOCK, None) else { return -1 };
    if is_sig != 0 {
        // SAFETY: our own set; glibc's `sigdelset` checks the number.
        if unsafe { libc::sigdelset(&mut set, sig_or_mask) } != 0 {
            return -1;
        }
    } else {
        set = from_old_mask(sig_or_mask);
    }
    // SAFETY: a valid set of our own.
    unsafe { crate::signal::sigsuspend(&set) }
}

/// `sigpause` as glibc exports it unversioned (BSD's: the argument is a mask).
#[no_mangle]
pub extern "C-unwind" fn sigpause(mask: c_int) -> c_int {
    __sigpause(mask, 0)
}

/// `__xpg_sigpause`, what `<signal.h>` binds `sigpause` to for X/Open
/// programs: the argument is one signal.
#[no_mangle]
pub extern "C-unwind" fn __xpg_sigpause(sig: c_int) -> c_int {
    __sigpause(sig, 1)
}

/// `sigblock`: blocks the BSD mask `mask`; the old mask.
#[no_mangle]
pub extern "C" fn sigblock(mask: c_int) -> c_int {
    change_mask(libc::SIG_BLOCK, Some(&from_old_mask(mask))).map_or(-1, |old| to_old_mask(&old))
}

/// `sigsetmask`: sets the mask to the BSD mask `mask`; the old mask.
#[no_mangle]
pub extern "C" fn sigsetmask(mask: c_int) -> c_int {
    change_mask(libc::SIG_SETMASK, Some(&from_old_mask(mask))).map_or(-1, |old| to_old_mask(&old))
}

/// `siggetmask`: the BSD mask of the calling thread.
#[no_mangle]
pub extern "C" fn siggetmask() -> c_int {
    sigblock(0)
}

/// `siginterrupt`: whether a system call `sig`'s handler interrupts ends
/// with `EINTR` (`flag` non-zero) or restarts (zero), by `SA_RESTART`.
#[no_mangle]
pub extern "C" fn siginterrupt(sig: c_int, flag: c_int) -> c_int {
    let Some(mut act) = change_action(sig, None) else { return -1 };
    if flag != 0 {
        act.sa_flags &= !libc::SA_RESTART;
    } else {
        act.sa_flags |= libc::SA_RESTART;
    }
    change_action(sig, Some(&act)).map_or(-1, |_| 0)
}
