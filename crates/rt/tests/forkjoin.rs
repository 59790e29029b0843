//! Fork-join: a thread that has not started holds no stack, and a join that
//! finds its child unstarted runs it inline (`processor/inline.rs`) with the
//! child's own identity; plus a stress of many fork-joins with random yields
//! on two processors with preemption on. Nothing here depends on timing; the
//! watchdog only catches hangs.

mod common;

use common::{runtime, runtime_in, watchdog, MODES};
use schedlab_rt::{current, spawn, stack_usage, yield_now, Builder, LocalKey};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

#[test]
fn a_backlog_of_unstarted_threads_holds_no_stacks() {
    watchdog(60, || {
        let rt = runtime(1);
        rt.block_on(|| {
            let hs: Vec<_> = (0..10_000u64).map(|i| spawn(move || i)).collect();
            // Joined oldest first: none of them is at the top of the queue,
            // so each runs on a stack of its own, newest first.
            assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>(), 49_995_000);
        })
        .unwrap();
        let carved = rt.stack_stats().carved;
        // Before: each queued child took its stack at spawn, 10,001 in all.
        // Now one refill of the processor's pool (half its 1,024) serves.
        assert!(carved <= 512, "{carved} stacks for 10,000 threads run one after another");
    });
}

static LOCAL: LocalKey<Cell<u32>> = LocalKey::new(|| Cell::new(0));

#[test]
fn an_inline_child_keeps_its_identity_and_runs_on_its_joiners_stack() {
    watchdog(60, || {
        let rt = runtime(1);
        rt.block_on(|| {
            LOCAL.with(|c| c.set(7));
            let me = current().id();
            let here = std::hint::black_box(0u8);
            let joiner_sp = &here as *const u8 as usize;
            let h = Builder::new()
                .name("child")
                .spawn(move || {
                    let t = current();
                    assert_ne!(t.id(), me, "the child is not its joiner");
                    assert_eq!(t.name(), Some("child"));
                    let before = LOCAL.with(|c| c.get());
                    LOCAL.with(|c| c.set(99));
                    let (_, size) = stack_usage().expect("a user thread has a stack");
                    let there = std::hint::black_box(0u8);
                    (t.id(), before, size, &there as *const u8 as usize)
                })
                .unwrap();
            let child = h.thread().id();
            let (id, before, size, child_sp) = h.join().unwrap();
            // Inline: the child's frames lie just below the joiner's, on its
            // stack (a stack of its own is another 64 KiB slot or more away).
            assert!(
                child_sp < joiner_sp && joiner_sp - child_sp < 16 * 1024,
                "the child ran at {child_sp:#x}, its joiner at {joiner_sp:#x}"
            );
            assert_eq!(id, child);
            assert_eq!(before, 0, "the child has its own thread-local value");
            assert_eq!(LOCAL.with(|c| c.get()), 7, "the joiner's value is untouched");
            assert_eq!(size, schedlab_rt::DEFAULT_STACK_SIZE.min(64 * 1024));
            assert_eq!(current().id(), me, "the joiner is current again");
            let p = spawn(|| -> u32 { panic!("the child's own panic") }).join();
            let msg = p.unwrap_err().downcast::<&str>().map(|s| *s).unwrap_or_default();
            assert_eq!(msg, "the child's own panic", "a panic is surfaced by join");
        })
        .unwrap();
    });
}

/// Spawns and joins down a chain `depth` long: each level joins a child that
/// is unstarted, so without the stack guard each would nest on the same stack.
fn chain(depth: u32) -> u32 {
    if depth == 0 {
        return 0;
    }
    // Half a KiB of frame kept alive across the join.
    let pad = std::hint::black_box([1u8; 512]);
    let r = spawn(move || chain(depth - 1)).join().unwrap();
    r + u32::from(std::hint::black_box(pad)[0])
}

#[test]
fn a_deep_chain_of_joins_takes_new_stacks_before_the_joiners_runs_out() {
    watchdog(60, || {
        // 2,000 levels of at least 512 bytes each, on 64 KiB stacks: inline
        // all the way down would overflow the first stack ~16 times over.
        let rt = runtime(1);
        assert_eq!(rt.block_on(|| chain(2000)).unwrap(), 2000);
    });
}

/// fib with a thread per call down to `spawn_depth`, random yields in between;
/// marks each spawned call in `ran` (indexed by its path in the tree).
fn fib(n: u32, spawn_depth: u32, path: usize, ran: &Arc<Vec<AtomicU8>>, seed: u64) -> u64 {
    let mut x = seed ^ (path as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut maybe_yield = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x.is_multiple_of(4) {
            yield_now();
        }
    };
    if n < 2 {
        maybe_yield();
        return n as u64;
    }
    if spawn_depth == 0 {
        return fib(n - 1, 0, path, ran, seed) + fib(n - 2, 0, path, ran, seed);
    }
    let left = 2 * path + 1;
    let r = ran.clone();
    let h = spawn(move || {
        assert_eq!(r[left].fetch_add(1, Ordering::Relaxed), 0, "a child ran twice");
        fib(n - 1, spawn_depth - 1, left, &r, seed)
    });
    maybe_yield();
    let b = fib(n - 2, spawn_depth - 1, 2 * path + 2, ran, seed);
    maybe_yield();
    h.join().unwrap() + b
}

/// How many threads `fib(n, spawn_depth, ..)` spawns.
fn spawns(n: u32, spawn_depth: u32) -> usize {
    if n < 2 || spawn_depth == 0 {
        return 0;
    }
    1 + spawns(n - 1, spawn_depth - 1) + spawns(n - 2, spawn_depth - 1)
}

#[test]
fn stress_fork_join_with_random_yields_on_two_processors() {
    watchdog(120, || {
        for mode in MODES {
            for seed in 1..=3u64 {
                let rt = runtime_in(2, mode);
                const DEPTH: u32 = 14;
                let ran: Arc<Vec<AtomicU8>> =
                    Arc::new((0..1usize << (DEPTH + 1)).map(|_| AtomicU8::new(0)).collect());
                let r = ran.clone();
                let v = rt.block_on(move || fib(24, DEPTH, 0, &r, seed)).unwrap();
                assert_eq!(v, 46368, "fib(24) in {mode:?}");
                // Every spawned child ran exactly once (twice fails inside).
                let ran = ran.iter().filter(|a| a.load(Ordering::Relaxed) == 1).count();
                assert_eq!(ran, spawns(24, DEPTH), "children that ran, {mode:?}");
            }
        }
    });
}
