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

use super::{EntryFn, StackPointer};
use std::arch::{asm, global_asm};

/// Bytes [`init_stack`] uses at the top of a fresh stack.
pub(crate) const INIT_STACK_BYTES: usize = 80;

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

// The per-kernel-thread block of the runtime (`machine.rs`'s `Machine`), in
// the executable's static TLS (`.tbss`: zero-filled in every new thread, so
// the all-zero bit pattern must be a valid idle `Machine`, which
// `machine.rs` checks in a test). Defined here rather than with
// `thread_local!` so that code can name its offset from the thread pointer
// as a link-time constant (`@tpoff`, the local-exec TLS model): opening a
// runtime section is then a single instruction with no load before it.
// The local-exec model is only valid in the executable itself, so a crate
// linking schedlab-rt into a shared library fails at link time
// (`R_X86_64_TPOFF32 ... cannot be used when making a shared object`).
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
const THREAD_BLOCK_BYTES: usize = std::mem::size_of::<crate::machine::Machine>();
const _: () = assert!(std::mem::align_of::<crate::machine::Machine>() <= 64);

/// The calling kernel thread's block (the thread pointer plus the block's
/// link-time offset). Not `pure`: the compiler must compute it afresh at every
/// call, since a user thread may be on another kernel thread after a switch.
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

/// Lays out a fresh stack so that the first [`switch`] to the returned stack
/// pointer runs `entry(passed, arg)` on it, with default floating-point
/// control state.
///
/// # Safety
///
/// `top` must be the 16-byte aligned, exclusive upper end of a writable region
/// of at least [`INIT_STACK_BYTES`] bytes that nothing else uses, and the
/// region must stay mapped until `entry` has switched away for the last time.
pub(crate) unsafe fn init_stack(top: *mut u8, entry: EntryFn, arg: *mut u8) -> StackPointer {
    debug_assert_eq!(top as usize % 16, 0, "stack top must be 16-byte aligned");
    let top = top.cast::<u64>();
    let words: [u64; 10] = [
        DEFAULT_MXCSR | (DEFAULT_X87_CW << 32), // top - 80: MXCSR, x87 CW
        0,                                      // top - 72: r15
        0,                                      // top - 64: r14
        arg as u64,                             // top - 56: r13
        entry as usize as u64,                  // top - 48: r12
        0,                                      // top - 40: rbx
        0,                                      // top - 32: rbp
        schedlab_rt_trampoline as *const () as u64, // top - 24: return address
        0,                                      // top - 16
        0,                                      // top - 8
    ];
    // SAFETY: the caller guarantees INIT_STACK_BYTES (= 10 words) below `top`
    // are ours to write, and `top` is aligned.
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
// ---------------------------------------------------------------------------

/// Size of the `xsave` area for the components enabled in XCR0 (CPUID leaf
/// 0xD), rounded up to 64 bytes; read by the trampoline.
#[no_mangle]
static mut SCHEDLAB_RT_XSAVE_BYTES: u64 = 4096;

global_asm!(
    ".text",
    ".globl schedlab_rt_preempt",
    ".hidden schedlab_rt_preempt",
    ".type schedlab_rt_preempt,@function",
    ".p2align 4",
    "schedlab_rt_preempt:",
    "pushfq",                 // the interrupted flags
    "push rax",               // every general-purpose register but rsp
    "push rcx",
    "push rdx",
    "push rsi",
    "push rdi",
    "push r8",
    "push r9",
    "push r10",
    "push r11",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "push rbx",
    "push rbp",
    "mov rbx, rsp",           // rbx (callee-saved) remembers the frame
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
    "pop rbp",
    "pop rbx",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop r11",
    "pop r10",
    "pop r9",
    "pop r8",
    "pop rdi",
    "pop rsi",
    "pop rdx",
    "pop rcx",
    "pop rax",
    "popfq",
    "ret 128",                // the interrupted rip; rsp back above the red zone
    ".size schedlab_rt_preempt, . - schedlab_rt_preempt",
    bytes = sym SCHEDLAB_RT_XSAVE_BYTES,
    entry = sym crate::preempt::schedlab_rt_preempted,
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
