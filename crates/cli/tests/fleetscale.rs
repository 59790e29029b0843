//! A fleet's database over time, through the real binary: a database written before raw
//! samples were encoded (schema version 4, `data/v4/`: a file and a PostgreSQL dump that
//! 81df2f9 made, with what it printed) shows, exports and compares byte for byte as it did;
//! `prune --raw-before` drops raw samples and never results; and the `fleet_results` view
//! and every query of the Grafana dashboard (docs/grafana/schedlab.json) run against a real
//! PostgreSQL holding pushed runs.
//!
//! The PostgreSQL tests start a throwaway cluster (`../../store/tests/support/pg.rs`) and
//! skip, saying why, where none can be started.

mod common;
#[path = "../../store/tests/support/pg.rs"]
mod pg;

use std::path::{Path, PathBuf};

use common::{bin, ok, run, text};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v4").join(name)
}

fn golden(name: &str) -> String {
    std::fs::read_to_string(data(name)).unwrap()
}

/// Runs `schedlab --db DB ARGS`, DB a path or a URL.
fn at(db: &str, args: &[&str]) -> std::process::Output {
    bin().arg("--db").arg(db).args(args).output().expect("the binary runs")
}

/// What the version 4 build printed for its runs, printed again from `db`.
fn assert_reads_as_version_4_did(db: &str) {
    // The counts of results by outcome, now kept in each run, as the results counted them.
    assert_eq!(ok(&at(db, &["runs"])), golden("runs.txt"), "runs");
    assert_eq!(ok(&at(db, &["show", "v4-a"])), golden("show-v4-a.txt"), "show");
    assert_eq!(ok(&at(db, &["compare", "v4-a", "v4-b"])), golden("compare-v4-a-v4-b.txt"));
    assert_eq!(
        ok(&at(db, &["export", "v4-a", "--format", "json"])),
        golden("export-v4-a.json"),
        "export (raw samples included)"
    );
}

/// The old file, copied where the test may migrate it.
fn v4_file(dir: &Path) -> PathBuf {
    let db = dir.join("v4.db");
    std::fs::copy(data("v4.db"), &db).unwrap();
    db
}

#[test]
fn a_version_4_file_reads_byte_for_byte_as_before_once_its_samples_are_encoded() {
    let dir = tempfile::tempdir().unwrap();
    let db = v4_file(dir.path());
    let path = db.to_str().unwrap();
    assert_reads_as_version_4_did(path);
    let c = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, schedlab_store::SCHEMA_VERSION);
    let (results, samples): (i64, i64) = c
        .query_row("SELECT count(*), sum(n) FROM raw_samples", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert_eq!((results, samples), (8, 88), "every sample of the 8 results, encoded");
    let old: i64 = c
        .query_row("SELECT count(*) FROM sqlite_master WHERE name = 'samples'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(old, 0, "the old table is gone");
    // Read again, from the converted file.
    assert_reads_as_version_4_did(path);
}

/// The columns of `results` at version 5, in its order: what `result_rows` gives back since.
const V5_RESULT_COLS: &str = "id, run_id, seq, probe, params, params_json, unit, better, status,
    reason, notes, iters_per_sample, overhead_ns_per_iter, n, median, min, max, mean, stddev, p5,
    p95, ci_low, ci_high, ci_level, cv, outliers, window_ns, other_cpu_ns, steal_ns, wall_s,
    measured_at";

/// Every row of a query, each value exactly as SQLite holds it (a REAL's bits, a TEXT's bytes).
fn sqlite_rows(c: &rusqlite::Connection, sql: &str) -> Vec<Vec<rusqlite::types::Value>> {
    let mut st = c.prepare(sql).unwrap();
    let n = st.column_count();
    st.query_map([], |r| (0..n).map(|i| r.get::<_, rusqlite::types::Value>(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A version 5 file (`data/v5/`: the version 4 fixture as the version 5 build converted it)
/// becomes version 6 with every result, warning and raw sample as it was, bit for bit, and
/// every command prints what the older builds printed.
#[test]
fn a_version_5_file_is_normalised_keeping_every_value_and_reads_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v5.db");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v5/v5.db"), &db).unwrap();
    let c = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 5, "the fixture is a version 5 file");
    let results = sqlite_rows(&c, &format!("SELECT {V5_RESULT_COLS} FROM results ORDER BY id"));
    let warnings = sqlite_rows(&c, "SELECT * FROM warnings ORDER BY id");
    let raw = sqlite_rows(&c, "SELECT * FROM raw_samples ORDER BY result_id");
    assert_eq!((results.len(), raw.len()), (8, 8));
    assert!(!warnings.is_empty());
    drop(c);

    let path = db.to_str().unwrap();
    assert_reads_as_version_4_did(path);
    let c = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, schedlab_store::SCHEMA_VERSION);
    let now = sqlite_rows(&c, &format!("SELECT {V5_RESULT_COLS} FROM result_rows ORDER BY id"));
    assert_eq!(now, results, "every result, value for value");
    assert_eq!(sqlite_rows(&c, "SELECT * FROM warning_rows ORDER BY id"), warnings);
    assert_eq!(sqlite_rows(&c, "SELECT * FROM raw_samples ORDER BY result_id"), raw);
    let series: i64 = c.query_row("SELECT count(*) FROM series", [], |r| r.get(0)).unwrap();
    assert_eq!(series, 4, "two runs of the same 4 series: each stored once");
    assert_reads_as_version_4_did(path);
}

/// The same from the version 5 build's PostgreSQL database (`data/v5/v5.pg.sql`), values
/// compared as the server writes them (a float8 as its shortest exact text).
#[test]
fn a_version_5_postgresql_database_is_normalised_keeping_every_value() {
    let Some(server) =
        pg::server_or_skip("a_version_5_postgresql_database_is_normalised_keeping_every_value")
    else {
        return;
    };
    let url = server.create_db("v5");
    let dump = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v5/v5.pg.sql"),
    )
    .unwrap();
    // A client of its own: the dump empties its session's search_path.
    server.client("v5").batch_execute(&dump).expect("the version 5 dump loads");
    let mut c = server.client("v5");
    let rows = |c: &mut postgres::Client, sql: &str| -> Vec<String> {
        c.query(&format!("SELECT row_to_json(x)::text FROM ({sql}) x"), &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let results = rows(&mut c, &format!("SELECT {V5_RESULT_COLS} FROM results ORDER BY id"));
    let warnings = rows(&mut c, "SELECT * FROM warnings ORDER BY id");
    let raw = rows(&mut c, "SELECT * FROM raw_samples ORDER BY result_id");
    assert_eq!(results.len(), 8);

    assert_reads_as_version_4_did(&url);
    let version: i64 = c.query_one("SELECT schema_version FROM schedlab_meta", &[]).unwrap().get(0);
    assert_eq!(version, schedlab_store::SCHEMA_VERSION);
    assert_eq!(
        rows(&mut c, &format!("SELECT {V5_RESULT_COLS} FROM result_rows ORDER BY id")),
        results
    );
    assert_eq!(rows(&mut c, "SELECT * FROM warning_rows ORDER BY id"), warnings);
    assert_eq!(rows(&mut c, "SELECT * FROM raw_samples ORDER BY result_id"), raw);
    // New results get new ids past the copied ones, and deleting a run takes its raw
    // samples along (they are in its rows).
    c.batch_execute(
        "INSERT INTO series (probe, params, params_json, unit, better)
            VALUES ('t.new', '', '{}', 'ns', 'lower');
         INSERT INTO results (run_id, series_id, notes_id, seq, iters_per_sample,
                overhead_ns_per_iter, wall_s, status, measured_at)
            SELECT run_id, (SELECT id FROM series WHERE probe = 't.new'), notes_id, 99, 1, 0, 0,
                'ok', measured_at FROM results
            WHERE run_id = (SELECT id FROM runs WHERE label = 'v4-a') ORDER BY id LIMIT 1;
         INSERT INTO warnings (run_id, kind_id, advice_id, message)
            SELECT run_id, kind_id, advice_id, 'new' FROM warnings ORDER BY id LIMIT 1;",
    )
    .expect("new rows get ids past the copied ones");
    c.batch_execute("DELETE FROM runs WHERE label = 'v4-a'").unwrap();
    let left: i64 = c.query_one("SELECT count(*) FROM raw_samples", &[]).unwrap().get(0);
    assert_eq!(left, 4);
    let results: i64 = c.query_one("SELECT count(*) FROM results", &[]).unwrap().get(0);
    assert_eq!(results, 4, "v4-a's 4 and the new one went with it");
}

/// A migration the server cancels (here its statement timeout, while another session holds
/// a lock on `results`) says so, and that nothing changed: not that the database's version
/// was edited by hand. The next command, the lock gone, migrates it.
#[test]
fn a_migration_cut_by_the_statement_timeout_says_so_and_leaves_the_database_as_it_was() {
    let Some(server) = pg::server_or_skip(
        "a_migration_cut_by_the_statement_timeout_says_so_and_leaves_the_database_as_it_was",
    ) else {
        return;
    };
    let url = server.create_db("v5timeout");
    let dump = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v5/v5.pg.sql"),
    )
    .unwrap();
    server.client("v5timeout").batch_execute(&dump).expect("the version 5 dump loads");
    let mut holder = server.client("v5timeout");
    let mut lock = holder.transaction().unwrap();
    lock.batch_execute("LOCK TABLE results IN ACCESS EXCLUSIVE MODE").unwrap();
    let short = format!("{url}&options=-c%20statement_timeout%3D1000");
    let o = at(&short, &["prune", "--raw-before", "2000-01-01"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("could not be migrated from schema version 5"), "{err}");
    assert!(err.contains("statement timeout"), "the server's own words: {err}");
    assert!(!err.contains("by hand"), "{err}");
    lock.rollback().unwrap();
    let mut c = server.client("v5timeout");
    let version: i64 = c.query_one("SELECT schema_version FROM schedlab_meta", &[]).unwrap().get(0);
    assert_eq!(version, 5, "left as it was");
    ok(&at(&short, &["prune", "--raw-before", "2000-01-01"]));
    let version: i64 = c.query_one("SELECT schema_version FROM schedlab_meta", &[]).unwrap().get(0);
    assert_eq!(version, schedlab_store::SCHEMA_VERSION);
}

#[test]
fn prune_drops_raw_samples_and_never_results() {
    let dir = tempfile::tempdir().unwrap();
    let db = v4_file(dir.path());
    let path = db.to_str().unwrap();
    let runs = ok(&at(path, &["runs"]));

    // Nothing started before the runs: nothing to drop, exit 0.
    let none = ok(&at(path, &["prune", "--raw-before", "2026-11-27T08:00:00Z"]));
    assert!(
        none.starts_with("no raw samples of runs started before 2026-11-27T08:00:00Z"),
        "{none}"
    );
    // Between the two runs (v4-a 08:01:47, v4-b 08:01:49), dry: counted, nothing changed.
    let dry = ok(&at(path, &["prune", "--raw-before", "2026-11-27T08:01:48Z", "--dry-run"]));
    assert!(
        dry.starts_with("would drop the raw samples of 4 result(s) in 1 run(s) started before 2026-11-27T08:01:48Z (44 samples, "),
        "{dry}"
    );
    assert!(dry.contains("dry run: nothing changed"), "{dry}");
    assert_reads_as_version_4_did(path);

    let done = ok(&at(path, &["prune", "--raw-before", "2026-11-28"]));
    assert!(
        done.starts_with("dropped the raw samples of 8 result(s) in 2 run(s) started before 2026-11-28 (88 samples, "),
        "{done}"
    );
    // The results are all there, and read as before: runs, show, compare.
    assert_eq!(ok(&at(path, &["runs"])), runs);
    assert_eq!(ok(&at(path, &["show", "v4-a"])), golden("show-v4-a.txt"));
    assert_eq!(ok(&at(path, &["compare", "v4-a", "v4-b"])), golden("compare-v4-a-v4-b.txt"));
    let export: serde_json::Value =
        serde_json::from_str(&ok(&at(path, &["export", "v4-a", "--format", "json"]))).unwrap();
    let before: serde_json::Value = serde_json::from_str(&golden("export-v4-a.json")).unwrap();
    let results = export["results"].as_array().unwrap();
    assert_eq!(results.len(), before["results"].as_array().unwrap().len());
    for (now, then) in results.iter().zip(before["results"].as_array().unwrap()) {
        assert_eq!(now["summary"], then["summary"], "the summary is kept");
        assert_eq!(now["samples"], serde_json::json!([]), "the raw samples are gone");
    }
    let again = ok(&at(path, &["prune", "--raw-before", "2026-11-28"]));
    assert!(again.starts_with("no raw samples"), "{again}");
}

#[test]
fn prune_says_what_is_wrong_with_its_input_and_exits_2_or_1() {
    let dir = tempfile::tempdir().unwrap();
    let db = v4_file(dir.path());
    for bad in ["2026-13-01", "yesterday", "2026-02-30", ""] {
        let o = run(&db, &["prune", "--raw-before", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(&format!("--raw-before {bad:?} is not a date")),
            "{}",
            text(&o.stderr)
        );
    }
    let o = run(&db, &["prune"]);
    assert_eq!(o.status.code(), Some(2), "--raw-before is required: {}", text(&o.stderr));
    let o =
        run(&dir.path().join("absent.db"), &["prune", "--raw-before", "2026-11-01", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("absent.db"), "{}", text(&o.stderr));
    // None of it touched the database.
    assert_reads_as_version_4_did(db.to_str().unwrap());
}

#[test]
fn a_version_4_postgresql_database_reads_as_before_and_prunes() {
    let Some(server) =
        pg::server_or_skip("a_version_4_postgresql_database_reads_as_before_and_prunes")
    else {
        return;
    };
    let url = server.create_db("v4");
    server.client("v4").batch_execute(&golden("v4.pg.sql")).expect("the version 4 dump loads");
    assert_reads_as_version_4_did(&url);
    let mut c = server.client("v4");
    let version: i64 = c.query_one("SELECT schema_version FROM schedlab_meta", &[]).unwrap().get(0);
    assert_eq!(version, schedlab_store::SCHEMA_VERSION);
    let old: bool = c.query_one("SELECT to_regclass('samples') IS NULL", &[]).unwrap().get(0);
    assert!(old, "the old table is gone");
    assert_reads_as_version_4_did(&url);

    let done = ok(&at(&url, &["prune", "--raw-before", "2026-11-28"]));
    assert!(done.starts_with("dropped the raw samples of 8 result(s) in 2 run(s)"), "{done}");
    assert!(done.contains("VACUUM"), "{done}");
    assert_eq!(ok(&at(&url, &["show", "v4-a"])), golden("show-v4-a.txt"));
    assert_eq!(ok(&at(&url, &["compare", "v4-a", "v4-b"])), golden("compare-v4-a-v4-b.txt"));
    let results: i64 = c.query_one("SELECT count(*) FROM results", &[]).unwrap().get(0);
    let raw: i64 = c.query_one("SELECT count(*) FROM raw_samples", &[]).unwrap().get(0);
    assert_eq!((results, raw), (8, 0));
}

/// The time range every query gets (Grafana's dashboard range), wide enough for the
/// fixture's runs of 2026-11-27.
const FROM: &str = "2026-11-01T00:00:00Z";
const TO: &str = "2026-12-01T00:00:00Z";

/// A query of the dashboard as Grafana's PostgreSQL data source sends it (docs/DATABASE.md,
/// "Grafana"): `$__timeFilter(c)` → `c BETWEEN 'FROM' AND 'TO'`, `$__timeFrom()` and
/// `$__timeTo()` → the quoted bounds, `$__timeGroupAlias(c, 'I')` → `floor(extract(epoch
/// from c)/S)*S AS "time"` (S the interval in seconds), a multi-value variable → its values
/// quoted and joined by commas, a single value as it is. A macro this does not know fails the
/// test, so the list stays the one the documentation gives.
fn as_grafana_sends(sql: &str, vars: &[(&str, Vec<String>, bool)]) -> String {
    let mut out = sql.to_string();
    // The group macro first: its argument list holds a quoted interval.
    while let Some(at) = out.find("$__timeGroupAlias(") {
        let args_at = at + "$__timeGroupAlias(".len();
        let end = args_at + out[args_at..].find(')').expect("the macro's closing parenthesis");
        let args: Vec<&str> = out[args_at..end].split(',').map(str::trim).collect();
        let secs = match args[1].trim_matches('\'') {
            "1d" => 86_400,
            "1h" => 3_600,
            "5m" => 300,
            other => panic!("an interval the test does not know: {other}"),
        };
        let expanded =
            format!("floor(extract(epoch from {c})/{secs})*{secs} AS \"time\"", c = args[0]);
        out.replace_range(at..=end, &expanded);
    }
    while let Some(at) = out.find("$__timeFilter(") {
        let args_at = at + "$__timeFilter(".len();
        let end = args_at + out[args_at..].find(')').unwrap();
        let expanded = format!("{} BETWEEN '{FROM}' AND '{TO}'", out[args_at..end].trim());
        out.replace_range(at..=end, &expanded);
    }
    out = out
        .replace("$__timeFrom()", &format!("'{FROM}'"))
        .replace("$__timeTo()", &format!("'{TO}'"));
    assert!(!out.contains("$__"), "a macro the test does not expand: {out}");
    // Longer names first, so that `$params` is not read as `$param` + `s`.
    let mut vars: Vec<&(&str, Vec<String>, bool)> = vars.iter().collect();
    vars.sort_by_key(|v| std::cmp::Reverse(v.0.len()));
    for (name, values, multi) in vars {
        let value = if *multi {
            values
                .iter()
                .map(|v| format!("'{}'", v.replace('\'', "''")))
                .collect::<Vec<_>>()
                .join(",")
        } else {
            values[0].clone()
        };
        out = out.replace(&format!("${{{name}}}"), &value).replace(&format!("${name}"), &value);
    }
    assert!(!out.contains('$'), "a variable the dashboard does not define: {out}");
    out
}

#[test]
fn the_fleet_view_and_every_grafana_panel_query_run_on_a_real_server() {
    let Some(server) =
        pg::server_or_skip("the_fleet_view_and_every_grafana_panel_query_run_on_a_real_server")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = v4_file(dir.path());
    let url = server.create_db("fleet");
    ok(&run(&db, &["push", "--to", &url]));
    let mut c = server.client("fleet");

    // One row per result, with its run, host, machine, probe, params, median, interval, unit
    // and time.
    let rows = c
        .query(
            "SELECT run, host, machine_id, probe, params, median, ci_low, ci_high, unit, time
             FROM fleet_results WHERE run = 'v4-a' ORDER BY result_id",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), 4);
    let (probe, params, median, low, high, unit): (String, String, f64, f64, f64, String) = (
        rows[3].get(3),
        rows[3].get(4),
        rows[3].get(5),
        rows[3].get(6),
        rows[3].get(7),
        rows[3].get(8),
    );
    assert_eq!(
        (probe.as_str(), params.as_str(), unit.as_str()),
        ("os.pipe.latency", "placement=cross", "us")
    );
    assert!(low <= median && median <= high, "{low} {median} {high}");
    let when: String = c
        .query_one("SELECT to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM fleet_results WHERE run = 'v4-a' LIMIT 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(when, "2026-11-27T08:01:47Z", "time is the run's start, a timestamp");

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana/schedlab.json"),
        )
        .unwrap(),
    )
    .unwrap();
    // The variables, each filled with the first value its own query returns (as Grafana
    // does on load), in their order: a later one may use an earlier one.
    let mut vars: Vec<(&str, Vec<String>, bool)> = Vec::new();
    let list = dashboard["templating"]["list"].as_array().unwrap();
    assert_eq!(list[0]["type"], "datasource", "the data source is the first variable");
    assert_eq!(list[0]["query"], "grafana-postgresql-datasource");
    for v in &list[1..] {
        assert_eq!(v["type"], "query", "{v}");
        assert_eq!(v["datasource"]["uid"], "${datasource}", "{v}");
        let name = v["name"].as_str().unwrap();
        let sql = as_grafana_sends(v["query"].as_str().unwrap(), &vars);
        let values: Vec<String> = c
            .query(&sql, &[])
            .unwrap_or_else(|e| panic!("variable {name}: {e}\n{sql}"))
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect();
        assert!(!values.is_empty(), "variable {name} offers nothing: {sql}");
        let multi = v["multi"].as_bool().unwrap_or(false);
        vars.push((name, if multi { values } else { values[..1].to_vec() }, multi));
    }
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 4, "{}", panels.len());
    for p in panels {
        assert_eq!(p["datasource"]["uid"], "${datasource}", "panel {}", p["title"]);
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {} has no query", p["title"]);
        for t in targets {
            let sql = as_grafana_sends(t["rawSql"].as_str().unwrap(), &vars);
            let rows =
                c.query(&sql, &[]).unwrap_or_else(|e| panic!("panel {}: {e}\n{sql}", p["title"]));
            assert!(!rows.is_empty(), "panel {} shows nothing: {sql}", p["title"]);
            if t["format"] == "time_series" {
                // Grafana's time series take the first column as the time: a timestamp, or
                // epoch seconds from the group macro (NUMERIC: PostgreSQL 14's `extract`).
                use postgres::types::Type;
                let ty = rows[0].columns()[0].type_().clone();
                assert!(
                    [Type::TIMESTAMPTZ, Type::FLOAT8, Type::NUMERIC].contains(&ty),
                    "panel {}: its time column is {ty}",
                    p["title"]
                );
            }
        }
    }
}
