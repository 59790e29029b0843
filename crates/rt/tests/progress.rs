//! Progress: a runnable user thread must not be stranded while another processor is idle.
//!
//! The spawner below never yields; the thread it spawns can only run if an idle processor
//! takes it. A run queue slot that other processors cannot steal from (tokio's LIFO-slot
//! problem) strands it. The spin is bounded: a stranded thread fails the test with a count,
//! then the spawner yields so the thread runs and the test ends cleanly. Nothing here
//! measures speed; the 2 s bound only separates "taken by the idle processor" from "never".

mod common;

use common::{runtime, watchdog};
use schedlab_rt::{spawn, yield_now};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_spawned_thread_runs_on_an_idle_processor_while_its_spawner_spins() {
    let stranded = watchdog(120, || {
        let mut stranded = 0;
        for _ in 0..200 {
            let rt = runtime(2);
            let stuck = rt
                .block_on(|| {
                    let flag = Arc::new(AtomicBool::new(false));
                    let f = flag.clone();
                    let h = spawn(move || f.store(true, Ordering::Release));
                    let start = Instant::now();
                    let mut stuck = false;
                    while !flag.load(Ordering::Acquire) {
                        if start.elapsed() > Duration::from_secs(2) {
                            stuck = true;
                            break;
                        }
                        std::hint::spin_loop();
                    }
                    while !flag.load(Ordering::Acquire) {
                        yield_now();
                    }
                    h.join().unwrap();
                    stuck
                })
                .expect("no deadlock");
            stranded += usize::from(stuck);
        }
        stranded
    });
    assert_eq!(
        stranded, 0,
        "{stranded} of 200 spawned threads waited 2 s beside an idle processor"
    );
}
