//! `Runtime::set_processors` (seed 003's `sa_setconcurrency`): the set of
//! virtual processors grows and shrinks while user threads run. The checks
//! are on behaviour, never on timing: no thread lost or run twice, a removed
//! processor runs nothing after its `ProcessorRemoved`, work queued on it runs
//! elsewhere, an added one runs threads in parallel, bad counts are refused.
//! The watchdog only catches hangs.

mod common;

use common::{builder_in, watchdog, Mode, MODES};
use schedlab_rt::sync::channel;
use schedlab_rt::{
    current, no_preempt, sleep, spawn, yield_now, Builder, Event, Runtime, ThreadId,
};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The events a test looks at, in the order the hook saw them.
type Log = Arc<Mutex<Vec<Event>>>;

fn logging(b: schedlab_rt::RuntimeBuilder) -> (schedlab_rt::RuntimeBuilder, Log) {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let b = b.on_event(move |e| {
        if matches!(
            e,
            Event::Switched { to: Some(_), .. }
                | Event::ProcessorRemoved { .. }
                | Event::NewProcessor { .. }
        ) {
            sink.lock().unwrap().push(e.clone());
        }
    });
    (b, log)
}

/// The processor `t` was last switched to on, from the log (exact for the
/// calling thread while it does not switch: the hook runs before the switch).
fn processor_of(log: &Log, t: ThreadId) -> Option<usize> {
    log.lock().unwrap().iter().rev().find_map(|e| match e {
        Event::Switched { to: Some(x), processor, .. } if *x == t => Some(*processor),
        _ => None,
    })
}

/// Fails if a thread was switched to on processor `p` after its last
/// `ProcessorRemoved` with no `NewProcessor` since; returns whether it was removed.
fn check_quiet_after_removal(log: &[Event], p: usize) -> bool {
    let mut removed = false;
    for e in log {
        match e {
            Event::ProcessorRemoved { processor } if *processor == p => removed = true,
            Event::NewProcessor { processor } if *processor == p => removed = false,
            Event::Switched { to: Some(t), processor, .. } if *processor == p => {
                assert!(!removed, "thread {t:?} ran on processor {p} after it was removed")
            }
            _ => {}
        }
    }
    removed
}

/// Waits (no bound but the watchdog's) until the log shows every processor
/// in `ps` removed.
fn wait_removed(log: &Log, ps: std::ops::Range<usize>) {
    for i in 0.. {
        let l = log.lock().unwrap().clone();
        if ps.clone().all(|p| check_quiet_after_removal(&l, p)) {
            return;
        }
        if i == 5000 {
            // A diagnosis for a hang (the watchdog fails the test).
            let others: Vec<_> = l
                .iter()
                .enumerate()
                .filter(|(_, e)| !matches!(e, Event::Switched { .. }))
                .collect();
            for p in ps.clone() {
                let last = l.iter().enumerate().rev().find(
                    |(_, e)| matches!(e, Event::Switched { processor, .. } if *processor == p),
                );
                eprintln!("last switch on {p}: {last:?}");
            }
            eprintln!("still waiting for processors {ps:?} to stop; other events: {others:?}");
        }
        drop(l);
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn counts_outside_one_to_the_maximum_are_refused() {
    let rt = Runtime::builder().processors(2).max_processors(3).build().unwrap();
    assert_eq!((rt.processors(), rt.max_processors()), (2, 3));
    for n in [0, 4, 100] {
        let e = rt.set_processors(n).expect_err("a count out of range");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains("1 to 3"), "unclear message: {e}");
        assert!(e.to_string().contains(&format!("not {n}")), "unclear message: {e}");
    }
    assert_eq!(rt.processors(), 2, "a refused count changes nothing");
    rt.set_processors(3).unwrap();
    assert_eq!(rt.processors(), 3);
    rt.set_processors(1).unwrap();
    assert_eq!(rt.processors(), 1);
    assert_eq!(rt.block_on(|| 7).unwrap(), 7);
    // The default maximum is the count built with.
    let rt = Runtime::builder().processors(2).build().unwrap();
    assert_eq!(rt.max_processors(), 2);
    assert_eq!(rt.set_processors(3).unwrap_err().kind(), ErrorKind::InvalidInput);
    // And the builder refuses a maximum below the count, or above 64.
    for (p, m) in [(2, 1), (1, 65)] {
        let e = Runtime::builder().processors(p).max_processors(m).build().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "processors {p}, max {m}");
        assert!(e.to_string().contains("max_processors"), "unclear message: {e}");
    }
}

/// A mix of threads: spinning (with and without yields), yielding, sleeping
/// on the runtime's timer, blocking in the kernel (explicitly and not), and
/// talking over a channel. Returns what each thread computed.
fn mixed_load(threads: usize, ran: Arc<Vec<AtomicUsize>>) -> u64 {
    let (tx, rx) = channel::<u64>(4);
    let echo = spawn(move || rx.iter().sum::<u64>());
    let hs: Vec<_> = (0..threads)
        .map(|i| {
            let (ran, tx) = (ran.clone(), tx.clone());
            spawn(move || {
                assert_eq!(ran[i].fetch_add(1, Ordering::SeqCst), 0, "thread {i} ran twice");
                let mut x = i as u64;
                for round in 0..20u64 {
                    match (i + round as usize) % 6 {
                        0 => {
                            for _ in 0..20_000 {
                                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
                            }
                        }
                        1 => yield_now(),
                        2 => sleep(Duration::from_micros(50)),
                        3 => schedlab_rt::blocking::nanosleep(Duration::from_micros(30)),
                        4 => std::thread::sleep(Duration::from_micros(30)),
                        _ => tx.send(1).unwrap(),
                    }
                }
                std::hint::black_box(x);
                i as u64
            })
        })
        .collect();
    drop(tx);
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    let sent = echo.join().unwrap();
    assert!(sent > 0);
    sum
}

#[test]
fn shrinking_from_4_to_1_under_load_loses_no_thread_and_runs_none_twice() {
    watchdog(240, || {
        for mode in MODES {
            eprintln!("shrink under load, {mode:?}");
            let (b, log) = logging(builder_in(4, mode));
            let rt = b.build().unwrap();
            let threads = 300;
            let ran: Arc<Vec<AtomicUsize>> =
                Arc::new((0..threads).map(|_| AtomicUsize::new(0)).collect());
            let started = Arc::new(AtomicBool::new(false));
            let sum = std::thread::scope(|s| {
                // From outside, while the load runs: 4 -> 2 -> 1.
                let resizer = s.spawn(|| {
                    while !started.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    rt.set_processors(2).unwrap();
                    std::thread::sleep(Duration::from_millis(2));
                    rt.set_processors(1).unwrap();
                });
                let (ran, started) = (ran.clone(), started.clone());
                let sum = rt
                    .block_on(move || {
                        started.store(true, Ordering::SeqCst);
                        mixed_load(threads, ran)
                    })
                    .unwrap();
                resizer.join().unwrap();
                sum
            });
            assert_eq!(sum, (0..threads as u64).sum::<u64>(), "{mode:?}");
            assert!(ran.iter().all(|r| r.load(Ordering::SeqCst) == 1), "{mode:?}");
            assert_eq!(rt.processors(), 1);
            // Every removed processor stops (once its thread's stint ends),
            // and runs nothing afterwards: the load, run again, stays on 0.
            wait_removed(&log, 1..4);
            let ran2: Arc<Vec<AtomicUsize>> =
                Arc::new((0..50).map(|_| AtomicUsize::new(0)).collect());
            let r2 = ran2.clone();
            assert_eq!(rt.block_on(move || mixed_load(50, r2)).unwrap(), (0..50).sum::<u64>());
            let l = log.lock().unwrap().clone();
            for p in 1..4 {
                assert!(check_quiet_after_removal(&l, p), "{mode:?}: processor {p} not removed");
            }
        }
    });
}

/// Two threads spin, without yielding, until one finds itself on processor 1
/// (the one to go): it queues `children` threads behind itself and removes
/// its own processor. The other yields until every child ran.
/// Returns the processors the children first ran on, and the log.
fn work_queued_on_a_removed_processor(mode: Mode, children: usize) -> (Vec<usize>, Vec<Event>) {
    let (b, log) = logging(builder_in(2, mode).transparent_blocking(false));
    let rt = Arc::new(b.build().unwrap());
    let rt2 = rt.clone();
    let log2 = log.clone();
    let ran: Arc<Vec<AtomicUsize>> = Arc::new((0..children).map(|_| AtomicUsize::new(0)).collect());
    let r = ran.clone();
    let ids = rt
        .block_on(move || {
            let claimed = Arc::new(AtomicBool::new(false));
            let done = Arc::new(AtomicUsize::new(0));
            let roles: Vec<_> = (0..2)
                .map(|_| {
                    let (claimed, done, log, rt, ran) =
                        (claimed.clone(), done.clone(), log2.clone(), rt2.clone(), r.clone());
                    spawn(move || {
                        let me = current().id();
                        // Spin, without yielding, until one of the two finds
                        // itself on processor 1 and takes the first role.
                        // Inside the region it cannot move, so "here" holds.
                        while !claimed.load(Ordering::SeqCst) {
                            let ids = no_preempt(|| {
                                let here = processor_of(&log, me).expect("switched to");
                                if here != 1 || claimed.swap(true, Ordering::SeqCst) {
                                    return None;
                                }
                                // Queue the children here and remove this
                                // processor: the stint ends at the region's
                                // end or by the monitor's signal (preemptive),
                                // or at the processor's next look at its flag
                                // (cooperative).
                                let mut ids = Vec::new();
                                for k in 0..children {
                                    let (done, ran) = (done.clone(), ran.clone());
                                    let h = spawn(move || {
                                        assert_eq!(ran[k].fetch_add(1, Ordering::SeqCst), 0);
                                        done.fetch_add(1, Ordering::SeqCst);
                                    });
                                    ids.push(h.thread().id());
                                }
                                rt.set_processors(1).unwrap();
                                Some(ids)
                            });
                            if let Some(ids) = ids {
                                assert_eq!(rt.processors(), 1);
                                if matches!(mode, Mode::Preemptive | Mode::Both) {
                                    // Spins on: the monitor takes it off
                                    // processor 1.
                                    while done.load(Ordering::SeqCst) < children {
                                        std::hint::spin_loop();
                                    }
                                }
                                return Some(ids);
                            }
                            std::hint::spin_loop();
                        }
                        // The other role: yield (never search, so never
                        // steal) until every child ran.
                        while done.load(Ordering::SeqCst) < children {
                            yield_now();
                        }
                        None
                    })
                })
                .collect();
            let ids: Vec<_> = roles.into_iter().filter_map(|h| h.join().unwrap()).collect();
            assert_eq!(ids.len(), 1, "exactly one thread took the first role");
            ids.into_iter().next().unwrap()
        })
        .unwrap();
    assert!(ran.iter().all(|r| r.load(Ordering::SeqCst) == 1), "every child ran once");
    let l = log.clone();
    wait_removed(&l, 1..2);
    let log = log.lock().unwrap().clone();
    let first = ids
        .iter()
        .map(|&t| {
            log.iter()
                .find_map(|e| match e {
                    Event::Switched { to: Some(x), processor, .. } if *x == t => Some(*processor),
                    _ => None,
                })
                .expect("every child ran")
        })
        .collect();
    drop(rt);
    (first, log)
}

#[test]
fn work_queued_on_a_removed_processor_runs_on_another() {
    watchdog(120, || {
        for _ in 0..3 {
            // Preempted at once: nothing queued on processor 1 runs there.
            let (first, log) = work_queued_on_a_removed_processor(Mode::Preemptive, 200);
            assert!(first.iter().all(|&p| p == 0), "children ran on processor 1: {first:?}");
            assert!(check_quiet_after_removal(&log, 1));
            // Cooperative: processor 1 runs on until its periodic look at its
            // flag (every 64 decisions, so at most 65 children run there),
            // then hands the rest over.
            let (first, log) = work_queued_on_a_removed_processor(Mode::Cooperative, 200);
            let moved = first.iter().filter(|&&p| p == 0).count();
            assert!(moved >= 200 - 65, "only {moved} of 200 children moved");
            assert!(check_quiet_after_removal(&log, 1));
        }
    });
}

#[test]
fn growing_from_1_to_2_runs_two_spinners_in_parallel() {
    watchdog(120, || {
        for mode in [Mode::Cooperative, Mode::Preemptive] {
            let (b, log) =
                logging(builder_in(1, mode).max_processors(2).transparent_blocking(false));
            let rt = Arc::new(b.build().unwrap());
            assert_eq!(rt.processors(), 1);
            let rt2 = rt.clone();
            let ids = rt
                .block_on(move || {
                    let flags = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
                    let hs: Vec<_> = (0..2)
                        .map(|i| {
                            let flags = flags.clone();
                            // Each waits, without yielding and unpreemptible,
                            // for the other to have started: only two
                            // processors at once get both there.
                            Builder::new()
                                .preemptible(false)
                                .spawn(move || {
                                    flags[i].store(true, Ordering::SeqCst);
                                    while !flags[1 - i].load(Ordering::SeqCst) {
                                        std::hint::spin_loop();
                                    }
                                })
                                .unwrap()
                        })
                        .collect();
                    // From a user thread of this runtime.
                    rt2.set_processors(2).unwrap();
                    assert_eq!(rt2.processors(), 2);
                    let ids: Vec<_> = hs.iter().map(|h| h.thread().id()).collect();
                    for h in hs {
                        h.join().unwrap();
                    }
                    ids
                })
                .unwrap();
            let log = log.lock().unwrap().clone();
            assert!(
                log.contains(&Event::NewProcessor { processor: 1 }),
                "{mode:?}: processor 1 never announced"
            );
            // Processor 1 ran at least one of the two.
            let on_1 = log.iter().any(|e| {
                matches!(e, Event::Switched { to: Some(t), processor: 1, .. } if ids.contains(t))
            });
            assert!(on_1, "{mode:?}: neither spinner ran on the added processor");
        }
    });
}

#[test]
fn set_processors_from_a_user_thread_shrinks_and_grows_its_own_runtime() {
    watchdog(120, || {
        for mode in MODES {
            let (b, log) = logging(builder_in(3, mode));
            let rt = Arc::new(b.build().unwrap());
            let rt2 = rt.clone();
            let total = rt
                .block_on(move || {
                    let mut total = 0u64;
                    for (round, n) in [1, 3, 2, 1, 3, 1].into_iter().enumerate() {
                        rt2.set_processors(n).unwrap();
                        assert_eq!(rt2.processors(), n);
                        let hs: Vec<_> = (0..200u64)
                            .map(|i| {
                                spawn(move || {
                                    for _ in 0..(i % 4) {
                                        yield_now();
                                    }
                                    round as u64 * 1000 + i
                                })
                            })
                            .collect();
                        total += hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>();
                    }
                    total
                })
                .unwrap();
            let expect: u64 = (0..6u64).map(|r| (0..200).map(|i| r * 1000 + i).sum::<u64>()).sum();
            assert_eq!(total, expect, "{mode:?}");
            // The last count was 1: 1 and 2 stop and stay quiet.
            wait_removed(&log, 1..3);
            drop(rt);
        }
    });
}

/// The deadlock check needs every processor asleep or retired: after a
/// shrink (and on a runtime built with spare capacity) it still reports,
/// whether the last to stop is an active processor or a retiring one, and
/// still does not report while a removed processor runs a thread.
#[test]
fn a_deadlock_is_reported_after_a_shrink() {
    watchdog(60, || {
        for (p, max, n) in [(3, 3, 1), (1, 4, 1), (2, 4, 3), (3, 3, 2)] {
            let rt =
                Arc::new(Runtime::builder().processors(p).max_processors(max).build().unwrap());
            rt.set_processors(n).unwrap();
            let rt2 = rt.clone();
            let err = rt
                .block_on(move || {
                    // Shrink again from inside, so a removed processor may
                    // be the last to stop.
                    rt2.set_processors(1).unwrap();
                    let (tx, rx) = channel::<u32>(1);
                    let h = spawn(move || rx.recv());
                    let _ = h.join(); // never returns: we still hold `tx`
                    drop(tx);
                })
                .unwrap_err();
            assert_eq!(err.threads.len(), 2, "{p}/{max} -> {n} -> 1: {err}");
            // Still usable, grown back, and dropped without hanging.
            rt.set_processors(max).unwrap();
            assert_eq!(rt.block_on(|| 1).unwrap(), 1);
        }
    });
}
