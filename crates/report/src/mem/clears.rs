//! Where real programs clear memory (`mem.clears`, seed 004, issue 26), beside the lab's
//! crossover points from the same run.
//!
//! A `mem.clears` result's notes hold, per kind of call, a size histogram
//! (`hist_KIND=LOW:CALLS:BYTES;...`, LOW the size class's lower bound) and the process
//! tree's minor faults. Clearing calls are `memset` with a zero value, `calloc`, `bzero` and
//! `explicit_bzero` (`memset_nonzero` is filling, shown apart). For each program this
//! module gives the calls and bytes, the share of calls and bytes below each threshold the
//! lab found (the crossovers where a wide routine starts to beat a simple loop, and the
//! hybrid's), and an estimate of where the clearing *time* goes: each class's calls times
//! memset's measured time per call at the nearest size in the same run, and each fresh page
//! as memset's time for 4 KiB (the kernel clears it with one such store loop; the fault's
//! own cost is left out). Pure.

use schedlab_measure::model::{Measurement, Outcome};

use super::analysis::{Analysis, Crossover, Point};
use super::sections::Section;
use crate::svg::bytes_label;
use crate::table::{Align, Table};

/// The probe.
pub const CLEARS: &str = "mem.clears";

/// The kinds that clear (zero) memory.
pub const CLEARING: [&str; 4] = ["memset", "calloc", "bzero", "explicit_bzero"];

/// One program's histogram: (size class lower bound, calls, bytes), clearing kinds merged,
/// and its fresh pages.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// The program (the `program` parameter).
    pub name: String,
    /// (lower bound, calls, bytes) per size class, ascending.
    pub classes: Vec<(u64, u64, u64)>,
    /// Minor faults of the program's processes.
    pub pages: u64,
    /// Processes that reported.
    pub processes: u64,
}

impl Program {
    /// All clearing calls.
    pub fn calls(&self) -> u64 {
        self.classes.iter().map(|c| c.1).sum()
    }

    /// All bytes the calls cleared.
    pub fn bytes(&self) -> u64 {
        self.classes.iter().map(|c| c.2).sum()
    }

    /// Share of calls and of bytes in classes whose lower bound is below `n`. A class that
    /// straddles `n` counts as below when its lower bound is: the classes are exact below
    /// 64 B and 1/8 octave wide above, so the share is resolved to 12.5% in size.
    pub fn share_below(&self, n: u64) -> (f64, f64) {
        let (c, b) = self
            .classes
            .iter()
            .filter(|k| k.0 < n)
            .fold((0u64, 0u64), |acc, k| (acc.0 + k.1, acc.1 + k.2));
        (ratio(c, self.calls()), ratio(b, self.bytes()))
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Parses one `hist_*` note value. Malformed cells are skipped.
fn parse_hist(v: &str) -> Vec<(u64, u64, u64)> {
    v.split(';')
        .filter_map(|cell| {
            let mut f = cell.split(':').map(|x| x.parse::<u64>().ok());
            Some((f.next()??, f.next()??, f.next()??))
        })
        .collect()
}

/// The programs of the `mem.clears` results among `results`.
pub fn programs(results: &[Measurement]) -> Vec<Program> {
    results
        .iter()
        .filter(|m| m.probe == CLEARS && m.outcome == Outcome::Ok)
        .map(|m| {
            let mut classes: Vec<(u64, u64, u64)> = Vec::new();
            for kind in CLEARING {
                if let Some(v) = m.notes.get(&format!("hist_{kind}")) {
                    for (low, c, b) in parse_hist(v) {
                        match classes.iter_mut().find(|k| k.0 == low) {
                            Some(k) => {
                                k.1 += c;
                                k.2 += b;
                            }
                            None => classes.push((low, c, b)),
                        }
                    }
                }
            }
            classes.sort_unstable();
            let num = |k: &str| m.notes.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
            Program {
                name: m.params.get("program").unwrap_or("?").to_string(),
                classes,
                pages: num("minflt"),
                processes: num("processes"),
            }
        })
        .collect()
}

/// The thresholds to read the histograms against: the crossovers of this run where a wide
/// routine (libc memset, AVX) starts to beat a loop, and the hybrid's threshold. (label, N).
pub fn thresholds(a: &Analysis, hybrid_below: u64) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (x, y, c) in &a.crossovers {
        if let Crossover::Cross { small, large, at, .. } = c {
            let loops = ["byte_count", "byte_end", "word16", "u32x8", "u64x8"];
            if loops.contains(&x.as_str()) && !loops.contains(&y.as_str()) {
                out.push((format!("{small} vs {large}"), *at));
            }
        }
    }
    out.push(("hybrid's switch".to_string(), hybrid_below));
    out
}

/// memset's median time per call at the measured size nearest to `size` (offset 0), ns.
fn memset_ns(points: &[Point], size: u64) -> Option<f64> {
    points
        .iter()
        .filter(|p| p.routine == "memset" && p.align == 0)
        .min_by_key(|p| (p.size as i64 - size.max(1) as i64).unsigned_abs())
        // Past the nearest measured size, linear in size (the curves are, there).
        .map(|p| if size > p.size { p.ns * size as f64 / p.size as f64 } else { p.ns })
}

/// Estimated clearing time of `p`, ns: (calls, fresh pages, share of the calls' time below
/// `n`); `None` without memset points.
pub fn time_split(p: &Program, points: &[Point], n: u64) -> Option<(f64, f64, f64)> {
    let mut calls = 0.0;
    let mut below = 0.0;
    for &(low, c, b) in &p.classes {
        let size = b.checked_div(c).unwrap_or(low);
        let t = memset_ns(points, size)? * c as f64;
        calls += t;
        if low < n {
            below += t;
        }
    }
    let pages = memset_ns(points, 4096)? * p.pages as f64;
    Some((calls, pages, if calls > 0.0 { below / calls } else { 0.0 }))
}

/// The size bands of the histogram table.
const BANDS: [(u64, u64); 7] =
    [(0, 16), (16, 64), (64, 256), (256, 1024), (1024, 4096), (4096, 65536), (65536, u64::MAX)];

fn band_label(lo: u64, hi: u64) -> String {
    if hi == u64::MAX {
        format!("≥ {}", bytes_label(lo as f64))
    } else {
        format!("{}–{}", bytes_label(lo as f64), bytes_label((hi - 1) as f64))
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The sections for `schedlab mem`: the programs' clears by size band, and their shares
/// below each threshold with the time estimate. Empty without `mem.clears` results.
pub fn clears_sections(
    results: &[Measurement],
    analysis: Option<&Analysis>,
    hybrid_below: u64,
) -> Vec<Section> {
    let progs = programs(results);
    if progs.is_empty() {
        return Vec::new();
    }
    let mut head: Vec<(String, Align)> = vec![("size".into(), Align::Left)];
    for p in &progs {
        head.push((format!("{} calls", p.name), Align::Right));
        head.push((format!("{} bytes", p.name), Align::Right));
    }
    let cols: Vec<(&str, Align)> = head.iter().map(|(s, a)| (s.as_str(), *a)).collect();
    let mut t = Table::new(&cols);
    for (lo, hi) in BANDS {
        let mut row = vec![band_label(lo, hi)];
        for p in &progs {
            let (c, b) = p
                .classes
                .iter()
                .filter(|k| k.0 >= lo && k.0 < hi)
                .fold((0, 0), |acc, k| (acc.0 + k.1, acc.1 + k.2));
            row.push(format!("{c} ({})", pct(ratio(c, p.calls()))));
            row.push(format!("{} ({})", bytes_label(b as f64), pct(ratio(b, p.bytes()))));
        }
        t.row(row);
    }
    let mut row = vec!["fresh pages (kernel)".to_string()];
    for p in &progs {
        row.push(format!("{} pages", p.pages));
        row.push(bytes_label((p.pages * 4096) as f64));
    }
    t.row(row);
    let mut out = vec![Section {
        title: "Where real programs clear (mem.clears): calls and bytes by size".into(),
        table: t,
        notes: vec![
            "calls that reach libc's memset (value 0), calloc, bzero and explicit_bzero, every process of the program summed; compilers inline small constant-size memsets, which no preload sees".into(),
            format!(
                "programs: {}",
                progs.iter().map(|p| format!("{} ({} processes)", p.name, p.processes)).collect::<Vec<_>>().join(", ")
            ),
        ],
    }];
    let Some(a) = analysis else { return out };
    let th = thresholds(a, hybrid_below);
    let mut t = Table::new(&[
        ("program", Align::Left),
        ("below", Align::Left),
        ("N", Align::Right),
        ("calls", Align::Right),
        ("bytes", Align::Right),
        ("clearing time", Align::Right),
    ]);
    let mut notes = Vec::new();
    for p in &progs {
        for (label, n) in &th {
            let (c, b) = p.share_below(*n);
            let time = time_split(p, &a.points, *n).map_or("-".to_string(), |x| pct(x.2));
            t.row(vec![
                p.name.clone(),
                label.clone(),
                bytes_label(*n as f64),
                pct(c),
                pct(b),
                time,
            ]);
        }
        if let Some((calls, pages, _)) = time_split(p, &a.points, 0) {
            notes.push(format!(
                "{}: calls' clearing ≈ {:.1} µs, fresh pages ≈ {:.1} µs (pages' share {})",
                p.name,
                calls / 1e3,
                pages / 1e3,
                pct(pages / (calls + pages).max(1e-9))
            ));
        }
    }
    notes.insert(
        0,
        "share of the clearing calls, bytes and estimated time (calls × memset's time at that size in this run) below each crossover".into(),
    );
    out.push(Section {
        title: "Real programs' clears against this run's crossovers".into(),
        table: t,
        notes,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(classes: &[(u64, u64, u64)]) -> Program {
        Program { name: "p".into(), classes: classes.to_vec(), pages: 0, processes: 1 }
    }

    #[test]
    fn shares_count_classes_below_the_threshold() {
        let p = program(&[(8, 90, 720), (64, 9, 600), (4096, 1, 4096)]);
        let (c, b) = p.share_below(64);
        assert!((c - 0.9).abs() < 1e-12, "{c}");
        assert!((b - 720.0 / 5416.0).abs() < 1e-12, "{b}");
        assert_eq!(p.share_below(0), (0.0, 0.0));
        assert_eq!(p.share_below(u64::MAX), (1.0, 1.0));
        assert_eq!(program(&[]).share_below(64), (0.0, 0.0));
    }

    #[test]
    fn histograms_parse_and_clearing_kinds_merge() {
        use schedlab_measure::model::{Params, Unit};
        let mut m = Measurement::of_samples(
            CLEARS,
            Params::new().with("program", "git"),
            Unit::Micros,
            Vec::new(),
            0.0,
        );
        m.outcome = Outcome::Ok;
        m.notes = Params::new()
            .with("hist_memset", "12:3:36;4096:1:4096")
            .with("hist_calloc", "12:1:12;x:y")
            .with("hist_memset_nonzero", "1:100:100")
            .with("minflt", 7)
            .with("processes", 2);
        let p = &programs(&[m])[0];
        assert_eq!(p.name, "git");
        assert_eq!(p.classes, [(12, 4, 48), (4096, 1, 4096)]);
        assert_eq!((p.pages, p.processes), (7, 2));
    }
}
