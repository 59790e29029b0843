//! `libschedlab_pthread.so`: the POSIX threads of an unmodified program run as
//! schedlab-rt user threads.
//!
//! Loaded with `LD_PRELOAD` (or by `schedlab exec -- PROGRAM ARGS...`, which
//! sets it up), the library defines the `pthread_*`, `sem_*`, sleeping and
//! yielding functions and a thread's CPU clock (`clock_gettime`,
//! `clock_getres`, `getrusage`, `timer_create`: `cpuclock.rs`), which the
//! dynamic linker then binds the program and its libraries to instead of
//! glibc's. A thread the program creates is a
//! user thread on the runtime's virtual processors, with its own TLS block
//! and glibc thread control block switched with its stack (`glibc.rs`), so
//! `errno`, `__thread` variables and glibc's per-thread state follow it
//! across kernel threads; blocking in the kernel hands its processor to
//! another kernel thread (the runtime's transparent hand-off), sleeping and
//! waiting on the library's primitives park it and hold no kernel thread.
//!
//! What it keeps of glibc, and why:
//! - **Nothing starts before the first `pthread_create`.** A shell, `make` or
//!   wrapper that inherits `LD_PRELOAD` runs exactly as without it.
//! - **The program's initial thread stays a kernel thread** (a "bound"
//!   thread, POSIX's system contention scope); the threads it creates are
//!   user threads. Every primitive works between the two kinds.
//! - **Objects shared between processes** (`PTHREAD_PROCESS_SHARED`
//!   mutexes, condition variables, read-write locks and barriers, `sem_init`
//!   with `pshared`, named semaphores) are glibc's: their waiters may be in
//!   another process, which no user-level queue can reach.
//! - **Threads the program did not create through us** (glibc's own helper
//!   threads, the runtime's kernel threads) are glibc's for everything that
//!   names a thread (`pthread_join`, `pthread_kill`, `pthread_getattr_np`...).
//!
//! Settings (what `schedlab exec` sets from its flags):
//! `SCHEDLAB_RT_PROCESSORS` (virtual processors; default the CPUs available),
//! `SCHEDLAB_RT_QUANTUM_MS` (preemption quantum), `SCHEDLAB_RT_PREEMPT=0`
//! (cooperative only), `SCHEDLAB_RT_EVENTS` (a file for the runtime's
//! scheduling events, which `schedlab exec --trace` turns into Perfetto JSON:
//! each process that started the runtime appends its events at `exit`, none
//! after `_exit` or a death by signal; `events.rs`).

#![deny(missing_docs)]

mod alloc;
mod cancel;
mod cpuclock;
mod events;
mod fdio;
mod fork;
mod glibc;
mod handlers;
mod io;
mod key;
mod once;
mod points;
mod procsig;
mod runtime;
mod sched;
mod schedparam;
mod signal;
mod sysv;
mod thread;
mod tls;
mod urg;
mod wait;

// The synchronisation primitives: glibc's object sizes and static
// initializers, waiters queued through `wait.rs`.
mod barrier;
mod cond;
mod mutex;
mod prio;
mod rwlock;
mod sem;
mod spin;

#[global_allocator]
static ALLOCATOR: alloc::GlibcMalloc = alloc::GlibcMalloc;

/// Prints why the library cannot go on, and ends the process (exit code 127,
/// as a shell does for a program it could not run). Used only before any
/// user thread exists, or for a broken promise of glibc's.
pub(crate) fn fatal(why: &str) -> ! {
    let msg = format!("libschedlab_pthread: {why}\n");
    // SAFETY: write(2) of a buffer we own; _exit ends the process.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}
