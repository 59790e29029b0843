//! The schema and its migrations.
//!
//! `MIGRATIONS[i]` takes a database from version `i` to `i + 1`; a new schedlab appends to
//! the list and never edits a released entry. docs/DATABASE.md documents the current schema.

use rusqlite::Connection;

/// `PRAGMA application_id` of a schedlab database: "SCHL" in ASCII.
pub const APPLICATION_ID: i64 = 0x5343_484C;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const MIGRATIONS: &[&str] = &[
    // 0 -> 1: runs, results, samples, warnings.
    r#"
    CREATE TABLE runs (
        id            INTEGER PRIMARY KEY,
        label         TEXT,
        suite         TEXT NOT NULL,
        status        TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted')),
        started_at    TEXT NOT NULL,
        finished_at   TEXT,
        host          TEXT NOT NULL,
        os            TEXT NOT NULL,
        kernel        TEXT NOT NULL,
        cpu_model     TEXT NOT NULL,
        logical_cpus  INTEGER NOT NULL,
        version       TEXT NOT NULL,
        git_rev       TEXT NOT NULL,
        pid           INTEGER NOT NULL,
        filters       TEXT NOT NULL,
        settings      TEXT NOT NULL,
        calibration   TEXT,
        machine       TEXT NOT NULL
    );
    CREATE INDEX runs_label ON runs (label);
    CREATE TABLE results (
        id                   INTEGER PRIMARY KEY,
        run_id               INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        seq                  INTEGER NOT NULL,
        probe                TEXT NOT NULL,
        params               TEXT NOT NULL,
        params_json          TEXT NOT NULL,
        unit                 TEXT NOT NULL,
        better               TEXT NOT NULL CHECK (better IN ('lower', 'higher')),
        status               TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'failed', 'interrupted')),
        reason               TEXT,
        notes                TEXT NOT NULL,
        iters_per_sample     INTEGER NOT NULL,
        overhead_ns_per_iter REAL NOT NULL,
        n                    INTEGER,
        median               REAL,
        min                  REAL,
        max                  REAL,
        mean                 REAL,
        stddev               REAL,
        p5                   REAL,
        p95                  REAL,
        ci_low               REAL,
        ci_high              REAL,
        ci_level             REAL,
        cv                   REAL,
        outliers             INTEGER,
        window_ns            INTEGER,
        other_cpu_ns         INTEGER,
        steal_ns             INTEGER,
        wall_s               REAL NOT NULL,
        measured_at          TEXT NOT NULL,
        UNIQUE (run_id, probe, params)
    );
    CREATE INDEX results_probe ON results (probe, params);
    CREATE TABLE samples (
        result_id     INTEGER NOT NULL REFERENCES results (id) ON DELETE CASCADE,
        idx           INTEGER NOT NULL,
        iters         INTEGER NOT NULL,
        elapsed_ns    INTEGER NOT NULL,
        value         REAL NOT NULL,
        other_cpu_ns  INTEGER,
        migrated      INTEGER NOT NULL,
        PRIMARY KEY (result_id, idx)
    ) WITHOUT ROWID;
    CREATE TABLE warnings (
        id        INTEGER PRIMARY KEY,
        run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        kind      TEXT NOT NULL,
        probe     TEXT,
        severity  TEXT NOT NULL CHECK (severity IN ('info', 'warn')),
        message   TEXT NOT NULL,
        advice    TEXT NOT NULL
    );
    CREATE VIEW result_view AS
        SELECT r.id AS run_id, coalesce(r.label, r.host || ' ' || r.kernel) AS run, r.started_at,
               x.probe, x.params, x.status, x.median, x.ci_low, x.ci_high, x.cv, x.unit, x.better
        FROM results x JOIN runs r ON r.id = x.run_id;
    "#,
    // 1 -> 2: timelines (`schedlab timeline`): a scenario's raw record, one row per recorder,
    // the timeline model as JSON (lanes, runs, marks; see schedlab-trace's model).
    r#"
    CREATE TABLE timelines (
        id         INTEGER PRIMARY KEY,
        run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        scenario   TEXT NOT NULL,
        recorder   TEXT NOT NULL,
        window_ns  INTEGER NOT NULL,
        data       TEXT NOT NULL,
        UNIQUE (run_id, scenario, recorder)
    );
    "#,
];

/// Brings a database at `from` up to [`SCHEMA_VERSION`], each step in its own transaction,
/// and stamps it as ours.
pub fn migrate(conn: &Connection, from: i64) -> rusqlite::Result<()> {
    for (i, step) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        let to = i as i64 + 1;
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE;\n{step}\nPRAGMA application_id = {APPLICATION_ID};\nPRAGMA user_version = {to};\nCOMMIT;"
        ))?;
    }
    Ok(())
}
