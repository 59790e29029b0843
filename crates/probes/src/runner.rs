//! The run loop: measure a list of probes and parameter sets one after another, hand each
//! result to a sink as soon as it exists, and report progress to whoever shows it.
//!
//! It lives beside the catalog because it is the catalog's one user that every front end
//! shares: `schedlab run` wires it to the SQLite store and a terminal progress bar; another
//! front end (a report generator that measures first, a fleet agent) wires it to something
//! else. It does no I/O of its own: results go to a [`RunSink`], progress to a
//! [`RunObserver`].
//!
//! For every probe and parameter set, in order:
//! 1. setup (never timed); a skip is kept with its reason and the run goes on;
//! 2. sample with the probe's settings ([`schedlab_measure::sampler`]);
//! 3. teardown (the instance is dropped: children reaped, files removed);
//! 4. hand the measurement to the sink (the store commits it in its own transaction), then to
//!    the observer.
//!
//! An interrupt request ([`schedlab_measure::interrupt`]) stops the current probe at its next
//! sample boundary; it is kept as interrupted and the loop ends.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use schedlab_measure::clock::Calibration;
use schedlab_measure::model::{is_raw_note, Measurement, Outcome, Params, Warning};
use schedlab_measure::placement::Placement;
use schedlab_measure::sampler::{self, Settings};
use schedlab_measure::{interrupt, warnings, ProbeError};

use crate::{Context, Probe, Suite};

/// Two clusters in a result's samples: both are the answer, not the median between them
/// (docs/SOURCES.md, Noise is reported, not hidden); noted as `modes`, each mode labelled
/// `same CPU` or `cross-CPU` when the `placement` note shows that the two parties' placement
/// is what separates them.
fn note_modes(m: &mut Measurement) {
    let values: Vec<f64> = m.samples.iter().map(|x| x.value).collect();
    if let Some(md) = schedlab_measure::stats::modes(&values) {
        let h = |v: f64| schedlab_measure::units::human(v, m.unit);
        let explained = m
            .notes
            .get("placement")
            .and_then(Placement::parse)
            .and_then(|p| p.explains(&values, &md));
        let (lo, hi) = match explained {
            Some(true) => (" same CPU", " cross-CPU"),
            Some(false) => (" cross-CPU", " same CPU"),
            None => ("", ""),
        };
        let text =
            format!("{} x{}{lo} | {} x{}{hi}", h(md.low.0), md.low.1, h(md.high.0), md.high.1);
        m.notes.set("modes", text);
    }
}

/// Notes where the parties ran (`placement`), unless every one was pinned and stayed there.
fn note_placement(m: &mut Measurement, placement: &Placement) {
    if let Some(text) = placement.note() {
        m.notes.set("placement", text);
    }
}

/// Runs one probe with one parameter set, start to finish. Never panics: a panicking probe
/// becomes a failed measurement.
pub fn measure_one(
    probe: &dyn Probe,
    params: &Params,
    ctx: &Context,
    settings: &Settings,
    cal: &Calibration,
) -> Measurement {
    let info = probe.info();
    let started = Instant::now();
    let attempt = catch_unwind(AssertUnwindSafe(|| {
        let mut inst = probe.setup(params, ctx)?;
        let metric = inst.metric();
        let collected = sampler::collect_in(&mut *inst, settings, cal, metric, info.unit)?;
        let notes = inst.notes();
        drop(inst); // teardown before the next probe starts
        Ok::<_, ProbeError>((collected, notes))
    }));
    let wall = started.elapsed().as_secs_f64();
    let outcome = match attempt {
        Ok(Ok((c, notes))) => {
            let mut m =
                Measurement::of_samples(info.id, params.clone(), info.unit, c.samples, wall);
            if m.outcome == Outcome::Ok {
                m.notes = notes;
                note_placement(&mut m, &c.placement);
                note_modes(&mut m);
                m.iters_per_sample = c.iters;
                m.overhead_ns_per_iter = c.overhead_ns_per_iter;
                m.noise = c.noise;
            }
            return m;
        }
        Ok(Err(ProbeError::Skip(why))) => Outcome::Skipped(why),
        Ok(Err(ProbeError::Failed(why))) => {
            if interrupt::requested() {
                Outcome::Interrupted
            } else {
                Outcome::Failed(why)
            }
        }
        Ok(Err(ProbeError::Interrupted)) => Outcome::Interrupted,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Outcome::Failed(format!("probe panicked: {msg}"))
        }
    };
    Measurement::without_samples(info.id, params.clone(), info.unit, outcome, wall)
}

/// Where results go as they are measured (the store, in `schedlab run`).
pub trait RunSink {
    /// Why a result could not be kept; it stops the run.
    type Error;

    /// Keeps `m`. Called once per measurement, in order.
    fn save(&mut self, m: &Measurement) -> Result<(), Self::Error>;
}

/// Who shows the run while it goes (a terminal, a log). Every method has an empty default.
pub trait RunObserver {
    /// `probe` with `params` is about to be measured; `done` of `total` are finished.
    fn measuring(&mut self, probe: &dyn Probe, params: &Params, done: usize, total: usize) {
        let _ = (probe, params, done, total);
    }

    /// `m` was measured and kept; its probe has `variants` parameter sets in this run.
    fn measured(&mut self, m: &Measurement, variants: usize) {
        let _ = (m, variants);
    }
}

/// An observer that shows nothing.
impl RunObserver for () {}

/// What a run loop did.
#[derive(Debug, Default)]
pub struct RunReport {
    /// Results measured and kept, skipped ones included.
    pub results: usize,
    /// How many failed.
    pub failed: usize,
    /// The loop stopped on an interrupt request.
    pub interrupted: bool,
    /// Noise warnings about the measurements (not about the machine: the caller has those).
    pub warnings: Vec<Warning>,
}

/// Measures `work` in order into `sink`, telling `observer`. `settings_for` gives each
/// probe's sampling settings. Warnings about the spread of results are not drawn from a
/// smoke suite, whose two-iteration samples say nothing about it.
///
/// # Errors
/// The first error of `sink`; what was saved before it stays saved.
pub fn run_work<S: RunSink>(
    work: &[(&dyn Probe, Params)],
    suite: Suite,
    ctx: &Context,
    settings_for: impl Fn(&dyn Probe) -> Settings,
    cal: &Calibration,
    sink: &mut S,
    observer: &mut dyn RunObserver,
) -> Result<RunReport, S::Error> {
    run_rounds(work, 1, suite, ctx, settings_for, cal, sink, observer)
}

/// [`run_work`] in `rounds` interleaved rounds: the whole list is measured `rounds` times, each
/// round starting at a different place in it (round `r` at `r * len / rounds`), so a slow
/// spell of the machine falls on different probes in different rounds instead of on one.
/// Each result is kept once, when its last round is done (or, interrupted, with the rounds it
/// has): every round's samples pooled into one summary, with the rounds' medians and their
/// spread in its notes (`round_medians`, `between_rounds`), next to the pooled interval, and a
/// `rounds` warning when the spread is wider than 5% and than twice that interval. The
/// observer sees every round's measurement, each result after the sink has it. With one
/// round this is [`run_work`]: each result kept as measured.
///
/// The drift sentinel (`noise::sentinel_ns`) is read at the start and after every
/// measurement; a result around which it moved by more than 10% from the first reading is
/// flagged. Not in smoke runs, which measure nothing worth judging.
///
/// # Errors
/// The first error of `sink`; what was saved before it stays saved.
#[allow(clippy::too_many_arguments)]
pub fn run_rounds<S: RunSink>(
    work: &[(&dyn Probe, Params)],
    rounds: usize,
    suite: Suite,
    ctx: &Context,
    settings_for: impl Fn(&dyn Probe) -> Settings,
    cal: &Calibration,
    sink: &mut S,
    observer: &mut dyn RunObserver,
) -> Result<RunReport, S::Error> {
    let rounds = rounds.max(1);
    let n = work.len();
    let mut report = RunReport::default();
    let variants = |id: &str| work.iter().filter(|(p, _)| p.info().id == id).count();
    let sentinel = suite != Suite::Smoke;
    let reference = if sentinel { schedlab_measure::noise::sentinel_ns() } else { 0 };
    let mut before = reference;
    let mut got: Vec<Vec<Measurement>> = vec![Vec::new(); n];
    let mut drifted: Vec<Option<f64>> = vec![None; n];
    let mut saved = vec![false; n];
    // Every result kept so far, for the verdicts that judge one against another
    // (`Probe::judge`).
    let mut kept: Vec<Measurement> = Vec::new();
    let mut done = 0;
    let keep = |i: usize,
                got: &[Vec<Measurement>],
                drifted: &[Option<f64>],
                report: &mut RunReport,
                kept: &mut Vec<Measurement>,
                sink: &mut S|
     -> Result<(), S::Error> {
        let mut m = merge_rounds(&got[i], rounds, drifted[i]);
        let found = work[i].0.judge(&mut m, kept);
        sink.save(&m)?;
        report.results += 1;
        if let Outcome::Failed(_) = m.outcome {
            report.failed += 1;
        }
        if suite != Suite::Smoke {
            report.warnings.extend(found);
            report.warnings.extend(warnings::measurement_warnings(&m));
            if let (Some(d), Outcome::Ok) = (drifted[i], &m.outcome) {
                report.warnings.push(warnings::drift_warning(&m, d));
            }
            if let Some(w) = rounds_warning(&m) {
                report.warnings.push(w);
            }
        }
        kept.push(m);
        Ok(())
    };
    'rounds: for r in 0..rounds {
        let start = r * n / rounds;
        for k in 0..n {
            let i = (start + k) % n;
            if interrupt::requested() {
                report.interrupted = true;
                break 'rounds;
            }
            let (probe, params) = &work[i];
            observer.measuring(*probe, params, done, n * rounds);
            let m = measure_one(*probe, params, ctx, &settings_for(*probe), cal);
            done += 1;
            if sentinel {
                let after = schedlab_measure::noise::sentinel_ns();
                if let Some(d) = schedlab_measure::noise::drift(reference, before, after) {
                    if drifted[i].is_none_or(|old| d.abs() > old.abs()) {
                        drifted[i] = Some(d);
                    }
                }
                before = after;
            }
            let stop = m.outcome == Outcome::Interrupted;
            got[i].push(m);
            if r == rounds - 1 || stop {
                keep(i, &got, &drifted, &mut report, &mut kept, sink)?;
                saved[i] = true;
            }
            let last = got[i].last().expect("just pushed");
            observer.measured(last, variants(probe.info().id));
            if stop {
                report.interrupted = true;
                break 'rounds;
            }
        }
    }
    for i in 0..n {
        if !saved[i] && !got[i].is_empty() {
            keep(i, &got, &drifted, &mut report, &mut kept, sink)?;
        }
    }
    report.interrupted |= interrupt::requested();
    Ok(report)
}

/// One result from a result's rounds: the successful rounds' samples pooled, their medians
/// and spread noted; with no successful round, the first round's outcome as it was.
fn merge_rounds(ms: &[Measurement], rounds: usize, drift: Option<f64>) -> Measurement {
    let mut m = pool_rounds(ms, rounds);
    if let (Some(d), Outcome::Ok) = (drift, &m.outcome) {
        m.notes.set("drift", format!("{:+.0}%", d * 100.0));
    }
    m
}

/// The pooling of [`merge_rounds`]; one round is kept as it was.
fn pool_rounds(ms: &[Measurement], rounds: usize) -> Measurement {
    let ok: Vec<&Measurement> = ms.iter().filter(|m| m.outcome == Outcome::Ok).collect();
    let Some(first) = ok.first().filter(|_| rounds > 1) else {
        return ms[0].clone();
    };
    let samples = ok.iter().flat_map(|m| m.samples.iter().cloned()).collect();
    let wall = ms.iter().map(|m| m.wall_s).sum();
    let mut m =
        Measurement::of_samples(&first.probe, first.params.clone(), first.unit, samples, wall);
    if m.outcome != Outcome::Ok {
        return m;
    }
    m.notes = first.notes.clone();
    m.notes.0.retain(|(k, _)| k != "modes" && k != "drift" && k != "placement");
    // Raw values are every round's (`RAW_NOTE_SUFFIX`): a verdict on them sees them all.
    for (key, raw) in m.notes.0.iter_mut().filter(|(k, _)| is_raw_note(k)) {
        *raw = ok.iter().filter_map(|r| r.notes.get(key)).collect::<Vec<_>>().join(" ");
    }
    let placements: Vec<(Option<&str>, usize)> =
        ok.iter().map(|r| (r.notes.get("placement"), r.samples.len())).collect();
    if let Some(p) = Placement::merge_rounds(&placements) {
        note_placement(&mut m, &p);
    }
    note_modes(&mut m);
    m.iters_per_sample = first.iters_per_sample;
    m.overhead_ns_per_iter = first.overhead_ns_per_iter;
    m.noise = ok.iter().filter_map(|x| x.noise).reduce(|a, b| schedlab_measure::noise::Noise {
        window_ns: a.window_ns + b.window_ns,
        other_cpu_ns: a.other_cpu_ns + b.other_cpu_ns,
        steal_ns: a.steal_ns + b.steal_ns,
    });
    let medians: Vec<f64> =
        ok.iter().filter_map(|x| x.summary.as_ref().map(|s| s.median)).collect();
    let h = |v: f64| schedlab_measure::units::human(v, m.unit);
    m.notes.set("rounds", format!("{}/{rounds}", ok.len()));
    m.notes.set("round_medians", medians.iter().map(|&v| h(v)).collect::<Vec<_>>().join(" | "));
    if let Some(mid) = schedlab_measure::stats::median(&medians).filter(|v| *v != 0.0) {
        let (lo, hi) = medians.iter().fold((f64::MAX, f64::MIN), |(l, u), &v| (l.min(v), u.max(v)));
        m.notes.set("between_rounds", format!("{:.1}%", (hi - lo) / mid.abs() * 100.0));
    }
    m
}

/// A `rounds` warning when a result's round medians spread wider than 5% and than twice its
/// pooled interval's half-width: the machine moved between rounds more than the samples show.
fn rounds_warning(m: &Measurement) -> Option<Warning> {
    let spread = m.notes.get("between_rounds")?.trim_end_matches('%').parse::<f64>().ok()? / 100.0;
    let ci = m.summary.as_ref()?.ci_rel_halfwidth();
    if spread <= 0.05 || spread <= 2.0 * ci {
        return None;
    }
    let name =
        if m.params.is_empty() { m.probe.clone() } else { format!("{} [{}]", m.probe, m.params) };
    Some(Warning {
        kind: "rounds".into(),
        probe: Some(name.clone()),
        severity: schedlab_measure::model::Severity::Warn,
        message: format!(
            "{name}: its rounds' medians ({}) spread {:.1}%, against a pooled interval of ±{:.1}%",
            m.notes.get("round_medians").unwrap_or("-"),
            spread * 100.0,
            ci * 100.0
        ),
        advice: warnings::advice_for("rounds").into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    /// The smoke variants of the `os.syscall` probes, as a run would list them.
    fn syscall_smoke_work(all: &[Box<dyn Probe>]) -> Vec<(&dyn Probe, Params)> {
        let picked = crate::select(all, &["os.syscall".to_string()]).unwrap();
        picked
            .iter()
            .flat_map(|p| p.variants(Suite::Smoke).into_iter().map(move |v| (*p, v)))
            .collect()
    }

    #[derive(Default)]
    struct Kept(Vec<Measurement>);

    impl RunSink for Kept {
        type Error = std::convert::Infallible;
        fn save(&mut self, m: &Measurement) -> Result<(), Self::Error> {
            self.0.push(m.clone());
            Ok(())
        }
    }

    /// Counts what the observer was told.
    #[derive(Default)]
    struct Seen {
        measuring: usize,
        measured: Vec<(String, usize)>,
    }

    impl RunObserver for Seen {
        fn measuring(&mut self, _: &dyn Probe, _: &Params, done: usize, total: usize) {
            assert!(done < total);
            self.measuring += 1;
        }
        fn measured(&mut self, m: &Measurement, variants: usize) {
            self.measured.push((m.probe.clone(), variants));
        }
    }

    #[test]
    fn every_result_reaches_the_sink_in_order_and_the_observer_after_it() {
        let all = catalog();
        let work = syscall_smoke_work(&all);
        assert!(!work.is_empty());
        let (mut kept, mut seen) = (Kept::default(), Seen::default());
        let report = run_work(
            &work,
            Suite::Smoke,
            &Context::for_tests(),
            |_| Settings::smoke(),
            &Calibration::zero(),
            &mut kept,
            &mut seen,
        )
        .unwrap();
        assert_eq!(report.results, work.len());
        assert_eq!(kept.0.len(), work.len());
        assert_eq!(seen.measuring, work.len());
        for ((p, params), m) in work.iter().zip(&kept.0) {
            assert_eq!(m.probe, p.info().id);
            assert_eq!(&m.params, params);
        }
        assert_eq!(seen.measured.len(), work.len());
        assert!(report.warnings.is_empty(), "a smoke run draws no spread warnings");
    }

    #[test]
    fn rounds_pool_every_round_into_one_result_with_their_spread() {
        let all = catalog();
        let work = syscall_smoke_work(&all);
        let (mut kept, mut seen) = (Kept::default(), Seen::default());
        let report = run_rounds(
            &work,
            3,
            Suite::Smoke,
            &Context::for_tests(),
            |_| Settings::smoke(),
            &Calibration::zero(),
            &mut kept,
            &mut seen,
        )
        .unwrap();
        assert_eq!(report.results, work.len());
        assert_eq!(seen.measuring, 3 * work.len(), "the observer sees every round");
        // One result per probe and parameters, in the order each one's last round ended.
        assert_eq!(kept.0.len(), work.len());
        for m in kept.0.iter().filter(|m| m.outcome == Outcome::Ok) {
            assert_eq!(m.samples.len(), 3 * Settings::smoke().samples, "{}", m.probe);
            assert_eq!(m.notes.get("rounds"), Some("3/3"), "{}", m.notes);
            assert_eq!(m.notes.get("round_medians").unwrap().split(" | ").count(), 3);
            assert!(m.notes.get("between_rounds").is_some(), "{}", m.notes);
        }
        let mut ids: Vec<_> = kept.0.iter().map(|m| (m.probe.clone(), m.params.clone())).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), work.len(), "no result kept twice");
    }

    #[test]
    fn rounds_pool_their_raw_notes_and_keep_the_first_rounds_others() {
        let round = |raw: &str, p99: &str| {
            let mut m = Measurement::of_samples(
                "p",
                Params::new(),
                schedlab_measure::model::Unit::Nanos,
                vec![schedlab_measure::model::Sample {
                    iters: 1,
                    elapsed_ns: 1,
                    value: 4.0,
                    other_cpu_ns: None,
                    migrated: false,
                }],
                1.0,
            );
            m.notes = Params::new().with("p99_us", p99).with("frame_us_raw", raw);
            m
        };
        let m = merge_rounds(&[round("1 2", "2"), round("3", "3"), round("4 5", "5")], 3, None);
        assert_eq!(m.notes.get("frame_us_raw"), Some("1 2 3 4 5"), "{}", m.notes);
        assert_eq!(m.notes.get("p99_us"), Some("2"));
    }

    #[test]
    fn a_spread_wider_than_the_interval_is_a_rounds_warning() {
        let sample = |v: f64| schedlab_measure::model::Sample {
            iters: 1,
            elapsed_ns: 1000,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        let round = |v: f64| {
            Measurement::of_samples(
                "os.x",
                Params::new(),
                schedlab_measure::model::Unit::Nanos,
                (0..5).map(|i| sample(v + i as f64 * 0.01)).collect(),
                0.1,
            )
        };
        let steady = merge_rounds(&[round(100.0), round(100.5), round(100.2)], 3, None);
        assert!(rounds_warning(&steady).is_none(), "{}", steady.notes);
        let moved = merge_rounds(&[round(100.0), round(120.0), round(101.0)], 3, None);
        assert_eq!(moved.notes.get("between_rounds"), Some("19.8%"));
        let w = rounds_warning(&moved).expect("a rounds warning");
        assert!(w.message.contains("19.8%"), "{}", w.message);
    }

    /// Runs the smoke variants of `id` (with `params`, when given) through `measure_one`.
    fn smoke_one(id: &str, params: Option<Params>) -> Measurement {
        let all = catalog();
        let probe = all.iter().find(|p| p.info().id == id).expect("in the catalog");
        let params = params.unwrap_or_else(|| probe.variants(Suite::Smoke)[0].clone());
        let settings = Settings { samples: 4, ..Settings::smoke() };
        measure_one(&**probe, &params, &Context::for_tests(), &settings, &Calibration::zero())
    }

    #[test]
    fn an_unpinned_two_party_result_notes_where_both_ran_on_cpus_that_exist() {
        let m = smoke_one("os.pipe.context1", None);
        assert_eq!(m.outcome, Outcome::Ok, "{:?}", m.outcome);
        let allowed = schedlab_measure::sys::allowed_cpus();
        if allowed.len() == 1 {
            // Restricted to one CPU by whoever started the tests: pinned, nothing to say.
            assert_eq!(m.notes.get("placement"), None, "{}", m.notes);
            return;
        }
        let note = m.notes.get("placement").expect("a placement note");
        let p = Placement::parse(note).unwrap_or_else(|| panic!("unparseable: {note}"));
        let names: Vec<&str> = p.parties.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["parent", "child"], "{note}");
        for party in &p.parties {
            assert_eq!(party.seen() as usize, m.samples.len(), "one sighting per sample: {note}");
            assert!(party.cpus.iter().all(|(c, _)| allowed.contains(c)), "{note}");
            assert!(!party.pinned, "{note}");
        }
        let (same, known) = p.same_cpu().expect("two parties");
        assert!(same <= known && known == m.samples.len(), "{note}");
    }

    #[test]
    fn a_pinned_result_has_no_placement_note_and_an_unpinned_single_party_one_does() {
        let pinned = smoke_one("os.pipe.latency", Some(Params::new().with("placement", "same")));
        assert_eq!(pinned.outcome, Outcome::Ok, "{:?}", pinned.outcome);
        assert_eq!(pinned.notes.get("placement"), None, "pinned and held: {}", pinned.notes);
        assert!(pinned.samples.iter().all(|s| !s.migrated));
        let single = smoke_one("os.syscall.null", None);
        if schedlab_measure::sys::allowed_cpus().len() > 1 {
            let p = Placement::parse(single.notes.get("placement").expect("a note")).unwrap();
            assert_eq!(p.parties.len(), 1);
            assert_eq!(p.parties[0].name, "main");
            assert_eq!(p.same_cpu(), None);
        }
    }

    /// The parties' names in `m`'s placement note, or `None` without one.
    fn party_names(m: &Measurement) -> Option<Vec<String>> {
        let p = Placement::parse(m.notes.get("placement")?).expect("a parseable note");
        Some(p.parties.iter().map(|x| x.name.clone()).collect())
    }

    #[test]
    fn unpinned_runtimes_and_loaders_are_recorded_by_their_own_threads() {
        if schedlab_measure::sys::allowed_cpus().len() < 2 {
            return; // one CPU: every thread is pinned by whoever started us
        }
        let compute = |backend: &str| {
            let p = Params::new().with("join", "none").with("work", 100).with("backend", backend);
            smoke_one("threads.compute", Some(p))
        };
        // rt's processors are found by name among the process's threads: a runtime that
        // another test starts at the same moment hides them (the note is then the measuring
        // thread's), so that case is tried again.
        let vps = Some(vec!["vp0".to_string(), "vp1".to_string()]);
        let rt_parties = |run: &dyn Fn() -> Measurement| {
            let mut m = run();
            for _ in 0..5 {
                if party_names(&m) == vps {
                    break;
                }
                m = run();
            }
            m
        };
        let rt = rt_parties(&|| compute("rt"));
        let tokio = compute("tokio");
        assert_eq!(party_names(&rt), vps, "{}", rt.notes);
        assert_eq!(
            party_names(&tokio),
            Some(vec!["worker0".into(), "worker1".into()]),
            "{}",
            tokio.notes
        );
        let p = Params::new().with("loader", "os").with("cpus", 2);
        let sched = smoke_one("sched.background_budget", Some(p));
        assert_eq!(sched.outcome, Outcome::Ok, "{:?}", sched.outcome);
        assert_eq!(party_names(&sched), Some(vec!["frame".into(), "loader".into()]));
        let p = Params::new().with("loader", "rt").with("cpus", 2);
        let rt = rt_parties(&|| smoke_one("sched.background_budget", Some(p.clone())));
        assert_eq!(party_names(&rt), vps, "{}", rt.notes);
        // cpus=1 pins both to one CPU: no note.
        let p = Params::new().with("loader", "os").with("cpus", 1);
        assert_eq!(party_names(&smoke_one("sched.background_budget", Some(p))), None);
    }

    #[test]
    fn fork_children_report_where_they_started() {
        let m = smoke_one("os.proc.fork_exit", None);
        assert_eq!(m.outcome, Outcome::Ok, "{:?}", m.outcome);
        let allowed = schedlab_measure::sys::allowed_cpus();
        let Some(note) = m.notes.get("placement") else {
            assert_eq!(allowed.len(), 1, "unpinned, so a note: {}", m.notes);
            return;
        };
        let p = Placement::parse(note).unwrap();
        assert_eq!(p.parties[1].name, "child", "{note}");
        assert_eq!(p.parties[1].migrations, None, "a new child each time: {note}");
        assert!(note.contains("child:cpu") && note.contains(" mig -"), "{note}");
        assert_eq!(p.parties[1].seen() as usize, m.samples.len(), "{note}");
        assert!(p.parties[1].cpus.iter().all(|(c, _)| allowed.contains(c)), "{note}");
    }

    #[test]
    fn rounds_merge_their_placements_sample_for_sample() {
        let all = catalog();
        let picked = crate::select(&all, &["os.pipe.context1".to_string()]).unwrap();
        let work: Vec<(&dyn Probe, Params)> = vec![(picked[0], Params::new())];
        let mut kept = Kept::default();
        run_rounds(
            &work,
            2,
            Suite::Smoke,
            &Context::for_tests(),
            |_| Settings::smoke(),
            &Calibration::zero(),
            &mut kept,
            &mut (),
        )
        .unwrap();
        let m = &kept.0[0];
        if let Some(note) = m.notes.get("placement") {
            let p = Placement::parse(note).unwrap();
            assert_eq!(p.shared.len(), m.samples.len(), "{note}");
            assert!(p.parties.iter().all(|x| x.seen() as usize == m.samples.len()), "{note}");
        }
    }

    /// A probe that panics in setup.
    struct Panics;

    impl Probe for Panics {
        fn info(&self) -> crate::Info {
            crate::Info {
                id: "test.panics",
                doc: "panics",
                unit: schedlab_measure::model::Unit::Nanos,
                mirrors: "-",
                requires: "",
            }
        }
        fn setup(&self, _: &Params, _: &Context) -> Result<Box<dyn crate::Instance>, ProbeError> {
            panic!("boom in setup")
        }
    }

    #[test]
    fn a_panicking_probe_is_a_failed_measurement_and_the_run_goes_on() {
        let m = measure_one(
            &Panics,
            &Params::new(),
            &Context::for_tests(),
            &Settings::smoke(),
            &Calibration::zero(),
        );
        assert_eq!(m.outcome, Outcome::Failed("probe panicked: boom in setup".into()));
        assert!(m.samples.is_empty() && m.summary.is_none());
    }
}
