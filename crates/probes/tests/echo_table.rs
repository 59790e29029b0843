//! `peers/echo-table.sh` (issue 29's table of echo servers beside Go's) leaves nothing in the
//! temporary directory: it builds Go's server there on every run, and once left each build
//! behind.
//!
//! The script runs with no rounds, so only its setup and its exit run: the Go build (real,
//! offline) and the cleanup. A stub `cargo` first on `PATH` stands in for its release build
//! of the echo client, which this test does not need. Skips, saying so, without `sh` or Go.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Go as the script finds it: `/usr/local/go/bin/go`, else `go` on `PATH`.
fn go() -> Option<PathBuf> {
    let fixed = Path::new("/usr/local/go/bin/go");
    if fixed.is_file() {
        return Some(fixed.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("go")).find(|p| p.is_file())
}

#[test]
fn the_echo_table_removes_its_temporary_files() {
    if go().is_none() || !Path::new("/bin/sh").exists() {
        println!("skipped: the echo table needs sh and Go");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("schedlab-echo-table-{}", std::process::id()));
    let (bin, scratch) = (dir.join("bin"), dir.join("tmp"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&scratch).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(&cargo, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let out = Command::new("sh")
        .args(["peers/echo-table.sh", "0", "go"])
        .current_dir(&root)
        .env("PATH", path)
        .env("TMPDIR", &scratch)
        .output()
        .unwrap();
    let left: Vec<String> = std::fs::read_dir(&scratch)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "echo-table.sh failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(left.is_empty(), "echo-table.sh left {left:?} in its temporary directory");
}
