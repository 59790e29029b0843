//! What a shared library built on the runtime needs (the `shared-library`
//! feature; `libschedlab_pthread.so` is the one user): kernel threads the
//! program made itself entering the runtime, and a thread pointer per user
//! thread.
//!
//! In that build the runtime's per-kernel-thread block is reached through
//! the `gs` segment base (`arch/x86_64.rs`), which a kernel thread gets the
//! first time it enters the runtime: the runtime's own kernel threads at
//! their start, any other thread when the library calls [`attach`] on its
//! behalf, before the first call that may reach the runtime. And each user
//! thread may carry its own thread pointer (`Builder::thread_pointer`),
//! switched with its stack, so that C's `errno` and `__thread` variables
//! belong to the user thread, as on kernel threads.

/// Whether this machine can run the `shared-library` build at all: the
/// kernel enabled the `rdfsbase`/`wrfsbase` family (FSGSBASE: a CPU that has
/// it and Linux 5.9 or later). Without it every switch would need a system
/// call to change the thread pointer; the library refuses to start instead.
pub fn fsgsbase_usable() -> bool {
    crate::arch::fsgsbase_usable()
}

/// Gives the calling kernel thread its runtime block, if it has none yet.
/// Cheap when it has (one `rdgsbase`). Must be called on every thread the
/// runtime did not start, before anything that may reach the runtime
/// (spawning, parking, a runtime primitive); [`fsgsbase_usable`] must hold.
#[inline]
pub fn attach() {
    if !crate::arch::thread_block_present() {
        crate::arch::thread_block_attach();
    }
}

/// The calling context's thread pointer (`fs` base): on a user thread with a
/// thread pointer of its own, that one; otherwise the kernel thread's.
#[inline]
pub fn thread_pointer() -> usize {
    crate::arch::thread_pointer()
}

/// In a child just after `fork`: the calling kernel thread, the child's only
/// one, gets a fresh runtime block. Its old one describes a processor of the
/// parent's runtime, none of whose other kernel threads exist here; nothing
/// of that runtime may be used in the child.
pub fn detach_after_fork() {
    crate::arch::thread_block_detach();
    crate::arch::thread_block_attach();
}
