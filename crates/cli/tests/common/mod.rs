//! What the CLI integration tests share: running the real binary against a database.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The `schedlab` binary, with no database (nor fleet database, nor PostgreSQL password)
/// chosen by the environment.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    for var in ["SCHEDLAB_DB", "SCHEDLAB_FLEET", "PGPASSWORD", "PGPASSFILE"] {
        c.env_remove(var);
    }
    c
}

/// Runs `schedlab --db DB ARGS...` to completion.
pub fn run(db: &Path, args: &[&str]) -> Output {
    bin().arg("--db").arg(db).args(args).output().expect("the binary runs")
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts that the command succeeded (exit 0), showing both streams if not; returns its
/// standard output as text.
pub fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// `schedlab exec` with its library cache under cargo's temporary directory for tests (not
/// the home of whoever runs the tests).
pub fn exec() -> Command {
    let mut c = bin();
    c.arg("exec").env("XDG_CACHE_HOME", Path::new(env!("CARGO_TARGET_TMPDIR")).join("exec-cache"));
    c.env_remove("SCHEDLAB_PTHREAD_LIB").env_remove("LD_PRELOAD");
    c
}

/// Runs `cmd` to completion, killing it after `limit` (a hang guard, not a timing check):
/// a hung program fails the test with what it printed instead of hanging the suite.
pub fn output_within(cmd: &mut Command, limit: std::time::Duration) -> Output {
    bounded(cmd, limit).unwrap_or_else(|hung| panic!("{hung}"))
}

/// Runs `cmd` to completion, or kills its process group after `limit` and says so (with
/// what it printed) as the error.
pub fn bounded(cmd: &mut Command, limit: std::time::Duration) -> Result<Output, String> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let mut child = cmd
        // Its own process group, so that the guard kills the program's children too
        // (they hold the pipes read below).
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            // Where every thread of the hung processes was, before they go.
            let where_ = post_mortem(child.id() as i32);
            // SAFETY: kill(2) of the process group this function made.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let status = child.wait().expect("wait");
            let (o, e) = (o.join().unwrap(), e.join().unwrap());
            return Err(format!(
                "{cmd:?} still ran after {limit:?}: killed ({status})\nstdout:\n{}\nstderr:\n{}\n\
                 where its threads were:\n{where_}",
                text(&o),
                text(&e)
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Ok(Output { status, stdout: o.join().unwrap(), stderr: e.join().unwrap() })
}

/// What the processes of process group `pgid` were doing, for a hang guard's report: each
/// thread's name, state, wait channel and kernel stack (`/proc`; the stack needs root), and
/// each process's user stacks from `gdb -batch` when gdb is installed (bounded to 60 s per
/// process). Best effort: whatever cannot be read is left out.
pub fn post_mortem(pgid: i32) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return out };
    let mut pids: Vec<i32> = procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid: &i32| {
            // Field 5 of /proc/PID/stat, after the parenthesised name, is the group.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_some_and(|st| {
                st.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<i32>().ok())
                    == Some(pgid)
            })
        })
        .collect();
    pids.sort();
    let read = |p: String| std::fs::read_to_string(p).unwrap_or_default();
    for pid in pids {
        let cmd = read(format!("/proc/{pid}/cmdline")).replace('\0', " ");
        let _ = writeln!(out, "process {pid}: {}", cmd.trim());
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        let mut tids: Vec<String> =
            tasks.filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_string())).collect();
        tids.sort();
        for tid in tids {
            let t = format!("/proc/{pid}/task/{tid}");
            let stat = read(format!("{t}/stat"));
            let state = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next());
            let _ = writeln!(
                out,
                "  thread {tid} {} state {} wchan {}",
                read(format!("{t}/comm")).trim(),
                state.unwrap_or("?"),
                read(format!("{t}/wchan")).trim()
            );
            for line in read(format!("{t}/stack")).lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
        let gdb = Command::new("timeout")
            .args(["60", "gdb", "-p", &pid.to_string(), "-batch", "-ex", "thread apply all bt 24"])
            .stdin(std::process::Stdio::null())
            .output();
        if let Ok(g) = gdb {
            for line in
                text(&g.stdout).lines().filter(|l| l.starts_with('#') || l.starts_with("Thread"))
            {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    out
}

/// `schedlab --db DB run --suite SUITE --filter FILTER --samples 400 --label long ARGS…`,
/// standard output discarded and standard error piped: a run long enough to be caught in
/// the middle (a signal, a lock held, a full disk). The caller adds what else it needs and
/// spawns it.
#[allow(dead_code)]
pub fn long_run(db: &Path, suite: &str, filter: &str, args: &[&str]) -> Command {
    let mut c = bin();
    c.arg("--db")
        .arg(db)
        .args(["run", "--suite", suite, "--filter", filter, "--samples", "400", "--label", "long"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// Stored runs made to order, for the commands that read many (`history`, `compare`'s
/// gate, the exports): the machine, the day, the kernel, a doctor finding and each
/// result's samples are the test's to choose.
pub mod runs {
    use schedlab_measure::doctor::{Finding, Reading};
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Measurement, Params, RunMeta, RunStatus, Sample, Unit};
    use schedlab_store::{Location, Store};

    /// One run to store.
    pub struct Made<'a> {
        /// Host name (the machine id follows from it).
        pub host: &'a str,
        /// Label.
        pub label: &'a str,
        /// RFC 3339 start.
        pub started_at: String,
        /// Kernel release.
        pub kernel: &'a str,
        /// The doctor's timer slack finding.
        pub timer_slack: &'a str,
        /// Results: probe, params key, unit, samples.
        pub results: Vec<(&'a str, &'a str, Unit, Vec<f64>)>,
    }

    /// A machine called `host` (its CPU named after it, so it is not this one).
    pub fn machine(host: &str) -> Machine {
        let mut m = Machine::fingerprint();
        m.host = host.to_string();
        m.cpu_model = format!("{host} CPU");
        m
    }

    /// `n` samples around `level`, within ±`spread` of it (a fraction), in a fixed pattern.
    pub fn around(level: f64, spread: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| level * (1.0 + spread * (((i * 7) % n) as f64 / (n - 1) as f64 * 2.0 - 1.0)))
            .collect()
    }

    /// Stores `made` (complete) in the database at `at`; returns its id.
    pub fn store(at: &Location, made: &Made) -> i64 {
        let mut store = Store::open_at(at).unwrap();
        let mut m = machine(made.host);
        m.kernel = made.kernel.to_string();
        m.doctor = vec![Finding {
            key: "timer_slack".into(),
            name: "timer slack".into(),
            reading: Reading::Known(made.timer_slack.into()),
            source: "prctl(PR_GET_TIMERSLACK)".into(),
            changes: String::new(),
        }];
        let mut meta = RunMeta::starting("quick", m, ("0.1.0", "test"));
        meta.label = Some(made.label.to_string());
        meta.started_at = made.started_at.clone();
        let id = store.begin_run(&meta).unwrap();
        for (probe, params, unit, values) in &made.results {
            let samples = values
                .iter()
                .map(|&value| Sample {
                    iters: 100,
                    elapsed_ns: 1_000_000,
                    value,
                    other_cpu_ns: None,
                    migrated: false,
                })
                .collect();
            let m = Measurement::of_samples(probe, Params::from_key(params), *unit, samples, 0.1);
            store.save_result(id, &m).unwrap();
        }
        store.finish_run(id, RunStatus::Complete).unwrap();
        id
    }
}
