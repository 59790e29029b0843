//! The `schedlab` binary: parses arguments and wires the crates together, nothing more.
//!
//! `main` turns every outcome into an exit code in one place: 0 success, 1 failure, 2 usage
//! error (bad arguments, unknown probe pattern or run); `exec` exits with its program's
//! code (128+N for a death by signal N), or 127 when the program could not be run. A closed pipe (`schedlab list | head`)
//! ends quietly with 0; a broken connection to a database server is a failure.
//!
//! Everything printed goes through [`out`] or the error line in `main`, which escape any
//! character that would drive the terminal ([`schedlab_measure::text::escape_prose`]): we
//! print no escape sequences of our own, so a label, host or reason from another machine's
//! run that a rendering missed still cannot recolour, clear or hyperlink the terminal. (The
//! renderings escape line breaks inside stored text too, so no row is forged; this last
//! guard keeps the line breaks of our own text.)

// The modules in two layers; imports run only downward (from a command to the shared
// modules, never between commands nor back up).
//
// The commands, dispatched by `commands.rs` (which also holds the small ones that read the
// store and print a rendering):
mod commands;
mod crosscheck;
mod exec;
mod fleet;
mod gate;
mod history;
mod mem;
mod reference;
mod timeline;
// What the commands share: arguments and settings, output files, stop signals, which runs
// a RUN argument or a filter means, the run loop wired to the store (with the study's rest),
// the store as each loop's sink, the terminal while measuring, the embedded library.
mod args;
mod library;
mod live;
mod output;
mod record;
mod run;
mod runs;
mod settings;
mod stop;
mod study;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

/// `argv[1]` that turns the binary into the program `os.proc.fork_exec def=schedlab` executes
/// (what exec'ing a large Rust program costs; lmbench's definition execs `/bin/true`).
/// Checked before anything else so the helper costs no more than loading the binary.
pub const EXEC_HELPER_ARG: &str = "__exec-helper";

/// An error the user can fix by typing something else: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Writes `text` to standard output, any character that would drive the terminal escaped.
pub fn out(text: &str) -> io::Result<()> {
    let text = schedlab_measure::text::escape_prose(text);
    let mut o = io::stdout().lock();
    o.write_all(text.as_bytes())?;
    o.flush()
}

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == EXEC_HELPER_ARG) {
        return ExitCode::SUCCESS;
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == stop::MARK_ARG) {
        return stop::mark_main();
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == schedlab_probes::threads::echo::CLIENT_ARG) {
        // threads.net.echo's client, a process of its own (the probe's module doc).
        let args: Vec<String> = std::env::args().skip(2).collect();
        let code = schedlab_probes::threads::echo::client_main(&args);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print and succeed; real usage errors exit 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            // A closed standard output, not a connection to a database server that broke
            // (whose error also ends in a broken pipe).
            let database = err.chain().any(|c| c.is::<schedlab_store::StoreError>());
            if !database
                && err.chain().any(|c| {
                    c.downcast_ref::<io::Error>()
                        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
                })
            {
                return ExitCode::SUCCESS;
            }
            let message = format!("{err:#}");
            eprintln!("schedlab: error: {}", schedlab_measure::text::escape_prose(&message));
            if err.chain().any(|c| c.is::<exec::ExecError>()) {
                // As a shell reports a command it could not run.
                ExitCode::from(127)
            } else if err.chain().any(|c| c.is::<UsageError>()) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
