//! OS primitive probes: the rows of lmbench's and UnixBench's tables (seed 002), measured
//! with placement recorded and overheads removed.
//!
//! One file per family: system calls, signals, IPC latency and bandwidth, context switches,
//! process creation, memory mapping, select, file system. Each probe's doc names the
//! established test it mirrors and any deliberate difference.

mod bandwidth;
mod child;
mod ctx;
mod fs;
mod ipc;
mod mcopy;
// Seed 002's Mach IPC and external pagers (issue 26).
mod message;
mod mm;
mod process;
mod select;
mod shell;
mod signal;
mod syscall;
mod uffd;
mod unixbench;
mod zerocopy;

use schedlab_measure::model::Params;
use schedlab_measure::ProbeError;

use crate::Probe;

/// Whose definition of a row a variant measures (the `def` parameter): where schedlab's
/// definition differs from lmbench's or UnixBench's, the established one is offered as a
/// named variant, made exact, so the row can be put beside that suite's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Def {
    /// schedlab's own definition (each probe's doc says why it differs).
    Schedlab,
    /// lmbench 3's definition, exactly.
    Lmbench,
    /// UnixBench's definition, exactly.
    Unixbench,
}

impl Def {
    /// The parameter value.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Def::Schedlab => "schedlab",
            Def::Lmbench => "lmbench",
            Def::Unixbench => "unixbench",
        }
    }

    /// Parses `def` from `params`: `default` when absent, an error when the value names no
    /// definition or one this probe does not offer (`offered`).
    pub(crate) fn from_params(
        params: &Params,
        default: Def,
        offered: &[Def],
    ) -> Result<Def, ProbeError> {
        let Some(text) = params.get("def") else { return Ok(default) };
        let names = || offered.iter().map(|d| d.key()).collect::<Vec<_>>().join(" or ");
        [Def::Schedlab, Def::Lmbench, Def::Unixbench]
            .into_iter()
            .find(|d| d.key() == text && offered.contains(d))
            .ok_or_else(|| ProbeError::Failed(format!("bad def {text:?}: use {}", names())))
    }
}

/// The OS probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    let mut v: Vec<Box<dyn Probe>> = Vec::new();
    v.extend(syscall::probes());
    v.extend(unixbench::probes());
    v.extend(signal::probes());
    v.extend(ipc::probes());
    v.extend(ctx::probes());
    v.extend(process::probes());
    v.extend(shell::probes());
    v.extend(bandwidth::probes());
    v.extend(mm::probes());
    v.extend(select::probes());
    v.extend(fs::probes());
    v.extend(mcopy::probes());
    // Seed 002's Mach IPC and external pagers (issue 26).
    v.extend(message::probes());
    v.extend(zerocopy::probes());
    v.extend(uffd::probes());
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
    fn def_parses_offered_definitions_only() {
        let offered = [Def::Schedlab, Def::Lmbench];
        let p = |s: &str| Def::from_params(&Params::from_key(s), Def::Schedlab, &offered);
        assert_eq!(p("").unwrap(), Def::Schedlab);
        assert_eq!(p("def=lmbench").unwrap(), Def::Lmbench);
        assert_eq!(p("def=schedlab").unwrap(), Def::Schedlab);
        let e = p("def=unixbench").unwrap_err();
        assert!(e.to_string().contains("schedlab or lmbench"), "{e}");
        assert!(p("def=bsd").is_err());
    }

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
