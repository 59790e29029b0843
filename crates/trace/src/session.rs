//! A whole timeline recording, as `schedlab_probes::runner` is a whole run: the binary
//! parses its arguments, calls one function here, hands the results to a [`TimelineSink`]
//! (the store) and prints; what is recorded, in which order the recorders start and stop,
//! and what is derived from them lives here.
//!
//! Two kinds:
//! - [`record_scenario`]: one of the seed's scenarios ([`crate::scenario`]), sampled (or from
//!   the runtime's events for schedlab-rt), with the kernel's record beside it when asked
//!   (root), the other processes' CPU time over the window, and, for the reference
//!   scenario, what recording costs.
//! - [`record_body`]: a probe variant's timed body run for a window (the caller sets the
//!   variant up and passes its body), recorded by the kernel only: one lane per kernel
//!   thread of this process.
//!
//! Nothing here stores or prints; a Ctrl-C is the caller's flag, which [`record_body`]
//! polls between calls of the body (a scenario ends by itself within its window).

use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use schedlab_measure::model::{Measurement, Outcome, Params, Unit};
use schedlab_measure::noise::{CpuCounters, Noise};

use crate::kernel::{self, KernelTrace};
use crate::model::{Lane, Timeline};
use crate::results;
use crate::sampling::{self, Overhead};
use crate::scenario::{self, Scenario};
use crate::stats::{timeline_stats, ThreadStats};

/// Where a recording goes, in order: its results, then its timelines (the CLI's store).
pub trait TimelineSink {
    /// Why something could not be kept; it stops the keeping.
    type Error;

    /// Keeps one result.
    ///
    /// # Errors
    /// When it cannot be kept.
    fn save(&mut self, m: &Measurement) -> Result<(), Self::Error>;

    /// Keeps one raw timeline.
    ///
    /// # Errors
    /// When it cannot be kept.
    fn save_timeline(&mut self, t: &Timeline) -> Result<(), Self::Error>;
}

/// A scenario recorded and analysed.
#[derive(Debug, Clone)]
pub struct ScenarioRecording {
    /// The scenario's id (`3`).
    pub scenario: &'static str,
    /// The sampled (or runtime) record.
    pub sampled: Timeline,
    /// Its per-thread statistics.
    pub stats: Vec<ThreadStats>,
    /// The kernel's record of the same threads, when it was asked for and could run.
    pub kernel: Option<Timeline>,
    /// Its statistics (empty without it).
    pub kernel_stats: Vec<ThreadStats>,
    /// Why the kernel's record is missing, when it was asked for.
    pub kernel_note: Option<String>,
    /// Other processes' CPU time and steal over the recording.
    pub noise: Option<Noise>,
    /// What recording costs, for the reference scenario (`None` inside: the measurement
    /// failed); `None` for the others.
    pub overhead: Option<Option<Overhead>>,
    /// Seconds the whole recording took.
    pub wall_s: f64,
}

/// What [`record_scenario`] gave.
#[derive(Debug, Clone)]
pub enum ScenarioOutcome {
    /// Recorded.
    Recorded(Box<ScenarioRecording>),
    /// It cannot run here (a policy refused, no CPU to pin to): the reason, and the seconds
    /// spent finding out.
    Skipped(String, f64),
}

/// Records `s` (with the kernel's record too when `with_kernel`: root, and only for OS
/// threads, whose kernel thread ids the kernel's record is matched by).
pub fn record_scenario(s: &Scenario, with_kernel: bool) -> ScenarioOutcome {
    let started = Instant::now();
    let ktrace = (with_kernel && s.rt_threads() == 0).then(KernelTrace::start);
    // Who else used the CPU meanwhile (docs/SOURCES.md, Noise is reported, not hidden).
    let (counters, noise_started) = (CpuCounters::read(), Instant::now());
    let recorded = scenario::record_at(s, sampling::THRESHOLD_NS);
    let noise = counters.zip(CpuCounters::read()).map(|(a, b)| Noise {
        window_ns: noise_started.elapsed().as_nanos() as u64,
        other_cpu_ns: a.other_ns(&b),
        steal_ns: a.steal_ns(&b),
    });
    let ktext = ktrace.as_ref().map(|k| k.as_ref().map_err(Clone::clone).and_then(|k| k.stop()));
    drop(ktrace); // the instance is removed (and tracefs unmounted if we mounted it) here
    let (sampled, origin) = match recorded {
        Ok(t) => t,
        Err(why) => return ScenarioOutcome::Skipped(why, started.elapsed().as_secs_f64()),
    };
    let stats = timeline_stats(&sampled);
    let wall_s = started.elapsed().as_secs_f64();
    let (kernel, kernel_note) = match ktext {
        Some(Ok(text)) => (Some(kernel::timeline(&sampled, origin, &text)), None),
        Some(Err(why)) => (None, Some(format!("kernel recorder: skipped: {why}"))),
        None if with_kernel => (
            None,
            Some(
                "kernel recorder: skipped: the rt scenario's lanes are user threads, not kernel threads"
                    .to_string(),
            ),
        ),
        None => (None, None),
    };
    let kernel_stats = kernel.as_ref().map(timeline_stats).unwrap_or_default();
    // What recording costs (the goal: under 1% of the useful-work rate).
    let overhead = s.measures_overhead.then(|| sampling::overhead_on_scenario_cpu(11, 20_000_000));
    ScenarioOutcome::Recorded(Box::new(ScenarioRecording {
        scenario: s.id,
        sampled,
        stats,
        kernel,
        kernel_stats,
        kernel_note,
        noise,
        overhead,
        wall_s,
    }))
}

/// The result a scenario that could not run here is stored as.
pub fn skipped(s: &Scenario, why: &str, wall_s: f64) -> Measurement {
    Measurement::without_samples(
        "sched.timeline.work",
        Params::new().with("scenario", s.id),
        Unit::OpsPerSec,
        Outcome::Skipped(why.to_string()),
        wall_s,
    )
}

impl ScenarioRecording {
    /// Hands the results (the sampled record's, each with the window's noise, then the
    /// kernel's) and the timelines (sampled, then kernel) to `sink`, in that order.
    ///
    /// # Errors
    /// The sink's first error; nothing after it is handed over.
    pub fn keep<S: TimelineSink>(&self, sink: &mut S) -> Result<(), S::Error> {
        for mut m in
            results::measurements(self.scenario, &self.sampled, &self.stats, self.wall_s, None)
        {
            m.noise = self.noise;
            sink.save(&m)?;
        }
        if let Some(kt) = &self.kernel {
            for m in results::measurements(
                self.scenario,
                kt,
                &self.kernel_stats,
                self.wall_s,
                Some("kernel"),
            ) {
                sink.save(&m)?;
            }
        }
        for t in std::iter::once(&self.sampled).chain(self.kernel.as_ref()) {
            sink.save_timeline(t)?;
        }
        Ok(())
    }

    /// The timeline to show: with the kernel's record, each thread's sampled lane above the
    /// kernel's.
    pub fn shown(&self) -> Timeline {
        match &self.kernel {
            Some(kt) => self.sampled.interleaved_with(kt),
            None => self.sampled.clone(),
        }
    }
}

/// A probe variant's body recorded by the kernel.
#[derive(Debug, Clone)]
pub struct BodyRecording {
    /// `ID [params]`.
    pub name: String,
    /// The kernel's record, one lane per kernel thread that ran in the window.
    pub timeline: Timeline,
    /// Its per-thread statistics.
    pub stats: Vec<ThreadStats>,
    /// Seconds since `started` (the variant's setup included).
    pub wall_s: f64,
}

/// Runs `body` for `window_ms` (or until `stop` is set) while the kernel records every
/// thread of this process, and derives the timeline: one lane per kernel thread (named by
/// its `comm`) that ran in the window. `Ok(None)` when `stop` was set. The threads are listed
/// when the body has run, while the caller still holds the variant (its loader, its
/// runtime's kernel threads exist until the caller drops it).
///
/// # Errors
/// When the kernel recorder cannot start (it needs root and tracefs), the body fails, or
/// the kernel's record cannot be read.
pub fn record_body<E: Display>(
    name: &str,
    window_ms: u64,
    started: Instant,
    stop: &AtomicBool,
    mut body: impl FnMut() -> Result<(), E>,
) -> Result<Option<BodyRecording>, String> {
    let ktrace = KernelTrace::start().map_err(|why| {
        format!("the kernel recorder cannot run here ({why}); it needs root and tracefs")
    })?;
    let origin = sampling::now_ns();
    let end = origin + window_ms * 1_000_000;
    let mut ran = Ok(());
    while sampling::now_ns() < end && !stop.load(Ordering::SeqCst) {
        if let Err(e) = body() {
            ran = Err(e);
            break;
        }
    }
    let finished = sampling::now_ns();
    let text = ktrace.stop();
    let tids = threads();
    drop(ktrace); // the tracing instance is removed here
    if stop.load(Ordering::SeqCst) {
        return Ok(None);
    }
    ran.map_err(|e| format!("running {name}: {e}"))?;
    let text = text.map_err(|why| format!("reading the kernel's record: {why}"))?;
    let window_ns = finished - origin;
    let lanes = tids
        .iter()
        .map(|(&tid, comm)| {
            let mut l = Lane::new(comm, &format!("tid {tid}"));
            l.tid = tid;
            l.done_ns = window_ns;
            l
        })
        .collect();
    let template = Timeline {
        scenario: name.to_string(),
        title: name.to_string(),
        recorder: "kernel".into(),
        window_ns,
        threshold_ns: 0,
        interval_ns: 0,
        lanes,
        marks: Vec::new(),
    };
    let mut timeline = kernel::timeline(&template, origin, &text);
    // A thread that never ran in the window (a parked spare, an idle monitor) is noise.
    timeline.lanes.retain(|l| !l.runs.is_empty());
    timeline.title = format!("{name} (kernel: sched_switch)");
    let stats = timeline_stats(&timeline);
    Ok(Some(BodyRecording {
        name: name.to_string(),
        timeline,
        stats,
        wall_s: started.elapsed().as_secs_f64(),
    }))
}

impl BodyRecording {
    /// Hands the kernel's results, then its timeline, to `sink`.
    ///
    /// # Errors
    /// The sink's first error.
    pub fn keep<S: TimelineSink>(&self, sink: &mut S) -> Result<(), S::Error> {
        for m in results::measurements(
            &self.name,
            &self.timeline,
            &self.stats,
            self.wall_s,
            Some("kernel"),
        ) {
            sink.save(&m)?;
        }
        sink.save_timeline(&self.timeline)
    }
}

/// The threads of this process now: thread id → its `comm`.
fn threads() -> BTreeMap<i32, String> {
    let mut out = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for e in dir.flatten() {
            if let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
                let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                out.insert(tid, comm.trim().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_lists_its_own_threads() {
        // The main thread: listed first, so never skipped. (Reading
        // /proc/self/task while other test threads exit can skip an entry
        // after one that went: the directory is walked by position.)
        let t = threads();
        assert!(t.contains_key(&(std::process::id() as i32)), "{t:?}");
    }

    /// The order a sink sees: every result before the timelines, the sampled record's
    /// results carrying the window's noise.
    #[test]
    fn a_recording_is_kept_results_first_then_its_timeline() {
        struct Log(Vec<String>);
        impl TimelineSink for Log {
            type Error = ();
            fn save(&mut self, m: &Measurement) -> Result<(), ()> {
                assert!(m.noise.is_some(), "{}", m.probe);
                self.0.push(m.probe.clone());
                Ok(())
            }
            fn save_timeline(&mut self, t: &Timeline) -> Result<(), ()> {
                self.0.push(format!("timeline {}", t.recorder));
                Ok(())
            }
        }
        let mut s = scenario::find("3").unwrap();
        s.window_ms = 20;
        let ScenarioOutcome::Recorded(r) = record_scenario(&s, false) else {
            eprintln!("SKIPPED: scenario 3 cannot run here");
            return;
        };
        let r = ScenarioRecording {
            noise: Some(Noise { window_ns: 1, other_cpu_ns: 0, steal_ns: 0 }),
            ..*r
        };
        let mut log = Log(Vec::new());
        r.keep(&mut log).unwrap();
        assert_eq!(log.0.last().map(String::as_str), Some("timeline sampling"), "{:?}", log.0);
        let first_timeline = log.0.iter().position(|e| e.starts_with("timeline")).unwrap();
        assert_eq!(first_timeline, log.0.len() - 1, "{:?}", log.0);
        assert!(log.0.iter().any(|e| e == "sched.timeline.slice"), "{:?}", log.0);
    }
}
