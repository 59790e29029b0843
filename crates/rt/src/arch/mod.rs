//! The machine-dependent part of the runtime: switching stacks.
//!
//! Everything written in assembly lives below this module, one file per
//! architecture, each exporting the same items:
//!
//! - `unsafe fn init_stack(top, entry, arg, tp) -> StackPointer` lays out a
//!   fresh stack so that the first [`switch`] to it calls `entry(passed, arg)`
//!   on that stack, `passed` being the value that switch passed (and, in the
//!   `shared-library` build, with `tp` as its thread pointer);
//! - `unsafe fn switch(save, load, pass) -> *mut u8` saves the callee-saved
//!   state of the running context on its own stack, stores the stack pointer
//!   in `*save`, loads `load` as the stack pointer, restores the state saved
//!   there, and makes `pass` the return value of the resumed context's own
//!   `switch` call. (The scheduler passes the processor, so a resumed thread
//!   knows where it runs without a thread-local lookup.)
//! - `fn thread_block() -> *mut u8` and `fn thread_block_raise() -> *mut u8`:
//!   the calling kernel thread's zero-initialised block of static TLS that
//!   holds its `Machine` (`machine.rs`), the second adding one to the block's
//!   first `u32` in the same, uninterruptible instruction that addresses it;
//! - `fn thread_block_lower(deferred: impl FnOnce())`: subtracts one from that
//!   `u32` the same way and calls `deferred` if the result has its top bit set;
//! - `fn thread_block_present() -> bool`: whether this kernel thread has one
//!   (always, in an executable; in the `shared-library` build, where the block
//!   is reached through `gs`, once `thread_block_attach` gave it one, or
//!   when it inherited its creator's `gs` base: `thread_block_attach`, not
//!   this, tells a block of its own);
//! - the preemption trampoline and its `xsave` sizing (`preempt.rs`);
//! - in the `shared-library` build, a system call a preemption signal can
//!   cancel before it enters the kernel (`syscall_cancellable`, with
//!   `cancellable_window` for the handler).
//!
//! The state saved is exactly what the platform ABI says a called function must
//! preserve (callee-saved integer registers, the stack pointer and the
//! floating-point control state); everything else is clobbered by an ordinary
//! function call, so the compiler has already saved what it needs. Nothing here
//! knows about threads, queues or processors.

/// A saved stack pointer: the address at which [`switch`] left the registers of
/// a suspended context.
pub(crate) type StackPointer = *mut u8;

/// The function a fresh stack starts in. It receives the value passed by the
/// first [`switch`] to it and the `arg` given to [`init_stack`], and must
/// never return (there is nothing to return to).
pub(crate) type EntryFn = unsafe extern "C" fn(passed: *mut u8, arg: *mut u8) -> !;

/// Set in the runtime-section counter (`machine.rs`, `Machine::guard`, and a
/// task's region word) when a preemption request arrived inside a runtime
/// section; taken when the counter returns to zero. The sign bit, so that
/// [`thread_block_lower`]'s one subtraction tells a deferred request by the
/// sign of its result.
pub(crate) const DEFERRED: u32 = 1 << 31;

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(all(target_arch = "x86_64", feature = "shared-library"))]
pub(crate) use self::x86_64::{
    cancellable_window, set_thread_pointer, syscall_cancellable, thread_block_attach,
    thread_block_detach, thread_pointer,
};
#[cfg(target_arch = "x86_64")]
pub(crate) use self::x86_64::{
    fsgsbase_usable, init_preemption, init_stack, preempt_trampoline, switch, thread_block,
    thread_block_lower, thread_block_present, thread_block_raise, xsave_area_bytes,
    INIT_STACK_BYTES,
};

#[cfg(not(target_arch = "x86_64"))]
compile_error!(
    "schedlab-rt has a context switch for x86_64 only; add rt/src/arch/<arch>.rs \
     exporting init_stack, switch and INIT_STACK_BYTES"
);

#[cfg(test)]
mod tests {
    //! Direct tests of the switch, without any scheduler: a context that
    //! bounces back and forth, and the floating-point control state surviving.
    use super::*;
    use crate::stack::Stack;
    use std::cell::UnsafeCell;

    struct Pair {
        main: UnsafeCell<StackPointer>,
        coro: UnsafeCell<StackPointer>,
        counter: UnsafeCell<u64>,
    }

    unsafe extern "C" fn bounce(passed: *mut u8, arg: *mut u8) -> ! {
        let pair = arg.cast::<Pair>();
        let mut passed = passed as u64;
        loop {
            // SAFETY: `pair` outlives the coroutine (the test keeps it on its
            // stack until the last switch back), and only one of the two
            // contexts runs at a time, so the accesses do not overlap.
            unsafe {
                // Record what main passed us, and pass it back doubled.
                *(*pair).counter.get() = passed;
                passed =
                    switch((*pair).coro.get(), *(*pair).main.get(), (passed * 2) as *mut u8) as u64;
            }
        }
    }

    #[test]
    fn switch_bounces_between_two_stacks() {
        let stack = Stack::new(64 * 1024).expect("mmap a test stack");
        let pair = Pair {
            main: UnsafeCell::new(std::ptr::null_mut()),
            coro: UnsafeCell::new(std::ptr::null_mut()),
            counter: UnsafeCell::new(0),
        };
        // SAFETY: the stack is fresh and large enough; `bounce` never returns.
        let sp =
            unsafe { init_stack(stack.top(), bounce, (&pair as *const Pair).cast_mut().cast(), 0) };
        // SAFETY: single-threaded, the pointers are valid for the whole test.
        unsafe { *pair.coro.get() = sp };
        for i in 1..=1000u64 {
            // SAFETY: `coro` holds a stack pointer saved by `init_stack` or by
            // the coroutine's last switch; the coroutine switches back to `main`.
            let back = unsafe { switch(pair.main.get(), *pair.coro.get(), i as *mut u8) };
            // SAFETY: the coroutine is suspended, nobody else touches the counter.
            assert_eq!(unsafe { *pair.counter.get() }, i, "the coroutine got what we passed");
            assert_eq!(back as u64, 2 * i, "we got what the coroutine passed");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn switch_preserves_mxcsr_per_context() {
        use std::arch::asm;
        fn mxcsr() -> u32 {
            let mut v: u32 = 0;
            // SAFETY: stmxcsr only stores the register into `v`.
            unsafe { asm!("stmxcsr [{}]", in(reg) &mut v, options(nostack)) };
            v
        }
        fn set_mxcsr(v: u32) {
            // SAFETY: loads a valid MXCSR value (the default with one rounding
            // mode bit changed); restored by the caller.
            unsafe { asm!("ldmxcsr [{}]", in(reg) &v, options(nostack)) };
        }
        unsafe extern "C" fn change_rounding(_passed: *mut u8, arg: *mut u8) -> ! {
            let pair = arg.cast::<Pair>();
            // Round toward zero in this context only.
            set_mxcsr(0x1F80 | 0x6000);
            loop {
                // SAFETY: as in `bounce`.
                unsafe {
                    *(*pair).counter.get() = u64::from(mxcsr());
                    switch((*pair).coro.get(), *(*pair).main.get(), std::ptr::null_mut());
                }
            }
        }
        let before = mxcsr();
        let stack = Stack::new(64 * 1024).expect("mmap a test stack");
        let pair = Pair {
            main: UnsafeCell::new(std::ptr::null_mut()),
            coro: UnsafeCell::new(std::ptr::null_mut()),
            counter: UnsafeCell::new(0),
        };
        // SAFETY: as in the test above.
        unsafe {
            *pair.coro.get() = init_stack(
                stack.top(),
                change_rounding,
                (&pair as *const Pair).cast_mut().cast(),
                0,
            )
        };
        for _ in 0..3 {
            // SAFETY: as in the test above.
            unsafe { switch(pair.main.get(), *pair.coro.get(), std::ptr::null_mut()) };
            assert_eq!(mxcsr(), before, "the main context keeps its MXCSR");
            // SAFETY: the coroutine is suspended.
            assert_eq!(unsafe { *pair.counter.get() } as u32 & 0x6000, 0x6000);
        }
    }

    /// Both sides of the raw benchmark run this loop, so that every switch
    /// returns to the call site it left from, as in the runtime (where all
    /// switches of user threads go through one call site): the return
    /// predictor then guesses right.
    #[inline(never)]
    fn pingpong(me: *mut StackPointer, other: *mut StackPointer, n: u64) {
        for i in 0..n {
            // SAFETY: `other` holds a context suspended in this same loop (or
            // fresh from `init_stack`); the test keeps both stacks alive.
            unsafe { switch(me, *other, i as *mut u8) };
        }
    }

    static ROUNDS: u64 = 10_000_000;

    unsafe extern "C" fn pingpong_entry(_passed: *mut u8, arg: *mut u8) -> ! {
        let pair = arg.cast::<Pair>();
        // SAFETY: `pair` outlives the coroutine (see the test).
        let (me, other) = unsafe { ((*pair).coro.get(), (*pair).main.get()) };
        loop {
            pingpong(me, other, u64::MAX);
        }
    }

    /// The bare cost of `switch`, the floor under every figure of the
    /// runtime: `cargo test --release -p schedlab-rt --lib raw_switch -- --ignored --nocapture`.
    #[test]
    #[ignore = "benchmark"]
    fn raw_switch_cost() {
        let stack = Stack::new(64 * 1024).expect("mmap a test stack");
        let pair = Pair {
            main: UnsafeCell::new(std::ptr::null_mut()),
            coro: UnsafeCell::new(std::ptr::null_mut()),
            counter: UnsafeCell::new(0),
        };
        let arg = (&pair as *const Pair).cast_mut().cast();
        // SAFETY: a fresh stack, large enough; the entry never returns.
        unsafe { *pair.coro.get() = init_stack(stack.top(), pingpong_entry, arg, 0) };
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = std::time::Instant::now();
            pingpong(pair.main.get(), pair.coro.get(), ROUNDS);
            // Two switches per round.
            best = best.min(t.elapsed().as_nanos() as f64 / (2 * ROUNDS) as f64);
        }
        println!("raw switch: {best:.2} ns (best of 5)");
    }
}
