//! schedlab-store: the results database.
//!
//! Runs, their results, every raw sample and the noise warnings live in one SQLite file
//! (embedded through rusqlite's `bundled` feature: no system library needed). The schema is
//! versioned with `PRAGMA user_version` and migrated forward; the file is marked as ours with
//! `PRAGMA application_id`, so a file that is not a schedlab database, or one written by a newer
//! schedlab, is refused with a clear error and never modified. The schema is documented for
//! people who query it with `sqlite3` in docs/DATABASE.md.
//!
//! Each result is committed in its own transaction the moment it is measured: Ctrl-C or a
//! crash loses nothing already measured. A run left `running` by a process that no longer
//! exists is marked `interrupted` the next time the database is opened for writing.
//!
//! ```
//! use schedlab_store::Store;
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(&dir.path().join("results.db")).unwrap();
//! assert!(store.runs().unwrap().is_empty());
//! ```
#![deny(missing_docs)]

mod schema;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use schedlab_measure::clock::Calibration;
use schedlab_measure::model::{
    Better, Measurement, Outcome, Params, Run, RunMeta, RunStatus, Sample, Severity, Unit, Warning,
};
use schedlab_measure::noise::Noise;
use schedlab_measure::stats::Summary;

pub use schema::{APPLICATION_ID, SCHEMA_VERSION};

/// What can go wrong with the database; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// There is no database at the path (for commands that only read).
    #[error(
        "no results database at {0}; run `schedlab run` first, or point --db / SCHEDLAB_DB at one"
    )]
    Missing(PathBuf),
    /// The file exists but is not a schedlab database; it was not touched.
    #[error("{0} is not a schedlab database ({1}); it was left untouched. Use --db to choose another file")]
    NotOurs(PathBuf, String),
    /// Written by a newer schedlab; it was not touched.
    #[error("{path} was written by a newer schedlab (schema version {found}, this build knows up to {known}); it was left untouched. Upgrade schedlab or use another --db")]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// Ours.
        known: i64,
    },
    /// The file cannot be created or opened (permissions, missing directory...).
    #[error("cannot open database {}{hint}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// What to check, with its leading separator, or empty.
        hint: &'static str,
        /// What the operating system or SQLite said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// SQLite reported an error while reading or writing.
    #[error("database {}{hint}", path.display())]
    Sql {
        /// The database file.
        path: PathBuf,
        /// What it means and what to do, with its leading separator, or empty.
        hint: &'static str,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The file says an older schema version than its tables are (its `user_version` was
    /// changed by hand, or a migration was interrupted outside schedlab); nothing was changed.
    #[error("{path} says schema version {version}, but its tables do not match that version ({detail}); it was left untouched. Was its user_version changed by hand? Use --db to choose another file, or restore the file")]
    Inconsistent {
        /// The database file.
        path: PathBuf,
        /// The version it claims.
        version: i64,
        /// What SQLite said when the migration from that version was tried.
        detail: String,
    },
    /// A RUN argument matched nothing.
    #[error("no run matches {0:?} in {1}; `schedlab runs` lists them (RUN is an id, a label or `latest`)")]
    NoSuchRun(String, PathBuf),
}

impl StoreError {
    fn open(
        path: &Path,
        hint: &'static str,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Open { path: path.into(), hint, source: Box::new(e) }
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, StoreError>;

/// An open results database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

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
    /// Run id.
    pub id: i64,
    /// Label, if any.
    pub label: Option<String>,
    /// Suite name.
    pub suite: String,
    /// Status.
    pub status: RunStatus,
    /// Start time (RFC 3339).
    pub started_at: String,
    /// Host name.
    pub host: String,
    /// Kernel release.
    pub kernel: String,
    /// Results measured (`ok`).
    pub ok: i64,
    /// Results skipped.
    pub skipped: i64,
    /// Results failed or interrupted.
    pub failed: i64,
}

/// Checks that `path` holds an SQLite file before SQLite sees it, so a foreign file is never
/// opened (and so never journaled or rewritten) by us.
fn check_header(path: &Path) -> Result<()> {
    let mut f = fs::File::open(path).map_err(|e| StoreError::open(path, "", e))?;
    let mut head = [0u8; 16];
    let n = f.read(&mut head).map_err(|e| StoreError::open(path, "", e))?;
    if n == 0 {
        return Ok(()); // an empty file is a new database to SQLite
    }
    if n < 16 || &head != b"SQLite format 3\0" {
        return Err(StoreError::NotOurs(path.into(), "not an SQLite file".into()));
    }
    Ok(())
}

impl Store {
    /// Opens the database at `path` for writing, creating it (and its directory) if needed and
    /// migrating an older schema forward.
    ///
    /// # Errors
    /// See [`StoreError`]: foreign, newer, unreadable or unwritable files are refused.
    pub fn open(path: &Path) -> Result<Store> {
        if path.exists() {
            check_header(path)?;
        } else if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|e| StoreError::open(path, " (cannot create its directory)", e))?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| sql_error(path, e))?;
        let store = Store { conn, path: path.into() };
        store.check_and_migrate(true)?;
        store.mark_abandoned()?;
        Ok(store)
    }

    /// Opens an existing database for reading only (`runs`, `show`, `export`, `compare`).
    ///
    /// # Errors
    /// [`StoreError::Missing`] when there is no file; otherwise as [`Store::open`].
    pub fn open_existing(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(StoreError::Missing(path.into()));
        }
        check_header(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_error(path, e))?;
        let store = Store { conn, path: path.into() };
        let version = store.check_and_migrate(false)?;
        if version < SCHEMA_VERSION {
            // An older schema needs a migration, which needs write access: reopen that way.
            drop(store);
            return Store::open(path);
        }
        Ok(store)
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql<T>(&self, r: rusqlite::Result<T>) -> Result<T> {
        r.map_err(|e| sql_error(&self.path, e))
    }

    /// Validates identity and version; creates or migrates when `write`. Returns the version
    /// found before any migration.
    fn check_and_migrate(&self, write: bool) -> Result<i64> {
        let app: i64 = self.sql(self.conn.query_row("PRAGMA application_id", [], |r| r.get(0)))?;
        let version: i64 =
            self.sql(self.conn.query_row("PRAGMA user_version", [], |r| r.get(0)))?;
        let tables: i64 = self.sql(self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'",
            [],
            |r| r.get(0),
        ))?;
        let fresh = app == 0 && version == 0 && tables == 0;
        if !fresh && app != APPLICATION_ID {
            return Err(StoreError::NotOurs(
                self.path.clone(),
                format!("an SQLite database of another application (application_id {app:#x}, {tables} tables)"),
            ));
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if write {
            self.sql(self.conn.busy_timeout(std::time::Duration::from_secs(5)))?;
            self.sql(self.conn.execute_batch("PRAGMA foreign_keys = ON;"))?;
            if version < SCHEMA_VERSION {
                // A migration step runs in one transaction: when it fails, dropping the
                // connection rolls it back, so the file is left as it was.
                schema::migrate(&self.conn, version).map_err(|e| {
                    if fresh {
                        sql_error(&self.path, e)
                    } else {
                        // SQLite's words, without the SQL rusqlite appends.
                        let text = e.to_string();
                        let first = text.lines().next().unwrap_or(&text).trim();
                        let detail = first.strip_suffix(" in").unwrap_or(first).to_string();
                        StoreError::Inconsistent { path: self.path.clone(), version, detail }
                    }
                })?;
            }
        }
        Ok(version)
    }

    /// Marks runs left `running` by a process of this host that no longer exists as
    /// interrupted (the process crashed or was killed with SIGKILL).
    fn mark_abandoned(&self) -> Result<()> {
        let host = schedlab_measure::machine::hostname();
        let mut stmt = self.sql(
            self.conn.prepare("SELECT id, pid FROM runs WHERE status = 'running' AND host = ?1"),
        )?;
        let rows: Vec<(i64, i64)> = self.sql(
            stmt.query_map([&host], |r| Ok((r.get(0)?, r.get(1)?))).and_then(|m| m.collect()),
        )?;
        for (id, pid) in rows {
            // SAFETY: kill with signal 0 sends nothing; it only checks that the pid exists.
            let alive = pid > 0 && unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
            if !alive {
                self.sql(self.conn.execute(
                    "UPDATE runs SET status = 'interrupted', finished_at = coalesce(finished_at, ?2) WHERE id = ?1",
                    params![id, schedlab_measure::machine::now_rfc3339()],
                ))?;
            }
        }
        Ok(())
    }

    /// Stores a new run in state `running` and returns its id.
    pub fn begin_run(&self, meta: &RunMeta) -> Result<i64> {
        let m = &meta.machine;
        self.sql(self.conn.execute(
            "INSERT INTO runs (label, suite, status, started_at, host, os, kernel, cpu_model, logical_cpus,
                               version, git_rev, pid, filters, settings, calibration, machine)
             VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                meta.label,
                meta.suite,
                meta.started_at,
                m.host,
                m.os,
                m.kernel,
                m.cpu_model,
                m.logical_cpus as i64,
                meta.version,
                meta.git_rev,
                std::process::id() as i64,
                json(&meta.filters),
                json(&params_object(&meta.settings)),
                meta.calibration.as_ref().map(json),
                json(m),
            ],
        ))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Stores one measurement with its samples, in one transaction (committed on return).
    pub fn save_result(&mut self, run: i64, m: &Measurement) -> Result<()> {
        let now = schedlab_measure::machine::now_rfc3339();
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_error(&path, e))?;
        let s = m.summary.as_ref();
        let res = (|| -> rusqlite::Result<()> {
            tx.execute(
                "INSERT INTO results (run_id, seq, probe, params, params_json, unit, better, status, reason,
                    notes, iters_per_sample, overhead_ns_per_iter, n, median, min, max, mean, stddev,
                    p5, p95, ci_low, ci_high, ci_level, cv, outliers, wall_s, measured_at,
                    window_ns, other_cpu_ns, steal_ns)
                 VALUES (?1, (SELECT count(*) FROM results WHERE run_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8,
                    ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26,
                    ?27, ?28, ?29)
                 ON CONFLICT (run_id, probe, params) DO NOTHING",
                params![
                    run,
                    m.probe,
                    m.params.key(),
                    json(&params_object(&m.params)),
                    m.unit.key(),
                    m.better.key(),
                    m.outcome.key(),
                    m.outcome.reason(),
                    json(&params_object(&m.notes)),
                    m.iters_per_sample as i64,
                    m.overhead_ns_per_iter,
                    s.map(|s| s.n as i64),
                    s.map(|s| s.median),
                    s.map(|s| s.min),
                    s.map(|s| s.max),
                    s.map(|s| s.mean),
                    s.map(|s| s.stddev),
                    s.map(|s| s.p5),
                    s.map(|s| s.p95),
                    s.map(|s| s.ci_low),
                    s.map(|s| s.ci_high),
                    s.map(|s| s.ci_level),
                    s.map(|s| s.cv),
                    s.map(|s| s.outliers as i64),
                    m.wall_s,
                    now,
                    m.noise.map(|n| n.window_ns as i64),
                    m.noise.map(|n| n.other_cpu_ns),
                    m.noise.map(|n| n.steal_ns),
                ],
            )?;
            if tx.changes() == 0 {
                return Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT),
                    Some(format!("run {run} already has a result for {} [{}]", m.probe, m.params)),
                ));
            }
            let result_id = tx.last_insert_rowid();
            let mut stmt = tx.prepare(
                "INSERT INTO samples (result_id, idx, iters, elapsed_ns, value, other_cpu_ns, migrated)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for (i, x) in m.samples.iter().enumerate() {
                stmt.execute(params![
                    result_id,
                    i as i64,
                    x.iters as i64,
                    x.elapsed_ns as i64,
                    x.value,
                    x.other_cpu_ns,
                    x.migrated
                ])?;
            }
            Ok(())
        })();
        res.map_err(|e| sql_error(&path, e))?;
        tx.commit().map_err(|e| sql_error(&path, e))
    }

    /// Stores warnings for a run.
    pub fn save_warnings(&mut self, run: i64, warnings: &[Warning]) -> Result<()> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_error(&path, e))?;
        let res = (|| -> rusqlite::Result<()> {
            let mut stmt = tx.prepare(
                "INSERT INTO warnings (run_id, kind, probe, severity, message, advice) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for w in warnings {
                let sev = match w.severity {
                    Severity::Info => "info",
                    Severity::Warn => "warn",
                };
                stmt.execute(params![run, w.kind, w.probe, sev, w.message, w.advice])?;
            }
            Ok(())
        })();
        res.map_err(|e| sql_error(&path, e))?;
        tx.commit().map_err(|e| sql_error(&path, e))
    }

    /// Stores a scenario's raw timeline (`data`: the timeline as JSON) with its run.
    /// Returns the timeline's id.
    pub fn save_timeline(&self, run: i64, t: &StoredTimeline) -> Result<i64> {
        self.sql(self.conn.execute(
            "INSERT INTO timelines (run_id, scenario, recorder, window_ns, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![run, t.scenario, t.recorder, t.window_ns as i64, t.data],
        ))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The timelines stored with a run, in the order they were stored.
    pub fn timelines(&self, run: i64) -> Result<Vec<StoredTimeline>> {
        let mut stmt = self.sql(self.conn.prepare(
            "SELECT scenario, recorder, window_ns, data FROM timelines WHERE run_id = ?1 ORDER BY id",
        ))?;
        self.sql(
            stmt.query_map([run], |r| {
                Ok(StoredTimeline {
                    scenario: r.get(0)?,
                    recorder: r.get(1)?,
                    window_ns: r.get::<_, i64>(2)? as u64,
                    data: r.get(3)?,
                })
            })
            .and_then(|m| m.collect()),
        )
    }

    /// Sets a run's final status and end time.
    pub fn finish_run(&self, run: i64, status: RunStatus) -> Result<()> {
        self.sql(self.conn.execute(
            "UPDATE runs SET status = ?2, finished_at = ?3 WHERE id = ?1",
            params![run, status.key(), schedlab_measure::machine::now_rfc3339()],
        ))?;
        Ok(())
    }

    /// All runs, oldest first.
    pub fn runs(&self) -> Result<Vec<RunSummary>> {
        let mut stmt = self.sql(self.conn.prepare(
            "SELECT r.id, r.label, r.suite, r.status, r.started_at, r.host, r.kernel,
                    (SELECT count(*) FROM results x WHERE x.run_id = r.id AND x.status = 'ok'),
                    (SELECT count(*) FROM results x WHERE x.run_id = r.id AND x.status = 'skipped'),
                    (SELECT count(*) FROM results x WHERE x.run_id = r.id AND x.status IN ('failed', 'interrupted'))
             FROM runs r ORDER BY r.id",
        ))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(RunSummary {
                    id: r.get(0)?,
                    label: r.get(1)?,
                    suite: r.get(2)?,
                    status: run_status(r.get(3)?),
                    started_at: r.get(4)?,
                    host: r.get(5)?,
                    kernel: r.get(6)?,
                    ok: r.get(7)?,
                    skipped: r.get(8)?,
                    failed: r.get(9)?,
                })
            })
            .and_then(|m| m.collect());
        self.sql(rows)
    }

    /// Resolves a RUN argument: a numeric id, `latest`, `latest~N` (N runs before the latest)
    /// or a label (the most recent run with it).
    ///
    /// # Errors
    /// [`StoreError::NoSuchRun`] when nothing matches.
    pub fn resolve(&self, spec: &str) -> Result<i64> {
        let none = || StoreError::NoSuchRun(spec.to_string(), self.path.clone());
        let found: Option<i64> = if spec == "latest" || spec.starts_with("latest~") {
            let back: i64 =
                spec.strip_prefix("latest~").map_or(Ok(0), |n| n.parse()).map_err(|_| none())?;
            self.sql(
                self.conn
                    .query_row(
                        "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                        [back],
                        |r| r.get(0),
                    )
                    .optional(),
            )?
        } else if let Ok(id) = spec.parse::<i64>() {
            self.sql(
                self.conn
                    .query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0))
                    .optional(),
            )?
        } else {
            None
        };
        let found = match found {
            Some(id) => Some(id),
            None => self.sql(
                self.conn
                    .query_row(
                        "SELECT id FROM runs WHERE label = ?1 ORDER BY id DESC LIMIT 1",
                        [spec],
                        |r| r.get(0),
                    )
                    .optional(),
            )?,
        };
        found.ok_or_else(none)
    }

    /// Loads a run with its results, samples and warnings.
    pub fn load_run(&self, id: i64) -> Result<Run> {
        let meta = self.sql(self.conn.query_row(
            "SELECT id, label, suite, status, started_at, finished_at, filters, version, git_rev,
                    settings, calibration, machine FROM runs WHERE id = ?1",
            [id],
            |r| {
                let filters: String = r.get(6)?;
                let settings: String = r.get(9)?;
                let calibration: Option<String> = r.get(10)?;
                let machine: String = r.get(11)?;
                Ok(RunMeta {
                    id: r.get(0)?,
                    label: r.get(1)?,
                    suite: r.get(2)?,
                    status: run_status(r.get(3)?),
                    started_at: r.get(4)?,
                    finished_at: r.get(5)?,
                    filters: serde_json::from_str(&filters).unwrap_or_default(),
                    version: r.get(7)?,
                    git_rev: r.get(8)?,
                    settings: params_from_json(&settings),
                    calibration: calibration
                        .and_then(|c| serde_json::from_str::<Calibration>(&c).ok()),
                    machine: serde_json::from_str(&machine).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(
                            11,
                            rusqlite::types::Type::Text,
                            Box::new(e),
                        )
                    })?,
                })
            },
        ))?;
        let mut stmt = self.sql(self.conn.prepare(
            "SELECT id, probe, params, unit, better, status, reason, notes, iters_per_sample,
                    overhead_ns_per_iter, n, median, min, max, mean, stddev, p5, p95, ci_low, ci_high,
                    ci_level, cv, outliers, wall_s, window_ns, other_cpu_ns, steal_ns
             FROM results WHERE run_id = ?1 ORDER BY seq",
        ))?;
        let rows: Vec<(i64, Measurement)> = self.sql(
            stmt.query_map([id], |r| {
                let unit_key: String = r.get(3)?;
                let unit = Unit::from_key(&unit_key).unwrap_or(Unit::Nanos);
                let better = match r.get::<_, String>(4)?.as_str() {
                    "higher" => Better::Higher,
                    _ => Better::Lower,
                };
                let reason: Option<String> = r.get(6)?;
                let outcome = match r.get::<_, String>(5)?.as_str() {
                    "ok" => Outcome::Ok,
                    "skipped" => Outcome::Skipped(reason.unwrap_or_default()),
                    "interrupted" => Outcome::Interrupted,
                    _ => Outcome::Failed(reason.unwrap_or_default()),
                };
                let n: Option<i64> = r.get(10)?;
                let summary = match n {
                    Some(n) => Some(Summary {
                        n: n as usize,
                        median: r.get(11)?,
                        min: r.get(12)?,
                        max: r.get(13)?,
                        mean: r.get(14)?,
                        stddev: r.get(15)?,
                        p5: r.get(16)?,
                        p95: r.get(17)?,
                        ci_low: r.get(18)?,
                        ci_high: r.get(19)?,
                        ci_level: r.get(20)?,
                        cv: r.get(21)?,
                        outliers: r.get::<_, i64>(22)? as usize,
                    }),
                    None => None,
                };
                Ok((
                    r.get(0)?,
                    Measurement {
                        probe: r.get(1)?,
                        params: Params::from_key(&r.get::<_, String>(2)?),
                        unit,
                        better,
                        outcome,
                        notes: params_from_json(&r.get::<_, String>(7)?),
                        iters_per_sample: r.get::<_, i64>(8)? as u64,
                        overhead_ns_per_iter: r.get(9)?,
                        samples: Vec::new(),
                        summary,
                        noise: match r.get::<_, Option<i64>>(24)? {
                            Some(window) => Some(Noise {
                                window_ns: window as u64,
                                other_cpu_ns: r.get::<_, Option<i64>>(25)?.unwrap_or(0),
                                steal_ns: r.get::<_, Option<i64>>(26)?.unwrap_or(0),
                            }),
                            None => None,
                        },
                        wall_s: r.get(23)?,
                    },
                ))
            })
            .and_then(|m| m.collect()),
        )?;
        let mut results = Vec::with_capacity(rows.len());
        let mut sstmt = self.sql(self.conn.prepare(
            "SELECT iters, elapsed_ns, value, other_cpu_ns, migrated FROM samples WHERE result_id = ?1 ORDER BY idx",
        ))?;
        for (rid, mut m) in rows {
            m.samples = self.sql(
                sstmt
                    .query_map([rid], |r| {
                        Ok(Sample {
                            iters: r.get::<_, i64>(0)? as u64,
                            elapsed_ns: r.get::<_, i64>(1)? as u64,
                            value: r.get(2)?,
                            other_cpu_ns: r.get(3)?,
                            migrated: r.get(4)?,
                        })
                    })
                    .and_then(|m| m.collect()),
            )?;
            results.push(m);
        }
        let mut wstmt = self.sql(self.conn.prepare(
            "SELECT kind, probe, severity, message, advice FROM warnings WHERE run_id = ?1 ORDER BY id",
        ))?;
        let warnings = self.sql(
            wstmt
                .query_map([id], |r| {
                    Ok(Warning {
                        kind: r.get(0)?,
                        probe: r.get(1)?,
                        severity: if r.get::<_, String>(2)? == "info" {
                            Severity::Info
                        } else {
                            Severity::Warn
                        },
                        message: r.get(3)?,
                        advice: r.get(4)?,
                    })
                })
                .and_then(|m| m.collect()),
        )?;
        Ok(Run { meta, results, warnings })
    }
}

/// A stored run status; anything unknown reads as interrupted (never as complete).
fn run_status(key: String) -> RunStatus {
    RunStatus::from_key(&key).unwrap_or(RunStatus::Interrupted)
}

/// Turns an SQLite error into one that names the file and says what to do.
fn sql_error(path: &Path, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            StoreError::NotOurs(path.into(), "SQLite says it is not a database".into())
        }
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Sql {
            path: path.into(),
            hint: " is corrupt (restore it from a backup or use another --db)",
            source: e,
        },
        Some(ErrorCode::ReadOnly)
        | Some(ErrorCode::CannotOpen)
        | Some(ErrorCode::PermissionDenied) => {
            StoreError::open(path, " (are the file and its directory writable?)", e)
        }
        _ => StoreError::Sql { path: path.into(), hint: "", source: e },
    }
}

fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("our model types always serialise")
}

/// Params as a JSON object of strings (keys sorted; the canonical order lives in `params`).
fn params_object(p: &Params) -> serde_json::Map<String, serde_json::Value> {
    p.0.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect()
}

fn params_from_json(s: &str) -> Params {
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(s).unwrap_or_default();
    Params(
        map.into_iter()
            .map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
            .collect(),
    )
}
