//! Stress: thousands of user threads with random yields, random short blocking
//! system calls (explicit and not), and mutex, condvar and channel traffic, on
//! 1, 2 and 4 processors, in every scheduling mode, and on a runtime whose
//! processor count changes at random meanwhile. Every work item carries an
//! identity; the checks are that each is produced once, consumed once, and
//! that every thread ran its body exactly once. Nothing here depends on
//! timing; the watchdog only catches hangs.

mod common;

use common::{builder_in, runtime, runtime_in, watchdog, Mode, MODES, PROCESSORS};
use schedlab_rt::sync::{channel, Condvar, Mutex};
use schedlab_rt::{spawn, yield_now};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// A tiny deterministic generator (each thread seeds its own).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn maybe_yield(&mut self) {
        for _ in 0..self.next() % 3 {
            yield_now();
        }
    }
    /// Now and then, blocks in the kernel for a moment: explicitly (through
    /// `blocking`) or behind the runtime's back (`std::thread::sleep`), so
    /// processors are handed off under load.
    fn maybe_block(&mut self) {
        match self.next() % 211 {
            0 => schedlab_rt::blocking::nanosleep(std::time::Duration::from_micros(60)),
            1 => std::thread::sleep(std::time::Duration::from_micros(120)),
            _ => {}
        }
    }
}

fn stress(processors: usize, mode: Mode, threads: usize, items_per_thread: usize) {
    stress_on(&runtime_in(processors, mode), threads, items_per_thread);
}

fn stress_on(rt: &schedlab_rt::Runtime, threads: usize, items_per_thread: usize) {
    rt.block_on(move || {
        let ran: Arc<Vec<AtomicU8>> = Arc::new((0..threads).map(|_| AtomicU8::new(0)).collect());
        let received: Arc<Vec<AtomicU8>> =
            Arc::new((0..threads * items_per_thread).map(|_| AtomicU8::new(0)).collect());
        let counter = Arc::new(Mutex::new(0usize));
        let gate = Arc::new((Mutex::new(0usize), Condvar::new()));
        let (tx, rx) = channel::<usize>(8);

        // Consumers: drain the channel, marking each item once.
        let consumers: Vec<_> = (0..4)
            .map(|c| {
                let (rx, received) = (rx.clone(), received.clone());
                spawn(move || {
                    let mut rng = Rng(0xC0FFEE + c);
                    let mut n = 0;
                    while let Ok(item) = rx.recv() {
                        assert_eq!(
                            received[item].fetch_add(1, Ordering::SeqCst),
                            0,
                            "item {item} twice"
                        );
                        n += 1;
                        rng.maybe_yield();
                        rng.maybe_block();
                    }
                    n
                })
            })
            .collect();
        drop(rx);

        // Producers: each runs once, bumps the counter, sends its items, and
        // signals the gate.
        let producers: Vec<_> = (0..threads)
            .map(|t| {
                let (ran, counter, gate, tx) =
                    (ran.clone(), counter.clone(), gate.clone(), tx.clone());
                spawn(move || {
                    assert_eq!(ran[t].fetch_add(1, Ordering::SeqCst), 0, "thread {t} ran twice");
                    let mut rng = Rng(t as u64 * 2 + 1);
                    rng.maybe_yield();
                    *counter.lock() += 1;
                    for i in 0..items_per_thread {
                        tx.send(t * items_per_thread + i).unwrap();
                        rng.maybe_yield();
                        rng.maybe_block();
                    }
                    let (m, cv) = &*gate;
                    *m.lock() += 1;
                    cv.notify_all();
                })
            })
            .collect();
        drop(tx);

        // Wait on the condvar until every producer signalled.
        {
            let (m, cv) = &*gate;
            let g = cv.wait_while(m.lock(), |done| *done < threads);
            assert_eq!(*g, threads);
        }
        for p in producers {
            p.join().unwrap();
        }
        let consumed: usize = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(consumed, threads * items_per_thread, "nothing lost");
        assert_eq!(*counter.lock(), threads);
        assert!(ran.iter().all(|r| r.load(Ordering::SeqCst) == 1), "every thread ran once");
        assert!(received.iter().all(|r| r.load(Ordering::SeqCst) == 1), "every item received once");
    })
    .unwrap();
}

#[test]
fn stress_thousands_of_threads_on_1_2_and_4_processors_in_every_scheduling_mode() {
    watchdog(120, || {
        for mode in MODES {
            for p in PROCESSORS {
                eprintln!("stress {p} {mode:?}");
                stress(p, mode, 2000, 4);
            }
        }
    });
}

#[test]
fn stress_while_the_processor_count_changes_at_random() {
    watchdog(240, || {
        for mode in MODES {
            eprintln!("stress resizing {mode:?}");
            let rt = builder_in(4, mode).max_processors(4).build().unwrap();
            let stop = AtomicBool::new(false);
            let resizes = std::thread::scope(|s| {
                let resizer = s.spawn(|| {
                    let mut rng = Rng(0x5EED ^ mode as u64);
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        rt.set_processors(1 + rng.next() as usize % 4).unwrap();
                        n += 1;
                        std::thread::sleep(std::time::Duration::from_micros(rng.next() % 500));
                    }
                    n
                });
                stress_on(&rt, 2000, 4);
                stop.store(true, Ordering::SeqCst);
                resizer.join().unwrap()
            });
            assert!(resizes > 0);
            eprintln!("  {resizes} resizes");
            // And once more at the count it was left with, then grown back.
            stress_on(&rt, 200, 4);
            rt.set_processors(4).unwrap();
            stress_on(&rt, 200, 4);
        }
    });
}

#[test]
fn stress_spawn_and_join_in_waves() {
    watchdog(120, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let total = rt
                .block_on(|| {
                    let mut total = 0u64;
                    for wave in 0..20u64 {
                        let hs: Vec<_> = (0..500u64)
                            .map(|i| {
                                spawn(move || {
                                    if i % 3 == 0 {
                                        yield_now();
                                    }
                                    wave * 500 + i
                                })
                            })
                            .collect();
                        total += hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>();
                    }
                    total
                })
                .unwrap();
            assert_eq!(total, (0..10_000u64).sum::<u64>());
        }
    });
}

#[test]
fn nested_spawns_form_a_tree() {
    fn tree(depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let l = spawn(move || tree(depth - 1));
        let r = spawn(move || tree(depth - 1));
        yield_now();
        l.join().unwrap() + r.join().unwrap()
    }
    watchdog(120, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            assert_eq!(rt.block_on(|| tree(10)).unwrap(), 1024);
        }
    });
}

/// Drops its counter's count when dropped, wherever that happens (on the
/// exiting thread, on a joiner, on another processor): every value must be
/// dropped exactly once.
struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn stress_detached_and_joined_threads_race_their_exits() {
    // Threads whose handles are dropped before, during or after their exit,
    // joined by the spawner or by another user thread (often on another
    // processor), with `Thread` handles that outlive them and get unparked
    // late, and results that must be dropped exactly once.
    watchdog(120, || {
        for p in PROCESSORS {
            let rt = runtime(p);
            let live = Arc::new(AtomicUsize::new(0));
            let ran = Arc::new(AtomicUsize::new(0));
            let (l, r) = (live.clone(), ran.clone());
            rt.block_on(move || {
                let mut rng = Rng(p as u64 + 7);
                let (tx, rx) = channel::<schedlab_rt::JoinHandle<Counted>>(0);
                // A joiner thread that joins what it is handed.
                let joiner = spawn(move || {
                    let mut n = 0;
                    for h in rx.iter() {
                        drop(h.join().unwrap());
                        n += 1;
                    }
                    n
                });
                let mut threads = Vec::new();
                let mut handed = 0;
                for i in 0..3000u64 {
                    let (l2, r2) = (l.clone(), r.clone());
                    l.fetch_add(1, Ordering::SeqCst);
                    let h = spawn(move || {
                        if i % 4 == 0 {
                            yield_now();
                        }
                        // Last: once all have counted, none switches again
                        // before it completes.
                        r2.fetch_add(1, Ordering::SeqCst);
                        Counted(l2)
                    });
                    threads.push(h.thread().clone());
                    match rng.next() % 4 {
                        0 => drop(h), // detached at once
                        1 => drop(h.join().unwrap()),
                        2 => {
                            tx.send(h).unwrap();
                            handed += 1;
                        }
                        _ => {
                            // Detached after a yield: often while it runs or exits.
                            yield_now();
                            drop(h);
                        }
                    }
                    rng.maybe_yield();
                }
                drop(tx);
                assert_eq!(joiner.join().unwrap(), handed);
                // Unparking threads long gone is harmless.
                for t in &threads {
                    t.unpark();
                }
                // Let detached stragglers finish.
                while r.load(Ordering::SeqCst) < 3000 {
                    yield_now();
                }
            })
            .unwrap();
            drop(rt);
            assert_eq!(ran.load(Ordering::SeqCst), 3000, "every thread ran once ({p} processors)");
            assert_eq!(
                live.load(Ordering::SeqCst),
                0,
                "every result dropped once ({p} processors)"
            );
        }
    });
}
