//! `schedlab show RUN --view hbench`: seed 003's §7 table for schedlab-rt — the HBench-OS
//! system calls (`rt.bystander`) with a live runtime in the process, each state as a ratio
//! to the same call with no runtime, measured in the same run (issue 26).
//!
//! A ratio whose median's interval overlaps the baseline's is "within noise", as `compare`
//! says it; otherwise the ratio stands. The seed's own before/after figures are the
//! reference sets `seed003:before-sa` and `seed003:after-sa`.

use schedlab_measure::model::{Outcome, Run};
use schedlab_measure::stats::Summary;

use schedlab_probes::bystander::{CALLS, STATES};

use crate::table::{Align, Table};

/// The probe whose results the view reads.
pub const PROBE: &str = "rt.bystander";

fn summary<'a>(run: &'a Run, call: &str, state: &str) -> Option<&'a Summary> {
    run.results
        .iter()
        .find(|m| {
            m.probe == PROBE
                && m.params.get("call") == Some(call)
                && m.params.get("runtime") == Some(state)
                && m.outcome == Outcome::Ok
        })
        .and_then(|m| m.summary.as_ref())
}

/// One state's cell: the ratio to the baseline, marked when the intervals overlap.
fn ratio_cell(base: &Summary, s: Option<&Summary>) -> String {
    let Some(s) = s else { return "-".into() };
    if base.median <= 0.0 {
        return "-".into();
    }
    let r = s.median / base.median;
    let overlap = s.ci_low <= base.ci_high && base.ci_low <= s.ci_high;
    if overlap {
        format!("{r:.3} (noise)")
    } else {
        format!("{r:.3}")
    }
}

/// The view's text.
pub fn hbench_text(run: &Run) -> String {
    let mut t = Table::new(&[
        ("HBench-OS row", Align::Left),
        ("no runtime", Align::Right),
        ("idle ÷ none", Align::Right),
        ("running ÷ none", Align::Right),
        ("inside ÷ none", Align::Right),
    ]);
    for call in CALLS.iter().map(|c| c.0) {
        let Some(base) = summary(run, call, "none") else { continue };
        let mut row = vec![call.to_string(), format!("{:.1} ns", base.median)];
        row.extend(STATES[1..].iter().map(|st| ratio_cell(base, summary(run, call, st))));
        t.row(row);
    }
    let mut text = format!(
        "{}: run #{} — seed 003 §7 for schedlab-rt: system calls with a live runtime in the process\n\n",
        run.meta.display_name(),
        run.meta.id
    );
    if t.is_empty() {
        text.push_str(
            "no rt.bystander result in this run: run `schedlab run --filter rt.bystander --rounds 3` first\n",
        );
        return text;
    }
    text.push_str(&t.to_terminal());
    text.push_str(
        "median per call; each state as a ratio to no runtime in this run; \"(noise)\": the 95% intervals of the medians overlap. \
idle: a one-processor runtime, preemption armed, one user thread parked; running: two user threads computing on it, \
preempted every 10 ms, on another CPU; inside: the calls made by a user thread. \
The seed's before/after figures: `schedlab reference import seed003`, then `compare seed003:before-sa seed003:after-sa latest`.\n",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::model::{Measurement, Params, RunMeta, Sample, Unit};

    fn result(call: &str, state: &str, values: &[f64]) -> Measurement {
        let samples = values
            .iter()
            .map(|&v| Sample {
                iters: 1,
                elapsed_ns: 0,
                value: v,
                other_cpu_ns: None,
                migrated: false,
            })
            .collect();
        Measurement::of_samples(
            PROBE,
            Params::new().with("call", call).with("runtime", state),
            Unit::Nanos,
            samples,
            0.0,
        )
    }

    #[test]
    fn states_are_ratios_to_the_baseline_and_overlap_is_noise() {
        let meta = RunMeta::starting(
            "quick",
            schedlab_measure::machine::Machine::fingerprint(),
            ("t", "t"),
        );
        let run = Run {
            meta,
            results: vec![
                result("getpid", "none", &[100.0; 9]),
                result(
                    "getpid",
                    "idle",
                    &[100.0, 101.0, 99.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0],
                ),
                result("getpid", "running", &[150.0; 9]),
            ],
            warnings: Vec::new(),
        };
        let text = hbench_text(&run);
        let line = text.lines().find(|l| l.starts_with("getpid")).expect(&text);
        assert!(line.contains("100.0 ns"), "{line}");
        assert!(line.contains("1.000 (noise)"), "{line}");
        assert!(line.contains("1.500") && !line.contains("1.500 (noise)"), "{line}");
        assert!(line.trim_end().ends_with('-'), "inside not measured: {line}");
        assert!(!text.contains("getrusage"), "no row without a baseline\n{text}");
    }

    #[test]
    fn a_run_without_the_probe_says_what_to_run() {
        let meta = RunMeta::starting(
            "quick",
            schedlab_measure::machine::Machine::fingerprint(),
            ("t", "t"),
        );
        let text = hbench_text(&Run { meta, results: Vec::new(), warnings: Vec::new() });
        assert!(text.contains("schedlab run --filter rt.bystander"), "{text}");
    }

    /// The columns are the probe's states after its baseline.
    #[test]
    fn the_columns_follow_the_probe() {
        assert_eq!(STATES, ["none", "idle", "running", "inside"]);
        assert_eq!(PROBE, "rt.bystander");
    }
}
