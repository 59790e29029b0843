//! Scale check of schedlab-rt (ignored by default; it takes seconds and prints what it
//! measured): a million threads spawned and joined one after another must not grow memory,
//! and 100,000 threads alive at once must all run and be joined, and give the memory of
//! their stacks back once they ended. `SCALE_PROCS=1` runs it on one processor (default 2).
//!
//! ```text
//! cargo test --release -p schedlab-rt --test scale -- --ignored --nocapture
//! ```
//!
//! The one-at-a-time operations are criterion benchmarks: `cargo bench -p schedlab-rt`.

use schedlab_rt::{spawn, yield_now, Runtime};
use std::hint::black_box;
use std::time::Instant;

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

#[test]
#[ignore = "scale check: run with --ignored --nocapture in release mode"]
fn scale_a_million_spawns_and_100k_alive() {
    let rt = Runtime::builder()
        .processors(std::env::var("SCALE_PROCS").map_or(2, |v| v.parse().unwrap()))
        .stack_size(16 * 1024)
        .build()
        .unwrap();
    rt.block_on(|| {
        // 1,000,000 created and joined one after another: memory must not grow.
        for _ in 0..10_000 {
            spawn(|| ()).join().unwrap();
        }
        let before = rss_kib();
        let t = Instant::now();
        for _ in 0..1_000_000 {
            spawn(|| black_box(())).join().unwrap();
        }
        let after = rss_kib();
        println!(
            "1M spawn+join: {:.0} ms, RSS {before} KiB -> {after} KiB",
            t.elapsed().as_secs_f64() * 1e3
        );
        // Bounded by design: the pools and the depot keep up to 3,072 idle stacks with the
        // pages their threads touched (one or two each). A leak of 34 bytes per thread
        // would pass 32 MiB.
        assert!(after < before + 32 * 1024, "memory grew by {} KiB", after - before);

        // 100,000 alive at once, each parked on a barrier-like gate.
        let n = 100_000;
        let gate = std::sync::Arc::new(schedlab_rt::sync::Semaphore::new(0));
        let t = Instant::now();
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let gate = gate.clone();
                spawn(move || {
                    gate.acquire();
                    i
                })
            })
            .collect();
        for _ in 0..n {
            yield_now();
        }
        println!(
            "100k alive: spawned in {:.0} ms, RSS {} KiB",
            t.elapsed().as_secs_f64() * 1e3,
            rss_kib()
        );
        for _ in 0..n {
            gate.release();
        }
        let sum: u64 = hs.into_iter().map(|h| h.join().unwrap() as u64).sum();
        assert_eq!(sum, (0..n as u64).sum::<u64>());
        println!("100k alive: all joined after {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
        let peak = rss_kib();
        // The monitor gives the idle stacks' memory back in the background, down to
        // the depot's bound (1024 stacks) plus the processors' pools.
        schedlab_rt::sleep(std::time::Duration::from_millis(200));
        println!("after the 100k ended: RSS {peak} KiB, 200 ms later {} KiB", rss_kib());
    })
    .unwrap();
}
