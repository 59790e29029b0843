//! Priority inheritance through `sync::Mutex` (`priority.rs`, "Inheritance"): a holder runs
//! at the level of the highest thread waiting on its lock until it releases it, then at its
//! own again; the lock stays exclusive while levels are lent and given back under contention.
//!
//! Every test is causal: the orders and levels it checks do not depend on timing (a hang
//! is caught by the watchdog).

mod common;

use common::watchdog;
use schedlab_rt::sync::{channel, Mutex};
use schedlab_rt::{current, sleep, spawn, yield_now, Builder, Preemption, Priority, Runtime};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The seed's inversion on one processor: a `Low` loader holds the lock, a `High` frame
/// waits on it, a `Normal` hog yields without end in between. Without inheritance the
/// loader runs only after the hog (or after aging, 100 ms), at its own level; with it, at
/// the hog's next yield, at the frame's level.
#[test]
fn a_low_holder_runs_at_its_high_waiters_level_until_it_unlocks() {
    let log = watchdog(20, || {
        let rt =
            Runtime::builder().processors(1).preemption(Preemption::Cooperative).build().unwrap();
        rt.block_on(|| {
            let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
            let say = |log: &Arc<std::sync::Mutex<Vec<String>>>, s: String| {
                log.lock().unwrap().push(s);
            };
            let m = Arc::new(Mutex::new(0u32));
            let (held_tx, held_rx) = channel::<()>(1);
            let (m1, l1) = (m.clone(), log.clone());
            let loader = Builder::new()
                .priority(Priority::Low)
                .spawn(move || {
                    let mut g = m1.lock();
                    held_tx.send(()).unwrap();
                    // Off the processor, holding the lock, at its own level.
                    yield_now();
                    say(&l1, format!("loader holds at {:?}", current().priority()));
                    *g += 1;
                    drop(g);
                    say(&l1, format!("loader released at {:?}", current().priority()));
                })
                .unwrap();
            // Parks: the scheduler context runs the loader, which takes the lock.
            held_rx.recv().unwrap();
            let l2 = log.clone();
            let hog = spawn(move || {
                // Well under `AGING` (100 ms) of yields: the loader gets no aged turn.
                for _ in 0..2000 {
                    yield_now();
                }
                say(&l2, "hog done".to_string());
            });
            let (m3, l3) = (m.clone(), log.clone());
            let frame = Builder::new()
                .priority(Priority::High)
                .spawn(move || {
                    *m3.lock() += 1;
                    say(&l3, "frame got the lock".to_string());
                })
                .unwrap();
            frame.join().unwrap();
            hog.join().unwrap();
            loader.join().unwrap();
            assert_eq!(*m.lock(), 2);
            let v = log.lock().unwrap().clone();
            v
        })
        .unwrap()
    });
    assert_eq!(
        log,
        ["loader holds at High", "frame got the lock", "hog done", "loader released at Low",],
        "the loader ran at the frame's level until it released the lock, before the hog"
    );
}

/// A thread that takes a lock with a higher-level waiter still queued behind it inherits
/// that level at once (step 2): here a `Low` waiter queued before a `High` one.
#[test]
fn the_next_holder_inherits_from_the_waiters_still_queued() {
    let levels = watchdog(20, || {
        let rt =
            Runtime::builder().processors(1).preemption(Preemption::Cooperative).build().unwrap();
        rt.block_on(|| {
            let m = Arc::new(Mutex::new(Vec::<(&str, Priority)>::new()));
            let low = |f: Box<dyn FnOnce() + Send>| {
                Builder::new().priority(Priority::Low).spawn(f).unwrap()
            };
            let (held_tx, held_rx) = channel::<()>(1);
            let (release_tx, release_rx) = channel::<()>(1);
            let m1 = m.clone();
            let first = low(Box::new(move || {
                let mut g = m1.lock();
                held_tx.send(()).unwrap();
                // Parked (not runnable) while it holds the lock.
                release_rx.recv().unwrap();
                g.push(("first", current().priority()));
            }));
            held_rx.recv().unwrap();
            let m2 = m.clone();
            let second = low(Box::new(move || m2.lock().push(("second", current().priority()))));
            // Go on once `second` is queued on the lock; sleeping lets the scheduler run
            // it. A marker thread spawned after it and run after it is no proof that it
            // queued first (1 run in 200: `third` queued before `second`, which took the
            // lock last, at `Low`): `second`'s kernel thread can stall in the kernel
            // between its start and its queueing (a loaded machine), look blocked to the
            // monitor, and have the processor handed to a spare kernel thread
            // (transparent blocking), where `marker` runs first.
            while m.queued_waiters() == 0 {
                sleep(Duration::from_millis(1));
            }
            let m3 = m.clone();
            let third = Builder::new()
                .priority(Priority::High)
                .spawn(move || m3.lock().push(("third", current().priority())))
                .unwrap();
            // `third` queued behind `second`, lending `first` its level (it ran at its
            // spawn, a `High` thread; checked, not assumed).
            while m.queued_waiters() < 2 {
                sleep(Duration::from_millis(1));
            }
            release_tx.send(()).unwrap();
            for h in [first, second] {
                h.join().unwrap();
            }
            third.join().unwrap();
            let v = m.lock().clone();
            v
        })
        .unwrap()
    });
    assert_eq!(
        levels,
        [("first", Priority::High), ("second", Priority::High), ("third", Priority::High)],
        "each holder with the High thread queued behind it ran at High"
    );
}

/// Threads of every level hammer two locks, nested and alone, with yields inside and
/// between; the locks stay exclusive, and every thread ends at its own level.
fn contend(processors: usize, preemption: Preemption) {
    watchdog(60, move || {
        let rt = Runtime::builder().processors(processors).preemption(preemption).build().unwrap();
        rt.block_on(move || {
            let a = Arc::new(Mutex::new(0u64));
            let b = Arc::new(Mutex::new(0u64));
            let inside = Arc::new(AtomicU64::new(0));
            let levels = [Priority::High, Priority::Normal, Priority::Low];
            let hs: Vec<_> = (0..9)
                .map(|i| {
                    let (a, b, inside) = (a.clone(), b.clone(), inside.clone());
                    let own = levels[i % 3];
                    Builder::new()
                        .priority(own)
                        .spawn(move || {
                            for n in 0..300u64 {
                                let mut ga = a.lock();
                                // A plain read-modify-write across a yield: a second
                                // holder would lose an increment.
                                let v = *ga;
                                assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0);
                                if n % 3 == 0 {
                                    yield_now();
                                }
                                inside.fetch_sub(1, Ordering::Relaxed);
                                *ga = v + 1;
                                if n % 2 == 0 {
                                    // Nested: `b` inside `a`, released second or first.
                                    let mut gb = b.lock();
                                    *gb += 1;
                                    if n % 4 == 0 {
                                        drop(ga);
                                        yield_now();
                                        drop(gb);
                                    } else {
                                        drop(gb);
                                        drop(ga);
                                    }
                                } else {
                                    drop(ga);
                                }
                                assert_eq!(current().priority(), own, "holding nothing");
                                if n % 5 == 0 {
                                    yield_now();
                                }
                            }
                        })
                        .unwrap()
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(*a.lock(), 9 * 300);
            assert_eq!(*b.lock(), 9 * 150);
        })
        .unwrap()
    });
}

#[test]
fn levels_are_lent_and_given_back_under_contention_on_one_processor() {
    contend(1, Preemption::Cooperative);
    contend(1, Preemption::default());
}

#[test]
fn levels_are_lent_and_given_back_under_contention_on_two_and_four_processors() {
    contend(2, Preemption::default());
    contend(4, Preemption::default());
}
