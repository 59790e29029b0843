//! Export formats, one small type each, all rendering the same [`Run`].
//!
//! JSON is meant to be consumed by programs: one object per result with `probe`, `params`
//! (an object of strings), `unit`, `median` and the rest of the summary, and the raw samples.
//! CSV is one line per result with the summary. Markdown is the run header, the results table
//! and the warnings, ready to paste into a report.
//!
//! Text from a run may have come from another machine or a crafted file. JSON keeps it
//! exactly (its own escaping makes every control character `\u001b`-style text). CSV and
//! Markdown are read by people, spreadsheets and terminals: their text cells are escaped
//! ([`schedlab_measure::text::escape`], one line each), and a CSV text cell that a spreadsheet
//! would run as a formula (`=HYPERLINK(...)`, `+`, `-`, `@`) gets a leading `'`, as OWASP's
//! "CSV Injection" advises; number columns are written by us from numbers and left alone, so
//! a negative median stays a number.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use schedlab_measure::clock::Calibration;
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Measurement, Params, Run, Sample, Warning};
use schedlab_measure::noise::Noise;
use schedlab_measure::stats::Summary;
use schedlab_measure::text::escape;

use crate::views;

/// A file format a run can be exported to.
pub trait Format {
    /// Renders the whole run.
    fn render(&self, run: &Run) -> String;
}

/// JSON, for programs.
#[derive(Debug, Default, Clone, Copy)]
pub struct Json;
/// CSV, one line per result.
#[derive(Debug, Default, Clone, Copy)]
pub struct Csv;
/// Markdown, for people.
#[derive(Debug, Default, Clone, Copy)]
pub struct Markdown;

/// Parameters as a JSON object of strings, in the order the probe declares them.
struct ParamsObject<'a>(&'a Params);

impl Serialize for ParamsObject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0 .0.len()))?;
        for (k, v) in &self.0 .0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// The `schedlab-run/1` document: the schema of the JSON export, field for field.
#[derive(Serialize)]
struct JsonDoc<'a> {
    format: &'static str,
    run: JsonRun<'a>,
    results: Vec<JsonResult<'a>>,
    warnings: &'a [Warning],
}

#[derive(Serialize)]
struct JsonRun<'a> {
    id: i64,
    label: &'a Option<String>,
    suite: &'a str,
    status: &'static str,
    started_at: &'a str,
    finished_at: &'a Option<String>,
    filters: &'a [String],
    version: &'a str,
    git_rev: &'a str,
    settings: ParamsObject<'a>,
    calibration: &'a Option<Calibration>,
    machine: &'a Machine,
}

/// One result: its identity, outcome, the summary's fields inline, and the raw samples.
#[derive(Serialize)]
struct JsonResult<'a> {
    probe: &'a str,
    params: ParamsObject<'a>,
    unit: &'static str,
    better: &'static str,
    status: &'static str,
    reason: Option<&'a str>,
    #[serde(flatten)]
    summary: &'a Option<Summary>,
    iters_per_sample: u64,
    overhead_ns_per_iter: f64,
    notes: ParamsObject<'a>,
    noise: &'a Option<Noise>,
    wall_s: f64,
    samples: &'a [Sample],
}

impl<'a> JsonResult<'a> {
    fn of(r: &'a Measurement) -> JsonResult<'a> {
        JsonResult {
            probe: &r.probe,
            params: ParamsObject(&r.params),
            unit: r.unit.key(),
            better: r.better.key(),
            status: r.outcome.key(),
            reason: r.outcome.reason(),
            summary: &r.summary,
            iters_per_sample: r.iters_per_sample,
            overhead_ns_per_iter: r.overhead_ns_per_iter,
            notes: ParamsObject(&r.notes),
            noise: &r.noise,
            wall_s: r.wall_s,
            samples: &r.samples,
        }
    }
}

impl Format for Json {
    fn render(&self, run: &Run) -> String {
        let m = &run.meta;
        let doc = JsonDoc {
            format: "schedlab-run/1",
            run: JsonRun {
                id: m.id,
                label: &m.label,
                suite: &m.suite,
                status: m.status.key(),
                started_at: &m.started_at,
                finished_at: &m.finished_at,
                filters: &m.filters,
                version: &m.version,
                git_rev: &m.git_rev,
                settings: ParamsObject(&m.settings),
                calibration: &m.calibration,
                machine: &m.machine,
            },
            results: run.results.iter().map(JsonResult::of).collect(),
            warnings: &run.warnings,
        };
        let s = serde_json::to_string_pretty(&doc).expect("the export types always serialise");
        let mut s = json_escape_unsafe(&s);
        s.push('\n');
        s
    }
}

/// `json` with every unsafe character ([`schedlab_measure::text::is_unsafe`]) that JSON
/// leaves raw — C1 controls such as the one-byte CSI U+009B, DEL, bidirectional overrides —
/// written as a JSON escape (`\u009b`): the same document for a parser, nothing that drives
/// the terminal it is printed to. Such characters only occur inside strings (serde_json
/// already escapes those below U+0020), so the line breaks of the layout are kept.
pub(crate) fn json_escape_unsafe(json: &str) -> String {
    use schedlab_measure::text::is_unsafe;
    if !json.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c != '\n' && is_unsafe(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{:04x}", u));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The CSV header: one column per field of [`Csv`]'s rows.
const CSV_HEADER: [&str; 23] = [
    "run_id",
    "run",
    "probe",
    "params",
    "unit",
    "better",
    "status",
    "reason",
    "n",
    "median",
    "ci_low",
    "ci_high",
    "ci_level",
    "min",
    "max",
    "mean",
    "stddev",
    "p5",
    "p95",
    "cv",
    "outliers",
    "iters_per_sample",
    "notes",
];

impl Format for Csv {
    fn render(&self, run: &Run) -> String {
        // RFC 4180 quoting (only where a field needs it) is the csv crate's default.
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        let io = "writing CSV to memory cannot fail";
        w.write_record(CSV_HEADER).expect(io);
        let name = run.meta.display_name();
        for r in &run.results {
            let num = |f: &dyn Fn(&Summary) -> f64| {
                r.summary.as_ref().map(|s| format!("{}", f(s))).unwrap_or_default()
            };
            let fields: [String; 23] = [
                run.meta.id.to_string(),
                csv_text(&name),
                csv_text(&r.probe),
                csv_text(&r.params.key()),
                r.unit.key().to_string(),
                r.better.key().to_string(),
                r.outcome.key().to_string(),
                csv_text(r.outcome.reason().unwrap_or("")),
                r.summary.as_ref().map(|s| s.n.to_string()).unwrap_or_default(),
                num(&|s| s.median),
                num(&|s| s.ci_low),
                num(&|s| s.ci_high),
                num(&|s| s.ci_level),
                num(&|s| s.min),
                num(&|s| s.max),
                num(&|s| s.mean),
                num(&|s| s.stddev),
                num(&|s| s.p5),
                num(&|s| s.p95),
                num(&|s| s.cv),
                r.summary.as_ref().map(|s| s.outliers.to_string()).unwrap_or_default(),
                r.iters_per_sample.to_string(),
                csv_text(&r.notes.key()),
            ];
            w.write_record(&fields).expect(io);
        }
        let bytes = w.into_inner().expect(io);
        String::from_utf8(bytes).expect("every field was a String")
    }
}

/// A CSV text cell: escaped to one line, and with a leading `'` when a spreadsheet would
/// read it as a formula (it starts with `=`, `+`, `-` or `@`, or their full-width forms) and
/// it is not simply a number (`-3` stays `-3`). OWASP, "CSV Injection".
fn csv_text(s: &str) -> String {
    let s = escape(s);
    let formula =
        s.starts_with(['=', '+', '-', '@', '\u{FF1D}', '\u{FF0B}', '\u{FF0D}', '\u{FF20}']);
    if formula && s.parse::<f64>().is_err() {
        format!("'{s}")
    } else {
        s.into_owned()
    }
}

impl Format for Markdown {
    fn render(&self, run: &Run) -> String {
        let mut out = format!("# schedlab run {}\n\n", run.meta.display_name());
        for line in views::run_header(&run.meta) {
            out.push_str(&format!("- {line}\n"));
        }
        out.push('\n');
        out.push_str(&views::run_table(run).to_markdown());
        if !run.warnings.is_empty() {
            out.push_str("\n## Warnings\n\n");
            for line in views::warning_lines(&run.warnings, usize::MAX) {
                match line.strip_prefix("    ") {
                    Some(detail) => out.push_str(&format!("  - {detail}\n")),
                    None => out.push_str(&format!("- {line}\n")),
                }
            }
        }
        if !run.meta.machine.doctor.is_empty() {
            out.push_str("\n## Kernel and platform (schedlab doctor)\n\n");
            out.push_str(
                &crate::doctor::findings_table(&run.meta.machine.doctor, false).to_markdown(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::model::{Outcome, RunMeta, Unit};

    /// A run labelled with a quote whose one result has two parameters (so a comma in the
    /// params key) and three samples, plus one skipped result.
    fn run() -> Run {
        let mut meta = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "abc"));
        meta.id = 7;
        meta.label = Some("say \"hi\"".into());
        let params = Params(vec![("procs".into(), "2".into()), ("size".into(), "0k".into())]);
        let sample = |v: f64| Sample {
            iters: 10,
            elapsed_ns: 100,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        let ok = Measurement::of_samples(
            "os.x",
            params,
            Unit::Micros,
            vec![sample(1.0), sample(2.0), sample(3.0)],
            0.5,
        );
        let skipped = Measurement::without_samples(
            "os.y",
            Params::new(),
            Unit::Micros,
            Outcome::Skipped("needs root, really".into()),
            0.0,
        );
        Run { meta, results: vec![ok, skipped], warnings: vec![] }
    }

    #[test]
    fn csv_round_trips_fields_that_need_quoting() {
        let text = Csv.render(&run());
        assert!(text.contains(",\"procs=2,size=0k\","), "{text}");
        assert!(text.contains("\"say \"\"hi\"\"\""), "{text}");
        let mut r = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), CSV_HEADER);
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[0][1], "say \"hi\"");
        assert_eq!(&rows[0][3], "procs=2,size=0k");
        assert_eq!(&rows[0][9], "2");
        assert_eq!(&rows[1][6], "skipped");
        assert_eq!(&rows[1][7], "needs root, really");
        assert_eq!(&rows[1][9], "", "a skipped result has no median");
    }

    #[test]
    fn csv_cells_cannot_drive_a_terminal_forge_rows_or_run_formulas() {
        let mut r = run();
        r.meta.label = Some("=HYPERLINK(\"http://evil\",\"x\")\r\nforged,row".into());
        r.results[0].params = Params(vec![("k".into(), "\x1b]8;;http://evil\x07v".into())]);
        r.results[0].notes = Params(vec![("n".into(), "-1".into())]);
        r.results[1].outcome = Outcome::Failed("@SUM(A1)\n\u{202e}".into());
        let text = Csv.render(&r);
        assert!(!text.contains(['\x1b', '\x07', '\r', '\u{202e}']), "{text:?}");
        assert_eq!(text.lines().count(), 3, "a header and two rows: {text}");
        let rows: Vec<csv::StringRecord> =
            csv::Reader::from_reader(text.as_bytes()).records().map(Result::unwrap).collect();
        assert!(rows[0][1].starts_with("'=HYPERLINK("), "{}", &rows[0][1]);
        assert_eq!(&rows[0][3], "k=\\u{1b}]8;;http://evil\\u{7}v");
        assert_eq!(&rows[1][7], "'@SUM(A1)\\n\\u{202e}");
        assert_eq!(csv_text("-3.5"), "-3.5", "a number is not a formula");
        assert_eq!(csv_text("-1+2"), "'-1+2");
        assert_eq!(&rows[0][9], "2", "number columns are left alone");
    }

    #[test]
    fn markdown_keeps_stored_text_in_its_cells_and_lines() {
        let mut r = run();
        r.meta.label = Some("l\n- forged item\x1b[2J".into());
        r.meta.machine.host = "h\n| forged | row |".into();
        r.results[1].outcome = Outcome::Failed("x\n| os.z | | forged |".into());
        r.warnings.push(Warning {
            kind: "k".into(),
            probe: None,
            severity: schedlab_measure::model::Severity::Warn,
            message: "m\n- forged warning".into(),
            advice: "a\x07".into(),
        });
        let text = Markdown.render(&r);
        assert!(!text.contains(['\x1b', '\x07']), "{text:?}");
        assert!(
            !text.lines().any(|l| l.starts_with("- forged")
                || l.starts_with("| forged")
                || l.starts_with("| os.z")),
            "{text}"
        );
    }

    #[test]
    fn json_keeps_stored_text_exactly() {
        let mut r = run();
        let hostile = "a\x1b[31m\r\n\u{202e}b\u{9b}1m\x7f\u{e0041}";
        r.meta.label = Some(hostile.into());
        let text = Json.render(&r);
        assert!(!text.chars().any(|c| c != '\n' && schedlab_measure::text::is_unsafe(c)), "{text}");
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["run"]["label"], hostile);
    }

    #[test]
    fn json_has_the_documented_shape() {
        let text = Json.render(&run());
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["format"], "schedlab-run/1");
        assert_eq!(doc["run"]["id"], 7);
        assert_eq!(doc["run"]["label"], "say \"hi\"");
        let ok = &doc["results"][0];
        assert_eq!(ok["params"]["procs"], "2");
        assert_eq!(ok["unit"], "us");
        assert_eq!(ok["status"], "ok");
        assert!(ok["reason"].is_null());
        assert_eq!(ok["median"], 2.0, "the summary's fields are inline");
        assert_eq!(ok["samples"].as_array().unwrap().len(), 3);
        let skipped = &doc["results"][1];
        assert_eq!(skipped["status"], "skipped");
        assert_eq!(skipped["reason"], "needs root, really");
        assert!(skipped.get("median").is_none());
        // Parameters keep the order the probe declares, not alphabetical order.
        let p = text.find("\"procs\"").unwrap();
        assert!(p < text.find("\"size\"").unwrap());
    }
}
