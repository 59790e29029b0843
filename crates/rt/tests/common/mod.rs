//! Helpers shared by the integration tests: a watchdog so that no test can
//! hang, and runtime construction for 1, 2 and 4 processors.

#![allow(dead_code)]

use schedlab_rt::Runtime;
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

/// A runtime with `p` processors and a small spin, for tests.
pub fn runtime(p: usize) -> Runtime {
    Runtime::builder().processors(p).stack_size(64 * 1024).build().expect("build a runtime")
}

/// The processor counts the stress tests run on.
pub const PROCESSORS: [usize; 3] = [1, 2, 4];
