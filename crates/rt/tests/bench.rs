//! Rough speed figures for the lead's note (ignored by default; the lab's
//! `threads` probes are the real measurement):
//!
//! ```text
//! CARGO_TARGET_DIR=target-rt cargo test --release -p schedlab-rt --test bench -- --ignored --nocapture
//! ```
//!
//! `SCHEDLAB_RT_BENCH=yield` (any part of a name) runs only matching figures;
//! `SCHEDLAB_RT_BENCH_P=1` only the runs with that many processors.
//! `SCHEDLAB_RT_BENCH_CLOCK=thread` times with the CPU time of the timing
//! kernel thread instead of the wall clock: with one processor that is all
//! the work, and time other processes take from this CPU is not counted
//! (for A/B comparisons on a busy machine).
//! Each figure is the median of 7 samples; setup (building the runtime,
//! warming the stack pool) is outside the timed part.

use schedlab_rt::sync::{channel, Mutex};
use schedlab_rt::{spawn, yield_now, Runtime};
use std::hint::black_box;
use std::time::Duration;

/// A start time, on the clock chosen by `SCHEDLAB_RT_BENCH_CLOCK`.
#[derive(Clone, Copy)]
struct Instant(std::time::Instant, Option<Duration>);

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes the current thread's CPU time into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Instant {
    fn now() -> Instant {
        let cpu = std::env::var("SCHEDLAB_RT_BENCH_CLOCK").is_ok_and(|c| c == "thread");
        Instant(std::time::Instant::now(), cpu.then(thread_cpu_time))
    }
    fn elapsed(&self) -> Duration {
        match self.1 {
            Some(start) => thread_cpu_time() - start,
            None => self.0.elapsed(),
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Runs `body(n)` (which returns the elapsed time for `ops` operations) 7 times.
fn report(name: &str, rt: &Runtime, ops: u64, body: fn(u64) -> Duration) {
    // SCHEDLAB_RT_BENCH=word runs only the figures whose name contains it
    // (handy under `perf record`).
    if std::env::var("SCHEDLAB_RT_BENCH").is_ok_and(|f| !name.contains(f.as_str())) {
        return;
    }
    let samples: Vec<f64> = (0..7)
        .map(|_| {
            let d = rt.block_on(move || body(ops)).unwrap();
            d.as_nanos() as f64 / ops as f64
        })
        .collect();
    println!("{name:<44} {:>8.1} ns/op", median(samples));
}

fn yield_pair(n: u64) -> Duration {
    // Two threads (this one and a partner) yield to each other: each yield is
    // one switch through the scheduler. `n` switches in all.
    let partner = spawn(move || {
        for _ in 0..n / 2 {
            yield_now();
        }
    });
    yield_now(); // let the partner start
    let t = Instant::now();
    for _ in 0..n / 2 {
        yield_now();
    }
    let d = t.elapsed();
    partner.join().unwrap();
    d
}

/// The loop both sides of [`yield_same_site`] run.
#[inline(never)]
fn yield_loop(n: u64) {
    for _ in 0..n {
        yield_now();
    }
}

fn yield_same_site(n: u64) -> Duration {
    // As `yield_pair`, but both threads yield from the same instruction, so
    // the return after each switch is predicted (the floor under `yield_pair`,
    // whose two threads return to different places).
    let partner = spawn(move || yield_loop(n / 2));
    yield_now();
    let t = Instant::now();
    yield_loop(n / 2);
    let d = t.elapsed();
    partner.join().unwrap();
    d
}

fn spawn_join_one(n: u64) -> Duration {
    for _ in 0..1000 {
        spawn(|| ()).join().unwrap(); // warm the stack pool
    }
    let t = Instant::now();
    for _ in 0..n {
        spawn(|| black_box(())).join().unwrap();
    }
    t.elapsed()
}

fn spawn_join_batch(n: u64) -> Duration {
    let batch = 1000;
    let warm: Vec<_> = (0..batch).map(|_| spawn(|| ())).collect();
    warm.into_iter().for_each(|h| h.join().unwrap());
    let mut hs = Vec::with_capacity(batch);
    let t = Instant::now();
    for _ in 0..n / batch as u64 {
        for _ in 0..batch {
            hs.push(spawn(|| black_box(())));
        }
        for h in hs.drain(..) {
            h.join().unwrap();
        }
    }
    t.elapsed()
}

fn channel_pingpong(n: u64) -> Duration {
    // `n` switches: n/2 round trips, two switches each.
    let (to_echo, from_main) = channel::<u64>(1);
    let (to_main, from_echo) = channel::<u64>(1);
    let echo = spawn(move || {
        while let Ok(v) = from_main.recv() {
            to_main.send(v).unwrap();
        }
    });
    let t = Instant::now();
    for i in 0..n / 2 {
        to_echo.send(i).unwrap();
        black_box(from_echo.recv().unwrap());
    }
    let d = t.elapsed();
    drop(to_echo);
    echo.join().unwrap();
    d
}

fn mutex_uncontended(n: u64) -> Duration {
    let m = Mutex::new(0u64);
    let t = Instant::now();
    for _ in 0..n {
        *black_box(&m).lock() += 1;
    }
    let d = t.elapsed();
    assert_eq!(*m.lock(), n);
    d
}

#[test]
#[ignore = "benchmark: run with --ignored --nocapture in release mode"]
fn bench_thread_operations() {
    let only_p: Option<usize> =
        std::env::var("SCHEDLAB_RT_BENCH_P").ok().and_then(|v| v.parse().ok());
    for p in [1, 2] {
        if only_p.is_some_and(|o| o != p) {
            continue;
        }
        let rt = Runtime::builder().processors(p).build().unwrap();
        println!("-- {p} processor(s)");
        if p == 1 {
            // With two processors the two threads usually end up on different
            // processors, and a yield with nothing else to run does not switch.
            report("yield (per switch, 2 threads)", &rt, 2_000_000, yield_pair);
            report("yield, same call site (per switch)", &rt, 2_000_000, yield_same_site);
        }
        report("spawn+join, one at a time", &rt, 200_000, spawn_join_one);
        report("spawn+join, batches of 1000", &rt, 200_000, spawn_join_batch);
        report("channel ping-pong (per switch)", &rt, 1_000_000, channel_pingpong);
        report("mutex lock+unlock, uncontended", &rt, 20_000_000, mutex_uncontended);
    }
}

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

#[test]
#[ignore = "scale check: run with --ignored --nocapture in release mode"]
fn scale_a_million_spawns_and_100k_alive() {
    let rt = Runtime::builder().processors(2).stack_size(16 * 1024).build().unwrap();
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
        assert!(after < before + 4096, "memory grew by {} KiB", after - before);

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
    })
    .unwrap();
}
