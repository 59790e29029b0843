//! Behaviour of the results database: round trips, refusals that leave files untouched, run
//! resolution, and crash recovery.

use std::fs;

use schedlab_measure::machine::Machine;
use schedlab_measure::model::{
    Measurement, Outcome, Params, RunMeta, RunStatus, Sample, Severity, Unit, Warning,
};
use schedlab_store::{Store, StoreError, SCHEMA_VERSION};

/// A run whose every field differs from the constructor's default, so a round trip that
/// drops one is caught.
fn meta(label: Option<&str>) -> RunMeta {
    let mut m = RunMeta::starting("smoke", Machine::fingerprint(), ("0.1.0", "abc1234"));
    m.label = label.map(str::to_string);
    m.started_at = "2026-11-21T05:00:00Z".into();
    m.filters = vec!["os.pipe".into()];
    m.settings = Params::new().with("samples", 2);
    m
}

fn measurement(probe: &str, params: Params, values: &[f64]) -> Measurement {
    let samples: Vec<Sample> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| Sample {
            iters: 100 + i as u64,
            elapsed_ns: 1_000_000,
            value: v,
            other_cpu_ns: Some(10_000_000 * i as i64 - 10_000_000),
            migrated: i == 1,
        })
        .collect();
    let mut m = Measurement::of_samples(probe, params, Unit::Micros, samples, 0.5);
    m.notes = Params::new().with("cpus", "0,0");
    m.iters_per_sample = 100;
    m.overhead_ns_per_iter = 0.25;
    m.noise = Some(schedlab_measure::noise::Noise {
        window_ns: 30_000_000,
        other_cpu_ns: -10_000_000,
        steal_ns: 20_000_000,
    });
    m
}

#[test]
fn a_run_round_trips_with_samples_and_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/results.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(Some("baseline"))).unwrap();
    let m =
        measurement("os.pipe.latency", Params::new().with("placement", "same"), &[4.0, 4.2, 3.9]);
    store.save_result(run, &m).unwrap();
    let skipped = Measurement::without_samples(
        "os.pipe.latency",
        Params::new().with("placement", "cross"),
        Unit::Micros,
        Outcome::Skipped("needs two CPUs".into()),
        0.0,
    );
    store.save_result(run, &skipped).unwrap();
    let w = Warning {
        kind: "vm".into(),
        probe: None,
        severity: Severity::Info,
        message: "hi".into(),
        advice: "do".into(),
    };
    store.save_warnings(run, std::slice::from_ref(&w)).unwrap();
    store.finish_run(run, RunStatus::Complete).unwrap();
    drop(store);

    let store = Store::open_existing(&path).unwrap();
    let loaded = store.load_run(run).unwrap();
    assert_eq!(loaded.meta.label.as_deref(), Some("baseline"));
    assert_eq!(loaded.meta.status, RunStatus::Complete);
    assert!(loaded.meta.finished_at.is_some());
    assert_eq!(loaded.meta.filters, vec!["os.pipe".to_string()]);
    assert_eq!(loaded.results, vec![m, skipped]);
    assert_eq!(loaded.warnings, vec![w]);
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].ok, runs[0].skipped, runs[0].failed), (1, 1, 0));
}

#[test]
fn runs_resolve_by_id_label_and_latest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let store = Store::open(&path).unwrap();
    let a = store.begin_run(&meta(Some("before"))).unwrap();
    let b = store.begin_run(&meta(None)).unwrap();
    let c = store.begin_run(&meta(Some("before"))).unwrap();
    assert_eq!(store.resolve(&a.to_string()).unwrap(), a);
    assert_eq!(store.resolve("latest").unwrap(), c);
    assert_eq!(store.resolve("latest~1").unwrap(), b);
    assert_eq!(store.resolve("before").unwrap(), c, "a label means its most recent run");
    assert!(matches!(store.resolve("after"), Err(StoreError::NoSuchRun(..))));
    assert!(matches!(store.resolve("99"), Err(StoreError::NoSuchRun(..))));
}

#[test]
fn a_result_is_stored_once_per_probe_and_params() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let run = store.begin_run(&meta(None)).unwrap();
    let m = measurement("os.syscall.null", Params::new(), &[1.0]);
    store.save_result(run, &m).unwrap();
    assert!(store.save_result(run, &m).is_err());
    assert_eq!(store.load_run(run).unwrap().results.len(), 1);
}

#[test]
fn a_run_of_a_dead_process_is_marked_interrupted_on_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(None)).unwrap();
    store.save_result(run, &measurement("os.syscall.null", Params::new(), &[1.0, 2.0])).unwrap();
    drop(store);
    // Pretend the process that owned the run died: give it a pid that cannot exist.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE runs SET pid = 2147483646 WHERE id = ?1", [run]).unwrap();
    drop(conn);
    let store = Store::open(&path).unwrap();
    let loaded = store.load_run(run).unwrap();
    assert_eq!(loaded.meta.status, RunStatus::Interrupted);
    assert_eq!(loaded.meta.reason.as_deref(), Some(schedlab_store::ENDED_UNFINISHED));
    assert_eq!(loaded.results.len(), 1, "what was measured survives");
}

/// A run whose stored process is gone, though its pid is in use again (here by this very
/// process, started later than the stored start time) or the machine rebooted since.
fn left_by_a_dead_process(path: &std::path::Path, how: &str) -> i64 {
    let mut store = Store::open(path).unwrap();
    let run = store.begin_run(&meta(Some("dead"))).unwrap();
    store.save_result(run, &measurement("os.syscall.null", Params::new(), &[1.0, 2.0])).unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(path).unwrap();
    let sql = match how {
        "reused pid" => "UPDATE runs SET pid_start = pid_start - 1 WHERE id = ?1",
        _ => "UPDATE runs SET boot_id = 'a-boot-before-the-last-reboot' WHERE id = ?1",
    };
    conn.execute(sql, [run]).unwrap();
    run
}

#[test]
fn a_reused_pid_or_a_reboot_does_not_keep_a_dead_run_running() {
    for how in ["reused pid", "reboot"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let run = left_by_a_dead_process(&path, how);
        // A reading command already sees it as what it is, without writing.
        let store = Store::open_existing(&path).unwrap();
        let listed = store.runs().unwrap();
        assert_eq!(listed[0].status, RunStatus::Interrupted, "{how}");
        assert_eq!(listed[0].reason.as_deref(), Some(schedlab_store::ENDED_UNFINISHED), "{how}");
        assert_eq!(store.load_run(run).unwrap().meta.status, RunStatus::Interrupted, "{how}");
        drop(store);
        let conn = rusqlite::Connection::open(&path).unwrap();
        let raw: String =
            conn.query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0)).unwrap();
        assert_eq!(raw, "running", "{how}: a reading command wrote");
        drop(conn);
        // The next command that writes marks it for good.
        drop(Store::open(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        let (raw, reason): (String, String) = conn
            .query_row("SELECT status, reason FROM runs WHERE id = ?1", [run], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(
            (raw.as_str(), reason.as_str()),
            ("interrupted", schedlab_store::ENDED_UNFINISHED),
            "{how}"
        );
    }
}

#[test]
fn a_live_run_stays_running_and_is_not_copied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(None)).unwrap();
    assert_eq!(store.runs().unwrap()[0].status, RunStatus::Running);
    let to = Store::open(&dir.path().join("to.db")).unwrap();
    assert_eq!(store.copy_run(run, &to).unwrap(), schedlab_store::Copied::StillRunning);
}

#[test]
fn a_run_whose_process_died_is_copied_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let run = left_by_a_dead_process(&path, "reused pid");
    let from = Store::open_existing(&path).unwrap();
    let to = Store::open(&dir.path().join("to.db")).unwrap();
    assert_eq!(from.copy_run(run, &to).unwrap(), schedlab_store::Copied::Copied);
    let there = to.runs().unwrap();
    assert_eq!(there[0].status, RunStatus::Interrupted);
    assert_eq!(there[0].reason.as_deref(), Some(schedlab_store::ENDED_UNFINISHED));
    assert_eq!(there[0].ok, 1, "with what it measured");
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let content = b"my precious notes, not a database\n".repeat(10);
    fs::write(&path, &content).unwrap();
    assert!(matches!(Store::open(&path), Err(StoreError::NotOurs(..))));
    assert!(matches!(Store::open_existing(&path), Err(StoreError::NotOurs(..))));
    assert_eq!(fs::read(&path).unwrap(), content);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no journal or side file left");
}

#[test]
fn another_applications_database_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('ada');")
        .unwrap();
    drop(conn);
    let before = fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::NotOurs(..)), "{err}");
    assert!(err.to_string().contains("not a schedlab database"));
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn a_database_from_a_newer_schedlab_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&format!("PRAGMA user_version = {};", SCHEMA_VERSION + 1)).unwrap();
    drop(conn);
    let before = fs::read(&path).unwrap();
    for err in [Store::open(&path).unwrap_err(), Store::open_existing(&path).unwrap_err()] {
        assert!(matches!(err, StoreError::TooNew { .. }), "{err}");
        assert!(err.to_string().contains("newer schedlab"));
    }
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn a_corrupt_database_gives_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(None)).unwrap();
    for i in 0..50 {
        store
            .save_result(run, &measurement(&format!("os.p{i}"), Params::new(), &[1.0; 20]))
            .unwrap();
    }
    drop(store);
    let mut bytes = fs::read(&path).unwrap();
    // Keep the header, trash every page after the first.
    for b in bytes.iter_mut().skip(4096) {
        *b = 0xA5;
    }
    fs::write(&path, &bytes).unwrap();
    let outcome = Store::open_existing(&path).and_then(|s| s.load_run(run));
    let err = outcome.expect_err("a trashed database cannot load");
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
}

#[test]
fn reading_commands_need_an_existing_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.db");
    assert!(matches!(Store::open_existing(&path), Err(StoreError::Missing(_))));
    assert!(!path.exists(), "reading must not create the file");
}

#[test]
fn an_unwritable_location_is_a_clear_error() {
    // /dev/null is a file, so nothing can be created below it, even as root.
    let err = Store::open(std::path::Path::new("/dev/null/schedlab/results.db")).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
    assert!(err.to_string().contains("/dev/null/schedlab"));
    // The operating system's own error is kept as the source, not flattened into text.
    let source = std::error::Error::source(&err).expect("the cause is kept");
    assert!(source.downcast_ref::<std::io::Error>().is_some(), "{source:?}");
}

#[test]
fn a_timeline_is_stored_with_its_run_and_read_back() {
    use schedlab_store::StoredTimeline;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("t.db")).unwrap();
    let run = store.begin_run(&meta(Some("tl"))).unwrap();
    let t = StoredTimeline {
        scenario: "3 two-equal".into(),
        recorder: "sampling".into(),
        window_ns: 600_000_000,
        data: r#"{"lanes":[]}"#.into(),
    };
    store.save_timeline(run, &t).unwrap();
    assert_eq!(store.timelines(run).unwrap(), vec![t.clone()]);
    // One timeline per scenario and recorder in a run.
    assert!(store.save_timeline(run, &t).is_err());
    assert!(store.timelines(run + 1).unwrap().is_empty());
}

/// Turns a current database back into a version 5 file, as schedlab 5 left it: each result
/// and warning with its texts in its own row, under the same ids.
fn downgrade_to_version_5(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    // Off, or dropping the old tables would take the raw samples along (rusqlite's SQLite
    // has them on by default).
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF;
         CREATE TABLE results_v5 (
            id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL, probe TEXT NOT NULL, params TEXT NOT NULL, params_json TEXT NOT NULL,
            unit TEXT NOT NULL, better TEXT NOT NULL CHECK (better IN ('lower', 'higher')),
            status TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'failed', 'interrupted')),
            reason TEXT, notes TEXT NOT NULL, iters_per_sample INTEGER NOT NULL,
            overhead_ns_per_iter REAL NOT NULL, n INTEGER, median REAL, min REAL, max REAL,
            mean REAL, stddev REAL, p5 REAL, p95 REAL, ci_low REAL, ci_high REAL, ci_level REAL,
            cv REAL, outliers INTEGER, window_ns INTEGER, other_cpu_ns INTEGER, steal_ns INTEGER,
            wall_s REAL NOT NULL, measured_at TEXT NOT NULL, UNIQUE (run_id, probe, params));
         INSERT INTO results_v5 SELECT id, run_id, seq, probe, params, params_json, unit, better,
            status, reason, notes, iters_per_sample, overhead_ns_per_iter, n, median, min, max, mean,
            stddev, p5, p95, ci_low, ci_high, ci_level, cv, outliers, window_ns, other_cpu_ns,
            steal_ns, wall_s, measured_at FROM result_rows;
         CREATE TABLE warnings_v5 (id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE, kind TEXT NOT NULL,
            probe TEXT, severity TEXT NOT NULL CHECK (severity IN ('info', 'warn')),
            message TEXT NOT NULL, advice TEXT NOT NULL);
         INSERT INTO warnings_v5 SELECT id, run_id, kind, probe, severity, message, advice
            FROM warning_rows;
         CREATE TABLE raw_samples_v5 (
            result_id INTEGER PRIMARY KEY REFERENCES results (id) ON DELETE CASCADE,
            n INTEGER NOT NULL, data BLOB NOT NULL);
         INSERT INTO raw_samples_v5 SELECT result_id, n, data FROM raw_samples;
         DROP VIEW fleet_results; DROP VIEW result_view; DROP VIEW result_rows;
         DROP VIEW warning_rows; DROP VIEW raw_samples;
         DROP TABLE results; DROP TABLE warnings; DROP TABLE series; DROP TABLE texts;
         DROP TABLE warning_kinds; ALTER TABLE raw_samples_v5 RENAME TO raw_samples;
         ALTER TABLE results_v5 RENAME TO results; ALTER TABLE warnings_v5 RENAME TO warnings;
         CREATE INDEX results_probe ON results (probe, params);
         CREATE VIEW result_view AS
            SELECT r.id AS run_id, coalesce(r.label, r.host || ' ' || r.kernel) AS run, r.started_at,
                   x.probe, x.params, x.status, x.median, x.ci_low, x.ci_high, x.cv, x.unit, x.better
            FROM results x JOIN runs r ON r.id = x.run_id;
         CREATE VIEW fleet_results AS
            SELECT x.id AS result_id, r.id AS run_id, r.uuid AS run_uuid,
                   coalesce(r.label, r.host || ' ' || r.kernel) AS run, r.label, r.status AS run_status,
                   r.host, r.machine_id, r.kernel, r.version AS schedlab_version,
                   x.probe, x.params, x.params_json, x.status, x.n, x.median, x.ci_low, x.ci_high,
                   x.ci_level, x.cv, x.unit, x.better, r.started_at AS time, x.measured_at
            FROM results x JOIN runs r ON r.id = x.run_id;
         PRAGMA user_version = 5;",
    )
    .unwrap();
}

/// Every row of a table or view, in the order of `order`, each value exactly as SQLite holds
/// it (a REAL's bits, a TEXT's bytes).
fn rows(conn: &rusqlite::Connection, sql: &str) -> Vec<Vec<rusqlite::types::Value>> {
    let mut st = conn.prepare(sql).unwrap();
    let n = st.column_count();
    st.query_map([], |r| (0..n).map(|i| r.get::<_, rusqlite::types::Value>(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_version_5_database_is_normalised_keeping_every_value_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    let mut store = Store::open(&path).unwrap();
    let mut runs = Vec::new();
    for label in ["a", "b"] {
        let run = store.begin_run(&meta(Some(label))).unwrap();
        // Two runs with the same series and notes (stored once), and texts only one has.
        let mut m = measurement(
            "os.pipe.latency",
            Params::new().with("placement", "same"),
            &[4.0, 4.2 + 1e-13, 3.9, f64::MIN_POSITIVE],
        );
        if label == "b" {
            m.notes = m.notes.with("size", "64k, \"quoted\" é");
        }
        store.save_result(run, &m).unwrap();
        let skipped = Measurement::without_samples(
            "os.pipe.latency",
            Params::new().with("placement", "cross"),
            Unit::Micros,
            Outcome::Skipped(format!("needs two CPUs ({label})")),
            0.0,
        );
        store.save_result(run, &skipped).unwrap();
        let w = Warning {
            kind: "high-variation".into(),
            probe: Some("os.pipe.latency".into()),
            severity: Severity::Warn,
            message: format!("os.pipe.latency: CV 12% in {label}"),
            advice: "close other programs".into(),
        };
        store.save_warnings(run, &[w.clone(), Warning { probe: None, ..w }]).unwrap();
        store.finish_run(run, RunStatus::Complete).unwrap();
        runs.push(run);
    }
    let before: Vec<_> = runs.iter().map(|&r| store.load_run(r).unwrap()).collect();
    drop(store);
    downgrade_to_version_5(&path);
    let v5 = rusqlite::Connection::open(&path).unwrap();
    // And more results and warnings than the migration copies in one statement (20,000 ids),
    // under ids with gaps, so that every range is seen to be copied whole.
    v5.execute_batch(
        "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 45000)
         INSERT INTO results (id, run_id, seq, probe, params, params_json, unit, better, status,
            notes, iters_per_sample, overhead_ns_per_iter, n, median, wall_s, measured_at)
         SELECT 100 + 3 * i, 2, 10 + i, 'os.bulk', 'i=' || i, '{\"i\":\"' || i || '\"}', 'ns',
            'lower', 'ok', '{\"k\":\"' || (i % 7) || '\"}', i, 0.5, 3, i * 0.1, 1.0,
            '2026-11-21T05:00:00Z' FROM k;
         WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 25000)
         INSERT INTO warnings (id, run_id, kind, probe, severity, message, advice)
         SELECT 100 + 2 * i, 2, 'drift', 'os.bulk', 'info', 'm' || i, 'a' || (i % 5) FROM k;
         -- Raw samples whose count is not the summary's (3): kept as they were.
         INSERT INTO raw_samples (result_id, n, data) SELECT 103, 2, data FROM raw_samples LIMIT 1;",
    )
    .unwrap();
    let results = rows(&v5, "SELECT * FROM results ORDER BY id");
    let warnings = rows(&v5, "SELECT * FROM warnings ORDER BY id");
    let raw = rows(&v5, "SELECT * FROM raw_samples ORDER BY result_id");
    assert_eq!((results.len(), warnings.len(), raw.len()), (45_004, 25_004, 3));
    drop(v5);

    let store = Store::open(&path).unwrap();
    let after: Vec<_> = runs.iter().map(|&r| store.load_run(r).unwrap()).collect();
    assert_eq!(after[0], before[0], "every run reads as it did");
    assert_eq!(after[1].results.len(), 45_002);
    assert_eq!(after[1].results[..2], before[1].results[..]);
    drop(store);
    let v6 = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = v6.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(
        rows(
            &v6,
            "SELECT id, run_id, seq, probe, params, params_json, unit, better, status, reason, notes,
                iters_per_sample, overhead_ns_per_iter, n, median, min, max, mean, stddev, p5, p95,
                ci_low, ci_high, ci_level, cv, outliers, window_ns, other_cpu_ns, steal_ns, wall_s,
                measured_at FROM result_rows ORDER BY id"
        ),
        results,
        "every result, value for value"
    );
    assert_eq!(rows(&v6, "SELECT * FROM warning_rows ORDER BY id"), warnings);
    assert_eq!(rows(&v6, "SELECT * FROM raw_samples ORDER BY result_id"), raw);
    // What repeats is stored once: two series, the notes of a and b, one advice.
    let count = |sql: &str| -> i64 { v6.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM series"), 2 + 45_000);
    assert_eq!(
        count("SELECT count(*) FROM texts"),
        4 + 7 + 5,
        "{{cpus}}, {{cpus,size}}, {{}}, the advice, and the bulk's 7 notes and 5 advice texts"
    );
    let fk: i64 = count("SELECT count(*) FROM pragma_foreign_key_check");
    assert_eq!(fk, 0);
    // The raw samples still belong to their results: deleting a run takes them along.
    let store = Store::open(&path).unwrap();
    store.delete_run(runs[0]).unwrap();
    assert_eq!(count("SELECT count(*) FROM raw_samples"), 2);
    assert_eq!(count("SELECT count(*) FROM warnings"), 2 + 25_000);
    assert_eq!(store.probe_ids().unwrap(), vec!["os.bulk".to_string(), "os.pipe.latency".into()]);
    // A series outlives its results; a probe is listed only while a result refers to it.
    store.delete_run(runs[1]).unwrap();
    assert!(store.probe_ids().unwrap().is_empty());
    assert_eq!(count("SELECT count(*) FROM series"), 2 + 45_000);
}

/// Turns a current database back into a version 1 file, as an older schedlab left it.
fn downgrade_to_version_1(path: &std::path::Path) {
    downgrade_to_version_5(path);
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "DROP VIEW fleet_results; DROP INDEX runs_host_started; DROP INDEX runs_started;
         ALTER TABLE runs DROP COLUMN results_ok; ALTER TABLE runs DROP COLUMN results_skipped;
         ALTER TABLE runs DROP COLUMN results_failed; DROP TABLE raw_samples;
         CREATE TABLE samples (result_id INTEGER NOT NULL REFERENCES results (id) ON DELETE CASCADE,
             idx INTEGER NOT NULL, iters INTEGER NOT NULL, elapsed_ns INTEGER NOT NULL,
             value REAL NOT NULL, other_cpu_ns INTEGER, migrated INTEGER NOT NULL,
             PRIMARY KEY (result_id, idx)) WITHOUT ROWID;
         DROP INDEX runs_uuid; DROP INDEX runs_machine;
         ALTER TABLE runs DROP COLUMN uuid; ALTER TABLE runs DROP COLUMN machine_id;
         ALTER TABLE runs DROP COLUMN reason;
         ALTER TABLE runs DROP COLUMN pid_start; ALTER TABLE runs DROP COLUMN boot_id;
         DROP TABLE timelines; PRAGMA user_version = 1;",
    )
    .unwrap();
}

#[test]
fn a_version_1_database_is_migrated_forward_keeping_its_runs_and_giving_them_an_identity() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    let (id, id2) = {
        let store = Store::open(&path).unwrap();
        (store.begin_run(&meta(Some("old"))).unwrap(), store.begin_run(&meta(None)).unwrap())
    };
    downgrade_to_version_1(&path);
    let store = Store::open_existing(&path).unwrap();
    assert_eq!(SCHEMA_VERSION, 6);
    assert_eq!(store.resolve("old").unwrap(), id);
    assert!(store.timelines(id).unwrap().is_empty());
    let (uuid, machine) = store.identity(id).unwrap();
    let (uuid2, machine2) = store.identity(id2).unwrap();
    assert_eq!(uuid.len(), 36, "{uuid}");
    assert_ne!(uuid, uuid2, "every run gets its own UUID");
    assert_eq!(machine, schedlab_store::machine_id(&Machine::fingerprint()));
    assert_eq!(machine, machine2, "runs of one machine share its id");
    assert_eq!(store.resolve(&uuid[..8]).unwrap(), id, "a UUID prefix names the run");
}

#[test]
fn a_lowered_schema_version_is_explained_in_words_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("low.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(Some("kept"))).unwrap();
    store.save_result(run, &measurement("os.syscall.null", Params::new(), &[1.0; 5])).unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA user_version = 1;").unwrap();
    drop(conn);
    let before = fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Inconsistent { version: 1, .. }), "{}", chain(&err));
    let msg = err.to_string();
    assert!(msg.contains("says schema version 1") && msg.contains("user_version"), "{msg}");
    assert!(!msg.contains("CREATE"), "the message is words, not SQL: {msg}");
    assert_eq!(fs::read(&path).unwrap(), before, "the file was changed");
}

/// An error with its causes, as `schedlab` prints it.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

/// A migration that fails for another reason than the tables (here a write lock another
/// process holds past the busy timeout; on a server, a statement timeout or a lost
/// connection) says that reason, not that the version was changed by hand, and leaves the
/// database as it was.
#[test]
fn a_migration_failing_for_another_reason_says_that_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(Some("kept"))).unwrap();
    store.save_result(run, &measurement("os.syscall.null", Params::new(), &[1.0; 5])).unwrap();
    drop(store);
    downgrade_to_version_5(&path);
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = Store::open(&path).unwrap_err();
    let msg = chain(&err);
    assert!(matches!(err, StoreError::Migration { version: 5, .. }), "{msg}");
    assert!(!msg.contains("by hand"), "{msg}");
    assert!(msg.contains("locked by another process"), "the real cause: {msg}");
    assert!(msg.contains("rolled back"), "{msg}");
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 5, "left at its version");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.load_run(run).unwrap().results[0].samples.len(), 5, "then migrated whole");
}

/// Write-ahead logging: a reader in the middle of a long read does not block the run's
/// writes, and the file says `wal` to any sqlite3 that opens it.
#[test]
fn a_reader_never_blocks_a_run_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(None)).unwrap();
    let reader = rusqlite::Connection::open(&path).unwrap();
    let mode: String = reader.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    reader.execute_batch("BEGIN; SELECT count(*) FROM runs;").unwrap();
    // With a 1 ms busy timeout a blocked write would fail: it succeeds, and commits while the
    // reader's transaction still sees the database as it was when the read began.
    store.set_busy_timeout(std::time::Duration::from_millis(1)).unwrap();
    store.save_result(run, &measurement("os.syscall.null", Params::new(), &[1.0, 2.0])).unwrap();
    let count = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT count(*) FROM results", [], |r| r.get(0)).unwrap()
    };
    assert_eq!(count(&reader), 0, "the reader's snapshot is unchanged");
    assert_eq!(count(&rusqlite::Connection::open(&path).unwrap()), 1, "the write committed");
    reader.execute_batch("COMMIT").unwrap();
}

/// A write lock held by another process longer than the busy timeout: the write fails with
/// an error that says so, and nothing of it is stored.
#[test]
fn a_lock_held_too_long_is_a_clear_storage_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(None)).unwrap();
    store.set_busy_timeout(std::time::Duration::from_millis(50)).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err =
        store.save_result(run, &measurement("os.syscall.null", Params::new(), &[1.0])).unwrap_err();
    assert!(err.is_storage_failure(), "{err}");
    assert!(err.to_string().contains("locked by another process"), "{err}");
    other.execute_batch("ROLLBACK").unwrap();
    store.interrupt_run(run, &format!("storage failure: {err}")).unwrap();
    let summary = &store.runs().unwrap()[0];
    assert_eq!(summary.status, RunStatus::Interrupted);
    assert!(summary.reason.as_deref().unwrap().contains("locked"));
    assert_eq!(store.load_run(run).unwrap().results.len(), 0);
}

/// Several processes creating the same new database at once (each its own connection, all
/// released together by a barrier), many times over: every one of them opens it. Before, one
/// sometimes read the file half-made by another (tables but no application id yet) and
/// refused it as another application's, or failed "locked" switching it to WAL without
/// waiting.
#[test]
fn many_openers_of_one_new_file_all_succeed() {
    const OPENERS: usize = 4;
    const ROUNDS: usize = 60;
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let path = dir.path().join(format!("new-{round}.db"));
        let barrier = std::sync::Barrier::new(OPENERS);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..OPENERS)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        Store::open(&path).map(|store| store.runs().map(|r| r.len()))
                    })
                })
                .collect();
            for h in handles {
                match h.join().unwrap() {
                    Ok(Ok(0)) => {}
                    other => failures.push(format!("round {round}: {other:?}")),
                }
            }
        });
    }
    assert!(
        failures.is_empty(),
        "{} of {} opens failed:\n{}",
        failures.len(),
        OPENERS * ROUNDS,
        failures.join("\n")
    );
}

#[test]
fn a_damaged_raw_sample_blob_is_an_error_naming_the_run_and_result_not_wrong_figures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blob.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&meta(Some("blob"))).unwrap();
    store
        .save_result(
            run,
            &measurement("os.pipe.latency", Params::new().with("k", 1), &[1.0, 2.0, 3.0]),
        )
        .unwrap();
    assert_eq!(store.load_run(run).unwrap().results[0].samples.len(), 3);
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE results SET raw = substr(raw, 1, length(raw) - 1)", []).unwrap();
    drop(conn);
    let store = Store::open_existing(&path).unwrap();
    let err = store.load_run(run).unwrap_err().to_string();
    assert!(err.contains("raw samples of os.pipe.latency [k=1]"), "{err}");
    assert!(err.contains("cut short"), "{err}");
}

#[test]
fn prune_leaves_runs_still_measuring_and_published_tables_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("prune.db")).unwrap();
    let m = || measurement("os.pipe.latency", Params::new(), &[1.0, 2.0]);
    let done = store.begin_run(&meta(Some("done"))).unwrap();
    store.save_result(done, &m()).unwrap();
    store.finish_run(done, RunStatus::Complete).unwrap();
    let measuring = store.begin_run(&meta(Some("measuring"))).unwrap();
    store.save_result(measuring, &m()).unwrap();
    let mut published = meta(Some("seed002:x"));
    published.suite = "published".into();
    let published = store.begin_run(&published).unwrap();
    store.save_result(published, &m()).unwrap();
    store.finish_run(published, RunStatus::Complete).unwrap();

    let dry = store.prune_raw("2026-11-22", true).unwrap();
    assert_eq!((dry.runs, dry.results, dry.samples), (1, 1, 2), "{dry:?}");
    assert_eq!(
        store.load_run(done).unwrap().results[0].samples.len(),
        2,
        "a dry run drops nothing"
    );
    assert_eq!(store.prune_raw("2026-11-22", false).unwrap(), dry);
    assert!(store.load_run(done).unwrap().results[0].samples.is_empty());
    assert_eq!(store.load_run(done).unwrap().results[0].summary, m().summary, "the result stays");
    assert_eq!(store.load_run(measuring).unwrap().results[0].samples.len(), 2);
    assert_eq!(store.load_run(published).unwrap().results[0].samples.len(), 2);
    // Before the runs started: nothing.
    assert_eq!(store.prune_raw("2026-11-21", false).unwrap(), schedlab_store::Pruned::default());
}
