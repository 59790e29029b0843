//! A recorded timeline as stored results: what `schedlab timeline` keeps, and `show` and
//! `compare` read like any other run's rows.
//!
//! Per thread (params `scenario=3,thread=a`, plus `recorder=kernel` for the kernel's record):
//! - `sched.timeline.slice` (µs): every run's length, the effective time slice; the notes
//!   carry the CPU share and the number of runs;
//! - `sched.timeline.gap` (µs): every gap's length (skipped when there was none);
//! - `sched.timeline.work` (ops/s): the useful-work rate, matrix inverses per second (from
//!   the sampled record only: the kernel's record of the same thread did the same work);
//! - `sched.timeline.overshoot` (µs): sleep overshoots, for sleeping threads.
//!
//! Also what the sampled record got right against the kernel's ([`agreement`]).

use schedlab_measure::model::{Measurement, Outcome, Params, Sample, Unit};

use crate::model::Timeline;
use crate::stats::ThreadStats;

/// The results of one recording of scenario `scenario` (its id): `stats` are
/// [`crate::stats::timeline_stats`] of `t`, `wall` the seconds the whole recording took,
/// `recorder` `None` for the primary record or `Some("kernel")`.
pub fn measurements(
    scenario: &str,
    t: &Timeline,
    stats: &[ThreadStats],
    wall: f64,
    recorder: Option<&str>,
) -> Vec<Measurement> {
    let mut out = Vec::new();
    for (lane, st) in t.lanes.iter().zip(stats) {
        let mut params = Params::new().with("scenario", scenario).with("thread", &lane.name);
        if let Some(r) = recorder {
            params.set("recorder", r);
        }
        let notes = Params::new()
            .with("cpu_share", format!("{:.2}%", st.cpu_share * 100.0))
            .with("runs", st.runs)
            .with("setup", lane.detail.replace(',', ";"))
            .with("threshold_ns", t.threshold_ns);
        if !lane.sleep_overshoot_ns.is_empty() && recorder.is_none() {
            out.push(durations(
                "sched.timeline.overshoot",
                params.clone(),
                &lane.sleep_overshoot_ns,
                notes.clone(),
                wall,
            ));
            continue;
        }
        let runs: Vec<u64> = lane.runs.iter().map(|r| r.len_ns()).collect();
        let gaps: Vec<u64> = lane.gaps().iter().map(|g| g.len_ns()).collect();
        out.push(durations("sched.timeline.slice", params.clone(), &runs, notes.clone(), wall));
        out.push(durations("sched.timeline.gap", params.clone(), &gaps, notes.clone(), wall));
        if recorder.is_some() {
            continue; // the work done is the sampled lane's; only runs and gaps differ
        }
        let sample = Sample {
            iters: lane.work_units,
            elapsed_ns: lane.done_ns.saturating_sub(lane.ready_ns),
            value: st.work_rate,
            other_cpu_ns: None,
            migrated: false,
        };
        let mut m = Measurement::of_samples(
            "sched.timeline.work",
            params,
            Unit::OpsPerSec,
            vec![sample],
            wall,
        );
        m.notes = notes;
        m.iters_per_sample = lane.work_units;
        out.push(m);
    }
    out
}

/// A measurement whose samples are `values_ns`, shown in µs; skipped when there are none.
fn durations(
    probe: &str,
    params: Params,
    values_ns: &[u64],
    notes: Params,
    wall: f64,
) -> Measurement {
    let samples: Vec<Sample> = values_ns
        .iter()
        .map(|&ns| Sample {
            iters: 1,
            elapsed_ns: ns,
            value: ns as f64 / 1e3,
            other_cpu_ns: None,
            migrated: false,
        })
        .collect();
    let mut m = if samples.is_empty() {
        Measurement::without_samples(
            probe,
            params,
            Unit::Micros,
            Outcome::Skipped("none recorded in this window".into()),
            wall,
        )
    } else {
        let mut m = Measurement::of_samples(probe, params, Unit::Micros, samples, wall);
        m.iters_per_sample = 1;
        m
    };
    m.notes = notes;
    m
}

/// One thread as the sampling recorder saw it beside the kernel's record of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// The thread's lane name.
    pub name: String,
    /// CPU share, sampled and kernel (0..=1).
    pub cpu_share: (f64, f64),
    /// Number of runs, sampled and kernel.
    pub runs: (usize, usize),
    /// The kernel's gaps no longer than the sampling threshold: invisible to sampling.
    pub short_gaps: usize,
    /// All the kernel's gaps.
    pub kernel_gaps: usize,
}

/// Per thread, the sampled record `t` (with stats `st`) against the kernel's `kt` (`ks`),
/// lanes matched by position.
pub fn agreement(
    t: &Timeline,
    kt: &Timeline,
    st: &[ThreadStats],
    ks: &[ThreadStats],
) -> Vec<Agreement> {
    t.lanes
        .iter()
        .zip(&kt.lanes)
        .zip(st.iter().zip(ks))
        .map(|((lane, klane), (s, k))| {
            let gaps = klane.gaps();
            Agreement {
                name: lane.name.clone(),
                cpu_share: (s.cpu_share, k.cpu_share),
                runs: (s.runs, k.runs),
                short_gaps: gaps.iter().filter(|g| g.len_ns() <= t.threshold_ns).count(),
                kernel_gaps: gaps.len(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Lane, Span};
    use crate::stats::timeline_stats;

    fn timeline(lanes: Vec<Lane>) -> Timeline {
        Timeline {
            scenario: "3".into(),
            title: "t".into(),
            recorder: "sampling".into(),
            window_ns: 100_000,
            threshold_ns: 2_000,
            interval_ns: 1_000,
            lanes,
            marks: vec![],
        }
    }

    fn lane(name: &str, runs: &[(u64, u64)]) -> Lane {
        let mut l = Lane::new(name, "plain, normal");
        l.runs = runs.iter().map(|&(s, e)| Span { start_ns: s, end_ns: e }).collect();
        l.ready_ns = 0;
        l.done_ns = 100_000;
        l.work_units = 50;
        l
    }

    #[test]
    fn a_thread_gives_slices_gaps_and_work_with_its_identity() {
        let t = timeline(vec![lane("a", &[(0, 10_000), (30_000, 60_000)])]);
        let st = timeline_stats(&t);
        let ms = measurements("3", &t, &st, 1.0, None);
        let probes: Vec<&str> = ms.iter().map(|m| m.probe.as_str()).collect();
        assert_eq!(probes, ["sched.timeline.slice", "sched.timeline.gap", "sched.timeline.work"]);
        assert_eq!(ms[0].params.key(), "scenario=3,thread=a");
        let slices: Vec<f64> = ms[0].samples.iter().map(|s| s.value).collect();
        assert_eq!(slices, [10.0, 30.0], "run lengths in µs");
        assert_eq!(ms[1].samples.len(), 1, "one gap, 10..30 µs");
        assert_eq!(ms[2].summary.as_ref().unwrap().median, 50.0 * 1e9 / 100_000.0);
        assert_eq!(ms[0].notes.get("setup"), Some("plain; normal"), "no comma in a note");
    }

    #[test]
    fn the_kernel_record_gives_no_work_row_and_no_gap_is_a_skip() {
        let t = timeline(vec![lane("a", &[(0, 100_000)])]);
        let st = timeline_stats(&t);
        let ms = measurements("3", &t, &st, 1.0, Some("kernel"));
        assert_eq!(ms.len(), 2);
        assert!(ms.iter().all(|m| m.params.get("recorder") == Some("kernel")));
        assert_eq!(ms[1].outcome.key(), "skipped");
    }

    #[test]
    fn agreement_counts_the_gaps_sampling_cannot_see() {
        let t = timeline(vec![lane("a", &[(0, 50_000)])]);
        // The kernel saw a 1 µs gap (below the 2 µs threshold) and a 10 µs one.
        let kt = timeline(vec![lane("a", &[(0, 20_000), (21_000, 40_000), (50_000, 60_000)])]);
        let a = agreement(&t, &kt, &timeline_stats(&t), &timeline_stats(&kt));
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].short_gaps, a[0].kernel_gaps), (1, 2));
        assert_eq!(a[0].runs, (1, 3));
    }
}
