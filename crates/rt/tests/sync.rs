//! The `sync` primitives under user threads: mutual exclusion, condition
//! variables, semaphores, barriers, reader-writer locks and channels, and
//! their use from ordinary OS threads.

mod common;

use common::{runtime, watchdog, PROCESSORS};
use schedlab_rt::sync::{
    channel, Barrier, Condvar, Mutex, RecvError, RwLock, Semaphore, TryRecvError, TrySendError,
};
use schedlab_rt::{spawn, yield_now, Runtime};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn mutex_excludes_across_processors() {
    watchdog(60, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let total = rt
                .block_on(|| {
                    let m = Arc::new(Mutex::new(0u64));
                    let hs: Vec<_> = (0..16)
                        .map(|_| {
                            let m = m.clone();
                            spawn(move || {
                                for i in 0..500 {
                                    let mut g = m.lock();
                                    let v = *g;
                                    if i % 7 == 0 {
                                        yield_now(); // hold the lock across a switch
                                    }
                                    *g = v + 1;
                                }
                            })
                        })
                        .collect();
                    for h in hs {
                        h.join().unwrap();
                    }
                    let v = *m.lock();
                    v
                })
                .unwrap();
            assert_eq!(total, 16 * 500, "on {p} processors");
        }
    });
}

/// A thread that releases the mutex and takes it again at once, yielding while it holds
/// it, once beat a waiter on the same processor every time: the waiter, woken by the
/// unlock, ran only while the lock was held again, and parked again, forever. Past 1 ms of
/// that the mutex hands the lock to the waiter ("Starvation" in `sync/mutex.rs`).
#[test]
fn a_waiter_beaten_for_a_millisecond_is_handed_the_lock() {
    let rt = Runtime::builder()
        .processors(1)
        .preemption(schedlab_rt::Preemption::Cooperative)
        .build()
        .unwrap();
    let got = rt
        .block_on(|| {
            let m = Arc::new(Mutex::new(()));
            let done = Arc::new(AtomicBool::new(false));
            let (m2, done2) = (m.clone(), done.clone());
            let hog = spawn(move || {
                // A hang guard, not a time limit: ten million rounds is seconds.
                let mut rounds = 0u64;
                while !done2.load(Ordering::Relaxed) && rounds < 10_000_000 {
                    let g = m2.lock();
                    yield_now();
                    drop(g);
                    rounds += 1;
                }
                rounds
            });
            // Let the hog take the lock first.
            yield_now();
            let g = m.lock();
            done.store(true, Ordering::Relaxed);
            drop(g);
            let rounds = hog.join().unwrap();
            rounds < 10_000_000
        })
        .unwrap();
    assert!(got, "the waiter never got the lock from a thread that re-takes it at once");
}

#[test]
fn try_lock_fails_while_locked() {
    let m = Mutex::new(1);
    let g = m.lock();
    assert!(m.try_lock().is_none());
    drop(g);
    assert_eq!(*m.try_lock().unwrap(), 1);
}

#[test]
fn condvar_hands_items_from_producer_to_consumers() {
    watchdog(60, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let got = rt
                .block_on(|| {
                    let state = Arc::new((Mutex::new((Vec::<u32>::new(), false)), Condvar::new()));
                    let consumers: Vec<_> = (0..4)
                        .map(|_| {
                            let state = state.clone();
                            spawn(move || {
                                let (m, cv) = &*state;
                                let mut got = 0u64;
                                loop {
                                    let mut g =
                                        cv.wait_while(m.lock(), |(q, done)| q.is_empty() && !*done);
                                    match g.0.pop() {
                                        Some(v) => got += u64::from(v),
                                        None => return got,
                                    }
                                }
                            })
                        })
                        .collect();
                    let (m, cv) = &*state;
                    for i in 1..=1000 {
                        m.lock().0.push(i);
                        cv.notify_one();
                        if i % 10 == 0 {
                            yield_now();
                        }
                    }
                    m.lock().1 = true;
                    cv.notify_all();
                    consumers.into_iter().map(|c| c.join().unwrap()).sum::<u64>()
                })
                .unwrap();
            assert_eq!(got, 1000 * 1001 / 2);
        }
    });
}

#[test]
fn semaphore_bounds_concurrency() {
    watchdog(60, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            rt.block_on(|| {
                let sem = Arc::new(Semaphore::new(3));
                let inside = Arc::new(AtomicUsize::new(0));
                let max = Arc::new(AtomicUsize::new(0));
                let hs: Vec<_> = (0..20)
                    .map(|_| {
                        let (sem, inside, max) = (sem.clone(), inside.clone(), max.clone());
                        spawn(move || {
                            for _ in 0..20 {
                                sem.acquire();
                                let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                                max.fetch_max(n, Ordering::SeqCst);
                                yield_now();
                                inside.fetch_sub(1, Ordering::SeqCst);
                                sem.release();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                assert!(max.load(Ordering::SeqCst) <= 3);
                assert_eq!(sem.available_permits(), 3);
                assert!(sem.try_acquire());
            })
            .unwrap();
        }
    });
}

#[test]
fn barrier_releases_rounds_with_one_leader() {
    watchdog(60, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            rt.block_on(|| {
                let n = 8;
                let barrier = Arc::new(Barrier::new(n));
                let leaders = Arc::new(AtomicUsize::new(0));
                let phase = Arc::new(AtomicUsize::new(0));
                let hs: Vec<_> = (0..n)
                    .map(|_| {
                        let (b, l, ph) = (barrier.clone(), leaders.clone(), phase.clone());
                        spawn(move || {
                            for round in 0..10 {
                                ph.fetch_add(1, Ordering::SeqCst);
                                if b.wait().is_leader() {
                                    l.fetch_add(1, Ordering::SeqCst);
                                }
                                // Everyone arrived at this round before anyone leaves it.
                                assert!(ph.load(Ordering::SeqCst) >= (round + 1) * n);
                                b.wait();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                assert_eq!(leaders.load(Ordering::SeqCst), 10);
            })
            .unwrap();
        }
    });
}

#[test]
fn rwlock_admits_readers_together_and_writers_alone() {
    watchdog(60, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            rt.block_on(|| {
                let lock = Arc::new(RwLock::new(0u64));
                let readers_in = Arc::new(AtomicUsize::new(0));
                let hs: Vec<_> = (0..12)
                    .map(|i| {
                        let (lock, readers_in) = (lock.clone(), readers_in.clone());
                        spawn(move || {
                            for _ in 0..200 {
                                if i % 3 == 0 {
                                    let mut g = lock.write();
                                    assert_eq!(readers_in.load(Ordering::SeqCst), 0);
                                    *g += 1;
                                    yield_now();
                                } else {
                                    let g = lock.read();
                                    readers_in.fetch_add(1, Ordering::SeqCst);
                                    let _ = *g;
                                    yield_now();
                                    readers_in.fetch_sub(1, Ordering::SeqCst);
                                }
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                assert_eq!(*lock.read(), 4 * 200);
                assert!(lock.try_write().is_some());
            })
            .unwrap();
        }
    });
}

#[test]
fn channel_delivers_every_value_exactly_once_mpmc() {
    watchdog(60, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let (sum, count) = rt
                .block_on(|| {
                    let (tx, rx) = channel::<u64>(4);
                    let producers: Vec<_> = (0..4u64)
                        .map(|k| {
                            let tx = tx.clone();
                            spawn(move || {
                                for i in 0..1000 {
                                    tx.send(k * 1000 + i).unwrap();
                                }
                            })
                        })
                        .collect();
                    drop(tx);
                    let consumers: Vec<_> = (0..3)
                        .map(|_| {
                            let rx = rx.clone();
                            spawn(move || {
                                let mut seen = Vec::new();
                                while let Ok(v) = rx.recv() {
                                    seen.push(v);
                                }
                                seen
                            })
                        })
                        .collect();
                    drop(rx);
                    for p in producers {
                        p.join().unwrap();
                    }
                    let mut all: Vec<u64> =
                        consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
                    all.sort_unstable();
                    let count = all.len();
                    all.dedup();
                    assert_eq!(all.len(), count, "no value received twice");
                    (all.iter().sum::<u64>(), count)
                })
                .unwrap();
            assert_eq!(count, 4000);
            assert_eq!(sum, (0..4000u64).sum::<u64>());
        }
    });
}

#[test]
fn channel_reports_disconnection_both_ways() {
    watchdog(30, || {
        let (tx, rx) = channel::<u8>(1);
        tx.send(1).unwrap();
        assert!(matches!(tx.try_send(2), Err(TrySendError::Full(2))));
        drop(tx);
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Err(RecvError));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        let (tx, rx) = channel::<u8>(1);
        drop(rx);
        assert_eq!(tx.send(3).unwrap_err().0, 3);
    });
}

#[test]
fn a_blocked_sender_wakes_when_the_receiver_goes() {
    watchdog(30, || {
        let rt = runtime(2);
        rt.block_on(|| {
            let (tx, rx) = channel::<u8>(1);
            tx.send(0).unwrap();
            let h = spawn(move || tx.send(1));
            yield_now();
            drop(rx);
            assert!(h.join().unwrap().is_err());
        })
        .unwrap();
    });
}

#[test]
fn os_threads_and_user_threads_share_a_channel() {
    watchdog(30, || {
        let rt = Runtime::builder().processors(2).deadlock_detection(false).build().unwrap();
        let (to_user, from_os) = channel::<u32>(2);
        let (to_os, from_user) = channel::<u32>(2);
        let h = rt.spawn(move || {
            while let Ok(v) = from_os.recv() {
                to_os.send(v + 1).unwrap();
            }
        });
        for i in 0..200 {
            to_user.send(i).unwrap();
            assert_eq!(from_user.recv().unwrap(), i + 1);
        }
        drop(to_user);
        h.join().unwrap();
    });
}

#[test]
fn a_rendezvous_channel_completes_a_send_only_when_a_receiver_takes_it() {
    watchdog(30, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            rt.block_on(|| {
                let (tx, rx) = channel::<u32>(0);
                assert!(matches!(tx.try_send(7), Err(TrySendError::Full(7))), "nobody receives");
                let taken = Arc::new(AtomicBool::new(false));
                let t = taken.clone();
                let sender = spawn(move || {
                    tx.send(1).unwrap();
                    // The send returned: the value was taken, not buffered.
                    assert!(t.load(Ordering::Acquire));
                    tx.send(2).unwrap();
                    tx
                });
                // Let the sender block (on 1 processor it runs now).
                for _ in 0..10 {
                    yield_now();
                }
                taken.store(true, Ordering::Release);
                assert_eq!(rx.recv(), Ok(1));
                assert_eq!(rx.recv(), Ok(2));
                let tx = sender.join().unwrap();
                assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
                drop(tx);
                assert_eq!(rx.recv(), Err(RecvError));
            })
            .unwrap();
        }
    });
}

#[test]
fn rendezvous_ping_pong_and_mpmc_deliver_every_value_once() {
    watchdog(60, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let total = rt
                .block_on(|| {
                    let (tx, rx) = channel::<u64>(0);
                    let producers: Vec<_> = (0..3u64)
                        .map(|k| {
                            let tx = tx.clone();
                            spawn(move || {
                                for i in 0..500 {
                                    tx.send(k * 500 + i).unwrap();
                                }
                            })
                        })
                        .collect();
                    drop(tx);
                    let consumers: Vec<_> = (0..2)
                        .map(|_| {
                            let rx = rx.clone();
                            spawn(move || rx.iter().collect::<Vec<u64>>())
                        })
                        .collect();
                    drop(rx);
                    producers.into_iter().for_each(|h| h.join().unwrap());
                    let mut all: Vec<u64> =
                        consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
                    all.sort_unstable();
                    assert_eq!(all, (0..1500).collect::<Vec<u64>>(), "each value exactly once");
                    // Ping-pong over two rendezvous channels.
                    let (to_echo, from_main) = channel::<u64>(0);
                    let (to_main, from_echo) = channel::<u64>(0);
                    let echo = spawn(move || {
                        while let Ok(v) = from_main.recv() {
                            to_main.send(v * 2).unwrap();
                        }
                    });
                    let mut total = 0;
                    for i in 0..1000 {
                        to_echo.send(i).unwrap();
                        total += from_echo.recv().unwrap();
                    }
                    drop(to_echo);
                    echo.join().unwrap();
                    total
                })
                .unwrap();
            assert_eq!(total, 2 * (0..1000u64).sum::<u64>());
        }
    });
}

#[test]
fn a_sender_blocked_on_a_rendezvous_gets_its_value_back_when_receivers_go() {
    watchdog(30, || {
        let rt = runtime(1);
        rt.block_on(|| {
            let (tx, rx) = channel::<String>(0);
            let h = spawn(move || tx.send("kept".to_string()));
            yield_now(); // the sender blocks
            drop(rx);
            assert_eq!(h.join().unwrap().unwrap_err().0, "kept");
        })
        .unwrap();
    });
}

#[test]
fn a_full_channel_hands_a_blocked_senders_value_to_the_buffer_in_order() {
    watchdog(30, || {
        let rt = runtime(1);
        rt.block_on(|| {
            let (tx, rx) = channel::<u32>(2);
            tx.send(0).unwrap();
            tx.send(1).unwrap();
            // Each sender blocks on the full buffer before the next starts.
            let senders: Vec<_> = (2..5)
                .map(|v| {
                    let tx = tx.clone();
                    let h = spawn(move || tx.send(v).unwrap());
                    yield_now();
                    h
                })
                .collect();
            let got: Vec<u32> = (0..5).map(|_| rx.recv().unwrap()).collect();
            assert_eq!(got, [0, 1, 2, 3, 4]);
            senders.into_iter().for_each(|h| h.join().unwrap());
        })
        .unwrap();
    });
}
