//! One conformance suite, run against both backends: an SQLite file, and a real PostgreSQL
//! server (a throwaway cluster, see `support/pg.rs`; the PostgreSQL half skips with its
//! reason printed where none can be started). Then what only a server can do wrong:
//! a newer or foreign schema, bad credentials, a database that does not exist yet.

#[path = "support/pg.rs"]
mod pg;

use schedlab_measure::machine::Machine;
use schedlab_measure::model::{
    Measurement, Outcome, Params, RunMeta, RunStatus, Sample, Severity, Unit, Warning,
};
use schedlab_store::{machine_id, Copied, Location, Store, StoreError, StoredTimeline};

fn meta(label: Option<&str>) -> RunMeta {
    let mut m = RunMeta::starting("smoke", Machine::fingerprint(), ("0.1.0", "abc1234"));
    m.label = label.map(str::to_string);
    m.started_at = "2026-11-21T05:00:00Z".into();
    m.filters = vec!["os.pipe".into()];
    m.settings = Params::new().with("samples", 2);
    m
}

fn measurement(probe: &str, params: Params, values: &[f64]) -> Measurement {
    let samples: Vec<Sample> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| Sample {
            iters: 100 + i as u64,
            elapsed_ns: 1_000_000 + i as u64,
            value: v,
            other_cpu_ns: if i == 0 { None } else { Some(10_000_000 * i as i64 - 15_000_000) },
            migrated: i == 1,
        })
        .collect();
    let mut m = Measurement::of_samples(probe, params, Unit::Micros, samples, 0.5);
    m.notes = Params::new().with("cpus", "0,0");
    m.iters_per_sample = 100;
    m.overhead_ns_per_iter = 0.25;
    m.noise = Some(schedlab_measure::noise::Noise {
        window_ns: 30_000_000,
        other_cpu_ns: -10_000_000,
        steal_ns: 20_000_000,
    });
    m
}

/// A finished run of `n` results with samples, a skipped one, a warning and a timeline.
fn fill(store: &mut Store, label: &str, n: usize) -> i64 {
    let run = store.begin_run(&meta(Some(label))).unwrap();
    for i in 0..n {
        let values: Vec<f64> = (0..7).map(|k| 1.0 + (i * 7 + k) as f64 / 3.0).collect();
        store
            .save_result(
                run,
                &measurement(&format!("os.p{i}"), Params::new().with("k", i), &values),
            )
            .unwrap();
    }
    let skipped = Measurement::without_samples(
        "os.pipe.latency",
        Params::new().with("placement", "cross"),
        Unit::Micros,
        Outcome::Skipped("needs two CPUs".into()),
        0.0,
    );
    store.save_result(run, &skipped).unwrap();
    let w = Warning {
        kind: "vm".into(),
        probe: Some("os.p0".into()),
        severity: Severity::Warn,
        message: "it's a \"VM\" — ünïcode".into(),
        advice: "use metal".into(),
    };
    store.save_warnings(run, &[w]).unwrap();
    store
        .save_timeline(
            run,
            &StoredTimeline {
                scenario: "3 two-equal".into(),
                recorder: "sampling".into(),
                window_ns: 600_000_000,
                data: r#"{"lanes":[]}"#.into(),
            },
        )
        .unwrap();
    store.finish_run(run, RunStatus::Complete).unwrap();
    run
}

/// What every backend must do alike. `open` opens (a new connection to) the database.
fn conformance(open: &dyn Fn() -> Store) {
    let mut store = open();
    assert!(store.runs().unwrap().is_empty());
    let run = fill(&mut store, "baseline", 5);
    let other = store.begin_run(&meta(None)).unwrap();
    drop(store);

    let store = open();
    let loaded = store.load_run(run).unwrap();
    assert_eq!(loaded.meta.label.as_deref(), Some("baseline"));
    assert_eq!(loaded.meta.status, RunStatus::Complete);
    assert_eq!(loaded.meta.machine.host, Machine::fingerprint().host);
    assert_eq!(loaded.meta.settings, Params::new().with("samples", 2));
    assert_eq!(loaded.meta.filters, vec!["os.pipe".to_string()]);
    assert_eq!(loaded.results.len(), 6);
    assert_eq!(loaded.results[2], {
        let values: Vec<f64> = (0..7).map(|k| 1.0 + (2 * 7 + k) as f64 / 3.0).collect();
        measurement("os.p2", Params::new().with("k", 2), &values)
    });
    assert_eq!(loaded.warnings.len(), 1);
    assert_eq!(loaded.warnings[0].message, "it's a \"VM\" — ünïcode");
    assert_eq!(store.timelines(run).unwrap().len(), 1);

    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[0].ok, runs[0].skipped, runs[0].failed), (5, 1, 0));
    assert_eq!(runs[0].uuid.len(), 36);
    assert_ne!(runs[0].uuid, runs[1].uuid);
    assert_eq!(runs[0].machine_id, machine_id(&Machine::fingerprint()));
    assert_eq!(runs[1].status, RunStatus::Running);

    assert_eq!(store.resolve("baseline").unwrap(), run);
    assert_eq!(store.resolve("latest").unwrap(), other);
    assert_eq!(store.resolve("latest~1").unwrap(), run);
    assert_eq!(store.resolve(&runs[0].uuid[..13]).unwrap(), run);
    assert!(matches!(store.resolve("nosuch"), Err(StoreError::NoSuchRun(..))));

    let mut store = store;
    let dup = measurement("os.p1", Params::new().with("k", 1), &[1.0]);
    let err = store.save_result(run, &dup).unwrap_err();
    assert!(matches!(err, StoreError::Duplicate(..)), "{err}");
    assert_eq!(store.load_run(run).unwrap().results.len(), 6, "nothing half-written");

    store.interrupt_run(other, "storage failure: disk full").unwrap();
    let r = store.runs().unwrap().into_iter().find(|r| r.id == other).unwrap();
    assert_eq!(r.status, RunStatus::Interrupted);
    assert_eq!(r.reason.as_deref(), Some("storage failure: disk full"));

    // Deleting a run takes everything under it, and only it.
    let gone = fill(&mut store, "to-delete", 2);
    store.delete_run(gone).unwrap();
    assert!(matches!(store.load_run(gone), Err(StoreError::NoSuchRun(..))));
    assert!(store.timelines(gone).unwrap().is_empty());
    assert!(matches!(store.delete_run(gone), Err(StoreError::NoSuchRun(..))));
    assert_eq!(store.runs().unwrap().len(), 2);
    assert_eq!(store.load_run(run).unwrap().results.len(), 6);
}

/// Copies from `a` to `b`: whole, once, replacing an older state, never a running run.
fn copying(a: &dyn Fn() -> Store, b: &dyn Fn() -> Store) {
    let mut from = a();
    let to = b();
    let run = fill(&mut from, "copied", 4);
    assert_eq!(from.copy_run(run, &to).unwrap(), Copied::Copied);
    assert_eq!(from.copy_run(run, &to).unwrap(), Copied::AlreadyThere);
    let (uuid, machine) = from.identity(run).unwrap();
    let there = to.resolve(&uuid).unwrap();
    assert_eq!(to.identity(there).unwrap(), (uuid.clone(), machine));
    let mut original = from.load_run(run).unwrap();
    let copy = to.load_run(there).unwrap();
    original.meta.id = copy.meta.id;
    assert_eq!(copy, original, "a copy is the run, whole");
    assert_eq!(to.timelines(there).unwrap(), from.timelines(run).unwrap());

    // A run still being measured is not copied; once interrupted it is, and once it has
    // more results, the newer state replaces the older one.
    let live = from.begin_run(&meta(Some("live"))).unwrap();
    from.save_result(live, &measurement("os.a", Params::new(), &[1.0, 2.0])).unwrap();
    assert_eq!(from.copy_run(live, &to).unwrap(), Copied::StillRunning);
    from.interrupt_run(live, "killed").unwrap();
    assert_eq!(from.copy_run(live, &to).unwrap(), Copied::Copied);
    from.save_result(live, &measurement("os.b", Params::new(), &[3.0])).unwrap();
    from.finish_run(live, RunStatus::Complete).unwrap();
    assert_eq!(from.copy_run(live, &to).unwrap(), Copied::Replaced);
    let runs = to.runs().unwrap();
    let lives: Vec<_> = runs.iter().filter(|r| r.label.as_deref() == Some("live")).collect();
    assert_eq!(lives.len(), 1, "replaced, not duplicated");
    assert_eq!((lives[0].status, lives[0].ok), (RunStatus::Complete, 2));

    // A stale copy never replaces a newer one: the target's copy of `stale` goes on (more
    // results, then complete) while the source still has the interrupted state it sent.
    let stale = from.begin_run(&meta(Some("stale"))).unwrap();
    from.save_result(stale, &measurement("os.a", Params::new(), &[1.0, 2.0])).unwrap();
    from.interrupt_run(stale, "killed").unwrap();
    assert_eq!(from.copy_run(stale, &to).unwrap(), Copied::Copied);
    let mut to = to;
    let there = to.resolve("stale").unwrap();
    to.save_result(there, &measurement("os.b", Params::new(), &[3.0])).unwrap();
    assert_eq!(from.copy_run(stale, &to).unwrap(), Copied::NewerThere, "more results there");
    to.finish_run(there, RunStatus::Complete).unwrap();
    assert_eq!(from.copy_run(stale, &to).unwrap(), Copied::NewerThere, "complete there");
    let kept = to.runs().unwrap().into_iter().find(|r| r.label.as_deref() == Some("stale"));
    let kept = kept.unwrap();
    assert_eq!((kept.id, kept.status, kept.ok), (there, RunStatus::Complete, 2), "nothing lost");
    // Interrupted there with as many results as the complete run here: older, replaced.
    let done = from.begin_run(&meta(Some("done"))).unwrap();
    from.save_result(done, &measurement("os.a", Params::new(), &[1.0])).unwrap();
    from.interrupt_run(done, "killed").unwrap();
    assert_eq!(from.copy_run(done, &to).unwrap(), Copied::Copied);
    from.finish_run(done, RunStatus::Complete).unwrap();
    assert_eq!(from.copy_run(done, &to).unwrap(), Copied::Replaced);
}

#[test]
fn sqlite_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    conformance(&|| Store::open(&a).unwrap());
    let c = dir.path().join("c.db");
    copying(&|| Store::open(&c).unwrap(), &|| Store::open(&b).unwrap());
}

/// Everything against one throwaway server: the conformance suite, copies both ways, and
/// the refusals.
#[test]
fn postgresql_conforms_and_refuses_what_it_must() {
    let Some(server) = pg::server_or_skip("postgresql_conforms_and_refuses_what_it_must") else {
        return;
    };
    let url = server.create_db("conformance");
    let at = Location::parse(url.as_ref());
    assert!(matches!(at, Location::Server(_)));
    conformance(&|| Store::open_at(&at).unwrap());

    // SQLite to PostgreSQL and back.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("local.db");
    let up = server.create_db("copies_up");
    copying(&|| Store::open(&file).unwrap(), &|| {
        Store::open_at(&Location::Server(up.clone())).unwrap()
    });
    let down = dir.path().join("down.db");
    copying(&|| Store::open_at(&Location::Server(up.clone())).unwrap(), &|| {
        Store::open(&down).unwrap()
    });

    // A database that has no schedlab schema yet: reading says so and creates nothing.
    let empty = server.create_db("empty");
    let err = Store::open_existing_at(&Location::Server(empty)).unwrap_err();
    assert!(matches!(err, StoreError::Missing(_)), "{err}");
    let tables: i64 = server
        .client("empty")
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0);

    // Another application's database is refused and untouched.
    let foreign = server.create_db("foreign_app");
    server.client("foreign_app").batch_execute("CREATE TABLE contacts (name TEXT)").unwrap();
    let err = Store::open_at(&Location::Server(foreign)).unwrap_err();
    assert!(matches!(err, StoreError::NotOurs(..)), "{err}");
    let tables: i64 = server
        .client("foreign_app")
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1);

    // A schema from a newer schedlab is refused, for reading and writing, and untouched.
    server
        .client("conformance")
        .batch_execute("UPDATE schedlab_meta SET schema_version = schema_version + 1")
        .unwrap();
    for err in [Store::open_at(&at).unwrap_err(), Store::open_existing_at(&at).unwrap_err()] {
        assert!(matches!(err, StoreError::TooNew { .. }), "{err}");
        assert!(err.to_string().contains("newer schedlab"), "{err}");
        assert!(!err.to_string().contains(pg::PASSWORD), "the password leaked: {err}");
    }
    let mut c = server.client("conformance");
    let v: i64 = c.query_one("SELECT schema_version FROM schedlab_meta", &[]).unwrap().get(0);
    assert_eq!(v, schedlab_store::SCHEMA_VERSION + 1);
    let runs: i64 = c.query_one("SELECT count(*) FROM runs", &[]).unwrap().get(0);
    assert_eq!(runs, 2);

    // Bad credentials: a clear error that names the server, without the password.
    let wrong = "not-the-password-42";
    let err = Store::open_at(&Location::Server(server.url_as(pg::USER, wrong, "conformance")))
        .unwrap_err();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    assert!(matches!(err, StoreError::Open { .. }), "{text}");
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(text.contains("postgres://schedlab:***@localhost/conformance"), "{text}");
    assert!(!text.contains(wrong), "the password leaked: {text}");
}

/// A URL that is not one, or a server that is not there: a clear error naming it, quickly,
/// without its password. Needs no server.
#[test]
fn a_bad_url_or_an_absent_server_is_a_clear_error_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    // Each fails at once for its own reason (a malformed port; no server socket there),
    // which the message names, rather than after the connect timeout.
    for (url, why) in [
        (
            "postgres://lab:hunter2@localhost:notaport/db".to_string(),
            "invalid value for option `port`",
        ),
        (
            format!("postgres://lab:hunter2@localhost/db?host={}", dir.path().display()),
            "No such file",
        ),
    ] {
        let err = Store::open_at(&Location::parse(url.as_ref())).unwrap_err();
        let mut text = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            text.push_str(&format!(": {s}"));
            source = s.source();
        }
        assert!(matches!(err, StoreError::Open { .. }), "{text}");
        assert!(text.contains("postgres://lab:***@localhost"), "{text}");
        assert!(!text.contains("hunter2"), "the password leaked: {text}");
        assert!(text.contains(why) && !text.contains("timed out"), "{text}");
    }
}

#[test]
fn passwords_are_redacted_from_every_url() {
    use schedlab_store::redact;
    assert_eq!(redact("postgres://u:pw@h:5432/db"), "postgres://u:***@h:5432/db");
    assert_eq!(
        redact("postgres://u@h/db?password=pw&sslmode=disable"),
        "postgres://u@h/db?password=***&sslmode=disable"
    );
    assert_eq!(redact("postgresql://u:p%40ss@h/db"), "postgresql://u:***@h/db");
    assert_eq!(redact("postgres://h/db"), "postgres://h/db");
    let at = Location::parse("postgres://u:hunter2@h/db".as_ref());
    for shown in [at.to_string(), format!("{at:?}")] {
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    // Passwords holding `/ ? # @ :` (an `@` percent-encoded, as the driver needs it; the
    // others as typed, which the driver takes), in the user part and as an option.
    for pw in ["se/cret", "se?cret", "se#cret", "se%40cret", "se:cret", "a/b?c#d%40e:f"] {
        for url in [
            format!("postgres://lab:{pw}@db.example:5432/lab?sslmode=disable"),
            format!("postgresql://lab:{pw}@db.example/lab"),
            format!("postgres://lab:{pw}@/lab?host=/run/postgresql"),
        ] {
            let shown = redact(&url);
            assert!(shown.starts_with("postgres") && shown.contains("://lab:***@"), "{shown}");
            assert!(!shown.contains("cret") && !shown.contains("d%40e"), "leaked: {shown}");
        }
        let shown = redact(&format!("postgres://lab@h/db?sslmode=disable&password={pw}"));
        assert!(!shown.contains("cret") && !shown.contains("d%40e"), "leaked: {shown}");
    }
    // An unencoded `@` (which the driver cannot use): hidden all the same.
    assert_eq!(redact("postgres://u:p@ss@h/db"), "postgres://u:***@h/db");
    // A percent-encoded option name is still the password.
    assert_eq!(redact("postgres://h/db?pass%77ord=x"), "postgres://h/db?pass%77ord=***");
    // An `@` in an option of a URL without credentials is not taken for them.
    assert_eq!(
        redact("postgres://u@h/db?application_name=a@b"),
        "postgres://u@h/db?application_name=a@b"
    );
}

/// An error with its sources, as the CLI prints it.
fn chain(err: &StoreError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Built without the `tls` feature, a URL whose sslmode needs TLS is refused before anything
/// is sent (never downgraded to plain text), saying which feature to build with. Needs no
/// server: port 1 refuses connections, which would be another error.
#[cfg(not(feature = "tls"))]
#[test]
fn without_the_tls_feature_sslmodes_that_need_tls_are_refused() {
    for mode in ["require", "verify-ca", "verify-full"] {
        let url = format!("postgres://lab:hunter2@127.0.0.1:1/db?sslmode={mode}");
        let err = Store::open_at(&Location::parse(url.as_ref())).unwrap_err();
        let text = chain(&err);
        assert!(matches!(err, StoreError::Open { .. }), "{text}");
        assert!(text.contains(&format!("sslmode={mode} needs TLS")), "{text}");
        assert!(text.contains("feature `tls`"), "{text}");
        assert!(text.contains("postgres://lab:***@127.0.0.1:1/db"), "{text}");
        assert!(!text.contains("hunter2"), "the password leaked: {text}");
    }
}

/// With the `tls` feature, against a server with TLS on and a self-signed certificate for
/// `localhost` (TCP only over TLS): each sslmode encrypts and checks what libpq's does.
#[cfg(feature = "tls")]
#[test]
fn tls_is_used_and_checked_as_sslmode_asks() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_pem, key_pem) = (cert.cert.pem(), cert.signing_key.serialize_pem());
    let server = match pg::PgServer::start_tls(&cert_pem, &key_pem) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipping tls_is_used_and_checked_as_sslmode_asks: no PostgreSQL server can be started here: {why}");
            return;
        }
    };
    server.create_db("tls");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root.crt");
    std::fs::write(&root, &cert_pem).unwrap();
    let trusted = format!("sslrootcert={}", root.display());

    // Whether the connection of application `app` is encrypted, as the server sees it.
    let encrypted = |app: &str| -> bool {
        let rows = server
            .client("postgres")
            .query(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.application_name = $1",
                &[&app],
            )
            .unwrap();
        assert_eq!(rows.len(), 1, "one connection of {app}");
        rows[0].get(0)
    };
    let open = |host: &str, app: &str, options: &str| {
        let url = server.tcp_url(host, "tls", &format!("application_name={app}&{options}"));
        Store::open_at(&Location::parse(url.as_ref()))
    };

    // require: encrypted, the certificate not checked; the store works over it.
    let mut store = open("127.0.0.1", "req", "sslmode=require").unwrap();
    assert!(encrypted("req"));
    fill(&mut store, "over-tls", 3);
    assert_eq!(store.runs().unwrap().len(), 1);
    drop(store);

    // prefer (the default) takes TLS when the server offers it.
    let _store = open("127.0.0.1", "pref", "sslmode=prefer").unwrap();
    assert!(encrypted("pref"));

    // allow: plain text first, which this server refuses over TCP, then TLS.
    let _store = open("127.0.0.1", "allow", "sslmode=allow").unwrap();
    assert!(encrypted("allow"));

    // verify-full without trusting the self-signed certificate: refused, clearly.
    for options in ["sslmode=verify-full", "sslmode=verify-full&sslrootcert=system"] {
        let err = open("localhost", "vf", options).unwrap_err();
        let text = chain(&err);
        assert!(matches!(err, StoreError::Open { .. }), "{text}");
        assert!(
            text.contains("invalid peer certificate: UnknownIssuer")
                || text.contains("no system root certificates"),
            "{text}"
        );
        assert!(!text.contains(pg::PASSWORD), "the password leaked: {text}");
    }
    // verify-ca without it: refused too.
    let text = chain(&open("127.0.0.1", "vca", "sslmode=verify-ca").unwrap_err());
    assert!(text.contains("UnknownIssuer") || text.contains("no system root"), "{text}");

    // Trusted, verify-full accepts the name on the certificate and no other.
    let _store = open("localhost", "vf_ok", &format!("sslmode=verify-full&{trusted}")).unwrap();
    assert!(encrypted("vf_ok"));
    let text =
        chain(&open("127.0.0.1", "vf_ip", &format!("sslmode=verify-full&{trusted}")).unwrap_err());
    assert!(text.contains("certificate not valid for name \"127.0.0.1\""), "{text}");
    // verify-ca checks the chain, not the name.
    let _store = open("127.0.0.1", "vca_ok", &format!("sslmode=verify-ca&{trusted}")).unwrap();
    assert!(encrypted("vca_ok"));

    // disable: plain text, which this server refuses over TCP.
    let text = chain(&open("127.0.0.1", "off", "sslmode=disable").unwrap_err());
    assert!(text.contains("no encryption"), "{text}");

    // A missing root certificate file is named.
    let text = chain(
        &open("localhost", "nofile", "sslmode=verify-full&sslrootcert=/no/such.crt").unwrap_err(),
    );
    assert!(text.contains("cannot read sslrootcert /no/such.crt"), "{text}");
}

/// A server that accepts the connection and never answers (nor closes it): the connection
/// is given up at its deadline — the URL's `connect_timeout`, or the default — with a clear
/// error naming the server without its password, whether the client waits for the answer
/// to its TLS request (`sslmode=prefer`), to its start-up message (`disable`), or for any
/// other reading. Needs no server. A hang guard bounds each wait; no timing is asserted.
#[test]
fn a_server_that_never_answers_is_given_up_at_the_connect_deadline() {
    let port = pg::mute_server();
    for (options, write) in [
        ("connect_timeout=1", true),
        ("connect_timeout=1", false),
        ("connect_timeout=1&sslmode=disable", true),
        ("sslmode=disable", true),
    ] {
        let url = format!("postgres://lab:hunter2@127.0.0.1:{port}/db?{options}");
        let at = Location::parse(url.as_ref());
        let err = pg::within(std::time::Duration::from_secs(120), move || {
            if write { Store::open_at(&at) } else { Store::open_existing_at(&at) }.unwrap_err()
        });
        let text = chain(&err);
        assert!(matches!(err, StoreError::Open { .. }), "{text}");
        assert!(text.contains("did not complete within"), "{text}");
        assert!(text.contains(&format!("postgres://lab:***@127.0.0.1:{port}/db")), "{text}");
        assert!(!text.contains("hunter2"), "the password leaked: {text}");
    }
}

/// A server that stops answering after the connection was made (its backend stopped with
/// SIGSTOP: the kernel still takes what is sent): the call waiting for it fails once the
/// statement's time plus the connect time limit have passed, as a storage failure that
/// says the server did not answer, and so does every later call on that connection, at once.
#[test]
fn a_server_that_stops_answering_mid_way_is_given_up() {
    let Some(server) = pg::server_or_skip("a_server_that_stops_answering_mid_way_is_given_up")
    else {
        return;
    };
    let url = server.create_db("silent");
    let url = format!(
        "{url}&application_name=silent&connect_timeout=1&options=-c%20statement_timeout%3D1000"
    );
    let mut store = Store::open_at(&Location::parse(url.as_ref())).unwrap();
    let run = fill(&mut store, "before", 2);
    let stopped = pg::Stopped::new(pg::backend_of(&server, "silent", "silent"));
    let (first, second, third) = pg::within(std::time::Duration::from_secs(120), move || {
        let first = store.runs().unwrap_err();
        let second = store.load_run(run).unwrap_err();
        let third = store.interrupt_run(run, "x").unwrap_err();
        (first, second, third)
    });
    drop(stopped);
    for err in [first, second, third] {
        let text = chain(&err);
        assert!(matches!(err, StoreError::NoAnswer { .. }), "{text}");
        assert!(err.is_storage_failure(), "{text}");
        assert!(text.contains("the server did not answer within 2 s"), "{text}");
        assert!(!text.contains(pg::PASSWORD), "the password leaked: {text}");
    }
    // The server answers again: a new connection works, and nothing was lost.
    let store = Store::open_at(&Location::parse(url.as_ref())).unwrap();
    assert_eq!(store.runs().unwrap().len(), 1);
    assert_eq!(store.load_run(run).unwrap().results.len(), 3);
}

/// Two machines pushing to a new fleet at once, their runs naming the same new series and
/// notes in opposite orders: each copy creates what it needs in one order (sorted), so
/// neither waits for a row the other created while the other waits for one of its own
/// (PostgreSQL would end one copy with "deadlock detected"). Three new databases, so each
/// round creates every series afresh.
#[test]
fn two_pushes_creating_the_same_series_in_opposite_orders_both_succeed() {
    let Some(server) =
        pg::server_or_skip("two_pushes_creating_the_same_series_in_opposite_orders_both_succeed")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<std::path::PathBuf> = (0..2)
        .map(|k| {
            let path = dir.path().join(format!("m{k}.db"));
            let mut store = Store::open(&path).unwrap();
            let run = store.begin_run(&meta(Some(&format!("m{k}")))).unwrap();
            let mut order: Vec<usize> = (0..300).collect();
            if k == 1 {
                order.reverse();
            }
            for i in order {
                let mut m = measurement("os.race", Params::new().with("i", i), &[1.0, 2.0]);
                m.notes = Params::new().with("i", i);
                store.save_result(run, &m).unwrap();
            }
            store.finish_run(run, RunStatus::Complete).unwrap();
            path
        })
        .collect();
    for round in 0..3 {
        let url = server.create_db(&format!("race{round}"));
        drop(Store::open_at(&Location::Server(url.clone())).unwrap());
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let copies: Vec<_> = files
            .iter()
            .map(|file| {
                let (file, url, start) = (file.clone(), url.clone(), start.clone());
                std::thread::spawn(move || {
                    let from = Store::open(&file).unwrap();
                    let to = Store::open_at(&Location::Server(url)).unwrap();
                    start.wait();
                    from.copy_run(1, &to).map_err(|e| e.to_string())
                })
            })
            .collect();
        for copy in copies {
            assert_eq!(copy.join().unwrap(), Ok(Copied::Copied), "round {round}");
        }
        let to = Store::open_at(&Location::Server(url)).unwrap();
        let runs = to.runs().unwrap();
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|r| r.ok == 300), "{runs:?}");
    }
}
