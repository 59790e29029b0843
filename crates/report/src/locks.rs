//! Issue 25's lock and loader probes as people read them: one sentence each for `show` and
//! the page's first screen (`lines`), and one bar chart each for the page (`html`).
//!
//! - `sched.priority_inversion`: the frame's worst wait for the loader's lock, plain against
//!   inheriting, per side and policy;
//! - `sched.lock_fairness`: per lock, the worst wait, the hand-offs and Jain's index;
//! - `sched.semaphore_storm`: per semaphore, the interactive thread's worst lateness with
//!   and without nice, and the meals;
//! - `sched.memory_pressure`: the frame's work beside each loader, as a ratio to no loader.
//!
//! Pure functions of a run; a probe the run did not measure gives no line and no chart.

use schedlab_measure::model::{Measurement, Outcome, Run};

use crate::svg::{self, BarGroup};

const INVERSION: &str = "sched.priority_inversion";
const FAIRNESS: &str = "sched.lock_fairness";
const STORM: &str = "sched.semaphore_storm";
const PRESSURE: &str = "sched.memory_pressure";

/// The measured results of `probe` in `run`, in run order.
fn rows<'a>(run: &'a Run, probe: &str) -> Vec<&'a Measurement> {
    run.results.iter().filter(|m| m.probe == probe && m.outcome == Outcome::Ok).collect()
}

/// A result's median in its unit (ns for all four probes).
fn median(m: &Measurement) -> Option<f64> {
    m.summary.as_ref().map(|s| s.median)
}

/// The result of `rows` whose parameters include every `(key, value)` of `want`.
fn find<'a>(rows: &[&'a Measurement], want: &[(&str, &str)]) -> Option<&'a Measurement> {
    rows.iter().copied().find(|m| want.iter().all(|(k, v)| m.params.get(k) == Some(*v)))
}

fn note(m: &Measurement, k: &str) -> Option<f64> {
    m.notes.get(k).and_then(|v| v.parse().ok())
}

/// Nanoseconds for people.
fn ns(v: f64) -> String {
    schedlab_measure::units::human_ns(v.max(0.0) as u64)
}

/// The sides and policies of the inversion probe, as labelled.
const INVERSION_SIDES: &[(&str, &str, &str)] = &[
    ("os", "fifo", "OS threads, SCHED_FIFO"),
    ("os", "nice", "OS threads, nice"),
    ("rt", "levels", "schedlab-rt levels"),
];

/// One sentence per probe of issue 25 the run measured.
pub fn lines(run: &Run) -> Vec<String> {
    [inversion_line(run), fairness_line(run), storm_line(run), pressure_line(run)]
        .into_iter()
        .flatten()
        .collect()
}

fn inversion_line(run: &Run) -> Option<String> {
    let r = rows(run, INVERSION);
    let parts: Vec<String> = INVERSION_SIDES
        .iter()
        .filter_map(|(side, prio, label)| {
            let at = |lock| find(&r, &[("side", side), ("prio", prio), ("lock", lock)]);
            let cell = |lock| at(lock).and_then(median).map_or("-".to_string(), ns);
            (at("plain").is_some() || at("inherit").is_some())
                .then(|| format!("{label} {} plain, {} inheriting", cell("plain"), cell("inherit")))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "priority inversion (seed 001's loader holding the frame's lock; worst wait per 100 frames): {}",
            parts.join("; ")
        )
    })
}

fn fairness_line(run: &Run) -> Option<String> {
    let r = rows(run, FAIRNESS);
    let parts: Vec<String> = r
        .iter()
        .filter_map(|m| {
            let lock = m.params.get("lock")?;
            Some(format!(
                "{lock} worst {} (hand-offs {:.0}%, Jain {:.2})",
                ns(median(m)?),
                note(m, "handoff_share")? * 100.0,
                note(m, "jain")?
            ))
        })
        .collect();
    (!parts.is_empty())
        .then(|| format!("who wins a released lock (4 threads, 1 µs held): {}", parts.join("; ")))
}

fn storm_line(run: &Run) -> Option<String> {
    let r = rows(run, STORM);
    let mut parts = Vec::new();
    for sem in ["sysv", "posix", "rt"] {
        let cell = |nice| {
            let m = find(&r, &[("sem", sem), ("nice", nice)])?;
            Some(format!(
                "{} ({:.0} meals/s)",
                ns(median(m)?),
                note(m, "meals_per_s").unwrap_or(0.0)
            ))
        };
        match (cell("0"), cell("19")) {
            (None, None) => {}
            (a, b) => parts.push(format!(
                "{sem} {} at nice 0, {} at nice 19",
                a.unwrap_or_else(|| "-".into()),
                b.unwrap_or_else(|| "-".into())
            )),
        }
    }
    (!parts.is_empty()).then(|| {
        format!(
            "semaphore storm (seed 000: 40 philosophers; the interactive thread's worst lateness): {}",
            parts.join("; ")
        )
    })
}

fn pressure_line(run: &Run) -> Option<String> {
    let r = rows(run, PRESSURE);
    let base = find(&r, &[("loader", "none")]).and_then(median);
    let parts: Vec<String> = r
        .iter()
        .filter(|m| m.params.get("loader") != Some("none"))
        .filter_map(|m| {
            let v = median(m)?;
            let loader = m.params.get("loader")?;
            Some(match base {
                Some(b) if b > 0.0 => format!("{loader} x{:.2}", v / b),
                _ => format!("{loader} {}", ns(v)),
            })
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "the loader's memory traffic from another CPU (the frame's work{}): {}",
            if base.is_some() { " against no loader" } else { "" },
            parts.join(", ")
        )
    })
}

/// The page's charts, one per probe the run measured, with their captions.
pub fn charts(run: &Run) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let r = rows(run, INVERSION);
    if !r.is_empty() {
        let groups: Vec<BarGroup> = INVERSION_SIDES
            .iter()
            .map(|(side, prio, label)| BarGroup {
                label: label.to_string(),
                bars: ["plain", "inherit"]
                    .iter()
                    .map(|lock| {
                        find(&r, &[("side", side), ("prio", prio), ("lock", lock)])
                            .and_then(median)
                            .map(|v| (v / 1e3, ns(v)))
                    })
                    .collect(),
            })
            .filter(|g| g.bars.iter().any(Option::is_some))
            .collect();
        out.push((
            "The frame's worst wait for a lock the loader holds, per 100 frames: without and \
             with priority inheritance"
                .to_string(),
            svg::bars(
                "Priority inversion",
                &["plain", "inheriting"],
                &groups,
                "worst wait, µs (log)",
            ),
        ));
    }
    let r = rows(run, FAIRNESS);
    if !r.is_empty() {
        let us = |v: Option<f64>| v.map(|v| (v / 1e3, ns(v)));
        let groups: Vec<BarGroup> = r
            .iter()
            .map(|m| BarGroup {
                label: m.params.get("lock").unwrap_or("?").to_string(),
                bars: vec![
                    us(median(m)),
                    us(note(m, "wait_p99_us").map(|v| v * 1e3)),
                    us(note(m, "resume_p50_us").map(|v| v * 1e3)),
                ],
            })
            .collect();
        out.push((
            "Who wins a released lock: the worst and p99 wait of four threads that release and \
             ask again at once, and the time a hand-off takes to resume the next holder"
                .to_string(),
            svg::bars(
                "Lock fairness",
                &["worst wait", "p99 wait", "resume (p50)"],
                &groups,
                "µs (log)",
            ),
        ));
    }
    let r = rows(run, STORM);
    if !r.is_empty() {
        let groups: Vec<BarGroup> = ["sysv", "posix", "rt"]
            .iter()
            .map(|sem| BarGroup {
                label: sem.to_string(),
                bars: ["0", "19"]
                    .iter()
                    .map(|nice| {
                        find(&r, &[("sem", sem), ("nice", nice)])
                            .and_then(median)
                            .map(|v| (v.max(1.0) / 1e3, ns(v)))
                    })
                    .collect(),
            })
            .filter(|g| g.bars.iter().any(Option::is_some))
            .collect();
        out.push((
            "Seed 000's semaphore storm: the worst lateness of an interactive thread due every \
             10 ms beside 40 dining philosophers, with the philosophers at nice 0 and 19"
                .to_string(),
            svg::bars(
                "Semaphore storm",
                &["philosophers nice 0", "nice 19"],
                &groups,
                "worst lateness, µs (log)",
            ),
        ));
    }
    let r = rows(run, PRESSURE);
    if !r.is_empty() {
        let groups: Vec<BarGroup> = r
            .iter()
            .map(|m| BarGroup {
                label: format!("loader {}", m.params.get("loader").unwrap_or("?")),
                bars: vec![median(m).map(|v| (v / 1e3, ns(v)))],
            })
            .collect();
        out.push((
            "The frame's work (2 MiB working set) while a loader on another CPU idles, streams \
             or scatters through 64 MiB"
                .to_string(),
            svg::bars("Memory pressure", &["frame's work"], &groups, "µs per frame (log)"),
        ));
    }
    out
}

/// The charts as the page's HTML, or `None` when the run measured none of the probes.
pub fn html(run: &Run) -> Option<String> {
    let charts = charts(run);
    if charts.is_empty() {
        return None;
    }
    let mut out = String::new();
    for line in lines(run) {
        out.push_str(&format!("<p>{}</p>\n", svg::escape(&line)));
    }
    for (caption, chart) in charts {
        out.push_str(&format!(
            "<figure>{chart}<figcaption>{}</figcaption></figure>\n",
            svg::escape(&caption)
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Params, RunMeta, Sample, Unit};

    fn result(probe: &str, params: Params, median: f64, notes: &[(&str, &str)]) -> Measurement {
        let sample =
            Sample { iters: 1, elapsed_ns: 1, value: median, other_cpu_ns: None, migrated: false };
        let mut m = Measurement::of_samples(probe, params, Unit::Nanos, vec![sample; 3], 0.1);
        for (k, v) in notes {
            m.notes.set(k, *v);
        }
        m
    }

    #[test]
    fn each_probe_measured_is_a_sentence_and_a_chart() {
        let meta = RunMeta::starting("full", Machine::fingerprint(), ("0.1.0", "x"));
        let mut run = Run { meta, results: Vec::new(), warnings: Vec::new() };
        assert!(lines(&run).is_empty() && html(&run).is_none());
        let inv = |side: &str, prio: &str, lock: &str| {
            Params::new().with("side", side).with("prio", prio).with("lock", lock)
        };
        run.results.push(result(INVERSION, inv("rt", "levels", "plain"), 105e6, &[]));
        run.results.push(result(INVERSION, inv("rt", "levels", "inherit"), 1.2e6, &[]));
        run.results.push(result(
            FAIRNESS,
            Params::new().with("lock", "tokio"),
            40e3,
            &[
                ("handoff_share", "0.998"),
                ("jain", "1.000"),
                ("wait_p99_us", "20"),
                ("resume_p50_us", "5"),
            ],
        ));
        run.results.push(result(PRESSURE, Params::new().with("loader", "none"), 100e3, &[]));
        run.results.push(result(PRESSURE, Params::new().with("loader", "stream"), 150e3, &[]));
        let l = lines(&run);
        assert_eq!(l.len(), 3, "{l:?}");
        assert!(l[0].contains("schedlab-rt levels 105"), "{}", l[0]);
        assert!(l[0].contains("plain, 1.2"), "{}", l[0]);
        assert!(
            l[1].contains("tokio worst 40") && l[1].contains("(hand-offs 100%, Jain 1.00)"),
            "{}",
            l[1]
        );
        assert!(l[2].ends_with("stream x1.50"), "{}", l[2]);
        let page = html(&run).unwrap();
        assert_eq!(page.matches("<figure>").count(), 3);
    }
}
