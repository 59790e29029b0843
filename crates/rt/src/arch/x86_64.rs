//! Context switch for x86_64, System V ABI (Linux and the BSDs).
//!
//! The System V ABI makes a called function preserve `rbx`, `rbp`, `r12`–`r15`,
//! `rsp`, the control bits of MXCSR and the x87 control word; every other
//! register is clobbered by a call. [`switch`] is an ordinary function call
//! from the compiler's point of view, so it saves exactly that set on the
//! current stack, swaps stacks, and restores the same set from the other one.
//!
//! `ldmxcsr` and `fldcw` are slow (microcoded on some cores), and contexts
//! almost never differ in control state, so the switch loads them only when
//! the resumed context's saved values differ from the current ones.
//!
//! A suspended context's stack, as [`switch`] leaves it (addresses grow up):
//!
//! ```text
//!            +----------------------+
//!  sp + 64   | return address       |  pushed by the `call` into `switch`
//!  sp + 56   | rbp                  |
//!  sp + 48   | rbx                  |
//!  sp + 40   | r12                  |
//!  sp + 32   | r13                  |
//!  sp + 24   | r14                  |
//!  sp + 16   | r15                  |
//!  sp +  8   | (padding)            |
//!  sp +  4   | x87 CW (16 bits) pad |
//!  sp +  0   | MXCSR (32 bits)      |  <- saved stack pointer (16-byte aligned)
//!            +----------------------+
//! ```
//!
//! [`init_stack`] builds the same picture on a fresh stack, with the return
//! address pointing at `trampoline`, `r12` holding the entry function and `r13`
//! its argument, so that the first switch "returns" into the trampoline, which
//! calls `entry(passed, arg)` with a correctly aligned stack (`passed` arrives
//! in `rax`, the return-value register, like every value passed by `switch`):
//!
//! ```text
//!  top -  8  | 0                    |  (stops frame-pointer walks)
//!  top - 16  | 0                    |
//!  top - 24  | trampoline           |  popped by `ret`; rsp is then top - 16
//!  top - 32  | rbp = 0              |
//!  top - 40  | rbx = 0              |
//!  top - 48  | r12 = entry          |
//!  top - 56  | r13 = arg            |
//!  top - 64  | r14 = 0              |
//!  top - 72  | r15 = 0              |
//!  top - 80  | MXCSR, x87 CW        |  <- initial stack pointer
//! ```

use super::{EntryFn, StackPointer};
use std::arch::global_asm;

/// Bytes [`init_stack`] uses at the top of a fresh stack.
pub(crate) const INIT_STACK_BYTES: usize = 80;

/// Default MXCSR: all exceptions masked, round to nearest (what a new process gets).
const DEFAULT_MXCSR: u64 = 0x1F80;
/// Default x87 control word: all exceptions masked, 64-bit precision, round to nearest.
const DEFAULT_X87_CW: u64 = 0x037F;

global_asm!(
    ".text",
    ".globl schedlab_rt_switch",
    ".hidden schedlab_rt_switch",
    ".type schedlab_rt_switch,@function",
    ".p2align 4",
    "schedlab_rt_switch:",
    ".cfi_startproc",
    // On entry: rdi = where to store our stack pointer, rsi = stack pointer to
    // load, rdx = value to pass; [rsp] is our return address.
    "push rbp", // save the callee-saved registers on our own stack
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset rbp, 0",
    "push rbx", // ...
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset rbx, 0",
    "push r12", // ...
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset r12, 0",
    "push r13", // ...
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset r13, 0",
    "push r14", // ...
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset r14, 0",
    "push r15", // ... the last of them; rsp is now 8 mod 16
    ".cfi_adjust_cfa_offset 8",
    ".cfi_rel_offset r15, 0",
    "sub rsp, 8", // room for MXCSR and the x87 control word; rsp is 16-aligned
    ".cfi_adjust_cfa_offset 8",
    "stmxcsr [rsp]",     // save MXCSR (rounding mode, exception masks)
    "fnstcw [rsp + 4]",  // save the x87 control word
    "mov [rdi], rsp",    // publish our stack pointer: from here we are suspended
    "mov rcx, rsp",      // keep our control-state slot at hand for the comparisons
    "mov rsp, rsi",      // take the other context's stack; same layout as ours
    "mov eax, [rsp]",    // its MXCSR...
    "cmp eax, [rcx]",    // ...same as ours? (almost always: skip the slow load)
    "je 2f",             // yes: nothing to restore
    "ldmxcsr [rsp]",     // no: restore its MXCSR
    "2:",                //
    "mov ax, [rsp + 4]", // its x87 control word...
    "cmp ax, [rcx + 4]", // ...same as ours?
    "je 3f",             // yes: nothing to restore
    "fldcw [rsp + 4]",   // no: restore it (fldcw is slow, hence the test)
    "3:",                //
    "add rsp, 8",        // drop the control-state slot
    ".cfi_adjust_cfa_offset -8",
    "pop r15", // restore its callee-saved registers in reverse order
    ".cfi_adjust_cfa_offset -8",
    "pop r14", // ...
    ".cfi_adjust_cfa_offset -8",
    "pop r13", // ...
    ".cfi_adjust_cfa_offset -8",
    "pop r12", // ...
    ".cfi_adjust_cfa_offset -8",
    "pop rbx", // ...
    ".cfi_adjust_cfa_offset -8",
    "pop rbp", // ...
    ".cfi_adjust_cfa_offset -8",
    "mov rax, rdx", // the passed value becomes the other context's return value
    "ret",          // return into the other context (or into the trampoline)
    ".cfi_endproc",
    ".size schedlab_rt_switch, . - schedlab_rt_switch",
    "",
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
    fn schedlab_rt_switch(save: *mut StackPointer, load: StackPointer, pass: *mut u8) -> *mut u8;
    fn schedlab_rt_trampoline() -> !;
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
/// # Safety
///
/// `save` must be valid for a write. `load` must come from [`init_stack`] or
/// from an earlier `switch` that saved it, must not have been resumed since,
/// and its stack must still be mapped. The caller is responsible for whatever
/// the resumed context assumes (which thread it runs on, which locks it holds).
#[inline]
pub(crate) unsafe fn switch(save: *mut StackPointer, load: StackPointer, pass: *mut u8) -> *mut u8 {
    // SAFETY: forwarded from the caller; `schedlab_rt_switch` follows the C
    // calling convention and preserves every callee-saved register for us.
    unsafe { schedlab_rt_switch(save, load, pass) }
}
