//! The status word of a processor: who may use it, as a small protocol
//! checked by loom (`blocking.rs` has the whole hand-off it serves).
//!
//! | state      | who may use the processor                                        |
//! |------------|------------------------------------------------------------------|
//! | `RUNNING`  | its machine (scheduler or user code)                             |
//! | `SYSCALL`  | nobody: its machine is inside `blocking()`; that machine may take |
//! |            | it back (`exit_syscall`) or the monitor retake it (`retake`)      |
//! | `RELEASED` | nobody; whoever wins `take_released` binds it                    |
//!
//! The low two bits hold the state; the rest is an epoch, bumped whenever
//! the processor enters `RUNNING` from `RELEASED` (a new machine), so the
//! CAS of a machine returning from `blocking()` fails if its processor went
//! through other hands meanwhile, even if it is in `SYSCALL` again (ABA).
//! Taking that later `SYSCALL` would not break exclusivity (the other
//! machine gave the processor up), but it would take a processor the monitor
//! had not judged blocked from under its bookkeeping; the epoch keeps "my
//! processor, as I left it" exact.
//!
//! Every transition that gives the processor a user is a CAS that exactly
//! one party wins; the one that gives it up (`enter_syscall`, `release`) is
//! made by its only user. So at most one party uses a processor at a time —
//! the property the loom model below checks, with the three parties that
//! race: the blocked machine returning, the monitor retaking and handing it
//! off, and another returning machine looking for a released processor.

use crate::loom::{AtomicU32, Ordering};

/// A machine runs the processor.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const RUNNING: u32 = 0;
/// The processor's machine is inside `blocking()`.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const SYSCALL: u32 = 1;
/// The processor has no machine.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const RELEASED: u32 = 2;

/// The word (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Status(AtomicU32);

impl Status {
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn new() -> Status {
        Status(AtomicU32::new(RUNNING))
    }

    /// The state part, now.
    #[cfg_attr(loom, allow(dead_code))]
    #[inline]
    pub(crate) fn state(&self, order: Ordering) -> u32 {
        self.0.load(order) & 3
    }

    /// The user enters `blocking()`: `RUNNING` → `SYSCALL`. Returns the word
    /// to give to [`Status::exit_syscall`]. Release: publishes the detach.
    #[inline]
    pub(crate) fn enter_syscall(&self) -> u32 {
        let word = (self.0.load(Ordering::Relaxed) & !3) | SYSCALL;
        self.0.store(word, Ordering::Release);
        word
    }

    /// The user returns from `blocking()`: takes the processor back if it is
    /// still in *its* `SYSCALL`.
    #[inline]
    pub(crate) fn exit_syscall(&self, word: u32) -> bool {
        let back = (word & !3) | RUNNING;
        self.0.compare_exchange(word, back, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// The user gives the processor up: → `RELEASED` (the signal handler of
    /// a blocked machine).
    #[cfg_attr(loom, allow(dead_code))]
    #[inline]
    pub(crate) fn release(&self) {
        let s = self.0.load(Ordering::Relaxed);
        self.0.store((s & !3) | RELEASED, Ordering::Release);
    }

    /// Moves `from` → `to` by CAS; entering `RUNNING` starts a new epoch.
    pub(crate) fn transition(&self, from: u32, to: u32) -> bool {
        let s = self.0.load(Ordering::Acquire);
        if s & 3 != from {
            return false;
        }
        let n = if to == RUNNING { (s & !3).wrapping_add(4) | RUNNING } else { (s & !3) | to };
        self.0.compare_exchange(s, n, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// The monitor retakes a processor from a machine in `blocking()`.
    #[inline]
    pub(crate) fn retake(&self) -> bool {
        self.transition(SYSCALL, RELEASED)
    }

    /// A spare (through the monitor) or a returning machine binds a
    /// released processor.
    #[inline]
    pub(crate) fn take_released(&self) -> bool {
        self.transition(RELEASED, RUNNING)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model: processor `P` is in `SYSCALL` for machine A, which returns
    //! from `blocking()` while the monitor retakes `P` and hands it to a
    //! spare, and a machine B, returning from a blocked call of its own,
    //! looks for a released processor. Whoever gets `P` holds it for a while
    //! (a write and a read of a cell, which loom checks for overlap), then
    //! the spare, if it got it, enters `blocking()` itself — the ABA case:
    //! A's CAS must not take that `SYSCALL`.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    struct P {
        status: Status,
        /// Written by whoever uses the processor: overlapping users race.
        owner: UnsafeCell<u32>,
    }

    fn use_it(p: &P, who: u32) {
        // SAFETY: loom reports an overlap of two users as a data race.
        p.owner.with_mut(|o| unsafe { *o = who });
        // SAFETY: as above.
        p.owner.with(|o| assert_eq!(unsafe { *o }, who, "two users at once"));
    }

    #[test]
    fn at_most_one_party_uses_a_processor() {
        loom::model(|| {
            let p = Arc::new(P { status: Status::new(), owner: UnsafeCell::new(0) });
            // A enters blocking() before anyone else looks.
            let word = p.status.enter_syscall();
            let a = {
                let p = p.clone();
                loom::thread::spawn(move || {
                    if p.status.exit_syscall(word) {
                        use_it(&p, 1);
                    }
                })
            };
            let monitor = {
                let p = p.clone();
                loom::thread::spawn(move || {
                    if p.status.retake() && p.status.take_released() {
                        // The spare runs it, then blocks in a call itself.
                        use_it(&p, 2);
                        let _ = p.status.enter_syscall();
                    }
                })
            };
            let b = {
                let p = p.clone();
                loom::thread::spawn(move || {
                    if p.status.take_released() {
                        use_it(&p, 3);
                    }
                })
            };
            a.join().unwrap();
            monitor.join().unwrap();
            b.join().unwrap();
        });
    }
}
