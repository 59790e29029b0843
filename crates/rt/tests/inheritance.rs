//! Priority inheritance through `sync::Mutex` (`priority.rs`, "Inheritance"): a holder runs
//! at the level of the highest thread waiting on its lock until it releases it, then at its
//! own again; the lock stays exclusive while levels are lent and given back under contention.
//!
//! Every test is causal: the orders and levels it checks do not depend on timing (a hang
//! is caught by the watchdog).

mod common;

use common::watchdog;
use schedlab_rt::sync::{channel, Mutex};
use schedlab_rt::{
    current, sleep, spawn, yield_now, Builder, Preemption, Priority, Runtime, WaitReason,
};
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
        log[..2],
        ["loader holds at High", "frame got the lock"],
        "the loader ran at the frame's level until it released the lock, before the hog: {log:?}"
    );
    // Back at `Low`, the loader runs after the hog, or before it ends if the hog's yields
    // took longer than `AGING` (a loaded machine: 1 run in 200) and aging gave it a turn.
    let mut rest = log[2..].to_vec();
    rest.sort();
    assert_eq!(rest, ["hog done", "loader released at Low"], "{log:?}");
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

type Log = Arc<std::sync::Mutex<Vec<String>>>;

fn say(log: &Log, s: String) {
    log.lock().unwrap().push(s);
}

/// Sleeps until `m` has a thread queued on it: sleeping lets the scheduler run the thread
/// that is to queue, whatever its level.
fn until_queued<T>(m: &Mutex<T>) {
    while m.queued_waiters() == 0 {
        sleep(Duration::from_millis(1));
    }
}

/// A chain on one processor: a `High` thread `H` waits on lock `L0`, held by `T1`, which
/// waits on `L1`, held by `T2`, ... down to the last of `holders` (their levels, `T1`
/// first), which holds the last lock, parked on a channel until the chain stands; then it
/// is released while a `Normal` hog yields without end. The log of who held what at which
/// level, in order.
fn chain(holders: &[Priority]) -> Vec<String> {
    let holders = holders.to_vec();
    watchdog(20, move || {
        let rt =
            Runtime::builder().processors(1).preemption(Preemption::Cooperative).build().unwrap();
        rt.block_on(move || {
            let log: Log = Arc::default();
            let n = holders.len();
            let locks: Vec<Arc<Mutex<()>>> = (0..n).map(|_| Arc::new(Mutex::new(()))).collect();
            let mut hs = Vec::new();
            let (held_tx, held_rx) = channel::<()>(1);
            let (go_tx, go_rx) = channel::<()>(1);
            let (l, last) = (log.clone(), locks[n - 1].clone());
            hs.push(
                Builder::new()
                    .priority(holders[n - 1])
                    .spawn(move || {
                        let g = last.lock();
                        held_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                        say(&l, format!("T{n} holds L{} at {:?}", n - 1, current().priority()));
                        drop(g);
                        say(&l, format!("T{n} released L{} at {:?}", n - 1, current().priority()));
                    })
                    .unwrap(),
            );
            held_rx.recv().unwrap();
            // From the tail up: `Ti` takes `L(i-1)`, then waits on `Li`.
            for i in (1..n).rev() {
                let (l, outer, inner) = (log.clone(), locks[i - 1].clone(), locks[i].clone());
                hs.push(
                    Builder::new()
                        .priority(holders[i - 1])
                        .spawn(move || {
                            let go = outer.lock();
                            let gi = inner.lock();
                            say(&l, format!("T{i} holds L{i} at {:?}", current().priority()));
                            drop(gi);
                            say(&l, format!("T{i} released L{i} at {:?}", current().priority()));
                            drop(go);
                            let p = current().priority();
                            say(&l, format!("T{i} released L{} at {p:?}", i - 1));
                        })
                        .unwrap(),
                );
                until_queued(&locks[i]);
            }
            let (l, first) = (log.clone(), locks[0].clone());
            let high = Builder::new()
                .priority(Priority::High)
                .spawn(move || {
                    let _g = first.lock();
                    say(&l, "H holds L0".to_string());
                })
                .unwrap();
            // `H` ran at its spawn and queued on `L0`; checked, not assumed.
            until_queued(&locks[0]);
            let l = log.clone();
            let hog = spawn(move || {
                // Well under `AGING` (100 ms) of yields: no `Low` thread gets an aged turn.
                for _ in 0..2000 {
                    yield_now();
                }
                say(&l, "hog done".to_string());
            });
            go_tx.send(()).unwrap();
            high.join().unwrap();
            hog.join().unwrap();
            for h in hs {
                h.join().unwrap();
            }
            let v = log.lock().unwrap().clone();
            v
        })
        .unwrap()
    })
}

/// What [`chain`] must log up to `H`'s turn: each holder in turn, from the tail, holds
/// the lock it waited on at `High` until it releases the lock below it; then `H` runs.
fn expected_chain(n: usize) -> Vec<String> {
    let mut v = vec![format!("T{n} holds L{} at High", n - 1)];
    for i in (1..n).rev() {
        v.push(format!("T{i} holds L{i} at High"));
        v.push(format!("T{i} released L{i} at High"));
    }
    v.push("H holds L0".to_string());
    v
}

/// Checks a [`chain`]'s log: the order up to `H`'s turn, the hog after it, and each
/// holder back at its own level once it released the lock it lent through.
fn check_chain(holders: &[Priority], log: &[String]) {
    let n = holders.len();
    let want = expected_chain(n);
    assert_eq!(&log[..want.len().min(log.len())], &want[..], "the chain ran at High: {log:?}");
    let at = |s: &str| log.iter().position(|x| x == s);
    assert!(at("hog done") > at("H holds L0"), "{log:?}");
    let back = |i: usize| format!("T{i} released L{} at {:?}", i - 1, holders[i - 1]);
    for i in 1..=n {
        assert!(log.contains(&back(i)), "T{i} gave the level back: {log:?}");
    }
}

/// `High` waits on a lock a `Normal` thread holds, which waits on one a `Low` thread holds:
/// the `Low` one runs at `High` (before the hog) until it releases it.
#[test]
fn a_chain_of_three_lends_the_top_level_to_its_last_holder() {
    let holders = [Priority::Normal, Priority::Low];
    check_chain(&holders, &chain(&holders));
}

/// Four threads: the walk goes two links past the first holder. Each release breaks the
/// chain where it is: the thread that released runs at its own level again at once, the
/// rest of the chain stays at `High`, and the next holder takes over at `High`.
#[test]
fn a_chain_of_four_is_given_back_link_by_link() {
    let holders = [Priority::Normal, Priority::Low, Priority::Low];
    check_chain(&holders, &chain(&holders));
}

/// A chain broken before the `High` waiter comes: `T1` waited on `L1` held by `T2`, got it
/// when `T2` released it, and gave it back; `T2` holds `L1` again but nothing waits on
/// it. `H` waiting on `L0` (held by `T1`, parked on a channel) raises `T1` only: `T1`'s
/// link to `L1` ended with its wait, so `T2` stays `Low`.
#[test]
fn a_link_ends_with_its_wait() {
    let log = watchdog(20, || {
        let rt =
            Runtime::builder().processors(1).preemption(Preemption::Cooperative).build().unwrap();
        rt.block_on(|| {
            let log: Log = Arc::default();
            let (l0, l1) = (Arc::new(Mutex::new(())), Arc::new(Mutex::new(())));
            let (t2_tx, t2_rx) = channel::<()>(1);
            let (t2_go_tx, t2_go_rx) = channel::<()>(1);
            let (t1_go_tx, t1_go_rx) = channel::<()>(1);
            let (t1_had_tx, t1_had_rx) = channel::<()>(1);
            let (l, a) = (log.clone(), l1.clone());
            let t2 = Builder::new()
                .priority(Priority::Low)
                .spawn(move || {
                    let g = a.lock();
                    t2_tx.send(()).unwrap();
                    t2_go_rx.recv().unwrap();
                    drop(g);
                    // Again, once `T1` had it and gave it back.
                    t1_had_rx.recv().unwrap();
                    let g = a.lock();
                    t2_tx.send(()).unwrap();
                    t2_go_rx.recv().unwrap();
                    say(&l, format!("T2 holds L1 at {:?}", current().priority()));
                    drop(g);
                })
                .unwrap();
            t2_rx.recv().unwrap();
            let (l, a, b) = (log.clone(), l0.clone(), l1.clone());
            let t1 = Builder::new()
                .priority(Priority::Normal)
                .spawn(move || {
                    let g0 = a.lock();
                    drop(b.lock());
                    t1_had_tx.send(()).unwrap();
                    t1_go_rx.recv().unwrap();
                    say(&l, format!("T1 holds L0 at {:?}", current().priority()));
                    drop(g0);
                })
                .unwrap();
            until_queued(&l1);
            t2_go_tx.send(()).unwrap();
            // `T2` released `L1`, `T1` took and released it, `T2` took it again.
            t2_rx.recv().unwrap();
            let (l, a) = (log.clone(), l0.clone());
            let high = Builder::new()
                .priority(Priority::High)
                .spawn(move || {
                    let _g = a.lock();
                    say(&l, "H holds L0".to_string());
                })
                .unwrap();
            until_queued(&l0);
            t1_go_tx.send(()).unwrap();
            high.join().unwrap();
            t1.join().unwrap();
            t2_go_tx.send(()).unwrap();
            t2.join().unwrap();
            let v = log.lock().unwrap().clone();
            v
        })
        .unwrap()
    });
    assert_eq!(log, ["T1 holds L0 at High", "H holds L0", "T2 holds L1 at Low"]);
}

/// A `Low` thread holds two locks, each with a `High` thread queued on it. Releasing the
/// first leaves it the level the second still lends (the highest over the locks it still
/// holds, as Linux's PI futexes keep it); releasing the second gives its own back. It used
/// to drop to `Low` at the first release, while a `High` thread still waited on it.
#[test]
fn a_holder_of_two_contended_locks_keeps_the_level_the_other_still_lends() {
    let log = watchdog(20, || {
        let rt =
            Runtime::builder().processors(1).preemption(Preemption::Cooperative).build().unwrap();
        rt.block_on(|| {
            let log: Log = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (a, b) = (Arc::new(Mutex::new(0u32)), Arc::new(Mutex::new(0u32)));
            let (a1, b1, l1) = (a.clone(), b.clone(), log.clone());
            let holder = Builder::new()
                .priority(Priority::Low)
                .spawn(move || {
                    let ga = a1.lock();
                    let gb = b1.lock();
                    let waiter = |m: Arc<Mutex<u32>>| {
                        Builder::new()
                            .priority(Priority::High)
                            .spawn(move || *m.lock() += 1)
                            .unwrap()
                    };
                    let (wa, wb) = (waiter(a1.clone()), waiter(b1.clone()));
                    until_queued(&a1);
                    until_queued(&b1);
                    say(&l1, format!("holding both at {:?}", current().priority()));
                    drop(ga);
                    say(&l1, format!("released one at {:?}", current().priority()));
                    drop(gb);
                    say(&l1, format!("released both at {:?}", current().priority()));
                    wa.join().unwrap();
                    wb.join().unwrap();
                })
                .unwrap();
            holder.join().unwrap();
            assert_eq!((*a.lock(), *b.lock()), (1, 1));
            let log = log.lock().unwrap().clone();
            log
        })
        .unwrap()
    });
    assert_eq!(
        log,
        ["holding both at High", "released one at High", "released both at Low"],
        "the holder's level as it released its locks"
    );
}

/// Holders waiting on each other in a cycle, and a `High` thread waiting on one of the
/// locks: the walk goes round the cycle once and stops, and the runtime reports the
/// deadlock with the three threads parked on the two mutexes.
#[test]
fn a_cycle_of_holders_is_reported_as_a_deadlock() {
    watchdog(20, || {
        for processors in [1, 2] {
            let rt = Runtime::builder()
                .processors(processors)
                .preemption(Preemption::Cooperative)
                .build()
                .unwrap();
            let err = rt
                .block_on(|| {
                    let (a, b) = (Arc::new(Mutex::new(())), Arc::new(Mutex::new(())));
                    let (held_tx, held_rx) = channel::<()>(1);
                    let (go_tx, go_rx) = channel::<()>(1);
                    let (a1, b1) = (a.clone(), b.clone());
                    let _t1 = Builder::new()
                        .priority(Priority::Low)
                        .spawn(move || {
                            let _ga = a1.lock();
                            held_tx.send(()).unwrap();
                            go_rx.recv().unwrap();
                            let _gb = b1.lock();
                        })
                        .unwrap();
                    held_rx.recv().unwrap();
                    let (a2, b2) = (a.clone(), b.clone());
                    let _t2 = spawn(move || {
                        let _gb = b2.lock();
                        let _ga = a2.lock();
                    });
                    until_queued(&a);
                    go_tx.send(()).unwrap();
                    until_queued(&b);
                    let a3 = a.clone();
                    let high =
                        Builder::new().priority(Priority::High).spawn(move || drop(a3.lock()));
                    let _ = high.unwrap().join();
                })
                .unwrap_err();
            let on_mutexes =
                err.threads.iter().filter(|t| matches!(t.waiting_on, WaitReason::Mutex(_)));
            assert_eq!(on_mutexes.count(), 3, "{err}");
        }
    });
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
