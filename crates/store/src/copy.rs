//! Copying a run whole from one store to another (`push`, `pull`, `import`): one transaction
//! per run, never twice (by its UUID), a stale copy replaced by a newer state of the same run
//! and never the other way, and a run whose text could drive a terminal refused at the door.

use std::collections::HashMap;

use crate::alive::abandoned;
use crate::columns::*;
use crate::db::{insert_many, Conn, DbError, Row, V};
use crate::error::{Result, StoreError};
use crate::intern::Interner;
use crate::{door, Store};

/// What [`Store::copy_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Copied {
    /// The run was not there; it is now, whole.
    Copied,
    /// The same run (same UUID, status and results) was there already; nothing was written.
    AlreadyThere,
    /// An older state of the run (interrupted, or fewer results) was there; it was replaced.
    Replaced,
    /// A newer state of the run (complete where this one is interrupted, or more results),
    /// or one still being measured there, was there; it was kept and nothing was written.
    NewerThere,
    /// The run is still being measured; it was not copied (copy it once it has finished).
    StillRunning,
    /// The run holds text that could drive a terminal or forge a table row (an escape
    /// sequence, a line break in a one-line field, a bidirectional override, a label that
    /// shows nothing); it was not copied. Says which field and what it holds:
    /// `label: U+001B (escape)`, `result 3 (os.x) notes.cpus: U+000A (line feed)`.
    Refused(String),
}

impl Store {
    /// Copies run `id` of this database, whole (results, raw samples, warnings, timelines),
    /// into `to`, in one transaction there: an interruption leaves `to` without any of it,
    /// and copying again completes it. A run `to` already has (same UUID) is not copied
    /// twice; a strictly older state of it there (interrupted where this one is complete, or
    /// fewer results) is replaced, and any other state there (newer, or still being
    /// measured) is kept: a stale copy never replaces a newer one. Runs still being measured
    /// here are not copied, nor runs whose text could drive a terminal (`door`:
    /// [`Copied::Refused`] says which field holds what).
    pub fn copy_run(&self, id: i64, to: &Store) -> Result<Copied> {
        let run = self
            .row(&format!("SELECT {} FROM runs WHERE id = $1", RUN_COLS.join(", ")), &[id.into()])?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string(), self.path.clone()))?;
        let col = |name: &str| RUN_COLS.iter().position(|c| *c == name).expect("a run column");
        let mut run = run;
        if run[col("status")].t() == "running" {
            // A run whose process is gone is copied as what it is: interrupted.
            let owner = self.row(
                "SELECT pid, pid_start, boot_id, machine_id FROM runs WHERE id = $1",
                &[id.into()],
            )?;
            let Some((reason, _)) = owner.as_deref().and_then(abandoned) else {
                return Ok(Copied::StillRunning);
            };
            run[col("status")] = "interrupted".to_string().into();
            run[col("reason")] = reason.into();
        }
        let status = run[col("status")].t();
        let uuid = run[col("uuid")].t();
        let results = self.query(
            &format!(
                "SELECT id, {} FROM result_rows WHERE run_id = $1 ORDER BY seq",
                RESULT_COLS.join(", ")
            ),
            &[id.into()],
        )?;
        let samples = self.query(RUN_RAW_SAMPLES, &[id.into()])?;
        let warnings = self.query(
            &format!(
                "SELECT {} FROM warning_rows WHERE run_id = $1 ORDER BY id",
                WARNING_COLS.join(", ")
            ),
            &[id.into()],
        )?;
        let timelines = self.query(
            &format!(
                "SELECT {} FROM timelines WHERE run_id = $1 ORDER BY id",
                TIMELINE_COLS.join(", ")
            ),
            &[id.into()],
        )?;
        if let Some(why) = door::refusal(&run, &results, &warnings, &timelines) {
            return Ok(Copied::Refused(why));
        }
        to.tx(|c| {
            let mut replaced = false;
            if let Some(there) = c.row(
                "SELECT id, status, (SELECT count(*) FROM results x WHERE x.run_id = runs.id)
                 FROM runs WHERE uuid = $1",
                &[uuid.clone().into()],
            )? {
                let (there_status, there_results) = (there[1].t(), there[2].i());
                if there_status == status && there_results == results.len() as i64 {
                    return Ok(Copied::AlreadyThere);
                }
                if !strictly_older(&there_status, there_results, &status, results.len() as i64) {
                    return Ok(Copied::NewerThere);
                }
                c.exec("DELETE FROM runs WHERE id = $1", &[there[0].clone()])?;
                replaced = true;
            }
            let Some(new) = c.row(
                &format!(
                    "INSERT INTO runs ({}) VALUES ({}) ON CONFLICT (uuid) DO NOTHING RETURNING id",
                    RUN_COLS.join(", "),
                    placeholders(1, RUN_COLS.len())
                ),
                &run,
            )?
            else {
                // Another copy of the same run committed meanwhile.
                return Ok(Copied::AlreadyThere);
            };
            let new_run = new[0].clone();
            let mut names = Interner::default();
            names.load_series(c)?;
            let logical: Vec<&[V]> = results.iter().map(|r| &r[1..]).collect();
            let advised: Vec<&[V]> = warnings.iter().map(Vec::as_slice).collect();
            names.prepare(c, &logical, &advised)?;
            // Each result with its raw samples, if any (`RAW_COLS`: result_id, n, data).
            let mut raw: HashMap<i64, (i64, V)> =
                samples.into_iter().map(|s| (s[0].i(), (s[1].i(), s[2].clone()))).collect();
            // Ids in the order measured (as a run measured into this database gets them,
            // and as readers ordering by id expect), then the rows in another order, below.
            let ids = new_result_ids(c, results.len())?;
            let mut rows = Vec::with_capacity(results.len());
            for (r, id) in results.iter().zip(ids) {
                let mut values = Vec::with_capacity(STORED_RESULT_COLS.len() + 2);
                values.push(V::I(id));
                values.push(new_run.clone());
                values.extend(names.stored_result(c, &r[1..], raw.remove(&r[0].i()))?);
                rows.push(values);
            }
            // In the order of the key (run_id, series_id): a run's entries are appended to
            // its index, which then fills its pages (in the order measured, the series ids
            // jump about, and each insert into a full page splits it in half).
            let series = 2 + STORED_RESULT_COLS.iter().position(|c| *c == "series_id").unwrap();
            rows.sort_by_key(|r| r[series].i());
            let sql = format!(
                "INSERT INTO results (id, run_id, {}) VALUES ($1, $2, {})",
                STORED_RESULT_COLS.join(", "),
                placeholders(3, STORED_RESULT_COLS.len())
            );
            for values in &rows {
                c.exec(&sql, values)?;
            }
            c.exec(
                &format!("UPDATE runs SET {RECOUNT} WHERE id = $1"),
                std::slice::from_ref(&new_run),
            )?;
            let relink = |rows: &[Row]| -> Vec<Row> {
                rows.iter()
                    .map(|r| {
                        let mut r = r.clone();
                        r[0] = new_run.clone();
                        r
                    })
                    .collect()
            };
            let warnings = relink(&warnings)
                .iter()
                .map(|w| names.stored_warning(c, w))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            insert_many(c, "warnings", STORED_WARNING_COLS, &warnings)?;
            insert_many(c, "timelines", TIMELINE_COLS, &relink(&timelines))?;
            Ok(if replaced { Copied::Replaced } else { Copied::Copied })
        })
    }
}

/// `n` new ids for `results`, in increasing order: from its identity in PostgreSQL (each
/// unique whoever else takes ids meanwhile), past the largest in SQLite (whose write lock
/// the transaction holds from its start: `BEGIN IMMEDIATE`).
fn new_result_ids(c: &mut Conn, n: usize) -> std::result::Result<Vec<i64>, DbError> {
    let mut ids: Vec<i64> = if c.is_pg() {
        c.query(
            "SELECT nextval(pg_get_serial_sequence('results', 'id')) FROM generate_series(1, $1)",
            &[V::I(n as i64)],
        )?
        .iter()
        .map(|r| r[0].i())
        .collect()
    } else {
        let max = c.row("SELECT coalesce(max(id), 0) FROM results", &[])?.map_or(0, |r| r[0].i());
        (1..=n as i64).map(|k| max + k).collect()
    };
    ids.sort_unstable();
    Ok(ids)
}

/// Whether the copy of a run in state `there` with `there_results` results is strictly
/// older than the same run in state `here` with `here_results`: a run only gains results and
/// goes from `running` to `complete` or `interrupted`, so a copy with fewer results, or an
/// interrupted one where the other is complete with as many, is an earlier state of it.
/// A complete copy is never older than an interrupted one, and a copy still `running` there
/// belongs to a process measuring into that database: neither is replaced.
pub(crate) fn strictly_older(
    there: &str,
    there_results: i64,
    here: &str,
    here_results: i64,
) -> bool {
    match (there, here) {
        ("running", _) | ("complete", "interrupted") => false,
        ("interrupted", "complete") => there_results <= here_results,
        _ => there_results < here_results,
    }
}
