//! `schedlab timeline SCENARIO`: records one of the seed's ThreadTest scenarios with the
//! sampling recorder (schedlab-trace), stores it as a run, and shows it.
//!
//! Stored per thread (params `scenario=3,thread=a`), so `schedlab show` and `compare`
//! include them:
//! - `sched.timeline.slice` (µs): every run's length, the effective time slice; the notes
//!   carry the CPU share and the number of runs;
//! - `sched.timeline.gap` (µs): every gap's length (skipped when there was none);
//! - `sched.timeline.work` (ops/s): the useful-work rate, matrix inverses per second;
//! - `sched.timeline.overshoot` (µs): sleep overshoots, for sleeping threads.
//!
//! With `--kernel` (root) the kernel recorder (tracefs `sched_switch`/`sched_wakeup` in a
//! tracing instance of its own, removed afterwards, also on Ctrl-C) runs alongside: its
//! lanes are shown under the sampled ones, its runs and gaps stored with `recorder=kernel`,
//! and both go into the Perfetto file as two processes.
//!
//! The raw timeline goes into the `timelines` table (schema version 2) as JSON. Printing:
//! the lanes over the whole window and zoomed on 20 ms, a statistics table, the verdict and
//! the scenario's explanation; optionally Perfetto JSON and SVG files.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Measurement, Outcome, Params, RunMeta, RunStatus, Sample, Unit};
use schedlab_measure::noise::{CpuCounters, Noise};
use schedlab_measure::stats::Summary;
use schedlab_measure::units::human_ns;
use schedlab_report::table::{Align, Table};
use schedlab_store::{Store, StoredTimeline};
use schedlab_trace::kernel::{self, KernelTrace};
use schedlab_trace::scenario::{self, Scenario};
use schedlab_trace::stats::{timeline_stats, ThreadStats};
use schedlab_trace::{perfetto, svg, term, Timeline};

use crate::args::TimelineArgs;
use crate::{out, UsageError};

/// Columns of time in the terminal lanes (plus 12 for names and 6 for the share: 99).
const COLS: usize = 80;

/// `schedlab timeline`.
pub fn timeline(args: &TimelineArgs, db: &Path) -> Result<ExitCode> {
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
    // Outputs are checked before anything is measured, so a bad path costs no recording.
    for path in [&args.perfetto, &args.svg].into_iter().flatten() {
        check_writable(path)?;
    }
    // Ctrl-C only sets a flag (the one rule of `run.rs`): the scenario ends by itself within
    // its window, and the command exits 1 with nothing stored. A second Ctrl-C ends it at
    // once (130) — except with --kernel, where nothing may end us before the tracing
    // instance is removed.
    let interrupted = Arc::new(AtomicBool::new(false));
    crate::run::install_interrupt(&interrupted, !args.kernel)?;
    let started = Instant::now();
    out(&format!("{}\n", s.title))?;
    for t in &s.threads {
        out(&format!("  {:<14} {}\n", t.name, t.detail()))?;
    }
    if s.rt_threads() > 0 {
        out(&format!(
            "  {} schedlab-rt user threads on one virtual processor, yield_now after each ms of work\n",
            s.rt_threads()
        ))?;
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
    let mut store = Store::open(db)?;
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
            store.save_result(run_id, &m)?;
            store.finish_run(run_id, RunStatus::Complete)?;
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
    let mut results = measurements(&s, &t, &stats, wall, None);
    for m in &mut results {
        m.noise = noise;
    }
    for m in results {
        store.save_result(run_id, &m).with_context(|| format!("storing {}", m.probe))?;
    }
    let mut kstats = Vec::new();
    if let Some(kt) = &kt {
        kstats = timeline_stats(kt);
        for m in measurements(&s, kt, &kstats, wall, Some("kernel")) {
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

    // With the kernel's record, each thread's sampled lane is shown above the kernel's.
    let shown = match &kt {
        Some(kt) => interleave(&t, kt),
        None => t.clone(),
    };
    let mut text = String::new();
    text.push_str(&term::lanes(&shown, 0, t.window_ns, COLS));
    let (from, to) = zoom_window(&t);
    text.push_str(&format!("\nzoom on {} .. {} ms:\n", from / 1_000_000, to / 1_000_000));
    text.push_str(&term::lanes(&shown, from, to, COLS));
    text.push('\n');
    text.push_str(&stats_table(&stats).to_terminal());
    if let Some(kt) = &kt {
        text.push_str("\nthe kernel's record (sched_switch), same threads:\n");
        text.push_str(&stats_table(&kstats).to_terminal());
        text.push_str(&agreement(&t, kt, &stats, &kstats));
    }
    if t.threshold_ns > 0 {
        text.push_str(&format!(
            "(gap: a hole of more than {} between the thread's timestamps, taken at most every {})\n",
            human_ns(t.threshold_ns),
            human_ns(t.interval_ns)
        ));
    }
    if let Some(n) = &noise {
        let line = format!(
            "while it ran ({}), other processes used {} of CPU time and the hypervisor stole {} \
             (/proc/stat, 10 ms ticks)",
            human_ns(n.window_ns),
            human_ns(n.other_cpu_ns.max(0) as u64),
            human_ns(n.steal_ns.max(0) as u64)
        );
        text.push_str(&format!("{}\n", wrap(&line, 98)));
    }
    let verdict = format!("verdict: {}", (s.verdict)(&t, &stats));
    text.push_str(&format!("\n{}\n", wrap(&verdict, 98)));
    text.push_str(&format!("\n{}\n", wrap(s.explanation, 98)));
    if s.measures_overhead {
        text.push_str(&format!("\n{}\n", wrap(&overhead_line(&t), 98)));
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
    if let Some(path) = &args.perfetto {
        let doc = match &kt {
            Some(kt) => perfetto::to_json_many(&[&t, kt]),
            None => perfetto::to_json(&t),
        };
        write_file(path, &serde_json::to_string(&doc).context("serialising the trace")?)?;
        text.push_str(&format!("\nPerfetto trace: {} (open in ui.perfetto.dev)\n", path.display()));
    }
    if let Some(path) = &args.svg {
        write_file(path, &svg::to_svg(&shown, &subtitle))?;
        text.push_str(&format!("SVG: {}\n", path.display()));
    }
    text.push_str(&format!(
        "\nstored as run #{run_id} in {}\nshow it: schedlab show {run_id}\n",
        db.display()
    ));
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Scenario 1 also measures what recording costs (the goal: under 1% of the useful-work
/// rate), on the scenario's CPU, in a thread of its own so the caller stays unpinned.
fn overhead_line(t: &Timeline) -> String {
    let cpu = *schedlab_measure::sys::allowed_cpus().last().expect("at least one CPU");
    let o = std::thread::spawn(move || {
        let _ = schedlab_measure::sys::pin_to(cpu);
        schedlab_trace::sampling::overhead(11, 20_000_000)
    })
    .join();
    match o {
        Ok(o) => format!(
            "recording overhead: {:.0} inverses per CPU-second recorded, {:.0} without \
             recording: {:+.2}% of the useful-work rate (median of {} alternating 20 ms rounds; \
             {} timestamps recorded above)",
            o.recorded_rate,
            o.plain_rate,
            -o.loss() * 100.0,
            o.rounds,
            t.lanes.iter().map(|l| l.samples).sum::<u64>()
        ),
        Err(_) => "recording overhead: the measurement failed".to_string(),
    }
}

/// What the threads saw against the kernel's truth, per thread: shares, runs, and how many
/// of the kernel's gaps were too short for the sampling threshold.
fn agreement(t: &Timeline, kt: &Timeline, st: &[ThreadStats], ks: &[ThreadStats]) -> String {
    let mut text = String::from("sampled against kernel:\n");
    for (((lane, klane), s), k) in t.lanes.iter().zip(&kt.lanes).zip(st).zip(ks) {
        let short = klane.gaps().iter().filter(|g| g.len_ns() <= t.threshold_ns).count();
        text.push_str(&format!(
            "  {}: CPU {:.1}% sampled / {:.1}% kernel, runs {} / {}; kernel gaps <= {} \
             (invisible to sampling): {short} of {}\n",
            lane.name,
            s.cpu_share * 100.0,
            k.cpu_share * 100.0,
            s.runs,
            k.runs,
            human_ns(t.threshold_ns),
            klane.gaps().len(),
        ));
    }
    text
}

/// The sampled and the kernel's lanes of each thread one under the other.
fn interleave(sampled: &Timeline, kernel: &Timeline) -> Timeline {
    let mut t = sampled.clone();
    t.lanes = sampled
        .lanes
        .iter()
        .zip(&kernel.lanes)
        .flat_map(|(a, b)| {
            let mut b = b.clone();
            b.name = format!("{} kernel", a.name);
            [a.clone(), b]
        })
        .collect();
    t.title = format!("{} — sampled and kernel", sampled.title);
    t
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

/// A 20 ms window in the middle of the timeline (the whole of it when shorter).
fn zoom_window(t: &Timeline) -> (u64, u64) {
    const ZOOM: u64 = 20_000_000;
    if t.window_ns <= ZOOM {
        return (0, t.window_ns);
    }
    let from = (t.window_ns / 2 / 1_000_000) * 1_000_000;
    (from, from + ZOOM)
}

fn run_meta(s: &Scenario, args: &TimelineArgs) -> RunMeta {
    let mut meta = RunMeta::starting(
        "timeline",
        Machine::fingerprint(),
        (env!("CARGO_PKG_VERSION"), env!("SCHEDLAB_GIT_REV")),
    );
    meta.label = args.label.clone();
    meta.filters = vec![format!("timeline {} {}", s.id, s.name)];
    meta.settings = Params::new()
        .with("scenario", s.id)
        .with("window_ms", s.window_ms)
        .with("recorder", "sampling")
        .with("interval_ns", schedlab_trace::sampling::INTERVAL_NS)
        .with("threshold_ns", schedlab_trace::sampling::THRESHOLD_NS);
    meta
}

/// A measurement whose samples are `values_ns` shown in µs.
fn durations(
    probe: &str,
    params: Params,
    values_ns: &[u64],
    notes: Params,
    wall: f64,
) -> Measurement {
    let samples: Vec<Sample> = values_ns
        .iter()
        .map(|&ns| Sample {
            iters: 1,
            elapsed_ns: ns,
            value: ns as f64 / 1e3,
            other_cpu_ns: None,
            migrated: false,
        })
        .collect();
    if samples.is_empty() {
        let mut m = Measurement::without_samples(
            probe,
            params,
            Unit::Micros,
            Outcome::Skipped("none recorded in this window".into()),
            wall,
        );
        m.notes = notes;
        return m;
    }
    let mut m = Measurement::of_samples(probe, params, Unit::Micros, samples, wall);
    m.notes = notes;
    m.iters_per_sample = 1;
    m
}

/// The per-thread results of a recorded scenario.
fn measurements(
    s: &Scenario,
    t: &Timeline,
    stats: &[ThreadStats],
    wall: f64,
    recorder: Option<&str>,
) -> Vec<Measurement> {
    let mut out = Vec::new();
    for (lane, st) in t.lanes.iter().zip(stats) {
        let mut params = Params::new().with("scenario", s.id).with("thread", &lane.name);
        if let Some(r) = recorder {
            params.set("recorder", r);
        }
        let notes = Params::new()
            .with("cpu_share", format!("{:.2}%", st.cpu_share * 100.0))
            .with("runs", st.runs)
            .with("setup", lane.detail.replace(',', ";"))
            .with("threshold_ns", t.threshold_ns);
        if !lane.sleep_overshoot_ns.is_empty() && recorder.is_none() {
            out.push(durations(
                "sched.timeline.overshoot",
                params.clone(),
                &lane.sleep_overshoot_ns,
                notes.clone(),
                wall,
            ));
            continue;
        }
        let runs: Vec<u64> = lane.runs.iter().map(|r| r.len_ns()).collect();
        let gaps: Vec<u64> = lane.gaps().iter().map(|g| g.len_ns()).collect();
        out.push(durations("sched.timeline.slice", params.clone(), &runs, notes.clone(), wall));
        out.push(durations("sched.timeline.gap", params.clone(), &gaps, notes.clone(), wall));
        if recorder.is_some() {
            continue; // the work done is the sampled lane's; only runs and gaps differ
        }
        let window = lane.done_ns - lane.ready_ns;
        out.push(Measurement {
            probe: "sched.timeline.work".to_string(),
            params,
            unit: Unit::OpsPerSec,
            better: Unit::OpsPerSec.better(),
            outcome: Outcome::Ok,
            notes,
            iters_per_sample: lane.work_units,
            overhead_ns_per_iter: 0.0,
            samples: vec![Sample {
                iters: lane.work_units,
                elapsed_ns: window,
                value: st.work_rate,
                other_cpu_ns: None,
                migrated: false,
            }],
            summary: Summary::of(&[st.work_rate]),
            noise: None,
            wall_s: wall,
        });
    }
    out
}

fn stats_table(stats: &[ThreadStats]) -> Table {
    let sleepers = stats.iter().any(|s| s.overshoot.is_some());
    let d = |x: Option<u64>| x.map_or("-".to_string(), human_ns);
    if sleepers {
        let mut t = Table::new(&[
            ("thread", Align::Left),
            ("sleeps", Align::Right),
            ("overshoot p50", Align::Right),
            ("p99", Align::Right),
            ("max", Align::Right),
            ("mean", Align::Right),
        ]);
        for s in stats {
            let o = s.overshoot;
            t.row(vec![
                s.name.clone(),
                o.map_or(0, |o| o.n).to_string(),
                d(o.map(|o| o.p50)),
                d(o.map(|o| o.p99)),
                d(o.map(|o| o.max)),
                d(o.map(|o| o.mean as u64)),
            ]);
        }
        return t;
    }
    let mut t = Table::new(&[
        ("thread", Align::Left),
        ("CPU", Align::Right),
        ("runs", Align::Right),
        ("slice p50", Align::Right),
        ("slice p95", Align::Right),
        ("gap p50", Align::Right),
        ("gap max", Align::Right),
        ("1st run", Align::Right),
        ("inverses/s", Align::Right),
    ]);
    for s in stats {
        t.row(vec![
            s.name.clone(),
            format!("{:.1}%", s.cpu_share * 100.0),
            s.runs.to_string(),
            d(s.run_len.map(|r| r.p50)),
            d(s.run_len.map(|r| r.p95)),
            d(s.gap_len.map(|g| g.p50)),
            d(s.gap_len.map(|g| g.max)),
            d(s.first_run_ns),
            format!("{:.0}", s.work_rate),
        ]);
    }
    t
}

/// Wraps `text` at `width` columns (words never split).
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut col = 0;
    for word in text.split_whitespace() {
        let n = word.chars().count();
        if col > 0 && col + 1 + n > width {
            out.push('\n');
            col = 0;
        } else if col > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += n;
    }
    out
}

/// Fails, naming the path, when `path` could not be written: its directory is missing or
/// not writable, or it exists and is not a writable file.
fn check_writable(path: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let writable = |p: &Path| {
        let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else { return false };
        // SAFETY: a NUL-terminated path; access only checks permissions.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
    };
    if !dir.is_dir() {
        anyhow::bail!("cannot write {}: {} is not a directory", path.display(), dir.display());
    }
    if path.is_dir() || (path.exists() && !writable(path)) || (!path.exists() && !writable(dir)) {
        anyhow::bail!("cannot write {}: permission denied or not a file", path.display());
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_lines_within_the_width() {
        let w = wrap(&"word ".repeat(100), 20);
        assert!(w.lines().all(|l| l.len() <= 20));
        assert_eq!(w.split_whitespace().count(), 100);
    }
}
