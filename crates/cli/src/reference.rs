//! `schedlab reference list|import SET`: the seed papers' published tables as runs
//! ([`schedlab_report::reference`]).

use std::process::ExitCode;

use anyhow::Result;
use schedlab_measure::model::{Measurement, RunStatus, Unit};
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

/// Each result's identity and value, in a comparable order.
fn values(results: &[Measurement]) -> Vec<(String, String, Unit, Option<f64>)> {
    let mut v: Vec<_> = results
        .iter()
        .map(|m| {
            let value = m.samples.first().map(|s| s.value);
            (m.probe.clone(), m.params.key(), m.unit, value)
        })
        .collect();
    v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    v
}

/// `schedlab reference import SET`: one run per column. A label already in the database is
/// skipped when its values are the ones this build converts the table to, so importing
/// twice stores nothing new; a run stored by a build that converted differently (a unit
/// corrected since) is replaced.
pub fn import(name: &str, db: &Location) -> Result<ExitCode> {
    let Some(set) = reference::set(name) else {
        return Err(UsageError(format!(
            "no reference set {name:?}; the sets are: {}",
            reference::SETS.join(", ")
        ))
        .into());
    };
    let mut store = Store::open_at(db)?;
    let have: Vec<(i64, String)> = store
        .runs()?
        .into_iter()
        .filter(|r| r.suite == reference::SUITE)
        .filter_map(|r| Some((r.id, r.label?)))
        .collect();
    let build = (env!("CARGO_PKG_VERSION"), env!("SCHEDLAB_GIT_REV"));
    let (mut stored, mut skipped, mut replaced) = (0, 0, 0);
    for run in set.runs(&unit_of, build) {
        let label = run.meta.label.clone().unwrap_or_default();
        if let Some(&(old, _)) = have.iter().find(|(_, l)| *l == label) {
            if values(&store.load_run(old)?.results) == values(&run.results) {
                println!("{label}: already in {}, skipped", store.path().display());
                skipped += 1;
                continue;
            }
            // Derived data: if this is interrupted before the new run is stored, the
            // next import stores it.
            store.delete_run(old)?;
            println!(
                "{label}: run #{old} held the values of an older build (a conversion or a row's probe changed since), replaced"
            );
            replaced += 1;
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
        "{stored} run{} stored ({replaced} replacing older ones), {skipped} skipped; `schedlab compare latest {}:{}` puts a run beside one",
        if stored == 1 { "" } else { "s" },
        set.name,
        set.columns.last().map_or("", |c| c.key)
    );
    Ok(ExitCode::SUCCESS)
}
