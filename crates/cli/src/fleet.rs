//! Results from many machines in one place: `push`, `pull` and `import` copy runs between
//! databases (SQLite files and PostgreSQL servers) through [`Store::copy_run`], one
//! transaction per run, and [`RunFilter`] picks runs by host, label and date for them and
//! for `runs`.
//!
//! A copy is idempotent (a run is known everywhere by its UUID) and resumable: when the
//! connection drops or the disk fills in the middle, the run being copied is not in the
//! target at all, the runs before it are, and running the same command again completes it.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context as _, Result};
use schedlab_store::{Copied, Location, RunSummary, Store};

use crate::args::{ImportArgs, PullArgs, PushArgs, RunFilterArgs};
use crate::{out, UsageError};

/// Which runs: by host (name or machine id prefix), label and start date. Empty lists match
/// everything.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Host names or machine id prefixes (8 characters or more).
    pub hosts: Vec<String>,
    /// Labels.
    pub labels: Vec<String>,
    /// Earliest start, compared as RFC 3339 text (`2026-11-20` is the start of that day).
    pub since: Option<String>,
}

impl RunFilter {
    /// Validates the command line's filter.
    pub fn from_args(a: &RunFilterArgs) -> Result<RunFilter> {
        if let Some(s) = &a.since {
            let b = s.as_bytes();
            let date_like = b.len() >= 10
                && b[..10].iter().enumerate().all(|(i, c)| match i {
                    4 | 7 => *c == b'-',
                    _ => c.is_ascii_digit(),
                });
            if !date_like {
                return Err(UsageError(format!(
                    "--since {s:?} is not a date; write it as 2026-11-20 or 2026-11-20T08:00:00Z"
                ))
                .into());
            }
        }
        if let Some(h) = a.host.iter().find(|h| h.trim().is_empty()) {
            return Err(UsageError(format!("--host {h:?} is empty")).into());
        }
        Ok(RunFilter { hosts: a.host.clone(), labels: a.label.clone(), since: a.since.clone() })
    }

    /// Whether `r` passes.
    pub fn matches(&self, r: &RunSummary) -> bool {
        let host = self.hosts.is_empty()
            || self.hosts.iter().any(|h| {
                r.host == *h || (h.len() >= 8 && r.machine_id.starts_with(&h.to_ascii_lowercase()))
            });
        let label =
            self.labels.is_empty() || self.labels.iter().any(|l| r.label.as_deref() == Some(l));
        let since = self.since.as_ref().is_none_or(|s| r.started_at.as_str() >= s.as_str());
        host && label && since
    }

    /// The runs of `runs` that pass, in their order.
    pub fn apply(&self, runs: Vec<RunSummary>) -> Vec<RunSummary> {
        runs.into_iter().filter(|r| self.matches(r)).collect()
    }
}

/// The environment variable naming the fleet's database, for `push` without `--to` and
/// `pull` without `--from` (so that a URL need not be typed, nor seen in `ps`).
pub const FLEET_ENV: &str = "SCHEDLAB_FLEET";

/// `--to`/`--from` as given, else `$SCHEDLAB_FLEET`, else a usage error naming both.
fn fleet_location(given: Option<&std::path::Path>, flag: &str) -> Result<Location> {
    if let Some(p) = given {
        return Ok(Location::parse(p.as_os_str()));
    }
    match std::env::var_os(FLEET_ENV).filter(|v| !v.is_empty()) {
        Some(v) => Ok(Location::parse(&v)),
        None => Err(UsageError(format!(
            "{flag} URL|PATH is needed, or the fleet's database in ${FLEET_ENV} \
             (e.g. export {FLEET_ENV}='postgres://lab@db.example/lab'; the password from \
             ~/.pgpass or $PGPASSWORD)"
        ))
        .into()),
    }
}

/// `schedlab push`: this database's runs (all finished ones, or those named) into `--to`.
pub fn push(args: &PushArgs, db: &Location) -> Result<ExitCode> {
    let to = fleet_location(args.to.as_deref(), "--to")?;
    if to == *db {
        return Err(UsageError(format!("--to {to} is the database being pushed from")).into());
    }
    let from = Store::open_existing_at(db)?;
    let all = from.runs()?;
    let runs: Vec<RunSummary> = if args.runs.is_empty() {
        all
    } else {
        let mut chosen = Vec::new();
        for spec in &args.runs {
            let id = from.resolve(spec).map_err(|e| UsageError(e.to_string()))?;
            if !chosen.iter().any(|r: &RunSummary| r.id == id) {
                chosen.extend(all.iter().find(|r| r.id == id).cloned());
            }
        }
        chosen
    };
    let target = Store::open_at(&to)?;
    copy(&from, &runs, &target, "pushed")
}

/// `schedlab pull`: runs of `--from` (filtered) into this database.
pub fn pull(args: &PullArgs, db: &Location) -> Result<ExitCode> {
    let from_at = fleet_location(args.from.as_deref(), "--from")?;
    if from_at == *db {
        return Err(
            UsageError(format!("--from {from_at} is the database being pulled into")).into()
        );
    }
    let filter = RunFilter::from_args(&args.filter)?;
    let from = Store::open_existing_at(&from_at)?;
    let runs = filter.apply(from.runs()?);
    let target = Store::open_at(db)?;
    copy(&from, &runs, &target, "pulled")
}

/// `schedlab import FILE`: another SQLite file's runs (filtered) into this database.
pub fn import(args: &ImportArgs, db: &Location) -> Result<ExitCode> {
    let file = Location::File(args.file.clone());
    if file == *db {
        return Err(UsageError(format!("{file} is the database being imported into")).into());
    }
    let filter = RunFilter::from_args(&args.filter)?;
    let from = Store::open_existing_at(&file)?;
    let runs = filter.apply(from.runs()?);
    let target = Store::open_at(db)?;
    copy(&from, &runs, &target, "imported")
}

/// Copies `runs` of `from` into `to`, one transaction each, printing a line per run and a
/// summary. A failure stops at the run it happened in (the runs before it are stored, that
/// one is not) and says how to complete the copy.
fn copy(from: &Store, runs: &[RunSummary], to: &Store, verb: &str) -> Result<ExitCode> {
    let started = Instant::now();
    let (mut copied, mut there, mut replaced, mut newer, mut running) = (0, 0, 0, 0, 0);
    for r in runs {
        let t = Instant::now();
        let name = r.label.as_deref().map_or(String::new(), |l| format!(" {l}"));
        let what = from.copy_run(r.id, to).with_context(|| {
            format!(
                "copying run #{}{name} ({}) to {}: the {copied} run(s) copied before it are stored there, this one is not; run the same command again to complete the copy",
                r.id,
                r.uuid,
                to.path().display()
            )
        })?;
        let word = match what {
            Copied::Copied => {
                copied += 1;
                "copied"
            }
            Copied::AlreadyThere => {
                there += 1;
                "already there"
            }
            Copied::Replaced => {
                replaced += 1;
                "replaced an older copy"
            }
            Copied::NewerThere => {
                newer += 1;
                "a newer copy is there, skipped"
            }
            Copied::StillRunning => {
                running += 1;
                "still running, not copied (copy it once it has finished)"
            }
        };
        out(&format!(
            "run #{}{name} [{} {}, {} results]: {word} ({:.2} s)\n",
            r.id,
            r.host,
            r.started_at,
            r.ok + r.skipped + r.failed,
            t.elapsed().as_secs_f64()
        ))?;
    }
    out(&format!(
        "{verb} {} run(s) from {} to {} in {:.2} s: {copied} copied, {there} already there, {replaced} replaced{}{}\n",
        runs.len(),
        from.path().display(),
        to.path().display(),
        started.elapsed().as_secs_f64(),
        if newer > 0 { format!(", {newer} skipped (a newer copy is there)") } else { String::new() },
        if running > 0 { format!(", {running} still running (not copied)") } else { String::new() }
    ))?;
    Ok(ExitCode::SUCCESS)
}
