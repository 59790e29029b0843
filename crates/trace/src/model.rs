//! The timeline model: one [`Timeline`] per recorded scenario, one [`Lane`] per thread, the
//! [`Span`]s during which the thread ran and the [`Mark`]s (instants) worth pointing at.
//!
//! All times are nanoseconds since the timeline's origin (the moment the scenario's threads
//! were released), so a timeline is self-contained and serialises as plain numbers. A lane's
//! runs are sorted and never overlap: every exporter relies on that (Perfetto refuses
//! overlapping slices on one track). Gaps are not stored; they are the holes between runs
//! ([`Lane::gaps`]).

use serde::{Deserialize, Serialize};

/// A half-open interval `[start_ns, end_ns)` on the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// First nanosecond of the interval.
    pub start_ns: u64,
    /// First nanosecond after it.
    pub end_ns: u64,
}

impl Span {
    /// The interval's length in nanoseconds.
    #[inline]
    pub fn len_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// How many nanoseconds of this interval fall inside `[from, to)`.
    pub fn overlap_ns(&self, from: u64, to: u64) -> u64 {
        self.end_ns.min(to).saturating_sub(self.start_ns.max(from))
    }
}

/// A point in time on one lane (a wakeup, a phase change, a preemption).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// When, in nanoseconds since the origin.
    pub at_ns: u64,
    /// What happened, in a word or two.
    pub name: String,
}

/// One thread's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    /// The thread's role in the scenario (`main`, `nice5`, `idle`...).
    pub name: String,
    /// How it was set up: policy, nice value, CPU, behaviour.
    pub detail: String,
    /// The kernel thread id it ran as (0 when unknown).
    pub tid: i32,
    /// When the thread was released and wanted to run, in ns since the origin.
    pub ready_ns: u64,
    /// When it stopped wanting to run (end of its loop), in ns since the origin.
    pub done_ns: u64,
    /// The intervals it ran, sorted, not overlapping.
    pub runs: Vec<Span>,
    /// Instants on this lane.
    pub marks: Vec<Mark>,
    /// Useful work done: 4x4 matrix inverses computed.
    pub work_units: u64,
    /// Timestamps recorded (sampling recorder) or events seen (other recorders).
    pub samples: u64,
    /// The preallocated sample buffer filled up: the record ends early.
    pub overflowed: bool,
    /// For sleeping threads: how much each sleep overshot its request, in ns.
    pub sleep_overshoot_ns: Vec<u64>,
    /// Work done by each point in time, thinned to about one `[ns, units]` pair per
    /// millisecond: the useful-work rate over any part of the window, which stays true when
    /// threads alternate faster than the gap threshold can show.
    #[serde(default)]
    pub progress: Vec<[u64; 2]>,
    /// A name for each run (the user thread a virtual processor ran), parallel to `runs`;
    /// empty when runs are anonymous.
    #[serde(default)]
    pub labels: Vec<String>,
}

impl Lane {
    /// An empty lane.
    pub fn new(name: &str, detail: &str) -> Lane {
        Lane {
            name: name.to_string(),
            detail: detail.to_string(),
            tid: 0,
            ready_ns: 0,
            done_ns: 0,
            runs: Vec::new(),
            marks: Vec::new(),
            work_units: 0,
            samples: 0,
            overflowed: false,
            sleep_overshoot_ns: Vec::new(),
            progress: Vec::new(),
            labels: Vec::new(),
        }
    }

    /// The holes between consecutive runs: the times the thread was off the CPU while it
    /// had already started. Time before the first run is not a gap ([`Lane::first_run_delay_ns`]).
    pub fn gaps(&self) -> Vec<Span> {
        self.runs
            .windows(2)
            .map(|w| Span { start_ns: w[0].end_ns, end_ns: w[1].start_ns })
            .filter(|g| g.len_ns() > 0)
            .collect()
    }

    /// Total time on the CPU, in ns.
    pub fn busy_ns(&self) -> u64 {
        self.runs.iter().map(Span::len_ns).sum()
    }

    /// How long the thread waited between being released and its first run.
    pub fn first_run_delay_ns(&self) -> Option<u64> {
        self.runs.first().map(|r| r.start_ns.saturating_sub(self.ready_ns))
    }

    /// Work units per second between `from` and `to`, from [`Lane::progress`] (the nearest
    /// recorded points inside the interval); `None` without two such points.
    pub fn rate_in(&self, from: u64, to: u64) -> Option<f64> {
        let inside: Vec<&[u64; 2]> =
            self.progress.iter().filter(|p| p[0] >= from && p[0] <= to).collect();
        let (a, b) = (inside.first()?, inside.last()?);
        (b[0] > a[0]).then(|| (b[1] - a[1]) as f64 * 1e9 / (b[0] - a[0]) as f64)
    }

    /// Nanoseconds of run time inside `[from, to)`.
    pub fn busy_in(&self, from: u64, to: u64) -> u64 {
        self.runs.iter().map(|r| r.overlap_ns(from, to)).sum()
    }
}

/// Who ran when during one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The scenario's id (`3`) and name (`two-equal`) as `3 two-equal`.
    pub scenario: String,
    /// A title for pictures.
    pub title: String,
    /// Which recorder made it: `sampling`, `kernel` or `rt`.
    pub recorder: String,
    /// The length of the recorded window, in ns (lanes fall inside `[0, window_ns)`).
    pub window_ns: u64,
    /// Two timestamps further apart than this were taken to be separated by a gap.
    pub threshold_ns: u64,
    /// The recording interval: a timestamp at most this often.
    pub interval_ns: u64,
    /// One lane per thread, in the scenario's order.
    pub lanes: Vec<Lane>,
    /// Instants for the whole scenario (phase changes).
    pub marks: Vec<Mark>,
}

impl Timeline {
    /// Checks the model's invariants: runs sorted, non-empty, not overlapping, inside the
    /// window. Exporters assume them; a recorder calls this before handing a timeline out.
    pub fn check(&self) -> Result<(), String> {
        for lane in &self.lanes {
            let mut prev_end = 0;
            for (i, r) in lane.runs.iter().enumerate() {
                if r.end_ns < r.start_ns {
                    return Err(format!("lane {}: run {i} ends before it starts", lane.name));
                }
                if i > 0 && r.start_ns < prev_end {
                    return Err(format!("lane {}: run {i} overlaps the one before", lane.name));
                }
                if r.end_ns > self.window_ns {
                    return Err(format!("lane {}: run {i} ends after the window", lane.name));
                }
                prev_end = r.end_ns;
            }
        }
        Ok(())
    }

    /// This (sampled) timeline with `kernel`'s lane of each thread right under its own,
    /// named `NAME kernel`, to show the two records of one thread one above the other.
    pub fn interleaved_with(&self, kernel: &Timeline) -> Timeline {
        let mut t = self.clone();
        t.lanes = self
            .lanes
            .iter()
            .zip(&kernel.lanes)
            .flat_map(|(a, b)| {
                let mut b = b.clone();
                b.name = format!("{} kernel", a.name);
                [a.clone(), b]
            })
            .collect();
        t.title = format!("{} — sampled and kernel", self.title);
        t
    }

    /// A 20 ms window in the middle of the timeline, on whole milliseconds (the whole
    /// window when it is shorter): where to zoom to see individual time slices.
    pub fn zoom_window(&self) -> (u64, u64) {
        const ZOOM: u64 = 20_000_000;
        if self.window_ns <= ZOOM {
            return (0, self.window_ns);
        }
        let from = (self.window_ns / 2 / 1_000_000) * 1_000_000;
        (from, from + ZOOM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(runs: &[(u64, u64)]) -> Lane {
        let mut l = Lane::new("t", "");
        l.runs = runs.iter().map(|&(s, e)| Span { start_ns: s, end_ns: e }).collect();
        l
    }

    #[test]
    fn gaps_are_the_holes_between_runs() {
        let l = lane(&[(0, 10), (15, 20), (20, 30), (40, 50)]);
        let gaps: Vec<(u64, u64)> = l.gaps().iter().map(|g| (g.start_ns, g.end_ns)).collect();
        assert_eq!(gaps, vec![(10, 15), (30, 40)]);
        assert_eq!(l.busy_ns(), 35);
        assert_eq!(l.busy_in(5, 45), 5 + 5 + 10 + 5);
    }

    #[test]
    fn rates_come_from_the_progress_points() {
        let mut l = lane(&[]);
        l.progress = vec![[0, 0], [1_000_000, 500], [2_000_000, 1500]];
        assert_eq!(l.rate_in(0, 2_000_000), Some(750_000.0));
        assert_eq!(l.rate_in(1_000_000, 2_000_000), Some(1_000_000.0));
        assert_eq!(l.rate_in(1_500_000, 1_600_000), None);
    }

    #[test]
    fn check_rejects_overlapping_runs() {
        let mut t = Timeline {
            scenario: "x".into(),
            title: "x".into(),
            recorder: "sampling".into(),
            window_ns: 100,
            threshold_ns: 1,
            interval_ns: 1,
            lanes: vec![lane(&[(0, 10), (5, 20)])],
            marks: vec![],
        };
        assert!(t.check().is_err());
        t.lanes = vec![lane(&[(0, 10), (10, 20)])];
        assert!(t.check().is_ok());
    }
}
