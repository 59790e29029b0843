//! `schedlab run`: the run loop of [`schedlab_probes::runner`] wired to the store (each
//! measurement committed in its own transaction as soon as it exists) and to the terminal
//! (a progress bar on stderr, a row per result on stdout, one line per sweep).
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
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use schedlab_measure::clock::Calibration;
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Measurement, Outcome, Params, RunMeta, RunStatus};
use schedlab_measure::{interrupt, warnings};
use schedlab_probes::{catalog, runner, select, Probe};
use schedlab_report::views;
use schedlab_store::{Location, Store};

use crate::settings::RunPlan;
use crate::{out, UsageError};

/// Widths of the live result rows (they are printed before the whole table is known).
const LIVE_WIDTHS: &[usize] = &[22, 28, 11, 6, 6, 3, 0];

/// A probe with more parameter sets than this is a sweep: its points are summarised in one
/// line instead of one row each (`schedlab show` and `export` still have every point).
const SWEEP: usize = 40;

/// One line for a sweep's points: how many were measured, skipped (by reason) and failed.
fn sweep_line(id: &str, results: &[Measurement]) -> String {
    let ok = results.iter().filter(|m| m.outcome == Outcome::Ok).count();
    let mut line = format!("{id}: {} points, {ok} measured", results.len());
    let mut reasons: Vec<(String, usize)> = Vec::new();
    for m in results {
        if let Some(r) = m.outcome.reason() {
            let what =
                format!("{} {}: {r}", m.params.get("routine").unwrap_or(""), m.outcome.key());
            match reasons.iter_mut().find(|(w, _)| *w == what) {
                Some(e) => e.1 += 1,
                None => reasons.push((what, 1)),
            }
        }
    }
    for (what, n) in reasons {
        line.push_str(&format!("; {n} {}", what.trim_start()));
    }
    line
}

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
    let _pthread_lib = crate::exec::library_for_probes();

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

    let mut terminal = Terminal::new(work.len() * plan.rounds);
    let mut sink = StoreSink { store, run_id };
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
    let store = sink.store;
    let mut report = outcome.map_err(|e| storage_failed(store, run_id, e))?;
    if plan.study && !report.interrupted {
        // The rest of the study goes into the same run: the timelines, then the crosscheck.
        let more = crate::study::rest(store, run_id, &plan, &cal)
            .map_err(|e| storage_failed(store, run_id, e))?;
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
        .and_then(|()| finish(store, run_id, interrupted))
        .map_err(|e| storage_failed(store, run_id, e))?;

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

/// Ends run `run_id` of `store`: complete, or interrupted with the signal that asked as its
/// reason; a second signal no longer needs to mark it.
pub fn finish(store: &Store, run_id: i64, interrupted: bool) -> Result<()> {
    let r = if interrupted {
        store.interrupt_run(run_id, &interrupt::reason())
    } else {
        store.finish_run(run_id, RunStatus::Complete)
    };
    r.context("finishing the run")?;
    crate::stop::disarm();
    Ok(())
}

/// The run stops on a storage failure (disk full, a lock held too long, an I/O error, a lost
/// server): what was committed before stays, and the run is marked interrupted with `e` as
/// its reason — or, when even that cannot be written, the error says so and the next
/// schedlab that opens the database for writing marks it.
pub(crate) fn storage_failed(store: &Store, run_id: i64, e: anyhow::Error) -> anyhow::Error {
    let db = store.path().display().to_string();
    let reason = format!("storage failure: {e:#}");
    match store.interrupt_run(run_id, &reason) {
        Ok(()) => e.context(format!(
            "the run stopped: everything measured before is stored as run #{run_id} (marked interrupted) in {db}"
        )),
        Err(mark) => e.context(format!(
            "the run stopped: everything measured before is stored as run #{run_id} in {db}; it could not be marked interrupted ({mark}); the next schedlab command shows it interrupted with this reason"
        )),
    }
}

/// The store as the run loop's sink: each result committed as it comes.
struct StoreSink<'a> {
    store: &'a mut Store,
    run_id: i64,
}

impl runner::RunSink for StoreSink<'_> {
    type Error = anyhow::Error;

    fn save(&mut self, m: &Measurement) -> Result<()> {
        self.store.save_result(self.run_id, m).with_context(|| format!("storing {}", m.probe))
    }
}

/// The terminal side of a run: a progress bar on stderr and the rows on stdout.
struct Terminal {
    pb: ProgressBar,
    table: schedlab_report::table::Table,
    /// Points of sweeps not yet summarised, per probe.
    sweep: std::collections::HashMap<String, Vec<Measurement>>,
}

impl Terminal {
    fn new(total: usize) -> Terminal {
        let pb = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} {msg}",
            )
            .expect("static template is valid"),
        );
        // No steady tick: a ticker thread would make this process multi-threaded while it
        // measures, and the kernel then takes a reference on every file descriptor lookup
        // (fdget on a shared table), adding ~30 ns to read/write/fstat and to every IPC
        // probe. The bar redraws between probes instead.
        let table = views::result_table();
        let header: Vec<String> = views::RESULT_COLUMNS.iter().map(|c| c.0.to_string()).collect();
        let _ = pb.suspend(|| out(&format!("{}\n", table.terminal_line(&header, LIVE_WIDTHS))));
        Terminal { pb, table, sweep: std::collections::HashMap::new() }
    }
}

impl runner::RunObserver for Terminal {
    fn measuring(&mut self, probe: &dyn Probe, params: &Params, _done: usize, _total: usize) {
        let id = probe.info().id;
        self.pb.set_message(if params.is_empty() {
            id.to_string()
        } else {
            format!("{id} [{params}]")
        });
    }

    fn measured(&mut self, m: &Measurement, variants: usize) {
        // A closed stdout must not stop the measurement: the database is the record.
        if variants > SWEEP {
            let done = self.sweep.entry(m.probe.clone()).or_default();
            done.push(m.clone());
            if done.len() == variants {
                let line = sweep_line(&m.probe, done);
                let _ = self.pb.suspend(|| out(&format!("{line}\n")));
            }
        } else {
            let line = self.table.terminal_line(&views::result_cells(m), LIVE_WIDTHS);
            let _ = self.pb.suspend(|| out(&format!("{line}\n")));
        }
        self.pb.inc(1);
    }
}
