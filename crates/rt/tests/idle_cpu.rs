//! An idle runtime burns no CPU: its processors sleep in the futex after their bounded spin
//! and the monitor sleeps without a deadline when no work waits.
//!
//! A test binary of its own, and measured per kernel thread of the runtime (the on-CPU
//! nanoseconds the kernel keeps in `/proc/self/task/<tid>/schedstat`), so neither sibling
//! tests nor the test harness count.

use schedlab_rt::{spawn, yield_now, Runtime};
use std::time::Duration;

/// On-CPU nanoseconds of every thread of this process whose name starts with `schedlab-`.
fn runtime_threads_cpu() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = entry.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else { continue };
        if !comm.starts_with("schedlab-") {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("schedstat")) else { continue };
        let ns: u64 = stat.split_whitespace().next().unwrap().parse().unwrap();
        out.push((format!("{}/{}", comm.trim(), path.file_name().unwrap().to_string_lossy()), ns));
    }
    out
}

#[test]
fn an_idle_runtime_uses_no_cpu() {
    if !std::path::Path::new("/proc/self/schedstat").exists() {
        eprintln!("skipped: this kernel keeps no schedstat (CONFIG_SCHEDSTATS off)");
        return;
    }
    let rt = Runtime::builder().processors(4).build().unwrap();
    rt.block_on(|| {
        let hs: Vec<_> = (0..100).map(|_| spawn(yield_now)).collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    })
    .unwrap();
    // Let the processors finish their bounded spin and fall asleep.
    std::thread::sleep(Duration::from_millis(50));
    let before = runtime_threads_cpu();
    let names: Vec<&str> = before.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.iter().filter(|n| n.starts_with("schedlab-vp-")).count() == 4
            && names.iter().any(|n| n.starts_with("schedlab-monito")),
        "did not find the runtime's 4 processor threads and its monitor: {names:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let after = runtime_threads_cpu();
    let used: u64 = after
        .iter()
        .map(|(n, a)| a - before.iter().find(|(m, _)| m == n).map_or(0, |(_, b)| *b))
        .sum();
    // Four spinning processors would burn ~1.2 s here; sleeping ones a few wake-ups.
    assert!(
        used < 20_000_000,
        "the idle runtime's threads used {:.1} ms of CPU in 300 ms: {after:?}",
        used as f64 / 1e6
    );
    drop(rt);
}
