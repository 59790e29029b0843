//! Results from many machines in one place, through the real binary: `push`, `pull` and
//! `import` between SQLite files and a real PostgreSQL server, `runs` and `compare` across
//! hosts, and a run that meets a storage failure (a lock held too long, an I/O error).
//!
//! The PostgreSQL test starts a throwaway cluster (`../../store/tests/support/pg.rs`) and
//! skips, saying why, where none can be started.

mod common;
#[path = "../../store/tests/support/pg.rs"]
mod pg;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{bin, ok, run, text};
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Measurement, Params, RunMeta, RunStatus, Sample, Unit};
use schedlab_store::{Location, Store};

/// A machine other than this one, called `host`.
fn machine(host: &str) -> Machine {
    let mut m = Machine::fingerprint();
    m.host = host.to_string();
    m.cpu_model = format!("{host} CPU");
    m
}

/// Stores a finished run made on `host` with `results` results of `samples` samples each;
/// returns its id.
fn make_run(db: &Path, host: &str, label: &str, results: usize, samples: usize) -> i64 {
    let mut store = Store::open(db).unwrap();
    let mut meta = RunMeta::starting("quick", machine(host), ("0.1.0", "test"));
    meta.label = Some(label.to_string());
    let id = store.begin_run(&meta).unwrap();
    for i in 0..results {
        let s: Vec<Sample> = (0..samples)
            .map(|k| Sample {
                iters: 1000,
                elapsed_ns: 1_000_000 + k as u64,
                value: 1.0 + (i % 7) as f64 + k as f64 * 1e-3,
                other_cpu_ns: Some(k as i64),
                migrated: false,
            })
            .collect();
        let m = Measurement::of_samples(
            "os.syscall.null",
            Params::new().with("i", i),
            Unit::Nanos,
            s,
            0.1,
        );
        store.save_result(id, &m).unwrap();
    }
    store.finish_run(id, RunStatus::Complete).unwrap();
    id
}

/// Runs `schedlab --db DB ARGS` where DB may be a URL.
fn at(db: &str, args: &[&str]) -> std::process::Output {
    bin().arg("--db").arg(db).args(args).output().unwrap()
}

#[test]
fn runs_of_two_machines_meet_in_one_file_once_each_and_compare_says_they_differ() {
    let dir = tempfile::tempdir().unwrap();
    let alpha = dir.path().join("alpha.db");
    let beta = dir.path().join("beta.db");
    let fleet = dir.path().join("fleet.db");
    make_run(&alpha, "alpha", "base", 5, 5);
    make_run(&beta, "beta", "base", 5, 5);
    make_run(&beta, "beta", "tuned", 5, 5);

    let o = ok(&run(&fleet, &["import", alpha.to_str().unwrap()]));
    assert!(o.contains("1 copied"), "{o}");
    let o = ok(&run(&beta, &["push", "--to", fleet.to_str().unwrap()]));
    assert!(o.contains("2 copied"), "{o}");
    // Again: nothing is stored twice.
    let o = ok(&run(&beta, &["push", "--to", fleet.to_str().unwrap()]));
    assert!(o.contains("0 copied, 2 already there"), "{o}");
    let o = ok(&run(&fleet, &["import", alpha.to_str().unwrap()]));
    assert!(o.contains("0 copied, 1 already there"), "{o}");

    let all = ok(&run(&fleet, &["runs"]));
    assert_eq!(all.matches("complete").count(), 3, "{all}");
    assert!(all.contains("alpha") && all.contains("beta") && all.contains("machine"), "{all}");
    let only_beta = ok(&run(&fleet, &["runs", "--host", "beta"]));
    assert_eq!(only_beta.matches("complete").count(), 2, "{only_beta}");
    assert!(!only_beta.contains("alpha"), "{only_beta}");
    let labelled = ok(&run(&fleet, &["runs", "--label", "tuned"]));
    assert_eq!(labelled.matches("complete").count(), 1, "{labelled}");
    let none = ok(&run(&fleet, &["runs", "--since", "2999-01-01"]));
    assert!(none.contains("none of the 3 runs"), "{none}");
    assert_eq!(run(&fleet, &["runs", "--since", "yesterday"]).status.code(), Some(2));

    // A label means the most recent run with it, or that host's with --host.
    let cmp = ok(&run(&fleet, &["compare", "base", "tuned", "--host", "beta"]));
    assert!(!cmp.contains("other machine"), "same machine: a noise verdict is fine\n{cmp}");
    let cmp = ok(&run(&fleet, &["compare", "1", "2"]));
    assert!(cmp.contains("other machine"), "{cmp}");
    for row in cmp.lines().filter(|l| l.starts_with("os.syscall.null")) {
        assert!(row.ends_with("other machine"), "no noise verdict across machines: {row}");
    }
    assert!(cmp.contains("a noise verdict across machines is not claimed"), "{cmp}");
    let cmp = ok(&run(&fleet, &["compare", "1", "2", "--across-machines"]));
    assert!(cmp.contains("(other machine)") && cmp.contains("--across-machines"), "{cmp}");
    let o = run(&fleet, &["compare", "base", "tuned", "--host", "alpha"]);
    assert_eq!(o.status.code(), Some(2), "alpha has no `tuned`: {}", text(&o.stderr));

    // Pull with filters into a new file.
    let mine = dir.path().join("mine.db");
    let o = ok(&run(&mine, &["pull", "--from", fleet.to_str().unwrap(), "--host", "alpha"]));
    assert!(o.contains("1 copied"), "{o}");
    let o = ok(&run(&mine, &["runs"]));
    assert!(o.contains("alpha") && !o.contains("beta"), "{o}");
    // The same run has the same UUID everywhere.
    let uuid_of = |db: &Path, id: i64| Store::open_existing(db).unwrap().identity(id).unwrap().0;
    assert_eq!(uuid_of(&mine, 1), uuid_of(&alpha, 1));

    // Copying a database onto itself is a usage error.
    assert_eq!(run(&fleet, &["push", "--to", fleet.to_str().unwrap()]).status.code(), Some(2));
    assert_eq!(run(&fleet, &["import", fleet.to_str().unwrap()]).status.code(), Some(2));
}

/// A stale copy of a run (interrupted, 43 of its 63 results) pushed to a database that has
/// it complete is skipped, saying so, and nothing there is lost; the complete run pushed onto
/// the stale copy replaces it.
#[test]
fn a_stale_copy_never_replaces_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.db");
    let stale = dir.path().join("stale.db");
    let fleet = dir.path().join("fleet.db");
    make_run(&full, "alpha", "base", 63, 2);
    std::fs::copy(&full, &stale).unwrap();
    let c = rusqlite::Connection::open(&stale).unwrap();
    c.execute_batch(
        "PRAGMA foreign_keys = ON; DELETE FROM results WHERE seq >= 43;
         UPDATE runs SET status = 'interrupted', reason = 'killed';",
    )
    .unwrap();
    drop(c);
    assert_eq!(results_in(&stale), 43);

    ok(&run(&full, &["push", "--to", fleet.to_str().unwrap()]));
    let o = ok(&run(&stale, &["push", "--to", fleet.to_str().unwrap()]));
    assert!(o.contains("a newer copy is there, skipped"), "{o}");
    assert!(o.contains("0 replaced, 1 skipped (a newer copy is there)"), "{o}");
    assert_eq!(results_in(&fleet), 63, "the fleet lost results: {o}");
    let o = ok(&run(&fleet, &["import", stale.to_str().unwrap()]));
    assert!(o.contains("a newer copy is there, skipped"), "{o}");
    let o = ok(&run(&stale, &["pull", "--from", fleet.to_str().unwrap()]));
    assert!(o.contains("replaced an older copy"), "{o}");
    assert_eq!(results_in(&stale), 63);
    assert!(ok(&run(&fleet, &["runs"])).contains("complete"));
}

/// The run's process, started in the background on `db` (a smoke run long enough to be
/// caught in the middle).
fn long_run(db: &Path, configure: impl FnOnce(&mut std::process::Command)) -> std::process::Child {
    let mut c = common::long_run(db, "smoke", "os.syscall", &[]);
    configure(&mut c);
    c.spawn().unwrap()
}

fn results_in(db: &Path) -> i64 {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| c.query_row("SELECT count(*) FROM results", [], |r| r.get::<_, i64>(0)))
        .unwrap_or(0)
}

fn wait_for_results(db: &Path, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while results_in(db) < n {
        assert!(Instant::now() < deadline, "no result was stored within a minute");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Another process holds the database's write lock longer than the busy timeout: the run
/// stops, keeps what it had committed, and is marked interrupted with the reason.
#[test]
fn a_lock_held_too_long_stops_the_run_which_keeps_its_results_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut child = long_run(&db, |_| {});
    wait_for_results(&db, 1);
    let locker = rusqlite::Connection::open(&db).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let kept = results_in(&db);
    // Longer than the run's busy timeout (5 s), then let it write its final status.
    std::thread::sleep(schedlab_store::BUSY_TIMEOUT + Duration::from_millis(1500));
    locker.execute_batch("ROLLBACK").unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("locked by another process") && err.contains("the run stopped"), "{err}");
    let runs = ok(&run(&db, &["runs"]));
    assert!(runs.contains("interrupted") && runs.contains("storage failure"), "{runs}");
    assert!(runs.contains("locked"), "{runs}");
    assert!(results_in(&db) >= kept, "committed results are kept");
}

/// Writes fail (a file size limit: the kernel refuses to grow the database): the run stops
/// with a clear error, what was committed survives, and the run ends up interrupted — marked
/// by the run itself, or by the next schedlab that opens the database for writing.
#[test]
fn an_io_error_stops_the_run_keeping_what_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // Make the database first, so that the limit leaves room for a few results only.
    make_run(&db, "here", "setup", 1, 1);
    let limit = std::fs::metadata(&db).unwrap().len() + 96 * 1024;
    let mut child = long_run(&db, move |c| {
        // SAFETY: between fork and exec only async-signal-safe calls are made (setrlimit,
        // signal), touching no memory the parent shares.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(c, move || {
                let lim = libc::rlimit { rlim_cur: limit, rlim_max: limit };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Past the limit, write(2) fails with EFBIG instead of killing the process.
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("the run stopped") && err.contains(&db.display().to_string()), "{err}");
    assert!(err.contains("I/O error") || err.contains("full"), "{err}");
    // The next writer (here: a tiny run) finds the run, committed results and all.
    ok(&run(&db, &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label", "after"]));
    let runs = ok(&run(&db, &["runs"]));
    let line = runs.lines().find(|l| l.contains("long")).expect("the stopped run is listed");
    assert!(line.contains("interrupted"), "{runs}");
    let ok_results: i64 = line.split_whitespace().rev().nth(2).unwrap().parse().unwrap();
    assert!(ok_results >= 1, "what was committed survives: {runs}");
}

/// Everything against one throwaway PostgreSQL: 8 machines pushing at once (the same and
/// different runs), the server killed in the middle of a push, a newer schema, bad
/// credentials, and the reading commands on the server.
#[test]
fn a_fleet_pushes_to_postgresql() {
    let Some(server) = pg::server_or_skip("a_fleet_pushes_to_postgresql") else { return };
    let dir = tempfile::tempdir().unwrap();
    // An empty database: the schema is made by the first pushes, 8 at once (each migration
    // step runs once, under an advisory lock).
    server.create_db("fleet");

    // 8 machines, each with 2 runs of its own and the same shared run (imported from one
    // file into all of them).
    let shared = dir.path().join("shared.db");
    make_run(&shared, "lab", "shared", 20, 11);
    let fleet_url = server.url("fleet");
    let machines: Vec<PathBuf> = (0..8)
        .map(|i| {
            let db = dir.path().join(format!("m{i}.db"));
            make_run(&db, &format!("m{i}"), "before", 20, 11);
            make_run(&db, &format!("m{i}"), "after", 20, 11);
            ok(&run(&db, &["import", shared.to_str().unwrap()]));
            db
        })
        .collect();
    let children: Vec<_> = machines
        .iter()
        .map(|db| bin().arg("--db").arg(db).args(["push", "--to", &fleet_url]).output_async())
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        ok(&o);
    }
    let mut c = server.client("fleet");
    let runs: i64 = c.query_one("SELECT count(*) FROM runs", &[]).unwrap().get(0);
    let uuids: i64 = c.query_one("SELECT count(DISTINCT uuid) FROM runs", &[]).unwrap().get(0);
    assert_eq!((runs, uuids), (17, 17), "8 × 2 own runs and the shared one, once each");
    let results: i64 = c.query_one("SELECT count(*) FROM results", &[]).unwrap().get(0);
    let samples: i64 =
        c.query_one("SELECT CAST(sum(n) AS BIGINT) FROM raw_samples", &[]).unwrap().get(0);
    assert_eq!((results, samples), (17 * 20, 17 * 20 * 11), "no loss");

    // The reading commands work on the server, through --db and SCHEDLAB_DB alike.
    let listed = ok(&at(&fleet_url, &["runs", "--host", "m3"]));
    assert_eq!(listed.matches("complete").count(), 2, "{listed}");
    assert!(!listed.contains(pg::PASSWORD), "the password leaked: {listed}");
    let o = bin()
        .env("SCHEDLAB_DB", &fleet_url)
        .args(["compare", "before", "after", "--host", "m5"])
        .output()
        .unwrap();
    let cmp = ok(&o);
    assert!(cmp.contains("within noise") || cmp.contains('×'), "{cmp}");
    ok(&at(&fleet_url, &["show", "shared"]));
    ok(&at(&fleet_url, &["export", "shared", "--format", "csv"]));
    // Pulling one host's runs from the server into a file.
    let m2 = dir.path().join("m2-pulled.db");
    let o = ok(&run(&m2, &["pull", "--from", &fleet_url, "--host", "m2"]));
    assert!(o.contains("2 copied"), "{o}");
    assert!(!o.contains(pg::PASSWORD), "the password leaked: {o}");
    // Measuring commands write straight to the server too, timelines and all.
    let o = ok(&at(
        &fleet_url,
        &["run", "--suite", "smoke", "--filter", "os.syscall.null", "--label", "direct"],
    ));
    assert!(o.contains("in postgres://schedlab:***@") && !o.contains(pg::PASSWORD), "{o}");
    ok(&at(&fleet_url, &["timeline", "two-equal", "--label", "tl"]));
    let page = dir.path().join("fleet.html");
    ok(&at(&fleet_url, &["report", "tl", "direct", "-o", page.to_str().unwrap()]));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("id=\"timelines\"") && html.contains("sched.timeline.slice"),
        "the stored timeline, read back from the server"
    );
    assert!(html.contains("direct"), "the run measured into the server");

    // The server killed in the middle of a push: a clear error, the local file untouched,
    // and a second push completes the copy.
    let big = dir.path().join("big.db");
    for i in 0..6 {
        make_run(&big, "big", &format!("big{i}"), 800, 5);
    }
    let before = std::fs::read(&big).unwrap();
    let target = server.create_db("killed");
    let child = bin().arg("--db").arg(&big).args(["push", "--to", &target]).output_async();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let copied = postgres::Client::connect(&target, postgres::NoTls)
            .ok()
            .and_then(|mut c| c.query_one("SELECT count(*) FROM runs", &[]).ok())
            .map_or(0, |r| r.get::<_, i64>(0));
        if copied >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the push stored nothing within a minute");
        std::thread::sleep(Duration::from_millis(5));
    }
    server.kill();
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "the push was not interrupted: {}\n{err}",
        text(&o.stdout)
    );
    assert!(err.contains("connection to the server failed or was lost"), "{err}");
    assert!(err.contains("run the same command again"), "{err}");
    assert!(!err.contains(pg::PASSWORD), "the password leaked: {err}");
    assert_eq!(std::fs::read(&big).unwrap(), before, "the local database was modified");
    server.restart();
    let o = ok(&bin().arg("--db").arg(&big).args(["push", "--to", &target]).output().unwrap());
    assert!(o.contains("already there") && o.contains("6 run(s)"), "{o}");
    let mut c = postgres::Client::connect(&target, postgres::NoTls).unwrap();
    let runs: i64 = c.query_one("SELECT count(DISTINCT uuid) FROM runs", &[]).unwrap().get(0);
    let results: i64 = c.query_one("SELECT count(*) FROM results", &[]).unwrap().get(0);
    assert_eq!((runs, results), (6, 6 * 800));

    // A newer schema on the server is refused, and the server left as it was.
    server.client("fleet").batch_execute("UPDATE schedlab_meta SET schema_version = 99").unwrap();
    let o =
        bin().arg("--db").arg(&machines[0]).args(["push", "--to", &fleet_url]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("newer schedlab"), "{}", text(&o.stderr));
    let o = at(&fleet_url, &["runs"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("schema version 99"), "{}", text(&o.stderr));

    // Bad credentials: a clear error, exit 1, no secret printed.
    let wrong = "wrong-secret-123";
    let bad = server.url_as(pg::USER, wrong, "fleet");
    for o in [at(&bad, &["runs"]), run(&machines[0], &["push", "--to", &bad])] {
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("password authentication failed"), "{err}");
        assert!(err.contains("cannot open database postgres://schedlab:***@"), "{err}");
        assert!(!err.contains(wrong), "the password leaked: {err}");
    }
}

/// A password holding `/ ? # @ :` (the `@` percent-encoded, as the URL form needs it) is
/// never printed: not in the success line of `push`, not in `pull`'s, `runs`' or `show`'s
/// output, not in the error of a wrong one.
#[test]
fn a_password_with_url_characters_is_never_printed() {
    let Some(server) = pg::server_or_skip("a_password_with_url_characters_is_never_printed") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pw = "a/b?c#d@e:f";
    server
        .client("postgres")
        .batch_execute(&format!("CREATE ROLE odd LOGIN SUPERUSER PASSWORD '{pw}'"))
        .unwrap();
    server.create_db("odd");
    let url = server.url_as("odd", "a/b?c#d%40e:f", "odd");
    let local = dir.path().join("local.db");
    make_run(&local, "here", "mine", 3, 2);
    let leaked =
        |s: &str| ["a/b", "b?c", "c#d", "d@e", "d%40e", "e:f"].iter().any(|p| s.contains(p));
    let mut outputs = vec![
        run(&local, &["push", "--to", &url]),
        run(&dir.path().join("pulled.db"), &["pull", "--from", &url]),
        at(&url, &["runs"]),
        at(&url, &["show", "mine"]),
    ];
    for o in &outputs {
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        ok(o);
        assert!(!leaked(&all), "the password leaked: {all}");
    }
    assert!(text(&outputs[0].stdout).contains("to postgres://odd:***@localhost/odd"));
    let wrong = server.url_as("odd", "x/y?z#w%40v:u", "odd");
    outputs = vec![run(&local, &["push", "--to", &wrong]), at(&wrong, &["runs"])];
    for o in &outputs {
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("password authentication failed"), "{err}");
        assert!(err.contains("postgres://odd:***@localhost/odd"), "{err}");
        for p in ["x/y", "y?z", "z#w", "w%40v", "w@v", "v:u"] {
            assert!(!err.contains(p), "the password leaked: {err}");
        }
    }
}

/// A password need not travel in the command line: with a URL that has none, it comes from
/// `PGPASSWORD`, else from `PGPASSFILE` (libpq's format: the first matching line, `*`
/// wildcards, `\:` escapes), else from `~/.pgpass`; a password file its group or others can
/// read is ignored, and the failed connection says why. `SCHEDLAB_FLEET` names the fleet's
/// database for `push` without `--to` and `pull` without `--from`.
#[test]
fn a_password_comes_from_the_environment_or_a_password_file_never_argv() {
    use std::os::unix::fs::PermissionsExt;
    let Some(server) = pg::server_or_skip("a_password_comes_from_the_environment") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pw = "pa:ss\\word";
    server
        .client("postgres")
        .batch_execute(&format!("CREATE ROLE lab LOGIN SUPERUSER PASSWORD '{pw}'"))
        .unwrap();
    server.create_db("lab");
    // The URL without a password, its only host the socket directory, as the password file
    // names it.
    let with_pw = server.url_as("lab", "x", "lab");
    let sock = with_pw.split("host=").nth(1).unwrap().to_string();
    let url = format!("postgres://lab@/lab?host={sock}");
    let local = dir.path().join("local.db");
    make_run(&local, "here", "mine", 3, 2);
    let push = |envs: &[(&str, &std::ffi::OsStr)], args: &[&str]| {
        let mut c = bin();
        c.arg("--db").arg(&local).arg("push").args(args);
        for (k, v) in envs {
            c.env(k, v);
        }
        finish(c.output_async())
    };

    // Without any: the server refuses, and the message names where a password comes from.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let o = push(&[("HOME", home.as_os_str())], &["--to", &url]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("asks for a password and none was given"), "{err}");
    assert!(err.contains("~/.pgpass") && err.contains("$PGPASSWORD"), "{err}");

    // PGPASSWORD.
    let o = push(&[("HOME", home.as_os_str()), ("PGPASSWORD", pw.as_ref())], &["--to", &url]);
    assert!(ok(&o).contains("1 copied"));

    // A password file named by PGPASSFILE: comments, a line that does not match, escapes,
    // wildcards; the first matching line wins.
    let file = dir.path().join("passfile");
    let escaped = pw.replace('\\', "\\\\").replace(':', "\\:");
    std::fs::write(
        &file,
        format!(
            "# fleet\nelsewhere:5432:lab:lab:wrong\n*:*:other:*:wrong-too\n{sock}:*:lab:lab:{escaped}\n*:*:*:*:wrong-too\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = push(&[("HOME", home.as_os_str()), ("PGPASSFILE", file.as_os_str())], &["--to", &url]);
    assert!(ok(&o).contains("1 already there"));

    // ~/.pgpass, and the fleet's URL from SCHEDLAB_FLEET: nothing secret in argv.
    let pgpass = home.join(".pgpass");
    std::fs::copy(&file, &pgpass).unwrap();
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let fleet = [("HOME", home.as_os_str()), ("SCHEDLAB_FLEET", url.as_ref())];
    assert!(ok(&push(&fleet, &[])).contains("1 already there"));
    let mut c = bin();
    c.arg("--db").arg(dir.path().join("pulled.db")).arg("pull");
    c.env("HOME", &home).env("SCHEDLAB_FLEET", &url);
    assert!(ok(&finish(c.output_async())).contains("1 copied"));

    // A password file others can read is ignored, as libpq ignores it, and the error says so.
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = push(&fleet, &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("has group or world access, so it was ignored"), "{err}");
    assert!(err.contains("chmod 0600"), "{err}");
    assert!(!err.contains("pa:ss") && !err.contains("ss\\word"), "the password leaked: {err}");

    // Neither --to nor SCHEDLAB_FLEET: a usage error that names both.
    let o = push(&[], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("SCHEDLAB_FLEET"), "{}", text(&o.stderr));
}

/// The child's output once it has exited; a hang guard, not a timing assertion: the child
/// is killed and the test fails if it has not exited within two minutes.
fn finish(mut child: std::process::Child) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("it hung: {}\n{}", text(&o.stdout), text(&o.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A server that accepts the connection and never answers, and one that stops answering in
/// the middle of a push (its backend stopped with SIGSTOP): every command ends with exit
/// code 1 and says so; the push says how to complete the copy, and completes it when run
/// again once the server answers.
#[test]
fn a_server_that_never_answers_or_stops_answering_ends_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.db");
    make_run(&local, "here", "mine", 3, 2);
    let port = pg::mute_server();
    let mute = format!("postgres://lab:hunter2@127.0.0.1:{port}/lab?connect_timeout=1");
    for args in [vec!["push", "--to", &mute], vec!["pull", "--from", &mute]] {
        let o = finish(bin().arg("--db").arg(&local).args(&args).output_async());
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("cannot open database postgres://lab:***@127.0.0.1"), "{err}");
        assert!(err.contains("did not complete within 1 s"), "{err}");
    }
    let o = finish(bin().arg("--db").arg(&mute).arg("runs").output_async());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));

    let Some(server) = pg::server_or_skip("a_server_that_never_answers_or_stops_answering") else {
        return;
    };
    let big = dir.path().join("big.db");
    for i in 0..6 {
        make_run(&big, "big", &format!("big{i}"), 800, 5);
    }
    let target = server.create_db("stopped");
    let url = format!(
        "{target}&application_name=pusher&connect_timeout=1&options=-c%20statement_timeout%3D2000"
    );
    let child = bin().arg("--db").arg(&big).args(["push", "--to", &url]).output_async();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let copied = postgres::Client::connect(&target, postgres::NoTls)
            .ok()
            .and_then(|mut c| c.query_one("SELECT count(*) FROM runs", &[]).ok())
            .map_or(0, |r| r.get::<_, i64>(0));
        if copied >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the push stored nothing within a minute");
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopped = pg::Stopped::new(pg::backend_of(&server, "stopped", "pusher"));
    let o = finish(child);
    drop(stopped);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}\n{err}", text(&o.stdout));
    assert!(err.contains("the server did not answer within 3 s"), "{err}");
    assert!(err.contains("run the same command again"), "{err}");
    assert!(!err.contains(pg::PASSWORD), "the password leaked: {err}");
    let o = ok(&finish(bin().arg("--db").arg(&big).args(["push", "--to", &url]).output_async()));
    assert!(o.contains("6 run(s)"), "{o}");
    let mut c = postgres::Client::connect(&target, postgres::NoTls).unwrap();
    let results: i64 = c.query_one("SELECT count(*) FROM results", &[]).unwrap().get(0);
    assert_eq!(results, 6 * 800);
}

/// `Command::output` without waiting: the child, with its output piped.
trait OutputAsync {
    fn output_async(&mut self) -> std::process::Child;
}

impl OutputAsync for std::process::Command {
    fn output_async(&mut self) -> std::process::Child {
        self.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }
}

#[test]
fn a_database_url_is_told_apart_from_a_file() {
    assert!(matches!(Location::parse("postgres://u@h/db".as_ref()), Location::Server(_)));
    assert!(matches!(Location::parse("postgresql://u@h/db".as_ref()), Location::Server(_)));
    assert!(matches!(Location::parse("results.db".as_ref()), Location::File(_)));
}

/// Built without the `tls` feature, a URL asking for TLS is refused before anything is sent,
/// naming the feature to build with, and without printing the password.
#[cfg(not(feature = "tls"))]
#[test]
fn without_the_tls_feature_a_url_asking_for_tls_is_refused_naming_it() {
    for mode in ["require", "verify-full"] {
        let o = at(&format!("postgres://lab:hunter2@127.0.0.1:1/lab?sslmode={mode}"), &["runs"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("sslmode={mode} needs TLS")), "{err}");
        assert!(err.contains("--features tls"), "{err}");
        assert!(err.contains("postgres://lab:***@127.0.0.1:1/lab"), "{err}");
        assert!(!err.contains("hunter2"), "the password leaked: {err}");
    }
}
