//! Test helpers the probe families share (compiled for tests only): run one smoke variant
//! and check its samples, and print quick-suite medians for a developer to read.

use schedlab_measure::clock::Calibration;
use schedlab_measure::model::Params;
use schedlab_measure::sampler::{self, Settings};
use schedlab_measure::ProbeError;

use crate::{Context, Instance, Probe, Suite};

/// Sets `p` up with `params`, takes smoke samples and checks each is a finite, non-negative
/// value that measured some time. Returns the instance (for family-specific checks and an
/// explicit teardown), or `None` when the probe skips here (the reason is printed).
pub(crate) fn smoke_one(
    p: &dyn Probe,
    params: &Params,
    ctx: &Context,
) -> Option<Box<dyn Instance>> {
    let info = p.info();
    let mut inst = match p.setup(params, ctx) {
        Ok(i) => i,
        Err(ProbeError::Skip(why)) => {
            eprintln!("{} [{params}] skipped: {why}", info.id);
            return None;
        }
        Err(e) => panic!("{} [{params}] setup: {e}", info.id),
    };
    let metric = inst.metric();
    let c = sampler::collect_in(
        &mut *inst,
        &Settings::smoke(),
        &Calibration::zero(),
        metric,
        info.unit,
    )
    .unwrap_or_else(|e| panic!("{} [{params}]: {e}", info.id));
    assert!(!c.samples.is_empty());
    for s in &c.samples {
        assert!(s.value.is_finite() && s.value >= 0.0, "{} [{params}] value {}", info.id, s.value);
        assert!(s.elapsed_ns > 0, "{} [{params}] measured no time", info.id);
    }
    Some(inst)
}

/// Counts what a family's smoke test ran and skipped, so the test fails when every variant
/// skipped (it would otherwise pass having checked nothing).
#[derive(Default)]
pub(crate) struct SmokeTally {
    ran: usize,
    skipped: Vec<String>,
}

impl SmokeTally {
    /// [`smoke_one`], counted.
    pub(crate) fn run(
        &mut self,
        p: &dyn Probe,
        params: &Params,
        ctx: &Context,
    ) -> Option<Box<dyn Instance>> {
        let inst = smoke_one(p, params, ctx);
        match inst {
            Some(_) => self.ran += 1,
            None => self.skipped.push(format!("{} [{params}]", p.info().id)),
        }
        inst
    }

    /// Fails if nothing ran.
    pub(crate) fn finish(self, family: &str) {
        assert!(
            self.ran > 0,
            "every {family} variant skipped here, so this smoke test checked nothing: {:?}",
            self.skipped
        );
    }
}

/// Developer aid: prints quick-suite medians for the probes of `probes` matching
/// `SCHEDLAB_FILTER` (default `default_filter`).
pub(crate) fn print_medians(probes: Vec<Box<dyn Probe>>, default_filter: &str) {
    let filter = std::env::var("SCHEDLAB_FILTER").unwrap_or_else(|_| default_filter.into());
    let ctx = Context { suite: Suite::Quick, ..Context::for_tests() };
    let cal = Calibration::measure();
    for p in probes {
        let info = p.info();
        if !crate::matches(&filter, info.id) {
            continue;
        }
        for params in p.variants(Suite::Quick) {
            let started = std::time::Instant::now();
            let settings = p.sampling(Suite::Quick, &Settings::quick());
            let res = p.setup(&params, &ctx).and_then(|mut inst| {
                let metric = inst.metric();
                let c = sampler::collect_in(&mut *inst, &settings, &cal, metric, info.unit)?;
                Ok((c, inst.notes()))
            });
            match res {
                Ok((c, notes)) => {
                    let v: Vec<f64> = c.samples.iter().map(|s| s.value).collect();
                    let s = schedlab_measure::stats::Summary::of(&v).expect("samples have values");
                    eprintln!(
                        "{:28} {:32} {:>12.3} {:6} [{:.3} .. {:.3}] cv {:4.1}% iters {} ({:.2}s) {}",
                        info.id,
                        params.key(),
                        s.median,
                        info.unit.symbol(),
                        s.ci_low,
                        s.ci_high,
                        s.cv * 100.0,
                        c.iters,
                        started.elapsed().as_secs_f64(),
                        notes
                    );
                }
                Err(e) => eprintln!("{:28} {:32} {e}", info.id, params.key()),
            }
        }
    }
}
