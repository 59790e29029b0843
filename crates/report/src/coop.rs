//! Seed 000's table from `sched.coop_vs_preempt` results: the Thread Manager study's
//! normalized scores (1.0 = the work done by a cooperative thread that never yields), one row
//! per threading method, columns for the foreground, the background and the worst case, and
//! its Figures 1–3 as charts.
//!
//! A cell is the median over the run's samples of each sample's paired ratio (the time under
//! the method over the time of the same work alone, measured just before it), with the
//! range of those ratios; the probe keeps them in its notes (`score`, `score_min`,
//! `score_max`, and in the worst case `main_share`, the busy main loop's share of the passes).
//! The article averaged up to ten runs after dropping the first; a median over the samples
//! with its range shows the same thing without hiding a bimodal cell.

use schedlab_measure::model::{Outcome, Run};

use crate::svg::{self, BarGroup};
use crate::table::{Align, Table};

/// The probe whose results make the table.
pub const PROBE: &str = "sched.coop_vs_preempt";

/// The columns, as the probe's `mode` values.
const MODES: [&str; 3] = ["fg", "bg", "worst"];

/// One cell: the median score, its range over the samples, and in the worst case the main
/// loop's share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// The median of the per-sample ratios.
    pub score: f64,
    /// The smallest ratio.
    pub min: f64,
    /// The largest ratio.
    pub max: f64,
    /// Samples behind it.
    pub n: usize,
    /// The busy main loop's share of the passes (`worst` only).
    pub main_share: Option<f64>,
    /// How long an event waited for the main loop: median and p99, µs (issue 25).
    pub event_us: Option<(f64, f64)>,
}

/// A run's table: methods in the order the run measured them, and a cell per method and
/// mode that was measured (skipped or failed ones are absent).
#[derive(Debug, Clone, PartialEq)]
pub struct CoopTable {
    /// The methods (`coop-never`, `preempt-10ms`, ...), rows of the table.
    pub methods: Vec<String>,
    /// `cells[method][mode]`, modes in `MODES` order.
    pub cells: Vec<[Option<Cell>; 3]>,
}

impl CoopTable {
    /// The cell of `method` in `mode` (`fg`, `bg` or `worst`).
    pub fn cell(&self, method: &str, mode: &str) -> Option<Cell> {
        let i = self.methods.iter().position(|m| m == method)?;
        let j = MODES.iter().position(|m| *m == mode)?;
        self.cells[i][j]
    }
}

/// The table of `run`, if it measured `sched.coop_vs_preempt`.
pub fn analyse(run: &Run) -> Option<CoopTable> {
    let mut t = CoopTable { methods: Vec::new(), cells: Vec::new() };
    for m in run.results.iter().filter(|m| m.probe == PROBE) {
        let (Some(method), Some(mode)) = (m.params.get("method"), m.params.get("mode")) else {
            continue;
        };
        let Some(j) = MODES.iter().position(|x| *x == mode) else { continue };
        let i = match t.methods.iter().position(|x| x == method) {
            Some(i) => i,
            None => {
                t.methods.push(method.to_string());
                t.cells.push([None; 3]);
                t.methods.len() - 1
            }
        };
        if m.outcome != Outcome::Ok {
            continue;
        }
        let num = |k: &str| m.notes.get(k).and_then(|v| v.parse::<f64>().ok());
        if let (Some(score), Some(min), Some(max)) =
            (num("score"), num("score_min"), num("score_max"))
        {
            t.cells[i][j] = Some(Cell {
                score,
                min,
                max,
                n: m.summary.as_ref().map_or(0, |s| s.n),
                main_share: num("main_share"),
                event_us: num("event_p50_us").zip(num("event_p99_us")),
            });
        }
    }
    (!t.methods.is_empty()).then_some(t)
}

/// The article's table, one row per method: foreground, background, worst case (an even
/// split of the CPU scores 2.0) and the main loop's share in the worst case.
pub fn table(t: &CoopTable) -> Table {
    let mut out = Table::new(&[
        ("method", Align::Left),
        ("foreground", Align::Right),
        ("background", Align::Right),
        ("worst case", Align::Right),
        ("main loop's share", Align::Right),
        ("event wait fg", Align::Right),
        ("event wait bg", Align::Right),
        ("event wait worst", Align::Right),
        ("n", Align::Right),
    ]);
    // An event's wait for the main loop, p50 / p99, in ms: the responsiveness beside the
    // throughput.
    let wait = |c: &Option<Cell>| {
        c.and_then(|c| c.event_us)
            .map_or("-".to_string(), |(p50, p99)| format!("{:.1} / {:.1} ms", p50 / 1e3, p99 / 1e3))
    };
    for (method, cells) in t.methods.iter().zip(&t.cells) {
        let text = |c: &Option<Cell>| {
            c.map_or("-".to_string(), |c| format!("{:.3} ({:.2}–{:.2})", c.score, c.min, c.max))
        };
        let share = cells[2]
            .and_then(|c| c.main_share)
            .map_or("-".to_string(), |s| format!("{:.0}%", s * 100.0));
        let n = cells.iter().flatten().map(|c| c.n).max().unwrap_or(0);
        out.row(vec![
            method.clone(),
            text(&cells[0]),
            text(&cells[1]),
            text(&cells[2]),
            share,
            wait(&cells[0]),
            wait(&cells[1]),
            wait(&cells[2]),
            n.to_string(),
        ]);
    }
    out
}

/// How to read [`table`], printed under it.
pub const LEGEND: &str = "score = time to finish the work under the method / time of the same \
    work alone just before it (median over the samples, range in parentheses); 1.0 is a \
    cooperative thread that never yields. foreground: beside an idle event loop; background: \
    at nice 10 while another process spins on the CPU; worst case: beside a busy main loop \
    doing the same work, where an even split scores 2.0. event wait: how long an event \
    arriving every 1 ms while the work ran waited for the main loop, p50 / p99.";

/// The table for a terminal, under a heading, or nothing when the run has no such results.
pub fn text(run: &Run) -> Option<String> {
    let t = analyse(run)?;
    Some(format!(
        "\nseed 000's table ({PROBE}):\n{}{}\n",
        table(&t).to_terminal(),
        crate::table::wrap(LEGEND, 100)
    ))
}

/// Figures 1 and 3 of the article for one run, as (caption, SVG): the methods compared in
/// the foreground and the background, and the worst case.
pub fn charts(name: &str, t: &CoopTable) -> Vec<(String, String)> {
    let bar = |c: Option<Cell>| c.map(|c| (c.score, format!("{:.3}", c.score)));
    let fig1: Vec<BarGroup> = t
        .methods
        .iter()
        .zip(&t.cells)
        .map(|(m, c)| BarGroup { label: m.clone(), bars: vec![bar(c[0]), bar(c[1])] })
        .collect();
    let fig3: Vec<BarGroup> = t
        .methods
        .iter()
        .zip(&t.cells)
        .map(|(m, c)| BarGroup { label: m.clone(), bars: vec![bar(c[2])] })
        .collect();
    let axis = "score: time / time alone (log scale; 1.0 = never yields, alone)";
    vec![
        (
            format!("Figure 1 of the article, on {name}: thread methods compared"),
            svg::bars("Thread methods compared", &["foreground", "background"], &fig1, axis),
        ),
        (
            format!(
                "Figure 3 of the article, on {name}: the worst case, beside a busy main loop \
                 (an even split of the CPU scores 2.0)"
            ),
            svg::bars("Worst case: beside a busy main loop", &["worst case"], &fig3, axis),
        ),
    ]
}

/// Figure 2 of the article, the machines (runs) compared: one group per method and mode,
/// one bar per run. `None` with fewer than two runs holding the table.
pub fn machines_chart(runs: &[(String, CoopTable)]) -> Option<String> {
    if runs.len() < 2 {
        return None;
    }
    let mut groups = Vec::new();
    let mut methods: Vec<&String> = Vec::new();
    for (_, t) in runs {
        for m in &t.methods {
            if !methods.contains(&m) {
                methods.push(m);
            }
        }
    }
    for m in methods {
        for mode in ["fg", "bg"] {
            let bars = runs
                .iter()
                .map(|(_, t)| t.cell(m, mode).map(|c| (c.score, format!("{:.3}", c.score))))
                .collect();
            groups.push(BarGroup { label: format!("{m} {mode}"), bars });
        }
    }
    let names: Vec<&str> = runs.iter().map(|(n, _)| n.as_str()).collect();
    Some(svg::bars(
        "Machines compared",
        &names,
        &groups,
        "score: time / time alone (log scale; 1.0 = never yields, alone)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Measurement, Params, RunMeta, Sample, Unit};

    fn result(method: &str, mode: &str, score: &str, share: Option<&str>) -> Measurement {
        let params = Params::new().with("method", method).with("mode", mode);
        let mut notes =
            Params::new().with("score", score).with("score_min", "0.9").with("score_max", "2.5");
        if let Some(s) = share {
            notes.set("main_share", s);
        }
        let sample = Sample {
            value: 1e8,
            iters: 1,
            elapsed_ns: 1e8 as u64,
            other_cpu_ns: None,
            migrated: false,
        };
        let samples = vec![sample; 5];
        let mut m = Measurement::of_samples(PROBE, params, Unit::Nanos, samples, 1.0);
        m.notes = notes;
        m
    }

    fn run(results: Vec<Measurement>) -> Run {
        let meta = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "abc"));
        Run { meta, results, warnings: Vec::new() }
    }

    #[test]
    fn cells_land_under_their_method_and_mode() {
        let r = run(vec![
            result("coop-never", "fg", "1.010", None),
            result("coop-never", "worst", "1.020", Some("0.000")),
            result("preempt-10ms", "fg", "1.050", None),
            result("preempt-10ms", "worst", "2.010", Some("0.497")),
        ]);
        let t = analyse(&r).unwrap();
        assert_eq!(t.methods, ["coop-never", "preempt-10ms"]);
        assert_eq!(t.cell("preempt-10ms", "worst").unwrap().score, 2.01);
        assert_eq!(t.cell("preempt-10ms", "worst").unwrap().main_share, Some(0.497));
        assert!(t.cell("coop-never", "bg").is_none());
        let text = table(&t).to_terminal();
        assert!(text.contains("2.010 (0.90–2.50)"), "{text}");
        assert!(text.contains("50%"), "{text}");
        let charts = charts("host", &t);
        assert_eq!(charts.len(), 2);
        assert!(charts.iter().all(|(_, svg)| svg.starts_with("<svg")));
    }

    #[test]
    fn a_run_without_the_probe_has_no_table() {
        assert!(analyse(&run(Vec::new())).is_none());
        assert!(text(&run(Vec::new())).is_none());
    }

    #[test]
    fn machines_are_compared_only_with_two_runs() {
        let t = analyse(&run(vec![result("os", "fg", "1.000", None)])).unwrap();
        assert!(machines_chart(&[("a".into(), t.clone())]).is_none());
        let svg = machines_chart(&[("a".into(), t.clone()), ("b".into(), t)]).unwrap();
        assert!(svg.contains("Machines compared"));
    }
}
