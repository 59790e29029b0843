//! Finding the reference tools and running them: one child at a time, in its own process
//! group, killed (the whole group) on the user's stop request or a timeout.
//!
//! Every tool runs with its working directory in a scratch directory under `--tmp-dir` that
//! [`Scratch`] removes when dropped, standard input closed, and its standard output and error
//! sent to files there (read after it exits: no pipe to drain, whatever it prints). A tool is
//! pinned, when its row asks, by pinning this thread around the spawn: the child inherits the
//! mask at fork, and so do its own children (lmbench's benchmp forks its workers).
//!
//! Leave nothing behind (MEASUREMENT.md): lmbench's `lat_tcp -s` and `lat_udp -s` daemonise;
//! [`Server`] stops them the way lmbench does (`-S localhost`) and then kills what is left of
//! their process group. `/tmp/hello`, which lat_proc execs by that name, is copied from
//! lmbench's directory (as its script does) only when absent, and removed again by
//! [`Scratch`].

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use schedlab_measure::interrupt;

use super::rows::{Family, Needs, Row};

/// The longest a tool may run before it is killed and its row fails.
pub const TIMEOUT: Duration = Duration::from_secs(180);

/// lmbench's `ENOUGH` (µs per repetition) when the environment sets none: 10 ms, a schedlab
/// sample. Its own calibration settles on 1 s on a VM, and its tests then take minutes each.
pub const LMBENCH_ENOUGH_US: &str = "10000";

/// Where the tools were found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tools {
    /// `perf`, when on PATH.
    pub perf: Option<PathBuf>,
    /// `cyclictest`, when on PATH.
    pub cyclictest: Option<PathBuf>,
    /// The directory given with `--lmbench-dir`; lmbench programs are looked for there,
    /// else on PATH.
    pub lmbench_dir: Option<PathBuf>,
    /// PATH as it was when the tools were looked for.
    pub path: Option<std::ffi::OsString>,
}

impl Tools {
    /// Looks for perf and cyclictest on `path` (PATH); lmbench's programs are looked up per
    /// row in `lmbench_dir`, then `path`.
    pub fn discover(path: Option<std::ffi::OsString>, lmbench_dir: Option<PathBuf>) -> Tools {
        let mut t = Tools { path, lmbench_dir, ..Tools::default() };
        t.perf = t.on_path("perf");
        t.cyclictest = t.on_path("cyclictest");
        t
    }

    fn on_path(&self, name: &str) -> Option<PathBuf> {
        let path = self.path.as_ref()?;
        std::env::split_paths(path).map(|d| d.join(name)).find(|p| executable(p))
    }

    /// The program of `row`, or why it is not there (`lat_pipe not found in DIR or on PATH`).
    pub fn program(&self, row: &Row) -> Result<PathBuf, String> {
        match row.family {
            Family::Perf => self.perf.clone().ok_or_else(|| "perf not found on PATH".into()),
            Family::Cyclictest => self
                .cyclictest
                .clone()
                .ok_or_else(|| "cyclictest not found on PATH (Debian: rt-tests)".into()),
            Family::Lmbench => {
                if let Some(dir) = &self.lmbench_dir {
                    let p = dir.join(row.program);
                    if executable(&p) {
                        return Ok(p);
                    }
                }
                self.on_path(row.program).ok_or_else(|| match &self.lmbench_dir {
                    Some(d) => {
                        format!("lmbench {} not found in {} or on PATH", row.program, d.display())
                    }
                    None => format!(
                        "lmbench {} not found on PATH (give its directory with --lmbench-dir)",
                        row.program
                    ),
                })
            }
        }
    }
}

/// A regular file with an execute bit.
fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The scratch directory the tools run in, the file lat_pagefault and lat_mmap map, and the
/// `/tmp/hello` we put there; all removed on drop.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
    file: Option<PathBuf>,
    hello: Option<PathBuf>,
}

/// lat_proc's hard-coded program (lat_proc.c: `#define PROG "/tmp/hello"`).
const HELLO: &str = "/tmp/hello";

/// lat_pagefault's file: 16 MiB (the probe's size) in lmdd's 8 KiB blocks, so the page cache
/// holds small folios as it does for `os.mm.pagefault folios=small`.
const FILE_BYTES: usize = 16 << 20;
const FILE_BLOCK: usize = 8 << 10;

impl Scratch {
    /// A new scratch directory in `tmp_dir`.
    ///
    /// # Errors
    /// When it cannot be created.
    pub fn new(tmp_dir: &Path) -> std::io::Result<Scratch> {
        let dir = tmp_dir.join(format!("schedlab-crosscheck-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch { dir, file: None, hello: None })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The scratch file's path as rows show it (`{file}`).
    pub fn file_path(&self) -> PathBuf {
        self.dir.join("pagefault.dat")
    }

    /// Makes sure what `row` needs is there.
    ///
    /// # Errors
    /// Why it cannot be (lmbench's `hello` missing, the file not writable).
    pub fn prepare(&mut self, row: &Row, program: &Path) -> Result<(), String> {
        match row.needs {
            Needs::Nothing => Ok(()),
            Needs::File if self.file.is_some() => Ok(()),
            Needs::File => {
                let path = self.file_path();
                let write = || -> std::io::Result<()> {
                    let mut f = File::create(&path)?;
                    let block = vec![0x5a_u8; FILE_BLOCK];
                    for _ in 0..FILE_BYTES / FILE_BLOCK {
                        f.write_all(&block)?;
                    }
                    f.sync_all()
                };
                write().map_err(|e| format!("writing {}: {e}", path.display()))?;
                self.file = Some(path);
                Ok(())
            }
            Needs::Hello => {
                if Path::new(HELLO).exists() {
                    return Ok(());
                }
                let hello = program.with_file_name("hello");
                if !executable(&hello) {
                    return Err(format!(
                        "lat_proc execs {HELLO}, copied from lmbench's hello, which is not beside it ({})",
                        hello.display()
                    ));
                }
                std::fs::copy(&hello, HELLO)
                    .map_err(|e| format!("copying {} to {HELLO}: {e}", hello.display()))?;
                self.hello = Some(PathBuf::from(HELLO));
                Ok(())
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(h) = &self.hello {
            let _ = std::fs::remove_file(h);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How one invocation ended.
#[derive(Debug)]
pub enum Ran {
    /// It exited 0; what it printed (standard output, then standard error).
    Output(String),
    /// It failed: exit status, signal or timeout, with the end of what it printed.
    Failed(String),
    /// The user asked to stop; the tool was killed.
    Interrupted,
}

/// Runs `program args` in `dir` (pinned to `pin` when given) with `env` added, waits for
/// it, and returns what it printed. Polls every 5 ms so a stop request or [`TIMEOUT`] kills
/// its whole process group at once. Its output goes to the files `stdout` and `stderr` in
/// `dir`. The reference tools run in a [`Scratch`]; the threads probes' C program
/// (`threads::pthread`) runs the same way in a directory of its own.
pub fn run(
    program: &Path,
    args: &[String],
    env: &[(&str, String)],
    pin: Option<usize>,
    dir: &Path,
) -> Ran {
    let name = program
        .file_name()
        .map_or_else(|| program.display().to_string(), |n| n.to_string_lossy().into_owned());
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    let files = File::create(&out_path).and_then(|o| Ok((o, File::create(&err_path)?)));
    let (out, err) = match files {
        Ok(f) => f,
        Err(e) => return Ran::Failed(format!("{name}: creating its output files: {e}")),
    };
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir).stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let spawned = {
        let _pin = match pin.map(schedlab_measure::sys::PinGuard::pin).transpose() {
            Ok(g) => g,
            Err(e) => return Ran::Failed(format!("{name}: pinning: {e}")),
        };
        cmd.spawn()
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return Ran::Failed(format!("{name}: {e}")),
    };
    let group = Group(child.id() as libc::pid_t);
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Ran::Failed(format!("{name}: waiting for it: {e}")),
        }
        if interrupt::requested() {
            group.kill();
            let _ = child.wait();
            return Ran::Interrupted;
        }
        if started.elapsed() > TIMEOUT {
            group.kill();
            let _ = child.wait();
            return Ran::Failed(format!("{name}: no result after {} s, killed", TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Whatever it left running in its group (benchmp's workers on an error path) goes too;
    // a daemonising server is the caller's to stop (see `Server`).
    let text = format!("{}{}", read_tail(&out_path), read_tail(&err_path));
    if status.success() {
        return Ran::Output(text);
    }
    let how = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "failed".to_string(),
    };
    let tail: String = text
        .trim()
        .lines()
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" / ");
    Ran::Failed(if tail.is_empty() {
        format!("{name}: {how}")
    } else {
        format!("{name}: {how}: {tail}")
    })
}

/// The last 64 KiB of a file, as text (lat_proc shell prints a line per failed exec).
fn read_tail(path: &Path) -> String {
    let mut buf = Vec::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_end(&mut buf);
    }
    let start = buf.len().saturating_sub(64 << 10);
    String::from_utf8_lossy(&buf[start..]).into_owned()
}

/// A process group started by [`run`] (its id is its leader's pid).
#[derive(Debug, Clone, Copy)]
struct Group(libc::pid_t);

impl Group {
    /// SIGKILL to every process of the group. A group that is gone already is no error.
    fn kill(self) {
        if self.0 > 0 {
            // SAFETY: kill(2) with a negative pid signals the process group |pid|; it touches
            // no memory. The group was created for a child we spawned (process_group(0)).
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
}

/// lmbench's network server for a row (`lat_tcp -s`), running while this lives.
#[derive(Debug)]
pub struct Server {
    program: PathBuf,
    stop: Vec<String>,
    env: Vec<(&'static str, String)>,
    group: Option<Group>,
}

impl Server {
    /// Starts `program start...` pinned like the tool, and waits a moment for it to listen
    /// (lmbench's `-s` forks the server and returns at once; its TCP client retries a
    /// refused connection, its UDP client does not).
    ///
    /// # Errors
    /// Why the server did not start.
    pub fn start(
        program: &Path,
        start: &[&str],
        stop: &[&str],
        env: &[(&'static str, String)],
        pin: Option<usize>,
        scratch: &Scratch,
    ) -> Result<Server, String> {
        let mut cmd = Command::new(program);
        cmd.args(start)
            .current_dir(scratch.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let spawned = {
            let _pin = pin
                .map(schedlab_measure::sys::PinGuard::pin)
                .transpose()
                .map_err(|e| format!("pinning: {e}"))?;
            cmd.spawn()
        };
        let mut child = spawned
            .map_err(|e| format!("starting {} {}: {e}", program.display(), start.join(" ")))?;
        let group = Group(child.id() as libc::pid_t);
        let status = child.wait().map_err(|e| format!("waiting for the server's start: {e}"))?;
        if !status.success() {
            group.kill();
            return Err(format!("{} {}: {status}", program.display(), start.join(" ")));
        }
        std::thread::sleep(Duration::from_millis(100));
        Ok(Server {
            program: program.to_path_buf(),
            stop: stop.iter().map(|s| s.to_string()).collect(),
            env: env.to_vec(),
            group: Some(group),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(group) = self.group.take() else { return };
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.stop).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Ok(mut c) = cmd.spawn() {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(5) {
                if !matches!(c.try_wait(), Ok(None)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        group.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_named_with_where_it_was_looked_for() {
        let empty = tempdir();
        let tools = Tools::discover(Some(empty.as_os_str().to_owned()), Some(empty.clone()));
        assert!(tools.perf.is_none() && tools.cyclictest.is_none());
        let row = super::super::rows::ROWS.iter().find(|r| r.program == "lat_pipe").unwrap();
        let e = tools.program(row).unwrap_err();
        assert!(e.contains("lat_pipe not found in") && e.contains("or on PATH"), "{e}");
        let _ = std::fs::remove_dir_all(&empty);
    }

    #[test]
    fn a_tool_is_found_in_the_lmbench_dir_and_its_output_read() {
        let dir = tempdir();
        let prog = dir.join("lat_pipe");
        std::fs::write(&prog, "#!/bin/sh\necho \"Pipe latency: 1.5 microseconds\" >&2\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tools = Tools::discover(None, Some(dir.clone()));
        let row = super::super::rows::ROWS.iter().find(|r| r.program == "lat_pipe").unwrap();
        assert_eq!(tools.program(row).unwrap(), prog);
        let scratch = Scratch::new(&dir).unwrap();
        match run(&prog, &[], &[], None, scratch.dir()) {
            Ran::Output(text) => assert!(text.contains("Pipe latency: 1.5"), "{text}"),
            other => panic!("{other:?}"),
        }
        std::fs::write(&prog, "#!/bin/sh\necho oops >&2\nexit 3\n").unwrap();
        match run(&prog, &[], &[], None, scratch.dir()) {
            Ran::Failed(why) => {
                assert!(why.contains("exit status 3") && why.contains("oops"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let sdir = scratch.dir().to_path_buf();
        drop(scratch);
        assert!(!sdir.exists(), "the scratch directory is removed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempdir() -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "schedlab-crosscheck-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
