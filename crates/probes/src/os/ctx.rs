//! Context-switch latency: lmbench's `lat_ctx`, a token passed round a ring of processes
//! through pipes, every process pinned to one CPU.
//!
//! Protocol (as `lat_ctx`):
//! 1. Setup pins the parent to the first allowed CPU, creates P pipes and P private working
//!    sets of `size` bytes, and measures the *overhead* that is not a switch: one process
//!    writing a 4-byte token into a pipe, reading it back and summing its working set, cycling
//!    over the P pipes as `lat_ctx`'s `benchmark_overhead` does (median of five batches).
//! 2. It forks P-1 children, all pinned to the same CPU. Process `i` (the parent is process 0)
//!    reads the token from pipe `i`, sums its own working set, and writes the token into pipe
//!    `(i + 1) % P`. Each child first writes to every page of its working set, so the pages are
//!    its own (copy-on-write would otherwise share one physical copy between all of them,
//!    which `lat_ctx`'s malloc-after-fork does not). One lap goes round the ring to start.
//! 3. `run(iters)` times `iters` laps (the parent writes pipe 1, reads pipe 0, sums its set);
//!    a lap is P switches. It returns the lap time minus P times the overhead, so the metric
//!    divides by P and reports microseconds per switch, `lat_ctx`'s figure.
//! 4. Teardown is `Drop`: children killed and reaped, pipes closed, affinity restored.
//!
//! `lat_ctx` leaves placement to the scheduler; with the processes spread over CPUs it measures
//! cross-CPU wake-ups instead of switches (docs/SOURCES.md, Placement decides the answer), so we pin them all to one.

use std::hint::black_box;
use std::os::fd::{OwnedFd, RawFd};
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::stats;
use schedlab_measure::sys::{self, raw, Child, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::child::peer_error;
use crate::{Context, Info, Instance, Probe, Suite};

struct CtxProbe;

/// The context-switch probe.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(CtxProbe)]
}

/// The token is an int, as in `lat_ctx`.
const TOKEN: usize = 4;

impl Probe for CtxProbe {
    fn info(&self) -> Info {
        Info {
            id: "os.ctx.switch",
            doc: "Context switch among P processes passing a token round a ring of pipes, each summing a private working set; per switch, pipe and sum overhead removed",
            unit: Unit::Micros,
            mirrors: "lmbench lat_ctx -s <size> <procs>; all processes pinned to one CPU, lmbench leaves them to the scheduler",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let (procs, sizes): (&[usize], &[&str]) = match suite {
            Suite::Smoke => (&[2], &["0k"]),
            Suite::Quick => (&[2, 8], &["0k", "16k"]),
            Suite::Full => (&[2, 4, 8, 16], &["0k", "16k"]),
        };
        procs
            .iter()
            .flat_map(|p| sizes.iter().map(move |s| Params::new().with("procs", p).with("size", s)))
            .collect()
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let procs: usize = params.parse_or("procs", 2).map_err(ProbeError::Failed)?;
        if !(2..=1024).contains(&procs) {
            return Err(ProbeError::Failed(format!("procs={procs}: use 2 to 1024 processes")));
        }
        let size_text = params.get("size").unwrap_or("0k");
        let size = parse_size(size_text).ok_or_else(|| {
            ProbeError::Failed(format!("bad value {size_text:?} for parameter size: use e.g. 16k"))
        })?;
        let cpu = sys::allowed_cpus()[0];
        let pin = PinGuard::pin(cpu)?;

        let mut reads = Vec::with_capacity(procs);
        let mut writes = Vec::with_capacity(procs);
        for _ in 0..procs {
            let (r, w) = sys::pipe()?;
            reads.push(r);
            writes.push(w);
        }
        // Every process's working set, allocated here because a child may not allocate.
        let mut sets: Vec<Vec<u32>> = (0..procs).map(|_| vec![1u32; size / 4]).collect();
        let overhead = measure_overhead(&reads, &writes, &sets[0])?;

        let read_fds: Vec<RawFd> = reads.iter().map(raw).collect();
        let write_fds: Vec<RawFd> = writes.iter().map(raw).collect();
        let mut children = Vec::with_capacity(procs - 1);
        for (i, set) in sets.iter_mut().enumerate().skip(1) {
            let (rd, wr) = (read_fds[i], write_fds[(i + 1) % procs]);
            let (all_reads, all_writes) = (&read_fds, &write_fds);
            children.push(Child::fork(Some(cpu), move || {
                for &fd in all_reads.iter().chain(all_writes.iter()) {
                    if fd != rd && fd != wr {
                        // SAFETY: closes this child's copy of a descriptor it does not use.
                        unsafe { libc::close(fd) };
                    }
                }
                // Make the working set this process's own pages.
                set.fill(i as u32);
                ring_member(rd, wr, set)
            })?);
        }
        // The parent keeps the read end of pipe 0 and the write end of pipe 1.
        let from_prev = reads.swap_remove(0);
        let to_next = writes.swap_remove(1 % procs);
        drop((reads, writes));
        let data = std::mem::take(&mut sets[0]);
        drop(sets);

        let mut ring = Ring {
            to_next,
            from_prev,
            data,
            procs,
            size,
            cpu,
            overhead,
            _children: children,
            _pin: pin,
        };
        // One lap so that every process is up and the token is in the ring, as lat_ctx.
        ring.laps(1)?;
        Ok(Box::new(ring))
    }
}

/// Parses a working-set size: `16k` (KiB, lmbench's `-s` unit) or a plain byte count.
fn parse_size(s: &str) -> Option<usize> {
    match s.strip_suffix(['k', 'K']) {
        Some(kib) => kib.parse::<usize>().ok()?.checked_mul(1024),
        None => s.parse().ok(),
    }
}

/// Sums a working set, reading every word as `lat_ctx`'s `sumit` does. `black_box` on the
/// input keeps the compiler from hoisting the sum out of the lap loop (the data never changes).
#[inline]
fn sum(data: &[u32]) -> u32 {
    black_box(data).iter().fold(0u32, |a, &x| a.wrapping_add(x))
}

/// A child's body: forever receive the token, sum, pass it on. Async-signal-safe.
fn ring_member(rd: RawFd, wr: RawFd, data: &[u32]) -> i32 {
    let mut token = [0u8; TOKEN];
    loop {
        if sys::read_exact(rd, &mut token).is_err() {
            // EOF: the ring is being torn down.
            return 0;
        }
        black_box(sum(data));
        if sys::write_all(wr, &token).is_err() {
            return 1;
        }
    }
}

/// `lat_ctx`'s overhead per process per lap: write the token into a pipe and read it back
/// (no switch), then sum the working set; pipes taken in turn as in `benchmark_overhead`.
/// The batch grows until it lasts a millisecond; the median of five batches is returned.
fn measure_overhead(
    reads: &[OwnedFd],
    writes: &[OwnedFd],
    data: &[u32],
) -> Result<Duration, ProbeError> {
    let batch = |n: u64| -> Result<Duration, ProbeError> {
        let mut token = [0u8; TOKEN];
        let mut i = 0;
        let start = Instant::now();
        for _ in 0..n {
            sys::write_all(raw(&writes[i]), &token)
                .map_err(|e| peer_error("ctx", "overhead write", e))?;
            sys::read_exact(raw(&reads[i]), &mut token)
                .map_err(|e| peer_error("ctx", "overhead read", e))?;
            i = if i + 1 == reads.len() { 0 } else { i + 1 };
            black_box(sum(data));
        }
        Ok(start.elapsed())
    };
    let mut n = 16u64;
    while batch(n)? < Duration::from_millis(1) && n < 1 << 20 {
        n *= 2;
    }
    let mut per_op =
        (0..5).map(|_| batch(n).map(|t| t / n as u32)).collect::<Result<Vec<_>, _>>()?;
    per_op.sort();
    // The median of five batches: the middle one.
    Ok(stats::nearest_rank(&per_op, 50.0))
}

/// The part of `laps` laps that is not switching: `procs` token passes and working-set sums
/// per lap, each costing `overhead`, as `lat_ctx` subtracts it. The sampler removes it from the
/// value and keeps the raw elapsed time in the sample (a value that the overhead swallows
/// whole reads 0: noise, never negative).
fn ring_overhead(laps: u64, procs: usize, overhead: Duration) -> Duration {
    let total = overhead.as_nanos().saturating_mul(u128::from(laps) * procs as u128);
    Duration::from_nanos(u64::try_from(total).unwrap_or(u64::MAX))
}

/// A set-up ring: the parent's two pipe ends and working set, the pinned children.
struct Ring {
    to_next: OwnedFd,
    from_prev: OwnedFd,
    data: Vec<u32>,
    procs: usize,
    size: usize,
    cpu: usize,
    overhead: Duration,
    _children: Vec<Child>,
    _pin: PinGuard,
}

impl Ring {
    /// `laps` laps of the token, untimed; the caller times them.
    #[inline]
    fn laps(&mut self, laps: u64) -> Result<(), ProbeError> {
        let (wr, rd) = (raw(&self.to_next), raw(&self.from_prev));
        let mut token = [0u8; TOKEN];
        for _ in 0..laps {
            sys::write_all(wr, &token).map_err(|e| peer_error("ctx", "write token", e))?;
            sys::read_exact(rd, &mut token).map_err(|e| peer_error("ctx", "read token", e))?;
            black_box(sum(&self.data));
        }
        Ok(())
    }
}

impl Workload for Ring {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let start = Instant::now();
        self.laps(iters)?;
        let elapsed = start.elapsed();
        Ok(Timing {
            elapsed,
            migrated: sys::current_cpu() != Some(self.cpu),
            overhead: ring_overhead(iters, self.procs, self.overhead),
        })
    }

    /// Every process of the ring is pinned to one CPU: the sampler checks after each sample
    /// that each is still there (`p0` is this process, `p1`... the children in ring order).
    fn parties(&self) -> Vec<Party> {
        let children = self._children.iter().enumerate();
        std::iter::once(Party::caller("p0"))
            .chain(children.map(|(i, c)| Party::task(&format!("p{}", i + 1), c.pid())))
            .collect()
    }
}

impl Instance for Ring {
    fn metric(&self) -> Metric {
        Metric::per_ops(self.procs as f64)
    }

    fn notes(&self) -> Params {
        Params::new()
            .with("cpu", self.cpu)
            .with("overhead_us", format!("{:.3}", self.overhead.as_secs_f64() * 1e6))
            .with("size_bytes", self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_counted_per_process_per_lap() {
        // 10 laps * 4 processes * 1.5 µs = 60 µs.
        assert_eq!(ring_overhead(10, 4, Duration::from_nanos(1500)), Duration::from_micros(60));
        assert_eq!(ring_overhead(0, 16, Duration::from_micros(1)), Duration::ZERO);
    }

    #[test]
    fn the_sampler_removes_the_ring_overhead_but_keeps_raw_time() {
        use schedlab_measure::clock::Calibration;
        use schedlab_measure::sampler::{collect_in, Settings};
        struct Fixed;
        impl Workload for Fixed {
            fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
                // 2 processes: a lap is 10 µs of which 2 x 1.5 µs is overhead.
                Ok(Timing {
                    elapsed: Duration::from_micros(10 * iters),
                    migrated: false,
                    overhead: ring_overhead(iters, 2, Duration::from_nanos(1500)),
                })
            }
        }
        let c = collect_in(
            &mut Fixed,
            &Settings::smoke(),
            &Calibration::zero(),
            Metric::per_ops(2.0),
            Unit::Micros,
        )
        .unwrap();
        assert_eq!(c.samples[0].elapsed_ns, 20_000);
        assert!((c.samples[0].value - 3.5).abs() < 1e-9, "(10 - 3) / 2 switches = 3.5 µs");
    }

    #[test]
    fn sizes_parse_in_kib_or_bytes() {
        assert_eq!(parse_size("0k"), Some(0));
        assert_eq!(parse_size("16k"), Some(16 * 1024));
        assert_eq!(parse_size("64K"), Some(64 * 1024));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size("1m"), None);
    }

    #[test]
    fn suites_grow_the_grid() {
        assert_eq!(CtxProbe.variants(Suite::Smoke), vec![Params::from_key("procs=2,size=0k")]);
        assert_eq!(CtxProbe.variants(Suite::Quick).len(), 4);
        assert_eq!(CtxProbe.variants(Suite::Full).len(), 8);
    }

    #[test]
    fn the_largest_full_suite_ring_runs() {
        let params = Params::from_key("procs=16,size=16k");
        let mut ring = CtxProbe.setup(&params, &Context::for_tests()).unwrap();
        assert!(ring.run(2).unwrap().elapsed > Duration::ZERO);
        assert_eq!(ring.notes().get("size_bytes"), Some("16384"));
        assert!(ring.notes().get("overhead_us").is_some());
    }

    #[test]
    fn bad_parameters_are_errors_naming_them() {
        for key in ["procs=1,size=0k", "procs=two,size=0k", "procs=2,size=big"] {
            let Err(e) = CtxProbe.setup(&Params::from_key(key), &Context::for_tests()) else {
                panic!("{key} accepted");
            };
            assert!(matches!(e, ProbeError::Failed(_)), "{key}: {e}");
        }
    }

    #[test]
    fn the_sum_reads_every_word() {
        assert_eq!(sum(&[1, 2, 3]), 6);
        assert_eq!(sum(&[u32::MAX, 2]), 1);
    }
}
