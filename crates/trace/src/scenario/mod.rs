//! The scenarios: the seed's ThreadTest tests translated to Linux, as data ([`Scenario`],
//! [`ThreadSpec`]), plus one runner ([`record`]) that turns a scenario into a [`Timeline`].
//!
//! Each scenario is one entry of a table, and the entry holds everything about it: its
//! threads, what it shows ([`Scenario::explanation`]) and how to judge a recording of it
//! ([`Scenario::verdict`]), which reads the scenario's own lanes by position. Nothing
//! elsewhere chooses behaviour by a scenario's id.
//!
//! - this module: the types, the table's order, lookup, and the words verdicts share;
//! - `os_threads`: scenarios 1–10 and 17–18, OS threads under the kernel's scheduler, sampled;
//! - `rt_threads`: scenarios 11–16, schedlab-rt user threads, from the runtime's events;
//! - `run`: the runner ([`record`], [`record_at`]).
//!
//! They live here rather than among the probes (docs/ARCHITECTURE.md says why): a scenario
//! is a recording with a verdict, not a sampled probe, and the runner, the recorders and the
//! statistics it is judged by are all this crate's.

use schedlab_measure::units::human_ns;

pub use crate::rt::{Blocker, BudgetSetup, RtSetup};
use crate::stats::ThreadStats;
use crate::Timeline;

mod os_threads;
mod rt_threads;
mod run;
// Issue 25: seed 001's Figure 5, the application in the background (autogroup).
mod session;

pub use run::{record, record_at, record_with};

/// A scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_OTHER (CFS/EEVDF), weighted by nice.
    Other,
    /// SCHED_IDLE: runs only when nothing else wants the CPU (weight 3 against nice 0's 1024).
    Idle,
    /// SCHED_FIFO at a priority (root): strict priority, as Windows' scheduler.
    Fifo(i32),
}

/// What a worker does during the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Computes without pause.
    Busy,
    /// Computes and calls `sched_yield` after every batch from `from_permille`/1000 of the
    /// window on.
    Yield {
        /// When yielding starts, in thousandths of the window.
        from_permille: u64,
    },
    /// Works `work_us`, sleeps `sleep_us`, repeatedly: a background thread budgeting itself.
    Budget {
        /// Work per period, µs.
        work_us: u64,
        /// Sleep per period, µs.
        sleep_us: u64,
    },
    /// Computes, but sleeps once for `sleep_us` at `at_us` (the induced gap of the tests).
    SleepOnce {
        /// When, µs after the origin.
        at_us: u64,
        /// How long, µs.
        sleep_us: u64,
    },
    /// Sleeps `period_us` in a loop and records the overshoot of every sleep; sets the timer
    /// slack to `slack_ns` first when given.
    Sleeper {
        /// Requested sleep, µs.
        period_us: u64,
        /// Timer slack to set, ns (None: leave the default).
        slack_ns: Option<u64>,
        /// Sleep only in this half of the window (0: first, 1: second). The halves keep the
        /// two sleepers apart: a sleeper with 1 ns slack running alongside one with the
        /// default would wake the CPU and expire the other's timer early in its slack,
        /// hiding the difference.
        half: u64,
    },
}

/// One thread of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSpec {
    /// Its lane name.
    pub name: &'static str,
    /// Its scheduling policy.
    pub policy: Policy,
    /// Its nice value.
    pub nice: i32,
    /// Pinned to the scenario's CPU.
    pub pinned: bool,
    /// What it does.
    pub behaviour: Behaviour,
}

impl ThreadSpec {
    /// A pinned SCHED_OTHER nice-0 thread that computes without pause: the table's starting
    /// point, changed field by field.
    const fn busy(name: &'static str) -> ThreadSpec {
        ThreadSpec {
            name,
            policy: Policy::Other,
            nice: 0,
            pinned: true,
            behaviour: Behaviour::Busy,
        }
    }

    /// How the thread was set up, in words.
    pub fn detail(&self) -> String {
        let policy = match self.policy {
            Policy::Other => format!("SCHED_OTHER nice {}", self.nice),
            Policy::Idle => "SCHED_IDLE".to_string(),
            Policy::Fifo(p) => format!("SCHED_FIFO {p}"),
        };
        let what = match self.behaviour {
            Behaviour::Busy => "busy".to_string(),
            Behaviour::Yield { from_permille: 0 } => "sched_yield after each batch".to_string(),
            Behaviour::Yield { from_permille } => {
                format!("sched_yield from {}% of the window", from_permille / 10)
            }
            Behaviour::Budget { work_us, sleep_us } => {
                format!("work {} ms, sleep {} ms", work_us / 1000, sleep_us / 1000)
            }
            Behaviour::SleepOnce { at_us, sleep_us } => {
                format!("busy, one {} ms sleep at {} ms", sleep_us / 1000, at_us / 1000)
            }
            Behaviour::Sleeper { period_us, slack_ns, half } => {
                let when = if half == 0 { "first" } else { "second" };
                match slack_ns {
                    None => format!("sleep {period_us} µs, default timer slack, {when} half"),
                    Some(s) => format!("sleep {period_us} µs, timer slack {s} ns, {when} half"),
                }
            }
        };
        let pin = if self.pinned { ", pinned" } else { "" };
        format!("{policy}{pin}, {what}")
    }
}

/// A CPU-burning process beside a scenario's threads, on their CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hog {
    /// Nothing else.
    None,
    /// A forked child spinning, in our session and process group.
    Process,
    /// `processes` forked children spinning, in a process group of their own, and in a
    /// session of their own when `own_session` (`setsid`: with autogroup, a scheduling
    /// group of its own, as a program started from another terminal).
    Group {
        /// Spinning processes.
        processes: usize,
        /// In a new session rather than ours.
        own_session: bool,
    },
}

/// A scenario's judge: the result of one recording in words, from the timeline and its
/// per-thread statistics (in lane order).
pub type Verdict = fn(&Timeline, &[ThreadStats]) -> String;

/// One experiment.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The seed's test number (`3`), how it is addressed.
    pub id: &'static str,
    /// Its name (`two-equal`), the other way to address it.
    pub name: &'static str,
    /// A title for pictures.
    pub title: &'static str,
    /// How long the threads run, ms.
    pub window_ms: u64,
    /// A CPU-burning process beside the threads, on the same CPU.
    pub hog: Hog,
    /// Needs root (SCHED_FIFO).
    pub needs_root: bool,
    /// Also worth measuring what recording costs ([`crate::sampling::overhead`]): the
    /// reference scenario, whose useful-work rate the others are read against.
    pub measures_overhead: bool,
    /// A schedlab-rt scenario: user threads on one virtual processor, recorded from the
    /// runtime's events (`None`: OS threads, sampled).
    pub rt: Option<RtSetup>,
    /// The threads.
    pub threads: Vec<ThreadSpec>,
    /// What it shows, and how Linux differs from the Windows XP the seed describes.
    pub explanation: &'static str,
    /// What a recording of it showed, in words; written beside the threads whose lanes it
    /// reads (`stats[1]` is the second thread listed). Call as `(s.verdict)(&t, &stats)`.
    pub verdict: Verdict,
}

impl Scenario {
    /// User threads of a schedlab-rt scenario (0 for OS-thread scenarios).
    pub fn rt_threads(&self) -> usize {
        self.rt.as_ref().map_or(0, |r| r.threads)
    }
}

/// Every scenario, in the seed's order.
pub fn scenarios() -> Vec<Scenario> {
    let mut all = os_threads::scenarios();
    all.extend(rt_threads::scenarios());
    all.extend(os_threads::later());
    all.extend(session::scenarios());
    all
}

/// The scenario addressed by its number or name.
pub fn find(key: &str) -> Option<Scenario> {
    scenarios().into_iter().find(|s| s.id == key || s.name.eq_ignore_ascii_case(key))
}

// The words verdicts share.

/// A share as `49.6%`.
fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A thread's median run, the effective time slice.
fn slice(s: &ThreadStats) -> String {
    s.run_len.map_or("-".into(), |d| human_ns(d.p50))
}

/// Every thread's share, runs and median slice: where most verdicts start.
fn shares(stats: &[ThreadStats]) -> String {
    stats
        .iter()
        .map(|s| {
            format!("{} {} ({} runs, median slice {})", s.name, pct(s.cpu_share), s.runs, slice(s))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Lane, Span};
    use crate::stats::timeline_stats;

    #[test]
    fn scenarios_are_found_by_number_and_name() {
        assert_eq!(find("3").unwrap().name, "two-equal");
        assert_eq!(find("nice").unwrap().id, "5");
        assert!(find("nope").is_none());
        let all = scenarios();
        for (i, s) in all.iter().enumerate() {
            assert_eq!(s.id, (i + 1).to_string(), "scenarios are in the seed's order");
            assert!(!s.threads.is_empty() || s.rt.is_some());
            // Short, except where the seed's point needs seconds (scenario 18: the kernel's
            // answer to starvation comes once a second).
            assert!(s.window_ms <= 2_500, "scenarios stay short");
        }
    }

    /// The lanes a recording of `s` has: one per thread, or for schedlab-rt the processor's
    /// then one per user thread (the blocker last), each running 1 ms of every 3.
    fn lanes_of(s: &Scenario) -> Vec<Lane> {
        let names: Vec<String> = match &s.rt {
            None => s.threads.iter().map(|t| t.name.to_string()).collect(),
            Some(rt) => std::iter::once("vp0".to_string())
                .chain((0..rt.threads + usize::from(rt.blocker.is_some())).map(|i| format!("u{i}")))
                .collect(),
        };
        let window = s.window_ms * 1_000_000;
        names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut l = Lane::new(name, "");
                l.done_ns = window;
                l.work_units = 1000;
                l.runs = (0..window / 3_000_000)
                    .map(|k| k * 3_000_000 + i as u64 % 3 * 1_000_000)
                    .map(|start_ns| Span { start_ns, end_ns: start_ns + 1_000_000 })
                    .collect();
                l
            })
            .collect()
    }

    /// The header `timeline` prints is read from the setup: scenario 14 runs three user
    /// threads (one of them sleeping in the kernel), and 16's never yield.
    #[test]
    fn rt_headers_say_what_the_scenario_runs() {
        let detail = |id: &str| find(id).unwrap().rt.unwrap().detail();
        let d14 = detail("14");
        assert!(d14.starts_with("3 schedlab-rt user threads"), "{d14}");
        assert!(d14.contains("sleeps 20 ms in the kernel, its processor handed off"), "{d14}");
        assert!(detail("15").contains("no hand-off"), "{}", detail("15"));
        let d16 = detail("16");
        assert!(d16.starts_with("2 schedlab-rt user threads"), "{d16}");
        assert!(d16.contains("never yielding") && !d16.contains("yield_now"), "{d16}");
        assert!(d16.contains("held to 10% per 20 ms"), "{d16}");
        assert!(detail("11").contains("cooperative"), "{}", detail("11"));
    }

    #[test]
    fn every_verdict_reads_its_own_scenarios_lanes() {
        for s in scenarios() {
            let t = Timeline {
                scenario: format!("{} {}", s.id, s.name),
                title: s.title.to_string(),
                recorder: "test".to_string(),
                window_ns: s.window_ms * 1_000_000,
                threshold_ns: 40_000,
                interval_ns: 10_000,
                lanes: lanes_of(&s),
                marks: Vec::new(),
            };
            let stats = timeline_stats(&t);
            let v = (s.verdict)(&t, &stats);
            assert!(v.len() > 20, "scenario {}: {v:?}", s.id);
        }
    }
}
