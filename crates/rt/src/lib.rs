//! schedlab-rt: a two-level (M:N) thread runtime in the spirit of scheduler
//! activations.
//!
//! User threads, each with its own mmap'd stack and guard page, are
//! multiplexed on `P` *virtual processors* (kernel threads). A user-level
//! scheduler decides what runs where: a run queue per processor (a yielded or
//! preempted thread goes to the back; a spawned or woken one runs next,
//! newest first, through the processor's next slot; `src/queue.rs` says why),
//! three priority levels, an
//! injection queue for work arriving from outside, work stealing between
//! processors, and idle processors that search briefly and then sleep on a
//! futex (an idle runtime uses no CPU). Context switches are a few lines of
//! assembly (`arch/`).
//!
//! User threads have the semantics of kernel threads, as in scheduler
//! activations (docs/SOURCES.md), built in user space since Linux has no
//! upcalls: a monitor thread (like Go's sysmon)
//! **preempts** a thread that ran past its quantum while work waits (a signal
//! and a switch at a safe point, [`preempt`]), and hands the **processor of a
//! thread blocked in the kernel** to a spare kernel thread, whether the call
//! was wrapped in [`blocking()`] or not ([`mod@blocking`]). The upcalls show as
//! [`Event`]s: `Preempted`, `Blocked`, `Unblocked`, `ProcessorLost`,
//! `NewProcessor`, and `ProcessorRemoved` when [`Runtime::set_processors`]
//! shrinks the set of processors while threads run (seed 003's
//! `sa_setconcurrency`).
//!
//! The API has the shape of `std::thread` and `std::sync`:
//!
//! ```
//! use schedlab_rt::sync::{channel, Mutex};
//! use schedlab_rt::{spawn, yield_now, Runtime};
//! use std::sync::Arc;
//!
//! let rt = Runtime::builder().processors(2).build()?;
//! let total = rt.block_on(|| {
//!     let counter = Arc::new(Mutex::new(0u64));
//!     let (tx, rx) = channel(16);
//!     let workers: Vec<_> = (0..8)
//!         .map(|i| {
//!             let (counter, tx) = (counter.clone(), tx.clone());
//!             spawn(move || {
//!                 for _ in 0..100 {
//!                     *counter.lock() += 1;
//!                     yield_now();
//!                 }
//!                 tx.send(i).unwrap();
//!             })
//!         })
//!         .collect();
//!     drop(tx);
//!     let sum_of_ids: u64 = rx.iter().sum();
//!     for w in workers {
//!         w.join().unwrap();
//!     }
//!     assert_eq!(sum_of_ids, (0..8).sum());
//!     let total = *counter.lock();
//!     total
//! })?;
//! assert_eq!(total, 800);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What to know:
//! - A panic in a user thread is caught at the thread's base and returned by
//!   [`JoinHandle::join`]; the processor keeps running. (The panic message
//!   names the processor's kernel thread, `schedlab-vp-N`, since Rust's panic
//!   hook knows nothing of user threads.)
//! - `thread_local!` inside a user thread is the *processor's*, and user
//!   threads migrate between processors; use [`LocalKey`] (see [`local`])
//!   for per-user-thread state.
//! - Blocking in the kernel (file I/O, `std::sync::Mutex`, `std::thread::sleep`)
//!   does not hold up the processor: after [`DEFAULT_BLOCK_THRESHOLD`] with
//!   work waiting it moves to another kernel thread. [`sync`] and [`sleep`]
//!   cost no kernel thread at all, and [`blocking()`] makes the hand-off
//!   explicit and immediate to detect.
//! - Sockets and pipes from [`net`] (std's API) park a user thread whose call
//!   would block, on the runtime's epoll poller: a waiting connection holds
//!   no kernel thread. Plain `std::net` works too, as a kernel-thread hand-off
//!   per blocked call; [`io::wait`] is the poller's API for code that makes
//!   its own system calls.
//! - A thread is preempted after [`DEFAULT_QUANTUM`] when others wait; read
//!   the hazards in [`preempt`] (thread-locals, kernel-thread-affine locks,
//!   a tokio runtime inside a user thread) and opt out with
//!   [`Builder::preemptible`], [`no_preempt`] or [`RuntimeBuilder::preemption`].
//! - Stack overflow hits a guard page and aborts with a message naming the
//!   thread and its stack size.
//! - [`Runtime::block_on`] returns [`Deadlock`] when every user thread is
//!   parked for good, instead of hanging.
//!
//! # Fork-join
//!
//! A spawned thread of the runtime's stack size takes no stack until it first
//! runs, so a backlog of queued children costs a task record each (a few
//! hundred bytes), not a stack and its page faults. And a
//! [`JoinHandle::join`] that finds the thread it joins not yet started, still
//! in its own processor's next slot or queue (no other processor stole it),
//! runs it *inline*: on the joiner's stack, as a function call, with no stack
//! of its own and no context switch — the work-first strategy of Cilk and of
//! rayon's `join`. So recursive divide and conquer (`spawn` one half, compute
//! the other, `join`) costs about a function call per split when nothing is
//! idle, and a real thread when a processor is.
//!
//! The inline child is still its own thread: [`current()`], its id and name,
//! its [`LocalKey`] values, its panic (returned by `join`), its events,
//! preemption and every blocking primitive are its own. What it may observe
//! differently:
//! - it runs below its joiner's frames on the joiner's stack, and starts only
//!   if at least half its stack size is left there (else the join waits for
//!   it to run on a stack of its own), so it may have as little as half its
//!   stack size; an overflow is reported with its name and the joiner's
//!   stack size. A thread that needs its whole stack gets an explicit
//!   [`Builder::stack_size`]: such a thread is never run inline;
//! - [`stack_usage()`] reports the joiner's stack, pages the joiner touched
//!   included;
//! - it starts at the join, on the joiner's processor, rather than when the
//!   scheduler would have picked it; while it runs the joiner waits on it
//!   (a deadlock report lists both);
//! - in a runtime that uses [`Priority`] levels or CPU budgets
//!   ([`Builder::cpu_budget`]), whose accounting is done at switches, no
//!   thread runs inline.

#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!("schedlab-rt needs Linux (futex, MADV_GUARD_INSTALL)");

mod loom;

pub(crate) mod handoff;
mod hooks;
pub(crate) mod idle;
pub(crate) mod lifecycle;
pub(crate) mod park;
pub(crate) mod poll;
pub(crate) mod pollplace;
pub(crate) mod slot;

#[cfg(not(loom))]
mod arch;
#[cfg(not(loom))]
pub mod blocking;
#[cfg(not(loom))]
mod budget;
#[cfg(not(loom))]
mod cputime;
#[cfg(not(loom))]
mod cputimer;
#[cfg(not(loom))]
pub mod event;
#[cfg(not(loom))]
mod futex;
#[cfg(not(loom))]
mod guard;
#[cfg(not(loom))]
pub mod io;
#[cfg(not(loom))]
pub mod local;
#[cfg(not(loom))]
mod machine;
#[cfg(not(loom))]
mod monitor;
#[cfg(not(loom))]
pub mod net;
#[cfg(not(loom))]
pub mod preempt;
#[cfg(not(loom))]
mod priority;
#[cfg(not(loom))]
mod processor;
#[cfg(not(loom))]
mod queue;
#[cfg(not(loom))]
mod realtime;
#[cfg(not(loom))]
mod reclaim;
#[cfg(not(loom))]
mod registry;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod ring;
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
mod scope;
#[cfg(all(feature = "shared-library", not(loom)))]
pub mod shared;
#[cfg(not(loom))]
mod sigframe;
#[cfg(not(loom))]
mod spin;
#[cfg(not(loom))]
mod stack;
#[cfg(not(loom))]
mod state;
#[cfg(not(loom))]
pub mod sync;
#[cfg(not(loom))]
mod task;
#[cfg(not(loom))]
mod thread;
#[cfg(not(loom))]
mod timer;
#[cfg(not(loom))]
mod uffd;
#[cfg(not(loom))]
pub mod userfaultfd;
#[cfg(not(loom))]
mod wait;
#[cfg(not(loom))]
mod yielder;

/// Whether this machine can run the runtime's `shared-library` build
/// (`libschedlab_pthread.so`): the kernel lets user code use
/// `rdfsbase`/`wrfsbase` (FSGSBASE: a CPU that has it and Linux 5.9 or
/// later), which switching a thread pointer per user thread needs.
/// `schedlab exec` asks before preloading the library.
#[cfg(not(loom))]
pub fn fsgsbase_usable() -> bool {
    crate::arch::fsgsbase_usable()
}

#[cfg(not(loom))]
pub use crate::{
    blocking::blocking,
    budget::BudgetStats,
    event::{Detection, Event},
    local::LocalKey,
    monitor::DEFAULT_BLOCK_THRESHOLD,
    preempt::{no_preempt, Preemption, DEFAULT_QUANTUM, MIN_QUANTUM},
    priority::{Priority, AGING},
    reclaim::{reclaimed_stack_buffers, DEFAULT_IDLE_RECLAIM},
    registry::ParkedThread,
    runtime::{
        Cancelled, Deadlock, Runtime, RuntimeBuilder, DEFAULT_SPIN, DEFAULT_STACK_SIZE, MAX_SPIN,
    },
    scope::{scope, Scope, ScopedJoinHandle},
    stack::{StackReleased, StackStats, MAX_STACK_SIZE, MIN_STACK_SIZE},
    task::{ThreadId, WaitReason},
    thread::{
        current, park, park_timeout, sleep, spawn, stack_bounds, stack_usage, try_current,
        yield_now, yield_to, Builder, JoinHandle, Thread,
    },
    yielder::Yielder,
};
