//! Per-thread statistics of a timeline: pure functions, no I/O.
//!
//! - CPU share: run time over the time the thread wanted the CPU (`ready..done`);
//! - runs: how many times it got the CPU; their lengths are the *effective time slice*;
//! - gaps: the holes between runs, how long the CPU was taken away;
//! - useful-work rate: matrix inverses per second of the thread's ready window;
//! - sleep overshoot, for sleeping threads.

use schedlab_measure::stats;
use serde::{Deserialize, Serialize};

use crate::model::{Lane, Timeline};

/// A distribution of durations, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    /// How many values.
    pub n: usize,
    /// Smallest.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Dist {
    /// The distribution of `values`; `None` when empty.
    ///
    /// Percentiles are nearest-rank ([`stats::nearest_rank`]), not interpolated as in a
    /// measurement's summary: these describe one recording's many observed durations, and a
    /// percentile should be a duration that happened. Slices come in steps of the timer tick,
    /// so the interpolated median of an even count split between two steps (3 ms and 4 ms)
    /// would be a 3.5 ms slice that never ran; a p99 overshoot is a wake-up that was seen, as
    /// cyclictest reports it.
    pub fn of(values: &[u64]) -> Option<Dist> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_unstable();
        let n = v.len();
        let rank = |p: f64| stats::nearest_rank(&v, p);
        Some(Dist {
            n,
            min: v[0],
            p50: rank(50.0),
            p95: rank(95.0),
            p99: rank(99.0),
            max: v[n - 1],
            mean: v.iter().map(|&x| x as f64).sum::<f64>() / n as f64,
        })
    }
}

/// What one thread got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadStats {
    /// The lane's name.
    pub name: String,
    /// Run time / the time it wanted to run (0..=1).
    pub cpu_share: f64,
    /// Number of runs.
    pub runs: usize,
    /// Run lengths: the effective time slice.
    pub run_len: Option<Dist>,
    /// Gap lengths: how long the CPU was taken away each time.
    pub gap_len: Option<Dist>,
    /// Work units per second over the thread's ready window.
    pub work_rate: f64,
    /// Work units done.
    pub work_units: u64,
    /// From release to first run, in ns.
    pub first_run_ns: Option<u64>,
    /// Sleep overshoot (sleeping threads only).
    pub overshoot: Option<Dist>,
}

/// The statistics of one lane.
pub fn lane_stats(lane: &Lane) -> ThreadStats {
    let window = lane.done_ns.saturating_sub(lane.ready_ns);
    let runs: Vec<u64> = lane.runs.iter().map(|r| r.len_ns()).collect();
    let gaps: Vec<u64> = lane.gaps().iter().map(|g| g.len_ns()).collect();
    ThreadStats {
        name: lane.name.clone(),
        cpu_share: if window > 0 {
            (lane.busy_in(lane.ready_ns, lane.done_ns) as f64 / window as f64).min(1.0)
        } else {
            0.0
        },
        runs: runs.len(),
        run_len: Dist::of(&runs),
        gap_len: Dist::of(&gaps),
        work_rate: if window > 0 { lane.work_units as f64 * 1e9 / window as f64 } else { 0.0 },
        work_units: lane.work_units,
        first_run_ns: lane.first_run_delay_ns(),
        overshoot: Dist::of(&lane.sleep_overshoot_ns),
    }
}

/// The statistics of every lane, in lane order.
pub fn timeline_stats(t: &Timeline) -> Vec<ThreadStats> {
    t.lanes.iter().map(lane_stats).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Span;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        let d = Dist::of(&v).unwrap();
        assert_eq!((d.min, d.p50, d.p95, d.p99, d.max), (1, 50, 95, 99, 100));
        assert_eq!(d.mean, 50.5);
        assert!(Dist::of(&[]).is_none());
        // Slices of two tick lengths: the median is one of them, never their mean.
        let d = Dist::of(&[4_000_000, 3_000_000, 4_000_000, 3_000_000]).unwrap();
        assert_eq!(d.p50, 3_000_000);
    }

    #[test]
    fn share_runs_and_gaps_of_a_lane() {
        let mut l = Lane::new("a", "");
        l.ready_ns = 0;
        l.done_ns = 100;
        l.work_units = 50;
        l.runs = vec![
            Span { start_ns: 10, end_ns: 30 },
            Span { start_ns: 40, end_ns: 60 },
            Span { start_ns: 90, end_ns: 100 },
        ];
        let s = lane_stats(&l);
        assert_eq!(s.runs, 3);
        assert!((s.cpu_share - 0.5).abs() < 1e-12);
        assert_eq!(s.gap_len.unwrap().max, 30);
        assert_eq!(s.run_len.unwrap().p50, 20);
        assert_eq!(s.first_run_ns, Some(10));
        assert!((s.work_rate - 50.0 * 1e9 / 100.0).abs() < 1e-6);
    }
}
