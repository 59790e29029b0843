//! `schedlab history`: one result's median and interval over time, one series per machine
//! and parameter set, with its change points and what differed between the runs on either
//! side of each — as a terminal table and as an HTML page with a chart per parameter set.
//!
//! The series, their points and their change points are given (the binary reads the store
//! and runs `schedlab_measure::changepoint`); this file only lays them out, and says what
//! differs between two runs' metadata ([`differences`]).

use schedlab_measure::model::{Better, RunMeta, Unit};
use schedlab_measure::text::escape;

use crate::svg::{self, Axis, Chart, Marker, Ticks};
use crate::table::{Align, Table};
use crate::units::{human, percent};

/// One run's result in a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The run's id.
    pub run_id: i64,
    /// The run's label.
    pub label: Option<String>,
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// The kernel release.
    pub kernel: String,
    /// schedlab's version.
    pub version: String,
    /// The median.
    pub median: f64,
    /// The lower end of its 95% interval.
    pub ci_low: f64,
    /// The upper end.
    pub ci_high: f64,
}

/// A change point of a series, with what differed around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The index of the first point of the new level.
    pub index: usize,
    /// The permutation test's p-value.
    pub p_value: f64,
    /// The median of the points before.
    pub before: f64,
    /// The median of the points from it on.
    pub after: f64,
    /// What differed between the last run before it and the first run at it, one phrase
    /// each ([`differences`]).
    pub differences: Vec<String>,
}

/// One machine's history of one parameter set.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The host name.
    pub host: String,
    /// The machine's fingerprint id.
    pub machine_id: String,
    /// The parameters' key (`placement=same`; empty for none).
    pub params: String,
    /// The unit.
    pub unit: Unit,
    /// Which way is better.
    pub better: Better,
    /// The runs' results, oldest first.
    pub points: Vec<Point>,
    /// Its change points, in order.
    pub changes: Vec<Change>,
}

impl Change {
    /// `×1.52 worse` or `×0.80 better`, for a unit whose better direction is `better`.
    pub fn verdict(&self, better: Better) -> String {
        let ratio = if self.before == 0.0 { f64::NAN } else { self.after / self.before };
        let worse = match better {
            Better::Lower => self.after > self.before,
            Better::Higher => self.after < self.before,
        };
        format!("×{ratio:.2} {}", if worse { "worse" } else { "better" })
    }
}

/// What differs between two runs' metadata, `a` before and `b` after, one phrase each
/// with the new value first (`kernel 6.18.1, not 6.1.0`): the suite, OS and kernel (release
/// and build), schedlab's version and git revision, the sampling settings, the machine's
/// governor, clock source, SMT, CPU count and memory, and each doctor finding that changed.
pub fn differences(a: &RunMeta, b: &RunMeta) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: &str, old: String, new: String| {
        if old != new {
            out.push(format!("{what} {new}, not {old}"));
        }
    };
    let (ma, mb) = (&a.machine, &b.machine);
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    differ("suite", a.suite.clone(), b.suite.clone());
    differ("kernel", ma.kernel.clone(), mb.kernel.clone());
    differ("kernel build", ma.kernel_version.clone(), mb.kernel_version.clone());
    differ("OS", ma.os.clone(), mb.os.clone());
    differ("schedlab", a.version.clone(), b.version.clone());
    differ("schedlab git revision", a.git_rev.clone(), b.git_rev.clone());
    differ("settings", a.settings.key(), b.settings.key());
    differ("governor", opt(&ma.governor), opt(&mb.governor));
    differ("clocksource", opt(&ma.clocksource), opt(&mb.clocksource));
    let smt = |s: Option<bool>| match s {
        Some(true) => "on".to_string(),
        Some(false) => "off".to_string(),
        None => "unknown".to_string(),
    };
    differ("SMT", smt(ma.smt), smt(mb.smt));
    differ("usable CPUs", ma.usable_cpus.to_string(), mb.usable_cpus.to_string());
    differ(
        "memory",
        ma.memory_bytes.map_or("unknown".into(), |m| format!("{m} B")),
        mb.memory_bytes.map_or("unknown".into(), |m| format!("{m} B")),
    );
    if !ma.doctor.is_empty() && !mb.doctor.is_empty() {
        for (name, old, new) in schedlab_measure::doctor::differences(&ma.doctor, &mb.doctor) {
            out.push(format!("{name} {new}, not {old}"));
        }
    }
    out.into_iter().map(|l| escape(&l).into_owned()).collect()
}

/// How a series is named: `host (machine 1a2b3c4d), placement=same`.
fn series_name(s: &Series) -> String {
    let id: String = s.machine_id.chars().take(8).collect();
    let params = if s.params.is_empty() { String::new() } else { format!(", {}", s.params) };
    escape(&format!("{} (machine {id}){params}", s.host)).into_owned()
}

/// The run a point came from, for a line of text: `#5 "nightly" 2026-11-20T03:00:00Z`.
fn run_name(p: &Point) -> String {
    let label = p.label.as_ref().map_or(String::new(), |l| format!(" \"{l}\""));
    escape(&format!("#{}{label} {}", p.run_id, p.started_at)).into_owned()
}

/// The lines of one change point: where, how much, how sure, and what differed.
fn change_lines(s: &Series, c: &Change) -> Vec<String> {
    let (before, at) = (&s.points[c.index - 1], &s.points[c.index]);
    let mut lines = vec![format!(
        "change point at run {}: {} ({} → {}, p = {:.3}), after run {}",
        run_name(at),
        c.verdict(s.better),
        human(c.before, s.unit),
        human(c.after, s.unit),
        c.p_value,
        run_name(before)
    )];
    if c.differences.is_empty() {
        lines.push("  nothing recorded about the runs differs (the machine, its load or the code measured changed)".into());
    } else {
        lines.extend(c.differences.iter().map(|d| format!("  {d}")));
    }
    lines
}

/// `schedlab history` for a terminal: per series a heading, a table of its runs (median
/// ± half its interval, the change points marked where they start) and the change points
/// with what differed.
pub fn text(probe: &str, series: &[Series]) -> String {
    let mut out = String::new();
    for s in series {
        out.push_str(&format!(
            "{} — {}: {} run{}, {}, {} is better\n",
            escape(probe),
            series_name(s),
            s.points.len(),
            if s.points.len() == 1 { "" } else { "s" },
            s.unit.symbol(),
            s.better.key()
        ));
        let mut t = Table::new(&[
            ("run", Align::Right),
            ("started", Align::Left),
            ("label", Align::Left),
            ("kernel", Align::Left),
            ("schedlab", Align::Left),
            ("median", Align::Right),
            ("95% CI", Align::Right),
            ("change", Align::Left),
        ]);
        for (i, p) in s.points.iter().enumerate() {
            let change = s
                .changes
                .iter()
                .find(|c| c.index == i)
                .map_or(String::new(), |c| format!("◆ {}", c.verdict(s.better)));
            let half =
                if p.median == 0.0 { 0.0 } else { (p.ci_high - p.ci_low) / 2.0 / p.median.abs() };
            t.row(vec![
                format!("#{}", p.run_id),
                p.started_at.clone(),
                p.label.clone().unwrap_or_default(),
                p.kernel.clone(),
                p.version.clone(),
                human(p.median, s.unit),
                percent(half),
                change,
            ]);
        }
        out.push_str(&t.to_terminal());
        if s.changes.is_empty() {
            out.push_str("no change point (E-Divisive means, α = 0.05, 5% floor)\n");
        }
        for c in &s.changes {
            for line in change_lines(s, c) {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out.push('\n');
    }
    out
}

/// Days since the epoch of an RFC 3339 time, for the chart's x axis.
fn day_of(started_at: &str) -> Option<f64> {
    schedlab_measure::machine::parse_rfc3339(started_at).map(|s| s as f64 / 86_400.0)
}

/// The chart of one parameter set: a line per machine through its medians, its 95%
/// intervals as a band, and a dashed vertical marker at each change point.
pub fn chart(probe: &str, params: &str, series: &[&Series]) -> String {
    let unit = series.first().map_or(Unit::Nanos, |s| s.unit);
    let better = series.first().map_or(Better::Lower, |s| s.better);
    let mut markers = Vec::new();
    let lines = series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            for c in &s.changes {
                if let Some(x) = day_of(&s.points[c.index].started_at) {
                    markers.push(Marker { x, label: format!("{} {}", s.host, c.verdict(better)) });
                }
            }
            let pts: Vec<(f64, &Point)> =
                s.points.iter().filter_map(|p| Some((day_of(&p.started_at)?, p))).collect();
            svg::Series {
                name: format!("{} {}", s.host, s.machine_id.chars().take(8).collect::<String>()),
                points: pts.iter().map(|(x, p)| (*x, p.median)).collect(),
                dashed: false,
                color: i,
                band: pts.iter().map(|(x, p)| (*x, p.ci_low, p.ci_high)).collect(),
            }
        })
        .collect();
    Chart {
        title: format!("{probe} {params}"),
        subtitle: format!(
            "median and its 95% interval per run; {} is better; dashed lines: change points",
            better.key()
        ),
        x: Axis { label: "run started (UTC)".into(), log: false, ticks: Ticks::Date },
        y: Axis { label: unit.symbol().into(), log: false, ticks: Ticks::Number },
        series: lines,
        markers,
    }
    .to_svg()
}

/// The HTML page of a history: per parameter set its chart, then each series' table and
/// change points (the terminal's text, as preformatted text), in the report's page.
pub fn page(probe: &str, series: &[Series], version: &str) -> String {
    let mut params: Vec<&str> = Vec::new();
    for s in series {
        if !params.contains(&s.params.as_str()) {
            params.push(&s.params);
        }
    }
    let mut body = String::new();
    let mut nav = Vec::new();
    for (i, p) in params.iter().enumerate() {
        let of: Vec<&Series> = series.iter().filter(|s| s.params == *p).collect();
        let owned: Vec<Series> = of.iter().map(|s| (*s).clone()).collect();
        let inner = format!(
            "<figure>{}<figcaption>{} {}</figcaption></figure>\n<pre>{}</pre>\n",
            chart(probe, p, &of),
            svg::escape(probe),
            svg::escape(p),
            svg::escape(&text(probe, &owned))
        );
        let heading = if p.is_empty() { probe.to_string() } else { format!("{probe} {p}") };
        crate::html::section(&mut body, &mut nav, &format!("history-{i}"), &heading, &inner);
    }
    crate::html::wrap(&format!("schedlab history of {probe}"), &nav, &body, version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;

    fn point(id: i64, day: u32, median: f64) -> Point {
        Point {
            run_id: id,
            label: None,
            started_at: format!("2026-11-{day:02}T03:00:00Z"),
            kernel: "6.1".into(),
            version: "0.1.0".into(),
            median,
            ci_low: median * 0.98,
            ci_high: median * 1.02,
        }
    }

    fn series() -> Series {
        let points: Vec<Point> =
            (0..8).map(|i| point(i + 1, i as u32 + 1, if i < 4 { 10.0 } else { 15.0 })).collect();
        Series {
            host: "alpha".into(),
            machine_id: "0123456789abcdef".into(),
            params: "placement=same".into(),
            unit: Unit::Micros,
            better: Better::Lower,
            points,
            changes: vec![Change {
                index: 4,
                p_value: 0.005,
                before: 10.0,
                after: 15.0,
                differences: vec!["kernel 6.18, not 6.1".into()],
            }],
        }
    }

    #[test]
    fn the_text_marks_the_change_and_says_what_differed() {
        let t = text("os.pipe.latency", &[series()]);
        assert!(t.contains("alpha (machine 01234567), placement=same: 8 runs"), "{t}");
        let marked = t.lines().find(|l| l.contains('◆')).unwrap();
        assert!(marked.contains("#5") && marked.contains("×1.50 worse"), "{t}");
        assert!(t.contains("change point at run #5 2026-11-05T03:00:00Z: ×1.50 worse"), "{t}");
        assert!(t.contains("after run #4 2026-11-04T03:00:00Z"), "{t}");
        assert!(t.contains("  kernel 6.18, not 6.1"), "{t}");
    }

    #[test]
    fn higher_is_better_turns_the_verdict() {
        let c = Change { index: 1, p_value: 0.01, before: 10.0, after: 15.0, differences: vec![] };
        assert_eq!(c.verdict(Better::Higher), "×1.50 better");
        assert_eq!(c.verdict(Better::Lower), "×1.50 worse");
    }

    #[test]
    fn the_page_has_a_chart_with_a_band_and_a_marker_per_change() {
        let html = page("os.pipe.latency", &[series()], "0.1.0");
        assert_eq!(html.matches("<path class=\"series\"").count(), 1, "one machine, one line");
        assert_eq!(html.matches("<path class=\"band\"").count(), 1);
        assert!(html.contains("stroke-dasharray=\"2 3\""), "the change point's marker");
        assert!(html.contains("2026-11-0"), "date ticks");
        assert!(html.contains("kernel 6.18, not 6.1"));
        crate::svg::tests::well_formed(&chart("p", "", &[&series()])).unwrap();
    }

    #[test]
    fn differences_name_kernel_settings_version_and_findings() {
        let mut a = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "aaa"));
        let mut b = a.clone();
        assert!(differences(&a, &b).is_empty());
        b.machine.kernel = "6.18.0".into();
        a.machine.kernel = "6.1.0".into();
        b.version = "0.2.0".into();
        b.settings.set("samples", 30);
        let d = differences(&a, &b);
        assert!(d.contains(&"kernel 6.18.0, not 6.1.0".to_string()), "{d:?}");
        assert!(d.contains(&"schedlab 0.2.0, not 0.1.0".to_string()), "{d:?}");
        assert!(d.iter().any(|x| x.starts_with("settings samples=30")), "{d:?}");
    }
}
