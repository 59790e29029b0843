//! The "please stop" flag raised by SIGINT/SIGTERM.
//!
//! The binary installs the signal handlers (it owns the process); this module only holds the
//! flag, so the sampler and long probe bodies can stop at the next sample boundary, clean up,
//! and let the run be stored as interrupted. Setting an atomic is async-signal-safe.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

static REQUESTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// The flag itself, for `signal_hook::flag::register`.
pub fn flag() -> Arc<AtomicBool> {
    Arc::clone(&REQUESTED)
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
