//! Records the git revision schedlab is built from, for the fingerprint of every run, and
//! builds `libschedlab_pthread.so` (crates/pthread), which `schedlab exec` embeds.
//!
//! # The nested build of the library
//!
//! The library is its own cargo workspace (crates/pthread/Cargo.toml says why: the
//! runtime's `shared-library` feature must never reach this workspace's build of it), so
//! no dependency edge can build it: this script runs
//! `cargo build --release --manifest-path crates/pthread/Cargo.toml --target-dir
//! <target dir>/pthread` and copies the `.so` into `OUT_DIR`, where `library.rs` takes it
//! with `include_bytes!`. Always `--release`, whatever the outer profile: a debug runtime
//! under a real program would measure nothing worth having; debug and release builds of
//! schedlab share the one nested build.
//!
//! What the outer cargo puts in a build script's environment that must not reach the
//! nested one (each would change or break its build):
//! - `CARGO_TARGET_DIR`, `CARGO_BUILD_*` (target dir, target triple, jobs, rustflags of
//!   the outer invocation), `CARGO_PROFILE_*`, `CARGO_INCREMENTAL`;
//! - `RUSTFLAGS`, `CARGO_ENCODED_RUSTFLAGS` (e.g. `--cfg loom`, for which the library has
//!   no loom dependency), `RUSTDOCFLAGS`;
//! - `RUSTC_WORKSPACE_WRAPPER` and `CLIPPY_ARGS`/`CLIPPY_CONF_DIR` (`cargo clippy -D
//!   warnings` would lint the library too, and fail the outer build on its lints);
//! - `CARGO_MAKEFLAGS`, `MAKEFLAGS`, `MFLAGS` (the outer jobserver's descriptors are not
//!   the nested cargo's to use), and the per-package variables cargo sets for this script
//!   (`CARGO_PKG_*`, `CARGO_MANIFEST_*`, `CARGO_CFG_*`, `CARGO_PRIMARY_PACKAGE`, `OUT_DIR`,
//!   `TARGET`, `HOST`, `PROFILE`, `OPT_LEVEL`, `DEBUG`, `NUM_JOBS`).
//!
//! Kept: `CARGO_HOME`, `RUSTUP_TOOLCHAIN` (the same toolchain), `RUSTC`, `RUSTC_WRAPPER`
//! (a compiler cache), `CARGO_NET_OFFLINE`, linker settings.
//!
//! The nested cargo's output is shown only when it fails (cargo shows a failed build
//! script's output), with a line saying what failed and how to build the library alone.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    git_revision();
    pthread_library();
}

fn git_revision() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(rev) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{rev}-dirty")
            } else {
                rev
            }
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=SCHEDLAB_GIT_REV={rev}");
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
    // A commit moves the branch HEAD names, not HEAD itself: watch that ref
    // (kept in the common directory, which a worktree shares) and the packed
    // refs, or the revision stays the one of the first build.
    if let (Some(common), Some(branch)) =
        (git(&["rev-parse", "--git-common-dir"]), git(&["symbolic-ref", "-q", "HEAD"]))
    {
        println!("cargo:rerun-if-changed={common}/{branch}");
        println!("cargo:rerun-if-changed={common}/packed-refs");
    }
}

/// The outer build's target directory: `OUT_DIR` is `<target>/[<triple>/]<profile>/build/
/// schedlab-<hash>/out`, whatever `--target-dir` or `CARGO_TARGET_DIR` chose.
fn target_dir(out_dir: &Path, triple: &str) -> PathBuf {
    let build = out_dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "build"))
        .expect("OUT_DIR lies under <target>/<profile>/build");
    let mut dir = build.parent().and_then(Path::parent).expect("a profile and target directory");
    if dir.file_name().is_some_and(|n| n == triple) {
        dir = dir.parent().expect("a target directory above the triple's");
    }
    dir.to_path_buf()
}

/// Outer variables that must not reach the nested cargo (module docs).
fn leaks(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "CARGO_TARGET_DIR",
        "CARGO_INCREMENTAL",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTDOCFLAGS",
        "CARGO_ENCODED_RUSTDOCFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CLIPPY_CONF_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_CRATE_NAME",
        "OUT_DIR",
        "TARGET",
        "HOST",
        "PROFILE",
        "OPT_LEVEL",
        "DEBUG",
        "NUM_JOBS",
        "RUSTC_LINKER",
    ];
    const PREFIX: &[&str] =
        &["CARGO_BUILD_", "CARGO_PROFILE_", "CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CFG_", "DEP_"];
    EXACT.contains(&key) || PREFIX.iter().any(|p| key.starts_with(p))
}

fn pthread_library() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir.join("../..");
    let root = root.canonicalize().unwrap_or(root);
    let pthread = root.join("crates/pthread");
    let rt = root.join("crates/rt");
    for watched in [
        pthread.join("src"),
        pthread.join("Cargo.toml"),
        pthread.join("Cargo.lock"),
        rt.join("src"),
        rt.join("Cargo.toml"),
    ] {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let triple = std::env::var("TARGET").unwrap_or_default();
    let target = target_dir(&out_dir, &triple).join("pthread");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = pthread.join("Cargo.toml");
    let mut cmd = Command::new(&cargo);
    cmd.arg("build")
        .arg("--release")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        // The library's own directory: its cargo configuration, not the caller's.
        .current_dir(&pthread);
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(leaks) {
            cmd.env_remove(&key);
        }
    }
    let shown = format!(
        "cargo build --release --manifest-path {} --target-dir {}",
        manifest.display(),
        target.display()
    );
    // Its output goes to this script's standard error (standard output is cargo's channel
    // for `cargo:` lines), which cargo shows when the script fails, and with -vv.
    let status = match cmd.stdout(std::io::stderr()).status() {
        Ok(s) => s,
        Err(e) => panic!("cannot run cargo ({}) to build libschedlab_pthread.so: {e}", {
            Path::new(&cargo).display()
        }),
    };
    if !status.success() {
        eprintln!();
        eprintln!("error: building libschedlab_pthread.so (crates/pthread) failed: {status}");
        eprintln!("its output is above; to build it alone: {shown}");
        std::process::exit(1);
    }
    let built = target.join("release/libschedlab_pthread.so");
    let bytes = std::fs::read(&built)
        .unwrap_or_else(|e| panic!("{shown} succeeded but {} is unreadable: {e}", built.display()));
    std::fs::write(out_dir.join("libschedlab_pthread.so"), &bytes)
        .unwrap_or_else(|e| panic!("cannot copy the library into {}: {e}", out_dir.display()));
    // `exec` names its cached copy after the content, so a new build never reuses an old
    // file (FNV-1a: deterministic across toolchains, unlike std's hasher).
    let hash = bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    println!("cargo:rustc-env=SCHEDLAB_PTHREAD_HASH={hash:016x}");
}
