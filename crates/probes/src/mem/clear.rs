//! `mem.clear`: one clearing routine, one size, one alignment; the seed's measurement
//! (seed 004: "each routine is called 1000 times for a given length, the time is recorded").
//!
//! # What one result is
//! The value is nanoseconds per call, which is numerically the seed's y axis, microseconds
//! for 1000 calls. One timed iteration is a batch of calls in a row on the same buffer: 1000
//! (the seed's count) up to 4 KiB, fewer above so that a batch clears at most 4 MiB; the
//! sampler then scales the number of batches to its time budget. Per-call overhead (the
//! call, the loop around it) is part of the figure, as it was in the seed, where it decided
//! the small sizes. The routine is called through a function pointer; an indirect call to
//! the same target every time is predicted perfectly and costs what a direct call does.
//!
//! # Buffers
//! The buffer is an anonymous mapping (page-aligned, so 64-byte aligned) of `align + size`
//! bytes, filled in setup so every page is faulted in before timing; the routine clears
//! `[base + align, base + align + size)`. Consecutive calls reuse it, so a buffer that fits
//! a cache is cleared from that cache, as in the seed. The notes say which level the size
//! fits, the cache sizes, and the minor faults per call seen while sampling (0 for the
//! clearing routines: the proof the pages were faulted in).
//!
//! The allocation routines (calloc, malloc+memset, mmap, `vec![0; n]`) get no buffer: each
//! call obtains `size` zeroed bytes, writes one byte per page (so lazily zeroed pages are
//! paid for, see `Zeroed::touch`) and releases them. The allocator picks the address, so
//! they only take `align=0`.
//!
//! # The sweep
//! - smoke: every routine once at one size and alignment;
//! - quick: sizes 1..=8, then coarser to 128 bytes, then doubling to 64 MiB; alignments 0, 1,
//!   2, 3 and 8 (the issue's set);
//! - full: every size 1..=128, quarter-octave steps 128 B..64 KiB, half-octave steps to
//!   64 MiB; alignments 0, 1, 2, 3, 4, 8, 16, 32 (byte, half-word, odd, word, quad-word,
//!   SSE and AVX boundaries).
//!
//! Non-temporal stores are only measured from 256 bytes, where the routine starts
//! streaming (below it uses ordinary stores and would repeat another curve).

use std::time::Duration;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::{sys, ProbeError, Timing, Workload};

use super::cloops::CLoop;
use super::routines::{alloc_cycle, escape, Routine};
use super::{caches_once, calls_for, level_of, minor_faults, thp_mode, x86, Buffer, ClearFn};
use crate::{Context, Info, Instance, Probe, Suite};

/// Largest size accepted (the full sweep stops at 64 MiB).
const MAX_SIZE: usize = 1 << 30;

/// Smallest size at which the non-temporal routine streams (see x86.rs `NT_MIN`).
const NT_FROM: usize = 256;

pub(super) struct ClearProbe;

/// The sizes of a suite's sweep, ascending. Pure.
pub(super) fn sizes(suite: Suite) -> Vec<usize> {
    let mut v: Vec<usize> = Vec::new();
    match suite {
        Suite::Smoke => return vec![64],
        Suite::Quick => {
            v.extend(1..=8);
            v.extend((12..=32).step_by(4));
            v.extend((40..=64).step_by(8));
            v.extend((80..=128).step_by(16));
            let mut s = 256;
            while s <= 64 << 20 {
                v.push(s);
                s *= 2;
            }
        }
        Suite::Full => {
            v.extend(1..=128);
            // Quarter octaves from 128 B to 64 KiB, rounded to 8 bytes.
            for k in 1..=36 {
                let s = 128.0 * 2f64.powf(k as f64 / 4.0);
                v.push(((s / 8.0).round() * 8.0) as usize);
            }
            // Half octaves from 64 KiB to 64 MiB, rounded to 4 KiB.
            for k in 1..=20 {
                let s = 65536.0 * 2f64.powf(k as f64 / 2.0);
                v.push(((s / 4096.0).round() * 4096.0) as usize);
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The alignment offsets (from a 64-byte boundary) of a suite's sweep. Pure.
pub(super) fn aligns(suite: Suite) -> &'static [usize] {
    match suite {
        Suite::Smoke => &[0],
        Suite::Quick => &[0, 1, 2, 3, 8],
        Suite::Full => &[0, 1, 2, 3, 4, 8, 16, 32],
    }
}

/// The smoke suite: every routine once, at a size and offset that exercise its head and
/// tail handling.
const SMOKE: &[(Routine, usize, usize)] = &[
    (Routine::ByteCount, 64, 0),
    (Routine::ByteEnd, 64, 0),
    (Routine::Word16, 63, 1),
    (Routine::U32x8, 100, 3),
    (Routine::U64x8, 4096, 8),
    (Routine::WriteBytes, 4096, 0),
    (Routine::Memset, 4096, 1),
    (Routine::RepStosb, 4096, 0),
    (Routine::Avx2, 4099, 2),
    (Routine::Avx512, 4099, 2),
    (Routine::NonTemporal, 65536, 0),
    (Routine::Calloc, 4096, 0),
    (Routine::MallocMemset, 4096, 0),
    (Routine::Mmap, 65536, 0),
    (Routine::VecZeroed, 4096, 0),
    // Issue 26: the hybrid on both sides of its threshold's neighbourhood, the C loops.
    (Routine::Hybrid, 100, 3),
    (Routine::C(CLoop(0)), 100, 1),
    (Routine::C(CLoop(1)), 100, 1),
    (Routine::C(CLoop(2)), 100, 1),
    (Routine::C(CLoop(3)), 100, 1),
    (Routine::C(CLoop(4)), 100, 1),
    (Routine::C(CLoop(5)), 100, 1),
    (Routine::C(CLoop(6)), 100, 1),
    (Routine::C(CLoop(7)), 100, 1),
    (Routine::C(CLoop(8)), 100, 1),
    (Routine::C(CLoop(9)), 100, 1),
    (Routine::C(CLoop(10)), 100, 1),
    (Routine::C(CLoop(11)), 100, 1),
];

fn params(r: Routine, size: usize, align: usize) -> Params {
    Params::new().with("routine", r.name()).with("size", size).with("align", align)
}

/// The sweep's sampling. The quick sweep has about 2,300 points; at the suite defaults (11
/// samples of 10 ms after 30 ms of warm-up, ~160 ms a point) that is six minutes. A point is
/// a steady loop over a buffer already in place, so it needs less: quick takes 9 samples of
/// at least 1 ms (calibration, which doubles the batch count up to the target, warms the
/// caches and the branch predictors; no further warm-up), full 11 samples of 2 ms after 5 ms
/// of warm-up. Nine samples rather than five because the median's 95% interval from nine is
/// the 2nd to 8th value, from five the whole range: the analysis calls two routines tied when
/// their intervals overlap, and min-to-max intervals would tie almost everything.
pub fn sweep_sampling(suite: Suite, default: &Settings) -> Settings {
    match suite {
        Suite::Smoke => default.clone(),
        Suite::Quick => Settings {
            target: Duration::from_millis(1),
            samples: 9,
            warmup: Duration::ZERO,
            ..default.clone()
        },
        Suite::Full => Settings {
            target: Duration::from_millis(2),
            samples: 11,
            warmup: Duration::from_millis(5),
            ..default.clone()
        },
    }
}

impl Probe for ClearProbe {
    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        sweep_sampling(suite, default)
    }

    fn info(&self) -> Info {
        Info {
            id: "mem.clear",
            doc: "clear `size` bytes at `align` past a 64-byte boundary with one routine, called in a row: ns per call (= µs per the seed's 1000 calls)",
            unit: Unit::Nanos,
            mirrors: "seed 004's NewPtrClear study (1000 calls per size and alignment); lmbench bw_mem fwr/bzero at the large sizes",
            requires: "x86_64 for rep_stosb/nt, AVX2 and AVX-512F for avx2/avx512, gcc or clang at build time for the c_* loops (skipped with the reason elsewhere)",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        if suite == Suite::Smoke {
            return SMOKE.iter().map(|&(r, s, a)| params(r, s, a)).collect();
        }
        let sizes = sizes(suite);
        let mut v = Vec::new();
        for r in Routine::ALL {
            // Issue 26's routines: offset 0 only in the quick sweep (it keeps the sweep's
            // length), and a C loop that was not built once, to say why.
            let added = matches!(r, Routine::Hybrid | Routine::C(_));
            if matches!(r, Routine::C(_)) && r.available().is_err() {
                v.push(params(r, 64, 0));
                continue;
            }
            let aligns: &[usize] =
                if r.is_alloc() || (added && suite == Suite::Quick) { &[0] } else { aligns(suite) };
            // The quick sweep's time budget: the C loops at six sizes, one per regime.
            let c_quick = matches!(r, Routine::C(_)) && suite == Suite::Quick;
            for &align in aligns {
                for &size in &sizes {
                    if r == Routine::NonTemporal && size < NT_FROM {
                        continue;
                    }
                    if c_quick && ![8, 64, 256, 4096, 65536, 1 << 20].contains(&size) {
                        continue;
                    }
                    v.push(params(r, size, align));
                }
            }
        }
        v
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let name = params.get("routine").unwrap_or("memset");
        let routine = Routine::from_name(name).ok_or_else(|| {
            let all: Vec<&str> = Routine::ALL.iter().map(|r| r.name()).collect();
            ProbeError::Failed(format!("unknown routine {name:?}: use one of {}", all.join(", ")))
        })?;
        let size: usize = params.parse_or("size", 4096).map_err(ProbeError::Failed)?;
        let align: usize = params.parse_or("align", 0).map_err(ProbeError::Failed)?;
        if size > MAX_SIZE {
            return Err(ProbeError::Failed(format!("size {size} above the 1 GiB limit")));
        }
        if align >= 4096 {
            return Err(ProbeError::Failed(format!("align {align}: use an offset below 4096")));
        }
        routine.available().map_err(ProbeError::Skip)?;
        let body = if routine.is_alloc() {
            if align != 0 {
                return Err(ProbeError::Failed(format!(
                    "{routine} allocates: the allocator picks the address, so align must be 0"
                )));
            }
            Body::Alloc(routine)
        } else {
            let f = routine
                .clear_fn()
                .ok_or_else(|| ProbeError::Failed(format!("{routine} has no clearing function")))?;
            // 0xFF, not 0: the first clear really changes the bytes, and every page is
            // written (so faulted in and backed) here, untimed.
            Body::Clear { f, buf: Buffer::prefaulted(align + size, 0xFF)? }
        };
        let mut notes = Params::new()
            .with("kind", routine.kind())
            .with("calls_per_iter", calls_for(size))
            .with("level", level_of(size as u64, caches_once()));
        for c in caches_once() {
            notes.set(&format!("{}_kib", c.name.to_lowercase()), c.bytes >> 10);
        }
        notes.set("pages", if routine.is_alloc() { "fresh_touched" } else { "prefaulted" });
        if matches!(routine.kind(), "isa" | "libc") {
            notes.set("cpu_features", x86::features().join("+"));
        }
        if let Routine::C(c) = routine {
            notes.set("compiler", c.compiler().replace([',', '='], " "));
            let memset = c.calls_memset().expect("an available loop was built");
            notes.set("calls_memset", if memset { "yes" } else { "no" });
        }
        if let Some(thp) = thp_mode() {
            notes.set("thp", thp);
        }
        // Pinned for the point's life: a move to the other CPU mid-sample would land on cold
        // caches and count as this routine's time. The buffer is touched on this CPU.
        let cpu = sys::allowed_cpus()[0];
        let pin = sys::PinGuard::pin(cpu)?;
        notes.set("cpu", cpu);
        Ok(Box::new(Clear {
            body,
            align,
            size,
            calls: calls_for(size),
            notes,
            faults: 0,
            calls_done: 0,
            _pin: pin,
        }))
    }
}

enum Body {
    Clear { f: ClearFn, buf: Buffer },
    Alloc(Routine),
}

struct Clear {
    body: Body,
    align: usize,
    size: usize,
    calls: u64,
    notes: Params,
    faults: u64,
    calls_done: u64,
    /// Restores the thread's CPU mask when the point is done (last field: dropped last).
    _pin: sys::PinGuard,
}

impl Workload for Clear {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let n = iters.saturating_mul(self.calls);
        let len = self.size;
        let cpu = sys::current_cpu();
        let faults = minor_faults();
        let mut failed: Option<String> = None;
        let mut t = match &self.body {
            Body::Clear { f, buf } => {
                let p = buf.at(self.align);
                let f = *f;
                Timing::measure(|| {
                    for _ in 0..n {
                        escape(p);
                        // SAFETY: [p, p+len) lies inside `buf` (mapped with align + size
                        // bytes); `f` is available on this CPU (checked in setup).
                        unsafe { f(p, len) };
                    }
                })
            }
            Body::Alloc(r) => {
                let r = *r;
                Timing::measure(|| {
                    for _ in 0..n {
                        if let Err(e) = alloc_cycle(r, len) {
                            failed = Some(e);
                            break;
                        }
                    }
                })
            }
        };
        if let Some(e) = failed {
            return Err(ProbeError::Failed(e));
        }
        self.faults += minor_faults() - faults;
        self.calls_done += n;
        t.migrated = cpu.is_some() && sys::current_cpu() != cpu;
        t.overhead = Duration::ZERO;
        Ok(t)
    }
}

impl Instance for Clear {
    fn metric(&self) -> Metric {
        Metric::per_ops(self.calls as f64)
    }

    fn notes(&self) -> Params {
        let mut notes = self.notes.clone();
        notes.set(
            "faults_per_call",
            format!("{:.3}", self.faults as f64 / self.calls_done.max(1) as f64),
        );
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_sweep_matches_the_issue() {
        let s = sizes(Suite::Quick);
        assert_eq!(&s[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(s.contains(&128) && s.contains(&(64 << 20)));
        assert_eq!(*s.last().unwrap(), 64 << 20);
        assert_eq!(aligns(Suite::Quick), &[0, 1, 2, 3, 8]);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn full_sweep_has_every_small_size_and_log_steps_above() {
        let s = sizes(Suite::Full);
        assert_eq!(&s[..128], &(1..=128).collect::<Vec<_>>()[..]);
        assert!(s.contains(&65536) && s.contains(&(64 << 20)));
        assert_eq!(*s.last().unwrap(), 64 << 20);
        let mid = s.iter().filter(|&&x| x > 128 && x <= 65536).count();
        assert!((30..=40).contains(&mid), "{mid} sizes between 128 B and 64 KiB");
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn allocation_routines_take_only_align_zero_and_nt_starts_where_it_streams() {
        for v in ClearProbe.variants(Suite::Quick) {
            let r = Routine::from_name(v.get("routine").unwrap()).unwrap();
            if r.is_alloc() {
                assert_eq!(v.get("align"), Some("0"));
            }
            if r == Routine::NonTemporal {
                assert!(v.get("size").unwrap().parse::<usize>().unwrap() >= NT_FROM);
            }
        }
        let e = ClearProbe
            .setup(&params(Routine::Calloc, 64, 1), &Context::for_tests())
            .err()
            .expect("calloc with align 1 is refused");
        assert!(e.to_string().contains("align must be 0"), "{e}");
    }

    #[test]
    fn smoke_covers_every_routine() {
        for r in Routine::ALL {
            assert!(SMOKE.iter().any(|s| s.0 == r), "{r} missing from smoke");
        }
    }

    #[test]
    fn bad_parameters_name_the_input() {
        let ctx = Context::for_tests();
        let e = ClearProbe.setup(&Params::new().with("routine", "bzero"), &ctx).err().unwrap();
        assert!(e.to_string().contains("\"bzero\"") && e.to_string().contains("memset"), "{e}");
        let e = ClearProbe.setup(&Params::new().with("size", "lots"), &ctx).err().unwrap();
        assert!(e.to_string().contains("size"), "{e}");
    }

    #[test]
    fn clearing_buffers_are_faulted_in_before_timing() {
        let ctx = Context::for_tests();
        let mut inst = ClearProbe.setup(&params(Routine::Memset, 1 << 20, 3), &ctx).unwrap();
        inst.run(2).unwrap();
        assert_eq!(inst.notes().get("faults_per_call"), Some("0.000"));
        assert_eq!(inst.notes().get("pages"), Some("prefaulted"));
    }
}
