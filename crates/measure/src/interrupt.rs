//! The "please stop" flag raised by SIGINT/SIGTERM/SIGHUP, and which signal raised it.
//!
//! The binary installs the signal handlers (it owns the process); this module only holds the
//! flag, so the sampler and long probe bodies can stop at the next sample boundary, clean up,
//! and let the run be stored as interrupted — with [`reason`], which names the signal. Setting
//! an atomic is async-signal-safe.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

static REQUESTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));
static SIGNAL: LazyLock<Arc<AtomicUsize>> = LazyLock::new(|| Arc::new(AtomicUsize::new(0)));

/// The flag itself, for `signal_hook::flag::register`.
pub fn flag() -> Arc<AtomicBool> {
    Arc::clone(&REQUESTED)
}

/// Where the handlers store the number of the signal that arrived, for
/// `signal_hook::flag::register_usize`.
pub fn signal_slot() -> Arc<AtomicUsize> {
    Arc::clone(&SIGNAL)
}

/// Asks every running measurement to stop at its next sample boundary.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// True once a stop was requested.
#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// What a signal means to the user who sent it, for a run's stored reason.
pub fn signal_words(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT (Ctrl-C)".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP (its terminal or ssh session closed)".into(),
        0 => "a stop request".into(),
        n => format!("signal {n}"),
    }
}

/// Why the run stopped, to store with it: the signal that asked.
pub fn reason() -> String {
    let sig = SIGNAL.load(Ordering::SeqCst) as i32;
    format!("stopped by {}; everything measured before it is stored", signal_words(sig))
}
