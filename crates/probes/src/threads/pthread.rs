//! The `pthread-os` and `pthread-rt` backends: one C program, `csrc/pthread_bench.c`, run
//! under glibc's threads (`pthread-os`) and with libschedlab_pthread.so preloaded
//! (`pthread-rt`, POSIX threads as schedlab-rt user threads), so the two rows of an
//! operation differ only in the thread library, and sit beside the os, rt and tokio rows
//! of the same probe (create, switch, condvar ping-pong, mutexes) or in probes of their own
//! (`threads.messaging`, `threads.compress`, which have no Rust rows yet).
//!
//! The program is compiled by `build.rs` and embedded; setup writes it into a directory of
//! its own under the run's tmp dir (removed on drop), so the `schedlab` binary works
//! wherever it is copied. Each sample is one run of the program, `pthread_bench OP ITERS
//! [N]`, which times only its measured loop and prints `elapsed_ns N`; starting the process,
//! loading the library and creating the helper threads are outside the timer. The C file's
//! header states, per operation, where the timer starts and stops and what one op is; each
//! row carries that as its `timer` note. Every measured loop runs in a thread the program
//! created: under the library the initial thread stays a kernel thread and only the threads
//! it creates are user threads.
//!
//! Placement, as the os backend's probes: the one-processor operations (create, yield,
//! condvar, lock) run the program pinned to the first allowed CPU and the library with one
//! virtual processor; the rest (contended mutex, messaging, compress) run on every allowed
//! CPU, placed by the kernel, and the library with one virtual processor per CPU.
//!
//! Runs are child processes started by the crosscheck's runner (`crosscheck::tool::run`: own
//! process group, killed on a stop request or after its timeout), the one copy of that.
//!
//! Skips, with the reason: no C compiler when this crate was built (both backends); for
//! `pthread-rt`, no library (`SCHEDLAB_PTHREAD_LIB`, which `schedlab` sets from its embedded
//! copy, names it) or a CPU without FSGSBASE, which the library needs to give each user
//! thread its own thread pointer.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schedlab_measure::model::{Metric, Params};
use schedlab_measure::sys;
use schedlab_measure::{ProbeError, Timing};

use super::backend::{self, Bench};
use crate::crosscheck::tool::{self, Ran};
use crate::{Context, Instance, Suite};

include!(concat!(env!("OUT_DIR"), "/pthread_bench.rs"));

/// What the pthread rows need, for the catalog's `requires`.
pub(crate) const REQUIRES: &str = "pthread-os, pthread-rt: a C compiler when schedlab was built; pthread-rt: libschedlab_pthread.so (SCHEDLAB_PTHREAD_LIB) and FSGSBASE";

/// The environment variable that names libschedlab_pthread.so.
pub const LIBRARY_ENV: &str = "SCHEDLAB_PTHREAD_LIB";

/// Which thread library runs the C program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Library {
    /// glibc's NPTL: every thread a kernel thread (`backend=pthread-os`).
    Glibc,
    /// libschedlab_pthread.so preloaded: created threads are schedlab-rt user threads
    /// (`backend=pthread-rt`).
    Schedlab,
}

impl Library {
    /// Both, in display order.
    pub(super) const ALL: [Library; 2] = [Library::Glibc, Library::Schedlab];

    /// The `backend` parameter value.
    pub(super) fn key(self) -> &'static str {
        match self {
            Library::Glibc => "pthread-os",
            Library::Schedlab => "pthread-rt",
        }
    }

    /// For a probe that offers every backend: `Some` for `pthread-os|pthread-rt`, `None` for
    /// `os|rt|tokio` (the probe's own code), an error naming all five for anything else.
    pub(super) fn from_params(p: &Params) -> Result<Option<Library>, ProbeError> {
        match p.get("backend").unwrap_or("os") {
            "pthread-os" => Ok(Some(Library::Glibc)),
            "pthread-rt" => Ok(Some(Library::Schedlab)),
            "os" | "rt" | "tokio" => Ok(None),
            other => Err(ProbeError::Failed(format!(
                "bad backend {other:?}: use os, rt, tokio, pthread-os or pthread-rt"
            ))),
        }
    }

    /// For a probe that has only the C program: the library, or an error naming the two.
    pub(super) fn only(p: &Params) -> Result<Library, ProbeError> {
        match p.get("backend").unwrap_or("pthread-os") {
            "pthread-os" => Ok(Library::Glibc),
            "pthread-rt" => Ok(Library::Schedlab),
            other => Err(ProbeError::Failed(format!(
                "bad backend {other:?}: use pthread-os or pthread-rt (this probe is the C program only)"
            ))),
        }
    }
}

/// `base` with `backend=pthread-os` and `backend=pthread-rt`, once per parameter set.
pub(super) fn per_library(base: &[Params]) -> Vec<Params> {
    base.iter()
        .flat_map(|p| Library::ALL.iter().map(move |l| p.clone().with("backend", l.key())))
        .collect()
}

/// One operation of the C program, with its parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// Create `n` threads that return at once, join them.
    Create(usize),
    /// Two threads calling `sched_yield`.
    Yield,
    /// A turn passed through a mutex and a condition variable.
    Condvar,
    /// One thread locking and unlocking a mutex.
    Lock,
    /// `n` threads contending for one mutex.
    Mutex(usize),
    /// hackbench -T: `n` groups of 20 senders and 20 receivers over socketpairs.
    Messaging(usize),
    /// `n` threads compressing 64 KiB blocks.
    Compress(usize),
}

impl Op {
    /// The program's arguments for `iters` iterations.
    fn args(self, iters: u64) -> Vec<String> {
        let (name, n) = match self {
            Op::Create(n) => ("create", Some(n)),
            Op::Yield => ("yield", None),
            Op::Condvar => ("condvar", None),
            Op::Lock => ("lock", None),
            Op::Mutex(n) => ("mutex", Some(n)),
            Op::Messaging(n) => ("messaging", Some(n)),
            Op::Compress(n) => ("compress", Some(n)),
        };
        let mut args = vec![name.to_string(), iters.to_string()];
        args.extend(n.map(|n| n.to_string()));
        args
    }

    /// Operations per iteration: what the elapsed time is divided by.
    fn ops_per_iter(self) -> f64 {
        match self {
            Op::Create(n) | Op::Mutex(n) | Op::Compress(n) => n as f64,
            Op::Yield | Op::Condvar => 2.0,
            Op::Lock => 1.0,
            Op::Messaging(groups) => (groups * 20 * 20) as f64,
        }
    }

    /// True for the operations measured on one processor.
    fn one_cpu(self) -> bool {
        matches!(self, Op::Create(_) | Op::Yield | Op::Condvar | Op::Lock)
    }

    /// Where the program's timer starts and stops, and what one op is (the C file's
    /// header says the same).
    pub(super) fn timer(self) -> &'static str {
        match self {
            Op::Create(_) => "in a created thread: around ITERS rounds of create N threads (default attributes) then join the N; op = one thread created and joined",
            Op::Yield => "two created threads meet at a yield gate, then each calls sched_yield ITERS times; first start to last end; op = one switch (2 per iteration)",
            Op::Condvar => "in a created thread, its partner already created: around ITERS round trips of a turn under one mutex and one condition variable; op = one hand-off (2 per round trip)",
            Op::Lock => "in a created thread: around ITERS lock, increment, unlock of one mutex; op = one lock+unlock",
            Op::Mutex(_) => "N created threads pass a start gate (waiting by sched_yield), then each locks, increments and unlocks one shared mutex ITERS times; first start to last end; op = one lock+unlock (N per iteration)",
            Op::Messaging(_) => "G groups of 20 sender and 20 receiver threads pass a start gate; each sender writes a 100-byte message to each receiver's socketpair ITERS times; first start to last end; op = one message (400 G per iteration)",
            Op::Compress(_) => "N created threads pass a start gate, then each compresses its 64 KiB text block ITERS times (greedy LZ77, one hash probe); first start to last end; op = one block (N per iteration)",
        }
    }
}

/// The library's path from [`LIBRARY_ENV`], or why there is none.
fn library_path() -> Result<PathBuf, String> {
    library_at(std::env::var_os(LIBRARY_ENV))
}

/// The library's path from the value of [`LIBRARY_ENV`], or why there is none.
fn library_at(value: Option<std::ffi::OsString>) -> Result<PathBuf, String> {
    const WHY: &str = "the schedlab pthread library was not found";
    let Some(p) = value.filter(|p| !p.is_empty()) else {
        return Err(format!(
            "{WHY}: {LIBRARY_ENV} is not set (schedlab sets it from its embedded copy; by hand: \
             cd crates/pthread && cargo build --release, then {LIBRARY_ENV}=crates/pthread/target/release/libschedlab_pthread.so)"
        ));
    };
    let p = PathBuf::from(p);
    if !p.is_file() {
        return Err(format!("{WHY}: {LIBRARY_ENV}={} is not a file", p.display()));
    }
    Ok(p)
}

/// True when the CPU and kernel let user space write the FS base (`AT_HWCAP2` bit 1,
/// HWCAP2_FSGSBASE, Linux 5.9+), which the library uses to give each user thread its own
/// thread pointer.
pub(super) fn has_fsgsbase() -> bool {
    // SAFETY: getauxval reads the auxiliary vector; it has no preconditions.
    let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
    hwcap2 & (1 << 1) != 0
}

/// Why `pthread-rt` cannot run here, if it cannot; its library otherwise.
fn library_for(lib: Library) -> Result<Option<PathBuf>, ProbeError> {
    match lib {
        Library::Glibc => Ok(None),
        Library::Schedlab => {
            if !has_fsgsbase() {
                return Err(ProbeError::Skip(
                    "the schedlab pthread library needs FSGSBASE (AT_HWCAP2 bit 1: the CPU's and Linux 5.9+) to give each user thread its own thread pointer; this machine has none".into(),
                ));
            }
            library_path().map(Some).map_err(ProbeError::Skip)
        }
    }
}

/// The program written out for one instance: its directory (which also takes each run's
/// output) is removed on drop.
struct Program {
    dir: PathBuf,
    path: PathBuf,
}

impl Program {
    /// Writes the program `bytes` into a new directory under `tmp_dir`.
    fn write(tmp_dir: &Path, bytes: &[u8]) -> Result<Program, ProbeError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = tmp_dir.join(format!("schedlab-pthread-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| ProbeError::Failed(format!("creating {}: {e}", dir.display())))?;
        // From here the directory is ours to remove, whatever fails next.
        let program = Program { path: dir.join("pthread_bench"), dir };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(&program.path)
            .and_then(|mut f| f.write_all(bytes).map(|()| f))
            .map_err(|e| ProbeError::Failed(format!("writing {}: {e}", program.path.display())))?;
        f.flush().map_err(|e| ProbeError::io("flushing pthread_bench", e))?;
        drop(f);
        Ok(program)
    }

    /// One run: what it printed.
    fn run(
        &self,
        args: &[String],
        env: &[(&str, String)],
        pin: Option<usize>,
    ) -> Result<Output, ProbeError> {
        // A program just written can be "busy" for a moment if another thread of this
        // process forked while our descriptor was open (the child holds it until it execs);
        // retry briefly rather than fail the sample.
        let mut busy_retries = 50;
        loop {
            match tool::run(&self.path, args, env, pin, &self.dir) {
                Ran::Output(text) => return Output::parse(&text).map_err(ProbeError::Failed),
                Ran::Interrupted => return Err(ProbeError::Interrupted),
                Ran::Failed(why) if why.contains("os error 26") && busy_retries > 0 => {
                    busy_retries -= 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ran::Failed(why) if why.contains("os error 13") => {
                    return Err(ProbeError::Failed(format!(
                        "{why} (is {} mounted noexec? give another --tmp-dir)",
                        self.dir.parent().unwrap_or(&self.dir).display()
                    )))
                }
                Ran::Failed(why) => return Err(ProbeError::Failed(why)),
            }
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What one run of the program printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The timed part, in nanoseconds (`elapsed_ns N`).
    pub elapsed_ns: u64,
    /// The file of the `pthread_create` the program was bound to (`pthread_create_from
    /// FILE`), when it could tell.
    pub bound_to: Option<String>,
}

impl Output {
    /// Reads the program's lines (anything else it or the library printed is ignored).
    ///
    /// # Errors
    /// When there is no `elapsed_ns` line, or its number does not parse: the message
    /// quotes the output's end.
    pub fn parse(output: &str) -> Result<Output, String> {
        let last = |key: &str| {
            output.lines().rev().find_map(|l| l.trim().strip_prefix(key).map(str::trim))
        };
        let bound_to = last("pthread_create_from ").map(str::to_string);
        match last("elapsed_ns ").map(str::parse::<u64>) {
            Some(Ok(elapsed_ns)) => Ok(Output { elapsed_ns, bound_to }),
            Some(Err(e)) => Err(format!("pthread_bench printed a bad elapsed_ns line: {e}")),
            None => {
                let tail: String = output.trim().chars().rev().take(200).collect();
                let tail: String = tail.chars().rev().collect();
                Err(format!("pthread_bench printed no elapsed_ns line; it printed {tail:?}"))
            }
        }
    }

    /// Checks the program ran on `library` when one was preloaded: ld.so runs a program
    /// without a preload it cannot load (a warning on stderr), which would time glibc
    /// under the library's name.
    ///
    /// # Errors
    /// Which object the program's threads came from instead.
    pub fn check_library(&self, library: Option<&Path>) -> Result<(), String> {
        let Some(lib) = library else { return Ok(()) };
        let name = lib.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match &self.bound_to {
            Some(obj) if Path::new(obj).file_name().map(|n| n.to_string_lossy()) == Some(name.as_str().into()) => Ok(()),
            Some(obj) => Err(format!(
                "{} was preloaded but pthread_create came from {obj}: the library was not loaded (ld.so's warning is on the program's stderr)",
                lib.display()
            )),
            None => Err(format!(
                "pthread_bench did not say which pthread_create it ran, so whether {} was loaded is unknown",
                lib.display()
            )),
        }
    }
}

/// The parameter sets of the probes' pthread rows in `suite`: `quick` takes the first of
/// `values` (the cheap one), `full` all of them, `smoke` the first.
pub(super) fn values_for<T: Copy>(suite: Suite, values: &[T]) -> Vec<T> {
    match suite {
        Suite::Smoke | Suite::Quick => values[..1].to_vec(),
        Suite::Full => values.to_vec(),
    }
}

/// Sets up `op` under `lib`: the program written out, the library found, placement chosen.
///
/// # Errors
/// A skip when the program was not built or the library cannot run here; a failure when the
/// program cannot be written.
pub(super) fn setup(op: Op, lib: Library, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
    // Every skip before anything is written.
    let bytes = PROGRAM.map_err(|why| ProbeError::Skip(why.to_string()))?;
    let library = library_for(lib)?;
    let program = Program::write(&ctx.tmp_dir, bytes)?;
    let cpus = if op.one_cpu() { vec![backend::one_cpu()] } else { sys::allowed_cpus() };
    let pin = op.one_cpu().then_some(cpus[0]);
    let mut env: Vec<(&str, String)> = Vec::new();
    let mut notes = Params::new()
        .with("cpus", backend::cpu_list(&cpus))
        .with("program", format!("csrc/pthread_bench.c {}", op.args(0)[0]))
        .with("timer", op.timer());
    match &library {
        None => notes.set("runtime", "glibc NPTL"),
        Some(path) => {
            env.push(("LD_PRELOAD", path.display().to_string()));
            env.push(("SCHEDLAB_RT_PROCESSORS", cpus.len().to_string()));
            notes.set("runtime", format!("libschedlab_pthread processors={}", cpus.len()));
            notes.set("library", path.display());
        }
    }
    if pin.is_none() {
        notes.set("placement", "kernel");
    }
    let metric = Metric::per_ops(op.ops_per_iter());
    Ok(Bench::new(metric, notes)
        .body(move |iters| {
            let out = program.run(&op.args(iters), &env, pin)?;
            out.check_library(library.as_deref()).map_err(ProbeError::Failed)?;
            Ok(Timing::from_elapsed(Duration::from_nanos(out.elapsed_ns)))
        })
        .boxed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_elapsed_line_is_found_among_other_output() {
        let ns = |s: &str| Output::parse(s).map(|o| o.elapsed_ns);
        assert_eq!(ns("elapsed_ns 1234\n"), Ok(1234));
        assert_eq!(ns("libschedlab_pthread: note\nelapsed_ns 7\n"), Ok(7));
        let e = ns("elapsed_ns x\n").unwrap_err();
        assert!(e.contains("bad elapsed_ns"), "{e}");
        let e = ns("Segmentation fault\n").unwrap_err();
        assert!(e.contains("no elapsed_ns line") && e.contains("Segmentation fault"), "{e}");
    }

    #[test]
    fn a_preload_that_did_not_load_is_a_failure_not_glibc_under_its_name() {
        let lib = Path::new("/cache/libschedlab_pthread.so");
        let ran = |text: &str| Output::parse(text).unwrap();
        let on_lib = ran("elapsed_ns 5\npthread_create_from /cache/libschedlab_pthread.so\n");
        assert_eq!(on_lib.check_library(Some(lib)), Ok(()));
        let on_libc = ran("ERROR: ld.so: object ... cannot be preloaded\nelapsed_ns 5\npthread_create_from /lib/x86_64-linux-gnu/libc.so.6\n");
        let e = on_libc.check_library(Some(lib)).unwrap_err();
        assert!(e.contains("libc.so.6") && e.contains("not loaded"), "{e}");
        assert!(ran("elapsed_ns 5\n").check_library(Some(lib)).is_err());
        // glibc's row needs nothing.
        assert_eq!(on_libc.check_library(None), Ok(()));
    }

    #[test]
    fn a_missing_library_is_a_reason_naming_the_variable() {
        let e = library_at(None).unwrap_err();
        assert!(e.starts_with("the schedlab pthread library was not found: "), "{e}");
        assert!(e.contains("SCHEDLAB_PTHREAD_LIB is not set"), "{e}");
        assert!(library_at(Some("".into())).unwrap_err().contains("is not set"));
        let e = library_at(Some("/nonexistent/libschedlab_pthread.so".into())).unwrap_err();
        assert!(e.contains("=/nonexistent/libschedlab_pthread.so is not a file"), "{e}");
        let dir = std::env::temp_dir();
        assert!(library_at(Some(dir.clone().into())).unwrap_err().contains("is not a file"));
        let here = std::env::current_exe().unwrap();
        assert_eq!(library_at(Some(here.clone().into())).unwrap(), here);
    }

    #[test]
    fn arguments_and_ops_follow_the_operation() {
        assert_eq!(Op::Create(16).args(5), ["create", "5", "16"]);
        assert_eq!(Op::Yield.args(5), ["yield", "5"]);
        assert_eq!(Op::Messaging(2).ops_per_iter(), 800.0);
        assert_eq!(Op::Yield.ops_per_iter(), 2.0);
        assert!(Op::Condvar.one_cpu() && !Op::Mutex(2).one_cpu());
    }

    #[test]
    fn backends_parse_with_every_choice_named() {
        let p = |b: &str| Params::new().with("backend", b);
        assert_eq!(Library::from_params(&p("pthread-rt")).unwrap(), Some(Library::Schedlab));
        assert_eq!(Library::from_params(&p("rt")).unwrap(), None);
        let Err(ProbeError::Failed(m)) = Library::from_params(&p("green")) else { panic!() };
        assert!(m.contains("pthread-os or pthread-rt") && m.contains("tokio"), "{m}");
        let Err(ProbeError::Failed(m)) = Library::only(&p("rt")) else { panic!() };
        assert!(m.contains("pthread-os or pthread-rt"), "{m}");
    }
}
