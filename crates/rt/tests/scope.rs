//! `schedlab_rt::scope`: borrowing from the caller, every thread joined before
//! the scope returns (also on panic), and panics propagated as
//! `std::thread::scope` does.

mod common;

use common::watchdog;
use schedlab_rt::{scope, yield_now, Runtime};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

fn runtime(processors: usize) -> Runtime {
    Runtime::builder().processors(processors).build().unwrap()
}

#[test]
fn threads_borrow_and_mutate_the_callers_data() {
    watchdog(30, || {
        for p in [1, 2] {
            runtime(p)
                .block_on(|| {
                    let mut data: Vec<u64> = (0..10_000).collect();
                    let total: u64 = data.iter().sum();
                    let (left, right) = data.split_at_mut(5_000);
                    let sums = scope(|s| {
                        let a = s.spawn(|| {
                            left.iter_mut().for_each(|x| *x *= 2);
                            left.iter().sum::<u64>()
                        });
                        let b = s.spawn(|| {
                            right.iter_mut().for_each(|x| *x *= 2);
                            right.iter().sum::<u64>()
                        });
                        a.join().unwrap() + b.join().unwrap()
                    });
                    assert_eq!(sums, 2 * total);
                    assert_eq!(data.iter().sum::<u64>(), 2 * total);
                })
                .unwrap();
        }
    });
}

#[test]
fn every_thread_is_joined_before_the_scope_returns() {
    watchdog(30, || {
        runtime(2)
            .block_on(|| {
                let done = AtomicUsize::new(0);
                scope(|s| {
                    for i in 0..100 {
                        let done = &done;
                        // Handles dropped at once: the scope still waits.
                        s.spawn(move || {
                            for _ in 0..i % 7 {
                                yield_now();
                            }
                            schedlab_rt::sleep(std::time::Duration::from_micros(100));
                            done.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                });
                assert_eq!(done.load(Ordering::Relaxed), 100);
            })
            .unwrap();
    });
}

#[test]
fn an_unjoined_panicking_thread_makes_the_scope_panic_after_the_others_finish() {
    watchdog(30, || {
        runtime(1)
            .block_on(|| {
                let done = AtomicUsize::new(0);
                let r = catch_unwind(AssertUnwindSafe(|| {
                    scope(|s| {
                        s.spawn(|| panic!("scoped boom"));
                        s.spawn(|| {
                            for _ in 0..10 {
                                yield_now();
                            }
                            done.fetch_add(1, Ordering::Relaxed);
                        });
                    })
                }));
                let payload = r.expect_err("the scope should panic");
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"a scoped thread panicked"));
                assert_eq!(done.load(Ordering::Relaxed), 1, "the other thread was not waited for");
            })
            .unwrap();
    });
}

#[test]
fn a_joined_panic_is_the_joiners_and_not_the_scopes() {
    watchdog(30, || {
        runtime(1)
            .block_on(|| {
                let v = scope(|s| {
                    let h = s.spawn(|| -> u32 { panic!("seen") });
                    let err = h.join().expect_err("the thread panicked");
                    assert_eq!(err.downcast_ref::<&str>(), Some(&"seen"));
                    7
                });
                assert_eq!(v, 7);
            })
            .unwrap();
    });
}

#[test]
fn a_panic_of_the_closure_is_resumed_after_every_thread_finished() {
    watchdog(30, || {
        runtime(2)
            .block_on(|| {
                let done = AtomicUsize::new(0);
                let r = catch_unwind(AssertUnwindSafe(|| {
                    scope(|s| {
                        for _ in 0..8 {
                            s.spawn(|| {
                                schedlab_rt::sleep(std::time::Duration::from_millis(2));
                                done.fetch_add(1, Ordering::Relaxed);
                            });
                        }
                        panic!("closure boom");
                    })
                }));
                let payload = r.expect_err("the scope should panic");
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"closure boom"));
                assert_eq!(done.load(Ordering::Relaxed), 8);
            })
            .unwrap();
    });
}

/// Results may borrow from the caller too.
#[test]
fn results_may_borrow_from_the_caller() {
    watchdog(30, || {
        runtime(1)
            .block_on(|| {
                let words = String::from("alpha beta gam");
                let longest = scope(|s| {
                    let h = s.spawn(|| words.split(' ').max_by_key(|w| w.len()).unwrap());
                    h.join().unwrap()
                });
                assert_eq!(longest, "alpha");
            })
            .unwrap();
    });
}

/// Recursive divide and conquer with nested scopes on two processors.
#[test]
fn nested_scopes_sum_in_parallel() {
    fn psum(v: &[u64]) -> u64 {
        if v.len() <= 64 {
            return v.iter().sum();
        }
        let (l, r) = v.split_at(v.len() / 2);
        scope(|s| {
            let a = s.spawn(|| psum(l));
            let b = psum(r);
            a.join().unwrap() + b
        })
    }
    watchdog(60, || {
        let v: Vec<u64> = (0..100_000).collect();
        let want: u64 = v.iter().sum();
        let got = runtime(2).block_on(move || psum(&v)).unwrap();
        assert_eq!(got, want);
    });
}

#[test]
fn scope_outside_a_user_thread_panics_with_a_clear_message() {
    let r = catch_unwind(|| scope(|_| ()));
    let payload = r.expect_err("scope on an OS thread");
    let msg = payload.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(msg.contains("outside a user thread"), "{msg}");
}
