//! `threads.mutex.uncontended` and `threads.mutex.contended`: seed 003's second thread
//! micro-operation, "the time to lock and unlock a mutex (under varying degrees of
//! contention)". The seed saw LinuxThreads' lock time grow roughly linearly with the number
//! of contenders while the user-level libraries stayed flat; the contended probe draws that
//! curve over `threads=2,4,8,16`.
//!
//! Uncontended: one thread locks, increments the protected counter and unlocks, on one
//! pinned processor. Contended: `threads` threads do the same on one shared mutex, spread
//! over every allowed CPU (kernel threads pinned round-robin; the runtimes get one
//! processor or worker per CPU, pinned). Each thread waits at a barrier, notes when it
//! starts and ends its share of `iters` lock/unlock pairs; the sample is the span from the
//! first start to the last end, divided by all the pairs. The counter is checked against
//! the pairs done, so a broken lock fails the probe instead of looking fast.
//!
//! The kernel-thread crew lives from setup to drop (so thread creation stays out of the
//! samples); the user-level crews are spawned at the start of each sample, untimed.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sys::{self, PinGuard};
use schedlab_measure::{ProbeError, Timing};

use super::backend::{self, rt_pinned, rt_run, timing_on, Backend, Bench, THREAD_PREFIX};
use super::pthread;
use crate::{Context, Info, Instance, Probe, Suite};

struct Uncontended;
struct Contended;

/// The mutex probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(Uncontended), Box::new(Contended)]
}

impl Probe for Uncontended {
    fn info(&self) -> Info {
        Info {
            id: "threads.mutex.uncontended",
            doc: "Lock, increment the protected counter, unlock, by one thread on one processor; per lock+unlock",
            unit: Unit::Nanos,
            mirrors: "seed 003 table, row Mutex (SA 0.4 µs, PTH 0.3 µs, LinuxThreads 0.6 µs); os = std::sync::Mutex (a futex word, like glibc's default pthread mutex), rt = schedlab_rt::sync::Mutex, tokio = tokio::sync::Mutex; pthread-os / pthread-rt = csrc/pthread_bench.c `lock` (a default pthread_mutex_t, in a created thread)",
            requires: pthread::REQUIRES,
        }
    }

    fn variants(&self, _suite: Suite) -> Vec<Params> {
        let mut v = backend::per_backend(&[Params::new()]);
        v.extend(pthread::per_library(&[Params::new()]));
        v
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        if let Some(lib) = pthread::Library::from_params(params)? {
            return pthread::setup(pthread::Op::Lock, lib, ctx);
        }
        let backend = Backend::from_params(params)?;
        let cpu = backend::one_cpu();
        // A few nanoseconds for every backend: subtract the loop.
        let bench = Bench::new(Metric::per_op(), Params::new().with("cpus", cpu));
        Ok(match backend {
            Backend::Os => {
                let pin = PinGuard::pin(cpu)?;
                let m = Mutex::new(0u64);
                bench
                    .body(move |iters| {
                        let start = Instant::now();
                        for _ in 0..iters {
                            *black_box(&m).lock().unwrap_or_else(PoisonError::into_inner) += 1;
                        }
                        Ok(timing_on(start.elapsed(), cpu))
                    })
                    .keep(pin)
            }
            Backend::Rt => {
                let rt = rt_pinned(&[cpu])?;
                bench.note("runtime", "rt processors=1").body(move |iters| {
                    let elapsed = rt_run(&rt, move || {
                        let m = schedlab_rt::sync::Mutex::new(0u64);
                        let start = Instant::now();
                        for _ in 0..iters {
                            *black_box(&m).lock() += 1;
                        }
                        start.elapsed()
                    })?;
                    Ok(Timing::from_elapsed(elapsed))
                })
            }
            Backend::Tokio => {
                let pin = PinGuard::pin(cpu)?;
                let tk = backend::tokio_current()?;
                bench
                    .note("runtime", "tokio current_thread")
                    .body(move |iters| {
                        let elapsed = tk.block_on(async move {
                            let task = tokio::spawn(async move {
                                let m = tokio::sync::Mutex::new(0u64);
                                let start = Instant::now();
                                for _ in 0..iters {
                                    *black_box(&m).lock().await += 1;
                                }
                                start.elapsed()
                            });
                            task.await.unwrap_or_default()
                        });
                        Ok(timing_on(elapsed, cpu))
                    })
                    .keep(pin)
            }
        }
        .boxed())
    }
}

impl Probe for Contended {
    fn info(&self) -> Info {
        Info {
            id: "threads.mutex.contended",
            doc: "N threads on all CPUs each lock, increment and unlock one shared mutex; wall time from the first thread's start to the last one's end, per lock+unlock",
            unit: Unit::Nanos,
            mirrors: "seed 003 mutex test under contention (LinuxThreads' lock time grew linearly with contenders, SA and PTH stayed flat); threads pinned round-robin over the CPUs; pthread-os / pthread-rt = csrc/pthread_bench.c `mutex N` (a default pthread_mutex_t; threads placed by the kernel, the library with a processor per CPU)",
            requires: pthread::REQUIRES,
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let threads: &[usize] = match suite {
            Suite::Smoke => &[2],
            Suite::Quick | Suite::Full => &[2, 4, 8, 16],
        };
        let with_threads = |t: &usize| Params::new().with("threads", t);
        let mut v = backend::per_backend(&threads.iter().map(with_threads).collect::<Vec<_>>());
        // The quick suite's pthread rows: two contenders and eight.
        let c: &[usize] = match suite {
            Suite::Smoke => &[2],
            Suite::Quick => &[2, 8],
            Suite::Full => &[2, 4, 8, 16],
        };
        v.extend(pthread::per_library(&c.iter().map(with_threads).collect::<Vec<_>>()));
        v
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let library = pthread::Library::from_params(params)?;
        let threads: usize = params.parse_or("threads", 2).map_err(ProbeError::Failed)?;
        if !(1..=256).contains(&threads) {
            return Err(ProbeError::Failed(format!("threads={threads}: use 1 to 256")));
        }
        if let Some(lib) = library {
            return pthread::setup(pthread::Op::Mutex(threads), lib, ctx);
        }
        let backend = Backend::from_params(params)?;
        let cpus = sys::allowed_cpus();
        let notes = Params::new().with("cpus", backend::cpu_list(&cpus));
        let bench = Bench::new(backend.metric(threads as f64), notes);
        Ok(match backend {
            Backend::Os => {
                // Pairs done so far, to check the counter against.
                let mut expected = 0u64;
                let m = Arc::new(Mutex::new(0u64));
                let m2 = m.clone();
                let crew = Crew::start(
                    threads,
                    &cpus,
                    Arc::new(move |iters| {
                        for _ in 0..iters {
                            *m2.lock().unwrap_or_else(PoisonError::into_inner) += 1;
                        }
                    }),
                )?;
                bench.note("placement", "round-robin").body(move |iters| {
                    let timing = crew.run(iters)?;
                    expected += threads as u64 * iters;
                    check(*m.lock().unwrap_or_else(PoisonError::into_inner), expected)?;
                    Ok(timing)
                })
            }
            Backend::Rt => {
                let rt = rt_pinned(&cpus)?;
                let note = format!("rt processors={}", cpus.len());
                bench.note("runtime", note).body(move |iters| {
                    let (span, count) = rt_run(&rt, move || {
                        use schedlab_rt::sync::{Barrier, Mutex};
                        let m = Arc::new(Mutex::new(0u64));
                        let barrier = Arc::new(Barrier::new(threads));
                        let crew: Vec<_> = (0..threads)
                            .map(|_| {
                                let (m, barrier) = (m.clone(), barrier.clone());
                                schedlab_rt::spawn(move || {
                                    barrier.wait();
                                    let start = Instant::now();
                                    for _ in 0..iters {
                                        *m.lock() += 1;
                                    }
                                    (start, Instant::now())
                                })
                            })
                            .collect();
                        let spans = crew.into_iter().filter_map(|h| h.join().ok());
                        let span = span_of(spans);
                        let count = *m.lock();
                        (span, count)
                    })?;
                    check(count, threads as u64 * iters)?;
                    Ok(Timing::from_elapsed(span))
                })
            }
            Backend::Tokio => {
                let tk = backend::tokio_multi(cpus.len(), Some(cpus.clone()))?;
                let note = format!("tokio multi_thread workers={}", cpus.len());
                bench.note("runtime", note).body(move |iters| {
                    let (span, count) = tk.block_on(async move {
                        // Driven from a worker, so the crew is spawned locally.
                        let driver = tokio::spawn(async move {
                            use tokio::sync::{Barrier, Mutex};
                            let m = Arc::new(Mutex::new(0u64));
                            let barrier = Arc::new(Barrier::new(threads));
                            let crew: Vec<_> = (0..threads)
                                .map(|_| {
                                    let (m, barrier) = (m.clone(), barrier.clone());
                                    tokio::spawn(async move {
                                        barrier.wait().await;
                                        let start = Instant::now();
                                        for _ in 0..iters {
                                            *m.lock().await += 1;
                                        }
                                        (start, Instant::now())
                                    })
                                })
                                .collect();
                            let mut spans = Vec::with_capacity(threads);
                            for h in crew {
                                if let Ok(s) = h.await {
                                    spans.push(s);
                                }
                            }
                            let count = *m.lock().await;
                            (span_of(spans.into_iter()), count)
                        });
                        driver.await.unwrap_or_default()
                    });
                    check(count, threads as u64 * iters)?;
                    Ok(Timing::from_elapsed(span))
                })
            }
        }
        .boxed())
    }
}

/// The span from the earliest start to the latest end.
pub(super) fn span_of(spans: impl Iterator<Item = (Instant, Instant)>) -> Duration {
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    for (s, e) in spans {
        first = Some(first.map_or(s, |f| f.min(s)));
        last = Some(last.map_or(e, |l| l.max(e)));
    }
    match (first, last) {
        (Some(f), Some(l)) => l.saturating_duration_since(f),
        _ => Duration::ZERO,
    }
}

/// Fails unless the protected counter saw every increment.
pub(super) fn check(count: u64, expected: u64) -> Result<(), ProbeError> {
    if count == expected {
        Ok(())
    } else {
        Err(ProbeError::Failed(format!("mutex lost updates: counter {count}, expected {expected}")))
    }
}

/// A job a crew member runs once per sample with the sample's iteration count.
pub(super) type Job = Arc<dyn Fn(u64) + Send + Sync>;

/// What the measuring thread and the crew share.
struct CrewShared {
    state: Mutex<CrewState>,
    /// Signalled when a new sample (or stop) is posted.
    go: Condvar,
    /// Signalled when the last member finishes a sample.
    done: Condvar,
    /// Lines the members up so they start the job together.
    barrier: Barrier,
    /// Members that ran on another CPU than they were pinned to.
    migrated: AtomicU64,
}

#[derive(Default)]
struct CrewState {
    generation: u64,
    iters: u64,
    stop: bool,
    finished: usize,
    first_start: Option<Instant>,
    last_end: Option<Instant>,
}

/// A crew of kernel threads, pinned round-robin, that run a job on request and report when
/// each started and ended it. Stopped and joined on drop.
///
/// Protocol: the measuring thread bumps `generation` with the sample's `iters` and
/// broadcasts `go`; each member takes the new generation, waits at the barrier, runs the
/// job timed, folds its start and end into the state and signals `done` when it is the
/// last. Drop sets `stop` (never during a sample: `run` returns only when all finished).
pub(super) struct Crew {
    shared: Arc<CrewShared>,
    handles: Vec<JoinHandle<()>>,
}

impl Crew {
    pub(super) fn start(n: usize, cpus: &[usize], job: Job) -> Result<Crew, ProbeError> {
        let shared = Arc::new(CrewShared {
            state: Mutex::new(CrewState::default()),
            go: Condvar::new(),
            done: Condvar::new(),
            barrier: Barrier::new(n),
            migrated: AtomicU64::new(0),
        });
        let mut crew = Crew { shared: shared.clone(), handles: Vec::with_capacity(n) };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for i in 0..n {
            let (shared, job, ready) = (shared.clone(), job.clone(), ready_tx.clone());
            let cpu = cpus[i % cpus.len()];
            let h = std::thread::Builder::new()
                .name(format!("{THREAD_PREFIX}crew"))
                .spawn(move || {
                    let pinned = sys::pin_to(cpu);
                    let ok = pinned.is_ok();
                    let _ = ready.send(pinned);
                    if ok {
                        member(&shared, cpu, &*job, n);
                    }
                })
                .map_err(|e| ProbeError::io("spawn crew thread", e))?;
            crew.handles.push(h);
        }
        drop(ready_tx);
        for _ in 0..n {
            // A member that failed to pin has returned; dropping `crew` stops the rest.
            ready_rx
                .recv()
                .map_err(|_| ProbeError::Failed("crew thread died at start".into()))??;
        }
        Ok(crew)
    }

    /// Runs one sample of `iters` per member: the span from the first start to the last
    /// end, flagged as migrated if a member was found off its CPU.
    pub(super) fn run(&self, iters: u64) -> Result<Timing, ProbeError> {
        let n = self.handles.len();
        let s = &self.shared;
        let mut g = s.state.lock().unwrap_or_else(PoisonError::into_inner);
        g.generation += 1;
        g.iters = iters;
        g.finished = 0;
        g.first_start = None;
        g.last_end = None;
        s.go.notify_all();
        while g.finished < n {
            g = s.done.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        match (g.first_start, g.last_end) {
            (Some(f), Some(l)) => Ok(Timing {
                elapsed: l.saturating_duration_since(f),
                migrated: s.migrated.swap(0, Ordering::Relaxed) > 0,
                overhead: Duration::ZERO,
            }),
            _ => Err(ProbeError::Failed("crew finished without timings".into())),
        }
    }
}

/// A crew member's life: wait for a generation, run the job timed, report, repeat.
fn member(s: &CrewShared, cpu: usize, job: &(dyn Fn(u64) + Send + Sync), n: usize) {
    let mut seen = 0;
    loop {
        let iters = {
            let mut g = s.state.lock().unwrap_or_else(PoisonError::into_inner);
            while g.generation == seen && !g.stop {
                g = s.go.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
            if g.stop {
                return;
            }
            seen = g.generation;
            g.iters
        };
        s.barrier.wait();
        let start = Instant::now();
        job(iters);
        let end = Instant::now();
        if sys::current_cpu() != Some(cpu) {
            s.migrated.fetch_add(1, Ordering::Relaxed);
        }
        let mut g = s.state.lock().unwrap_or_else(PoisonError::into_inner);
        g.first_start = Some(g.first_start.map_or(start, |f| f.min(start)));
        g.last_end = Some(g.last_end.map_or(end, |l| l.max(end)));
        g.finished += 1;
        if g.finished == n {
            s.done.notify_one();
        }
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        self.shared.state.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        self.shared.go.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
