//! The CI gate of `schedlab compare --fail-on regression[=PCT]`: each result of each run
//! judged against the baseline, and the summaries a CI system reads (JUnit XML, Markdown).
//!
//! A result is a **regression** when the comparison's own verdict says it is worse beyond
//! noise — its median's 95% interval does not overlap the baseline's, on the worse side for
//! its unit (time per operation: higher is worse; bandwidth and rates: lower is worse; the
//! direction stored with the result, which its probe's unit gives) — and, when a minimum
//! effect PCT is given, it is worse by at least PCT percent (a time `≥ base × (1 + PCT/100)`,
//! a rate `≤ base × (1 − PCT/100)`). A result measured in the baseline and failed in the
//! other run is a regression too (a probe the change broke). Runs of another machine than
//! the baseline's are judged only when asked (`--across-machines`): one machine's noise
//! says nothing about another's.

use schedlab_measure::model::{Better, Measurement, Outcome, Run};
use schedlab_measure::stats::Verdict;
use schedlab_measure::text::escape;

use crate::units::{human, percent};
use crate::views::{comparison_rows, same_machine, verdict_text};

/// What one result of one run is, against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Worse beyond noise (and by at least the minimum effect): the gate fails.
    Regression,
    /// Measured in the baseline, failed or interrupted here: the gate fails.
    Lost,
    /// Better beyond noise.
    Improvement,
    /// Worse beyond noise, but by less than the minimum effect.
    BelowFloor,
    /// The intervals overlap.
    WithinNoise,
    /// Made on another machine than the baseline's: only the ratio is shown.
    OtherMachine,
    /// Not in both runs with a summary (missing, skipped, failed in the baseline).
    NotCompared,
}

impl Kind {
    /// Whether this fails the gate.
    pub fn fails(self) -> bool {
        matches!(self, Kind::Regression | Kind::Lost)
    }

    /// Whether this is a change beyond noise (`--only changes`).
    pub fn changed(self) -> bool {
        matches!(self, Kind::Regression | Kind::Lost | Kind::Improvement | Kind::BelowFloor)
    }
}

/// One result of one run judged against the baseline.
#[derive(Debug, Clone)]
pub struct Judged<'a> {
    /// The probe.
    pub probe: String,
    /// Its parameters' key.
    pub params: String,
    /// The index of the run (into the compared runs).
    pub run: usize,
    /// The baseline's result, if it has one.
    pub base: Option<&'a Measurement>,
    /// This run's result, if it has one.
    pub new: Option<&'a Measurement>,
    /// The comparison's verdict, where both have a summary.
    pub verdict: Option<Verdict>,
    /// What it is.
    pub kind: Kind,
}

impl Judged<'_> {
    /// In words: `×1.32 worse`, `failed in NEW: reason`, `not measured by NEW`.
    pub fn describe(&self) -> String {
        match (self.kind, &self.verdict) {
            (Kind::Lost, _) => {
                let why = self.new.and_then(|m| m.outcome.reason()).unwrap_or("");
                format!(
                    "{}{}",
                    self.new.map_or("missing", |m| m.outcome.key()),
                    if why.is_empty() { String::new() } else { format!(": {why}") }
                )
            }
            (Kind::BelowFloor, Some(v)) => {
                format!("{} (below the minimum effect)", verdict_text(v))
            }
            (Kind::OtherMachine, Some(v)) => format!("×{:.2} other machine", v.ratio),
            (_, Some(v)) => verdict_text(v),
            (_, None) => match (self.base, self.new) {
                (None, _) => "not in the baseline".into(),
                (_, None) => "not measured".into(),
                (_, Some(m)) if m.outcome != Outcome::Ok => m.outcome.key().into(),
                _ => "not compared".into(),
            },
        }
    }
}

/// Whether the gate fails: a regression, or nothing judged at all.
pub fn fails(judged: &[Judged<'_>]) -> bool {
    let c = counts(judged);
    c.regressions > 0 || c.compared == 0
}

/// Judges every result of every run but the baseline; `min_effect` is PCT as a fraction
/// (0.05 for 5%; 0 for none); `across`: judge runs of other machines too.
pub fn judge(runs: &[Run], baseline: usize, min_effect: f64, across: bool) -> Vec<Judged<'_>> {
    let mut out = Vec::new();
    for row in comparison_rows(runs, baseline) {
        for (i, new) in row.results.iter().enumerate() {
            if i == baseline {
                continue;
            }
            let base = row.results[baseline];
            let verdict = row.verdicts[i];
            let other = !same_machine(&runs[i], &runs[baseline]);
            let kind = match (&verdict, base, new) {
                (Some(_), _, _) if other && !across => Kind::OtherMachine,
                (Some(v), Some(b), _) if !v.within_noise && !v.improved => {
                    if worse_by(v.ratio, b.better) >= min_effect {
                        Kind::Regression
                    } else {
                        Kind::BelowFloor
                    }
                }
                (Some(v), _, _) if !v.within_noise => Kind::Improvement,
                (Some(_), _, _) => Kind::WithinNoise,
                (None, Some(b), Some(n))
                    if b.outcome == Outcome::Ok
                        && matches!(n.outcome, Outcome::Failed(_) | Outcome::Interrupted)
                        && (!other || across) =>
                {
                    Kind::Lost
                }
                _ => Kind::NotCompared,
            };
            out.push(Judged {
                probe: row.probe.clone(),
                params: row.params.clone(),
                run: i,
                base,
                new: *new,
                verdict,
                kind,
            });
        }
    }
    out
}

/// How much worse a ratio (run / baseline) is, as a fraction: a time 1.3× the baseline's is
/// 0.3 worse, a rate 0.7× the baseline's is 0.3 worse; negative when better.
fn worse_by(ratio: f64, better: Better) -> f64 {
    match better {
        Better::Lower => ratio - 1.0,
        Better::Higher => 1.0 - ratio,
    }
}

/// The counts of a judgement: results compared, failing the gate, better, within noise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Results judged (a verdict or a loss).
    pub compared: usize,
    /// Failing the gate.
    pub regressions: usize,
    /// Better beyond noise.
    pub improvements: usize,
    /// Within noise, or worse by less than the minimum effect.
    pub within: usize,
}

/// Counts `judged`.
pub fn counts(judged: &[Judged<'_>]) -> Counts {
    let mut c = Counts::default();
    for j in judged {
        match j.kind {
            Kind::Regression | Kind::Lost => c.regressions += 1,
            Kind::Improvement => c.improvements += 1,
            Kind::WithinNoise | Kind::BelowFloor => c.within += 1,
            Kind::OtherMachine | Kind::NotCompared => continue,
        }
        c.compared += 1;
    }
    c
}

/// A value with its interval for a summary: `12.30 µs [12.10, 12.52]`.
fn value(m: Option<&Measurement>) -> String {
    match m.and_then(|m| Some((m, m.summary.as_ref()?))) {
        Some((m, s)) if m.outcome == Outcome::Ok => format!(
            "{} ±{} [{}, {}]",
            human(s.median, m.unit),
            percent(s.ci_rel_halfwidth()).trim_start_matches('±'),
            human(s.ci_low, m.unit),
            human(s.ci_high, m.unit)
        ),
        Some((m, _)) => m.outcome.key().into(),
        None => m.map_or("—".into(), |m| m.outcome.key().into()),
    }
}

/// Escapes text for XML attributes and content.
fn xml(s: &str) -> String {
    let s = escape(s);
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

/// The JUnit XML report (the format Jenkins, GitLab and GitHub's test reporters read): one
/// `<testsuite>` per run compared with the baseline, one `<testcase>` per result (class
/// name the probe, name its parameters), a `<failure>` for each regression, `<skipped>` for
/// results not compared.
pub fn junit(runs: &[Run], baseline: usize, judged: &[Judged<'_>]) -> String {
    let base_name = runs[baseline].meta.display_name();
    let mut suites = String::new();
    let (mut total, mut failed) = (0, 0);
    for (i, run) in runs.iter().enumerate().filter(|(i, _)| *i != baseline) {
        let mine: Vec<&Judged> = judged.iter().filter(|j| j.run == i).collect();
        let f = mine.iter().filter(|j| j.kind.fails()).count();
        let skipped = mine
            .iter()
            .filter(|j| matches!(j.kind, Kind::NotCompared | Kind::OtherMachine))
            .count();
        total += mine.len();
        failed += f;
        suites.push_str(&format!(
            "  <testsuite name=\"{} vs {}\" tests=\"{}\" failures=\"{f}\" errors=\"0\" skipped=\"{skipped}\" timestamp=\"{}\">\n",
            xml(&run.meta.display_name()),
            xml(&base_name),
            mine.len(),
            xml(run.meta.started_at.trim_end_matches('Z'))
        ));
        for j in mine {
            let name = if j.params.is_empty() { j.probe.clone() } else { j.params.clone() };
            suites.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml(&j.probe),
                xml(&name)
            ));
            let detail = format!("baseline {}; this run {}", value(j.base), value(j.new));
            match j.kind {
                Kind::Regression | Kind::Lost => suites.push_str(&format!(
                    ">\n      <failure type=\"regression\" message=\"{}\">{}</failure>\n    </testcase>\n",
                    xml(&format!("{} beyond noise", j.describe())),
                    xml(&detail)
                )),
                Kind::NotCompared | Kind::OtherMachine => suites.push_str(&format!(
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    xml(&j.describe())
                )),
                _ => suites.push_str(&format!(
                    ">\n      <system-out>{}: {}</system-out>\n    </testcase>\n",
                    xml(&j.describe()),
                    xml(&detail)
                )),
            }
        }
        suites.push_str("  </testsuite>\n");
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"schedlab compare\" tests=\"{total}\" failures=\"{failed}\">\n{suites}</testsuites>\n"
    )
}

/// The one-line verdict of the gate: `FAIL: 2 regressions beyond noise (…)` or `PASS: …`.
pub fn verdict_line(judged: &[Judged<'_>], min_effect: f64) -> String {
    let c = counts(judged);
    let floor = if min_effect > 0.0 {
        format!(", worse by at least {}%", min_effect * 100.0)
    } else {
        String::new()
    };
    let tally = format!(
        "{} results compared: {} worse beyond noise{floor}, {} better, {} within noise",
        c.compared, c.regressions, c.improvements, c.within
    );
    if c.compared == 0 {
        let other = judged.iter().any(|j| j.kind == Kind::OtherMachine);
        return format!(
            "FAIL: no result was judged against the baseline{}: a gate that checked nothing does not pass",
            if other {
                " (the runs are of other machines; --across-machines judges them anyway)"
            } else {
                " (no result measured in both runs)"
            }
        );
    }
    if c.regressions > 0 {
        let names: Vec<String> = judged
            .iter()
            .filter(|j| j.kind.fails())
            .take(10)
            .map(|j| {
                let p = if j.params.is_empty() { String::new() } else { format!(" {}", j.params) };
                format!("{}{p} {}", j.probe, j.describe())
            })
            .collect();
        let more = if c.regressions > names.len() {
            format!(" and {} more", c.regressions - names.len())
        } else {
            String::new()
        };
        escape(&format!("FAIL: {tally}; {}{more}", names.join("; "))).into_owned()
    } else {
        format!("PASS: {tally}")
    }
}

/// The Markdown summary for a CI system's job page (`$GITHUB_STEP_SUMMARY`, a merge
/// request note): a heading naming the runs, the gate's verdict, and the results that
/// `keep` keeps as a table (run, result, baseline and run values with their intervals,
/// the verdict).
pub fn markdown(
    runs: &[Run],
    baseline: usize,
    judged: &[Judged<'_>],
    min_effect: f64,
    keep: &dyn Fn(&Judged<'_>) -> bool,
) -> String {
    let others: Vec<String> = runs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != baseline)
        .map(|(_, r)| r.meta.display_name())
        .collect();
    let mut t = crate::table::Table::new(&[
        ("run", crate::table::Align::Left),
        ("probe", crate::table::Align::Left),
        ("params", crate::table::Align::Left),
        ("baseline", crate::table::Align::Right),
        ("this run", crate::table::Align::Right),
        ("verdict", crate::table::Align::Left),
    ]);
    for j in judged.iter().filter(|j| keep(j)) {
        t.row(vec![
            runs[j.run].meta.display_name(),
            j.probe.clone(),
            j.params.clone(),
            value(j.base),
            value(j.new),
            j.describe(),
        ]);
    }
    let mut out = format!(
        "## schedlab compare: {} against {}\n\n**{}**\n\n",
        others.join(", "),
        runs[baseline].meta.display_name(),
        verdict_line(judged, min_effect)
    );
    if t.is_empty() {
        out.push_str("No result to show.\n");
    } else {
        out.push_str(&t.to_markdown());
    }
    out.push_str("\nMedian ±half-width of its 95% interval [the interval]; a result is worse beyond noise when the intervals do not overlap.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Params, RunMeta, RunStatus, Unit};
    use schedlab_measure::stats::Summary;

    fn m(probe: &str, unit: Unit, v: &[f64]) -> Measurement {
        Measurement {
            summary: Summary::of(v),
            ..Measurement::without_samples(probe, Params::new(), unit, Outcome::Ok, 0.0)
        }
    }

    fn run(id: i64, results: Vec<Measurement>) -> Run {
        let mut meta = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "x"));
        meta.id = id;
        meta.label = Some(format!("r{id}"));
        meta.status = RunStatus::Complete;
        Run { meta, results, warnings: vec![] }
    }

    fn around(x: f64) -> Vec<f64> {
        (0..9).map(|i| x * (1.0 + (i as f64 - 4.0) * 0.002)).collect()
    }

    #[test]
    fn worse_is_up_for_times_and_down_for_rates() {
        let base = run(
            1,
            vec![
                m("t.slower", Unit::Nanos, &around(100.0)),
                m("t.faster", Unit::Nanos, &around(100.0)),
                m("r.lower", Unit::OpsPerSec, &around(100.0)),
                m("r.higher", Unit::MibPerSec, &around(100.0)),
                m("same", Unit::Nanos, &around(100.0)),
            ],
        );
        let new = run(
            2,
            vec![
                m("t.slower", Unit::Nanos, &around(130.0)),
                m("t.faster", Unit::Nanos, &around(70.0)),
                m("r.lower", Unit::OpsPerSec, &around(70.0)),
                m("r.higher", Unit::MibPerSec, &around(130.0)),
                m("same", Unit::Nanos, &around(100.0)),
            ],
        );
        let runs = [base, new];
        let kinds: Vec<(String, Kind)> =
            judge(&runs, 0, 0.0, false).into_iter().map(|j| (j.probe, j.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                ("t.slower".into(), Kind::Regression),
                ("t.faster".into(), Kind::Improvement),
                ("r.lower".into(), Kind::Regression),
                ("r.higher".into(), Kind::Improvement),
                ("same".into(), Kind::WithinNoise),
            ]
        );
        // A 40% floor keeps the 30% regressions beyond noise but lets them pass.
        let floored = judge(&runs, 0, 0.4, false);
        assert!(floored.iter().all(|j| !j.kind.fails()), "{floored:?}");
        assert_eq!(floored[0].kind, Kind::BelowFloor);
        assert!(verdict_line(&floored, 0.4).starts_with("PASS"));
        assert!(verdict_line(&judge(&runs, 0, 0.0, false), 0.0)
            .starts_with("FAIL: 5 results compared: 2 worse"));
    }

    #[test]
    fn a_gate_that_judged_nothing_fails() {
        let base = run(1, vec![m("p", Unit::Nanos, &around(1.0))]);
        let mut other = run(2, vec![m("p", Unit::Nanos, &around(1.0))]);
        other.meta.machine.host = "elsewhere".into();
        let runs = [base, other];
        let j = judge(&runs, 0, 0.0, false);
        assert_eq!(j[0].kind, Kind::OtherMachine);
        assert!(fails(&j));
        assert!(verdict_line(&j, 0.0).contains("--across-machines"), "{}", verdict_line(&j, 0.0));
        assert!(!fails(&judge(&runs, 0, 0.0, true)), "judged across machines: within noise");
    }

    #[test]
    fn a_probe_that_now_fails_is_a_regression() {
        let base = run(1, vec![m("p", Unit::Nanos, &around(1.0))]);
        let mut broken = m("p", Unit::Nanos, &[]);
        broken.outcome = Outcome::Failed("EPERM".into());
        let runs = [base, run(2, vec![broken])];
        let j = judge(&runs, 0, 0.0, false);
        assert_eq!(j[0].kind, Kind::Lost);
        assert_eq!(j[0].describe(), "failed: EPERM");
    }

    #[test]
    fn junit_has_a_failure_per_regression_and_escapes_names() {
        let base =
            run(1, vec![m("a<b>", Unit::Nanos, &around(100.0)), m("c", Unit::Nanos, &around(1.0))]);
        let mut new = run(2, vec![m("a<b>", Unit::Nanos, &around(200.0))]);
        new.meta.label = Some("new & \"improved\"".into());
        let runs = [base, new];
        let j = judge(&runs, 0, 0.0, false);
        let x = junit(&runs, 0, &j);
        assert!(
            x.contains("<testsuites name=\"schedlab compare\" tests=\"2\" failures=\"1\">"),
            "{x}"
        );
        assert!(x.contains("name=\"new &amp; &quot;improved&quot; vs r1\""), "{x}");
        assert!(x.contains("classname=\"a&lt;b&gt;\""), "{x}");
        assert!(
            x.contains("<failure type=\"regression\" message=\"×2.00 worse beyond noise\">"),
            "{x}"
        );
        assert!(x.contains("<skipped message=\"not measured\"/>"), "{x}");
        crate::svg::tests::well_formed(
            &x.replace("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", ""),
        )
        .unwrap();
        let md = markdown(&runs, 0, &j, 0.0, &|j| j.kind.fails());
        assert!(md.contains("**FAIL: 1 results compared: 1 worse beyond noise"), "{md}");
        assert!(md.contains("| new & \"improved\" | a<b> |"), "{md}");
        assert!(!md.contains("| c |"), "only the regressions were kept: {md}");
    }
}
