//! Retention: dropping the raw samples of old runs (`schedlab prune --raw-before DATE`),
//! never their results. A result keeps its summary (median, interval, spread, counts), its
//! notes and its warnings, so `runs`, `show`, `compare`, `history` and the views read it as
//! before; only what needs each sample (the report's strip plots, `export`'s `samples`)
//! finds none. A run still being measured is never touched, nor a published table imported
//! as a run.

use crate::error::Result;
use crate::Store;

/// What [`Store::prune_raw`] dropped, or would drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pruned {
    /// Runs with raw samples dropped.
    pub runs: i64,
    /// Results whose raw samples were dropped.
    pub results: i64,
    /// Samples dropped.
    pub samples: i64,
    /// Bytes of encoded samples dropped (the blobs; the database's own overhead aside).
    pub bytes: i64,
}

/// The finished runs that started before `$1` (RFC 3339 text). The published tables
/// imported as runs (suite `published`) are reference data of one value each, not
/// measurements: `reference import` tells an outdated one by its sample, so they are kept.
const OLD_RUNS: &str = "SELECT id FROM runs
     WHERE started_at < $1 AND status <> 'running' AND suite <> 'published' ORDER BY id";

/// A run's raw samples: its results' `raw` (and `raw_n`, NULL when it is `n`), found by
/// the run's index.
const RUN_RAW: &str = "WHERE run_id = $1 AND raw IS NOT NULL";

// PostgreSQL sums a BIGINT column as NUMERIC: the casts keep every count a BIGINT in both.
impl Store {
    /// Drops the raw samples of every finished run that started before `before` (RFC 3339
    /// text as stored: `2026-11-01` is the start of that day, UTC), in one transaction, and
    /// says how many; with `dry_run`, only says. Results, warnings and timelines are kept.
    /// One statement per run, so that no statement outlasts a server's statement timeout
    /// however many runs go.
    pub fn prune_raw(&self, before: &str, dry_run: bool) -> Result<Pruned> {
        self.tx(|c| {
            let mut p = Pruned::default();
            for run in c.query(OLD_RUNS, &[before.into()])? {
                let Some(r) = c.row(
                    &format!(
                        "SELECT count(*), CAST(coalesce(sum(coalesce(raw_n, n)), 0) AS BIGINT),
                                CAST(coalesce(sum(length(raw)), 0) AS BIGINT) FROM results {RUN_RAW}"
                    ),
                    &run,
                )?
                else {
                    continue;
                };
                if r[0].i() == 0 {
                    continue;
                }
                p.runs += 1;
                p.results += r[0].i();
                p.samples += r[1].i();
                p.bytes += r[2].i();
                if !dry_run {
                    c.exec(
                        &format!("UPDATE results SET raw = NULL, raw_n = NULL {RUN_RAW}"),
                        &run,
                    )?;
                }
            }
            Ok(p)
        })
    }
}
