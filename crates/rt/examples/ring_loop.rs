//! A token passed round a ring of user threads, each blocked on a one-slot
//! channel from the one before (the Benchmarks Game thread-ring, as the
//! `threads.ring` probe runs it): prints the wall time per hop, for studying
//! the cost of a wake-up across processors outside the lab's harness.
//!
//! ```text
//! cargo build --release -p schedlab-rt --example ring_loop
//! ring_loop PROCESSORS HOPS [THREADS]
//! ```
//!
//! `THREADS` defaults to 503. With `RING_MAX_PROCESSORS=M` the runtime is
//! built for up to `M` processors while `PROCESSORS` run (M > 1 puts even a
//! single running processor in the mode where others may steal from it:
//! what a second processor costs the hand-off itself, without its searches). Processor `i`'s kernel thread is pinned to CPU
//! `i`, as the probe pins them (unpinned, the kernel tends to wake the idle
//! processor's thread on the busy one's CPU, and the two then share it). `cargo run -p schedlab -- run
//! --filter threads.ring` is the measurement.

use schedlab_rt::sync::channel;
use schedlab_rt::{spawn, Runtime};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parse = |i: usize, default: Option<u64>| {
        args.get(i).map(|a| a.parse::<u64>().ok()).unwrap_or(default).unwrap_or_else(|| usage())
    };
    if args.len() < 2 || args.len() > 3 {
        usage();
    }
    let procs = parse(0, None) as usize;
    let hops = parse(1, None);
    let threads = parse(2, Some(503)) as usize;
    if procs == 0 || threads < 2 {
        usage();
    }
    let mut builder = Runtime::builder().processors(procs);
    if let Some(max) = std::env::var_os("RING_MAX_PROCESSORS") {
        let max = max.to_str().and_then(|m| m.parse().ok()).unwrap_or_else(|| usage());
        builder = builder.max_processors(max);
    }
    let rt = builder.build().expect("a runtime");
    pin_processors(procs);
    let per_hop = rt
        .block_on(move || {
            let (txs, rxs): (Vec<_>, Vec<_>) = (0..threads).map(|_| channel::<u64>(1)).unzip();
            let (done_tx, done_rx) = channel::<()>(1);
            let mut members = Vec::new();
            for (i, rx) in rxs.into_iter().enumerate() {
                let next = txs[(i + 1) % threads].clone();
                let done = done_tx.clone();
                members.push(spawn(move || {
                    while let Ok(t) = rx.recv() {
                        if t == u64::MAX {
                            let _ = next.send(u64::MAX);
                            return;
                        }
                        if t == 0 {
                            let _ = done.send(());
                        } else if next.send(t - 1).is_err() {
                            return;
                        }
                    }
                }));
            }
            let start = Instant::now();
            txs[0].send(hops).unwrap();
            done_rx.recv().unwrap();
            let elapsed = start.elapsed();
            txs[0].send(u64::MAX).unwrap();
            for m in members {
                m.join().unwrap();
            }
            elapsed.as_nanos() as f64 / hops as f64
        })
        .expect("no deadlock");
    println!("{per_hop:.2} ns per hop");
}

/// Pins each processor's kernel thread (named `schedlab-vp-N`) to CPU `N`.
fn pin_processors(procs: usize) {
    let deadline = Instant::now() + std::time::Duration::from_secs(2);
    let mut pinned = vec![false; procs];
    while pinned.iter().any(|p| !p) && Instant::now() < deadline {
        for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let Some(i) =
                comm.trim().strip_prefix("schedlab-vp-").and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let tid: libc::pid_t = task.file_name().to_string_lossy().parse().unwrap_or(0);
            if i < procs && !pinned[i] {
                // SAFETY: a zeroed cpu_set_t is valid and CPU_SET writes within it;
                // sched_setaffinity only reads it.
                let ok = unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(i, &mut set);
                    libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
                };
                pinned[i] = ok;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if pinned.iter().any(|p| !p) {
        eprintln!("ring_loop: could not pin every processor ({pinned:?}); the figure may mix CPUs");
    }
}

fn usage() -> ! {
    eprintln!("usage: [RING_MAX_PROCESSORS=M] ring_loop PROCESSORS HOPS [THREADS]");
    std::process::exit(2);
}
