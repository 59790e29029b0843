//! `threads.net.echo` end to end: the client is this test binary re-executed (its own
//! `main` answers the client's hidden argument, as the `schedlab` binary's does), so the
//! probe runs here as under `schedlab run`. Each check runs a small variant and looks at
//! what it returned and what it left behind, never at how fast it was:
//! - every backend's server returns values and its notes, and teardown closes every
//!   descriptor and ends every thread it started;
//! - a server that echoes the wrong byte fails the probe naming the connection;
//! - a server outside the lab (`server=ADDR`) is measured by the same client, with its
//!   memory and threads read from `server_pid`.
//!
//! `harness = false` (Cargo.toml): run with `cargo test -p schedlab-probes --test echo`,
//! optionally followed by a substring of the check names.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use schedlab_measure::clock::Calibration;
use schedlab_measure::model::Params;
use schedlab_measure::sampler::{self, Settings};
use schedlab_measure::ProbeError;
use schedlab_probes::threads::echo::{client_main, CLIENT_ARG};
use schedlab_probes::{catalog, Context, Instance, Probe, Suite};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == CLIENT_ARG) {
        return ExitCode::from(u8::try_from(client_main(&args[1..])).unwrap_or(1));
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let checks: [(&str, fn()); 3] = [
        (
            "every_backend_echoes_returns_values_and_leaves_nothing_open",
            every_backend_echoes_returns_values_and_leaves_nothing_open,
        ),
        (
            "a_server_echoing_the_wrong_byte_fails_naming_the_connection",
            a_server_echoing_the_wrong_byte_fails_naming_the_connection,
        ),
        (
            "a_server_outside_the_lab_is_measured_by_the_same_client",
            a_server_outside_the_lab_is_measured_by_the_same_client,
        ),
    ];
    let mut failed = 0;
    for (name, check) in checks {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let started = Instant::now();
        match std::panic::catch_unwind(check) {
            Ok(()) => println!("test {name} ... ok ({:.2}s)", started.elapsed().as_secs_f64()),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn probe() -> Box<dyn Probe> {
    catalog().into_iter().find(|p| p.info().id == "threads.net.echo").expect("in the catalog")
}

fn context() -> Context {
    let exe = std::env::current_exe().expect("this test's own program");
    Context { suite: Suite::Smoke, exec_helper: Some((exe, Vec::new())), ..Context::for_tests() }
}

/// Smoke samples of `inst`: each a finite, positive time.
fn sample(inst: &mut Box<dyn Instance>, what: &str) {
    let metric = inst.metric();
    let c = sampler::collect_in(
        &mut **inst,
        &Settings::smoke(),
        &Calibration::zero(),
        metric,
        probe().info().unit,
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(!c.samples.is_empty(), "{what}: no samples");
    for s in &c.samples {
        assert!(s.value.is_finite() && s.value > 0.0, "{what}: value {}", s.value);
    }
}

/// Entries of `/proc/self/task`, or the sockets and pipes of `/proc/self/fd`: what a
/// server or client could leave open. (schedlab_rt::net's poller keeps an epoll instance
/// and an eventfd for the life of the process, made on first use.)
fn count(dir: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            !dir.ends_with("/fd")
                || std::fs::read_link(e.path()).is_ok_and(|t| {
                    let t = t.to_string_lossy();
                    t.starts_with("socket:") || t.starts_with("pipe:")
                })
        })
        .count()
}

/// Waits (a little) for `dir`'s entry count to come back to `want`; the count then.
fn settles_to(dir: &str, want: usize) -> usize {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let n = count(dir);
        if n <= want || Instant::now() > until {
            return n;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn every_backend_echoes_returns_values_and_leaves_nothing_open() {
    let p = probe();
    let ctx = context();
    let variants = [
        Params::new().with("connections", 8).with("backend", "os"),
        Params::new().with("connections", 8).with("backend", "rt").with("io", "std"),
        Params::new().with("connections", 8).with("backend", "rt").with("io", "net"),
        Params::new().with("connections", 8).with("backend", "tokio"),
    ];
    for params in variants {
        let (fds, threads) = (count("/proc/self/fd"), count("/proc/self/task"));
        let mut inst = match p.setup(&params, &ctx) {
            Ok(i) => i,
            Err(ProbeError::Skip(why)) => {
                println!("[{params}] skipped: {why}");
                continue;
            }
            Err(e) => panic!("[{params}] setup: {e}"),
        };
        assert!(count("/proc/self/fd") >= fds + 8, "[{params}] the connections are open here");
        sample(&mut inst, &params.to_string());
        let notes = inst.notes();
        for key in ["cpus", "runtime", "rss_bytes_per_idle_connection", "server_kernel_threads"] {
            assert!(notes.get(key).is_some(), "[{params}] notes lack {key}: {notes}");
        }
        let held: usize = notes.get("server_kernel_threads").unwrap().parse().unwrap();
        if params.get("backend") == Some("os") {
            assert!(
                held > 8,
                "[{params}] a kernel thread per connection, and the acceptor: {held}"
            );
        }
        drop(inst);
        assert_eq!(settles_to("/proc/self/fd", fds), fds, "[{params}] descriptors left open");
        assert_eq!(settles_to("/proc/self/task", threads), threads, "[{params}] threads left");
    }
}

/// A server on 127.0.0.1 with a thread per connection (until `n` have come) that answers
/// each byte with `answer(byte)`; its address.
fn serve(n: usize, answer: fn(u8) -> u8) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for _ in 0..n {
            let Ok((mut s, _)) = listener.accept() else { return };
            std::thread::spawn(move || {
                let mut b = [0u8; 1];
                while let Ok(1) = s.read(&mut b) {
                    if s.write_all(&[answer(b[0])]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn a_server_echoing_the_wrong_byte_fails_naming_the_connection() {
    let addr = serve(3, |b| b.wrapping_add(1));
    let params = Params::new().with("connections", 3).with("server", addr);
    match probe().setup(&params, &context()) {
        Err(ProbeError::Failed(m)) => {
            assert!(m.contains("connection 0: sent byte 0, the server echoed 1"), "{m}")
        }
        Err(e) => panic!("expected a failure naming the byte, got {e}"),
        Ok(_) => panic!("a wrong echo was accepted"),
    }
}

fn a_server_outside_the_lab_is_measured_by_the_same_client() {
    let addr = serve(4, |b| b);
    let params = Params::new()
        .with("connections", 4)
        .with("server", addr)
        .with("server_pid", std::process::id());
    let mut inst = probe().setup(&params, &context()).unwrap_or_else(|e| panic!("{e}"));
    sample(&mut inst, "external");
    let notes = inst.notes();
    assert_eq!(notes.get("runtime"), Some(format!("external server at {addr}").as_str()));
    let threads: usize =
        notes.get("server_kernel_threads").expect("read from server_pid").parse().unwrap();
    assert!(
        threads >= 5,
        "this process: the main thread and 4 connection threads at least: {threads}"
    );
}
