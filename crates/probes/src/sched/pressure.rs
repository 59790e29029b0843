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
//!
//! `cpus=cores` puts the two on CPUs of different cores; `cpus=siblings` on two SMT
//! siblings of one core (seed 001's part three: HyperThreading), which share the core's
//! execution units and its L1/L2 too. Where no two usable CPUs are siblings, that variant
//! skips with what `schedlab doctor` reads of SMT.

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
            doc: "Seed 001's loader flushing the frame's caches from another CPU: a frame's fixed work over a 2 MiB working set, timed while a loader on a second CPU idles, streams 64 MiB copies or updates random lines of 64 MiB, on another core or an SMT sibling (the loader's rate in notes)",
            unit: Unit::Nanos,
            mirrors: "- (seed 001's closing section: the loader flushes the processor cache)",
            requires: "2 usable CPUs; cpus=siblings: two of them SMT siblings",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let v = |l: &str, c: &str| Params::new().with("loader", l).with("cpus", c);
        match suite {
            // The quick suite is at its time budget: one variant, briefly (`sampling`).
            Suite::Smoke | Suite::Quick => vec![v("stream", "cores")],
            Suite::Full => ["cores", "siblings"]
                .iter()
                .flat_map(|c| LOADERS.iter().map(move |l| v(l, c)))
                .collect(),
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
        let siblings = match params.get("cpus").unwrap_or("cores") {
            "cores" => false,
            "siblings" => true,
            other => return Err(ProbeError::Failed(format!("cpus={other}: cores or siblings"))),
        };
        let (frame_cpu, loader_cpu) = cpu_pair(&sys::allowed_cpus(), siblings, &|c| {
            let p = format!("/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list");
            std::fs::read_to_string(p).ok().map(|t| parse_cpu_list(&t))
        })?;
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

/// Two usable CPUs for the frame and the loader: SMT siblings of one core, or CPUs of two
/// cores (`siblings_of(cpu)`: the CPU's siblings, itself included, when known).
fn cpu_pair(
    cpus: &[usize],
    siblings: bool,
    siblings_of: &dyn Fn(usize) -> Option<Vec<usize>>,
) -> Result<(usize, usize), ProbeError> {
    if cpus.len() < 2 {
        return Err(ProbeError::Skip("needs 2 usable CPUs (the loader runs on the second)".into()));
    }
    for &a in cpus {
        let sib = siblings_of(a).unwrap_or_else(|| vec![a]);
        if let Some(&b) = cpus.iter().find(|&&b| b != a && sib.contains(&b) == siblings) {
            return Ok((a, b));
        }
    }
    let smt = schedlab_measure::doctor::collect()
        .into_iter()
        .find(|f| f.key == "smt")
        .map_or_else(|| "not read".to_string(), |f| f.reading.text());
    Err(ProbeError::Skip(if siblings {
        format!("no two usable CPUs are SMT siblings (doctor: SMT {smt})")
    } else {
        format!("every two usable CPUs are SMT siblings of one core (doctor: SMT {smt})")
    }))
}

/// The CPUs of a kernel CPU list (`0-3,8,10-11`).
fn parse_cpu_list(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => out.push(a),
            (Some(Ok(a)), Some(Ok(b))) if a <= b => out.extend(a..=b),
            _ => {}
        }
    }
    out
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
    fn cpu_lists_and_pairs_follow_the_topology() {
        assert_eq!(parse_cpu_list("0-2,5\n"), [0, 1, 2, 5]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
        // Two cores of two siblings each: 0,2 and 1,3.
        let topo = |c: usize| Some(if c.is_multiple_of(2) { vec![0, 2] } else { vec![1, 3] });
        assert_eq!(cpu_pair(&[0, 1, 2, 3], true, &topo).unwrap(), (0, 2));
        assert_eq!(cpu_pair(&[0, 1, 2, 3], false, &topo).unwrap(), (0, 1));
        // No SMT: every CPU its own core.
        let none = |c: usize| Some(vec![c]);
        assert_eq!(cpu_pair(&[0, 1], false, &none).unwrap(), (0, 1));
        match cpu_pair(&[0, 1], true, &none) {
            Err(ProbeError::Skip(why)) => assert!(why.contains("doctor: SMT"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_loaders_run_in_smoke_settings_or_skip_on_one_cpu() {
        let ctx = Context::for_tests();
        let p = MemoryPressure;
        for loader in LOADERS {
            let params = Params::new().with("loader", loader).with("cpus", "cores");
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
