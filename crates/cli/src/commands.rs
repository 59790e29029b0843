//! The subcommands other than `run`: catalog, runs, show, export, compare. Each reads the
//! store, asks `report` for a rendering and prints it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use schedlab_measure::model::Run;
use schedlab_probes::{catalog, select, Probe, Suite};
use schedlab_report::export::{Csv, Format, Json, Markdown};
use schedlab_report::table::{Align, Table};
use schedlab_report::views;
use schedlab_store::{Store, StoreError};

use crate::args::{Cli, Command, CompareArgs, ExportArgs, FormatArg, ListArgs};
use crate::settings::{db_path, RunPlan};
use crate::{out, UsageError};

/// Runs the parsed command line.
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    // Generated from the argument definitions; no database involved.
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd, "schedlab", &mut buf);
            crate::out(&String::from_utf8_lossy(&buf))?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Man => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut buf)?;
            crate::out(&String::from_utf8_lossy(&buf))?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let db = db_path(cli.db.as_deref())?;
    match cli.command {
        Command::Run(args) => {
            let plan = RunPlan::from_args(&args)?;
            // Validate the filters before touching the database.
            let all = catalog();
            select(&all, &plan.filters).map_err(|e| UsageError(e.to_string()))?;
            let mut store = Store::open(&db)?;
            Ok(crate::run::run(plan, &mut store)?.1)
        }
        Command::List(args) => list(&args),
        Command::Runs => runs(&open(&db)?),
        Command::Show { run } => show(&open(&db)?, &run),
        Command::Export(args) => export(&open(&db)?, &args),
        Command::Compare(args) => compare(&open(&db)?, &args),
        Command::Mem(args) => crate::mem::mem(&args, &db),
        Command::Timeline(args) => crate::timeline::timeline(&args, &db),
        Command::Completions { .. } | Command::Man => unreachable!("handled above"),
    }
}

fn open(db: &Path) -> Result<Store> {
    Ok(Store::open_existing(db)?)
}

/// Loads the run a RUN argument names; an unknown run is a usage error.
pub(crate) fn load(store: &Store, spec: &str) -> Result<Run> {
    let id = store.resolve(spec).map_err(|e| match e {
        StoreError::NoSuchRun(..) => anyhow::Error::new(UsageError(e.to_string())),
        other => other.into(),
    })?;
    Ok(store.load_run(id)?)
}

/// The parameter values a probe takes across the full suite, as `key=a,b; key2=c`.
fn param_space(p: &dyn Probe) -> String {
    let mut keys: Vec<String> = Vec::new();
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in p.variants(Suite::Full) {
        for (k, val) in v.0 {
            if !keys.contains(&k) {
                keys.push(k.clone());
            }
            let e = values.entry(k).or_default();
            if !e.contains(&val) {
                e.push(val);
            }
        }
    }
    // A long sweep (mem.clear has ~180 sizes) is shown by its ends and its count.
    let show = |v: &[String]| match v.len() {
        0..=20 => v.join(","),
        n => format!("{},…,{} ({n} values)", v[..6].join(","), v[n - 1]),
    };
    keys.iter().map(|k| format!("{k}={}", show(&values[k]))).collect::<Vec<_>>().join("; ")
}

/// The catalog as a table: docs/PROBES.md.
pub fn catalog_table(probes: &[&dyn Probe]) -> Table {
    let mut t = Table::new(&[
        ("probe", Align::Left),
        ("unit", Align::Left),
        ("params (full suite)", Align::Left),
        ("mirrors", Align::Left),
        ("requires", Align::Left),
        ("what it measures", Align::Left),
    ]);
    for p in probes {
        let i = p.info();
        t.row(vec![
            i.id.to_string(),
            i.unit.symbol().to_string(),
            param_space(*p),
            i.mirrors.to_string(),
            i.requires.to_string(),
            i.doc.to_string(),
        ]);
    }
    t
}

/// The catalog for a terminal: one block per probe, so long docs and mirror notes stay
/// readable at any width.
fn catalog_text(probes: &[&dyn Probe]) -> String {
    let mut text = String::new();
    for p in probes {
        let i = p.info();
        let space = param_space(*p);
        let space = if space.is_empty() { String::new() } else { format!("  {space}") };
        text.push_str(&format!("{}  [{}]{space}\n", i.id, i.unit.symbol()));
        text.push_str(&format!("    {}\n", i.doc));
        text.push_str(&format!("    mirrors: {}\n", i.mirrors));
        if !i.requires.is_empty() {
            text.push_str(&format!("    requires: {}\n", i.requires));
        }
    }
    text.push_str(&format!("\n{} probes\n", probes.len()));
    text
}

fn list(args: &ListArgs) -> Result<ExitCode> {
    let all = catalog();
    let probes = select(&all, &args.filter).map_err(|e| UsageError(e.to_string()))?;
    if args.markdown {
        out(&probes_markdown(&probes))?;
    } else {
        out(&catalog_text(&probes))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The text of docs/PROBES.md.
pub fn probes_markdown(probes: &[&dyn Probe]) -> String {
    format!(
        "# The probe catalog\n\n\
         Generated by `schedlab list --markdown` from the catalog in `crates/probes`; do not edit by\n\
         hand (a test keeps this file in sync). Units: lower is better for times, higher for\n\
         bandwidths. Latencies between two parties pin both to one CPU by default\n\
         (`placement=same`) and record where they ran; `placement=cross` is the other-CPU case.\n\n{}",
        catalog_table(probes).to_markdown()
    )
}

fn runs(store: &Store) -> Result<ExitCode> {
    let list = store.runs()?;
    if list.is_empty() {
        out(&format!("no runs yet in {}; `schedlab run` makes one\n", store.path().display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&[
        ("id", Align::Right),
        ("label", Align::Left),
        ("started", Align::Left),
        ("suite", Align::Left),
        ("status", Align::Left),
        ("host", Align::Left),
        ("kernel", Align::Left),
        ("ok", Align::Right),
        ("skipped", Align::Right),
        ("failed", Align::Right),
    ]);
    for r in list {
        t.row(vec![
            r.id.to_string(),
            r.label.unwrap_or_default(),
            r.started_at,
            r.suite,
            r.status.key().to_string(),
            r.host,
            r.kernel,
            r.ok.to_string(),
            r.skipped.to_string(),
            r.failed.to_string(),
        ]);
    }
    out(&t.to_terminal())?;
    Ok(ExitCode::SUCCESS)
}

fn show(store: &Store, spec: &str) -> Result<ExitCode> {
    let run = load(store, spec)?;
    let mut text = String::new();
    for line in views::run_header(&run.meta) {
        text.push_str(&line);
        text.push('\n');
    }
    text.push('\n');
    text.push_str(&views::run_table(&run).to_terminal());
    if !run.warnings.is_empty() {
        text.push_str("\nwarnings:\n");
        for line in views::warning_lines(&run.warnings, usize::MAX) {
            text.push_str(&format!("  {line}\n"));
        }
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn export(store: &Store, args: &ExportArgs) -> Result<ExitCode> {
    let run = load(store, &args.run)?;
    let text = match args.format {
        FormatArg::Json => Json.render(&run),
        FormatArg::Csv => Csv.render(&run),
        FormatArg::Markdown => Markdown.render(&run),
    };
    match &args.output {
        None => out(&text)?,
        Some(path) => {
            // Write beside the target and rename, so a failure never leaves half a file.
            let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
            std::fs::write(&tmp, &text).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, path).with_context(|| {
                let _ = std::fs::remove_file(&tmp);
                format!("writing {}", path.display())
            })?;
            eprintln!("wrote run #{} to {}", run.meta.id, path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn compare(store: &Store, args: &CompareArgs) -> Result<ExitCode> {
    let mut specs = args.runs.clone();
    if let Some(b) = &args.baseline {
        if !specs.contains(b) {
            specs.insert(0, b.clone());
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    for s in &specs {
        let r = load(store, s)?;
        if runs.iter().any(|x| x.meta.id == r.meta.id) {
            return Err(
                UsageError(format!("run {s:?} is named twice (it is run #{})", r.meta.id)).into()
            );
        }
        runs.push(r);
    }
    if runs.len() < 2 {
        return Err(UsageError(
            "compare needs at least two runs (or one run and --baseline)".into(),
        )
        .into());
    }
    let baseline = match &args.baseline {
        Some(b) => {
            let id = store.resolve(b)?;
            runs.iter().position(|r| r.meta.id == id).expect("the baseline was loaded above")
        }
        None => 0,
    };
    if !args.filter.is_empty() {
        let all = catalog();
        select(&all, &args.filter).map_err(|e| UsageError(e.to_string()))?;
        for r in &mut runs {
            r.results.retain(|m| args.filter.iter().any(|f| schedlab_probes::matches(f, &m.probe)));
        }
    }
    let table = views::compare_table(&runs, baseline);
    let mut text = String::new();
    for r in &runs {
        let m = &r.meta.machine;
        text.push_str(&format!(
            "{}: run #{} {} suite, {} — {} ({} CPUs) — kernel {} — {}\n",
            r.meta.display_name(),
            r.meta.id,
            r.meta.suite,
            r.meta.started_at,
            m.host,
            m.logical_cpus,
            m.kernel,
            m.cpu_model
        ));
    }
    text.push('\n');
    text.push_str(&if args.markdown { table.to_markdown() } else { table.to_terminal() });
    text.push_str(
        "\nmedian ± half-width of its 95% interval; ratio = run / baseline; \"within noise\" when the intervals overlap\n",
    );
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}
