//! Repeats one runtime operation `n` times on one processor, for counting its
//! instructions with callgrind: the difference between two runs with different
//! `n` divided by the difference in `n` is the cost of one operation, free of
//! the runtime's start and shutdown.
//!
//! ```text
//! cargo build --release -p schedlab-rt --example op_loop
//! valgrind --tool=callgrind target/release/examples/op_loop yield 100000
//! valgrind --tool=callgrind target/release/examples/op_loop yield 200000
//! ```
//!
//! Operations: `yield` (one switch between two yielding threads), `spawn` (spawn
//! and join one thread), `channel` (one hand-off through a one-slot channel),
//! `mutex` (an uncontended `sync::Mutex` lock and unlock) and `mutex-levels` (the
//! same once a thread with a level was spawned, so the lock records its holder
//! for priority inheritance).
//! `--cooperative` and `--no-transparent` turn preemption and transparent
//! blocking detection off, to see what each costs. It prints the wall time per
//! operation too, a rough figure: `cargo bench -p schedlab-rt` is the measurement.

use schedlab_rt::sync::{channel, Mutex};
use schedlab_rt::{spawn, yield_now, Builder, Preemption, Priority, Runtime};
use std::hint::black_box;
use std::time::Instant;

#[inline(never)]
fn yield_loop(n: u64) {
    for _ in 0..n {
        yield_now();
    }
}

fn main() {
    let (flags, args): (Vec<String>, Vec<String>) =
        std::env::args().skip(1).partition(|a| a.starts_with("--"));
    let (op, n) = match (args.first(), args.get(1).map(|n| n.parse::<u64>())) {
        (Some(op), Some(Ok(n))) if args.len() == 2 => (op.clone(), n),
        _ => usage(),
    };
    let mut builder = Runtime::builder().processors(1);
    for f in &flags {
        builder = match f.as_str() {
            "--cooperative" => builder.preemption(Preemption::Cooperative),
            "--no-transparent" => builder.transparent_blocking(false),
            _ => usage(),
        };
    }
    let rt = builder.build().expect("a runtime");
    let start = Instant::now();
    rt.block_on(move || match op.as_str() {
        "yield" => {
            let partner = spawn(move || yield_loop(n / 2));
            yield_loop(n / 2);
            partner.join().unwrap();
        }
        "spawn" => {
            for _ in 0..n {
                spawn(|| black_box(())).join().unwrap();
            }
        }
        "channel" => {
            let (to_echo, from_main) = channel::<u64>(1);
            let (to_main, from_echo) = channel::<u64>(1);
            let echo = spawn(move || {
                while let Ok(v) = from_main.recv() {
                    to_main.send(v).unwrap();
                }
            });
            for i in 0..n / 2 {
                to_echo.send(i).unwrap();
                black_box(from_echo.recv().unwrap());
            }
            drop(to_echo);
            echo.join().unwrap();
        }
        "mutex" | "mutex-levels" => {
            if op == "mutex-levels" {
                Builder::new().priority(Priority::Low).spawn(|| ()).unwrap().join().unwrap();
            }
            let m = Mutex::new(0u64);
            for _ in 0..n {
                *black_box(&m).lock() += 1;
            }
        }
        other => {
            eprintln!(
                "op_loop: unknown operation {other:?} (yield, spawn, channel, mutex, mutex-levels)"
            );
            std::process::exit(2);
        }
    })
    .expect("no deadlock");
    println!("{:.2} ns per operation", start.elapsed().as_nanos() as f64 / n as f64);
}

fn usage() -> ! {
    eprintln!(
        "usage: op_loop yield|spawn|channel|mutex|mutex-levels N [--cooperative] [--no-transparent]"
    );
    std::process::exit(2);
}
