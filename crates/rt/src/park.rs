//! The park/unpark protocol of one user thread: a single atomic word.
//!
//! A user thread waits for a *token* of one of two kinds:
//! - [`Kind::User`]: the token of the public [`park`](crate::park()) /
//!   [`Thread::unpark`](crate::Thread::unpark) pair, with `std::thread`
//!   semantics (at most one token is kept; `park` may return spuriously);
//! - [`Kind::Sync`]: the token the runtime's own waits use (join, sleep, the
//!   `sync` primitives). Exactly one `Sync` token is produced per registered
//!   wait, so a wait never returns before its waker has delivered it: that is
//!   what lets a waker hold a plain pointer to a waiting thread (see below).
//!   A stray user `unpark` therefore never disturbs a mutex wait.
//!
//! # States of the word
//!
//! | bit | name          | set by                         | cleared by                          |
//! |-----|---------------|--------------------------------|-------------------------------------|
//! | 0   | `TOKEN_USER`  | `unpark(User)`                 | the thread itself (`try_take`, `commit`) |
//! | 1   | `TOKEN_SYNC`  | `unpark(Sync)`                 | the thread itself                   |
//! | 2   | `PARKED_USER` | `commit(User)`                 | `unpark(User)`, which then schedules |
//! | 3   | `PARKED_SYNC` | `commit(Sync)`                 | `unpark(Sync)`, which then schedules |
//!
//! At most one `PARKED_*` bit is set, and only while the thread's context is
//! saved and it sits in no run queue. While a `PARKED_*` bit is set, the word
//! *owns one reference* to the thread (the scheduler forgets its `Arc` when it
//! commits the park); the unparker that clears the bit takes that reference
//! over and puts the thread in a run queue. So parking and waking move no
//! reference counts.
//!
//! # Protocol
//!
//! Waiting (the thread `T`, then whoever runs next on its processor):
//! 1. `T` calls [`ParkState::try_take`]: if its token is there, it is consumed
//!    and `T` goes on without switching.
//! 2. Otherwise `T` switches away, leaving "park `T`" as the pending action of
//!    its processor. Only after the switch (when `T`'s registers are saved)
//!    does the next context run [`ParkState::commit`]:
//! 3. `commit` sets `PARKED_kind` unless the token arrived meanwhile, in which
//!    case it consumes the token and `T` goes straight back to a run queue.
//!
//! Waking: [`ParkState::unpark`] sets the token, or, if `PARKED_kind` is set,
//! clears it instead and returns `true`: the caller must schedule `T`.
//!
//! Why it is correct: the word is changed only by compare-and-swap, so `commit`
//! and `unpark` are ordered. If `unpark` comes first, `commit` sees the token
//! and resumes `T` itself; if `commit` comes first, `unpark` sees `PARKED` and
//! schedules `T`. Exactly one of the two resumes `T`, and never before step 2
//! saved its registers (the release in `commit` and the acquire in `unpark`
//! carry the saved context over). `loom` checks both orders below.
//!
//! Why a waker may hold a plain pointer to `T` for a `Sync` wait: `T` cannot
//! leave its wait before the token is delivered, and the delivery is the
//! waker's last access (it touches `T` again only if it took over the parked
//! reference, which keeps `T` alive).

use crate::loom::{AtomicU32, Ordering};

const TOKEN_USER: u32 = 1;
const TOKEN_SYNC: u32 = 2;
const PARKED_USER: u32 = 4;
const PARKED_SYNC: u32 = 8;

/// Which token a park waits for. See the module docs.
///
/// A word wide (`repr(u64)`), like the pointers the other pending actions
/// carry in the same place (`processor/switch.rs`, `Pending`): as one byte,
/// LLVM merged the switch path's stores of the pending action into a byte
/// here and seven more bytes beside it, so the 8-byte pointer a park-unlock
/// or join stores there went out as four pieces — and the resuming
/// context's 8-byte load of it could not be forwarded from them (a channel
/// hand-off cost 4 ns more for it on the lab's Intel host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Kind {
    /// The public `park`/`unpark` token.
    User,
    /// The runtime's internal wait token.
    Sync,
}

impl Kind {
    #[inline]
    fn token(self) -> u32 {
        match self {
            Kind::User => TOKEN_USER,
            Kind::Sync => TOKEN_SYNC,
        }
    }
    #[inline]
    fn parked(self) -> u32 {
        match self {
            Kind::User => PARKED_USER,
            Kind::Sync => PARKED_SYNC,
        }
    }
}

/// The park word of one user thread.
#[derive(Debug)]
pub(crate) struct ParkState {
    word: AtomicU32,
}

impl ParkState {
    /// No tokens, not parked.
    pub(crate) fn new() -> ParkState {
        ParkState { word: AtomicU32::new(0) }
    }

    /// Step 1: consumes the token of `kind` if present. Called by the thread itself.
    #[inline]
    pub(crate) fn try_take(&self, kind: Kind) -> bool {
        let t = kind.token();
        if self.word.load(Ordering::Acquire) & t == 0 {
            return false;
        }
        // Only the thread itself clears its tokens, so the bit is still set.
        self.word.fetch_and(!t, Ordering::Acquire);
        true
    }

    /// Step 3: run after the thread's context is saved. Returns `true` if the
    /// thread is now parked (the word owns a reference to it), `false` if the
    /// token had arrived: it is consumed and the caller must resume the thread.
    #[inline]
    pub(crate) fn commit(&self, kind: Kind) -> bool {
        let mut s = self.word.load(Ordering::Acquire);
        loop {
            let (new, parked) = if s & kind.token() != 0 {
                (s & !kind.token(), false)
            } else {
                (s | kind.parked(), true)
            };
            match self.word.compare_exchange_weak(s, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return parked,
                Err(now) => s = now,
            }
        }
    }

    /// Delivers a token of `kind`. Returns `true` if the thread was parked
    /// waiting for it: the caller now owns the parked reference and must put
    /// the thread in a run queue.
    #[inline]
    pub(crate) fn unpark(&self, kind: Kind) -> bool {
        let mut s = self.word.load(Ordering::Acquire);
        loop {
            let (new, wake) = if s & kind.parked() != 0 {
                (s & !kind.parked(), true)
            } else if s & kind.token() != 0 {
                return false;
            } else {
                (s | kind.token(), false)
            };
            match self.word.compare_exchange_weak(s, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return wake,
                Err(now) => s = now,
            }
        }
    }

    /// Takes a parked thread over without a token (`reclaim.rs`): if
    /// `PARKED_kind` is set, clears it and returns `true`; the caller then
    /// owns the parked reference and the thread's saved context, exactly as
    /// between steps 2 and 3 of a park, and must end with [`commit`]
    /// (`Self::commit`), which parks the thread again or, if a token came
    /// meanwhile, tells the caller to schedule it. An `unpark` in between
    /// finds no `PARKED_kind`, so it leaves its token (as it does before a
    /// commit) and never schedules the thread: one party resumes it.
    #[inline]
    pub(crate) fn take_parked(&self, kind: Kind) -> bool {
        let mut s = self.word.load(Ordering::Acquire);
        while s & kind.parked() != 0 {
            match self.word.compare_exchange_weak(
                s,
                s & !kind.parked(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Whether the thread is parked (for the deadlock detector).
    #[cfg_attr(loom, allow(dead_code))] // used by the runtime, not the models
    pub(crate) fn is_parked(&self) -> bool {
        self.word.load(Ordering::Acquire) & (PARKED_USER | PARKED_SYNC) != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn token_before_park_is_consumed_without_parking() {
        let p = ParkState::new();
        assert!(!p.unpark(Kind::User));
        assert!(p.try_take(Kind::User));
        assert!(!p.try_take(Kind::User), "only one token is kept");
    }

    #[test]
    fn unpark_after_commit_schedules_once() {
        let p = ParkState::new();
        assert!(p.commit(Kind::Sync));
        assert!(p.is_parked());
        assert!(!p.unpark(Kind::User), "a user token does not wake a sync wait");
        assert!(p.unpark(Kind::Sync));
        assert!(!p.is_parked());
        assert!(p.try_take(Kind::User), "the user token is still there");
        assert!(!p.try_take(Kind::Sync), "the wake consumed the sync token");
    }

    #[test]
    fn commit_after_token_resumes() {
        let p = ParkState::new();
        p.unpark(Kind::Sync);
        assert!(!p.commit(Kind::Sync));
        assert!(!p.is_parked());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model: a thread parks (steps 1-3) while another unparks it. Exactly one
    //! side resumes it, and the side that does sees the context it saved.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    struct Thread {
        state: ParkState,
        context: UnsafeCell<u32>,
    }

    fn race(kind: Kind, stray_user_unpark: bool) {
        loom::model(move || {
            let t = Arc::new(Thread { state: ParkState::new(), context: UnsafeCell::new(0) });
            let waker = {
                let t = t.clone();
                loom::thread::spawn(move || {
                    if t.state.unpark(kind) {
                        // We scheduled it: its saved context must be visible.
                        // SAFETY: loom checks this read against the write below.
                        t.context.with(|c| assert_eq!(unsafe { *c }, 7));
                        true
                    } else {
                        false
                    }
                })
            };
            let stray = stray_user_unpark.then(|| {
                let t = t.clone();
                loom::thread::spawn(move || assert!(!t.state.unpark(Kind::User)))
            });
            let resumed_itself = if t.state.try_take(kind) {
                true
            } else {
                // Switching away saves the context...
                // SAFETY: loom checks this write against the waker's read.
                t.context.with_mut(|c| unsafe { *c = 7 });
                // ...then the next context commits the park.
                !t.state.commit(kind)
            };
            let scheduled = waker.join().unwrap();
            if let Some(s) = stray {
                s.join().unwrap();
            }
            assert!(resumed_itself ^ scheduled, "resumed exactly once");
        });
    }

    /// Model: a thread parked for a `User` token is taken over by a
    /// reclaimer (`take_parked`, then it rewrites the saved stack, then
    /// `commit`) while a waker unparks it. Exactly one party schedules the
    /// thread; the waker never schedules it while the reclaimer holds it
    /// (loom reports the stack's cell touched by both at once), and whoever
    /// schedules it sees the reclaimer's writes.
    #[test]
    fn loom_reclaim_races_unpark() {
        loom::model(|| {
            let t = Arc::new(Thread { state: ParkState::new(), context: UnsafeCell::new(0) });
            // Parked: context saved (7), park committed.
            // SAFETY: before any other thread exists.
            t.context.with_mut(|c| unsafe { *c = 7 });
            assert!(t.state.commit(Kind::User));
            let waker = {
                let t = t.clone();
                loom::thread::spawn(move || {
                    if t.state.unpark(Kind::User) {
                        // SAFETY: loom checks this read against the reclaimer's writes.
                        let v = t.context.with(|c| unsafe { *c });
                        assert!(v == 7 || v == 9, "a whole stack, saved or restored");
                        true
                    } else {
                        false
                    }
                })
            };
            let mut reclaimer_scheduled = false;
            if t.state.take_parked(Kind::User) {
                // The stack copied out and given back, marked reclaimed.
                // SAFETY: loom checks this write against the waker's read.
                t.context.with_mut(|c| unsafe { *c = 9 });
                reclaimer_scheduled = !t.state.commit(Kind::User);
            }
            let waker_scheduled = waker.join().unwrap();
            assert!(
                reclaimer_scheduled ^ waker_scheduled,
                "the thread is scheduled exactly once: reclaimer {reclaimer_scheduled}, waker {waker_scheduled}"
            );
        });
    }

    #[test]
    fn loom_park_unpark_user() {
        race(Kind::User, false);
    }

    #[test]
    fn loom_park_unpark_sync_with_stray_user_unpark() {
        race(Kind::Sync, true);
    }
}
