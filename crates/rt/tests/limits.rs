//! Every builder knob at its limits: `RuntimeBuilder::build` and `Builder::spawn` either
//! refuse a value with `InvalidInput` naming the knob, or give a runtime (a thread) that
//! runs a small `block_on` to completion. Extreme values (0, 1, MAX, MAX − 1, huge
//! durations, NaN and infinite fractions) once panicked a processor thread and hung
//! `block_on` (`spin(Duration::MAX)`), silently gave 16 KiB (`stack_size(usize::MAX)`, the
//! rounding wrapped), or accepted a CPU budget that allows 0 ns.

mod common;

use common::watchdog;
use proptest::prelude::*;
use schedlab_rt::{
    Builder, Preemption, Priority, Runtime, MAX_SPIN, MAX_STACK_SIZE, MIN_QUANTUM, MIN_STACK_SIZE,
};
use std::io;
use std::time::Duration;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

// Each strategy gives its extremes, and an ordinary value as often as all of them, so
// that a fair share of the cases gets past `build` with one or two extremes at once.

fn counts() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 1..=4usize,
        1 => Just(0),
        1 => Just(1),
        1 => Just(2),
        1 => Just(64),
        1 => Just(65),
        1 => Just(usize::MAX - 1),
        1 => Just(usize::MAX),
        1 => 1..=3usize,
    ]
}

fn stack_sizes() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => Just(64 * 1024),
        1 => Just(0),
        1 => Just(1),
        1 => Just(MIN_STACK_SIZE - 1),
        1 => Just(64 * 1024 + 1),
        1 => Just(MAX_STACK_SIZE),
        1 => Just(MAX_STACK_SIZE + 1),
        1 => Just(usize::MAX - 1),
        1 => Just(usize::MAX),
    ]
}

fn durations() -> impl Strategy<Value = Duration> {
    prop_oneof![
        9 => Just(Duration::from_millis(1)),
        1 => Just(Duration::ZERO),
        1 => Just(Duration::from_nanos(1)),
        1 => Just(MIN_QUANTUM - Duration::from_nanos(1)),
        1 => Just(MIN_QUANTUM),
        1 => Just(Duration::from_millis(10)),
        1 => Just(MAX_SPIN + Duration::from_nanos(1)),
        1 => Just(DAY + Duration::from_nanos(1)),
        1 => Just(Duration::MAX - Duration::from_nanos(1)),
        1 => Just(Duration::MAX),
    ]
}

/// Spins a processor may be told to search for: the same extremes, but at most a
/// millisecond among the valid ones, so that a case does not burn a CPU for a second.
fn spins() -> impl Strategy<Value = Duration> {
    durations().prop_map(|d| if d <= MAX_SPIN { d.min(Duration::from_millis(1)) } else { d })
}

fn fractions() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        Just(1e-12),
        Just(1e-6),
        Just(0.5),
        Just(1.0),
        Just(1.0 + f64::EPSILON),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
    ]
}

#[derive(Debug, Clone)]
struct Knobs {
    processors: usize,
    max_processors: Option<usize>,
    stack_size: usize,
    spin: Duration,
    quantum: Option<Duration>,
    block_threshold: Duration,
    deadlock_detection: bool,
    transparent_blocking: bool,
    hook: bool,
}

#[derive(Debug, Clone)]
struct ThreadKnobs {
    name: String,
    stack_size: Option<usize>,
    preemptible: bool,
    budget: Option<(f64, Duration)>,
    priority: Priority,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        counts(),
        proptest::option::of(counts()),
        stack_sizes(),
        spins(),
        proptest::option::of(durations()),
        durations(),
        any::<(bool, bool, bool)>(),
    )
        .prop_map(
            |(processors, max_processors, stack_size, spin, quantum, block_threshold, b)| Knobs {
                processors,
                max_processors,
                stack_size,
                spin,
                quantum,
                block_threshold,
                deadlock_detection: b.0,
                transparent_blocking: b.1,
                hook: b.2,
            },
        )
}

fn thread_knobs() -> impl Strategy<Value = ThreadKnobs> {
    (
        prop_oneof![Just(String::new()), Just("a\0b".to_string()), Just("w".repeat(4096))],
        proptest::option::of(stack_sizes()),
        any::<bool>(),
        proptest::option::of((fractions(), durations())),
        prop_oneof![Just(Priority::High), Just(Priority::Normal), Just(Priority::Low)],
    )
        .prop_map(|(name, stack_size, preemptible, budget, priority)| ThreadKnobs {
            name,
            stack_size,
            preemptible,
            budget,
            priority,
        })
}

/// The knobs `build` must refuse, by the name its error gives them (the documented rules).
fn refused(k: &Knobs) -> Vec<&'static str> {
    let mut bad = Vec::new();
    if !(1..=64).contains(&k.processors) {
        bad.push("processors");
    }
    let max = k.max_processors.unwrap_or(k.processors);
    if !(k.processors..=64).contains(&max) {
        bad.push("max_processors");
    }
    if k.stack_size > MAX_STACK_SIZE {
        bad.push("stack_size");
    }
    if k.spin > MAX_SPIN {
        bad.push("spin");
    }
    if k.quantum.is_some_and(|q| q < MIN_QUANTUM) {
        bad.push("quantum");
    }
    bad
}

/// The knobs `spawn` must refuse (the documented rules).
fn refused_thread(t: &ThreadKnobs) -> Vec<&'static str> {
    let mut bad = Vec::new();
    if t.stack_size.is_some_and(|s| s > MAX_STACK_SIZE) {
        bad.push("stack_size");
    }
    if let Some((fraction, period)) = t.budget {
        let period_ns = period.as_nanos().min(u64::MAX as u128 / 2) as f64;
        let allows = (period_ns * fraction).round();
        let ok = fraction > 0.0 && fraction <= 1.0 && period >= Duration::from_micros(500);
        if !ok || allows < 1_000.0 {
            bad.push("cpu_budget");
        }
    }
    bad
}

fn builder(k: &Knobs) -> schedlab_rt::RuntimeBuilder {
    let mut b = Runtime::builder()
        .processors(k.processors)
        .stack_size(k.stack_size)
        .spin(k.spin)
        .preemption(k.quantum.map_or(Preemption::Cooperative, Preemption::Quantum))
        .block_threshold(k.block_threshold)
        .deadlock_detection(k.deadlock_detection)
        .transparent_blocking(k.transparent_blocking);
    if let Some(m) = k.max_processors {
        b = b.max_processors(m);
    }
    if k.hook {
        b = b.on_event(|e| {
            std::hint::black_box(e);
        });
    }
    b
}

/// Checks an `InvalidInput` error names one of `knobs`.
fn names_a_knob(e: &io::Error, knobs: &[&str]) -> Result<(), TestCaseError> {
    prop_assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{}", e);
    let msg = e.to_string();
    prop_assert!(knobs.iter().any(|k| msg.contains(k)), "{msg:?} names none of {knobs:?}");
    Ok(())
}

/// Builds with `k`, spawns a thread with `t` and runs it, checking each step refuses
/// exactly the knobs the rules say, by name.
fn run(k: Knobs, t: ThreadKnobs) -> Result<(), TestCaseError> {
    let bad = refused(&k);
    let rt = match builder(&k).build() {
        Err(e) => {
            prop_assert!(!bad.is_empty(), "build refused valid knobs {k:?}: {e}");
            return names_a_knob(&e, &bad);
        }
        Ok(rt) => rt,
    };
    prop_assert!(bad.is_empty(), "build accepted {bad:?} in {k:?}");
    let bad_thread = refused_thread(&t);
    let spawned = rt
        .block_on(move || {
            let mut b = Builder::new().name(t.name).preemptible(t.preemptible).priority(t.priority);
            if let Some(s) = t.stack_size {
                b = b.stack_size(s);
            }
            if let Some((fraction, period)) = t.budget {
                b = b.cpu_budget(fraction, period);
            }
            let budgeted = t.budget.is_some();
            let h = b.spawn(|| std::hint::black_box(7u32))?;
            // A thread that spent a budget of a long period sleeps to the period's end:
            // not joined (the runtime's drop cancels it).
            Ok::<_, io::Error>(if budgeted { None } else { Some(h.join().unwrap()) })
        })
        .unwrap();
    match spawned {
        Ok(v) => {
            prop_assert!(bad_thread.is_empty(), "spawn accepted {bad_thread:?}");
            prop_assert!(v.is_none_or(|v| v == 7));
        }
        Err(e) if bad_thread.is_empty() => prop_assert!(false, "spawn refused valid knobs: {e}"),
        Err(e) => names_a_knob(&e, &bad_thread)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_builder_knob_is_refused_by_name_or_runs(k in knobs(), t in thread_knobs()) {
        watchdog(60, move || run(k, t))?;
    }
}

#[test]
fn the_limits_named_in_the_issue_are_refused_by_name() {
    let e = Runtime::builder().processors(1).stack_size(usize::MAX).build().unwrap_err();
    assert!(e.to_string().contains("stack_size"), "{e}");
    let e = Runtime::builder().processors(1).spin(Duration::MAX).build().unwrap_err();
    assert!(e.to_string().contains("spin"), "{e}");
    let rt = Runtime::builder().processors(1).build().unwrap();
    let e = rt
        .block_on(|| {
            Builder::new().cpu_budget(1e-12, Duration::from_millis(1)).spawn(|| ()).map(|_| ())
        })
        .unwrap()
        .unwrap_err();
    assert!(e.to_string().contains("cpu_budget"), "{e}");
}

#[test]
fn durations_past_a_day_saturate_and_the_monitor_keeps_working() {
    // A quantum or a block threshold of `Duration::MAX` means "never"; the monitor's
    // deadline arithmetic once overflowed on them, and the monitor thread died: no more
    // timers fired for busy processors, no preemption. Each runtime below finishes only
    // if the monitor works: a spinner holds the one processor until another thread sets
    // its flag, which needs the monitor to fire a timer (a High thread's sleep) or to
    // preempt the spinner at its quantum.
    use schedlab_rt::{sleep, spawn};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let spin_until_set = |rt: Runtime, by_high: bool| {
        watchdog(30, move || {
            rt.block_on(move || {
                let flag = Arc::new(AtomicBool::new(false));
                let f = flag.clone();
                let spinner = spawn(move || {
                    while !f.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
                let f = flag.clone();
                let p = if by_high { Priority::High } else { Priority::Normal };
                let setter = Builder::new()
                    .priority(p)
                    .spawn(move || {
                        sleep(Duration::from_millis(5));
                        f.store(true, Ordering::Relaxed);
                    })
                    .unwrap();
                setter.join().unwrap();
                spinner.join().unwrap();
            })
            .unwrap()
        })
    };
    let one = || Runtime::builder().processors(1);
    spin_until_set(one().preemption(Preemption::Quantum(Duration::MAX)).build().unwrap(), true);
    let rt = one()
        .preemption(Preemption::Quantum(Duration::from_millis(10)))
        .block_threshold(Duration::MAX)
        .build()
        .unwrap();
    spin_until_set(rt, false);
}
