//! The crosscheck table: each reference tool's figure beside the probe's, the median of the
//! pair ratios and the verdict (see `schedlab_probes::crosscheck`).
//!
//! Built only from stored results (their notes carry the tool's figures, the ratios, the
//! verdict and the definition), so `schedlab crosscheck` prints it as it goes and `schedlab
//! show` prints the same table for the stored run. Under the table, the definitions of the
//! rows that differ, disagree or have no probe, and the reasons of rows that were skipped or
//! failed: a verdict is never shown without its explanation.

use schedlab_measure::model::{Measurement, Outcome, Run};
use schedlab_measure::units::human;

use crate::table::{Align, Table};

/// The columns.
pub const COLUMNS: &[(&str, Align)] = &[
    ("reference", Align::Left),
    ("probe", Align::Left),
    ("params", Align::Left),
    ("tool", Align::Right),
    ("schedlab", Align::Right),
    ("ratio", Align::Right),
    ("pair ratios", Align::Left),
    ("verdict", Align::Left),
];

/// An empty table with [`COLUMNS`].
pub fn table() -> Table {
    Table::new(COLUMNS)
}

/// One row for `m`, a crosscheck result.
pub fn cells(m: &Measurement) -> Vec<String> {
    let note = |k: &str| m.notes.get(k).unwrap_or("").to_string();
    let params: Vec<String> =
        m.params.0.iter().filter(|(k, _)| k != "vs").map(|(k, v)| format!("{k}={v}")).collect();
    let reference = m.notes.get("tool").or_else(|| m.params.get("vs")).unwrap_or("-").to_string();
    let probe = if m.probe.starts_with("crosscheck.") { "-".to_string() } else { m.probe.clone() };
    let mut cells = vec![reference, probe, params.join(",")];
    match (&m.outcome, &m.summary) {
        (Outcome::Ok, Some(s)) => {
            let no_probe = m.probe.starts_with("crosscheck.");
            cells.push(if no_probe { human(s.median, m.unit) } else { note("tool_median") });
            cells.push(if no_probe { "-".into() } else { human(s.median, m.unit) });
            cells.push(m.notes.get("ratio").map_or("-".into(), |r| format!("×{r}")));
            let mut pairs = note("pair_ratios");
            if let Some(p) =
                m.notes.get("pairs").filter(|p| p.split('/').next() != p.split('/').nth(1))
            {
                pairs.push_str(&format!(" ({p} pairs)"));
            }
            cells.push(pairs);
            cells.push(note("verdict"));
        }
        (outcome, _) => {
            cells.push(note("tool_median"));
            cells.extend([
                "".into(),
                m.notes.get("ratio").map_or("".into(), |r| format!("×{r}")),
                "".into(),
            ]);
            cells.push(outcome.key().to_string());
        }
    }
    cells
}

/// The explanations under the table: the definition of every row that differs, disagrees or
/// has no probe, and why rows were skipped or failed.
pub fn footnotes(results: &[Measurement]) -> Vec<String> {
    let mut lines = Vec::new();
    for m in results {
        let id = m.notes.get("tool").or_else(|| m.params.get("vs")).unwrap_or(&m.probe);
        match &m.outcome {
            Outcome::Ok => {
                let verdict = m.notes.get("verdict").unwrap_or("");
                if verdict != "agrees"
                    || m.notes.get("definition").is_some_and(|d| d.starts_with("differs"))
                {
                    let def = m.notes.get("definition").unwrap_or("");
                    lines.push(format!("{id} [{verdict}] definition {def}"));
                }
            }
            Outcome::Skipped(why) => lines.push(format!("{id}: skipped: {why}")),
            Outcome::Failed(why) => lines.push(format!("{id}: FAILED: {why}")),
            Outcome::Interrupted => lines.push(format!("{id}: interrupted")),
        }
    }
    // A reason is a tool's own output: one line each, nothing that drives the terminal.
    lines.into_iter().map(|l| schedlab_measure::text::escape(&l).into_owned()).collect()
}

/// A one-line count: `12 agree, 3 differ (stated), 0 disagree, 1 without a probe, 2 skipped, 0 failed`.
pub fn summary(results: &[Measurement]) -> String {
    let count = |v: &str| {
        results
            .iter()
            .filter(|m| m.outcome == Outcome::Ok && m.notes.get("verdict") == Some(v))
            .count()
    };
    let skipped = results.iter().filter(|m| matches!(m.outcome, Outcome::Skipped(_))).count();
    let failed = results.iter().filter(|m| matches!(m.outcome, Outcome::Failed(_))).count();
    format!(
        "{} agree within 15%, {} differ by definition, {} DISAGREE, {} without a matching probe, {skipped} skipped, {failed} failed",
        count("agrees"),
        count("differs"),
        count("DISAGREES"),
        count("no matching probe"),
    )
}

/// Whether `m` is a crosscheck row's result (its params name the row: `vs=ROW`), as a
/// crosscheck run and a study run (`schedlab run --suite study`) store them.
pub fn is_row(m: &Measurement) -> bool {
    m.params.get("vs").is_some()
}

/// The whole text: table, how to read it, summary, footnotes. `None` for a run that is not a
/// crosscheck and holds no crosscheck rows; for a run that holds rows among its other
/// results (a study), those rows.
pub fn text(run: &Run) -> Option<String> {
    if run.meta.suite == schedlab_probes::crosscheck::SUITE {
        return Some(results_text(&run.results));
    }
    let rows: Vec<Measurement> = run.results.iter().filter(|m| is_row(m)).cloned().collect();
    (!rows.is_empty()).then(|| results_text(&rows))
}

/// [`text`] for a list of results.
pub fn results_text(results: &[Measurement]) -> String {
    let mut t = table();
    for m in results {
        t.row(cells(m));
    }
    format!("{}{}", t.to_terminal(), explanation(results))
}

/// What follows the table: how to read it, the counts, the footnotes (`schedlab crosscheck`
/// prints it under the rows it printed as they ended).
pub fn explanation(results: &[Measurement]) -> String {
    let mut text = String::new();
    text.push_str(
        "\nratio = schedlab ÷ tool, the median of the pair ratios (pairs run A B, B A, ...); within ±15% the row agrees\n",
    );
    text.push_str(&format!("{}\n", summary(results)));
    let notes = footnotes(results);
    if !notes.is_empty() {
        text.push('\n');
        for n in notes {
            text.push_str(&format!("  {n}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::model::{Params, Sample, Unit};

    fn row(verdict: &str, def: &str) -> Measurement {
        let s = |v: f64| Sample {
            iters: 1,
            elapsed_ns: 1,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        let mut m = Measurement::of_samples(
            "os.pipe.latency",
            Params::new().with("placement", "same").with("vs", "lmbench.lat_pipe"),
            Unit::Micros,
            vec![s(2.0), s(2.1), s(1.9)],
            1.0,
        );
        m.notes = Params::new()
            .with("tool", "lmbench.lat_pipe")
            .with("definition", def)
            .with("tool_median", "1.900 µs")
            .with("pair_ratios", "1.05 1.02 1.08")
            .with("ratio", "1.050")
            .with("verdict", verdict)
            .with("pairs", "3/3");
        m
    }

    #[test]
    fn a_row_shows_both_figures_the_ratio_and_the_verdict() {
        let c = cells(&row("agrees", "matches: round trip"));
        assert_eq!(c[0], "lmbench.lat_pipe");
        assert_eq!(c[2], "placement=same", "the vs param is the reference column");
        assert_eq!(c[3], "1.900 µs");
        assert_eq!(c[5], "×1.050");
        assert_eq!(c[7], "agrees");
    }

    #[test]
    fn every_verdict_but_agreement_is_explained_under_the_table() {
        let skipped = Measurement::without_samples(
            "os.syscall.null",
            Params::new().with("vs", "perf.syscall.basic"),
            Unit::Nanos,
            Outcome::Skipped("perf not found on PATH".into()),
            0.0,
        );
        let results =
            vec![row("agrees", "matches: same"), row("DISAGREES", "matches: same op"), skipped];
        let notes = footnotes(&results);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("DISAGREES") && notes[0].contains("same op"));
        assert_eq!(notes[1], "perf.syscall.basic: skipped: perf not found on PATH");
        let s = summary(&results);
        assert!(s.starts_with("1 agree within 15%, 0 differ by definition, 1 DISAGREE"), "{s}");
        assert!(s.contains("1 skipped"), "{s}");
    }
}
