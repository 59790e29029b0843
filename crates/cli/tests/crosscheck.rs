//! `schedlab crosscheck` end to end: fake reference tools (small scripts on a temporary PATH
//! that print what the real ones print) driving whole crosschecks through the binary into a
//! temporary database; the real perf when it is installed. No timing is asserted: the probe
//! side measures for real, so only the shape of the results is checked.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::text;

/// A temporary directory removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("schedlab-cc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn script(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A perf that answers `bench syscall basic` and `bench sched pipe` as perf 6.1 does, with
/// the figures given (µs per op).
fn fake_perf(dir: &Path, syscall_us: &str, pipe_us: &str) {
    script(
        dir,
        "perf",
        &format!(
            r#"case "$2 $3" in
  "syscall basic") printf '# Running %s benchmark:\n# Executed 2000000 getppid() calls\n     Total time: 0.2 [sec]\n\n       {syscall_us} usecs/op\n        1 ops/sec\n' "'syscall/basic'" ;;
  "sched pipe") printf '# Running %s benchmark:\n# Executed 100000 pipe operations between two processes\n\n     Total time: 0.2 [sec]\n\n       {pipe_us} usecs/op\n         1 ops/sec\n' "'sched/pipe'" ;;
  *) echo "perf: unknown $*" >&2; exit 129 ;;
esac"#
        ),
    );
}

fn crosscheck(db: &Path, path: &Path, tmp: &Path, args: &[&str]) -> Output {
    common::bin()
        .env("PATH", path)
        .arg("--db")
        .arg(db)
        .args(["crosscheck", "--samples", "3", "--tmp-dir"])
        .arg(tmp)
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn a_fake_perf_drives_a_whole_crosscheck_into_the_database() {
    let d = Dir::new("fake");
    fake_perf(&d.0, "0.100000", "2.000000");
    let db = d.0.join("cc.db");
    let o =
        crosscheck(&db, &d.0, &d.0, &["--filter", "perf.syscall,perf.sched.pipe", "--pairs", "2"]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for row in [
        "perf.syscall.basic",
        "perf.sched.pipe ",
        "perf.sched.pipe.threads",
        "perf.sched.pipe.unpinned",
    ] {
        assert!(stdout.contains(row), "{row} missing:\n{stdout}");
    }
    // The fake's figures are read and converted into the probe's unit.
    assert!(stdout.contains("100.0 ns"), "{stdout}");
    assert!(stdout.contains("2.000 µs"), "{stdout}");
    assert!(stdout.contains("ratio = schedlab ÷ tool"), "{stdout}");

    // Stored as a run of suite crosscheck, shown as the crosscheck table.
    let show = common::run(&db, &["show", "latest"]);
    let shown = text(&show.stdout);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));
    assert!(shown.contains("suite crosscheck, complete"), "{shown}");
    assert!(shown.contains("pair ratios") && shown.contains("perf.syscall.basic"), "{shown}");

    // One result per row: the probe's samples of both pairs, the tool's in the notes.
    let json = common::run(&db, &["export", "latest", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "{v}");
    let null = results
        .iter()
        .find(|r| r["params"]["vs"] == "perf.syscall.basic")
        .expect("the syscall row");
    assert_eq!(null["probe"], "os.syscall.null");
    assert_eq!(null["samples"].as_array().unwrap().len(), 6, "3 samples × 2 pairs");
    let notes = &null["notes"];
    assert_eq!(notes["tool_values"], "100.0 ns | 100.0 ns");
    assert_eq!(notes["pairs"], "2/2");
    assert_eq!(notes["pair_ratios"].as_str().unwrap().split(' ').count(), 2);
    let ratio: f64 = notes["ratio"].as_str().unwrap().parse().unwrap();
    assert!(ratio.is_finite() && ratio > 0.0, "{ratio}");
    assert!(["agrees", "DISAGREES"].contains(&notes["verdict"].as_str().unwrap()), "{notes}");
    assert!(notes["command"].as_str().unwrap().starts_with("perf bench syscall basic"), "{notes}");
}

#[test]
fn absent_tools_are_skipped_and_a_failing_tool_fails_only_its_row() {
    let d = Dir::new("fail");
    // perf that fails on syscall basic and prints nothing readable for sched pipe.
    script(
        &d.0,
        "perf",
        r#"case "$2" in syscall) echo "perf: no such benchmark" >&2; exit 1 ;; *) echo "something else" ;; esac"#,
    );
    let db = d.0.join("cc.db");
    let o = crosscheck(
        &db,
        &d.0,
        &d.0,
        &[
            "--filter",
            "perf.syscall,perf.sched.pipe,lmbench.lat_syscall.null,cyclictest",
            "--pairs",
            "1",
        ],
    );
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "a failed row exits 1:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("perf.syscall.basic: FAILED: perf: exit status 1: perf: no such benchmark"),
        "{stdout}"
    );
    assert!(stdout.contains("perf.sched.pipe: FAILED: perf's output: expected a `N usecs/op` line, got: something else"), "{stdout}");
    assert!(
        stdout.contains("lmbench.lat_syscall.null: skipped: lmbench lat_syscall not found on PATH"),
        "{stdout}"
    );
    // The three cyclictest rows (SCHED_OTHER, FIFO, dma0), each skipped with the reason.
    assert!(stdout.contains("cyclictest: skipped: cyclictest not found on PATH"), "{stdout}");
    assert!(stdout.contains("cyclictest.fifo: skipped: cyclictest not found"), "{stdout}");
    assert!(
        stdout.contains("0 agree within 15%") && stdout.contains("4 skipped, 4 failed"),
        "{stdout}"
    );
}

#[test]
fn bad_patterns_and_directories_are_usage_errors() {
    let d = Dir::new("usage");
    let db = d.0.join("cc.db");
    let o = crosscheck(&db, &d.0, &d.0, &["--filter", "lmbench.lat_pip"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("did you mean lmbench.lat_pipe"), "{}", text(&o.stderr));
    let o = crosscheck(&db, &d.0, &d.0, &["--lmbench-dir", "/nonexistent/lmbench"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--lmbench-dir /nonexistent/lmbench is not a directory"));
    assert!(!db.exists(), "nothing was stored");
}

#[test]
fn list_shows_each_row_and_where_its_tool_is() {
    let d = Dir::new("list");
    fake_perf(&d.0, "0.1", "2.0");
    let db = d.0.join("cc.db");
    let o = crosscheck(&db, &d.0, &d.0, &["--list", "--filter", "perf.syscall,lmbench.lat_pipe"]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(stdout.contains(&format!("{}", d.0.join("perf").display())), "{stdout}");
    assert!(stdout.contains("skipped: lmbench lat_pipe not found on PATH"), "{stdout}");
    assert!(!db.exists(), "--list measures and stores nothing");
}

#[test]
fn ctrl_c_kills_the_running_tool_and_keeps_the_run_interrupted() {
    let d = Dir::new("intr");
    let marker = d.0.join("started");
    // A perf that says it started, then hangs.
    script(&d.0, "perf", &format!("echo $$ > {}\nexec /bin/sleep 60", marker.display()));
    let db = d.0.join("cc.db");
    let child = common::bin()
        .env("PATH", &d.0)
        .arg("--db")
        .arg(&db)
        .args(["crosscheck", "--samples", "2", "--pairs", "1", "--filter", "perf.syscall"])
        .arg("--tmp-dir")
        .arg(&d.0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    while !marker.exists() || std::fs::read_to_string(&marker).unwrap_or_default().trim().is_empty()
    {
        // The only row is the fake perf's: crosscheck either starts it or ends.
        if let Some(status) = child.try_wait().unwrap() {
            let o = child.wait_with_output().unwrap();
            panic!(
                "crosscheck ended ({status}) without starting the fake perf:\n{}\n{}",
                text(&o.stdout),
                text(&o.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let tool_pid = std::fs::read_to_string(&marker).unwrap().trim().to_string();
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}\n{}", text(&o.stdout), text(&o.stderr));
    assert!(text(&o.stderr).contains("interrupted"), "{}", text(&o.stderr));
    assert!(!Path::new(&format!("/proc/{tool_pid}")).exists(), "the tool {tool_pid} was killed");
    let runs = text(&common::run(&db, &["runs"]).stdout);
    assert!(runs.contains("interrupted"), "{runs}");
}

#[test]
fn the_real_perf_agrees_or_says_why() {
    let Some(perf) = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("perf")).find(|p| p.is_file()))
    else {
        eprintln!("skipped: perf is not installed (Debian: linux-perf)");
        return;
    };
    let probe = Command::new(&perf).args(["bench", "syscall", "basic", "-l", "1000"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: {} cannot run `perf bench` here", perf.display());
        return;
    }
    let d = Dir::new("real");
    let db = d.0.join("cc.db");
    let path = std::env::var_os("PATH").unwrap();
    let o = crosscheck(
        &db,
        Path::new(&path),
        &d.0,
        &["--filter", "perf.syscall.basic", "--pairs", "1"],
    );
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    let json = common::run(&db, &["export", "latest", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let notes = &v["results"][0]["notes"];
    let ratio: f64 = notes["ratio"].as_str().expect("a ratio").parse().unwrap();
    assert!(ratio.is_finite() && ratio > 0.0, "{notes}");
    assert!(notes["tool_median"].as_str().unwrap().ends_with("ns"), "{notes}");
}
