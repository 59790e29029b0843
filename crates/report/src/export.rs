//! Export formats, one small type each, all rendering the same [`Run`].
//!
//! JSON is meant to be consumed by programs: one object per result with `probe`, `params`
//! (an object of strings), `unit`, `median` and the rest of the summary, and the raw samples.
//! CSV is one line per result with the summary. Markdown is the run header, the results table
//! and the warnings, ready to paste into a report.

use serde::Serialize;
use serde_json::{json, Map, Value};

use schedlab_measure::model::{Params, Run};

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

fn object(p: &Params) -> Value {
    Value::Object(
        p.0.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<Map<_, _>>(),
    )
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("model types always serialise")
}

impl Format for Json {
    fn render(&self, run: &Run) -> String {
        let m = &run.meta;
        let results: Vec<Value> = run
            .results
            .iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("probe".into(), json!(r.probe));
                o.insert("params".into(), object(&r.params));
                o.insert("unit".into(), json!(r.unit.key()));
                o.insert("better".into(), json!(r.better.key()));
                o.insert("status".into(), json!(r.outcome.key()));
                o.insert("reason".into(), json!(r.outcome.reason()));
                if let Some(s) = &r.summary {
                    if let Value::Object(summary) = to_value(s) {
                        o.extend(summary);
                    }
                }
                o.insert("iters_per_sample".into(), json!(r.iters_per_sample));
                o.insert("overhead_ns_per_iter".into(), json!(r.overhead_ns_per_iter));
                o.insert("notes".into(), object(&r.notes));
                o.insert("noise".into(), to_value(&r.noise));
                o.insert("wall_s".into(), json!(r.wall_s));
                o.insert("samples".into(), to_value(&r.samples));
                Value::Object(o)
            })
            .collect();
        let doc = json!({
            "format": "schedlab-run/1",
            "run": {
                "id": m.id,
                "label": m.label,
                "suite": m.suite,
                "status": m.status.key(),
                "started_at": m.started_at,
                "finished_at": m.finished_at,
                "filters": m.filters,
                "version": m.version,
                "git_rev": m.git_rev,
                "settings": object(&m.settings),
                "calibration": m.calibration,
                "machine": m.machine,
            },
            "results": results,
            "warnings": run.warnings,
        });
        let mut s = serde_json::to_string_pretty(&doc).expect("JSON values always serialise");
        s.push('\n');
        s
    }
}

/// Quotes a CSV field when it needs it (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl Format for Csv {
    fn render(&self, run: &Run) -> String {
        let mut out = String::from(
            "run_id,run,probe,params,unit,better,status,reason,n,median,ci_low,ci_high,ci_level,min,max,mean,stddev,p5,p95,cv,outliers,iters_per_sample,notes\n",
        );
        let name = run.meta.display_name();
        for r in &run.results {
            let num = |f: &dyn Fn(&schedlab_measure::stats::Summary) -> f64| {
                r.summary.as_ref().map(|s| format!("{}", f(s))).unwrap_or_default()
            };
            let fields = [
                run.meta.id.to_string(),
                name.clone(),
                r.probe.clone(),
                r.params.key(),
                r.unit.key().to_string(),
                r.better.key().to_string(),
                r.outcome.key().to_string(),
                r.outcome.reason().unwrap_or("").to_string(),
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
                r.notes.key(),
            ];
            let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
            out.push_str(&line.join(","));
            out.push('\n');
        }
        out
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
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_only_when_needed() {
        assert_eq!(csv_field("procs=2"), "procs=2");
        assert_eq!(csv_field("procs=2,size=0k"), "\"procs=2,size=0k\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
