//! SVG pictures of a timeline, like the seed's figures: the title on top, one lane per
//! thread with its runs as filled bars, a time axis in ms, and a legend with each thread's
//! setup and CPU share.
//!
//! Runs closer together than a pixel are merged into one bar so the file stays small even
//! for thousands of slices; the picture is exact to the pixel.

use std::fmt::Write as _;

use schedlab_trace::model::{Span, Timeline};
use schedlab_trace::stats::lane_stats;

use crate::svg::{color, escape as esc, linear_ticks, number_label, Ticks};

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 20.0;
/// The first lane's top: below the title (y 20), the subtitle (y 38) and two rows of mark
/// labels (y 58 and 70), so that no text touches another.
const TOP: f64 = 76.0;
/// The rows mark labels are written on, lowest first.
const MARK_ROWS: [f64; 2] = [TOP - 6.0, TOP - 18.0];
/// A mark label's font size, and the width of one of its characters (an estimate that
/// errs wide: sans-serif digits and lower case are narrower).
const MARK_FONT: f64 = 10.0;
const MARK_CHAR: f64 = 6.2;
const LANE: f64 = 34.0;
const BAR: f64 = 22.0;
/// Merges runs closer than `px_ns` apart.
fn merge(runs: &[Span], px_ns: u64) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    for r in runs {
        match out.last_mut() {
            Some(last) if r.start_ns <= last.end_ns + px_ns => {
                last.end_ns = last.end_ns.max(r.end_ns)
            }
            _ => out.push(*r),
        }
    }
    out
}

/// Each lane's colour and opacity: a lane named `X kernel` (the kernel's record of thread X,
/// drawn under X's sampled lane) takes X's colour, lighter.
fn styles(t: &Timeline) -> Vec<(&'static str, f64)> {
    let mut out: Vec<(&'static str, f64)> = Vec::new();
    let mut next = 0;
    for (i, lane) in t.lanes.iter().enumerate() {
        let paired = i > 0 && lane.name == format!("{} kernel", t.lanes[i - 1].name);
        if paired {
            out.push((out[i - 1].0, 0.55));
        } else {
            out.push((color(next), 1.0));
            next += 1;
        }
    }
    out
}

/// The timeline as a standalone SVG document.
pub fn to_svg(t: &Timeline, subtitle: &str) -> String {
    let n = t.lanes.len() as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let axis_y = TOP + n * LANE + 6.0;
    // The axis title's baseline is 32 below the axis; the legend's first line starts a line
    // and a half below it (its box reaches 12 above its baseline), so the two never meet
    // however long the legend's lines are.
    let legend_y = axis_y + 58.0;
    let height = legend_y + n * 18.0 + 16.0;
    let window = t.window_ns.max(1) as f64;
    let x = |ns: u64| LEFT + ns as f64 / window * plot_w;
    let px_ns = (window / plot_w) as u64;
    let styles = styles(t);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="20" font-size="16" font-weight="bold">{}</text>
<text x="{LEFT}" y="38" fill="#555">{}</text>
"##,
        esc(&t.title),
        esc(subtitle)
    );
    for (i, lane) in t.lanes.iter().enumerate() {
        let y = TOP + i as f64 * LANE;
        let (color, opacity) = styles[i];
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{y}" width="{plot_w}" height="{BAR}" fill="#f2f2f2"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            y + BAR * 0.7,
            esc(&lane.name)
        );
        for r in merge(&lane.runs, px_ns) {
            let w = (x(r.end_ns) - x(r.start_ns)).max(0.5);
            let _ = writeln!(
                s,
                r#"<rect x="{:.2}" y="{y}" width="{w:.2}" height="{BAR}" fill="{color}" fill-opacity="{opacity}"/>"#,
                x(r.start_ns)
            );
        }
    }
    // Mark labels: right of their line, or left of it near the right edge; a label that
    // would run into one already placed goes up a row (two rows; a third mark crowding
    // the same spot keeps its line and its name in the tooltip only).
    let mut placed: Vec<(usize, f64, f64)> = Vec::new();
    for m in &t.marks {
        let mx = x(m.at_ns);
        let w = m.name.chars().count() as f64 * MARK_CHAR;
        let (x0, anchor) =
            if mx + 3.0 + w > WIDTH { (mx - 3.0 - w, "end") } else { (mx + 3.0, "start") };
        let row = (0..MARK_ROWS.len()).find(|&r| {
            placed.iter().all(|&(pr, a, b)| pr != r || x0 + w + 4.0 < a || b + 4.0 < x0)
        });
        let top = row.map_or(TOP - 4.0, |r| MARK_ROWS[r] - 2.0);
        let _ = write!(
            s,
            r##"<line x1="{mx:.2}" y1="{top}" x2="{mx:.2}" y2="{axis_y}" stroke="#000" stroke-dasharray="4 3"><title>{}</title></line>"##,
            esc(&m.name)
        );
        if let Some(r) = row {
            placed.push((r, x0, x0 + w));
            let tx = if anchor == "end" { mx - 3.0 } else { mx + 3.0 };
            let _ = write!(
                s,
                r#"<text x="{tx:.2}" y="{}" font-size="{MARK_FONT}" text-anchor="{anchor}">{}</text>"#,
                MARK_ROWS[r],
                esc(&m.name)
            );
        }
        s.push('\n');
    }
    // Axis in ms.
    let span_ms = window / 1e6;
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#000"/>"##,
        LEFT + plot_w
    );
    for tick in linear_ticks(0.0, span_ms, Ticks::Number) {
        let tx = LEFT + tick / span_ms * plot_w;
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.2}" y1="{axis_y}" x2="{tx:.2}" y2="{}" stroke="#000"/><text x="{tx:.2}" y="{}" text-anchor="middle">{}</text>"##,
            axis_y + 5.0,
            axis_y + 18.0,
            number_label(tick)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">time (ms)</text>"#,
        LEFT + plot_w / 2.0,
        axis_y + 32.0
    );
    // Legend.
    for (i, lane) in t.lanes.iter().enumerate() {
        let y = legend_y + i as f64 * 18.0;
        let st = lane_stats(lane);
        let _ = writeln!(
            s,
            r#"<rect x="{LEFT}" y="{}" width="12" height="12" fill="{}" fill-opacity="{}"/><text x="{}" y="{}">{}: {} — CPU {:.1}%, {} runs, {:.0} inverses/s</text>"#,
            y - 10.0,
            styles[i].0,
            styles[i].1,
            LEFT + 18.0,
            y,
            esc(&lane.name),
            esc(&lane.detail),
            st.cpu_share * 100.0,
            st.runs,
            st.work_rate
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_trace::model::{Lane, Mark};

    #[test]
    fn the_svg_has_title_lanes_axis_and_legend() {
        let mut a = Lane::new("a<b", "busy");
        a.runs = vec![
            Span { start_ns: 0, end_ns: 1_000_000 },
            Span { start_ns: 1_000_010, end_ns: 2_000_000 },
        ];
        let t = Timeline {
            scenario: "3 two-equal".into(),
            title: "3. Two & two".into(),
            recorder: "sampling".into(),
            window_ns: 10_000_000,
            threshold_ns: 1,
            interval_ns: 1,
            lanes: vec![a],
            marks: vec![Mark { at_ns: 5_000_000, name: "half".into() }],
        };
        let svg = to_svg(&t, "sub");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("3. Two &amp; two"));
        assert!(svg.contains("a&lt;b"));
        assert!(svg.contains("time (ms)"));
        // Round ticks over the 10 ms window, from the shared toolkit.
        assert!(svg.contains(">0</text>") && svg.contains(">10</text>"), "{svg}");
        // The two runs 10 ns apart are one bar at this scale.
        assert_eq!(svg.matches("fill=\"#1f77b4\"").count(), 2, "one bar plus the legend swatch");
    }

    /// Each `<text>`'s box as (left, top, right, bottom, text), estimated from its
    /// position, anchor, font size and length (0.6 em a character, 0.8 em above the
    /// baseline and 0.25 below: a little wider and taller than sans-serif's glyphs).
    fn text_boxes(svg: &str) -> Vec<(f64, f64, f64, f64, String)> {
        let attr = |tag: &str, name: &str| -> Option<f64> {
            let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
            tag[at..].split('"').next()?.parse().ok()
        };
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let (tag, rest) = t.split_once('>').unwrap();
                let text = rest.split("</text>").next().unwrap();
                let chars = text.replace("&amp;", "&").replace("&lt;", "<").chars().count();
                let size = attr(tag, "font-size").unwrap_or(12.0);
                let (x, y) = (attr(tag, "x").unwrap(), attr(tag, "y").unwrap());
                let w = chars as f64 * 0.6 * size;
                let left = if tag.contains("text-anchor=\"middle\"") {
                    x - w / 2.0
                } else if tag.contains("text-anchor=\"end\"") {
                    x - w
                } else {
                    x
                };
                (left, y - 0.8 * size, left + w, y + 0.25 * size, text.to_string())
            })
            .collect()
    }

    #[test]
    fn no_text_of_a_timeline_overlaps_another() {
        // Two lanes with legends as long as the seed's scenarios write, and two marks close
        // together near the right edge: before, the axis title overlapped the legend's first
        // line and a mark's label overlapped the subtitle and the other mark's.
        let lane = |name: &str| {
            let mut l = Lane::new(name, "busy loop at nice 0, pinned to CPU 0, started first");
            l.runs = vec![Span { start_ns: 0, end_ns: 4_000_000 }];
            l.done_ns = 10_000_000;
            l
        };
        let t = Timeline {
            scenario: "5".into(),
            title: "5. Two busy threads and a sleeper".into(),
            recorder: "sampling".into(),
            window_ns: 10_000_000,
            threshold_ns: 1,
            interval_ns: 1,
            lanes: vec![lane("spinner"), lane("spinner kernel")],
            marks: vec![
                Mark { at_ns: 9_700_000, name: "spinner starts yielding".into() },
                Mark { at_ns: 9_800_000, name: "sleeper starts yielding".into() },
            ],
        };
        let svg = to_svg(&t, "run #12 — sampling recorder — a long subtitle about the machine vm");
        let boxes = text_boxes(&svg);
        assert!(boxes.len() > 8, "{boxes:?}");
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let apart = a.2 <= b.0 || b.2 <= a.0 || a.3 <= b.1 || b.3 <= a.1;
                assert!(apart, "{:?} overlaps {:?}", a.4, b.4);
            }
        }
    }

    #[test]
    fn a_kernel_lane_takes_its_threads_colour_lighter() {
        let t = Timeline {
            scenario: "x".into(),
            title: "x".into(),
            recorder: "sampling".into(),
            window_ns: 1,
            threshold_ns: 1,
            interval_ns: 1,
            lanes: vec![Lane::new("a", ""), Lane::new("a kernel", ""), Lane::new("b", "")],
            marks: vec![],
        };
        assert_eq!(styles(&t), vec![(color(0), 1.0), (color(0), 0.55), (color(1), 1.0)]);
    }
}
