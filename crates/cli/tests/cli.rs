//! The CLI end to end, through the real binary: exit codes, errors that name the input, the
//! database left intact, exports that programs can read, and Ctrl-C that loses nothing.
//! Nothing here depends on how fast anything is.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, ok, run, text};

fn smoke(db: &Path, filter: &str, label: &str) -> Output {
    let o = run(db, &["run", "--suite", "smoke", "--filter", filter, "--label", label]);
    ok(&o);
    o
}

/// Seed 001's verdicts end the run's output and `show`'s, each method with the interval of
/// its frames' tail against the unloaded run's; the raw frames are stored, not shown.
#[test]
fn a_run_of_the_background_budget_ends_with_its_verdicts_and_their_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let o = smoke(&db, "sched.background_budget", "seed001");
    for out in [text(&o.stdout), ok(&run(&db, &["show", "seed001"]))] {
        let at = out.find("seed 001's verdicts").unwrap_or_else(|| panic!("{out}"));
        let verdicts = &out[at..];
        assert!(verdicts.contains("frame p95 − unloaded [95% CI]"), "{out}");
        let rt = verdicts.lines().find(|l| l.starts_with("rt ")).unwrap_or_else(|| panic!("{out}"));
        assert!(rt.contains(" ms [") && rt.contains("] ms"), "{rt}\n{out}");
        assert!(!out.contains("frame_us_raw"), "{out}");
    }
    let json = ok(&run(&db, &["export", "seed001", "--format", "json"]));
    assert!(json.contains("frame_us_raw"), "the frames are exported");
}

/// Issue 26: `show --view hbench` reads rt.bystander's states as ratios to no runtime.
#[test]
fn the_hbench_view_puts_each_runtime_state_beside_no_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    smoke(&db, "rt.bystander", "bystander");
    let view = ok(&run(&db, &["show", "bystander", "--view", "hbench"]));
    let row = view.lines().find(|l| l.starts_with("getpid")).unwrap_or_else(|| panic!("{view}"));
    assert!(row.contains(" ns") && row.matches('.').count() >= 3, "{row}\n{view}");
    assert!(view.contains("idle ÷ none") && view.contains("inside ÷ none"), "{view}");
    // A run without the probe says what to run.
    smoke(&db, "os.syscall.null", "other");
    let view = ok(&run(&db, &["show", "other", "--view", "hbench"]));
    assert!(view.contains("schedlab run --filter rt.bystander"), "{view}");
}

#[test]
fn smoke_run_is_stored_and_can_be_shown_exported_and_compared() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let o = smoke(&db, "os.syscall", "first");
    assert!(text(&o.stdout).contains("os.syscall.null"));
    smoke(&db, "os.syscall.null,os.syscall.read", "second");

    let o = run(&db, &["runs"]);
    let runs = text(&o.stdout);
    assert!(
        runs.contains("first") && runs.contains("second") && runs.contains("complete"),
        "{runs}"
    );

    let o = run(&db, &["show", "first"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).contains("os.syscall.open_close"));

    // The summary first: the null syscall's headline, set against the previous run of this
    // host for the second run (none for the first), then the run's header.
    let shown = text(&run(&db, &["show", "second"]).stdout);
    let first_line = |name: &str| {
        shown.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}: {shown}"))
    };
    assert!(shown.starts_with("summary:\n"), "{shown}");
    assert!(first_line("null system call").contains("#1: ×"), "{shown}");
    assert!(first_line("null system call").contains("seed 002:"), "{shown}");
    assert!(shown.find("null system call").unwrap() < shown.find("run #2").unwrap());
    let shown = text(&run(&db, &["show", "first"]).stdout);
    assert!(shown.contains("null system call") && !shown.contains("previous run"), "{shown}");

    let o = run(&db, &["export", "latest", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("export is JSON");
    assert_eq!(doc["run"]["label"], "second");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let r = &results[0];
    assert_eq!(r["probe"], "os.syscall.null");
    assert!(r["params"].is_object());
    assert_eq!(r["unit"], "ns");
    assert!(r["median"].as_f64().unwrap() >= 0.0);
    for key in ["ci_low", "ci_high", "min", "max", "mean", "stddev", "p5", "p95", "cv", "outliers"]
    {
        assert!(!r[key].is_null(), "{key} missing from {r}");
    }
    assert_eq!(r["samples"].as_array().unwrap().len(), 2);
    assert!(r["samples"][0]["elapsed_ns"].as_u64().unwrap() > 0);

    let out = dir.path().join("first.csv");
    let o = run(&db, &["export", "first", "--format", "csv", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let csv = std::fs::read_to_string(&out).unwrap();
    assert!(csv.starts_with("run_id,run,probe,params,unit"));
    // The os.syscall rows: null, read, write, stat, fstat, open_close, getrusage,
    // gettimeofday (vdso, syscall), getpid and the UnixBench mix.
    assert_eq!(csv.lines().count(), 1 + 11);

    let o = run(&db, &["export", "first", "--format", "markdown"]);
    assert!(text(&o.stdout).contains("| os.syscall.stat |"));

    let o = run(&db, &["compare", "first", "second"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let cmp = text(&o.stdout);
    assert!(cmp.contains("first (baseline)") && cmp.contains("vs baseline"), "{cmp}");
    assert!(cmp.contains('×'), "{cmp}");
    // Probes only the baseline measured still get a row.
    assert!(cmp.contains("os.syscall.stat"), "{cmp}");

    let o = run(&db, &["compare", "first", "--baseline", "second", "--markdown"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("| second (baseline) |"));
}

#[test]
fn unknown_probe_pattern_is_a_usage_error_with_suggestions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let o = run(&db, &["run", "--suite", "smoke", "--filter", "os.sycall"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("os.sycall") && err.contains("did you mean os.syscall"), "{err}");
    assert!(!db.exists(), "a rejected command must not create the database");
}

#[test]
fn bad_arguments_exit_with_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    for args in [
        &["run", "--samples", "0"][..],
        &["run", "--suite", "huge"],
        &["run", "--target-ms", "abc"],
        &["run", "--label", "latest"],
        &["run", "--tmp-dir", "/nonexistent/dir"],
        &["export", "1", "--format", "xml"],
        &["frobnicate"],
    ] {
        let o = run(&db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(!text(&o.stderr).is_empty());
    }
    assert_eq!(run(&db, &["--help"]).status.code(), Some(0));
}

#[test]
fn reading_commands_explain_a_missing_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.db");
    for args in [&["runs"][..], &["show", "latest"], &["export", "latest"], &["compare", "1", "2"]]
    {
        let o = run(&db, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(text(&o.stderr).contains("schedlab run"), "{}", text(&o.stderr));
    }
    assert!(!db.exists());
}

#[test]
fn unknown_run_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    smoke(&db, "os.syscall.null", "only");
    let o = run(&db, &["show", "nosuch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no run matches \"nosuch\""));
}

#[test]
fn a_foreign_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("thesis.txt");
    std::fs::write(&db, "chapter one\n").unwrap();
    for args in [&["run", "--suite", "smoke", "--filter", "os.syscall.null"][..], &["runs"]] {
        let o = run(&db, args);
        assert_eq!(o.status.code(), Some(1));
        assert!(text(&o.stderr).contains("not a schedlab database"), "{}", text(&o.stderr));
    }
    assert_eq!(std::fs::read_to_string(&db).unwrap(), "chapter one\n");
}

#[test]
fn an_unwritable_database_location_is_a_clear_failure() {
    // Below a regular file nothing can be created, even as root.
    let o = run(
        Path::new("/dev/null/schedlab/results.db"),
        &["run", "--suite", "smoke", "--filter", "os.syscall.null"],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("/dev/null/schedlab"), "{err}");
}

#[test]
fn a_corrupt_database_is_reported_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    smoke(&db, "os.syscall", "ok");
    let mut bytes = std::fs::read(&db).unwrap();
    for b in bytes.iter_mut().skip(100) {
        *b = 0x5A;
    }
    std::fs::write(&db, &bytes).unwrap();
    for args in
        [&["show", "latest"][..], &["run", "--suite", "smoke", "--filter", "os.syscall.null"]]
    {
        let o = run(&db, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(text(&o.stderr).contains(db.to_str().unwrap()), "{}", text(&o.stderr));
    }
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "the file was modified");
}

#[test]
fn the_database_path_comes_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("env.db");
    let o = bin()
        .env("SCHEDLAB_DB", &db)
        .args(["run", "--suite", "smoke", "--filter", "os.syscall.null"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(db.exists());
    let xdg = dir.path().join("xdg");
    let o = bin()
        .env("XDG_DATA_HOME", &xdg)
        .args(["run", "--suite", "smoke", "--filter", "os.syscall.null"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(xdg.join("schedlab/results.db").exists());
}

#[test]
fn the_exec_helper_mode_exits_at_once() {
    let o = bin().arg("__exec-helper").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stdout.is_empty() && o.stderr.is_empty());
}

#[test]
fn the_echo_probe_runs_its_client_as_this_binary_and_stores_every_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    smoke(&db, "threads.net.echo", "echo");
    let o = run(&db, &["export", "echo", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("export is JSON");
    let results = doc["results"].as_array().unwrap();
    let backends: Vec<String> =
        results.iter().map(|r| r["params"]["backend"].as_str().unwrap().to_string()).collect();
    assert_eq!(backends, ["os", "rt", "rt", "tokio"], "{doc}");
    assert!(results.iter().any(|r| r["status"] == "ok"), "nothing measured: {doc}");
    for r in results {
        // ok, or skipped for a reason of this machine (a hard descriptor limit), never failed:
        // a failure is the client entry not answering or an echo that did not match.
        assert_ne!(r["status"], "failed", "{r}");
        if r["status"] == "ok" {
            assert!(r["median"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
}

#[test]
fn docs_probes_md_is_generated_from_the_catalog() {
    let o = bin().args(["list", "--markdown"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/PROBES.md");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text(&o.stdout),
        "docs/PROBES.md is out of date: run `cargo run -p schedlab -- list --markdown > docs/PROBES.md`"
    );
}

/// Ctrl-C in the middle of a run: what was measured stays, the run is marked interrupted,
/// the exit code says failure, and no helper process survives.
#[test]
fn sigint_keeps_what_was_measured_and_marks_the_run_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // Long enough per probe that the signal lands mid-run: 40 samples of 20 ms each.
    let mut child = bin()
        .arg("--db")
        .arg(&db)
        .args([
            "run",
            "--suite",
            "full",
            "--filter",
            "os.syscall,os.pipe.latency",
            "--samples",
            "40",
            "--target-ms",
            "20",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Wait (bounded) until the first result is committed.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let count =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .and_then(|c| {
                    c.query_row("SELECT count(*) FROM results", [], |r| r.get::<_, i64>(0))
                })
                .unwrap_or(0);
        if count >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "no result was stored within a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: `pid` is our live child; SIGINT asks it to stop.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("interrupted"), "{err}");

    let o = run(&db, &["runs"]);
    assert!(text(&o.stdout).contains("interrupted"), "{}", text(&o.stdout));
    let o = run(&db, &["export", "latest"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = doc["results"].as_array().unwrap();
    assert!(results.iter().any(|r| r["status"] == "ok"), "measured results survive");
    assert!(results.len() < 7, "the run stopped early");

    // No process of ours is left: nothing has the dead run's pid as parent.
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let ppid: i32 = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
        assert_ne!(ppid, pid, "a helper process of the interrupted run survived: {stat}");
    }
}

#[test]
fn labels_with_control_characters_or_too_long_are_refused_at_the_door() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let long = "x".repeat(1000);
    for label in [
        "two\nlines",
        "esc\u{1b}[31mred",
        "tab\there",
        long.as_str(),
        "cod\u{202e}txt.exe",
        "a\u{2066}b",
        "\u{200b}\u{200b}",
        "\u{3164}",
    ] {
        for cmd in [
            vec!["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label", label],
            vec!["mem", "--suite", "quick", "--label", label],
            vec!["timeline", "1", "--label", label],
        ] {
            let o = run(&db, &cmd);
            assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", text(&o.stderr));
            assert!(text(&o.stderr).contains("--label"), "{cmd:?}: {}", text(&o.stderr));
        }
    }
    // Nothing was measured or stored.
    assert!(!db.exists() || text(&run(&db, &["runs"]).stdout).lines().count() <= 1);
}

#[test]
fn a_since_date_that_does_not_exist_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    schedlab_store::Store::open(&db).unwrap();
    let other = dir.path().join("other.db");
    schedlab_store::Store::open(&other).unwrap();
    let other = other.to_str().unwrap();
    for since in ["2026-13-45", "2026-02-30", "2026-11-20T24:00:00Z", "yesterday"] {
        for cmd in [
            vec!["runs", "--since", since],
            vec!["pull", "--from", other, "--since", since],
            vec!["import", other, "--since", since],
        ] {
            let o = run(&db, &cmd);
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd:?}: {err}");
            assert!(err.contains(&format!("--since \"{since}\" is not a date")), "{cmd:?}: {err}");
        }
    }
    assert!(text(&run(&db, &["runs", "--since", "2024-02-29"]).stdout).contains("no runs yet"));
}

#[test]
fn an_empty_filter_is_refused_by_run_and_list_alike() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("f.db");
    for cmd in [vec!["run", "--suite", "smoke", "--filter", ""], vec!["list", "--filter", " "]] {
        let o = run(&db, &cmd);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        assert!(text(&o.stderr).contains("empty filter"), "{cmd:?}: {}", text(&o.stderr));
    }
    assert!(!db.exists(), "nothing was stored");
}

/// Shell completions and the man page come from the same argument definitions as the
/// parser, need no database, and an unknown shell is a usage error.
#[test]
fn completions_and_the_man_page_are_generated_from_the_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never-created.db");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = run(&db, &["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", text(&o.stderr));
        let script = text(&o.stdout);
        for sub in ["run", "compare", "timeline", "completions"] {
            assert!(script.contains(sub), "{shell} completion lacks `{sub}`");
        }
    }
    let o = run(&db, &["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = text(&o.stdout);
    assert!(page.contains(".TH schedlab 1") && page.contains(".SH NAME"), "{page}");
    assert!(page.contains("timeline"), "the man page lists the subcommands");
    assert_eq!(run(&db, &["completions", "nosuch"]).status.code(), Some(2));
    assert!(!db.exists(), "completions or man touched the database");
}

#[test]
fn report_writes_one_safe_page_for_runs_and_fails_early_on_a_bad_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let evil = "<script>alert(1)</script>";
    let first = dir.path().join("first.html");
    let o = run(
        &db,
        &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label", evil, "--report"],
    );
    // `--report` needs its FILE: a usage error, nothing measured.
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let o = run(
        &db,
        &[
            "run",
            "--suite",
            "smoke",
            "--filter",
            "os.syscall.null",
            "--label",
            evil,
            "--report",
            first.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&first).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains(evil) && page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("os.syscall.null") && page.contains("<i data-s=\""), "a plot code");

    smoke(&db, "os.syscall.null", "second");
    let both = dir.path().join("both.html");
    let o = run(&db, &["report", "1", "second", "-o", both.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&both).unwrap();
    assert!(page.contains("id=\"comparison\"") && page.contains("(the baseline)"));

    // Unknown runs are usage errors; an unwritable file fails before any work.
    let o = run(&db, &["report", "nope", "-o", both.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(
        &db,
        &["run", "--suite", "smoke", "--report", "/dev/null/x.html", "--filter", "os.syscall"],
    );
    assert_eq!(o.status.code(), Some(2), "a usage error: {}", text(&o.stderr));
    assert!(text(&o.stderr).contains("/dev/null/x.html"));
    let o = run(&db, &["runs"]);
    assert_eq!(text(&o.stdout).matches("complete").count(), 2, "no run was started");
}

/// `show --view unixbench|lmbench` reads a run in those suites' units and names.
#[test]
fn show_views_read_a_run_as_unixbench_and_lmbench_report_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    smoke(&db, "os.syscall.mix,os.syscall.null,os.proc.fork_exit", "views");
    let o = run(&db, &["show", "views", "--view", "unixbench"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let ub = text(&o.stdout);
    assert!(ub.contains("System Call Overhead") && ub.contains("Process Creation"), "{ub}");
    assert!(ub.contains("Partial Index Score") && ub.contains("SPARCstation 20-61"), "{ub}");
    let o = run(&db, &["show", "views", "--view", "lmbench"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lm = text(&o.stdout);
    assert!(lm.contains("simple syscall") && lm.contains("process fork+exit"), "{lm}");
    assert!(!lm.contains("System Call Overhead"), "{lm}");
    let o = run(&db, &["show", "views", "--view", "nonsense"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn ci_target_takes_samples_up_to_the_bound_and_bad_values_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // An interval of ±0.0001% is out of reach: the result takes the bound's 7 samples.
    let o = run(
        &db,
        &[
            "run",
            "--filter",
            "os.syscall.null",
            "--samples",
            "3",
            "--target-ms",
            "1",
            "--ci-target",
            "0.0001",
            "--max-samples",
            "7",
            "--label",
            "adaptive",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(&db, &["export", "adaptive", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &doc["results"][0];
    assert_eq!(r["samples"].as_array().unwrap().len(), 7, "{r}");
    for args in [
        &["run", "--filter", "os.syscall.null", "--ci-target", "0"][..],
        &["run", "--filter", "os.syscall.null", "--ci-target", "150"][..],
        &["run", "--filter", "os.syscall.null", "--max-samples", "5"][..],
        &[
            "run",
            "--filter",
            "os.syscall.null",
            "--samples",
            "9",
            "--ci-target",
            "2",
            "--max-samples",
            "5",
        ][..],
    ] {
        let o = run(&db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    }
}

#[test]
fn rounds_keep_one_result_per_probe_from_every_round() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let o = run(
        &db,
        &[
            "run",
            "--suite",
            "smoke",
            "--filter",
            "os.syscall.null,os.signal.install",
            "--rounds",
            "2",
            "--label",
            "r2",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(&db, &["export", "r2", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "one result per probe, not per round");
    for r in results {
        assert_eq!(r["samples"].as_array().unwrap().len(), 4, "both rounds' samples: {r}");
        assert_eq!(r["notes"]["rounds"], "2/2", "{r}");
    }
    let o = run(&db, &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--rounds", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

#[test]
fn the_study_stores_wakeups_and_crosscheck_rows_in_one_run_and_one_page() {
    // The study narrowed to one seed experiment (every variant, two samples each), with no
    // reference tool on PATH: its cyclictest rows are stored as skipped with the reason,
    // beside the probe's own results. (Seed 001's verdicts have their unit tests; its probe
    // takes too long for this one.)
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let page = dir.path().join("study.html");
    let empty = dir.path().join("bin");
    std::fs::create_dir(&empty).unwrap();
    let o = bin()
        .env("PATH", &empty)
        .arg("--db")
        .arg(&db)
        .args(["run", "--suite", "study", "--samples", "2", "--target-ms", "1"])
        .args(["--filter", "sched.wakeup_latency", "--report"])
        .arg(&page)
        .output()
        .unwrap();
    let stdout = ok(&o);
    assert!(stdout.contains("timelines: none with --filter"), "{stdout}");
    assert!(stdout.contains("cyclictest not found on PATH"), "{stdout}");
    let shown = text(&run(&db, &["show", "latest"]).stdout);
    assert!(shown.contains("study suite") || shown.contains("study"), "{shown}");
    assert!(shown.contains("wake-up latency (sched.wakeup_latency)"), "{shown}");
    assert!(shown.contains("\ncrosscheck:\n"), "{shown}");
    let html = std::fs::read_to_string(&page).unwrap();
    for part in ["Wake-up latency", "id=\"crosscheck\"", "cyclictest.fifo"] {
        assert!(html.contains(part), "{part}");
    }
}
