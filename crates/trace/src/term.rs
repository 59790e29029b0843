//! Timelines for a terminal: one lane per thread, time across, within 100 columns.
//!
//! Each column covers `window / columns` of time and shows how much of it the thread ran:
//! blank (none), `░` (under a third), `▒` (under two thirds), `▓` (less than all), `█` (all).
//! A zoomed view of a short window makes individual time slices visible.

use schedlab_measure::units::human_ns;

use crate::model::Timeline;

/// Width of the lane-name column.
const NAME: usize = 12;

fn shade(fraction: f64) -> char {
    match fraction {
        f if f <= 0.0 => ' ',
        f if f < 1.0 / 3.0 => '░',
        f if f < 2.0 / 3.0 => '▒',
        f if f < 0.999 => '▓',
        _ => '█',
    }
}

fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The lanes of `t` between `from_ns` and `to_ns` in `cols` columns of time (plus the name
/// column and each lane's share of that window), with a time axis in ms underneath.
pub fn lanes(t: &Timeline, from_ns: u64, to_ns: u64, cols: usize) -> String {
    let cols = cols.max(10);
    let span = to_ns.saturating_sub(from_ns).max(1);
    let mut out = String::new();
    for lane in &t.lanes {
        let mut row = String::with_capacity(cols * 3);
        for c in 0..cols {
            let a = from_ns + span * c as u64 / cols as u64;
            let b = from_ns + span * (c as u64 + 1) / cols as u64;
            let busy = lane.busy_in(a, b) as f64 / (b - a).max(1) as f64;
            // A run too short to fill any fraction still shows as a sliver.
            let touched =
                lane.runs.iter().any(|r| r.start_ns < b && (r.end_ns > a || r.start_ns >= a));
            row.push(if busy == 0.0 && touched { '░' } else { shade(busy) });
        }
        let share = lane.busy_in(from_ns, to_ns) as f64 / span as f64 * 100.0;
        let name: String = lane.name.chars().take(NAME - 1).collect();
        out.push_str(&format!("{name:<NAME$}|{row}| {share:>3.0}%\n"));
    }
    // The axis: a tick every 10 columns, labelled in ms.
    let mut axis = vec![' '; cols + 1];
    let mut labels = vec![' '; cols + 8];
    for c in (0..=cols).step_by(10) {
        axis[c] = '+';
        let label = ms(from_ns + span * c as u64 / cols as u64);
        let start = if c == cols { c.saturating_sub(label.len() - 1) } else { c };
        for (i, ch) in label.chars().enumerate() {
            if start + i < labels.len() {
                labels[start + i] = ch;
            }
        }
    }
    let axis: String = axis.into_iter().collect();
    let labels: String = labels.into_iter().collect();
    out.push_str(&format!("{:NAME$}{axis}\n", ""));
    out.push_str(&format!("{:<NAME$}{}\n", "ms", labels.trim_end()));
    out.push_str(&format!(
        "{:NAME$}one column = {}; █ ran all of it, ▓ ▒ ░ part, blank not at all\n",
        "",
        human_ns(span / cols as u64)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Lane, Span};

    #[test]
    fn lanes_fit_in_100_columns_and_show_runs() {
        let mut a = Lane::new("a-very-long-thread-name", "");
        a.runs = vec![Span { start_ns: 0, end_ns: 50_000_000 }];
        let mut b = Lane::new("b", "");
        b.runs = vec![Span { start_ns: 50_000_000, end_ns: 100_000_000 }];
        let t = Timeline {
            scenario: "x".into(),
            title: "x".into(),
            recorder: "sampling".into(),
            window_ns: 100_000_000,
            threshold_ns: 1,
            interval_ns: 1,
            lanes: vec![a, b],
            marks: vec![],
        };
        let text = lanes(&t, 0, t.window_ns, 80);
        for line in text.lines() {
            assert!(line.chars().count() <= 100, "too wide: {line}");
        }
        let first = text.lines().next().unwrap();
        assert!(first.contains(&"█".repeat(40)));
        assert!(first.ends_with(" 50%"));
        assert!(text.contains("100"));
    }
}
