//! Interruptions tell the truth: however a run ends before it finishes — a signal (SIGHUP,
//! two Ctrl-C, SIGKILL), a lock held too long, a full disk — it is listed, shown and copied as
//! interrupted with the real reason, never left `running` nor called a crash when it was not.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use common::{ok, run};

/// A run of `filter` in `suite` long enough to be caught in the middle: every sample takes
/// `target_ms`.
fn long_run(db: &Path, suite: &str, filter: &str, target_ms: &str) -> Child {
    common::long_run(db, suite, filter, &["--target-ms", target_ms]).spawn().unwrap()
}

fn count(db: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| c.query_row(sql, [], |r| r.get::<_, i64>(0)))
        .unwrap_or(0)
}

/// Waits (bounded: a hang guard) until `sql` counts at least one row.
fn wait_for(db: &Path, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while count(db, sql) < 1 {
        assert!(Instant::now() < deadline, "nothing matched {sql} within two minutes");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: the pid is our live child (not yet waited for); kill only sends a signal.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Waits for the child, returning its exit code and standard error.
fn finish(mut child: Child) -> (Option<i32>, String) {
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status.code(), err)
}

/// The run's status and reason as stored (not as a command shows them).
fn stored(db: &Path) -> (String, Option<String>) {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    c.query_row("SELECT status, reason FROM runs WHERE label = 'long'", [], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .unwrap()
}

/// The line of `runs` for the long run and the reasons under the table.
fn listed(db: &Path) -> String {
    ok(&run(db, &["runs"]))
}

#[test]
fn sighup_stops_a_run_like_sigterm_and_names_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let child = long_run(&db, "smoke", "os.syscall", "10");
    wait_for(&db, "SELECT count(*) FROM results");
    signal(&child, libc::SIGHUP);
    let (code, err) = finish(child);
    assert_eq!(code, Some(1), "a stopped run exits 1, not killed by the signal: {err}");
    let (status, reason) = stored(&db);
    assert_eq!(status, "interrupted", "{err}");
    assert!(reason.as_deref().is_some_and(|r| r.contains("SIGHUP")), "{reason:?}");
    let runs = listed(&db);
    assert!(runs.contains("interrupted") && runs.contains("SIGHUP"), "{runs}");
}

#[test]
fn a_second_ctrl_c_ends_at_once_with_the_run_marked_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // Calls of 3 s of a loop that never looks at the flag: the first Ctrl-C waits for the end
    // of the call the probe is in when the second one comes. (Apart, so that the kernel does
    // not merge them into one.)
    let child = long_run(&db, "quick", "os.syscall.null", "3000");
    wait_for(&db, "SELECT count(*) FROM runs");
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, libc::SIGINT);
    let (code, err) = finish(child);
    assert_eq!(code, Some(130), "{err}");
    let (status, reason) = stored(&db);
    assert_eq!(status, "interrupted", "marked before the process ended: {err}");
    let reason = reason.unwrap_or_default();
    assert!(reason.contains("second SIGINT"), "{reason}");
    assert!(err.contains("stopped at once") && err.contains("marked interrupted"), "{err}");
    let shown = ok(&run(&db, &["show", "long"]));
    assert!(shown.contains("interrupted") && shown.contains("second SIGINT"), "{shown}");
}

#[test]
fn a_killed_run_is_shown_and_pushed_as_ended_without_finishing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let child = long_run(&db, "smoke", "os.syscall", "10");
    wait_for(&db, "SELECT count(*) FROM results");
    signal(&child, libc::SIGKILL);
    let (code, _) = finish(child);
    assert_eq!(code, None, "killed by the signal");
    // Reading commands see it for what it is at once.
    let runs = listed(&db);
    assert!(runs.contains("interrupted"), "{runs}");
    assert!(runs.contains(schedlab_store::ENDED_UNFINISHED), "{runs}");
    let shown = ok(&run(&db, &["show", "long"]));
    assert!(shown.contains("interrupted") && shown.contains("killed or crashed"), "{shown}");
    // push copies it, as interrupted, with what it measured.
    let fleet = dir.path().join("fleet.db");
    let pushed = ok(&run(&db, &["push", "--to", fleet.to_str().unwrap()]));
    assert!(pushed.contains("1 copied") && !pushed.contains("still running"), "{pushed}");
    let there = listed(&fleet);
    assert!(there.contains("interrupted") && there.contains("killed or crashed"), "{there}");
    assert!(count(&fleet, "SELECT count(*) FROM results WHERE status = 'ok'") >= 1, "{there}");
}

/// The lock is held past the run's busy timeout and past the time it takes to try marking
/// the run: the run cannot write its own end, yet the reason is not lost.
#[test]
fn a_lock_held_past_the_end_of_the_run_still_gives_the_real_reason() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let child = long_run(&db, "smoke", "os.syscall", "10");
    wait_for(&db, "SELECT count(*) FROM results");
    let locker = rusqlite::Connection::open(&db).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (code, err) = finish(child);
    locker.execute_batch("ROLLBACK").unwrap();
    drop(locker);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("could not be marked interrupted"), "{err}");
    let runs = listed(&db);
    assert!(runs.contains("interrupted") && runs.contains("locked"), "{runs}");
    assert!(!runs.contains("killed or crashed"), "{runs}");
    // The next command that writes stores the reason for good.
    ok(&run(&db, &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label", "after"]));
    let (status, reason) = stored(&db);
    assert_eq!(status, "interrupted");
    assert!(reason.is_some_and(|r| r.contains("storage failure") && r.contains("locked")));
}

/// A full disk (a tiny tmpfs; mounting one needs root): the run stops, and its reason says
/// the disk is full, not that it crashed.
#[test]
fn a_full_disk_is_the_stored_reason() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting a tiny tmpfs to fill needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("tiny");
    std::fs::create_dir(&mnt).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .status();
    if !status.as_ref().is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot mount a tmpfs here ({status:?})");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&mnt);
    let db = mnt.join("r.db");
    let child = long_run(&db, "smoke", "os.syscall", "2");
    let pid = child.id();
    let (code, err) = finish(child);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("full"), "{err}");
    let runs = listed(&db);
    let line = runs.lines().find(|l| l.contains("run #")).unwrap_or_default();
    assert!(runs.contains("interrupted") && line.contains("full"), "{runs}");
    assert!(!runs.contains("killed or crashed"), "{runs}");
    // The database goes with the tmpfs: so does the note of why its run ended.
    let notes = std::fs::read_dir(schedlab_measure::owner::state_dir()).unwrap();
    for note in notes.flatten() {
        if note.file_name().to_string_lossy().starts_with(&format!("run-end-{pid}-")) {
            let _ = std::fs::remove_file(note.path());
        }
    }
}
