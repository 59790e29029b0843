//! One-at-a-time operations of schedlab-rt: yield, spawn+join (one at a time and in
//! batches), channel ping-pong and an uncontended mutex, on one and two processors, with
//! OS threads as the reference where the operation has an OS counterpart.
//!
//! ```text
//! cargo bench -p schedlab-rt --bench ops                 # everything
//! cargo bench -p schedlab-rt --bench ops -- 'yield|channel' --save-baseline before
//! cargo bench -p schedlab-rt --bench ops -- --baseline before   # after a change
//! ```
//!
//! Each figure is timed inside the runtime (`iter_custom`): building the runtime, warming
//! the stack pool and starting partner threads happen outside the timed loop. The lab's
//! `threads.*` probes are the measurement users see; these are for the runtime's developers
//! comparing two builds of the runtime side by side.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use schedlab_rt::sync::{channel, Mutex};
use schedlab_rt::{spawn, yield_now, Runtime};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Both threads yield from this one instruction, so the return after each switch is
/// predicted.
#[inline(never)]
fn yield_loop(n: u64) {
    for _ in 0..n {
        yield_now();
    }
}

/// `n` switches between this thread and a partner, both yielding.
fn yield_pair(n: u64) -> Duration {
    let partner = spawn(move || yield_loop(n / 2));
    yield_now(); // let the partner start
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

const BATCH: u64 = 1000;

fn spawn_join_batch(n: u64) -> Duration {
    let warm: Vec<_> = (0..BATCH).map(|_| spawn(|| ())).collect();
    warm.into_iter().for_each(|h| h.join().unwrap());
    let mut hs = Vec::with_capacity(BATCH as usize);
    let t = Instant::now();
    for _ in 0..n.div_ceil(BATCH) {
        for _ in 0..BATCH {
            hs.push(spawn(|| black_box(())));
        }
        for h in hs.drain(..) {
            h.join().unwrap();
        }
    }
    t.elapsed()
}

/// `n` hand-offs: n/2 round trips through two one-slot channels.
fn channel_pingpong(n: u64) -> Duration {
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
    t.elapsed()
}

/// The OS counterparts.
mod os {
    use super::*;

    pub fn spawn_join_one(n: u64) -> Duration {
        let t = Instant::now();
        for _ in 0..n {
            std::thread::spawn(|| black_box(())).join().unwrap();
        }
        t.elapsed()
    }

    pub fn channel_pingpong(n: u64) -> Duration {
        let (to_echo, from_main) = std::sync::mpsc::sync_channel::<u64>(1);
        let (to_main, from_echo) = std::sync::mpsc::sync_channel::<u64>(1);
        let echo = std::thread::spawn(move || {
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

    pub fn mutex_uncontended(n: u64) -> Duration {
        let m = std::sync::Mutex::new(0u64);
        let t = Instant::now();
        for _ in 0..n {
            *black_box(&m).lock().unwrap() += 1;
        }
        t.elapsed()
    }
}

fn operations(c: &mut Criterion) {
    for procs in [1usize, 2] {
        let rt = Runtime::builder().processors(procs).build().unwrap();
        let on_rt = |f: fn(u64) -> Duration| {
            let rt = &rt;
            move |iters: u64| rt.block_on(move || f(iters.max(2))).unwrap()
        };
        let mut g = c.benchmark_group(format!("rt/{procs}p"));
        g.throughput(Throughput::Elements(1));
        if procs == 1 {
            // With two processors the partners usually sit on different processors and a
            // yield with nothing else to run there does not switch.
            let f = on_rt(yield_pair);
            g.bench_function("yield (per switch)", |b| b.iter_custom(&f));
        }
        for (name, body) in [
            ("spawn+join, one at a time", spawn_join_one as fn(u64) -> Duration),
            ("spawn+join, batches of 1000", spawn_join_batch),
            ("channel ping-pong (per hand-off)", channel_pingpong),
            ("mutex lock+unlock, uncontended", mutex_uncontended),
        ] {
            let f = on_rt(body);
            g.bench_function(name, |b| b.iter_custom(&f));
        }
        g.finish();
    }
    let mut g = c.benchmark_group("os");
    g.throughput(Throughput::Elements(1));
    for (name, body) in [
        ("spawn+join, one at a time", os::spawn_join_one as fn(u64) -> Duration),
        ("channel ping-pong (per hand-off)", os::channel_pingpong),
        ("mutex lock+unlock, uncontended", os::mutex_uncontended),
    ] {
        g.bench_with_input(BenchmarkId::from_parameter(name), &body, |b, f| {
            b.iter_custom(|iters| f(iters.max(2)))
        });
    }
    g.finish();
}

criterion_group!(benches, operations);
criterion_main!(benches);
