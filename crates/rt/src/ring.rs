//! An event ring for reading a hung process from outside: cargo feature
//! `debug-ring`, off in every normal build (without it [`event`] compiles to
//! nothing and the ring does not exist).
//!
//! A lost wake-up or a signal that finds no taker once in a few hundred runs
//! shows nothing to a debugger: by the time one attaches, every thread
//! sleeps, and what led there is gone. With the feature on, each [`event`]
//! writes its time, its [`Event`], the calling kernel thread and one word of
//! argument into a ring of [`LEN`] entries, a static named `SCHEDLAB_RING` in
//! the library's symbol table, with a count per event in `SCHEDLAB_RING_COUNT`.
//! `crates/pthread/tools/ring.py PID LIB [N]` reads both from
//! `/proc/PID/mem` and prints the last `N` events by name (it takes the names
//! from this file's `Event`). Build: `cargo build --release --features
//! debug-ring` in `crates/pthread`, into a target directory of its own.
//!
//! An entry is two words, written with relaxed stores (a reader of a stopped
//! or hung process sees them all): `time_ns << 8 | event` (monotonic
//! nanoseconds modulo 1,000 s) and `tid << 48 | arg` (the kernel thread's id
//! in 16 bits, the argument in 48). Writers take their index with one
//! `fetch_add`; an entry being overwritten as the reader reads may mix two
//! events, which the time column shows.

#[cfg(feature = "debug-ring")]
use std::sync::atomic::{AtomicU64, Ordering};

/// What happened. The numbers are the ring's codes (`ring.py` reads them from
/// here: one `Name = number,` per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[allow(dead_code)] // each user of the ring names only the events it records
pub enum Event {
    /// A user thread parks: arg = its runtime id.
    Park = 1,
    /// An unpark that must schedule its parked thread: arg = the thread's id.
    Unpark = 2,
    /// A thread is pushed to the injection queue (from outside a processor):
    /// arg = its id.
    Inject = 3,
    /// An idle processor is woken for new work: arg = its index.
    Wake = 4,
    /// A processor goes to sleep: arg = its index.
    Sleep = 5,
    /// A sleeping processor woke: arg = its index, plus 256 if nobody woke it
    /// (its timeout, or a spurious wake-up).
    Woke = 6,
    /// A sleep was called off at its last look: arg = the processor's index.
    SleepCancelled = 7,
    /// A kernel thread's signal handler released its processor (a blocked
    /// thread, transparent hand-off): arg = the processor's index.
    Released = 9,
    /// The monitor hands a released processor to a spare kernel thread:
    /// arg = the processor's index.
    HandOff = 10,
    /// A detached thread rejoined a released processor: arg = its index.
    Rejoined = 11,
    /// A detached thread found no processor and queues itself: arg = its id.
    RejoinQueued = 12,
    /// The monitor sleeps: arg = the timeout in µs, `u48::MAX` for none.
    MonitorSleep = 13,
    /// The monitor woke.
    MonitorWoke = 14,
    /// A spare kernel thread got a processor: arg = its index.
    Assigned = 15,
    /// A waiter of the C library's queue (`wait.rs`) is linked: arg = the
    /// waiter's address.
    Linked = 16,
    /// A waker unlinked a waiter and wakes it: arg = the waiter's address.
    Unlinked = 17,
    /// A kernel thread's waiter waits on its futex word: arg = its address.
    FutexWait = 19,
    /// A process-directed signal is kept for the process: arg = the signal.
    KeepForProcess = 32,
    /// `kill` of the own process forwards: arg = the signal.
    Kill = 33,
    /// The forwarder takes a signal: arg = the signal.
    Forward = 34,
    /// A kept signal is retried: arg = the signal.
    Retry = 35,
    /// A signal is passed on to the forwarder: arg = the signal.
    PassOn = 36,
    /// A signal is given to a user thread on a kernel thread: arg = thread
    /// id << 32 | kernel thread << 8 | signal.
    GiveRunning = 37,
    /// A signal is saved for a parked user thread: arg = id << 32 | signal.
    GiveParked = 38,
}

/// Entries in the ring (a power of two).
pub const LEN: usize = 1 << 16;

/// Records `e` with `arg` (see the module docs); nothing without the
/// `debug-ring` feature.
#[inline(always)]
pub fn event(e: Event, arg: u64) {
    #[cfg(feature = "debug-ring")]
    record(e as u64, arg);
    #[cfg(not(feature = "debug-ring"))]
    let _ = (e, arg);
}

/// The entries, two words each (module docs).
#[cfg(feature = "debug-ring")]
#[no_mangle]
pub static SCHEDLAB_RING: [AtomicU64; 2 * LEN] = [const { AtomicU64::new(0) }; 2 * LEN];
/// Entries ever written; the next goes at this modulo `LEN`.
#[cfg(feature = "debug-ring")]
#[no_mangle]
pub static SCHEDLAB_RING_NEXT: AtomicU64 = AtomicU64::new(0);
/// How often each event happened.
#[cfg(feature = "debug-ring")]
#[no_mangle]
pub static SCHEDLAB_RING_COUNT: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];

#[cfg(feature = "debug-ring")]
#[inline(never)]
fn record(code: u64, arg: u64) {
    SCHEDLAB_RING_COUNT[code as usize & 255].fetch_add(1, Ordering::Relaxed);
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-parameter on our stack; async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let ns = (ts.tv_sec as u64 % 1000) * 1_000_000_000 + ts.tv_nsec as u64;
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u64 & 0xffff;
    let i = SCHEDLAB_RING_NEXT.fetch_add(1, Ordering::Relaxed) as usize % LEN;
    SCHEDLAB_RING[2 * i].store(ns << 8 | (code & 255), Ordering::Relaxed);
    SCHEDLAB_RING[2 * i + 1].store(tid << 48 | (arg & 0xffff_ffff_ffff), Ordering::Relaxed);
}
