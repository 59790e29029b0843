//! Writing a run: begun as `running` with this process named as its owner, each result
//! committed the moment it is measured, finished or interrupted with its reason.

use schedlab_measure::model::{Measurement, Params, RunMeta, RunStatus, Warning};
use schedlab_measure::owner::Owner;

use schedlab_measure::model::Severity;
use schedlab_measure::text::escape_prose;

use crate::alive::{machine_id, note_end_reason};
use crate::columns::*;
use crate::db::{insert_many, DbError, Row, V};
use crate::error::{Result, StoreError};
use crate::intern::Interner;
use crate::read::StoredTimeline;
use crate::Store;

impl Store {
    /// Stores a new run in state `running` and returns its id. It gets a new UUID and its
    /// machine's fingerprint id, and names this process (pid, start time, boot id) so a later
    /// command can tell whether it still runs.
    pub fn begin_run(&self, meta: &RunMeta) -> Result<i64> {
        let m = &meta.machine;
        let me = Owner::current();
        let row = self.row(
            "INSERT INTO runs (label, suite, status, started_at, host, os, kernel, cpu_model, logical_cpus,
                               version, git_rev, pid, filters, settings, calibration, machine, uuid, machine_id,
                               pid_start, boot_id)
             VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
             RETURNING id",
            &[
                meta.label.clone().into(),
                meta.suite.clone().into(),
                meta.started_at.clone().into(),
                m.host.clone().into(),
                m.os.clone().into(),
                m.kernel.clone().into(),
                m.cpu_model.clone().into(),
                (m.logical_cpus as i64).into(),
                meta.version.clone().into(),
                meta.git_rev.clone().into(),
                (me.pid as i64).into(),
                json(&meta.filters).into(),
                json(&params_object(&meta.settings)).into(),
                meta.calibration.as_ref().map(json).into(),
                json(m).into(),
                uuid::Uuid::new_v4().to_string().into(),
                machine_id(m).into(),
                (me.start as i64).into(),
                me.boot_id.into(),
            ],
        )?;
        Ok(row.map_or(0, |r| r[0].i()))
    }

    /// Stores one measurement with its samples, in one transaction (committed on return).
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] when the run has a result for the same probe and parameters.
    pub fn save_result(&mut self, run: i64, m: &Measurement) -> Result<()> {
        let now = schedlab_measure::machine::now_rfc3339();
        let s = m.summary.as_ref();
        // The row in `RESULT_COLS`' order; `seq` is set in the transaction.
        let mut values: Vec<V> = vec![
            V::Null,
            m.probe.clone().into(),
            m.params.key().into(),
            json(&params_object(&m.params)).into(),
            m.unit.key().into(),
            m.better.key().into(),
            m.outcome.key().into(),
            // A reason may quote a tool's output: stored without what could drive a
            // terminal, so the run passes the door of `push` (`door`) like any other.
            m.outcome.reason().map(|r| escape_prose(r).into_owned()).into(),
            json(&params_object(&m.notes)).into(),
            (m.iters_per_sample as i64).into(),
            m.overhead_ns_per_iter.into(),
            s.map(|s| s.n as i64).into(),
            s.map(|s| s.median).into(),
            s.map(|s| s.min).into(),
            s.map(|s| s.max).into(),
            s.map(|s| s.mean).into(),
            s.map(|s| s.stddev).into(),
            s.map(|s| s.p5).into(),
            s.map(|s| s.p95).into(),
            s.map(|s| s.ci_low).into(),
            s.map(|s| s.ci_high).into(),
            s.map(|s| s.ci_level).into(),
            s.map(|s| s.cv).into(),
            s.map(|s| s.outliers as i64).into(),
            m.noise.map(|n| n.window_ns as i64).into(),
            m.noise.map(|n| n.other_cpu_ns).into(),
            m.noise.map(|n| n.steal_ns).into(),
            m.wall_s.into(),
            now.into(),
        ];
        debug_assert_eq!(values.len(), RESULT_COLS.len());
        self.tx(|c| {
            // One result per probe and parameters in a run (whatever its unit).
            let taken = c.row(
                "SELECT 1 FROM results x JOIN series s ON s.id = x.series_id
                 WHERE x.run_id = $1 AND s.probe = $2 AND s.params = $3",
                &[run.into(), values[1].clone(), values[2].clone()],
            )?;
            if taken.is_some() {
                return Err(DbError::Conflict(format!(
                    "run {run} already has a result for {} [{}]",
                    m.probe, m.params
                )));
            }
            let seq = c.row("SELECT count(*) FROM results WHERE run_id = $1", &[run.into()])?;
            values[0] = V::I(seq.map_or(0, |r| r[0].i()));
            let raw = (!m.samples.is_empty())
                .then(|| (m.samples.len() as i64, V::B(crate::raw::encode(&m.samples))));
            let mut stored = vec![V::I(run)];
            stored.extend(Interner::default().stored_result(c, &values, raw)?);
            let sql = format!(
                "INSERT INTO results (run_id, {}) VALUES ({})",
                STORED_RESULT_COLS.join(", "),
                placeholders(1, STORED_RESULT_COLS.len() + 1)
            );
            c.exec(&sql, &stored)?;
            let (ok, skipped, failed) = match m.outcome.key() {
                "ok" => (1, 0, 0),
                "skipped" => (0, 1, 0),
                _ => (0, 0, 1),
            };
            c.exec(
                "UPDATE runs SET results_ok = coalesce(results_ok, 0) + $2,
                    results_skipped = coalesce(results_skipped, 0) + $3,
                    results_failed = coalesce(results_failed, 0) + $4 WHERE id = $1",
                &[run.into(), V::I(ok), V::I(skipped), V::I(failed)],
            )?;
            Ok(())
        })
    }

    /// Stores warnings for a run.
    pub fn save_warnings(&mut self, run: i64, warnings: &[Warning]) -> Result<()> {
        let rows: Vec<Row> = warnings
            .iter()
            .map(|w| {
                let sev = match w.severity {
                    Severity::Info => "info",
                    Severity::Warn => "warn",
                };
                vec![
                    run.into(),
                    w.kind.clone().into(),
                    w.probe.clone().into(),
                    sev.into(),
                    escape_prose(&w.message).into_owned().into(),
                    escape_prose(&w.advice).into_owned().into(),
                ]
            })
            .collect();
        self.tx(|c| {
            let mut names = Interner::default();
            let refs: Vec<&[V]> = rows.iter().map(Vec::as_slice).collect();
            names.prepare(c, &[], &refs)?;
            let rows = rows
                .iter()
                .map(|w| names.stored_warning(c, w))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            insert_many(c, "warnings", STORED_WARNING_COLS, &rows)
        })
    }

    /// Stores a scenario's raw timeline (`data`: the timeline as JSON) with its run.
    /// Returns the timeline's id.
    pub fn save_timeline(&self, run: i64, t: &StoredTimeline) -> Result<i64> {
        let row = self.row(
            "INSERT INTO timelines (run_id, scenario, recorder, window_ns, data) VALUES ($1, $2, $3, $4, $5)
             RETURNING id",
            &[
                run.into(),
                t.scenario.clone().into(),
                t.recorder.clone().into(),
                (t.window_ns as i64).into(),
                t.data.clone().into(),
            ],
        )?;
        Ok(row.map_or(0, |r| r[0].i()))
    }

    /// Sets a run's final status and end time.
    pub fn finish_run(&self, run: i64, status: RunStatus) -> Result<()> {
        self.exec(
            "UPDATE runs SET status = $1, finished_at = $2 WHERE id = $3",
            &[status.key().into(), schedlab_measure::machine::now_rfc3339().into(), run.into()],
        )?;
        Ok(())
    }

    /// Marks a running run of this process interrupted, saying why (a storage failure, a
    /// signal...). Everything already committed for it stays; a run that has finished
    /// meanwhile keeps its status. When the database cannot be written (the very failure
    /// that stopped the run: the disk full, the lock still held), the reason is left in a
    /// note ([`note_end_reason`]) for the next command, and the error returned.
    pub fn interrupt_run(&self, run: i64, reason: &str) -> Result<()> {
        let r = self.exec(
            "UPDATE runs SET status = 'interrupted', finished_at = $1, reason = $2
             WHERE id = $3 AND status = 'running'",
            &[schedlab_measure::machine::now_rfc3339().into(), reason.into(), run.into()],
        );
        if r.is_err() {
            let _ = note_end_reason(reason);
        }
        r.map(drop)
    }

    /// Deletes run `id` with everything stored under it (results, raw samples, warnings,
    /// timelines), in one transaction.
    pub fn delete_run(&self, id: i64) -> Result<()> {
        let n = self.tx(|c| c.exec("DELETE FROM runs WHERE id = $1", &[id.into()]))?;
        if n == 0 {
            return Err(StoreError::NoSuchRun(id.to_string(), self.path.clone()));
        }
        Ok(())
    }
}

pub(crate) fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("our model types always serialise")
}

/// Params as a JSON object of strings (keys sorted; the canonical order lives in `params`).
pub(crate) fn params_object(p: &Params) -> serde_json::Map<String, serde_json::Value> {
    p.0.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect()
}
