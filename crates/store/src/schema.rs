//! The schema and its migrations.
//!
//! `MIGRATIONS[i]` takes an SQLite database from version `i` to `i + 1`, and `PG_MIGRATIONS[i]`
//! does the same step in PostgreSQL's words (`BIGINT` for `INTEGER`, `DOUBLE PRECISION` for
//! `REAL`, identity columns for rowids): both lists have one entry per version up to 5, and
//! they are never edited. From version 6 a step is written once ([`STEPS`]), in both
//! dialects' common SQL with the few words they spell differently as `{placeholders}` that
//! [`Dialect`] fills in: a new schedlab appends a step there. docs/DATABASE.md documents the
//! current schema.
//!
//! SQLite keeps the version in `PRAGMA user_version` and marks the file with `PRAGMA
//! application_id`; PostgreSQL keeps both in the one-row table `schedlab_meta`.

use crate::db::{Conn, DbError, V};

/// `PRAGMA application_id` of a schedlab database: "SCHL" in ASCII.
pub const APPLICATION_ID: i64 = 0x5343_484C;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = (MIGRATIONS.len() + STEPS.len()) as i64;

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
    // 2 -> 3: identity and reasons. `uuid`: the run's unique id everywhere it is copied;
    // `machine_id`: the machine's fingerprint id; `reason`: why a run was interrupted.
    // Existing runs get theirs in the same transaction (see `backfill`), then the indexes.
    r#"
    ALTER TABLE runs ADD COLUMN uuid TEXT;
    ALTER TABLE runs ADD COLUMN machine_id TEXT;
    ALTER TABLE runs ADD COLUMN reason TEXT;
    "#,
    // 3 -> 4: the process that measures a run, so a later command tells a killed one from a
    // live one even when its pid was reused or the machine rebooted (schedlab_measure::owner):
    // `pid_start` its start in clock ticks since boot, `boot_id` the boot it ran in. Older
    // rows keep NULL (compared by pid alone, as before).
    r#"
    ALTER TABLE runs ADD COLUMN pid_start INTEGER;
    ALTER TABLE runs ADD COLUMN boot_id TEXT;
    "#,
    // 4 -> 5: fleet scale. The raw samples of a result become one compact blob (`raw.rs`:
    // a few bytes a sample where a row took ~120 in PostgreSQL) in `raw_samples`, a table
    // of their own so that `prune` drops them (never the results) and a run's results stay
    // narrow to scan; `after_step` converts the old rows and drops `samples`. A run counts
    // its results by outcome (`runs` lists 10,000 runs without counting 25 million rows;
    // `after_step` counts the existing ones). Runs are
    // indexed by host and start, for `history` and the `--host`/`--since` filters, and
    // `fleet_results` is the one-row-per-result view other tools (Grafana) read.
    r#"
    CREATE TABLE raw_samples (
        result_id  INTEGER PRIMARY KEY REFERENCES results (id) ON DELETE CASCADE,
        n          INTEGER NOT NULL,
        data       BLOB NOT NULL
    );
    ALTER TABLE runs ADD COLUMN results_ok INTEGER;
    ALTER TABLE runs ADD COLUMN results_skipped INTEGER;
    ALTER TABLE runs ADD COLUMN results_failed INTEGER;
    CREATE INDEX runs_host_started ON runs (host, started_at);
    CREATE INDEX runs_started ON runs (started_at);
    CREATE VIEW fleet_results AS
        SELECT x.id AS result_id, r.id AS run_id, r.uuid AS run_uuid,
               coalesce(r.label, r.host || ' ' || r.kernel) AS run, r.label, r.status AS run_status,
               r.host, r.machine_id, r.kernel, r.version AS schedlab_version,
               x.probe, x.params, x.params_json, x.status, x.n, x.median, x.ci_low, x.ci_high,
               x.ci_level, x.cv, x.unit, x.better, r.started_at AS time, x.measured_at
        FROM results x JOIN runs r ON r.id = x.run_id;
    "#,
];

/// The same steps for PostgreSQL.
const PG_MIGRATIONS: &[&str] = &[
    // 0 -> 1
    r#"
    CREATE TABLE runs (
        id            BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        label         TEXT,
        suite         TEXT NOT NULL,
        status        TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted')),
        started_at    TEXT NOT NULL,
        finished_at   TEXT,
        host          TEXT NOT NULL,
        os            TEXT NOT NULL,
        kernel        TEXT NOT NULL,
        cpu_model     TEXT NOT NULL,
        logical_cpus  BIGINT NOT NULL,
        version       TEXT NOT NULL,
        git_rev       TEXT NOT NULL,
        pid           BIGINT NOT NULL,
        filters       TEXT NOT NULL,
        settings      TEXT NOT NULL,
        calibration   TEXT,
        machine       TEXT NOT NULL
    );
    CREATE INDEX runs_label ON runs (label);
    CREATE TABLE results (
        id                   BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        run_id               BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        seq                  BIGINT NOT NULL,
        probe                TEXT NOT NULL,
        params               TEXT NOT NULL,
        params_json          TEXT NOT NULL,
        unit                 TEXT NOT NULL,
        better               TEXT NOT NULL CHECK (better IN ('lower', 'higher')),
        status               TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'failed', 'interrupted')),
        reason               TEXT,
        notes                TEXT NOT NULL,
        iters_per_sample     BIGINT NOT NULL,
        overhead_ns_per_iter DOUBLE PRECISION NOT NULL,
        n                    BIGINT,
        median               DOUBLE PRECISION,
        min                  DOUBLE PRECISION,
        max                  DOUBLE PRECISION,
        mean                 DOUBLE PRECISION,
        stddev               DOUBLE PRECISION,
        p5                   DOUBLE PRECISION,
        p95                  DOUBLE PRECISION,
        ci_low               DOUBLE PRECISION,
        ci_high              DOUBLE PRECISION,
        ci_level             DOUBLE PRECISION,
        cv                   DOUBLE PRECISION,
        outliers             BIGINT,
        window_ns            BIGINT,
        other_cpu_ns         BIGINT,
        steal_ns             BIGINT,
        wall_s               DOUBLE PRECISION NOT NULL,
        measured_at          TEXT NOT NULL,
        UNIQUE (run_id, probe, params)
    );
    CREATE INDEX results_probe ON results (probe, params);
    CREATE TABLE samples (
        result_id     BIGINT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
        idx           BIGINT NOT NULL,
        iters         BIGINT NOT NULL,
        elapsed_ns    BIGINT NOT NULL,
        value         DOUBLE PRECISION NOT NULL,
        other_cpu_ns  BIGINT,
        migrated      BIGINT NOT NULL,
        PRIMARY KEY (result_id, idx)
    );
    CREATE TABLE warnings (
        id        BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        run_id    BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
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
    // 1 -> 2
    r#"
    CREATE TABLE timelines (
        id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        run_id     BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        scenario   TEXT NOT NULL,
        recorder   TEXT NOT NULL,
        window_ns  BIGINT NOT NULL,
        data       TEXT NOT NULL,
        UNIQUE (run_id, scenario, recorder)
    );
    "#,
    // 2 -> 3
    r#"
    ALTER TABLE runs ADD COLUMN uuid TEXT;
    ALTER TABLE runs ADD COLUMN machine_id TEXT;
    ALTER TABLE runs ADD COLUMN reason TEXT;
    "#,
    // 3 -> 4
    r#"
    ALTER TABLE runs ADD COLUMN pid_start BIGINT;
    ALTER TABLE runs ADD COLUMN boot_id TEXT;
    "#,
    // 4 -> 5 (`time` a timestamptz here, for Grafana's time macros)
    r#"
    CREATE TABLE raw_samples (
        result_id  BIGINT PRIMARY KEY REFERENCES results (id) ON DELETE CASCADE,
        n          BIGINT NOT NULL,
        data       BYTEA NOT NULL
    );
    ALTER TABLE runs ADD COLUMN results_ok BIGINT;
    ALTER TABLE runs ADD COLUMN results_skipped BIGINT;
    ALTER TABLE runs ADD COLUMN results_failed BIGINT;
    CREATE INDEX runs_host_started ON runs (host, started_at);
    CREATE INDEX runs_started ON runs (started_at);
    CREATE VIEW fleet_results AS
        SELECT x.id AS result_id, r.id AS run_id, r.uuid AS run_uuid,
               coalesce(r.label, r.host || ' ' || r.kernel) AS run, r.label, r.status AS run_status,
               r.host, r.machine_id, r.kernel, r.version AS schedlab_version,
               x.probe, x.params, x.params_json, x.status, x.n, x.median, x.ci_low, x.ci_high,
               x.ci_level, x.cv, x.unit, x.better, r.started_at::timestamptz AS time,
               x.measured_at::timestamptz AS measured_at
        FROM results x JOIN runs r ON r.id = x.run_id;
    "#,
];

const _: () = assert!(MIGRATIONS.len() == PG_MIGRATIONS.len(), "one step per version in both");

/// What the two databases spell differently, as data: each `{name}` of a step in [`STEPS`]
/// is replaced by the dialect's words for it.
struct Dialect {
    /// Words for `{name}`, in the order [`Dialect::render`] tries them.
    words: &'static [(&'static str, &'static str)],
}

const SQLITE: Dialect = Dialect {
    words: &[
        ("{int}", "INTEGER"),
        ("{real}", "REAL"),
        ("{id}", "INTEGER PRIMARY KEY"),
        // An index on the text itself: SQLite has no limit on an index entry's size.
        ("{text_key}", "text"),
        // `started_at` and `measured_at` stay RFC 3339 text.
        ("{time}", ""),
        ("{blob}", "BLOB"),
        // A result's id is its rowid, which costs nothing.
        ("{result_id}", "INTEGER PRIMARY KEY"),
        ("{result_key}", "UNIQUE"),
        ("{pg_ids}", ""),
        ("{pg_after_rebuild}", ""),
    ],
};

const PG: Dialect = Dialect {
    words: &[
        ("{int}", "BIGINT"),
        ("{real}", "DOUBLE PRECISION"),
        ("{id}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
        // A B-tree entry holds at most ~2.7 kB: long notes are indexed by their hash (the
        // lookup compares the text too).
        ("{text_key}", "md5(text)"),
        // A `timestamptz`, for Grafana's time macros.
        ("{time}", "::timestamptz"),
        ("{blob}", "BYTEA"),
        // A result is found by its run and series (every reader does): that is its key. Its
        // id stays unique by its identity (every row that gets one from elsewhere is a
        // copy of rows that had one each), without an index of its own: at 56 kB a run it
        // was a twentieth of the fleet's database, and no query looks a result up by it.
        ("{result_id}", "BIGINT GENERATED BY DEFAULT AS IDENTITY NOT NULL"),
        ("{result_key}", "PRIMARY KEY"),
        // The ids copied with their rows move the identities past them (the largest read
        // from the old tables' keys: the new `results` has no index on `id`, and reading a
        // fleet's whole table would outlast the statement timeout); the indexes get the
        // names the original tables' had.
        (
            "{pg_ids}",
            "SELECT setval(pg_get_serial_sequence('results_v6', 'id'), coalesce((SELECT max(id) FROM results), 0) + 1, false);
             SELECT setval(pg_get_serial_sequence('warnings_v6', 'id'), coalesce((SELECT max(id) FROM warnings), 0) + 1, false);",
        ),
        (
            "{pg_after_rebuild}",
            "ALTER INDEX results_v6_pkey RENAME TO results_pkey;
             ALTER INDEX warnings_v6_pkey RENAME TO warnings_pkey;",
        ),
    ],
};

impl Dialect {
    fn of(conn: &Conn) -> &'static Dialect {
        if conn.is_pg() {
            &PG
        } else {
            &SQLITE
        }
    }

    /// `sql` in this dialect's words.
    fn render(&self, sql: &str) -> String {
        let mut out = sql.to_string();
        for (name, words) in self.words {
            out = out.replace(name, words);
        }
        debug_assert!(!out.contains("{"), "a step names a word no dialect has: {out}");
        out
    }
}

/// The steps from version 6 on, each written once for both databases (`{int}` and the other
/// words of [`Dialect`] stand for what differs). `STEPS[i]` takes a database from version
/// `MIGRATIONS.len() + i` to the next.
const STEPS: &[&str] = &[
    // 5 -> 6: what repeats across runs is stored once, and a result is one narrow row. A
    // result named its probe, parameters (twice: `params_json` is the same as a JSON object),
    // unit and direction as text in every run, and its notes (how it was obtained: the same
    // few hundred texts run after run), and each warning its kind, probe and severity, its
    // probe again at the head of its message, and its advice (one of a handful of texts).
    // Now `series` holds each (probe, params, params_json, unit, better) once, `texts` each
    // distinct notes or advice text once, and `warning_kinds` each (kind, probe, severity,
    // the message's head) once, referred to by id. `results` and `warnings` are rebuilt
    // with those ids in the place of the text, under the same ids. A result's raw samples
    // move into its row (`raw`, NULL when there are none or `prune` dropped them; `raw_n`
    // their count, NULL when it is the summary's `n`, as it always is for a run schedlab
    // measured): a row of their own cost a tuple and a key per result. Counts, positions
    // and the ids of series, texts and kinds, which never pass 2^31, are 4-byte integers
    // (not `run_id`: a view's column must keep its type, and a cast there would hide the
    // index from `WHERE run_id = $1`), and the columns are ordered 8-byte ones first, so
    // that PostgreSQL pads nothing. In PostgreSQL a result's key is (run_id, series_id),
    // and its id has no index of its own (`{result_id}`). The views `result_rows`,
    // `warning_rows` and `raw_samples` give it all back in the old shape, column for column
    // and type for type, for every reader. The UNIQUE (run_id, probe, params) becomes
    // (run_id, series_id) — a run's results by run, and one series in a run — and
    // `results_probe` (probe, params) becomes `results_series` (series_id).
    // `{fill}` is where `fill_v6` copies the rows, a range of ids per statement.
    r#"
    CREATE TABLE series (
        id           {id},
        probe        TEXT NOT NULL,
        params       TEXT NOT NULL,
        params_json  TEXT NOT NULL,
        unit         TEXT NOT NULL,
        better       TEXT NOT NULL CHECK (better IN ('lower', 'higher')),
        UNIQUE (probe, params, unit, better, params_json)
    );
    CREATE TABLE texts (
        id    {id},
        text  TEXT NOT NULL
    );
    CREATE UNIQUE INDEX texts_text ON texts ({text_key});
    CREATE TABLE warning_kinds (
        id        {id},
        kind      TEXT NOT NULL,
        probe     TEXT,
        severity  TEXT NOT NULL CHECK (severity IN ('info', 'warn')),
        head      TEXT NOT NULL
    );
    CREATE UNIQUE INDEX warning_kinds_key
        ON warning_kinds (kind, severity, head, coalesce(probe, ''), (probe IS NULL));
    DROP VIEW fleet_results;
    DROP VIEW result_view;
    CREATE TABLE results_v6 (
        id                   {result_id},
        run_id               {int} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        iters_per_sample     {int} NOT NULL,
        window_ns            {int},
        other_cpu_ns         {int},
        steal_ns             {int},
        overhead_ns_per_iter {real} NOT NULL,
        median               {real},
        min                  {real},
        max                  {real},
        mean                 {real},
        stddev               {real},
        p5                   {real},
        p95                  {real},
        ci_low               {real},
        ci_high              {real},
        ci_level             {real},
        cv                   {real},
        wall_s               {real} NOT NULL,
        series_id            INTEGER NOT NULL REFERENCES series (id),
        notes_id             INTEGER NOT NULL REFERENCES texts (id),
        seq                  INTEGER NOT NULL,
        n                    INTEGER,
        outliers             INTEGER,
        raw_n                INTEGER,
        status               TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'failed', 'interrupted')),
        reason               TEXT,
        measured_at          TEXT NOT NULL,
        raw                  {blob},
        {result_key} (run_id, series_id)
    );
    CREATE INDEX results_series ON results_v6 (series_id);
    CREATE TABLE warnings_v6 (
        id         {id},
        run_id     {int} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        kind_id    INTEGER NOT NULL REFERENCES warning_kinds (id),
        advice_id  INTEGER NOT NULL REFERENCES texts (id),
        message    TEXT NOT NULL
    );
    CREATE INDEX warnings_run ON warnings_v6 (run_id);
    {fill}
    {pg_ids}
    DROP TABLE raw_samples;
    DROP TABLE results;
    ALTER TABLE results_v6 RENAME TO results;
    DROP TABLE warnings;
    ALTER TABLE warnings_v6 RENAME TO warnings;
    {pg_after_rebuild}
    CREATE VIEW result_rows AS
        SELECT x.id, x.run_id, CAST(x.seq AS {int}) AS seq, s.probe,
               s.params, s.params_json, s.unit, s.better, x.status, x.reason, t.text AS notes,
               x.iters_per_sample, x.overhead_ns_per_iter, CAST(x.n AS {int}) AS n, x.median,
               x.min, x.max, x.mean, x.stddev, x.p5, x.p95, x.ci_low, x.ci_high, x.ci_level, x.cv,
               CAST(x.outliers AS {int}) AS outliers, x.window_ns, x.other_cpu_ns, x.steal_ns,
               x.wall_s, x.measured_at, CAST(x.series_id AS {int}) AS series_id
        FROM results x JOIN series s ON s.id = x.series_id JOIN texts t ON t.id = x.notes_id;
    CREATE VIEW warning_rows AS
        SELECT w.id, w.run_id, k.kind, k.probe, k.severity,
               k.head || w.message AS message, t.text AS advice
        FROM warnings w JOIN warning_kinds k ON k.id = w.kind_id JOIN texts t ON t.id = w.advice_id;
    CREATE VIEW raw_samples AS
        SELECT id AS result_id, CAST(coalesce(raw_n, n) AS {int}) AS n, raw AS data
        FROM results WHERE raw IS NOT NULL;
    CREATE VIEW result_view AS
        SELECT r.id AS run_id, coalesce(r.label, r.host || ' ' || r.kernel) AS run, r.started_at,
               x.probe, x.params, x.status, x.median, x.ci_low, x.ci_high, x.cv, x.unit, x.better
        FROM result_rows x JOIN runs r ON r.id = x.run_id;
    CREATE VIEW fleet_results AS
        SELECT x.id AS result_id, r.id AS run_id, r.uuid AS run_uuid,
               coalesce(r.label, r.host || ' ' || r.kernel) AS run, r.label, r.status AS run_status,
               r.host, r.machine_id, r.kernel, r.version AS schedlab_version,
               x.probe, x.params, x.params_json, x.status, x.n, x.median, x.ci_low, x.ci_high,
               x.ci_level, x.cv, x.unit, x.better, r.started_at{time} AS time,
               x.measured_at{time} AS measured_at
        FROM result_rows x JOIN runs r ON r.id = x.run_id;
    "#,
];

/// The SQL of the step that takes a database to version `to`, in `conn`'s dialect: what runs
/// before the step's rows are copied (`fill`), and what runs after.
fn step_sql(conn: &Conn, to: i64) -> (String, String) {
    let i = (to - 1) as usize;
    match MIGRATIONS.get(i) {
        Some(sqlite) => {
            ((if conn.is_pg() { PG_MIGRATIONS[i] } else { sqlite }).to_string(), String::new())
        }
        None => {
            let sql =
                Dialect::of(conn).render(&STEPS[i - MIGRATIONS.len()].replace("{fill}", "\u{0}"));
            let (before, after) = sql.split_once('\u{0}').unwrap_or((&sql, ""));
            (before.to_string(), after.to_string())
        }
    }
}

/// How many rows one statement of a step's copy takes: a fleet's 25 million results in one
/// statement would outlast the server's statement timeout (60 s unless the URL says
/// otherwise) and the client's wait.
const FILL_CHUNK: i64 = 20_000;

/// Calls `each(lo, hi)` for consecutive ranges `(lo, hi]` of `table`'s ids, covering them all.
fn by_id_ranges(
    conn: &mut Conn,
    table: &str,
    mut each: impl FnMut(&mut Conn, i64, i64) -> Result<(), DbError>,
) -> Result<(), DbError> {
    let Some(r) = conn.row(&format!("SELECT min(id), max(id) FROM {table}"), &[])? else {
        return Ok(());
    };
    let (Some(first), Some(last)) = (r[0].oi(), r[1].oi()) else { return Ok(()) };
    let mut lo = first - 1;
    while lo < last {
        let hi = lo.saturating_add(FILL_CHUNK).min(last);
        each(conn, lo, hi)?;
        lo = hi;
    }
    Ok(())
}

/// Version 6's copy, a range of ids at a time: each result's series and notes, each
/// warning's kind and advice stored once (one an earlier range stored is kept: `ON CONFLICT
/// DO NOTHING`), then the rows under their ids with the ids of what they name in its place,
/// a result with its raw samples.
fn fill_v6(conn: &mut Conn) -> Result<(), DbError> {
    // SQLite reads `ON CONFLICT` after a SELECT as a join's unless a WHERE comes first.
    by_id_ranges(conn, "results", |c, lo, hi| {
        let range = [V::I(lo), V::I(hi)];
        c.exec(
            "INSERT INTO series (probe, params, params_json, unit, better)
             SELECT DISTINCT probe, params, params_json, unit, better FROM results
             WHERE id > $1 AND id <= $2 ON CONFLICT DO NOTHING",
            &range,
        )?;
        c.exec(
            "INSERT INTO texts (text) SELECT DISTINCT notes FROM results
             WHERE id > $1 AND id <= $2 ON CONFLICT DO NOTHING",
            &range,
        )?;
        // In key order, as `copy_run` stores a run: each run's index entries are appended.
        let copied = c.exec(
            "INSERT INTO results_v6 (id, run_id, series_id, notes_id, seq, iters_per_sample, n,
                outliers, window_ns, other_cpu_ns, steal_ns, overhead_ns_per_iter, median, min, max,
                mean, stddev, p5, p95, ci_low, ci_high, ci_level, cv, wall_s, status, reason,
                measured_at, raw_n, raw)
             SELECT x.id, x.run_id, s.id, t.id, x.seq, x.iters_per_sample, x.n, x.outliers,
                x.window_ns, x.other_cpu_ns, x.steal_ns, x.overhead_ns_per_iter, x.median, x.min,
                x.max, x.mean, x.stddev, x.p5, x.p95, x.ci_low, x.ci_high, x.ci_level, x.cv,
                x.wall_s, x.status, x.reason, x.measured_at,
                CASE WHEN r.n = x.n THEN NULL ELSE r.n END, r.data
             FROM results x
             JOIN series s ON s.probe = x.probe AND s.params = x.params
                AND s.params_json = x.params_json AND s.unit = x.unit AND s.better = x.better
             JOIN texts t ON t.text = x.notes
             LEFT JOIN raw_samples r ON r.result_id = x.id
             WHERE x.id > $1 AND x.id <= $2 ORDER BY x.run_id, s.id",
            &range,
        )?;
        all_copied(c, "results", lo, hi, copied)
    })?;
    // Every blob goes with its result. One whose result is gone (only a file whose foreign
    // keys were off can hold one) is not carried: no reader could reach it, and finding it
    // would take a statement over the whole table, longer than a server's timeout allows.
    // A warning's head: its probe and ": ", when its message starts so.
    const HEAD: &str =
        "CASE WHEN probe IS NOT NULL AND substr(message, 1, length(probe) + 2) = probe || ': '
                        THEN probe || ': ' ELSE '' END";
    by_id_ranges(conn, "warnings", |c, lo, hi| {
        let range = [V::I(lo), V::I(hi)];
        c.exec(
            "INSERT INTO texts (text) SELECT DISTINCT advice FROM warnings
             WHERE id > $1 AND id <= $2 ON CONFLICT DO NOTHING",
            &range,
        )?;
        c.exec(
            &format!(
                "INSERT INTO warning_kinds (kind, probe, severity, head)
                 SELECT DISTINCT kind, probe, severity, {HEAD} FROM warnings
                 WHERE id > $1 AND id <= $2 ON CONFLICT DO NOTHING"
            ),
            &range,
        )?;
        let copied = c.exec(
            &format!(
                "INSERT INTO warnings_v6 (id, run_id, kind_id, advice_id, message)
                 SELECT w.id, w.run_id, k.id, t.id, substr(w.message, length(k.head) + 1)
                 FROM (SELECT *, {HEAD} AS head FROM warnings WHERE id > $1 AND id <= $2) w
                 JOIN warning_kinds k ON k.kind = w.kind AND k.severity = w.severity
                    AND k.head = w.head AND coalesce(k.probe, '') = coalesce(w.probe, '')
                    AND (k.probe IS NULL) = (w.probe IS NULL)
                 JOIN texts t ON t.text = w.advice"
            ),
            &range,
        )?;
        all_copied(c, "warnings", lo, hi, copied)
    })
}

/// Whether the copy of `table`'s ids `(lo, hi]` took every row: one left out (its text not
/// found: another text with the same md5, made to) fails the step, which is rolled back.
fn all_copied(c: &mut Conn, table: &str, lo: i64, hi: i64, copied: u64) -> Result<(), DbError> {
    let there = c
        .row(
            &format!("SELECT count(*) FROM {table} WHERE id > $1 AND id <= $2"),
            &[V::I(lo), V::I(hi)],
        )?
        .map_or(0, |r| r[0].i());
    if there != copied as i64 {
        return Err(DbError::Conflict(format!(
            "{table} {lo}..{hi}: {copied} of {there} rows found their series and texts"
        )));
    }
    Ok(())
}

/// The steps that rebuild a table others refer to (SQLite runs them with foreign keys off,
/// as its documentation's way of changing a table requires, and checks them before commit).
fn rebuilds_tables(to: i64) -> bool {
    to == 6
}

/// What runs inside a step's transaction after its DDL: version 3 gives every existing run a
/// uuid and its machine id, then makes the uuid unique.
fn after_step(conn: &mut Conn, to: i64) -> Result<(), DbError> {
    if to == 3 {
        for row in conn.query("SELECT id, machine FROM runs WHERE uuid IS NULL", &[])? {
            let machine = serde_json::from_str(&row[1].t()).ok();
            conn.exec(
                "UPDATE runs SET uuid = $1, machine_id = $2 WHERE id = $3",
                &[
                    uuid::Uuid::new_v4().to_string().into(),
                    machine.as_ref().map(crate::machine_id).unwrap_or_default().into(),
                    row[0].clone(),
                ],
            )?;
        }
        conn.batch(
            "CREATE UNIQUE INDEX runs_uuid ON runs (uuid);
             CREATE INDEX runs_machine ON runs (machine_id);",
        )?;
    }
    if to == 5 {
        encode_old_samples(conn)?;
        conn.batch("DROP TABLE samples")?;
        // Run by run: one statement over a fleet's 25 million results would outlast the
        // server's statement timeout (60 s unless the URL says otherwise).
        for run in conn.query("SELECT id FROM runs", &[])? {
            conn.exec(&format!("UPDATE runs SET {} WHERE id = $1", crate::columns::RECOUNT), &run)?;
        }
    }
    Ok(())
}

/// Version 5's conversion: every result's rows in `samples` become one `raw_samples` blob,
/// bit for bit (`raw.rs`), a thousand results at a time so that a fleet's database is not
/// read into memory at once.
fn encode_old_samples(conn: &mut Conn) -> Result<(), DbError> {
    use schedlab_measure::model::Sample;
    let mut after = i64::MIN;
    loop {
        let ids = conn.query(
            "SELECT DISTINCT result_id FROM samples WHERE result_id > $1 ORDER BY result_id LIMIT 1000",
            &[V::I(after)],
        )?;
        let Some(last) = ids.last().map(|r| r[0].i()) else { return Ok(()) };
        let rows = conn.query(
            "SELECT result_id, iters, elapsed_ns, value, other_cpu_ns, migrated FROM samples
             WHERE result_id > $1 AND result_id <= $2 ORDER BY result_id, idx",
            &[V::I(after), V::I(last)],
        )?;
        let mut blobs: Vec<crate::db::Row> = Vec::with_capacity(ids.len());
        let mut i = 0;
        while i < rows.len() {
            let id = rows[i][0].i();
            let mut samples = Vec::new();
            while i < rows.len() && rows[i][0].i() == id {
                let r = &rows[i];
                samples.push(Sample {
                    iters: r[1].i() as u64,
                    elapsed_ns: r[2].i() as u64,
                    value: r[3].f(),
                    other_cpu_ns: r[4].oi(),
                    migrated: r[5].i() != 0,
                });
                i += 1;
            }
            blobs.push(vec![
                V::I(id),
                V::I(samples.len() as i64),
                V::B(crate::raw::encode(&samples)),
            ]);
        }
        crate::db::insert_many(conn, "raw_samples", crate::columns::RAW_COLS, &blobs)?;
        after = last;
    }
}

/// The schema version and application id a database says it has, and whether it has any
/// table at all: `(application_id, version, tables)`.
///
/// Read in one read transaction, so the three come from one state of the database: read one
/// by one, a process creating the same new file at that moment could be seen half way (its
/// tables already, its application id not yet), and the file refused as another
/// application's.
pub fn identify(conn: &mut Conn) -> Result<(i64, i64, i64), DbError> {
    conn.read_tx(identify_now)
}

fn identify_now(conn: &mut Conn) -> Result<(i64, i64, i64), DbError> {
    if conn.is_pg() {
        let tables = conn
            .row(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
                &[],
            )?
            .map_or(0, |r| r[0].i());
        let has_meta = conn
            .row("SELECT to_regclass('schedlab_meta') IS NOT NULL", &[])?
            .is_some_and(|r| r[0].i() != 0);
        if !has_meta {
            return Ok((0, 0, tables));
        }
        let row = conn.row("SELECT application_id, schema_version FROM schedlab_meta", &[])?;
        Ok(row.map_or((0, 0, tables), |r| (r[0].i(), r[1].i(), tables)))
    } else {
        let app = conn.row("PRAGMA application_id", &[])?.map_or(0, |r| r[0].i());
        let version = conn.row("PRAGMA user_version", &[])?.map_or(0, |r| r[0].i());
        let tables = conn
            .row("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'", &[])?
            .map_or(0, |r| r[0].i());
        Ok((app, version, tables))
    }
}

/// Brings a database at `from` up to [`SCHEMA_VERSION`], each step in its own transaction,
/// and stamps it as ours. The version is read again inside each step's transaction (after
/// PostgreSQL's advisory lock or SQLite's write lock), so two processes migrating the same
/// database at once do each step once.
pub fn migrate(conn: &mut Conn, from: i64) -> Result<(), DbError> {
    let pg = conn.is_pg();
    for to in (from + 1)..=SCHEMA_VERSION {
        // Outside a transaction (SQLite ignores the pragma inside one); set back on below
        // whatever the step did.
        let keys_off = !pg
            && rebuilds_tables(to)
            && conn.row("PRAGMA foreign_keys", &[])?.is_some_and(|r| r[0].i() != 0);
        if keys_off {
            conn.batch("PRAGMA foreign_keys = OFF")?;
        }
        let r = conn.tx(|c| -> Result<(), DbError> {
            let now = if pg {
                c.exec("SELECT pg_advisory_xact_lock($1)", &[V::I(APPLICATION_ID)])?;
                c.batch(&format!(
                    "CREATE TABLE IF NOT EXISTS schedlab_meta (
                        application_id BIGINT NOT NULL,
                        schema_version BIGINT NOT NULL
                     );
                     INSERT INTO schedlab_meta (application_id, schema_version)
                        SELECT {APPLICATION_ID}, 0 WHERE NOT EXISTS (SELECT 1 FROM schedlab_meta);"
                ))?;
                c.row("SELECT schema_version FROM schedlab_meta", &[])?.map_or(0, |r| r[0].i())
            } else {
                c.row("PRAGMA user_version", &[])?.map_or(0, |r| r[0].i())
            };
            if now >= to {
                return Ok(());
            }
            let (before, after) = step_sql(c, to);
            c.batch(&before)?;
            if to == 6 {
                fill_v6(c)?;
            }
            if !after.trim().is_empty() {
                c.batch(&after)?;
            }
            after_step(c, to)?;
            if !pg && rebuilds_tables(to) {
                // What the foreign keys would have checked: every reference still resolves.
                if let Some(r) = c.row("PRAGMA foreign_key_check", &[])? {
                    return Err(DbError::Conflict(format!(
                        "after version {to}'s rebuild, a row of {} refers to nothing",
                        r[0].t()
                    )));
                }
            }
            if pg {
                c.exec("UPDATE schedlab_meta SET schema_version = $1", &[V::I(to)])?;
            } else {
                c.batch(&format!(
                    "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {to};"
                ))?;
            }
            Ok(())
        });
        if keys_off {
            conn.batch("PRAGMA foreign_keys = ON")?;
        }
        r?;
    }
    Ok(())
}
