//! What the user typed, as clap parses it. [`crate::settings`] turns it into validated,
//! typed values; nothing else in the binary looks at raw arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// A laboratory for threads and schedulers: what a machine's OS primitives really cost,
/// stored and compared across runs and machines.
#[derive(Debug, Parser)]
#[command(name = "schedlab", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// The results database: an SQLite file, or a PostgreSQL server as
    /// postgres://user@host:port/dbname (a fleet's shared database; port optional; the
    /// password from ~/.pgpass, $PGPASSFILE or $PGPASSWORD rather than the URL)
    /// [default: $SCHEDLAB_DB, else $XDG_DATA_HOME/schedlab/results.db]
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure: run a suite of probes and store every result as it is measured.
    Run(RunArgs),
    /// The probe catalog: id, unit, what it mirrors, what it needs.
    List(ListArgs),
    /// The stored runs, with the host that made each.
    Runs(RunsArgs),
    /// One stored run: machine, results, warnings.
    Show {
        /// A run id, a label (its most recent run), `latest` or `latest~N`.
        run: String,
        /// How to present the results: schedlab's table, or the run read as another suite
        /// reports it (UnixBench: rates, counts per 10 s and the index against its baseline
        /// machine; lmbench: seed 002's Table 2 rows in lmbench's units).
        #[arg(long, value_enum, default_value = "results")]
        view: ViewArg,
    },
    /// What this machine's kernel and platform do that changes scheduling and measurement
    /// (scheduler, HZ, preemption, timer slack, RT throttling, idle, SMT, hypervisor,
    /// cgroups, tracing and privileges): each value, where it was read and which probes and
    /// scenarios it changes. Every run stores these findings.
    Doctor(DoctorArgs),
    /// Write one run as JSON, CSV or Markdown.
    Export(ExportArgs),
    /// Runs side by side: one column per run, ratio against the baseline, noise verdicts;
    /// with --fail-on, a CI gate that exits 1 on a regression beyond noise.
    Compare(CompareArgs),
    /// One result over time: its median and interval in every run, one series per machine,
    /// with the change points (E-Divisive means) and what differed between the runs around
    /// each (kernel, doctor findings, settings, schedlab's version).
    History(HistoryArgs),
    /// One self-contained HTML page for one or more runs: machines, warnings, results with
    /// their raw samples, the comparison, the memory lab and the timelines stored with them.
    Report(ReportArgs),
    /// The memory-clearing lab: sweep clearing routines over sizes and alignments, store the
    /// run, print crossover points and the best routine per size range, draw SVG charts.
    Mem(MemArgs),
    /// Scheduler timelines: who ran when in the seed's ThreadTest scenarios, per-thread CPU
    /// share, time slices and gaps, stored as a run; terminal lanes, SVG and Perfetto.
    Timeline(TimelineArgs),
    /// Copy runs (results, raw samples, warnings, timelines) from this database to another,
    /// e.g. a fleet's PostgreSQL: idempotent, one transaction per run, so an interrupted push
    /// is completed by pushing again.
    Push(PushArgs),
    /// Copy runs from another database (e.g. a fleet's PostgreSQL) into this one, optionally
    /// only some hosts', labels' or dates'.
    Pull(PullArgs),
    /// Merge another schedlab SQLite file's runs into this database (runs it has already
    /// are not stored twice).
    Import(ImportArgs),
    /// Retention: drop the raw samples of runs started before a date, keeping every result
    /// (median, interval, notes), warning and timeline, so `runs`, `show` and `compare` read
    /// them as before.
    Prune(PruneArgs),
    /// The seed papers' published tables as reference runs: `list` the sets, `import SET`
    /// stores one run per machine column (labelled `seed002:linux-hp`...), to `compare`
    /// this machine with.
    #[command(subcommand)]
    Reference(ReferenceCommand),
    /// Check schedlab against the reference tools installed here (perf bench, lmbench,
    /// cyclictest): each beside the probe that measures the same thing, interleaved in
    /// pairs, with the median pair ratio and a verdict per row; stored as a run.
    Crosscheck(CrosscheckArgs),
    /// Run an unmodified program with its POSIX threads as schedlab-rt user threads
    /// (libschedlab_pthread.so, preloaded): `schedlab exec -- pigz -p 8 big.file`. Exits with
    /// the program's exit status (128+N if signal N killed it; 127 if it cannot be run).
    Exec(ExecArgs),
    /// Print a completion script for a shell to standard output (e.g. `schedlab completions
    /// bash > ~/.local/share/bash-completion/completions/schedlab`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to standard output (e.g. `schedlab man > schedlab.1`).
    Man,
}

/// `schedlab doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print a Markdown table (with what each finding changes as a column).
    #[arg(long, conflicts_with = "json")]
    pub markdown: bool,
    /// Print JSON: host, kernel, schedlab version and the findings.
    #[arg(long)]
    pub json: bool,
}

/// The presentations of `schedlab show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ViewArg {
    /// schedlab's result table, header and warnings.
    Results,
    /// UnixBench's tests, units and index.
    Unixbench,
    /// lmbench's rows and units.
    Lmbench,
    /// Seed 003's HBench-OS system calls with a live schedlab-rt runtime in the process, as
    /// ratios to none (rt.bystander; issue 26).
    Hbench,
}

/// The suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SuiteArg {
    /// Every probe once with tiny iteration counts: for tests and CI (seconds).
    Smoke,
    /// The main parameter sets, 11 samples each (under a minute for the OS family).
    Quick,
    /// Every parameter set, 15 samples each.
    Full,
    /// The whole study in one run: the quick suite, the seed experiments (`sched.*`) in
    /// every variant, the seed's timelines and the crosscheck (3 pairs a row); with
    /// --report one page with all of it.
    Study,
}

/// `schedlab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Which suite to run.
    #[arg(long, value_enum, default_value_t = SuiteArg::Quick)]
    pub suite: SuiteArg,
    /// Only probes matching PATTERN: a dotted prefix (`os.pipe`) or a glob (`os.*.latency`);
    /// repeat or separate with commas for several.
    #[arg(long, short = 'f', value_name = "PATTERN", value_delimiter = ',')]
    pub filter: Vec<String>,
    /// A label for this run, to find and compare it by name.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Samples per result [default: 15 for full, 11 for quick, 2 for smoke].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub samples: Option<u32>,
    /// Minimum duration of one sample in milliseconds [default: 10].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub target_ms: Option<u32>,
    /// Measure the selection R times, each round starting at a different probe, and keep
    /// one result per probe from every round's samples, with the rounds' medians and their
    /// spread beside the pooled interval [default: 1].
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: Option<u32>,
    /// Keep sampling each result until the median's 95% interval is within ±PCT percent of
    /// it, up to --max-samples (the samples taken are the result's n).
    #[arg(long, value_name = "PCT")]
    pub ci_target: Option<f64>,
    /// The most samples per result with --ci-target [default: four times --samples or the
    /// suite's count].
    #[arg(long, value_name = "N", requires = "ci_target", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_samples: Option<u32>,
    /// Directory for the file system probes' temporary files [default: the system temp dir].
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,
    /// Also write the run's HTML report to FILE at the end (as `schedlab report`).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// `schedlab list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only probes matching PATTERN (prefix or glob; repeatable).
    #[arg(long, short = 'f', value_name = "PATTERN", value_delimiter = ',')]
    pub filter: Vec<String>,
    /// Print the catalog as Markdown (this is how docs/PROBES.md is made).
    #[arg(long)]
    pub markdown: bool,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// One object per result with its summary and raw samples.
    Json,
    /// One line per result with its summary.
    Csv,
    /// The run header, results table and warnings.
    Markdown,
    /// The Bencher Metric Format (bencher.dev): median with its interval as lower/upper
    /// value, per result.
    Bencher,
    /// conbench's benchmark results (one object per result, as its API takes them); needs
    /// CONBENCH_PROJECT_REPOSITORY (and takes CONBENCH_PROJECT_COMMIT,
    /// CONBENCH_PROJECT_PR_NUMBER) as conbench's own adapters do.
    Conbench,
}

/// `schedlab export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A run id, a label, `latest` or `latest~N`.
    pub run: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    pub format: FormatArg,
    /// Write to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Which runs, by machine, label and date (`runs`, `pull`, `import`).
#[derive(Debug, Args, Clone, Default)]
pub struct RunFilterArgs {
    /// Only runs made on HOST: a host name, or the first 8 or more characters of a machine
    /// id (`runs` shows them); repeat for several.
    #[arg(long, value_name = "HOST")]
    pub host: Vec<String>,
    /// Only runs with this label; repeat for several.
    #[arg(long, value_name = "TEXT")]
    pub label: Vec<String>,
    /// Only runs started on or after DATE (`2026-11-20` or an RFC 3339 time).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
}

/// `schedlab runs`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Which runs.
    #[command(flatten)]
    pub filter: RunFilterArgs,
}

/// `schedlab push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The runs to push (ids, labels, UUIDs, `latest`, `latest~N`) [default: every finished
    /// run].
    pub runs: Vec<String>,
    /// The database to push to: postgres://user@host/dbname, or an SQLite file [default:
    /// $SCHEDLAB_FLEET]. A password comes from $PGPASSWORD or ~/.pgpass ($PGPASSFILE).
    #[arg(long, value_name = "URL|PATH")]
    pub to: Option<PathBuf>,
}

/// `schedlab pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// The database to pull from: postgres://user@host/dbname, or an SQLite file [default:
    /// $SCHEDLAB_FLEET]. A password comes from $PGPASSWORD or ~/.pgpass ($PGPASSFILE).
    #[arg(long, value_name = "URL|PATH")]
    pub from: Option<PathBuf>,
    /// Which runs [default: all].
    #[command(flatten)]
    pub filter: RunFilterArgs,
}

/// `schedlab prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Drop the raw samples of finished runs that started before this date (2026-11-01, or
    /// 2026-11-01T08:00:00Z; UTC).
    #[arg(long, value_name = "DATE", required = true)]
    pub raw_before: String,
    /// Only say what would be dropped.
    #[arg(long)]
    pub dry_run: bool,
}

/// `schedlab import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The schedlab SQLite file whose runs are merged into this database (read only).
    pub file: PathBuf,
    /// Which runs [default: all].
    #[command(flatten)]
    pub filter: RunFilterArgs,
}

/// `schedlab reference`.
#[derive(Debug, Subcommand)]
pub enum ReferenceCommand {
    /// The published sets, their machine columns and rows, and the probe each row maps to.
    List,
    /// Store a set's columns as runs marked published (suite `published`); a column already
    /// imported is skipped.
    Import {
        /// The set: seed002 or seed003.
        set: String,
    },
}

/// `schedlab compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Two or more runs (ids, labels, UUIDs, `latest`, `latest~N`).
    #[arg(num_args = 1.., required = true)]
    pub runs: Vec<String>,
    /// The run the others are compared against [default: the first].
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Only probes matching PATTERN.
    #[arg(long, short = 'f', value_name = "PATTERN", value_delimiter = ',')]
    pub filter: Vec<String>,
    /// Print Markdown instead of a terminal table; with =FILE, print the terminal table and
    /// write the CI summary (the gate's verdict and the table) to FILE as Markdown.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true)]
    pub markdown: Option<Option<PathBuf>>,
    /// The CI gate: exit 1 when a result is worse than the baseline beyond its noise (the
    /// 95% intervals do not overlap, on the worse side for its unit) or failed where the
    /// baseline measured it; `regression=PCT` also requires it be worse by PCT percent.
    #[arg(long, value_name = "regression[=PCT]")]
    pub fail_on: Option<String>,
    /// Show only the results that regressed, or only those that changed beyond noise.
    #[arg(long, value_enum)]
    pub only: Option<OnlyArg>,
    /// Write a JUnit XML report (a test case per result, a failure per regression) to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Resolve labels among the runs of HOST only (a host name or a machine id prefix): in a
    /// fleet's database many hosts have a run called `baseline`.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Judge runs of other machines than the baseline's as within noise, better or worse
    /// anyway (by default only their ratio is shown: one machine's noise says nothing about
    /// another's).
    #[arg(long)]
    pub across_machines: bool,
}

/// `compare --only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnlyArg {
    /// Results worse beyond noise (and by at least --fail-on's PCT), or failed.
    Regressions,
    /// Results better or worse beyond noise.
    Changes,
}

/// `schedlab history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The probe's id, e.g. os.pipe.latency (`schedlab list` shows them).
    pub probe: String,
    /// Only results with these parameters: KEY=VALUE, repeated or separated by commas
    /// (e.g. placement=same).
    #[arg(long, value_name = "K=V", value_delimiter = ',')]
    pub params: Vec<String>,
    /// Only runs made on HOST: a host name, or the first 8 or more characters of a machine
    /// id; repeat for several.
    #[arg(long, value_name = "HOST")]
    pub host: Vec<String>,
    /// Only runs started on or after DATE (`2026-11-20` or an RFC 3339 time).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Also write the history as an HTML page, a chart per parameter set.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// `schedlab report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// One or more runs (ids, labels, `latest`, `latest~N`).
    #[arg(num_args = 1.., required = true)]
    pub runs: Vec<String>,
    /// The run the others are compared against [default: the first].
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// The HTML file to write.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
}

/// `schedlab mem`.
#[derive(Debug, Args)]
pub struct MemArgs {
    /// Analyse this stored run (id, label, `latest`, `latest~N`) instead of measuring.
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Which sweep to measure: smoke (every routine once), quick (under 2 minutes), full.
    #[arg(long, value_enum, default_value_t = SuiteArg::Quick)]
    pub suite: SuiteArg,
    /// Write the SVG charts into DIR (created if needed).
    #[arg(long, value_name = "DIR")]
    pub svg_dir: Option<PathBuf>,
    /// A label for the new run.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Samples per point [default: 9 for quick, 11 for full, 2 for smoke].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub samples: Option<u32>,
    /// Minimum duration of one sample in milliseconds [default: 1 for quick, 2 for full].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub target_ms: Option<u32>,
    /// Print the tables as Markdown.
    #[arg(long)]
    pub markdown: bool,
}

/// `schedlab crosscheck`.
#[derive(Debug, Args)]
pub struct CrosscheckArgs {
    /// Only rows matching PATTERN: a row id (`lmbench.lat_pipe`, `perf.*`, `lmbench`) or its
    /// probe's id (`os.pipe`, `os.*.latency`); repeat or separate with commas for several.
    #[arg(long, short = 'f', value_name = "PATTERN", value_delimiter = ',')]
    pub filter: Vec<String>,
    /// Pairs per row (tool and probe once each, the order alternated) [default: 5].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub pairs: Option<u32>,
    /// The directory of lmbench's binaries (e.g. lmbench/bin/x86_64-linux-gnu); without it
    /// they are looked for on PATH.
    #[arg(long, value_name = "DIR")]
    pub lmbench_dir: Option<PathBuf>,
    /// List the rows, the tool each needs and whether it was found; measure nothing.
    #[arg(long)]
    pub list: bool,
    /// A label for this run.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Samples per probe measurement [default: 11, the quick suite's].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub samples: Option<u32>,
    /// Directory for the probes' and the tools' temporary files [default: the system temp dir].
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,
}

/// `schedlab timeline`.
#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// The scenario: its number (`3`) or name (`two-equal`); `--list` shows them.
    #[arg(required_unless_present_any = ["list", "probe"], conflicts_with = "probe")]
    pub scenario: Option<String>,
    /// Instead of a scenario: run one probe variant (set up as `run` would) for the window
    /// and record every thread of the process with the kernel's sched_switch (root).
    #[arg(long, value_name = "ID", conflicts_with = "list")]
    pub probe: Option<String>,
    /// The variant's parameters for --probe, as KEY=VALUE,KEY=VALUE, each key one the probe
    /// has (`schedlab list` shows them) and given once, e.g. loader=cgroup,cpus=1.
    #[arg(long, value_name = "K=V,...")]
    pub params: Option<String>,
    /// How long --probe records, in ms [default: 1000].
    #[arg(long, value_name = "MS")]
    pub window_ms: Option<u64>,
    /// List the scenarios.
    #[arg(long)]
    pub list: bool,
    /// Also write the timeline as Chrome trace event JSON (loads in ui.perfetto.dev).
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,
    /// Also draw the timeline as an SVG picture.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also record sched_switch/sched_wakeup with the kernel's tracefs (root).
    #[arg(long)]
    pub kernel: bool,
    /// A label for the stored run.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
}

/// `schedlab exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Virtual processors the program's threads run on [default: the CPUs available]
    /// (SCHEDLAB_RT_PROCESSORS).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub processors: Option<u32>,
    /// Preemption quantum in milliseconds: a thread that runs this long while others wait is
    /// switched away at its next safe point [default: the runtime's, 10]
    /// (SCHEDLAB_RT_QUANTUM_MS).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub quantum: Option<u32>,
    /// No preemption: a thread runs until it blocks, waits or yields (SCHEDLAB_RT_PREEMPT=0).
    #[arg(long, conflicts_with = "quantum")]
    pub no_preempt: bool,
    /// Record the runtime's scheduling events and write them to FILE as Chrome trace event
    /// JSON (loads in ui.perfetto.dev): each virtual processor's user threads, with the
    /// upcalls (blocked, unblocked, preempted, processor lost, new processor).
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<PathBuf>,
    /// The program, then its arguments (after `--`, so that its options are not schedlab's).
    #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true, value_name = "PROGRAM ARGS")]
    pub command: Vec<std::ffi::OsString>,
}
