//! The monotonic clock and its calibration.
//!
//! All timing uses [`std::time::Instant`], which is `CLOCK_MONOTONIC` read through the vDSO on
//! Linux. At the start of a run we measure, as lmbench's harness does (`bench.h`, `tvsub` and
//! the `t_overhead`/`l_overhead` calibration), what the clock can resolve, what one read costs
//! and what an empty loop iteration costs; the sampler subtracts the latter two from
//! sub-microsecond results.

use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;

/// What the clock and an empty loop cost on this machine, measured once per run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Resolution the kernel reports for CLOCK_MONOTONIC (`clock_getres`), in ns.
    pub reported_resolution_ns: f64,
    /// Smallest non-zero step seen between two consecutive reads, in ns.
    pub observed_resolution_ns: f64,
    /// Cost of one clock read, in ns (best of several batches).
    pub read_ns: f64,
    /// Cost of one iteration of an empty, un-optimisable loop, in ns (best of several batches).
    pub loop_ns: f64,
}

impl Calibration {
    /// Measures the clock and the empty loop. Takes a few milliseconds.
    pub fn measure() -> Calibration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec; clock_getres only writes through it.
        let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
        let reported = if rc == 0 { ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64 } else { f64::NAN };

        // Observed resolution: the smallest non-zero difference between consecutive reads.
        let mut observed = f64::INFINITY;
        for _ in 0..2000 {
            let a = Instant::now();
            let mut b = Instant::now();
            while b == a {
                b = Instant::now();
            }
            observed = observed.min((b - a).as_nanos() as f64);
        }

        const BATCH: u64 = 20_000;
        let mut read_ns = f64::INFINITY;
        let mut loop_ns = f64::INFINITY;
        for _ in 0..7 {
            let start = Instant::now();
            for _ in 0..BATCH {
                black_box(Instant::now());
            }
            read_ns = read_ns.min(start.elapsed().as_nanos() as f64 / BATCH as f64);

            let start = Instant::now();
            empty_loop(BATCH * 10);
            loop_ns = loop_ns.min(start.elapsed().as_nanos() as f64 / (BATCH * 10) as f64);
        }
        Calibration {
            reported_resolution_ns: reported,
            observed_resolution_ns: observed,
            read_ns,
            loop_ns,
        }
    }

    /// A calibration with no overheads, for tests that must not depend on timing.
    pub fn zero() -> Calibration {
        Calibration {
            reported_resolution_ns: 1.0,
            observed_resolution_ns: 1.0,
            read_ns: 0.0,
            loop_ns: 0.0,
        }
    }
}

/// The loop whose cost is subtracted: the same shape as a probe's `for _ in 0..iters` around
/// a `black_box`ed body, so the compiler can neither remove nor vectorise it.
#[inline(never)]
fn empty_loop(iters: u64) {
    for i in 0..iters {
        black_box(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_yields_finite_positive_costs() {
        let c = Calibration::measure();
        assert!(c.read_ns.is_finite() && c.read_ns > 0.0);
        assert!(c.loop_ns.is_finite() && c.loop_ns >= 0.0);
        assert!(c.observed_resolution_ns.is_finite() && c.observed_resolution_ns > 0.0);
    }
}
