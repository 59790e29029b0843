//! Output paths (`--svg`, `--perfetto`, `--report`, `export -o`, `report -o`, `mem --svg-dir`)
//! are opened before anything is measured: a path that cannot be written is a usage error
//! (exit 2) naming it, also for root, for whom permission checks pass everywhere — `/proc`
//! included. A file the check created is not left behind when the command fails later.

mod common;

use std::path::Path;

use common::{ok, run, text};

fn refused(db: &Path, args: &[&str], path: &str) {
    let o = run(db, args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(path), "{args:?} does not name {path}: {err}");
}

#[test]
fn outputs_under_proc_are_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // Something to export and report.
    ok(&run(&db, &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label", "one"]));
    let before = ok(&run(&db, &["runs"]));
    for path in ["/proc/schedlab-out.svg", "/proc/self/status", "/sys/kernel/schedlab.json"] {
        refused(&db, &["timeline", "1", "--svg", path], path);
        refused(&db, &["timeline", "1", "--perfetto", path], path);
        refused(&db, &["timeline", "--probe", "os.syscall.null", "--svg", path], path);
        refused(
            &db,
            &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--report", path],
            path,
        );
        refused(&db, &["export", "one", "-o", path], path);
        refused(&db, &["report", "one", "-o", path], path);
    }
    refused(
        &db,
        &["mem", "--suite", "quick", "--svg-dir", "/proc/schedlab-charts"],
        "/proc/schedlab-charts",
    );
    assert_eq!(ok(&run(&db, &["runs"])), before, "nothing was measured");
}

#[test]
fn a_checked_output_is_not_left_empty_when_the_command_fails_later() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let report = dir.path().join("report.html");
    // The report path is fine; the filter is not (found after the report was claimed).
    let o = run(&db, &["run", "--filter", "no.such.probe", "--report", report.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(!report.exists(), "an empty report was left behind");
    let export = dir.path().join("run.json");
    let o = run(&db, &["export", "no-such-run", "-o", export.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!export.exists(), "an empty export was left behind");
    // A file that was there before is kept as it was.
    std::fs::write(&export, "mine").unwrap();
    let o = run(&db, &["export", "no-such-run", "-o", export.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&export).unwrap(), "mine");
    // And a good one is written whole.
    ok(&run(&db, &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label", "x"]));
    ok(&run(&db, &["export", "x", "-o", export.to_str().unwrap()]));
    assert!(std::fs::read_to_string(&export).unwrap().contains("os.syscall.null"));
}
