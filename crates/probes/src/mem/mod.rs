//! The memory lab (seed 004, "Faster MacOS by patching NewPtrClear?", redone for today's
//! machines): clearing routines swept over size and alignment, memcpy bandwidth and malloc/free.
//!
//! - [`routines`] holds the clearing routines (the seed's byte loops, Apple's word loop and
//!   the unrolled "fancy" routine, plus `write_bytes`/`memset`) and the allocations that
//!   return zeroed memory; `x86` the run-time-selected x86_64 ones and [`cloops`] the C
//!   loops as compilers built them. All are checked byte-exact by property tests. The list
//!   of routines ([`Routine`]) imports `x86` and `cloops`, never the reverse: both know only
//!   [`ClearFn`], defined here (`x86` names its own four in `x86::Isa`).
//! - `clear` is the `mem.clear` probe (params `routine`, `size`, `align`); `copy` holds
//!   `mem.copy` and `mem.malloc_free` (seed 002's mcopy and mallocMemCopy rows).
//!
//! Every buffer is set up, and faulted in, before anything is timed; it starts on a 64-byte
//! (in fact page) boundary plus the `align` offset. Each result notes what docs/SOURCES.md
//! ("Say exactly what was measured") asks for memory bandwidth: the routine, the buffer size against the cache sizes (read
//! from sysfs, [`caches`]), and whether its pages were already faulted in (with the minor
//! faults counted during the samples as evidence).

mod clear;
mod copy;
pub mod routines;
mod x86;

// Seed 004 (issue 26): the C loops per compiler; real programs' clears.
pub mod clears;
pub mod cloops;

use schedlab_measure::ProbeError;

use crate::Probe;

pub use routines::{escape, Routine};

/// A clearing routine: writes zero to every byte of `[p, p+len)` and nothing else.
///
/// # Safety
/// `p` must be valid for writes of `len` bytes.
pub type ClearFn = unsafe fn(*mut u8, usize);

/// The memory probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![
        Box::new(clear::ClearProbe),
        Box::new(copy::CopyProbe),
        Box::new(copy::MallocFreeProbe),
        // Seed 004 (issue 26).
        Box::new(clears::ClearsProbe),
    ]
}

/// One level of the data cache hierarchy, as sysfs describes CPU 0's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    /// `L1d`, `L2`, `L3`...
    pub name: String,
    /// Capacity in bytes (per instance: an L3 shared by a CCX counts once).
    pub bytes: u64,
}

/// The data and unified caches of CPU 0, smallest level first, from
/// `/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}`. Empty when sysfs does not
/// say (some VMs and containers).
pub fn caches() -> Vec<Cache> {
    let base = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut out: Vec<(u32, Cache)> = Vec::new();
    let Ok(dir) = std::fs::read_dir(base) else { return Vec::new() };
    for entry in dir.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let (Ok(level), Some(bytes)) = (level.trim().parse::<u32>(), parse_cache_size(&size))
        else {
            continue;
        };
        let name = match kind.trim() {
            "Instruction" => continue,
            "Data" => format!("L{level}d"),
            _ => format!("L{level}"),
        };
        out.push((level, Cache { name, bytes }));
    }
    out.sort_by_key(|(level, c)| (*level, c.bytes));
    out.dedup_by(|a, b| a.1.name == b.1.name);
    out.into_iter().map(|(_, c)| c).collect()
}

/// [`caches`], read once per process: setup runs thousands of times in a sweep.
fn caches_once() -> &'static [Cache] {
    static CACHES: std::sync::OnceLock<Vec<Cache>> = std::sync::OnceLock::new();
    CACHES.get_or_init(caches)
}

/// Parses sysfs cache sizes: `48K`, `1024K`, `32768K`, `2M`. Pure.
fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (&s[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&s[..i], 1 << 20),
        (i, 'G' | 'g') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// The level a working set of `bytes` fits in: the first cache at least that big, else
/// `DRAM`. Pure.
pub fn level_of(bytes: u64, caches: &[Cache]) -> &str {
    caches.iter().find(|c| bytes <= c.bytes).map_or("DRAM", |c| c.name.as_str())
}

/// The transparent huge page mode (`always`, `madvise`, `never`), which decides whether a
/// large buffer is mapped with 2 MiB pages (fewer TLB misses).
fn thp_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    parse_thp(&s)
}

/// The bracketed choice of a sysfs multiple-choice file: `always [madvise] never`. Pure.
fn parse_thp(s: &str) -> Option<String> {
    let start = s.find('[')?;
    let end = s[start..].find(']')? + start;
    Some(s[start + 1..end].to_string())
}

/// Minor page faults taken by the calling thread so far.
fn minor_faults() -> u64 {
    // SAFETY: rusage is plain data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_minflt as u64
}

/// Bytes one timed iteration may clear or copy at most: iterations are batches of calls
/// (1000, the seed's count, for sizes up to 4 KiB), fewer for larger sizes so that one
/// iteration stays near a millisecond and the sampler can still take several samples of a
/// 64 MiB clear.
const BATCH_BYTES: usize = 4 << 20;

/// The seed's count of calls in a row per measurement.
const SEED_CALLS: usize = 1000;

/// Calls per timed iteration for a size: 1000, fewer above 4 KiB (see [`BATCH_BYTES`]). Pure.
fn calls_for(size: usize) -> u64 {
    (BATCH_BYTES / size.max(1)).clamp(1, SEED_CALLS) as u64
}

/// An anonymous mapping used as a measurement buffer: page-aligned, unmapped on drop.
struct Buffer {
    ptr: *mut u8,
    len: usize,
}

impl Buffer {
    /// Maps `len` bytes (rounded up to pages) and writes `fill` to all of them, so every page
    /// is faulted in and backed before anything is timed.
    fn prefaulted(len: usize, fill: u8) -> Result<Buffer, ProbeError> {
        let page = routines::page_size();
        let len = len.max(1).div_ceil(page) * page;
        // SAFETY: a fresh private anonymous mapping at an address of the kernel's choosing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ProbeError::last_os(&format!("mmap of a {len}-byte buffer")));
        }
        let b = Buffer { ptr: p.cast(), len };
        // SAFETY: the whole mapping is ours and writable.
        unsafe { libc::memset(b.ptr.cast(), i32::from(fill), len) };
        Ok(b)
    }

    /// The address `off` bytes into the buffer.
    fn at(&self, off: usize) -> *mut u8 {
        assert!(off <= self.len, "offset {off} beyond a {}-byte buffer", self.len);
        self.ptr.wrapping_add(off)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `prefaulted` made, unmapped once, here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    //! Every memory probe runs once in smoke settings (behaviour, not speed), and the pure
    //! helpers do what their docs say.
    use super::*;
    use crate::testkit;
    use crate::{Context, Suite};
    use schedlab_measure::clock::Calibration;
    use schedlab_measure::sampler::{self, Settings};

    #[test]
    fn every_mem_probe_runs_in_smoke_settings() {
        let ctx = Context::for_tests();
        let mut tally = testkit::SmokeTally::default();
        for p in probes() {
            let info = p.info();
            for params in p.variants(Suite::Smoke) {
                let Some(inst) = tally.run(&*p, &params, &ctx) else { continue };
                let notes = inst.notes();
                // A program run per iteration has no batch of calls.
                if info.id != "mem.clears" {
                    assert!(
                        notes.get("calls_per_iter").is_some(),
                        "{} [{params}] {notes}",
                        info.id
                    );
                }
            }
        }
        tally.finish("mem");
    }

    /// Developer aid, not a check: prints `mem.clear` medians for a few routines and sizes at
    /// offset 0. `SCHEDLAB_MEM_ROUTINES=memset,rep_stosb SCHEDLAB_MEM_SIZES=4096,67108864
    /// cargo test --release -p schedlab-probes -- --ignored --nocapture print_clear_medians`.
    #[test]
    #[ignore = "measures; prints figures for a developer to read"]
    fn print_clear_medians() {
        let list = |k: &str, d: &str| -> Vec<String> {
            std::env::var(k).unwrap_or_else(|_| d.into()).split(',').map(str::to_string).collect()
        };
        let routines = list("SCHEDLAB_MEM_ROUTINES", "memset,rep_stosb,avx512,nt");
        let sizes = list("SCHEDLAB_MEM_SIZES", "64,4096,1048576,67108864");
        let settings = Settings {
            target: std::time::Duration::from_millis(1),
            samples: 9,
            warmup: std::time::Duration::ZERO,
            ..Settings::full()
        };
        let cal = Calibration::zero();
        let ctx = Context::for_tests();
        for size in &sizes {
            for r in &routines {
                let params = schedlab_measure::model::Params::new()
                    .with("routine", r)
                    .with("size", size)
                    .with("align", 0);
                let res = clear::ClearProbe.setup(&params, &ctx).and_then(|mut inst| {
                    let metric = inst.metric();
                    let c = sampler::collect(&mut *inst, &settings, &cal, metric)?;
                    Ok((c, inst.notes()))
                });
                match res {
                    Ok((c, notes)) => {
                        let v: Vec<f64> = c.samples.iter().map(|s| s.value).collect();
                        let s = schedlab_measure::stats::Summary::of(&v).unwrap();
                        eprintln!(
                            "{r:>12} {size:>9} B {:>12.3} ns [{:.3} .. {:.3}] {:>8.2} GB/s cv {:.1}% {}",
                            s.median,
                            s.ci_low,
                            s.ci_high,
                            size.parse::<f64>().unwrap_or(0.0) / s.median,
                            s.cv * 100.0,
                            notes.get("faults_per_call").unwrap_or("")
                        );
                    }
                    Err(e) => eprintln!("{r:>12} {size:>9} B {e}"),
                }
            }
        }
    }

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(parse_thp("always [madvise] never\n").as_deref(), Some("madvise"));
        assert_eq!(parse_thp("garbage"), None);
        for c in caches() {
            assert!(c.bytes > 0 && c.name.starts_with('L'), "{c:?}");
        }
    }

    #[test]
    fn sizes_fall_in_the_first_level_that_holds_them() {
        let caches = vec![
            Cache { name: "L1d".into(), bytes: 48 << 10 },
            Cache { name: "L2".into(), bytes: 1 << 20 },
            Cache { name: "L3".into(), bytes: 32 << 20 },
        ];
        assert_eq!(level_of(1, &caches), "L1d");
        assert_eq!(level_of(48 << 10, &caches), "L1d");
        assert_eq!(level_of((48 << 10) + 1, &caches), "L2");
        assert_eq!(level_of(32 << 20, &caches), "L3");
        assert_eq!(level_of(64 << 20, &caches), "DRAM");
        assert_eq!(level_of(1, &[]), "DRAM");
    }

    #[test]
    fn batches_are_the_seeds_thousand_calls_until_they_get_large() {
        assert_eq!(calls_for(0), 1000);
        assert_eq!(calls_for(1), 1000);
        assert_eq!(calls_for(4096), 1000);
        assert_eq!(calls_for(8192), 512);
        assert_eq!(calls_for(1 << 20), 4);
        assert_eq!(calls_for(64 << 20), 1);
    }

    #[test]
    fn buffers_are_page_aligned_and_prefilled() {
        let b = Buffer::prefaulted(10_000, 0xAB).unwrap();
        assert_eq!(b.ptr as usize % routines::page_size(), 0);
        assert!(b.len >= 10_000);
        // SAFETY: the buffer is `len` readable bytes.
        let s = unsafe { std::slice::from_raw_parts(b.ptr, b.len) };
        assert!(s.iter().all(|&x| x == 0xAB));
    }
}
