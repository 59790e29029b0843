//! The run loop of [`schedlab_probes::runner`] wired to the store (each measurement
//! committed in its own transaction as soon as it exists) and to the terminal (a progress
//! bar on stderr, a row per result on stdout, one line per sweep): what `schedlab run`
//! (commands.rs) and the measuring half of `schedlab mem` call. With `--suite study` it
//! goes on into `study.rs`.
//!
//! A storage failure (disk full, lock timeout, I/O error, lost server) stops the run at once:
//! the results committed before it stay, and the run is marked interrupted with the failure
//! as its reason.
//!
//! SIGINT/SIGTERM/SIGHUP set the interrupt flag: the current probe stops at its next sample
//! boundary, is stored as interrupted, and the run is marked interrupted, naming the signal.
//! A second one ends the process at once, with the run marked first (`crate::stop`);
//! everything measured is already committed.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use schedlab_measure::clock::Calibration;
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Params, Run, RunMeta, RunStatus};
use schedlab_measure::{interrupt, warnings};
use schedlab_probes::{catalog, runner, select, Probe};
use schedlab_report::views;
use schedlab_store::{Location, Store};

use crate::live::RunTerminal;
use crate::record::{self, StoreSink};
use crate::settings::RunPlan;
use crate::{out, UsageError};

/// `schedlab run` (and the measuring half of `schedlab mem`): measures `plan` into a new
/// run of `store`, printing rows as it goes. Returns the run id and the exit code.
pub fn run(plan: RunPlan, store: &mut Store, db: &Location) -> Result<(i64, ExitCode)> {
    let all = catalog();
    let selected = select(&all, &plan.filters).map_err(|e| UsageError(e.to_string()))?;
    let work: Vec<(&dyn Probe, Params)> =
        selected.iter().flat_map(|p| plan.variants(*p).into_iter().map(move |v| (*p, v))).collect();

    let flag = interrupt::flag();
    crate::stop::install(&flag, true)?;
    // The C program's `pthread-rt` rows preload the embedded library.
    let _pthread_lib = crate::library::library_for_probes();

    let mut machine = Machine::fingerprint();
    machine.doctor = schedlab_measure::doctor::stored(&schedlab_measure::doctor::collect());
    machine.others_at_start = schedlab_measure::noise::others_share(Duration::from_millis(250));
    let cal = Calibration::measure();
    let mut meta = RunMeta::starting(
        plan.suite_name(),
        machine.clone(),
        (env!("CARGO_PKG_VERSION"), env!("SCHEDLAB_GIT_REV")),
    );
    meta.label = plan.label.clone();
    meta.filters = plan.filters.clone();
    meta.settings = Params::new()
        .with("target_ms", plan.target.unwrap_or(plan.sampling.target).as_millis())
        .with("samples", plan.samples.unwrap_or(plan.sampling.samples))
        .with("warmup_ms", plan.sampling.warmup.as_millis())
        .with(
            "fixed_iters",
            plan.sampling.fixed_iters.map_or("none".to_string(), |n| n.to_string()),
        )
        .with("tmp_dir", plan.ctx.tmp_dir.display());
    if plan.rounds > 1 {
        meta.settings.set("rounds", plan.rounds);
    }
    if let Some((target, max)) = plan.adaptive {
        meta.settings.set("ci_target_pct", target * 100.0);
        meta.settings.set("max_samples", max.map_or("4x samples".to_string(), |n| n.to_string()));
    }
    meta.calibration = Some(cal);
    let run_id = store.begin_run(&meta)?;
    crate::stop::arm(db, run_id);
    meta.id = run_id;
    for line in views::run_header(&meta) {
        let _ = out(&format!("{line}\n"));
    }
    let _ = out("\n");

    let mut terminal = RunTerminal::new(work.len() * plan.rounds);
    // The results as kept (judged), for the verdicts printed at the end.
    let mut sink = StoreSink::keeping(store, run_id);
    let outcome = runner::run_rounds(
        &work,
        plan.rounds,
        plan.suite,
        &plan.ctx,
        |p| plan.sampling_for(p),
        &cal,
        &mut sink,
        &mut terminal,
    );
    terminal.pb.finish_and_clear();
    let judged =
        Run { meta: meta.clone(), results: std::mem::take(&mut sink.results), warnings: vec![] };
    let store = sink.store;
    let mut report = outcome.map_err(|e| record::storage_failed(store, run_id, e))?;
    if plan.study && !report.interrupted {
        // The rest of the study goes into the same run: the timelines, then the crosscheck.
        let more = crate::study::rest(store, run_id, &plan, &cal)
            .map_err(|e| record::storage_failed(store, run_id, e))?;
        report.failed += more.failed;
        report.interrupted |= more.interrupted;
        report.warnings.extend(more.warnings);
    }
    let mut all_warnings = warnings::machine_warnings(&machine);
    all_warnings.extend(report.warnings);
    let (failed, interrupted) = (report.failed, report.interrupted);

    let status = if interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
    store
        .save_warnings(run_id, &all_warnings)
        .context("storing the run's warnings")
        .and_then(|()| record::finish(store, run_id, interrupted))
        .map_err(|e| record::storage_failed(store, run_id, e))?;

    if let Some(t) = schedlab_report::sched::verdict_text(&judged) {
        let _ = out(&t);
    }
    if !all_warnings.is_empty() {
        let mut text = String::from("\nwarnings:\n");
        for line in views::warning_lines(&all_warnings, 12) {
            text.push_str(&format!("  {line}\n"));
        }
        let _ = out(&text);
    }
    let db = store.path().display();
    if status == RunStatus::Interrupted {
        // After SIGHUP the terminal is gone: a failed write changes nothing.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("\nschedlab: interrupted: everything measured so far is stored as run #{run_id} (marked interrupted) in {db}\n").as_bytes());
        return Ok((run_id, ExitCode::from(1)));
    }
    let _ = out(&format!(
        "\nstored as run #{run_id} in {db}\nshow it: schedlab show {run_id}    compare: schedlab compare {run_id} <other run>\n"
    ));
    if failed > 0 {
        eprintln!("schedlab: {failed} probe(s) failed; their reasons are in the table above");
        return Ok((run_id, ExitCode::from(1)));
    }
    Ok((run_id, ExitCode::SUCCESS))
}
