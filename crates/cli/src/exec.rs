//! `schedlab exec`: runs an unmodified program with `libschedlab_pthread.so` preloaded, so
//! its POSIX threads run as schedlab-rt user threads, and exits as the program did.
//!
//! The library is built by this crate's build script (build.rs) and embedded in the binary;
//! `exec` writes it (library.rs), once per content hash, to a private cache directory and
//! preloads that file (`SCHEDLAB_PTHREAD_LIB=/path.so` preloads another, for development).
//! The flags become the library's `SCHEDLAB_RT_*` variables (crates/pthread/src/lib.rs). `--trace`
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

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Context as _, Result};

use crate::library::{library, PrivateDir};
use crate::settings::ExecPlan;

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
