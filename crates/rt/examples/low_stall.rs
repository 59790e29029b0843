//! Seed 001's `rt` variant outside the lab, for its frame stalls: one processor pinned with
//! the whole process to one CPU (as `sched.background_budget` pins it), a `Normal` frame
//! loop due every 20 ms doing ~4 ms of work, and a loader with `cpu_budget(0.10, 20 ms)`
//! that always has work, at `Priority::Low` (`low`, the default) or `Normal` (`normal`).
//! Prints the frames' p50/p99/max, the CPU time of the runtime's monitor, and the runtime's
//! events before the first three frames later than 30 ms.
//!
//! Before the monitor's fix (docs/PERFORMANCE.md, "The rt loader's 100 ms stalls") the
//! monitor spun at `SCHED_FIFO` while the `Low` loader waited for its aging, on the CPU the
//! processor needed: about 100 ms of monitor CPU per stall, and the events show the loader
//! woken, then nothing for 100 ms, then the loader run as an aged turn.
//!
//! ```text
//! cargo build --release -p schedlab-rt --example low_stall
//! low_stall SECONDS [low|normal]
//! ```

use schedlab_rt::{Builder, Event, Priority, Runtime};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FRAME: Duration = Duration::from_millis(20);
const STALL: Duration = Duration::from_millis(30);

fn spin(d: Duration) {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        for i in 0..1000 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
    }
}

/// Pins the calling thread (and the threads it starts from now on) to its first allowed CPU.
fn pin_to_one_cpu() {
    // SAFETY: `set` is a valid, zeroed CPU set that the calls fill and read.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return;
        }
        let Some(cpu) = (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)) else {
            return;
        };
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

/// On-CPU milliseconds of this process's threads named `schedlab-monito…`.
fn monitor_cpu_ms() -> f64 {
    let mut ns = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.starts_with("schedlab-monito") {
            let stat = std::fs::read_to_string(entry.path().join("schedstat")).unwrap_or_default();
            ns += stat.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(0);
        }
    }
    ns as f64 / 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let low = args.get(2).is_none_or(|s| s != "normal");
    pin_to_one_cpu();
    let t0 = Instant::now();
    let log: Arc<Mutex<Vec<(Duration, Event)>>> = Arc::default();
    let l = log.clone();
    let rt = Runtime::builder()
        .processors(1)
        .on_event(move |e| {
            // Never wait in the hook: an event missed is only a line less.
            if let Ok(mut v) = l.try_lock() {
                v.push((t0.elapsed(), e.clone()));
            }
        })
        .build()
        .expect("a runtime");
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let loader = Builder::new()
        .name("loader")
        .cpu_budget(0.10, FRAME)
        .priority(if low { Priority::Low } else { Priority::Normal })
        .spawn_on(&rt, move || {
            while !s.load(Ordering::Relaxed) {
                spin(Duration::from_micros(200));
            }
        })
        .expect("the loader");
    // Each frame: when it was due, and how late it was done.
    let frames: Vec<(Duration, Duration)> = rt
        .block_on(move || {
            let mut out = Vec::new();
            let end = Instant::now() + Duration::from_secs(secs);
            let mut due = Instant::now() + FRAME;
            while Instant::now() < end {
                if let Some(d) = due.checked_duration_since(Instant::now()) {
                    schedlab_rt::sleep(d);
                }
                spin(FRAME / 5);
                let done = Instant::now();
                out.push((due - t0, done - due));
                while due <= done {
                    due += FRAME;
                }
            }
            out
        })
        .expect("no deadlock");
    stop.store(true, Ordering::Relaxed);
    loader.join().expect("the loader");
    let mut late: Vec<Duration> = frames.iter().map(|f| f.1).collect();
    late.sort_unstable();
    let at = |p: usize| late[(late.len() * p / 100).min(late.len() - 1)];
    println!(
        "{} frames, loader {}: p50 {:?} p99 {:?} max {:?}; the monitor used {:.1} ms of CPU",
        late.len(),
        if low { "Low" } else { "Normal" },
        at(50),
        at(99),
        late[late.len() - 1],
        monitor_cpu_ms()
    );
    let log = log.lock().expect("the log");
    for (due, took) in frames.iter().filter(|f| f.1 >= STALL).take(3) {
        println!("--- the frame due at {due:?} was done {took:?} later; the events before:");
        for (t, e) in log.iter().filter(|(t, _)| *t + FRAME / 2 >= *due && *t <= *due + *took) {
            println!("{:>12.3} ms  {e:?}", t.as_secs_f64() * 1e3);
        }
    }
}
