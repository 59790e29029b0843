//! `threads.tree`: a spawn tree in the manner of the "skynet" benchmark — every node is a
//! thread that spawns `fanout` children, waits for them and returns the sum of their
//! results; the leaves return 1 — so a thread system is measured with many threads alive
//! at once, not one at a time. The value is the time per node (spawn, run, join, sum);
//! the notes carry the peak resident memory the tree added, per thread of the tree.
//!
//! What it shows: how a runtime orders a tree of spawns. Breadth-first (a FIFO run queue)
//! starts nearly every node before any finishes, so every node's stack is alive at once;
//! newest-first (schedlab-rt's next slot and fresh part, Go's `runnext`, tokio's LIFO
//! slot) keeps few alive. OS threads are one kernel thread per node, so the os backend
//! runs only trees of at most 10,000 leaves (skip with a reason beyond).
//!
//! Peak memory: see `memory.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use schedlab_measure::model::{Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::{ProbeError, Timing};

use super::backend::{self, rt_pinned, rt_run, Backend, Bench};
use super::memory::{Peak, PeakMemory, PeakSample, WithPeak};
use crate::{Context, Info, Instance, Probe, Suite};
use schedlab_measure::sys::PinGuard;

struct TreeProbe;

/// The spawn-tree probe.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(TreeProbe)]
}

/// Largest tree the os backend runs (kernel threads, one per node).
const OS_MAX_LEAVES: u64 = 10_000;

impl Probe for TreeProbe {
    fn info(&self) -> Info {
        Info {
            id: "threads.tree",
            doc: "A tree of threads (skynet): each node spawns fanout children, joins them and sums their results, depth levels deep; per node, with the peak resident memory the tree added per node in the notes",
            unit: Unit::Nanos,
            mirrors: "- (the skynet benchmark: 10^6 leaves, fan-out 10; os = std::thread per node, rt = schedlab-rt spawn, tokio = tokio::spawn of a boxed future)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let shapes: &[(u32, &str)] = match suite {
            Suite::Smoke => &[(3, "1")],
            Suite::Quick => &[(4, "1"), (6, "1"), (6, "2")],
            Suite::Full => &[(4, "1"), (4, "2"), (6, "1"), (6, "2")],
        };
        let base: Vec<Params> = shapes
            .iter()
            .map(|&(depth, procs)| {
                Params::new().with("fanout", 10).with("depth", depth).with("processors", procs)
            })
            .collect();
        backend::per_backend(&base)
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // A 10^6-node tree is a sample of its own: few iterations, few samples (5 quick,
        // 7 full).
        let mut s = default.clone();
        if suite != Suite::Smoke {
            s.samples = s.samples.min(if suite == Suite::Quick { 5 } else { 7 });
        }
        s
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let backend = Backend::from_params(params)?;
        let fanout: u64 = params.parse_or("fanout", 10).map_err(ProbeError::Failed)?;
        let depth: u32 = params.parse_or("depth", 4).map_err(ProbeError::Failed)?;
        let cpus = backend::processors_param(params)?;
        let procs = cpus.len();
        if !(2..=100).contains(&fanout) {
            return Err(ProbeError::Failed(format!("fanout={fanout}: use 2 to 100")));
        }
        let leaves = fanout
            .checked_pow(depth)
            .filter(|&l| l <= 10_000_000)
            .ok_or_else(|| ProbeError::Failed("fanout^depth above 10^7 leaves".to_string()))?;
        if backend == Backend::Os && leaves > OS_MAX_LEAVES {
            return Err(ProbeError::Skip(format!(
                "os: {leaves} leaves would be as many kernel threads; the os backend runs trees of at most {OS_MAX_LEAVES} leaves"
            )));
        }
        // Nodes of the tree: 1 + f + f^2 + ... + f^depth.
        let nodes: u64 = (0..=depth).map(|d| fanout.pow(d)).sum();
        let peak = Arc::new(Mutex::new(PeakMemory::new("node")));
        let notes = Params::new()
            .with("cpus", backend::cpu_list(&cpus))
            .with("leaves", leaves)
            .with("nodes", nodes);
        let bench = Bench::new(backend.metric(nodes as f64), notes);
        let check = move |sum: u64, iters: u64| {
            if sum == leaves * iters {
                Ok(())
            } else {
                Err(ProbeError::Failed(format!("tree summed {sum}, expected {}", leaves * iters)))
            }
        };
        let p2 = peak.clone();
        let record = move |per_sample: Option<Peak>| {
            let mut p = p2.lock().unwrap_or_else(|e| e.into_inner());
            p.add(per_sample, nodes);
        };
        let bench = match backend {
            Backend::Os => {
                let pin = (procs == 1).then(|| PinGuard::pin(cpus[0])).transpose()?;
                bench.note("runtime", "std::thread per node").keep(pin).body(move |iters| {
                    let sample = PeakSample::start();
                    let t = Instant::now();
                    let mut sum = 0;
                    for _ in 0..iters {
                        sum += os_tree(depth, fanout)?;
                    }
                    let elapsed = t.elapsed();
                    record(sample.finish());
                    check(sum, iters)?;
                    Ok(Timing::from_elapsed(elapsed))
                })
            }
            Backend::Rt => {
                let rt = rt_pinned(&cpus)?;
                bench.note("runtime", format!("rt processors={procs}")).body(move |iters| {
                    let sample = PeakSample::start();
                    let (elapsed, sum) = rt_run(&rt, move || {
                        let t = Instant::now();
                        let sum: u64 = (0..iters).map(|_| rt_tree(depth, fanout)).sum();
                        (t.elapsed(), sum)
                    })?;
                    record(sample.finish());
                    check(sum, iters)?;
                    Ok(Timing::from_elapsed(elapsed))
                })
            }
            Backend::Tokio => {
                let (tk, pin, runtime) = backend::tokio_on(&cpus)?;
                bench.note("runtime", runtime).keep(pin).body(move |iters| {
                    let sample = PeakSample::start();
                    let (elapsed, sum) = tk.block_on(async move {
                        let t = Instant::now();
                        let mut sum = 0;
                        for _ in 0..iters {
                            sum += tokio::spawn(tokio_tree(depth, fanout)).await.unwrap_or(0);
                        }
                        (t.elapsed(), sum)
                    });
                    record(sample.finish());
                    check(sum, iters)?;
                    Ok(Timing::from_elapsed(elapsed))
                })
            }
        };
        Ok(Box::new(WithPeak { bench, peak }))
    }
}

fn os_tree(depth: u32, fanout: u64) -> Result<u64, ProbeError> {
    if depth == 0 {
        return Ok(1);
    }
    let mut hs = Vec::with_capacity(fanout as usize);
    for _ in 0..fanout {
        // Small stacks: the node does almost nothing, and 10^4 default 2 MiB stacks
        // would measure the mapping of address space rather than threads.
        let h = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || os_tree(depth - 1, fanout))
            .map_err(|e| ProbeError::io("std::thread::spawn", e))?;
        hs.push(h);
    }
    let mut sum = 0;
    for h in hs {
        sum += h.join().map_err(|_| ProbeError::Failed("a tree thread panicked".into()))??;
    }
    Ok(sum)
}

fn rt_tree(depth: u32, fanout: u64) -> u64 {
    if depth == 0 {
        return 1;
    }
    let hs: Vec<_> =
        (0..fanout).map(|_| schedlab_rt::spawn(move || rt_tree(depth - 1, fanout))).collect();
    hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
}

fn tokio_tree(depth: u32, fanout: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if depth == 0 {
            return 1;
        }
        let hs: Vec<_> = (0..fanout).map(|_| tokio::spawn(tokio_tree(depth - 1, fanout))).collect();
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap_or(0);
        }
        sum
    })
}
