//! Behaviour of the runtime and the thread API: block_on, spawn/join,
//! panics, yield, sleep, park/unpark, names, events, deadlock reports,
//! user-thread-locals, and shutdown.

mod common;

use common::{runtime, watchdog, PROCESSORS};
use schedlab_rt::sync::{channel, Mutex};
use schedlab_rt::{
    current, park, sleep, spawn, yield_now, Builder, Cancelled, Event, LocalKey, Runtime,
    WaitReason,
};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

#[test]
fn block_on_returns_the_closures_value() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            assert_eq!(rt.block_on(|| 6 * 7).unwrap(), 42);
            assert_eq!(rt.block_on(|| "again").unwrap(), "again");
        }
    });
}

#[test]
fn spawned_threads_return_their_results_through_join() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let sum = rt
                .block_on(|| {
                    let hs: Vec<_> = (0..100u64).map(|i| spawn(move || i * 2)).collect();
                    hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
                })
                .unwrap();
            assert_eq!(sum, 9900);
        }
    });
}

#[test]
fn a_panic_is_handed_to_join_and_the_processor_keeps_running() {
    watchdog(30, || {
        let rt = runtime(1);
        let (msg, after) = rt
            .block_on(|| {
                let h = spawn(|| -> u32 { panic!("boom in a user thread") });
                let err = h.join().unwrap_err();
                let msg = err.downcast_ref::<&str>().copied().unwrap_or("?").to_owned();
                (msg, spawn(|| 5).join().unwrap())
            })
            .unwrap();
        assert_eq!(msg, "boom in a user thread");
        assert_eq!(after, 5);
    });
}

#[test]
#[should_panic(expected = "main panics")]
fn a_panic_in_the_main_thread_is_resumed_by_block_on() {
    let rt = runtime(1);
    let _ = rt.block_on(|| panic!("main panics"));
}

#[test]
fn yield_now_round_robins_on_one_processor() {
    watchdog(30, || {
        let rt = runtime(1);
        let log = rt
            .block_on(|| {
                let log = Arc::new(StdMutex::new(Vec::new()));
                let hs: Vec<_> = (0..3)
                    .map(|i| {
                        let log = log.clone();
                        spawn(move || {
                            for round in 0..3 {
                                log.lock().unwrap().push((round, i));
                                yield_now();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                Arc::try_unwrap(log).unwrap().into_inner().unwrap()
            })
            .unwrap();
        // Round robin: every thread's round r before anyone's round r + 1
        // (the order within a round is the scheduler's: newest-first spawns).
        let rounds: Vec<u32> = log.iter().map(|&(round, _)| round).collect();
        assert!(rounds.windows(2).all(|w| w[0] <= w[1]), "not round robin: {log:?}");
        for r in 0..3 {
            let mut who: Vec<u32> = log.iter().filter(|e| e.0 == r).map(|e| e.1).collect();
            who.sort();
            assert_eq!(who, [0, 1, 2], "round {r}: {log:?}");
        }
    });
}

#[test]
fn sleep_waits_at_least_the_duration_and_lets_others_run() {
    watchdog(30, || {
        let rt = runtime(1);
        rt.block_on(|| {
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            let other = spawn(move || r.fetch_add(1, Ordering::SeqCst));
            let start = Instant::now();
            sleep(Duration::from_millis(20));
            assert!(start.elapsed() >= Duration::from_millis(20));
            assert_eq!(ran.load(Ordering::SeqCst), 1, "the other thread ran meanwhile");
            other.join().unwrap();
        })
        .unwrap();
    });
}

#[test]
fn current_reports_id_and_name() {
    watchdog(30, || {
        let rt = runtime(2);
        rt.block_on(|| {
            assert_eq!(current().name(), Some("main"));
            let h = Builder::new()
                .name("worker-7")
                .stack_size(32 * 1024)
                .spawn(|| {
                    (current().id(), current().name().map(str::to_owned), current().stack_size())
                })
                .unwrap();
            let expect_id = h.thread().id();
            let (id, name, size) = h.join().unwrap();
            assert_eq!(id, expect_id);
            assert_eq!(name.as_deref(), Some("worker-7"));
            assert_eq!(size, 32 * 1024);
            assert_ne!(id, current().id());
        })
        .unwrap();
    });
}

#[test]
fn unpark_before_park_makes_park_return() {
    watchdog(30, || {
        let rt = runtime(1);
        rt.block_on(|| {
            current().unpark();
            park();
        })
        .unwrap();
    });
}

#[test]
fn unpark_wakes_a_parked_thread() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            rt.block_on(|| {
                let flag = Arc::new(AtomicUsize::new(0));
                let f = flag.clone();
                let h = spawn(move || {
                    while f.load(Ordering::Acquire) == 0 {
                        park();
                    }
                });
                yield_now();
                flag.store(1, Ordering::Release);
                h.thread().unpark();
                h.join().unwrap();
            })
            .unwrap();
        }
    });
}

#[test]
fn park_timeout_returns_after_its_time_without_an_unpark() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            rt.block_on(|| {
                // Nobody unparks: only the timer can end these waits (a
                // spurious return is allowed, so loop to the deadline).
                let d = Duration::from_millis(5);
                let end = Instant::now() + d;
                let mut waits = 0;
                while Instant::now() < end {
                    schedlab_rt::park_timeout(end - Instant::now());
                    waits += 1;
                }
                assert!(waits >= 1);
            })
            .unwrap();
        }
    });
}

#[test]
fn park_timeout_returns_at_an_unpark_before_its_time() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            rt.block_on(|| {
                let flag = Arc::new(AtomicUsize::new(0));
                let f = flag.clone();
                let h = spawn(move || {
                    // An hour: only the unpark can end this in the test's time.
                    while f.load(Ordering::Acquire) == 0 {
                        schedlab_rt::park_timeout(Duration::from_secs(3600));
                    }
                });
                yield_now();
                flag.store(1, Ordering::Release);
                h.thread().unpark();
                h.join().unwrap();
            })
            .unwrap();
        }
    });
}

#[test]
fn unpark_from_an_os_thread_wakes_a_user_thread() {
    watchdog(30, || {
        let rt = Runtime::builder().processors(2).deadlock_detection(false).build().unwrap();
        let flag = Arc::new(AtomicUsize::new(0));
        let f = flag.clone();
        let h = rt.spawn(move || {
            while f.load(Ordering::Acquire) == 0 {
                park();
            }
            7
        });
        flag.store(1, Ordering::Release);
        h.thread().unpark();
        assert_eq!(h.join().unwrap(), 7, "join from an OS thread");
    });
}

#[test]
fn deadlock_is_reported_with_the_parked_threads() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let err = rt
                .block_on(|| {
                    let (tx, rx) = channel::<u32>(1);
                    let h = Builder::new().name("receiver").spawn(move || rx.recv()).unwrap();
                    let _ = h.join(); // never returns: we still hold `tx`
                    drop(tx);
                })
                .unwrap_err();
            assert_eq!(err.threads.len(), 2, "{err}");
            assert_eq!(err.threads[0].name.as_deref(), Some("main"));
            assert!(matches!(err.threads[0].waiting_on, WaitReason::Join(_)));
            assert_eq!(err.threads[1].name.as_deref(), Some("receiver"));
            assert!(matches!(err.threads[1].waiting_on, WaitReason::ChannelRecv(_)));
            let text = err.to_string();
            assert!(text.contains("'receiver' waits on channel receive"), "{text}");
            // The runtime is still usable, and dropping it does not hang.
            assert_eq!(rt.block_on(|| 1).unwrap(), 1);
        }
    });
}

#[test]
fn lock_order_inversion_is_a_deadlock() {
    watchdog(30, || {
        let rt = runtime(2);
        let err = rt
            .block_on(|| {
                let a = Arc::new(Mutex::new(()));
                let b = Arc::new(Mutex::new(()));
                let barrier = Arc::new(schedlab_rt::sync::Barrier::new(2));
                let (a2, b2, bar2) = (a.clone(), b.clone(), barrier.clone());
                let h = spawn(move || {
                    let _gb = b2.lock();
                    bar2.wait();
                    let _ga = a2.lock();
                });
                let _ga = a.lock();
                barrier.wait();
                let _gb = b.lock();
                drop(h);
            })
            .unwrap_err();
        let mutexes =
            err.threads.iter().filter(|t| matches!(t.waiting_on, WaitReason::Mutex(_))).count();
        assert_eq!(mutexes, 2, "{err}");
    });
}

#[test]
fn an_os_thread_sending_later_wakes_block_on() {
    watchdog(30, || {
        for p in PROCESSORS {
            for delay_ms in [50, 200] {
                let rt = runtime(p);
                // Made on this OS thread: the runtime knows an OS thread may
                // use it, so the waiting main thread is not a deadlock.
                let (tx, rx) = channel::<u32>(0);
                let sender = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(delay_ms));
                    tx.send(7).unwrap();
                });
                assert_eq!(rt.block_on(move || rx.recv()).unwrap(), Ok(7), "{p} processors");
                sender.join().unwrap();
            }
        }
    });
}

#[test]
fn a_user_thread_waiting_on_a_channel_an_os_thread_waits_on_is_not_a_deadlock() {
    watchdog(30, || {
        let rt = runtime(1);
        let (req_tx, req_rx) = channel::<u32>(0);
        let (tx, rx) = channel::<u32>(0);
        // The OS thread waits on `req_rx` (made external by that wait too),
        // then sends the answer after a pause.
        let os = std::thread::spawn(move || {
            let v = req_rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(100));
            tx.send(v * 2).unwrap();
        });
        assert_eq!(
            rt.block_on(move || {
                req_tx.send(21).unwrap();
                rx.recv()
            })
            .unwrap(),
            Ok(42)
        );
        os.join().unwrap();
    });
}

#[test]
fn a_deadlock_on_user_made_channels_is_reported_next_to_an_os_thread_channel() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let (os_tx, os_rx) = channel::<u32>(1);
            let os = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                os_tx.send(1).unwrap();
            });
            let err = rt
                .block_on(move || {
                    assert_eq!(os_rx.recv(), Ok(1));
                    // Made by a user thread, used only by user threads.
                    let (tx, rx) = channel::<u32>(1);
                    let h = Builder::new().name("receiver").spawn(move || rx.recv()).unwrap();
                    let _ = h.join(); // never returns: we still hold `tx`
                    drop(tx);
                })
                .unwrap_err();
            assert_eq!(err.threads.len(), 2, "{err}");
            os.join().unwrap();
        }
    });
}

#[test]
fn sleeping_threads_are_not_a_deadlock() {
    watchdog(30, || {
        let rt = runtime(2);
        rt.block_on(|| {
            let h = spawn(|| sleep(Duration::from_millis(10)));
            h.join().unwrap();
        })
        .unwrap();
    });
}

#[test]
fn events_trace_the_life_of_threads() {
    watchdog(30, || {
        let events = Arc::new(StdMutex::new(Vec::new()));
        let e = events.clone();
        let rt = Runtime::builder()
            .processors(2)
            .on_event(move |ev| e.lock().unwrap().push(ev.clone()))
            .build()
            .unwrap();
        rt.block_on(|| {
            let hs: Vec<_> = (0..10).map(|_| spawn(yield_now)).collect();
            for h in hs {
                h.join().unwrap();
            }
        })
        .unwrap();
        drop(rt);
        let events = events.lock().unwrap();
        let count = |f: &dyn Fn(&Event) -> bool| events.iter().filter(|e| f(e)).count();
        assert_eq!(count(&|e| matches!(e, Event::NewProcessor { .. })), 2);
        assert_eq!(count(&|e| matches!(e, Event::Spawned { .. })), 11);
        assert_eq!(count(&|e| matches!(e, Event::Exited { .. })), 11);
        assert!(count(&|e| matches!(e, Event::Switched { .. })) >= 22);
        let parked = count(&|e| matches!(e, Event::Parked { .. }));
        let unparked = count(&|e| matches!(e, Event::Unparked { .. }));
        assert_eq!(parked, unparked, "every park ended in an unpark");
    });
}

#[test]
fn user_thread_locals_are_per_thread_and_dropped_at_exit() {
    struct Noisy(Arc<AtomicUsize>);
    impl Drop for Noisy {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    static VALUE: LocalKey<Cell<u32>> = LocalKey::new(|| Cell::new(0));
    static DROPS: LocalKey<StdMutex<Option<Noisy>>> = LocalKey::new(|| StdMutex::new(None));
    watchdog(30, || {
        let rt = runtime(2);
        rt.block_on(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..20u32)
                .map(|i| {
                    let d = drops.clone();
                    spawn(move || {
                        DROPS.with(|n| *n.lock().unwrap() = Some(Noisy(d)));
                        VALUE.with(|v| v.set(i));
                        for _ in 0..5 {
                            yield_now();
                            assert_eq!(VALUE.with(Cell::get), i);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(drops.load(Ordering::SeqCst), 20, "destructors ran before join returned");
        })
        .unwrap();
    });
}

#[test]
fn dropping_a_runtime_with_blocked_and_runnable_threads_does_not_hang() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = Runtime::builder().processors(p).deadlock_detection(false).build().unwrap();
            let (tx, rx) = channel::<()>(1);
            let blocked = rt.spawn(move || rx.recv());
            let spinning = rt.spawn(|| loop {
                yield_now();
            });
            drop(rt);
            drop((tx, blocked, spinning));
        }
    });
}

/// Whether `r` is the `Err` of a join on a thread its dropped runtime cancelled.
fn is_cancelled<T>(r: &Result<T, Box<dyn std::any::Any + Send>>) -> bool {
    matches!(r, Err(p) if p.is::<Cancelled>())
}

#[test]
fn join_after_the_runtime_is_dropped_returns_cancelled() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = Runtime::builder().processors(p).deadlock_detection(false).build().unwrap();
            let (tx, rx) = channel::<()>(1);
            let parked = rt.spawn(move || rx.recv());
            let yielding = rt.spawn(|| loop {
                yield_now();
            });
            let done = rt.spawn(|| 5);
            std::thread::sleep(Duration::from_millis(20));
            drop(rt);
            assert!(is_cancelled(&parked.join()), "{p} processors: the parked thread");
            assert!(is_cancelled(&yielding.join()), "{p} processors: the yielding thread");
            // Finished before the drop: its result is still there.
            assert_eq!(done.join().unwrap(), 5);
            drop(tx);
        }
    });
}

#[test]
fn try_send_to_a_receiver_parked_when_its_runtime_dropped_gives_the_value_back() {
    watchdog(30, || {
        for p in PROCESSORS {
            for cap in [0, 1] {
                let rt =
                    Runtime::builder().processors(p).deadlock_detection(false).build().unwrap();
                let (tx, rx) = channel::<String>(cap);
                let (ready_tx, ready_rx) = std::sync::mpsc::channel();
                let receiver = rt.spawn(move || {
                    ready_tx.send(()).unwrap();
                    rx.recv()
                });
                ready_rx.recv().unwrap();
                drop(rt); // the receiver is parked in `recv` (or about to be: the drop waits)
                match tx.try_send("kept".to_string()) {
                    // Rendezvous: nobody alive to take it.
                    Err(schedlab_rt::sync::TrySendError::Full(v)) => {
                        assert_eq!(cap, 0);
                        assert_eq!(v, "kept");
                    }
                    // Buffered: it waits in the buffer, not in a dead thread's slot.
                    Ok(()) => assert_eq!(cap, 1),
                    Err(e) => panic!("{p} processors, capacity {cap}: {e:?}"),
                }
                assert!(is_cancelled(&receiver.join()));
            }
        }
    });
}

#[test]
fn permits_and_locks_are_not_handed_to_threads_of_a_dropped_runtime() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = Runtime::builder().processors(p).deadlock_detection(false).build().unwrap();
            let sem = Arc::new(schedlab_rt::sync::Semaphore::new(0));
            let lock = Arc::new(schedlab_rt::sync::RwLock::new(0u32));
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let held = lock.write();
            let (s2, l2, r2) = (sem.clone(), lock.clone(), ready_tx.clone());
            let acquirer = rt.spawn(move || {
                r2.send(()).unwrap();
                s2.acquire();
            });
            let writer = rt.spawn(move || {
                ready_tx.send(()).unwrap();
                *l2.write() += 1;
            });
            ready_rx.recv().unwrap();
            ready_rx.recv().unwrap();
            drop(rt); // both are parked (or about to be: the drop waits)
            sem.release();
            assert!(sem.try_acquire(), "{p} processors: the permit went to a cancelled thread");
            drop(held);
            assert!(
                lock.try_write().is_some(),
                "{p} processors: the lock went to a cancelled thread"
            );
            assert!(is_cancelled(&acquirer.join()));
            assert!(is_cancelled(&writer.join()));
        }
    });
}

#[test]
fn dropping_a_runtime_with_many_parked_threads_cancels_them_all() {
    watchdog(120, || {
        for p in PROCESSORS {
            for round in 0..5 {
                let rt =
                    Runtime::builder().processors(p).deadlock_detection(false).build().unwrap();
                let m = Arc::new(Mutex::new(0u32));
                let cv = Arc::new(schedlab_rt::sync::Condvar::new());
                let (tx, rx) = channel::<u32>(0);
                let (gate_tx, gate_rx) = channel::<u32>(0);
                let mut hs = Vec::new();
                // One thread holds the mutex for good; others queue on it.
                let (m1, gate) = (m.clone(), gate_rx.clone());
                hs.push(rt.spawn(move || {
                    let _g = m1.lock();
                    let _ = gate.recv();
                }));
                for i in 0..40u32 {
                    let (m, cv, rx, tx) = (m.clone(), cv.clone(), rx.clone(), tx.clone());
                    hs.push(rt.spawn(move || match i % 5 {
                        0 => drop(m.lock()),
                        1 => {
                            // Condvar waiters on a second mutex nobody holds.
                            let m2 = Mutex::new(false);
                            let g = m2.lock();
                            drop(cv.wait(g));
                        }
                        2 => drop(rx.recv()),
                        3 => drop(tx.send(i)),
                        _ => sleep(Duration::from_secs(3600)),
                    }));
                }
                // Joiners of threads that never finish.
                let inner: Vec<_> = (0..10)
                    .map(|_| {
                        let gate = gate_rx.clone();
                        rt.spawn(move || {
                            let h = spawn(move || {
                                let _ = gate.recv();
                            });
                            drop(h.join());
                        })
                    })
                    .collect();
                hs.extend(inner);
                std::thread::sleep(Duration::from_millis(if round % 2 == 0 { 0 } else { 20 }));
                drop(rt);
                for h in hs {
                    let r = h.join();
                    // Some may have finished (a send met a receive) before the drop.
                    assert!(r.is_ok() || is_cancelled(&r), "{p} processors, round {round}");
                }
                drop((gate_tx, tx, rx));
            }
        }
    });
}

#[test]
fn many_runtimes_can_coexist() {
    watchdog(30, || {
        // A user thread of `a` waits for one of `b`: a waker from outside
        // `a`, so `a` must not take its parked main thread for a deadlock.
        let a = Runtime::builder().processors(1).deadlock_detection(false).build().unwrap();
        let b = runtime(2);
        let hb = b.spawn(|| 2);
        assert_eq!(a.block_on(move || hb.join().unwrap() + 1).unwrap(), 3);
    });
}

#[test]
fn invalid_processor_counts_are_refused() {
    assert!(Runtime::builder().processors(0).build().is_err());
    assert!(Runtime::builder().processors(65).build().is_err());
}

/// A runtime handle moves and is shared between OS threads like any
/// `std` handle (`Runtime: Send + Sync`).
#[test]
fn a_runtime_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<schedlab_rt::Runtime>();
}
