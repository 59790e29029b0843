//! `schedlab doctor` on screen, in Markdown and as JSON, and the doctor findings stored with
//! a run as `show` and `compare` print them.

use schedlab_measure::doctor::{differences, Finding};
use schedlab_measure::model::Run;
use serde::Serialize;

use crate::table::{Align, Table};

/// The JSON document `schedlab doctor --json` prints.
#[derive(Debug, Serialize)]
pub struct DoctorJson<'a> {
    /// Host name.
    pub host: &'a str,
    /// Kernel release (`uname -r`).
    pub kernel: &'a str,
    /// schedlab's version.
    pub schedlab: &'a str,
    /// The findings, each with its value or why it is unknown, its source and what it changes.
    pub findings: &'a [Finding],
}

/// Finding, value and where it was read, one row each.
pub fn findings_table(findings: &[Finding], with_changes: bool) -> Table {
    let mut cols =
        vec![("finding", Align::Left), ("value", Align::Left), ("read from", Align::Left)];
    if with_changes {
        cols.push(("what it changes", Align::Left));
    }
    let mut t = Table::new(&cols);
    for f in findings {
        t.row(vec![f.name.clone(), f.reading.text(), f.source.clone(), f.changes.clone()]);
    }
    t
}

/// `schedlab doctor`: the table, then what each finding changes (a terminal is too narrow
/// for it as a column); with `markdown` one table with all four columns.
pub fn doctor_text(findings: &[Finding], host: &str, kernel: &str, markdown: bool) -> String {
    let mut text = format!("schedlab doctor: {host}, kernel {kernel}\n\n");
    if markdown {
        text.push_str(&findings_table(findings, true).to_markdown());
        return text;
    }
    text.push_str(&findings_table(findings, false).to_terminal());
    text.push_str("\nwhat each changes:\n");
    for f in findings {
        text.push_str(&format!("  {}: {}\n", f.name, f.changes));
    }
    text
}

/// The doctor findings stored with a run, for `show` (nothing for runs made before they
/// were stored).
pub fn run_findings_text(run: &Run) -> String {
    let f = &run.meta.machine.doctor;
    if f.is_empty() {
        return String::new();
    }
    let mut t = Table::new(&[("finding", Align::Left), ("value", Align::Left)]);
    for x in f {
        t.row(vec![x.name.clone(), x.reading.text()]);
    }
    format!("\nkernel and platform when the run started (schedlab doctor):\n{}", t.to_terminal())
}

/// For `compare`: one line per run whose stored findings differ from the baseline's, naming
/// each difference with the run's own value first, as the line's subject is the run
/// (`r2 differs from r1: timer slack 1 ns, not 50000 ns`).
pub fn differing_lines(runs: &[Run], baseline: usize) -> Vec<String> {
    let base = &runs[baseline];
    let mut lines = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        if i == baseline {
            continue;
        }
        let (a, b) = (&base.meta.machine.doctor, &r.meta.machine.doctor);
        if a.is_empty() || b.is_empty() {
            continue;
        }
        let diffs = differences(a, b);
        if diffs.is_empty() {
            continue;
        }
        let list: Vec<String> =
            diffs.iter().map(|(name, base, ours)| format!("{name} {ours}, not {base}")).collect();
        let line = format!(
            "{} differs from {}: {}",
            r.meta.display_name(),
            base.meta.display_name(),
            list.join("; ")
        );
        lines.push(schedlab_measure::text::escape(&line).into_owned());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::doctor::Reading;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::RunMeta;

    fn finding(key: &str, name: &str, value: &str) -> Finding {
        Finding {
            key: key.into(),
            name: name.into(),
            reading: Reading::Known(value.into()),
            source: "prctl(PR_GET_TIMERSLACK)".into(),
            changes: String::new(),
        }
    }

    fn run(id: i64, findings: Vec<Finding>) -> Run {
        let mut m = Machine::fingerprint();
        m.doctor = findings;
        let mut meta = RunMeta::starting("quick", m, ("0.1.0", "x"));
        meta.id = id;
        meta.label = Some(format!("r{id}"));
        Run { meta, results: vec![], warnings: vec![] }
    }

    #[test]
    fn compare_names_the_findings_that_differ() {
        let a = run(
            1,
            vec![finding("timer_slack", "timer slack", "50000 ns"), finding("hz", "HZ", "250")],
        );
        let b =
            run(2, vec![finding("timer_slack", "timer slack", "1 ns"), finding("hz", "HZ", "250")]);
        let c = run(
            3,
            vec![finding("timer_slack", "timer slack", "50000 ns"), finding("hz", "HZ", "250")],
        );
        let old = run(4, vec![]);
        let lines = differing_lines(&[a, b, c, old], 0);
        // The run named first, its value first: r2 has 1 ns, the baseline r1 50000 ns.
        assert_eq!(lines, vec!["r2 differs from r1: timer slack 1 ns, not 50000 ns".to_string()]);
    }

    #[test]
    fn unknown_values_show_their_reason_and_every_format_has_every_finding() {
        let mut f = vec![finding("timer_slack", "timer slack", "50000 ns")];
        f.push(Finding {
            reading: Reading::Unknown("/proc/config.gz: permission denied".into()),
            changes: "the tick | period".into(),
            ..finding("hz", "HZ", "")
        });
        let term = doctor_text(&f, "h", "6.18", false);
        assert!(term.contains("unknown (/proc/config.gz: permission denied)"), "{term}");
        assert!(term.contains("HZ: the tick | period"), "{term}");
        let md = doctor_text(&f, "h", "6.18", true);
        assert!(md.contains("| HZ | unknown (/proc/config.gz: permission denied) |"), "{md}");
        assert!(md.contains("the tick \\| period"), "{md}");
        let r = run(1, f.clone());
        let exported = crate::export::Format::render(&crate::export::Markdown, &r);
        assert!(exported.contains("## Kernel and platform (schedlab doctor)"), "{exported}");
        assert!(exported.contains("| timer slack | 50000 ns |"), "{exported}");
        let html = crate::html::page(std::slice::from_ref(&r), 0, &[], "0.1.0");
        assert!(html.contains("kernel and platform (schedlab doctor)"));
        assert!(html.contains("unknown (/proc/config.gz: permission denied)"));
        let shown = run_findings_text(&run(1, f));
        assert!(shown.contains("timer slack") && shown.contains("50000 ns"), "{shown}");
        assert_eq!(run_findings_text(&run(2, vec![])), "");
    }
}
