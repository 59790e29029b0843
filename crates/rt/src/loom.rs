//! The one place concurrency primitives are imported from, so that the
//! protocols written against them run unchanged under the `loom` model
//! checker (`RUSTFLAGS="--cfg loom"`).
//!
//! Only the protocol modules (`park.rs`, `idle.rs`, `lifecycle.rs`,
//! `handoff.rs`, `slot.rs`, `poll.rs`'s edge counters, `pollplace.rs`) go
//! through this facade;
//! they are small and self-contained so loom can explore them exhaustively.
//! The rest of the runtime (assembly, crossbeam queues) is not compiled under
//! loom.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;
