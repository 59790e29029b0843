//! The lab's findings as tables for the terminal and Markdown.

use std::collections::BTreeSet;

use super::analysis::*;
use crate::svg::bytes_label;
use crate::table::{Align, Table};
use crate::units::sig4;

/// A titled table with notes under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// The table.
    pub table: Table,
    /// Lines printed under the table (how to read it, verdicts).
    pub notes: Vec<String>,
}

fn size_label(s: u64) -> String {
    bytes_label(s as f64)
}

fn ratio(x: f64) -> String {
    format!("×{x:.2}")
}

/// The analysis as tables, in reading order: crossovers, best per range, memset fraction and
/// the goal, bandwidth per level, the loops' time per byte, misalignment, and the raw
/// matrix of times per call.
pub fn sections(a: &Analysis) -> Vec<Section> {
    let mut out = Vec::new();

    let mut t =
        Table::new(&[("pair", Align::Left), ("crossover", Align::Right), ("reading", Align::Left)]);
    for (x, y, c) in &a.crossovers {
        let noise = |ties: usize| {
            if ties > 0 {
                format!("; within noise at {ties} size{}", if ties == 1 { "" } else { "s" })
            } else {
                String::new()
            }
        };
        let (cell, reading) = match c {
            Crossover::NoData => continue,
            Crossover::Tied { sizes, ties } => (
                "tied".to_string(),
                format!("within noise of each other at {ties} of {sizes} sizes"),
            ),
            Crossover::Always { faster, sizes, ties } => (
                "none".to_string(),
                format!("{faster} faster at all {sizes} sizes measured{}", noise(*ties)),
            ),
            Crossover::Cross { small, large, at, before, flips, ties } => (
                size_label(*at),
                format!(
                    "{small} beats {large} below {} (crossover in {}–{}){}{}",
                    size_label(*at),
                    size_label(*before),
                    size_label(*at),
                    if *flips > 0 {
                        format!("; lead changed {flips}× below it")
                    } else {
                        String::new()
                    },
                    noise(*ties)
                ),
            ),
        };
        t.row(vec![format!("{x} vs {y}"), cell, reading]);
    }
    out.push(Section {
        title: "Crossover points (aligned buffers)".into(),
        table: t,
        notes: vec!["medians compared size by size, sizes where the 95% intervals overlap left out; the crossover is the first size from which the large-size winner always wins".into()],
    });

    for (title, ranges) in [
        ("Best clearing routine per size range (aligned)", &a.best),
        ("Best allocation of zeroed memory per size range", &a.best_alloc),
    ] {
        if ranges.is_empty() {
            continue;
        }
        let mut t = Table::new(&[
            ("sizes", Align::Left),
            ("best", Align::Left),
            ("within noise of it", Align::Left),
        ]);
        for r in ranges {
            let span = if r.from == r.to {
                size_label(r.from)
            } else {
                format!("{} – {}", size_label(r.from), size_label(r.to))
            };
            t.row(vec![span, r.routine.clone(), r.tied.join(", ")]);
        }
        out.push(Section {
            title: title.into(),
            table: t,
            notes: vec!["a range continues while its leader is best or its 95% interval overlaps the best's".into()],
        });
    }

    if !a.fractions.is_empty() {
        let mut t = Table::new(&[
            ("size", Align::Right),
            ("our best", Align::Left),
            ("ns/call", Align::Right),
            ("memset ns/call", Align::Right),
            ("of memset", Align::Right),
            ("", Align::Left),
        ]);
        for f in a.fractions.iter().filter(|f| f.size.is_power_of_two()) {
            t.row(vec![
                size_label(f.size),
                f.best.clone(),
                sig4(f.best_ns),
                sig4(f.memset_ns),
                format!("{:.0}%", f.fraction * 100.0),
                if f.within_noise { "within noise".into() } else { String::new() },
            ]);
        }
        let g = &a.goal;
        let verdict = match &g.worst {
            None => format!(
                "goal (≥ {:.0}% of memset from {}): no sizes measured",
                g.target * 100.0,
                size_label(g.from)
            ),
            Some(w) => format!(
                "goal (≥ {:.0}% of memset from {}): {} — worst {:.1}% at {} ({}), over {} sizes",
                g.target * 100.0,
                size_label(g.from),
                if g.met() {
                    "met"
                } else if g.met_within_noise() {
                    "met within noise (every size below it overlaps memset's interval)"
                } else {
                    "MISSED"
                },
                w.fraction * 100.0,
                size_label(w.size),
                w.best,
                g.checked
            ),
        };
        out.push(Section {
            title: "Our best routine as a fraction of libc memset (aligned, power-of-two sizes)"
                .into(),
            table: t,
            notes: vec![
                "speed fraction = memset's time / ours; above 100% is faster than memset".into(),
                verdict,
            ],
        });
    }

    if !a.bandwidth.rows.is_empty() {
        let mut cols: Vec<(String, Align)> = vec![("routine".into(), Align::Left)];
        for (i, l) in a.bandwidth.levels.iter().enumerate() {
            let span = match (i.checked_sub(1).and_then(|j| a.caches.get(j)), a.caches.get(i)) {
                (_, Some(c)) => format!("{l} ≤{}", size_label(c.bytes)),
                (Some(p), None) => format!("{l} >{}", size_label(p.bytes)),
                (None, None) => l.clone(),
            };
            cols.push((span, Align::Right));
        }
        let cols: Vec<(&str, Align)> = cols.iter().map(|(s, a)| (s.as_str(), *a)).collect();
        let mut t = Table::new(&cols);
        for r in &a.bandwidth.rows {
            let mut row = vec![r.routine.clone()];
            for p in &r.peaks {
                row.push(
                    p.map_or("—".into(), |p| format!("{} @{}", sig4(p.gbps), size_label(p.size))),
                );
            }
            t.row(row);
        }
        out.push(Section {
            title: "Bandwidth in GB/s per level (peak over the sizes that fit it, aligned)".into(),
            table: t,
            notes: vec![format!(
                "levels from the run's notes: {}",
                if a.caches.is_empty() {
                    "none recorded".to_string()
                } else {
                    a.caches
                        .iter()
                        .map(|c| format!("{} {}", c.name, size_label(c.bytes)))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )],
        });
    }

    if !a.slopes.is_empty() {
        let mut t = Table::new(&[
            ("routine", Align::Left),
            ("ns/byte", Align::Right),
            ("bytes/ns", Align::Right),
            ("fixed ns", Align::Right),
            ("r²", Align::Right),
            ("× memset per byte", Align::Right),
            ("verdict", Align::Left),
        ]);
        for s in &a.slopes {
            t.row(vec![
                s.routine.clone(),
                format!("{:.4}", s.ns_per_byte),
                sig4(1.0 / s.ns_per_byte.max(1e-12)),
                format!("{:.1}", s.fixed_ns),
                format!("{:.4}", s.r2),
                s.vs_memset.map_or("—".into(), ratio),
                match s.honest() {
                    Some(true) => "a real loop, not a memset call".into(),
                    Some(false) => "SUSPECT: as fast per byte as memset".into(),
                    None => String::new(),
                },
            ]);
        }
        let span = a
            .slopes
            .first()
            .map(|s| format!("{} to {}", size_label(s.from), size_label(s.to)))
            .unwrap_or_default();
        out.push(Section {
            title: format!("Time per byte, fitted over {span} (in L1; aligned)"),
            table: t,
            notes: vec!["a loop compiled into a memset call would clear each extra byte as fast as memset; time growing linearly at ≥ 2× memset's rate shows the loop is real".into()],
        });
    }

    if !a.align_costs.is_empty() {
        let aligns: BTreeSet<u64> = a.align_costs.iter().map(|c| c.align).collect();
        let mut cols: Vec<String> = vec!["routine".into()];
        cols.extend(aligns.iter().map(|x| format!("+{x}: ≤128 B / larger")));
        let cols: Vec<(&str, Align)> = cols
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), if i == 0 { Align::Left } else { Align::Right }))
            .collect();
        let mut t = Table::new(&cols);
        for r in routines(&a.points) {
            let mut row = vec![r.clone()];
            let mut any = false;
            for al in &aligns {
                row.push(match a.align_costs.iter().find(|c| c.routine == r && c.align == *al) {
                    Some(c) => {
                        any = true;
                        format!(
                            "{} / {}",
                            c.small.map_or("—".into(), ratio),
                            c.large.map_or("—".into(), ratio)
                        )
                    }
                    None => "—".into(),
                });
            }
            if any {
                t.row(row);
            }
        }
        out.push(Section {
            title: "Misalignment: time at offset +N over time at offset 0 (median over sizes)".into(),
            table: t,
            notes: vec!["seed 004 found Metrowerks' memset up to 50% slower when misaligned on a 68030, and Apple's word loop crashing on a 68000".into()],
        });
    }

    out.push(matrix(a, 0));
    out
}

/// Time per call of every routine at every size for one offset: the data behind the charts.
pub fn matrix(a: &Analysis, align: u64) -> Section {
    let names = routines(&a.points);
    let mut cols: Vec<(&str, Align)> = vec![("size", Align::Right)];
    cols.extend(names.iter().map(|n| (n.as_str(), Align::Right)));
    let mut t = Table::new(&cols);
    let sizes: BTreeSet<u64> =
        a.points.iter().filter(|p| p.align == align).map(|p| p.size).collect();
    for s in sizes {
        let mut row = vec![size_label(s)];
        for n in &names {
            row.push(
                a.points
                    .iter()
                    .find(|p| p.routine == *n && p.size == s && p.align == align)
                    .map_or(String::new(), |p| sig4(p.ns)),
            );
        }
        t.row(row);
    }
    Section {
        title: format!("Time per call in ns (= µs for the seed's 1000 calls), offset {align}"),
        table: t,
        notes: vec![],
    }
}
