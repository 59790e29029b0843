//! The tables people read: a run's results, the machine it ran on, runs side by side, and
//! what a recorded timeline's threads got.

use schedlab_measure::model::{is_raw_note, Measurement, Outcome, Run, RunMeta, Warning};
use schedlab_measure::stats;
use schedlab_measure::text::escape;
use schedlab_measure::warnings::kind_heading;

use schedlab_measure::noise::Noise;
use schedlab_trace::results::Agreement;
use schedlab_trace::sampling::Overhead;
use schedlab_trace::stats::ThreadStats;

use crate::table::{Align, Table};
use crate::units::{human, human_ns, percent};

/// Columns of a run's result table.
pub const RESULT_COLUMNS: &[(&str, Align)] = &[
    ("probe", Align::Left),
    ("params", Align::Left),
    ("median", Align::Right),
    ("95% CI", Align::Right),
    ("CV", Align::Right),
    ("n", Align::Right),
    ("notes", Align::Left),
];

/// An empty table with [`RESULT_COLUMNS`].
pub fn result_table() -> Table {
    Table::new(RESULT_COLUMNS)
}

/// One row of the result table for `m`.
pub fn result_cells(m: &Measurement) -> Vec<String> {
    result_cells_except(m, &[])
}

/// Notes as `key`, `value` pairs, in their stored order.
pub type Notes = Vec<(String, String)>;

/// A probe needs this many measured rows in a table before the notes they all share are said
/// once above it instead of on each row: for a handful of rows the notes read best beside
/// their numbers.
pub const SHARED_NOTES_FROM: usize = 20;

/// For each probe of `rows` (in order of first appearance) with at least
/// [`SHARED_NOTES_FROM`] measured rows, the notes (`key=value`) that every one of them has,
/// in its first row's order; probes that share none are left out. A table says them once
/// above its rows ([`result_cells_except`]): the memory lab's 2,400 `mem.clear` rows share
/// the cache sizes, `cpu`, `thp` and more, 60 to 100 bytes a row. Pure.
pub fn shared_notes(rows: &[&Measurement]) -> Vec<(String, Notes)> {
    // Each probe's notes shared so far, and its count of measured rows.
    let mut probes: Vec<(String, Notes, usize)> = Vec::new();
    for m in rows.iter().filter(|m| matches!((&m.outcome, &m.summary), (Outcome::Ok, Some(_)))) {
        match probes.iter_mut().find(|(p, _, _)| *p == m.probe) {
            Some((_, shared, count)) => {
                shared.retain(|note| m.notes.0.contains(note));
                *count += 1;
            }
            None => {
                let shown = m.notes.0.iter().filter(|(k, _)| !is_raw_note(k)).cloned().collect();
                probes.push((m.probe.clone(), shown, 1))
            }
        }
    }
    probes
        .into_iter()
        .filter(|(_, shared, count)| *count >= SHARED_NOTES_FROM && !shared.is_empty())
        .map(|(p, shared, _)| (p, shared))
        .collect()
}

/// [`result_cells`] without the notes in `shared` (which the table shows once, from
/// [`shared_notes`]).
pub fn result_cells_except(m: &Measurement, shared: &[(String, String)]) -> Vec<String> {
    let mut cells = vec![m.probe.clone(), m.params.key()];
    match (&m.outcome, &m.summary) {
        (Outcome::Ok, Some(s)) => {
            cells.push(human(s.median, m.unit));
            cells.push(percent(s.ci_rel_halfwidth()));
            cells.push(format!("{:.1}%", s.cv * 100.0));
            cells.push(s.n.to_string());
            let mut notes: Vec<String> = Vec::new();
            if s.outliers > 0 {
                notes.push(format!("{} outliers", s.outliers));
            }
            let migrated = m.samples.iter().filter(|x| x.migrated).count();
            if migrated > 0 {
                notes.push(format!("{migrated} migrated"));
            }
            // Note values may hold commas (`cpus=0,0`): separate entries with spaces.
            notes.extend(
                m.notes
                    .0
                    .iter()
                    .filter(|n| !shared.contains(n) && !is_raw_note(&n.0))
                    .map(|(k, v)| format!("{k}={v}")),
            );
            cells.push(notes.join(" "));
        }
        (outcome, _) => {
            cells.push(outcome.key().to_string());
            cells.extend([String::new(), String::new(), String::new()]);
            cells.push(outcome.reason().unwrap_or("").to_string());
        }
    }
    cells
}

/// A run's results as a table, in measurement order.
pub fn run_table(run: &Run) -> Table {
    let mut t = result_table();
    for m in &run.results {
        t.row(result_cells(m));
    }
    t
}

/// The header lines describing a run and its machine, each escaped
/// ([`schedlab_measure::text::escape`]: a label, host or kernel from elsewhere stays on its
/// line and cannot drive the terminal).
pub fn run_header(meta: &RunMeta) -> Vec<String> {
    let m = &meta.machine;
    let mut lines = vec![
        format!(
            "run #{}{}: suite {}, {}, started {}{}",
            meta.id,
            meta.label.as_ref().map(|l| format!(" \"{l}\"")).unwrap_or_default(),
            meta.suite,
            meta.status.key(),
            meta.started_at,
            meta.finished_at.as_ref().map(|f| format!(", finished {f}")).unwrap_or_default()
        ),
        format!("host {} — {} — kernel {} ({})", m.host, m.os, m.kernel, m.arch),
        format!(
            "cpu {} — {} logical{}{} — {} usable — memory {}",
            m.cpu_model,
            m.logical_cpus,
            m.physical_cores.map(|c| format!(", {c} physical")).unwrap_or_default(),
            match m.smt {
                Some(true) => ", SMT on",
                Some(false) => ", SMT off",
                None => "",
            },
            m.usable_cpus,
            m.memory_bytes
                .map(|b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64))
                .unwrap_or("?".into())
        ),
        format!(
            "governor {} — clocksource {} — {} — load {} — schedlab {} ({})",
            m.governor.as_deref().unwrap_or("n/a"),
            m.clocksource.as_deref().unwrap_or("?"),
            if m.hypervisor { "virtual machine" } else { "bare metal (no hypervisor flag)" },
            m.loadavg.map(|l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])).unwrap_or("?".into())
                + &m.others_at_start.map_or(String::new(), |o| format!(
                    ", others {:.0}% of a CPU at start",
                    o * 100.0
                )),
            meta.version,
            meta.git_rev
        ),
    ];
    if let Some(why) = &meta.reason {
        lines.insert(1, format!("{}: {why}", meta.status.key()));
    }
    if let Some(c) = &meta.calibration {
        lines.push(format!(
            "clock: read {:.1} ns, resolution {:.0} ns (reported {:.0} ns), empty loop {:.2} ns/iter — settings {}",
            c.read_ns, c.observed_resolution_ns, c.reported_resolution_ns, c.loop_ns, meta.settings
        ));
    }
    lines.into_iter().map(|l| escape(&l).into_owned()).collect()
}

/// The side-by-side comparison of `runs` against `runs[baseline]`, in the layout of seed
/// 002's Table 2: one row per probe and parameter set, one column per run (median ± its
/// interval), and for each other run a column with the ratio to the baseline and an explicit
/// verdict: "within noise" when the intervals overlap, else better or worse.
pub fn compare_table(runs: &[Run], baseline: usize) -> Table {
    compare_table_across(runs, baseline, false)
}

/// Whether two runs were made on the same machine: the fields its fingerprint id is made of
/// (host name, architecture, CPU model, logical CPUs; `schedlab_store::machine_id`).
pub fn same_machine(a: &Run, b: &Run) -> bool {
    let (a, b) = (&a.meta.machine, &b.meta.machine);
    a.host == b.host
        && a.arch == b.arch
        && a.cpu_model == b.cpu_model
        && a.logical_cpus == b.logical_cpus
}

/// [`compare_table`], saying in the verdict column when a run was made on another machine
/// than the baseline: a ratio across machines is shown, but "within noise", "better" or
/// "worse" are claims about one machine's noise, made across machines only when `across`
/// (the user asked for it).
pub fn compare_table_across(runs: &[Run], baseline: usize, across: bool) -> Table {
    comparison_table(runs, baseline, across, &|_| true)
}

/// [`compare_table`] with only the rows that changed beyond noise: some run made on the
/// baseline's machine is better or worse than the baseline there (its interval does not
/// overlap the baseline's). What a comparison page shows first.
pub fn changed_table(runs: &[Run], baseline: usize) -> Table {
    let changed = |row: &ComparisonRow| {
        row.verdicts.iter().enumerate().any(|(i, v)| {
            v.is_some_and(|v| !v.within_noise) && same_machine(&runs[i], &runs[baseline])
        })
    };
    comparison_table(runs, baseline, false, &changed)
}

/// The comparison table with only the rows `keep` keeps (`compare --only`).
pub fn comparison_table(
    runs: &[Run],
    baseline: usize,
    across: bool,
    keep: &dyn Fn(&ComparisonRow) -> bool,
) -> Table {
    let names: Vec<String> = runs.iter().map(|r| r.meta.display_name()).collect();
    let mut headers: Vec<(String, Align)> =
        vec![("probe".into(), Align::Left), ("params".into(), Align::Left)];
    for (i, n) in names.iter().enumerate() {
        let mark = if i == baseline { " (baseline)" } else { "" };
        headers.push((format!("{n}{mark}"), Align::Right));
        if i != baseline {
            headers.push(("vs baseline".to_string(), Align::Left));
        }
    }
    let cols: Vec<(&str, Align)> = headers.iter().map(|(h, a)| (h.as_str(), *a)).collect();
    let mut t = Table::new(&cols);

    for row in comparison_rows(runs, baseline).into_iter().filter(|r| keep(r)) {
        let mut cells = vec![row.probe.clone(), row.params.clone()];
        for (i, m) in row.results.iter().enumerate() {
            cells.push(match m {
                None => "—".into(),
                Some(m) => match &m.summary {
                    // One sample (a published figure) has no interval to show.
                    Some(s) if m.outcome == Outcome::Ok && s.n < 2 => human(s.median, m.unit),
                    Some(s) if m.outcome == Outcome::Ok => {
                        format!("{} {}", human(s.median, m.unit), percent(s.ci_rel_halfwidth()))
                    }
                    _ => m.outcome.key().to_string(),
                },
            });
            if i == baseline {
                continue;
            }
            let other = !same_machine(&runs[i], &runs[baseline]);
            cells.push(row.verdicts[i].as_ref().map_or(String::new(), |v| match (other, across) {
                (false, _) => verdict_text(v),
                (true, false) => format!("×{:.2} other machine", v.ratio),
                (true, true) => format!("{} (other machine)", verdict_text(v)),
            }));
        }
        t.row(cells);
    }
    t
}

/// A verdict as the comparison shows it: `×1.23 worse`, `×0.50 better`, `×1.01 within noise`.
pub fn verdict_text(v: &stats::Verdict) -> String {
    let word = if v.within_noise {
        "within noise"
    } else if v.improved {
        "better"
    } else {
        "worse"
    };
    format!("×{:.2} {word}", v.ratio)
}

/// One probe and parameter set across compared runs.
#[derive(Debug, Clone)]
pub struct ComparisonRow<'a> {
    /// The probe.
    pub probe: String,
    /// Its parameters' key.
    pub params: String,
    /// Per run, its result (if it has one).
    pub results: Vec<Option<&'a Measurement>>,
    /// Per run, the verdict against the baseline (`None` for the baseline itself and where
    /// either side has no measured summary).
    pub verdicts: Vec<Option<stats::Verdict>>,
}

/// Every (probe, params) of `runs` in order of first appearance (the baseline's order first)
/// with each run's result and its verdict against `runs[baseline]`: what the comparison
/// table and the ratio chart show.
pub fn comparison_rows(runs: &[Run], baseline: usize) -> Vec<ComparisonRow<'_>> {
    // Each run's results by (probe, params), the first one winning; one pass per run, so that
    // comparing ten quick-suite runs (2,408 results each) takes milliseconds, not seconds.
    let index: Vec<std::collections::HashMap<(String, String), &Measurement>> = runs
        .iter()
        .map(|r| {
            let mut by_key = std::collections::HashMap::with_capacity(r.results.len());
            for m in &r.results {
                by_key.entry((m.probe.clone(), m.params.key())).or_insert(m);
            }
            by_key
        })
        .collect();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut runs_in_order: Vec<&Run> = vec![&runs[baseline]];
    runs_in_order.extend(runs.iter().enumerate().filter(|(i, _)| *i != baseline).map(|(_, r)| r));
    for r in runs_in_order {
        for m in &r.results {
            let key = (m.probe.clone(), m.params.key());
            if seen.insert(key.clone()) {
                order.push(key);
            }
        }
    }
    order
        .into_iter()
        .map(|key| {
            let results: Vec<Option<&Measurement>> =
                index.iter().map(|by_key| by_key.get(&key).copied()).collect();
            let base = results[baseline];
            let verdicts = results
                .iter()
                .enumerate()
                .map(|(i, this)| {
                    let (b, o) = (base?, (*this)?);
                    if i == baseline || b.outcome != Outcome::Ok || o.outcome != Outcome::Ok {
                        return None;
                    }
                    Some(stats::compare(b.summary.as_ref()?, o.summary.as_ref()?, b.better))
                })
                .collect();
            ComparisonRow { probe: key.0, params: key.1, results, verdicts }
        })
        .collect()
}

/// Warnings as lines for people: machine warnings one per line, measurement warnings grouped
/// by kind with the advice said once, at most `max_per_kind` listed per kind (a sweep can have
/// hundreds; `schedlab show` passes `usize::MAX`). Each line is escaped: a stored
/// message that spans lines is shown on one.
pub fn warning_lines(warnings: &[Warning], max_per_kind: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for w in warnings.iter().filter(|w| w.probe.is_none()) {
        lines.push(format!("{}; {}", w.message, w.advice));
    }
    let mut kinds: Vec<&str> = Vec::new();
    for w in warnings.iter().filter(|w| w.probe.is_some()) {
        if !kinds.contains(&w.kind.as_str()) {
            kinds.push(&w.kind);
        }
    }
    for kind in kinds {
        let group: Vec<&Warning> =
            warnings.iter().filter(|w| w.probe.is_some() && w.kind == kind).collect();
        lines.push(format!(
            "{} in {} result{}: {}",
            kind_heading(kind),
            group.len(),
            if group.len() == 1 { "" } else { "s" },
            group[0].advice
        ));
        for w in group.iter().take(max_per_kind) {
            lines.push(format!("    {}", w.message));
        }
        if group.len() > max_per_kind {
            lines.push(format!(
                "    … and {} more (`schedlab show` lists them all)",
                group.len() - max_per_kind
            ));
        }
    }
    lines.into_iter().map(|l| escape(&l).into_owned()).collect()
}

/// `schedlab show`: the run header, its results table and its warnings, for a terminal.
pub fn run_text(run: &Run) -> String {
    let mut text = String::new();
    for line in run_header(&run.meta) {
        text.push_str(&line);
        text.push('\n');
    }
    text.push('\n');
    if run.meta.suite == schedlab_probes::crosscheck::SUITE {
        text.push_str(&crate::crosscheck::text(run).unwrap_or_default());
    } else {
        // A study holds crosscheck rows among its results: they get their own table.
        let mut t = result_table();
        for m in run.results.iter().filter(|m| !crate::crosscheck::is_row(m)) {
            t.row(result_cells(m));
        }
        text.push_str(&t.to_terminal());
        if let Some(c) = crate::crosscheck::text(run) {
            text.push_str("\ncrosscheck:\n");
            text.push_str(&c);
        }
    }
    if let Some(t) = crate::coop::text(run) {
        text.push_str(&t);
    }
    if let Some(t) = crate::sched::verdict_text(run) {
        text.push_str(&t);
    }
    if let Some(t) = crate::sched::wakeup_table(run) {
        text.push_str(&format!(
            "\nwake-up latency ({}):\n{}",
            schedlab_probes::sched::wakeup::ID,
            t.to_terminal()
        ));
    }
    if !run.warnings.is_empty() {
        text.push_str("\nwarnings:\n");
        for line in warning_lines(&run.warnings, usize::MAX) {
            text.push_str(&format!("  {line}\n"));
        }
    }
    text.push_str(&crate::doctor::run_findings_text(run));
    text
}

/// `schedlab compare`: one line per run saying where and when it ran, the side-by-side
/// table ([`compare_table`], Markdown or terminal) and how to read it.
pub fn compare_text(runs: &[Run], baseline: usize, markdown: bool) -> String {
    compare_text_across(runs, baseline, markdown, false)
}

/// [`compare_text`] with [`compare_table_across`]'s rule for runs of other machines.
pub fn compare_text_across(runs: &[Run], baseline: usize, markdown: bool, across: bool) -> String {
    compare_text_only(runs, baseline, markdown, across, &|_| true)
}

/// [`compare_text_across`] with only the rows `keep` keeps in its table (`compare --only`).
pub fn compare_text_only(
    runs: &[Run],
    baseline: usize,
    markdown: bool,
    across: bool,
    keep: &dyn Fn(&ComparisonRow) -> bool,
) -> String {
    let mut text = String::new();
    for r in runs {
        let m = &r.meta.machine;
        let line = format!(
            "{}: run #{} {} suite, {} — {} ({} CPUs) — kernel {} — {}",
            r.meta.display_name(),
            r.meta.id,
            r.meta.suite,
            r.meta.started_at,
            m.host,
            m.logical_cpus,
            m.kernel,
            m.cpu_model
        );
        text.push_str(&escape(&line));
        text.push('\n');
    }
    for line in crate::doctor::differing_lines(runs, baseline) {
        text.push_str(&line);
        text.push('\n');
    }
    text.push('\n');
    let table = comparison_table(runs, baseline, across, keep);
    text.push_str(&if markdown { table.to_markdown() } else { table.to_terminal() });
    text.push_str(
        "\nmedian ± half-width of its 95% interval; ratio = run / baseline; \"within noise\" when the intervals overlap\n",
    );
    if let Some(t) = crate::sched::verdicts_across(runs) {
        text.push_str("\nseed 001's verdicts, run by run:\n");
        text.push_str(&if markdown { t.to_markdown() } else { t.to_terminal() });
        text.push_str(&crate::table::wrap(crate::sched::DEFINITION, 100));
        text.push('\n');
    }
    for line in unlike_lines(runs, baseline) {
        text.push_str(&escape(&line));
        text.push('\n');
    }
    if runs.iter().any(|r| !same_machine(r, &runs[baseline])) {
        text.push_str(if across {
            "runs of other machines than the baseline's are judged anyway (--across-machines): their noise is not the baseline's\n"
        } else {
            "\"other machine\": made on another machine than the baseline, so only the ratio is shown; a noise verdict across machines is not claimed (--across-machines to judge anyway)\n"
        });
    }
    text
}

/// For `compare`: what makes the runs' ratios less alike than they look, one line each: runs
/// of different suites (a smoke run takes two tiny samples per result, a quick run 9–11), and
/// runs whose results took different numbers of samples (a `--samples` or `--ci-target`
/// run beside a default one), which changes the intervals and so the noise verdicts. The
/// published tables (one printed value per row) are left out: their column already says
/// "other machine".
pub fn unlike_lines(runs: &[Run], baseline: usize) -> Vec<String> {
    let measured: Vec<&Run> =
        runs.iter().filter(|r| r.meta.suite != crate::reference::SUITE).collect();
    let mut lines = Vec::new();
    let name = |r: &Run| format!("{} (run #{})", r.meta.display_name(), r.meta.id);
    let mut suites: Vec<&str> = measured.iter().map(|r| r.meta.suite.as_str()).collect();
    suites.dedup();
    if suites.len() > 1 {
        let list: Vec<String> =
            measured.iter().map(|r| format!("{} {}", name(r), r.meta.suite)).collect();
        lines.push(format!(
            "note: the runs are of different suites ({}): each suite has its own sample counts and time budgets, so a ratio may reflect the suite as much as the machine",
            list.join(", ")
        ));
    }
    // The median sample count of a run's measured results.
    let samples = |r: &Run| {
        let mut n: Vec<usize> =
            r.results.iter().filter_map(|m| m.summary.as_ref()).map(|s| s.n).collect();
        n.sort_unstable();
        n.get(n.len() / 2).copied()
    };
    let base = &runs[baseline];
    if base.meta.suite != crate::reference::SUITE {
        if let Some(nb) = samples(base) {
            let differ: Vec<String> = measured
                .iter()
                .filter(|r| r.meta.id != base.meta.id)
                .filter_map(|r| samples(r).filter(|&n| n != nb).map(|n| format!("{} {n}", name(r))))
                .collect();
            if !differ.is_empty() {
                lines.push(format!(
                    "note: the runs took different numbers of samples per result (median: {} {nb}, {}): the intervals, and so the noise verdicts, are not alike",
                    name(base),
                    differ.join(", ")
                ));
            }
        }
    }
    lines
}

/// The statistics table of a timeline's threads: for sleeping threads their overshoot,
/// otherwise CPU share, runs, slice and gap percentiles, first run and work rate.
pub fn timeline_stats_table(stats: &[ThreadStats]) -> Table {
    let d = |x: Option<u64>| x.map_or("-".to_string(), human_ns);
    if stats.iter().any(|s| s.overshoot.is_some()) {
        let mut t = Table::new(&[
            ("thread", Align::Left),
            ("sleeps", Align::Right),
            ("overshoot p50", Align::Right),
            ("p99", Align::Right),
            ("max", Align::Right),
            ("mean", Align::Right),
        ]);
        for s in stats {
            let o = s.overshoot;
            t.row(vec![
                s.name.clone(),
                o.map_or(0, |o| o.n).to_string(),
                d(o.map(|o| o.p50)),
                d(o.map(|o| o.p99)),
                d(o.map(|o| o.max)),
                d(o.map(|o| o.mean as u64)),
            ]);
        }
        return t;
    }
    let mut t = Table::new(&[
        ("thread", Align::Left),
        ("CPU", Align::Right),
        ("runs", Align::Right),
        ("slice p50", Align::Right),
        ("slice p95", Align::Right),
        ("gap p50", Align::Right),
        ("gap max", Align::Right),
        ("1st run", Align::Right),
        ("inverses/s", Align::Right),
    ]);
    for s in stats {
        t.row(vec![
            s.name.clone(),
            format!("{:.1}%", s.cpu_share * 100.0),
            s.runs.to_string(),
            d(s.run_len.map(|r| r.p50)),
            d(s.run_len.map(|r| r.p95)),
            d(s.gap_len.map(|g| g.p50)),
            d(s.gap_len.map(|g| g.max)),
            d(s.first_run_ns),
            format!("{:.0}", s.work_rate),
        ]);
    }
    t
}

/// The sampled record against the kernel's, one line per thread, for a sampling threshold
/// of `threshold_ns`.
pub fn agreement_lines(agreement: &[Agreement], threshold_ns: u64) -> Vec<String> {
    let mut lines = vec!["sampled against kernel:".to_string()];
    for a in agreement {
        lines.push(format!(
            "  {}: CPU {:.1}% sampled / {:.1}% kernel, runs {} / {}; kernel gaps <= {} \
             (invisible to sampling): {} of {}",
            a.name,
            a.cpu_share.0 * 100.0,
            a.cpu_share.1 * 100.0,
            a.runs.0,
            a.runs.1,
            human_ns(threshold_ns),
            a.short_gaps,
            a.kernel_gaps,
        ));
    }
    lines
}

/// What recording cost, in words, for `timestamps` recorded.
pub fn recording_overhead_line(o: &Overhead, timestamps: u64) -> String {
    format!(
        "recording overhead: {:.0} inverses per CPU-second recorded, {:.0} without \
         recording: {:+.2}% of the useful-work rate (median of {} alternating {} rounds; \
         {timestamps} timestamps recorded above)",
        o.recorded_rate,
        o.plain_rate,
        -o.loss() * 100.0,
        o.rounds,
        human_ns(o.round_ns),
    )
}

/// Who else used the CPU while something was measured, in words.
pub fn noise_line(n: &Noise) -> String {
    format!(
        "while it ran ({}), other processes used {} of CPU time and the hypervisor stole {} \
         (/proc/stat, 10 ms ticks)",
        human_ns(n.window_ns),
        human_ns(n.other_cpu_ns.max(0) as u64),
        human_ns(n.steal_ns.max(0) as u64)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Params, RunStatus, Unit};
    use schedlab_measure::stats::Summary;

    fn run(id: i64, label: &str, results: Vec<(&str, &[f64])>) -> Run {
        let mut meta = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "x"));
        meta.id = id;
        meta.label = Some(label.into());
        meta.status = RunStatus::Complete;
        Run {
            meta,
            results: results
                .into_iter()
                .map(|(p, v)| Measurement {
                    summary: Summary::of(v),
                    ..Measurement::without_samples(p, Params::new(), Unit::Micros, Outcome::Ok, 0.0)
                })
                .collect(),
            warnings: vec![],
        }
    }

    #[test]
    fn notes_every_row_of_a_long_probe_shares_are_said_once_and_left_off_its_rows() {
        let row = |probe: &str, i: usize| {
            let mut m = Measurement {
                summary: Summary::of(&[1.0, 2.0, 3.0]),
                ..Measurement::without_samples(probe, Params::new(), Unit::Nanos, Outcome::Ok, 0.0)
            };
            m.notes = Params::new().with("cpu", 0).with("size", i).with("thp", "madvise");
            m
        };
        let mut rows: Vec<Measurement> =
            (0..SHARED_NOTES_FROM).map(|i| row("mem.clear", i)).collect();
        // A short probe keeps its notes on its rows; a failed row has none and counts not.
        rows.extend((0..SHARED_NOTES_FROM - 1).map(|i| row("mem.copy", i)));
        rows.push(Measurement::without_samples(
            "mem.clear",
            Params::new(),
            Unit::Nanos,
            Outcome::Failed("no memory".into()),
            0.0,
        ));
        let refs: Vec<&Measurement> = rows.iter().collect();
        let want =
            vec![("cpu".to_string(), "0".to_string()), ("thp".to_string(), "madvise".to_string())];
        assert_eq!(shared_notes(&refs), vec![("mem.clear".to_string(), want.clone())]);
        assert_eq!(result_cells_except(&rows[3], &want)[6], "size=3");
        assert_eq!(result_cells(&rows[3])[6], "cpu=0 size=3 thp=madvise");
        // One row that differs keeps that note on every row.
        rows[5].notes = Params::new().with("cpu", 1).with("size", 5).with("thp", "madvise");
        let refs: Vec<&Measurement> = rows.iter().collect();
        assert_eq!(shared_notes(&refs)[0].1, vec![("thp".to_string(), "madvise".to_string())]);
    }

    #[test]
    fn raw_notes_are_kept_but_not_shown_in_a_table() {
        let mut m = Measurement {
            summary: Summary::of(&[1.0, 2.0, 3.0]),
            ..Measurement::without_samples("p", Params::new(), Unit::Nanos, Outcome::Ok, 0.0)
        };
        m.notes = Params::new().with("p99_us", 5).with("frame_us_raw", "4010 4020 9000");
        assert_eq!(result_cells(&m)[6], "p99_us=5");
        let rows = vec![m; SHARED_NOTES_FROM];
        let refs: Vec<&Measurement> = rows.iter().collect();
        assert_eq!(shared_notes(&refs)[0].1, vec![("p99_us".to_string(), "5".to_string())]);
    }

    #[test]
    fn comparison_gives_ratio_and_noise_verdict() {
        let a =
            run(1, "a", vec![("os.x", &[10.0, 10.1, 9.9, 10.0, 10.05, 9.95]), ("os.y", &[5.0; 6])]);
        let b =
            run(2, "b", vec![("os.x", &[10.0, 10.2, 9.9, 10.1, 10.0, 9.8]), ("os.y", &[10.0; 6])]);
        let t = compare_table(&[a, b], 0);
        assert_eq!(t.len(), 2);
        assert!(t.cells(0)[4].contains("within noise"), "{:?}", t.cells(0));
        assert_eq!(t.cells(1)[4], "×2.00 worse");
        assert!(t.to_markdown().contains("a (baseline)"));
    }

    #[test]
    fn measurement_warnings_are_grouped_with_advice_said_once() {
        let w = |kind: &str, probe: Option<&str>, msg: &str| Warning {
            kind: kind.into(),
            probe: probe.map(str::to_string),
            severity: schedlab_measure::model::Severity::Warn,
            message: msg.into(),
            advice: format!("fix {kind}"),
        };
        let lines = warning_lines(
            &[
                w("vm", None, "a VM"),
                w("high-variation", Some("a"), "a: CV 9%"),
                w("other-cpu", Some("a"), "a: others"),
                w("high-variation", Some("b"), "b: CV 7%"),
            ],
            usize::MAX,
        );
        assert_eq!(lines[0], "a VM; fix vm");
        assert!(
            lines[1].starts_with("high variation")
                && lines[1].contains("2 results: fix high-variation")
        );
        assert_eq!(&lines[2..4], ["    a: CV 9%", "    b: CV 7%"]);
        assert!(lines[4].contains("1 result: fix other-cpu"));
    }

    #[test]
    fn comparison_lists_rows_missing_from_some_runs() {
        let a = run(1, "a", vec![("os.x", &[1.0])]);
        let b = run(2, "b", vec![("os.z", &[1.0])]);
        let t = compare_table(&[a, b], 1);
        assert_eq!(t.len(), 2);
        assert_eq!(t.cells(0)[0], "os.z", "baseline's rows come first");
        assert_eq!(t.cells(0)[2], "—", "run a has no os.z");
        assert_eq!(t.cells(1)[4], "—", "the baseline has no os.x");
    }
}
