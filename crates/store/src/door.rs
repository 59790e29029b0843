//! The door of `push`, `pull` and `import`: a run whose text could drive a terminal is not
//! copied.
//!
//! A run copied from another database was written by another machine, another version, or
//! someone who crafted the file. Its labels, host, parameters, notes, warnings and reasons
//! are shown later by every command, so [`Store::copy_run`](crate::Store::copy_run) checks
//! every text of the run's rows before writing any of them, with the one rule of
//! [`schedlab_measure::text`]: no control, bidirectional or invisible format character, in
//! a one-line field not even a line break or tab. Prose fields (a failure reason, a
//! warning's message and advice, the doctor findings and the timelines' texts) may break
//! lines. The renderings escape what they show as well; the door keeps such text out of the
//! databases a fleet shares, and says which field of which run held what.
//!
//! The check reads the rows as stored, not the model: a crafted file can disagree with
//! itself (a `host` column and a machine fingerprint naming different hosts), and each text
//! is checked where it is. JSON columns are checked string by string, keys included.

use schedlab_measure::text::{describe, escape, find_unsafe, is_blank};

use crate::columns::{RESULT_COLS, RUN_COLS, TIMELINE_COLS, WARNING_COLS};
use crate::db::{Row, V};

/// Why the run of these rows (as [`Store::copy_run`](crate::Store::copy_run) read them:
/// results with their id first) is not copied: `label: U+001B (escape)`, `result 3
/// (os.pipe.latency) notes.cpus: ...`; `None` when every text is safe.
pub(crate) fn refusal(
    run: &Row,
    results: &[Row],
    warnings: &[Row],
    timelines: &[Row],
) -> Option<String> {
    let run_cols = Columns {
        names: RUN_COLS,
        json: &["filters", "settings", "calibration", "machine"],
        prose: &["reason"],
    };
    if let Some(found) = first_unsafe(&run_cols, run) {
        return Some(found);
    }
    let label = RUN_COLS.iter().position(|c| *c == "label").expect("runs have a label");
    if let V::T(l) = &run[label] {
        if is_blank(l) {
            return Some("label: it shows nothing (only blank or zero-width characters)".into());
        }
    }
    let result_cols: Vec<&str> = std::iter::once("id").chain(RESULT_COLS.iter().copied()).collect();
    let cols = Columns { names: &result_cols, json: &["params_json", "notes"], prose: &["reason"] };
    for r in results {
        if let Some(found) = first_unsafe(&cols, r) {
            // Named by its position and probe, the probe escaped (it may be the culprit).
            let at = |name: &str| result_cols.iter().position(|c| *c == name).map(|i| r[i].t());
            let (seq, probe) = (at("seq").unwrap_or_default(), at("probe").unwrap_or_default());
            return Some(format!("result {seq} ({}) {found}", escape(&probe)));
        }
    }
    let cols = Columns { names: WARNING_COLS, json: &[], prose: &["message", "advice"] };
    if let Some(found) = warnings.iter().find_map(|w| first_unsafe(&cols, w)) {
        return Some(format!("warning {found}"));
    }
    let cols = Columns { names: TIMELINE_COLS, json: &["data"], prose: &[] };
    timelines.iter().find_map(|t| first_unsafe(&cols, t)).map(|found| format!("timeline {found}"))
}

/// Which columns of a table hold JSON, and which hold prose (line breaks allowed).
pub(crate) struct Columns<'a> {
    /// The column names, in the order of the rows' values.
    pub names: &'a [&'a str],
    /// JSON columns; strings under a key in `json_prose` may break lines.
    pub json: &'a [&'a str],
    /// Text columns that may break lines.
    pub prose: &'a [&'a str],
}

/// JSON object keys under which strings are prose: the doctor findings' readings and
/// explanations, and everything in a timeline (`data`).
const JSON_PROSE: &[&str] = &["doctor", "data"];

/// The first unsafe text of `row`, as `field: U+001B (escape)` (the field named as its
/// column, a JSON path below it: `machine.host`, `params_json.size`).
pub(crate) fn first_unsafe(cols: &Columns<'_>, row: &[V]) -> Option<String> {
    for (name, v) in cols.names.iter().zip(row) {
        let V::T(text) = v else { continue };
        if cols.json.contains(name) {
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
                if let Some(found) = in_json(&value, name, JSON_PROSE.contains(name)) {
                    return Some(found);
                }
                continue;
            }
        }
        if let Some(c) = find_unsafe(text, cols.prose.contains(name)) {
            return Some(format!("{name}: {}", describe(c)));
        }
    }
    None
}

fn in_json(v: &serde_json::Value, path: &str, prose: bool) -> Option<String> {
    use serde_json::Value;
    match v {
        Value::String(s) => find_unsafe(s, prose).map(|c| format!("{path}: {}", describe(c))),
        Value::Array(items) => {
            items.iter().enumerate().find_map(|(i, x)| in_json(x, &format!("{path}[{i}]"), prose))
        }
        Value::Object(map) => map.iter().find_map(|(k, x)| {
            let at = format!("{path}.{}", escape(k));
            match find_unsafe(k, false) {
                Some(c) => Some(format!("{at} (a key): {}", describe(c))),
                None => in_json(x, &at, prose || JSON_PROSE.contains(&k.as_str())),
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: Columns<'static> =
        Columns { names: &["label", "reason", "machine"], json: &["machine"], prose: &["reason"] };

    fn row(label: &str, reason: &str, machine: &str) -> Vec<V> {
        vec![V::T(label.into()), V::T(reason.into()), V::T(machine.into())]
    }

    #[test]
    fn each_field_is_named_with_the_character_it_holds() {
        let ok = row("base", "line 1\nline 2", r#"{"host":"a","doctor":[{"reading":"x\ny"}]}"#);
        assert_eq!(first_unsafe(&COLS, &ok), None, "prose and doctor readings may break lines");
        let label = row("a\u{1b}[2J", "", "{}");
        assert_eq!(first_unsafe(&COLS, &label).unwrap(), "label: U+001B (escape)");
        let nl = row("a\nb", "", "{}");
        assert_eq!(first_unsafe(&COLS, &nl).unwrap(), "label: U+000A (line feed)");
        let reason = row("a", "x\u{7}", "{}");
        assert_eq!(first_unsafe(&COLS, &reason).unwrap(), "reason: U+0007 (bell)");
        let host = row("a", "", r#"{"host":"h\n| forged"}"#);
        assert_eq!(first_unsafe(&COLS, &host).unwrap(), "machine.host: U+000A (line feed)");
        let key = row("a", "", r#"{"k\u202e":"v"}"#);
        assert_eq!(
            first_unsafe(&COLS, &key).unwrap(),
            "machine.k\\u{202e} (a key): U+202E (bidirectional control)"
        );
    }
}
