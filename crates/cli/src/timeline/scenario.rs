//! `schedlab timeline SCENARIO`: checks the arguments, has `schedlab_trace::session` record
//! one of the seed's ThreadTest scenarios, stores it as a run, and shows it.
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

use anyhow::{Context as _, Result};
use schedlab_measure::model::{Params, RunMeta};
use schedlab_measure::units::human_ns;
use schedlab_report::table::wrap;
use schedlab_report::views;
use schedlab_store::Location;
use schedlab_trace::scenario::{self, Hog, Scenario};
use schedlab_trace::session::{self, ScenarioOutcome, ScenarioRecording};
use schedlab_trace::{perfetto, results, term};

use super::{store_run, timeline_meta, COLS};
use crate::args::TimelineArgs;
use crate::output::Output;
use crate::{out, UsageError};

/// `schedlab timeline SCENARIO` (and `--list`).
pub(super) fn scenario_timeline(args: &TimelineArgs, db: &Location) -> Result<ExitCode> {
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
    out(&header(&s))?;
    let outcome = session::record_scenario(&s, args.kernel);
    if interrupted.load(Ordering::SeqCst) {
        eprintln!("schedlab: interrupted; tracefs left as it was, nothing stored");
        // One rule for every command: an interrupted command exits 1 (README).
        return Ok(ExitCode::FAILURE);
    }
    let mut meta = run_meta(&s, args);
    let r = match outcome {
        ScenarioOutcome::Recorded(r) => r,
        ScenarioOutcome::Skipped(why, wall_s) => {
            let m = session::skipped(&s, &why, wall_s);
            let run_id = store_run(db, &mut meta, |sink| {
                use schedlab_trace::session::TimelineSink as _;
                sink.save(&m)
            })?;
            out(&format!("skipped: {why}\n(stored as run #{run_id})\n"))?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let run_id = store_run(db, &mut meta, |sink| r.keep(sink))?;
    let mut text = shown(&s, &r);
    let subtitle = format!(
        "schedlab run #{run_id} — {} — {} — kernel {} — {}",
        meta.started_at,
        meta.machine.cpu_model,
        meta.machine.kernel,
        if r.kernel.is_some() { "sampling and kernel recorders" } else { "sampling recorder" }
    );
    if let Some(output) = perfetto_out {
        let doc = match &r.kernel {
            Some(kt) => perfetto::to_json_many(&[&r.sampled, kt]),
            None => perfetto::to_json(&r.sampled),
        };
        let path = output.path().display().to_string();
        output.write(&serde_json::to_string(&doc).context("serialising the trace")?)?;
        text.push_str(&format!("\nPerfetto trace: {path} (open in ui.perfetto.dev)\n"));
    }
    if let Some(output) = svg_out {
        let path = output.path().display().to_string();
        output.write(&schedlab_report::lanes::to_svg(&r.shown(), &subtitle))?;
        text.push_str(&format!("SVG: {path}\n"));
    }
    text.push_str(&format!(
        "\nstored as run #{run_id} in {}\nshow it: schedlab show {run_id}\n",
        db
    ));
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// What runs, printed before the recording starts.
fn header(s: &Scenario) -> String {
    let mut text = format!("{}\n", s.title);
    for t in &s.threads {
        text.push_str(&format!("  {:<14} {}\n", t.name, t.detail()));
    }
    if let Some(rt) = &s.rt {
        text.push_str(&format!("  {}\n", rt.detail()));
    }
    match s.hog {
        Hog::None => {}
        Hog::Process => text.push_str("  (hog process)  a forked child spinning on the same CPU\n"),
        Hog::Group { processes, own_session } => text.push_str(&format!(
            "  (hog processes)  {processes} forked processes spinning on the same CPU, {}\n",
            if own_session { "in a session of their own" } else { "in our session" }
        )),
    }
    let recorder = if s.rt.is_some() { "the runtime's events" } else { "the sampling recorder" };
    text.push_str(&format!("recording {} ms with {recorder}...\n\n", s.window_ms));
    text
}

/// The recording as shown: the lanes over the whole window and zoomed on 20 ms, the
/// statistics (and the kernel's, with their agreement), the noise, the verdict, the
/// scenario's explanation, what recording costs, why the kernel's record is missing.
fn shown(s: &Scenario, r: &ScenarioRecording) -> String {
    let t = &r.sampled;
    let shown = r.shown();
    let mut text = String::new();
    text.push_str(&term::lanes(&shown, 0, t.window_ns, COLS));
    let (from, to) = t.zoom_window();
    text.push_str(&format!("\nzoom on {} .. {} ms:\n", from / 1_000_000, to / 1_000_000));
    text.push_str(&term::lanes(&shown, from, to, COLS));
    text.push('\n');
    text.push_str(&views::timeline_stats_table(&r.stats).to_terminal());
    if let Some(kt) = &r.kernel {
        text.push_str("\nthe kernel's record (sched_switch), same threads:\n");
        text.push_str(&views::timeline_stats_table(&r.kernel_stats).to_terminal());
        let agreement = results::agreement(t, kt, &r.stats, &r.kernel_stats);
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
    if let Some(n) = &r.noise {
        text.push_str(&format!("{}\n", wrap(&views::noise_line(n), 98)));
    }
    let verdict = format!("verdict: {}", (s.verdict)(t, &r.stats));
    text.push_str(&format!("\n{}\n", wrap(&verdict, 98)));
    text.push_str(&format!("\n{}\n", wrap(s.explanation, 98)));
    if let Some(overhead) = &r.overhead {
        let line = match overhead {
            Some(o) => {
                views::recording_overhead_line(o, t.lanes.iter().map(|l| l.samples).sum::<u64>())
            }
            None => "recording overhead: the measurement failed".to_string(),
        };
        text.push_str(&format!("\n{}\n", wrap(&line, 98)));
    }
    if let Some(note) = &r.kernel_note {
        text.push_str(&format!("\n{note}\n"));
    }
    text
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
