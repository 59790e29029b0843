//! Priorities: three levels of user threads ([`Priority`], `Builder::priority`), strict
//! between levels, with aging so that no level starves forever.
//!
//! # The rule
//!
//! - A processor choosing what to run takes a waiting `High` thread first, then its
//!   `Normal` work (next slot, run queue, injection queue, other processors' queues), and
//!   a `Low` thread only when it has nothing else.
//! - A thread becoming runnable while a lower level runs is not left waiting for the
//!   quantum: woken on a processor that runs a lower-priority thread, it takes that
//!   processor as soon as the waker leaves the runtime's code (the waker is preempted at
//!   the end of its runtime section); woken elsewhere (a timer the monitor fired, an OS
//!   thread), the monitor preempts a processor running a lower level at once: seed 003's
//!   `sa_preempt` of a lower-priority activation for a higher-priority one, with the
//!   `Preempted` event on its timeline.
//! - **Aging.** A `Low` thread that has waited [`AGING`] is moved by the monitor among the
//!   `Normal` work, where it takes its turn (one stint) before going back to its level; a
//!   processor that has run `High` threads for [`AGING`] while `Normal` work waited on it
//!   gives that work one turn. So a runnable thread of any level starts within
//!   [`AGING`] plus a quantum (plus the monitor's and the signal's delays), and a level
//!   under a saturating one still gets about a quantum per [`AGING`]. With
//!   `Preemption::Cooperative`, threads that never yield are not preempted for a level
//!   either; aging then takes effect at the next scheduling decision.
//!
//! # Where the levels live
//!
//! `Normal` threads live where every thread lived before priorities: the per-processor
//! queues and next slots, stolen between processors. `High` and `Low` threads wait in two
//! runtime-wide FIFO queues ([`PrioQueues`]), under one lock each: they are expected to be
//! few (a main loop, a loader), and one queue per level makes the levels strict across
//! processors without a steal protocol. Every path that makes a thread runnable diverts a
//! non-`Normal` thread there once the runtime has spawned one (a processor flag, tested
//! only on those paths), so a runtime without priorities pays nothing else.

use crate::task::TaskRef;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long a thread of a level under a busy higher one may wait before it gets a turn.
pub const AGING: Duration = Duration::from_millis(100);

/// The scheduling level of a user thread ([`crate::Builder::priority`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Runs before everything else; for threads that block most of the time and must
    /// run as soon as they are woken (a frame loop, an event handler).
    High,
    /// The default.
    #[default]
    Normal,
    /// Runs when nothing else would (background work); aged after [`AGING`].
    Low,
}

impl Priority {
    pub(crate) fn as_u8(self) -> u8 {
        self as u8
    }

    pub(crate) fn from_u8(v: u8) -> Priority {
        match v {
            0 => Priority::High,
            2 => Priority::Low,
            _ => Priority::Normal,
        }
    }
}

/// The runtime-wide queues of the `High` and `Low` levels.
#[derive(Default)]
pub(crate) struct PrioQueues {
    high: Mutex<VecDeque<TaskRef>>,
    /// With the timer-clock time each thread was queued, for aging.
    low: Mutex<VecDeque<(TaskRef, u64)>>,
    high_len: AtomicUsize,
    low_len: AtomicUsize,
}

impl PrioQueues {
    /// Queues `t` (of level `p`, not `Normal`) at the tail of its level, queued at `now`.
    pub(crate) fn push(&self, t: TaskRef, p: Priority, now: u64) {
        match p {
            Priority::High => {
                let mut q = self.high.lock().unwrap_or_else(|e| e.into_inner());
                q.push_back(t);
                self.high_len.store(q.len(), Ordering::Release);
            }
            Priority::Low => {
                let mut q = self.low.lock().unwrap_or_else(|e| e.into_inner());
                q.push_back((t, now));
                self.low_len.store(q.len(), Ordering::Release);
            }
            Priority::Normal => unreachable!("Normal threads live in the processors' queues"),
        }
    }

    /// Whether a `High` thread waits (a hint).
    #[inline]
    pub(crate) fn high_waiting(&self) -> bool {
        self.high_len.load(Ordering::Acquire) != 0
    }

    /// Whether a `Low` thread waits (a hint).
    #[inline]
    pub(crate) fn low_waiting(&self) -> bool {
        self.low_len.load(Ordering::Acquire) != 0
    }

    pub(crate) fn pop_high(&self) -> Option<TaskRef> {
        if !self.high_waiting() {
            return None;
        }
        let mut q = self.high.lock().unwrap_or_else(|e| e.into_inner());
        let t = q.pop_front();
        self.high_len.store(q.len(), Ordering::Release);
        t
    }

    pub(crate) fn pop_low(&self) -> Option<TaskRef> {
        if !self.low_waiting() {
            return None;
        }
        let mut q = self.low.lock().unwrap_or_else(|e| e.into_inner());
        let t = q.pop_front().map(|(t, _)| t);
        self.low_len.store(q.len(), Ordering::Release);
        t
    }

    /// The `Low` threads queued at or before `before` (aged), oldest first; and when
    /// the next one ages, if any waits.
    pub(crate) fn take_aged(&self, before: u64) -> (Vec<TaskRef>, Option<u64>) {
        if !self.low_waiting() {
            return (Vec::new(), None);
        }
        let mut q = self.low.lock().unwrap_or_else(|e| e.into_inner());
        let mut aged = Vec::new();
        while q.front().is_some_and(|(_, at)| *at <= before) {
            aged.push(q.pop_front().expect("peeked").0);
        }
        self.low_len.store(q.len(), Ordering::Release);
        (aged, q.front().map(|(_, at)| *at))
    }

    /// Every queued thread (at shutdown).
    pub(crate) fn drain(&self) -> Vec<TaskRef> {
        let mut all: Vec<TaskRef> =
            self.high.lock().unwrap_or_else(|e| e.into_inner()).drain(..).collect();
        all.extend(self.low.lock().unwrap_or_else(|e| e.into_inner()).drain(..).map(|(t, _)| t));
        self.high_len.store(0, Ordering::Release);
        self.low_len.store(0, Ordering::Release);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_round_trip() {
        assert!(Priority::High < Priority::Normal && Priority::Normal < Priority::Low);
        for p in [Priority::High, Priority::Normal, Priority::Low] {
            assert_eq!(Priority::from_u8(p.as_u8()), p);
        }
        assert_eq!(Priority::default(), Priority::Normal);
    }
}
