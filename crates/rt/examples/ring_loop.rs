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
//! `THREADS` defaults to 503. The processors are not pinned (the probe pins
//! them; run this under `taskset`). `cargo run -p schedlab -- run
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
    let rt = Runtime::builder().processors(procs).build().expect("a runtime");
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

fn usage() -> ! {
    eprintln!("usage: ring_loop PROCESSORS HOPS [THREADS]");
    std::process::exit(2);
}
