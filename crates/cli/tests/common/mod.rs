//! What the CLI integration tests share: running the real binary against a database.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The `schedlab` binary, with no database (nor fleet database, nor PostgreSQL password)
/// chosen by the environment.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    for var in ["SCHEDLAB_DB", "SCHEDLAB_FLEET", "PGPASSWORD", "PGPASSFILE"] {
        c.env_remove(var);
    }
    c
}

/// Runs `schedlab --db DB ARGS...` to completion.
pub fn run(db: &Path, args: &[&str]) -> Output {
    bin().arg("--db").arg(db).args(args).output().expect("the binary runs")
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts that the command succeeded (exit 0), showing both streams if not; returns its
/// standard output as text.
pub fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}
