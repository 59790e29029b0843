//! The one SVG toolkit of schedlab (escaping, the palette, axis ticks and their labels) and
//! the line charts built on it; the timeline lanes ([`crate::lanes`]) use the same pieces.
//! Written by hand: no plotting dependency, a few hundred bytes of markup per series.
//!
//! The look follows the charts of seed 004 (spreadsheet line charts: one coloured line with
//! point markers per routine, a legend on the right, a title above, smaller is better on
//! the y axis). Axes are linear or logarithmic; byte sizes get `KiB`/`MiB` ticks; vertical
//! markers can show thresholds such as cache sizes. Every data series is exactly one
//! `<path class="series">`, so a test (or a script) can count them.
//!
//! Rendering is a pure function of the [`Chart`] value: same input, same bytes.

use std::fmt::Write as _;

/// How tick labels on an axis are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticks {
    /// Plain numbers (`0.5`, `20`, `1500`, `2e6`).
    Number,
    /// Byte counts (`64 B`, `4 KiB`, `64 MiB`); linear axes step by powers of two.
    Bytes,
    /// Durations given in microseconds (`500 µs`, `2 ms`, `10 s`).
    Micros,
    /// Days since 1970-01-01 (UTC), labelled as dates (`2026-11-20`).
    Date,
}

/// One axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The label under (x) or beside (y) the axis.
    pub label: String,
    /// Logarithmic scale (values must be positive; others are dropped).
    pub log: bool,
    /// How ticks are labelled.
    pub ticks: Ticks,
}

/// One line of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points; drawn in x order.
    pub points: Vec<(f64, f64)>,
    /// Dashed (used for the misaligned twin of a routine).
    pub dashed: bool,
    /// Index into the palette; twins share a colour.
    pub color: usize,
    /// An interval around the line, `(x, low, high)` per point, drawn as a pale band
    /// beneath it (a median's 95% interval); empty for none.
    pub band: Vec<(f64, f64, f64)>,
}

/// A vertical marker line at `x` with a label (a cache size, say).
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Position on the x axis.
    pub x: f64,
    /// Short label drawn at the top of the line.
    pub label: String,
}

/// A line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// A smaller line under the title (machine, run, what is better).
    pub subtitle: String,
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// The lines.
    pub series: Vec<Series>,
    /// Vertical markers.
    pub markers: Vec<Marker>,
}

/// Colours that stay apart from each other on white (Tableau 10 plus six more).
const PALETTE: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#000000", "#a05195", "#665191", "#f95d6a", "#2f4b7c", "#ffa600",
];

/// The palette colour for index `i`.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

const W: f64 = 980.0;
const H: f64 = 600.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 70.0;
const BOTTOM: f64 = 60.0;

/// Where a raw-sample strip plot draws things, in pixels from the left of its 160-pixel
/// width: one dot per sample on a common scale from the smallest to the largest (interval
/// included), the 95% interval's ends and the median. `None` for no finite sample. Pure.
///
/// The report's script (`html/sort.js`) draws the plot from [`strip_code`] of this
/// geometry: the one drawing of it, so a table row carries 14 bytes for 11 samples where
/// the drawn SVG weighed 600 (2.5 KiB for 50 samples).
#[derive(Debug, Clone, PartialEq)]
pub struct StripGeometry {
    /// The samples' dots.
    pub dots: Vec<f64>,
    /// The interval's band, from and to.
    pub ci: (f64, f64),
    /// The median's bar.
    pub median: f64,
}

/// The width and height of a strip plot, and the padding either side of its scale.
pub const STRIP_SIZE: (f64, f64, f64) = (160.0, 18.0, 4.0);

/// [`StripGeometry`] of `samples` with their median and 95% interval.
pub fn strip_geometry(samples: &[f64], median: f64, ci: (f64, f64)) -> Option<StripGeometry> {
    let vals: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if vals.is_empty() {
        return None;
    }
    let (w, _, pad) = STRIP_SIZE;
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min).min(ci.0);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(ci.1);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let x = |v: f64| pad + (v - lo) / span * (w - 2.0 * pad);
    Some(StripGeometry {
        dots: vals.iter().map(|&v| x(v)).collect(),
        ci: (x(ci.0), x(ci.1)),
        median: x(median),
    })
}

/// The characters of [`strip_code`], one per position step across a strip's scale:
/// printable ASCII from `(` on, without `<`, `>` and `\`, so that a code needs no
/// escaping in an HTML attribute or a JavaScript string.
pub const STRIP_CODE_ALPHABET: &str =
    "()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~";

/// A strip plot in one character per mark — the interval's ends, the median, then every
/// sample — each a position on the scale ([`strip_geometry`]) rounded to one of
/// [`STRIP_CODE_ALPHABET`]'s steps (under 2 pixels): what the report's script draws in every
/// results table's row. Empty for no samples. Pure.
pub fn strip_code(samples: &[f64], median: f64, ci: (f64, f64)) -> String {
    let Some(g) = strip_geometry(samples, median, ci) else {
        return String::new();
    };
    let (w, _, pad) = STRIP_SIZE;
    let alphabet = STRIP_CODE_ALPHABET.as_bytes();
    let steps = (alphabet.len() - 1) as f64;
    let code = |x: f64| {
        let i = ((x - pad) / (w - 2.0 * pad) * steps).round().clamp(0.0, steps) as usize;
        alphabet[i] as char
    };
    [g.ci.0, g.ci.1, g.median].into_iter().chain(g.dots).map(code).collect()
}

/// A marker of [`against`]: a value, what it is (its tooltip) and its shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// The value (positive; the scale is logarithmic).
    pub value: f64,
    /// Its accessible text (`seed 002: Linux HP PC 102 ns`).
    pub title: String,
    /// How it is drawn.
    pub shape: MarkShape,
}

/// The shapes of [`against`]'s markers: told apart by form, not colour, so they read in grey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkShape {
    /// A published value of another machine: a thin grey tick.
    Tick,
    /// A previous run: a hollow circle.
    Ring,
}

/// A one-line picture of one value against others, for a table cell: this run's median as
/// a black bar with its 95% interval as a grey band, other machines' values as thin ticks
/// and a previous run as a ring, on a logarithmic scale that spans them all (so a value ten
/// times another is as far as the other is from a tenth). No text inside, so it cannot
/// overlap the cell's neighbours; the numbers are in the row. Empty for a non-positive
/// median. Pure.
pub fn against(median: f64, ci: (f64, f64), marks: &[Mark], title: &str) -> String {
    if !(median > 0.0 && median.is_finite()) {
        return String::new();
    }
    let (w, h, pad) = (150.0, 20.0, 5.0);
    let positive = |v: f64| v > 0.0 && v.is_finite();
    let all = [median, ci.0, ci.1]
        .into_iter()
        .chain(marks.iter().map(|m| m.value))
        .filter(|v| positive(*v));
    let (lo, hi) = all.fold((median, median), |(a, b), v| (a.min(v), b.max(v)));
    // A little room either side, and at least a factor of 1.5 across.
    let (lo, hi) = ((lo / 1.1).min(median / 1.22), (hi * 1.1).max(median * 1.22));
    let x =
        |v: f64| pad + (v.max(lo).min(hi).ln() - lo.ln()) / (hi.ln() - lo.ln()) * (w - 2.0 * pad);
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="against" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img"><title>{}</title><line x1="{pad}" y1="{}" x2="{}" y2="{}" stroke="#bbb"/>"##,
        escape(title),
        h / 2.0,
        w - pad,
        h / 2.0
    );
    if positive(ci.0) && positive(ci.1) {
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="5" width="{:.1}" height="10" fill="#999"/>"##,
            x(ci.0),
            (x(ci.1) - x(ci.0)).max(1.0)
        );
    }
    for m in marks.iter().filter(|m| positive(m.value)) {
        match m.shape {
            MarkShape::Tick => {
                let _ = write!(
                    s,
                    r##"<rect x="{:.1}" y="3" width="1.5" height="14" fill="#666"><title>{}</title></rect>"##,
                    x(m.value) - 0.75,
                    escape(&m.title)
                );
            }
            MarkShape::Ring => {
                let _ = write!(
                    s,
                    r##"<circle cx="{:.1}" cy="{}" r="4.5" fill="none" stroke="#000" stroke-width="1.5"><title>{}</title></circle>"##,
                    x(m.value),
                    h / 2.0,
                    escape(&m.title)
                );
            }
        }
    }
    let _ = write!(
        s,
        r##"<rect x="{:.1}" y="1" width="3" height="18" fill="#000"/></svg>"##,
        x(median) - 1.5
    );
    s
}

/// The stroke pattern of line series `i`: a dashed series keeps its long dashes; the others
/// cycle through patterns so that lines stay apart when printed in grey (the colours then
/// look alike). The first series is solid.
fn dash(i: usize, dashed: bool) -> &'static str {
    const PATTERNS: [&str; 6] = [
        "",
        r#" stroke-dasharray="1 3""#,
        r#" stroke-dasharray="8 2 2 2""#,
        r#" stroke-dasharray="3 2""#,
        r#" stroke-dasharray="12 3""#,
        r#" stroke-dasharray="2 2 2 6""#,
    ];
    if dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        PATTERNS[i % PATTERNS.len()]
    }
}

/// Escapes text for SVG content and attribute values.
pub fn escape(s: &str) -> String {
    // Control characters are not allowed in XML at all (a stored label with an ESC would
    // make the SVG unreadable) and invisible or bidirectional ones mislead: shown escaped.
    schedlab_measure::text::escape_prose(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A byte count for a tick or a table: `512 B`, `4 KiB`, `1.5 MiB`. Pure.
pub fn bytes_label(v: f64) -> String {
    let units = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, size) in units {
        let size = size as f64;
        if v >= size {
            let x = v / size;
            return if (x - x.round()).abs() < 1e-9 {
                format!("{} {name}", x.round())
            } else {
                format!("{x:.1} {name}")
            };
        }
    }
    format!("{} B", v.round())
}

/// A plain tick number, short. Pure.
pub fn number_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{v:.0e}")
    } else if a >= 1.0 && (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round())
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

/// A duration in microseconds for a tick: `500 µs`, `2 ms`, `10 s`. Pure.
fn micros_label(v: f64) -> String {
    let (x, unit) = match v.abs() {
        a if a >= 1e6 => (v / 1e6, "s"),
        a if a >= 1e3 => (v / 1e3, "ms"),
        _ => (v, "µs"),
    };
    format!("{} {unit}", number_label(x))
}

/// A day count since 1970-01-01 as the date it is: `2026-11-20`. Pure.
fn date_label(days: f64) -> String {
    let stamp = schedlab_measure::machine::rfc3339((days * 86_400.0).round() as i64);
    stamp.get(..10).unwrap_or(&stamp).to_string()
}

/// Tick positions for a linear axis over [lo, hi]: steps of 1, 2 or 5 × 10^k, or of a
/// power of two for bytes. Pure.
pub fn linear_ticks(lo: f64, hi: f64, ticks: Ticks) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let step = if ticks == Ticks::Bytes {
        2f64.powf((span / 8.0).log2().ceil()).max(1.0)
    } else {
        let mag = 10f64.powf((span / 6.0).log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| span / s <= 8.0)
            .unwrap_or(mag * 10.0)
    };
    let mut v = Vec::new();
    let mut t = (lo / step).ceil() * step;
    while t <= hi + step * 1e-9 {
        v.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    v
}

/// Tick positions for a log axis over [lo, hi]: powers of 10 (numbers) or of 4 (bytes),
/// thinned to at most ten. Pure.
fn log_ticks(lo: f64, hi: f64, ticks: Ticks) -> Vec<f64> {
    let base: f64 = if ticks == Ticks::Bytes { 4.0 } else { 10.0 };
    let mut v = Vec::new();
    let mut t = base.powf((lo.log(base) - 1e-9).ceil());
    while t <= hi * (1.0 + 1e-9) {
        v.push(t);
        t *= base;
    }
    while v.len() > 10 {
        v = v.into_iter().step_by(2).collect();
    }
    v
}

/// Maps data values to pixels along one axis.
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    from: f64,
    to: f64,
}

impl Scale {
    fn new(
        values: impl Iterator<Item = f64>,
        axis: &Axis,
        from: f64,
        to: f64,
        zero: bool,
    ) -> Scale {
        let log = axis.log;
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (1.0, 10.0);
        }
        if log {
            // Whole decades around the data; whole powers of two for byte sizes.
            let base: f64 = if axis.ticks == Ticks::Bytes { 2.0 } else { 10.0 };
            lo = base.powf(lo.log(base).floor());
            hi = base.powf(hi.log(base).ceil());
            if hi <= lo {
                hi = lo * base;
            }
        } else {
            if zero {
                lo = lo.min(0.0);
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            let step =
                linear_ticks(lo, hi, axis.ticks).windows(2).next().map_or(1.0, |w| w[1] - w[0]);
            hi = (hi / step).ceil() * step;
        }
        Scale { lo, hi, log, from, to }
    }

    fn px(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.from + f * (self.to - self.from)
    }
}

impl Chart {
    /// Renders the chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let keep = |log: bool, v: f64| v.is_finite() && (!log || v > 0.0);
        let series: Vec<(&Series, Vec<(f64, f64)>)> = self
            .series
            .iter()
            .map(|s| {
                let mut pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|&(x, y)| keep(self.x.log, x) && keep(self.y.log, y))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                (s, pts)
            })
            .collect();
        let xs = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0));
        let bands = self.series.iter().flat_map(|s| s.band.iter().flat_map(|b| [b.1, b.2]));
        let ys = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).chain(bands);
        let sx = Scale::new(xs, &self.x, LEFT, W - RIGHT, false);
        let sy = Scale::new(ys, &self.y, H - BOTTOM, TOP, true);

        let mut o = String::new();
        let _ = writeln!(
            o,
            r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="Helvetica, Arial, sans-serif" font-size="12">
<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>
<text x="{}" y="26" font-size="17" font-weight="bold" text-anchor="middle">{}</text>
<text x="{}" y="46" font-size="12" fill="#555" text-anchor="middle">{}</text>"##,
            (LEFT + W - RIGHT) / 2.0,
            escape(&self.title),
            (LEFT + W - RIGHT) / 2.0,
            escape(&self.subtitle)
        );

        // Grid and ticks.
        let fmt = |t: Ticks, v: f64| match t {
            Ticks::Bytes => bytes_label(v),
            Ticks::Number => number_label(v),
            Ticks::Micros => micros_label(v),
            Ticks::Date => date_label(v),
        };
        let ticks = |s: &Scale, t: Ticks| {
            if s.log {
                log_ticks(s.lo, s.hi, t)
            } else {
                linear_ticks(s.lo, s.hi, t)
            }
        };
        let xt = ticks(&sx, self.x.ticks);
        let yt = ticks(&sy, self.y.ticks);
        o.push_str(r##"<g stroke="#ddd" stroke-width="1">"##);
        o.push('\n');
        for &t in &xt {
            let x = sx.px(t);
            let _ =
                writeln!(o, r#"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}"/>"#, H - BOTTOM);
        }
        for &t in &yt {
            let y = sy.px(t);
            let _ =
                writeln!(o, r#"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}"/>"#, W - RIGHT);
        }
        o.push_str("</g>\n");
        o.push_str(r##"<g fill="#333">"##);
        o.push('\n');
        for &t in &xt {
            let _ = writeln!(
                o,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                sx.px(t),
                H - BOTTOM + 18.0,
                escape(&fmt(self.x.ticks, t))
            );
        }
        for &t in &yt {
            let _ = writeln!(
                o,
                r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 8.0,
                sy.px(t) + 4.0,
                escape(&fmt(self.y.ticks, t))
            );
        }
        o.push_str("</g>\n");
        let _ = writeln!(
            o,
            r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#333"/>
<text x="{}" y="{}" text-anchor="middle">{}</text>
<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">{}</text>"##,
            W - RIGHT - LEFT,
            H - BOTTOM - TOP,
            (LEFT + W - RIGHT) / 2.0,
            H - 16.0,
            escape(&self.x.label),
            (TOP + H - BOTTOM) / 2.0,
            (TOP + H - BOTTOM) / 2.0,
            escape(&self.y.label)
        );

        // Markers (cache sizes).
        for m in self.markers.iter().filter(|m| keep(sx.log, m.x) && m.x >= sx.lo && m.x <= sx.hi) {
            let x = sx.px(m.x);
            let _ = writeln!(
                o,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="#999" stroke-dasharray="2 3"/>
<text x="{:.1}" y="{}" font-size="11" fill="#666">{}</text>"##,
                H - BOTTOM,
                x + 3.0,
                TOP + 12.0,
                escape(&m.label)
            );
        }

        // Bands first, beneath every line: a polygon along the highs, back along the lows.
        for s in self.series.iter().filter(|s| !s.band.is_empty()) {
            let mut b: Vec<(f64, f64, f64)> = s
                .band
                .iter()
                .copied()
                .filter(|&(x, lo, hi)| {
                    keep(self.x.log, x) && keep(self.y.log, lo) && keep(self.y.log, hi)
                })
                .collect();
            b.sort_by(|p, q| p.0.total_cmp(&q.0));
            let mut d = String::new();
            for (i, &(x, _, hi)) in b.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1} {:.1}",
                    if i == 0 { "M" } else { " L" },
                    sx.px(x),
                    sy.px(hi)
                );
            }
            for &(x, lo, _) in b.iter().rev() {
                let _ = write!(d, " L{:.1} {:.1}", sx.px(x), sy.px(lo));
            }
            if !b.is_empty() {
                let _ = writeln!(
                    o,
                    r#"<path class="band" d="{d} Z" fill="{}" fill-opacity="0.15" stroke="none"><title>{} (95% interval)</title></path>"#,
                    color(s.color),
                    escape(&s.name)
                );
            }
        }

        // Series: one path each, then its point markers.
        for (si, (s, pts)) in series.iter().enumerate() {
            if pts.is_empty() {
                continue;
            }
            let mut d = String::new();
            for (i, &(x, y)) in pts.iter().enumerate() {
                let _ =
                    write!(d, "{}{:.1} {:.1}", if i == 0 { "M" } else { " L" }, sx.px(x), sy.px(y));
            }
            let dash = dash(si, s.dashed);
            let _ = writeln!(
                o,
                r#"<path class="series" d="{d}" fill="none" stroke="{}" stroke-width="1.8"{dash}><title>{}</title></path>"#,
                color(s.color),
                escape(&s.name)
            );
            if pts.len() <= 64 {
                let fill = if s.dashed { "white" } else { color(s.color) };
                let _ = write!(o, r#"<g fill="{fill}" stroke="{}">"#, color(s.color));
                for &(x, y) in pts {
                    let _ =
                        write!(o, r#"<circle cx="{:.1}" cy="{:.1}" r="2.2"/>"#, sx.px(x), sy.px(y));
                }
                o.push_str("</g>\n");
            }
        }

        // Legend.
        let lx = W - RIGHT + 16.0;
        for (i, (s, _)) in series.iter().enumerate() {
            let y = TOP + 8.0 + i as f64 * 18.0;
            let dash = dash(i, s.dashed);
            let _ = writeln!(
                o,
                r#"<line x1="{lx}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2.5"{dash}/><text x="{}" y="{}">{}</text>"#,
                lx + 26.0,
                color(s.color),
                lx + 32.0,
                y + 4.0,
                escape(&s.name)
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Checks that `doc` is well-formed XML in the subset we write: balanced elements, quoted
    /// attributes, no raw `<` or bare `&` in text, one root. Returns the element names in
    /// document order.
    pub(crate) fn well_formed(doc: &str) -> Result<Vec<String>, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut names = Vec::new();
        let mut roots = 0;
        let mut rest = doc;
        while let Some(lt) = rest.find('<') {
            let text = &rest[..lt];
            check_text(text)?;
            rest = &rest[lt..];
            if let Some(r) = rest.strip_prefix("<?") {
                let end = r.find("?>").ok_or("unterminated <?")?;
                rest = &r[end + 2..];
                continue;
            }
            if let Some(r) = rest.strip_prefix("<!--") {
                let end = r.find("-->").ok_or("unterminated comment")?;
                rest = &r[end + 3..];
                continue;
            }
            let end = tag_end(rest).ok_or("unterminated tag")?;
            let tag = &rest[1..end];
            rest = &rest[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
                if open != name.trim() {
                    return Err(format!("<{open}> closed by </{name}>"));
                }
                continue;
            }
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
            if name.is_empty()
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '-')
            {
                return Err(format!("bad element name in <{tag}>"));
            }
            check_attributes(&body[name.len()..])?;
            if stack.is_empty() {
                roots += 1;
            }
            names.push(name.clone());
            if !self_closing {
                stack.push(name);
            }
        }
        check_text(rest)?;
        if !stack.is_empty() {
            return Err(format!("unclosed elements: {stack:?}"));
        }
        if roots != 1 {
            return Err(format!("{roots} root elements"));
        }
        Ok(names)
    }

    fn tag_end(s: &str) -> Option<usize> {
        let mut quote: Option<char> = None;
        for (i, c) in s.char_indices() {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, '>') => return Some(i),
                _ => {}
            }
        }
        None
    }

    fn check_text(t: &str) -> Result<(), String> {
        let mut rest = t;
        while let Some(i) = rest.find('&') {
            let after = &rest[i + 1..];
            let semi = after.find(';').ok_or(format!("bare & in {t:?}"))?;
            let ent = &after[..semi];
            if !matches!(ent, "amp" | "lt" | "gt" | "quot" | "apos") && !ent.starts_with('#') {
                return Err(format!("unknown entity &{ent};"));
            }
            rest = &after[semi..];
        }
        if t.contains('>') && !t.trim().is_empty() && t.contains('<') {
            return Err(format!("stray markup in text {t:?}"));
        }
        Ok(())
    }

    fn check_attributes(mut s: &str) -> Result<(), String> {
        loop {
            s = s.trim_start();
            if s.is_empty() {
                return Ok(());
            }
            let eq = s.find('=').ok_or(format!("attribute without value: {s:?}"))?;
            let name = &s[..eq];
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(format!("bad attribute name {name:?}"));
            }
            let v = &s[eq + 1..];
            let q = v
                .chars()
                .next()
                .filter(|c| *c == '"' || *c == '\'')
                .ok_or(format!("unquoted value for {name}"))?;
            let close = v[1..].find(q).ok_or(format!("unterminated value for {name}"))?;
            let value = &v[1..1 + close];
            if value.contains('<') {
                return Err(format!("< in attribute {name}"));
            }
            check_text(value)?;
            s = &v[close + 2..];
        }
    }

    fn chart(x_log: bool, y_log: bool) -> Chart {
        Chart {
            title: "Clearing <1000 calls> & more".into(),
            subtitle: "test".into(),
            x: Axis { label: "size".into(), log: x_log, ticks: Ticks::Bytes },
            y: Axis { label: "µs".into(), log: y_log, ticks: Ticks::Number },
            series: vec![
                Series {
                    name: "a".into(),
                    points: vec![(1.0, 2.0), (64.0, 40.0), (4096.0, 900.0)],
                    dashed: false,
                    color: 0,
                    band: vec![],
                },
                Series {
                    name: "a+1".into(),
                    points: vec![(1.0, 3.0), (64.0, 45.0), (4096.0, 1000.0)],
                    dashed: true,
                    color: 0,
                    band: vec![],
                },
                Series {
                    name: "empty".into(),
                    points: vec![],
                    dashed: false,
                    color: 1,
                    band: vec![],
                },
            ],
            markers: vec![
                Marker { x: 48.0 * 1024.0, label: "L1d".into() },
                Marker { x: 100.0, label: "x".into() },
            ],
        }
    }

    #[test]
    fn a_strip_code_places_every_mark_within_a_step_of_the_drawn_plot() {
        let a = STRIP_CODE_ALPHABET.as_bytes();
        assert!(a.windows(2).all(|w| w[0] < w[1]), "distinct, in order");
        assert!(!a.iter().any(|c| b"\"&<>\\'".contains(c)), "nothing to escape");
        let samples = [10.0, 10.5, 11.0, 30.0, 12.0];
        let g = strip_geometry(&samples, 11.0, (10.4, 12.5)).unwrap();
        let code = strip_code(&samples, 11.0, (10.4, 12.5));
        assert_eq!(code.len(), 3 + samples.len());
        let (w, _, pad) = STRIP_SIZE;
        let step = (w - 2.0 * pad) / (a.len() - 1) as f64;
        let decoded: Vec<f64> = code
            .bytes()
            .map(|c| pad + a.iter().position(|&x| x == c).unwrap() as f64 * step)
            .collect();
        let want: Vec<f64> = [g.ci.0, g.ci.1, g.median].into_iter().chain(g.dots).collect();
        for (d, w) in decoded.iter().zip(&want) {
            assert!((d - w).abs() <= step / 2.0 + 1e-9, "{d} for {w}");
        }
        assert_eq!(code.as_bytes()[3], a[0], "the smallest sample at the left end");
        assert_eq!(code.as_bytes()[6], *a.last().unwrap(), "the largest at the right end");
        assert_eq!(strip_code(&[], 1.0, (1.0, 1.0)), "");
    }

    #[test]
    fn charts_are_well_formed_with_one_path_per_drawn_series() {
        for (xl, yl) in [(false, false), (true, true), (true, false)] {
            let svg = chart(xl, yl).to_svg();
            let names = well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
            assert_eq!(names[0], "svg");
            assert_eq!(svg.matches(r#"<path class="series""#).count(), 2, "{svg}");
            assert!(svg.contains("&lt;1000 calls&gt; &amp; more"));
            assert!(svg.contains(r#"stroke-dasharray="6 4""#));
        }
    }

    #[test]
    fn escaped_text_holds_no_character_xml_forbids() {
        assert_eq!(
            escape("a\x1b[1m<b>\x07\u{202e}&\n"),
            "a\\u{1b}[1m&lt;b&gt;\\u{7}\\u{202e}&amp;\n"
        );
    }

    #[test]
    fn the_checker_rejects_broken_markup() {
        assert!(well_formed("<svg><g></svg>").is_err());
        assert!(well_formed("<svg a=1/>").is_err());
        assert!(well_formed("<svg>&</svg>").is_err());
        assert!(well_formed("<svg/><svg/>").is_err());
        assert!(well_formed(r#"<svg a="x"><g/></svg>"#).is_ok());
    }

    #[test]
    fn log_points_that_cannot_be_drawn_are_dropped_not_drawn_at_infinity() {
        let mut c = chart(true, true);
        c.series[0].points.push((0.0, 5.0));
        c.series[0].points.push((8.0, -1.0));
        let svg = c.to_svg();
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    }

    #[test]
    fn ticks_are_round_and_labels_readable() {
        assert_eq!(
            linear_ticks(0.0, 100.0, Ticks::Number),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(
            linear_ticks(0.0, 128.0, Ticks::Bytes),
            vec![0.0, 16.0, 32.0, 48.0, 64.0, 80.0, 96.0, 112.0, 128.0]
        );
        assert_eq!(micros_label(500.0), "500 µs");
        assert_eq!(micros_label(2000.0), "2 ms");
        assert_eq!(micros_label(1e7), "10 s");
        assert_eq!(micros_label(0.5), "0.5 µs");
        assert_eq!(log_ticks(1.0, 1000.0, Ticks::Number), vec![1.0, 10.0, 100.0, 1000.0]);
        assert!(log_ticks(1.0, 1e8, Ticks::Bytes).len() <= 10);
        assert_eq!(bytes_label(48.0 * 1024.0), "48 KiB");
        assert_eq!(bytes_label(64.0 * 1048576.0), "64 MiB");
        assert_eq!(bytes_label(1536.0), "1.5 KiB");
        assert_eq!(bytes_label(100.0), "100 B");
        assert_eq!(number_label(0.25), "0.25");
        assert_eq!(number_label(20.0), "20");
    }
}

/// The opening of a bar chart's SVG: its size, accessible name, white ground and title.
fn figure_start(width: f64, height: f64, title: &str) -> String {
    let t = escape(title);
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" role="img"><title>{t}</title>
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14" font-weight="bold">{t}</text>
"##
    )
}

/// One group of a [`bars`] chart: a label and one bar per series (`None`: no value, drawn
/// as "n/a"), each with the text written at its end.
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    /// The group's label, left of its bars.
    pub label: String,
    /// Per series: the value and its text.
    pub bars: Vec<Option<(f64, String)>>,
}

/// Grouped horizontal bars on a logarithmic axis (values must be positive), for values that
/// span orders of magnitude (kernel threads in µs beside user threads in ns). Every bar
/// carries its series name and value as text, so nothing depends on telling the colours
/// apart (grey-scale prints). `axis` labels the x axis with its unit. Pure.
pub fn bars(title: &str, series: &[&str], groups: &[BarGroup], axis: &str) -> String {
    const LEFT: f64 = 330.0;
    const PLOT: f64 = 520.0;
    const RIGHT: f64 = 170.0;
    const BAR: f64 = 13.0;
    let width = LEFT + PLOT + RIGHT;
    let values: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.bars.iter().flatten().map(|b| b.0))
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let (lo, hi) = match values.iter().copied().fold(None, |acc: Option<(f64, f64)>, v| {
        Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v))))
    }) {
        Some((a, b)) => (
            10f64.powf(a.log10().floor()),
            10f64.powf(b.log10().ceil().max(a.log10().floor() + 1.0)),
        ),
        None => (1.0, 10.0),
    };
    let x = |v: f64| LEFT + (v.log10() - lo.log10()) / (hi.log10() - lo.log10()) * PLOT;
    let group_h = BAR * series.len() as f64 + 10.0;
    let top = 40.0;
    let height = top + group_h * groups.len() as f64 + 50.0;
    let mut s = figure_start(width, height, title);
    let axis_y = top + group_h * groups.len() as f64;
    for t in log_ticks(lo, hi, Ticks::Number) {
        let tx = x(t);
        let _ = write!(
            s,
            r##"<line x1="{tx:.1}" y1="{top}" x2="{tx:.1}" y2="{axis_y}" stroke="#ddd"/><text x="{tx:.1}" y="{}" text-anchor="middle">{}</text>"##,
            axis_y + 14.0,
            number_label(t)
        );
    }
    let _ = write!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle">{}</text>"##,
        LEFT + PLOT / 2.0,
        axis_y + 32.0,
        escape(axis)
    );
    for (gi, g) in groups.iter().enumerate() {
        let gy = top + gi as f64 * group_h;
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{}</text>"##,
            LEFT - 8.0,
            gy + group_h / 2.0,
            escape(&g.label)
        );
        for (si, bar) in g.bars.iter().enumerate() {
            let y = gy + si as f64 * BAR;
            let name = series.get(si).copied().unwrap_or("");
            match bar {
                Some((v, text)) if *v > 0.0 && v.is_finite() => {
                    let w = (x(*v) - LEFT).max(1.0);
                    let _ = write!(
                        s,
                        r##"<rect x="{LEFT}" y="{y:.1}" width="{w:.1}" height="{}" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"##,
                        BAR - 2.0,
                        color(si),
                        LEFT + w + 4.0,
                        y + BAR - 3.0,
                        escape(format!("{name} {text}").trim_start())
                    );
                }
                _ => {
                    let _ = write!(
                        s,
                        r##"<text x="{}" y="{:.1}" fill="#555">{} n/a</text>"##,
                        LEFT + 4.0,
                        y + BAR - 3.0,
                        escape(name)
                    );
                }
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod bar_tests {
    use super::*;

    #[test]
    fn bars_carry_their_series_and_value_as_text_on_a_log_axis() {
        let groups = vec![
            BarGroup {
                label: "threads.switch".into(),
                bars: vec![Some((2000.0, "2 µs".into())), Some((20.0, "20 ns".into())), None],
            },
            BarGroup { label: "a<b".into(), bars: vec![Some((5.0, "5 ns".into())), None, None] },
        ];
        let svg = bars("thread systems", &["os", "rt", "tokio"], &groups, "ns per operation");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect x=\"330\"").count(), 3, "one rect per value");
        assert!(
            svg.contains(">os 2 µs<") && svg.contains(">rt 20 ns<") && svg.contains(">tokio n/a<")
        );
        assert!(svg.contains("a&lt;b"));
        // Decades from 1 to 10,000 on the axis.
        for t in [">1<", ">10<", ">100<", ">1000<"] {
            assert!(svg.contains(t), "tick {t}");
        }
    }
}

/// Ratios against a baseline as bars from 1 on a logarithmic axis: left of the 1 line the
/// value went down, right of it up; each row's `text` (its verdict) is written beside its
/// bar, so the chart reads without colour. Rows: label, ratio, text. Pure.
pub fn ratios(title: &str, rows: &[(String, f64, String)], axis: &str) -> String {
    const LEFT: f64 = 330.0;
    const PLOT: f64 = 480.0;
    const RIGHT: f64 = 210.0;
    const ROW: f64 = 15.0;
    let width = LEFT + PLOT + RIGHT;
    let top = 40.0;
    let height = top + ROW * rows.len() as f64 + 50.0;
    let finite: Vec<f64> = rows.iter().map(|r| r.1).filter(|r| *r > 0.0 && r.is_finite()).collect();
    // Symmetric in log2 around 1, at least ×0.5..×2.
    let reach = finite.iter().map(|r| r.log2().abs()).fold(1.0f64, f64::max).ceil();
    let x = |r: f64| LEFT + (r.log2() + reach) / (2.0 * reach) * PLOT;
    let mut s = figure_start(width, height, title);
    let axis_y = top + ROW * rows.len() as f64;
    let label = |r: f64| {
        if r >= 1.0 {
            format!("×{}", number_label(r))
        } else {
            format!("×1/{}", number_label(1.0 / r))
        }
    };
    // A label every `every` ticks (×1 always), so that neighbours never touch: at 11 px a
    // character counted 0.7 em wide (DejaVu Sans' digits are 0.64 em, its × 0.84 em), and
    // a 4 px gap between labels.
    let widest = label(2f64.powf(-reach)).chars().count() as f64 * 0.7 * 11.0;
    let every = ((widest + 4.0) / (PLOT / (2.0 * reach))).ceil().max(1.0) as i64;
    let mut k = -reach;
    while k <= reach + 1e-9 {
        let r = 2f64.powf(k);
        let tx = x(r);
        let stroke = if k == 0.0 { "#000" } else { "#ddd" };
        let _ = write!(
            s,
            r##"<line x1="{tx:.1}" y1="{top}" x2="{tx:.1}" y2="{axis_y}" stroke="{stroke}"/>"##
        );
        if (k.round() as i64) % every == 0 {
            let _ = write!(
                s,
                r##"<text x="{tx:.1}" y="{}" text-anchor="middle">{}</text>"##,
                axis_y + 14.0,
                label(r)
            );
        }
        k += 1.0;
    }
    let _ = write!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle">{}</text>"##,
        LEFT + PLOT / 2.0,
        axis_y + 32.0,
        escape(axis)
    );
    let one = x(1.0);
    for (i, (label, r, text)) in rows.iter().enumerate() {
        let y = top + i as f64 * ROW;
        let _ = write!(
            s,
            r##"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 8.0,
            y + ROW - 4.0,
            escape(label)
        );
        if *r > 0.0 && r.is_finite() {
            let (a, b) = if x(*r) < one { (x(*r), one) } else { (one, x(*r)) };
            let _ = write!(
                s,
                r##"<rect x="{a:.1}" y="{:.1}" width="{:.1}" height="{}" fill="{}"/>"##,
                y + 2.0,
                (b - a).max(1.0),
                ROW - 4.0,
                color(0)
            );
        }
        let _ = write!(
            s,
            r##"<text x="{}" y="{:.1}">{}</text>"##,
            LEFT + PLOT + 8.0,
            y + ROW - 4.0,
            escape(text)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod against_tests {
    use super::*;

    #[test]
    fn against_draws_the_median_band_ticks_and_ring_in_order_on_a_log_scale() {
        let marks = [
            Mark { value: 10.0, title: "slow <machine>".into(), shape: MarkShape::Tick },
            Mark { value: 1000.0, title: "fast".into(), shape: MarkShape::Tick },
            Mark { value: 100.0, title: "last run".into(), shape: MarkShape::Ring },
        ];
        let svg = against(100.0, (90.0, 110.0), &marks, "t");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("slow &lt;machine&gt;"));
        assert!(!svg.contains("<text"), "no text to overlap the row's");
        let xs: Vec<f64> = svg
            .split("<rect x=\"")
            .skip(1)
            .map(|r| r.split('"').next().unwrap().parse().unwrap())
            .collect();
        // band, tick 10, tick 1000, median: the median midway between the ticks (log scale).
        assert_eq!(xs.len(), 4, "{svg}");
        let (t10, t1000, med) = (xs[1] + 0.75, xs[2] + 0.75, xs[3] + 1.5);
        assert!(((med - t10) - (t1000 - med)).abs() < 0.2, "{t10} {med} {t1000}");
        assert!(svg.contains("<circle cx=\"") && svg.contains("last run"));
        assert_eq!(against(0.0, (0.0, 0.0), &marks, "t"), "");
    }
}

#[cfg(test)]
mod ratio_tests {
    use super::*;

    #[test]
    fn ratios_are_bars_from_one_with_their_verdicts() {
        let rows = vec![
            ("a".to_string(), 2.0, "×2.00 worse".to_string()),
            ("b<".to_string(), 0.25, "×0.25 better".to_string()),
        ];
        let svg = ratios("vs base", &rows, "ratio (log scale)");
        assert_eq!(svg.matches("<rect x=").count(), 2, "one bar per row");
        assert!(svg.contains("×2.00 worse") && svg.contains("b&lt;"));
        // The axis reaches ×1/4 .. ×4 around the 1 line.
        for t in [">×1/4<", ">×1<", ">×4<"] {
            assert!(svg.contains(t), "tick {t}");
        }
    }

    #[test]
    fn a_wide_ratio_axis_labels_fewer_ticks_than_it_draws() {
        // ×1/64 .. ×64: thirteen lines 37 px apart, too close for "×1/64" (5 characters)
        // beside each other at 11 px: every other one is labelled, ×1 among them.
        let rows = vec![("a".to_string(), 64.0, "worse".to_string())];
        let svg = ratios("t", &rows, "ratio");
        assert_eq!(svg.matches("stroke=\"#ddd\"").count(), 12);
        for t in [">×1/64<", ">×1/16<", ">×1<", ">×4<", ">×64<"] {
            assert!(svg.contains(t), "tick {t}");
        }
        for t in [">×1/32<", ">×1/2<", ">×2<", ">×32<"] {
            assert!(!svg.contains(t), "tick {t} left unlabelled");
        }
    }
}
