//! `schedlab history PROBE`: the store's results of one probe across runs, grouped into one
//! series per machine and parameter set, each series' change points
//! (`schedlab_measure::changepoint`, E-Divisive means) and, at each, what differed between
//! the runs on either side; printed, and with `--report` drawn as an HTML page.

use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::Result;
use schedlab_measure::changepoint::{e_divisive, Settings};
use schedlab_measure::model::{Better, RunMeta, Unit};
use schedlab_report::history::{differences, Change, Point, Series};
use schedlab_store::{HistoryPoint, HistoryQuery, Store};

use crate::args::{HistoryArgs, RunFilterArgs};
use crate::output::Output;
use crate::runs::RunFilter;
use crate::{out, UsageError};

/// Runs `schedlab history`.
pub fn history(store: &Store, args: &HistoryArgs) -> Result<ExitCode> {
    // Everything the user typed is checked before the database is read.
    let filter = RunFilter::from_args(&RunFilterArgs {
        host: args.host.clone(),
        label: Vec::new(),
        since: args.since.clone(),
    })?;
    let wanted = parse_params(&args.params)?;
    let report = args.report.as_deref().map(Output::claim).transpose()?;
    let probe = args.probe.trim();

    let points = store.history(&HistoryQuery {
        probe: probe.to_string(),
        hosts: filter.hosts.clone(),
        since: filter.since.clone(),
    })?;
    if points.is_empty() {
        return nothing_found(store, probe, &filter);
    }
    let keys = param_keys(&points);
    if let Some((k, _)) = wanted.iter().find(|(k, _)| !keys.contains(k)) {
        return Err(UsageError(format!(
            "{probe} has no parameter {k:?} in {}; its parameters there are {}",
            store.path().display(),
            if keys.is_empty() { "none".to_string() } else { keys.join(", ") }
        ))
        .into());
    }
    let matching: Vec<&HistoryPoint> = points
        .iter()
        .filter(|p| {
            let params = schedlab_measure::model::Params::from_key(&p.params);
            wanted.iter().all(|(k, v)| params.get(k) == Some(v.as_str()))
        })
        .collect();
    if matching.is_empty() {
        let mut sets: Vec<&str> = points.iter().map(|p| p.params.as_str()).collect();
        sets.sort_unstable();
        sets.dedup();
        return Err(UsageError(format!(
            "no result of {probe} has --params {}; the parameter sets stored are: {}",
            args.params.join(","),
            sets.join("; ")
        ))
        .into());
    }

    let mut metas: HashMap<i64, RunMeta> = HashMap::new();
    let mut series = Vec::new();
    for group in group(&matching) {
        series.push(analyse(store, &group, &mut metas)?);
    }
    out(&schedlab_report::history::text(probe, &series))?;
    if let Some(output) = report {
        let html = schedlab_report::history::page(probe, &series, env!("CARGO_PKG_VERSION"));
        let path = output.path().display().to_string();
        output.write(&html)?;
        eprintln!("wrote the history of {probe} to {path} ({} KiB)", html.len().div_ceil(1024));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--params K=V,...` as pairs; a piece without `=` or with an empty key is a usage error.
fn parse_params(given: &[String]) -> Result<Vec<(String, String)>> {
    given
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(UsageError(format!(
                "--params {p:?} is not KEY=VALUE (e.g. --params placement=same)"
            ))
            .into()),
        })
        .collect()
}

/// The parameter keys seen in `points`, in order of first appearance.
fn param_keys(points: &[HistoryPoint]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for p in points {
        for (k, _) in schedlab_measure::model::Params::from_key(&p.params).0 {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

/// Why there is nothing to show: an unknown probe or host is a usage error (exit 2) naming
/// the closest probe ids or how to list the hosts; a probe of the catalog never measured
/// here is a failure (exit 1); nothing since `--since` is said, and is no failure (exit 0).
fn nothing_found(store: &Store, probe: &str, filter: &RunFilter) -> Result<ExitCode> {
    let db = store.path().display().to_string();
    let stored = store.probe_ids()?;
    let in_catalog = schedlab_probes::catalog().iter().any(|p| p.info().id == probe);
    if !in_catalog && !stored.iter().any(|s| s == probe) {
        let all = schedlab_probes::catalog();
        let hint = match schedlab_probes::select(&all, &[probe.to_string()]) {
            Err(e) => e.to_string(),
            Ok(several) => format!(
                "{probe:?} is not one probe id; it names {}",
                several.iter().map(|p| p.info().id).take(8).collect::<Vec<_>>().join(", ")
            ),
        };
        return Err(UsageError(format!("history of {probe}: {hint}")).into());
    }
    for h in &filter.hosts {
        if !store.has_host(h)? {
            return Err(UsageError(format!(
                "no run of host {h:?} in {db}; `schedlab runs` lists the hosts and machine ids"
            ))
            .into());
        }
    }
    if let Some(since) = &filter.since {
        out(&format!("no measured result of {probe} since {since} in {db}\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::bail!(
        "no measured result of {probe} in {db}{}; measure it with `schedlab run --filter {probe}`",
        if filter.hosts.is_empty() {
            String::new()
        } else {
            format!(" from {}", filter.hosts.join(", "))
        }
    )
}

/// The points grouped into series by machine, parameter set and unit (a probe whose unit
/// changed between schedlab versions starts a new series rather than a false change
/// point), in order of first appearance; each series oldest first (the store's order).
fn group<'a>(points: &[&'a HistoryPoint]) -> Vec<Vec<&'a HistoryPoint>> {
    let mut order: Vec<(&str, &str, &str)> = Vec::new();
    let mut groups: HashMap<(&str, &str, &str), Vec<&HistoryPoint>> = HashMap::new();
    for p in points {
        let key = (p.machine_id.as_str(), p.params.as_str(), p.unit.as_str());
        if !groups.contains_key(&key) {
            order.push(key);
        }
        groups.entry(key).or_default().push(p);
    }
    order.into_iter().map(|k| groups.remove(&k).expect("every key was grouped")).collect()
}

/// One series: its points, its change points and what differed at each.
fn analyse(
    store: &Store,
    points: &[&HistoryPoint],
    metas: &mut HashMap<i64, RunMeta>,
) -> Result<Series> {
    let first = points[0];
    let medians: Vec<f64> = points.iter().map(|p| p.median).collect();
    let mut changes = Vec::new();
    for c in e_divisive(&medians, &Settings::default()) {
        let (a, b) = (points[c.index - 1].run_id, points[c.index].run_id);
        for id in [a, b] {
            if let std::collections::hash_map::Entry::Vacant(e) = metas.entry(id) {
                e.insert(store.load_meta(id)?);
            }
        }
        changes.push(Change {
            index: c.index,
            p_value: c.p_value,
            before: c.before,
            after: c.after,
            differences: differences(&metas[&a], &metas[&b]),
        });
    }
    Ok(Series {
        host: first.host.clone(),
        machine_id: first.machine_id.clone(),
        params: first.params.clone(),
        unit: Unit::from_key(&first.unit).unwrap_or(Unit::Nanos),
        better: if first.better == "higher" { Better::Higher } else { Better::Lower },
        points: points
            .iter()
            .map(|p| Point {
                run_id: p.run_id,
                label: p.label.clone(),
                started_at: p.started_at.clone(),
                kernel: p.kernel.clone(),
                version: p.version.clone(),
                median: p.median,
                ci_low: p.ci_low,
                ci_high: p.ci_high,
            })
            .collect(),
        changes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(run_id: i64, machine: &str, params: &str, unit: &str) -> HistoryPoint {
        HistoryPoint {
            run_id,
            uuid: String::new(),
            label: None,
            started_at: format!("2026-11-{run_id:02}T00:00:00Z"),
            host: machine.into(),
            machine_id: machine.into(),
            kernel: String::new(),
            version: String::new(),
            git_rev: String::new(),
            params: params.into(),
            unit: unit.into(),
            better: "lower".into(),
            n: 5,
            median: 1.0,
            ci_low: 0.9,
            ci_high: 1.1,
        }
    }

    #[test]
    fn series_are_one_per_machine_parameter_set_and_unit_in_order() {
        let pts = [
            point(1, "a", "k=1", "ns"),
            point(1, "a", "k=2", "ns"),
            point(2, "b", "k=1", "ns"),
            point(3, "a", "k=1", "ns"),
            point(4, "a", "k=1", "us"),
        ];
        let refs: Vec<&HistoryPoint> = pts.iter().collect();
        let groups = group(&refs);
        let shape: Vec<Vec<i64>> =
            groups.iter().map(|g| g.iter().map(|p| p.run_id).collect()).collect();
        assert_eq!(shape, vec![vec![1, 3], vec![1], vec![2], vec![4]]);
    }

    #[test]
    fn params_are_key_value_pairs() {
        let p = parse_params(&["placement=same".into(), " size = 4k ".into()]).unwrap();
        assert_eq!(p, vec![("placement".into(), "same".into()), ("size".into(), "4k".into())]);
        for bad in ["placement", "=same", ""] {
            assert!(parse_params(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
