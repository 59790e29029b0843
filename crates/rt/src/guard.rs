//! Turning a stack overflow into a message: the `SIGSEGV` handler.
//!
//! Every user-thread stack has a guard page below it (`stack.rs`). A thread
//! that runs past its stack faults on that page; the handler, running on the
//! processor's alternate signal stack (the faulting stack has no room left),
//! checks whether the faulting address lies in the guard page of the user
//! thread running on this processor. If so it writes
//!
//! ```text
//! schedlab-rt: user thread 'name' (id 7) overflowed its stack of 16384 bytes
//! ```
//!
//! to standard error and aborts. Any other fault is passed on: the handler
//! that was installed before ours (Rust's own, which reports overflows of
//! kernel-thread stacks, or the default) is put back and the faulting
//! instruction runs again. The handler only reads memory and calls
//! `write`, `abort` and `sigaction`, which are async-signal-safe.

use crate::processor;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// The handlers we displaced, per signal.
struct Previous {
    segv: libc::sigaction,
    bus: libc::sigaction,
}

// SAFETY: plain data (function pointers and flags), written once.
unsafe impl Sync for Previous {}
// SAFETY: as above.
unsafe impl Send for Previous {}

static PREVIOUS: OnceLock<Previous> = OnceLock::new();

/// Installs the handler for `SIGSEGV` and `SIGBUS`, once per process.
pub(crate) fn install_handler() {
    PREVIOUS.get_or_init(|| {
        // SAFETY: sigaction with a zeroed, then filled, action struct; our
        // handler has the SA_SIGINFO signature.
        unsafe {
            let mut action: libc::sigaction = MaybeUninit::zeroed().assume_init();
            action.sa_sigaction = handler as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            block_all_but_faults(&mut action.sa_mask);
            let mut segv: libc::sigaction = MaybeUninit::zeroed().assume_init();
            let mut bus: libc::sigaction = MaybeUninit::zeroed().assume_init();
            libc::sigaction(libc::SIGSEGV, &action, &mut segv);
            libc::sigaction(libc::SIGBUS, &action, &mut bus);
            Previous { segv, bus }
        }
    });
}

/// Fills `set` with every signal but the synchronous faults: the mask the
/// runtime's own handlers run with. They run on the kernel thread's
/// alternate stack, which every user thread on that kernel thread shares; a
/// program's handler nested in one ran there too, and a wait inside it
/// switched the user thread away with its frames on that stack, for the
/// kernel thread's next signal to overwrite (a `java` program's threads,
/// each catching a stack overflow, died one run in ten on two processors).
/// Blocked, the program's signals are delivered as the runtime's handler
/// returns, on the thread's own stack. A fault inside the handler stays
/// deliverable, to be reported rather than kill the process unexplained.
pub(crate) fn block_all_but_faults(set: &mut libc::sigset_t) {
    // SAFETY: `set` is a valid sigset_t; the signal numbers are valid.
    unsafe {
        libc::sigfillset(set);
        for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP] {
            libc::sigdelset(set, sig);
        }
    }
}

unsafe extern "C" fn handler(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    // A kernel thread without a runtime block (`shared-library` build) runs
    // no user thread: the fault is not a user thread's overflow.
    let ours = crate::arch::thread_block_present();
    if let Some((guard, name, size, id)) = processor::overflow_info().filter(|_| ours) {
        // Rust's stack probes touch every page on the way down, so an
        // overflow faults inside the guard page, not beyond it.
        if guard.contains(&addr) {
            report(name, id, size);
            // SAFETY: abort is async-signal-safe.
            unsafe { libc::abort() };
        }
    }
    // Not ours: put the previous handler back and return; the faulting
    // instruction runs again and faults into it.
    if let Some(prev) = PREVIOUS.get() {
        let old = if sig == libc::SIGBUS { &prev.bus } else { &prev.segv };
        // SAFETY: restoring a handler the kernel gave us.
        unsafe { libc::sigaction(sig, old, std::ptr::null_mut()) };
    }
}

/// Writes the overflow message with no allocation.
fn report(name: Option<&str>, id: u64, size: usize) {
    let mut buf = [0u8; 512];
    let mut len = 0;
    let mut put = |s: &[u8]| {
        let n = s.len().min(buf.len() - len);
        buf[len..len + n].copy_from_slice(&s[..n]);
        len += n;
    };
    put(b"schedlab-rt: user thread '");
    put(name.unwrap_or("<unnamed>").as_bytes());
    put(b"' (id ");
    put(decimal(id, &mut [0; 20]));
    put(b") overflowed its stack of ");
    put(decimal(size as u64, &mut [0; 20]));
    put(b" bytes\n");
    // SAFETY: write(2) from a valid buffer; async-signal-safe. The system
    // call, not libc's `write`: in the `shared-library` build that is the
    // library's, whose user-thread path may park in the poller or act on a
    // pending cancellation, neither of which a fault handler may do.
    unsafe { libc::syscall(libc::SYS_write, 2, buf.as_ptr(), len) };
}

fn decimal(mut v: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &out[i..];
        }
    }
}

/// An alternate signal stack for the calling kernel thread, if it had none;
/// removed and freed on drop.
pub(crate) struct AltStack {
    stack: Option<crate::stack::Stack>,
}

impl AltStack {
    /// Installs one unless the thread already has an alternate stack (Rust's
    /// runtime gives its threads one when it handles overflows itself).
    pub(crate) fn install() -> AltStack {
        // SAFETY: querying the current alternate stack into a zeroed struct.
        let mut current: libc::stack_t = unsafe { MaybeUninit::zeroed().assume_init() };
        // SAFETY: as above.
        unsafe { libc::sigaltstack(std::ptr::null(), &mut current) };
        if current.ss_flags & libc::SS_DISABLE == 0 {
            return AltStack { stack: None };
        }
        let Ok(stack) = crate::stack::Stack::new(64 * 1024) else {
            return AltStack { stack: None };
        };
        let ss = libc::stack_t {
            ss_sp: stack.guard_range().end as *mut libc::c_void,
            ss_flags: 0,
            ss_size: stack.size(),
        };
        // SAFETY: the region is ours and stays mapped until `drop` disables it.
        if unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) } != 0 {
            return AltStack { stack: None };
        }
        AltStack { stack: Some(stack) }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if self.stack.is_some() {
            let ss = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling our alternate stack before unmapping it.
            unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) };
        }
    }
}
