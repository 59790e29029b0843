//! `threads.ring`: a token passed round a ring of `threads` threads, each blocked on a
//! bounded channel from its predecessor (the "thread-ring" benchmark of the Computer
//! Language Benchmarks Game, 503 threads). Every hop wakes a thread that is parked, so on
//! one processor it measures the hand-off (park, wake, switch) with many threads alive,
//! and on two it shows what waking a thread across processors costs — the ring has one
//! runnable thread at a time, so a second processor can only add cost. The value is the
//! time per hop.
//!
//! Each sample builds its ring (untimed), sends the token round it `iters` times (timed),
//! then stops and joins the ring (untimed).

use std::time::{Duration, Instant};

use schedlab_measure::model::{Params, Unit};
use schedlab_measure::sys::PinGuard;
use schedlab_measure::{ProbeError, Timing};

use super::backend::{self, rt_pinned, rt_run, Backend, Bench};
use crate::{Context, Info, Instance, Probe, Suite};

struct RingProbe;

/// The thread-ring probe.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(RingProbe)]
}

/// The token value that stops a ring thread (after it passed it on).
const STOP: u64 = u64::MAX;

impl Probe for RingProbe {
    fn info(&self) -> Info {
        Info {
            id: "threads.ring",
            doc: "A token passed round a ring of threads, each blocked on a one-slot channel from the one before: per hop (a wake-up of a parked thread and a switch to it)",
            unit: Unit::Nanos,
            mirrors: "Benchmarks Game thread-ring (503 threads); os = std::sync::mpsc::sync_channel(1), rt = schedlab_rt::sync::channel(1), tokio = tokio::sync::mpsc::channel(1)",
            requires: "2 CPUs for processors=2",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let procs: &[u32] = if suite == Suite::Smoke { &[1] } else { &[1, 2] };
        let base: Vec<Params> = procs
            .iter()
            .map(|&p| Params::new().with("threads", 503).with("processors", p))
            .collect();
        backend::per_backend(&base)
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let backend = Backend::from_params(params)?;
        let n: usize = params.parse_or("threads", 503).map_err(ProbeError::Failed)?;
        let cpus = backend::processors_param(params)?;
        let procs = cpus.len();
        if !(2..=10_000).contains(&n) {
            return Err(ProbeError::Failed(format!("threads={n}: use 2 to 10000")));
        }
        let notes = Params::new().with("cpus", backend::cpu_list(&cpus));
        let bench = Bench::new(backend.metric(n as f64), notes);
        let bench = match backend {
            Backend::Os => {
                // Threads inherit the creator's CPU mask: one CPU pins the whole ring.
                let pin = (procs == 1).then(|| PinGuard::pin(cpus[0])).transpose()?;
                bench
                    .note("runtime", "std::thread")
                    .keep(pin)
                    .body(move |iters| Ok(Timing::from_elapsed(os_ring(n, iters)?)))
            }
            Backend::Rt => {
                let rt = rt_pinned(&cpus)?;
                bench.note("runtime", format!("rt processors={procs}")).body(move |iters| {
                    Ok(Timing::from_elapsed(rt_run(&rt, move || rt_ring(n, iters))??))
                })
            }
            Backend::Tokio => {
                let (tk, pin, runtime) = backend::tokio_on(&cpus)?;
                bench
                    .note("runtime", runtime)
                    .keep(pin)
                    .body(move |iters| Ok(Timing::from_elapsed(tk.block_on(tokio_ring(n, iters))?)))
            }
        };
        Ok(bench.boxed())
    }
}

/// What a ring thread does with a token `t`: `Some(next)` to pass on, `None` when the
/// round is complete (`t == 0`: tell the measurer).
fn step(t: u64) -> Option<u64> {
    (t != 0).then(|| t - 1)
}

/// One ring thread's life: receive a token, pass it on (or report the round complete),
/// until the stop token has been passed on or a neighbour is gone.
fn ring_member(
    mut recv: impl FnMut() -> Option<u64>,
    mut send: impl FnMut(u64) -> bool,
    mut done: impl FnMut(),
) {
    while let Some(t) = recv() {
        if t == STOP {
            send(STOP);
            return;
        }
        match step(t) {
            Some(t) => {
                if !send(t) {
                    return;
                }
            }
            None => done(),
        }
    }
}

fn lost() -> ProbeError {
    ProbeError::Failed("a ring thread is gone".into())
}

fn os_ring(n: usize, iters: u64) -> Result<Duration, ProbeError> {
    use std::sync::mpsc::sync_channel;
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| sync_channel::<u64>(1)).unzip();
    let (done_tx, done_rx) = sync_channel::<()>(1);
    let mut handles = Vec::with_capacity(n);
    for (i, rx) in rxs.into_iter().enumerate() {
        let next = txs[(i + 1) % n].clone();
        let done = done_tx.clone();
        let h = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                ring_member(
                    || rx.recv().ok(),
                    |t| next.send(t).is_ok(),
                    || {
                        let _ = done.send(());
                    },
                )
            })
            .map_err(|e| ProbeError::io("std::thread::spawn", e))?;
        handles.push(h);
    }
    let start = Instant::now();
    txs[0].send(iters * n as u64 - 1).map_err(|_| lost())?;
    let got = done_rx.recv();
    let elapsed = start.elapsed();
    let _ = txs[0].send(STOP);
    drop(txs);
    for h in handles {
        h.join().map_err(|_| ProbeError::Failed("a ring thread panicked".into()))?;
    }
    got.map_err(|_| lost())?;
    Ok(elapsed)
}

fn rt_ring(n: usize, iters: u64) -> Result<Duration, ProbeError> {
    use schedlab_rt::sync::channel;
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| channel::<u64>(1)).unzip();
    let (done_tx, done_rx) = channel::<()>(1);
    let handles: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(i, rx)| {
            let next = txs[(i + 1) % n].clone();
            let done = done_tx.clone();
            schedlab_rt::spawn(move || {
                ring_member(
                    || rx.recv().ok(),
                    |t| next.send(t).is_ok(),
                    || {
                        let _ = done.send(());
                    },
                )
            })
        })
        .collect();
    let start = Instant::now();
    txs[0].send(iters * n as u64 - 1).map_err(|_| lost())?;
    let got = done_rx.recv();
    let elapsed = start.elapsed();
    let _ = txs[0].send(STOP);
    drop(txs);
    for h in handles {
        h.join().map_err(|_| ProbeError::Failed("a ring thread panicked".into()))?;
    }
    got.map_err(|_| lost())?;
    Ok(elapsed)
}

async fn tokio_ring(n: usize, iters: u64) -> Result<Duration, ProbeError> {
    use tokio::sync::mpsc::channel;
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| channel::<u64>(1)).unzip();
    let (done_tx, mut done_rx) = channel::<()>(1);
    let handles: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(i, mut rx)| {
            let next = txs[(i + 1) % n].clone();
            let done = done_tx.clone();
            tokio::spawn(async move {
                while let Some(t) = rx.recv().await {
                    if t == STOP {
                        let _ = next.send(STOP).await;
                        return;
                    }
                    match step(t) {
                        Some(t) => {
                            if next.send(t).await.is_err() {
                                return;
                            }
                        }
                        None => {
                            let _ = done.send(()).await;
                        }
                    }
                }
            })
        })
        .collect();
    let start = Instant::now();
    txs[0].send(iters * n as u64 - 1).await.map_err(|_| lost())?;
    let got = done_rx.recv().await;
    let elapsed = start.elapsed();
    let _ = txs[0].send(STOP).await;
    drop(txs);
    for h in handles {
        h.await.map_err(|_| ProbeError::Failed("a ring task panicked".into()))?;
    }
    got.ok_or_else(lost)?;
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_of_k_makes_k_plus_one_hops() {
        let mut t = 5;
        let mut hops = 1;
        while let Some(next) = step(t) {
            t = next;
            hops += 1;
        }
        assert_eq!(hops, 6);
    }

    #[test]
    fn every_ring_completes_and_stops() {
        assert!(os_ring(5, 3).is_ok());
        let rt = schedlab_rt::Runtime::builder().processors(2).build().unwrap();
        assert!(rt.block_on(|| rt_ring(7, 4)).unwrap().is_ok());
        let tk = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert!(tk.block_on(tokio_ring(6, 2)).is_ok());
    }
}
