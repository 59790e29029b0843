//! The parsed command line dispatched to its command, and the small commands that read the
//! store, ask `report` for a rendering and print it: catalog, runs, show, export, report,
//! compare (its CI gate in `gate.rs`) and doctor. `run`'s loop is `run.rs`'s, which `mem`
//! calls too.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use schedlab_measure::model::Run;
use schedlab_probes::{catalog, select};
use schedlab_report::export::{Csv, Format, Json, Markdown};
use schedlab_report::html::{page_against, RunTimeline};
use schedlab_report::interchange::{Bencher, Conbench};
use schedlab_report::table::{Align, Table};
use schedlab_report::{catalog, views};
use schedlab_store::{Location, Store};

use crate::args::{
    Cli, Command, CompareArgs, DoctorArgs, ExportArgs, FormatArg, ListArgs, ReportArgs, RunsArgs,
    ViewArg,
};
use crate::output::Output;
use crate::runs::{load, resolve, RunFilter};
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
        Command::Doctor(args) => return doctor(&args),
        Command::Exec(args) => {
            return crate::exec::exec(crate::settings::ExecPlan::from_args(&args)?);
        }
        Command::Reference(crate::args::ReferenceCommand::List) => {
            return crate::reference::list();
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
            let mut plan = RunPlan::from_args(&args)?;
            // Validate the filters before touching the database.
            let all = catalog();
            select(&all, &plan.filters).map_err(|e| UsageError(e.to_string()))?;
            let report = plan.report.take();
            let mut store = Store::open_at(&db)?;
            let (id, code) = crate::run::run(plan, &mut store, &db)?;
            if let Some(output) = report {
                let run = store.load_run(id)?;
                write_report(&store, vec![run], 0, output)?;
            }
            Ok(code)
        }
        Command::List(args) => list(&args),
        Command::Runs(args) => runs(&open(&db)?, &args),
        Command::Show { run, view } => show(&open(&db)?, &run, view),
        Command::Export(args) => export(&open(&db)?, &args),
        Command::Compare(args) => compare(&open(&db)?, &args),
        Command::History(args) => crate::history::history(&open(&db)?, &args),
        Command::Report(args) => report(&open(&db)?, &args),
        Command::Mem(args) => crate::mem::mem(&args, &db),
        Command::Timeline(args) => crate::timeline::timeline(&args, &db),
        Command::Push(args) => crate::fleet::push(&args, &db),
        Command::Pull(args) => crate::fleet::pull(&args, &db),
        Command::Import(args) => crate::fleet::import(&args, &db),
        Command::Prune(args) => crate::fleet::prune(&args, &db),
        Command::Crosscheck(args) => crate::crosscheck::crosscheck(&args, &db),
        Command::Reference(crate::args::ReferenceCommand::Import { set }) => {
            crate::reference::import(&set, &db)
        }
        Command::Completions { .. }
        | Command::Man
        | Command::Doctor(_)
        | Command::Exec(_)
        | Command::Reference(crate::args::ReferenceCommand::List) => {
            unreachable!("handled above")
        }
    }
}

fn open(db: &Location) -> Result<Store> {
    Ok(Store::open_existing_at(db)?)
}

/// `schedlab doctor`: reads this machine, needs no database.
fn doctor(args: &DoctorArgs) -> Result<ExitCode> {
    let findings = schedlab_measure::doctor::collect();
    let m = schedlab_measure::machine::Machine::fingerprint();
    let text = if args.json {
        let doc = schedlab_report::doctor::DoctorJson {
            host: &m.host,
            kernel: &m.kernel,
            schedlab: env!("CARGO_PKG_VERSION"),
            findings: &findings,
        };
        serde_json::to_string_pretty(&doc)? + "\n"
    } else {
        schedlab_report::doctor::doctor_text(&findings, &m.host, &m.kernel, args.markdown)
    };
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn list(args: &ListArgs) -> Result<ExitCode> {
    let all = catalog();
    let probes = select(&all, &args.filter).map_err(|e| UsageError(e.to_string()))?;
    if args.markdown {
        out(&catalog::probes_markdown(&probes))?;
    } else {
        out(&catalog::catalog_text(&probes))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn runs(store: &Store, args: &RunsArgs) -> Result<ExitCode> {
    let all = store.runs()?;
    let total = all.len();
    let list = RunFilter::from_args(&args.filter)?.apply(all);
    if list.is_empty() {
        if total == 0 {
            out(&format!("no runs yet in {}; `schedlab run` makes one\n", store.path().display()))?;
        } else {
            out(&format!("none of the {total} runs in {} matches\n", store.path().display()))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&[
        ("id", Align::Right),
        ("label", Align::Left),
        ("started", Align::Left),
        ("suite", Align::Left),
        ("status", Align::Left),
        ("host", Align::Left),
        ("machine", Align::Left),
        ("kernel", Align::Left),
        ("ok", Align::Right),
        ("skipped", Align::Right),
        ("failed", Align::Right),
    ]);
    let mut reasons = Vec::new();
    for r in list {
        if let Some(why) = &r.reason {
            let why = schedlab_measure::text::escape(why);
            reasons.push(format!("run #{} {}: {why}\n", r.id, r.status.key()));
        }
        t.row(vec![
            r.id.to_string(),
            r.label.unwrap_or_default(),
            r.started_at,
            r.suite,
            r.status.key().to_string(),
            r.host,
            r.machine_id.chars().take(8).collect(),
            r.kernel,
            r.ok.to_string(),
            r.skipped.to_string(),
            r.failed.to_string(),
        ]);
    }
    out(&t.to_terminal())?;
    if !reasons.is_empty() {
        out(&format!("\n{}", reasons.concat()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn show(store: &Store, spec: &str, view: ViewArg) -> Result<ExitCode> {
    let run = load(store, spec)?;
    out(&match view {
        ViewArg::Results => {
            // The summary first, as the HTML report's first screen (issue 28).
            let previous = previous_run(store, &run)?;
            let summary = schedlab_report::summary::summarise(&run, previous.as_ref());
            format!("{}{}", schedlab_report::summary::text(&summary), views::run_text(&run))
        }
        ViewArg::Unixbench => schedlab_report::suites::unixbench_text(&run),
        ViewArg::Lmbench => schedlab_report::suites::lmbench_text(&run),
        ViewArg::Hbench => schedlab_report::bystander::hbench_text(&run),
    })?;
    Ok(ExitCode::SUCCESS)
}

fn export(store: &Store, args: &ExportArgs) -> Result<ExitCode> {
    let output = args.output.as_deref().map(Output::claim).transpose()?;
    let conbench = match args.format {
        FormatArg::Conbench => Some(conbench_project()?),
        _ => None,
    };
    let run = load(store, &args.run)?;
    let text = match args.format {
        FormatArg::Json => Json.render(&run),
        FormatArg::Csv => Csv.render(&run),
        FormatArg::Markdown => Markdown.render(&run),
        FormatArg::Bencher => Bencher.render(&run),
        FormatArg::Conbench => {
            let mut c = conbench.expect("read above for this format");
            c.run_uuid = store.identity(run.meta.id)?.0;
            c.render(&run)
        }
    };
    match output {
        None => out(&text)?,
        Some(output) => {
            let path = output.path().display().to_string();
            output.write(&text)?;
            eprintln!("wrote run #{} to {path}", run.meta.id);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What conbench needs to know beyond the run, from the environment its own adapters read
/// (conbench's benchadapt): `CONBENCH_PROJECT_REPOSITORY` (required: `org/repo`, a
/// `https://github.com/` URL or `git@github.com:org/repo`), `CONBENCH_PROJECT_COMMIT`,
/// `CONBENCH_PROJECT_PR_NUMBER`.
fn conbench_project() -> Result<Conbench> {
    let var =
        |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let Some(repo) = var("CONBENCH_PROJECT_REPOSITORY") else {
        return Err(UsageError(
            "--format conbench needs the benchmarked repository, as conbench requires one: set CONBENCH_PROJECT_REPOSITORY=https://github.com/ORG/REPO (and CONBENCH_PROJECT_COMMIT=SHA)".into(),
        )
        .into());
    };
    let repository = if let Some(rest) = repo.strip_prefix("git@github.com:") {
        format!("https://github.com/{}", rest.trim_end_matches(".git"))
    } else if repo.starts_with("https://github.com/") {
        repo.trim_end_matches('/').to_string()
    } else if repo.split('/').count() == 2 && !repo.contains(':') {
        format!("https://github.com/{repo}")
    } else {
        return Err(UsageError(format!(
            "CONBENCH_PROJECT_REPOSITORY={repo:?}: conbench takes ORG/REPO or a https://github.com/ORG/REPO URL"
        ))
        .into());
    };
    let pr_number = match var("CONBENCH_PROJECT_PR_NUMBER") {
        None => None,
        Some(n) => Some(n.parse::<u64>().map_err(|_| {
            UsageError(format!("CONBENCH_PROJECT_PR_NUMBER={n:?} is not a pull request number"))
        })?),
    };
    Ok(Conbench {
        run_uuid: String::new(),
        repository,
        commit: var("CONBENCH_PROJECT_COMMIT"),
        pr_number,
    })
}

/// The runs RUN arguments name, with `baseline` among them (first when it was not named),
/// and the baseline's index. A run named twice is a usage error.
fn load_runs(
    store: &Store,
    specs: &[String],
    baseline: Option<&str>,
    host: Option<&str>,
) -> Result<(Vec<Run>, usize)> {
    let mut specs = specs.to_vec();
    if let Some(b) = baseline {
        if !specs.iter().any(|s| s == b) {
            specs.insert(0, b.to_string());
        }
    }
    // The runs named otherwise first: `latest` is then read among runs that can stand
    // beside them.
    let mut loaded: Vec<Option<Run>> = Vec::new();
    for s in &specs {
        loaded.push(if s == "latest" {
            None
        } else {
            Some(store.load_run(resolve(store, s, host)?)?)
        });
    }
    let others: Vec<&Run> = loaded.iter().flatten().collect();
    let picked = if loaded.iter().any(Option::is_none) && !others.is_empty() {
        Some(latest_comparable(store, &others, host)?)
    } else {
        None
    };
    let mut runs: Vec<Run> = Vec::new();
    for (s, r) in specs.iter().zip(loaded) {
        let r = match r {
            Some(r) => r,
            None => match &picked {
                Some(r) => r.clone(),
                None => store.load_run(resolve(store, s, host)?)?,
            },
        };
        if runs.iter().any(|x| x.meta.id == r.meta.id) {
            return Err(
                UsageError(format!("run {s:?} is named twice (it is run #{})", r.meta.id)).into()
            );
        }
        runs.push(r);
    }
    let index = match baseline {
        Some(b) => {
            let id = match (b, &picked) {
                ("latest", Some(r)) => r.meta.id,
                _ => resolve(store, b, host)?,
            };
            runs.iter().position(|r| r.meta.id == id).expect("the baseline was loaded above")
        }
        None => 0,
    };
    Ok((runs, index))
}

/// The (probe, params) rows of a run.
fn rows_of(run: &Run) -> std::collections::HashSet<(String, String)> {
    run.results.iter().map(|m| (m.probe.clone(), m.params.key())).collect()
}

/// `latest` beside other runs (`compare latest seed002:linux-hp`, `report latest 3`): the
/// newest measured run (of `host`, when given) that has a result in common with every
/// other run named, so a `timeline` or a filtered run made since does not turn the
/// comparison into a table of dashes. When a newer run is passed over, a note on standard
/// error says which and why; when none fits, a failure (exit 1) saying so.
fn latest_comparable(store: &Store, others: &[&Run], host: Option<&str>) -> Result<Run> {
    let newest = store.load_run(resolve(store, "latest", host)?)?;
    let wanted: Vec<_> = others.iter().map(|r| rows_of(r)).collect();
    let fits = |r: &Run| {
        let rows = rows_of(r);
        wanted.iter().all(|w| !w.is_disjoint(&rows))
    };
    if fits(&newest) {
        return Ok(newest);
    }
    let names: Vec<String> = others.iter().map(|r| r.meta.display_name()).collect();
    let mut candidates = store.runs()?;
    if let Some(h) = host {
        let filter = RunFilter { hosts: vec![h.to_string()], ..Default::default() };
        candidates = filter.apply(candidates);
    }
    for c in candidates.iter().rev() {
        if c.id >= newest.meta.id || c.suite == schedlab_report::reference::SUITE {
            continue;
        }
        let r = store.load_run(c.id)?;
        if fits(&r) {
            eprintln!(
                "schedlab: latest: run #{} ({} suite) has no result in common with {}; using run #{} ({} suite, {}), the latest that has",
                newest.meta.id,
                newest.meta.suite,
                names.join(", "),
                r.meta.id,
                r.meta.suite,
                r.meta.started_at
            );
            return Ok(r);
        }
    }
    anyhow::bail!(
        "latest: no measured run in {} has a result in common with {} (the latest, run #{}, is of suite {}); measure one first, e.g. `schedlab run --suite quick --filter os`",
        store.path().display(),
        names.join(", "),
        newest.meta.id,
        newest.meta.suite
    )
}

fn report(store: &Store, args: &ReportArgs) -> Result<ExitCode> {
    let output = Output::claim(&args.output)?;
    let (runs, baseline) = load_runs(store, &args.runs, args.baseline.as_deref(), None)?;
    write_report(store, runs, baseline, output)?;
    Ok(ExitCode::SUCCESS)
}

/// The previous run of `run`'s host that the summary sets it against: the newest run
/// started before it on the same machine (fingerprint id) with the same suite, or none. By
/// start time first (a run pulled or imported later has a higher id here), then by id (start
/// times are to the second, and two short runs share one).
fn previous_run(store: &Store, run: &Run) -> Result<Option<Run>> {
    let machine = schedlab_store::machine_id(&run.meta.machine);
    let this = (run.meta.started_at.as_str(), run.meta.id);
    let previous = store
        .runs()?
        .into_iter()
        .filter(|r| (r.started_at.as_str(), r.id) < this)
        .filter(|r| r.machine_id == machine && r.suite == run.meta.suite)
        .max_by(|a, b| (&a.started_at, a.id).cmp(&(&b.started_at, b.id)));
    previous.map(|r| store.load_run(r.id)).transpose().map_err(Into::into)
}

/// Renders `runs` and the timelines stored with them as the HTML report into `output`.
fn write_report(store: &Store, runs: Vec<Run>, baseline: usize, output: Output) -> Result<()> {
    let mut timelines = Vec::new();
    for r in &runs {
        for st in store.timelines(r.meta.id)? {
            let timeline = serde_json::from_str(&st.data).with_context(|| {
                format!("run #{}: a stored timeline ({}) cannot be read", r.meta.id, st.scenario)
            })?;
            timelines.push(RunTimeline { run_id: r.meta.id, recorder: st.recorder, timeline });
        }
    }
    let previous = runs.iter().map(|r| previous_run(store, r)).collect::<Result<Vec<_>>>()?;
    let html = page_against(&runs, baseline, &timelines, &previous, env!("CARGO_PKG_VERSION"));
    let path = output.path().display().to_string();
    output.write(&html)?;
    eprintln!(
        "wrote the report of {} run{} to {} ({} KiB)",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        path,
        html.len().div_ceil(1024)
    );
    Ok(())
}

fn compare(store: &Store, args: &CompareArgs) -> Result<ExitCode> {
    // The gate's flags and files are checked before anything is read.
    let gate = crate::gate::Gate::from_args(args)?;
    let (mut runs, baseline) =
        load_runs(store, &args.runs, args.baseline.as_deref(), args.host.as_deref())?;
    if runs.len() < 2 {
        return Err(UsageError(
            "compare needs at least two runs (or one run and --baseline)".into(),
        )
        .into());
    }
    if !args.filter.is_empty() {
        let all = catalog();
        select(&all, &args.filter).map_err(|e| UsageError(e.to_string()))?;
        for r in &mut runs {
            r.results.retain(|m| args.filter.iter().any(|f| schedlab_probes::matches(f, &m.probe)));
        }
    }
    // A table of dashes is no comparison: say why and fail.
    let base = rows_of(&runs[baseline]);
    if runs.iter().enumerate().all(|(i, r)| i == baseline || rows_of(r).is_disjoint(&base)) {
        let list: Vec<String> = runs
            .iter()
            .map(|r| {
                format!(
                    "{} (run #{}, suite {}, {} results)",
                    r.meta.display_name(),
                    r.meta.id,
                    r.meta.suite,
                    r.results.len()
                )
            })
            .collect();
        let filtered = if args.filter.is_empty() { "" } else { " after --filter" };
        anyhow::bail!(
            "nothing to compare: no probe and parameters measured by the baseline{filtered} were measured by another run: {}",
            list.join(", ")
        );
    }
    crate::gate::finish(&runs, baseline, args, gate)
}
