//! `threads.compute` and `threads.atomic.contended`: the thread rows of seed 002's Table 1
//! (UnixBench-style counts over 20 s): threadsWithComputation and
//! threadsWithSmallComputation ("creates a large number of threads that perform some
//! computation without joining their execution"), threadsComp 10 16 / 10 32 joining ("a
//! loop that creates 16 [32] threads and then joins with their execution before proceeding
//! with the next iteration") and threadsPerformingAtomicOps ("the threads perform atomic
//! (and thus possibly blocking) operations on counters"). The seed gives no source; these
//! follow its descriptions, and report time per thread rather than a count.
//!
//! Every thread lives its whole life inside the sample: created, runs its work, ends.
//! - `join=none`: threads are created without being joined; each signals its end on a
//!   counting semaphore, and the creator keeps at most 64 of them alive at once (waiting
//!   on the semaphore when 64 are in flight, and for all of them at the end of the sample).
//!   Unbounded, a user-level runtime would hold every thread of a sample at once (it runs
//!   none until the creator blocks), and an OS thread's 2 MiB stack times thousands is not
//!   what the row measures. Kernel threads are joined after the clock stops, untimed.
//! - `join=16|32`: create a group, join the group, repeat; per thread.
//!
//! Work: `work` steps of xorshift64, each depending on the last (six dependent ALU
//! operations, about 2 ns here); atomic: `ops` `fetch_add`s on one shared counter, checked at the end of
//! the sample. Placement: all CPUs (kernel threads where the kernel puts them, schedlab-rt
//! with one processor per CPU, tokio multi-thread with one worker per CPU and the creator
//! running as a task on a worker, so spawns are local).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

use schedlab_measure::model::{Params, Unit};
use schedlab_measure::sys;
use schedlab_measure::{ProbeError, Timing};

use super::backend::{self, rt_run, rt_unpinned, Backend, Bench};
use crate::{Context, Info, Instance, Probe, Suite};

/// Threads alive at once when nobody joins them.
const WINDOW: usize = 64;

/// What each thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    /// `n` steps of xorshift64.
    Compute(u64),
    /// `n` fetch_adds on the shared counter.
    Atomic(u64),
}

impl Job {
    #[inline]
    fn run(self, counter: &AtomicU64) {
        match self {
            Job::Compute(n) => {
                // xorshift64 (Marsaglia 2003): each step depends on the last, and shifts
                // mixed with xors do not fold across an unrolled loop the way an LCG's
                // multiply-adds do (LLVM turned 8 LCG steps into one).
                let mut x = black_box(n) | 1;
                for _ in 0..black_box(n) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                black_box(x);
            }
            Job::Atomic(n) => {
                for _ in 0..n {
                    black_box(counter).fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Counter increments per thread.
    fn increments(self) -> u64 {
        match self {
            Job::Compute(_) => 0,
            Job::Atomic(n) => n,
        }
    }
}

/// How threads are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// Not joined; at most [`WINDOW`] alive.
    None,
    /// Created and joined in groups of this size.
    Groups(usize),
}

impl Join {
    fn parse(p: &Params) -> Result<Join, ProbeError> {
        match p.get("join").unwrap_or("none") {
            "none" => Ok(Join::None),
            g => match g.parse::<usize>() {
                Ok(n) if (1..=1024).contains(&n) => Ok(Join::Groups(n)),
                _ => Err(ProbeError::Failed(format!(
                    "bad value {g:?} for parameter join: none or a group size 1 to 1024"
                ))),
            },
        }
    }

    /// Threads per iteration of the timed body.
    fn per_iter(self) -> usize {
        match self {
            Join::None => 1,
            Join::Groups(n) => n,
        }
    }
}

struct ComputeProbe;
struct AtomicProbe;

/// The Table 1 thread-row probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(AtomicProbe), Box::new(ComputeProbe)]
}

impl Probe for ComputeProbe {
    fn info(&self) -> Info {
        Info {
            id: "threads.compute",
            doc: "Threads that each run `work` xorshift64 steps, created unjoined (at most 64 alive) or in joined groups of 16/32, on all CPUs; per thread",
            unit: Unit::Nanos,
            mirrors: "seed 002 Table 1 threadsWithComputation / threadsWithSmallComputation no joining (join=none, work=10000 / 100), threadsComp 10 16 / 10 32 joining (join=16 / 32); counts over 20 s there, time per thread here",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let sets: &[(&str, u64)] = match suite {
            Suite::Smoke => &[("none", 100)],
            Suite::Quick => &[("none", 10_000), ("none", 100), ("16", 10_000), ("32", 10_000)],
            Suite::Full => &[
                ("none", 10_000),
                ("none", 100),
                ("16", 10_000),
                ("32", 10_000),
                ("16", 100),
                ("32", 100),
            ],
        };
        backend::per_backend(
            &sets
                .iter()
                .map(|(j, w)| Params::new().with("join", j).with("work", w))
                .collect::<Vec<_>>(),
        )
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let work: u64 = params.parse_or("work", 10_000).map_err(ProbeError::Failed)?;
        if work > 1 << 30 {
            return Err(ProbeError::Failed(format!("work={work}: at most 2^30")));
        }
        setup(params, Job::Compute(work))
    }
}

impl Probe for AtomicProbe {
    fn info(&self) -> Info {
        Info {
            id: "threads.atomic.contended",
            doc: "Threads that each do `ops` fetch_adds on one shared counter, created unjoined (at most 64 alive) on all CPUs; per thread",
            unit: Unit::Nanos,
            mirrors: "seed 002 Table 1 threadsPerformingAtomicOps (a count over 20 s there, time per thread here)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let ops: &[u64] = match suite {
            Suite::Smoke | Suite::Quick => &[1000],
            Suite::Full => &[1000, 100_000],
        };
        backend::per_backend(&ops.iter().map(|o| Params::new().with("ops", o)).collect::<Vec<_>>())
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let ops: u64 = params.parse_or("ops", 1000).map_err(ProbeError::Failed)?;
        if ops > 1 << 30 {
            return Err(ProbeError::Failed(format!("ops={ops}: at most 2^30")));
        }
        setup(params, Job::Atomic(ops))
    }
}

/// Shared setup: the backend's runtime and a body that runs `iters` × group threads.
fn setup(params: &Params, job: Job) -> Result<Box<dyn Instance>, ProbeError> {
    let backend = Backend::from_params(params)?;
    let join = Join::parse(params)?;
    let per_iter = join.per_iter();
    let cpus = sys::allowed_cpus();
    let ncpu = cpus.len();
    let counter = Arc::new(AtomicU64::new(0));
    let mut expected = 0u64;
    // Nothing is pinned here: threads go where the kernel (or the runtime) puts them. The
    // placement record follows the runtime's kernel threads (rt processors, tokio workers);
    // os threads live inside one sample, so only the measuring thread is seen.
    let mut notes = Params::new().with("cpus", backend::cpu_list(&cpus));
    if join == Join::None {
        notes.set("window", WINDOW);
    }
    let bench = Bench::new(backend.metric(per_iter as f64), notes);
    let check = move |iters: u64, counter: &AtomicU64, expected: &mut u64| {
        *expected += iters * per_iter as u64 * job.increments();
        let got = counter.load(Ordering::Acquire);
        if got == *expected {
            Ok(())
        } else {
            Err(ProbeError::Failed(format!("atomic counter {got}, expected {expected}")))
        }
    };
    Ok(match backend {
        Backend::Os => bench.body(move |iters| {
            let elapsed = os_threads(iters, join, job, &counter)?;
            check(iters, &counter, &mut expected)?;
            Ok(Timing::from_elapsed(elapsed))
        }),
        Backend::Rt => {
            let (rt, parties) = rt_unpinned(ncpu)?;
            bench.note("runtime", format!("rt processors={ncpu}")).parties(parties).body(
                move |iters| {
                    let c = counter.clone();
                    let elapsed = rt_run(&rt, move || rt_threads(iters, join, job, &c))?;
                    check(iters, &counter, &mut expected)?;
                    Ok(Timing::from_elapsed(elapsed))
                },
            )
        }
        Backend::Tokio => {
            let (tk, parties) = backend::tokio_unpinned(ncpu)?;
            let runtime = format!("tokio multi_thread workers={ncpu}");
            bench.note("runtime", runtime).parties(parties).body(move |iters| {
                let c = counter.clone();
                let driver = tk.spawn(async move { tokio_tasks(iters, join, job, c).await });
                let elapsed = tk
                    .block_on(driver)
                    .map_err(|e| ProbeError::Failed(format!("tokio driver task: {e}")))?;
                check(iters, &counter, &mut expected)?;
                Ok(Timing::from_elapsed(elapsed))
            })
        }
    }
    .boxed())
}

/// A counting semaphore for kernel threads (std has none).
#[derive(Default)]
struct Semaphore {
    permits: Mutex<usize>,
    cv: Condvar,
}

impl Semaphore {
    fn release(&self) {
        *self.permits.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.cv.notify_one();
    }

    fn acquire(&self) {
        let mut p = self.permits.lock().unwrap_or_else(PoisonError::into_inner);
        while *p == 0 {
            p = self.cv.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
        *p -= 1;
    }
}

/// Kernel threads (`std::thread::spawn`): `iters` threads unjoined, or `iters` groups.
fn os_threads(
    iters: u64,
    join: Join,
    job: Job,
    counter: &Arc<AtomicU64>,
) -> Result<std::time::Duration, ProbeError> {
    let spawn = |f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new().spawn(f).map_err(|e| ProbeError::io("std::thread::spawn", e))
    };
    let joined = |h: std::thread::JoinHandle<()>| {
        h.join().map_err(|_| ProbeError::Failed("thread panicked".into()))
    };
    match join {
        Join::None => {
            let done = Arc::new(Semaphore::default());
            let mut handles = Vec::with_capacity(iters.min(1 << 16) as usize);
            let mut in_flight = 0;
            let start = Instant::now();
            let mut result = Ok(());
            for _ in 0..iters {
                if in_flight == WINDOW {
                    done.acquire();
                    in_flight -= 1;
                }
                let (done, counter) = (done.clone(), counter.clone());
                match spawn(Box::new(move || {
                    job.run(&counter);
                    done.release();
                })) {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                in_flight += 1;
            }
            for _ in 0..in_flight {
                done.acquire();
            }
            let elapsed = start.elapsed();
            // Untimed: make sure every thread is gone, not merely done.
            for h in handles {
                joined(h)?;
            }
            result.map(|()| elapsed)
        }
        Join::Groups(g) => {
            let mut handles = Vec::with_capacity(g);
            let start = Instant::now();
            for _ in 0..iters {
                for _ in 0..g {
                    let counter = counter.clone();
                    handles.push(spawn(Box::new(move || job.run(&counter)))?);
                }
                for h in handles.drain(..) {
                    joined(h)?;
                }
            }
            Ok(start.elapsed())
        }
    }
}

/// schedlab-rt user threads, run as the `block_on` thread.
fn rt_threads(iters: u64, join: Join, job: Job, counter: &Arc<AtomicU64>) -> std::time::Duration {
    match join {
        Join::None => {
            let done = Arc::new(schedlab_rt::sync::Semaphore::new(0));
            let mut in_flight = 0;
            let start = Instant::now();
            for _ in 0..iters {
                if in_flight == WINDOW {
                    done.acquire();
                    in_flight -= 1;
                }
                let (done, counter) = (done.clone(), counter.clone());
                // Dropping the handle detaches the thread.
                drop(schedlab_rt::spawn(move || {
                    job.run(&counter);
                    done.release();
                }));
                in_flight += 1;
            }
            for _ in 0..in_flight {
                done.acquire();
            }
            start.elapsed()
        }
        Join::Groups(g) => {
            let mut handles = Vec::with_capacity(g);
            let start = Instant::now();
            for _ in 0..iters {
                for _ in 0..g {
                    let counter = counter.clone();
                    handles.push(schedlab_rt::spawn(move || job.run(&counter)));
                }
                for h in handles.drain(..) {
                    let _ = h.join();
                }
            }
            start.elapsed()
        }
    }
}

/// tokio tasks, run as a task on a worker.
async fn tokio_tasks(
    iters: u64,
    join: Join,
    job: Job,
    counter: Arc<AtomicU64>,
) -> std::time::Duration {
    match join {
        Join::None => {
            let done = Arc::new(tokio::sync::Semaphore::new(0));
            let mut in_flight = 0;
            let start = Instant::now();
            for _ in 0..iters {
                if in_flight == WINDOW {
                    if let Ok(p) = done.acquire().await {
                        p.forget();
                    }
                    in_flight -= 1;
                }
                let (done, counter) = (done.clone(), counter.clone());
                // Dropping the handle detaches the task.
                drop(tokio::spawn(async move {
                    job.run(&counter);
                    done.add_permits(1);
                }));
                in_flight += 1;
            }
            if in_flight > 0 {
                if let Ok(p) = done.acquire_many(in_flight as u32).await {
                    p.forget();
                }
            }
            start.elapsed()
        }
        Join::Groups(g) => {
            let mut handles = Vec::with_capacity(g);
            let start = Instant::now();
            for _ in 0..iters {
                for _ in 0..g {
                    let counter = counter.clone();
                    handles.push(tokio::spawn(async move { job.run(&counter) }));
                }
                for h in handles.drain(..) {
                    let _ = h.await;
                }
            }
            start.elapsed()
        }
    }
}
