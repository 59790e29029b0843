//! The fleet-scale benchmark (issue 27): a fleet of quick-sized runs across many hosts in a
//! throwaway PostgreSQL database and an SQLite file, then the commands a team runs on it,
//! timed whole, and the space a run takes. Not a test: it writes gigabytes at 10,000 runs
//! and its figures depend on the machine (docs/DATABASE.md, "At fleet scale", gives the
//! command and what it printed).
//!
//! ```sh
//! cargo build --release -p schedlab --example fleet_scale
//! schedlab --db quick.db run --suite quick                  # the template: one real quick run
//! target/release/examples/fleet_scale --template quick.db --runs 10000 --hosts 100 \
//!     --pg 'postgres://lab@/fleet?host=/run/postgresql' --sqlite /tmp/fleet.db
//! ```
//!
//! How: `BIN --db TEMPLATE push latest --to TARGET` stores the template run (so the schema is
//! the one BIN writes: `--bin` an older schedlab measures the layout before); then every
//! other run is that run copied inside the database by SQL, one transaction a run, its host
//! one of `--hosts`, its start spread over a year, its medians and intervals moved by up to
//! ±1%, its raw samples, warnings and notes the template's. Then, three times each:
//! `BIN runs`, a one-probe-one-host history (the SELECT of `Store::history` with one host),
//! `BIN compare` of 10 runs, and `BIN push` of one new run into the fleet (one transaction);
//! the history query's plan is printed (`EXPLAIN ANALYZE`, `EXPLAIN QUERY PLAN`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// A parameter of a statement.
enum P {
    I(i64),
    T(String),
}

/// One of the two databases, spoken to directly (the generator writes what no schedlab
/// command writes: thousands of runs in minutes).
enum Db {
    Pg(Box<postgres::Client>),
    Lite(rusqlite::Connection),
}

impl Db {
    fn open(target: &str) -> Db {
        if target.starts_with("postgres://") || target.starts_with("postgresql://") {
            Db::Pg(Box::new(postgres::Client::connect(target, postgres::NoTls).expect("connect")))
        } else {
            let c = rusqlite::Connection::open(target).expect("open the SQLite file");
            c.busy_timeout(std::time::Duration::from_secs(30)).unwrap();
            Db::Lite(c)
        }
    }

    fn exec(&mut self, sql: &str, ps: &[P]) -> u64 {
        match self {
            Db::Pg(c) => {
                let boxed: Vec<Box<dyn postgres::types::ToSql + Sync>> = ps
                    .iter()
                    .map(|p| -> Box<dyn postgres::types::ToSql + Sync> {
                        match p {
                            P::I(i) => Box::new(*i),
                            P::T(t) => Box::new(t.clone()),
                        }
                    })
                    .collect();
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|b| b.as_ref()).collect();
                c.execute(sql, &refs).unwrap_or_else(|e| panic!("{e}\n{sql}"))
            }
            Db::Lite(c) => {
                let vals: Vec<rusqlite::types::Value> = ps
                    .iter()
                    .map(|p| match p {
                        P::I(i) => rusqlite::types::Value::Integer(*i),
                        P::T(t) => rusqlite::types::Value::Text(t.clone()),
                    })
                    .collect();
                let mut st = c.prepare_cached(&sql.replace('$', "?")).unwrap();
                st.execute(rusqlite::params_from_iter(vals.iter()))
                    .unwrap_or_else(|e| panic!("{e}\n{sql}")) as u64
            }
        }
    }

    /// The rows of a query, each column as text (numbers formatted).
    fn rows(&mut self, sql: &str, ps: &[P]) -> Vec<Vec<String>> {
        match self {
            Db::Pg(c) => {
                let boxed: Vec<Box<dyn postgres::types::ToSql + Sync>> = ps
                    .iter()
                    .map(|p| -> Box<dyn postgres::types::ToSql + Sync> {
                        match p {
                            P::I(i) => Box::new(*i),
                            P::T(t) => Box::new(t.clone()),
                        }
                    })
                    .collect();
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|b| b.as_ref()).collect();
                let rows = c.query(sql, &refs).unwrap_or_else(|e| panic!("{e}\n{sql}"));
                rows.iter()
                    .map(|r| {
                        (0..r.len())
                            .map(|i| {
                                use postgres::types::Type;
                                let ty = r.columns()[i].type_().clone();
                                if ty == Type::INT8 {
                                    r.get::<_, Option<i64>>(i)
                                        .map_or(String::new(), |v| v.to_string())
                                } else if ty == Type::FLOAT8 {
                                    r.get::<_, Option<f64>>(i)
                                        .map_or(String::new(), |v| v.to_string())
                                } else {
                                    r.get::<_, Option<String>>(i).unwrap_or_default()
                                }
                            })
                            .collect()
                    })
                    .collect()
            }
            Db::Lite(c) => {
                let vals: Vec<rusqlite::types::Value> = ps
                    .iter()
                    .map(|p| match p {
                        P::I(i) => rusqlite::types::Value::Integer(*i),
                        P::T(t) => rusqlite::types::Value::Text(t.clone()),
                    })
                    .collect();
                let mut st = c.prepare(&sql.replace('$', "?")).unwrap();
                let n = st.column_count();
                st.query_map(rusqlite::params_from_iter(vals.iter()), |r| {
                    (0..n)
                        .map(|i| {
                            use rusqlite::types::ValueRef;
                            Ok(match r.get_ref(i)? {
                                ValueRef::Null => String::new(),
                                ValueRef::Integer(v) => v.to_string(),
                                ValueRef::Real(v) => v.to_string(),
                                ValueRef::Text(t) | ValueRef::Blob(t) => {
                                    String::from_utf8_lossy(t).into_owned()
                                }
                            })
                        })
                        .collect()
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
            }
        }
    }

    fn is_pg(&self) -> bool {
        matches!(self, Db::Pg(_))
    }

    fn has_table(&mut self, name: &str) -> bool {
        let sql = if self.is_pg() {
            "SELECT count(*) FROM information_schema.tables WHERE table_name = $1"
        } else {
            "SELECT count(*) FROM sqlite_master WHERE name = $1"
        };
        self.rows(sql, &[P::T(name.into())])[0][0] != "0"
    }
}

/// Days since 1970-01-01 as a civil date (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn rfc3339(epoch: i64) -> String {
    let (y, m, d) = civil(epoch.div_euclid(86_400));
    let s = epoch.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

/// CPU time (user + system) of the children waited for so far, in seconds.
fn children_cpu() -> f64 {
    // SAFETY: getrusage writes one `rusage` into the zeroed value it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid `who`.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Runs `schedlab ARGS` to completion, its output discarded: (wall seconds, CPU seconds).
/// On a loaded machine the wall time is mostly waiting for a CPU; the CPU time is what the
/// command costs.
fn timed(bin: &Path, args: &[&str]) -> (f64, f64) {
    let (t, cpu) = (Instant::now(), children_cpu());
    let o =
        Command::new(bin).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).output().unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert!(o.status.success(), "schedlab {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    (secs, children_cpu() - cpu)
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: fleet_scale --template QUICK.db [--runs 10000] [--hosts 100] [--pg URL] [--sqlite FILE] [--bin SCHEDLAB]";
    let Some(template) = arg(&args, "--template").map(PathBuf::from) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let runs: i64 = arg(&args, "--runs").map_or(10_000, |n| n.parse().expect("--runs N"));
    let hosts: i64 = arg(&args, "--hosts").map_or(100, |n| n.parse().expect("--hosts N"));
    let bin = arg(&args, "--bin").map(PathBuf::from).unwrap_or_else(|| {
        let me = std::env::current_exe().unwrap();
        me.parent().and_then(Path::parent).unwrap().join("schedlab")
    });
    let targets: Vec<String> = ["--pg", "--sqlite"].iter().filter_map(|a| arg(&args, a)).collect();
    if targets.is_empty() {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "fleet_scale: {runs} runs across {hosts} hosts; schedlab {}; load {}",
        bin.display(),
        load.trim()
    );
    for target in &targets {
        bench(&bin, &template, target, runs, hosts);
    }
}

fn bench(bin: &Path, template: &Path, target: &str, runs: i64, hosts: i64) {
    println!("\n## {target}");
    let tpl = template.to_str().unwrap();
    // The template's latest run, pushed: the schema is the one `bin` writes.
    let work = tempfile::tempdir().unwrap();
    let own = work.path().join("template.db");
    std::fs::copy(template, &own).unwrap();
    let own = own.to_str().unwrap().to_string();
    let _ = tpl;
    timed(bin, &["--db", &own, "push", "latest", "--to", target]);
    let mut db = Db::open(target);
    let t: i64 = db.rows("SELECT max(id) FROM runs", &[])[0][0].parse().unwrap();
    let v5 = db.has_table("raw_samples");
    // Version 6 names a result's series and notes, and a warning's kind and advice, by id,
    // and keeps a result's raw samples in its row.
    let v6 = db.has_table("warning_kinds");
    let results = if v6 { "result_rows" } else { "results" };
    let counts = if v5 { ", results_ok, results_skipped, results_failed" } else { "" };
    let started = Instant::now();
    let year = 365 * 86_400;
    let base = 1_764_547_200; // 2025-12-01T00:00:00Z
    for k in 1..runs {
        let when = rfc3339(base + k * year / runs);
        let host = format!("host-{:03}", k % hosts);
        db.exec("BEGIN", &[]);
        let new: i64 = db.rows(
            &format!(
                "INSERT INTO runs (label, suite, status, started_at, finished_at, host, os, kernel,
                    cpu_model, logical_cpus, version, git_rev, pid, filters, settings, calibration,
                    machine, uuid, machine_id, reason{counts})
                 SELECT $1, suite, status, $2, $2, $3, os, kernel, cpu_model, logical_cpus, version,
                    git_rev, pid, filters, settings, calibration, machine, $4, $5, reason{counts}
                 FROM runs WHERE id = $6 RETURNING id"
            ),
            &[
                P::T(format!("fleet-{k:05}")),
                P::T(when.clone()),
                P::T(host.clone()),
                P::T(format!("00000000-0000-4000-8000-{k:012x}")),
                P::T(format!("{:08x}-0000-5000-8000-000000000000", k % hosts)),
                P::I(t),
            ],
        )[0][0]
            .parse()
            .unwrap();
        // (Cast: a parameter added to a 4-byte column, `seq`, would be taken as 4 bytes.)
        let f = "(1 + ((seq * 7919 + CAST($4 AS BIGINT)) % 2001 - 1000) / CAST(100000.0 AS DOUBLE PRECISION))";
        let (named, raw, order) = if v6 {
            // In key order, as `push` stores a run.
            ("series_id, notes_id", ", raw_n, raw", " ORDER BY series_id")
        } else {
            ("probe, params, params_json, unit, better, notes", "", "")
        };
        db.exec(
            &format!(
                "INSERT INTO results (run_id, seq, {named}, status, reason, iters_per_sample,
                    overhead_ns_per_iter, n, median, min, max, mean, stddev, p5, p95, ci_low, ci_high,
                    ci_level, cv, outliers, window_ns, other_cpu_ns, steal_ns, wall_s, measured_at{raw})
                 SELECT CAST($1 AS BIGINT), seq, {named}, status, reason, iters_per_sample,
                    overhead_ns_per_iter, n,
                    median * {f}, min, max, mean, stddev, p5, p95, ci_low * {f}, ci_high * {f},
                    ci_level, cv, outliers, window_ns, other_cpu_ns, steal_ns, wall_s, $2{raw}
                 FROM results WHERE run_id = CAST($3 AS BIGINT){order}"
            ),
            &[P::I(new), P::T(when), P::I(t), P::I(k * 104_729)],
        );
        let raw = if v6 {
            ""
        } else if v5 {
            "INSERT INTO raw_samples (result_id, n, data) SELECT nx.id, s.n, s.data
             FROM raw_samples s JOIN results tx ON tx.id = s.result_id
             JOIN results nx ON nx.run_id = $1 AND nx.probe = tx.probe AND nx.params = tx.params
             WHERE tx.run_id = $2"
        } else {
            "INSERT INTO samples (result_id, idx, iters, elapsed_ns, value, other_cpu_ns, migrated)
             SELECT nx.id, s.idx, s.iters, s.elapsed_ns, s.value, s.other_cpu_ns, s.migrated
             FROM samples s JOIN results tx ON tx.id = s.result_id
             JOIN results nx ON nx.run_id = $1 AND nx.probe = tx.probe AND nx.params = tx.params
             WHERE tx.run_id = $2"
        };
        if !raw.is_empty() {
            db.exec(raw, &[P::I(new), P::I(t)]);
        }
        let warning = if v6 {
            "kind_id, advice_id, message"
        } else {
            "kind, probe, severity, message, advice"
        };
        db.exec(
            &format!(
                "INSERT INTO warnings (run_id, {warning})
                 SELECT CAST($1 AS BIGINT), {warning} FROM warnings
                 WHERE run_id = CAST($2 AS BIGINT) ORDER BY id"
            ),
            &[P::I(new), P::I(t)],
        );
        db.exec("COMMIT", &[]);
        if k % 500 == 0 {
            println!("  {k} runs generated, {:.0} s", started.elapsed().as_secs_f64());
        }
    }
    println!("generated {runs} runs in {:.0} s", started.elapsed().as_secs_f64());
    if db.is_pg() {
        db.exec("VACUUM ANALYZE", &[]);
    } else {
        db.exec("ANALYZE", &[]);
        db.rows("PRAGMA wal_checkpoint(TRUNCATE)", &[]);
    }
    let bytes: i64 = if db.is_pg() {
        db.rows(
            "SELECT CAST(sum(pg_total_relation_size(c.oid)) AS BIGINT) FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'",
            &[],
        )[0][0]
            .parse()
            .unwrap()
    } else {
        std::fs::metadata(target).unwrap().len() as i64
    };
    let per_run = bytes as f64 / runs as f64 / 1_048_576.0;
    println!("space: {:.1} MiB in all, {per_run:.2} MiB per run", bytes as f64 / 1_048_576.0);
    if db.is_pg() {
        // Where the bytes are: each table and index (a table's TOAST with its table).
        println!("by relation (bytes per run):");
        for r in db.rows(
            "SELECT c.relname, CAST(CASE WHEN c.relkind = 'r' THEN pg_table_size(c.oid)
                                    ELSE pg_relation_size(c.oid) END AS BIGINT)
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i') ORDER BY 2 DESC",
            &[],
        ) {
            let b: i64 = r[1].parse().unwrap();
            println!("    {:<40} {:>10}", r[0], b / runs);
        }
    }

    // The history query of Store::history (the history engineer's), for one host.
    let probe = db.rows(
        &format!(
            "SELECT probe FROM {results} WHERE run_id = $1 AND status = 'ok' ORDER BY seq LIMIT 1"
        ),
        &[P::I(t)],
    )[0][0]
        .clone();
    let history = &format!(
        "SELECT r.id, r.uuid, r.label, r.started_at, r.host, r.machine_id, r.kernel,
                    r.version, r.git_rev, x.params, x.unit, x.better, x.n, x.median, x.ci_low, x.ci_high
             FROM {results} x JOIN runs r ON r.id = x.run_id
             WHERE x.probe = $1 AND x.status = 'ok' AND x.median IS NOT NULL
               AND r.suite <> 'published' AND (r.host = $2)
             ORDER BY r.started_at, r.id, x.seq"
    );
    let hp = || [P::T(probe.clone()), P::T("host-007".into())];
    let explain = if db.is_pg() { "EXPLAIN (ANALYZE, BUFFERS) " } else { "EXPLAIN QUERY PLAN " };
    println!("history of {probe} on host-007, its plan:");
    for line in db.rows(&format!("{explain}{history}"), &hp()) {
        println!("    {}", line.join(" | "));
    }
    let load = format!(
        "SELECT id, probe, params, unit, better, status, reason, notes, iters_per_sample,
                    overhead_ns_per_iter, n, median FROM {results} WHERE run_id = $1 ORDER BY seq"
    );
    println!("a run's results (show, compare), its plan:");
    for line in db.rows(&format!("{explain}{load}"), &[P::I(t)]) {
        println!("    {}", line.join(" | "));
    }
    let labels: Vec<String> =
        (1..=10.min(runs - 1)).map(|k| format!("fleet-{:05}", k * (runs - 1) / 10)).collect();
    let mut compare: Vec<&str> = vec!["--db", target, "compare"];
    compare.extend(labels.iter().map(String::as_str));
    let mut table = Vec::new();
    for _ in 0..3 {
        let runs_s = timed(bin, &["--db", target, "runs"]);
        let t0 = Instant::now();
        let points = db.rows(history, &hp()).len();
        let hist_s = t0.elapsed().as_secs_f64();
        let cmp_s = timed(bin, &compare);
        // A new run (a new UUID) pushed into the fleet: one transaction.
        let one = work.path().join("one.db");
        std::fs::copy(&own, &one).unwrap();
        let c = rusqlite::Connection::open(&one).unwrap();
        c.execute("UPDATE runs SET uuid = lower(hex(randomblob(16)))", []).unwrap();
        drop(c);
        let push_s = timed(bin, &["--db", one.to_str().unwrap(), "push", "latest", "--to", target]);
        table.push((runs_s, hist_s, points, cmp_s, push_s));
    }
    println!(
        "wall seconds (CPU seconds of the command), load {}",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    println!("| | `runs` | history (1 probe, 1 host) | `compare` of 10 | `push` of 1 |");
    println!("|---|---|---|---|---|");
    for (i, (r, h, n, c, p)) in table.iter().enumerate() {
        println!(
            "| try {} | {:.2} s ({:.2}) | {:.1} ms ({n} points) | {:.2} s ({:.2}) | {:.2} s ({:.2}) |",
            i + 1,
            r.0,
            r.1,
            h * 1e3,
            c.0,
            c.1,
            p.0,
            p.1
        );
    }
}
