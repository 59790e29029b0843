//! `mem.copy` and `mem.malloc_free`: the two memory rows of seed 002's Table 1.
//!
//! # mem.copy
//! Seed 002's `mcopy` is APUE's file copy through two `mmap`ed files: at its heart a
//! `memcpy` from one mapping to the other. We time that `memcpy` alone, between two
//! anonymous buffers of `size` bytes faulted in during setup, so the figure is the copy
//! bandwidth for a working set of `2 × size` (the notes say which cache level that fits),
//! not the file system's. lmbench's `bw_mem bcopy` measures the same thing; like it, we
//! count the bytes copied (not read + written), in MiB/s. Calls are batched as in
//! `mem.clear` (1000 in a row up to 4 KiB, at most 4 MiB per batch).
//!
//! # mem.malloc_free
//! Seed 002's `mallocMemCopy`: "allocates two memory buffers with malloc(), copies a few
//! bytes from one buffer to another simply to exercise the buffers, frees them". One
//! iteration does exactly that with `size`-byte blocks (16 bytes copied, or `size` if
//! smaller); ns per round. glibc serves blocks above its mmap threshold (128 KiB at start)
//! with `mmap`/`munmap`, then raises the threshold to the size of a freed mapped block (up
//! to 32 MiB), after which such blocks come from the heap: the minor faults per round in the
//! notes show which regime a size ran in.

use std::hint::black_box;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::{caches_once, calls_for, escape, level_of, minor_faults, Buffer};
use crate::{Context, Info, Instance, Probe, Suite};

pub(super) struct CopyProbe;
pub(super) struct MallocFreeProbe;

fn size_param(params: &Params, default: usize) -> Result<usize, ProbeError> {
    let size: usize = params.parse_or("size", default).map_err(ProbeError::Failed)?;
    if size == 0 || size > 1 << 30 {
        return Err(ProbeError::Failed(format!("size {size}: use 1 byte to 1 GiB")));
    }
    Ok(size)
}

fn sized(sizes: &[usize]) -> Vec<Params> {
    sizes.iter().map(|s| Params::new().with("size", s)).collect()
}

impl Probe for CopyProbe {
    fn info(&self) -> Info {
        Info {
            id: "mem.copy",
            doc: "memcpy between two prefaulted buffers of `size` bytes: MiB/s copied",
            unit: Unit::MibPerSec,
            mirrors: "seed 002's mcopy row (its memcpy between mappings, here anonymous memory); lmbench bw_mem bcopy",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        match suite {
            Suite::Smoke => sized(&[4096]),
            // One size per level on typical machines: L1, L2, L3, DRAM.
            Suite::Quick => sized(&[16 << 10, 256 << 10, 4 << 20, 64 << 20]),
            Suite::Full => sized(&(10..=26).map(|k| 1usize << k).collect::<Vec<_>>()),
        }
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let size = size_param(params, 1 << 20)?;
        let src = Buffer::prefaulted(size, 0x5A)?;
        let dst = Buffer::prefaulted(size, 0xA5)?;
        Ok(Box::new(Copy { src, dst, size, calls: calls_for(size) }))
    }
}

struct Copy {
    src: Buffer,
    dst: Buffer,
    size: usize,
    calls: u64,
}

impl Workload for Copy {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let (s, d, len) = (self.src.at(0), self.dst.at(0), self.size);
        let n = iters.saturating_mul(self.calls);
        Ok(Timing::measure(|| {
            for _ in 0..n {
                escape(d);
                // SAFETY: both buffers hold at least `size` bytes and do not overlap.
                unsafe { libc::memcpy(d.cast(), s.cast(), len) };
            }
        }))
    }
}

impl Instance for Copy {
    fn metric(&self) -> Metric {
        Metric::bandwidth((self.size as u64 * self.calls) as f64)
    }

    fn notes(&self) -> Params {
        Params::new()
            .with("calls_per_iter", self.calls)
            .with("level", level_of(2 * self.size as u64, caches_once()))
            .with("pages", "prefaulted")
    }
}

/// Bytes copied between the two blocks, as the seed's "a few bytes".
const FEW: usize = 16;

impl Probe for MallocFreeProbe {
    fn info(&self) -> Info {
        Info {
            id: "mem.malloc_free",
            doc: "malloc two `size`-byte blocks, copy 16 bytes from one to the other, free both: ns per round",
            unit: Unit::Nanos,
            mirrors: "seed 002's mallocMemCopy row (UnixBench-style; reported per round, not as a count)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        match suite {
            Suite::Smoke => sized(&[64]),
            Suite::Quick => sized(&[64, 4096, 256 << 10, 4 << 20]),
            Suite::Full => sized(&[
                16,
                64,
                256,
                1 << 10,
                4 << 10,
                16 << 10,
                64 << 10,
                256 << 10,
                1 << 20,
                4 << 20,
                16 << 20,
                64 << 20,
            ]),
        }
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let size = size_param(params, 4096)?;
        Ok(Box::new(MallocFree { size, faults: 0, rounds: 0 }))
    }
}

struct MallocFree {
    size: usize,
    faults: u64,
    rounds: u64,
}

impl Workload for MallocFree {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let size = self.size;
        let few = FEW.min(size);
        let faults = minor_faults();
        let mut null = false;
        let t = Timing::measure(|| {
            for i in 0..iters {
                // SAFETY: two fresh blocks of `size` bytes, checked for NULL; `few` <= size
                // bytes are written to `a` and copied to `b`; both freed once.
                unsafe {
                    let a = libc::malloc(black_box(size)).cast::<u8>();
                    let b = libc::malloc(black_box(size)).cast::<u8>();
                    if a.is_null() || b.is_null() {
                        null = true;
                        libc::free(a.cast());
                        libc::free(b.cast());
                        break;
                    }
                    std::ptr::write_bytes(a, i as u8, few);
                    std::ptr::copy_nonoverlapping(a, b, few);
                    escape(b);
                    libc::free(a.cast());
                    libc::free(b.cast());
                }
            }
        });
        if null {
            return Err(ProbeError::Failed(format!("malloc({size}) returned NULL")));
        }
        self.faults += minor_faults() - faults;
        self.rounds += iters;
        Ok(t)
    }
}

impl Instance for MallocFree {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }

    fn notes(&self) -> Params {
        Params::new().with("calls_per_iter", 1).with("bytes_copied", FEW.min(self.size)).with(
            "faults_per_round",
            format!("{:.2}", self.faults as f64 / self.rounds.max(1) as f64),
        )
    }
}
