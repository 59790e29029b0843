//! State that belongs to the kernel thread, not the user thread, across preemption: the
//! standard library's panic machinery, and a tokio runtime's context.
//!
//! tokio inside preemptible user threads aborted the process: a user thread preempted
//! inside a tokio runtime left tokio's context (a thread-local: "a runtime is entered
//! here") on its kernel thread, so the next user thread there to use tokio panicked
//! ("Cannot start a runtime from within a runtime"); a preemption inside that panic's hook
//! left the standard library's per-kernel-thread "in the panic hook" flag set for the
//! next panic there, which aborts ("thread panicked while processing panic").

mod common;

use common::watchdog;
use schedlab_rt::{no_preempt, spawn, Builder, Preemption, Runtime};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Runs the test named `name` of this binary in a child process with `CHILD_ENV` set
/// (where it does the work that once aborted) and returns whether the child succeeded.
fn in_child(name: &str) -> std::process::ExitStatus {
    let exe = std::env::current_exe().expect("the test binary's path");
    std::process::Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run the test binary again")
}

const CHILD_ENV: &str = "SCHEDLAB_RT_TEST_CHILD";

#[test]
fn panics_in_preempted_user_threads_never_abort_the_process() {
    if std::env::var_os(CHILD_ENV).is_none() {
        let status = in_child("panics_in_preempted_user_threads_never_abort_the_process");
        assert!(status.success(), "the child process ended with {status}");
        return;
    }
    // A hook long enough (200 µs) to be preempted in, on two processors with the
    // shortest quantum: every user thread panics again and again.
    std::panic::set_hook(Box::new(|info| {
        let until = std::time::Instant::now() + Duration::from_micros(200);
        let text = format!("{info}");
        while std::time::Instant::now() < until {
            std::hint::black_box(&text);
        }
    }));
    let rt = Runtime::builder()
        .processors(2)
        .preemption(Preemption::Quantum(schedlab_rt::MIN_QUANTUM))
        .build()
        .unwrap();
    let caught = watchdog(120, move || {
        rt.block_on(|| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    spawn(move || {
                        (0..200)
                            .filter(|k| std::panic::catch_unwind(|| panic!("{i}.{k}")).is_err())
                            .count()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
        })
        .unwrap()
    });
    assert_eq!(caught, 8 * 200);
}

/// Runs a preemptible thread inside a tokio runtime until `b` (spawned beside it on the
/// runtime's one processor once it is inside, so `b` runs only when it is preempted
/// there) is done. Returns what joining `b` gave.
fn beside_a_thread_inside_tokio(b: impl FnOnce() + Send + 'static) -> std::thread::Result<()> {
    // No hand-off of the processor while `b`'s panic hook writes to stderr: the first
    // thread resumes on its own kernel thread, where its tokio context is.
    let rt = Runtime::builder()
        .processors(1)
        .preemption(Preemption::Quantum(Duration::from_millis(1)))
        .transparent_blocking(false)
        .build()
        .unwrap();
    watchdog(60, move || {
        rt.block_on(move || {
            let done = Arc::new(AtomicBool::new(false));
            let entered = Arc::new(AtomicBool::new(false));
            let (d, e) = (done.clone(), entered.clone());
            let a = spawn(move || {
                let tokio = tokio::runtime::Builder::new_current_thread().build().unwrap();
                tokio.block_on(async {
                    e.store(true, Ordering::Relaxed);
                    while !d.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            });
            // `a` runs (and is preempted inside tokio) before `b` exists.
            while !entered.load(Ordering::Relaxed) {
                schedlab_rt::yield_now();
            }
            /// Sets the flag however `b` ends.
            struct Done(Arc<AtomicBool>);
            impl Drop for Done {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let done = Done(done);
            let b = spawn(move || {
                let _done = done;
                b()
            });
            let r = b.join();
            a.join().unwrap();
            r
        })
        .unwrap()
    })
}

fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn tokio_on_a_preemptible_user_thread_is_refused_with_the_workaround() {
    // The second thread to use tokio on the kernel thread finds the first one's context.
    let r = beside_a_thread_inside_tokio(|| {
        let tokio = tokio::runtime::Builder::new_current_thread().build().unwrap();
        tokio.block_on(async {});
    });
    let msg = message(r.expect_err("tokio refused the second runtime").as_ref());
    eprintln!("{msg}");
    assert!(msg.contains("preemptible(false)") && msg.contains("no_preempt"), "{msg}");
    assert!(msg.contains("Cannot start a runtime from within a runtime"), "{msg}");
}

#[test]
fn the_workarounds_keep_tokio_on_its_kernel_thread() {
    // Threads that use tokio, non-preemptible or inside `no_preempt`, beside spinners
    // that keep preemption busy, on two processors with a short quantum.
    let rt = Runtime::builder()
        .processors(2)
        .preemption(Preemption::Quantum(Duration::from_micros(100)))
        .build()
        .unwrap();
    let n = watchdog(120, move || {
        rt.block_on(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let spinners: Vec<_> = (0..2)
                .map(|_| {
                    let s = stop.clone();
                    spawn(move || {
                        while !s.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                })
                .collect();
            let use_tokio = || {
                let mut n = 0u64;
                for _ in 0..20 {
                    let tokio = tokio::runtime::Builder::new_current_thread()
                        .enable_time()
                        .build()
                        .unwrap();
                    n += tokio.block_on(async {
                        let mut x = 0u64;
                        for k in 0..100_000u64 {
                            x = std::hint::black_box(x.wrapping_add(k));
                        }
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        tokio::task::yield_now().await;
                        x.min(1)
                    });
                }
                n
            };
            let users: Vec<_> = (0..4)
                .map(|i| {
                    if i % 2 == 0 {
                        Builder::new().preemptible(false).spawn(use_tokio).unwrap()
                    } else {
                        spawn(move || no_preempt(use_tokio))
                    }
                })
                .collect();
            let n: u64 = users.into_iter().map(|h| h.join().unwrap()).sum();
            stop.store(true, Ordering::Relaxed);
            for h in spinners {
                h.join().unwrap();
            }
            n
        })
        .unwrap()
    });
    assert_eq!(n, 4 * 20);
}
