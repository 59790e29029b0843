//! `os.proc.shell_scripts`: UnixBench's "Shell Scripts (N concurrent)" rows, with N = 1, 2, 4
//! and 8 (seed 002: "the number of times per minute a process can start and reap a set of
//! one, two, four, and eight concurrent copies of a shell script where it applies a series of
//! transformations to a data file").
//!
//! What UnixBench runs, and so what we run: its `looper` forks and execs `/bin/sh multi.sh N`
//! again and again, in its temporary directory, and counts loops per minute. `multi.sh`
//! starts N copies of `/bin/sh tst.sh 20` in the background and `wait`s; `tst.sh` repeats the
//! data file `sort.src` 20 times through `printf` and `sort`s it, `od`s the result and sorts
//! that numerically, `grep`s it for "the" through `tee` into `wc`, and removes its files. We
//! write both scripts (UnixBench's text, see [`MULTI_SH`] and [`TST_SH`]) and a data file into
//! a scratch directory under `--tmp-dir`; one iteration forks a child that `chdir`s there and
//! execs `/bin/sh multi.sh N` with our environment plus `UB_BINDIR`, and reaps it, its exit
//! status checked. The value is the time per loop; UnixBench's score is 60 000 000 / value
//! (µs) loops per minute.
//!
//! Deliberate difference: UnixBench's `sort.src` is not at hand here; ours is generated
//! ([`sort_src`]: 200 lines, about 9 KB of words, one line in four with "the"), without `%` or
//! `\` since `tst.sh` uses the data as a `printf` format. The tools come from `PATH` (coreutils
//! and grep); setup skips when one is missing.
//!
//! With N above the number of CPUs the copies queue for the CPUs: on our 2-CPU machines the
//! 4- and 8-copy rows measure the scheduler's throughput under load as much as the shell.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sys::Child;
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use super::process::{check_executable, env, ExecArgs};
use crate::{Context, Info, Instance, Probe, Suite};

/// UnixBench's `pgms/multi.sh` (its loop, without the comment header).
const MULTI_SH: &str = r#"instance=1
times_of_sort_src=20
while [ $instance -le $1 ]; do
	/bin/sh "$UB_BINDIR/tst.sh" $times_of_sort_src &
	instance=$(($instance + 1))
done
wait
"#;

/// UnixBench's `pgms/tst.sh` (without the comment header).
const TST_SH: &str = r#"sort_src_content=$(cat sort.src)
printf "$sort_src_content%.0s\n" $(seq $1) | sort > sort.$$
od sort.$$ | sort -n -k 1 > od.$$
grep the sort.$$ | tee grep.$$ | wc > wc.$$
rm sort.$$ grep.$$ od.$$ wc.$$
"#;

/// The programs the scripts run besides the shell's builtins.
const TOOLS: [&str; 8] = ["cat", "seq", "sort", "od", "grep", "tee", "wc", "rm"];

/// The shell.
const SHELL: &str = "/bin/sh";

/// The data file: 200 lines of words from a fixed list, every fourth containing "the".
/// Deterministic, and free of `%` and `\` (it becomes a printf format). Pure.
fn sort_src() -> String {
    const WORDS: [&str; 16] = [
        "process", "kernel", "thread", "signal", "pipe", "socket", "memory", "page", "file",
        "buffer", "clock", "queue", "lock", "fork", "exec", "wait",
    ];
    let mut s = String::new();
    let mut x: u32 = 12345;
    for line in 0..200 {
        for w in 0..8 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            if w > 0 {
                s.push(' ');
            }
            if line % 4 == 0 && w == 3 {
                s.push_str("the");
            } else {
                s.push_str(WORDS[(x >> 16) as usize % WORDS.len()]);
            }
        }
        s.push('\n');
    }
    s
}

/// Finds `tool` on `PATH`.
fn on_path(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .as_bytes()
        .split(|&b| b == b':')
        .map(|dir| Path::new(OsStr::from_bytes(dir)).join(tool))
        .find(|p| check_executable(p).is_ok())
}

struct ShellScripts;

/// The shell-script probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(ShellScripts)]
}

impl Probe for ShellScripts {
    fn info(&self) -> Info {
        Info {
            id: "os.proc.shell_scripts",
            doc: "sh multi.sh N: N concurrent copies of UnixBench's tst.sh (sort, od, grep, tee, wc on a data file), started and reaped: µs per loop",
            unit: Unit::Micros,
            mirrors: "UnixBench Shell Scripts (1/2/4/8 concurrent; loops per minute there: 6e7 / value; its multi.sh and tst.sh, our generated sort.src)",
            requires: "/bin/sh, coreutils and grep on PATH, a writable --tmp-dir",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let copies: &[usize] = match suite {
            Suite::Smoke => &[1],
            Suite::Quick | Suite::Full => &[1, 2, 4, 8],
        };
        copies.iter().map(|n| Params::new().with("copies", n)).collect()
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        Ok(Box::new(Loop::new(params, ctx)?))
    }
}

impl Loop {
    /// Writes the scripts and the data into a new scratch directory and prepares the exec.
    fn new(params: &Params, ctx: &Context) -> Result<Loop, ProbeError> {
        let copies: usize = params.parse_or("copies", 1).map_err(ProbeError::Failed)?;
        if !(1..=64).contains(&copies) {
            return Err(ProbeError::Failed(format!("copies={copies} out of range 1..=64")));
        }
        if check_executable(Path::new(SHELL)).is_err() {
            return Err(ProbeError::Skip(format!("needs {SHELL}")));
        }
        if let Some(missing) = TOOLS.iter().find(|t| on_path(t).is_none()) {
            return Err(ProbeError::Skip(format!("needs {missing} on PATH")));
        }
        let dir = ScratchDir::create(&ctx.tmp_dir)?;
        for (name, text) in [("multi.sh", MULTI_SH), ("tst.sh", TST_SH)] {
            dir.write(name, text.as_bytes())?;
        }
        let data = sort_src();
        dir.write("sort.src", data.as_bytes())?;
        let mut vars = env();
        vars.retain(|v| !v.starts_with(b"UB_BINDIR="));
        let mut bindir = b"UB_BINDIR=".to_vec();
        bindir.extend_from_slice(dir.path.as_os_str().as_bytes());
        vars.push(bindir);
        let n = copies.to_string();
        let argv = [OsStr::new("sh"), OsStr::new("multi.sh"), OsStr::new(&n)];
        let exec = ExecArgs::new(Path::new(SHELL), &argv, &vars)?;
        let cwd = CString::new(dir.path.as_os_str().as_bytes())
            .map_err(|_| ProbeError::Failed("--tmp-dir contains a NUL".into()))?;
        Ok(Loop { exec, cwd, copies, data_bytes: data.len(), dir })
    }
}

/// A directory of our own under `--tmp-dir`, removed with everything in it when dropped.
struct ScratchDir {
    path: PathBuf,
}

/// Distinguishes scratch directories of one process.
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

impl ScratchDir {
    fn create(parent: &Path) -> Result<ScratchDir, ProbeError> {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let path = parent.join(format!("schedlab-shell-{}-{n}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => Ok(ScratchDir { path }),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(ProbeError::Skip(
                format!("needs a writable --tmp-dir ({}: {e})", parent.display()),
            )),
            Err(e) => Err(ProbeError::io(&format!("create {}", path.display()), e)),
        }
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), ProbeError> {
        let p = self.path.join(name);
        std::fs::write(&p, bytes).map_err(|e| ProbeError::io(&format!("write {}", p.display()), e))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

struct Loop {
    exec: ExecArgs,
    cwd: CString,
    copies: usize,
    data_bytes: usize,
    /// Kept for its Drop: the directory goes when the probe does.
    dir: ScratchDir,
}

impl Loop {
    /// One loop of UnixBench's looper: fork, exec `sh multi.sh N` in the scratch directory,
    /// reap; the status must be 0.
    fn once(&self) -> Result<(), ProbeError> {
        let (path, argv, envp) = self.exec.pointers();
        let cwd = self.cwd.as_ptr();
        let mut child = Child::fork(None, move || {
            // SAFETY: `cwd` is a NUL-terminated path built before the fork; chdir is
            // async-signal-safe.
            if unsafe { libc::chdir(cwd) } != 0 {
                return 126;
            }
            // SAFETY: the pointers come from `ExecArgs` built before the fork and kept alive
            // by the parent; both arrays are null-terminated. execve is async-signal-safe.
            unsafe { libc::execve(path, argv, envp) };
            127
        })?;
        match child.wait()? {
            0 => Ok(()),
            126 => Err(ProbeError::Failed(format!("chdir {} failed", self.dir.path.display()))),
            127 => Err(ProbeError::Failed(format!("execve {SHELL} failed"))),
            s => Err(ProbeError::Failed(format!("sh multi.sh {} exited {s}", self.copies))),
        }
    }
}

impl Workload for Loop {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let start = Instant::now();
        for _ in 0..iters {
            if interrupt::requested() {
                return Err(ProbeError::Interrupted);
            }
            self.once()?;
        }
        Ok(Timing::from_elapsed(start.elapsed()))
    }
}

impl Instance for Loop {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        Params::new()
            .with("copies", self.copies)
            .with("sort_src_bytes", self.data_bytes)
            .with("repeats", 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_is_a_safe_printf_format_with_the_word_the() {
        let s = sort_src();
        assert_eq!(s.lines().count(), 200);
        assert!(!s.contains(['%', '\\']));
        assert_eq!(s.lines().filter(|l| l.split(' ').any(|w| w == "the")).count(), 50);
        assert_eq!(s, sort_src(), "not deterministic");
    }

    /// A loop starts `copies` copies of tst.sh and waits for all of them (a line each in a
    /// log the test adds to the script), and the directory goes with the probe.
    #[test]
    fn a_loop_runs_every_copy_and_waits_for_it() {
        let ctx = Context::for_tests();
        let mut l = match Loop::new(&Params::new().with("copies", 3), &ctx) {
            Ok(l) => l,
            Err(ProbeError::Skip(why)) => {
                eprintln!("skipped: {why}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        l.dir.write("tst.sh", format!("{TST_SH}echo ran >> ran.log\n").as_bytes()).unwrap();
        l.run(2).unwrap();
        let log = std::fs::read_to_string(l.dir.path.join("ran.log")).unwrap();
        assert_eq!(log.lines().count(), 6, "{log}");
        let mut left: Vec<String> = std::fs::read_dir(&l.dir.path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // tst.sh removed its sort.$$, od.$$, grep.$$ and wc.$$.
        assert_eq!(left, ["multi.sh", "ran.log", "sort.src", "tst.sh"]);
        let dir = l.dir.path.clone();
        drop(l);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }

    /// A loop that cannot run is an error, and so is a nonsense count.
    #[test]
    fn a_failing_loop_is_an_error() {
        let ctx = Context::for_tests();
        let Ok(mut l) = Loop::new(&Params::new(), &ctx) else { return };
        l.run(1).unwrap();
        std::fs::remove_dir_all(&l.dir.path).unwrap();
        let e = l.run(1).unwrap_err();
        assert!(e.to_string().contains("chdir"), "{e}");
        let e = ShellScripts.setup(&Params::new().with("copies", 0), &ctx).err();
        assert!(matches!(e, Some(ProbeError::Failed(_))), "{e:?}");
    }
}
