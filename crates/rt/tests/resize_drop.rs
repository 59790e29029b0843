//! Dropping a runtime after `Runtime::set_processors` shrank and grew it joins
//! every kernel thread it made: processors active, retired, and spares. Alone
//! in its test binary, so that the process's threads are this test's.

mod common;

use common::watchdog;
use schedlab_rt::{spawn, yield_now, Preemption, Runtime};
use std::time::Duration;

/// The process's kernel threads whose name says they belong to a runtime.
fn runtime_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .filter(|n| n.starts_with("schedlab-"))
        .collect()
}

#[test]
fn drop_after_shrink_and_grow_joins_every_kernel_thread() {
    watchdog(120, || {
        assert_eq!(runtime_threads(), Vec::<String>::new(), "no runtime yet");
        for preemption in [Preemption::Cooperative, Preemption::Quantum(Duration::from_millis(1))] {
            let rt = Runtime::builder()
                .processors(2)
                .max_processors(4)
                .preemption(preemption)
                .build()
                .unwrap();
            for n in [4, 1, 3, 2, 1, 4, 1] {
                rt.set_processors(n).unwrap();
                let sum = rt
                    .block_on(|| {
                        let hs: Vec<_> = (0..100u64)
                            .map(|i| {
                                spawn(move || {
                                    yield_now();
                                    // Blocks in the kernel: processors are
                                    // handed to spare kernel threads.
                                    if i % 10 == 0 {
                                        schedlab_rt::blocking::nanosleep(Duration::from_micros(
                                            200,
                                        ));
                                    }
                                    i
                                })
                            })
                            .collect();
                        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
                    })
                    .unwrap();
                assert_eq!(sum, (0..100).sum::<u64>());
            }
            assert!(runtime_threads().len() >= 5, "four processors and a monitor while it lives");
            drop(rt);
            // Joined threads leave `/proc` once the kernel has reaped them,
            // an instant after the join: wait for that, not for a time.
            // A thread the drop did not join stays, and the watchdog fails
            // the test (naming them here first, after a while, helps).
            for i in 0.. {
                let left = runtime_threads();
                if left.is_empty() {
                    break;
                }
                if i == 5000 {
                    eprintln!("threads left after the drop: {left:?}");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
}
