//! `schedlab timeline --probe ID [--params K=V,...]`: who ran when while one probe variant
//! runs, from the kernel's own record.
//!
//! A scenario is a recording written for the timeline; a probe variant is a measurement. To
//! see how the kernel handed out the CPU while a variant ran (seed 001's loader under
//! `nice 19` or a cgroup cap beside its frame loop, a pipe ping-pong across two CPUs), the
//! variant is set up as `schedlab run` would, its body is run for the window, and the kernel
//! recorder (tracefs `sched_switch`/`sched_wakeup` in a tracing instance of its own, root)
//! records every thread of the process meanwhile: one lane per kernel thread, named by its
//! `comm` (`loader`, `schedlab-vp-0`, ...). Forked helper processes are not in it (their
//! thread ids are not ours to list). Stored as a run like every timeline; the probe's notes
//! for the window are printed under the lanes.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use schedlab_measure::model::{Params, RunStatus};
use schedlab_measure::sys::now_ns;
use schedlab_measure::ProbeError;
use schedlab_probes::{Context, Suite};
use schedlab_report::views;
use schedlab_store::{Location, Store, StoredTimeline};
use schedlab_trace::kernel::{self, KernelTrace};
use schedlab_trace::model::{Lane, Timeline};
use schedlab_trace::stats::timeline_stats;
use schedlab_trace::{perfetto, results, term};

use crate::args::TimelineArgs;
use crate::output::Output;
use crate::{out, UsageError};

/// Columns of time in the terminal lanes, as `timeline.rs`.
const COLS: usize = 80;

/// The window when `--window-ms` is not given.
const WINDOW_MS: u64 = 1_000;

/// `K=V,K=V` into params; a usage error names the malformed part, a key given twice, or
/// a list with nothing in it (the probe would run its default variant while the stored
/// run said parameters were given; leave `--params` out for that).
pub(crate) fn parse_params(text: &str) -> Result<Params, UsageError> {
    let mut p = Params::new();
    for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            UsageError(format!("--params: {part:?} is not KEY=VALUE (e.g. loader=cgroup,cpus=1)"))
        })?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(UsageError(format!("--params: {part:?} has no key")));
        }
        if let Some(first) = p.get(k) {
            return Err(UsageError(format!(
                "--params: {k} is given twice ({k}={first} and {k}={v}); give each key once"
            )));
        }
        p.set(k, v);
    }
    if p.is_empty() {
        return Err(UsageError(format!(
            "--params {text:?} names no parameter; leave --params out for the probe's default variant"
        )));
    }
    Ok(p)
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

/// `schedlab timeline --probe`.
pub fn probe_timeline(id: &str, args: &TimelineArgs, db: &Location) -> Result<ExitCode> {
    crate::settings::validate_label(args.label.as_deref())?;
    let catalog = schedlab_probes::catalog();
    let Some(probe) = catalog.iter().find(|p| p.info().id == id) else {
        let hint = match schedlab_probes::select(&catalog, &[id.to_string()]) {
            Err(no) => no.to_string(),
            Ok(_) => format!("{id:?} names a family or a pattern; give one probe's full id"),
        };
        return Err(UsageError(format!("--probe: {hint}")).into());
    };
    let params = match args.params.as_deref() {
        None => Params::new(),
        Some(text) => parse_params(text)?,
    };
    schedlab_probes::check_params(probe.as_ref(), &params)
        .map_err(|e| UsageError(format!("--params: {e}")))?;
    let window_ms = args.window_ms.unwrap_or(WINDOW_MS);
    if !(10..=60_000).contains(&window_ms) {
        return Err(UsageError(format!("--window-ms {window_ms}: 10 to 60000")).into());
    }
    // Outputs are claimed before anything is measured, so a bad path costs no recording.
    let perfetto_out = args.perfetto.as_deref().map(Output::claim).transpose()?;
    let svg_out = args.svg.as_deref().map(Output::claim).transpose()?;
    let interrupted = Arc::new(AtomicBool::new(false));
    // No second Ctrl-C ends us at once: the tracing instance must be removed first.
    crate::stop::install(&interrupted, false)?;
    let name = format!("{id} [{params}]");
    out(&format!("{name}\nsetting up...\n"))?;
    let exe = std::env::current_exe().ok();
    let ctx = Context {
        suite: Suite::Quick,
        tmp_dir: std::env::temp_dir(),
        exec_helper: exe.map(|e| (e, vec![crate::EXEC_HELPER_ARG.to_string()])),
    };
    let started = Instant::now();
    let mut inst = match probe.setup(&params, &ctx) {
        Ok(i) => i,
        Err(ProbeError::Skip(why)) => {
            out(&format!("skipped here: {why}\n"))?;
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(anyhow::anyhow!("setting up {name}: {e}")),
    };
    let ktrace = KernelTrace::start().map_err(|why| {
        anyhow::anyhow!("the kernel recorder cannot run here ({why}); it needs root and tracefs")
    })?;
    out(&format!("recording {window_ms} ms of its body with the kernel's sched_switch...\n\n"))?;
    let origin = now_ns();
    let end = origin + window_ms * 1_000_000;
    let mut body = Ok(());
    while now_ns() < end && !interrupted.load(Ordering::SeqCst) {
        if let Err(e) = inst.run(1) {
            body = Err(e);
            break;
        }
    }
    let stop = now_ns();
    let text = ktrace.stop();
    // Listed while the instance lives: its threads (a loader, a runtime's kernel threads)
    // exist until it is dropped.
    let tids = threads();
    let notes = inst.notes();
    drop(inst);
    drop(ktrace); // the tracing instance is removed here
    if interrupted.load(Ordering::SeqCst) {
        eprintln!("schedlab: interrupted; tracefs left as it was, nothing stored");
        return Ok(ExitCode::FAILURE);
    }
    body.map_err(|e| anyhow::anyhow!("running {name}: {e}"))?;
    let text = text.map_err(|why| anyhow::anyhow!("reading the kernel's record: {why}"))?;
    let window_ns = stop - origin;
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
        scenario: name.clone(),
        title: name.clone(),
        recorder: "kernel".into(),
        window_ns,
        threshold_ns: 0,
        interval_ns: 0,
        lanes,
        marks: Vec::new(),
    };
    let mut kt = kernel::timeline(&template, origin, &text);
    // A thread that never ran in the window (a parked spare, an idle monitor) is noise.
    kt.lanes.retain(|l| !l.runs.is_empty());
    kt.title = format!("{name} (kernel: sched_switch)");
    let stats = timeline_stats(&kt);
    let wall = started.elapsed().as_secs_f64();

    let mut store = Store::open_at(db)?;
    let mut meta = crate::timeline::timeline_meta(args.label.as_deref());
    meta.filters = vec![format!("timeline --probe {name}")];
    meta.settings = Params::new()
        .with("probe", id)
        .with("params", params.to_string())
        .with("window_ms", window_ms)
        .with("recorder", "kernel");
    let run_id = store.begin_run(&meta)?;
    // A storage failure stops here and marks the run interrupted with it (as `run` does).
    let saved = (|| -> Result<()> {
        for m in results::measurements(&name, &kt, &stats, wall, Some("kernel")) {
            store.save_result(run_id, &m).with_context(|| format!("storing {}", m.probe))?;
        }
        store.save_timeline(
            run_id,
            &StoredTimeline {
                scenario: kt.scenario.clone(),
                recorder: kt.recorder.clone(),
                window_ns: kt.window_ns,
                data: serde_json::to_string(&kt).context("serialising the timeline")?,
            },
        )?;
        store.finish_run(run_id, RunStatus::Complete)?;
        Ok(())
    })();
    saved.map_err(|e| crate::run::storage_failed(&store, run_id, e))?;

    let mut shown = String::new();
    shown.push_str(&term::lanes(&kt, 0, kt.window_ns, COLS));
    let (from, to) = kt.zoom_window();
    shown.push_str(&format!("\nzoom on {} .. {} ms:\n", from / 1_000_000, to / 1_000_000));
    shown.push_str(&term::lanes(&kt, from, to, COLS));
    shown.push('\n');
    shown.push_str(&views::timeline_stats_table(&stats).to_terminal());
    shown.push_str(&format!("\nthe probe's notes for the window: {notes}\n"));
    if let Some(output) = perfetto_out {
        let doc = perfetto::to_json(&kt);
        let path = output.path().display().to_string();
        output.write(&serde_json::to_string(&doc).context("serialising the trace")?)?;
        shown.push_str(&format!("\nPerfetto trace: {path} (open in ui.perfetto.dev)\n"));
    }
    if let Some(output) = svg_out {
        let subtitle = format!(
            "schedlab run #{run_id} — {} — kernel {} — kernel recorder",
            meta.machine.cpu_model, meta.machine.kernel
        );
        let path = output.path().display().to_string();
        output.write(&schedlab_report::lanes::to_svg(&kt, &subtitle))?;
        shown.push_str(&format!("SVG: {path}\n"));
    }
    shown
        .push_str(&format!("\nstored as run #{run_id} in {db}\nshow it: schedlab show {run_id}\n"));
    out(&shown)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_parse_and_malformed_ones_are_usage_errors() {
        let p = parse_params("loader=cgroup, cpus=1").unwrap();
        assert_eq!(p.get("loader"), Some("cgroup"));
        assert_eq!(p.get("cpus"), Some("1"));
        assert!(parse_params("").unwrap_err().0.contains("names no parameter"));
        assert!(parse_params(" , ").unwrap_err().0.contains("names no parameter"));
        assert!(parse_params("loader").unwrap_err().0.contains("KEY=VALUE"));
        assert!(parse_params("=1").unwrap_err().0.contains("no key"));
        let twice = parse_params("cpus=1,loader=nice,cpus=2").unwrap_err().0;
        assert!(twice.contains("cpus is given twice (cpus=1 and cpus=2)"), "{twice}");
    }

    #[test]
    fn this_process_lists_its_own_threads() {
        // The main thread: listed first, so never skipped. (Reading
        // /proc/self/task while other test threads exit can skip an entry
        // after one that went: the directory is walked by position.)
        let t = threads();
        assert!(t.contains_key(&(std::process::id() as i32)), "{t:?}");
    }
}
