//! `schedlab mem`: the memory-clearing lab (seed 004) from one command.
//!
//! Measures the `mem` family (`mem.clear` over the suite's sizes, alignments and routines,
//! plus `mem.copy` and `mem.malloc_free`) into a new run stored like any `schedlab run`,
//! or, with `--run`, takes a stored run; then prints the analysis from
//! `schedlab_report::mem` (crossovers, best routine per size range, fraction of memset,
//! bandwidth per cache level, time per byte, misalignment, the raw matrix) and writes the
//! SVG charts.
//!
//! # Sampling
//! The sweep's lighter sampling (quick: 9 samples of at least 1 ms) is `mem.clear`'s own
//! choice (`sweep_sampling` in `crates/probes/src/mem/clear.rs`), so `schedlab run` uses it too;
//! `--samples` and `--target-ms` override.
//!
//! Only measuring and storing happen here, through `run::run` and the store; the
//! analysis and the charts are pure functions in the report crate.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context as _, Result};
use schedlab_measure::model::Run;
use schedlab_report::mem::{self as analysis, CacheLevel};
use schedlab_report::views;
use schedlab_store::{Location, Store};

use crate::args::{MemArgs, RunArgs};
use crate::output::OutputDir;
use crate::settings::RunPlan;
use crate::{out, UsageError};

/// The probe family measured.
const FAMILY: &str = "mem";

/// `schedlab mem`.
pub fn mem(args: &MemArgs, db: &Location) -> Result<ExitCode> {
    let started = Instant::now();
    // The charts' directory is made and tried before anything is measured.
    let svg_dir = args.svg_dir.as_deref().map(OutputDir::claim).transpose()?;
    let (run, code) = match &args.run {
        Some(spec) => {
            let store = Store::open_existing_at(db)?;
            (crate::runs::load(&store, spec)?, ExitCode::SUCCESS)
        }
        None => measure(args, db)?,
    };
    if let Err(e) = report(&run, args, svg_dir.as_ref()) {
        // An interrupted or failed measurement may leave nothing to analyse; its own
        // message and exit code say what happened.
        if code != ExitCode::SUCCESS {
            eprintln!("schedlab: nothing to analyse in run #{}: {e}", run.meta.id);
            return Ok(code);
        }
        return Err(e);
    }
    if args.run.is_none() {
        let _ = out(&format!(
            "\nrun #{} measured and analysed in {:.1} s; stored in {}\nagain without measuring: schedlab mem --run {}\n",
            run.meta.id,
            started.elapsed().as_secs_f64(),
            db,
            run.meta.id
        ));
    }
    Ok(code)
}

/// Measures the mem family into a new run, the way `schedlab run --filter mem` does (same
/// loop, same store, same Ctrl-C handling), and returns it as stored.
fn measure(args: &MemArgs, db: &Location) -> Result<(Run, ExitCode)> {
    let plan = RunPlan::from_args(&RunArgs {
        suite: args.suite,
        filter: vec![FAMILY.to_string()],
        label: args.label.clone(),
        samples: args.samples,
        target_ms: args.target_ms,
        ci_target: None,
        max_samples: None,
        rounds: None,
        tmp_dir: None,
        report: None,
    })?;
    let mut store = Store::open_at(db)?;
    let (run_id, code) = crate::run::run(plan, &mut store, db)?;
    Ok((store.load_run(run_id)?, code))
}

/// The cache levels of this machine, for runs whose results do not record them.
fn local_caches() -> Vec<CacheLevel> {
    schedlab_probes::mem::caches()
        .into_iter()
        .map(|c| CacheLevel { name: c.name, bytes: c.bytes })
        .collect()
}

/// Prints the analysis of `run` and writes its charts.
fn report(run: &Run, args: &MemArgs, svg_dir: Option<&OutputDir>) -> Result<()> {
    let Some(a) = analysis::analyse(&run.results, &local_caches()) else {
        return Err(UsageError(format!(
            "run #{} has no measured mem.clear results; `schedlab mem` measures them",
            run.meta.id
        ))
        .into());
    };
    let mut text = String::new();
    // Issue 26: real programs' clears beside this run's crossovers, after the lab's own.
    let hybrid = schedlab_probes::mem::routines::HYBRID_BELOW as u64;
    let clears = analysis::clears_sections(&run.results, Some(&a), hybrid);
    for s in analysis::sections(&a).iter().chain(&clears) {
        if args.markdown {
            text.push_str(&format!("\n### {}\n\n{}", s.title, s.table.to_markdown()));
            for n in &s.notes {
                text.push_str(&format!("\n{n}\n"));
            }
        } else {
            text.push_str(&format!("\n{}\n{}", s.title, s.table.to_terminal()));
            for n in &s.notes {
                text.push_str(&format!("  {n}\n"));
            }
        }
    }
    let others: Vec<&schedlab_measure::model::Measurement> = run
        .results
        .iter()
        .filter(|m| m.probe != analysis::CLEAR && m.probe != analysis::CLEARS)
        .collect();
    if !others.is_empty() {
        let mut t = views::result_table();
        for m in others {
            t.row(views::result_cells(m));
        }
        let table = if args.markdown { t.to_markdown() } else { t.to_terminal() };
        text.push_str(&format!(
            "\nmemcpy and malloc/free (seed 002's mcopy and mallocMemCopy)\n{table}"
        ));
    }
    out(&text)?;

    if let Some(dir) = svg_dir.map(OutputDir::path) {
        let m = &run.meta.machine;
        let subtitle = format!(
            "schedlab run #{}{} — {} — {} — kernel {} — {} suite",
            run.meta.id,
            run.meta.label.as_ref().map(|l| format!(" \"{l}\"")).unwrap_or_default(),
            run.meta.started_at,
            m.cpu_model,
            m.kernel,
            run.meta.suite
        );
        let mut written = Vec::new();
        for (file, chart) in analysis::charts(&a, &subtitle) {
            let path = dir.join(&file);
            std::fs::write(&path, chart.to_svg())
                .with_context(|| format!("writing {}", path.display()))?;
            written.push(path.display().to_string());
        }
        out(&format!("\ncharts: {}\n", written.join(", ")))?;
    }
    Ok(())
}
