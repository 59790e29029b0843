//! `schedlab exec`: the program's exit status passed on (128+N for a signal), 127 for a
//! program that cannot be run, 2 for usage errors, the library found without configuration
//! and added to an existing LD_PRELOAD, its private cache, the SCHEDLAB_RT_* settings and
//! `--trace`'s Perfetto document.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use common::{exec, ok, output_within, text};

const LIMIT: Duration = Duration::from_secs(120);

fn sh(script: &str) -> std::process::Output {
    output_within(exec().args(["--", "sh", "-c", script]), LIMIT)
}

#[test]
fn the_programs_exit_status_is_passed_on() {
    assert_eq!(sh("exit 0").status.code(), Some(0));
    assert_eq!(sh("exit 7").status.code(), Some(7));
    assert_eq!(sh("exit 255").status.code(), Some(255));
}

#[test]
fn a_program_killed_by_a_signal_exits_128_plus_the_signal() {
    assert_eq!(sh("kill -TERM $$").status.code(), Some(128 + 15));
    assert_eq!(sh("kill -KILL $$").status.code(), Some(128 + 9));
}

#[test]
fn a_program_that_cannot_be_run_exits_127_with_a_message() {
    let o = output_within(exec().args(["--", "no-such-program-schedlab"]), LIMIT);
    assert_eq!(o.status.code(), Some(127));
    let err = text(&o.stderr);
    assert!(err.contains("cannot run no-such-program-schedlab") && err.contains("PATH"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("not-executable");
    std::fs::write(&f, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    // No execute bit at all: refused even to root.
    let o = output_within(exec().arg("--").arg(&f), LIMIT);
    assert_eq!(o.status.code(), Some(127), "{}", text(&o.stderr));
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["exec"][..],
        &["exec", "--processors", "0", "--", "true"],
        &["exec", "--processors", "65", "--", "true"],
        &["exec", "--quantum", "0", "--", "true"],
        &["exec", "--quantum", "5", "--no-preempt", "--", "true"],
        &["exec", "--trace", "/no/such/dir/t.json", "--", "true"],
    ] {
        let o = output_within(common::bin().args(args), LIMIT);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    }
}

#[test]
fn the_library_is_preloaded_before_an_existing_ld_preload_with_the_settings() {
    let o = output_within(
        exec()
            .env("LD_PRELOAD", "")
            .args(["--processors", "3", "--quantum", "7", "--", "sh", "-c"])
            .arg("echo \"$LD_PRELOAD|$SCHEDLAB_RT_PROCESSORS|$SCHEDLAB_RT_QUANTUM_MS|${SCHEDLAB_RT_PREEMPT-}\""),
        LIMIT,
    );
    let out = ok(&o);
    let fields: Vec<&str> = out.trim().split('|').collect();
    assert!(fields[0].contains("libschedlab_pthread-") && fields[0].ends_with(".so"), "{out}");
    assert_eq!(&fields[1..], ["3", "7", ""]);
    let lib = fields[0].to_string();
    // The cache: a private directory, the file named after its content.
    let dir = std::path::Path::new(&lib).parent().unwrap();
    let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", dir.display());

    // An existing LD_PRELOAD stays, after ours. (A library that does not exist only makes
    // the loader warn.)
    let o = output_within(
        exec().env("LD_PRELOAD", "/usr/lib/other-preload.so").args([
            "--no-preempt",
            "--",
            "sh",
            "-c",
            "echo \"$LD_PRELOAD|$SCHEDLAB_RT_PREEMPT\"",
        ]),
        LIMIT,
    );
    assert_eq!(ok(&o).trim(), format!("{lib}:/usr/lib/other-preload.so|0"));
}

#[test]
fn schedlab_pthread_lib_overrides_the_embedded_library() {
    let o = output_within(
        exec().env("SCHEDLAB_PTHREAD_LIB", "/no/such/lib.so").args(["--", "true"]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("SCHEDLAB_PTHREAD_LIB=/no/such/lib.so"),
        "{}",
        text(&o.stderr)
    );
    // The cached copy, named explicitly, is used as it is.
    let first = ok(&output_within(exec().args(["--", "sh", "-c", "echo $LD_PRELOAD"]), LIMIT));
    let o = output_within(
        exec().env("SCHEDLAB_PTHREAD_LIB", first.trim()).args([
            "--",
            "sh",
            "-c",
            "echo $LD_PRELOAD",
        ]),
        LIMIT,
    );
    assert_eq!(ok(&o).trim(), first.trim());
}

#[test]
fn an_unwritable_cache_falls_back_to_a_private_temporary_copy() {
    let o = output_within(
        exec()
            .env("XDG_CACHE_HOME", "/proc/no-cache-here")
            .env("HOME", "/proc/no-home-here")
            .env_remove("XDG_RUNTIME_DIR")
            .args(["--", "sh", "-c", "echo $LD_PRELOAD; test -r $LD_PRELOAD"]),
        LIMIT,
    );
    let lib = ok(&o);
    assert!(lib.contains("schedlab-exec-"), "a mkdtemp directory: {lib}");
    assert!(!std::path::Path::new(lib.trim()).exists(), "removed after the program ended");
}

/// A C program with threads that block in the kernel and compute, traced.
#[test]
fn trace_writes_the_user_threads_and_upcalls_as_perfetto_json() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("t.c");
    std::fs::write(
        &src,
        r#"
#include <pthread.h>
#include <unistd.h>
static void *run(void *a) {
    volatile unsigned long x = 0;
    for (int i = 0; i < 20; i++) {
        for (int k = 0; k < 200000; k++) x += k;
        usleep(200);
    }
    return (void *)a;
}
int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, run, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    return 0;
}
"#,
    )
    .unwrap();
    let prog = dir.path().join("t");
    match Command::new("cc").args(["-O1", "-pthread", "-o"]).arg(&prog).arg(&src).output() {
        Err(e) => {
            eprintln!("skipped: no C compiler (cc: {e})");
            return;
        }
        Ok(o) => assert!(o.status.success(), "{}", text(&o.stderr)),
    }
    let json = dir.path().join("trace.json");
    let o = output_within(
        exec().args(["--processors", "2", "--trace"]).arg(&json).arg("--").arg(&prog),
        LIMIT,
    );
    ok(&o);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("vp0 ")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("vp1 ")), "{names:?}");
    let users = names.iter().filter(|n| n.contains("user thread")).count();
    assert_eq!(users, 4, "{names:?}");
    assert!(events.iter().any(|e| e["ph"] == "X"), "slices of user threads on processors");
    assert!(
        events.iter().any(|e| e["ph"] == "i" && e["name"] == "new processor"),
        "the upcalls are marks"
    );
    // A program that starts no thread: an empty trace, and it says so.
    let o = output_within(exec().arg("--trace").arg(&json).args(["--", "true"]), LIMIT);
    assert!(text(&o.stderr).contains("no scheduling events"), "{}", text(&o.stderr));
}

/// `exit` from a user thread with a cancellation pending, traced: the trace is written with
/// the system calls themselves, not the library's `open`/`write`/`close`, which are
/// cancellation points — through them the thread was cancelled inside `exit`, its joiner got
/// `PTHREAD_CANCELED`, and the program exited 0 with an empty trace instead of 3.
#[test]
fn exit_with_a_cancellation_pending_keeps_its_status_and_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("e.c");
    std::fs::write(
        &src,
        r#"
#include <pthread.h>
#include <stdlib.h>
static void *run(void *a) {
    (void)a;
    pthread_cancel(pthread_self()); /* pending: exit is no cancellation point */
    exit(3);
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, run, 0);
    pthread_join(t, 0);
    return 0;
}
"#,
    )
    .unwrap();
    let prog = dir.path().join("e");
    match Command::new("cc").args(["-O1", "-pthread", "-o"]).arg(&prog).arg(&src).output() {
        Err(e) => {
            eprintln!("skipped: no C compiler (cc: {e})");
            return;
        }
        Ok(o) => assert!(o.status.success(), "{}", text(&o.stderr)),
    }
    let json = dir.path().join("trace.json");
    let o = output_within(exec().arg("--trace").arg(&json).arg("--").arg(&prog), LIMIT);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(!doc["traceEvents"].as_array().unwrap().is_empty(), "the trace was written");
}
