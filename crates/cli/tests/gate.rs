//! The CI gate end to end: `schedlab compare BASE NEW --fail-on regression[=PCT]` on stored
//! runs, one of them with an injected regression, in an SQLite file and in a throwaway
//! PostgreSQL: the exit codes 0/1/2, `--only`, and JUnit XML that a real parser reads.

mod common;
#[path = "../../store/tests/support/pg.rs"]
mod pg;

use common::runs::{around, store, Made};
use common::{bin, ok, text};
use schedlab_measure::model::Unit;
use schedlab_store::Location;

/// base, `same` (noise only) and `new`: pipe latency 30% slower and pipe bandwidth 20%
/// lower (both worse beyond noise: a time up, a rate down), syscall 40% faster (better).
fn fill(at: &Location) {
    let run = |label: &'static str, day: u32, lat: f64, bw: f64, sys: f64| Made {
        host: "ci",
        label,
        started_at: format!("2026-11-{day:02}T03:00:00Z"),
        kernel: "6.1.0",
        timer_slack: "50000 ns",
        results: vec![
            ("os.pipe.latency", "placement=same", Unit::Micros, around(lat, 0.01, 11)),
            ("os.pipe.bandwidth", "", Unit::MibPerSec, around(bw, 0.01, 11)),
            ("os.syscall.null", "", Unit::Nanos, around(sys, 0.01, 11)),
            ("os.signal.install", "", Unit::Nanos, around(50.0, 0.01, 11)),
        ],
    };
    store(at, &run("base", 1, 10.0, 1000.0, 100.0));
    store(at, &run("same", 2, 10.02, 998.0, 100.1));
    store(at, &run("new", 3, 13.0, 800.0, 60.0));
}

fn at(db: &str, args: &[&str]) -> std::process::Output {
    bin().arg("--db").arg(db).args(args).output().unwrap()
}

fn gate(db: &str, dir: &std::path::Path) {
    // No regression: exit 0.
    let o = at(db, &["compare", "base", "same", "--fail-on", "regression"]);
    let out = ok(&o);
    assert!(out.contains("gate: PASS: 4 results compared: 0 worse beyond noise"), "{out}");

    // The injected regression: exit 1, named, with JUnit and Markdown summaries.
    let junit = dir.join("junit.xml");
    let md = dir.join("summary.md");
    let o = at(
        db,
        &[
            "compare",
            "base",
            "new",
            "--fail-on",
            "regression",
            "--junit",
            junit.to_str().unwrap(),
            &format!("--markdown={}", md.display()),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}{}", text(&o.stdout), text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "gate: FAIL: 4 results compared: 2 worse beyond noise, 1 better, 1 within noise"
        ),
        "{out}"
    );
    assert!(out.contains("os.pipe.latency placement=same ×1.30 worse"), "{out}");
    assert!(out.contains("os.pipe.bandwidth ×0.80 worse"), "a rate that fell is worse: {out}");

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("the JUnit XML parses");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("tests"), Some("4"));
    assert_eq!(root.attribute("failures"), Some("2"));
    let failed: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .map(|f| f.parent().unwrap().attribute("classname").unwrap().to_string())
        .collect();
    assert_eq!(failed, vec!["os.pipe.latency", "os.pipe.bandwidth"], "{xml}");
    let summary = std::fs::read_to_string(&md).unwrap();
    assert!(summary.starts_with("## schedlab compare: new against base"), "{summary}");
    assert!(summary.contains("**FAIL: 4 results compared: 2 worse beyond noise"), "{summary}");

    // A minimum effect above both: beyond noise, but not by 50%: exit 0.
    let out = ok(&at(db, &["compare", "base", "new", "--fail-on", "regression=50"]));
    assert!(out.contains("gate: PASS") && out.contains("worse by at least 50%"), "{out}");
    // 25%: the latency (30% worse) fails, the bandwidth (20% lower) passes.
    let o = at(db, &["compare", "base", "new", "--fail-on", "regression=25"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains("1 worse beyond noise"), "{}", text(&o.stdout));

    // --only: the table keeps the regressions, or the changes.
    let rows = |out: &str, probe: &str| out.lines().filter(|l| l.starts_with(probe)).count();
    let only = text(&at(db, &["compare", "base", "new", "--only", "regressions"]).stdout);
    assert_eq!(
        (rows(&only, "os.pipe.latency"), rows(&only, "os.pipe.bandwidth")),
        (1, 1),
        "{only}"
    );
    assert_eq!(
        (rows(&only, "os.syscall.null"), rows(&only, "os.signal.install")),
        (0, 0),
        "{only}"
    );
    let changes = text(&at(db, &["compare", "base", "new", "--only", "changes"]).stdout);
    assert_eq!(rows(&changes, "os.syscall.null"), 1, "an improvement is a change: {changes}");
    assert_eq!(rows(&changes, "os.signal.install"), 0, "{changes}");
    // Without --fail-on, a regression is shown, not a failure.
    ok(&at(db, &["compare", "base", "new"]));

    // Bad gate flags and unknown runs: usage errors.
    for (args, says) in [
        (&["compare", "base", "new", "--fail-on", "regression=abc"][..], "PCT is a percentage"),
        (&["compare", "base", "new", "--fail-on", "regression=100"][..], "PCT is a percentage"),
        (&["compare", "base", "new", "--fail-on", "slower"][..], "takes `regression`"),
        (&["compare", "base", "nope", "--fail-on", "regression"][..], "nope"),
        (&["compare", "base", "new", "--only", "worse"][..], "invalid value"),
        (&["compare", "base", "new", "--markdown", "s.md"][..], "write --markdown=s.md"),
    ] {
        let o = at(db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(says), "{args:?}: {}", text(&o.stderr));
    }
}

#[test]
fn the_gate_fails_on_an_injected_regression_in_an_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ci.db");
    fill(&Location::File(db.clone()));
    gate(db.to_str().unwrap(), dir.path());
}

#[test]
fn the_gate_fails_on_an_injected_regression_in_postgresql() {
    let Some(server) = pg::server_or_skip("the_gate_fails_on_an_injected_regression_in_postgresql")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = server.create_db("gate");
    fill(&Location::parse(std::ffi::OsStr::new(&url)));
    gate(&url, dir.path());
}
