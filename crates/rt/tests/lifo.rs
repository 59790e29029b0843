//! The next slot (`queue.rs`): spawned and woken threads run newest-first, so
//! a spawn tree runs depth-first; the slot cannot starve the queue; and a
//! thread in the slot of a busy processor is taken by an idle one
//! (`progress.rs` checks that last part for spawns).

mod common;

use common::{runtime, runtime_in, watchdog, Mode};
use schedlab_rt::sync::channel;
use schedlab_rt::{spawn, yield_now};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Sums a tree of `fanout^depth` leaves, each node a user thread that spawns
/// its children and joins them, recording the most threads alive at once.
fn tree(depth: u32, fanout: u64, alive: &'static AtomicUsize, peak: &'static AtomicUsize) -> u64 {
    let now = alive.fetch_add(1, Ordering::Relaxed) + 1;
    peak.fetch_max(now, Ordering::Relaxed);
    let sum = if depth == 0 {
        1
    } else {
        let hs: Vec<_> =
            (0..fanout).map(|_| spawn(move || tree(depth - 1, fanout, alive, peak))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    };
    alive.fetch_sub(1, Ordering::Relaxed);
    sum
}

/// 10^5 leaves. Breadth-first (a FIFO queue) starts nearly the whole tree
/// before any of it finishes (~100,000 threads alive); a next slot alone,
/// with displaced threads going to the back of the queue, still ~8,300;
/// newest-first throughout keeps the current path and its siblings: at most
/// the root and `fanout` threads a level below it (51; 44 measured), a few
/// paths more with thieves.
///
/// Cooperative runtimes: the order is then the scheduler's alone. Under the
/// default 10 ms quantum a loaded machine deschedules the processor's kernel
/// thread for longer than a quantum, the monitor preempts the user thread it
/// finds running (to the back of the queue), and queued siblings start their
/// subtrees before it is back: 101–119 alive at load 10, 200–281 under
/// `stress-ng --cpu 8`, a measure of the load, not of the order (44 every
/// time cooperative, or with transparent blocking alone, under the same
/// stress).
#[test]
fn a_spawn_tree_runs_depth_first() {
    static ALIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);
    const DEPTH: u32 = 5;
    const FANOUT: u64 = 10;
    let path = 1 + DEPTH as usize * FANOUT as usize;
    for (processors, bound) in [(1, path), (2, 1_000)] {
        PEAK.store(0, Ordering::Relaxed);
        let leaves = watchdog(120, move || {
            runtime_in(processors, Mode::Cooperative)
                .block_on(|| tree(DEPTH, FANOUT, &ALIVE, &PEAK))
                .unwrap()
        });
        assert_eq!(leaves, FANOUT.pow(DEPTH));
        let peak = PEAK.load(Ordering::Relaxed);
        assert!(
            peak <= bound,
            "{processors} processors: {peak} threads alive at once: the tree ran breadth-first"
        );
    }
}

/// Two threads that wake each other through channels keep refilling the
/// next slot; a third, queued, thread still runs within a few switches.
#[test]
fn a_ping_pong_through_the_next_slot_cannot_starve_a_queued_thread() {
    watchdog(60, || {
        let rounds = runtime(1)
            .block_on(|| {
                let ran = Arc::new(AtomicBool::new(false));
                let (to_b, from_a) = channel::<bool>(0);
                let (to_a, from_b) = channel::<bool>(0);
                let r = ran.clone();
                let a = spawn(move || {
                    let mut rounds = 0u64;
                    while !r.load(Ordering::Relaxed) {
                        to_b.send(true).unwrap();
                        from_b.recv().unwrap();
                        rounds += 1;
                        assert!(rounds < 1_000, "the queued thread starved");
                    }
                    to_b.send(false).unwrap();
                    rounds
                });
                let b = spawn(move || {
                    while from_a.recv().unwrap() {
                        to_a.send(true).unwrap();
                    }
                });
                // Queued behind the ping-pong (which holds the slot).
                yield_now();
                let third = spawn(move || ran.store(true, Ordering::Relaxed));
                yield_now();
                third.join().unwrap();
                b.join().unwrap();
                a.join().unwrap()
            })
            .unwrap();
        assert!(rounds < 1_000);
    });
}

/// Wakes a thread into the caller's next slot, then spins without yielding
/// until it has run: only another processor can run it.
fn wake_into_slot_then_spin() {
    let (tx, rx) = channel::<()>(1);
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let waiter = spawn(move || {
        rx.recv().unwrap();
        d.store(true, Ordering::Release);
    });
    // Let the waiter block on the channel.
    while !waiter.is_finished() && tx.try_send(()).is_err() {
        yield_now();
    }
    // The send above woke it into our slot; we now spin.
    let start = std::time::Instant::now();
    while !done.load(Ordering::Acquire) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "the woken thread was stranded in the slot"
        );
        std::hint::spin_loop();
    }
    waiter.join().unwrap();
}

/// A thread woken into the next slot of a processor whose running thread
/// then spins without yielding is run by the idle processor.
#[test]
fn a_woken_thread_in_a_busy_processors_slot_is_stolen() {
    watchdog(60, || runtime(2).block_on(wake_into_slot_then_spin).unwrap());
}

/// As above, after a long conversation on the waker's processor: the idle
/// processor that watched it sleeps deaf to next slots (`idle.rs`, "Slots"),
/// and must still take a thread the waker then leaves in its slot while it
/// spins.
#[test]
fn a_slot_thread_is_stolen_after_a_conversation_ends_in_a_spin() {
    watchdog(60, || {
        runtime(2)
            .block_on(|| {
                // A ping-pong with a partner for 100 ms: long past the idle
                // processor's search, so it goes to sleep having seen us switch.
                let (ping_tx, ping_rx) = channel::<bool>(1);
                let (pong_tx, pong_rx) = channel::<()>(1);
                let partner = spawn(move || {
                    while ping_rx.recv().unwrap() {
                        pong_tx.send(()).unwrap();
                    }
                });
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_millis(100) {
                    for _ in 0..100 {
                        ping_tx.send(true).unwrap();
                        pong_rx.recv().unwrap();
                    }
                }
                ping_tx.send(false).unwrap();
                partner.join().unwrap();
                wake_into_slot_then_spin();
            })
            .unwrap();
    });
}
