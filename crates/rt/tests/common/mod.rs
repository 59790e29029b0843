//! Helpers shared by the integration tests: a watchdog so that no test can
//! hang, and runtime construction for 1, 2 and 4 processors.

#![allow(dead_code)]

use schedlab_rt::{Preemption, Runtime};
use std::sync::mpsc;
use std::time::Duration;

/// Runs `f` on an OS thread and fails the test if it takes longer than
/// `secs` (a hang, not a slow run: the limits are generous).
pub fn watchdog<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            t.join().unwrap();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: re-raise its panic.
            match t.join() {
                Err(p) => std::panic::resume_unwind(p),
                Ok(()) => unreachable!(),
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test hung for {secs} s"),
    }
}

/// How a test runtime schedules: cooperative, preemptive (a short quantum,
/// so that preemption happens often), with transparent blocking detection,
/// or both.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Cooperative,
    Preemptive,
    Transparent,
    Both,
}

/// Every mode, for the stress tests.
pub const MODES: [Mode; 4] = [Mode::Cooperative, Mode::Preemptive, Mode::Transparent, Mode::Both];

/// A runtime with `p` processors scheduling in `mode`.
pub fn runtime_in(p: usize, mode: Mode) -> Runtime {
    builder_in(p, mode).build().expect("build a runtime")
}

/// The builder of [`runtime_in`], to add to.
pub fn builder_in(p: usize, mode: Mode) -> schedlab_rt::RuntimeBuilder {
    let (preempt, transparent) = match mode {
        Mode::Cooperative => (false, false),
        Mode::Preemptive => (true, false),
        Mode::Transparent => (false, true),
        Mode::Both => (true, true),
    };
    let preemption = if preempt {
        Preemption::Quantum(Duration::from_micros(200))
    } else {
        Preemption::Cooperative
    };
    Runtime::builder()
        .processors(p)
        .stack_size(64 * 1024)
        .preemption(preemption)
        .transparent_blocking(transparent)
}

/// A runtime with `p` processors and the default scheduling, for tests.
pub fn runtime(p: usize) -> Runtime {
    Runtime::builder().processors(p).stack_size(64 * 1024).build().expect("build a runtime")
}

/// The processor counts the stress tests run on.
pub const PROCESSORS: [usize; 3] = [1, 2, 4];
