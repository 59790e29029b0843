//! `schedlab timeline`: the binary's part of a timeline — the arguments checked, one call
//! into `schedlab_trace::session` (which records and analyses), the recording handed to the
//! store, the result printed. The same shape as `run.rs` around `schedlab_probes::runner`.
//!
//! - `scenario.rs`: `schedlab timeline SCENARIO` (one of the seed's ThreadTest scenarios,
//!   sampled, optionally with the kernel's record);
//! - `probe.rs`: `schedlab timeline --probe ID` (a probe variant's body under the kernel's
//!   record).
//!
//! This file dispatches between them and holds what both store: the run's metadata and the
//! store as the recording's sink. Neither child imports the other.

mod probe;
mod scenario;

use std::process::ExitCode;

use anyhow::Result;
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{RunMeta, RunStatus};
use schedlab_store::{Location, Store};

use crate::args::TimelineArgs;
use crate::record::StoreSink;

/// Columns of time in the terminal lanes (plus 12 for names and 6 for the share: 99).
const COLS: usize = 80;

/// `schedlab timeline`.
pub fn timeline(args: &TimelineArgs, db: &Location) -> Result<ExitCode> {
    match &args.probe {
        Some(id) => probe::probe_timeline(id, args, db),
        None => scenario::scenario_timeline(args, db),
    }
}

/// A timeline run about to be stored: this machine with its doctor findings, this build,
/// the label given.
fn timeline_meta(label: Option<&str>) -> RunMeta {
    let mut machine = Machine::fingerprint();
    machine.doctor = schedlab_measure::doctor::stored(&schedlab_measure::doctor::collect());
    let mut meta = RunMeta::starting(
        "timeline",
        machine,
        (env!("CARGO_PKG_VERSION"), env!("SCHEDLAB_GIT_REV")),
    );
    meta.label = label.map(str::to_string);
    meta
}

/// Stores a run of `meta` with what `keep` hands the sink, and marks it complete; returns
/// its id. A storage failure stops there and marks the run interrupted with it (as `run`
/// does).
fn store_run(
    db: &Location,
    meta: &mut RunMeta,
    keep: impl FnOnce(&mut StoreSink<'_>) -> Result<()>,
) -> Result<i64> {
    let mut store = Store::open_at(db)?;
    let run_id = store.begin_run(meta)?;
    meta.id = run_id;
    let saved = {
        let mut sink = StoreSink::new(&mut store, run_id);
        keep(&mut sink)
    };
    let saved = saved.and_then(|()| Ok(store.finish_run(run_id, RunStatus::Complete)?));
    saved.map_err(|e| crate::record::storage_failed(&store, run_id, e))?;
    Ok(run_id)
}
