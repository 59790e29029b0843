//! Fork-join `fib(n)` with a user thread spawned per call down to `depth` levels (issue
//! 23's shape: `fib_loop 1 32 20 3` is fib(32) with 940,924 spawns, on one
//! processor, best of three runs), printing the best total time and the process's peak
//! resident memory (`VmHWM`), for setting beside a Go or tokio program of the same shape
//! outside the lab's harness. `schedlab run --suite full --filter threads.forkjoin` is the
//! measurement (per spawned thread, with the peak in its notes).
//!
//! ```text
//! cargo build --release -p schedlab-rt --example fib_loop
//! fib_loop PROCESSORS N DEPTH RUNS
//! ```

use schedlab_rt::{spawn, Runtime};
use std::time::Instant;

fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

fn fork_join_fib(n: u32, depth: u32) -> u64 {
    if n < 2 || depth == 0 {
        return fib(n);
    }
    let h = spawn(move || fork_join_fib(n - 1, depth - 1));
    let b = fork_join_fib(n - 2, depth - 1);
    h.join().expect("a fib thread panicked") + b
}

/// The process's peak resident memory in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let arg = |i: usize, default: u32| {
        std::env::args().nth(i).map_or(default, |a| a.parse().expect("a number"))
    };
    let (processors, n, depth, runs) = (arg(1, 1), arg(2, 32), arg(3, 20), arg(4, 3));
    let rt = Runtime::builder().processors(processors as usize).build().expect("a runtime");
    let mut best = f64::MAX;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let v = rt.block_on(move || fork_join_fib(n, depth)).expect("no deadlock");
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(v, fib(n), "fork-join fib({n})");
    }
    println!(
        "fib({n}), spawn depth {depth}, {processors} processor(s): best {best:.3} s, peak RSS {:.1} MiB",
        peak_kib() as f64 / 1024.0
    );
}
