//! `schedlab run --suite study`: the whole study in one command and one run (issue 25).
//!
//! 1. The characterisation and the seed experiments: `run.rs`'s loop over the quick suite,
//!    with every `sched.*` probe (seed 000's table, seed 001's background budget and its
//!    verdicts, the wake-up latency) in all its variants
//!    ([`crate::settings::is_seed_experiment`]).
//! 2. The seed's timelines: every ThreadTest scenario recorded by sampling
//!    (`schedlab_trace::session`, as `schedlab timeline N` without `--kernel`), its
//!    per-thread results and its timeline stored in the same run.
//! 3. The crosscheck: every row whose tool is here, [`PAIRS`] pairs a row, stored in the same
//!    run (a row's result carries `vs=<row>`, so it never meets the run's own result of the
//!    same probe).
//!
//! `--filter` narrows the whole study: the probes as in `schedlab run`, the crosscheck to the
//! rows of the probes selected, and the timelines (which belong to no probe) are left out.
//!
//! With `--report FILE` the page then has all of it: the summary with the seed machines'
//! figures beside this machine's and seed 001's verdicts, the families with seed 000's table
//! and the wake-up figure, the crosscheck table and the timelines. A stop request ends the
//! study at the next step boundary, keeping what was stored, as `schedlab run` does.

use anyhow::Result;
use schedlab_measure::clock::Calibration;
use schedlab_measure::model::Warning;
use schedlab_measure::{interrupt, warnings};
use schedlab_probes::crosscheck::{self as cc, Tools};
use schedlab_store::Store;
use schedlab_trace::scenario;
use schedlab_trace::session::{self, ScenarioOutcome, TimelineSink as _};

use crate::live::CrosscheckTerminal;
use crate::out;
use crate::record::StoreSink;
use crate::settings::RunPlan;

/// Crosscheck pairs per row in the study: three pairs give a median ratio that one slow
/// pair cannot move, in three fifths of `schedlab crosscheck`'s default time.
pub const PAIRS: usize = 3;

/// What the timelines and the crosscheck added to the run.
#[derive(Debug, Default)]
pub struct More {
    /// Rows or scenarios that failed.
    pub failed: usize,
    /// A stop request ended the study early.
    pub interrupted: bool,
    /// Noise warnings about the crosscheck's results.
    pub warnings: Vec<Warning>,
}

/// Steps 2 and 3 into run `run_id` of `store`.
///
/// # Errors
/// A storage failure; what was stored before it stays.
pub fn rest(store: &mut Store, run_id: i64, plan: &RunPlan, cal: &Calibration) -> Result<More> {
    let mut more = More::default();
    let scenarios = if plan.filters.is_empty() { scenario::scenarios() } else { Vec::new() };
    if scenarios.is_empty() {
        let _ = out("\ntimelines: none with --filter (they belong to no probe)\n");
    } else {
        let _ = out(&format!("\ntimelines: {} scenarios, sampled\n", scenarios.len()));
    }
    for s in &scenarios {
        if interrupt::requested() {
            more.interrupted = true;
            return Ok(more);
        }
        let mut sink = StoreSink::new(store, run_id);
        match session::record_scenario(s, false) {
            ScenarioOutcome::Recorded(r) => {
                r.keep(&mut sink)?;
                let _ = out(&format!("  {} {}: recorded\n", s.id, s.name));
            }
            ScenarioOutcome::Skipped(why, wall_s) => {
                sink.save(&session::skipped(s, &why, wall_s))?;
                let _ = out(&format!("  {} {}: skipped: {why}\n", s.id, s.name));
            }
        }
    }
    if interrupt::requested() {
        more.interrupted = true;
        return Ok(more);
    }
    let rows: Vec<&cc::Row> = cc::ROWS
        .iter()
        .filter(|r| {
            plan.filters.is_empty()
                || r.probe.is_some_and(|(id, _)| {
                    plan.filters.iter().any(|f| schedlab_probes::matches(f, id))
                })
        })
        .collect();
    let tools = Tools::discover(std::env::var_os("PATH"), None);
    let _ = out(&format!(
        "\ncrosscheck: {} rows, {PAIRS} pairs each; ratio = schedlab ÷ tool\n",
        rows.len()
    ));
    let settings_for = |p: &dyn schedlab_probes::Probe| plan.sampling_for(p);
    let setup = cc::Setup {
        tools: &tools,
        pairs: PAIRS,
        ctx: &plan.ctx,
        settings_for: &settings_for,
        cal,
        env: cc::default_env(),
    };
    let mut terminal = CrosscheckTerminal::new(rows.len(), PAIRS);
    let mut sink = StoreSink::keeping(store, run_id);
    let report = cc::run_rows(&rows, &setup, &mut sink, &mut terminal);
    terminal.pb.finish_and_clear();
    let report = report?;
    for m in &sink.results {
        more.warnings.extend(warnings::measurement_warnings(m));
    }
    let _ = out(&schedlab_report::crosscheck::explanation(&sink.results));
    more.failed += report.failed;
    more.interrupted |= report.interrupted;
    Ok(more)
}
