//! `sched.memory_pressure`: seed 001's other warning about the background loader — "we
//! flush the processor cache" — apart from any sharing of the CPU: the frame's work runs
//! on one CPU while the loader runs on another and only shares the caches and the memory
//! bus with it.
//!
//! The frame's work is a fixed amount of reading and writing over a 2 MiB working set
//! (beyond a core's L2 on most machines, within the shared last-level cache), timed per
//! frame; the loader, pinned to a second CPU, does nothing (`loader=none`), copies a 64 MiB
//! buffer into another over and over (`stream`: memory bandwidth) or updates random cache
//! lines of a 64 MiB array (`random`: last-level cache and TLB misses). The value is the
//! frame's work time; the loader's rate is in the notes. Its ratio to `loader=none` is the
//! slowdown the loader causes without ever taking the frame's CPU.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sampler::Settings;
use schedlab_measure::sys::{self, now_ns, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::inversion::Threads;
use crate::{Context, Info, Instance, Probe, Suite};

/// The frame's working set, and the loader's buffers.
const FRAME_SET: usize = 2 << 20;
const LOADER_SET: usize = 64 << 20;

const LOADERS: &[&str] = &["none", "stream", "random"];

pub(crate) struct MemoryPressure;

impl Probe for MemoryPressure {
    fn info(&self) -> Info {
        Info {
            id: "sched.memory_pressure",
            doc: "Seed 001's loader flushing the frame's caches from another CPU: a frame's fixed work over a 2 MiB working set, timed while a loader on a second CPU idles, streams 64 MiB copies or updates random lines of 64 MiB (the loader's rate in notes)",
            unit: Unit::Nanos,
            mirrors: "- (seed 001's closing section: the loader flushes the processor cache)",
            requires: "2 usable CPUs",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        match suite {
            // The quick suite is at its time budget: one variant, briefly (`sampling`).
            Suite::Smoke | Suite::Quick => vec![Params::new().with("loader", "stream")],
            Suite::Full => LOADERS.iter().map(|l| Params::new().with("loader", l)).collect(),
        }
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        let mut s = default.clone();
        if suite == Suite::Quick {
            s.target = Duration::from_millis(50);
            s.samples = 3;
        } else if suite != Suite::Smoke {
            s.target = Duration::from_millis(200);
            s.samples = 7;
        }
        s
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let loader = params.get("loader").unwrap_or("stream");
        if !LOADERS.contains(&loader) {
            return Err(ProbeError::Failed(format!(
                "loader={loader}: one of {}",
                LOADERS.join(", ")
            )));
        }
        let cpus = sys::allowed_cpus();
        if cpus.len() < 2 {
            return Err(ProbeError::Skip(
                "needs 2 usable CPUs (the loader runs on the second)".into(),
            ));
        }
        let (frame_cpu, loader_cpu) = (cpus[0], cpus[1]);
        let pin = PinGuard::pin(frame_cpu)?;
        let bytes = Arc::new(AtomicU64::new(0));
        let mut threads = Threads::new();
        let mut parties = vec![Party::caller("frame")];
        if loader != "none" {
            let random = loader == "random";
            let b = bytes.clone();
            let tid = threads.spawn(
                "loader",
                move || sys::pin_to(loader_cpu),
                move |stop| {
                    let mut src = vec![1u8; LOADER_SET];
                    let mut dst = vec![0u8; LOADER_SET];
                    let mut x = 0x2545_F491_4F6C_DD1Du64;
                    while !stop.load(Ordering::Relaxed) {
                        if random {
                            // 64 Ki random lines per round, read-modify-write.
                            for _ in 0..(64 << 10) {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                let i = (x as usize % (LOADER_SET / 64)) * 64;
                                src[i] = src[i].wrapping_add(1);
                            }
                            b.fetch_add(64 << 16, Ordering::Relaxed);
                        } else {
                            dst.copy_from_slice(&src);
                            std::hint::black_box(&mut dst);
                            src[0] = src[0].wrapping_add(1);
                            b.fetch_add(2 * LOADER_SET as u64, Ordering::Relaxed);
                        }
                    }
                },
            )?;
            parties.push(Party::task("loader", tid));
            // The samples start once the loader has its buffers and has done a round.
            let t0 = now_ns();
            while bytes.load(Ordering::Relaxed) == 0 {
                if now_ns() - t0 > 10_000_000_000 {
                    return Err(ProbeError::Failed("the loader did no round in 10 s".into()));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let notes = Params::new()
            .with("frame_cpu", frame_cpu)
            .with("loader_cpu", loader_cpu)
            .with("frame_set_kib", FRAME_SET >> 10);
        Ok(Box::new(Run {
            set: vec![1u64; FRAME_SET / 8],
            bytes,
            moved: (0, 0),
            parties,
            notes,
            _threads: threads,
            _pin: pin,
        }))
    }
}

struct Run {
    set: Vec<u64>,
    bytes: Arc<AtomicU64>,
    /// The loader's bytes and the wall time over the samples.
    moved: (u64, u64),
    parties: Vec<Party>,
    notes: Params,
    _threads: Threads,
    _pin: PinGuard,
}

/// One frame's work: a pass over the working set, line by line, reading and writing.
#[inline(never)]
fn frame(set: &mut [u64]) -> u64 {
    let mut acc = 0u64;
    for x in set.iter_mut().step_by(8) {
        *x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(7) ^ acc;
        acc = acc.wrapping_add(*x);
    }
    std::hint::black_box(acc)
}

impl Workload for Run {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let b0 = self.bytes.load(Ordering::Relaxed);
        let t0 = now_ns();
        for _ in 0..iters {
            frame(&mut self.set);
        }
        let wall = now_ns() - t0;
        self.moved.0 += self.bytes.load(Ordering::Relaxed) - b0;
        self.moved.1 += wall;
        Ok(Timing::from_elapsed(Duration::from_nanos(wall)))
    }

    fn parties(&self) -> Vec<Party> {
        self.parties.clone()
    }
}

impl Instance for Run {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let mut n = self.notes.clone();
        if self.moved.1 > 0 && self.moved.0 > 0 {
            n.set(
                "loader_mib_s",
                format!(
                    "{:.0}",
                    self.moved.0 as f64 / (1 << 20) as f64 / (self.moved.1 as f64 / 1e9)
                ),
            );
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loaders_run_in_smoke_settings_or_skip_on_one_cpu() {
        let ctx = Context::for_tests();
        let p = MemoryPressure;
        for loader in LOADERS {
            let params = Params::new().with("loader", loader);
            let Some(inst) = crate::testkit::smoke_one(&p, &params, &ctx) else { continue };
            let n = inst.notes();
            // A smoke sample may be shorter than one of the loader's rounds: only the
            // absence of a loader is certain.
            if *loader == "none" {
                assert!(n.get("loader_mib_s").is_none(), "{loader}: {n}");
            }
        }
    }
}
