//! `schedlab doctor` through the real binary: it prints every finding on a terminal, in
//! Markdown and as JSON, exits 0, and its findings are stored with runs so that `show` prints
//! them and `compare` names the ones that differ.

mod common;

use std::os::unix::process::CommandExt;

use common::{bin, run, text};

const KEYS: [&str; 17] = [
    "scheduler",
    "sched_ext",
    "hz",
    "nohz",
    "preempt",
    "timer_slack",
    "rt_throttling",
    "fair_server",
    "cpuidle",
    "halt_poll",
    "smt",
    "hypervisor",
    "cgroup",
    "tracefs",
    "perf",
    "cap_sys_nice",
    "clocksource",
];

#[test]
fn doctor_prints_every_finding_and_exits_0() {
    let o = bin().arg("doctor").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for name in ["fair scheduler", "timer slack", "RT throttling", "cpuidle", "clocksource"] {
        assert!(out.contains(name), "no {name} in:\n{out}");
    }
    assert!(out.contains("what each changes:"), "{out}");

    let o = bin().args(["doctor", "--markdown"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let md = text(&o.stdout);
    assert!(md.contains("| finding | value | read from | what it changes |"), "{md}");
    assert_eq!(md.lines().filter(|l| l.starts_with("| ")).count(), 2 + KEYS.len(), "{md}");
}

#[test]
fn doctor_json_has_every_key_with_a_value_or_a_reason() {
    let o = bin().args(["doctor", "--json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert!(v["host"].is_string() && v["kernel"].is_string() && v["schedlab"].is_string());
    let findings = v["findings"].as_array().expect("a findings array");
    let keys: Vec<&str> = findings.iter().map(|f| f["key"].as_str().unwrap()).collect();
    assert_eq!(keys, KEYS);
    for f in findings {
        let r = &f["reading"];
        let known = r["known"].as_str().is_some_and(|s| !s.is_empty());
        let unknown = r["unknown"].as_str().is_some_and(|s| !s.is_empty());
        assert!(known != unknown, "one of known/unknown, non-empty: {f}");
        assert!(f["source"].as_str().is_some_and(|s| !s.is_empty()), "{f}");
        assert!(f["changes"].as_str().is_some_and(|s| !s.is_empty()), "{f}");
    }
}

#[test]
fn doctor_refuses_markdown_and_json_together() {
    let o = bin().args(["doctor", "--json", "--markdown"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn runs_store_the_findings_and_compare_names_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let smoke = ["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label"];
    let o = run(&db, &[&smoke[..], &["default-slack"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // The second run inherits a timer slack of 1 ns from its parent: a real difference in
    // what doctor reads, not an edited record.
    let mut cmd = bin();
    cmd.arg("--db").arg(&db).args(smoke).arg("slack-1ns");
    // SAFETY: the closure runs in the forked child before exec and only calls prctl, which
    // is async-signal-safe and takes no pointers.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));

    let o = run(&db, &["show", "slack-1ns"]);
    assert_eq!(o.status.code(), Some(0));
    let shown = text(&o.stdout);
    assert!(shown.contains("(schedlab doctor)") && shown.contains("1 ns"), "{shown}");

    let o = run(&db, &["compare", "default-slack", "slack-1ns"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("slack-1ns differs from default-slack:"))
        .unwrap_or_else(|| panic!("no differs line in:\n{out}"));
    let (_, diffs) = line.split_once(": ").unwrap();
    assert!(
        // slack-1ns's own value first, the baseline's after.
        diffs.split("; ").any(|d| d.starts_with("timer slack 1 ns, not ") && d.ends_with(" ns")),
        "{line}"
    );
}
