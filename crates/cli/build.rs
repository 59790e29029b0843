//! Records the git revision schedlab is built from, for the fingerprint of every run.

use std::process::Command;

fn main() {
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
