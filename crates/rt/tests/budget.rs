//! CPU budgets (`Builder::cpu_budget`): a budgeted thread gets its share of a
//! processor per period and no more, alone or beside others, from the
//! scheduler's own accounting; the throttles are events; bad parameters are
//! refused.
//!
//! The charges are CPU time the thread consumed (its kernel thread's CPU
//! clock), enforced by a CPU-time timer the kernel fires, so the bounds hold
//! on a loaded machine too: load can only lower a thread's share of wall
//! time, never raise its charge past the budget. Each test runs until the
//! thread has been charged [`ALLOWANCES`] allowances (a loaded machine takes
//! longer; the watchdog is only a hang guard) and checks that the charge per
//! elapsed wall time stays within the budget plus one period's overrun
//! (the kernel checks CPU timers at its tick, and an overrun is paid back
//! in the next period), that it was throttled only once its allowance was
//! used, and throttled at all if it reached its share (under load the kernel
//! may give it less CPU than its budget, and then nothing needs throttling;
//! quiet, a budget not enforced fails the upper bound).

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

/// How many periods' allowances a test's budgeted thread is charged before it stops.
const ALLOWANCES: u32 = 25;

/// Runs a thread with budget `fraction` per [`PERIOD`] spinning on one
/// processor, beside `others` unbudgeted spinners, until it has been charged
/// [`ALLOWANCES`] allowances; returns its charged share of the elapsed time,
/// its throttle count and the Throttled events.
fn budgeted_share(fraction: f64, others: usize) -> (f64, u64, Vec<Event>) {
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
            let enough = PERIOD.mul_f64(fraction) * ALLOWANCES;
            while budgeted.thread().budget_stats().expect("a budget").used < enough {
                sleep(PERIOD / 4);
            }
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
    let used: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Throttled { used, .. } => Some(used.as_micros()),
            _ => None,
        })
        .collect();
    eprintln!("charged at each throttle (µs): {used:?}");
    (share, throttled, events)
}

/// The most a budget `fraction` may be charged per elapsed wall time. The
/// run ends just after the thread's last allowance, so it lasted at least
/// `ALLOWANCES − 1` whole periods, and was charged its allowances plus what
/// the last period and the first owe (each at most a kernel tick late, and a
/// tick is at most 10 ms, `CONFIG_HZ=100`; earlier overruns were paid back).
fn most(fraction: f64) -> f64 {
    let periods = f64::from(ALLOWANCES - 1);
    fraction * f64::from(ALLOWANCES) / periods + 2.0 * 0.010 / (PERIOD.as_secs_f64() * periods)
}

#[test]
fn a_budgeted_thread_alone_gets_its_share_and_no_more() {
    let (share, throttled, events) = watchdog(120, || budgeted_share(0.2, 0));
    assert!(share > 0.0 && share <= most(0.2), "charged share {share:.3} for a budget of 0.2");
    // A thread the kernel let reach its share was throttled, though nothing
    // else ran (on a loaded machine it may get less CPU than its budget).
    assert!(throttled > 0 || share < 0.18, "never throttled at a share of {share:.3}");
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
    let (share, throttled, events) = watchdog(120, || budgeted_share(0.1, 1));
    assert!(share > 0.0 && share <= most(0.1), "charged share {share:.3} for a budget of 0.1");
    assert!(throttled > 0 || share < 0.09, "never throttled at a share of {share:.3}");
    for e in &events {
        let Event::Throttled { used, .. } = e else { unreachable!() };
        assert!(*used >= PERIOD.mul_f64(0.1), "throttled after {used:?} of a 2 ms budget");
    }
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
