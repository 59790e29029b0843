//! `schedlab run`: select probes, measure each parameter set, store it at once, show it.
//!
//! The loop, for every probe and parameter set in catalog order:
//! 1. setup (never timed); a skip is stored with its reason and the run goes on;
//! 2. sample with the run's settings ([`schedlab_measure::sampler`]);
//! 3. teardown (the instance is dropped: children reaped, files removed);
//! 4. store the measurement in its own transaction, then print its row.
//!
//! SIGINT/SIGTERM set the interrupt flag: the current probe stops at its next sample
//! boundary, is stored as interrupted, and the run is marked interrupted. A second Ctrl-C
//! ends the process at once (everything measured is already committed).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use schedlab_measure::clock::Calibration;
use schedlab_measure::machine::{now_rfc3339, Machine};
use schedlab_measure::model::{Measurement, Outcome, Params, RunMeta, RunStatus};
use schedlab_measure::stats::Summary;
use schedlab_measure::{interrupt, sampler, warnings, ProbeError};
use schedlab_probes::{catalog, select, Context, Probe, Suite};
use schedlab_report::views;
use schedlab_store::Store;

use crate::settings::RunPlan;
use crate::{out, UsageError};

/// Runs one probe with one parameter set, start to finish. Never panics: a panicking probe
/// becomes a failed measurement.
pub fn measure_one(
    probe: &dyn Probe,
    params: &Params,
    ctx: &Context,
    plan: &sampler::Settings,
    cal: &Calibration,
) -> Measurement {
    let info = probe.info();
    let started = Instant::now();
    let attempt = catch_unwind(AssertUnwindSafe(|| {
        let mut inst = probe.setup(params, ctx)?;
        let metric = inst.metric();
        let collected = sampler::collect_in(&mut *inst, plan, cal, metric, info.unit)?;
        let notes = inst.notes();
        drop(inst); // teardown before the next probe starts
        Ok::<_, ProbeError>((collected, notes))
    }));
    let wall = started.elapsed().as_secs_f64();
    let outcome = match attempt {
        Ok(Ok((c, notes))) => {
            let values: Vec<f64> = c.samples.iter().map(|s| s.value).collect();
            return match Summary::of(&values) {
                Some(summary) => Measurement {
                    probe: info.id.to_string(),
                    params: params.clone(),
                    unit: info.unit,
                    better: info.unit.better(),
                    outcome: Outcome::Ok,
                    notes,
                    iters_per_sample: c.iters,
                    overhead_ns_per_iter: c.overhead_ns_per_iter,
                    samples: c.samples,
                    summary: Some(summary),
                    noise: c.noise,
                    wall_s: wall,
                },
                None => Measurement::without_samples(
                    info.id,
                    params.clone(),
                    info.unit,
                    Outcome::Failed("the probe produced no valid samples (NaN)".into()),
                    wall,
                ),
            };
        }
        Ok(Err(ProbeError::Skip(why))) => Outcome::Skipped(why),
        Ok(Err(ProbeError::Failed(why))) => {
            if interrupt::requested() {
                Outcome::Interrupted
            } else {
                Outcome::Failed(why)
            }
        }
        Ok(Err(ProbeError::Interrupted)) => Outcome::Interrupted,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Outcome::Failed(format!("probe panicked: {msg}"))
        }
    };
    Measurement::without_samples(info.id, params.clone(), info.unit, outcome, wall)
}

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
pub fn run(plan: RunPlan, store: &mut Store) -> Result<(i64, ExitCode)> {
    let all = catalog();
    let selected = select(&all, &plan.filters).map_err(|e| UsageError(e.to_string()))?;
    let work: Vec<(&dyn Probe, Params)> = selected
        .iter()
        .flat_map(|p| p.variants(plan.suite).into_iter().map(move |v| (*p, v)))
        .collect();

    let flag = interrupt::flag();
    install_interrupt(&flag)?;

    let mut machine = Machine::fingerprint();
    machine.others_at_start = schedlab_measure::noise::others_share(Duration::from_millis(250));
    let cal = Calibration::measure();
    let mut meta = RunMeta {
        id: 0,
        label: plan.label.clone(),
        suite: plan.suite.name().to_string(),
        status: RunStatus::Running,
        started_at: now_rfc3339(),
        finished_at: None,
        filters: plan.filters.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        git_rev: env!("SCHEDLAB_GIT_REV").to_string(),
        settings: Params::new()
            .with("target_ms", plan.target.unwrap_or(plan.sampling.target).as_millis())
            .with("samples", plan.samples.unwrap_or(plan.sampling.samples))
            .with("warmup_ms", plan.sampling.warmup.as_millis())
            .with(
                "fixed_iters",
                plan.sampling.fixed_iters.map_or("none".to_string(), |n| n.to_string()),
            )
            .with("tmp_dir", plan.ctx.tmp_dir.display()),
        calibration: Some(cal),
        machine: machine.clone(),
    };
    let run_id = store.begin_run(&meta)?;
    meta.id = run_id;
    for line in views::run_header(&meta) {
        let _ = out(&format!("{line}\n"));
    }
    let _ = out("\n");

    let pb = ProgressBar::with_draw_target(Some(work.len() as u64), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} {msg}",
        )
        .expect("static template is valid"),
    );
    // No steady tick: a ticker thread would make this process multi-threaded while it
    // measures, and the kernel then takes a reference on every file descriptor lookup
    // (fdget on a shared table), adding ~30 ns to read/write/fstat and to every IPC probe.
    // The bar redraws between probes instead.
    let table = views::result_table();
    let header: Vec<String> = views::RESULT_COLUMNS.iter().map(|c| c.0.to_string()).collect();
    let _ = pb.suspend(|| out(&format!("{}\n", table.terminal_line(&header, LIVE_WIDTHS))));

    let mut all_warnings = warnings::machine_warnings(&machine);
    let (mut failed, mut interrupted) = (0usize, false);
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (p, _) in &work {
        *counts.entry(p.info().id).or_default() += 1;
    }
    let mut sweep: std::collections::HashMap<&str, Vec<Measurement>> =
        std::collections::HashMap::new();
    for (probe, params) in &work {
        if interrupt::requested() {
            interrupted = true;
            break;
        }
        let id = probe.info().id;
        pb.set_message(if params.is_empty() { id.to_string() } else { format!("{id} [{params}]") });
        let m = measure_one(*probe, params, &plan.ctx, &plan.sampling_for(*probe), &cal);
        store.save_result(run_id, &m).with_context(|| format!("storing {id}"))?;
        match &m.outcome {
            Outcome::Failed(_) => failed += 1,
            Outcome::Interrupted => interrupted = true,
            _ => {}
        }
        if plan.suite != Suite::Smoke {
            // Smoke samples are two iterations long: their spread says nothing.
            all_warnings.extend(warnings::measurement_warnings(&m));
        }
        // A closed stdout must not stop the measurement: the database is the record.
        let variants = *counts.get(id).unwrap_or(&0);
        if variants > SWEEP {
            let done = sweep.entry(id).or_default();
            done.push(m);
            if done.len() == variants {
                let line = sweep_line(id, done);
                let _ = pb.suspend(|| out(&format!("{line}\n")));
            }
        } else {
            let _ = pb.suspend(|| {
                out(&format!("{}\n", table.terminal_line(&views::result_cells(&m), LIVE_WIDTHS)))
            });
        }
        pb.inc(1);
        if interrupted {
            break;
        }
    }
    pb.finish_and_clear();

    store.save_warnings(run_id, &all_warnings)?;
    let status = if interrupted || interrupt::requested() {
        RunStatus::Interrupted
    } else {
        RunStatus::Complete
    };
    store.finish_run(run_id, status)?;

    if !all_warnings.is_empty() {
        let mut text = String::from("\nwarnings:\n");
        for line in views::warning_lines(&all_warnings, 12) {
            text.push_str(&format!("  {line}\n"));
        }
        let _ = out(&text);
    }
    let db = store.path().display();
    if status == RunStatus::Interrupted {
        eprintln!("\nschedlab: interrupted: everything measured so far is stored as run #{run_id} (marked interrupted) in {db}");
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

/// The one Ctrl-C rule of every measuring command: the first SIGINT or SIGTERM sets `flag`
/// (the command stops at its next boundary, keeps what it measured and exits 1); a second
/// one ends the process at once with 130. (signal-hook's documented order: the conditional
/// shutdown sees the flag as it was before this signal, then the flag is set.)
///
/// # Errors
/// When a handler cannot be installed.
pub fn install_interrupt(flag: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, flag.clone())
            .context("installing signal handlers")?;
        signal_hook::flag::register(sig, flag.clone()).context("installing signal handlers")?;
    }
    Ok(())
}
