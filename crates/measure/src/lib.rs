//! schedlab-measure: everything between "a probe can do its work `n` times" and "here is a
//! measurement with its samples and statistics".
//!
//! The crate owns the monotonic clock and its calibration ([`clock`]), the sampling loop that
//! warms up, scales iterations to a time budget and takes samples ([`sampler`]), the pure
//! statistics over those samples ([`stats`]) and over a result's history (its change points:
//! [`changepoint`]), the attribution of noise to other processes
//! ([`noise`]), where each party of a measurement ran ([`placement`]), the machine
//! fingerprint stored with every run ([`machine`]), the result model that the store and the
//! reports share ([`model`]), and the Linux wrappers (pinning, forked
//! helpers, per-thread scheduling settings) that the probes and the timelines share ([`sys`]),
//! the one rule for showing values to people ([`units`]), the one rule for which
//! characters of stored text never reach a terminal as themselves ([`text`]), which process
//! owns what outlives a command and whether it is still alive ([`owner`]), and what a killed
//! schedlab left in tracefs ([`tracefs`]). It knows nothing of SQLite, terminals or
//! particular probes: measuring, analysing and reporting are separate stages.
//!
//! ```
//! use schedlab_measure::{clock::Calibration, sampler::{self, Settings}, model::Metric, Timing, Workload, ProbeError};
//!
//! struct Add(u64);
//! impl Workload for Add {
//!     fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
//!         Ok(Timing::measure(|| {
//!             for i in 0..iters {
//!                 self.0 = std::hint::black_box(self.0.wrapping_add(i));
//!             }
//!         }))
//!     }
//! }
//! let cal = Calibration::measure();
//! let collected = sampler::collect(&mut Add(0), &Settings::smoke(), &cal, Metric::per_op()).unwrap();
//! assert_eq!(collected.samples.len(), 2); // the smoke settings take two samples
//! ```
#![deny(missing_docs)]

pub mod changepoint;
pub mod clock;
pub mod doctor;
pub mod interrupt;
pub mod machine;
pub mod model;
pub mod mounts;
pub mod noise;
pub mod owner;
pub mod placement;
pub mod sampler;
pub mod stats;
pub mod sys;
pub mod text;
pub mod tracefs;
pub mod units;
pub mod warnings;

use std::time::{Duration, Instant};

/// Why a probe's setup or body did not produce a timing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The probe cannot run on this machine (missing privilege, file system feature, CPU
    /// count...). Recorded as skipped with the reason; the run goes on.
    #[error("skipped: {0}")]
    Skip(String),
    /// The probe tried and failed; the message names the operation and the OS error.
    #[error("failed: {0}")]
    Failed(String),
    /// The user asked to stop (SIGINT/SIGTERM) while the probe was running.
    #[error("interrupted")]
    Interrupted,
}

impl ProbeError {
    /// A failure built from the last OS error, naming the operation that failed.
    pub fn last_os(op: &str) -> ProbeError {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) && interrupt::requested() {
            return ProbeError::Interrupted;
        }
        ProbeError::Failed(format!("{op}: {err}"))
    }

    /// A failure from an `io::Error`, naming the operation that failed.
    pub fn io(op: &str, err: std::io::Error) -> ProbeError {
        if err.kind() == std::io::ErrorKind::Interrupted && interrupt::requested() {
            return ProbeError::Interrupted;
        }
        ProbeError::Failed(format!("{op}: {err}"))
    }
}

/// What one call of a workload's timed body measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Wall time of exactly the timed iterations (setup excluded).
    pub elapsed: Duration,
    /// True when a party of the measurement was seen on another CPU than the one it was
    /// pinned to at the end of the sample (docs/SOURCES.md, Placement decides the answer).
    pub migrated: bool,
    /// Time inside `elapsed` that is not the operation measured, measured by the probe itself
    /// (lat_ctx's pipe overhead). The sampler subtracts it from the value and stores the raw
    /// `elapsed`, so the samples show both.
    pub overhead: Duration,
}

impl Timing {
    /// Times `body` with the monotonic clock.
    #[inline]
    pub fn measure(body: impl FnOnce()) -> Timing {
        let start = Instant::now();
        body();
        Timing { elapsed: start.elapsed(), migrated: false, overhead: Duration::ZERO }
    }

    /// A timing from an elapsed duration measured by the caller.
    pub fn from_elapsed(elapsed: Duration) -> Timing {
        Timing { elapsed, migrated: false, overhead: Duration::ZERO }
    }
}

/// A probe's timed body, ready to run: setup has happened, teardown happens on drop.
pub trait Workload {
    /// Runs the timed body `iters` times and returns the wall time of exactly that work.
    ///
    /// Called many times with different `iters` (calibration, warm-up, samples). Must not
    /// include setup in the timing. Long bodies should check [`interrupt::requested`] and return
    /// [`ProbeError::Interrupted`].
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError>;

    /// The parties whose placement the sampler records ([`placement`]): by default the
    /// calling thread alone, named `main`. A workload with helper threads or child processes
    /// names them, so an unpinned result says where each ran and whether they shared a CPU,
    /// and a pinned one is checked to have stayed. Called once, before the samples.
    fn parties(&self) -> Vec<placement::Party> {
        vec![placement::Party::caller("main")]
    }
}
