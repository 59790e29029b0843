//! `schedlab compare`'s CI gate: `--fail-on regression[=PCT]`, `--only regressions|changes`,
//! `--junit FILE` and `--markdown=FILE`, around the comparison `compare` prints. The
//! judging and the summaries are `schedlab_report::gate`'s; this file parses the flags,
//! writes the files and decides the exit code (1 when the gate fails).

use std::collections::HashSet;
use std::process::ExitCode;

use anyhow::Result;
use schedlab_measure::model::Run;
use schedlab_report::gate::{self, Judged};
use schedlab_report::views::ComparisonRow;

use crate::args::{CompareArgs, OnlyArg};
use crate::output::Output;
use crate::{out, UsageError};

/// The gate's settings, checked before anything is read.
#[derive(Debug)]
pub struct Gate {
    /// `--fail-on`: `Some(min effect as a fraction)`, or `None` for no gate.
    pub fail_on: Option<f64>,
    /// `--only`.
    pub only: Option<OnlyArg>,
    /// `--junit FILE`, claimed.
    pub junit: Option<Output>,
    /// `--markdown=FILE`, claimed.
    pub markdown: Option<Output>,
}

impl Gate {
    /// Validates the gate's flags of `args` and claims its output files.
    pub fn from_args(args: &CompareArgs) -> Result<Gate> {
        let fail_on = args.fail_on.as_deref().map(parse_fail_on).transpose()?;
        let junit = args.junit.as_deref().map(Output::claim).transpose()?;
        // `--markdown FILE` (a space, not `=`) reads FILE as a run: say what was meant.
        if args.markdown == Some(None) {
            if let Some(f) = args.runs.iter().find(|r| r.ends_with(".md")) {
                return Err(UsageError(format!(
                    "{f:?} is not a run: to write the Markdown summary to it, write --markdown={f}"
                ))
                .into());
            }
        }
        let markdown = match &args.markdown {
            Some(Some(path)) => Some(Output::claim(path)?),
            _ => None,
        };
        Ok(Gate { fail_on, only: args.only, junit, markdown })
    }
}

/// `regression` → 0, `regression=PCT` → PCT/100 for 0 ≤ PCT < 100.
fn parse_fail_on(s: &str) -> Result<f64> {
    let pct = match s.trim().split_once('=') {
        None if s.trim() == "regression" => return Ok(0.0),
        Some(("regression", pct)) => pct.trim(),
        _ => {
            return Err(UsageError(format!(
                "--fail-on {s:?}: the gate takes `regression` or `regression=PCT` (e.g. regression=5 for at least 5% worse)"
            ))
            .into())
        }
    };
    match pct.trim_end_matches('%').parse::<f64>() {
        Ok(p) if p.is_finite() && (0.0..100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(UsageError(format!(
            "--fail-on regression={pct}: PCT is a percentage from 0 up to (not including) 100, e.g. regression=5"
        ))
        .into()),
    }
}

/// Prints the comparison of `runs` (only the rows `--only` keeps), writes the summaries
/// and, with `--fail-on`, the gate's verdict; exit code 1 when it fails.
pub fn finish(runs: &[Run], baseline: usize, args: &CompareArgs, g: Gate) -> Result<ExitCode> {
    let min_effect = g.fail_on.unwrap_or(0.0);
    let judged = gate::judge(runs, baseline, min_effect, args.across_machines);
    let pick = |test: fn(gate::Kind) -> bool| -> HashSet<(String, String)> {
        judged
            .iter()
            .filter(|j| test(j.kind))
            .map(|j| (j.probe.clone(), j.params.clone()))
            .collect()
    };
    let regressed = pick(gate::Kind::fails);
    let changed = pick(gate::Kind::changed);
    let keep_row = |r: &ComparisonRow| {
        let key = (r.probe.clone(), r.params.clone());
        match g.only {
            None => true,
            Some(OnlyArg::Regressions) => regressed.contains(&key),
            Some(OnlyArg::Changes) => changed.contains(&key),
        }
    };
    let keep_judged = |j: &Judged<'_>| match g.only {
        None => true,
        Some(OnlyArg::Regressions) => j.kind.fails(),
        Some(OnlyArg::Changes) => j.kind.changed(),
    };
    let markdown = matches!(args.markdown, Some(None));
    out(&schedlab_report::views::compare_text_only(
        runs,
        baseline,
        markdown,
        args.across_machines,
        &keep_row,
    ))?;
    if let Some(o) = g.junit {
        o.write(&gate::junit(runs, baseline, &judged))?;
    }
    if let Some(o) = g.markdown {
        o.write(&gate::markdown(runs, baseline, &judged, min_effect, &keep_judged))?;
    }
    if g.fail_on.is_none() {
        return Ok(ExitCode::SUCCESS);
    }
    let line = gate::verdict_line(&judged, min_effect);
    out(&format!("\ngate: {line}\n"))?;
    Ok(if gate::fails(&judged) { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

#[cfg(test)]
mod tests {
    use super::parse_fail_on;

    #[test]
    fn fail_on_takes_regression_and_a_percentage() {
        assert_eq!(parse_fail_on("regression").unwrap(), 0.0);
        assert_eq!(parse_fail_on("regression=5").unwrap(), 0.05);
        assert_eq!(parse_fail_on("regression=2.5%").unwrap(), 0.025);
        for bad in [
            "regressions",
            "regression=",
            "regression=-1",
            "regression=100",
            "regression=x",
            "improvement=5",
            "regression=nan",
        ] {
            assert!(parse_fail_on(bad).is_err(), "{bad}");
        }
    }
}
