//! An idle runtime burns no CPU: its processors sleep in the futex after their bounded spin
//! and the monitor sleeps without a deadline when no work waits; and a `Low` thread waiting
//! for its aging does not keep the monitor looking.
//!
//! A test binary of its own, and measured per kernel thread of the runtime (the on-CPU
//! nanoseconds the kernel keeps in `/proc/self/task/<tid>/schedstat`), so neither sibling
//! tests nor the test harness count.

use schedlab_rt::{spawn, yield_now, Builder, Priority, Runtime};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One test at a time: each finds its runtime's threads by name.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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

/// On-CPU nanoseconds of the runtime's monitor thread (the only one in the process).
fn monitor_cpu() -> u64 {
    let monitors: Vec<u64> = runtime_threads_cpu()
        .into_iter()
        .filter(|(n, _)| n.starts_with("schedlab-monito"))
        .map(|(_, ns)| ns)
        .collect();
    assert_eq!(monitors.len(), 1, "expected one runtime's monitor");
    monitors[0]
}

/// A `Low` thread that waits at its level under a busy `Normal` thread is the monitor's
/// business only at its aging ([`schedlab_rt::AGING`]), so the monitor sleeps until then.
/// It used to count that thread as work in its quiet re-check and look again at once,
/// finding nothing to do before the aging each time: it spun, at `SCHED_FIFO` as root,
/// until the aging (0.7 of this test's 300 ms). On the CPU of its processor (seed 001's
/// `rt` loader, pinned to one CPU) that spin kept the processor from running at all: the
/// frame loop's 100 ms stalls (docs/PERFORMANCE.md).
#[test]
fn a_low_thread_waiting_for_its_aging_does_not_keep_the_monitor_busy() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !std::path::Path::new("/proc/self/schedstat").exists() {
        eprintln!("skipped: this kernel keeps no schedstat (CONFIG_SCHEDSTATS off)");
        return;
    }
    let rt = Runtime::builder().processors(1).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let spins = Arc::new(AtomicU64::new(0));
    let (s, n) = (stop.clone(), spins.clone());
    let low = Builder::new()
        .priority(Priority::Low)
        .spawn_on(&rt, move || {
            while !s.load(Ordering::Relaxed) {
                n.fetch_add(1, Ordering::Relaxed);
                std::hint::spin_loop();
            }
        })
        .unwrap();
    let (used, wall) = rt
        .block_on(|| {
            // The `Normal` thread keeps the one processor; the `Low` one waits at its
            // level, and gets a turn per AGING. Past the monitor's first 20 ms (`IDLE_AFTER`)
            // with no work waiting, it is quiet.
            let warm = Instant::now();
            while warm.elapsed() < Duration::from_millis(50) {
                std::hint::spin_loop();
            }
            let before = monitor_cpu();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(300) {
                std::hint::spin_loop();
            }
            (monitor_cpu() - before, t0.elapsed())
        })
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    low.join().unwrap();
    assert!(spins.load(Ordering::Relaxed) > 0, "the Low thread never got its turn");
    // The spinning monitor used 0.7 of the wall time (209 ms in 303, as root); one that
    // wakes for quanta, the aging and its quiet polls 3-9% in a debug build under load
    // (the same test with two `Normal` spinners, 8-20%).
    assert!(
        used < wall.as_nanos() as u64 / 3,
        "the monitor used {:.1} ms of CPU in {:.0} ms while a Low thread waited for its aging",
        used as f64 / 1e6,
        wall.as_secs_f64() * 1e3
    );
    drop(rt);
}

/// A processor whose only source of work is the poller (one processor, its thread fed by a
/// socket) sleeps in `epoll_wait` as soon as it finds nothing, instead of spinning first
/// (`processor/idle_spin.rs`). It used to spin for the whole configured spin at every
/// wait for the client, looking at the poller without blocking each time: here, with a
/// 2 ms spin and a client that pauses 3 ms between round trips, ~2 ms of CPU per round
/// trip; sleeping at once, a few µs.
#[test]
fn a_processor_fed_only_by_the_poller_sleeps_without_spinning() {
    use std::io::{Read, Write};
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !std::path::Path::new("/proc/self/schedstat").exists() {
        eprintln!("skipped: this kernel keeps no schedstat (CONFIG_SCHEDSTATS off)");
        return;
    }
    const ROUNDS: u64 = 40;
    const SPIN: Duration = Duration::from_millis(2);
    let rt = Runtime::builder().processors(1).spin(SPIN).deadlock_detection(false).build().unwrap();
    let (mut client, server) = std::os::unix::net::UnixStream::pair().unwrap();
    let server = schedlab_rt::net::UnixStream::from(server);
    let echo = Builder::new()
        .spawn_on(&rt, move || {
            let mut s = server;
            let mut b = [0u8; 1];
            while s.read(&mut b).unwrap() == 1 {
                s.write_all(&b).unwrap();
            }
        })
        .unwrap();
    let round_trip = |client: &mut std::os::unix::net::UnixStream| {
        let mut b = [7u8; 1];
        client.write_all(&b).unwrap();
        client.read_exact(&mut b).unwrap();
        std::thread::sleep(SPIN + Duration::from_millis(1));
    };
    // The first search's work came from outside (the spawn): it spins once.
    for _ in 0..3 {
        round_trip(&mut client);
    }
    let cpu = || runtime_threads_cpu().iter().map(|(_, ns)| ns).sum::<u64>();
    let before = cpu();
    for _ in 0..ROUNDS {
        round_trip(&mut client);
    }
    let used = cpu() - before;
    drop(client);
    echo.join().unwrap();
    drop(rt);
    // Spinning: ~ROUNDS × SPIN (80 ms; less only when the load takes the spinner's CPU).
    // Sleeping at once: a wake-up, a read and a write per round trip, plus the monitor's
    // few wake-ups; a quarter of the spin per round trip is a generous bound for those.
    assert!(
        used < ROUNDS * SPIN.as_nanos() as u64 / 4,
        "the runtime's threads used {:.1} ms of CPU over {ROUNDS} round trips {:?} apart \
         (a {SPIN:?} spin each would be {:.0} ms)",
        used as f64 / 1e6,
        SPIN + Duration::from_millis(1),
        (ROUNDS * SPIN.as_nanos() as u64) as f64 / 1e6
    );
}

/// The calling kernel thread's id.
fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Pins the calling thread to the CPU it is on; returns its mask before, to put back.
fn pin_here() -> libc::cpu_set_t {
    // SAFETY: plain affinity calls on the calling thread with sets on our stack.
    unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of_val(&before), &mut before), 0);
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(libc::sched_getcpu() as usize, &mut one);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one), 0);
        before
    }
}

/// A runtime with more processors than the CPUs it may use: a processor out of work
/// does not spin while the other awake processors fill them (`processor/idle_spin.rs`).
/// Here two processors share one CPU: one runs a thread that computes, the other wakes
/// for a sleeper every 3 ms. With a 2 ms spin after each wake-up the second took about
/// half the CPU for its spins (tens of ms over 40 wake-ups); without, a few µs each.
#[test]
fn a_processor_does_not_spin_when_the_others_fill_the_cpus() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !std::path::Path::new("/proc/self/schedstat").exists() {
        eprintln!("skipped: this kernel keeps no schedstat (CONFIG_SCHEDSTATS off)");
        return;
    }
    const WAKES: u32 = 40;
    const SPIN: Duration = Duration::from_millis(2);
    // The runtime's kernel threads inherit this thread's one CPU, and the runtime reads it.
    let before = pin_here();
    let rt = Runtime::builder().processors(2).spin(SPIN).deadlock_detection(false).build().unwrap();
    // SAFETY: puts back this thread's own mask, read above.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&before), &before) };
    let stop = Arc::new(AtomicBool::new(false));
    let computing = Arc::new(AtomicU64::new(0));
    let computer = {
        let (stop, computing) = (stop.clone(), computing.clone());
        Builder::new()
            .spawn_on(&rt, move || {
                computing.store(gettid() as u64, Ordering::SeqCst);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n = std::hint::black_box(n + 1);
                }
                gettid()
            })
            .unwrap()
    };
    while computing.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let on = computing.load(Ordering::SeqCst) as i32;
    let others = || -> u64 {
        runtime_threads_cpu()
            .iter()
            .filter(|(name, _)| {
                name.starts_with("schedlab-vp") && !name.ends_with(&format!("/{on}"))
            })
            .map(|(_, ns)| ns)
            .sum()
    };
    let start = others();
    let sleeper = Builder::new()
        .spawn_on(&rt, || {
            for _ in 0..WAKES {
                schedlab_rt::sleep(SPIN + Duration::from_millis(1));
            }
        })
        .unwrap();
    sleeper.join().unwrap();
    let used = others() - start;
    stop.store(true, Ordering::Relaxed);
    let ended_on = computer.join().unwrap();
    drop(rt);
    if ended_on != on {
        eprintln!("skipped: the computing thread moved to another kernel thread");
        return;
    }
    // Spinning: ~WAKES × SPIN / 2 (40 ms; the spinner and the computer share the CPU).
    // Not spinning: a wake-up, a timer and a park per round; an eighth of the spin each is
    // a generous bound for those.
    assert!(
        used < WAKES as u64 * SPIN.as_nanos() as u64 / 8,
        "the other processor used {:.1} ms of CPU over {WAKES} wake-ups beside a computing \
         thread on the same CPU (a {SPIN:?} spin each would be ~{:.0} ms)",
        used as f64 / 1e6,
        (WAKES as u64 * SPIN.as_nanos() as u64 / 2) as f64 / 1e6
    );
}
