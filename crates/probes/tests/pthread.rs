//! The threads probes' C program rows (`backend=pthread-os|pthread-rt`): setup writes the
//! embedded program into a directory of its own under the run's tmp dir and teardown
//! removes it; every operation of the program runs under glibc's threads and under
//! libschedlab_pthread.so with tiny iteration counts and reports a time. What it measures
//! is not checked (no timing assertions), only that each run worked and was read.
//!
//! The library run needs libschedlab_pthread.so: `SCHEDLAB_PTHREAD_LIB`, else the copy
//! `cd crates/pthread && cargo build --release` leaves in crates/pthread/target/release;
//! without either (or on a CPU without FSGSBASE, or built without a C compiler) those
//! checks skip with the reason printed.

use std::path::{Path, PathBuf};

use schedlab_measure::model::Params;
use schedlab_measure::ProbeError;
use schedlab_probes::threads::pthread::LIBRARY_ENV;
use schedlab_probes::{catalog, Context, Suite};

/// A fresh directory for one test's tmp dir.
fn tmp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("schedlab-pthread-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn context(tmp_dir: &Path) -> Context {
    Context { suite: Suite::Smoke, tmp_dir: tmp_dir.to_path_buf(), exec_helper: None }
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

/// The library to test with, setting [`LIBRARY_ENV`] to the built copy when it is unset;
/// `None` (the reason printed) when there is none.
fn library() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pthread/target/release/libschedlab_pthread.so");
    if built.is_file() {
        // Every test of this binary that reads the variable calls this first.
        std::env::set_var(LIBRARY_ENV, &built);
        return Some(built);
    }
    eprintln!(
        "skipping the pthread-rt runs: {LIBRARY_ENV} is unset and {} is not built (cd crates/pthread && cargo build --release)",
        built.display()
    );
    None
}

#[test]
fn setup_writes_the_program_into_its_own_directory_and_teardown_removes_it() {
    let dir = tmp_dir("setup");
    let all = catalog();
    let create = all.iter().find(|p| p.info().id == "threads.create").unwrap();
    let params = Params::new().with("batch", 2).with("backend", "pthread-os");
    let mut inst = match create.setup(&params, &context(&dir)) {
        Ok(i) => i,
        Err(ProbeError::Skip(why)) => {
            eprintln!("skipped: {why}");
            assert!(why.contains("no C program"), "{why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let made = entries(&dir);
    assert_eq!(made.len(), 1, "{made:?}");
    let program = made[0].join("pthread_bench");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&program).unwrap().permissions().mode();
    assert!(mode & 0o100 != 0, "{} is not executable ({mode:o})", program.display());
    let notes = inst.notes();
    assert_eq!(notes.get("runtime"), Some("glibc NPTL"));
    assert!(notes.get("timer").is_some_and(|t| t.contains("created thread")), "{notes}");
    let t = inst.run(3).unwrap();
    assert!(t.elapsed.as_nanos() > 0);
    // A second sample runs the same program again.
    inst.run(1).unwrap();
    drop(inst);
    assert!(entries(&dir).is_empty(), "teardown left {:?}", entries(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_setup_leaves_nothing_behind_and_names_the_directory() {
    let dir = tmp_dir("failed");
    let all = catalog();
    let messaging = all.iter().find(|p| p.info().id == "threads.messaging").unwrap();
    // A bad parameter is refused before anything is written.
    let bad = Params::new().with("groups", 0).with("backend", "pthread-os");
    let Err(ProbeError::Failed(why)) = messaging.setup(&bad, &context(&dir)) else {
        panic!("groups=0 accepted")
    };
    assert!(why.contains("groups=0"), "{why}");
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
    // A tmp dir that cannot hold a directory: a failure naming it (or the skip of a build
    // without the program, which writes nothing).
    let file = dir.join("not-a-directory");
    std::fs::write(&file, "x").unwrap();
    let good = Params::new().with("groups", 1).with("backend", "pthread-os");
    match messaging.setup(&good, &context(&file)) {
        Err(ProbeError::Failed(why)) => assert!(why.contains("not-a-directory"), "{why}"),
        Err(ProbeError::Skip(why)) => assert!(why.contains("no C program"), "{why}"),
        Ok(_) => panic!("set up in a file"),
        Err(e) => panic!("{e}"),
    }
    assert_eq!(entries(&dir), [file]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_operation_runs_once_under_both_libraries() {
    let have_library = library().is_some();
    let dir = tmp_dir("every");
    let ctx = context(&dir);
    let all = catalog();
    let mut ran = Vec::new();
    for p in &all {
        for params in p.variants(Suite::Smoke) {
            let Some(backend) = params.get("backend") else { continue };
            if !backend.starts_with("pthread-") {
                continue;
            }
            let what = format!("{} [{params}]", p.info().id);
            if backend == "pthread-rt" && !have_library {
                continue;
            }
            let mut inst = match p.setup(&params, &ctx) {
                Ok(i) => i,
                Err(ProbeError::Skip(why)) => {
                    eprintln!("{what} skipped: {why}");
                    continue;
                }
                Err(e) => panic!("{what}: {e}"),
            };
            let t = inst.run(2).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(t.elapsed.as_nanos() > 0, "{what} read no time");
            eprintln!("{what}: {:?} for 2 iterations", t.elapsed);
            drop(inst);
            ran.push(what);
        }
    }
    assert!(entries(&dir).is_empty(), "left behind: {:?}", entries(&dir));
    eprintln!("ran {} rows", ran.len());
    let _ = std::fs::remove_dir_all(&dir);
}
