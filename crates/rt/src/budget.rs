//! CPU budgets: a user thread that may use at most a share of a processor per
//! period ([`crate::Builder::cpu_budget`]), the user-level counterpart of cgroup
//! v2's `cpu.max`, enforced by the scheduler rather than by the thread sleeping
//! itself (seed 001's background loader held to 10%).
//!
//! # Accounting
//!
//! A budgeted thread is charged the wall time it is *current* on a processor:
//! from the moment a context switch resumes it to the moment the processor's
//! next context resumes (or it leaves the processor without a switch: exit,
//! or detached by a blocking hand-off, when blocked time is not charged, as
//! cgroups charge CPU time only). Both ends are seen on the processor's own
//! kernel thread, in `after_switch` and `Processor::take_current`, so the
//! charge needs no synchronisation beyond the atomics that let the monitor and
//! the thread's handle read it. Unbudgeted threads pay one test of a
//! runtime-wide flag per switch, and only runtimes that spawned a budgeted
//! thread pay more (two clock reads per stint of a budgeted thread).
//!
//! Periods are aligned to the thread's first run: period `k` is
//! `[first + k·period, first + (k+1)·period)`; a stint that crosses a boundary
//! is charged to the new period only from the boundary.
//!
//! # Enforcement
//!
//! When a budgeted thread starts a stint, its processor publishes the moment
//! its budget for the period runs out (`Processor::budget_deadline`) and pokes
//! the monitor, which signals the processor's kernel thread at that moment,
//! whether or not other work waits: a budget holds on an otherwise idle
//! processor too, as `cpu.max` does. The signal takes the thread to
//! `preempt::preempted` at a safe point, which throttles it: it sleeps on the
//! runtime's timers until the period ends ([`crate::Event::Throttled`]). A
//! thread woken while its period's budget is spent is throttled the same way
//! as soon as it runs. So a period's charge exceeds the budget by at most the
//! monitor's wake-up and the signal's delivery (tens of µs with the monitor's
//! real-time priority), or by a `no_preempt` region or non-preemptible
//! thread, which defer the signal as they defer a quantum.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Shortest period accepted: the enforcement's granularity is tens of µs, so a
/// period must be long enough for a budget to mean something.
pub(crate) const MIN_PERIOD: Duration = Duration::from_micros(500);

/// Smallest allowance per period accepted (`fraction × period`): below it a budget
/// throttles its thread at once in every period, and one that rounds to 0 ns never
/// lets it run at all.
pub(crate) const MIN_ALLOWANCE: Duration = Duration::from_micros(1);

/// A period in nanoseconds, saturated at 2⁶³ ns so that period arithmetic on
/// the timer clock cannot overflow.
fn period_ns(period: Duration) -> u64 {
    period.as_nanos().min(u64::MAX as u128 / 2) as u64
}

/// What `fraction` of `period` allows, in nanoseconds.
fn allowance_ns(fraction: f64, period: Duration) -> u64 {
    ((period_ns(period) as f64) * fraction).round() as u64
}

/// The budget of one user thread, and what it has used. Times are nanoseconds
/// on the runtime's timer clock (`Timers::now`). Written only by the
/// processor running the thread (or the thread itself); atomics so that its
/// handle may read the figures at any time.
pub(crate) struct Budget {
    /// Nanoseconds of processor time allowed per period.
    allow: u64,
    /// The period, in nanoseconds.
    period: u64,
    /// Start of the current period, or `NOT_STARTED` before the first run.
    period_start: AtomicU64,
    /// Charged in the current period.
    used: AtomicU64,
    /// Start of the running stint, or `NOT_RUNNING`.
    stint: AtomicU64,
    /// Charged since the thread started.
    total: AtomicU64,
    /// Times the thread was throttled.
    throttles: AtomicU64,
}

const NOT_RUNNING: u64 = u64::MAX;
const NOT_STARTED: u64 = u64::MAX;

/// What a budgeted thread has used, from the scheduler's own accounting
/// ([`crate::Thread::budget_stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetStats {
    /// The share of a processor allowed per period, as the fraction given.
    pub allowed: Duration,
    /// The period.
    pub period: Duration,
    /// Processor time charged since the thread first ran (including a stint
    /// in progress up to its last charge).
    pub used: Duration,
    /// How many times the thread was throttled to the end of a period.
    pub throttled: u64,
}

impl Budget {
    /// A budget of `fraction` of a processor per `period`. The caller has
    /// checked both ([`check`]).
    pub(crate) fn new(fraction: f64, period: Duration) -> Budget {
        Budget {
            allow: allowance_ns(fraction, period),
            period: period_ns(period),
            period_start: AtomicU64::new(NOT_STARTED),
            used: AtomicU64::new(0),
            stint: AtomicU64::new(NOT_RUNNING),
            total: AtomicU64::new(0),
            throttles: AtomicU64::new(0),
        }
    }

    /// Moves to the period containing `now`, if the current one has ended.
    fn roll(&self, now: u64) {
        let start = self.period_start.load(Ordering::Relaxed);
        if start == NOT_STARTED {
            self.period_start.store(now, Ordering::Relaxed);
            self.used.store(0, Ordering::Relaxed);
        } else if now >= start + self.period {
            let periods = (now - start) / self.period;
            self.period_start.store(start + periods * self.period, Ordering::Relaxed);
            self.used.store(0, Ordering::Relaxed);
        }
    }

    /// A stint starts at `now`. Returns when the period's budget runs out if
    /// the stint goes on (`now` itself if it is already spent).
    pub(crate) fn start(&self, now: u64) -> u64 {
        self.roll(now);
        self.stint.store(now, Ordering::Relaxed);
        now + self.allow.saturating_sub(self.used.load(Ordering::Relaxed))
    }

    /// The running stint ends at `now` (nothing if none runs).
    pub(crate) fn stop(&self, now: u64) {
        let began = self.stint.swap(NOT_RUNNING, Ordering::Relaxed);
        if began == NOT_RUNNING || now < began {
            return;
        }
        self.roll(now);
        let from = began.max(self.period_start.load(Ordering::Relaxed));
        self.used.fetch_add(now - from, Ordering::Relaxed);
        self.total.fetch_add(now - began, Ordering::Relaxed);
    }

    /// Charges the running stint up to `now` and keeps it running; returns
    /// how long until the period ends if the period's budget is spent.
    pub(crate) fn spent(&self, now: u64) -> Option<Duration> {
        let running = self.stint.load(Ordering::Relaxed) != NOT_RUNNING;
        if running {
            self.stop(now);
        } else {
            self.roll(now);
        }
        let spent = self.used.load(Ordering::Relaxed) >= self.allow;
        if running && !spent {
            self.stint.store(now, Ordering::Relaxed);
        }
        spent.then(|| {
            let end = self.period_start.load(Ordering::Relaxed) + self.period;
            Duration::from_nanos(end.saturating_sub(now))
        })
    }

    /// Counts a throttle.
    pub(crate) fn throttled(&self) {
        self.throttles.fetch_add(1, Ordering::Relaxed);
    }

    /// Charged in the current period (for the event).
    pub(crate) fn used_in_period(&self) -> Duration {
        Duration::from_nanos(self.used.load(Ordering::Relaxed))
    }

    pub(crate) fn stats(&self) -> BudgetStats {
        BudgetStats {
            allowed: Duration::from_nanos(self.allow),
            period: Duration::from_nanos(self.period),
            used: Duration::from_nanos(self.total.load(Ordering::Relaxed)),
            throttled: self.throttles.load(Ordering::Relaxed),
        }
    }
}

/// Checks a budget's parameters ([`crate::Builder::cpu_budget`]); the error names
/// the knob and the value.
pub(crate) fn check(fraction: f64, period: Duration) -> Result<(), String> {
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(format!(
            "Builder::cpu_budget: a CPU budget's fraction must be in (0, 1], not {fraction}"
        ));
    }
    if period < MIN_PERIOD {
        return Err(format!(
            "Builder::cpu_budget: a CPU budget's period must be at least {MIN_PERIOD:?} (the \
             enforcement's granularity is tens of microseconds), not {period:?}"
        ));
    }
    let allow = allowance_ns(fraction, period);
    if allow < MIN_ALLOWANCE.as_nanos() as u64 {
        return Err(format!(
            "Builder::cpu_budget: {fraction} of {period:?} allows {allow} ns per period; a \
             CPU budget must allow at least {MIN_ALLOWANCE:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_stint_is_charged_to_its_period_and_the_deadline_is_what_is_left() {
        let b = Budget::new(0.1, Duration::from_millis(100));
        assert_eq!(b.start(1_000), 1_000 + 10 * MS);
        b.stop(1_000 + 4 * MS);
        assert_eq!(b.used_in_period(), Duration::from_millis(4));
        assert_eq!(b.start(1_000 + 50 * MS), 1_000 + 56 * MS);
        assert_eq!(b.spent(1_000 + 57 * MS), Some(Duration::from_millis(43)));
        assert_eq!(b.stats().used, Duration::from_millis(11));
    }

    #[test]
    fn a_stint_across_a_period_boundary_is_charged_from_the_boundary() {
        let b = Budget::new(0.5, Duration::from_millis(10));
        b.start(0);
        b.stop(2 * MS);
        b.start(9 * MS);
        b.stop(13 * MS);
        // The new period [10, 20) is charged 3 ms; the thread ran 6 ms in all.
        assert_eq!(b.used_in_period(), Duration::from_millis(3));
        assert_eq!(b.stats().used, Duration::from_millis(6));
        // Periods skipped while the thread did not run reset the charge.
        assert_eq!(b.start(45 * MS), 50 * MS);
    }

    #[test]
    fn spent_keeps_a_running_stint_running() {
        let b = Budget::new(0.2, Duration::from_millis(10));
        b.start(0);
        assert_eq!(b.spent(MS), None);
        assert_eq!(b.spent(2 * MS), Some(Duration::from_millis(8)));
        b.stop(3 * MS);
        assert_eq!(b.stats().used, Duration::from_millis(2), "stopped by spent at 2 ms");
    }

    #[test]
    fn parameters_are_checked() {
        assert!(check(0.1, Duration::from_millis(100)).is_ok());
        assert!(check(1.0, MIN_PERIOD).is_ok());
        assert!(check(0.0, Duration::from_millis(100)).is_err());
        assert!(check(1.5, Duration::from_millis(100)).is_err());
        assert!(check(f64::NAN, Duration::from_millis(100)).is_err());
        assert!(check(0.5, Duration::from_micros(10)).is_err());
    }
}
