//! The machine in one look: the headline figures that open the HTML report and
//! `schedlab show` (issue 28).
//!
//! [`HEADLINES`] is the one table of what a person comes for — what a system call, a
//! context switch, a pipe or TCP round trip, a process, a page fault, memory copying and a
//! thread cost here — each the probe and parameter set that measures it in the quick suite
//! (the same rows the lmbench view and the seed tables use where there is one, so a headline
//! has published values beside it). For each headline found in a run, [`summarise`] gives its
//! median and interval, the seed machines' published values for the same probe and
//! parameters ([`crate::reference`], as `schedlab reference import` would store them), and
//! the verdict against the previous run of the same host when the caller found one. Then one
//! line each for the seed 001 and seed 000 experiments when the run measured them, and one
//! line about noise.
//!
//! Pure: the caller (the CLI) finds the previous run; nothing here reads the database.

use schedlab_measure::model::{Measurement, Outcome, Run};
use schedlab_measure::stats::{self, Verdict};
use schedlab_measure::text::escape;

use crate::reference;
use crate::table::{Align, Table};
use crate::units::human;

/// One headline figure: a name for people, and the probe and parameters key that measure it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headline {
    /// What a person calls it.
    pub name: &'static str,
    /// The probe id.
    pub probe: &'static str,
    /// Its parameters' key, as [`schedlab_measure::model::Params::key`] prints it.
    pub params: &'static str,
}

const fn h(name: &'static str, probe: &'static str, params: &'static str) -> Headline {
    Headline { name, probe, params }
}

/// The headline figures, in the order they are shown. Where lmbench has the row, the
/// parameters are the ones its view and seed 002's Table 2 map to (`def=lmbench`,
/// `placement=same`), so the published values line up; the thread rows are the three systems
/// on the probes seed 003 measured (creation of one thread, a switch), and memory bandwidth
/// is a copy far larger than any cache (64 MiB).
pub const HEADLINES: &[Headline] = &[
    h("null system call", "os.syscall.null", ""),
    h("context switch (2 processes)", "os.ctx.switch", "procs=2,size=0k"),
    h("pipe round trip", "os.pipe.latency", "placement=same"),
    h("TCP round trip (localhost)", "os.tcp.latency", "placement=same"),
    h("fork + exec", "os.proc.fork_exec", "def=lmbench"),
    h("page fault", "os.mm.pagefault", "folios=small,def=lmbench"),
    h("memory copy bandwidth (64 MiB)", "mem.copy", "size=67108864"),
    h("thread create: OS", "threads.create", "batch=1,backend=os"),
    h("thread create: schedlab-rt", "threads.create", "batch=1,backend=rt"),
    h("thread create: tokio", "threads.create", "batch=1,backend=tokio"),
    h("thread switch: OS", "threads.switch", "backend=os"),
    h("thread switch: schedlab-rt", "threads.switch", "backend=rt"),
    h("thread switch: tokio", "threads.switch", "backend=tokio"),
];

/// The thread systems' grouped chart of the first screen: these probes (and parameters
/// other than the backend), one group each, one bar per backend of [`THREAD_BACKENDS`].
pub const THREAD_GROUPS: &[(&str, &str)] = &[
    ("threads.create", "batch=1"),
    ("threads.switch", ""),
    ("threads.mutex.uncontended", ""),
    ("threads.condvar.pingpong", ""),
    ("threads.channel.pingpong", ""),
];

/// The systems the thread chart compares.
pub const THREAD_BACKENDS: [&str; 3] = ["os", "rt", "tokio"];

/// A published value for a headline: which paper's machine, and the value in our unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// `seed 002 Linux HP PC`.
    pub machine: String,
    /// The value, in the result's unit.
    pub value: f64,
}

/// One headline found in a run.
#[derive(Debug, Clone)]
pub struct Figure<'a> {
    /// Which headline.
    pub headline: Headline,
    /// The run's result (measured: `Outcome::Ok` with a summary).
    pub result: &'a Measurement,
    /// The seed machines' values for the same probe and parameters.
    pub published: Vec<Published>,
    /// The previous run of the same host: its id, its result and this run's verdict
    /// against it.
    pub previous: Option<(i64, &'a Measurement, Verdict)>,
}

impl Figure<'_> {
    /// The median.
    pub fn median(&self) -> f64 {
        self.summary().median
    }

    /// The result's summary (a figure is only made of a measured result).
    pub fn summary(&self) -> &stats::Summary {
        self.result.summary.as_ref().expect("a figure is made only of a result with a summary")
    }

    /// The published values as people read them: `seed 002: 71 ns – 111 ns (5 machines)`.
    pub fn published_text(&self) -> String {
        if self.published.is_empty() {
            return "—".into();
        }
        let unit = self.result.unit;
        let (lo, hi) = self
            .published
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |a, p| (a.0.min(p.value), a.1.max(p.value)));
        let sets: Vec<&str> = {
            let mut s: Vec<&str> =
                self.published.iter().map(|p| p.machine.split(':').next().unwrap_or("")).collect();
            s.dedup();
            s
        };
        let n = self.published.len();
        if n == 1 {
            format!("{}: {}", self.published[0].machine, human(lo, unit))
        } else {
            format!("{}: {} – {} ({n} machines)", sets.join(", "), human(lo, unit), human(hi, unit))
        }
    }

    /// The verdict against the previous run as people read it: `#3: ×1.02 within noise`.
    pub fn previous_text(&self) -> String {
        match &self.previous {
            None => "—".into(),
            Some((id, _, v)) => format!("#{id}: {}", crate::views::verdict_text(v)),
        }
    }
}

/// How noisy a run was, in one line's worth of numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Noise {
    /// Results whose CV is above 5% (`high-variation` warnings).
    pub varying: usize,
    /// Results measured.
    pub measured: usize,
    /// The likely causes the run's warnings name (the machine's, then per-result kinds
    /// that point at other load), for people.
    pub causes: Vec<String>,
}

impl Noise {
    /// The line: `740 of 2524 results vary by more than 5% (CV): a virtual machine (its
    /// neighbours on the host), other processes took CPU in 33; see Warnings`.
    pub fn line(&self) -> String {
        let causes = if self.causes.is_empty() {
            String::new()
        } else {
            format!(": {}", self.causes.join(", "))
        };
        format!(
            "{} of {} results vary by more than 5% (CV){causes}; see Warnings",
            self.varying, self.measured
        )
    }
}

/// The first screen of one run.
#[derive(Debug, Clone)]
pub struct Summary<'a> {
    /// The run.
    pub run: &'a Run,
    /// The headlines it measured, in [`HEADLINES`] order.
    pub figures: Vec<Figure<'a>>,
    /// The seeds' experiments in a sentence each (`seed 001: ...`), when measured.
    pub verdicts: Vec<String>,
    /// The noise line's numbers; `None` when no result varies by more than 5%.
    pub noise: Option<Noise>,
}

/// The summary of `run`, against `previous` (the previous run of the same host, if any).
pub fn summarise<'a>(run: &'a Run, previous: Option<&'a Run>) -> Summary<'a> {
    let published = published_values(run);
    let find = |r: &'a Run, hl: &Headline| -> Option<&'a Measurement> {
        r.results.iter().find(|m| {
            m.probe == hl.probe
                && m.params.key() == hl.params
                && m.outcome == Outcome::Ok
                && m.summary.is_some()
        })
    };
    let figures = HEADLINES
        .iter()
        .filter_map(|hl| {
            let result = find(run, hl)?;
            let previous = previous.and_then(|p| {
                let old = find(p, hl)?;
                let v =
                    stats::compare(old.summary.as_ref()?, result.summary.as_ref()?, result.better);
                Some((p.meta.id, old, v))
            });
            let published = published
                .iter()
                .filter(|(p, k, _)| *p == hl.probe && *k == hl.params)
                .map(|(_, _, v)| v.clone())
                .collect();
            Some(Figure { headline: *hl, result, published, previous })
        })
        .collect();
    let mut verdicts: Vec<String> = [seed001(run), seed000(run)].into_iter().flatten().collect();
    // Issue 25's locks and loaders: a sentence per probe measured.
    verdicts.extend(crate::locks::lines(run));
    Summary { run, figures, verdicts, noise: noise(run) }
}

/// Every published cell that a probe measures, as (probe, params key, value in the run's
/// unit for that probe); cells whose probe the run did not measure are left out (their unit
/// is unknown here).
fn published_values(run: &Run) -> Vec<(&'static str, &'static str, Published)> {
    let units = |probe: &str| run.results.iter().find(|m| m.probe == probe).map(|m| m.unit);
    let mut out = Vec::new();
    for name in reference::SETS {
        let Some(set) = reference::set(name) else { continue };
        for cell in set.cells(&units) {
            let Some((probe, key, _, value)) = cell.ours else { continue };
            let column =
                set.columns.iter().find(|c| c.key == cell.column).map_or(cell.column, |c| c.name);
            let set_name = name.replace("seed", "seed ");
            out.push((probe, key, Published { machine: format!("{set_name}: {column}"), value }));
        }
    }
    out
}

/// Seed 001's goal in a sentence: which methods met it on one CPU, which did not and which
/// the frames could not decide, by the verdict [`crate::sched::judged`] computes (the loader
/// at most 10% ± 1 point of a CPU, the 95% interval of frame p95 minus the unloaded run's at
/// or below 1 ms), with a warning first when the unloaded run was disturbed.
fn seed001(run: &Run) -> Option<String> {
    let rows: Vec<crate::sched::Judged> =
        crate::sched::judged(run).into_iter().filter(|j| j.cpus == "1").collect();
    if rows.is_empty() {
        return None;
    }
    let (mut met, mut not, mut open) = (Vec::new(), Vec::new(), Vec::new());
    let disturbed = rows.iter().find_map(|j| j.disturbed_p99_us);
    for j in rows {
        let share = j.share.map_or("no progress".into(), |s| format!("{:.1}%", s * 100.0));
        let tail = j.tail.map_or(String::new(), |t| {
            format!(" p95 {:+.1} ms {}", t.point / 1e3, schedlab_probes::sched::interval_ms(&t))
        });
        let text = format!("{} {share}{tail}", j.loader);
        match j.verdict {
            schedlab_probes::sched::BudgetVerdict::Pass(_) => met.push(text),
            schedlab_probes::sched::BudgetVerdict::Undecided(_) => open.push(text),
            _ => not.push(text),
        }
    }
    let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    let warning = disturbed.map_or(String::new(), |p| {
        format!(
            "WARNING, disturbed baseline (the unloaded frame p99 {:.1} ms > the 20 ms period); ",
            p / 1e3
        )
    });
    Some(format!(
        "seed 001 (a loader held to 10% ± 1 of one CPU beside a 50 FPS loop, frame p95 within 1 ms of the unloaded run's by its 95% interval): {warning}met by {}; not by {}; undecided: {}",
        list(&met),
        list(&not),
        list(&open)
    ))
}

/// Seed 000's question (cooperative or preemptive threads) in a sentence: in the worst case,
/// beside a busy main loop where an even split scores 2.0, which method comes closest and
/// which is farthest.
fn seed000(run: &Run) -> Option<String> {
    let t = crate::coop::analyse(run)?;
    let mut worst: Vec<(&str, f64)> =
        t.methods.iter().filter_map(|m| Some((m.as_str(), t.cell(m, "worst")?.score))).collect();
    worst.sort_by(|a, b| (a.1 - 2.0).abs().total_cmp(&(b.1 - 2.0).abs()));
    let (best, far) = (worst.first()?, worst.last()?);
    Some(format!(
        "seed 000 (cooperative against preemptive, beside a busy main loop; 2.0 is an even split): \
         closest {} {:.2}, farthest {} {:.2}",
        best.0, best.1, far.0, far.1
    ))
}

fn noise(run: &Run) -> Option<Noise> {
    let varying = run.warnings.iter().filter(|w| w.kind == "high-variation").count();
    if varying == 0 {
        return None;
    }
    let measured = run.results.iter().filter(|m| m.outcome == Outcome::Ok).count();
    let mut causes = Vec::new();
    for kind in ["vm", "load", "governor"] {
        if run.warnings.iter().any(|w| w.kind == kind && w.probe.is_none()) {
            causes.push(match kind {
                "vm" => "a virtual machine (its neighbours on the host)".to_string(),
                "load" => "other load on the machine".to_string(),
                _ => "a CPU governor that changes the clock".to_string(),
            });
        }
    }
    for (kind, what) in [
        ("other-cpu", "other processes took CPU"),
        ("steal", "the hypervisor stole CPU"),
        ("migrated", "samples changed CPU"),
    ] {
        let n = run.warnings.iter().filter(|w| w.kind == kind && w.probe.is_some()).count();
        if n > 0 {
            causes.push(format!("{what} in {n}"));
        }
    }
    Some(Noise { varying, measured, causes })
}

/// The figures as a table: name, median, interval, the seed machines, and the previous run
/// when some figure has one (a column of dashes says nothing).
pub fn table(s: &Summary) -> Table {
    let with_previous = s.has_previous();
    let mut columns = vec![
        ("", Align::Left),
        ("median", Align::Right),
        ("95% CI", Align::Right),
        ("seed machines", Align::Left),
    ];
    if with_previous {
        columns.push(("previous run", Align::Left));
    }
    let mut t = Table::new(&columns);
    for f in &s.figures {
        let sm = f.summary();
        let mut row = vec![
            f.headline.name.to_string(),
            human(sm.median, f.result.unit),
            format!("{} – {}", human(sm.ci_low, f.result.unit), human(sm.ci_high, f.result.unit)),
            f.published_text(),
        ];
        if with_previous {
            row.push(f.previous_text());
        }
        t.row(row);
    }
    t
}

impl Summary<'_> {
    /// Whether some figure is set against a previous run.
    pub fn has_previous(&self) -> bool {
        self.figures.iter().any(|f| f.previous.is_some())
    }
}

/// The summary for a terminal: the figures' table, the seeds' verdicts and the noise line
/// (each line escaped), or nothing when the run has none of them.
pub fn text(s: &Summary) -> String {
    let mut out = String::new();
    if !s.figures.is_empty() {
        out.push_str("summary:\n");
        out.push_str(&table(s).to_terminal());
    }
    // Sentences wrapped to a terminal's width, as the seed 000 legend is.
    for v in &s.verdicts {
        out.push_str(&format!("{}\n", crate::table::wrap(&escape(v), 100)));
    }
    if let Some(n) = &s.noise {
        out.push_str(&format!("{}\n", crate::table::wrap(&escape(&n.line()), 100)));
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Params, RunMeta, Sample, Unit, Warning};

    fn result(probe: &str, params: Params, unit: Unit, base: f64) -> Measurement {
        let sample = |v: f64| Sample {
            iters: 1,
            elapsed_ns: 1,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        Measurement::of_samples(
            probe,
            params,
            unit,
            (0..11).map(|i| sample(base + i as f64)).collect(),
            0.1,
        )
    }

    fn run(id: i64, base: f64) -> Run {
        let mut meta = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "x"));
        meta.id = id;
        Run {
            meta,
            results: vec![
                result("os.syscall.null", Params::new(), Unit::Nanos, base),
                result(
                    "os.pipe.latency",
                    Params::new().with("placement", "same"),
                    Unit::Micros,
                    5.0,
                ),
                result(
                    "threads.switch",
                    Params::new().with("backend", "rt"),
                    Unit::Nanos,
                    base / 10.0,
                ),
            ],
            warnings: vec![],
        }
    }

    #[test]
    fn headlines_are_found_in_table_order_with_the_seed_machines_values() {
        let r = run(2, 100.0);
        let s = summarise(&r, None);
        let names: Vec<&str> = s.figures.iter().map(|f| f.headline.name).collect();
        assert_eq!(names, ["null system call", "pipe round trip", "thread switch: schedlab-rt"]);
        assert_eq!(s.figures[0].median(), r.results[0].summary.as_ref().unwrap().median);
        // Seed 002 Table 2 prints the null syscall for five machines (0.071–0.1102 µs).
        let null = &s.figures[0];
        assert_eq!(null.published.len(), 5, "{:?}", null.published);
        assert!(null
            .published
            .iter()
            .any(|p| p.machine == "seed 002: Linux HP PC" && (p.value - 102.2).abs() < 1e-9));
        assert!(
            null.published_text().starts_with("seed 002: 71.00 ns – 111.0 ns (5 machines)"),
            "{}",
            null.published_text()
        );
        // Seed 003's PTH column stands for schedlab-rt's switch: 166 µs.
        assert_eq!(s.figures[2].published.len(), 1);
        assert!(s.figures[2].published_text().contains("PTH"));
        assert!(s.noise.is_none() && s.verdicts.is_empty());
        assert!(!text(&s).contains("previous run"), "no column of dashes without one");
    }

    #[test]
    fn the_previous_run_of_the_host_gives_a_verdict_per_figure() {
        let (old, new) = (run(1, 100.0), run(2, 200.0));
        let s = summarise(&new, Some(&old));
        let (id, _, v) = s.figures[0].previous.as_ref().unwrap();
        assert_eq!(*id, 1);
        assert!(!v.within_noise && !v.improved, "twice as slow is worse");
        assert_eq!(s.figures[0].previous_text(), "#1: ×1.95 worse");
        assert!(s.figures[1].previous_text().contains("within noise"));
        let t = text(&s);
        assert!(t.starts_with("summary:\n") && t.contains("#1: ×1.95 worse"), "{t}");
    }

    #[test]
    fn noise_is_one_line_naming_its_count_and_causes() {
        let mut r = run(1, 100.0);
        let w = |kind: &str, probe: Option<&str>| Warning {
            kind: kind.into(),
            probe: probe.map(Into::into),
            severity: schedlab_measure::model::Severity::Warn,
            message: "m".into(),
            advice: "a".into(),
        };
        r.warnings = vec![
            w("vm", None),
            w("high-variation", Some("a")),
            w("high-variation", Some("b")),
            w("other-cpu", Some("a")),
        ];
        let line = summarise(&r, None).noise.unwrap().line();
        assert!(line.starts_with("2 of 3 results vary by more than 5%"), "{line}");
        assert!(
            line.contains("virtual machine")
                && line.contains("other processes")
                && line.ends_with("see Warnings"),
            "{line}"
        );
    }

    #[test]
    fn the_seed_experiments_are_a_sentence_each() {
        let mut r = run(1, 100.0);
        // 200 frames of 4.0–4.5 ms, `by` µs later.
        let frames = |by: f64| {
            let f: Vec<String> =
                (0..200).map(|i| format!("{:.0}", 4000.0 + 2.5 * i as f64 + by)).collect();
            f.join(" ")
        };
        let budget = |loader: &str, share: &str, by: f64| {
            let mut m = result(
                "sched.background_budget",
                Params::new().with("loader", loader).with("cpus", 1),
                Unit::Nanos,
                4e6,
            );
            m.notes.set("loader_share", share);
            m.notes.set(schedlab_probes::sched::FRAMES_NOTE, frames(by));
            m.notes.set("loader_goal", 0.1);
            m
        };
        r.results.push(budget("none", "0", 0.0));
        r.results.push(budget("os", "0.650", 100.0));
        r.results.push(budget("rt", "0.105", 200.0));
        r.results.push(budget("rt-budget", "0.106", 3000.0));
        r.results.push(budget("test9", "0.050", 1000.0));
        let s = summarise(&r, None);
        assert_eq!(s.verdicts.len(), 1);
        let v = &s.verdicts[0];
        assert!(v.contains("met by rt 10.5% p95 +0.2 ms [+0."), "{v}");
        assert!(
            v.contains("; not by os 65.0% p95 +0.1 ms [")
                && v.contains(", rt-budget 10.6% p95 +3.0 ms ["),
            "{v}"
        );
        assert!(
            v.contains("; undecided: test9 5.0% p95 +1.0 ms [+0.") && v.ends_with(" ms"),
            "{v}"
        );
        assert!(!v.contains("WARNING"), "{v}");
    }
}
