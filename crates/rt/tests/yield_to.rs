//! `yield_to`, hand-off scheduling (seed 003's Mach `thread_switch`): the
//! named thread runs next when it waits on the caller's processor, a plain
//! yield otherwise (running, parked, finished, elsewhere), and under random
//! preemption and hand-offs on 1, 2 and 4 processors every thread runs its
//! body to the end. Nothing depends on timing; the watchdog only catches
//! hangs.

mod common;

use common::{runtime_in, watchdog, Mode, MODES, PROCESSORS};
use schedlab_rt::{spawn, yield_to, Thread};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// On one processor, four threads spawned in order A B C D wait as D (the
/// next slot) then C B A; a plain yield would run D. `yield_to(B)` runs B
/// first, and the others all still run.
#[test]
fn on_one_processor_the_named_thread_runs_next() {
    watchdog(30, || {
        let rt = runtime_in(1, Mode::Cooperative);
        let order = rt
            .block_on(|| {
                let log = Arc::new(Mutex::new(Vec::new()));
                let handles: Vec<_> = ["A", "B", "C", "D"]
                    .into_iter()
                    .map(|name| {
                        let log = log.clone();
                        spawn(move || log.lock().unwrap().push(name))
                    })
                    .collect();
                yield_to(handles[1].thread());
                let first = log.lock().unwrap().first().copied();
                for h in handles {
                    h.join().unwrap();
                }
                let all = log.lock().unwrap().clone();
                (first, all)
            })
            .unwrap();
        assert_eq!(order.0, Some("B"), "the named thread ran first: {:?}", order.1);
        let mut all = order.1;
        all.sort();
        assert_eq!(all, ["A", "B", "C", "D"]);
    });
}

/// A thread deep in the queue (spawned first, several behind it) is taken
/// out and run, and the ones before it keep their order.
#[test]
fn a_thread_deep_in_the_queue_is_run_and_the_rest_keep_their_order() {
    watchdog(30, || {
        let rt = runtime_in(1, Mode::Cooperative);
        let (plain, handed) = rt
            .block_on(|| {
                let run = |hand: bool| {
                    let log = Arc::new(Mutex::new(Vec::new()));
                    let handles: Vec<_> = (0..6)
                        .map(|i| {
                            let log = log.clone();
                            spawn(move || log.lock().unwrap().push(i))
                        })
                        .collect();
                    if hand {
                        yield_to(handles[2].thread());
                    } else {
                        schedlab_rt::yield_now();
                    }
                    for h in handles {
                        h.join().unwrap();
                    }
                    let v = log.lock().unwrap().clone();
                    v
                };
                (run(false), run(true))
            })
            .unwrap();
        assert_eq!(handed[0], 2, "{handed:?}");
        // The others in the order a plain yield runs them.
        let rest: Vec<_> = plain.iter().copied().filter(|&i| i != 2).collect();
        assert_eq!(&handed[1..], &rest[..], "plain {plain:?}, handed {handed:?}");
    });
}

/// Naming oneself, a parked thread or a finished one is a plain yield: no
/// hang, and the parked thread stays parked until unparked.
#[test]
fn naming_a_thread_that_cannot_run_here_is_a_plain_yield() {
    watchdog(30, || {
        let rt = runtime_in(1, Mode::Cooperative);
        rt.block_on(|| {
            yield_to(&schedlab_rt::current());
            let done = spawn(|| ());
            done.join().unwrap();
            let woke = Arc::new(AtomicUsize::new(0));
            let w = woke.clone();
            let parked = spawn(move || {
                while w.load(Ordering::Acquire) == 0 {
                    schedlab_rt::park();
                }
                w.store(2, Ordering::Release);
            });
            // Let it run and park.
            schedlab_rt::yield_now();
            yield_to(parked.thread());
            yield_to(parked.thread());
            assert_eq!(woke.load(Ordering::Acquire), 0, "still parked");
            woke.store(1, Ordering::Release);
            parked.thread().unpark();
            parked.join().unwrap();
            assert_eq!(woke.load(Ordering::Acquire), 2);
        })
        .unwrap();
        // On an OS thread: `std::thread::yield_now`.
        let h = rt.spawn(|| ());
        yield_to(h.thread());
        h.join().unwrap();
    });
}

/// Threads handing the processor to random others, with random parks,
/// sleeps and preemption, on 1, 2 and 4 processors in every mode: every
/// thread finishes every round.
#[test]
fn stress_random_hand_offs_under_preemption() {
    const THREADS: usize = 48;
    const ROUNDS: usize = 300;
    for p in PROCESSORS {
        for mode in MODES {
            watchdog(120, move || {
                let rt = runtime_in(p, mode);
                let counts = rt
                    .block_on(|| {
                        let all: Arc<OnceLock<Vec<Thread>>> = Arc::new(OnceLock::new());
                        let counts: Arc<Vec<AtomicUsize>> =
                            Arc::new((0..THREADS).map(|_| AtomicUsize::new(0)).collect());
                        let handles: Vec<_> = (0..THREADS)
                            .map(|i| {
                                let (all, counts) = (all.clone(), counts.clone());
                                spawn(move || {
                                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
                                    let threads = loop {
                                        match all.get() {
                                            Some(t) => break t,
                                            None => schedlab_rt::yield_now(),
                                        }
                                    };
                                    for _ in 0..ROUNDS {
                                        x ^= x << 13;
                                        x ^= x >> 7;
                                        x ^= x << 17;
                                        match x % 64 {
                                            0 => schedlab_rt::sleep(
                                                std::time::Duration::from_micros(50),
                                            ),
                                            1 => {
                                                // A park that someone's unpark ends (or
                                                // the token left by an earlier one).
                                                threads[(x as usize / 64) % THREADS].unpark();
                                                schedlab_rt::park_timeout(
                                                    std::time::Duration::from_micros(200),
                                                );
                                            }
                                            _ => yield_to(&threads[(x as usize / 64) % THREADS]),
                                        }
                                        counts[i].fetch_add(1, Ordering::Relaxed);
                                    }
                                })
                            })
                            .collect();
                        let threads: Vec<Thread> =
                            handles.iter().map(|h| h.thread().clone()).collect();
                        all.set(threads).unwrap_or_else(|_| unreachable!("set once"));
                        for h in handles {
                            h.join().unwrap();
                        }
                        counts.iter().map(|c| c.load(Ordering::Relaxed)).collect::<Vec<_>>()
                    })
                    .unwrap();
                assert!(
                    counts.iter().all(|&c| c == ROUNDS),
                    "{p} processors, {mode:?}: {counts:?}"
                );
            });
        }
    }
}
