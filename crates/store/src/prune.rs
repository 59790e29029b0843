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

/// The raw samples of finished runs that started before `$1` (RFC 3339 text). The published
/// tables imported as runs (suite `published`) are reference data of one value each, not
/// measurements: `reference import` tells an outdated one by its sample, so they are kept.
const OLD_RAW: &str =
    "FROM raw_samples s JOIN results x ON x.id = s.result_id JOIN runs r ON r.id = x.run_id
     WHERE r.started_at < $1 AND r.status <> 'running' AND r.suite <> 'published'";

// PostgreSQL sums a BIGINT column as NUMERIC: the casts keep every count a BIGINT in both.
impl Store {
    /// Drops the raw samples of every finished run that started before `before` (RFC 3339
    /// text as stored: `2026-11-01` is the start of that day, UTC), in one transaction, and
    /// says how many; with `dry_run`, only says. Results, warnings and timelines are kept.
    pub fn prune_raw(&self, before: &str, dry_run: bool) -> Result<Pruned> {
        self.tx(|c| {
            let row = c.row(
                &format!(
                    "SELECT count(DISTINCT x.run_id), count(*), CAST(coalesce(sum(s.n), 0) AS BIGINT),
                            CAST(coalesce(sum(length(s.data)), 0) AS BIGINT) {OLD_RAW}"
                ),
                &[before.into()],
            )?;
            let p = row.map_or(Pruned::default(), |r| Pruned {
                runs: r[0].i(),
                results: r[1].i(),
                samples: r[2].i(),
                bytes: r[3].i(),
            });
            if !dry_run && p.results > 0 {
                c.exec(
                    &format!("DELETE FROM raw_samples WHERE result_id IN (SELECT x.id {OLD_RAW})"),
                    &[before.into()],
                )?;
            }
            Ok(p)
        })
    }
}
