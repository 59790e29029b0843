//! `threads.create`: create, start and join a thread that does nothing — seed 003's first
//! thread micro-operation ("the time to create, start, and destroy a thread that does
//! nothing"), one at a time and in batches.
//!
//! Everything runs on one processor: the OS thread that creates (the measuring thread,
//! pinned; new threads inherit its affinity), a one-processor schedlab-rt runtime whose
//! processor is pinned, or a tokio current-thread runtime on the pinned measuring thread.
//! A batch of B creates B threads, then joins all B; the value is per thread.

use std::time::Instant;

use schedlab_measure::model::{Params, Unit};
use schedlab_measure::sys::PinGuard;
use schedlab_measure::ProbeError;

use super::backend::{self, rt_pinned, rt_run, timing_on, Backend, Bench};
use super::pthread;
use crate::{Context, Info, Instance, Probe, Suite};

struct CreateProbe;

/// The thread-creation probe.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(CreateProbe)]
}

impl Probe for CreateProbe {
    fn info(&self) -> Info {
        Info {
            id: "threads.create",
            doc: "Create, start and join a thread that does nothing, one at a time or B at a time (B created, then B joined), on one processor; per thread",
            unit: Unit::Nanos,
            mirrors: "seed 003 table, row Thread (create, start, destroy a null thread: SA 15 µs, GNU PTH 96 µs, LinuxThreads 90 µs); os = std::thread (pthread_create, 2 MiB stack), rt = schedlab-rt spawn, tokio = tokio::spawn of a task, awaited; pthread-os / pthread-rt = csrc/pthread_bench.c `create B` under glibc / libschedlab_pthread.so (default attributes; the loop runs in a created thread, timed around the rounds)",
            requires: pthread::REQUIRES,
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let batches: &[usize] = match suite {
            Suite::Smoke => &[1],
            Suite::Quick => &[1, 16],
            Suite::Full => &[1, 16, 256],
        };
        let with_batch = |b: &usize| Params::new().with("batch", b);
        let mut v = backend::per_backend(&batches.iter().map(with_batch).collect::<Vec<_>>());
        let c = pthread::values_for(suite, batches);
        v.extend(pthread::per_library(&c.iter().map(with_batch).collect::<Vec<_>>()));
        v
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let library = pthread::Library::from_params(params)?;
        let batch: usize = params.parse_or("batch", 1).map_err(ProbeError::Failed)?;
        if !(1..=4096).contains(&batch) {
            return Err(ProbeError::Failed(format!("batch={batch}: use 1 to 4096")));
        }
        if let Some(lib) = library {
            return pthread::setup(pthread::Op::Create(batch), lib, ctx);
        }
        let backend = Backend::from_params(params)?;
        let cpu = backend::one_cpu();
        let notes = Params::new().with("cpus", cpu).with("batch", batch);
        let metric = backend.metric(batch as f64);
        Ok(match backend {
            Backend::Os => {
                let pin = PinGuard::pin(cpu)?;
                let mut handles = Vec::with_capacity(batch);
                Bench::new(metric, notes)
                    .body(move |iters| {
                        let start = Instant::now();
                        for _ in 0..iters {
                            for _ in 0..batch {
                                let h = std::thread::Builder::new()
                                    .spawn(|| {})
                                    .map_err(|e| ProbeError::io("std::thread::spawn", e))?;
                                handles.push(h);
                            }
                            for h in handles.drain(..) {
                                h.join()
                                    .map_err(|_| ProbeError::Failed("thread panicked".into()))?;
                            }
                        }
                        Ok(timing_on(start.elapsed(), cpu))
                    })
                    .keep(pin)
            }
            Backend::Rt => {
                let rt = rt_pinned(&[cpu])?;
                Bench::new(metric, notes.with("runtime", "rt processors=1")).body(move |iters| {
                    let elapsed = rt_run(&rt, move || {
                        let mut handles = Vec::with_capacity(batch);
                        let start = Instant::now();
                        for _ in 0..iters {
                            for _ in 0..batch {
                                handles.push(schedlab_rt::spawn(|| {}));
                            }
                            for h in handles.drain(..) {
                                let _ = h.join();
                            }
                        }
                        start.elapsed()
                    })?;
                    Ok(schedlab_measure::Timing::from_elapsed(elapsed))
                })
            }
            Backend::Tokio => {
                let pin = PinGuard::pin(cpu)?;
                let tk = backend::tokio_current()?;
                Bench::new(metric, notes.with("runtime", "tokio current_thread"))
                    .body(move |iters| {
                        let elapsed = tk.block_on(async move {
                            let mut handles = Vec::with_capacity(batch);
                            let start = Instant::now();
                            for _ in 0..iters {
                                for _ in 0..batch {
                                    handles.push(tokio::spawn(async {}));
                                }
                                for h in handles.drain(..) {
                                    let _ = h.await;
                                }
                            }
                            start.elapsed()
                        });
                        Ok(timing_on(elapsed, cpu))
                    })
                    .keep(pin)
            }
        }
        .boxed())
    }
}
