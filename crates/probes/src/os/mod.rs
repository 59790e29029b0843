//! OS primitive probes: the rows of lmbench's and UnixBench's tables (seed 002), measured
//! with placement recorded and overheads removed.
//!
//! One file per family: system calls, signals, IPC latency and bandwidth, context switches,
//! process creation, memory mapping, select, file system. Each probe's doc names the
//! established test it mirrors and any deliberate difference.

mod bandwidth;
mod ctx;
mod fs;
mod ipc;
mod mm;
mod process;
mod select;
mod signal;
mod syscall;

use crate::Probe;

/// The OS probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    let mut v: Vec<Box<dyn Probe>> = Vec::new();
    v.extend(syscall::probes());
    v.extend(signal::probes());
    v.extend(ipc::probes());
    v.extend(ctx::probes());
    v.extend(process::probes());
    v.extend(bandwidth::probes());
    v.extend(mm::probes());
    v.extend(select::probes());
    v.extend(fs::probes());
    v
}

#[cfg(test)]
mod tests {
    //! Every OS probe runs once in smoke settings and produces finite, positive values (or a
    //! skip with a reason): the probes' behaviour, not their speed.
    use super::*;
    use crate::{Context, Suite};
    use schedlab_measure::clock::Calibration;
    use schedlab_measure::sampler::{self, Settings};
    use schedlab_measure::ProbeError;

    #[test]
    fn every_os_probe_runs_in_smoke_settings() {
        let ctx = Context::for_tests();
        for p in probes() {
            let info = p.info();
            for params in p.variants(Suite::Smoke) {
                let mut inst = match p.setup(&params, &ctx) {
                    Ok(i) => i,
                    Err(ProbeError::Skip(why)) => {
                        eprintln!("{} [{params}] skipped: {why}", info.id);
                        continue;
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
                    assert!(
                        s.value.is_finite() && s.value >= 0.0,
                        "{} [{params}] value {}",
                        info.id,
                        s.value
                    );
                    assert!(s.elapsed_ns > 0, "{} [{params}] measured no time", info.id);
                }
            }
        }
    }

    /// Developer aid, not a check: prints quick-suite medians for the probes matching
    /// `SCHEDLAB_FILTER` (default `os`). Run with
    /// `SCHEDLAB_FILTER=os.pipe cargo test --release -p schedlab-probes -- --ignored --nocapture print_medians`.
    #[test]
    #[ignore = "measures; prints figures for a developer to read"]
    fn print_medians() {
        let filter = std::env::var("SCHEDLAB_FILTER").unwrap_or_else(|_| "os".into());
        let ctx = Context { suite: Suite::Quick, ..Context::for_tests() };
        let cal = Calibration::measure();
        for p in probes() {
            let info = p.info();
            if !crate::matches(&filter, info.id) {
                continue;
            }
            for params in p.variants(Suite::Quick) {
                let started = std::time::Instant::now();
                let res = p.setup(&params, &ctx).and_then(|mut inst| {
                    let metric = inst.metric();
                    let c = sampler::collect_in(
                        &mut *inst,
                        &Settings::quick(),
                        &cal,
                        metric,
                        info.unit,
                    )?;
                    Ok((c, inst.notes()))
                });
                match res {
                    Ok((c, notes)) => {
                        let v: Vec<f64> = c.samples.iter().map(|s| s.value).collect();
                        let s = schedlab_measure::stats::Summary::of(&v).unwrap();
                        eprintln!(
                            "{:28} {:32} {:>12.3} {:6} [{:.3} .. {:.3}] cv {:4.1}% iters {} ({:.2}s) {}",
                            info.id, params.key(), s.median, info.unit.symbol(), s.ci_low, s.ci_high,
                            s.cv * 100.0, c.iters, started.elapsed().as_secs_f64(), notes
                        );
                    }
                    Err(e) => eprintln!("{:28} {:32} {e}", info.id, params.key()),
                }
            }
        }
    }
}
