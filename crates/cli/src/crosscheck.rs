//! `schedlab crosscheck`: [`schedlab_probes::crosscheck`] wired to the store (one result per
//! row, committed as each row ends, in a run of suite `crosscheck`) and to the terminal (a
//! progress line on stderr, each row's line as it ends, then the table with its verdicts and
//! explanations from [`schedlab_report::crosscheck`]).
//!
//! Exit codes as everywhere: 0 when every row ran (whatever the verdicts: a disagreement is a
//! finding, and it is printed and stored), 1 when a row failed, the run was interrupted or the
//! store failed, 2 for a usage error (an unknown pattern, a `--lmbench-dir` that is no
//! directory). Ctrl-C kills the running tool, keeps the rows done (and a row's complete
//! pairs) and marks the run interrupted, as `schedlab run` does.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use schedlab_measure::clock::Calibration;
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Params, RunMeta};
use schedlab_measure::{interrupt, warnings};
use schedlab_probes::crosscheck::{self as cc, Row, Tools};
use schedlab_report::{crosscheck as view, views};
use schedlab_store::{Location, Store};

use crate::args::{CrosscheckArgs, RunArgs, SuiteArg};
use crate::live::CrosscheckTerminal;
use crate::record::StoreSink;
use crate::settings::RunPlan;
use crate::{out, UsageError};

/// `schedlab crosscheck`.
pub fn crosscheck(args: &CrosscheckArgs, db: &Location) -> Result<ExitCode> {
    let rows = cc::select(&args.filter).map_err(|e| UsageError(e.to_string()))?;
    if let Some(dir) = &args.lmbench_dir {
        if !dir.is_dir() {
            return Err(
                UsageError(format!("--lmbench-dir {} is not a directory", dir.display())).into()
            );
        }
    }
    let tools = Tools::discover(std::env::var_os("PATH"), args.lmbench_dir.clone());
    if args.list {
        out(&list_text(&rows, &tools))?;
        return Ok(ExitCode::SUCCESS);
    }
    let plan = RunPlan::from_args(&RunArgs {
        suite: SuiteArg::Quick,
        filter: Vec::new(),
        label: args.label.clone(),
        samples: args.samples,
        target_ms: None,
        rounds: None,
        ci_target: None,
        max_samples: None,
        tmp_dir: args.tmp_dir.clone(),
        report: None,
    })?;
    let pairs = args.pairs.map_or(cc::DEFAULT_PAIRS, |n| n as usize);
    let mut store = Store::open_at(db)?;

    let flag = interrupt::flag();
    crate::stop::install(&flag, true)?;

    let mut machine = Machine::fingerprint();
    machine.doctor = schedlab_measure::doctor::stored(&schedlab_measure::doctor::collect());
    machine.others_at_start = schedlab_measure::noise::others_share(Duration::from_millis(250));
    let cal = Calibration::measure();
    let mut meta = RunMeta::starting(
        cc::SUITE,
        machine.clone(),
        (env!("CARGO_PKG_VERSION"), env!("SCHEDLAB_GIT_REV")),
    );
    meta.label = plan.label.clone();
    meta.filters = args.filter.clone();
    let env = cc::default_env();
    meta.settings = Params::new()
        .with("pairs", pairs)
        .with("target_ms", plan.sampling.target.as_millis())
        .with("samples", plan.samples.unwrap_or(plan.sampling.samples))
        .with("warmup_ms", plan.sampling.warmup.as_millis())
        .with("tmp_dir", plan.ctx.tmp_dir.display())
        .with("perf", tools.perf.as_ref().map_or("not found".into(), |p| p.display().to_string()))
        .with(
            "lmbench_dir",
            tools.lmbench_dir.as_ref().map_or("PATH".into(), |p| p.display().to_string()),
        )
        .with(
            "cyclictest",
            tools.cyclictest.as_ref().map_or("not found".into(), |p| p.display().to_string()),
        )
        .with("lmbench_enough_us", &env[0].1);
    meta.calibration = Some(cal);
    let run_id = store.begin_run(&meta)?;
    crate::stop::arm(db, run_id);
    meta.id = run_id;
    for line in views::run_header(&meta) {
        let _ = out(&format!("{line}\n"));
    }
    let _ = out(&format!("\n{} rows, {pairs} pairs each; ratio = schedlab ÷ tool\n\n", rows.len()));

    let settings_for = |p: &dyn schedlab_probes::Probe| plan.sampling_for(p);
    let setup = cc::Setup {
        tools: &tools,
        pairs,
        ctx: &plan.ctx,
        settings_for: &settings_for,
        cal: &cal,
        env,
    };
    let mut terminal = CrosscheckTerminal::new(rows.len(), pairs);
    let mut sink = StoreSink::keeping(&mut store, run_id);
    let outcome = cc::run_rows(&rows, &setup, &mut sink, &mut terminal);
    terminal.pb.finish_and_clear();
    let results = std::mem::take(&mut sink.results);
    let report = match outcome {
        Ok(r) => r,
        Err(e) => {
            let _ = store.interrupt_run(run_id, &format!("storage failure: {e:#}"));
            return Err(e.context(format!(
                "the crosscheck stopped: the rows done are stored as run #{run_id}"
            )));
        }
    };
    let mut all_warnings = warnings::machine_warnings(&machine);
    for m in &results {
        all_warnings.extend(warnings::measurement_warnings(m));
    }
    store
        .save_warnings(run_id, &all_warnings)
        .context("storing the run's warnings")
        .and_then(|()| crate::record::finish(&store, run_id, report.interrupted))?;

    let _ = out(&view::explanation(&results));
    let db = store.path().display();
    if report.interrupted {
        eprintln!("\nschedlab: interrupted: the rows done are stored as run #{run_id} (marked interrupted) in {db}");
        return Ok(ExitCode::from(1));
    }
    let _ = out(&format!(
        "\nstored as run #{run_id} in {db}\nshow it: schedlab show {run_id}    compare: schedlab compare {run_id} <other run>\n"
    ));
    if report.failed > 0 {
        eprintln!("schedlab: {} row(s) failed; their reasons are above", report.failed);
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--list`: each row, its command, its probe, and whether its tool is here.
fn list_text(rows: &[&Row], tools: &Tools) -> String {
    let mut t = schedlab_report::table::Table::new(&[
        ("reference", schedlab_report::table::Align::Left),
        ("command", schedlab_report::table::Align::Left),
        ("probe", schedlab_report::table::Align::Left),
        ("definition", schedlab_report::table::Align::Left),
        ("tool", schedlab_report::table::Align::Left),
    ]);
    for r in rows {
        let probe = match r.probe {
            Some((id, [])) => id.to_string(),
            Some((id, params)) => format!(
                "{id} [{}]",
                params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
            ),
            None => "-".into(),
        };
        let def = match r.definition {
            cc::Definition::Matches(_) => "matches",
            cc::Definition::Differs(_) => "differs",
            cc::Definition::NoProbe(_) => "no probe",
        };
        let found = match tools.program(r) {
            Ok(p) => p.display().to_string(),
            Err(why) => format!("skipped: {why}"),
        };
        t.row(vec![r.id.into(), r.command("FILE"), probe, def.into(), found]);
    }
    t.to_terminal()
}
