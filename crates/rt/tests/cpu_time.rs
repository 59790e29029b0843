//! A user thread's own CPU time (`Thread::cpu_time`, `cputime.rs`): two
//! threads sharing one processor (one kernel thread) each see their own
//! spinning and never the other's, read by themselves or by the other; and
//! on two processors, where threads migrate between kernel threads, every
//! thread's figure only grows, read by itself or by others; a thread nobody
//! asked about is not accounted.
//!
//! Bounds are ratios with generous slack, never absolute times: a thread's
//! "own spinning" is measured as its kernel thread's CPU clock across each
//! spin, which on a cooperative processor no other thread interrupts.

mod common;

use common::{builder_in, watchdog, Mode};
use schedlab_rt::sync::Mutex;
use schedlab_rt::{current, sleep, spawn, yield_now, Thread};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The calling kernel thread's CPU clock, in ns.
fn kernel_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-parameter on our stack.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spins for `ns` of the kernel thread's CPU; returns what it measured (a
/// thread preempted and moved to another kernel thread meanwhile compares
/// two kernel threads' clocks: only the first test, on one cooperative
/// processor, uses the figure).
fn spin(ns: u64) -> u64 {
    let a = kernel_cpu_ns();
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
        let d = kernel_cpu_ns().saturating_sub(a);
        if d >= ns {
            return d;
        }
    }
}

const ROUNDS: u32 = 40;

/// One thread of the pair: asks for its clock, then `ROUNDS` times spins
/// `per_round` and yields; returns its own spinning and its clock's advance.
fn spin_and_yield(per_round: u64) -> (u64, u64) {
    let me = current();
    let before = me.cpu_time();
    let mut mine = 0;
    for _ in 0..ROUNDS {
        mine += spin(per_round);
        yield_now();
    }
    let after = me.cpu_time();
    (mine, (after - before).as_nanos() as u64)
}

#[test]
fn two_threads_on_one_processor_each_see_only_their_own_time() {
    watchdog(120, || {
        let rt = builder_in(1, Mode::Cooperative).build().unwrap();
        rt.block_on(|| {
            // 0.5 ms and 2 ms a round: a clock that counted the other's
            // time would advance 5 (a) or 1.25 (b) times its own spinning.
            let a = spawn(|| spin_and_yield(500_000));
            let b = spawn(|| spin_and_yield(2_000_000));
            let (a_thread, b_thread) = (a.thread().clone(), b.thread().clone());
            let (a_mine, a_clock) = a.join().unwrap();
            let (b_mine, b_clock) = b.join().unwrap();
            for (name, mine, clock) in [("a", a_mine, a_clock), ("b", b_mine, b_clock)] {
                let ratio = clock as f64 / mine as f64;
                assert!(
                    (0.95..1.2).contains(&ratio),
                    "{name}'s clock advanced {clock} ns over {mine} ns of its own spinning"
                );
            }
            // Read from another thread, after the fact: the same figures.
            for (name, t, mine) in [("a", &a_thread, a_mine), ("b", &b_thread, b_mine)] {
                let seen = t.cpu_time().as_nanos() as f64;
                assert!(
                    (0.95..1.3).contains(&(seen / mine as f64)),
                    "{name}'s clock read from another thread says {seen} ns for {mine} ns"
                );
            }
        })
        .unwrap();
    });
}

/// Accounting is per thread: a thread nobody asked about is not accounted,
/// even in a runtime where another thread asked (its switches read no clock:
/// the Java virtual machine asks about a few of its threads as they start,
/// and every switch of every thread read a clock when one request turned
/// accounting on for the whole runtime). Its clock counts from the first
/// request for it: a thread that finished before reads 0 (it read its whole
/// 20 ms before the change).
#[test]
fn a_thread_nobody_asked_about_is_not_accounted() {
    watchdog(120, || {
        let rt = builder_in(1, Mode::Cooperative).build().unwrap();
        rt.block_on(|| {
            current().cpu_time();
            let worker = spawn(|| {
                for _ in 0..4 {
                    spin(5_000_000);
                    yield_now();
                }
            });
            let t = worker.thread().clone();
            worker.join().unwrap();
            assert_eq!(t.cpu_time(), Duration::ZERO, "counted before anyone asked");
            // Asked about now, a thread is counted from here on.
            let worker = spawn(|| {
                current().cpu_time();
                spin(5_000_000);
            });
            let t = worker.thread().clone();
            worker.join().unwrap();
            assert!(t.cpu_time() >= Duration::from_millis(4), "{:?}", t.cpu_time());
        })
        .unwrap();
    });
}

#[test]
fn another_threads_clock_is_read_while_it_runs_elsewhere() {
    watchdog(120, || {
        let rt = builder_in(2, Mode::Preemptive).build().unwrap();
        rt.block_on(|| {
            // Accounting on before the spinner exists; the spinner is counted
            // from the first request for its time, made while it runs on the
            // other processor (its stint starts at the safe point of the
            // preemption request that sends), and then never switches (alone
            // on a processor while we sleep), so its clock is read on its
            // kernel thread's.
            current().cpu_time();
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            let spinner = spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    spin(100_000);
                }
            });
            let t = spinner.thread().clone();
            let mut last = Duration::ZERO;
            let mut grew = 0;
            while grew < 10 {
                let now = t.cpu_time();
                assert!(now >= last, "went back from {last:?} to {now:?}");
                if now > last {
                    grew += 1;
                }
                last = now;
                sleep(Duration::from_millis(2));
            }
            stop.store(true, Ordering::Relaxed);
            spinner.join().unwrap();
            assert!(t.cpu_time() >= last);
        })
        .unwrap();
    });
}

#[test]
fn a_thread_computing_alone_when_accounting_starts_is_counted_at_once() {
    watchdog(120, || {
        let rt = builder_in(2, Mode::Preemptive).build().unwrap();
        rt.block_on(|| {
            let (stop, started) =
                (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
            let (s, st) = (stop.clone(), started.clone());
            let spinner = spawn(move || {
                st.store(true, Ordering::Relaxed);
                // Computing in our own code, where a preemption request
                // finds a safe point (not in the C library's clock call).
                let mut x = 0u64;
                while !s.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            });
            // We never yield: the spinner runs on the other processor, alone,
            // and never switches. Accounting, switched on by the first read
            // below, reaches it by a preemption request, not at a switch.
            while !started.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
            let t = spinner.thread().clone();
            let first = t.cpu_time();
            while t.cpu_time() <= first + Duration::from_millis(2) {
                spin(100_000);
            }
            stop.store(true, Ordering::Relaxed);
            spinner.join().unwrap();
        })
        .unwrap();
    });
}

#[test]
fn clocks_never_go_back_across_migrations() {
    watchdog(120, || {
        let rt = builder_in(2, Mode::Preemptive).build().unwrap();
        rt.block_on(|| {
            let threads: Arc<Mutex<Vec<Thread>>> = Arc::new(Mutex::new(Vec::new()));
            let highest: Arc<Vec<AtomicU64>> =
                Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
            let workers: Vec<_> = (0..4)
                .map(|i| {
                    let (threads, highest) = (threads.clone(), highest.clone());
                    spawn(move || {
                        threads.lock().push(current());
                        let mut last = Duration::ZERO;
                        for round in 0..400 {
                            spin(20_000);
                            let now = current().cpu_time();
                            assert!(now >= last, "thread {i}: {last:?} then {now:?}");
                            last = now;
                            highest[i].store(now.as_nanos() as u64, Ordering::Relaxed);
                            // Others' clocks, read from here: never below what
                            // their owner last saw of itself before our read.
                            if round % 8 == 0 {
                                let others: Vec<Thread> = threads.lock().clone();
                                for t in others {
                                    let a = t.cpu_time();
                                    let b = t.cpu_time();
                                    assert!(b >= a, "another's clock went back: {a:?}, {b:?}");
                                }
                            }
                            yield_now();
                        }
                        last
                    })
                })
                .collect();
            for w in workers {
                let total = w.join().unwrap();
                // 400 spins of 20 µs each at least.
                assert!(total >= Duration::from_millis(8), "{total:?}");
            }
        })
        .unwrap();
    });
}
