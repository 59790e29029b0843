//! Process creation: lmbench's `lat_proc fork`, `lat_proc exec` and `lat_proc shell`, in
//! microseconds per process created and reaped. UnixBench's `spawn` and `execl` measure the
//! same things as counts in a fixed time; we time each batch with the monotonic clock.
//!
//! Each iteration forks one child and waits for it with `waitpid`, checking that it exited
//! with status 0 (lmbench's children `exit(1)` and nobody looks; we look, because a failed
//! `execve` is otherwise measured as a very fast exec):
//! - `os.proc.fork_exit`: the child `_exit(0)`s at once;
//! - `os.proc.fork_exec`: the child `execve`s the schedlab binary's helper mode, which exits at
//!   once (lmbench: its small `/tmp/hello` program), with an empty environment as lmbench passes;
//! - `os.proc.fork_sh`: the child `execve`s `/bin/sh -c true` with our environment (lmbench:
//!   `execlp("/bin/sh", "sh", "-c", "/tmp/hello")`; `true` is a shell builtin, so ours is the
//!   shell's start-up without the extra exec of hello).
//!
//! # Fork safety
//! The children come from [`Child::fork`]: after `fork` only async-signal-safe code runs,
//! so every `argv`/`envp` string and pointer array is built in setup. The helper's prologue
//! (death signal, default SIGINT/SIGTERM/SIGPIPE: five cheap system calls in the child) is in
//! every iteration; it is well under 1% of a fork and is what lets a Ctrl-C or a crash of
//! ours leave no process behind. lmbench closes the child's stdout before exec to silence
//! hello; our programs print nothing, so we leave it open.
//!
//! The cost of `fork` grows with the parent's address space (page tables to copy), so the
//! parent's resident size is recorded in the notes.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Instant;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sys::Child;
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Exit,
    Exec,
    Shell,
}

struct ProcProbe(Kind);

/// The process-creation probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Kind::Exit, Kind::Exec, Kind::Shell]
        .into_iter()
        .map(|k| Box::new(ProcProbe(k)) as Box<dyn Probe>)
        .collect()
}

/// The shell lmbench's `lat_proc shell` runs.
const SHELL: &str = "/bin/sh";

impl Probe for ProcProbe {
    fn info(&self) -> Info {
        let (id, doc, mirrors, requires) = match self.0 {
            Kind::Exit => (
                "os.proc.fork_exit",
                "fork(), child _exit(0), parent waitpid(): µs per process",
                "lmbench lat_proc fork (child status checked; child runs schedlab's 5-syscall fork prologue)",
                "",
            ),
            Kind::Exec => (
                "os.proc.fork_exec",
                "fork() + execve() of a helper that exits at once, then waitpid(): µs per process",
                "lmbench lat_proc exec (helper: the schedlab binary's exit-at-once mode instead of /tmp/hello)",
                "the schedlab binary's exec helper",
            ),
            Kind::Shell => (
                "os.proc.fork_sh",
                "fork() + execve(/bin/sh -c true), then waitpid(): µs per process",
                "lmbench lat_proc shell (sh -c true, a builtin, instead of sh -c /tmp/hello: no second exec)",
                "/bin/sh",
            ),
        };
        Info { id, doc, unit: Unit::Micros, mirrors, requires }
    }

    fn setup(&self, _params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let exec = match self.0 {
            Kind::Exit => None,
            Kind::Exec => {
                let Some((prog, args)) = &ctx.exec_helper else {
                    return Err(ProbeError::Skip("needs the schedlab binary's exec helper".into()));
                };
                if let Err(e) = check_executable(prog) {
                    return Err(ProbeError::Failed(format!("exec helper {}: {e}", prog.display())));
                }
                let argv: Vec<&OsStr> =
                    std::iter::once(prog.as_os_str()).chain(args.iter().map(OsStr::new)).collect();
                // lmbench's do_forkexec passes a null environment.
                Some(ExecArgs::new(prog, &argv, &[] as &[&str])?)
            }
            Kind::Shell => {
                if let Err(e) = check_executable(Path::new(SHELL)) {
                    return Err(ProbeError::Skip(format!("needs {SHELL} ({e})")));
                }
                // execlp passes the caller's environment on.
                let env: Vec<Vec<u8>> = std::env::vars_os()
                    .map(|(k, v)| {
                        let mut kv = k.as_bytes().to_vec();
                        kv.push(b'=');
                        kv.extend_from_slice(v.as_bytes());
                        kv
                    })
                    .collect();
                let argv = ["sh", "-c", "true"].map(OsStr::new);
                Some(ExecArgs::new(Path::new(SHELL), &argv, &env)?)
            }
        };
        Ok(Box::new(Spawn { exec, parent_rss_kib: resident_kib() }))
    }
}

/// `access(path, X_OK)`.
fn check_executable(path: &Path) -> std::io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Our resident set size from /proc/self/statm, in KiB (0 when unreadable).
fn resident_kib() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page / 1024)
}

/// Everything `execve` needs, built before any fork: the strings and the null-terminated
/// pointer arrays into them. The pointers stay valid because the strings are owned here and
/// never modified (a `CString`'s heap buffer does not move when the `Vec` holding it does).
struct ExecArgs {
    path: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl ExecArgs {
    fn new<A: AsRef<[u8]>>(
        path: &Path,
        argv: &[&OsStr],
        env: &[A],
    ) -> Result<ExecArgs, ProbeError> {
        let nul = |what: &str| ProbeError::Failed(format!("{what} contains a NUL byte"));
        let path = CString::new(path.as_os_str().as_bytes()).map_err(|_| nul("program path"))?;
        let args = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()).map_err(|_| nul("an argument")))
            .collect::<Result<Vec<_>, _>>()?;
        let vars = env
            .iter()
            .map(|v| CString::new(v.as_ref()).map_err(|_| nul("an environment variable")))
            .collect::<Result<Vec<_>, _>>()?;
        let ptrs = |v: &[CString]| {
            v.iter().map(|c| c.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
        };
        let argv = ptrs(&args);
        let envp = ptrs(&vars);
        let mut strings = args;
        strings.extend(vars);
        Ok(ExecArgs { path, _strings: strings, argv, envp })
    }
}

struct Spawn {
    exec: Option<ExecArgs>,
    parent_rss_kib: u64,
}

impl Spawn {
    /// One create-and-reap; the child's exit status must be 0.
    #[inline]
    fn once(&self) -> Result<(), ProbeError> {
        let mut child = match &self.exec {
            None => Child::fork(None, || 0)?,
            Some(e) => {
                let (path, argv, envp) = (e.path.as_ptr(), e.argv.as_ptr(), e.envp.as_ptr());
                Child::fork(None, move || {
                    // SAFETY: all three point into `ExecArgs` built before the fork, which the
                    // parent keeps alive (and the child's copy of it is untouched); both
                    // arrays are null-terminated. execve is async-signal-safe.
                    unsafe { libc::execve(path, argv, envp) };
                    // Only reached when execve failed: the status tells the parent.
                    127
                })?
            }
        };
        match child.wait()? {
            0 => Ok(()),
            127 if self.exec.is_some() => Err(ProbeError::Failed(format!(
                "execve of {} failed in the child (status 127)",
                self.exec.as_ref().map_or("?".into(), |e| e.path.to_string_lossy().into_owned())
            ))),
            s => Err(ProbeError::Failed(format!("child exited with status {s}, not 0"))),
        }
    }
}

impl Workload for Spawn {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let start = Instant::now();
        for _ in 0..iters {
            // Each iteration takes 0.1-1 ms: check for Ctrl-C between them.
            if interrupt::requested() {
                return Err(ProbeError::Interrupted);
            }
            self.once()?;
        }
        Ok(Timing::from_elapsed(start.elapsed()))
    }
}

impl Instance for Spawn {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let mut n = Params::new().with("parent_rss_kib", self.parent_rss_kib);
        if let Some(e) = &self.exec {
            n.set("program", e.path.to_string_lossy());
            n.set("env_vars", e.envp.len() - 1);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::clock::Calibration;
    use schedlab_measure::sampler::{self, Settings};
    use std::path::PathBuf;

    /// The helper program for [`Context::exec_helper`] in tests.
    fn true_helper() -> Option<(PathBuf, Vec<String>)> {
        ["/bin/true", "/usr/bin/true"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| check_executable(p).is_ok())
            .map(|p| (p, Vec::new()))
    }

    fn sample(kind: Kind, ctx: &Context, settings: &Settings) -> Result<Vec<f64>, ProbeError> {
        let mut inst = ProcProbe(kind).setup(&Params::new(), ctx)?;
        let metric = inst.metric();
        let c =
            sampler::collect_in(&mut *inst, settings, &Calibration::zero(), metric, Unit::Micros)?;
        Ok(c.samples.iter().map(|s| s.value).collect())
    }

    #[test]
    fn exec_args_are_null_terminated_and_point_at_the_strings() {
        let e = ExecArgs::new(
            Path::new("/bin/sh"),
            &["sh", "-c", "true"].map(OsStr::new),
            &["A=1", "B=two"],
        )
        .unwrap();
        assert_eq!(e.argv.len(), 4);
        assert!(e.argv[3].is_null());
        assert_eq!(e.envp.len(), 3);
        assert!(e.envp[2].is_null());
        // SAFETY: the pointers are into CStrings owned by `e`, alive here.
        let s = |p| unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap();
        assert_eq!(s(e.argv[1]), "-c");
        assert_eq!(s(e.envp[1]), "B=two");
        assert!(ExecArgs::new(Path::new("/bin/x"), &[OsStr::new("a\0b")], &[] as &[&str]).is_err());
    }

    #[test]
    fn fork_exec_runs_bin_true_and_skips_without_a_helper() {
        let ctx = Context::for_tests();
        assert!(matches!(sample(Kind::Exec, &ctx, &Settings::smoke()), Err(ProbeError::Skip(_))));
        let Some(helper) = true_helper() else {
            eprintln!("no /bin/true here; not tested");
            return;
        };
        let ctx = Context { exec_helper: Some(helper), ..Context::for_tests() };
        let v = sample(Kind::Exec, &ctx, &Settings::smoke()).unwrap();
        assert!(v.iter().all(|&x| x > 0.0 && x.is_finite()));
    }

    #[test]
    fn a_failing_exec_or_child_is_an_error() {
        let ctx = Context {
            exec_helper: Some((PathBuf::from("/nonexistent/schedlab"), Vec::new())),
            ..Context::for_tests()
        };
        assert!(matches!(
            ProcProbe(Kind::Exec).setup(&Params::new(), &ctx),
            Err(ProbeError::Failed(_))
        ));
        // A helper that runs but exits non-zero: /bin/false.
        if check_executable(Path::new("/bin/false")).is_ok() {
            let ctx = Context {
                exec_helper: Some((PathBuf::from("/bin/false"), Vec::new())),
                ..Context::for_tests()
            };
            let e = sample(Kind::Exec, &ctx, &Settings::smoke()).unwrap_err();
            assert!(matches!(e, ProbeError::Failed(ref m) if m.contains("status 1")), "{e}");
        }
    }

    #[test]
    fn fork_exit_and_shell_create_and_reap_children() {
        let ctx = Context::for_tests();
        let v = sample(Kind::Exit, &ctx, &Settings::smoke()).unwrap();
        assert!(v.iter().all(|&x| x > 0.0));
        match sample(Kind::Shell, &ctx, &Settings::smoke()) {
            Ok(v) => assert!(v.iter().all(|&x| x > 0.0)),
            Err(ProbeError::Skip(why)) => assert!(why.contains("/bin/sh")),
            Err(e) => panic!("{e}"),
        }
    }

    /// Developer aid: quick-suite figures for fork_exec with /bin/true as the helper (the
    /// medians test has no schedlab binary). Run with
    /// `cargo test --release -p schedlab-probes -- --ignored --nocapture print_fork_exec_true`.
    #[test]
    #[ignore = "measures; prints figures for a developer to read"]
    fn print_fork_exec_true() {
        let Some(helper) = true_helper() else { return };
        let ctx = Context {
            suite: crate::Suite::Quick,
            exec_helper: Some(helper),
            ..Context::for_tests()
        };
        let mut v = sample(Kind::Exec, &ctx, &Settings::quick()).unwrap();
        let median = schedlab_measure::stats::median(&v).unwrap_or(f64::NAN);
        v.sort_by(f64::total_cmp);
        eprintln!("os.proc.fork_exec (/bin/true) median {median:.1} µs, samples {v:.1?}");
    }
}
