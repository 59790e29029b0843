//! `schedlab reference`: the seed papers' published tables imported as runs, through the
//! real binary, and a measured run compared with one of them.

mod common;

use common::{ok, run, text};
use schedlab_store::Store;

#[test]
fn list_names_the_sets_their_columns_and_the_probe_of_each_row() {
    let dir = tempfile::tempdir().unwrap();
    let list = ok(&run(&dir.path().join("r.db"), &["reference", "list"]));
    for label in [
        "seed002:mac-os",
        "seed002:freebsd-imac",
        "seed002:freebsd-hp",
        "seed002:linux-hp",
        "seed002:linux-imac",
        "seed003:sa",
        "seed003:pth",
        "seed003:linux",
        "seed003:before-sa",
        "seed003:after-sa",
    ] {
        assert!(list.contains(label), "{label}\n{list}");
    }
    // Seed 002's own thread and malloc rows have probes (they were listed "no probe").
    let malloc = list.lines().find(|l| l.contains("mallocMemCopy")).unwrap_or_default();
    assert!(malloc.contains("mem.malloc_free"), "{list}");
    let threads =
        list.lines().find(|l| l.contains("threadsPerformingAtomicOps")).unwrap_or_default();
    assert!(threads.contains("threads.atomic.contended"), "{list}");
    assert!(!list.contains("no probe"), "{list}");
    assert!(list.contains("2276.84.00000"), "the unread cell is named\n{list}");
}

#[test]
fn import_is_idempotent_and_compare_puts_a_run_beside_the_paper() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let measured = ok(&run(
        &db,
        &[
            "run",
            "--suite",
            "smoke",
            "--filter",
            "os.syscall.null,os.signal.install,os.syscall.getrusage",
        ],
    ));
    assert!(measured.contains("stored as run"), "{measured}");

    let first = ok(&run(&db, &["reference", "import", "seed002"]));
    assert!(first.contains("5 runs stored (0 replacing older ones), 0 skipped"), "{first}");
    let again = ok(&run(&db, &["reference", "import", "seed002"]));
    assert!(again.contains("0 runs stored (0 replacing older ones), 5 skipped"), "{again}");
    assert!(again.contains("seed002:linux-hp: already in"), "{again}");

    let store = Store::open_existing(&db).unwrap();
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 6, "one measured run and five published, not ten");
    let hp = store.load_run(store.resolve("seed002:linux-hp").unwrap()).unwrap();
    assert_eq!(hp.meta.suite, "published");
    assert_eq!(hp.meta.machine.host, "seed002 Linux HP PC");
    assert_eq!(hp.meta.machine.cpu_model, "Intel i5, 3200 MHz");
    let null = hp.results.iter().find(|m| m.probe == "os.syscall.null").unwrap();
    assert_eq!(null.samples.len(), 1);
    assert!((null.samples[0].value - 102.2).abs() < 1e-9, "0.1022 µs as printed");
    assert_eq!(null.notes.get("published"), Some("0.1022 µs"));
    // `latest` is the measured run, not the last imported table.
    assert_eq!(store.resolve("latest").unwrap(), 1);
    drop(store);

    let cmp = ok(&run(&db, &["compare", "latest", "seed002:linux-hp"]));
    let row = |probe: &str| {
        cmp.lines()
            .find(|l| l.starts_with(probe))
            .unwrap_or_else(|| panic!("{probe}\n{cmp}"))
            .to_string()
    };
    for probe in ["os.syscall.null", "os.signal.install"] {
        let line = row(probe);
        assert!(line.contains('×') && line.ends_with("other machine"), "{line}");
        assert!(!line.contains("within noise"), "{line}");
    }
    assert!(row("os.syscall.null").contains("102.2 ns"), "{cmp}");
    // Measured here, not in the paper: no ratio.
    assert!(!row("os.syscall.getrusage").contains('×'), "{cmp}");
}

/// A published run stored by a build that converted a unit differently (before lmbench's
/// MB/s were taken as 10^6 bytes, the pipe bandwidth was stored as printed) is replaced by
/// the next import; the others stay.
#[test]
fn import_replaces_a_run_stored_with_an_older_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let first = ok(&run(&db, &["reference", "import", "seed002"]));
    assert!(first.contains("5 runs stored"), "{first}");
    let c = rusqlite::Connection::open(&db).unwrap();
    let which = "(SELECT x.id FROM result_rows x JOIN runs r ON r.id = x.run_id
                  WHERE r.label = 'seed002:linux-imac' AND x.probe = 'os.pipe.bandwidth')";
    let blob: Vec<u8> = c
        .query_row(&format!("SELECT data FROM raw_samples WHERE result_id IN {which}"), [], |r| {
            r.get(0)
        })
        .unwrap();
    let mut samples = schedlab_store::raw::decode(&blob).unwrap();
    samples[0].value = 6942.8;
    let n = c
        .execute(
            &format!("UPDATE results SET raw = ?1 WHERE id IN {which}"),
            [schedlab_store::raw::encode(&samples)],
        )
        .unwrap();
    assert_eq!(n, 1, "one stored pipe bandwidth to age");
    drop(c);

    let again = ok(&run(&db, &["reference", "import", "seed002"]));
    assert!(
        again.contains("seed002:linux-imac: run #5 held the values of an older build"),
        "{again}"
    );
    assert!(again.contains("1 run stored (1 replacing older ones), 4 skipped"), "{again}");
    let store = Store::open_existing(&db).unwrap();
    assert_eq!(store.runs().unwrap().len(), 5, "replaced, not added");
    let imac = store.load_run(store.resolve("seed002:linux-imac").unwrap()).unwrap();
    let bw = imac.results.iter().find(|m| m.probe == "os.pipe.bandwidth").unwrap();
    assert!((bw.samples[0].value - 6942.8e6 / 1_048_576.0).abs() < 1e-6, "{}", bw.samples[0].value);
    drop(store);
    let third = ok(&run(&db, &["reference", "import", "seed002"]));
    assert!(third.contains("0 runs stored (0 replacing older ones), 5 skipped"), "{third}");
}

#[test]
fn a_bad_set_name_is_a_usage_error_listing_the_sets() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&dir.path().join("r.db"), &["reference", "import", "seed004"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("seed002") && err.contains("seed003"), "{err}");
}
