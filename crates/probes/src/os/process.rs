//! Process creation: lmbench's `lat_proc fork`, `lat_proc exec` and `lat_proc shell`, in
//! microseconds per process created and reaped. UnixBench's `spawn` and `execl` measure the
//! same things as counts in a fixed time; we time each batch with the monotonic clock.
//!
//! Each iteration forks one child and waits for it with `waitpid`, checking that it exited
//! with status 0 (lmbench's children `exit(1)` and nobody looks; we look, because a failed
//! `execve` is otherwise measured as a very fast exec):
//! - `os.proc.fork_exit`: the child `_exit(0)`s at once;
//! - `os.proc.fork_exec`: the child `execve`s a program that exits at once, with an empty
//!   environment as lmbench passes. Which program is the definition (the cost of exec grows
//!   with what the loader maps and relocates), so there are two, both named:
//!   - `def=lmbench` (the default): a small dynamically linked C program, `/bin/true`, with
//!     standard output closed first, as lat_proc's `do_forkexec` does before it execs its
//!     16 KB `hello` (`close(1); execve(PROG, nav, 0)`). coreutils' `true` (35 KB, libc only)
//!     is that program: with no arguments its `main` returns at once, as `hello`'s `write` to
//!     the closed descriptor does. The default, because it measures the kernel's exec, not our
//!     build: the number stays put from one schedlab version to the next.
//!   - `def=schedlab`: the schedlab binary's `__exec-helper` mode (tens of MB with debug
//!     information, std's start-up): what exec'ing a large Rust program costs, 1.7× lmbench's
//!     figure on the machine of issue 14.
//!
//!   A helper built with the crate was tried and rejected: a `#![no_main]` Rust binary still
//!   links std (300 KB of text: the panic and backtrace machinery, which no stable setting
//!   removes without `panic = "abort"` for the whole workspace) and loads `libgcc_s` besides
//!   libc; fork + exec of it took 723 µs where `/bin/true` took 611 µs (best of 5 × 1000,
//!   this 2-CPU VM, loaded), 18% more, so it would not be lmbench's definition.
//! - `os.proc.fork_sh`: by default the child `execve`s `/bin/sh -c true` with our environment;
//!   `true` is a shell builtin, so this is the shell's start-up alone. `def=lmbench` is
//!   lat_proc's `do_shell` exactly: `execlp("/bin/sh", "sh", "-c", PROG)` with our environment
//!   and standard output closed, PROG being the small program above, so the shell also execs
//!   a program too: dash 0.5.12 (Debian's /bin/sh) `vfork`s and `execve`s it and waits, as
//!   `strace -f sh -c /bin/true` shows; so the row is fork + exec of the shell + vfork + exec
//!   of the program, about the default's value plus one fork_exec.
//!
//! - `os.proc.execl`: UnixBench's `execl`, an exec chain without fork. execl.c execs itself
//!   again and again in one process (a small C program: 8 KB of bss and `big.c`'s code),
//!   passing the environment on, and counts execs in 20 s (seed 002: Linux 49469, 404 µs
//!   each). Our chain is of small C programs too: `/usr/bin/env /usr/bin/env ... /bin/true`,
//!   each `env` (48 KB, libc only) `execvp`ing the next argument by its full path (no `PATH`
//!   search), with our environment. One iteration forks a child that runs a chain of
//!   `links` (10) `env`s ending in `true`; the same number of children that exec `true`
//!   alone are timed in the same call and subtracted, so the fork, the final `true` and the
//!   reaping drop out and the value is µs per exec in the chain. Not offered: the schedlab
//!   binary exec'ing itself, which would be execl's "itself" literally but measures our
//!   48 MB build (see fork_exec def=schedlab for that cost).
//!
//! # Fork safety
//! The children come from [`Child::fork`]: after `fork` only async-signal-safe code runs,
//! so every `argv`/`envp` string and pointer array is built in setup. The helper's prologue
//! (death signal, default SIGINT/SIGTERM/SIGPIPE: five cheap system calls in the child) is in
//! every iteration; it is well under 1% of a fork and is what lets a Ctrl-C or a crash of
//! ours leave no process behind. Each child also writes the CPU it starts on into a shared
//! page (`sys::CpuSlot`: `sched_getcpu`, an rseq or vDSO read, and a store: nanoseconds
//! in a fork of a hundred microseconds), so the `placement` note says whether the kernel put
//! the children on the parent's CPU (the last child of each sample; a child can move at
//! exec, which exec balancing may do, after it wrote). lmbench closes the child's stdout before exec to silence
//! hello; our programs print nothing, so we leave it open.
//!
//! The cost of `fork` grows with the parent's address space (page tables to copy), so the
//! parent's resident size is recorded in the notes.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sys::{Child, CpuSlot};
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use super::Def;
use crate::{Context, Info, Instance, Probe, Suite};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Exit,
    Exec,
    Shell,
    Execl,
}

struct ProcProbe(Kind);

/// The process-creation probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Kind::Exit, Kind::Exec, Kind::Shell, Kind::Execl]
        .into_iter()
        .map(|k| Box::new(ProcProbe(k)) as Box<dyn Probe>)
        .collect()
}

/// The shell lmbench's `lat_proc shell` runs.
const SHELL: &str = "/bin/sh";

/// Where the small C program (lmbench's `hello`, see the module doc) is looked for.
const SMALL_PROGRAMS: [&str; 2] = ["/bin/true", "/usr/bin/true"];

/// The program execl's chain is made of: `env` execs its first argument.
const ENV_PROGRAMS: [&str; 2] = ["/usr/bin/env", "/bin/env"];

/// Execs in one execl chain (the `env`s; the final `true` is subtracted).
const EXECL_LINKS: usize = 10;

/// The first executable of [`SMALL_PROGRAMS`].
fn small_program() -> Result<&'static Path, ProbeError> {
    SMALL_PROGRAMS.iter().map(Path::new).find(|p| check_executable(p).is_ok()).ok_or_else(|| {
        ProbeError::Skip(format!("needs a small program to exec: {}", SMALL_PROGRAMS.join(" or ")))
    })
}

/// The size of the file at `path` in KiB (0 when unreadable), for the notes.
fn file_kib(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len().div_ceil(1024))
}

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
                "fork() + execve() of a program that exits at once (empty environment), then waitpid(): µs per process",
                "lmbench lat_proc exec (def=lmbench, the default: /bin/true, a small C program like its hello, stdout closed; def=schedlab: the schedlab binary's exit-at-once mode, a large Rust program)",
                "/bin/true; the schedlab binary for def=schedlab",
            ),
            Kind::Shell => (
                "os.proc.fork_sh",
                "fork() + execve(/bin/sh -c true), then waitpid(): µs per process",
                "lmbench lat_proc shell (default: sh -c true, a builtin, the shell alone; def=lmbench: sh -c /bin/true with stdout closed, the shell execs a program as lmbench's does)",
                "/bin/sh (and /bin/true for def=lmbench)",
            ),
            Kind::Execl => (
                "os.proc.execl",
                "exec chain without fork: each of 10 small programs (/usr/bin/env) execs the next, our environment passed on: µs per exec",
                "UnixBench execl (it counts execs of its own small C binary in 20 s: 10^6 / value per second; our chain: env execs env ... true, fork and the last exec subtracted)",
                "/usr/bin/env and /bin/true",
            ),
        };
        Info { id, doc, unit: Unit::Micros, mirrors, requires }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let _ = suite;
        let def = |d: Def| Params::new().with("def", d.key());
        match self.0 {
            Kind::Exit => vec![Params::new()],
            // Both named: the key without `def` meant the schedlab binary before def existed.
            Kind::Exec => vec![def(Def::Lmbench), def(Def::Schedlab)],
            Kind::Shell => vec![Params::new(), def(Def::Lmbench)],
            Kind::Execl => vec![Params::new()],
        }
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let both = [Def::Schedlab, Def::Lmbench];
        let def = match self.0 {
            Kind::Exit => Def::Schedlab,
            Kind::Execl => Def::Unixbench,
            Kind::Exec => Def::from_params(params, Def::Lmbench, &both)?,
            Kind::Shell => Def::from_params(params, Def::Schedlab, &both)?,
        };
        if self.0 == Kind::Execl {
            let small = small_program()?;
            let env_prog = ENV_PROGRAMS
                .iter()
                .map(Path::new)
                .find(|p| check_executable(p).is_ok())
                .ok_or_else(|| ProbeError::Skip(format!("needs {}", ENV_PROGRAMS.join(" or "))))?;
            let vars = env();
            let argv: Vec<&OsStr> = std::iter::repeat_n(env_prog.as_os_str(), EXECL_LINKS)
                .chain([small.as_os_str()])
                .collect();
            let chain = ExecArgs::new(env_prog, &argv, &vars)?;
            let base = ExecArgs::new(small, &[small.as_os_str()], &vars)?;
            return Ok(Box::new(Spawn {
                exec: Some(chain),
                close_stdout: false,
                parent_rss_kib: resident_kib(),
                chain: Some(Chain { base, links: EXECL_LINKS }),
                child_cpu: Arc::new(CpuSlot::new()?),
            }));
        }
        let exec = match (self.0, def) {
            (Kind::Exit, _) | (Kind::Execl, _) => None,
            (Kind::Exec, Def::Lmbench) => {
                let prog = small_program()?;
                // do_forkexec: nav = { PROG, 0 }, a null environment.
                Some(ExecArgs::new(prog, &[prog.as_os_str()], &[] as &[&str])?)
            }
            (Kind::Exec, _) => {
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
            (Kind::Shell, _) => {
                if let Err(e) = check_executable(Path::new(SHELL)) {
                    return Err(ProbeError::Skip(format!("needs {SHELL} ({e})")));
                }
                // execlp passes the caller's environment on.
                let env = env();
                let command = match def {
                    Def::Lmbench => small_program()?.as_os_str(),
                    _ => OsStr::new("true"),
                };
                let argv = [OsStr::new("sh"), OsStr::new("-c"), command];
                Some(ExecArgs::new(Path::new(SHELL), &argv, &env)?)
            }
        };
        // lat_proc's children close(1) before they exec.
        let close_stdout = def == Def::Lmbench && exec.is_some();
        Ok(Box::new(Spawn {
            exec,
            close_stdout,
            parent_rss_kib: resident_kib(),
            chain: None,
            child_cpu: Arc::new(CpuSlot::new()?),
        }))
    }
}

/// Our environment as `KEY=value` strings, for `execve`.
pub(super) fn env() -> Vec<Vec<u8>> {
    std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            kv
        })
        .collect()
}

/// `access(path, X_OK)`.
pub(super) fn check_executable(path: &Path) -> std::io::Result<()> {
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
pub(super) struct ExecArgs {
    path: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl ExecArgs {
    /// The program path, `argv` and `envp` as `execve` takes them; valid while `self` is.
    pub(super) fn pointers(
        &self,
    ) -> (*const libc::c_char, *const *const libc::c_char, *const *const libc::c_char) {
        (self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr())
    }

    pub(super) fn new<A: AsRef<[u8]>>(
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
    /// Close descriptor 1 in the child before exec (lmbench's definition).
    close_stdout: bool,
    parent_rss_kib: u64,
    /// execl: `exec` is a chain of `links` execs, and `base` its end alone.
    chain: Option<Chain>,
    /// Where each child starts, for the placement record (the last of a sample is kept).
    child_cpu: Arc<CpuSlot>,
}

/// The baseline subtracted from an exec chain, and the chain's length.
struct Chain {
    base: ExecArgs,
    links: usize,
}

impl Spawn {
    /// `iters` create-and-reaps of `exec`, timed.
    fn batch(&self, exec: Option<&ExecArgs>, iters: u64) -> Result<Duration, ProbeError> {
        let start = Instant::now();
        for _ in 0..iters {
            // Each iteration takes 0.1-10 ms: check for Ctrl-C between them.
            if interrupt::requested() {
                return Err(ProbeError::Interrupted);
            }
            create_and_reap(exec, self.close_stdout, &self.child_cpu)?;
        }
        Ok(start.elapsed())
    }
}

/// Forks a child that execs `exec` (or exits at once when `None`) and reaps it; its exit
/// status must be 0. The child first writes its CPU into `cpu` (a load and a store).
#[inline]
fn create_and_reap(
    exec: Option<&ExecArgs>,
    close_stdout: bool,
    cpu: &CpuSlot,
) -> Result<(), ProbeError> {
    let mut child = match exec {
        None => Child::fork(None, || {
            cpu.record();
            0
        })?,
        Some(e) => {
            let (path, argv, envp) = e.pointers();
            Child::fork(None, move || {
                cpu.record();
                if close_stdout {
                    // SAFETY: the child's own descriptor 1; close is async-signal-safe.
                    unsafe { libc::close(1) };
                }
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
        127 if exec.is_some() => Err(ProbeError::Failed(format!(
            "execve of {} failed in the child (status 127)",
            exec.map_or("?".into(), |e| e.path.to_string_lossy().into_owned())
        ))),
        s => Err(ProbeError::Failed(format!("child exited with status {s}, not 0"))),
    }
}

impl Workload for Spawn {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let Some(chain) = &self.chain else {
            return Ok(Timing::from_elapsed(self.batch(self.exec.as_ref(), iters)?));
        };
        // The chain's end alone first, then the chain; the difference is the links. A
        // neighbour's burst during the end alone can make it outlast the chain (seen with
        // the smoke suite's few iterations on a loaded machine): such a pair says nothing,
        // so it is taken again, a few times, before the sample fails.
        let mut last = None;
        for _ in 0..5 {
            let base = self.batch(Some(&chain.base), iters)?;
            let full = self.batch(self.exec.as_ref(), iters)?;
            if let Some(links) = full.checked_sub(base) {
                return Ok(Timing::from_elapsed(links));
            }
            last = Some((full, base));
        }
        let (full, base) = last.expect("five tries");
        Err(ProbeError::Failed(format!(
            "a chain of {} execs took less than none five times over ({full:?} < {base:?} the \
             last time): the machine is too disturbed to measure it",
            chain.links
        )))
    }

    /// This process and its children, a new one each iteration: each child writes the CPU
    /// it starts on (before any exec, which may move it: exec balancing), and a sample's
    /// observation is its last child's.
    fn parties(&self) -> Vec<Party> {
        vec![Party::caller("parent"), Party::fresh("child", self.child_cpu.clone())]
    }
}

impl Instance for Spawn {
    fn metric(&self) -> Metric {
        Metric::per_ops(self.chain.as_ref().map_or(1, |c| c.links) as f64)
    }

    fn notes(&self) -> Params {
        let mut n = Params::new().with("parent_rss_kib", self.parent_rss_kib);
        if let Some(e) = &self.exec {
            let path = e.path.to_string_lossy();
            n.set("program_kib", file_kib(Path::new(path.as_ref())));
            n.set("program", path);
            n.set("env_vars", e.envp.len() - 1);
            if self.close_stdout {
                n.set("stdout", "closed");
            }
        }
        if let Some(c) = &self.chain {
            n.set("links", c.links);
            n.set("subtracted", format!("fork + exec {}", c.base.path.to_string_lossy()));
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
        small_program().ok().map(|p| (p.to_path_buf(), Vec::new()))
    }

    fn schedlab_def() -> Params {
        Params::new().with("def", "schedlab")
    }

    fn sample_with(
        kind: Kind,
        params: &Params,
        ctx: &Context,
        settings: &Settings,
    ) -> Result<(Vec<f64>, Params), ProbeError> {
        let mut inst = ProcProbe(kind).setup(params, ctx)?;
        let metric = inst.metric();
        let c =
            sampler::collect_in(&mut *inst, settings, &Calibration::zero(), metric, Unit::Micros)?;
        Ok((c.samples.iter().map(|s| s.value).collect(), inst.notes()))
    }

    /// Samples `kind` with our definition (fork_exec: the exec helper).
    fn sample(kind: Kind, ctx: &Context, settings: &Settings) -> Result<Vec<f64>, ProbeError> {
        let params = if kind == Kind::Exec { schedlab_def() } else { Params::new() };
        sample_with(kind, &params, ctx, settings).map(|(v, _)| v)
    }

    /// lmbench's definitions exec the small program with an empty environment (fork_exec)
    /// or through `sh -c` with ours (fork_sh), standard output closed in both.
    #[test]
    fn lmbench_definitions_exec_the_small_program_with_stdout_closed() {
        let Ok(small) = small_program() else {
            eprintln!("no /bin/true here; not tested");
            return;
        };
        let ctx = Context::for_tests();
        let lm = Params::new().with("def", "lmbench");
        // fork_exec's default is lmbench's definition, which needs no exec helper.
        for params in [&Params::new(), &lm] {
            let (v, notes) = sample_with(Kind::Exec, params, &ctx, &Settings::smoke()).unwrap();
            assert!(v.iter().all(|&x| x > 0.0 && x.is_finite()));
            assert_eq!(notes.get("program"), small.to_str(), "{notes}");
            assert_eq!(notes.get("env_vars"), Some("0"), "{notes}");
            assert_eq!(notes.get("stdout"), Some("closed"), "{notes}");
        }
        let (_, notes) = sample_with(Kind::Shell, &lm, &ctx, &Settings::smoke()).unwrap();
        assert_eq!(notes.get("program"), Some(SHELL), "{notes}");
        assert_eq!(notes.get("stdout"), Some("closed"), "{notes}");
        let (_, notes) =
            sample_with(Kind::Shell, &Params::new(), &ctx, &Settings::smoke()).unwrap();
        assert_eq!(notes.get("stdout"), None, "{notes}");
        assert!(ProcProbe(Kind::Exec)
            .setup(&Params::new().with("def", "unixbench"), &ctx)
            .is_err());
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
    fn fork_exec_schedlab_def_runs_a_helper_and_skips_without_one() {
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

    /// The execl chain runs to its end: each env execs the next program (a chain ending in
    /// /bin/false fails with false's status), and the probe reports per link.
    #[test]
    fn execl_chain_runs_to_its_end() {
        let ctx = Context::for_tests();
        let (v, notes) = match sample_with(Kind::Execl, &Params::new(), &ctx, &Settings::smoke()) {
            Ok(r) => r,
            Err(ProbeError::Skip(why)) => {
                eprintln!("os.proc.execl skipped: {why}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert!(v.iter().all(|&x| x > 0.0 && x.is_finite()), "{v:?}");
        assert_eq!(notes.get("links"), Some("10"), "{notes}");
        let env = ENV_PROGRAMS.iter().map(Path::new).find(|p| check_executable(p).is_ok());
        let (Some(env), true) = (env, check_executable(Path::new("/bin/false")).is_ok()) else {
            return;
        };
        let argv = |last: &'static str| [env.as_os_str(), env.as_os_str(), OsStr::new(last)];
        let ok = ExecArgs::new(env, &argv("/bin/true"), &[] as &[&str]).unwrap();
        let cpu = CpuSlot::new().unwrap();
        create_and_reap(Some(&ok), false, &cpu).unwrap();
        assert!(cpu.take().is_some(), "the child wrote where it started");
        let bad = ExecArgs::new(env, &argv("/bin/false"), &[] as &[&str]).unwrap();
        let e = create_and_reap(Some(&bad), false, &cpu).unwrap_err();
        assert!(e.to_string().contains("status 1"), "{e}");
    }

    #[test]
    fn a_failing_exec_or_child_is_an_error() {
        let ctx = Context {
            exec_helper: Some((PathBuf::from("/nonexistent/schedlab"), Vec::new())),
            ..Context::for_tests()
        };
        assert!(matches!(
            ProcProbe(Kind::Exec).setup(&schedlab_def(), &ctx),
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
