//! The scenarios: the seed's ThreadTest tests translated to Linux, as data ([`Scenario`],
//! [`ThreadSpec`]) plus one runner ([`record`]) that turns a scenario into a sampled
//! [`Timeline`].
//!
//! # How a scenario runs
//! 1. The batch size is calibrated (work units per ~5 µs) and the hog process, if any, started.
//! 2. Every worker thread sets itself up (CPU, nice, policy, timer slack), then waits on a
//!    barrier with the caller; a setup error is reported after the barrier so nobody waits
//!    forever.
//! 3. The first thread through the barrier fixes the origin; every worker runs its behaviour
//!    until origin + window, recording into its preallocated [`Recorder`].
//! 4. After every worker has joined, runs are derived from the timestamps (pure functions)
//!    and the lanes assembled. Nothing is allocated or printed while recording.
//!
//! Pinned threads share the last CPU this process may use: the seed's single-processor
//! machine, on a multi-CPU one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use schedlab_measure::sys::{self, Child};
use schedlab_measure::units::human_ns;

use crate::model::{Lane, Mark, Span, Timeline};
pub use crate::rt::{Blocker, RtSetup};
use crate::sampling::{self, derive_runs, now_ns, Recorder, INTERVAL_NS, THRESHOLD_NS};
use crate::stats::ThreadStats;

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

/// One experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// The seed's test number (`3`), how it is addressed.
    pub id: &'static str,
    /// Its name (`two-equal`), the other way to address it.
    pub name: &'static str,
    /// A title for pictures.
    pub title: &'static str,
    /// How long the threads run, ms.
    pub window_ms: u64,
    /// A CPU-burning child process on the same CPU.
    pub hog: bool,
    /// Needs root (SCHED_FIFO).
    pub needs_root: bool,
    /// A schedlab-rt scenario: user threads on one virtual processor, recorded from the
    /// runtime's events (`None`: OS threads, sampled).
    pub rt: Option<RtSetup>,
    /// The threads.
    pub threads: Vec<ThreadSpec>,
    /// What it shows, and how Linux differs from the Windows XP the seed describes.
    pub explanation: &'static str,
}

impl Scenario {
    /// User threads of a schedlab-rt scenario (0 for OS-thread scenarios).
    pub fn rt_threads(&self) -> usize {
        self.rt.as_ref().map_or(0, |r| r.threads)
    }
}

/// Every scenario, in the seed's order.
pub fn scenarios() -> Vec<Scenario> {
    use Behaviour::*;
    let t = ThreadSpec::busy;
    vec![
        Scenario {
            id: "1",
            name: "one-busy",
            title: "1. One busy thread",
            window_ms: 500,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![t("main")],
            explanation: "One thread computes alone on its CPU. The seed saw short interruptions \
                every 10 ms (XP's clock interrupt, the quantum). On Linux the interruptions are \
                the timer tick (CONFIG_HZ, often 250 or 1000 Hz, or none at all with NO_HZ_FULL), \
                interrupts and other tasks woken on this CPU; with nothing else runnable the \
                thread keeps the CPU, and what remains are gaps of a few microseconds, mostly \
                below the recorder's threshold.",
        },
        Scenario {
            id: "2",
            name: "busy-vs-process",
            title: "2. Busy thread while another process burns the same CPU",
            window_ms: 500,
            hog: true,
            needs_root: false,
            rt: None,
            threads: vec![t("main")],
            explanation: "A child process spins on the same CPU. On XP the foreground \
                application got a 3x longer quantum and the background one ran in 130 ms \
                slices, so the thread kept ~75% with long holes. Linux has no foreground boost: \
                EEVDF gives both runnable tasks equal weight (with autogroup, both sit in the \
                same session group), so each gets about half, in slices of about the base slice \
                (3 ms by default), not 130 ms.",
        },
        Scenario {
            id: "3",
            name: "two-equal",
            title: "3. Two equal threads pinned to one CPU",
            window_ms: 600,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![t("a"), t("b")],
            explanation: "Two equal busy threads share one CPU. As on XP, each gets half and \
                the sum of their useful-work rates is one thread's rate. The difference is the \
                slice: EEVDF alternates them in slices of a few milliseconds (the base slice, \
                rounded up to the next timer tick), where XP switched every 130 ms.",
        },
        Scenario {
            id: "4",
            name: "four-equal",
            title: "4. Four equal threads pinned to one CPU",
            window_ms: 600,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![t("a"), t("b"), t("c"), t("d")],
            explanation: "Four equal busy threads on one CPU: a quarter each, and each waits \
                about three slices between its runs. EEVDF keeps the slice fixed rather than \
                dividing a latency target among the threads, so the gaps grow with the number \
                of threads while the runs stay the same length.",
        },
        Scenario {
            id: "5",
            name: "nice",
            title: "5. nice 0 against nice 5 on one CPU",
            window_ms: 600,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![t("nice0"), ThreadSpec { name: "nice5", nice: 5, ..t("") }],
            explanation: "The seed's 'below normal' thread got nothing at all while a normal \
                one was busy: XP ran the highest non-empty priority queue only. Linux's fair \
                classes (CFS, now EEVDF) never starve a lower nice value: they share the CPU by \
                weight, nice 0 = 1024 against nice 5 = 335, so 75% against 25%. Priority \
                changes how much CPU a thread gets, not whether it gets any.",
        },
        Scenario {
            id: "6",
            name: "yield",
            title: "6. sched_yield from one thread, then from both",
            window_ms: 600,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![
                ThreadSpec { behaviour: Yield { from_permille: 0 }, ..t("a") },
                ThreadSpec { behaviour: Yield { from_permille: 500 }, ..t("b") },
            ],
            explanation: "First half: thread a calls sched_yield after every ~5 µs batch while \
                b computes; second half: both yield. XP's Sleep(0) gave the CPU only to an \
                equal-priority ready thread, and two threads both calling Sleep(0) shared the CPU \
                in rapid alternation, losing much of it to switching. Under EEVDF a yield pushes \
                the yielder's deadline back, so a thread yielding against a busy one gets almost \
                nothing (a run now and then); when both yield they alternate every batch, both \
                lanes look continuously busy at this resolution, and the sum of their work \
                rates shows what the switching costs",
        },
        Scenario {
            id: "7",
            name: "idle",
            title: "7. SCHED_IDLE against a busy normal thread",
            window_ms: 600,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![t("normal"), ThreadSpec { policy: Policy::Idle, ..t("idle") }],
            explanation: "SCHED_IDLE is Linux's nearest analogue of an idle-priority thread. XP \
                starved it completely and rescued it after ~5 s (the balance-set manager's \
                starvation boost). On Linux SCHED_IDLE is still part of the fair class with \
                weight 3 (against 1024): it is not starved but gets about 0.3% of the CPU, in \
                occasional short runs; the time to its first run is shown.",
        },
        Scenario {
            id: "8",
            name: "budget",
            title: "8. A background thread budgeting itself: 2 ms work, 10 ms sleep",
            window_ms: 600,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![
                t("main"),
                ThreadSpec {
                    behaviour: Budget { work_us: 2_000, sleep_us: 10_000 },
                    ..t("background")
                },
            ],
            explanation: "The seed's workaround for strict priorities: a normal-priority \
                background thread that works 2 ms and sleeps 10 ms takes ~15% of the CPU. On \
                Linux the same loop takes about 2/12 = 17%; a sleeper waking up gets placed \
                with its lag preserved, so it runs promptly. Linux does not need the trick to \
                get a 'background share': nice or SCHED_IDLE give one (scenarios 5 and 7).",
        },
        Scenario {
            id: "9",
            name: "sleep",
            title: "9. sleep(1 ms) accuracy: default timer slack, then 1 ns",
            window_ms: 800,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![
                ThreadSpec {
                    pinned: false,
                    behaviour: Sleeper { period_us: 1_000, slack_ns: None, half: 0 },
                    ..t("default-slack")
                },
                ThreadSpec {
                    pinned: false,
                    behaviour: Sleeper { period_us: 1_000, slack_ns: Some(1), half: 1 },
                    ..t("slack-1ns")
                },
            ],
            explanation: "On XP, Sleep(1) lasted until the next 10 ms clock interrupt unless \
                timeBeginPeriod(1) shortened the quantum for the whole system. Linux sleeps on \
                high-resolution timers: a 1 ms sleep ends within the thread's timer slack \
                (50 µs by default, so wakeups can be coalesced) plus the wakeup latency. \
                PR_SET_TIMERSLACK of 1 ns is the per-thread answer to timeBeginPeriod: it \
                removes the deliberate lateness and leaves only the wakeup latency.",
        },
        Scenario {
            id: "10",
            name: "fifo",
            title: "10. SCHED_FIFO against SCHED_OTHER on one CPU (root)",
            window_ms: 300,
            hog: false,
            needs_root: true,
            rt: None,
            threads: vec![ThreadSpec { policy: Policy::Fifo(10), ..t("fifo") }, t("other")],
            explanation: "The real-time class is Linux's strict priority, like XP's scheduler: \
                a runnable SCHED_FIFO thread runs until it blocks, and a SCHED_OTHER thread on \
                its CPU gets nothing, except through RT throttling (sched_rt_runtime_us, 950 ms \
                of every second by default), which over this 300 ms window never applies.",
        },
        Scenario {
            id: "11",
            name: "rt-coop",
            title: "11. schedlab-rt: three user threads on one virtual processor, cooperative",
            window_ms: 300,
            hog: false,
            needs_root: false,
            rt: Some(RtSetup::cooperative(3)),
            threads: vec![],
            explanation: "Three schedlab-rt user threads compute on one virtual processor and \
                call yield_now after every millisecond of work. Nothing preempts them: the \
                runtime switches only where they yield, so no slice is shorter than a \
                millisecond of work, and the timeline comes from the runtime's own Switched \
                events (one lane for the virtual processor, slices named after the user thread, \
                then one lane per user thread). This is the cooperative scheme the seed \
                describes first (PalmOS, Windows 3.x): a thread runs until it gives the CPU up; \
                how fairly the runtime rotates among the yielders is what the lanes show",
        },
        Scenario {
            id: "12",
            name: "rt-preempt-10ms",
            title: "12. schedlab-rt: three user threads that never yield, preempted every 10 ms",
            window_ms: 300,
            hog: false,
            needs_root: false,
            rt: Some(RtSetup::preemptive(3, 10_000)),
            threads: vec![],
            explanation: "The threads of scenario 11 stop yielding. Cooperatively the first \
                would keep the processor for the whole window; with a 10 ms quantum the \
                runtime's monitor sees the running thread past its quantum while two others \
                wait, and sends its kernel thread a signal; the handler switches it away at a \
                safe point. The marks on the processor's lane are the Preempted upcalls. A \
                slice can run a little past 10 ms: the monitor learns that a thread started \
                when it next looks, as Go's sysmon does",
        },
        Scenario {
            id: "13",
            name: "rt-preempt-1ms",
            title: "13. schedlab-rt: three user threads that never yield, preempted every 1 ms",
            window_ms: 300,
            hog: false,
            needs_root: false,
            rt: Some(RtSetup::preemptive(3, 1_000)),
            threads: vec![],
            explanation: "Scenario 12 with a 1 ms quantum: ten times the switches, each a \
                signal, a register save (xsave) and a user-level switch; compare the useful \
                work with scenario 12 for the price of a short quantum",
        },
        Scenario {
            id: "14",
            name: "rt-blocking-handoff",
            title: "14. schedlab-rt: a user thread that blocks in the kernel, with hand-off",
            window_ms: 300,
            hog: false,
            needs_root: false,
            rt: Some(RtSetup {
                threads: 2,
                yield_every_us: Some(1000),
                quantum_us: Some(10_000),
                blocker: Some(Blocker { work_us: 2000, block_us: 20_000, handoff: true }),
            }),
            threads: vec![],
            explanation: "Two user threads compute (yielding every millisecond) beside a \
                third that computes 2 ms, then sleeps 20 ms in the kernel with \
                std::thread::sleep, which the runtime cannot see. The monitor notices its \
                kernel thread's CPU clock stand still while work waits and hands the virtual \
                processor to a spare kernel thread (the Blocked mark): the two others go on. \
                When the sleep ends the thread queues for the processor again (Unblocked). \
                This is scheduler activations' BLOCKED/UNBLOCKED pair, done from user space",
        },
        Scenario {
            id: "15",
            name: "rt-blocking-no-handoff",
            title: "15. schedlab-rt: a user thread that blocks in the kernel, no hand-off",
            window_ms: 300,
            hog: false,
            needs_root: false,
            rt: Some(RtSetup {
                threads: 2,
                yield_every_us: Some(1000),
                quantum_us: Some(10_000),
                blocker: Some(Blocker { work_us: 2000, block_us: 20_000, handoff: false }),
            }),
            threads: vec![],
            explanation: "Scenario 14 with transparent blocking detection off, as a plain \
                user-level thread library behaves: while the third thread sleeps in the \
                kernel, its kernel thread is the processor, and nothing else runs; its slices \
                on the processor's lane span its sleeps, and the two computing threads get \
                what is left",
        },
    ]
}

/// The scenario addressed by its number or name.
pub fn find(key: &str) -> Option<Scenario> {
    scenarios().into_iter().find(|s| s.id == key || s.name.eq_ignore_ascii_case(key))
}

/// What a worker hands back.
struct WorkerOut {
    tid: i32,
    rec: Recorder,
    units: u64,
    /// Explicit runs (sleepers), absolute ns.
    runs: Vec<Span>,
    overshoot: Vec<u64>,
    /// When the thread went to sleep (Budget, SleepOnce), absolute ns.
    sleeps: Vec<u64>,
}

/// Sets the calling thread up as `spec` says.
fn setup(spec: &ThreadSpec, cpu: usize) -> Result<(), String> {
    if spec.pinned {
        sys::pin_to(cpu).map_err(|e| format!("{}: pinning to CPU {cpu}: {e}", spec.name))?;
    }
    match spec.policy {
        Policy::Other => sys::set_nice(spec.nice)
            .map_err(|e| format!("{}: setting nice {}: {e}", spec.name, spec.nice))?,
        Policy::Idle => sys::set_policy(libc::SCHED_IDLE, 0)
            .map_err(|e| format!("{}: setting SCHED_IDLE: {e}", spec.name))?,
        Policy::Fifo(p) => sys::set_policy(libc::SCHED_FIFO, p)
            .map_err(|e| format!("{}: setting SCHED_FIFO (needs root): {e}", spec.name))?,
    }
    if let Behaviour::Sleeper { slack_ns: Some(ns), .. } = spec.behaviour {
        sys::set_timer_slack(ns).map_err(|e| format!("{}: setting timer slack: {e}", spec.name))?;
    }
    Ok(())
}

/// The worker's loop, from `origin` to `end` (absolute CLOCK_MONOTONIC ns).
fn work_loop(
    spec: &ThreadSpec,
    batch: u64,
    origin: u64,
    end: u64,
    rec: &mut Recorder,
) -> WorkerOut {
    let mut out = WorkerOut {
        tid: sys::gettid(),
        rec: Recorder::for_window(0),
        units: 0,
        runs: Vec::new(),
        overshoot: Vec::new(),
        sleeps: Vec::new(),
    };
    let window = end - origin;
    let mut units = 0u64;
    if let Behaviour::Sleeper { period_us, half, .. } = spec.behaviour {
        let period = period_us * 1000;
        let (begin, end) =
            if half == 0 { (origin, origin + window / 2) } else { (origin + window / 2, end) };
        sys::sleep_until(begin);
        out.runs.reserve((window / period) as usize + 16);
        out.overshoot.reserve((window / period) as usize + 16);
        let mut woke = now_ns();
        loop {
            sampling::work(1, units);
            units += 1;
            let before = now_ns();
            out.runs.push(Span { start_ns: woke, end_ns: before });
            if before >= end {
                break;
            }
            sys::sleep_until(before + period);
            woke = now_ns();
            out.overshoot.push(woke.saturating_sub(before + period));
        }
        out.units = units;
        return out;
    }
    let yield_from = match spec.behaviour {
        Behaviour::Yield { from_permille } => origin + window * from_permille / 1000,
        _ => u64::MAX,
    };
    let (work_ns, sleep_ns) = match spec.behaviour {
        Behaviour::Budget { work_us, sleep_us } => (work_us * 1000, sleep_us * 1000),
        Behaviour::SleepOnce { at_us, sleep_us } => (at_us * 1000, sleep_us * 1000),
        _ => (u64::MAX, 0),
    };
    let once = matches!(spec.behaviour, Behaviour::SleepOnce { .. });
    if sleep_ns > 0 {
        out.sleeps.reserve((window / (work_ns.min(window) + sleep_ns)) as usize + 16);
    }
    let mut phase_end = origin.saturating_add(work_ns);
    rec.force(now_ns(), 0);
    loop {
        sampling::work(batch, units);
        units += batch;
        let now = now_ns();
        rec.tick(now, units);
        if now >= end {
            rec.force(now, units);
            break;
        }
        if now >= yield_from {
            // SAFETY: sched_yield takes no arguments and cannot fail on Linux.
            unsafe { libc::sched_yield() };
        }
        if now >= phase_end {
            // The last timestamp before the sleep bounds the gap exactly.
            rec.force(now, units);
            out.sleeps.push(now);
            sys::sleep_until(now + sleep_ns);
            phase_end = if once { u64::MAX } else { now_ns() + work_ns };
        }
    }
    out.units = units;
    out
}

/// Records `scenario` with the sampling recorder.
///
/// # Errors
/// A reason when the scenario cannot run here (needs root, a setting refused); the caller
/// reports it as skipped.
pub fn record(scenario: &Scenario) -> Result<Timeline, String> {
    record_with(scenario, THRESHOLD_NS)
}

/// [`record`] with a chosen gap threshold.
///
/// # Errors
/// As [`record`].
pub fn record_with(scenario: &Scenario, threshold_ns: u64) -> Result<Timeline, String> {
    record_at(scenario, threshold_ns).map(|(t, _)| t)
}

/// [`record_with`], also returning the origin: the CLOCK_MONOTONIC time (ns) the timeline's
/// zero stands for, to line other recorders up with it.
///
/// # Errors
/// As [`record`].
pub fn record_at(scenario: &Scenario, threshold_ns: u64) -> Result<(Timeline, u64), String> {
    // SAFETY: geteuid cannot fail and touches no memory.
    if scenario.needs_root && unsafe { libc::geteuid() } != 0 {
        return Err("needs root (SCHED_FIFO)".into());
    }
    if let Some(setup) = &scenario.rt {
        let (lanes, origin) = crate::rt::record(setup, scenario.window_ms)?;
        let t = Timeline {
            scenario: format!("{} {}", scenario.id, scenario.name),
            title: scenario.title.to_string(),
            recorder: "rt".to_string(),
            window_ns: scenario.window_ms * 1_000_000,
            threshold_ns: 0,
            interval_ns: 0,
            lanes,
            marks: Vec::new(),
        };
        t.check()?;
        return Ok((t, origin));
    }
    let cpu = *sys::allowed_cpus().last().expect("a process may run on at least one CPU");
    let batch = sampling::calibrate_batch();
    let window_ns = scenario.window_ms * 1_000_000;
    let _hog = if scenario.hog {
        let h = hog(cpu).map_err(|e| format!("starting the hog process: {e}"))?;
        // Let it get going, so the scenario starts with it runnable.
        std::thread::sleep(std::time::Duration::from_millis(20));
        Some(h)
    } else {
        None
    };
    let n = scenario.threads.len();
    let barrier = Arc::new(Barrier::new(n + 1));
    let origin = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(n);
    for spec in scenario.threads.iter().cloned() {
        let (barrier, origin) = (barrier.clone(), origin.clone());
        let h = thread::Builder::new()
            .name(format!("tl-{}", spec.name))
            .spawn(move || -> Result<WorkerOut, String> {
                let mut rec = Recorder::for_window(window_ns);
                let ready = setup(&spec, cpu);
                barrier.wait();
                let now = now_ns();
                let t0 = match origin.compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => now,
                    Err(t) => t,
                };
                ready?;
                let mut out = work_loop(&spec, batch, t0, t0 + window_ns, &mut rec);
                out.rec = rec;
                Ok(out)
            })
            .map_err(|e| format!("spawning a worker: {e}"))?;
        handles.push(h);
    }
    barrier.wait();
    let mut outs = Vec::with_capacity(n);
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(o)) => outs.push(o),
            Ok(Err(e)) => err = err.or(Some(e)),
            Err(_) => err = err.or(Some("a worker panicked".to_string())),
        }
    }
    drop(_hog);
    if let Some(e) = err {
        return Err(e);
    }
    let t0 = origin.load(Ordering::Acquire);
    let lanes = scenario
        .threads
        .iter()
        .zip(outs)
        .map(|(spec, o)| build_lane(spec, o, t0, window_ns, threshold_ns))
        .collect();
    let mut marks = Vec::new();
    for spec in &scenario.threads {
        if let Behaviour::Yield { from_permille } = spec.behaviour {
            if from_permille > 0 {
                marks.push(Mark {
                    at_ns: window_ns * from_permille / 1000,
                    name: format!("{} starts yielding", spec.name),
                });
            }
        }
    }
    let t = Timeline {
        scenario: format!("{} {}", scenario.id, scenario.name),
        title: scenario.title.to_string(),
        recorder: "sampling".to_string(),
        window_ns,
        threshold_ns,
        interval_ns: INTERVAL_NS,
        lanes,
        marks,
    };
    t.check()?;
    Ok((t, t0))
}

/// A child process that burns CPU on `cpu` until dropped (killed and reaped then); it dies
/// with us if we die first.
fn hog(cpu: usize) -> Result<Child, schedlab_measure::ProbeError> {
    Child::fork(Some(cpu), || {
        let mut x = 0u64;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    })
}

/// Turns a worker's record into a lane, clamped to the window.
fn build_lane(spec: &ThreadSpec, o: WorkerOut, t0: u64, window: u64, threshold: u64) -> Lane {
    let mut lane = Lane::new(spec.name, &spec.detail());
    lane.tid = o.tid;
    // Work done inside the window only: a starved thread may run (and count) after it.
    lane.work_units = if o.runs.is_empty() {
        o.rec
            .timestamps()
            .iter()
            .zip(o.rec.units())
            .take_while(|(&ts, _)| ts.saturating_sub(t0) <= window)
            .last()
            .map_or(0, |(_, &u)| u)
    } else {
        o.units
    };
    lane.overflowed = o.rec.overflowed;
    let runs = if o.runs.is_empty() {
        lane.samples = o.rec.timestamps().len() as u64;
        derive_runs(o.rec.timestamps(), threshold, t0)
    } else {
        lane.samples = o.runs.len() as u64;
        o.runs
            .iter()
            .map(|r| Span {
                start_ns: r.start_ns.saturating_sub(t0),
                end_ns: r.end_ns.saturating_sub(t0),
            })
            .collect()
    };
    // One progress point per millisecond is plenty for rates over phases.
    let mut next = 0u64;
    for (&ts, &units) in o.rec.timestamps().iter().zip(o.rec.units()) {
        let at = ts.saturating_sub(t0);
        if at >= next && at <= window {
            lane.progress.push([at, units]);
            next = at + 1_000_000;
        }
    }
    lane.runs = runs
        .into_iter()
        .filter(|r| r.start_ns < window)
        .map(|r| Span { start_ns: r.start_ns, end_ns: r.end_ns.min(window) })
        .collect();
    lane.ready_ns = 0;
    lane.done_ns = window;
    lane.sleep_overshoot_ns = o.overshoot;
    lane.marks = o
        .sleeps
        .iter()
        .map(|&at| at.saturating_sub(t0))
        .filter(|&at| at < window)
        .map(|at_ns| Mark { at_ns, name: "sleep".into() })
        .collect();
    lane
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn slice(s: &ThreadStats) -> String {
    s.run_len.map_or("-".into(), |d| human_ns(d.p50))
}

/// The scenario's result in words, from its statistics.
pub fn verdict(scenario: &Scenario, t: &Timeline, stats: &[ThreadStats]) -> String {
    let total_rate: f64 = stats.iter().map(|s| s.work_rate).sum();
    let shares = stats
        .iter()
        .map(|s| {
            format!("{} {} ({} runs, median slice {})", s.name, pct(s.cpu_share), s.runs, slice(s))
        })
        .collect::<Vec<_>>()
        .join("; ");
    match scenario.id {
        "1" => {
            let s = &stats[0];
            let gap = s.gap_len.map_or("no gap above the threshold".to_string(), |g| {
                format!("{} gaps, longest {}, median {}", g.n, human_ns(g.max), human_ns(g.p50))
            });
            format!(
                "The thread had the CPU {} of the time: {gap}. Useful work: {:.0} inverses/s \
                 (the reference rate for the other scenarios).",
                pct(s.cpu_share),
                s.work_rate
            )
        }
        "2" => {
            let s = &stats[0];
            format!(
                "Against a CPU-bound process the thread kept {} (XP: ~75% for the foreground \
                 window), in runs of median {} separated by gaps of median {} (XP: 130 ms).",
                pct(s.cpu_share),
                slice(s),
                s.gap_len.map_or("-".into(), |g| human_ns(g.p50))
            )
        }
        "3" | "4" => format!(
            "{shares}. Sum of useful-work rates {:.0}/s: the CPU is shared, not multiplied; \
             the effective time slice is the median run.",
            total_rate
        ),
        "5" => {
            let (a, b) = (stats[0].cpu_share, stats[1].cpu_share);
            format!(
                "{shares}. Ratio {:.2}:1 (weights 1024:335 predict 3.06:1). The nice 5 thread \
                 was not starved, unlike XP's below-normal thread.",
                if b > 0.0 { a / b } else { f64::INFINITY }
            )
        }
        "6" => {
            let half = t.window_ns / 2;
            let l = &t.lanes;
            let r = |i: usize, from: u64, to: u64| l[i].rate_in(from, to).unwrap_or(0.0);
            let (a1, b1) = (r(0, 0, half), r(1, 0, half));
            let (a2, b2) = (r(0, half, t.window_ns), r(1, half, t.window_ns));
            format!(
                "Useful work, first half (only {} yields): {} {a1:.0}/s, {} {b1:.0}/s, sum \
                 {:.0}/s. Second half (both yield): {a2:.0}/s + {b2:.0}/s = {:.0}/s, {:.0}% of \
                 the first half's sum: the rest went to switching. When both yield they \
                 alternate every few µs, faster than the 40 µs gap threshold, so both lanes look \
                 busy; the work rates tell the truth.",
                l[0].name,
                l[0].name,
                l[1].name,
                a1 + b1,
                a2 + b2,
                if a1 + b1 > 0.0 { (a2 + b2) / (a1 + b1) * 100.0 } else { 0.0 }
            )
        }
        "7" => {
            let idle = &stats[1];
            format!(
                "{shares}. The SCHED_IDLE thread first ran after {} and got {} of the CPU \
                 (weight 3/1027 = 0.3%); XP gave it nothing for ~5 s.",
                idle.first_run_ns.map_or("never".into(), human_ns),
                pct(idle.cpu_share)
            )
        }
        "8" => format!(
            "{shares}. The background thread took {} (2 ms of every 12 ms = 16.7%); the main \
             thread kept {}.",
            pct(stats[1].cpu_share),
            pct(stats[0].cpu_share)
        ),
        "9" => {
            stats
                .iter()
                .map(|s| match s.overshoot {
                    Some(d) => format!(
                        "{}: {} sleeps of 1 ms overshot by p50 {}, p99 {}, max {}",
                        s.name,
                        d.n,
                        human_ns(d.p50),
                        human_ns(d.p99),
                        human_ns(d.max)
                    ),
                    None => format!("{}: no sleeps", s.name),
                })
                .collect::<Vec<_>>()
                .join("; ")
                + ". XP: up to 10 ms without timeBeginPeriod(1)."
        }
        "11" => {
            let users = &stats[1..];
            let late = users
                .iter()
                .filter_map(|u| u.first_run_ns.map(|f| (f, &u.name)))
                .max()
                .map_or("-".to_string(), |(f, n)| format!("{n} after {}", human_ns(f)));
            let long = t.lanes[0].runs.iter().filter(|r| r.len_ns() > 1_500_000).count();
            format!(
                "{shares}. The virtual processor made {} switches; the last user thread to \
                 start was {late}; {long} of its {} slices were longer than 1.5 ms (yields \
                 after which the same thread went on). Fair rotation would give each {:.1}%.",
                t.lanes[0].samples,
                t.lanes[0].runs.len(),
                100.0 / users.len().max(1) as f64
            )
        }
        "12" | "13" => {
            let preempted =
                t.lanes[0].marks.iter().filter(|m| m.name.starts_with("preempted")).count();
            format!(
                "{shares}. {preempted} preemptions, {} slices on the processor; fair rotation \
                 would give each {:.1}%.",
                t.lanes[0].runs.len(),
                100.0 / stats.len().saturating_sub(1).max(1) as f64
            )
        }
        "14" | "15" => {
            let blocked = t.lanes[0].marks.iter().filter(|m| m.name.starts_with("blocked")).count();
            let computing: f64 = stats[1..].iter().take(2).map(|s| s.cpu_share).sum();
            format!(
                "{shares}. The two computing threads together had the processor {} of the \
                 window; {blocked} hand-offs.",
                pct(computing)
            )
        }
        "10" => format!(
            "{shares}. The SCHED_OTHER thread got {} while the SCHED_FIFO one was runnable: \
             strict priority, as on XP.",
            pct(stats[1].cpu_share)
        ),
        _ => shares,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_are_found_by_number_and_name() {
        assert_eq!(find("3").unwrap().name, "two-equal");
        assert_eq!(find("nice").unwrap().id, "5");
        assert!(find("nope").is_none());
        let all = scenarios();
        for (i, s) in all.iter().enumerate() {
            assert_eq!(s.id, (i + 1).to_string(), "scenarios are in the seed's order");
            assert!(!s.threads.is_empty() || s.rt.is_some());
            assert!(s.window_ms <= 1000, "scenarios stay short");
        }
    }

    /// The test: a worker that sleeps 5 ms is seen by the sampling recorder as a
    /// 5 ± 1 ms gap. The gap is measured from the recorded timestamps themselves; the sleep
    /// runs on its own CPU and to an absolute deadline, so only the wakeup latency adds to it.
    #[test]
    fn an_induced_5ms_sleep_is_found_as_a_5ms_gap() {
        let s = Scenario {
            id: "t",
            name: "gap",
            title: "induced gap",
            window_ms: 100,
            hog: false,
            needs_root: false,
            rt: None,
            threads: vec![ThreadSpec {
                pinned: false,
                behaviour: Behaviour::SleepOnce { at_us: 10_000, sleep_us: 5_000 },
                ..ThreadSpec::busy("sleeper")
            }],
            explanation: "",
        };
        // A loaded test machine can preempt the worker too; retry a few times and require
        // that the sleep shows up as one gap of 5 ± 1 ms.
        let mut seen = Vec::new();
        for _ in 0..8 {
            let t = record(&s).expect("an unprivileged scenario runs");
            // The gap that starts at the timestamp taken just before the sleep.
            let lane = &t.lanes[0];
            // On a very busy machine the worker may not even reach its sleep in the window.
            let Some(slept) = lane.marks.iter().find(|m| m.name == "sleep").map(|m| m.at_ns) else {
                seen.push(0);
                continue;
            };
            let len = lane.gaps().iter().find(|g| g.start_ns == slept).map_or(0, |g| g.len_ns());
            if (4_000_000..=6_000_000).contains(&len) {
                return;
            }
            seen.push(len);
        }
        panic!("no 5 ± 1 ms gap where the worker slept; the gaps there were {seen:?} ns");
    }

    #[test]
    fn sleepers_record_overshoots_and_runs() {
        let mut s = find("9").unwrap();
        s.window_ms = 100;
        let t = record(&s).unwrap();
        for l in &t.lanes {
            assert!(!l.sleep_overshoot_ns.is_empty());
            assert!(!l.runs.is_empty());
        }
    }
}
