//! A `timeline --kernel`/`--probe` killed with SIGKILL leaves its tracing instance recording
//! and, if it mounted tracefs, the mount: `doctor` reports both, and the next command that
//! uses tracefs removes both. Needs root and a kernel with tracefs; skipped with the reason
//! otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{bin, ok, run};
use schedlab_measure::tracefs;

fn tracefs_points() -> Vec<PathBuf> {
    tracefs::mounted(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// The tracing instance of process `pid`, once it has one (bounded wait: a hang guard).
fn instance_of(pid: u32) -> Option<PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for point in tracefs_points() {
            let Ok(dir) = std::fs::read_dir(point.join("instances")) else { continue };
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if tracefs::instance_owner(&name).is_some_and(|o| o.pid == pid) {
                    return Some(e.path());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn what_a_killed_kernel_recording_leaves_is_reported_and_removed() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: tracing instances need root");
        return;
    }
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !filesystems.contains("tracefs") || !Path::new("/sys/kernel/tracing").is_dir() {
        eprintln!("skipped: this kernel has no tracefs");
        return;
    }
    let mounted_before = !tracefs_points().is_empty();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut child = bin()
        .arg("--db")
        .arg(&db)
        .args(["timeline", "--probe", "os.syscall.null", "--window-ms", "60000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let Some(instance) = instance_of(child.id()) else {
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("skipped: the kernel recorder made no tracing instance within a minute");
        return;
    };
    child.kill().unwrap(); // SIGKILL: no Drop runs
    child.wait().unwrap();
    let name = instance.file_name().unwrap().to_string_lossy().into_owned();
    assert!(instance.is_dir(), "the killed process's instance is left behind");

    let doctor = ok(&run(&db, &["doctor"]));
    assert!(doctor.contains(&name) && doctor.contains("killed"), "{doctor}");
    if !mounted_before {
        assert!(doctor.contains("mounted by a schedlab that was killed"), "{doctor}");
    }

    // The next command that uses tracefs undoes both, then records and undoes its own.
    ok(&run(&db, &["timeline", "--probe", "os.syscall.null", "--window-ms", "10"]));
    assert!(!instance.exists(), "the stale instance {name} is still there");
    if !mounted_before {
        assert!(tracefs_points().is_empty(), "tracefs is still mounted: {:?}", tracefs_points());
    }
    let doctor = ok(&run(&db, &["doctor"]));
    assert!(!doctor.contains("killed"), "{doctor}");
}
