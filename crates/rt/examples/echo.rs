//! A thread-per-connection one-byte echo server, three ways, against a
//! client process of OS threads doing round trips over loopback (issue
//! 29's measurement, outside the lab's harness): prints round trips per
//! second, the server's CPU time per round trip, and its kernel threads
//! (`/proc/self/task`) while the connections are open.
//!
//! ```text
//! cargo build --release -p schedlab-rt --example echo
//! target/release/examples/echo MODE CONNECTIONS [SECONDS] [PROCESSORS]
//! ```
//!
//! `MODE`: `rt-net` (user threads, `schedlab_rt::net`: a blocked read parks
//! on the poller), `rt-std` (user threads, plain `std::net`: a blocked read
//! is a kernel-thread hand-off), `os` (OS threads, `std::net`), `tokio` (a
//! task per connection on tokio's multi-thread runtime with `PROCESSORS`
//! workers, `tokio::net`: the reference the lab's probe compares). The server
//! runs on CPU 0 and the client on CPU 1 when the machine has two or more
//! (`sched_setaffinity`, inherited by every thread each makes), with
//! `PROCESSORS` (default 1) virtual processors for the `rt-*` modes. The
//! client is this program again (`--client ADDR CONNECTIONS SECONDS`).
//! `cargo run -p schedlab -- run --filter threads.net.echo` is the lab's
//! measurement.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn usage() -> ExitCode {
    eprintln!("usage: echo rt-net|rt-std|os|tokio CONNECTIONS [SECONDS] [PROCESSORS]");
    ExitCode::from(2)
}

/// Pins the calling thread (and every thread it makes afterwards) to `cpu`,
/// if the machine has more than one CPU.
fn pin(cpu: usize) {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU time the process has used (user + system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the zeroed struct.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn kernel_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--client") {
        return client(&args[1..]);
    }
    let (Some(mode), Some(Ok(conns))) = (args.first(), args.get(1).map(|c| c.parse::<usize>()))
    else {
        return usage();
    };
    let secs = args.get(2).map_or(Ok(3.0), |s| s.parse::<f64>());
    let procs = args.get(3).map_or(Ok(1), |s| s.parse::<usize>());
    let (Ok(secs), Ok(procs)) = (secs, procs) else { return usage() };
    if !["rt-net", "rt-std", "os", "tokio"].contains(&mode.as_str()) || conns == 0 || procs == 0 {
        return usage();
    }
    pin(0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let addr = listener.local_addr().expect("its address");
    let mut child = Command::new(std::env::current_exe().expect("this program"))
        .args(["--client", &addr.to_string(), &conns.to_string(), &secs.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the client");
    // Follows the client's report: "go" when its round trips start, the
    // count when they stop; samples the server's CPU time at both and its
    // kernel threads halfway.
    let report = child.stdout.take().expect("piped");
    let sampler = std::thread::spawn(move || {
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(report));
        let go = lines.next()?.ok()?;
        if go != "go" {
            return None;
        }
        let cpu0 = cpu_time();
        std::thread::sleep(Duration::from_secs_f64(secs / 2.0));
        let threads = kernel_threads();
        let trips: f64 = lines.next()?.ok()?.trim().parse().ok()?;
        Some((trips, cpu_time() - cpu0, threads))
    });
    if mode == "tokio" {
        tokio_server(listener, conns, procs);
        return finish(mode, conns, procs, secs, child, sampler);
    }
    let rt = match mode.as_str() {
        "os" => None,
        _ => Some(
            schedlab_rt::Runtime::builder()
                .processors(procs)
                .deadlock_detection(false)
                .build()
                .expect("a runtime"),
        ),
    };
    let rt_net = mode == "rt-net";
    let accept_loop = move || {
        let mut handles = Vec::new();
        for _ in 0..conns {
            let (s, _) = listener.accept().expect("accept");
            s.set_nodelay(true).expect("TCP_NODELAY");
            if rt_net {
                let s = schedlab_rt::net::TcpStream::from(s);
                handles.push(schedlab_rt::spawn(move || serve(s)));
            } else if schedlab_rt::try_current().is_some() {
                handles.push(schedlab_rt::spawn(move || serve(s)));
            } else {
                std::thread::Builder::new()
                    .stack_size(64 << 10)
                    .spawn(move || serve(s))
                    .expect("an OS thread");
            }
        }
        for h in handles {
            h.join().expect("a server thread");
        }
    };
    match &rt {
        Some(rt) => rt.block_on(accept_loop).expect("no deadlock"),
        None => accept_loop(),
    }
    let procs = if rt.is_some() { procs } else { 0 };
    finish(mode, conns, procs, secs, child, sampler)
}

/// Waits for the client and prints the line.
fn finish(
    mode: &str,
    conns: usize,
    procs: usize,
    secs: f64,
    mut child: std::process::Child,
    sampler: std::thread::JoinHandle<Option<(f64, Duration, usize)>>,
) -> ExitCode {
    let status = child.wait().expect("the client");
    let report = sampler.join().expect("the sampler");
    let (true, Some((trips, cpu, threads))) = (status.success(), report) else {
        eprintln!("echo: the client failed ({status})");
        return ExitCode::FAILURE;
    };
    println!(
        "{mode} connections={conns} processors={} round_trips_per_s={:.0} \
         server_cpu_ns_per_round_trip={:.0} server_kernel_threads={threads}",
        procs,
        trips / secs,
        cpu.as_nanos() as f64 / trips.max(1.0),
    );
    ExitCode::SUCCESS
}

/// The tokio server: a task per connection on a multi-thread runtime with
/// `workers` workers, reading one byte and writing it back (the probe's).
fn tokio_server(listener: std::net::TcpListener, conns: usize, workers: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_io()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async move {
        listener.set_nonblocking(true).expect("O_NONBLOCK");
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        let mut tasks = Vec::new();
        for _ in 0..conns {
            let (mut s, _) = listener.accept().await.expect("accept");
            s.set_nodelay(true).expect("TCP_NODELAY");
            tasks.push(tokio::spawn(async move {
                let mut b = [0u8; 1];
                loop {
                    match s.read(&mut b).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {
                            if s.write_all(&b).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await.expect("a connection task");
        }
    });
}

/// One connection's server thread: echo each byte until end of file.
fn serve<S>(mut s: S)
where
    S: Read + Write,
{
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if s.write_all(&b).is_err() {
                    return;
                }
            }
        }
    }
}

/// The client process: `CONNECTIONS` OS threads, each connected once, doing
/// round trips for `SECONDS` after all are connected; prints the total.
fn client(args: &[String]) -> ExitCode {
    let (Some(Ok(addr)), Some(Ok(conns)), Some(Ok(secs))) = (
        args.first().map(|a| a.parse::<SocketAddr>()),
        args.get(1).map(|c| c.parse::<usize>()),
        args.get(2).map(|s| s.parse::<f64>()),
    ) else {
        return usage();
    };
    pin(1);
    // Connected one after another, so the server's accept queue never
    // overflows (a burst of 2,000 SYNs is dropped and retried, or reset).
    let mut streams = Vec::with_capacity(conns);
    for _ in 0..conns {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => streams.push(s),
            Err(e) => {
                eprintln!("echo client: connecting to {addr}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(std::sync::Barrier::new(conns + 1));
    let total = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = streams
        .into_iter()
        .map(|mut s| {
            let (stop, start, total, failed) =
                (stop.clone(), start.clone(), total.clone(), failed.clone());
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let _ = s.set_nodelay(true);
                    start.wait();
                    let mut n = 0u64;
                    let mut b = [0u8; 1];
                    while !stop.load(Ordering::Relaxed) {
                        if let Err(e) = s.write_all(b"x").and_then(|()| s.read_exact(&mut b)) {
                            eprintln!("echo client: a round trip failed: {e}");
                            failed.store(true, Ordering::Relaxed);
                            break;
                        }
                        n += 1;
                    }
                    total.fetch_add(n, Ordering::Relaxed);
                })
                .expect("a client thread")
        })
        .collect();
    start.wait();
    println!("go");
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a client thread");
    }
    if failed.load(Ordering::Relaxed) {
        return ExitCode::FAILURE;
    }
    let scaled = total.load(Ordering::Relaxed) as f64 * secs / t0.elapsed().as_secs_f64();
    println!("{scaled:.0}");
    ExitCode::SUCCESS
}
