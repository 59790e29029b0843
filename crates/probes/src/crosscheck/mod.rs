//! `schedlab crosscheck`: each reference tool installed here, run beside the probe that
//! measures the same thing, interleaved, and judged by the ratio.
//!
//! No suite in this field checks itself against the others; this one does, on the user's
//! machine. The rows ([`rows::ROWS`]) pair a tool's command line (perf bench, lmbench's
//! `lat_*`/`bw_*`, cyclictest) with a probe and its parameters, and state whether the two
//! definitions are the same or how they differ. For each selected row:
//!
//! 1. Find the tool ([`tool::Tools`]); absent, the row is skipped with the reason
//!    (`lmbench lat_pipe not found in DIR or on PATH`), never an error.
//! 2. Prepare what it needs (lmbench's server, `/tmp/hello`, a page-cache file).
//! 3. Run `pairs` pairs, A B then B A alternately (probe first in pairs 1, 3, 5…, tool
//!    first in 2, 4…), so a drift of the machine falls on both sides alike. The probe side
//!    is [`crate::runner::measure_one`], the very measurement `schedlab run` makes; the tool
//!    side one invocation, its figure read by [`parse`] and converted to the probe's unit.
//! 4. Each pair gives a ratio, schedlab ÷ tool; the row's figure is the **median of the pair
//!    ratios**, and its [`Verdict`]: within 15% ([`AGREEMENT`]) the row agrees; beyond it,
//!    a row whose definitions differ "differs" (for the stated reason), and a row whose
//!    definitions match DISAGREES — a finding to investigate.
//!
//! The result of a row is one [`Measurement`] of the probe, with every pair's samples pooled
//! and the tool's figures, the pair ratios, the verdict and the definition in its notes; its
//! params are the probe's plus `vs=<row id>`, so two rows on one probe stay apart. A row
//! without a probe (none today; cyclictest had none before sched.wakeup_latency) is stored as
//! `crosscheck.<row id>` with the tool's figures as
//! its samples. A tool that fails or prints something unreadable fails its row, with the
//! reason, and the next row goes on. A stop request (Ctrl-C) kills the running tool; a row
//! with a complete pair keeps its pairs (noted `pairs=2/5`).

pub mod parse;
pub mod rows;
pub mod tool;

use std::time::Instant;

use schedlab_measure::clock::Calibration;
use schedlab_measure::model::{Measurement, Outcome, Params, Sample, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::sys::PinGuard;
use schedlab_measure::{interrupt, stats, units};

pub use parse::{Parser, Reading};
pub use rows::{Definition, Family, Row, ROWS};
pub use tool::{Scratch, Tools};

use crate::runner::{measure_one, RunSink};
use crate::{Context, Probe};

/// The largest departure of the median pair ratio from 1 that still agrees: 15%.
pub const AGREEMENT: f64 = 0.15;

/// The default number of pairs.
pub const DEFAULT_PAIRS: usize = 5;

/// The suite name of a crosscheck run.
pub const SUITE: &str = "crosscheck";

/// What a row's median ratio says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within [`AGREEMENT`] of 1.
    Agrees,
    /// Beyond it, and the definitions differ (the row says how).
    Differs,
    /// Beyond it, though the definitions match: to be investigated.
    Disagrees,
    /// No probe measures what the tool does; its figure is shown alone.
    NoProbe,
}

impl Verdict {
    /// `agrees`, `differs`, `DISAGREES`, `no matching probe`.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::Differs => "differs",
            Verdict::Disagrees => "DISAGREES",
            Verdict::NoProbe => "no matching probe",
        }
    }
}

/// The verdict on a row from its definition and its median ratio. Pure.
pub fn verdict(definition: Definition, ratio: f64) -> Verdict {
    let within = (ratio - 1.0).abs() <= AGREEMENT;
    match definition {
        Definition::NoProbe(_) => Verdict::NoProbe,
        _ if within => Verdict::Agrees,
        Definition::Differs(_) => Verdict::Differs,
        Definition::Matches(_) => Verdict::Disagrees,
    }
}

/// A tool's reading in the probe's unit; `bytes_per_op` links a byte rate to a time per call
/// (perf bench mem's GB/sec beside `mem.clear`'s ns per call). Pure.
///
/// # Errors
/// When the two cannot be converted (a time to a bandwidth without a size).
pub fn to_unit(reading: Reading, unit: Unit, bytes_per_op: Option<f64>) -> Result<f64, String> {
    const MIB: f64 = 1024.0 * 1024.0;
    let v = match (reading, unit) {
        (Reading::Time { ns }, Unit::Nanos) => ns,
        (Reading::Time { ns }, Unit::Micros) => ns / 1e3,
        (Reading::Time { ns }, Unit::OpsPerSec) => 1e9 / ns,
        (Reading::Time { ns }, Unit::MibPerSec) => match bytes_per_op {
            Some(b) => b / (ns / 1e9) / MIB,
            None => return Err("a time per operation without a size cannot be a bandwidth".into()),
        },
        (Reading::Rate { bytes_per_s }, Unit::MibPerSec) => bytes_per_s / MIB,
        (Reading::Rate { bytes_per_s }, Unit::Nanos | Unit::Micros | Unit::OpsPerSec) => {
            let Some(b) = bytes_per_op else {
                return Err("a byte rate without a size per operation cannot be a time".into());
            };
            let ns = b / bytes_per_s * 1e9;
            match unit {
                Unit::Nanos => ns,
                Unit::Micros => ns / 1e3,
                _ => 1e9 / ns,
            }
        }
    };
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("the tool's figure converts to {v} {}", unit.symbol()))
    }
}

/// The rows any of `patterns` selects (all without patterns), in table order. A pattern
/// selects a row by its id (`lmbench.lat_pipe`, `perf.*`, `lmbench`) or by its probe's id
/// (`os.pipe`, `os.*.latency`), as `schedlab run --filter` does.
///
/// # Errors
/// The first pattern that selects no row, with the closest row ids.
pub fn select(patterns: &[String]) -> Result<Vec<&'static Row>, crate::NoMatch> {
    let hit = |pat: &str, r: &Row| {
        crate::matches(pat, r.id) || r.probe.is_some_and(|(p, _)| crate::matches(pat, p))
    };
    for pat in patterns {
        if !ROWS.iter().any(|r| hit(pat, r)) {
            let clean = pat.replace(['*', '?'], "");
            let mut scored: Vec<(usize, &str)> = ROWS
                .iter()
                .flat_map(|r| [Some(r.id), r.probe.map(|p| p.0)])
                .flatten()
                .map(|id| (strsim::levenshtein(&clean, id), id))
                .collect();
            scored.sort();
            scored.dedup();
            let suggestions = scored
                .iter()
                .filter(|s| !pat.trim().is_empty() && s.0 <= clean.len().max(3) / 2)
                .take(3)
                .map(|s| s.1.to_string())
                .collect();
            return Err(crate::NoMatch { pattern: pat.clone(), suggestions });
        }
    }
    Ok(ROWS.iter().filter(|r| patterns.is_empty() || patterns.iter().any(|p| hit(p, r))).collect())
}

/// The catalog's parameter set for a row's probe: the variant holding all of the row's
/// `key=value` pairs (so the params are in the probe's order), else the row's pairs as given.
fn probe_params(probe: &dyn Probe, wanted: &[(&str, &str)]) -> Params {
    let has_all = |v: &Params| wanted.iter().all(|(k, val)| v.get(k) == Some(*val));
    [crate::Suite::Full, crate::Suite::Quick]
        .iter()
        .flat_map(|s| probe.variants(*s))
        .filter(has_all)
        .min_by_key(|v| v.0.len())
        .unwrap_or_else(|| {
            let mut p = Params::new();
            for (k, v) in wanted {
                p.set(k, v);
            }
            p
        })
}

/// Which side of a pair is running, for the observer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The probe, through the run loop's `measure_one`.
    Probe,
    /// The reference tool.
    Tool,
}

/// Who shows the crosscheck while it goes. Every method has an empty default.
pub trait Observer {
    /// `row` (the `index`th of `total`) is at pair `pair` (from 0), side `side`.
    fn step(&mut self, row: &Row, index: usize, total: usize, pair: usize, side: Side) {
        let _ = (row, index, total, pair, side);
    }
    /// `row` is finished and stored as `m`.
    fn done(&mut self, row: &Row, m: &Measurement) {
        let _ = (row, m);
    }
}

/// An observer that shows nothing.
impl Observer for () {}

/// How the rows are run.
pub struct Setup<'a> {
    /// Where the tools are.
    pub tools: &'a Tools,
    /// Pairs per row.
    pub pairs: usize,
    /// The probes' context (its `tmp_dir` also holds the tools' scratch directory).
    pub ctx: &'a Context,
    /// The probe side's sampling settings.
    pub settings_for: &'a dyn Fn(&dyn Probe) -> Settings,
    /// The run's clock calibration.
    pub cal: &'a Calibration,
    /// Environment added to every tool (lmbench's `ENOUGH`).
    pub env: Vec<(&'static str, String)>,
}

/// What a crosscheck did.
#[derive(Debug, Default)]
pub struct Report {
    /// Rows stored.
    pub rows: usize,
    /// Rows whose tool or probe failed.
    pub failed: usize,
    /// Rows skipped (tool absent).
    pub skipped: usize,
    /// Rows that agree, differ for their stated reason, or disagree.
    pub agrees: usize,
    /// See `agrees`.
    pub differs: usize,
    /// See `agrees`.
    pub disagrees: usize,
    /// A stop request ended it.
    pub interrupted: bool,
}

/// The environment lmbench gets: `ENOUGH` from ours when set, else
/// [`tool::LMBENCH_ENOUGH_US`].
pub fn default_env() -> Vec<(&'static str, String)> {
    let enough = std::env::var("ENOUGH")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| tool::LMBENCH_ENOUGH_US.to_string());
    vec![("ENOUGH", enough)]
}

/// Runs `rows` as the module doc says, each result to `sink` as soon as the row is done.
///
/// # Errors
/// The first error of `sink`; the rows saved before it stay saved.
pub fn run_rows<S: RunSink>(
    rows: &[&Row],
    setup: &Setup<'_>,
    sink: &mut S,
    observer: &mut dyn Observer,
) -> Result<Report, S::Error> {
    let all = crate::catalog();
    let mut report = Report::default();
    let mut scratch = Scratch::new(&setup.ctx.tmp_dir).ok();
    for (index, row) in rows.iter().enumerate() {
        if interrupt::requested() {
            report.interrupted = true;
            break;
        }
        let m = match scratch.as_mut() {
            Some(s) => one_row(row, index, rows.len(), &all, setup, s, observer),
            None => failed_row(
                row,
                &all,
                format!("cannot create a scratch directory in {}", setup.ctx.tmp_dir.display()),
            ),
        };
        sink.save(&m)?;
        report.rows += 1;
        match &m.outcome {
            Outcome::Failed(_) => report.failed += 1,
            Outcome::Skipped(_) => report.skipped += 1,
            Outcome::Interrupted => report.interrupted = true,
            Outcome::Ok => match m.notes.get("verdict") {
                Some("agrees") => report.agrees += 1,
                Some("differs") => report.differs += 1,
                Some("DISAGREES") => report.disagrees += 1,
                _ => {}
            },
        }
        observer.done(row, &m);
        if m.notes.get("interrupted").is_some() {
            report.interrupted = true;
        }
        if report.interrupted {
            break;
        }
    }
    drop(scratch.take());
    report.interrupted |= interrupt::requested();
    Ok(report)
}

/// The id and params a row's result is stored under.
fn identity(row: &Row, all: &[Box<dyn Probe>]) -> (String, Params, Unit, Option<usize>) {
    match row.probe {
        Some((id, wanted)) => match all.iter().position(|p| p.info().id == id) {
            Some(i) => {
                let params = probe_params(all[i].as_ref(), wanted).with("vs", row.id);
                (id.to_string(), params, all[i].info().unit, Some(i))
            }
            None => (id.to_string(), Params::new().with("vs", row.id), Unit::Micros, None),
        },
        None => (format!("crosscheck.{}", row.id), Params::new(), Unit::Micros, None),
    }
}

fn failed_row(row: &Row, all: &[Box<dyn Probe>], why: String) -> Measurement {
    let (id, params, unit, _) = identity(row, all);
    let mut m = Measurement::without_samples(&id, params, unit, Outcome::Failed(why), 0.0);
    m.notes = row_notes(row, "");
    m
}

/// The notes every row carries: which tool, its command line, the definition.
fn row_notes(row: &Row, file: &str) -> Params {
    let (kind, text) = match row.definition {
        Definition::Matches(t) => ("matches", t),
        Definition::Differs(t) => ("differs", t),
        Definition::NoProbe(t) => ("no probe", t),
    };
    Params::new()
        .with("tool", row.id)
        .with("command", row.command(file))
        .with("definition", format!("{kind}: {text}"))
}

fn one_row(
    row: &Row,
    index: usize,
    total: usize,
    all: &[Box<dyn Probe>],
    setup: &Setup<'_>,
    scratch: &mut Scratch,
    observer: &mut dyn Observer,
) -> Measurement {
    let started = Instant::now();
    let (id, params, unit, probe_at) = identity(row, all);
    let file = scratch.file_path().display().to_string();
    let notes = row_notes(row, &file);
    let end = |outcome: Outcome| {
        let mut m = Measurement::without_samples(
            &id,
            params.clone(),
            unit,
            outcome,
            started.elapsed().as_secs_f64(),
        );
        m.notes = notes.clone();
        m
    };
    let program = match setup.tools.program(row) {
        Ok(p) => p,
        Err(why) => return end(Outcome::Skipped(why)),
    };
    if row.probe.is_some() && probe_at.is_none() {
        return end(Outcome::Failed(format!("no probe {id} in the catalog")));
    }
    if let Err(why) = scratch.prepare(row, &program) {
        return end(Outcome::Failed(why));
    }
    let args: Vec<String> = row.args.iter().map(|a| a.replace("{file}", &file)).collect();
    let pin = if row.pin { Some(schedlab_measure::sys::allowed_cpus()[0]) } else { None };
    let probe_params = Params(params.0.iter().filter(|(k, _)| k != "vs").cloned().collect());

    let mut samples: Vec<Sample> = Vec::new();
    let mut probe_notes = Params::new();
    let mut probe_medians: Vec<f64> = Vec::new();
    let mut tool_values: Vec<f64> = Vec::new();
    let mut ratios: Vec<f64> = Vec::new();
    let mut failure: Option<String> = None;
    let mut interrupted = false;
    'pairs: for pair in 0..setup.pairs.max(1) {
        let order = if pair.is_multiple_of(2) {
            [Side::Probe, Side::Tool]
        } else {
            [Side::Tool, Side::Probe]
        };
        let (mut s, mut t) = (None, None);
        for side in order {
            if interrupt::requested() {
                interrupted = true;
                break 'pairs;
            }
            observer.step(row, index, total, pair, side);
            match side {
                Side::Probe => {
                    let Some(i) = probe_at else { continue };
                    let probe = all[i].as_ref();
                    // A pinned row runs the probe's measuring thread on the tool's
                    // CPU too (probes with a placement pin their own parties).
                    let _pinned = match pin.map(PinGuard::pin).transpose() {
                        Ok(g) => g,
                        Err(e) => {
                            failure = Some(format!("pinning the probe: {e}"));
                            break 'pairs;
                        }
                    };
                    let m = measure_one(
                        probe,
                        &probe_params,
                        setup.ctx,
                        &(setup.settings_for)(probe),
                        setup.cal,
                    );
                    match (&m.outcome, &m.summary) {
                        (Outcome::Ok, Some(sum)) => {
                            s = Some(sum.median);
                            samples.extend(m.samples.iter().cloned());
                            probe_notes = m.notes.clone();
                        }
                        (Outcome::Interrupted, _) => {
                            interrupted = true;
                            break 'pairs;
                        }
                        (Outcome::Skipped(why), _) => {
                            return end(Outcome::Skipped(format!("the probe: {why}")))
                        }
                        (outcome, _) => {
                            failure = Some(format!(
                                "the probe: {}",
                                outcome.reason().unwrap_or(outcome.key())
                            ));
                            break 'pairs;
                        }
                    }
                }
                Side::Tool => {
                    let mut runs = Vec::with_capacity(row.runs.max(1));
                    for _ in 0..row.runs.max(1) {
                        match run_tool(row, &program, &args, unit, pin, setup, scratch) {
                            Ok(v) => runs.push(v),
                            Err(ToolEnd::Failed(why)) => {
                                failure = Some(why);
                                break 'pairs;
                            }
                            Err(ToolEnd::Interrupted) => {
                                interrupted = true;
                                break 'pairs;
                            }
                        }
                    }
                    t = stats::median(&runs);
                }
            }
        }
        if let Some(t) = t {
            tool_values.push(t);
        }
        if let Some(s) = s {
            probe_medians.push(s);
        }
        if let (Some(s), Some(t)) = (s, t) {
            ratios.push(s / t);
        }
    }
    if let Some(why) = failure {
        let mut m = end(Outcome::Failed(why));
        note_figures(&mut m.notes, unit, &tool_values, &ratios);
        return m;
    }
    let complete = if row.probe.is_some() { ratios.len() } else { tool_values.len() };
    if complete == 0 {
        return end(if interrupted {
            Outcome::Interrupted
        } else {
            Outcome::Failed("no pair completed".into())
        });
    }
    let wall = started.elapsed().as_secs_f64();
    let mut m = if row.probe.is_some() {
        let mut m = Measurement::of_samples(&id, params.clone(), unit, samples, wall);
        let mut n = probe_notes;
        n.0.retain(|(k, _)| k != "modes");
        n.0.extend(notes.0.iter().cloned());
        m.notes = n;
        let h = |v: f64| units::human(v, unit);
        m.notes.set(
            "probe_medians",
            probe_medians.iter().map(|&v| h(v)).collect::<Vec<_>>().join(" | "),
        );
        m
    } else {
        let tool_samples = tool_values
            .iter()
            .map(|&v| Sample {
                iters: 1,
                elapsed_ns: 0,
                value: v,
                other_cpu_ns: None,
                migrated: false,
            })
            .collect();
        let mut m = Measurement::of_samples(&id, params.clone(), unit, tool_samples, wall);
        m.notes = notes.clone();
        m
    };
    note_figures(&mut m.notes, unit, &tool_values, &ratios);
    let v = match row.probe {
        None => Verdict::NoProbe,
        Some(_) => verdict(row.definition, stats::median(&ratios).unwrap_or(f64::NAN)),
    };
    m.notes.set("verdict", v.text());
    m.notes.set("pairs", format!("{complete}/{}", setup.pairs.max(1)));
    if interrupted {
        m.notes.set("interrupted", "yes");
    }
    m
}

/// Why a tool gave no figure.
enum ToolEnd {
    Failed(String),
    Interrupted,
}

/// One invocation of `row`'s tool (its server around it), its figure in `unit`.
fn run_tool(
    row: &Row,
    program: &std::path::Path,
    args: &[String],
    unit: Unit,
    pin: Option<usize>,
    setup: &Setup<'_>,
    scratch: &Scratch,
) -> Result<f64, ToolEnd> {
    let server = match row.server {
        Some((start, stop)) => Some(
            tool::Server::start(program, start, stop, &setup.env, pin, scratch)
                .map_err(|why| ToolEnd::Failed(format!("{}'s server: {why}", row.program)))?,
        ),
        None => None,
    };
    let ran = tool::run(program, args, &setup.env, pin, scratch.dir());
    drop(server);
    match ran {
        tool::Ran::Output(text) => row
            .parser
            .parse(&text)
            .and_then(|r| to_unit(r, unit, row.bytes_per_op))
            .map_err(|why| ToolEnd::Failed(format!("{}'s output: {why}", row.program))),
        tool::Ran::Failed(why) => Err(ToolEnd::Failed(why)),
        tool::Ran::Interrupted => Err(ToolEnd::Interrupted),
    }
}

/// The tool's figures and the pair ratios, into `notes`: `tool_values`, `tool_median`,
/// `pair_ratios` and `ratio` (their median).
fn note_figures(notes: &mut Params, unit: Unit, tool_values: &[f64], ratios: &[f64]) {
    let h = |v: f64| units::human(v, unit);
    if !tool_values.is_empty() {
        notes.set("tool_values", tool_values.iter().map(|&v| h(v)).collect::<Vec<_>>().join(" | "));
        if let Some(m) = stats::median(tool_values) {
            notes.set("tool_median", h(m));
        }
    }
    if !ratios.is_empty() {
        notes.set(
            "pair_ratios",
            ratios.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>().join(" "),
        );
        if let Some(r) = stats::median(ratios) {
            notes.set("ratio", format!("{r:.3}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_reads_the_median_ratio_against_the_definition() {
        let m = Definition::Matches("same");
        let d = Definition::Differs("other");
        assert_eq!(verdict(m, 1.0), Verdict::Agrees);
        assert_eq!(verdict(m, 1.149), Verdict::Agrees);
        assert_eq!(verdict(m, 0.851), Verdict::Agrees);
        assert_eq!(verdict(m, 1.16), Verdict::Disagrees);
        assert_eq!(verdict(m, 0.84), Verdict::Disagrees);
        assert_eq!(verdict(d, 1.10), Verdict::Agrees);
        assert_eq!(verdict(d, 1.7), Verdict::Differs);
        assert_eq!(verdict(Definition::NoProbe("none"), 1.0), Verdict::NoProbe);
        // A median of pair ratios, not a ratio of medians: one wild pair does not decide.
        let r = stats::median(&[1.02, 0.97, 3.0, 1.01, 0.99]).unwrap();
        assert_eq!(verdict(m, r), Verdict::Agrees);
    }

    #[test]
    fn readings_convert_into_the_probes_units() {
        let t = Reading::Time { ns: 2370.0 };
        assert_eq!(to_unit(t, Unit::Micros, None).unwrap(), 2.37);
        assert_eq!(to_unit(t, Unit::Nanos, None).unwrap(), 2370.0);
        // perf's 32 GiB/s memset of 4 KiB: 4096 / 32·2^30 s = 119.2 ns per call.
        let r = Reading::Rate { bytes_per_s: 32.0 * 1024.0 * 1024.0 * 1024.0 };
        let ns = to_unit(r, Unit::Nanos, Some(4096.0)).unwrap();
        assert!((ns - 119.209).abs() < 0.001, "{ns}");
        assert_eq!(to_unit(r, Unit::MibPerSec, None).unwrap(), 32.0 * 1024.0);
        // lmbench's 4206.19 MB/sec are 10^6 bytes: 4011.3 MiB/s.
        let mb = to_unit(Reading::Rate { bytes_per_s: 4206.19e6 }, Unit::MibPerSec, None).unwrap();
        assert!((mb - 4011.34).abs() < 0.01, "{mb}");
        assert!(to_unit(r, Unit::Nanos, None).is_err());
        assert!(to_unit(Reading::Time { ns: 0.0 }, Unit::OpsPerSec, None).is_err());
    }

    #[test]
    fn every_row_names_a_catalog_probe_and_unique_ids() {
        let all = crate::catalog();
        let mut ids = std::collections::HashSet::new();
        for r in ROWS {
            assert!(ids.insert(r.id), "duplicate row {}", r.id);
            assert!(
                r.id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_'),
                "{}",
                r.id
            );
            if let Some((id, wanted)) = r.probe {
                let p = all
                    .iter()
                    .find(|p| p.info().id == id)
                    .unwrap_or_else(|| panic!("{}: no probe {id}", r.id));
                let params = probe_params(p.as_ref(), wanted);
                let known = [crate::Suite::Full, crate::Suite::Quick]
                    .iter()
                    .any(|s| p.variants(*s).contains(&params));
                assert!(known, "{}: {id} [{params}] is no variant of the catalog", r.id);
                // The tool's reading converts into the probe's unit.
                let sample = match r.parser {
                    Parser::PerfRate | Parser::LmbenchMbPerSec(_) => {
                        Reading::Rate { bytes_per_s: 1e9 }
                    }
                    _ => Reading::Time { ns: 1000.0 },
                };
                assert!(to_unit(sample, p.info().unit, r.bytes_per_op).is_ok(), "{}", r.id);
            } else {
                assert!(matches!(r.definition, Definition::NoProbe(_)), "{}", r.id);
            }
        }
    }

    #[test]
    fn rows_are_selected_by_their_id_or_their_probe() {
        let ids = |p: &[&str]| -> Vec<&str> {
            select(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap()
                .iter()
                .map(|r| r.id)
                .collect()
        };
        assert_eq!(ids(&["perf.syscall"]), ["perf.syscall.basic"]);
        assert!(ids(&["os.pipe.latency"]).contains(&"lmbench.lat_pipe"));
        assert!(ids(&["os.pipe.latency"]).contains(&"perf.sched.pipe"));
        assert!(ids(&["lmbench"]).iter().all(|id| id.starts_with("lmbench.")));
        assert_eq!(ids(&[]).len(), ROWS.len());
        let e = select(&["lmbench.lat_pip".to_string()]).unwrap_err();
        assert!(e.suggestions.iter().any(|s| s == "lmbench.lat_pipe"), "{e}");
    }
}
