//! The one thread-local word of the library: the calling thread's
//! [`ThreadData`](crate::thread::ThreadData), or null for a thread that never
//! called in.
//!
//! It lives in the library's static TLS block (initial-exec model: the
//! offset from the thread pointer is a load from the GOT, the word one
//! `fs`-relative load), so it is as per-thread as the thread pointer: a user
//! thread's own block holds its data from birth (written by its creator into
//! the new block, [`set_in`]); a kernel thread of the program gets data the
//! first time it calls in. The initial-exec model needs the library in the
//! static TLS set, which `LD_PRELOAD` gives (checked by [`check`]); a
//! `dlopen` of it later would find no room.

use std::arch::{asm, global_asm};

global_asm!(
    ".pushsection .tbss.schedlab_pthread_self,\"awT\",@nobits",
    ".globl schedlab_pthread_self",
    ".hidden schedlab_pthread_self",
    ".type schedlab_pthread_self,@object",
    ".p2align 3",
    "schedlab_pthread_self:",
    ".zero 8",
    ".size schedlab_pthread_self, 8",
    ".popsection",
);

/// The word's offset from the thread pointer (the same in every block: the
/// static TLS layout is the process's).
#[inline(always)]
fn offset() -> isize {
    let off: isize;
    // SAFETY: loads the offset the loader wrote in our GOT entry.
    unsafe {
        asm!(
            "mov {o}, qword ptr [rip + schedlab_pthread_self@gottpoff]",
            o = out(reg) off,
            options(nostack, pure, readonly, preserves_flags)
        )
    };
    off
}

/// The calling thread's word.
#[inline(always)]
pub(crate) fn get() -> usize {
    let v: usize;
    // SAFETY: the word in the calling thread's static TLS block.
    unsafe {
        asm!(
            "mov {v}, qword ptr fs:[{o}]",
            o = in(reg) offset(),
            v = out(reg) v,
            options(nostack, readonly, preserves_flags)
        )
    };
    v
}

/// Sets the calling thread's word.
#[inline(always)]
pub(crate) fn set(v: usize) {
    // SAFETY: the word in the calling thread's static TLS block.
    unsafe {
        asm!(
            "mov qword ptr fs:[{o}], {v}",
            o = in(reg) offset(),
            v = in(reg) v,
            options(nostack, preserves_flags)
        )
    };
}

/// The word of the thread whose thread pointer is `tp`.
///
/// # Safety
///
/// `tp` must be a live thread control block of this process.
#[inline]
pub(crate) unsafe fn get_in(tp: usize) -> usize {
    // SAFETY: forwarded: the block's static TLS holds our word at `offset`.
    unsafe { ((tp as isize + offset()) as *const usize).read_volatile() }
}

/// Sets the word of the thread whose thread pointer is `tp`.
///
/// # Safety
///
/// `tp` must be a live thread control block of this process that no running
/// thread reads the word of meanwhile.
pub(crate) unsafe fn set_in(tp: usize, v: usize) {
    // SAFETY: forwarded.
    unsafe { ((tp as isize + offset()) as *mut usize).write_volatile(v) }
}

/// Whether the word is in static TLS below the thread pointer, where
/// initial-exec code can reach it in every thread (the library was loaded
/// with the program, by `LD_PRELOAD`).
pub(crate) fn check() -> bool {
    let off = offset();
    off < 0 && off > -(1 << 24)
}
