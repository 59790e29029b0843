//! How a measuring command stops on a signal, and how its run says so.
//!
//! The one rule of every measuring command: the first SIGINT, SIGTERM or SIGHUP (a closed
//! terminal or ssh session is a stop request like any other) sets the interrupt flag; the
//! command stops at its next boundary, keeps what it measured, marks its run interrupted with
//! the signal as the reason ([`schedlab_measure::interrupt::reason`]) and exits 1.
//!
//! A second signal ends the process at once (exit 130), for a probe stuck in a body that does
//! not look at the flag — except for commands that hold a system resource only they can
//! release (a kernel tracing instance). Ending at once must not leave the run `running`:
//! nothing of the database may be touched from a signal handler (the main thread may be in
//! the middle of a transaction, holding SQLite's or the allocator's locks), so the handler
//! replaces the process image instead (`execve`, async-signal-safe) with this binary in its
//! marking role ([`MARK_ARG`]), prepared in advance by [`arm`]:
//! 1. `execve` keeps the pid and the start time (the run's owner in the database, see
//!    `schedlab_measure::owner`), so the shell still waits for the same process, and the
//!    run's owner is still alive until it is marked;
//! 2. it closes every close-on-exec descriptor: SQLite's file and its locks, the server's
//!    socket (the server rolls back the transaction in progress), so the uncommitted
//!    transaction of the old image is gone and nothing blocks the marking;
//! 3. the new image opens the database, marks the run interrupted naming the signal (only if
//!    it is still `running`: it may have finished as the signal came), and exits 130. When
//!    even that fails, the reason is left in a note the next command applies
//!    (`schedlab_store::note_end_reason`).
//!
//! The database's location travels in the environment, not in argv, so a password in a URL is
//! not shown by `ps`.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use schedlab_measure::interrupt;
use schedlab_store::{Location, Store};

/// `argv[1]` of this binary in its marking role (see the module doc).
pub const MARK_ARG: &str = "__mark-interrupted";
/// The database to mark, for the marking role.
const DB_VAR: &str = "SCHEDLAB_MARK_DB";
/// The run to mark, for the marking role.
const RUN_VAR: &str = "SCHEDLAB_MARK_RUN";

/// The signals that ask a measuring command to stop.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// What the handler of a second signal executes: prepared in advance, because a signal
/// handler may not allocate.
struct Armed {
    exe: CString,
    /// One argv per signal of [`SIGNALS`], in that order, each ending in a null pointer.
    argv: Vec<Vec<*const libc::c_char>>,
    envp: Vec<*const libc::c_char>,
    /// The strings the pointers point into.
    _keep: Vec<CString>,
}

/// The armed marking, or null. Set by [`arm`], read by the handler; an `Armed` once
/// published is never freed (a handler may be reading it), so re-arming leaks one.
static ARMED: AtomicPtr<Armed> = AtomicPtr::new(std::ptr::null_mut());

/// Installs the rule above: `flag` is set on the first signal; a second one ends the process
/// at once with 130 (marking the armed run first, see [`arm`]) unless `second_ends` is false.
/// (signal-hook runs a signal's actions in the order they were registered: the second-signal
/// action sees the flag as it was before this signal, then the flag is set.)
///
/// # Errors
/// When a handler cannot be installed.
pub fn install(flag: &Arc<AtomicBool>, second_ends: bool) -> Result<()> {
    for sig in SIGNALS {
        if second_ends {
            let seen = flag.clone();
            let action = move || {
                if seen.load(Ordering::SeqCst) {
                    second_signal(sig);
                }
            };
            // SAFETY: the action only loads atomics and calls execve and _exit, all
            // async-signal-safe; it allocates nothing and takes no lock.
            unsafe { signal_hook::low_level::register(sig, action) }
                .context("installing signal handlers")?;
        }
        signal_hook::flag::register_usize(sig, interrupt::signal_slot(), sig as usize)
            .context("installing signal handlers")?;
        signal_hook::flag::register(sig, flag.clone()).context("installing signal handlers")?;
    }
    Ok(())
}

/// In a signal handler: the process ends now. With a run armed, this binary takes over the
/// process to mark it; if that cannot start, or nothing is armed, exit 130 at once.
fn second_signal(sig: libc::c_int) {
    let armed = ARMED.load(Ordering::SeqCst);
    if !armed.is_null() {
        // SAFETY: a published `Armed` is never freed (see ARMED).
        let a = unsafe { &*armed };
        if let Some(argv) = SIGNALS.iter().position(|s| *s == sig).and_then(|i| a.argv.get(i)) {
            // SAFETY: every pointer points into `a._keep`, NUL-terminated, and both arrays
            // end in a null pointer. On success execve does not return.
            unsafe { libc::execve(a.exe.as_ptr(), argv.as_ptr(), a.envp.as_ptr()) };
        }
    }
    // SAFETY: _exit is async-signal-safe and ends the process.
    unsafe { libc::_exit(130) };
}

/// From now on a second signal marks run `run` of `db` interrupted before the process ends.
/// Best effort: when this binary cannot be found, a second signal ends the process unmarked
/// and the next command shows the run as ended without finishing.
pub fn arm(db: &Location, run: i64) {
    let Ok(exe) = std::env::current_exe() else { return };
    let c = |b: Vec<u8>| CString::new(b).ok();
    let db_text: OsString = match db {
        Location::File(p) => p.clone().into_os_string(),
        Location::Server(url) => url.into(),
    };
    let mut keep = Vec::new();
    let Some(exe) = c(exe.into_os_string().into_vec()) else { return };
    let mut argv_strings = Vec::new();
    for sig in SIGNALS {
        let mut one = Vec::new();
        for s in [b"schedlab".to_vec(), MARK_ARG.into(), sig.to_string().into_bytes()] {
            let Some(s) = c(s) else { return };
            one.push(s);
        }
        argv_strings.push(one);
    }
    let mut env_strings: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| k != DB_VAR && k != RUN_VAR)
        .filter_map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend(v.as_bytes());
            c(kv)
        })
        .collect();
    let mut db_var = format!("{DB_VAR}=").into_bytes();
    db_var.extend(db_text.as_bytes());
    let Some(db_var) = c(db_var) else { return };
    env_strings.push(db_var);
    env_strings.extend(c(format!("{RUN_VAR}={run}").into_bytes()));
    let ptrs = |v: &[CString]| -> Vec<*const libc::c_char> {
        v.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
    };
    let argv = argv_strings.iter().map(|a| ptrs(a)).collect();
    let envp = ptrs(&env_strings);
    // The pointers point into the heap buffers of these strings, which moving them keeps.
    keep.extend(argv_strings.into_iter().flatten());
    keep.extend(env_strings);
    let armed = Box::new(Armed { exe, argv, envp, _keep: keep });
    ARMED.store(Box::into_raw(armed), Ordering::SeqCst);
}

/// The run is finished: a second signal ends the process without marking anything.
pub fn disarm() {
    ARMED.store(std::ptr::null_mut(), Ordering::SeqCst);
}

/// This binary in its marking role: marks the run named by the environment interrupted by
/// the signal in `argv[2]`, says so, and ends with 130.
pub fn mark_main() -> ExitCode {
    // The handler ran with the signal blocked, and execve kept that mask: a third Ctrl-C
    // must still end this process.
    // SAFETY: an empty set, initialised by sigemptyset before use.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
    let sig: i32 = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let reason = format!(
        "stopped at once by a second {}; everything measured before it is stored",
        interrupt::signal_words(sig)
    );
    let (Some(db), Some(run)) =
        (std::env::var_os(DB_VAR), std::env::var(RUN_VAR).ok().and_then(|r| r.parse::<i64>().ok()))
    else {
        return ExitCode::from(130);
    };
    let at = Location::parse(&db);
    let marked = Store::open_at(&at).and_then(|s| s.interrupt_run(run, &reason));
    // The terminal may be gone (SIGHUP): a failed write changes nothing.
    let said = match marked {
        Ok(()) => format!(
            "\nschedlab: stopped at once: everything measured before is stored as run #{run} (marked interrupted) in {at}\n"
        ),
        Err(e) => {
            let _ = schedlab_store::note_end_reason(&reason);
            format!("\nschedlab: stopped at once: run #{run} could not be marked interrupted ({e}); the next schedlab command shows it so\n")
        }
    };
    let _ = std::io::Write::write_all(&mut std::io::stderr(), said.as_bytes());
    ExitCode::from(130)
}
