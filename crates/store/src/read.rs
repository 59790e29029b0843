//! Reading runs: the list (`schedlab runs`), a RUN argument resolved to an id, a whole run
//! with its results, samples and warnings, and its timelines. A run whose process is gone
//! reads as interrupted at once.

use std::collections::HashMap;

use schedlab_measure::clock::Calibration;
use schedlab_measure::model::{
    Better, Measurement, Outcome, Params, Run, RunMeta, RunStatus, Severity, Unit, Warning,
};
use schedlab_measure::noise::Noise;
use schedlab_measure::stats::Summary;

use crate::alive::settled;
use crate::db::Row;
use crate::error::{Result, StoreError};
use crate::Store;

/// A scenario's raw timeline as stored (schema version 2): the store keeps the JSON opaque,
/// `schedlab-trace` defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTimeline {
    /// The scenario (`3 two-equal`).
    pub scenario: String,
    /// The recorder that made it: `sampling`, `kernel`, `rt`.
    pub recorder: String,
    /// The recorded window, ns.
    pub window_ns: u64,
    /// The timeline as JSON.
    pub data: String,
}

/// One line of `schedlab runs`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// Run id (in this database).
    pub id: i64,
    /// The run's UUID (the same in every database it is copied to).
    pub uuid: String,
    /// Label, if any.
    pub label: Option<String>,
    /// Suite name.
    pub suite: String,
    /// Status.
    pub status: RunStatus,
    /// Why it was interrupted, when it was and the reason is known.
    pub reason: Option<String>,
    /// Start time (RFC 3339).
    pub started_at: String,
    /// Host name.
    pub host: String,
    /// The machine's fingerprint id ([`crate::machine_id`]).
    pub machine_id: String,
    /// Kernel release.
    pub kernel: String,
    /// Results measured (`ok`).
    pub ok: i64,
    /// Results skipped.
    pub skipped: i64,
    /// Results failed or interrupted.
    pub failed: i64,
}

impl Store {
    /// The timelines stored with a run, in the order they were stored.
    pub fn timelines(&self, run: i64) -> Result<Vec<StoredTimeline>> {
        Ok(self
            .query(
                "SELECT scenario, recorder, window_ns, data FROM timelines WHERE run_id = $1 ORDER BY id",
                &[run.into()],
            )?
            .into_iter()
            .map(|r| StoredTimeline {
                scenario: r[0].t(),
                recorder: r[1].t(),
                window_ns: r[2].i() as u64,
                data: r[3].t(),
            })
            .collect())
    }

    /// All runs, oldest first. Each run's counts of results are kept in the run (schema
    /// version 5), so listing a fleet's runs does not count its results; a run without them
    /// has its results counted.
    pub fn runs(&self) -> Result<Vec<RunSummary>> {
        let rows = self.query(
            "SELECT r.id, r.uuid, r.label, r.suite, r.status, r.reason, r.started_at, r.host,
                    r.machine_id, r.kernel,
                    coalesce(r.results_ok, (SELECT count(*) FROM results x
                        WHERE x.run_id = r.id AND x.status = 'ok')),
                    coalesce(r.results_skipped, (SELECT count(*) FROM results x
                        WHERE x.run_id = r.id AND x.status = 'skipped')),
                    coalesce(r.results_failed, (SELECT count(*) FROM results x
                        WHERE x.run_id = r.id AND x.status IN ('failed', 'interrupted'))),
                    r.pid, r.pid_start, r.boot_id, r.machine_id
             FROM runs r ORDER BY r.id",
            &[],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let (status, reason) = settled(r[4].t(), r[5].ot(), &r[13..]);
                RunSummary {
                    id: r[0].i(),
                    uuid: r[1].t(),
                    label: r[2].ot(),
                    suite: r[3].t(),
                    status,
                    reason,
                    started_at: r[6].t(),
                    host: r[7].t(),
                    machine_id: r[8].t(),
                    kernel: r[9].t(),
                    ok: r[10].i(),
                    skipped: r[11].i(),
                    failed: r[12].i(),
                }
            })
            .collect())
    }

    /// Resolves a RUN argument: a numeric id, `latest`, `latest~N` (N runs before the latest),
    /// a UUID (or its first 8 or more characters) or a label (the most recent run with it).
    /// `latest` counts measured runs only: the published tables imported as runs (suite
    /// `published`, `schedlab reference import`) are named by their labels.
    ///
    /// # Errors
    /// [`StoreError::NoSuchRun`] when nothing matches.
    pub fn resolve(&self, spec: &str) -> Result<i64> {
        let none = || StoreError::NoSuchRun(spec.to_string(), self.path.clone());
        let first = |rows: Vec<Row>| rows.first().map(|r| r[0].i());
        let mut found: Option<i64> = if spec == "latest" || spec.starts_with("latest~") {
            let back: i64 =
                spec.strip_prefix("latest~").map_or(Ok(0), |n| n.parse()).map_err(|_| none())?;
            first(self.query(
                "SELECT id FROM runs WHERE suite <> 'published' ORDER BY id DESC LIMIT 1 OFFSET $1",
                &[back.into()],
            )?)
        } else if let Ok(id) = spec.parse::<i64>() {
            first(self.query("SELECT id FROM runs WHERE id = $1", &[id.into()])?)
        } else {
            None
        };
        if found.is_none()
            && spec.len() >= 8
            && spec.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        {
            let rows = self.query(
                "SELECT id FROM runs WHERE uuid LIKE $1 LIMIT 2",
                &[format!("{}%", spec.to_ascii_lowercase()).into()],
            )?;
            if rows.len() == 1 {
                found = first(rows);
            }
        }
        if found.is_none() {
            found = first(self.query(
                "SELECT id FROM runs WHERE label = $1 ORDER BY id DESC LIMIT 1",
                &[spec.into()],
            )?);
        }
        found.ok_or_else(none)
    }

    /// A run's UUID and its machine's fingerprint id.
    pub fn identity(&self, id: i64) -> Result<(String, String)> {
        let row = self.row("SELECT uuid, machine_id FROM runs WHERE id = $1", &[id.into()])?;
        let row = row.ok_or_else(|| StoreError::NoSuchRun(id.to_string(), self.path.clone()))?;
        Ok((row[0].t(), row[1].t()))
    }

    /// Loads a run's metadata and machine, without its results (what `history` says
    /// differed between runs).
    pub fn load_meta(&self, id: i64) -> Result<RunMeta> {
        let row = self
            .row(
                "SELECT id, label, suite, status, started_at, finished_at, filters, version, git_rev,
                    settings, calibration, machine, reason, pid, pid_start, boot_id, machine_id
                 FROM runs WHERE id = $1",
                &[id.into()],
            )?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string(), self.path.clone()))?;
        let machine = serde_json::from_str(&row[11].t()).map_err(|e| {
            StoreError::Unreadable(
                self.path.clone(),
                format!("run {id}'s machine fingerprint is not the JSON schedlab wrote ({e})"),
            )
        })?;
        let (status, reason) = settled(row[3].t(), row[12].ot(), &row[13..]);
        Ok(RunMeta {
            id: row[0].i(),
            label: row[1].ot(),
            suite: row[2].t(),
            status,
            started_at: row[4].t(),
            finished_at: row[5].ot(),
            reason,
            filters: serde_json::from_str(&row[6].t()).unwrap_or_default(),
            version: row[7].t(),
            git_rev: row[8].t(),
            settings: params_from_json(&row[9].t()),
            calibration: row[10].ot().and_then(|c| serde_json::from_str::<Calibration>(&c).ok()),
            machine,
        })
    }

    /// Loads a run with its results, samples and warnings.
    pub fn load_run(&self, id: i64) -> Result<Run> {
        let meta = self.load_meta(id)?;
        let rows = self.query(
            "SELECT id, probe, params, unit, better, status, reason, notes, iters_per_sample,
                    overhead_ns_per_iter, n, median, min, max, mean, stddev, p5, p95, ci_low, ci_high,
                    ci_level, cv, outliers, wall_s, window_ns, other_cpu_ns, steal_ns
             FROM result_rows WHERE run_id = $1 ORDER BY seq",
            &[id.into()],
        )?;
        let mut index = HashMap::new();
        let mut results = Vec::with_capacity(rows.len());
        for r in rows {
            let unit = Unit::from_key(&r[3].t()).unwrap_or(Unit::Nanos);
            let better = match r[4].t().as_str() {
                "higher" => Better::Higher,
                _ => Better::Lower,
            };
            let reason = r[6].ot();
            let outcome = match r[5].t().as_str() {
                "ok" => Outcome::Ok,
                "skipped" => Outcome::Skipped(reason.unwrap_or_default()),
                "interrupted" => Outcome::Interrupted,
                _ => Outcome::Failed(reason.unwrap_or_default()),
            };
            let summary = r[10].oi().map(|n| Summary {
                n: n as usize,
                median: r[11].f(),
                min: r[12].f(),
                max: r[13].f(),
                mean: r[14].f(),
                stddev: r[15].f(),
                p5: r[16].f(),
                p95: r[17].f(),
                ci_low: r[18].f(),
                ci_high: r[19].f(),
                ci_level: r[20].f(),
                cv: r[21].f(),
                outliers: r[22].i() as usize,
            });
            index.insert(r[0].i(), results.len());
            results.push(Measurement {
                probe: r[1].t(),
                params: Params::from_key(&r[2].t()),
                unit,
                better,
                outcome,
                notes: params_from_json(&r[7].t()),
                iters_per_sample: r[8].i() as u64,
                overhead_ns_per_iter: r[9].f(),
                samples: Vec::new(),
                summary,
                noise: r[24].oi().map(|window| Noise {
                    window_ns: window as u64,
                    other_cpu_ns: r[25].oi().unwrap_or(0),
                    steal_ns: r[26].oi().unwrap_or(0),
                }),
                wall_s: r[23].f(),
            });
        }
        for s in self.query(crate::columns::RUN_RAW_SAMPLES, &[id.into()])? {
            let Some(&i) = index.get(&s[0].i()) else { continue };
            results[i].samples = crate::raw::decode(s[2].b()).map_err(|why| {
                StoreError::Unreadable(
                    self.path.clone(),
                    format!(
                        "run {id}'s raw samples of {} [{}] are not what schedlab writes ({})",
                        results[i].probe, results[i].params, why.0
                    ),
                )
            })?;
        }
        let warnings = self
            .query(
                "SELECT kind, probe, severity, message, advice FROM warning_rows WHERE run_id = $1 ORDER BY id",
                &[id.into()],
            )?
            .into_iter()
            .map(|r| Warning {
                kind: r[0].t(),
                probe: r[1].ot(),
                severity: if r[2].t() == "info" { Severity::Info } else { Severity::Warn },
                message: r[3].t(),
                advice: r[4].t(),
            })
            .collect();
        Ok(Run { meta, results, warnings })
    }
}

pub(crate) fn params_from_json(s: &str) -> Params {
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(s).unwrap_or_default();
    Params(
        map.into_iter()
            .map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
            .collect(),
    )
}
