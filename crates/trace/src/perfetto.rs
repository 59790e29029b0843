//! Perfetto export: the Chrome trace event format (JSON), which ui.perfetto.dev and
//! chrome://tracing load.
//!
//! One process per timeline (pid 1, 2... named after the scenario and recorder), one thread
//! per lane (named after the lane, with its setup), a complete event (`"ph": "X"`) per run
//! and an instant event (`"ph": "i"`, thread scope) per mark (wakeups and preemptions from
//! the kernel recorder); scenario-wide marks are process-scoped instants.
//! Times are microseconds (floating point, so nanoseconds survive). Slices on one track must
//! not overlap — guaranteed by [`Timeline::check`] — and [`validate`] checks an exported
//! document against the format's rules.
//!
//! Format reference: "Trace Event Format", Google, docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU.

use serde_json::{json, Value};

use crate::model::Timeline;

/// The timeline as a Chrome trace event JSON document.
pub fn to_json(t: &Timeline) -> Value {
    to_json_many(&[t])
}

/// Several timelines of one scenario (the sampling and the kernel recorder's) in one
/// document, one process each (pids 1, 2, ...), so they show one above the other.
pub fn to_json_many(timelines: &[&Timeline]) -> Value {
    let mut events = Vec::new();
    for (p, t) in timelines.iter().enumerate() {
        push_events(&mut events, t, p as u64 + 1);
    }
    let t = timelines.first();
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "title": t.map(|t| t.title.clone()),
            "recorders": timelines.iter().map(|t| t.recorder.clone()).collect::<Vec<_>>(),
            "threshold_ns": t.map(|t| t.threshold_ns),
            "interval_ns": t.map(|t| t.interval_ns),
        }
    })
}

fn push_events(events: &mut Vec<Value>, t: &Timeline, pid: u64) {
    events.push(json!({
        "ph": "M", "name": "process_name", "pid": pid, "tid": 0,
        "args": { "name": format!("schedlab timeline {} ({})", t.scenario, t.recorder) }
    }));
    for (i, lane) in t.lanes.iter().enumerate() {
        let tid = i as u64 + 1;
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
            "args": { "name": format!("{} [{}] tid {}", lane.name, lane.detail, lane.tid) }
        }));
        events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
            "args": { "sort_index": tid }
        }));
        for (k, r) in lane.runs.iter().enumerate() {
            let name = lane.labels.get(k).map_or("run", String::as_str);
            events.push(json!({
                "ph": "X", "name": name, "cat": "sched", "pid": pid, "tid": tid,
                "ts": r.start_ns as f64 / 1e3, "dur": r.len_ns() as f64 / 1e3,
            }));
        }
        for m in &lane.marks {
            events.push(json!({
                "ph": "i", "s": "t", "name": m.name, "cat": "sched", "pid": pid, "tid": tid,
                "ts": m.at_ns as f64 / 1e3,
            }));
        }
    }
    for m in &t.marks {
        events.push(json!({
            "ph": "i", "s": "p", "name": m.name, "cat": "scenario", "pid": pid, "tid": 0,
            "ts": m.at_ns as f64 / 1e3,
        }));
    }
}

/// Checks a document against the trace event format's rules as Perfetto applies them:
/// a `traceEvents` array; every event with a phase, a name, numeric pid and tid; complete
/// events with non-negative `ts` and `dur`; instants with a valid scope; metadata with
/// `args.name` (or `args.sort_index`); and no two complete events on one thread that overlap
/// without nesting (ours never nest, so any overlap is an error).
pub fn validate(doc: &Value) -> Result<(), String> {
    let events = doc.get("traceEvents").and_then(Value::as_array).ok_or("no traceEvents array")?;
    let mut slices: std::collections::BTreeMap<(u64, u64), Vec<(f64, f64)>> = Default::default();
    for (i, e) in events.iter().enumerate() {
        let ph = e.get("ph").and_then(Value::as_str).ok_or(format!("event {i}: no ph"))?;
        e.get("name").and_then(Value::as_str).ok_or(format!("event {i}: no name"))?;
        let pid = e.get("pid").and_then(Value::as_u64).ok_or(format!("event {i}: no pid"))?;
        let tid = e.get("tid").and_then(Value::as_u64).ok_or(format!("event {i}: no tid"))?;
        match ph {
            "M" => {
                let args = e.get("args").ok_or(format!("event {i}: metadata without args"))?;
                if args.get("name").is_none() && args.get("sort_index").is_none() {
                    return Err(format!("event {i}: metadata without a name"));
                }
            }
            "X" => {
                let ts = e.get("ts").and_then(Value::as_f64).ok_or(format!("event {i}: no ts"))?;
                let dur =
                    e.get("dur").and_then(Value::as_f64).ok_or(format!("event {i}: no dur"))?;
                if ts < 0.0 || dur < 0.0 {
                    return Err(format!("event {i}: negative ts or dur"));
                }
                slices.entry((pid, tid)).or_default().push((ts, ts + dur));
            }
            "i" | "I" => {
                e.get("ts").and_then(Value::as_f64).ok_or(format!("event {i}: no ts"))?;
                let s = e.get("s").and_then(Value::as_str).unwrap_or("t");
                if !matches!(s, "g" | "p" | "t") {
                    return Err(format!("event {i}: bad instant scope {s:?}"));
                }
            }
            other => return Err(format!("event {i}: unexpected phase {other:?}")),
        }
    }
    for ((pid, tid), mut v) in slices {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in v.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(format!(
                    "pid {pid} tid {tid}: slices [{}, {}) and [{}, {}) overlap",
                    w[0].0, w[0].1, w[1].0, w[1].1
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Lane, Mark, Span};

    fn timeline() -> Timeline {
        let mut a = Lane::new("a", "SCHED_OTHER nice 0");
        a.runs = vec![
            Span { start_ns: 0, end_ns: 3_000_000 },
            Span { start_ns: 6_000_000, end_ns: 9_000_000 },
        ];
        a.marks = vec![Mark { at_ns: 6_000_000, name: "wakeup".into() }];
        let mut b = Lane::new("b", "SCHED_OTHER nice 0");
        b.runs = vec![Span { start_ns: 3_000_000, end_ns: 6_000_000 }];
        Timeline {
            scenario: "3 two-equal".into(),
            title: "two".into(),
            recorder: "sampling".into(),
            window_ns: 10_000_000,
            threshold_ns: 40_000,
            interval_ns: 10_000,
            lanes: vec![a, b],
            marks: vec![Mark { at_ns: 5_000_000, name: "half".into() }],
        }
    }

    #[test]
    fn the_export_parses_and_follows_the_format() {
        let text = serde_json::to_string(&to_json(&timeline())).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        validate(&doc).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 2);
        assert!(names[0].starts_with("a ["));
        assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 3);
        assert_eq!(events.iter().filter(|e| e["ph"] == "i").count(), 2);
        let first = events.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(first["dur"].as_f64(), Some(3000.0));
    }

    #[test]
    fn two_recorders_become_two_processes() {
        let (a, mut b) = (timeline(), timeline());
        b.recorder = "kernel".into();
        let doc = to_json_many(&[&a, &b]);
        validate(&doc).unwrap();
        let pids: std::collections::BTreeSet<u64> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["pid"].as_u64().unwrap())
            .collect();
        assert_eq!(pids.into_iter().collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn overlapping_slices_are_rejected() {
        let mut t = timeline();
        t.lanes[0].runs[1].start_ns = 2_000_000;
        assert!(validate(&to_json(&t)).unwrap_err().contains("overlap"));
    }

    #[test]
    fn events_without_a_phase_are_rejected() {
        let doc = json!({ "traceEvents": [ { "name": "x", "pid": 1, "tid": 1 } ] });
        assert!(validate(&doc).is_err());
    }
}
