//! `schedlab exec`: runs an unmodified program with `libschedlab_pthread.so` preloaded, so
//! its POSIX threads run as schedlab-rt user threads, and exits as the program did.
//!
//! The library is built by this crate's build script (build.rs) and embedded in the binary;
//! `exec` writes it, once per content hash, to a private cache directory and preloads that
//! file (`SCHEDLAB_PTHREAD_LIB=/path.so` preloads another, for development). The flags
//! become the library's `SCHEDLAB_RT_*` variables (crates/pthread/src/lib.rs). `--trace`
//! points `SCHEDLAB_RT_EVENTS` at a file in a private temporary directory, which every
//! process of the program that started the runtime appends its scheduling events to at
//! exit; `schedlab-trace` turns them into one Perfetto document.
//!
//! Exit codes (decided in main.rs): the program's own; 128+N when signal N killed it (as a
//! shell reports it); 127 when it could not be run ([`ExecError::NotRun`]); 1 when this
//! machine cannot run the library (no FSGSBASE) or the library cannot be written anywhere;
//! 2 for usage errors. While the program runs, `schedlab` ignores SIGINT and SIGQUIT (as a
//! shell waiting for a foreground job does): Ctrl-C reaches the program, whose death is
//! then reported.

use std::ffi::{CString, OsString};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, Result};

use crate::settings::ExecPlan;

/// The library, as built by build.rs for this binary.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libschedlab_pthread.so"));
/// Its content hash (FNV-1a, build.rs), which names the cached copy.
const LIBRARY_HASH: &str = env!("SCHEDLAB_PTHREAD_HASH");

/// Why `exec` did not run the program.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The program could not be started (not found, not executable): exit code 127.
    #[error("cannot run {program}: {why}")]
    NotRun {
        /// The program as given.
        program: String,
        /// What the system said.
        why: String,
    },
}

/// Runs the plan's program under the library; returns its exit code.
pub fn exec(plan: ExecPlan) -> Result<ExitCode> {
    if !schedlab_rt::fsgsbase_usable() {
        anyhow::bail!(
            "this machine cannot run libschedlab_pthread.so: the kernel does not let programs \
             use rdfsbase/wrfsbase (FSGSBASE: needs a CPU that has it and Linux 5.9 or later; \
             see `grep -o fsgsbase /proc/cpuinfo` and `uname -r`), which a thread pointer per \
             user thread needs"
        );
    }
    let library = library()?;
    let mut scratch = None;
    let events = match &plan.trace {
        Some(_) => {
            let dir = PrivateDir::new(&std::env::temp_dir())
                .context("a temporary directory for the trace's events")?;
            let f = dir.path.join("events");
            scratch = Some(dir);
            Some(f)
        }
        None => None,
    };
    let mut cmd = Command::new(&plan.program);
    cmd.args(&plan.args);
    let mut preload = OsString::from(&library.path);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        // Ours first, so its pthread functions are the ones bound; the others stay.
        preload.push(":");
        preload.push(old);
    }
    cmd.env("LD_PRELOAD", preload);
    if let Some(n) = plan.processors {
        cmd.env("SCHEDLAB_RT_PROCESSORS", n.to_string());
    }
    if let Some(ms) = plan.quantum_ms {
        cmd.env("SCHEDLAB_RT_QUANTUM_MS", ms.to_string());
    }
    if plan.no_preempt {
        cmd.env("SCHEDLAB_RT_PREEMPT", "0");
    }
    if let Some(f) = &events {
        cmd.env("SCHEDLAB_RT_EVENTS", f);
    }
    let program = plan.program.to_string_lossy().into_owned();
    let mut child = cmd.spawn().map_err(|e| ExecError::NotRun {
        program: program.clone(),
        why: match e.kind() {
            std::io::ErrorKind::NotFound if !program.contains('/') => {
                "no such program on PATH".to_string()
            }
            _ => e.to_string(),
        },
    })?;
    // The program has been exec'd (std's spawn waits for that), so it does not inherit
    // these dispositions.
    let _ignore = IgnoreInterrupts::new();
    let status = child.wait().context("waiting for the program")?;
    if let (Some(out), Some(f)) = (plan.trace, &events) {
        write_trace(f, out, &program)?;
    }
    drop(scratch);
    drop(library);
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    };
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// The program's events file (what every process appended) as Perfetto JSON at `out`.
fn write_trace(events: &Path, out: crate::output::Output, program: &str) -> Result<()> {
    let bytes = match std::fs::read(events) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", events.display())),
    };
    let processes = schedlab_trace::rt::read_event_file(&bytes).map_err(|e| {
        anyhow::anyhow!("reading the runtime's events from {}: {e}", events.display())
    })?;
    if processes.is_empty() {
        eprintln!(
            "schedlab: {program} started no thread of the library's (or was killed before it \
             could write its events): {} has no scheduling events",
            out.path().display()
        );
    }
    let timelines: Vec<_> =
        processes.iter().map(|p| schedlab_trace::rt::process_timeline(p, program)).collect();
    let refs: Vec<_> = timelines.iter().collect();
    let doc = schedlab_trace::perfetto::to_json_many(&refs);
    out.write(&serde_json::to_string(&doc)?)
}

/// The library file to preload, and the directory to remove afterwards if it is a
/// temporary one.
pub struct Library {
    path: PathBuf,
    _tmp: Option<PrivateDir>,
}

/// For `schedlab run`: the library the `pthread-rt` rows preload, named in
/// `SCHEDLAB_PTHREAD_LIB` for the probes (crates/probes/src/threads/pthread.rs) unless the
/// user named one. Returns the guard that keeps a temporary copy alive, or `None` when no
/// copy could be written (those rows then skip and say why) or the machine cannot run it.
pub fn library_for_probes() -> Option<Library> {
    if std::env::var_os(schedlab_probes::threads::pthread::LIBRARY_ENV).is_some()
        || !schedlab_rt::fsgsbase_usable()
    {
        return None;
    }
    let lib = library().ok()?;
    // The binary is single-threaded here (no probe has run): nothing reads the
    // environment concurrently.
    std::env::set_var(schedlab_probes::threads::pthread::LIBRARY_ENV, &lib.path);
    Some(lib)
}

/// `SCHEDLAB_PTHREAD_LIB`, else the embedded library in the first private directory that
/// takes it: `$XDG_CACHE_HOME/schedlab` or `~/.cache/schedlab`, `$XDG_RUNTIME_DIR/schedlab`,
/// then a fresh `mkdtemp` directory under the system's temp dir, removed afterwards.
fn library() -> Result<Library> {
    if let Some(p) = std::env::var_os("SCHEDLAB_PTHREAD_LIB").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(p);
        if !path.is_file() {
            anyhow::bail!("SCHEDLAB_PTHREAD_LIB={}: no such file", path.display());
        }
        let path = path
            .canonicalize()
            .with_context(|| format!("SCHEDLAB_PTHREAD_LIB={}", path.display()))?;
        check_preloadable(&path)?;
        return Ok(Library { path, _tmp: None });
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = env("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| env("HOME").map(|h| h.join(".cache")))
        .map(|d| d.join("schedlab"));
    let runtime = env("XDG_RUNTIME_DIR").filter(|p| p.is_absolute()).map(|d| d.join("schedlab"));
    let mut tried = Vec::new();
    for dir in cache.into_iter().chain(runtime) {
        match cached_copy(&dir) {
            Ok(path) => return Ok(Library { path, _tmp: None }),
            Err(e) => tried.push(format!("{}: {e:#}", dir.display())),
        }
    }
    let tmp = PrivateDir::new(&std::env::temp_dir())
        .with_context(|| format!("no place to write the library ({})", tried.join("; ")))?;
    let path = write_copy(&tmp.path)?;
    Ok(Library { path, _tmp: Some(tmp) })
}

/// The cached copy in `dir` (made private, mode 0700), written if it is not there yet.
fn cached_copy(dir: &Path) -> Result<PathBuf> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.into()),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    if !meta.is_dir() || meta.uid() != uid {
        anyhow::bail!("not a directory of this user's");
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let path = dir.join(format!("libschedlab_pthread-{LIBRARY_HASH}.so"));
    if std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == LIBRARY.len() as u64) {
        check_preloadable(&path)?;
        return Ok(path);
    }
    write_copy(dir)
}

/// Writes the library into `dir` through a temporary file renamed into place, so a reader
/// (another `exec` at the same moment) never sees a partial file.
fn write_copy(dir: &Path) -> Result<PathBuf> {
    let path = dir.join(format!("libschedlab_pthread-{LIBRARY_HASH}.so"));
    check_preloadable(&path)?;
    let tmp = dir.join(format!(".libschedlab_pthread-{LIBRARY_HASH}.{}.tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o700)
            .open(&tmp)?;
        f.write_all(LIBRARY)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(path)
}

/// `LD_PRELOAD` splits its value at spaces and colons: a path with either cannot be given.
fn check_preloadable(path: &Path) -> Result<()> {
    if path.as_os_str().as_bytes().iter().any(|&b| b == b' ' || b == b':') {
        anyhow::bail!(
            "{} contains a space or a colon, which LD_PRELOAD cannot carry",
            path.display()
        );
    }
    Ok(())
}

/// A directory made by `mkdtemp` (mode 0700) under `parent`, removed with its contents
/// when dropped.
struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    fn new(parent: &Path) -> Result<PrivateDir> {
        let template = parent.join("schedlab-exec-XXXXXX");
        let mut buf = CString::new(template.as_os_str().as_bytes())
            .context("a temporary directory's name")?
            .into_bytes_with_nul();
        // SAFETY: a writable NUL-terminated template ending in XXXXXX.
        let p = unsafe { libc::mkdtemp(buf.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("creating a directory in {}", parent.display()));
        }
        buf.pop();
        let path = PathBuf::from(<OsString as std::os::unix::ffi::OsStringExt>::from_vec(buf));
        Ok(PrivateDir { path })
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// SIGINT and SIGQUIT ignored while it lives (the terminal sends them to the whole
/// foreground process group: the program acts on them, schedlab reports its end).
struct IgnoreInterrupts {
    old: [libc::sighandler_t; 2],
}

impl IgnoreInterrupts {
    fn new() -> IgnoreInterrupts {
        // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
        let old = unsafe {
            [libc::signal(libc::SIGINT, libc::SIG_IGN), libc::signal(libc::SIGQUIT, libc::SIG_IGN)]
        };
        IgnoreInterrupts { old }
    }
}

impl Drop for IgnoreInterrupts {
    fn drop(&mut self) {
        // SAFETY: restores the dispositions `new` replaced.
        unsafe {
            libc::signal(libc::SIGINT, self.old[0]);
            libc::signal(libc::SIGQUIT, self.old[1]);
        }
    }
}
