//! Memory mapping: lmbench's `lat_pagefault` (minor faults on a cached file) and `lat_mmap`
//! (map, touch, unmap a file region).
//!
//! # os.mm.pagefault
//! lat_pagefault maps a file `MAP_SHARED, PROT_READ`, reads one byte of every page in a random
//! order, unmaps, and reports the time per page. On Linux a "page fault" there is rarely one
//! page: a read fault on a cached file maps the neighbouring cached pages too
//! (`fault_around_bytes`, 64 KiB = 16 pages, aligned) or a whole large folio (up to 2 MiB,
//! even by one PMD entry). How the file was written decides which: written in 8 KiB blocks,
//! as lmbench's `lmdd` writes it, the cache holds small folios and one fault maps 16 pages;
//! written in 2 MiB blocks, file systems with large folios (ext4 since 6.16, xfs, ...) cache
//! 2 MiB folios and one fault maps 512 pages (measured here: 256 vs 8 faults for 16 MiB).
//! `MADV_RANDOM` changes none of this on current kernels (it only stops read-ahead, and the
//! pages are cached), so the parameter is `folios=small|large`, not an advice.
//!
//! So we report µs per page touched (lmbench's unit) and count the faults that actually
//! happened with `getrusage` minor-fault counters around each touch loop; the notes give
//! pages per fault and µs per fault. We count with `RUSAGE_THREAD`, not `RUSAGE_SELF`: other
//! threads of the process (the progress ticker, other tests) fault too.
//!
//! Two definitions:
//! - default (`def=schedlab`): the touches alone are timed; the teardown of the touched page
//!   tables is timed apart and reported per page in the notes (`unmap_us_per_page`). A fault
//!   and its teardown are different costs (the second grows with the pages mapped, not the
//!   faults taken), so they are kept apart.
//! - `def=lmbench`, exactly lat_pagefault's: each iteration touches every page, `munmap`s,
//!   `mmap`s again and `msync(MS_INVALIDATE)`s (a no-op for a clean shared mapping on Linux,
//!   kept for exactness); the same number of untouched `munmap` + `mmap` + `msync` rounds is
//!   timed in the same call and subtracted (lmbench's `t_combined - t_mmap`), and the
//!   difference divided by the pages. Its figure is therefore touch + unmapping the touched
//!   pages, about the default's value plus `unmap_us_per_page`. Its file is lmbench's, small
//!   folios (written by `lmdd` in 8 KiB blocks).
//!
//! # os.mm.mmap
//! lat_mmap, exactly: `mmap(size, PROT_READ|PROT_WRITE, MAP_SHARED)` of the file, store one
//! byte every 16 KiB in the first tenth of the mapping (its "sparse" default), `munmap`; µs per
//! round trip, all of it timed. The stores are write faults on a shared mapping, which never
//! fault around, so faults ≈ stores (counted in the notes). lat_mmap refuses sizes below
//! 320 KiB (two 160 KiB strides); so do we. lmbench's script runs `lat_mmap 512k`.
//!
//! # os.mm.sbrk
//! HBench-OS's `sbrk` row (seed 003's table: 0.72 µs beside getpid's 0.63 µs on NetBSD/Alpha):
//! `sbrk(0)`, asking for the program break without moving it. NetBSD's libc passed that to
//! the kernel's `break` call; glibc answers `sbrk(0)` from a cached value without entering
//! the kernel, so we make the system call ourselves: `brk(0)`, an address below the heap,
//! which Linux answers with the current break after taking the address-space lock for
//! writing. It never moves the break, so it is safe beside malloc in other threads (a raw
//! `brk` to any other value could take memory from under them).
//!
//! Both file probes use a scratch file in `--tmp-dir` (unlinked at once, see `fs.rs`), written and
//! `fsync`ed in setup so it sits clean in the page cache.

use std::fs::File;
use std::hint::black_box;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use super::fs::{fill, fs_type, scratch_file};
use super::Def;
use crate::{Context, Info, Instance, Probe, Suite};

/// A mapping of a file, unmapped on drop.
pub(super) struct Mapping {
    pub(super) ptr: *mut u8,
    len: usize,
}

impl Mapping {
    /// `mmap(NULL, len, prot, MAP_SHARED, fd, 0)`.
    pub(super) fn new(file: &File, len: usize, prot: libc::c_int) -> Result<Mapping, ProbeError> {
        // SAFETY: a fresh mapping at an address of the kernel's choosing; nothing aliases it.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, file.as_raw_fd(), 0)
        };
        if p == libc::MAP_FAILED {
            return Err(ProbeError::last_os("mmap"));
        }
        Ok(Mapping { ptr: p.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` is exactly the mapping `new` made, unmapped only here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Minor faults taken by the calling thread so far.
fn minor_faults() -> u64 {
    // SAFETY: rusage is plain data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_minflt as u64
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}

/// A random permutation of `0..n` (Fisher-Yates with xorshift64*), the page order lmbench's
/// `permutation()` gives. Seeded, so runs touch pages in the same order. Pure.
fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut s = seed | 1;
    for i in (1..n).rev() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        let r = s.wrapping_mul(0x2545_F491_4F6C_DD1D);
        v.swap(i, (r % (i as u64 + 1)) as usize);
    }
    v
}

/// Parses a size with lmbench's `bytes()` suffixes: `k`/`m`/`g` (powers of 2). Pure.
pub(super) fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1 << 10),
        (i, 'm' | 'M') => (&s[..i], 1 << 20),
        (i, 'g' | 'G') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
}

/// How the pagefault file is written, which decides the page-cache folio size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Folios {
    /// 8 KiB writes, lmdd's default block: small folios, fault-around maps 16 pages.
    Small,
    /// 2 MiB writes: large folios where the file system supports them.
    Large,
}

impl Folios {
    fn from_params(p: &Params) -> Result<Folios, ProbeError> {
        match p.get("folios").unwrap_or("small") {
            "small" => Ok(Folios::Small),
            "large" => Ok(Folios::Large),
            other => Err(ProbeError::Failed(format!("bad folios {other:?}: use small or large"))),
        }
    }

    fn fill_block(self) -> usize {
        match self {
            Folios::Small => 8 << 10,
            Folios::Large => 2 << 20,
        }
    }
}

/// lat_mmap's constants: a store every PSIZE in the first size/N bytes; sizes from MINSIZE.
const PSIZE: usize = 16 << 10;
const N: usize = 10;
const MINSIZE: usize = 2 * 10 * PSIZE;

/// The offsets lat_mmap stores to (non-random mode). Pure.
fn mmap_touches(size: usize) -> impl Iterator<Item = usize> {
    (0..size / N).step_by(PSIZE)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    PageFault,
    Mmap,
    Sbrk,
}

struct MmProbe(Kind);

/// The memory-mapping probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Kind::PageFault, Kind::Mmap, Kind::Sbrk]
        .into_iter()
        .map(|k| Box::new(MmProbe(k)) as Box<dyn Probe>)
        .collect()
}

impl Probe for MmProbe {
    fn info(&self) -> Info {
        match self.0 {
            Kind::PageFault => Info {
                id: "os.mm.pagefault",
                doc: "read one byte of every page of a cached file mapped MAP_SHARED: µs per page touched (faults counted: see notes)",
                unit: Unit::Micros,
                mirrors: "lmbench lat_pagefault (default: touches timed alone, the munmap of the touched pages in note unmap_us_per_page; def=lmbench: touch + munmap + mmap minus an untouched munmap + mmap, lmbench's figure exactly; a pair whose difference comes out negative, disturbed, is taken again up to 5 times)",
                requires: "a writable --tmp-dir",
            },
            Kind::Mmap => Info {
                id: "os.mm.mmap",
                doc: "mmap() a file region, store a byte every 16 KiB in its first tenth, munmap(): µs per round trip",
                unit: Unit::Micros,
                mirrors: "lmbench lat_mmap (sparse mode; same constants and size floor)",
                requires: "a writable --tmp-dir",
            },
            Kind::Sbrk => Info {
                id: "os.mm.sbrk",
                doc: "sbrk(0) as a system call, brk(0): the kernel reports the program break without moving it",
                unit: Unit::Nanos,
                mirrors: "HBench-OS sbrk (seed 003's table; glibc's sbrk(0) never enters the kernel, so the brk system call is made directly)",
                requires: "",
            },
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        match self.0 {
            Kind::PageFault => ["small", "large"]
                .into_iter()
                .map(|f| Params::new().with("folios", f))
                .chain([Params::new().with("folios", "small").with("def", Def::Lmbench.key())])
                .collect(),
            Kind::Mmap => {
                let sizes: &[&str] = match suite {
                    Suite::Smoke => &["512k"],
                    Suite::Quick => &["512k", "4m"],
                    Suite::Full => &["512k", "1m", "2m", "4m", "8m", "16m"],
                };
                sizes.iter().map(|s| Params::new().with("size", s)).collect()
            }
            Kind::Sbrk => vec![Params::new()],
        }
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        if self.0 == Kind::Sbrk {
            let brk = brk_query();
            if brk == 0 || brk == usize::MAX {
                return Err(ProbeError::last_os("brk(0)"));
            }
            return Ok(Box::new(Sbrk { brk }));
        }
        let fs = fs_type(&ctx.tmp_dir);
        match self.0 {
            Kind::PageFault => {
                let folios = Folios::from_params(params)?;
                let def = Def::from_params(params, Def::Schedlab, &[Def::Schedlab, Def::Lmbench])?;
                // lmbench insists on at least 1 MiB; keep smoke setup quick.
                let len = match ctx.suite {
                    Suite::Smoke => 1 << 20,
                    Suite::Quick | Suite::Full => 16 << 20,
                };
                let scratch = scratch_file(&ctx.tmp_dir, "pagefault", libc::O_RDWR)?;
                fill(&scratch.file, len, folios.fill_block())?;
                let page = page_size();
                let order =
                    permutation(len / page, 0x5EED_1A7F).into_iter().map(|p| p * page).collect();
                // lmbench's initialize(): the mapping its first iteration touches.
                let mapped = match def {
                    Def::Lmbench => Some(lmbench_map(&scratch.file, len)?),
                    _ => None,
                };
                Ok(Box::new(PageFault {
                    file: scratch.file,
                    len,
                    order,
                    folios,
                    fs,
                    mapped,
                    touch: Duration::ZERO,
                    unmap: Duration::ZERO,
                    remap: Duration::ZERO,
                    faults: 0,
                    maps: 0,
                }))
            }
            Kind::Mmap => {
                let text = params.get("size").unwrap_or("512k");
                let size = parse_size(text)
                    .ok_or_else(|| ProbeError::Failed(format!("bad size {text:?}")))?;
                if size < MINSIZE {
                    return Err(ProbeError::Failed(format!(
                        "size {text} below lat_mmap's minimum of {} KiB",
                        MINSIZE >> 10
                    )));
                }
                let scratch = scratch_file(&ctx.tmp_dir, "mmap", libc::O_RDWR)?;
                // lmbench's file comes from lmdd: 8 KiB writes.
                fill(&scratch.file, size, 8 << 10)?;
                Ok(Box::new(MmapRoundTrip { file: scratch.file, size, fs, faults: 0, maps: 0 }))
            }
            Kind::Sbrk => unreachable!("set up above"),
        }
    }
}

/// The `brk` system call with address 0: returns the current program break, changing
/// nothing (0 is below any heap, which Linux answers with the break as it is).
#[inline]
fn brk_query() -> usize {
    // SAFETY: brk with an address below the heap's start only reports the break; no memory
    // of ours is touched or unmapped.
    unsafe { libc::syscall(libc::SYS_brk, black_box(0usize)) as usize }
}

struct Sbrk {
    /// The break setup saw, for the error message.
    brk: usize,
}

impl Workload for Sbrk {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let mut last = 0;
        let t = Timing::measure(|| {
            for _ in 0..iters {
                last = black_box(brk_query());
            }
        });
        // malloc in another thread may move the break meanwhile (grow it, or trim it), but
        // brk always answers with some break, never 0.
        if iters > 0 && last == 0 {
            return Err(ProbeError::Failed(format!(
                "brk(0) returned 0 (the break was {:#x} in setup)",
                self.brk
            )));
        }
        Ok(t)
    }
}

impl Instance for Sbrk {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }

    fn notes(&self) -> Params {
        Params::new().with("call", "brk(0)")
    }
}

struct PageFault {
    file: File,
    len: usize,
    /// Byte offsets of the pages, in lmbench's random order.
    order: Vec<usize>,
    folios: Folios,
    fs: String,
    /// `def=lmbench`: the mapping that persists from one iteration to the next, as
    /// lat_pagefault's `state->where` does. `None` for our definition.
    mapped: Option<Mapping>,
    /// Totals over every call, for the notes.
    touch: Duration,
    unmap: Duration,
    /// `def=lmbench`: the untouched munmap + mmap + msync rounds subtracted.
    remap: Duration,
    faults: u64,
    maps: u64,
}

/// lat_pagefault's `mmap(0, size, PROT_READ, MAP_SHARED, fd, 0)` then
/// `msync(where, size, MS_INVALIDATE)`.
fn lmbench_map(file: &File, len: usize) -> Result<Mapping, ProbeError> {
    let map = Mapping::new(file, len, libc::PROT_READ)?;
    // SAFETY: `map` is exactly the `len`-byte mapping just made.
    if unsafe { libc::msync(map.ptr.cast(), len, libc::MS_INVALIDATE) } != 0 {
        return Err(ProbeError::last_os("msync(MS_INVALIDATE)"));
    }
    Ok(map)
}

impl PageFault {
    /// lat_pagefault's `benchmark` (`touch`) or `benchmark_mmap` (no touch) for `iters`
    /// iterations: touch every page of the persistent mapping, then munmap + mmap + msync.
    fn lmbench_rounds(&mut self, iters: u64, touch: bool) -> Result<Duration, ProbeError> {
        let mut sum = 0u64;
        let mut faults = 0;
        let start = Instant::now();
        for _ in 0..iters {
            let Some(map) = self.mapped.take() else {
                return Err(ProbeError::Failed("lost the persistent mapping".into()));
            };
            if touch {
                let before = minor_faults();
                for &off in &self.order {
                    // SAFETY: `off` < len, inside the readable mapping; volatile so every
                    // page is really read (and faulted), in this order.
                    sum = sum.wrapping_add(u64::from(unsafe { map.ptr.add(off).read_volatile() }));
                }
                faults += minor_faults() - before;
            }
            drop(map);
            self.mapped = Some(lmbench_map(&self.file, self.len)?);
        }
        let elapsed = start.elapsed();
        black_box(sum);
        self.faults += faults;
        Ok(elapsed)
    }
}

/// How many times the lmbench-defined fault probe takes its pair of timings again when the
/// one that touches the pages comes out shorter ([`PageFault`]'s `run`).
const DISTURBED_PAIRS: usize = 5;

impl Workload for PageFault {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        if self.mapped.is_some() {
            // lmbench: t_mmap first, then t_combined; the figure is their difference. A
            // disturbance (another process, the host) inside the first can make it the longer
            // one: the pair is taken again, a few times, before the sample is given up (one
            // such pair failed a whole smoke run in CI while other work ran beside it).
            let mut last = (Duration::ZERO, Duration::ZERO);
            for _ in 0..DISTURBED_PAIRS {
                let remap = self.lmbench_rounds(iters, false)?;
                if interrupt::requested() {
                    return Err(ProbeError::Interrupted);
                }
                let combined = self.lmbench_rounds(iters, true)?;
                if let Some(d) = combined.checked_sub(remap) {
                    self.remap += remap;
                    self.touch += combined;
                    self.maps += iters;
                    return Ok(Timing::from_elapsed(d));
                }
                last = (combined, remap);
            }
            let (combined, remap) = last;
            return Err(ProbeError::Failed(format!(
                "touching {} pages took less than not touching them ({combined:?} < {remap:?}) in {DISTURBED_PAIRS} pairs in a row: a disturbed machine",
                self.order.len()
            )));
        }
        let mut elapsed = Duration::ZERO;
        let mut sum = 0u64;
        for _ in 0..iters {
            if interrupt::requested() {
                return Err(ProbeError::Interrupted);
            }
            let map = Mapping::new(&self.file, self.len, libc::PROT_READ)?;
            let before = minor_faults();
            let start = Instant::now();
            for &off in &self.order {
                // SAFETY: `off` < len, inside the readable mapping; volatile so every page is
                // really read (and faulted), in this order.
                sum = sum.wrapping_add(u64::from(unsafe { map.ptr.add(off).read_volatile() }));
            }
            let touched = start.elapsed();
            let after = minor_faults();
            let start = Instant::now();
            drop(map);
            self.unmap += start.elapsed();
            elapsed += touched;
            self.touch += touched;
            self.faults += after - before;
            self.maps += 1;
        }
        black_box(sum);
        Ok(Timing::from_elapsed(elapsed))
    }
}

impl Instance for PageFault {
    fn metric(&self) -> Metric {
        Metric::per_ops(self.order.len() as f64)
    }

    fn notes(&self) -> Params {
        let pages = self.order.len() as f64 * self.maps.max(1) as f64;
        let faults = self.faults.max(1) as f64;
        if self.mapped.is_some() {
            let per_map = |d: Duration| d.as_secs_f64() * 1e6 / self.maps.max(1) as f64;
            return Params::new()
                .with("file_kib", self.len >> 10)
                .with("fill_kib", self.folios.fill_block() >> 10)
                .with("fs", &self.fs)
                .with(
                    "faults_per_map",
                    format!("{:.1}", self.faults as f64 / self.maps.max(1) as f64),
                )
                .with("pages_per_fault", format!("{:.1}", pages / faults))
                .with("combined_us_per_map", format!("{:.1}", per_map(self.touch)))
                .with("subtracted_us_per_map", format!("{:.1}", per_map(self.remap)));
        }
        Params::new()
            .with("file_kib", self.len >> 10)
            .with("fill_kib", self.folios.fill_block() >> 10)
            .with("fs", &self.fs)
            .with("faults_per_map", format!("{:.1}", self.faults as f64 / self.maps.max(1) as f64))
            .with("pages_per_fault", format!("{:.1}", pages / faults))
            .with("us_per_fault", format!("{:.3}", self.touch.as_secs_f64() * 1e6 / faults))
            .with("unmap_us_per_page", format!("{:.4}", self.unmap.as_secs_f64() * 1e6 / pages))
    }
}

struct MmapRoundTrip {
    file: File,
    size: usize,
    fs: String,
    faults: u64,
    maps: u64,
}

impl Workload for MmapRoundTrip {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        // lat_mmap stores `size & 0xff`.
        let c = self.size as u8;
        let before = minor_faults();
        let start = Instant::now();
        for _ in 0..iters {
            let map = Mapping::new(&self.file, self.size, libc::PROT_READ | libc::PROT_WRITE)?;
            for off in mmap_touches(self.size) {
                // SAFETY: `off` < size / 10, inside the writable shared mapping; volatile so
                // the store (and its write fault) happens.
                unsafe { map.ptr.add(off).write_volatile(black_box(c)) };
            }
            drop(map);
        }
        let elapsed = start.elapsed();
        self.faults += minor_faults() - before;
        self.maps += iters;
        if interrupt::requested() {
            return Err(ProbeError::Interrupted);
        }
        Ok(Timing::from_elapsed(elapsed))
    }
}

impl Instance for MmapRoundTrip {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        Params::new()
            .with("stores_per_map", mmap_touches(self.size).count())
            .with("faults_per_map", format!("{:.1}", self.faults as f64 / self.maps.max(1) as f64))
            .with("fs", &self.fs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::clock::Calibration;
    use schedlab_measure::sampler::{self, Settings};

    #[test]
    fn permutation_is_a_shuffled_permutation() {
        let p = permutation(4096, 7);
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..4096).collect::<Vec<_>>());
        assert_ne!(p, sorted, "not shuffled");
        assert_eq!(p, permutation(4096, 7), "not reproducible");
        assert!(permutation(0, 1).is_empty());
        assert_eq!(permutation(1, 1), vec![0]);
    }

    #[test]
    fn sizes_parse_like_lmbench() {
        assert_eq!(parse_size("512k"), Some(512 << 10));
        assert_eq!(parse_size("4m"), Some(4 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn mmap_touches_mirror_lat_mmap() {
        // 512 KiB: the first 52428 bytes, every 16 KiB.
        assert_eq!(mmap_touches(512 << 10).collect::<Vec<_>>(), vec![0, 16384, 32768, 49152]);
        assert_eq!(mmap_touches(16 << 20).count(), 103);
        assert_eq!(MINSIZE, 320 << 10);
    }

    #[test]
    fn small_sizes_are_refused_as_lat_mmap_does() {
        let ctx = Context::for_tests();
        let e = MmProbe(Kind::Mmap).setup(&Params::new().with("size", "64k"), &ctx).err();
        assert!(matches!(e, Some(ProbeError::Failed(ref m)) if m.contains("minimum")), "{e:?}");
    }

    #[test]
    fn pagefault_counts_faults_and_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("schedlab-mm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ctx = Context { tmp_dir: dir.clone(), ..Context::for_tests() };
        for params in MmProbe(Kind::PageFault).variants(Suite::Smoke) {
            let mut inst = MmProbe(Kind::PageFault).setup(&params, &ctx).unwrap();
            let metric = inst.metric();
            sampler::collect_in(
                &mut *inst,
                &Settings::smoke(),
                &Calibration::zero(),
                metric,
                Unit::Micros,
            )
            .unwrap();
            let notes = inst.notes();
            let per_fault: f64 = notes.get("pages_per_fault").unwrap().parse().unwrap();
            // At least one page per fault, at most the whole 1 MiB file per fault.
            assert!((1.0..=256.0).contains(&per_fault), "{params}: {notes}");
            drop(inst);
        }
        let mut inst =
            MmProbe(Kind::Mmap).setup(&Params::new().with("size", "512k"), &ctx).unwrap();
        inst.run(3).unwrap();
        let faults: f64 = inst.notes().get("faults_per_map").unwrap().parse().unwrap();
        assert!(faults >= 1.0, "stores took no faults: {}", inst.notes());
        drop(inst);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "a scratch file remained");
        std::fs::remove_dir(&dir).unwrap();
    }

    /// def=lmbench remaps after every touch pass, as lat_pagefault does: every pass faults
    /// as many times as the first (a stale mapping would fault only once), and the untouched
    /// remap rounds it subtracts cost less than the touched ones.
    #[test]
    fn lmbench_definition_remaps_every_pass() {
        let ctx = Context::for_tests();
        let params = Params::new().with("folios", "small").with("def", "lmbench");
        let probe = MmProbe(Kind::PageFault);
        let faults = |inst: &dyn Instance| -> f64 {
            inst.notes().get("faults_per_map").unwrap().parse().unwrap()
        };
        let mut inst = probe.setup(&params, &ctx).unwrap();
        inst.run(1).unwrap();
        let first = faults(&*inst);
        assert!(first >= 1.0, "{}", inst.notes());
        inst.run(4).unwrap();
        let mean = faults(&*inst);
        assert!(mean >= 0.9 * first, "first pass {first} faults, mean {mean}: {}", inst.notes());
        let n = inst.notes();
        let combined: f64 = n.get("combined_us_per_map").unwrap().parse().unwrap();
        let subtracted: f64 = n.get("subtracted_us_per_map").unwrap().parse().unwrap();
        assert!(subtracted > 0.0 && subtracted < combined, "{n}");
    }

    /// brk(0) reports the break glibc's sbrk(0) knows (within what other test threads'
    /// mallocs may have moved it meanwhile), and the probe runs.
    #[test]
    fn sbrk_reports_the_break() {
        // SAFETY: sbrk(0) only reads glibc's cached break.
        let libc_brk = unsafe { libc::sbrk(0) } as usize;
        let kernel_brk = brk_query();
        assert!(
            kernel_brk != 0 && kernel_brk.abs_diff(libc_brk) < 1 << 30,
            "{kernel_brk:#x} vs {libc_brk:#x}"
        );
        let mut inst = MmProbe(Kind::Sbrk).setup(&Params::new(), &Context::for_tests()).unwrap();
        inst.run(1000).unwrap();
        assert_eq!(inst.notes().get("call"), Some("brk(0)"));
    }

    /// Every full-suite variant (16 MiB pagefault files, mmap up to 16 MiB) sets up and runs.
    #[test]
    fn full_suite_variants_run() {
        let ctx = Context { suite: Suite::Full, ..Context::for_tests() };
        for probe in [MmProbe(Kind::PageFault), MmProbe(Kind::Mmap)] {
            for params in probe.variants(Suite::Full) {
                let mut inst = probe.setup(&params, &ctx).unwrap();
                inst.run(2).unwrap_or_else(|e| panic!("{params}: {e}"));
            }
        }
    }
}
