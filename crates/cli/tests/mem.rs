//! `schedlab mem` end to end through the real binary, in its smoke form: the run is stored
//! like any other, the analysis prints, the charts are written and well-formed enough to
//! hold one line per routine, and a stored run can be analysed again without measuring.
//! Nothing here depends on how fast anything is.

mod common;

use common::{run, text};

#[test]
fn mem_lab_measures_stores_analyses_and_draws() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let svg = dir.path().join("charts");
    let svg_arg = svg.to_str().unwrap();
    let o = run(&db, &["mem", "--suite", "smoke", "--label", "lab", "--svg-dir", svg_arg]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{}", text(&o.stderr));
    for heading in
        ["measuring", "Best clearing routine per size range", "Time per call in ns", "charts:"]
    {
        assert!(out.contains(heading), "missing {heading:?} in:\n{out}");
    }

    let charts: Vec<_> = std::fs::read_dir(&svg).unwrap().flatten().collect();
    assert!(charts.len() >= 3, "{charts:?}");
    for c in charts {
        let body = std::fs::read_to_string(c.path()).unwrap();
        assert!(body.starts_with("<?xml") && body.trim_end().ends_with("</svg>"), "{:?}", c.path());
        assert!(body.contains(r#"<path class="series""#), "{:?} draws no line", c.path());
    }

    // Stored like any run: shown, exported with the three identifying parameters.
    let o = run(&db, &["show", "lab"]);
    assert!(text(&o.stdout).contains("mem.clear"));
    let o = run(&db, &["export", "lab", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("export is JSON");
    let clear = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["probe"] == "mem.clear")
        .expect("a mem.clear result")
        .clone();
    let params = clear["params"].to_string();
    for k in ["routine", "size", "align"] {
        assert!(params.contains(k), "{params}");
    }

    // Analysed again from the database, without measuring.
    let o = run(&db, &["mem", "--run", "lab", "--markdown"]);
    let again = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{again}{}", text(&o.stderr));
    assert!(!again.contains("measuring") && again.contains("### Best clearing routine"), "{again}");
}

#[test]
fn analysing_a_run_without_mem_results_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let o = run(&db, &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label", "os"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(&db, &["mem", "--run", "os"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no measured mem.clear results"), "{}", text(&o.stderr));
    let o = run(&db, &["mem", "--run", "nosuchrun"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}
