//! `schedlab timeline --probe ID [--params K=V,...]`: who ran when while one probe variant
//! runs, from the kernel's own record. This file checks the arguments, sets the variant up
//! (`schedlab_probes`), hands its body to `schedlab_trace::session::record_body`, stores the
//! recording and prints it.
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

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use schedlab_measure::model::Params;
use schedlab_measure::ProbeError;
use schedlab_probes::{Context, Suite};
use schedlab_report::views;
use schedlab_store::Location;
use schedlab_trace::session::{self, BodyRecording};
use schedlab_trace::{perfetto, term};

use super::{store_run, timeline_meta, COLS};
use crate::args::TimelineArgs;
use crate::output::Output;
use crate::{out, UsageError};

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

/// `schedlab timeline --probe`.
pub(super) fn probe_timeline(id: &str, args: &TimelineArgs, db: &Location) -> Result<ExitCode> {
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
    out(&format!("recording {window_ms} ms of its body with the kernel's sched_switch...\n\n"))?;
    let recorded =
        session::record_body(&name, window_ms, started, &interrupted, || inst.run(1).map(drop));
    let notes = inst.notes();
    drop(inst);
    let Some(r) = recorded.map_err(anyhow::Error::msg)? else {
        eprintln!("schedlab: interrupted; tracefs left as it was, nothing stored");
        return Ok(ExitCode::FAILURE);
    };

    let mut meta = timeline_meta(args.label.as_deref());
    meta.filters = vec![format!("timeline --probe {name}")];
    meta.settings = Params::new()
        .with("probe", id)
        .with("params", params.to_string())
        .with("window_ms", window_ms)
        .with("recorder", "kernel");
    let run_id = store_run(db, &mut meta, |sink| r.keep(sink))?;

    let mut text = shown(&r);
    text.push_str(&format!("\nthe probe's notes for the window: {notes}\n"));
    if let Some(output) = perfetto_out {
        let doc = perfetto::to_json(&r.timeline);
        let path = output.path().display().to_string();
        output.write(&serde_json::to_string(&doc).context("serialising the trace")?)?;
        text.push_str(&format!("\nPerfetto trace: {path} (open in ui.perfetto.dev)\n"));
    }
    if let Some(output) = svg_out {
        let subtitle = format!(
            "schedlab run #{run_id} — {} — kernel {} — kernel recorder",
            meta.machine.cpu_model, meta.machine.kernel
        );
        let path = output.path().display().to_string();
        output.write(&schedlab_report::lanes::to_svg(&r.timeline, &subtitle))?;
        text.push_str(&format!("SVG: {path}\n"));
    }
    text.push_str(&format!("\nstored as run #{run_id} in {db}\nshow it: schedlab show {run_id}\n"));
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The kernel's record as shown: the lanes over the window and zoomed, the statistics.
fn shown(r: &BodyRecording) -> String {
    let kt = &r.timeline;
    let mut text = String::new();
    text.push_str(&term::lanes(kt, 0, kt.window_ns, COLS));
    let (from, to) = kt.zoom_window();
    text.push_str(&format!("\nzoom on {} .. {} ms:\n", from / 1_000_000, to / 1_000_000));
    text.push_str(&term::lanes(kt, from, to, COLS));
    text.push('\n');
    text.push_str(&views::timeline_stats_table(&r.stats).to_terminal());
    text
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
}
