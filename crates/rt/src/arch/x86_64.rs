//! Context switch for x86_64, System V ABI (Linux and the BSDs).
//!
//! The System V ABI makes a called function preserve `rbx`, `rbp`, `r12`–`r15`,
//! `rsp`, the control bits of MXCSR and the x87 control word; every other
//! register is clobbered by a call. [`switch`] looks like a call to the
//! compiler (its assembly declares the C ABI's caller-saved registers
//! clobbered), so it saves exactly the preserved set on the current stack,
//! swaps stacks, and restores the same set from the other one.
//!
//! The two control registers cost differently, as measured on the lab machine
//! (AMD EPYC, a ping-pong between two contexts, ns per switch): no control
//! state 1.6; `stmxcsr` alone 4.2; `stmxcsr` plus a compare of the value just
//! stored against the other context's, to skip `ldmxcsr` when they match,
//! 6.0 (reading back what `stmxcsr` stored stalls store-to-load forwarding);
//! `stmxcsr` plus an unconditional `ldmxcsr` 4.5; `fnstcw` with a compare of
//! the x87 control words (and `fldcw` only when they differ) 1.8 without
//! MXCSR. So the switch always reloads MXCSR, and keeps the compare for the
//! x87 control word.
//!
//! # Resuming without a return
//!
//! [`switch`] is inline assembly, expanded where it is called, and it neither
//! `call`s nor `ret`s: it pushes its own resume address, and resumes the other
//! context with `pop rcx; jmp rcx`. Why: the CPU predicts a `ret` from its
//! return-stack buffer, which holds the *leaving* context's return addresses,
//! so a switch that returned with `ret` into another call site was always
//! mispredicted (a ping-pong between two call sites: 10.9 ns per switch with
//! `ret`, 4.5 ns with `pop; jmp`, whose target the indirect-branch predictor
//! learns from history). A switch that touches the return-stack buffer
//! neither way leaves it exactly as the leaving context's calls left it; the
//! resumed context's own returns still pop the leaving context's entries
//! (each one whose target differs is mispredicted, as with any stackful
//! switch), but the switch itself adds no miss. Expanded in the caller's
//! frame (as `yield_now` does), the switch leaves no return at all between
//! the two user loops.
//!
//! A suspended context's stack, as [`switch`] leaves it (addresses grow up):
//!
//! ```text
//!            +----------------------+
//!  sp + 56   | resume address       |  pushed by `switch` (where a `call`
//!  sp + 48   | rbp                  |  would have put its return address)
//!  sp + 40   | rbx                  |
//!  sp + 32   | r12                  |
//!  sp + 24   | r13                  |
//!  sp + 16   | r14                  |
//!  sp +  8   | r15                  |
//!  sp +  4   | x87 CW (16 bits) pad |
//!  sp +  0   | MXCSR (32 bits)      |  <- saved stack pointer (16-byte aligned)
//!            +----------------------+
//! ```
//!
//! [`init_stack`] builds the same picture on a fresh stack, with the resume
//! address pointing at `trampoline`, `r12` holding the entry function and `r13`
//! its argument, so that the first switch "resumes" into the trampoline, which
//! calls `entry(passed, arg)` with a correctly aligned stack (`passed` arrives
//! in `rax`, the register every value passed by `switch` arrives in):
//!
//! ```text
//!  top -  8  | 0                    |  (stops frame-pointer walks)
//!  top - 16  | 0                    |
//!  top - 24  | trampoline           |  popped and jumped to; rsp is then top - 16
//!  top - 32  | rbp = 0              |
//!  top - 40  | rbx = 0              |
//!  top - 48  | r12 = entry          |
//!  top - 56  | r13 = arg            |
//!  top - 64  | r14 = 0              |
//!  top - 72  | r15 = 0              |
//!  top - 80  | MXCSR, x87 CW        |  <- initial stack pointer
//! ```

//! # The thread pointer (`shared-library` build)
//!
//! Built into `libschedlab_pthread.so`, every context carries its own thread
//! pointer (`fs` base): a user thread's is its own TLS block and glibc thread
//! control block, the scheduler context's the kernel thread's. The control
//! slot grows to 24 bytes (MXCSR, x87 CW, `fs` base, padding), [`switch`]
//! saves `rdfsbase` there and writes the resumed context's with `wrfsbase`
//! unless it is the same (or 0, a fresh context given none). Measured here
//! (Sapphire Rapids, 2026-11-27): `rdfsbase` 0.9 ns, `rdfsbase`+`wrfsbase`
//! 11 ns, so the write is the switch's main added cost, paid once per switch
//! between two threads. The runtime's per-kernel-thread block moves to `gs`
//! (below). The executable build has none of this.

use super::{EntryFn, StackPointer};
use std::arch::{asm, global_asm};

/// Bytes [`init_stack`] uses at the top of a fresh stack.
#[cfg(not(feature = "shared-library"))]
pub(crate) const INIT_STACK_BYTES: usize = 80;
/// Bytes [`init_stack`] uses at the top of a fresh stack: two more words, the
/// thread pointer and padding (`shared-library`: see "The thread pointer").
#[cfg(feature = "shared-library")]
pub(crate) const INIT_STACK_BYTES: usize = 96;

/// Default MXCSR: all exceptions masked, round to nearest (what a new process gets).
const DEFAULT_MXCSR: u64 = 0x1F80;
/// Default x87 control word: all exceptions masked, 64-bit precision, round to nearest.
const DEFAULT_X87_CW: u64 = 0x037F;

global_asm!(
    ".text",
    ".globl schedlab_rt_trampoline",
    ".hidden schedlab_rt_trampoline",
    ".type schedlab_rt_trampoline,@function",
    ".p2align 4",
    "schedlab_rt_trampoline:",
    ".cfi_startproc",
    ".cfi_undefined rip", // the outermost frame of a user thread: unwinders stop here
    "mov rdi, rax",       // first argument: the value the first switch passed
    "mov rsi, r13",       // second argument: the `arg` given to init_stack
    "call r12",           // entry(passed, arg); rsp is 16-aligned here, as the ABI wants
    "ud2",                // entry never returns; trap if it does
    ".cfi_endproc",
    ".size schedlab_rt_trampoline, . - schedlab_rt_trampoline",
);

extern "C" {
    fn schedlab_rt_trampoline() -> !;
}

// The per-kernel-thread block of the runtime (`machine.rs`'s `Machine`).
//
// In an executable (the default build) it lives in the executable's static
// TLS (`.tbss`: zero-filled in every new thread, so the all-zero bit pattern
// must be a valid idle `Machine`, which `machine.rs` checks in a test),
// defined here rather than with `thread_local!` so that code can name its
// offset from the thread pointer as a link-time constant (`@tpoff`, the
// local-exec TLS model): opening a runtime section is then a single
// instruction with no load before it. The local-exec model is only valid in
// the executable itself, so a crate linking schedlab-rt into a shared
// library without the `shared-library` feature fails at link time
// (`R_X86_64_TPOFF32 ... cannot be used when making a shared object`).
//
// With the `shared-library` feature (`libschedlab_pthread.so`) the thread
// pointer (`fs`) belongs to the *user* thread: each one has its own TLS block
// and glibc thread control block, switched with its stack (`switch`), so that
// `errno` and `__thread` variables follow it across kernel threads. The
// kernel thread's block is then reached through the other segment base, `gs`,
// which Linux user space leaves unused: `gs` points at the block itself, set
// once per kernel thread by `thread_block_attach` (with FSGSBASE, Linux 5.9).
// The section counter is still raised and lowered by one `gs`-relative
// instruction each, so nothing on the hot paths changes but the prefix.
#[cfg(not(feature = "shared-library"))]
global_asm!(
    ".pushsection .tbss.schedlab_rt_machine,\"awT\",@nobits",
    ".globl schedlab_rt_machine",
    ".hidden schedlab_rt_machine",
    ".type schedlab_rt_machine,@object",
    ".p2align 6",
    "schedlab_rt_machine:",
    ".zero {size}",
    ".size schedlab_rt_machine, {size}",
    ".popsection",
    size = const THREAD_BLOCK_BYTES,
);

/// Bytes of the thread block: one `Machine`.
#[cfg(not(feature = "shared-library"))]
const THREAD_BLOCK_BYTES: usize = std::mem::size_of::<crate::hooks::Machine>();
const _: () = assert!(std::mem::align_of::<crate::hooks::Machine>() <= 64);

/// The calling kernel thread's block (the thread pointer plus the block's
/// link-time offset). Not `pure`: the compiler must compute it afresh at every
/// call, since a user thread may be on another kernel thread after a switch.
#[cfg(not(feature = "shared-library"))]
#[inline(always)]
pub(crate) fn thread_block() -> *mut u8 {
    let b: *mut u8;
    // SAFETY: reads the thread pointer, which the x86_64 TLS ABI keeps at
    // `fs:0`, and adds the block's offset from it.
    unsafe {
        asm!(
            "mov {b}, qword ptr fs:[0]",
            "lea {b}, [{b} + schedlab_rt_machine@tpoff]",
            b = out(reg) b,
            options(nostack, readonly, preserves_flags)
        )
    };
    b
}

/// Adds one to the first `u32` of the calling kernel thread's block and
/// returns the block's address. The add is one instruction addressed through
/// `fs` at the moment it executes, so a signal lands before or after it and
/// a thread migrated by a preemption just before it raises the counter of the
/// kernel thread it then runs on.
#[cfg(not(feature = "shared-library"))]
#[inline(always)]
pub(crate) fn thread_block_raise() -> *mut u8 {
    let b: *mut u8;
    // SAFETY: as in `thread_block`; the first `u32` of the block is the
    // runtime-section counter, touched only by this thread and its own signal
    // handler, so an unlocked read-modify-write is enough.
    unsafe {
        asm!(
            "add dword ptr fs:[schedlab_rt_machine@tpoff], 1",
            "mov {b}, qword ptr fs:[0]",
            "lea {b}, [{b} + schedlab_rt_machine@tpoff]",
            b = out(reg) b,
            options(nostack)
        )
    };
    b
}

/// Subtracts one from the first `u32` of the calling kernel thread's block
/// (the runtime-section counter) and calls `deferred` if the result has its
/// top bit set (a deferred request: `machine::DEFERRED`). One instruction
/// addressed through `fs`, like [`thread_block_raise`], and a branch on its
/// sign flag: no pointer to load, no separate test.
#[cfg(not(feature = "shared-library"))]
#[inline(always)]
pub(crate) fn thread_block_lower(deferred: impl FnOnce()) {
    // SAFETY: as in `thread_block_raise`; the caller holds a section open on
    // this kernel thread, so the counter is at least one and the user thread
    // cannot leave this kernel thread before the instruction.
    unsafe {
        asm!(
            "sub dword ptr fs:[schedlab_rt_machine@tpoff], 1",
            "js {d}",
            d = label { deferred() },
            options(nostack)
        )
    };
}

/// Whether the calling kernel thread has its block: always, in static TLS.
#[cfg(not(feature = "shared-library"))]
#[inline(always)]
pub(crate) fn thread_block_present() -> bool {
    true
}

/// Whether `rdfsbase`/`wrfsbase` and their `gs` twins may be used: the
/// kernel says so in `AT_HWCAP2` (`HWCAP2_FSGSBASE`, Linux 5.9 and later
/// on a CPU that has the instructions). Without it they fault. Compiled in
/// both builds: `schedlab exec` asks it before preloading the
/// `shared-library` build, which needs it.
pub(crate) fn fsgsbase_usable() -> bool {
    const HWCAP2_FSGSBASE: u64 = 1 << 1;
    // SAFETY: getauxval has no preconditions.
    let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
    hwcap2 & HWCAP2_FSGSBASE != 0
}

#[cfg(feature = "shared-library")]
pub(crate) use self::shared::{
    set_thread_pointer, thread_block, thread_block_attach, thread_block_detach, thread_block_lower,
    thread_block_present, thread_block_raise, thread_pointer,
};

/// The thread block through `gs`, and the thread pointer as part of a
/// context (the `shared-library` build; see the comment above).
#[cfg(feature = "shared-library")]
mod shared {
    use std::arch::asm;

    /// The calling kernel thread's block: the `gs` base itself.
    ///
    /// `rdgsbase` (under 1 ns here) instead of a load of a self pointer: the
    /// base is the block.
    #[inline(always)]
    pub(crate) fn thread_block() -> *mut u8 {
        let b: *mut u8;
        // SAFETY: reads the gs base (FSGSBASE, checked by `fsgsbase_usable`
        // before any runtime starts), which `thread_block_attach` set.
        unsafe { asm!("rdgsbase {b}", b = out(reg) b, options(nostack, nomem, preserves_flags)) };
        b
    }

    /// As the executable build's: one `gs`-relative add, then the base.
    #[inline(always)]
    pub(crate) fn thread_block_raise() -> *mut u8 {
        let b: *mut u8;
        // SAFETY: as in `thread_block`; the counter is the block's first `u32`,
        // touched only by this kernel thread and its own signal handler.
        unsafe {
            asm!(
                "add dword ptr gs:[0], 1",
                "rdgsbase {b}",
                b = out(reg) b,
                options(nostack)
            )
        };
        b
    }

    /// As the executable build's: one `gs`-relative subtract and a branch.
    #[inline(always)]
    pub(crate) fn thread_block_lower(deferred: impl FnOnce()) {
        // SAFETY: as in `thread_block_raise`; a section is open here.
        unsafe {
            asm!(
                "sub dword ptr gs:[0], 1",
                "js {d}",
                d = label { deferred() },
                options(nostack)
            )
        };
    }

    /// Whether the calling kernel thread has a block (a non-zero `gs` base).
    /// Signal handlers ask first: a signal may land on a thread the runtime
    /// never saw. (Such a thread started by one with a block has its
    /// creator's base until it attaches: see [`thread_block_attach`].)
    #[inline(always)]
    pub(crate) fn thread_block_present() -> bool {
        !thread_block().is_null()
    }

    /// Gives the calling kernel thread its block if it has none of its own: a
    /// zeroed, 64-byte aligned `Machine` that lives as long as the process (a
    /// few hundred bytes per kernel thread that ever entered the runtime).
    /// Records the kernel thread's own thread pointer in it, for the exit of
    /// a user thread (`native_thread_pointer`), and as the block's owner.
    /// Returns whether it attached. Called on a kernel thread's own context
    /// (not a user thread's, whose thread pointer is not the kernel thread's).
    ///
    /// A non-zero `gs` base is not enough to call the block ours: `clone`
    /// copies the `gs` base to the new thread, so every kernel thread started
    /// by one that has a block starts with its creator's. Taken as ours, the
    /// runtime's kernel threads (all started, directly or through the
    /// monitor, by the program's thread that started the runtime) shared one
    /// `Machine`: one section counter raised and lowered by all with plain
    /// adds, one `processor` for every kernel thread, so a thread blocked in
    /// the kernel was not released (the shared counter was seldom zero) and
    /// the program's initial thread took a processor's user thread for its
    /// own and switched away from `main` (pigz under the library hung).
    /// The owner's thread pointer tells them apart: the creator's control
    /// block is not the new thread's, both being alive when it started.
    pub(crate) fn thread_block_attach() -> bool {
        let b = thread_block();
        if !b.is_null() {
            // SAFETY: a block some thread attached; blocks are never freed.
            let m = unsafe { &*b.cast_const().cast::<crate::hooks::Machine>() };
            if m.native_tp.load(std::sync::atomic::Ordering::Relaxed) == thread_pointer() {
                return false;
            }
        }
        let layout = std::alloc::Layout::new::<crate::hooks::Machine>()
            .align_to(64)
            .expect("a valid alignment");
        // SAFETY: a non-zero-sized layout.
        let b = unsafe { std::alloc::alloc_zeroed(layout) };
        if b.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: sets this kernel thread's gs base (FSGSBASE) to a block
        // nobody else has; zeroed is a valid idle `Machine`.
        unsafe { asm!("wrgsbase {b}", b = in(reg) b, options(nostack, preserves_flags)) };
        // SAFETY: the block just attached, ours alone.
        let m = unsafe { &*b.cast_const().cast::<crate::hooks::Machine>() };
        m.native_tp.store(thread_pointer(), std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// Forgets the calling kernel thread's block (leaking it): the child of a
    /// `fork`, whose block describes the parent's runtime.
    pub(crate) fn thread_block_detach() {
        // SAFETY: a zero gs base is what a thread without a block has.
        unsafe { asm!("wrgsbase {z}", z = in(reg) 0usize, options(nostack, preserves_flags)) };
    }

    /// The calling context's thread pointer (`fs` base).
    #[inline(always)]
    pub(crate) fn thread_pointer() -> usize {
        let tp: usize;
        // SAFETY: reads the fs base (FSGSBASE).
        unsafe { asm!("rdfsbase {t}", t = out(reg) tp, options(nostack, nomem, preserves_flags)) };
        tp
    }

    /// Makes `tp` the calling context's thread pointer.
    ///
    /// # Safety
    ///
    /// `tp` must be a thread control block no other kernel thread uses as
    /// its thread pointer now (two kernel threads on one TLS block share
    /// `errno`, malloc's caches and every `__thread` variable).
    #[inline(always)]
    pub(crate) unsafe fn set_thread_pointer(tp: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { asm!("wrfsbase {t}", t = in(reg) tp, options(nostack, preserves_flags)) };
    }
}

/// Lays out a fresh stack so that the first [`switch`] to the returned stack
/// pointer runs `entry(passed, arg)` on it, with default floating-point
/// control state, and (`shared-library` build) `tp` as its thread pointer, or
/// the switching context's own when `tp` is 0. The executable build has one
/// thread pointer per kernel thread and ignores `tp`.
///
/// # Safety
///
/// `top` must be the 16-byte aligned, exclusive upper end of a writable region
/// of at least [`INIT_STACK_BYTES`] bytes that nothing else uses, and the
/// region must stay mapped until `entry` has switched away for the last time.
/// A non-zero `tp` must be a thread control block that stays valid while the
/// context runs and that no other context uses.
pub(crate) unsafe fn init_stack(
    top: *mut u8,
    entry: EntryFn,
    arg: *mut u8,
    tp: usize,
) -> StackPointer {
    debug_assert_eq!(top as usize % 16, 0, "stack top must be 16-byte aligned");
    let top = top.cast::<u64>();
    let control = DEFAULT_MXCSR | (DEFAULT_X87_CW << 32);
    #[cfg(not(feature = "shared-library"))]
    let words: [u64; 10] = {
        debug_assert_eq!(tp, 0, "a thread pointer per user thread needs `shared-library`");
        [
            control,                                    // top - 80: MXCSR, x87 CW
            0,                                          // top - 72: r15
            0,                                          // top - 64: r14
            arg as u64,                                 // top - 56: r13
            entry as usize as u64,                      // top - 48: r12
            0,                                          // top - 40: rbx
            0,                                          // top - 32: rbp
            schedlab_rt_trampoline as *const () as u64, // top - 24: return address
            0,                                          // top - 16
            0,                                          // top - 8
        ]
    };
    #[cfg(feature = "shared-library")]
    let words: [u64; 12] = [
        control,                                    // top - 96: MXCSR, x87 CW
        tp as u64,                                  // top - 88: thread pointer (0: keep)
        0,                                          // top - 80: padding
        0,                                          // top - 72: r15
        0,                                          // top - 64: r14
        arg as u64,                                 // top - 56: r13
        entry as usize as u64,                      // top - 48: r12
        0,                                          // top - 40: rbx
        0,                                          // top - 32: rbp
        schedlab_rt_trampoline as *const () as u64, // top - 24: return address
        0,                                          // top - 16
        0,                                          // top - 8
    ];
    // SAFETY: the caller guarantees INIT_STACK_BYTES (= `words.len()` words)
    // below `top` are ours to write, and `top` is aligned.
    unsafe {
        let sp = top.sub(words.len());
        sp.copy_from_nonoverlapping(words.as_ptr(), words.len());
        sp.cast()
    }
}

/// Suspends the running context, storing its stack pointer in `*save`, and
/// resumes the context whose stack pointer is `load`, handing it `pass`.
/// Returns when some other context switches back to the pointer stored in
/// `*save`, with the value that context passed.
///
/// Always inlined (see "Resuming without a return" in the module docs).
///
/// # Safety
///
/// `save` must be valid for a write. `load` must come from [`init_stack`] or
/// from an earlier `switch` that saved it, must not have been resumed since,
/// and its stack must still be mapped. The caller is responsible for whatever
/// the resumed context assumes (which thread it runs on, which locks it holds).
#[cfg(not(feature = "shared-library"))]
#[inline(always)]
pub(crate) unsafe fn switch(save: *mut StackPointer, load: StackPointer, pass: *mut u8) -> *mut u8 {
    let passed: *mut u8;
    // SAFETY: forwarded from the caller. The assembly saves and restores the
    // registers the compiler expects preserved across it (rbx, rbp, r12-r15,
    // the stack pointer, MXCSR and the x87 control word) and declares every
    // other register clobbered (`clobber_abi("C")`), as a call would. It
    // pushes below the stack pointer, which asm! allows without `nostack`
    // (no red zone is live there).
    unsafe {
        asm!(
            "lea rax, [rip + 2f]", // our resume address: label 2 below...
            "push rax",            // ...where a `call` would have put it
            "push rbp",            // save the callee-saved registers on our own stack
            "push rbx",            // ...
            "push r12",            // ...
            "push r13",            // ...
            "push r14",            // ...
            "push r15",            // ... rsp is now 8 mod 16
            "sub rsp, 8",          // room for MXCSR and the x87 control word; 16-aligned
            "stmxcsr [rsp]",       // save MXCSR (rounding mode, exception masks)
            "fnstcw [rsp + 4]",    // save the x87 control word
            "mov [rdi], rsp",      // publish our stack pointer: from here we are suspended
            "mov rcx, rsp",        // keep our control-state slot at hand for the comparison
            "mov rsp, rsi",        // take the other context's stack; same layout as ours
            "ldmxcsr [rsp]",       // restore its MXCSR (cheaper than testing first, above)
            "mov ax, [rsp + 4]",   // its x87 control word...
            "cmp ax, [rcx + 4]",   // ...same as ours?
            "je 3f",               // yes: nothing to restore
            "fldcw [rsp + 4]",     // no: restore it
            "3:",                  //
            "add rsp, 8",          // drop the control-state slot
            "pop r15",             // restore its callee-saved registers in reverse order
            "pop r14",             // ...
            "pop r13",             // ...
            "pop r12",             // ...
            "pop rbx",             // ...
            "pop rbp",             // ...
            "mov rax, rdx",        // the passed value, for the other context
            "pop rcx",             // its resume address (or the trampoline)...
            "jmp rcx",             // ...resumed without a `ret` (module docs)
            "2:",                  // we resume here, with the passed value in rax
            in("rdi") save,
            in("rsi") load,
            in("rdx") pass,
            lateout("rax") passed,
            clobber_abi("C"),
        );
    }
    passed
}

/// [`switch`] of the `shared-library` build: the same, with the thread
/// pointer (`fs` base) saved in the leaving context's control slot and the
/// resumed context's restored, so each user thread keeps its own TLS block
/// and glibc thread control block wherever it runs ("The thread pointer" in
/// the module docs). `wrfsbase` costs ~10 ns here (`rdfsbase` under 1 ns), so
/// it is skipped when the two contexts share a thread pointer.
///
/// # Safety
///
/// As the executable build's.
#[cfg(feature = "shared-library")]
#[inline(always)]
pub(crate) unsafe fn switch(save: *mut StackPointer, load: StackPointer, pass: *mut u8) -> *mut u8 {
    let passed: *mut u8;
    // SAFETY: as the executable build's; the control slot is 24 bytes
    // (MXCSR, x87 CW, thread pointer, padding) so the stack stays 16-aligned,
    // and a thread pointer is only ever one its context was given.
    unsafe {
        asm!(
            "lea rax, [rip + 2f]", // our resume address: label 2 below...
            "push rax",            // ...where a `call` would have put it
            "push rbp",            // save the callee-saved registers on our own stack
            "push rbx",            // ...
            "push r12",            // ...
            "push r13",            // ...
            "push r14",            // ...
            "push r15",            // ... rsp is now 8 mod 16
            "sub rsp, 24",         // control slot: MXCSR, x87 CW, fs base, pad
            "stmxcsr [rsp]",       // save MXCSR
            "fnstcw [rsp + 4]",    // save the x87 control word
            "rdfsbase rax",        // our thread pointer...
            "mov [rsp + 8], rax",  // ...saved with us
            "mov [rdi], rsp",      // publish our stack pointer: from here we are suspended
            "mov rcx, rsp",        // keep our control-state slot at hand
            "mov rsp, rsi",        // take the other context's stack
            "ldmxcsr [rsp]",       // restore its MXCSR
            "mov r8, [rsp + 8]",   // its thread pointer:
            "test r8, r8",         // 0 (a fresh context given none): keep ours
            "jz 4f",
            "cmp r8, rax",         // the same as ours: nothing to write
            "je 4f",
            "wrfsbase r8",         // switch TLS blocks
            "4:",
            "mov ax, [rsp + 4]",   // its x87 control word...
            "cmp ax, [rcx + 4]",   // ...same as ours?
            "je 3f",               // yes: nothing to restore
            "fldcw [rsp + 4]",     // no: restore it
            "3:",
            "add rsp, 24",         // drop the control slot
            "pop r15",             // restore its callee-saved registers
            "pop r14",             // ...
            "pop r13",             // ...
            "pop r12",             // ...
            "pop rbx",             // ...
            "pop rbp",             // ...
            "mov rax, rdx",        // the passed value, for the other context
            "pop rcx",             // its resume address (or the trampoline)...
            "jmp rcx",             // ...resumed without a `ret`
            "2:",                  // we resume here, with the passed value in rax
            in("rdi") save,
            in("rsi") load,
            in("rdx") pass,
            lateout("rax") passed,
            clobber_abi("C"),
        );
    }
    passed
}

// ---------------------------------------------------------------------------
// Preemption (`preempt.rs`): the trampoline a preempted thread is redirected
// into by the signal handler, as if the interrupted instruction had called
// it from below its red zone.
//
// The interrupted thread's stack when the trampoline starts, and what it adds
// (addresses grow up; S is the interrupted stack pointer):
//
// ```text
//  S - 128 .. S      | red zone of the interrupted code  |  untouched
//  S - 136           | interrupted rip                   |  written by the handler
//  S - 144           | rflags                            |  pushfq
//  S - 152 .. S - 264| rax rcx rdx rsi rdi r8-r15 rbx rbp |  15 pushes (rbx keeps the
//                    |                                   |  frame's address below)
//  (64-aligned)      | xsave area (x87, SSE, AVX, ...)   |  xsave64, all components
//                    | frames of the yield               |  schedlab_rt_preempted
// ```
//
// `ret 128` at the end pops the interrupted rip and skips the red zone, so
// the thread resumes with every register, the flags and the stack pointer
// exactly as they were.
//
// Its unwind table describes this frame as a signal frame whose caller is
// the interrupted code, with S as the canonical frame address (the caller's
// stack pointer) and the callee-saved registers where the pushes put them:
// `libschedlab_pthread.so` ends an asynchronously cancelled thread from the
// preemption hook by unwinding through here into the interrupted frames
// (`shared::set_preempt_hook`), as glibc's cancellation signal unwinds
// through its signal frame.
// ---------------------------------------------------------------------------

/// Size of the `xsave` area for the components enabled in XCR0 (CPUID leaf
/// 0xD), rounded up to 64 bytes; read by the trampoline.
static mut SCHEDLAB_RT_XSAVE_BYTES: u64 = 4096;

global_asm!(
    ".text",
    ".globl schedlab_rt_preempt",
    ".hidden schedlab_rt_preempt",
    ".type schedlab_rt_preempt,@function",
    ".p2align 4",
    "schedlab_rt_preempt:",
    // Unwind table (see above): the canonical frame address is S, where
    // the interrupted code's stack pointer was; the interrupted rip is the
    // return address; a signal frame, so the unwinder looks up that rip
    // itself, not the instruction before it.
    ".cfi_startproc",
    ".cfi_signal_frame",
    ".cfi_def_cfa rsp, 136",
    ".cfi_offset rip, -136",
    "pushfq",                 // the interrupted flags
    ".cfi_adjust_cfa_offset 8",
    "push rax",               // every general-purpose register but rsp
    ".cfi_adjust_cfa_offset 8",
    "push rcx",
    ".cfi_adjust_cfa_offset 8",
    "push rdx",
    ".cfi_adjust_cfa_offset 8",
    "push rsi",
    ".cfi_adjust_cfa_offset 8",
    "push rdi",
    ".cfi_adjust_cfa_offset 8",
    "push r8",
    ".cfi_adjust_cfa_offset 8",
    "push r9",
    ".cfi_adjust_cfa_offset 8",
    "push r10",
    ".cfi_adjust_cfa_offset 8",
    "push r11",
    ".cfi_adjust_cfa_offset 8",
    "push r12",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r12, -224",
    "push r13",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r13, -232",
    "push r14",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r14, -240",
    "push r15",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r15, -248",
    "push rbx",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset rbx, -256",
    "push rbp",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset rbp, -264",
    "mov rbx, rsp",           // rbx (callee-saved) remembers the frame
    ".cfi_def_cfa_register rbx", // ...and the unwinder finds it from there
    "sub rsp, qword ptr [rip + {bytes}]", // room for the xsave area...
    "and rsp, -64",           // ...64-byte aligned, as xsave requires
    "xor eax, eax",           // xsave leaves the header's reserved bytes as it
    "mov [rsp + 512], rax",   // finds them and xrstor faults on garbage there:
    "mov [rsp + 520], rax",   // zero the 64-byte header first
    "mov [rsp + 528], rax",
    "mov [rsp + 536], rax",
    "mov [rsp + 544], rax",
    "mov [rsp + 552], rax",
    "mov [rsp + 560], rax",
    "mov [rsp + 568], rax",
    "mov eax, -1",            // save every component XCR0 enables
    "mov edx, -1",
    "xsave64 [rsp]",
    "cld",                    // the ABI wants DF clear at a call
    "call {entry}",           // yield; returns when resumed (any kernel thread)
    "mov eax, -1",
    "mov edx, -1",
    "xrstor64 [rsp]",         // vector and x87 state, MXCSR included
    "mov rsp, rbx",
    ".cfi_def_cfa_register rsp",
    "pop rbp",
    ".cfi_adjust_cfa_offset -8",
    "pop rbx",
    ".cfi_adjust_cfa_offset -8",
    "pop r15",
    ".cfi_adjust_cfa_offset -8",
    "pop r14",
    ".cfi_adjust_cfa_offset -8",
    "pop r13",
    ".cfi_adjust_cfa_offset -8",
    "pop r12",
    ".cfi_adjust_cfa_offset -8",
    "pop r11",
    ".cfi_adjust_cfa_offset -8",
    "pop r10",
    ".cfi_adjust_cfa_offset -8",
    "pop r9",
    ".cfi_adjust_cfa_offset -8",
    "pop r8",
    ".cfi_adjust_cfa_offset -8",
    "pop rdi",
    ".cfi_adjust_cfa_offset -8",
    "pop rsi",
    ".cfi_adjust_cfa_offset -8",
    "pop rdx",
    ".cfi_adjust_cfa_offset -8",
    "pop rcx",
    ".cfi_adjust_cfa_offset -8",
    "pop rax",
    ".cfi_adjust_cfa_offset -8",
    "popfq",
    ".cfi_adjust_cfa_offset -8",
    "ret 128",                // the interrupted rip; rsp back above the red zone
    ".cfi_endproc",
    ".size schedlab_rt_preempt, . - schedlab_rt_preempt",
    bytes = sym SCHEDLAB_RT_XSAVE_BYTES,
    entry = sym crate::hooks::schedlab_rt_preempted,
);

extern "C" {
    fn schedlab_rt_preempt();
}

/// The address the signal handler redirects a preempted thread to.
pub(crate) fn preempt_trampoline() -> usize {
    schedlab_rt_preempt as *const () as usize
}

/// Bytes of the `xsave` area the trampoline reserves.
pub(crate) fn xsave_area_bytes() -> usize {
    // SAFETY: written once by `init_preemption` before any handler runs.
    unsafe { std::ptr::addr_of!(SCHEDLAB_RT_XSAVE_BYTES).read() as usize }
}

/// Sizes the `xsave` area (once, before the handler is installed). Panics if
/// the CPU or kernel lacks XSAVE (every x86_64 CPU since 2011 has it).
pub(crate) fn init_preemption() {
    use std::arch::x86_64::__cpuid_count;
    // cpuid is available on every x86_64 CPU.
    let leaf1 = __cpuid_count(1, 0);
    assert!(leaf1.ecx & (1 << 27) != 0, "schedlab-rt preemption needs XSAVE enabled by the OS");
    // Leaf 0xD exists when XSAVE does.
    let leaf_d = __cpuid_count(0xD, 0);
    let bytes = (u64::from(leaf_d.ebx) + 63) & !63;
    // SAFETY: written before any reader (the handler is installed after).
    unsafe { std::ptr::addr_of_mut!(SCHEDLAB_RT_XSAVE_BYTES).write(bytes.max(576)) };
}

// ---------------------------------------------------------------------------
// A cancellable system call (`shared-library` build; `shared::syscall_cancellable`)
//
// musl's design (`src/thread/x86_64/syscall_cp.s`): the test of the caller's
// cancellation word and the `syscall` instruction lie between two labels,
// `schedlab_rt_cp_begin` and `schedlab_rt_cp_end`. The preemption signal's
// handler moves an interrupted context whose rip lies in between back to
// `schedlab_rt_cp_begin` (`shared::rewind_cancellable`), so the test is made
// again after every signal that lands before the call enters the kernel or
// while the kernel restarts it (`SA_RESTART` leaves rip on the `syscall`
// instruction itself). A canceller sets the word first and then signals the
// kernel thread: either the test sees the word, or the thread is past it
// and the signal rewinds it to the test, or the call had already returned
// (rip at the end label or beyond: not rewound, its result stands, as
// POSIX wants for a call that transferred data). A call the kernel ends
// with `EINTR` (poll, sigtimedwait: never restarted) returns it; the caller
// tests the word then.
//
// Arguments: rdi the word, rsi seven words (number, six arguments), edx the
// mask and ecx the value of the word that means "cancelled": the call is not
// made and the result is i64::MIN. rbx, r12, r13, r14 (callee-saved, kept
// across `syscall` and a signal) hold them from the test to the call.
// ---------------------------------------------------------------------------

#[cfg(feature = "shared-library")]
global_asm!(
    ".text",
    ".globl schedlab_rt_syscall_cp",
    ".hidden schedlab_rt_syscall_cp",
    ".globl schedlab_rt_cp_begin",
    ".hidden schedlab_rt_cp_begin",
    ".globl schedlab_rt_cp_end",
    ".hidden schedlab_rt_cp_end",
    ".type schedlab_rt_syscall_cp,@function",
    ".p2align 4",
    "schedlab_rt_syscall_cp:",
    ".cfi_startproc",
    "push rbx",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset rbx, -16",
    "push r12",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r12, -24",
    "push r13",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r13, -32",
    "push r14",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r14, -40",
    "mov rbx, rdi",  // the cancellation word
    "mov r12, rsi",  // number and arguments
    "mov r13d, edx", // mask
    "mov r14d, ecx", // "cancelled" under the mask
    "schedlab_rt_cp_begin:",
    "mov eax, dword ptr [rbx]",
    "and eax, r13d",
    "cmp eax, r14d",
    "je 2f", // cancelled: no call
    "mov rax, [r12]",
    "mov rdi, [r12 + 8]",
    "mov rsi, [r12 + 16]",
    "mov rdx, [r12 + 24]",
    "mov r10, [r12 + 32]",
    "mov r8, [r12 + 40]",
    "mov r9, [r12 + 48]",
    "syscall",
    "schedlab_rt_cp_end:",
    "3:",
    "pop r14",
    ".cfi_adjust_cfa_offset -8",
    "pop r13",
    ".cfi_adjust_cfa_offset -8",
    "pop r12",
    ".cfi_adjust_cfa_offset -8",
    "pop rbx",
    ".cfi_adjust_cfa_offset -8",
    "ret",
    ".cfi_adjust_cfa_offset 32",
    "2:",
    "movabs rax, 0x8000000000000000",
    "jmp 3b",
    ".cfi_endproc",
    ".size schedlab_rt_syscall_cp, . - schedlab_rt_syscall_cp",
);

#[cfg(feature = "shared-library")]
extern "C" {
    fn schedlab_rt_syscall_cp(word: *const u32, call: *const [u64; 7], mask: u32, want: u32)
        -> i64;
    static schedlab_rt_cp_begin: u8;
    static schedlab_rt_cp_end: u8;
}

/// Makes system call `call[0]` with arguments `call[1..]` unless
/// `*word & mask == want`, tested again after any preemption signal that
/// lands before the call is in the kernel or while the kernel would restart
/// it (see above). `None`: not made (cancelled); else the kernel's result
/// (a negative error number on failure).
#[cfg(feature = "shared-library")]
pub(crate) fn syscall_cancellable(
    word: &std::sync::atomic::AtomicU32,
    mask: u32,
    want: u32,
    call: [u64; 7],
) -> Option<i64> {
    // SAFETY: the stub reads `word` and `call` (both live for the call) and
    // makes the system call the caller chose, whose own contract the caller
    // keeps; it preserves the ABI's callee-saved registers.
    let r = unsafe { schedlab_rt_syscall_cp(word.as_ptr(), &call, mask, want) };
    (r != i64::MIN).then_some(r)
}

/// The addresses between which an interrupted context is moved back to the
/// first (the test), `[begin, end)`.
#[cfg(feature = "shared-library")]
pub(crate) fn cancellable_window() -> (usize, usize) {
    // Only the labels' addresses are taken.
    (
        std::ptr::addr_of!(schedlab_rt_cp_begin) as usize,
        std::ptr::addr_of!(schedlab_rt_cp_end) as usize,
    )
}
