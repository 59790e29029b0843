//! A result's history: one probe's measured results across every run of the database, with
//! the run and machine each came from (`schedlab history`), and the probe ids stored (to
//! name the closest when the one asked for has none). Read only; the statistics over the
//! series (change points) live in `schedlab_measure::changepoint`.

use crate::db::V;
use crate::error::Result;
use crate::Store;

/// Which results [`Store::history`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    /// The probe id, exactly (`os.pipe.latency`).
    pub probe: String,
    /// Only runs of these hosts: a host name, or 8 or more leading characters of a machine
    /// id. Empty: every host.
    pub hosts: Vec<String>,
    /// Only runs started on or after this RFC 3339 text (`2026-11-20` is that day's start).
    pub since: Option<String>,
}

/// One measured result in a history: the run it belongs to and its summary.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPoint {
    /// The run's id in this database.
    pub run_id: i64,
    /// The run's UUID.
    pub uuid: String,
    /// The run's label.
    pub label: Option<String>,
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// The host name.
    pub host: String,
    /// The machine's fingerprint id.
    pub machine_id: String,
    /// The kernel release.
    pub kernel: String,
    /// schedlab's version and git revision.
    pub version: String,
    /// The git revision schedlab was built from.
    pub git_rev: String,
    /// The result's parameters, as their canonical key (`placement=same`).
    pub params: String,
    /// The unit's key (`ns`, `us`, `MiB/s`, `ops/s`).
    pub unit: String,
    /// `lower` or `higher`.
    pub better: String,
    /// Samples.
    pub n: i64,
    /// The median.
    pub median: f64,
    /// The median's confidence interval.
    pub ci_low: f64,
    /// Its upper end.
    pub ci_high: f64,
}

impl Store {
    /// The measured (`ok`) results of `q.probe` in every run that passes `q`'s filters,
    /// oldest run first (by start time, then id). The published reference tables (suite
    /// `published`) are not a history and are left out.
    pub fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryPoint>> {
        let mut sql = String::from(
            "SELECT r.id, r.uuid, r.label, r.started_at, r.host, r.machine_id, r.kernel,
                    r.version, r.git_rev, x.params, x.unit, x.better, x.n, x.median, x.ci_low,
                    x.ci_high
             FROM result_rows x JOIN runs r ON r.id = x.run_id
             WHERE x.probe = $1 AND x.status = 'ok' AND x.median IS NOT NULL
               AND r.suite <> 'published'",
        );
        let mut params: Vec<V> = vec![q.probe.as_str().into()];
        if let Some(since) = &q.since {
            params.push(since.as_str().into());
            sql.push_str(&format!(" AND r.started_at >= ${}", params.len()));
        }
        if !q.hosts.is_empty() {
            let mut any = Vec::new();
            for h in &q.hosts {
                params.push(h.as_str().into());
                let mut one = format!("r.host = ${}", params.len());
                if h.len() >= 8 {
                    params.push(format!("{}%", h.to_ascii_lowercase()).into());
                    one.push_str(&format!(" OR r.machine_id LIKE ${}", params.len()));
                }
                any.push(format!("({one})"));
            }
            sql.push_str(&format!(" AND ({})", any.join(" OR ")));
        }
        sql.push_str(" ORDER BY r.started_at, r.id, x.seq");
        Ok(self
            .query(&sql, &params)?
            .into_iter()
            .map(|r| HistoryPoint {
                run_id: r[0].i(),
                uuid: r[1].t(),
                label: r[2].ot(),
                started_at: r[3].t(),
                host: r[4].t(),
                machine_id: r[5].t(),
                kernel: r[6].t(),
                version: r[7].t(),
                git_rev: r[8].t(),
                params: r[9].t(),
                unit: r[10].t(),
                better: r[11].t(),
                n: r[12].i(),
                median: r[13].f(),
                ci_low: r[14].f(),
                ci_high: r[15].f(),
            })
            .collect())
    }

    /// Every probe id with at least one result stored, sorted. Read from `series` (one row
    /// per probe and parameter set, schema version 6), each checked for a result by the
    /// index `results_series`: the fleet's results themselves are not read.
    pub fn probe_ids(&self) -> Result<Vec<String>> {
        Ok(self
            .query(
                "SELECT DISTINCT s.probe FROM series s
                 WHERE EXISTS (SELECT 1 FROM results x WHERE x.series_id = s.id) ORDER BY s.probe",
                &[],
            )?
            .into_iter()
            .map(|r| r[0].t())
            .collect())
    }

    /// Whether any run was made on `host` (a host name or a machine id prefix of 8 or more
    /// characters).
    pub fn has_host(&self, host: &str) -> Result<bool> {
        let prefix =
            if host.len() >= 8 { format!("{}%", host.to_ascii_lowercase()) } else { String::new() };
        Ok(self
            .row(
                "SELECT 1 FROM runs WHERE host = $1 OR ($2 <> '' AND machine_id LIKE $2) LIMIT 1",
                &[host.into(), prefix.into()],
            )?
            .is_some())
    }
}
