//! `schedlab timeline` end to end: the scenario list, a recorded scenario stored as a run
//! with its raw timeline, and the Perfetto and SVG files it writes. Nothing here depends on
//! how the scheduler shares the CPU, only on the shape of what is produced.

mod common;

use common::{run, text};

#[test]
fn the_list_names_every_scenario_by_number_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&dir.path().join("r.db"), &["timeline", "--list"]);
    assert_eq!(o.status.code(), Some(0));
    let out = text(&o.stdout);
    for name in ["one-busy", "two-equal", "four-equal", "nice", "yield", "idle", "budget", "sleep"]
    {
        assert!(out.contains(name), "{name} missing from\n{out}");
    }
}

#[test]
fn an_unknown_scenario_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&dir.path().join("r.db"), &["timeline", "42"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("\"42\""), "{}", text(&o.stderr));
}

#[test]
fn a_scenario_is_stored_shown_and_exported_to_perfetto_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let json = dir.path().join("t.json");
    let svg = dir.path().join("t.svg");
    let o = run(
        &db,
        &[
            "timeline",
            "two-equal",
            "--label",
            "tl",
            "--perfetto",
            json.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ],
    );
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
    assert!(out.contains("verdict:"), "{out}");
    for line in out.lines().filter(|l| l.contains('|')) {
        assert!(line.chars().count() <= 100, "lane wider than 100 columns: {line}");
    }

    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    schedlab_trace::perfetto::validate(&doc).expect("a valid trace");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("time (ms)"));

    let o = run(&db, &["show", "tl"]);
    let shown = text(&o.stdout);
    assert!(shown.contains("sched.timeline.slice") && shown.contains("thread=a"), "{shown}");
    assert!(shown.contains("sched.timeline.work"), "{shown}");

    let conn = rusqlite::Connection::open(&db).unwrap();
    let (scenario, data): (String, String) = conn
        .query_row("SELECT scenario, data FROM timelines", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert_eq!(scenario, "3 two-equal");
    let t: schedlab_trace::Timeline = serde_json::from_str(&data).unwrap();
    assert_eq!(t.lanes.len(), 2);
    t.check().unwrap();
}

/// Ctrl-C during a timeline: exit 1, like every other interrupted command, and no run stored.
#[test]
fn an_interrupted_timeline_exits_1_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let mut child = common::bin()
        .args(["--db", db.to_str().unwrap(), "timeline", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) for the scenario's first line, then interrupt the recording.
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    // SAFETY: our live child; SIGINT asks it to stop.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "first line: {first}");
    assert!(!db.exists() || common::text(&common::run(&db, &["runs"]).stdout).lines().count() <= 1);
}

/// An output path that cannot be written fails before anything is recorded or stored.
#[test]
fn an_unwritable_output_fails_before_recording() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    for flag in ["--svg", "--perfetto"] {
        let o = run(&db, &["timeline", "1", flag, "/nonexistent-dir/out.file"]);
        assert_eq!(o.status.code(), Some(2), "{flag}: a usage error: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains("/nonexistent-dir/out.file"), "{}", text(&o.stderr));
        assert!(!text(&o.stdout).contains("recording"), "it recorded first: {}", text(&o.stdout));
    }
    assert!(!db.exists(), "nothing was stored");
}

#[test]
fn a_probe_variant_is_recorded_by_the_kernel_and_stored() {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root {
        eprintln!("SKIPPED: timeline --probe records with the kernel's tracefs, which needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let json = dir.path().join("p.json");
    let o = run(
        &db,
        &[
            "timeline",
            "--probe",
            "sched.background_budget",
            "--params",
            "loader=os,cpus=1",
            "--window-ms",
            "200",
            "--label",
            "pt",
            "--perfetto",
            json.to_str().unwrap(),
        ],
    );
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    if o.status.code() == Some(1) && err.contains("kernel recorder cannot run here") {
        eprintln!("SKIPPED: {err}");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    // The loader thread and the frame loop (the main thread) each ran in the window.
    let lane = |name: &str| out.lines().any(|l| l.starts_with(name) && l.contains('|'));
    assert!(lane("loader") && lane("schedlab"), "{out}");
    assert!(out.contains("the probe's notes for the window:") && out.contains("frames="), "{out}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    schedlab_trace::perfetto::validate(&doc).expect("a valid trace");
    let o = run(&db, &["show", "pt"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("recorder=kernel"), "{}", text(&o.stdout));
}

#[test]
fn probe_timeline_usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    for (args, says) in [
        (&["timeline", "--probe", "sched.background"][..], "sched.background_budget"),
        (&["timeline", "--probe", "os.pipe.latency", "--params", "placement"][..], "KEY=VALUE"),
        (&["timeline", "3", "--probe", "os.pipe.latency"][..], "cannot be used"),
        (&["timeline", "3", "--params", "a=b"][..], "--probe"),
        (&["timeline", "--probe", "os.pipe.latency", "--window-ms", "5"][..], "10 to 60000"),
        // Parameters the probe does not have, given twice or none at all would be stored
        // as if they had taken effect.
        (
            &["timeline", "--probe", "os.pipe.latency", "--params", "placment=cross"][..],
            "os.pipe.latency has no parameter \"placment\"; its parameters are placement",
        ),
        (
            &[
                "timeline",
                "--probe",
                "os.pipe.latency",
                "--params",
                "placement=cross,placement=same",
            ][..],
            "placement is given twice",
        ),
        (&["timeline", "--probe", "os.pipe.latency", "--params", ""][..], "names no parameter"),
        (&["timeline", "--probe", "os.pipe.latency", "--params", " , "][..], "names no parameter"),
        (&["timeline", "--probe", "os.syscall.null", "--params", "x=1"][..], "it takes none"),
    ] {
        let o = run(&db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(says), "{args:?}: {}", text(&o.stderr));
    }
}
