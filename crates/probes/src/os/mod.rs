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
mod unixbench;

use crate::Probe;

/// The OS probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    let mut v: Vec<Box<dyn Probe>> = Vec::new();
    v.extend(syscall::probes());
    v.extend(unixbench::probes());
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
    use crate::testkit;
    use crate::{Context, Suite};

    #[test]
    fn every_os_probe_runs_in_smoke_settings() {
        let ctx = Context::for_tests();
        let mut tally = testkit::SmokeTally::default();
        for p in probes() {
            for params in p.variants(Suite::Smoke) {
                drop(tally.run(&*p, &params, &ctx));
            }
        }
        tally.finish("os");
    }

    /// Developer aid, not a check: prints quick-suite medians for the probes matching
    /// `SCHEDLAB_FILTER` (default `os`). Run with
    /// `SCHEDLAB_FILTER=os.pipe cargo test --release -p schedlab-probes -- --ignored --nocapture os::tests::print_medians`.
    #[test]
    #[ignore = "measures; prints figures for a developer to read"]
    fn print_medians() {
        testkit::print_medians(probes(), "os");
    }
}
