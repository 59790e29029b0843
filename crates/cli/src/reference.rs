//! `schedlab reference list|import SET`: the seed papers' published tables as runs
//! ([`schedlab_report::reference`]).

use std::process::ExitCode;

use anyhow::Result;
use schedlab_measure::model::{RunStatus, Unit};
use schedlab_report::reference;
use schedlab_store::{Location, Store};

use crate::{out, UsageError};

/// A probe's unit, from the catalog.
fn unit_of(probe: &str) -> Option<Unit> {
    schedlab_probes::catalog().iter().map(|p| p.info()).find(|i| i.id == probe).map(|i| i.unit)
}

/// `schedlab reference list`.
pub fn list() -> Result<ExitCode> {
    out(&reference::list_text(&unit_of))?;
    Ok(ExitCode::SUCCESS)
}

/// `schedlab reference import SET`: one run per column; a label already in the database is
/// skipped, so importing twice stores nothing new.
pub fn import(name: &str, db: &Location) -> Result<ExitCode> {
    let Some(set) = reference::set(name) else {
        return Err(UsageError(format!(
            "no reference set {name:?}; the sets are: {}",
            reference::SETS.join(", ")
        ))
        .into());
    };
    let mut store = Store::open_at(db)?;
    let have: Vec<String> = store.runs()?.into_iter().filter_map(|r| r.label).collect();
    let build = (env!("CARGO_PKG_VERSION"), env!("SCHEDLAB_GIT_REV"));
    let (mut stored, mut skipped) = (0, 0);
    for run in set.runs(&unit_of, build) {
        let label = run.meta.label.clone().unwrap_or_default();
        if have.contains(&label) {
            println!("{label}: already in {}, skipped", store.path().display());
            skipped += 1;
            continue;
        }
        let id = store.begin_run(&run.meta)?;
        for m in &run.results {
            store.save_result(id, m)?;
        }
        store.finish_run(id, RunStatus::Complete)?;
        println!(
            "{label}: stored as run #{id}, {} results ({})",
            run.results.len(),
            run.meta.machine.host
        );
        stored += 1;
    }
    println!(
        "{stored} run{} stored, {skipped} skipped; `schedlab compare latest {}:{}` puts a run beside one",
        if stored == 1 { "" } else { "s" },
        set.name,
        set.columns.last().map_or("", |c| c.key)
    );
    Ok(ExitCode::SUCCESS)
}
