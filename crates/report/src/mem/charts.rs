//! The lab's findings as SVG line charts.

use super::analysis::*;
use crate::svg::{Axis, Chart, Marker, Series, Ticks};

/// The routines drawn aligned against misaligned, as the seed drew AppleWord against
/// AppleWord+1 and Metrowerks against Metrowerks+.
pub const ALIGN_CHART: &[&str] = &["word16", "u32x8", "u64x8", "memset", "rep_stosb", "avx512"];

/// The offset drawn as "misaligned" (the seed's "+1").
pub const MISALIGNED: u64 = 1;

/// The SVG charts of an analysis, as (file name, chart). `subtitle` names the run and
/// machine. Charts without data are left out.
pub fn charts(a: &Analysis, subtitle: &str) -> Vec<(String, Chart)> {
    let names = routines(&a.points);
    let kind = |r: &str| a.points.iter().find(|p| p.routine == r).map(|p| p.kind);
    let clearing: Vec<&String> =
        names.iter().filter(|n| kind(n).is_some_and(Kind::clears)).collect();
    let allocs: Vec<&String> = names.iter().filter(|n| kind(n) == Some(Kind::Alloc)).collect();
    // A routine keeps its colour from chart to chart; allocations, drawn on their own chart,
    // start the palette again so that no two lines there share a hue family.
    let color_of = |r: &str| {
        clearing
            .iter()
            .position(|n| *n == r)
            .or_else(|| allocs.iter().position(|n| *n == r))
            .unwrap_or(0)
    };
    let y_time = |log: bool| Axis {
        label: "time for 1000 calls (1 µs here = 1 ns per call)".into(),
        log,
        ticks: Ticks::Micros,
    };
    let series = |r: &str,
                  align: u64,
                  keep: &dyn Fn(u64) -> bool,
                  dashed: bool,
                  value: &dyn Fn(&Point) -> f64| Series {
        name: if align == 0 { r.to_string() } else { format!("{r}+{align}") },
        points: curve(&a.points, r, align)
            .into_iter()
            .filter(|p| keep(p.size))
            .map(|p| (p.size as f64, value(p)))
            .collect(),
        dashed,
        color: color_of(r),
        band: Vec::new(),
    };
    let time = |p: &Point| p.ns;
    let markers: Vec<Marker> =
        a.caches.iter().map(|c| Marker { x: c.bytes as f64, label: c.name.clone() }).collect();
    let small = |s: u64| s <= 128;
    let large = |s: u64| s >= 128;
    let all = |_: u64| true;
    let bytes_axis =
        |log: bool| Axis { label: "bytes cleared per call".into(), log, ticks: Ticks::Bytes };

    let mut out = Vec::new();
    let mut push =
        |file: &str, title: &str, x: Axis, y: Axis, series: Vec<Series>, markers: Vec<Marker>| {
            let series: Vec<Series> = series.into_iter().filter(|s| !s.points.is_empty()).collect();
            if !series.is_empty() {
                out.push((
                    file.to_string(),
                    Chart { title: title.into(), subtitle: subtitle.into(), x, y, series, markers },
                ));
            }
        };
    push(
        "clear-small.svg",
        "Clearing 1 to 128 bytes: time for 1000 calls (aligned; lower is better)",
        bytes_axis(false),
        y_time(false),
        clearing.iter().map(|r| series(r, 0, &small, false, &time)).collect(),
        vec![],
    );
    push(
        "clear-large.svg",
        "Clearing at scale, 128 B to 64 MiB: time for 1000 calls (aligned, log-log)",
        bytes_axis(true),
        y_time(true),
        clearing.iter().map(|r| series(r, 0, &large, false, &time)).collect(),
        markers.clone(),
    );
    push(
        "clear-bandwidth.svg",
        "Clearing bandwidth in GB/s (aligned; higher is better)",
        bytes_axis(true),
        Axis { label: "GB/s (bytes per ns)".into(), log: false, ticks: Ticks::Number },
        clearing.iter().map(|r| series(r, 0, &all, false, &Point::gbps)).collect(),
        markers.clone(),
    );
    let twins = |keep: &dyn Fn(u64) -> bool| -> Vec<Series> {
        ALIGN_CHART
            .iter()
            .filter(|r| names.iter().any(|n| n == *r))
            .flat_map(|r| {
                [series(r, 0, keep, false, &time), series(r, MISALIGNED, keep, true, &time)]
            })
            .collect()
    };
    push(
        "clear-align-small.svg",
        "Aligned (solid) against misaligned by +1 (dashed), 1 to 128 bytes",
        bytes_axis(false),
        y_time(false),
        twins(&small),
        vec![],
    );
    push(
        "clear-align-large.svg",
        "Aligned (solid) against misaligned by +1 (dashed), 128 B to 64 MiB (log-log)",
        bytes_axis(true),
        y_time(true),
        twins(&large),
        markers,
    );
    let mut alloc_series: Vec<Series> =
        allocs.iter().map(|r| series(r, 0, &all, false, &time)).collect();
    if !alloc_series.is_empty() && names.iter().any(|n| n == "memset") {
        let mut m = series("memset", 0, &all, true, &time);
        m.name = "memset (clear only)".into();
        alloc_series.push(m);
    }
    push(
        "alloc.svg",
        "Getting zeroed memory: allocate, touch every page, free (log-log)",
        Axis { label: "bytes per allocation".into(), log: true, ticks: Ticks::Bytes },
        y_time(true),
        alloc_series,
        vec![],
    );
    out
}
