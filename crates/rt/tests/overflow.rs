//! A user thread that overflows its stack hits the guard page and the
//! process aborts with a message naming the thread and its stack size.
//!
//! The overflow must kill a process, so the test runs itself again as a
//! child with `SCHEDLAB_RT_OVERFLOW_CHILD=1`, and only the child overflows.

use schedlab_rt::{Builder, Runtime};
use std::process::Command;

const CHILD_ENV: &str = "SCHEDLAB_RT_OVERFLOW_CHILD";

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let buf = std::hint::black_box([depth as u8; 512]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + u64::from(buf[7])
}

/// The child's part: runs only when the parent sets the variable.
#[test]
fn overflow_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let rt = Runtime::builder().processors(1).build().unwrap();
    let _ = rt.block_on(|| {
        Builder::new().name("deep").stack_size(16 * 1024).spawn(|| recurse(0)).unwrap().join()
    });
    unreachable!("the overflow aborts the process");
}

#[test]
fn stack_overflow_names_the_thread_and_its_stack_size() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "overflow_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child must die; stderr: {stderr}");
    assert!(
        stderr.contains("schedlab-rt: user thread 'deep' (id ")
            && stderr.contains(") overflowed its stack of 16384 bytes"),
        "stderr: {stderr}"
    );
}
