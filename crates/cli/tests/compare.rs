//! `schedlab compare` where a newcomer trips: `latest` right after a `timeline` (a run
//! with nothing to set beside the paper's), runs with nothing in common, and runs of
//! different suites or sample counts whose ratios look alike but are not.

mod common;

use common::{ok, run, text};

/// `compare latest seed002:linux-hp` after a `timeline`: the timeline run has no row in
/// common with the paper, so `latest` is read as the newest run that has, and stderr says
/// which; the table has ratios, not dashes.
#[test]
fn latest_beside_a_paper_skips_a_newer_timeline_run_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    ok(&run(&db, &["run", "--suite", "smoke", "--filter", "os.syscall.null"]));
    ok(&run(&db, &["reference", "import", "seed002"]));
    ok(&run(&db, &["timeline", "3"]));

    let o = run(&db, &["compare", "latest", "seed002:linux-hp"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("latest: run #7 (timeline suite) has no result in common"), "{err}");
    assert!(err.contains("using run #1"), "{err}");
    let out = text(&o.stdout);
    let null = out.lines().find(|l| l.starts_with("os.syscall.null")).unwrap_or("");
    assert!(null.contains('×') && null.contains("102.2 ns"), "{out}");
}

/// With no measured run that shares a row with the paper, and for two runs that share
/// nothing, compare fails (exit 1) naming the runs, instead of printing a table of dashes.
#[test]
fn runs_with_nothing_in_common_are_a_failure_not_a_table_of_dashes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    ok(&run(&db, &["timeline", "3"]));
    ok(&run(&db, &["reference", "import", "seed002"]));

    let o = run(&db, &["compare", "latest", "seed002:linux-hp"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(err.contains("no measured run") && err.contains("seed002:linux-hp"), "{err}");

    let o = run(&db, &["compare", "1", "seed002:linux-hp"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(err.contains("nothing to compare") && err.contains("suite timeline"), "{err}");
    assert!(text(&o.stdout).is_empty(), "no table of dashes");
}

/// Runs of different suites, or whose results took different numbers of samples, get a
/// note saying so above the verdicts; alike runs get none.
#[test]
fn unlike_runs_are_named_in_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let null = ["--filter", "os.syscall.null"];
    ok(&run(&db, &[&["run", "--suite", "smoke", "--label", "a"][..], &null].concat()));
    ok(&run(&db, &[&["run", "--suite", "smoke", "--label", "b"][..], &null].concat()));
    ok(&run(
        &db,
        &[&["run", "--suite", "smoke", "--label", "c", "--samples", "5"][..], &null].concat(),
    ));
    ok(&run(
        &db,
        &[&["run", "--suite", "quick", "--label", "d", "--samples", "5"][..], &null].concat(),
    ));

    let alike = ok(&run(&db, &["compare", "a", "b"]));
    assert!(!alike.contains("note:"), "{alike}");

    let samples = ok(&run(&db, &["compare", "a", "c"]));
    assert!(samples.contains("note: the runs took different numbers of samples"), "{samples}");
    assert!(samples.contains("c (run #3) 5"), "{samples}");
    assert!(!samples.contains("different suites"), "{samples}");

    let suites = ok(&run(&db, &["compare", "c", "d"]));
    assert!(suites.contains("note: the runs are of different suites"), "{suites}");
    assert!(suites.contains("c (run #3) smoke") && suites.contains("d (run #4) quick"), "{suites}");
    assert!(!suites.contains("different numbers of samples"), "{suites}");
}
