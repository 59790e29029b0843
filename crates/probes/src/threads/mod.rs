//! Thread-operation probes: what creating, switching, locking, signalling and waking
//! threads costs in three thread systems side by side — kernel threads (`backend=os`),
//! schedlab-rt user threads (`backend=rt`) and tokio tasks (`backend=tokio`, the
//! ecosystem's reference) — so `compare` and the report can line the backends up. Where a
//! C program can do the same, the same C program also runs under glibc's POSIX threads
//! (`backend=pthread-os`) and under libschedlab_pthread.so (`backend=pthread-rt`), so
//! schedlab-rt is measured both through its Rust API and through pthreads (`pthread.rs`;
//! `cbench.rs` holds the rows only the C program has: messaging and a compressor).
//!
//! The rows mirror seed 003's table (thread create, mutex, context switch: the scheduler
//! activations library against GNU PTH and LinuxThreads) and seed 002's Table 1 thread
//! rows. One file per family: creation, hand-offs on one processor (switch, condvar and
//! channel ping-pong), mutexes, cross-CPU wake-up, and the Table 1 rows; `echo/` is a
//! thread-per-connection server against a client process (issue 29); `backend` holds
//! what they share.
//!
//! Setup creates the runtimes and helper threads, never timed; teardown (the instance's
//! `Drop`) shuts runtimes down and joins every thread, because the `schedlab` binary runs
//! the OS probes single-threaded. Probes that say "one processor" pin every party to one
//! CPU and note it; the cross-CPU probes pin each party to its own.

// Seed 002's adaptive spinning (issue 26).
mod adaptive;
pub(crate) mod backend;
mod cbench;
mod compute;
mod create;
pub mod echo;
mod forkjoin;
mod handoff;
mod memory;
mod mutex;
pub mod pthread;
mod ring;
mod tree;
mod wake;

use crate::Probe;

/// The thread probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    let mut v: Vec<Box<dyn Probe>> = Vec::new();
    v.extend(create::probes());
    v.extend(handoff::probes());
    v.extend(mutex::probes());
    // Seed 002's adaptive spinning (issue 26).
    v.extend(adaptive::probes());
    v.extend(wake::probes());
    v.extend(compute::probes());
    v.extend(ring::probes());
    v.extend(tree::probes());
    v.extend(forkjoin::probes());
    v.extend(echo::probes());
    v.extend(cbench::probes());
    v
}

#[cfg(test)]
mod tests {
    //! Every thread probe runs once in smoke settings, produces finite, non-negative values
    //! (or a skip with a reason) and leaves no thread behind: the probes' behaviour, not
    //! their speed.
    use super::*;
    use crate::testkit;
    use crate::{Context, Suite};
    use schedlab_measure::ProbeError;
    use std::time::{Duration, Instant};

    /// Names of the live threads of this process that a threads probe started by name
    /// (helpers, crews, tokio workers, schedlab-rt processors).
    fn probe_threads() -> Vec<String> {
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
        dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
            .map(|c| c.trim().to_string())
            .filter(|c| c.starts_with(backend::THREAD_PREFIX) || c.starts_with("schedlab-vp"))
            .collect()
    }

    /// Waits (a little) for exited threads to leave /proc, then returns those still there.
    fn leftover_threads() -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            let left = probe_threads();
            if left.is_empty() || Instant::now() > until {
                return left;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn every_threads_probe_runs_in_smoke_settings_and_leaves_no_thread() {
        let ctx = Context::for_tests();
        let mut tally = testkit::SmokeTally::default();
        for p in probes() {
            let info = p.info();
            for params in p.variants(Suite::Smoke) {
                let started = Instant::now();
                let Some(inst) = tally.run(&*p, &params, &ctx) else { continue };
                assert!(inst.notes().get("cpus").is_some(), "{} [{params}] notes no cpus", info.id);
                drop(inst);
                let left = leftover_threads();
                assert!(left.is_empty(), "{} [{params}] left threads behind: {left:?}", info.id);
                eprintln!("{} [{params}] {:.3}s", info.id, started.elapsed().as_secs_f64());
            }
        }
        tally.finish("threads");
    }

    #[test]
    fn every_probe_offers_all_three_backends_in_every_suite() {
        // The C program's rows come as a pair (glibc and the library) or not at all; the
        // probes only the C program measures have just the pair.
        const C_ONLY: [&str; 2] = ["threads.messaging", "threads.compress"];
        // Spinning against sleeping: tokio's Mutex parks a task at once and has no spin to
        // compare (issue 26).
        const OS_AND_RT: [&str; 1] = ["threads.mutex.adaptive"];
        for p in probes() {
            let id = p.info().id;
            for suite in [Suite::Smoke, Suite::Quick, Suite::Full] {
                let mut seen: Vec<&str> = Vec::new();
                let variants = p.variants(suite);
                for v in &variants {
                    let b = v.get("backend").expect("every variant names its backend");
                    if !seen.contains(&b) {
                        seen.push(b);
                    }
                }
                seen.sort_unstable();
                let want: &[&str] = if C_ONLY.contains(&id) {
                    &["pthread-os", "pthread-rt"]
                } else if OS_AND_RT.contains(&id) {
                    &["os", "rt"]
                } else if seen.contains(&"pthread-os") || seen.contains(&"pthread-rt") {
                    &["os", "pthread-os", "pthread-rt", "rt", "tokio"]
                } else {
                    &["os", "rt", "tokio"]
                };
                assert_eq!(seen, want, "{id} in {suite:?}");
            }
        }
    }

    #[test]
    fn the_pthread_rows_are_offered_where_the_c_program_has_the_operation() {
        let with_c: Vec<&str> = probes()
            .iter()
            .filter(|p| {
                p.variants(Suite::Quick).iter().any(|v| v.get("backend") == Some("pthread-rt"))
            })
            .map(|p| p.info().id)
            .collect();
        assert_eq!(
            with_c,
            [
                "threads.create",
                "threads.switch",
                "threads.condvar.pingpong",
                "threads.mutex.uncontended",
                "threads.mutex.contended",
                "threads.messaging",
                "threads.compress"
            ]
        );
    }

    #[test]
    fn pinned_helper_threads_are_parties_so_their_pins_are_checked() {
        use schedlab_measure::model::Params;
        let ctx = Context::for_tests();
        let all = crate::catalog();
        let parties = |id: &str| {
            let p = all.iter().find(|p| p.info().id == id).unwrap();
            match p.setup(&Params::new().with("backend", "os"), &ctx) {
                Ok(inst) => Some(inst.parties().into_iter().map(|x| x.name).collect::<Vec<_>>()),
                Err(ProbeError::Skip(_)) => None,
                Err(e) => panic!("{id}: {e}"),
            }
        };
        assert_eq!(parties("threads.switch").unwrap(), ["main", "switch"]);
        if let Some(names) = parties("threads.wake") {
            assert_eq!(names, ["main", "woken"]);
        }
    }

    #[test]
    fn a_bad_backend_is_refused_with_the_choices() {
        let p = &probes()[0];
        let params = schedlab_measure::model::Params::new().with("backend", "green");
        let Err(ProbeError::Failed(msg)) = p.setup(&params, &Context::for_tests()) else {
            panic!("backend=green accepted")
        };
        assert!(msg.contains("os, rt, tokio, pthread-os or pthread-rt"), "{msg}");
    }

    /// Developer aid, not a check: prints quick-suite medians for the probes matching
    /// `SCHEDLAB_FILTER` (default `threads`). Run with
    /// `SCHEDLAB_FILTER=threads.switch cargo test --release -p schedlab-probes -- --ignored --nocapture threads::tests::print_medians`.
    #[test]
    #[ignore = "measures; prints figures for a developer to read"]
    fn print_medians() {
        testkit::print_medians(probes(), "threads");
    }
}
