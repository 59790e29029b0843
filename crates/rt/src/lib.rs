//! schedlab-rt: a two-level (M:N) thread runtime in the spirit of scheduler
//! activations.
//!
//! User threads, each with its own mmap'd stack and guard page, are
//! multiplexed on `P` *virtual processors* (kernel threads). A user-level
//! scheduler decides what runs where: a FIFO run queue per processor, an
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

#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!("schedlab-rt needs Linux (futex, MADV_GUARD_INSTALL)");

mod loom;

pub(crate) mod handoff;
pub(crate) mod idle;
pub(crate) mod lifecycle;
pub(crate) mod park;
pub(crate) mod poll;
pub(crate) mod slot;

#[cfg(not(loom))]
mod arch;
#[cfg(not(loom))]
pub mod blocking;
#[cfg(not(loom))]
mod budget;
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
mod registry;
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
mod scope;
#[cfg(all(feature = "shared-library", not(loom)))]
pub mod shared;
#[cfg(not(loom))]
mod spin;
#[cfg(not(loom))]
mod stack;
#[cfg(not(loom))]
pub mod sync;
#[cfg(not(loom))]
mod task;
#[cfg(not(loom))]
mod thread;
#[cfg(not(loom))]
mod timer;
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
    registry::ParkedThread,
    runtime::{
        Cancelled, Deadlock, Runtime, RuntimeBuilder, DEFAULT_SPIN, DEFAULT_STACK_SIZE, MAX_SPIN,
    },
    scope::{scope, Scope, ScopedJoinHandle},
    stack::{StackStats, MAX_STACK_SIZE, MIN_STACK_SIZE},
    task::{ThreadId, WaitReason},
    thread::{
        current, park, park_timeout, sleep, spawn, stack_usage, try_current, yield_now, Builder,
        JoinHandle, Thread,
    },
    yielder::Yielder,
};
