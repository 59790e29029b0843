//! The store's queries behind `schedlab history`, alike on an SQLite file and a throwaway
//! PostgreSQL server: one probe's measured results across runs in time order, filtered by
//! host (name or machine id prefix) and start date; the probe ids stored; whether a host
//! is known; a run's metadata without its results.

#[path = "support/pg.rs"]
mod pg;

use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Measurement, Outcome, Params, RunMeta, RunStatus, Sample, Unit};
use schedlab_store::{machine_id, HistoryQuery, Location, Store};

/// Runs of `host` on `day` (stored in the order given, not in time order) with
/// os.pipe.latency at `median` (two parameter sets), a skipped os.skip, and a published
/// table that must never count as history.
fn fill(at: &Location) {
    let mut store = Store::open_at(at).unwrap();
    for (host, day, median) in
        [("beta", 3, 30.0), ("alpha", 2, 12.0), ("alpha", 1, 10.0), ("alpha", 4, 14.0)]
    {
        let mut m = Machine::fingerprint();
        m.host = host.into();
        m.cpu_model = format!("{host} CPU");
        let mut meta =
            RunMeta::starting(if host == "beta" { "full" } else { "quick" }, m, ("0.1.0", "abc"));
        meta.label = Some(format!("{host}-{day}"));
        meta.started_at = format!("2026-11-{day:02}T03:00:00Z");
        let id = store.begin_run(&meta).unwrap();
        for (p, f) in [("same", 1.0), ("cross", 2.0)] {
            let samples = (0..5)
                .map(|k| Sample {
                    iters: 1,
                    elapsed_ns: 1,
                    value: median * f + k as f64 * 0.01 - 0.02,
                    other_cpu_ns: None,
                    migrated: false,
                })
                .collect();
            let m = Measurement::of_samples(
                "os.pipe.latency",
                Params::new().with("placement", p),
                Unit::Micros,
                samples,
                0.1,
            );
            store.save_result(id, &m).unwrap();
        }
        let skipped = Measurement::without_samples(
            "os.skip",
            Params::new(),
            Unit::Nanos,
            Outcome::Skipped("root".into()),
            0.0,
        );
        store.save_result(id, &skipped).unwrap();
        store.finish_run(id, RunStatus::Complete).unwrap();
    }
    let mut published = RunMeta::starting("published", Machine::fingerprint(), ("0.1.0", "abc"));
    published.label = Some("seed002:linux".into());
    let id = store.begin_run(&published).unwrap();
    let m = Measurement::of_samples(
        "os.pipe.latency",
        Params::new().with("placement", "same"),
        Unit::Micros,
        vec![Sample { iters: 1, elapsed_ns: 1, value: 99.0, other_cpu_ns: None, migrated: false }],
        0.0,
    );
    store.save_result(id, &m).unwrap();
    store.finish_run(id, RunStatus::Complete).unwrap();
}

fn q(hosts: &[&str], since: Option<&str>) -> HistoryQuery {
    HistoryQuery {
        probe: "os.pipe.latency".into(),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        since: since.map(str::to_string),
    }
}

fn conforms(at: &Location) {
    fill(at);
    let store = Store::open_existing_at(at).unwrap();
    let all = store.history(&q(&[], None)).unwrap();
    assert_eq!(all.len(), 8, "4 runs × 2 parameter sets; no published table, no skipped result");
    let order: Vec<(String, &str)> =
        all.iter().map(|p| (p.started_at[..10].to_string(), p.params.as_str())).collect();
    assert_eq!(
        order[0],
        ("2026-11-01".into(), "placement=same"),
        "oldest first, in measurement order"
    );
    assert_eq!(order[1], ("2026-11-01".into(), "placement=cross"));
    assert_eq!(order[7].0, "2026-11-04");
    let first = &all[0];
    assert_eq!(
        (first.host.as_str(), first.label.as_deref(), first.unit.as_str(), first.better.as_str()),
        ("alpha", Some("alpha-1"), "us", "lower")
    );
    assert!(
        (first.median - 10.0).abs() < 1e-9
            && first.ci_low < first.median
            && first.median < first.ci_high
    );
    assert_eq!(first.n, 5);

    let alpha = store.history(&q(&["alpha"], None)).unwrap();
    assert_eq!(alpha.len(), 6);
    assert!(alpha.iter().all(|p| p.host == "alpha"));
    let beta_id = machine_id(&{
        let mut m = Machine::fingerprint();
        m.host = "beta".into();
        m.cpu_model = "beta CPU".into();
        m
    });
    let by_id = store.history(&q(&[&beta_id[..8].to_ascii_uppercase()], None)).unwrap();
    assert_eq!(by_id.len(), 2, "a machine id prefix, in any case");
    assert_eq!(store.history(&q(&["alpha", "beta"], Some("2026-11-03"))).unwrap().len(), 4);
    assert!(store
        .history(&HistoryQuery { probe: "os.skip".into(), ..q(&[], None) })
        .unwrap()
        .is_empty());

    assert_eq!(
        store.probe_ids().unwrap(),
        vec!["os.pipe.latency".to_string(), "os.skip".to_string()]
    );
    assert!(store.has_host("alpha").unwrap() && store.has_host(&beta_id[..10]).unwrap());
    assert!(!store.has_host("gamma").unwrap() && !store.has_host("alp").unwrap());

    let meta = store.load_meta(first.run_id).unwrap();
    assert_eq!((meta.label.as_deref(), meta.suite.as_str()), (Some("alpha-1"), "quick"));
    assert_eq!(meta.machine.host, "alpha");
    assert_eq!(meta, store.load_run(first.run_id).unwrap().meta, "the same as load_run's");
}

#[test]
fn sqlite_history() {
    let dir = tempfile::tempdir().unwrap();
    conforms(&Location::File(dir.path().join("h.db")));
}

#[test]
fn postgresql_history() {
    let Some(server) = pg::server_or_skip("postgresql_history") else { return };
    let url = server.create_db("history");
    conforms(&Location::parse(std::ffi::OsStr::new(&url)));
}
