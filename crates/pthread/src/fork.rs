//! `fork` from any thread: the child has one thread, the caller, as POSIX
//! says, and no runtime.
//!
//! glibc's `fork` does the work (its `pthread_atfork` handlers, which the
//! library leaves to glibc, run as usual, and it resets its own locks in
//! the child). After it, in the child only: the parent's runtime is gone
//! with its kernel threads, so the library forgets it (a later
//! `pthread_create` starts the child's own), the calling kernel thread gets
//! a fresh runtime block (its old one describes a processor of the parent's
//! runtime), and the calling thread — a user thread in the parent, perhaps —
//! goes on as the child's initial, kernel thread, on the same stack and TLS
//! block, so its `errno`, `__thread` variables and `pthread_self` are what
//! they were.

/// glibc's definition.
mod next {
    crate::glibc::real!(fork: fn() -> libc::pid_t);
}

/// `fork`.
#[no_mangle]
pub extern "C-unwind" fn fork() -> libc::pid_t {
    // The kept control blocks' lock is taken across the fork, so that both
    // copies of it are released by this thread and none is left taken by
    // a thread the child does not have.
    // So is the list of user threads the signal forwarder reads, emptied in
    // the child.
    let held = crate::runtime::started().map(|_| crate::glibc::hold_cache_for_fork());
    let mut threads = crate::runtime::started().map(|_| crate::procsig::hold_threads_for_fork());
    // SAFETY: glibc's fork, unchanged.
    let pid = unsafe { next::fork()() };
    if pid == 0 {
        if let Some(t) = threads.as_mut() {
            t.clear();
        }
    }
    drop(threads);
    drop(held);
    // A program that never made a thread (a shell under `LD_PRELOAD`) forks
    // untouched.
    if pid == 0 && crate::runtime::started().is_some() {
        schedlab_rt::shared::detach_after_fork();
        crate::runtime::forget_after_fork();
        crate::thread::after_fork_child();
        crate::procsig::after_fork_child();
    }
    pid
}
