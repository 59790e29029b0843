//! The scheduling studies' own views (issue 25): seed 001's goal judged per method —
//! `sched.background_budget`'s verdicts, one run's table and several runs side by side — and
//! `sched.wakeup_latency`'s table and figure.
//!
//! The verdict itself is the probe crate's ([`schedlab_probes::sched::budget_verdict_of`]):
//! this module only lays it out, judging every result again from its stored notes and its
//! run's unloaded baseline, so a result stored before its baseline (a rotated `--rounds`
//! order) is judged here all the same.

use schedlab_measure::model::{Measurement, Outcome, Run};
use schedlab_measure::stats::QuantileDiff;
use schedlab_probes::sched::{budget_verdict_of, interval_ms, wakeup, BudgetVerdict, BUDGET_ID};

use crate::svg::{self, BarGroup};
use crate::table::{Align, Table};

/// One judged method of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// `loader` (the method).
    pub loader: String,
    /// `cpus`.
    pub cpus: String,
    /// The loader's CPU share, as stored (`loader_share`).
    pub share: Option<f64>,
    /// Frame p99, µs.
    pub p99_us: Option<f64>,
    /// Frame p95 minus the unloaded run's, µs, with its 95% interval.
    pub tail: Option<QuantileDiff>,
    /// The unloaded run's own frame p99 (µs) when it exceeded the frame period.
    pub disturbed_p99_us: Option<f64>,
    /// The verdict.
    pub verdict: BudgetVerdict,
}

/// Every judged method of `run`, in measurement order (the baseline and unmeasured results
/// left out).
pub fn judged(run: &Run) -> Vec<Judged> {
    run.results
        .iter()
        .filter_map(|m| {
            let j = budget_verdict_of(m, &run.results)?;
            let num = |k: &str| m.notes.get(k).and_then(|v| v.parse::<f64>().ok());
            Some(Judged {
                loader: m.params.get("loader").unwrap_or("?").to_string(),
                cpus: m.params.get("cpus").unwrap_or("1").to_string(),
                share: num("loader_share"),
                p99_us: num("p99_us"),
                tail: j.tail,
                disturbed_p99_us: j.disturbed_p99_us,
                verdict: j.verdict,
            })
        })
        .collect()
}

/// How a verdict reads in a cell: `pass`, `FAIL`, `undecided` or `unjudged`.
fn word(v: &BudgetVerdict) -> &'static str {
    match v {
        BudgetVerdict::Pass(_) => "pass",
        BudgetVerdict::Fail(_) => "FAIL",
        BudgetVerdict::Undecided(_) => "undecided",
        BudgetVerdict::Unjudged(_) => "unjudged",
    }
}

/// A tail difference as a cell: `+0.21 ms [-0.10, +0.55] ms`.
fn tail_cell(t: &Option<QuantileDiff>) -> String {
    t.map_or("-".into(), |t| format!("{:+.2} ms {}", t.point / 1e3, interval_ms(&t)))
}

/// The definition, printed under every verdict table.
pub const DEFINITION: &str = "seed 001's goal, per method: the loader takes at most 10% of a CPU \
    (±1 point) while doing work, and the frame p95 stays within 1 ms of the unloaded run's \
    (loader=none, same cpus, same run), judged by the 95% bootstrap interval of the \
    difference: pass when all of it is at or below 1 ms, FAIL when all of it is above (or the \
    share is over), undecided when it straddles 1 ms or the unloaded run's own p99 exceeds the \
    20 ms period (a disturbed baseline); the p95, as a p99 of a few hundred frames is the \
    second- or third-worst, which no interval can bound";

/// The loud lines for the disturbed baselines among `j`, one per `cpus`.
pub fn disturbed_lines(j: &[Judged]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for r in j {
        if let Some(p) = r.disturbed_p99_us {
            let line = format!(
                "WARNING: disturbed baseline (cpus={}): the unloaded run's own frame p99 is {:.2} ms, over the 20 ms frame period: the frames cannot judge a method against it, so its verdicts are undecided unless the share fails them; {}",
                r.cpus,
                p / 1e3,
                schedlab_measure::warnings::advice_for("disturbed-baseline")
            );
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    lines
}

/// One run's verdicts: method, cpus, share, frame p99, verdict and why.
pub fn verdict_table(j: &[Judged]) -> Table {
    let mut t = Table::new(&[
        ("method", Align::Left),
        ("cpus", Align::Right),
        ("loader share", Align::Right),
        ("frame p99", Align::Right),
        ("frame p95 − unloaded [95% CI]", Align::Right),
        ("verdict", Align::Left),
        ("why", Align::Left),
    ]);
    for r in j {
        t.row(vec![
            r.loader.clone(),
            r.cpus.clone(),
            r.share.map_or("-".into(), |s| format!("{:.1}%", s * 100.0)),
            r.p99_us.map_or("-".into(), |p| format!("{:.2} ms", p / 1e3)),
            tail_cell(&r.tail),
            word(&r.verdict).to_string(),
            r.verdict.why().to_string(),
        ]);
    }
    t
}

/// The verdicts of `runs` side by side: one row per method and cpus any run judged, one
/// column per run (`pass`, `FAIL (share 65.0%, p95 +3.20 ms [+2.10, +4.00] ms)`, `-` where
/// not measured);
/// `None` when no run judged any.
pub fn verdicts_across(runs: &[Run]) -> Option<Table> {
    let per_run: Vec<Vec<Judged>> = runs.iter().map(judged).collect();
    let mut keys: Vec<(String, String)> = Vec::new();
    for j in per_run.iter().flatten() {
        let k = (j.loader.clone(), j.cpus.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    if keys.is_empty() {
        return None;
    }
    let names: Vec<String> = runs.iter().map(|r| r.meta.display_name()).collect();
    let mut columns: Vec<(&str, Align)> = vec![("method", Align::Left), ("cpus", Align::Right)];
    columns.extend(names.iter().map(|n| (n.as_str(), Align::Left)));
    let mut t = Table::new(&columns);
    for (loader, cpus) in keys {
        let mut row = vec![loader.clone(), cpus.clone()];
        for js in &per_run {
            row.push(js.iter().find(|j| j.loader == loader && j.cpus == cpus).map_or(
                "-".to_string(),
                |j| match &j.verdict {
                    BudgetVerdict::Pass(_) => "pass".to_string(),
                    v => format!(
                        "{}{} ({}, p95 {})",
                        word(v),
                        if j.disturbed_p99_us.is_some() { " (disturbed baseline)" } else { "" },
                        j.share.map_or("share -".into(), |s| format!("share {:.1}%", s * 100.0)),
                        tail_cell(&j.tail)
                    ),
                },
            ));
        }
        t.row(row);
    }
    Some(t)
}

/// The verdicts of one run for a terminal, under a heading, or nothing without any.
pub fn verdict_text(run: &Run) -> Option<String> {
    let j = judged(run);
    if j.is_empty() {
        return None;
    }
    let loud: String =
        disturbed_lines(&j).iter().map(|l| crate::table::wrap(l, 100) + "\n").collect();
    Some(format!(
        "\nseed 001's verdicts ({BUDGET_ID}):\n{loud}{}{}\n",
        verdict_table(&j).to_terminal(),
        crate::table::wrap(DEFINITION, 100)
    ))
}

/// The wake-up latency results of `run`, in measurement order.
fn wakeups(run: &Run) -> Vec<&Measurement> {
    run.results
        .iter()
        .filter(|m| m.probe == wakeup::ID && m.outcome == Outcome::Ok && m.summary.is_some())
        .collect()
}

/// A wake-up variant as people read it: `os SCHED_FIFO busy`, `rt High idle, other: dma0`.
fn variant_label(m: &Measurement) -> String {
    let p = |k: &str, d: &'static str| m.params.get(k).unwrap_or(d).to_string();
    let who = match (p("backend", "os").as_str(), p("policy", "other").as_str()) {
        ("rt", _) => "rt High".to_string(),
        (_, "fifo") => "os SCHED_FIFO".to_string(),
        _ => "os SCHED_OTHER".to_string(),
    };
    let mut s = format!("{who} {}", p("load", "idle"));
    if p("slack", "default") != "default" {
        s.push_str(&format!(", own slack {}", p("slack", "")));
    }
    match p("other", "none").as_str() {
        "none" => {}
        "dma0" => s.push_str(", another process holds cpu_dma_latency=0"),
        "slack1ns" => s.push_str(", another process wakes every 1 ms (1 ns slack)"),
        o => s.push_str(&format!(", other {o}")),
    }
    s
}

/// `sched.wakeup_latency` as a table: variant, mean (the value), p50, p99, max, wakes.
pub fn wakeup_table(run: &Run) -> Option<Table> {
    let rows = wakeups(run);
    if rows.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        ("variant", Align::Left),
        ("mean", Align::Right),
        ("p50", Align::Right),
        ("p99", Align::Right),
        ("max", Align::Right),
        ("wakes", Align::Right),
    ]);
    for m in rows {
        let us = |k: &str| m.notes.get(k).map_or("-".to_string(), |v| format!("{v} µs"));
        t.row(vec![
            variant_label(m),
            crate::units::human(m.summary.as_ref().map_or(0.0, |s| s.median), m.unit),
            us("p50_us"),
            us("p99_us"),
            us("max_us"),
            m.notes.get("wakes").unwrap_or("-").to_string(),
        ]);
    }
    Some(t)
}

/// `sched.wakeup_latency` as a figure: p50, p99 and max per variant, on a log axis (µs).
pub fn wakeup_chart(run: &Run) -> Option<String> {
    let rows = wakeups(run);
    if rows.is_empty() {
        return None;
    }
    let groups: Vec<BarGroup> = rows
        .iter()
        .map(|m| BarGroup {
            label: variant_label(m),
            bars: ["p50_us", "p99_us", "max_us"]
                .iter()
                .map(|k| {
                    let v = m.notes.get(k)?.parse::<f64>().ok().filter(|v| *v > 0.0)?;
                    Some((v, format!("{v:.1} µs")))
                })
                .collect(),
        })
        .collect();
    Some(svg::bars(
        &format!("Wake-up latency of a 1 ms timer: {}", run.meta.display_name()),
        &["p50", "p99", "max"],
        &groups,
        "lateness, µs (log scale)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Params, RunMeta, Sample, Unit};
    use schedlab_probes::sched::FRAMES_NOTE;

    fn run(id: i64, label: &str) -> Run {
        let mut meta = RunMeta::starting("quick", Machine::fingerprint(), ("0", "x"));
        meta.id = id;
        meta.label = Some(label.into());
        Run { meta, results: vec![], warnings: vec![] }
    }

    /// A stored result of `loader` whose 200 frames (4.0–4.5 ms) come `by` µs later than the
    /// unloaded run's, its p99 note from them.
    fn budget(loader: &str, share: Option<&str>, by: f64) -> Measurement {
        let s = Sample { iters: 1, elapsed_ns: 1, value: 4e6, other_cpu_ns: None, migrated: false };
        let mut m = Measurement::of_samples(
            BUDGET_ID,
            Params::new().with("loader", loader).with("cpus", 1),
            Unit::Nanos,
            vec![s],
            1.0,
        );
        let frames: Vec<f64> = (0..200).map(|i| 4000.0 + 2.5 * i as f64 + by).collect();
        let raw: Vec<String> = frames.iter().map(|f| format!("{f:.0}")).collect();
        m.notes.set(FRAMES_NOTE, raw.join(" "));
        m.notes.set("p99_us", format!("{:.0}", frames[197]));
        if let Some(s) = share {
            m.notes.set("loader_share", s);
        }
        m
    }

    #[test]
    fn verdicts_are_judged_against_the_run_baseline_whatever_the_order_stored() {
        let mut r = run(1, "a");
        // The loaded results first, the baseline after (a rotated --rounds order).
        r.results.push(budget("os", Some("0.650"), 5100.0));
        r.results.push(budget("rt", Some("0.105"), 200.0));
        r.results.push(budget("rt-budget", Some("0.105"), 1000.0));
        r.results.push(budget("none", None, 0.0));
        let j = judged(&r);
        assert_eq!(j.len(), 3);
        assert_eq!(j[0].verdict.key(), "fail");
        assert_eq!(j[1].verdict.key(), "pass");
        assert_eq!(j[2].verdict.key(), "undecided");
        let text = verdict_text(&r).unwrap();
        assert!(
            text.contains("FAIL") && text.contains("pass") && text.contains("undecided"),
            "{text}"
        );
        // The interval is in the table: the tail's difference and its ends.
        let rt = text.lines().find(|l| l.starts_with("rt ")).unwrap();
        assert!(rt.contains("+0.20 ms [+0."), "{text}");
        assert!(!text.contains("WARNING"), "{text}");
    }

    #[test]
    fn a_disturbed_baseline_heads_the_verdicts() {
        let mut r = run(1, "a");
        let mut none = budget("none", None, 0.0);
        let mut frames: Vec<String> = (0..200).map(|i| format!("{}", 4000 + i)).collect();
        frames[..3].fill("106000".into());
        none.notes.set(FRAMES_NOTE, frames.join(" "));
        r.results.push(none);
        r.results.push(budget("rt", Some("0.105"), 200.0));
        let text = verdict_text(&r).unwrap();
        assert!(text.contains("WARNING: disturbed baseline (cpus=1)"), "{text}");
        assert!(text.contains("frame p99 is 106.00 ms"), "{text}");
        assert!(text.contains("undecided"), "{text}");
        let t = verdicts_across(&[r]).unwrap().to_terminal();
        assert!(t.contains("undecided (disturbed baseline) (share 10.5%, p95 +"), "{t}");
    }

    #[test]
    fn compare_lays_the_verdicts_of_runs_side_by_side() {
        let mut a = run(1, "before");
        a.results.push(budget("none", None, 0.0));
        a.results.push(budget("rt", Some("0.150"), 100.0));
        let mut b = run(2, "after");
        b.results.push(budget("none", None, 0.0));
        b.results.push(budget("rt", Some("0.100"), 100.0));
        b.results.push(budget("idle", Some("0.020"), 200.0));
        let t = verdicts_across(&[a.clone(), b]).unwrap().to_terminal();
        let rt = t.lines().find(|l| l.starts_with("rt")).unwrap();
        assert!(rt.contains("FAIL (share 15.0%, p95 +0.10 ms [") && rt.contains("pass"), "{t}");
        let idle = t.lines().find(|l| l.starts_with("idle")).unwrap();
        assert!(idle.contains(" - ") || idle.contains("-  "), "not measured in run a: {t}");
        assert!(verdicts_across(&[run(3, "empty")]).is_none());
    }

    #[test]
    fn wakeups_make_a_table_and_a_figure() {
        let mut r = run(1, "w");
        let s = Sample { iters: 1, elapsed_ns: 1, value: 6e4, other_cpu_ns: None, migrated: false };
        let mut m = Measurement::of_samples(
            wakeup::ID,
            Params::new().with("backend", "os").with("policy", "fifo").with("load", "busy"),
            Unit::Nanos,
            vec![s],
            1.0,
        );
        for (k, v) in [("p50_us", "5.1"), ("p99_us", "20.0"), ("max_us", "80.2"), ("wakes", "100")]
        {
            m.notes.set(k, v);
        }
        r.results.push(m);
        let t = wakeup_table(&r).unwrap().to_terminal();
        assert!(t.contains("os SCHED_FIFO busy") && t.contains("20.0 µs"), "{t}");
        let svg = wakeup_chart(&r).unwrap();
        assert!(svg.contains("<svg") && svg.contains("80.2 µs"), "{svg}");
    }
}
