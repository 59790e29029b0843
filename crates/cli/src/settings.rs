//! From what the user typed to validated, typed settings: the database path, the suite and
//! its sampling settings, the probe context.

use std::path::{Path, PathBuf};

use anyhow::Result;
use schedlab_measure::sampler::Settings;
use schedlab_probes::{Context, Suite};
use schedlab_store::Location;

use crate::args::{ExecArgs, RunArgs, SuiteArg};
use crate::UsageError;

/// The database: `--db`, else `$SCHEDLAB_DB`, else `$XDG_DATA_HOME/schedlab/results.db`,
/// else `~/.local/share/schedlab/results.db`. A `postgres://` URL names a server.
pub fn db_path(flag: Option<&Path>) -> Result<Location> {
    if let Some(p) = flag {
        return Ok(Location::parse(p.as_os_str()));
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = env("SCHEDLAB_DB") {
        return Ok(Location::parse(p.as_os_str()));
    }
    let base = env("XDG_DATA_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| env("HOME").map(|h| h.join(".local/share")))
        .ok_or_else(|| UsageError("cannot find a place for the database: set HOME, XDG_DATA_HOME or SCHEDLAB_DB, or pass --db".into()))?;
    Ok(Location::File(base.join("schedlab/results.db")))
}

/// A validated `schedlab run`.
#[derive(Debug)]
pub struct RunPlan {
    /// The suite.
    pub suite: Suite,
    /// The suite's default sampling settings (a probe may adjust them, see
    /// [`schedlab_probes::Probe::sampling`]).
    pub sampling: Settings,
    /// `--samples`, which wins over the suite's and the probe's choice.
    pub samples: Option<usize>,
    /// `--target-ms`, which wins over the suite's and the probe's choice.
    pub target: Option<std::time::Duration>,
    /// `--ci-target` (as a fraction) and `--max-samples`.
    pub adaptive: Option<(f64, Option<usize>)>,
    /// `--rounds` (1: one pass).
    pub rounds: usize,
    /// Filters (empty: everything).
    pub filters: Vec<String>,
    /// Label of the run.
    pub label: Option<String>,
    /// Context handed to probes.
    pub ctx: Context,
    /// `--report`: where to write the HTML report at the end.
    pub report: Option<crate::output::Output>,
    /// `--suite study`: the quick suite's settings, the seed experiments in every variant,
    /// then the timelines and the crosscheck into the same run (`crate::study`).
    pub study: bool,
}

impl RunPlan {
    /// The settings `probe` is sampled with: the suite's, adjusted by the probe, then the
    /// user's overrides.
    pub fn sampling_for(&self, probe: &dyn schedlab_probes::Probe) -> Settings {
        let mut s = probe.sampling(self.suite, &self.sampling);
        if let Some(n) = self.samples {
            s.samples = n;
        }
        if let Some(t) = self.target {
            s.target = t;
        }
        if let Some((ci_target, max)) = self.adaptive {
            let max_samples = max.unwrap_or(s.samples.saturating_mul(4)).max(s.samples);
            s.adaptive = Some(schedlab_measure::sampler::Adaptive { ci_target, max_samples });
        }
        s
    }

    /// Validates `args`.
    pub fn from_args(args: &RunArgs) -> Result<RunPlan> {
        let suite = match args.suite {
            SuiteArg::Smoke => Suite::Smoke,
            SuiteArg::Quick | SuiteArg::Study => Suite::Quick,
            SuiteArg::Full => Suite::Full,
        };
        let sampling = match suite {
            Suite::Smoke => Settings::smoke(),
            Suite::Quick => Settings::quick(),
            Suite::Full => Settings::full(),
        };
        let samples = args.samples.map(|n| n as usize);
        let adaptive = match args.ci_target {
            None => None,
            Some(pct) if pct.is_finite() && pct > 0.0 && pct <= 100.0 => {
                if let (Some(max), Some(n)) = (args.max_samples, args.samples) {
                    if max < n {
                        return Err(UsageError(format!(
                            "--max-samples {max} is below --samples {n}"
                        ))
                        .into());
                    }
                }
                Some((pct / 100.0, args.max_samples.map(|n| n as usize)))
            }
            Some(pct) => {
                return Err(UsageError(format!(
                    "--ci-target {pct}: a percentage above 0 and at most 100 (e.g. 2 for ±2%)"
                ))
                .into())
            }
        };
        let target = args.target_ms.map(|ms| std::time::Duration::from_millis(ms.into()));
        let filters: Vec<String> =
            // A blank pattern is kept, so that `select` refuses it as `list` does.
            args.filter.iter().map(|f| f.trim().to_string()).collect();
        validate_label(args.label.as_deref())?;
        // A report path that cannot be written fails now, not after the measuring.
        let report = args.report.as_deref().map(crate::output::Output::claim).transpose()?;
        let tmp_dir = args.tmp_dir.clone().unwrap_or_else(std::env::temp_dir);
        check_writable_dir(&tmp_dir)?;
        let exe = std::env::current_exe().ok();
        Ok(RunPlan {
            suite,
            sampling,
            samples,
            target,
            adaptive,
            rounds: args.rounds.map_or(1, |r| r as usize),
            filters,
            label: args.label.clone(),
            ctx: Context {
                suite,
                tmp_dir,
                exec_helper: exe.map(|e| (e, vec![crate::EXEC_HELPER_ARG.to_string()])),
            },
            report,
            study: args.suite == SuiteArg::Study,
        })
    }

    /// The suite's name as stored: `study` for the study, else the probes' suite.
    pub fn suite_name(&self) -> &'static str {
        if self.study {
            STUDY_SUITE
        } else {
            self.suite.name()
        }
    }

    /// The parameter sets of `probe` this plan measures: the suite's, and for the study the
    /// seed experiments' every variant.
    pub fn variants(
        &self,
        probe: &dyn schedlab_probes::Probe,
    ) -> Vec<schedlab_measure::model::Params> {
        if self.study && is_seed_experiment(probe.info().id) {
            probe.variants(Suite::Full)
        } else {
            probe.variants(self.suite)
        }
    }
}

/// The stored suite name of a study run.
pub const STUDY_SUITE: &str = "study";

/// The probes the study runs in every variant: the seeds' experiments.
pub fn is_seed_experiment(id: &str) -> bool {
    id.starts_with("sched.")
}

fn check_writable_dir(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        return Err(UsageError(format!("--tmp-dir {} is not a directory", dir.display())).into());
    }
    let probe = dir.join(format!(".schedlab-write-test-{}", std::process::id()));
    match std::fs::write(&probe, b"x") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => {
            Err(UsageError(format!("--tmp-dir {} is not writable: {e}", dir.display())).into())
        }
    }
}

/// Longest label accepted, in characters.
pub const MAX_LABEL: usize = 200;

/// Checks a `--label` at the door, for every command that stores one: not empty nor only
/// invisible characters, not readable as a run id or `latest`, no control, bidirectional or
/// invisible format characters (newlines and escape sequences would break `runs` and the
/// Markdown export, a right-to-left override would show another label; the rule of
/// [`schedlab_measure::text`], which `push`/`pull`/`import` apply too), at most
/// [`MAX_LABEL`] characters.
///
/// # Errors
/// A usage error saying what is wrong.
pub fn validate_label(label: Option<&str>) -> Result<(), UsageError> {
    let Some(l) = label else { return Ok(()) };
    if l.trim().is_empty() {
        return Err(UsageError("--label must not be empty".into()));
    }
    if let Some(c) = schedlab_measure::text::find_unsafe(l, false) {
        return Err(UsageError(format!(
            "--label \"{}\" contains {}, a control or invisible formatting character (newline, tab, escape, right-to-left override...); use printable text",
            schedlab_measure::text::escape(l),
            schedlab_measure::text::describe(c)
        )));
    }
    if schedlab_measure::text::is_blank(l) {
        return Err(UsageError(format!(
            "--label \"{}\" shows nothing (only blank or zero-width characters); use printable text",
            schedlab_measure::text::escape(l)
        )));
    }
    if l == "latest" || l.starts_with("latest~") || l.parse::<i64>().is_ok() {
        return Err(UsageError(format!(
            "--label {l:?} would be read as a run id or `latest`; choose a label with letters"
        )));
    }
    let n = l.chars().count();
    if n > MAX_LABEL {
        return Err(UsageError(format!("--label is {n} characters long; at most {MAX_LABEL}")));
    }
    Ok(())
}

/// A validated `schedlab exec`: what the library is told through its `SCHEDLAB_RT_*`
/// variables, and the program.
#[derive(Debug)]
pub struct ExecPlan {
    /// `--processors` (`None`: the library's default, the CPUs available).
    pub processors: Option<u32>,
    /// `--quantum`, in ms (`None`: the runtime's default).
    pub quantum_ms: Option<u32>,
    /// `--no-preempt`.
    pub no_preempt: bool,
    /// `--trace`: where the Perfetto JSON goes (claimed before the program runs).
    pub trace: Option<crate::output::Output>,
    /// The program (looked up on `PATH` when it has no `/`).
    pub program: std::ffi::OsString,
    /// Its arguments.
    pub args: Vec<std::ffi::OsString>,
}

impl ExecPlan {
    /// Validates `args` (clap has checked the ranges; a trace file that cannot be written
    /// is refused now, not after the program ran).
    pub fn from_args(args: &ExecArgs) -> Result<ExecPlan> {
        let (program, rest) = args.command.split_first().ok_or_else(|| {
            UsageError("no program to run: schedlab exec -- PROGRAM ARGS...".into())
        })?;
        if program.is_empty() {
            return Err(UsageError("the program to run is an empty string".into()).into());
        }
        let trace = args.trace.as_deref().map(crate::output::Output::claim).transpose()?;
        Ok(ExecPlan {
            processors: args.processors,
            quantum_ms: args.quantum,
            no_preempt: args.no_preempt,
            trace,
            program: program.clone(),
            args: rest.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_experiments_are_the_sched_family() {
        assert!(is_seed_experiment("sched.background_budget"));
        assert!(is_seed_experiment("sched.wakeup_latency"));
        assert!(!is_seed_experiment("os.pipe.latency"));
        assert!(!is_seed_experiment("scheduler.x"));
    }
}
