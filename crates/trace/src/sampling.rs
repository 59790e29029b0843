//! The sampling recorder, the seed's method: a worker computes real work units (4x4 matrix
//! inverses) and records a timestamp at most every [`INTERVAL_NS`]; afterwards, two
//! consecutive timestamps further apart than a threshold are taken to bracket a gap, a time
//! the thread was not running. It needs no privileges and sees exactly what the thread could
//! see — including interrupts and anything else that stole its CPU.
//!
//! Recording is split so the hot loop stays cheap:
//! - [`Recorder`] owns a preallocated, pre-touched buffer (no allocation and no page fault
//!   while recording) and is written by one thread only;
//! - the clock is read once per *batch* of work units, a batch being calibrated to about
//!   [`BATCH_NS`] ([`calibrate_batch`]), so a clock read (~20-30 ns through the vDSO) costs
//!   well under 1% of the work;
//! - [`derive_runs`] is a pure function from timestamps to runs, tested on its own.

use std::hint::black_box;

use schedlab_measure::stats;

use crate::model::Span;

/// The recording interval: at most one timestamp per this many ns (the seed's 10 µs).
pub const INTERVAL_NS: u64 = 10_000;

/// The default gap threshold: timestamps further apart than this bracket a gap. Four
/// recording intervals: a batch never takes that long unless the thread lost the CPU.
pub const THRESHOLD_NS: u64 = 4 * INTERVAL_NS;

/// The target duration of one batch of work units between clock reads.
pub const BATCH_NS: u64 = 5_000;

pub use schedlab_measure::sys::now_ns;
use schedlab_measure::sys::thread_cpu_ns;

/// One unit of useful work: inverts a 4x4 matrix (Gauss-Jordan with partial pivoting),
/// as the seed's ThreadTest did. `seed` varies the input so nothing can be hoisted out of
/// the loop; the result's trace is returned so nothing can be discarded.
#[inline(never)]
pub fn work_unit(seed: u64) -> f64 {
    let s = (seed & 0xff) as f64 * 1e-3;
    let mut a = [
        [4.0 + s, 1.0, 0.5, 0.25],
        [1.0, 3.0 + s, 0.75, 0.5],
        [0.5, 0.75, 5.0 - s, 1.0],
        [0.25, 0.5, 1.0, 2.0 + s],
    ];
    let mut inv = [[0.0f64; 4]; 4];
    for (i, row) in inv.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    let a = black_box(&mut a);
    for col in 0..4 {
        let mut pivot = col;
        for r in col + 1..4 {
            if a[r][col].abs() > a[pivot][col].abs() {
                pivot = r;
            }
        }
        a.swap(col, pivot);
        inv.swap(col, pivot);
        let p = a[col][col];
        for k in 0..4 {
            a[col][k] /= p;
            inv[col][k] /= p;
        }
        for r in 0..4 {
            if r != col {
                let f = a[r][col];
                for k in 0..4 {
                    a[r][k] -= f * a[col][k];
                    inv[r][k] -= f * inv[col][k];
                }
            }
        }
    }
    inv[0][0] + inv[1][1] + inv[2][2] + inv[3][3]
}

/// Runs `n` work units; the sum keeps the optimiser honest.
#[inline]
pub fn work(n: u64, seed: u64) -> f64 {
    let mut acc = 0.0;
    for i in 0..n {
        acc += work_unit(seed.wrapping_add(i));
    }
    black_box(acc)
}

/// How many work units take about [`BATCH_NS`] on this machine (the fastest of a few
/// tries, so a preemption during calibration does not shrink the batch). At least 1.
pub fn calibrate_batch() -> u64 {
    const PROBE: u64 = 2_000;
    let mut best = u64::MAX;
    for _ in 0..5 {
        let t = now_ns();
        work(PROBE, t);
        best = best.min(now_ns() - t);
    }
    (BATCH_NS * PROBE / best.max(1)).max(1)
}

/// One thread's timestamps, each with the work units done by then, in a buffer allocated
/// (and touched) before recording starts.
#[derive(Debug)]
pub struct Recorder {
    ts: Vec<u64>,
    units: Vec<u64>,
    len: usize,
    last: u64,
    /// Timestamps that did not fit: the record ends early.
    pub overflowed: bool,
}

impl Recorder {
    /// A recorder for `window_ns` of recording at one timestamp per [`INTERVAL_NS`] at most,
    /// with room to spare.
    pub fn for_window(window_ns: u64) -> Recorder {
        let cap = (window_ns / INTERVAL_NS) as usize + 1024;
        // vec![0; n] would be calloc'd lazily; writing the pages now keeps page faults
        // out of the recording.
        let mut ts = Vec::with_capacity(cap);
        ts.resize(cap, 1);
        let mut units = Vec::with_capacity(cap);
        units.resize(cap, 1);
        Recorder { ts, units, len: 0, last: 0, overflowed: false }
    }

    /// Records `now` (with `units` done so far) if at least [`INTERVAL_NS`] passed since the
    /// last timestamp. The hot path: one compare, and two stores when it records.
    #[inline]
    pub fn tick(&mut self, now: u64, units: u64) {
        if now.wrapping_sub(self.last) >= INTERVAL_NS {
            self.force(now, units);
        }
    }

    /// Records `now` unconditionally (first and last timestamps, phase changes).
    #[inline]
    pub fn force(&mut self, now: u64, units: u64) {
        if self.len < self.ts.len() {
            self.ts[self.len] = now;
            self.units[self.len] = units;
            self.len += 1;
            self.last = now;
        } else {
            self.overflowed = true;
        }
    }

    /// The timestamps recorded so far.
    pub fn timestamps(&self) -> &[u64] {
        &self.ts[..self.len]
    }

    /// The work-unit counts at each timestamp.
    pub fn units(&self) -> &[u64] {
        &self.units[..self.len]
    }
}

/// Turns sorted timestamps into runs: a run is a maximal sequence of timestamps each at
/// most `threshold_ns` after the one before, and spans `[first, last]` of that sequence.
/// A lone timestamp is a run of length 0, still counted (the thread did run).
///
/// `origin` is subtracted from every timestamp (timestamps before it are clamped to 0).
pub fn derive_runs(timestamps: &[u64], threshold_ns: u64, origin: u64) -> Vec<Span> {
    let mut runs = Vec::new();
    let mut it = timestamps.iter().map(|&t| t.saturating_sub(origin));
    let Some(first) = it.next() else {
        return runs;
    };
    let mut cur = Span { start_ns: first, end_ns: first };
    for t in it {
        if t.saturating_sub(cur.end_ns) > threshold_ns {
            runs.push(cur);
            cur = Span { start_ns: t, end_ns: t };
        } else {
            cur.end_ns = cur.end_ns.max(t);
        }
    }
    runs.push(cur);
    runs
}

/// The recorder's cost, measured: useful-work rate with and without recording.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Overhead {
    /// Work units per CPU-second while recording (median over rounds).
    pub recorded_rate: f64,
    /// Work units per CPU-second without recording (median over rounds).
    pub plain_rate: f64,
    /// Rounds per mode.
    pub rounds: usize,
    /// The length of a round, in ns.
    pub round_ns: u64,
}

impl Overhead {
    /// The fraction of useful work lost to recording (negative: lost in the noise).
    pub fn loss(&self) -> f64 {
        1.0 - self.recorded_rate / self.plain_rate
    }
}

/// Measures the recorder's overhead on the calling thread: `rounds` rounds of `round_ns`
/// each, alternating the recorded loop (clock read per batch, a timestamp per 10 µs, as the
/// scenarios run) and a plain loop (the same work, the clock read once per 256 batches only
/// to know when to stop). Rates are per CPU-second of this thread, so time the thread spent
/// preempted does not count against either mode; alternating spreads frequency and cache
/// effects over both.
pub fn overhead(rounds: usize, round_ns: u64) -> Overhead {
    let batch = calibrate_batch();
    let mut rec = Recorder::for_window(round_ns);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        // Recorded.
        rec.len = 0;
        let (c0, t0) = (thread_cpu_ns(), now_ns());
        let mut units = 0;
        loop {
            work(batch, units);
            units += batch;
            let now = now_ns();
            rec.tick(now, units);
            if now >= t0 + round_ns {
                break;
            }
        }
        with.push(units as f64 * 1e9 / (thread_cpu_ns() - c0).max(1) as f64);
        // Plain.
        let (c0, t0) = (thread_cpu_ns(), now_ns());
        let mut units = 0;
        'plain: loop {
            for _ in 0..256 {
                work(batch, units);
                units += batch;
            }
            if now_ns() >= t0 + round_ns {
                break 'plain;
            }
        }
        without.push(units as f64 * 1e9 / (thread_cpu_ns() - c0).max(1) as f64);
    }
    // Rates are estimates of a continuous quantity, so the summaries' (interpolated) median;
    // for an odd number of rounds, as scenario 1 takes, that is the middle round.
    let median = |v: &[f64]| stats::median(v).unwrap_or(0.0);
    Overhead { recorded_rate: median(&with), plain_rate: median(&without), rounds, round_ns }
}

/// [`overhead`] on the CPU the scenarios run on (the last allowed one), in a thread of its
/// own so the caller stays unpinned; `None` when that thread failed.
pub fn overhead_on_scenario_cpu(rounds: usize, round_ns: u64) -> Option<Overhead> {
    let cpu = *schedlab_measure::sys::allowed_cpus().last().expect("at least one CPU");
    std::thread::spawn(move || {
        let _ = schedlab_measure::sys::pin_to(cpu);
        overhead(rounds, round_ns)
    })
    .join()
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_closer_than_the_threshold_form_one_run() {
        let ts = [100, 110, 120, 130, 500, 510, 520, 2000];
        let runs = derive_runs(&ts, 40, 100);
        let r: Vec<(u64, u64)> = runs.iter().map(|s| (s.start_ns, s.end_ns)).collect();
        assert_eq!(r, vec![(0, 30), (400, 420), (1900, 1900)]);
    }

    #[test]
    fn no_timestamps_no_runs() {
        assert!(derive_runs(&[], 40, 0).is_empty());
    }

    #[test]
    fn the_recorder_keeps_at_most_one_timestamp_per_interval() {
        let mut r = Recorder::for_window(1_000_000);
        for t in (INTERVAL_NS..INTERVAL_NS * 10).step_by(1000) {
            r.tick(t, t);
        }
        // One per 10 µs over 9 intervals (the first tick at INTERVAL_NS records).
        assert_eq!(r.timestamps().len(), 9);
        assert!(r.timestamps().windows(2).all(|w| w[1] - w[0] >= INTERVAL_NS));
        assert!(!r.overflowed);
    }

    #[test]
    fn a_full_buffer_is_flagged_not_overrun() {
        let mut r = Recorder::for_window(0);
        let cap = r.ts.len() as u64;
        for i in 0..cap + 5 {
            r.force(i, i);
        }
        assert!(r.overflowed);
        assert_eq!(r.timestamps().len() as u64, cap);
    }

    #[test]
    fn the_overhead_measurement_reports_both_rates() {
        let o = overhead(2, 1_000_000);
        assert_eq!(o.rounds, 2);
        assert!(o.recorded_rate > 0.0 && o.plain_rate > 0.0);
        assert!(o.loss() < 1.0);
    }

    #[test]
    fn the_work_unit_inverts_the_matrix() {
        // The trace of the inverse of a symmetric positive-definite matrix is positive and
        // finite; the same input gives the same answer.
        let x = work_unit(7);
        assert!(x.is_finite() && x > 0.0);
        assert_eq!(x, work_unit(7));
    }
}
