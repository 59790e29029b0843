//! `threads.net.echo`: the simplest server people write — a thread per connection, each
//! reading a byte and writing it back — under kernel threads (`backend=os`), schedlab-rt
//! user threads (`backend=rt`, with plain `std::net`, `io=std`, or with
//! `schedlab_rt::net`, `io=net`, whose blocking calls park the user thread on the runtime's
//! poller) and tokio tasks (`backend=tokio`), against a client in a process of its own
//! (issue 29).
//!
//! - A **round trip** is one byte written by the client on a connection and the same byte
//!   read back from it. The value is the client's wall time per round trip over all
//!   connections (one iteration is a wave: a round trip on every connection, pipelined per
//!   client thread; `client.rs`).
//! - The **server** runs in this process (`server.rs`), started fresh in setup and stopped
//!   in teardown with every descriptor closed; every kernel thread it starts is pinned to
//!   the first usable CPU. The **client** is our own binary re-executed (the context's
//!   exec helper program, with [`CLIENT_ARG`]): four OS threads (fewer with fewer
//!   connections) pinned to the second usable CPU, or to the same one on a one-CPU
//!   machine (noted).
//! - Notes: resident memory the server added per connection with all connections open
//!   and idle (`rss_bytes_per_idle_connection`, from `/proc/self/status` once the client
//!   has done one round trip on each and the server settled) and the kernel threads the
//!   server holds then (`server_kernel_threads`, from `/proc/self/task`).
//! - `server=HOST:PORT` points the client at a server outside the lab instead (Go's
//!   goroutine-per-connection server in peers/go/echo, say); `server_pid=PID` adds that
//!   process's memory and thread notes. Every other parameter then means the same.
//!
//! `RLIMIT_NOFILE` is raised as far as needed (`limits.rs`); a limit that cannot be raised
//! is a skip naming the limit and what to do.

mod client;
mod limits;
mod server;

pub use client::{client_main, CLIENT_ARG};

use std::net::SocketAddr;
use std::time::Duration;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::sys::{self, PinGuard};
use schedlab_measure::{ProbeError, Timing};

use super::backend::{Backend, Bench};
use super::memory::{kernel_threads, status_kib};
use crate::{Context, Info, Instance, Probe, Suite};
use client::ClientProcess;
use server::{Kind, Server};

struct EchoProbe;

/// The echo-server probe.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(EchoProbe)]
}

/// Client threads (fewer when there are fewer connections).
const CLIENT_THREADS: usize = 4;

/// Most connections a variant may ask for.
const MAX_CONNECTIONS: usize = 100_000;

/// How long the server is left alone, all connections idle, before its memory and
/// threads are read: far above schedlab-rt's block threshold (50 µs), so every user thread
/// blocked in `read` has been handed its own kernel thread.
const SETTLE: Duration = Duration::from_millis(100);

impl Probe for EchoProbe {
    fn info(&self) -> Info {
        Info {
            id: "threads.net.echo",
            doc: "A one-byte echo server, a thread (os, rt) or task (tokio) per connection, on one CPU, and a client process of 4 OS threads pinned to another that keeps every connection busy: each client thread writes a byte to each of its connections, then reads each echo back and checks it; the client's wall time per round trip (a byte there and back). Notes: resident memory the server added per connection with all connections open and idle (VmRSS) and its kernel threads then (/proc/self/task). server=HOST:PORT measures a server outside the lab instead (peers/go/echo), server_pid=PID adds its memory and threads",
            unit: Unit::Nanos,
            mirrors: "- (issue 29's thread-per-connection table, beside Go's goroutine-per-connection server in peers/go/echo); os = std::thread + std::net, rt = schedlab-rt spawn + plain std::net (io=std) or schedlab_rt::net (io=net, the same code but for the import; io=net-live adds RuntimeBuilder::idle_stack_reclaim_live, every page of an idle thread's stack given back), tokio = tokio::spawn + tokio::net on a one-worker multi-thread runtime; TCP_NODELAY at both ends; each server started fresh per variant",
            requires: "the schedlab binary (the client re-executes it); 2 CPUs to pin the client apart (else both share one, noted); RLIMIT_NOFILE room for the connections (the soft limit is raised; a hard limit too low is a skip)",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let counts: &[usize] = match suite {
            Suite::Smoke => &[4],
            // schedlab-rt's plain-std server falls far behind from about 100 connections
            // (docs/PERFORMANCE.md), so the everyday suite stays at 16.
            Suite::Quick => &[16],
            Suite::Full => &[16, 256, 2000],
        };
        let mut v = Vec::new();
        for &c in counts {
            for b in Backend::ALL {
                let p = Params::new().with("connections", c).with("backend", b.key());
                if b == Backend::Rt {
                    v.push(p.clone().with("io", "std"));
                    v.push(p.with("io", "net"));
                } else {
                    v.push(p);
                }
            }
        }
        v
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // A wave of 2,000 round trips takes milliseconds and each sample costs a request
        // to the client: longer samples, and a warm-up that lets every connection's thread
        // settle into its loop.
        let mut s = default.clone();
        if suite != Suite::Smoke {
            s.target = s.target.max(Duration::from_millis(50));
            s.warmup = s.warmup.max(Duration::from_millis(200));
        }
        s
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let connections: usize = params.parse_or("connections", 256).map_err(ProbeError::Failed)?;
        if !(1..=MAX_CONNECTIONS).contains(&connections) {
            return Err(ProbeError::Failed(format!(
                "connections={connections}: use 1 to {MAX_CONNECTIONS}"
            )));
        }
        let external = match params.get("server") {
            None => None,
            Some(a) => Some(a.parse::<SocketAddr>().map_err(|e| {
                ProbeError::Failed(format!(
                    "server={a:?}: {e}; give HOST:PORT, e.g. 127.0.0.1:7000"
                ))
            })?),
        };
        let server_pid: Option<u32> = match params.get("server_pid") {
            None => None,
            Some(p) => Some(p.parse().map_err(|e| {
                ProbeError::Failed(format!("server_pid={p:?}: {e}; give the server's process id"))
            })?),
        };
        if server_pid.is_some() && external.is_none() {
            return Err(ProbeError::Failed("server_pid= goes with server=HOST:PORT".into()));
        }
        let kind = match external {
            Some(_) => None,
            None => Some(kind_of(params)?),
        };
        let Some((program, _)) = &ctx.exec_helper else {
            return Err(ProbeError::Skip(
                "needs the schedlab binary, whose client runs in a process of its own".into(),
            ));
        };
        let (server_cpu, client_cpu) = match sys::allowed_cpus()[..] {
            [a, b, ..] => (a, b),
            [a] => (a, a),
            [] => return Err(ProbeError::Failed("no usable CPU".into())),
        };
        let mut notes = Params::new().with("cpus", format!("{server_cpu},{client_cpu}")).with(
            "client",
            format!(
                "a process of {} OS threads pinned to CPU {client_cpu}",
                CLIENT_THREADS.min(connections)
            ),
        );
        if server_cpu == client_cpu {
            notes.set("placement", "one CPU: server and client share it");
        }
        // Descriptors: the connections' server ends here (and the duplicates teardown
        // shuts them down through), the client's in the client.
        let open_now = limits::open_fds("self").unwrap_or(0) as u64;
        limits::raise_nofile(open_now + 2 * connections as u64 + limits::SPARE_FDS)?;
        // The measuring thread mostly waits for the client's answers: on the client's CPU,
        // so that a server that falls behind cannot starve the hang guard.
        let pin = PinGuard::pin(client_cpu)?;
        let threads_before = kernel_threads("self");
        let (server, addr, pid) = match (kind, external) {
            (Some(kind), _) => {
                notes.set("runtime", kind.runtime());
                let server = Server::start(kind, connections, Some(server_cpu))?;
                let addr = server.addr();
                (Some(server), addr, "self".to_string())
            }
            (None, Some(addr)) => {
                notes.set("runtime", format!("external server at {addr}"));
                (None, addr, server_pid.map_or(String::new(), |p| p.to_string()))
            }
            (None, None) => unreachable!("a kind unless external"),
        };
        let listening = Held::read(&pid);
        let mut server = server;
        // The server's own failure (it could not accept, say) ends the wait for the client
        // and names the cause better than the client would.
        let mut client = ClientProcess::start(
            program,
            addr,
            connections,
            CLIENT_THREADS,
            Some(client_cpu),
            || server.as_mut().map_or(Ok(()), Server::health),
        )?;
        std::thread::sleep(SETTLE);
        let idle = Held::read(&pid);
        if let (Some(before), Some(idle)) = (listening, idle) {
            let added = idle.rss_kib.saturating_sub(before.rss_kib);
            notes.set("rss_idle_added_kib", added);
            notes.set(
                "rss_bytes_per_idle_connection",
                format!("{:.0}", added as f64 * 1024.0 / connections as f64),
            );
            // In this process, the threads the server started; outside, all of its own.
            let threads = match (&server, threads_before) {
                (Some(_), Some(b)) => idle.threads.saturating_sub(b),
                _ => idle.threads,
            };
            notes.set("server_kernel_threads", threads);
        }
        let bench = Bench::new(
            Metric::TimePerOp { ops_per_iter: connections as f64, subtract_loop: false },
            notes,
        )
        .body(move |waves| Ok(Timing::from_elapsed(client.run(waves)?)))
        .keep(server)
        .keep(pin);
        Ok(bench.boxed())
    }
}

/// The server for `backend` and `io`.
fn kind_of(params: &Params) -> Result<Kind, ProbeError> {
    let backend = Backend::from_params(params)?;
    match (backend, params.get("io")) {
        (Backend::Os, None) => Ok(Kind::Os),
        (Backend::Tokio, None) => Ok(Kind::Tokio),
        (Backend::Rt, None | Some("std")) => Ok(Kind::RtStd),
        (Backend::Rt, Some("net")) => Ok(Kind::RtNet),
        (Backend::Rt, Some("net-live")) => Ok(Kind::RtNetLive),
        (Backend::Rt, Some(other)) => Err(ProbeError::Failed(format!(
            "io={other:?}: backend=rt has io=std, io=net or io=net-live"
        ))),
        (b, Some(io)) => Err(ProbeError::Failed(format!(
            "io={io:?}: only backend=rt has an io parameter, not backend={}",
            b.key()
        ))),
    }
}

/// What a server process holds: resident memory and kernel threads.
#[derive(Debug, Clone, Copy)]
struct Held {
    rss_kib: u64,
    threads: usize,
}

impl Held {
    /// For process `pid` (`self`, a number, or empty: unknown).
    fn read(pid: &str) -> Option<Held> {
        if pid.is_empty() {
            return None;
        }
        Some(Held { rss_kib: status_kib(pid, "VmRSS:")?, threads: kernel_threads(pid)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_suite_offers_os_tokio_and_rt_on_std_io_and_on_its_own() {
        for suite in [Suite::Smoke, Suite::Quick, Suite::Full] {
            let v = EchoProbe.variants(suite);
            for p in &v {
                let io = p.get("io");
                assert_eq!(io.is_some(), p.get("backend") == Some("rt"), "{p}");
                assert!(kind_of(p).is_ok(), "{p}");
            }
        }
        let full: Vec<String> = EchoProbe.variants(Suite::Full).iter().map(|p| p.key()).collect();
        for n in [16, 256, 2000] {
            for io in ["std", "net"] {
                let key = format!("connections={n},backend=rt,io={io}");
                assert!(full.contains(&key), "{key} not in {full:?}");
            }
        }
    }

    #[test]
    fn bad_parameters_are_refused_naming_them() {
        let ctx = Context::for_tests();
        let fail = |p: Params| match EchoProbe.setup(&p, &ctx) {
            Err(ProbeError::Failed(m)) => m,
            Err(e) => panic!("{p}: {e}"),
            Ok(_) => panic!("{p} accepted"),
        };
        assert!(fail(Params::new().with("connections", 0)).contains("connections=0"));
        assert!(fail(Params::new().with("server", "localhost")).contains("server=\"localhost\""));
        assert!(fail(Params::new().with("server_pid", 1)).contains("goes with server="));
        let m = fail(Params::new().with("backend", "os").with("io", "std"));
        assert!(m.contains("only backend=rt"), "{m}");
        let m = fail(Params::new().with("backend", "rt").with("io", "uring"));
        assert!(m.contains("io=\"uring\""), "{m}");
    }

    #[test]
    fn without_the_schedlab_binary_the_probe_skips_saying_why() {
        let p = Params::new().with("connections", 2).with("backend", "os");
        let Err(ProbeError::Skip(why)) = EchoProbe.setup(&p, &Context::for_tests()) else {
            panic!("ran without a client program")
        };
        assert!(why.contains("process of its own"), "{why}");
    }
}
