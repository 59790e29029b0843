//! `schedlab timeline SCENARIO`: records one of the seed's ThreadTest scenarios with the
//! sampling recorder (schedlab-trace), stores it as a run, and shows it.
//!
//! Stored per thread as results `show` and `compare` read (`schedlab_trace::results`).
//!
//! With `--kernel` (root) the kernel recorder (tracefs `sched_switch`/`sched_wakeup` in a
//! tracing instance of its own, removed afterwards, also on Ctrl-C) runs alongside: its
//! lanes are shown under the sampled ones, its runs and gaps stored with `recorder=kernel`,
//! and both go into the Perfetto file as two processes.
//!
//! The raw timeline goes into the `timelines` table (schema version 2) as JSON. Printing:
//! the lanes over the whole window and zoomed on 20 ms, a statistics table, the verdict and
//! the scenario's explanation; optionally Perfetto JSON and SVG files.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Measurement, Outcome, Params, RunMeta, RunStatus, Unit};
use schedlab_measure::noise::{CpuCounters, Noise};
use schedlab_measure::units::human_ns;
use schedlab_report::table::wrap;
use schedlab_report::views;
use schedlab_store::{Location, Store, StoredTimeline};
use schedlab_trace::kernel::{self, KernelTrace};
use schedlab_trace::scenario::{self, Scenario};
use schedlab_trace::stats::timeline_stats;
use schedlab_trace::{perfetto, results, sampling, term};

use crate::args::TimelineArgs;
use crate::output::Output;
use crate::{out, UsageError};

/// Columns of time in the terminal lanes (plus 12 for names and 6 for the share: 99).
const COLS: usize = 80;

/// `schedlab timeline`.
pub fn timeline(args: &TimelineArgs, db: &Location) -> Result<ExitCode> {
    if let Some(id) = &args.probe {
        return crate::probe_timeline::probe_timeline(id, args, db);
    }
    if args.params.is_some() || args.window_ms.is_some() {
        return Err(UsageError("--params and --window-ms go with --probe".into()).into());
    }
    crate::settings::validate_label(args.label.as_deref())?;
    let Some(key) = args.scenario.as_deref().filter(|_| !args.list) else {
        out(&list())?;
        return Ok(ExitCode::SUCCESS);
    };
    let s = scenario::find(key).ok_or_else(|| {
        UsageError(format!(
            "no scenario matches {key:?}; `schedlab timeline --list` shows them (a number or a name)"
        ))
    })?;
    // Outputs are claimed before anything is measured, so a bad path costs no recording.
    let perfetto_out = args.perfetto.as_deref().map(Output::claim).transpose()?;
    let svg_out = args.svg.as_deref().map(Output::claim).transpose()?;
    // Ctrl-C only sets a flag (the one rule of `run.rs`): the scenario ends by itself within
    // its window, and the command exits 1 with nothing stored. A second Ctrl-C ends it at
    // once (130) — except with --kernel, where nothing may end us before the tracing
    // instance is removed.
    let interrupted = Arc::new(AtomicBool::new(false));
    crate::stop::install(&interrupted, !args.kernel)?;
    let started = Instant::now();
    out(&format!("{}\n", s.title))?;
    for t in &s.threads {
        out(&format!("  {:<14} {}\n", t.name, t.detail()))?;
    }
    if let Some(rt) = &s.rt {
        out(&format!("  {}\n", rt.detail()))?;
    }
    if s.hog {
        out("  (hog process)  a forked child spinning on the same CPU\n")?;
    }
    let recorder =
        if s.rt_threads() > 0 { "the runtime's events" } else { "the sampling recorder" };
    out(&format!("recording {} ms with {recorder}...\n\n", s.window_ms))?;
    // The rt scenario's lanes are virtual processors and user threads, which the kernel's
    // thread ids cannot be matched to.
    let kernel_wanted = args.kernel && s.rt_threads() == 0;
    let ktrace = kernel_wanted.then(KernelTrace::start);
    // Who else used the CPU meanwhile (docs/SOURCES.md, Noise is reported, not hidden).
    let (counters, noise_started) = (CpuCounters::read(), Instant::now());
    let recorded = scenario::record_at(&s, schedlab_trace::sampling::THRESHOLD_NS);
    let noise = counters.zip(CpuCounters::read()).map(|(a, b)| Noise {
        window_ns: noise_started.elapsed().as_nanos() as u64,
        other_cpu_ns: a.other_ns(&b),
        steal_ns: a.steal_ns(&b),
    });
    let ktext = ktrace.as_ref().map(|k| k.as_ref().map_err(Clone::clone).and_then(|k| k.stop()));
    drop(ktrace); // the instance is removed (and tracefs unmounted if we mounted it) here
    if interrupted.load(Ordering::SeqCst) {
        eprintln!("schedlab: interrupted; tracefs left as it was, nothing stored");
        // One rule for every command: an interrupted command exits 1 (README).
        return Ok(ExitCode::FAILURE);
    }
    let mut store = Store::open_at(db)?;
    let mut meta = run_meta(&s, args);
    let run_id = store.begin_run(&meta)?;
    meta.id = run_id;
    let (t, origin) = match recorded {
        Ok(t) => t,
        Err(why) => {
            let m = Measurement::without_samples(
                "sched.timeline.work",
                Params::new().with("scenario", s.id),
                Unit::OpsPerSec,
                Outcome::Skipped(why.clone()),
                started.elapsed().as_secs_f64(),
            );
            let saved = store
                .save_result(run_id, &m)
                .and_then(|()| store.finish_run(run_id, RunStatus::Complete));
            saved.map_err(|e| crate::run::storage_failed(&store, run_id, e.into()))?;
            out(&format!("skipped: {why}\n(stored as run #{run_id})\n"))?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let stats = timeline_stats(&t);
    let wall = started.elapsed().as_secs_f64();
    let (kt, kernel_note) = match ktext {
        Some(Ok(text)) => (Some(kernel::timeline(&t, origin, &text)), None),
        Some(Err(why)) => (None, Some(format!("kernel recorder: skipped: {why}"))),
        None if args.kernel => (
            None,
            Some("kernel recorder: skipped: the rt scenario's lanes are user threads, not kernel threads".to_string()),
        ),
        None => (None, None),
    };
    let mut results = results::measurements(s.id, &t, &stats, wall, None);
    for m in &mut results {
        m.noise = noise;
    }
    let kstats = kt.as_ref().map(timeline_stats).unwrap_or_default();
    // A storage failure stops here and marks the run interrupted with it (as `run` does).
    let saved = (|| -> Result<()> {
        for m in results {
            store.save_result(run_id, &m).with_context(|| format!("storing {}", m.probe))?;
        }
        if let Some(kt) = &kt {
            for m in results::measurements(s.id, kt, &kstats, wall, Some("kernel")) {
                store.save_result(run_id, &m).with_context(|| format!("storing {}", m.probe))?;
            }
        }
        for tl in std::iter::once(&t).chain(kt.as_ref()) {
            store.save_timeline(
                run_id,
                &StoredTimeline {
                    scenario: tl.scenario.clone(),
                    recorder: tl.recorder.clone(),
                    window_ns: tl.window_ns,
                    data: serde_json::to_string(tl).context("serialising the timeline")?,
                },
            )?;
        }
        store.finish_run(run_id, RunStatus::Complete)?;
        Ok(())
    })();
    saved.map_err(|e| crate::run::storage_failed(&store, run_id, e))?;

    // With the kernel's record, each thread's sampled lane is shown above the kernel's.
    let shown = match &kt {
        Some(kt) => t.interleaved_with(kt),
        None => t.clone(),
    };
    let mut text = String::new();
    text.push_str(&term::lanes(&shown, 0, t.window_ns, COLS));
    let (from, to) = t.zoom_window();
    text.push_str(&format!("\nzoom on {} .. {} ms:\n", from / 1_000_000, to / 1_000_000));
    text.push_str(&term::lanes(&shown, from, to, COLS));
    text.push('\n');
    text.push_str(&views::timeline_stats_table(&stats).to_terminal());
    if let Some(kt) = &kt {
        text.push_str("\nthe kernel's record (sched_switch), same threads:\n");
        text.push_str(&views::timeline_stats_table(&kstats).to_terminal());
        let agreement = results::agreement(&t, kt, &stats, &kstats);
        for line in views::agreement_lines(&agreement, t.threshold_ns) {
            text.push_str(&format!("{line}\n"));
        }
    }
    if t.threshold_ns > 0 {
        text.push_str(&format!(
            "(gap: a hole of more than {} between the thread's timestamps, taken at most every {})\n",
            human_ns(t.threshold_ns),
            human_ns(t.interval_ns)
        ));
    }
    if let Some(n) = &noise {
        text.push_str(&format!("{}\n", wrap(&views::noise_line(n), 98)));
    }
    let verdict = format!("verdict: {}", (s.verdict)(&t, &stats));
    text.push_str(&format!("\n{}\n", wrap(&verdict, 98)));
    text.push_str(&format!("\n{}\n", wrap(s.explanation, 98)));
    if s.measures_overhead {
        // What recording costs (the goal: under 1% of the useful-work rate).
        let line = match sampling::overhead_on_scenario_cpu(11, 20_000_000) {
            Some(o) => {
                views::recording_overhead_line(&o, t.lanes.iter().map(|l| l.samples).sum::<u64>())
            }
            None => "recording overhead: the measurement failed".to_string(),
        };
        text.push_str(&format!("\n{}\n", wrap(&line, 98)));
    }
    if let Some(note) = kernel_note {
        text.push_str(&format!("\n{note}\n"));
    }
    let subtitle = format!(
        "schedlab run #{run_id} — {} — {} — kernel {} — {}",
        meta.started_at,
        meta.machine.cpu_model,
        meta.machine.kernel,
        if kt.is_some() { "sampling and kernel recorders" } else { "sampling recorder" }
    );
    if let Some(output) = perfetto_out {
        let doc = match &kt {
            Some(kt) => perfetto::to_json_many(&[&t, kt]),
            None => perfetto::to_json(&t),
        };
        let path = output.path().display().to_string();
        output.write(&serde_json::to_string(&doc).context("serialising the trace")?)?;
        text.push_str(&format!("\nPerfetto trace: {path} (open in ui.perfetto.dev)\n"));
    }
    if let Some(output) = svg_out {
        let path = output.path().display().to_string();
        output.write(&schedlab_report::lanes::to_svg(&shown, &subtitle))?;
        text.push_str(&format!("SVG: {path}\n"));
    }
    text.push_str(&format!(
        "\nstored as run #{run_id} in {}\nshow it: schedlab show {run_id}\n",
        db
    ));
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The scenario list for `--list`.
fn list() -> String {
    let mut text = String::from("scenarios (schedlab timeline NUMBER|NAME):\n");
    for s in scenario::scenarios() {
        let root = if s.needs_root { "  [root]" } else { "" };
        text.push_str(&format!("  {:>2}  {:<16} {}{root}\n", s.id, s.name, s.title));
    }
    text
}

/// A timeline run about to be stored: this machine with its doctor findings, this build,
/// the label given.
pub(crate) fn timeline_meta(label: Option<&str>) -> RunMeta {
    let mut machine = Machine::fingerprint();
    machine.doctor = schedlab_measure::doctor::stored(&schedlab_measure::doctor::collect());
    let mut meta = RunMeta::starting(
        "timeline",
        machine,
        (env!("CARGO_PKG_VERSION"), env!("SCHEDLAB_GIT_REV")),
    );
    meta.label = label.map(str::to_string);
    meta
}

fn run_meta(s: &Scenario, args: &TimelineArgs) -> RunMeta {
    let mut meta = timeline_meta(args.label.as_deref());
    meta.filters = vec![format!("timeline {} {}", s.id, s.name)];
    meta.settings = Params::new()
        .with("scenario", s.id)
        .with("window_ms", s.window_ms)
        .with("recorder", "sampling")
        .with("interval_ns", schedlab_trace::sampling::INTERVAL_NS)
        .with("threshold_ns", schedlab_trace::sampling::THRESHOLD_NS);
    meta
}
