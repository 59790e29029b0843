//! `schedlab history PROBE` through the real binary, on an SQLite file and on a throwaway
//! PostgreSQL server holding the same runs: one series per machine and parameter set, the
//! change point where the kernel changed (and what differed there), the HTML chart, the
//! filters, and the errors for what does not exist.

mod common;
#[path = "../../store/tests/support/pg.rs"]
mod pg;

use common::runs::{around, store, Made};
use common::{bin, ok, text};
use schedlab_measure::model::Unit;
use schedlab_store::Location;

/// The fleet's history: alpha measured os.pipe.latency for 12 days, 10 µs on kernel 6.1
/// with 50 µs timer slack, then 15 µs from day 7 on kernel 6.18 with 1 ns; its
/// placement=cross stayed at 20 µs. beta measured 30 µs throughout, on 6.1.
fn fill(at: &Location) {
    for day in 1..=12u32 {
        let late = day >= 7;
        store(
            at,
            &Made {
                host: "alpha",
                label: &format!("nightly-{day}"),
                started_at: format!("2026-11-{day:02}T03:00:00Z"),
                kernel: if late { "6.18.0" } else { "6.1.0" },
                timer_slack: if late { "1 ns" } else { "50000 ns" },
                results: vec![
                    (
                        "os.pipe.latency",
                        "placement=same",
                        Unit::Micros,
                        around(
                            if late { 15.0 } else { 10.0 } * (1.0 + (day % 3) as f64 * 0.005),
                            0.02,
                            9,
                        ),
                    ),
                    (
                        "os.pipe.latency",
                        "placement=cross",
                        Unit::Micros,
                        around(20.0 + (day % 2) as f64 * 0.1, 0.02, 9),
                    ),
                ],
            },
        );
    }
    for day in 1..=8u32 {
        store(
            at,
            &Made {
                host: "beta",
                label: &format!("beta-{day}"),
                started_at: format!("2026-11-{day:02}T04:00:00Z"),
                kernel: "6.1.0",
                timer_slack: "50000 ns",
                results: vec![(
                    "os.pipe.latency",
                    "placement=same",
                    Unit::Micros,
                    around(30.0 * (1.0 + (day % 4) as f64 * 0.004), 0.02, 9),
                )],
            },
        );
    }
}

/// Runs `schedlab --db DB ARGS` where DB may be a URL.
fn at(db: &str, args: &[&str]) -> std::process::Output {
    bin().arg("--db").arg(db).args(args).output().unwrap()
}

/// What every database must answer alike; returns the printed history of alpha's
/// placement=same, for comparing databases.
fn check(db: &str, dir: &std::path::Path) -> String {
    let same = ok(&at(
        db,
        &["history", "os.pipe.latency", "--params", "placement=same", "--host", "alpha"],
    ));
    assert!(same.contains("os.pipe.latency — alpha (machine "), "{same}");
    assert!(same.contains("placement=same: 12 runs, µs, lower is better"), "{same}");
    assert!(!same.contains("beta") && !same.contains("placement=cross"), "{same}");
    // One change point, where day 7's run is.
    let marked: Vec<&str> = same.lines().filter(|l| l.contains('◆')).collect();
    assert_eq!(marked.len(), 1, "{same}");
    assert!(marked[0].contains("2026-11-07") && marked[0].contains("×1.50 worse"), "{same}");
    assert!(
        same.contains("change point at run #7 \"nightly-7\" 2026-11-07T03:00:00Z: ×1.50 worse"),
        "{same}"
    );
    assert!(same.contains("after run #6 \"nightly-6\" 2026-11-06T03:00:00Z"), "{same}");
    assert!(same.contains("  kernel 6.18.0, not 6.1.0"), "{same}");
    assert!(same.contains("  timer slack 1 ns, not 50000 ns"), "{same}");

    // Every series of the probe: alpha's two parameter sets and beta's; only alpha's
    // placement=same changed.
    let all = ok(&at(db, &["history", "os.pipe.latency"]));
    assert_eq!(all.matches(" runs, µs").count(), 3, "{all}");
    assert_eq!(all.matches("no change point").count(), 2, "{all}");
    let beta = ok(&at(db, &["history", "os.pipe.latency", "--host", "beta"]));
    assert!(
        beta.contains("beta (machine ") && beta.contains("8 runs") && !beta.contains("alpha"),
        "{beta}"
    );

    // Since the change: one level, no change point.
    let late = ok(&at(
        db,
        &[
            "history",
            "os.pipe.latency",
            "--params",
            "placement=same",
            "--host",
            "alpha",
            "--since",
            "2026-11-07",
        ],
    ));
    assert!(late.contains("6 runs") && late.contains("no change point"), "{late}");
    let none = ok(&at(db, &["history", "os.pipe.latency", "--since", "2027-01-01"]));
    assert!(none.contains("no measured result of os.pipe.latency since 2027-01-01"), "{none}");

    // The chart: one line and one band per machine, a marker at the change point.
    let html = dir.join("history.html");
    let o = at(
        db,
        &[
            "history",
            "os.pipe.latency",
            "--params",
            "placement=same",
            "--report",
            html.to_str().unwrap(),
        ],
    );
    ok(&o);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<path class=\"series\"").count(), 2, "alpha and beta");
    assert_eq!(page.matches("<path class=\"band\"").count(), 2);
    assert!(page.contains("alpha ×1.50 worse"), "the change point's marker");

    // What does not exist: exit 2, naming it.
    for (args, says) in [
        (&["history", "os.pipe.latnecy"][..], "did you mean os.pipe.latency"),
        (&["history", "os.pipe"][..], "not one probe id"),
        (&["history", "os.pipe.latency", "--host", "gamma"][..], "no run of host \"gamma\""),
        (&["history", "os.pipe.latency", "--since", "2026-02-30"][..], "is not a date"),
        (&["history", "os.pipe.latency", "--params", "size=4"][..], "has no parameter \"size\""),
        (
            &["history", "os.pipe.latency", "--params", "placement=both"][..],
            "the parameter sets stored are",
        ),
        (&["history", "os.pipe.latency", "--params", "placement"][..], "is not KEY=VALUE"),
    ] {
        let o = at(db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(says), "{args:?}: {}", text(&o.stderr));
    }
    // A probe of the catalog never measured here: a failure, saying how to measure it.
    let o = at(db, &["history", "os.syscall.null"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("schedlab run --filter os.syscall.null"),
        "{}",
        text(&o.stderr)
    );
    same
}

#[test]
fn history_finds_the_kernel_change_in_an_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fleet.db");
    fill(&Location::File(db.clone()));
    check(db.to_str().unwrap(), dir.path());
}

/// The same runs in PostgreSQL give the same history, character for character.
#[test]
fn history_reads_the_same_from_postgresql() {
    let Some(server) = pg::server_or_skip("history_reads_the_same_from_postgresql") else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = server.create_db("history");
    fill(&Location::parse(std::ffi::OsStr::new(&url)));
    let file = dir.path().join("fleet.db");
    fill(&Location::File(file.clone()));
    let from_pg = check(&url, dir.path());
    let from_file = check(file.to_str().unwrap(), dir.path());
    assert_eq!(from_pg, from_file);
}
