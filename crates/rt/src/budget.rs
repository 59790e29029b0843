//! CPU budgets: a user thread that may use at most a share of a processor per
//! period ([`crate::Builder::cpu_budget`]), the user-level counterpart of cgroup
//! v2's `cpu.max`, enforced by the scheduler rather than by the thread sleeping
//! itself (seed 001's background loader held to 10%).
//!
//! # Accounting
//!
//! A budgeted thread is charged the **CPU time** it consumes, as its
//! account measures it (`cputime.rs`: its kernel thread's CPU clock,
//! `CLOCK_THREAD_CPUTIME_ID`, read when a context switch resumes it and
//! again when the processor's next context resumes, or it leaves the
//! processor without a switch: exit, or detached by a blocking hand-off,
//! when blocked time is not charged, as cgroups charge CPU time only). The
//! first budgeted spawn turns the runtime's CPU-time accounting on; the
//! budget adds the wall-clock periods and charges each stint's CPU time, as
//! the account reports it, to them. Time its kernel thread spends waiting for a
//! CPU on a loaded machine is not charged: it did not run. (Before 2026-11-27
//! the charge was wall time current on a processor, which a loaded machine
//! inflated by everything the kernel gave to others.) Both ends are seen on
//! the processor's own kernel thread, in `after_switch` and
//! `Processor::take_current`, so the charge needs no synchronisation beyond
//! the atomics that let the thread's handle read it. Runtimes without a
//! budgeted thread (or a request for a thread's CPU time) pay one test of a
//! processor flag per switch; the others pay, per stint, two reads of each
//! clock, and two `timer_settime` per stint of a budgeted thread.
//!
//! Periods are wall time, aligned to the thread's first run: period `k` is
//! `[first + k·period, first + (k+1)·period)`, as `cpu.max`'s period is. A
//! stint that crosses a boundary is charged to the new period no more than
//! the wall time since the boundary. What a period's charge exceeds the
//! allowance by (the enforcement's delay, below) is carried into the next
//! period as a debt, as CFS bandwidth's `runtime_remaining` goes negative
//! and is paid back from the next refill (kernel/sched/fair.c): over many
//! periods the thread gets its share, not its share plus the delay.
//!
//! # Enforcement
//!
//! When a budgeted thread starts a stint, its processor arms its kernel
//! thread's CPU-time timer (`cputimer::CpuTimer`, one per kernel thread,
//! made at the first budgeted stint there) for what is left of the period's
//! allowance, and disarms it when the stint ends. The kernel counts only the
//! CPU the thread consumes and, when the allowance is used up, sends the
//! runtime's preemption signal to that kernel thread with the timer's cookie
//! as its value — whether or not other work waits, and with no monitor in
//! between, so a loaded machine cannot make the enforcement late: the
//! monitor's own wake-up is wall time, the budget is not. The handler
//! (`preempt.rs`) takes the signal at a safe point to `preempt::preempted`,
//! which throttles the thread: it sleeps on the runtime's timers until the
//! period ends ([`crate::Event::Throttled`]). A thread woken while its
//! period's budget is spent is throttled the same way as soon as it runs.
//! The timer repeats every [`RETRY_CPU`] of CPU time until disarmed, so a
//! signal that found the thread where it cannot be preempted (in libc, in a
//! runtime section: the latter takes it at the section's end) is sent again.
//! A period's charge exceeds the allowance by the kernel's check of CPU
//! timers, made from its tick (up to one tick, 1–4 ms), and by a `no_preempt`
//! region or non-preemptible thread, which defer the signal as they defer a
//! quantum; the next period pays it back.
//!
//! If the kernel refuses a timer (`timer_create` fails), the processor falls
//! back to publishing a wall-clock deadline (`Processor::budget_deadline`)
//! that the monitor enforces by signal, as before the timer existed: late on
//! a loaded machine, and the charge is still CPU time.
//!
//! No new cross-thread protocol: the timer, its signal and the switch that
//! arms and disarms it are all on one kernel thread; a timer signal queued
//! just before a disarm lands on whatever runs next, and the handler acts on
//! it only if that thread has a budget, whose `spent` then decides.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the budget's CPU-time timer repeats once it has fired, until
/// the stint ends: the retry of a signal that found no safe point.
pub(crate) const RETRY_CPU: Duration = Duration::from_micros(500);

/// Shortest period accepted: the kernel checks CPU timers at its tick, so a
/// period must be long enough for a budget to mean something (a shorter one's
/// overruns are paid back in later periods, but each period is then all or
/// nothing).
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

/// The budget of one user thread, and what it has used. Wall times (`now`)
/// are nanoseconds on the runtime's timer clock (`Timers::now`); CPU times
/// (`ran`) nanoseconds of CPU a stint consumed, from the thread's account
/// (`cputime.rs`). Written only by the
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
    /// Wall-clock start of the running stint, or `NOT_RUNNING`.
    stint: AtomicU64,
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
    /// CPU time charged since the thread first ran: what its kernel threads'
    /// CPU clocks advanced while it was current on a processor (not the wall
    /// time it was current: a kernel thread waiting for a CPU is not charged),
    /// including a stint in progress up to its last charge.
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
            // An overrun of the period that just ended is a debt on the next
            // one (module docs); periods that passed without the thread
            // running are not owed anything.
            let used = self.used.load(Ordering::Relaxed);
            let debt = if periods == 1 { used.saturating_sub(self.allow) } else { 0 };
            self.used.store(debt, Ordering::Relaxed);
        }
    }

    /// A stint starts at wall time `now`. Returns how much CPU time the
    /// period's budget has left (0 if it is spent).
    pub(crate) fn start(&self, now: u64) -> u64 {
        self.roll(now);
        self.stint.store(now, Ordering::Relaxed);
        self.allow.saturating_sub(self.used.load(Ordering::Relaxed))
    }

    /// The running stint ends at `now`, having consumed `ran` ns of CPU
    /// (nothing if none runs).
    pub(crate) fn stop(&self, now: u64, ran: u64) {
        let began = self.stint.swap(NOT_RUNNING, Ordering::Relaxed);
        if began == NOT_RUNNING || now < began {
            return;
        }
        self.roll(now);
        let start = self.period_start.load(Ordering::Relaxed);
        // Across a boundary, the new period is charged no more than it lasted.
        let charge = if began < start { ran.min(now - start) } else { ran };
        self.used.fetch_add(charge, Ordering::Relaxed);
    }

    /// Charges the running stint up to `now`, `ran` ns of CPU since its start
    /// or last charge, and keeps it running; returns how long until the
    /// period ends if the period's budget is spent.
    pub(crate) fn spent(&self, now: u64, ran: u64) -> Option<Duration> {
        let running = self.stint.load(Ordering::Relaxed) != NOT_RUNNING;
        if running {
            self.stop(now, ran);
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

    /// The figures, with `used` ns of CPU since the thread first ran (its
    /// account's finished stints: accounting starts before a budgeted
    /// thread is published).
    pub(crate) fn stats(&self, used: u64) -> BudgetStats {
        BudgetStats {
            allowed: Duration::from_nanos(self.allow),
            period: Duration::from_nanos(self.period),
            used: Duration::from_nanos(used),
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
             enforcement's granularity is the kernel's CPU-timer check), not {period:?}"
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

    // In these tests a stint's CPU time is its wall time (the kernel thread
    // always had a CPU) unless the test says otherwise; the account's CPU
    // time (`ran`) is given as the account would report it.

    #[test]
    fn a_stint_is_charged_to_its_period_and_the_allowance_left_is_returned() {
        let b = Budget::new(0.1, Duration::from_millis(100));
        assert_eq!(b.start(1_000), 10 * MS);
        b.stop(1_000 + 4 * MS, 4 * MS);
        assert_eq!(b.used_in_period(), Duration::from_millis(4));
        assert_eq!(b.start(1_000 + 50 * MS), 6 * MS);
        assert_eq!(b.spent(1_000 + 57 * MS, 7 * MS), Some(Duration::from_millis(43)));
    }

    #[test]
    fn a_descheduled_kernel_thread_is_charged_only_the_cpu_it_got() {
        let b = Budget::new(0.2, Duration::from_millis(20));
        assert_eq!(b.start(0), 4 * MS);
        // 10 ms current on its processor, but the kernel ran it for 3.
        b.stop(10 * MS, 3 * MS);
        assert_eq!(b.used_in_period(), Duration::from_millis(3));
        assert_eq!(b.start(11 * MS), MS, "1 ms of CPU left");
        assert_eq!(b.spent(18 * MS, MS / 2), None, "half a ms of CPU in 7 ms");
        assert_eq!(b.spent(19 * MS, MS / 2), Some(Duration::from_millis(1)));
    }

    #[test]
    fn a_stint_across_a_period_boundary_is_charged_from_the_boundary() {
        let b = Budget::new(0.5, Duration::from_millis(10));
        b.start(0);
        b.stop(2 * MS, 2 * MS);
        b.start(9 * MS);
        b.stop(13 * MS, 4 * MS);
        // The new period [10, 20) is charged 3 ms of the stint's 4.
        assert_eq!(b.used_in_period(), Duration::from_millis(3));
        // Periods skipped while the thread did not run reset the charge.
        assert_eq!(b.start(45 * MS), 5 * MS);
    }

    #[test]
    fn an_overrun_is_paid_back_in_the_next_period() {
        let b = Budget::new(0.2, Duration::from_millis(20));
        b.start(0);
        // The signal came 3 ms late: 7 ms charged against 4.
        b.stop(7 * MS, 7 * MS);
        assert_eq!(b.start(20 * MS), MS, "3 ms owed from the last period");
        b.stop(21 * MS, MS);
        // A period skipped owes nothing.
        assert_eq!(b.start(75 * MS), 4 * MS);
    }

    #[test]
    fn spent_keeps_a_running_stint_running() {
        let b = Budget::new(0.2, Duration::from_millis(10));
        b.start(0);
        assert_eq!(b.spent(MS, MS), None);
        assert_eq!(b.spent(2 * MS, MS), Some(Duration::from_millis(8)));
        b.stop(3 * MS, MS);
        assert_eq!(b.used_in_period(), Duration::from_millis(2), "stopped by spent at 2 ms");
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
