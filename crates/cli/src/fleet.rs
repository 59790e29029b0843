//! Results from many machines in one place: `push`, `pull` and `import` copy runs between
//! databases (SQLite files and PostgreSQL servers) through [`Store::copy_run`], one
//! transaction per run; [`RunFilter`] picks the runs they copy.
//!
//! A copy is idempotent (a run is known everywhere by its UUID) and resumable: when the
//! connection drops or the disk fills in the middle, the run being copied is not in the
//! target at all, the runs before it are, and running the same command again completes it.
//!
//! A run whose text could drive a terminal (an escape sequence, a line break in its label,
//! a right-to-left override) is refused at the door, naming the field and the character;
//! the other runs are copied and the command ends with exit code 1.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context as _, Result};
use schedlab_measure::text::escape;
use schedlab_store::{Copied, Location, RunSummary, Store};

use crate::args::{ImportArgs, PruneArgs, PullArgs, PushArgs};
use crate::runs::RunFilter;
use crate::{out, UsageError};

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

/// `schedlab prune --raw-before DATE [--dry-run]`: the raw samples of runs started before
/// DATE dropped (or, dry, counted), results kept.
pub fn prune(args: &PruneArgs, db: &Location) -> Result<ExitCode> {
    let before = &args.raw_before;
    if let Err(why) = crate::runs::check_since(before) {
        return Err(UsageError(format!(
            "--raw-before {before:?} is not a date ({why}); write it as 2026-11-01 or 2026-11-01T08:00:00Z"
        ))
        .into());
    }
    let store = if args.dry_run { Store::open_existing_at(db)? } else { Store::open_at(db)? };
    let p = store.prune_raw(before, args.dry_run)?;
    let what = format!(
        "the raw samples of {} result(s) in {} run(s) started before {before} ({} samples, {})",
        p.results,
        p.runs,
        p.samples,
        schedlab_report::svg::bytes_label(p.bytes as f64)
    );
    if p.results == 0 {
        out(&format!(
            "no raw samples of runs started before {before} in {}\n",
            store.path().display()
        ))?;
    } else if args.dry_run {
        out(&format!("would drop {what} from {}; results, warnings and timelines are kept (dry run: nothing changed)\n", store.path().display()))?;
    } else {
        let space = if store.is_server() {
            "the server reuses the space after VACUUM (autovacuum does it)"
        } else {
            "the file reuses the space for later runs (`sqlite3 FILE vacuum` gives it back to the disk)"
        };
        out(&format!(
            "dropped {what} from {}; results, warnings and timelines are kept; {space}\n",
            store.path().display()
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Copies `runs` of `from` into `to`, one transaction each, printing a line per run and a
/// summary. A failure stops at the run it happened in (the runs before it are stored, that
/// one is not) and says how to complete the copy. A run refused at the door is said so and
/// skipped; the others are copied, and the exit code is 1.
fn copy(from: &Store, runs: &[RunSummary], to: &Store, verb: &str) -> Result<ExitCode> {
    let started = Instant::now();
    let (mut copied, mut there, mut replaced, mut newer, mut running, mut refused) =
        (0, 0, 0, 0, 0, 0);
    for r in runs {
        let t = Instant::now();
        // Label and host as stored there: shown escaped (they may be why it is refused).
        let name = r.label.as_deref().map_or(String::new(), |l| format!(" {}", escape(l)));
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
                "copied".to_string()
            }
            Copied::AlreadyThere => {
                there += 1;
                "already there".to_string()
            }
            Copied::Replaced => {
                replaced += 1;
                "replaced an older copy".to_string()
            }
            Copied::NewerThere => {
                newer += 1;
                "a newer copy is there, skipped".to_string()
            }
            Copied::StillRunning => {
                running += 1;
                "still running, not copied (copy it once it has finished)".to_string()
            }
            Copied::Refused(why) => {
                refused += 1;
                format!(
                    "REFUSED, not copied: its {why}; schedlab copies no text that could drive a terminal or forge a table row (escape sequences, line breaks, bidirectional overrides)"
                )
            }
        };
        out(&format!(
            "run #{}{name} [{} {}, {} results]: {word} ({:.2} s)\n",
            r.id,
            escape(&r.host),
            escape(&r.started_at),
            r.ok + r.skipped + r.failed,
            t.elapsed().as_secs_f64()
        ))?;
    }
    out(&format!(
        "{verb} {} run(s) from {} to {} in {:.2} s: {copied} copied, {there} already there, {replaced} replaced{}{}{}\n",
        runs.len(),
        from.path().display(),
        to.path().display(),
        started.elapsed().as_secs_f64(),
        if newer > 0 { format!(", {newer} skipped (a newer copy is there)") } else { String::new() },
        if running > 0 { format!(", {running} still running (not copied)") } else { String::new() },
        if refused > 0 { format!(", {refused} refused (see above)") } else { String::new() }
    ))?;
    if refused > 0 {
        eprintln!(
            "schedlab: {refused} run(s) refused: their text could drive a terminal; the others are copied"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
