//! How much stack user threads touch: the evidence behind `DEFAULT_STACK_SIZE`.
//!
//! Each workload runs in a user thread with a stack of its own size (256 KiB, which no
//! other thread uses, so the stack is fresh) and reports `schedlab_rt::stack_usage()` at
//! its end: the pages it touched. Run the table with
//!
//! ```text
//! cargo test --release -p schedlab-rt --test stack_usage -- --ignored --nocapture
//! ```

use schedlab_rt::{stack_bounds, stack_usage, Builder, Runtime};
use std::hint::black_box;

const FRESH: usize = 256 * 1024;

/// A named piece of work for the table.
type Workload = Box<dyn FnOnce() + Send>;

/// Runs `f` in a user thread with a fresh stack; the bytes it touched.
fn touched(rt: &Runtime, f: impl FnOnce() + Send + 'static) -> usize {
    rt.block_on(move || {
        Builder::new()
            .stack_size(FRESH)
            .spawn(move || {
                f();
                stack_usage().expect("on a user thread").0
            })
            .unwrap()
            .join()
            .unwrap()
    })
    .unwrap()
}

#[test]
fn stack_usage_counts_the_pages_a_thread_touched() {
    let rt = Runtime::builder().processors(1).build().unwrap();
    assert_eq!(stack_usage(), None, "an OS thread has no user stack");
    let small = touched(&rt, || {
        black_box(1);
    });
    let big = touched(&rt, || {
        let a = black_box([7u8; 64 * 1024]);
        black_box(&a);
    });
    assert!(small <= 16 * 1024, "an empty thread touched {small} bytes");
    assert!((64 * 1024..=FRESH).contains(&big), "a 64 KiB local: {big} bytes");
    let size = rt.block_on(|| stack_usage().unwrap().1).unwrap();
    assert_eq!(size, schedlab_rt::DEFAULT_STACK_SIZE);
}

#[test]
fn stack_bounds_hold_the_running_thread_s_frames() {
    let rt = Runtime::builder().processors(1).build().unwrap();
    assert_eq!(stack_bounds(), None, "an OS thread has no user stack");
    let (bounds, local) = rt
        .block_on(|| {
            Builder::new()
                .stack_size(FRESH)
                .spawn(|| {
                    let x = black_box(5u64);
                    (stack_bounds().expect("on a user thread"), &x as *const u64 as usize)
                })
                .unwrap()
                .join()
                .unwrap()
        })
        .unwrap();
    assert_eq!(bounds.len(), FRESH, "{bounds:x?}");
    assert!(bounds.contains(&local), "a local at {local:#x} outside {bounds:x?}");
}

#[test]
#[ignore = "evidence table: run with --ignored --nocapture in release mode"]
fn what_typical_user_threads_touch() {
    let rt = Runtime::builder().processors(1).build().unwrap();
    let rows: Vec<(&str, Workload)> = vec![
        ("empty thread", Box::new(|| ())),
        (
            "channel send and receive",
            Box::new(|| {
                let (tx, rx) = schedlab_rt::sync::channel(1);
                tx.send(1u64).unwrap();
                black_box(rx.recv().unwrap());
            }),
        ),
        (
            "format! with floats and a Vec",
            Box::new(|| {
                black_box(format!("{:.3} {:?} {:e}", 1.5f64, vec![1, 2, 3], 6.02e23));
            }),
        ),
        ("eprintln!", Box::new(|| eprintln!("  (a line from a user thread: {})", black_box(42)))),
        (
            "read a /proc file",
            Box::new(|| {
                black_box(std::fs::read_to_string("/proc/self/status").unwrap());
            }),
        ),
        (
            "HashMap of 10,000 entries",
            Box::new(|| {
                let m: std::collections::HashMap<u64, u64> = (0..10_000).map(|i| (i, i)).collect();
                black_box(m);
            }),
        ),
        (
            "sort_unstable of 1,000,000 u64",
            Box::new(|| {
                let mut v: Vec<u64> =
                    (0..1_000_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
                v.sort_unstable();
                black_box(v);
            }),
        ),
        (
            "sort (stable) of 1,000,000 u64",
            Box::new(|| {
                let mut v: Vec<u64> =
                    (0..1_000_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
                v.sort();
                black_box(v);
            }),
        ),
        (
            "panic caught, default hook prints it",
            Box::new(|| {
                black_box(std::panic::catch_unwind(|| panic!("a test panic {}", 1)).is_err());
            }),
        ),
        (
            "Backtrace::force_capture, printed",
            Box::new(|| {
                black_box(std::backtrace::Backtrace::force_capture().to_string());
            }),
        ),
        (
            "Thread.tree node (spawn 10, join)",
            Box::new(|| {
                let hs: Vec<_> = (0..10).map(|i| schedlab_rt::spawn(move || i)).collect();
                black_box(hs.into_iter().map(|h| h.join().unwrap()).sum::<i32>());
            }),
        ),
    ];
    println!("{:<40} {:>10}", "workload", "touched");
    for (name, f) in rows {
        let t = touched(&rt, f);
        println!("{name:<40} {:>7} KiB", t / 1024);
    }
    println!(
        "default stack {} KiB, minimum {} KiB",
        schedlab_rt::DEFAULT_STACK_SIZE / 1024,
        schedlab_rt::MIN_STACK_SIZE / 1024
    );
}
