//! `threads.forkjoin`: divide and conquer with a thread per split, the way fork-join
//! programs are written — a thread system measured on a burst of short-lived threads with
//! a deep, unbalanced tree of them alive.
//!
//! - `kind=fib`: `fib(n)` where every call above the spawn cut-off (`spawn_depth` levels
//!   from the root) spawns a thread for `fib(n-1)`, computes `fib(n-2)` itself and joins;
//!   below the cut-off it recurses sequentially. The value is the time per spawned thread
//!   (all the work, leaves included, over the number of spawns, which the notes give).
//! - `kind=sort`: a parallel quicksort of `elements` pseudo-random `u64`s: partition
//!   (median of three), sort the left part in a new thread and the right part in this one,
//!   join; parts of at most 4,096 elements are sorted sequentially (`sort_unstable`). The
//!   threads borrow the caller's slice: `std::thread::scope` for os, `schedlab_rt::scope`
//!   for rt; tokio skips (its tasks cannot borrow, and an owning split would be another
//!   algorithm). The value is the time per element; the input is refilled, untimed,
//!   before every sort, and checked sorted after it.
//!
//! Peak resident memory is in the notes (`memory.rs`), shown beside the time by `show`
//! and the report: `peak_rss_mib` (the process's peak), `peak_rss_added_mib` and per
//! spawned thread. OS threads run fib only up to a cut-off of 12 levels (some 4,000
//! kernel threads at once).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schedlab_measure::model::{Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::sys::PinGuard;
use schedlab_measure::{ProbeError, Timing};

use super::backend::{self, rt_pinned, rt_run, Backend, Bench};
use super::memory::{Peak, PeakMemory, PeakSample, WithPeak};
use crate::{Context, Info, Instance, Probe, Suite};

struct ForkJoinProbe;

/// The fork-join probe.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(ForkJoinProbe)]
}

/// Deepest fib cut-off the os backend runs.
const OS_MAX_SPAWN_DEPTH: u32 = 12;

/// Parts of the sort this small are sorted in the thread that has them.
const SORT_LEAF: usize = 4096;

impl Probe for ForkJoinProbe {
    fn info(&self) -> Info {
        Info {
            id: "threads.forkjoin",
            doc: "Fork-join: kind=fib spawns a thread per call of fib(n) down to spawn_depth levels (per spawned thread); kind=sort is a parallel quicksort of elements u64s, a thread per split down to 4096-element parts (per element); peak resident memory per spawned thread in the notes",
            unit: Unit::Nanos,
            mirrors: "- (fib: the recursive-spawn benchmark of Go and tokio comparisons; sort: parallel quicksort; os = std::thread (scoped for sort), rt = schedlab-rt (scope for sort), tokio = tokio::spawn of boxed futures, fib only)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let fib = |n: u32, d: u32, p: u32| {
            Params::new()
                .with("kind", "fib")
                .with("n", n)
                .with("spawn_depth", d)
                .with("processors", p)
        };
        let sort = |e: u64, p: u32| {
            Params::new().with("kind", "sort").with("elements", e).with("processors", p)
        };
        let base = match suite {
            Suite::Smoke => vec![fib(18, 8, 1), sort(65_536, 1)],
            Suite::Quick => {
                vec![fib(27, 12, 1), fib(27, 12, 2), sort(1 << 20, 1), sort(1 << 20, 2)]
            }
            // fib(32) with spawns down to depth 20 is issue 23's shape (1.56 million
            // spawns); os runs it only down to its cut-off of 12, hence fib(32, 12) too.
            Suite::Full => vec![
                fib(27, 12, 1),
                fib(27, 12, 2),
                fib(32, 12, 1),
                fib(32, 12, 2),
                fib(32, 20, 1),
                fib(32, 20, 2),
                sort(1 << 20, 1),
                sort(1 << 20, 2),
                sort(1 << 22, 1),
                sort(1 << 22, 2),
            ],
        };
        backend::per_backend(&base)
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // The large shapes are a sample of their own: few iterations, few samples.
        let mut s = default.clone();
        if suite != Suite::Smoke {
            s.samples = s.samples.min(7);
        }
        s
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let backend = Backend::from_params(params)?;
        let cpus = backend::processors_param(params)?;
        let procs = cpus.len();
        let job = match params.get("kind").unwrap_or("fib") {
            "fib" => {
                let n: u32 = params.parse_or("n", 27).map_err(ProbeError::Failed)?;
                let depth: u32 = params.parse_or("spawn_depth", 15).map_err(ProbeError::Failed)?;
                if !(2..=40).contains(&n) || depth > 30 {
                    return Err(ProbeError::Failed(format!(
                        "n={n}, spawn_depth={depth}: use n in 2..=40 and spawn_depth up to 30"
                    )));
                }
                if backend == Backend::Os && depth > OS_MAX_SPAWN_DEPTH {
                    return Err(ProbeError::Skip(format!(
                        "os: spawn_depth={depth} would keep too many kernel threads alive; the os backend runs cut-offs up to {OS_MAX_SPAWN_DEPTH}"
                    )));
                }
                Job::Fib { n, depth }
            }
            "sort" => {
                let elements: usize =
                    params.parse_or("elements", 1 << 20).map_err(ProbeError::Failed)?;
                if !(SORT_LEAF..=1 << 26).contains(&elements) {
                    return Err(ProbeError::Failed(format!(
                        "elements={elements}: use {SORT_LEAF} to {}",
                        1 << 26
                    )));
                }
                if backend == Backend::Tokio {
                    return Err(ProbeError::Skip(
                        "tokio: tasks cannot borrow the caller's slice (tokio::spawn needs 'static); an owning split would be another algorithm".into(),
                    ));
                }
                Job::Sort { elements }
            }
            other => return Err(ProbeError::Failed(format!("kind={other:?}: use fib or sort"))),
        };
        let (per_iter, spawns) = match job {
            Job::Fib { n, depth } => (fib_spawns(n, depth), fib_spawns(n, depth)),
            Job::Sort { elements } => (elements as u64, sort_spawns(elements)),
        };
        if per_iter == 0 {
            return Err(ProbeError::Failed("this shape spawns no thread".into()));
        }
        let notes = Params::new().with("cpus", backend::cpu_list(&cpus)).with("spawns", spawns);
        let bench = Bench::new(backend.metric(per_iter as f64), notes);
        let peak = Arc::new(Mutex::new(PeakMemory::new("thread")));
        let p2 = peak.clone();
        let record = move |sample: Option<Peak>| {
            p2.lock().unwrap_or_else(|e| e.into_inner()).add(sample, spawns);
        };
        let bench = match (backend, job) {
            (Backend::Os, job) => {
                let pin = (procs == 1).then(|| PinGuard::pin(cpus[0])).transpose()?;
                let mut data = Vec::new();
                bench.note("runtime", "std::thread").keep(pin).body(move |iters| {
                    let sample = PeakSample::start();
                    let elapsed = match job {
                        Job::Fib { n, depth } => {
                            let t = Instant::now();
                            for _ in 0..iters {
                                check_fib(n, os_fib(n, depth)?)?;
                            }
                            t.elapsed()
                        }
                        Job::Sort { elements } => time_sorts(&mut data, elements, iters, |v| {
                            std::thread::scope(|s| os_sort(s, v))
                        })?,
                    };
                    record(sample.finish());
                    Ok(Timing::from_elapsed(elapsed))
                })
            }
            (Backend::Rt, job) => {
                let rt = rt_pinned(&cpus)?;
                let data = Arc::new(Mutex::new(Vec::new()));
                bench.note("runtime", format!("rt processors={procs}")).body(move |iters| {
                    let sample = PeakSample::start();
                    let data = data.clone();
                    let elapsed = rt_run(&rt, move || -> Result<Duration, ProbeError> {
                        match job {
                            Job::Fib { n, depth } => {
                                let t = Instant::now();
                                for _ in 0..iters {
                                    check_fib(n, rt_fib(n, depth))?;
                                }
                                Ok(t.elapsed())
                            }
                            Job::Sort { elements } => {
                                let mut data = data.lock().unwrap_or_else(|e| e.into_inner());
                                time_sorts(&mut data, elements, iters, |v| {
                                    schedlab_rt::scope(|s| rt_sort(s, v))
                                })
                            }
                        }
                    })??;
                    record(sample.finish());
                    Ok(Timing::from_elapsed(elapsed))
                })
            }
            (Backend::Tokio, Job::Fib { n, depth }) => {
                let (tk, pin, runtime) = backend::tokio_on(&cpus)?;
                bench.note("runtime", runtime).keep(pin).body(move |iters| {
                    let sample = PeakSample::start();
                    let (elapsed, results) = tk.block_on(async move {
                        let t = Instant::now();
                        let mut results = Vec::with_capacity(iters as usize);
                        for _ in 0..iters {
                            results.push(tokio::spawn(tokio_fib(n, depth)).await.ok());
                        }
                        (t.elapsed(), results)
                    });
                    record(sample.finish());
                    for r in results {
                        check_fib(
                            n,
                            r.ok_or_else(|| ProbeError::Failed("a task panicked".into()))?,
                        )?;
                    }
                    Ok(Timing::from_elapsed(elapsed))
                })
            }
            (Backend::Tokio, Job::Sort { .. }) => unreachable!("skipped above"),
        };
        Ok(Box::new(WithPeak { bench, peak }))
    }
}

#[derive(Debug, Clone, Copy)]
enum Job {
    Fib { n: u32, depth: u32 },
    Sort { elements: usize },
}

/// `fib(n)`, sequentially.
fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

/// Threads the fork-join `fib(n)` with cut-off `depth` spawns.
fn fib_spawns(n: u32, depth: u32) -> u64 {
    if n < 2 || depth == 0 {
        0
    } else {
        1 + fib_spawns(n - 1, depth - 1) + fib_spawns(n - 2, depth - 1)
    }
}

fn check_fib(n: u32, got: u64) -> Result<(), ProbeError> {
    let want = fib(n);
    if got == want {
        Ok(())
    } else {
        Err(ProbeError::Failed(format!("fib({n}) gave {got}, expected {want}")))
    }
}

fn os_fib(n: u32, depth: u32) -> Result<u64, ProbeError> {
    if n < 2 || depth == 0 {
        return Ok(fib(n));
    }
    // Small stacks, as for threads.tree: 2 MiB defaults would measure address space.
    let h = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || os_fib(n - 1, depth - 1))
        .map_err(|e| ProbeError::io("std::thread::spawn", e))?;
    let b = os_fib(n - 2, depth - 1)?;
    let a = h.join().map_err(|_| ProbeError::Failed("a fib thread panicked".into()))??;
    Ok(a + b)
}

fn rt_fib(n: u32, depth: u32) -> u64 {
    if n < 2 || depth == 0 {
        return fib(n);
    }
    let h = schedlab_rt::spawn(move || rt_fib(n - 1, depth - 1));
    let b = rt_fib(n - 2, depth - 1);
    h.join().unwrap_or(0) + b
}

fn tokio_fib(n: u32, depth: u32) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if n < 2 || depth == 0 {
            return fib(n);
        }
        let h = tokio::spawn(tokio_fib(n - 1, depth - 1));
        let b = tokio_fib(n - 2, depth - 1).await;
        h.await.unwrap_or(0) + b
    })
}

/// Threads the parallel sort of `elements` spawns at most (one per split of a part larger
/// than [`SORT_LEAF`]; the real count depends on the pivots).
fn sort_spawns(elements: usize) -> u64 {
    if elements <= SORT_LEAF {
        0
    } else {
        1 + 2 * sort_spawns(elements / 2)
    }
}

/// Refills `data` with `elements` pseudo-random values (untimed), sorts it with `sort`
/// (timed), checks it, `iters` times; the total time of the sorts.
fn time_sorts(
    data: &mut Vec<u64>,
    elements: usize,
    iters: u64,
    mut sort: impl FnMut(&mut [u64]),
) -> Result<Duration, ProbeError> {
    let mut total = Duration::ZERO;
    for i in 0..iters {
        data.clear();
        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ i;
        data.extend((0..elements).map(|_| {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }));
        let t = Instant::now();
        sort(data);
        total += t.elapsed();
        if !data.is_sorted() {
            return Err(ProbeError::Failed("the parallel sort left the data unsorted".into()));
        }
    }
    Ok(total)
}

/// Splits `v` (at least two elements) around a median-of-three pivot: everything left
/// of the returned index is at most the pivot, everything from it on at least; both sides
/// are non-empty (Hoare's scheme with the pivot moved to the front, whose split point is
/// proven to lie strictly inside).
fn partition(v: &mut [u64]) -> usize {
    let (mid, hi) = (v.len() / 2, v.len() - 1);
    let median = if (v[0] <= v[mid]) == (v[mid] <= v[hi]) {
        mid
    } else if (v[mid] <= v[0]) == (v[0] <= v[hi]) {
        0
    } else {
        hi
    };
    v.swap(0, median);
    let pivot = v[0];
    // Both scans stop on keys equal to the pivot, so runs of equal keys split evenly.
    let (mut i, mut j) = (usize::MAX, v.len());
    loop {
        loop {
            i = i.wrapping_add(1);
            if v[i] >= pivot {
                break;
            }
        }
        loop {
            j -= 1;
            if v[j] <= pivot {
                break;
            }
        }
        if i >= j {
            return j + 1;
        }
        v.swap(i, j);
    }
}

fn os_sort<'scope>(s: &'scope std::thread::Scope<'scope, '_>, v: &'scope mut [u64]) {
    if v.len() <= SORT_LEAF {
        v.sort_unstable();
        return;
    }
    let at = partition(v);
    let (left, right) = v.split_at_mut(at);
    let h = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn_scoped(s, move || os_sort(s, left))
        .expect("spawning a sort thread");
    os_sort(s, right);
    h.join().expect("a sort thread panicked");
}

fn rt_sort<'scope>(s: &'scope schedlab_rt::Scope<'scope, '_>, v: &'scope mut [u64]) {
    if v.len() <= SORT_LEAF {
        v.sort_unstable();
        return;
    }
    let at = partition(v);
    let (left, right) = v.split_at_mut(at);
    let h = s.spawn(move || rt_sort(s, left));
    rt_sort(s, right);
    h.join().expect("a sort thread panicked");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fib_spawn_counts_follow_the_cut_off() {
        assert_eq!(fib_spawns(10, 0), 0);
        assert_eq!(fib_spawns(10, 1), 1);
        assert_eq!(fib_spawns(10, 2), 3);
        // Without a cut-off every call with n >= 2 spawns: fib(n+1) - 1 of them.
        assert_eq!(fib_spawns(20, 30), fib(21) - 1);
    }

    #[test]
    fn partition_splits_around_the_pivot_with_both_sides_non_empty() {
        for v in [
            vec![5u64, 5, 5, 5],
            vec![1, 2],
            vec![2, 1],
            vec![1, 1, 2],
            vec![3, 2, 1],
            vec![9, 1, 8, 2, 7, 3, 6, 4, 5],
        ] {
            let mut v = v;
            let at = partition(&mut v);
            assert!(0 < at && at < v.len(), "{v:?} split at {at}");
            let (l, r) = v.split_at(at);
            assert!(l.iter().max() <= r.iter().min(), "{l:?} | {r:?}");
        }
        // And on many small random inputs with many equal keys.
        let mut x = 88172645463325252u64;
        for len in 2..200 {
            let mut v: Vec<u64> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % 7
                })
                .collect();
            let mut want = v.clone();
            want.sort_unstable();
            let at = partition(&mut v);
            assert!(0 < at && at < v.len(), "len {len} split at {at}");
            let (l, r) = v.split_at(at);
            assert!(l.iter().max() <= r.iter().min(), "{l:?} | {r:?}");
            v.sort_unstable();
            assert_eq!(v, want, "a permutation of the input");
        }
    }

    #[test]
    fn the_parallel_sorts_sort() {
        let mut data = Vec::new();
        time_sorts(&mut data, 100_000, 1, |v| std::thread::scope(|s| os_sort(s, v))).unwrap();
        assert_eq!(data.len(), 100_000);
        let rt = schedlab_rt::Runtime::builder().processors(2).build().unwrap();
        let sorted = rt
            .block_on(|| {
                let mut data = Vec::new();
                time_sorts(&mut data, 100_000, 2, |v| schedlab_rt::scope(|s| rt_sort(s, v)))
                    .map(|_| data.len())
            })
            .unwrap();
        assert_eq!(sorted.unwrap(), 100_000);
    }
}
