//! CPU budgets (`Builder::cpu_budget`): a budgeted thread gets its share of a
//! processor per period and no more, alone or beside others, from the
//! scheduler's own accounting; the throttles are events; bad parameters are
//! refused.
//!
//! The shares are the scheduler's charges (wall time current on a processor),
//! which do not depend on how fast the machine is: a thread runs its allowance
//! and is throttled whether the kernel gives its processor the CPU or not. The
//! bounds are wide (half to twice the budget) because the enforcement's delay
//! (the monitor's wake-up and the signal) adds to each period's charge on a
//! loaded machine; what they rule out is the failure modes: never throttled
//! (share near 1) or starved (near 0).

mod common;

use common::watchdog;
use schedlab_rt::{sleep, spawn, Builder, Event, Runtime};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PERIOD: Duration = Duration::from_millis(20);

fn spin_until(stop: &AtomicBool) -> u64 {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n = std::hint::black_box(n.wrapping_add(1));
    }
    n
}

/// Runs a thread with budget `fraction` per [`PERIOD`] spinning for `run` on
/// one processor, beside `others` unbudgeted spinners; returns its charged
/// share of the elapsed time, its throttle count and the Throttled events.
fn budgeted_share(fraction: f64, others: usize, run: Duration) -> (f64, u64, Vec<Event>) {
    // One at a time: two of these side by side keep both CPUs of a small machine busy, and
    // the monitor that enforces the budgets then wakes late.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let rt = Runtime::builder()
        .processors(1)
        .on_event(move |e| {
            if matches!(e, Event::Throttled { .. }) {
                sink.lock().unwrap().push(e.clone());
            }
        })
        .build()
        .unwrap();
    let (share, throttled) = rt
        .block_on(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            let t0 = Instant::now();
            let budgeted =
                Builder::new().cpu_budget(fraction, PERIOD).spawn(move || spin_until(&s)).unwrap();
            let rivals: Vec<_> = (0..others)
                .map(|_| {
                    let s = stop.clone();
                    spawn(move || spin_until(&s))
                })
                .collect();
            sleep(run);
            stop.store(true, Ordering::Relaxed);
            let elapsed = t0.elapsed();
            let stats = budgeted.thread().budget_stats().expect("a budget");
            budgeted.join().unwrap();
            for r in rivals {
                r.join().unwrap();
            }
            assert_eq!(stats.period, PERIOD);
            (stats.used.as_secs_f64() / elapsed.as_secs_f64(), stats.throttled)
        })
        .unwrap();
    let events = std::mem::take(&mut *events.lock().unwrap());
    eprintln!("budget {fraction} beside {others}: charged share {share:.4}, {throttled} throttles");
    (share, throttled, events)
}

#[test]
fn a_budgeted_thread_alone_gets_its_share_and_no_more() {
    let (share, throttled, events) =
        watchdog(60, || budgeted_share(0.2, 0, Duration::from_millis(500)));
    assert!((0.1..=0.4).contains(&share), "charged share {share:.3} for a budget of 0.2");
    // 25 periods: throttled in (nearly) each, though nothing else ran.
    assert!(throttled >= 12, "throttled {throttled} times in 25 periods");
    assert_eq!(events.len() as u64, throttled, "one event per throttle");
    for e in &events {
        let Event::Throttled { used, resume_in, processor, .. } = e else { unreachable!() };
        assert_eq!(*processor, 0);
        assert!(*used >= PERIOD.mul_f64(0.2), "throttled after {used:?} of a 4 ms budget");
        assert!(*resume_in < PERIOD, "resumes {resume_in:?} later, within the period");
    }
}

#[test]
fn a_budgeted_thread_beside_a_spinner_gets_its_share() {
    let (share, throttled, _) = watchdog(60, || budgeted_share(0.1, 1, Duration::from_millis(500)));
    assert!((0.05..=0.2).contains(&share), "charged share {share:.3} for a budget of 0.1");
    assert!(throttled >= 10, "throttled {throttled} times in 25 periods");
}

#[test]
fn a_thread_without_a_budget_has_no_budget_stats() {
    let rt = Runtime::builder().processors(1).build().unwrap();
    let stats = rt.block_on(|| spawn(|| ()).thread().budget_stats()).unwrap();
    assert_eq!(stats, None);
}

#[test]
fn bad_budgets_are_refused_at_spawn() {
    let rt = Runtime::builder().processors(1).build().unwrap();
    rt.block_on(|| {
        for (fraction, period) in [
            (0.0, PERIOD),
            (-0.5, PERIOD),
            (1.5, PERIOD),
            (f64::NAN, PERIOD),
            (0.5, Duration::from_micros(10)),
        ] {
            let err = Builder::new().cpu_budget(fraction, period).spawn(|| ()).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{fraction} per {period:?}");
            assert!(err.to_string().contains("CPU budget"), "{err}");
        }
    })
    .unwrap();
}
