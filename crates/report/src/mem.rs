//! The memory-clearing lab's analysis (seed 004, redone for today's machines): from stored
//! `mem.clear` results to what the seed's author read off his graphs, plus what a modern
//! machine adds.
//!
//! - crossover points: "word16 beats u32x8 below N bytes" ([`crossover`]);
//! - the best routine per size range, ties decided by overlapping intervals ([`best_ranges`]);
//! - bandwidth in GB/s in each cache level and in DRAM ([`bandwidth`]);
//! - our best routine's fraction of libc memset at each size, and the issue's goal of 95% at
//!   1 MiB and above ([`memset_fractions`], [`goal`]);
//! - each loop's time per byte against memset's, the proof that a byte loop is not a
//!   memset in disguise ([`slopes`]);
//! - the cost of misalignment per routine ([`align_costs`]);
//! - tables for the terminal and Markdown ([`sections`]) and SVG line charts ([`charts`]).
//!
//! Everything here is a pure function of measurements; nothing measures, reads files or
//! talks to the database. Cache sizes come from the results' notes (the probe records them),
//! so a run is analysed with the caches of the machine it ran on.

use std::collections::BTreeSet;

use schedlab_measure::model::{Measurement, Outcome};

use crate::svg::{bytes_label, Axis, Chart, Marker, Series, Ticks};
use crate::table::{Align, Table};
use crate::units::sig4;

/// The probe id analysed here.
pub const CLEAR: &str = "mem.clear";

/// How a routine clears: the categories the analysis compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Hand-written loops (byte, word, unrolled words): the seed's routines.
    Loop,
    /// libc `memset` and what calls it (`write_bytes`): the yardstick.
    Libc,
    /// Instruction-set specific routines (`rep stosb`, AVX2, AVX-512, non-temporal).
    Isa,
    /// Allocations that return zeroed memory (calloc, mmap...): a different question.
    Alloc,
}

impl Kind {
    /// From the probe's `kind` note (`loop`, `libc`, `isa`, `alloc`).
    pub fn from_note(s: &str) -> Option<Kind> {
        Some(match s {
            "loop" => Kind::Loop,
            "libc" => Kind::Libc,
            "isa" => Kind::Isa,
            "alloc" => Kind::Alloc,
            _ => return None,
        })
    }

    /// The routines that clear a given buffer (everything but allocation).
    pub fn clears(self) -> bool {
        self != Kind::Alloc
    }
}

/// One stored `mem.clear` result.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The routine's name (the `routine` parameter).
    pub routine: String,
    /// What kind of routine it is.
    pub kind: Kind,
    /// Bytes cleared per call.
    pub size: u64,
    /// Offset from a 64-byte boundary.
    pub align: u64,
    /// Median time per call, ns (= µs per 1000 calls).
    pub ns: f64,
    /// Lower end of the median's 95% interval, ns.
    pub lo: f64,
    /// Upper end of the median's 95% interval, ns.
    pub hi: f64,
}

impl Point {
    /// Bytes per nanosecond, i.e. GB/s (10^9 bytes per second).
    pub fn gbps(&self) -> f64 {
        self.size as f64 / self.ns.max(1e-12)
    }
}

/// A cache level for the analysis: its name (`L1d`, `L2`...) and capacity in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheLevel {
    /// `L1d`, `L2`, `L3`.
    pub name: String,
    /// Capacity in bytes.
    pub bytes: u64,
}

/// The kind of a routine when a result carries no `kind` note (results stored before the
/// note existed): by name, as the probe defines them.
fn kind_by_name(routine: &str) -> Kind {
    match routine {
        "memset" | "write_bytes" => Kind::Libc,
        "rep_stosb" | "avx2" | "avx512" | "nt" => Kind::Isa,
        "calloc" | "malloc_memset" | "mmap" | "vec_zeroed" => Kind::Alloc,
        _ => Kind::Loop,
    }
}

/// The measured `mem.clear` points of `results`, in measurement order. Results that were
/// skipped or failed, or lack parameters, are left out.
pub fn points(results: &[Measurement]) -> Vec<Point> {
    results
        .iter()
        .filter(|m| m.probe == CLEAR && m.outcome == Outcome::Ok)
        .filter_map(|m| {
            let s = m.summary.as_ref()?;
            let routine = m.params.get("routine")?.to_string();
            let kind =
                m.notes.get("kind").and_then(Kind::from_note).unwrap_or(kind_by_name(&routine));
            Some(Point {
                kind,
                size: m.params.get("size")?.parse().ok()?,
                align: m.params.get("align").unwrap_or("0").parse().ok()?,
                ns: s.median,
                lo: s.ci_low,
                hi: s.ci_high,
                routine,
            })
        })
        .collect()
}

/// The cache levels recorded in the notes of `mem.clear` results (`l1d_kib=48`,
/// `l2_kib=1024`...), smallest first; empty when none were recorded.
pub fn caches_from_notes(results: &[Measurement]) -> Vec<CacheLevel> {
    let Some(m) =
        results.iter().find(|m| m.probe == CLEAR && m.notes.0.iter().any(|(k, _)| is_cache_key(k)))
    else {
        return Vec::new();
    };
    let mut v: Vec<CacheLevel> = m
        .notes
        .0
        .iter()
        .filter(|(k, _)| is_cache_key(k))
        .filter_map(|(k, val)| {
            let name = k.trim_end_matches("_kib");
            let mut name = name.to_uppercase();
            if name.ends_with('D') {
                name.pop();
                name.push('d');
            }
            Some(CacheLevel { name, bytes: val.parse::<u64>().ok()? << 10 })
        })
        .collect();
    v.sort_by_key(|c| c.bytes);
    v
}

fn is_cache_key(k: &str) -> bool {
    let b = k.as_bytes();
    k.ends_with("_kib") && b.len() > 5 && b[0] == b'l' && b[1].is_ascii_digit()
}

/// Routine names in order of first appearance.
pub fn routines(points: &[Point]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for p in points {
        if !v.contains(&p.routine) {
            v.push(p.routine.clone());
        }
    }
    v
}

/// One routine's points at one alignment, by size.
pub fn curve<'a>(points: &'a [Point], routine: &str, align: u64) -> Vec<&'a Point> {
    let mut v: Vec<&Point> =
        points.iter().filter(|p| p.routine == routine && p.align == align).collect();
    v.sort_by_key(|p| p.size);
    v
}

/// Where two routines trade places.
#[derive(Debug, Clone, PartialEq)]
pub enum Crossover {
    /// No size measured for both.
    NoData,
    /// Within noise of each other (overlapping intervals) at most sizes: no winner.
    Tied {
        /// The sizes compared.
        sizes: usize,
        /// The sizes where their intervals overlapped.
        ties: usize,
    },
    /// `faster` was faster at every size where they were not within noise.
    Always {
        /// The faster routine.
        faster: String,
        /// The sizes compared.
        sizes: usize,
        /// The sizes where their intervals overlapped.
        ties: usize,
    },
    /// `small` is faster below `at`, `large` at `at` and every larger size where they are
    /// not within noise.
    Cross {
        /// Faster for the small sizes.
        small: String,
        /// Faster from `at` on.
        large: String,
        /// The first size from which `large` always wins.
        at: u64,
        /// The size before `at` where `small` still won: the crossover lies in (before, at].
        before: u64,
        /// How often the lead changed below `at` (0 for a clean crossover; more means noise
        /// or curves that really cross several times).
        flips: usize,
        /// The sizes where their intervals overlapped (left out of the comparison).
        ties: usize,
    },
}

/// Where `a` and `b` cross at alignment `align`.
///
/// Size by size, the routine with the lower median wins unless the two 95% intervals
/// overlap (a tie, left out). When fewer than half the sizes have a winner the pair is
/// `Tied`. Otherwise the crossover is the first size from which the routine that wins at the
/// largest decided size wins at every decided size. Pure.
pub fn crossover(points: &[Point], a: &str, b: &str, align: u64) -> Crossover {
    let ca = curve(points, a, align);
    let cb = curve(points, b, align);
    let mut rows: Vec<(u64, Option<bool>)> = Vec::new(); // (size, Some(a wins) | None: tie)
    for p in &ca {
        if let Some(q) = cb.iter().find(|q| q.size == p.size) {
            let overlap = p.lo <= q.hi && q.lo <= p.hi;
            rows.push((p.size, (!overlap).then_some(p.ns < q.ns)));
        }
    }
    if rows.is_empty() {
        return Crossover::NoData;
    }
    let decided: Vec<(u64, bool)> = rows.iter().filter_map(|r| r.1.map(|w| (r.0, w))).collect();
    let ties = rows.len() - decided.len();
    if decided.len() * 2 < rows.len() || decided.is_empty() {
        return Crossover::Tied { sizes: rows.len(), ties };
    }
    let last = decided[decided.len() - 1].1;
    let (winner, loser) = if last { (a, b) } else { (b, a) };
    let k = decided.iter().rposition(|r| r.1 != last).map_or(0, |i| i + 1);
    if k == 0 {
        return Crossover::Always { faster: winner.to_string(), sizes: rows.len(), ties };
    }
    let flips = decided[..k].windows(2).filter(|w| w[0].1 != w[1].1).count();
    Crossover::Cross {
        small: loser.to_string(),
        large: winner.to_string(),
        at: decided[k].0,
        before: decided[k - 1].0,
        flips,
        ties,
    }
}

/// The comparisons worth reading, in the seed's order: its byte loops against each other,
/// Apple's word loop against the unrolled routines, then the modern routines against memset
/// and each other, and the allocations.
pub const PAIRS: &[(&str, &str)] = &[
    ("byte_count", "byte_end"),
    ("byte_end", "word16"),
    ("word16", "u32x8"),
    ("word16", "u64x8"),
    ("u32x8", "u64x8"),
    ("u64x8", "memset"),
    ("write_bytes", "memset"),
    ("rep_stosb", "memset"),
    ("avx2", "memset"),
    ("avx512", "memset"),
    ("avx2", "avx512"),
    ("rep_stosb", "avx512"),
    ("nt", "avx512"),
    ("nt", "memset"),
    ("calloc", "malloc_memset"),
    ("calloc", "vec_zeroed"),
    ("calloc", "mmap"),
];

/// A run of sizes over which one routine is the best (or within noise of the best).
#[derive(Debug, Clone, PartialEq)]
pub struct BestRange {
    /// First size of the range.
    pub from: u64,
    /// Last size of the range.
    pub to: u64,
    /// The routine that leads the range.
    pub routine: String,
    /// Routines within noise of it at every size of the range.
    pub tied: Vec<String>,
    /// Sizes measured in the range.
    pub sizes: usize,
}

/// The best routine per size range among the points that `include` accepts, at `align`.
///
/// At each size the best is the lowest median; routines whose interval overlaps the best's
/// are tied with it. A range goes on while its leader stays best or tied, so noise between
/// near-equal routines does not cut the sizes into slivers. Pure.
pub fn best_ranges(
    points: &[Point],
    align: u64,
    include: impl Fn(&Point) -> bool,
) -> Vec<BestRange> {
    let cands: Vec<&Point> = points.iter().filter(|p| p.align == align && include(p)).collect();
    let sizes: BTreeSet<u64> = cands.iter().map(|p| p.size).collect();
    let mut out: Vec<BestRange> = Vec::new();
    for size in sizes {
        let here: Vec<&&Point> = cands.iter().filter(|p| p.size == size).collect();
        let best = here.iter().min_by(|a, b| a.ns.total_cmp(&b.ns)).expect("a size has a point");
        let tied: Vec<String> = here
            .iter()
            .filter(|p| p.routine != best.routine && p.lo <= best.hi)
            .map(|p| p.routine.clone())
            .collect();
        if let Some(cur) = out.last_mut() {
            if cur.routine == best.routine || tied.contains(&cur.routine) {
                cur.to = size;
                cur.sizes += 1;
                let mut now: Vec<String> = tied.clone();
                now.push(best.routine.clone());
                cur.tied.retain(|t| now.contains(t));
                continue;
            }
        }
        out.push(BestRange { from: size, to: size, routine: best.routine.clone(), tied, sizes: 1 });
    }
    out
}

/// The best bandwidth of one routine in one level, and the size that gave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    /// GB/s (bytes per ns).
    pub gbps: f64,
    /// Bytes per call.
    pub size: u64,
}

/// One routine's peaks, one per level (`None` where no size of that level was measured).
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthRow {
    /// The routine.
    pub routine: String,
    /// Per level, in [`Bandwidth::levels`] order.
    pub peaks: Vec<Option<Peak>>,
}

/// Peak bandwidth of each routine in each memory level.
#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidth {
    /// Level names, smallest first, `DRAM` last.
    pub levels: Vec<String>,
    /// Per routine: for each level, the best GB/s over the sizes that fit it and not the
    /// level below.
    pub rows: Vec<BandwidthRow>,
}

/// Peak GB/s per routine and level at `align`: level *i* covers sizes above the previous
/// level's capacity up to its own; DRAM covers sizes above the last cache. Pure.
pub fn bandwidth(points: &[Point], caches: &[CacheLevel], align: u64) -> Bandwidth {
    let mut levels: Vec<String> = caches.iter().map(|c| c.name.clone()).collect();
    levels.push("DRAM".into());
    let bounds: Vec<(u64, u64)> = {
        let mut v = Vec::new();
        let mut prev = 0;
        for c in caches {
            v.push((prev, c.bytes));
            prev = c.bytes;
        }
        v.push((prev, u64::MAX));
        v
    };
    let rows = routines(points)
        .into_iter()
        .map(|r| {
            let c = curve(points, &r, align);
            let peaks = bounds
                .iter()
                .map(|&(lo, hi)| {
                    c.iter()
                        .filter(|p| p.size > lo && p.size <= hi)
                        .map(|p| Peak { gbps: p.gbps(), size: p.size })
                        .max_by(|a, b| a.gbps.total_cmp(&b.gbps))
                })
                .collect();
            BandwidthRow { routine: r, peaks }
        })
        .filter(|row| row.peaks.iter().any(Option::is_some))
        .collect();
    Bandwidth { levels, rows }
}

/// Our best routine against libc memset at one size.
#[derive(Debug, Clone, PartialEq)]
pub struct Fraction {
    /// Bytes per call.
    pub size: u64,
    /// The fastest routine that is not libc's (loops and ISA routines).
    pub best: String,
    /// Its time per call, ns.
    pub best_ns: f64,
    /// memset's time per call, ns.
    pub memset_ns: f64,
    /// memset's time over ours: our speed as a fraction of memset's (1.0 = equal, above 1
    /// = faster than memset).
    pub fraction: f64,
    /// The two medians' 95% intervals overlap: the difference is within noise.
    pub within_noise: bool,
}

/// Our best clearing routine's speed as a fraction of libc memset's, per size, at `align`.
/// Pure.
pub fn memset_fractions(points: &[Point], align: u64) -> Vec<Fraction> {
    let memset = curve(points, "memset", align);
    memset
        .iter()
        .filter_map(|m| {
            let best = points
                .iter()
                .filter(|p| {
                    p.align == align && p.size == m.size && matches!(p.kind, Kind::Loop | Kind::Isa)
                })
                .min_by(|a, b| a.ns.total_cmp(&b.ns))?;
            Some(Fraction {
                size: m.size,
                best: best.routine.clone(),
                best_ns: best.ns,
                memset_ns: m.ns,
                fraction: m.ns / best.ns.max(1e-12),
                within_noise: best.lo <= m.hi && m.lo <= best.hi,
            })
        })
        .collect()
}

/// The issue's goal: our best routine reaches `target` of memset's speed at every size from
/// `from` bytes on.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// Smallest size the goal covers.
    pub from: u64,
    /// Required fraction.
    pub target: f64,
    /// The sizes checked.
    pub checked: usize,
    /// The worst size, if any was measured.
    pub worst: Option<Fraction>,
    /// Every size below the target.
    pub below: Vec<Fraction>,
}

impl Goal {
    /// True when sizes were measured and the worst one meets the target.
    pub fn met(&self) -> bool {
        self.worst.as_ref().is_some_and(|w| w.fraction >= self.target)
    }

    /// True when sizes were measured and every size below the target is within noise of
    /// memset (the intervals overlap): not shown to miss, not shown to meet it either.
    pub fn met_within_noise(&self) -> bool {
        self.checked > 0 && self.below.iter().all(|f| f.within_noise)
    }
}

/// Checks the goal over `fractions`. Pure.
pub fn goal(fractions: &[Fraction], from: u64, target: f64) -> Goal {
    let over: Vec<&Fraction> = fractions.iter().filter(|f| f.size >= from).collect();
    Goal {
        from,
        target,
        checked: over.len(),
        worst: over.iter().min_by(|a, b| a.fraction.total_cmp(&b.fraction)).map(|f| (*f).clone()),
        below: over.iter().filter(|f| f.fraction < target).map(|f| (*f).clone()).collect(),
    }
}

/// A least-squares line through one routine's time per call against size.
#[derive(Debug, Clone, PartialEq)]
pub struct Slope {
    /// The routine.
    pub routine: String,
    /// Its kind.
    pub kind: Kind,
    /// Nanoseconds per extra byte.
    pub ns_per_byte: f64,
    /// Fixed cost per call, ns (the intercept).
    pub fixed_ns: f64,
    /// Coefficient of determination (1 = perfectly linear).
    pub r2: f64,
    /// `ns_per_byte` over memset's: how many times longer each byte takes.
    pub vs_memset: Option<f64>,
    /// Sizes fitted.
    pub from: u64,
    /// Sizes fitted.
    pub to: u64,
}

impl Slope {
    /// For hand-written loops: whether the slope proves the loop stores byte by byte (or
    /// word by word) instead of calling memset: a memset call would clear each extra byte
    /// as fast as memset does; the loop must take at least twice as long.
    pub fn honest(&self) -> Option<bool> {
        (self.kind == Kind::Loop).then(|| self.vs_memset.is_some_and(|r| r >= 2.0))
    }
}

/// Least squares of y on x: (slope, intercept, r²). Pure.
pub fn fit(xy: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    if xy.len() < 3 {
        return None;
    }
    let n = xy.len() as f64;
    let mx = xy.iter().map(|p| p.0).sum::<f64>() / n;
    let my = xy.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = xy.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let r2 = if syy == 0.0 { 1.0 } else { (sxy * sxy) / (sxx * syy) };
    Some((slope, my - slope * mx, r2))
}

/// Time per byte of every clearing routine at `align`, fitted over the sizes from 256 bytes
/// up to `hi` (the L1 data cache: the routine's own speed, not the memory's). The seed read
/// the same off its graphs: "the distance between Byte and ByteEndPtr is widening... we are
/// saving cycles in the loop". Pure.
pub fn slopes(points: &[Point], align: u64, hi: u64) -> Vec<Slope> {
    let lo = 256;
    let line = |r: &str| -> Option<(f64, f64, f64, u64, u64)> {
        let c: Vec<&Point> =
            curve(points, r, align).into_iter().filter(|p| p.size >= lo && p.size <= hi).collect();
        let xy: Vec<(f64, f64)> = c.iter().map(|p| (p.size as f64, p.ns)).collect();
        let (s, i, r2) = fit(&xy)?;
        Some((s, i, r2, c.first()?.size, c.last()?.size))
    };
    let memset = line("memset").map(|l| l.0);
    routines(points)
        .into_iter()
        .filter_map(|r| {
            let kind = points.iter().find(|p| p.routine == r)?.kind;
            if !kind.clears() {
                return None;
            }
            let (s, i, r2, from, to) = line(&r)?;
            Some(Slope {
                vs_memset: memset.filter(|m| *m > 0.0).map(|m| s / m),
                routine: r,
                kind,
                ns_per_byte: s,
                fixed_ns: i,
                r2,
                from,
                to,
            })
        })
        .collect()
}

/// What misalignment costs one routine.
#[derive(Debug, Clone, PartialEq)]
pub struct AlignCost {
    /// The routine.
    pub routine: String,
    /// The offset compared with offset 0.
    pub align: u64,
    /// Median over sizes up to 128 bytes of time(align) / time(0).
    pub small: Option<f64>,
    /// The same over sizes above 128 bytes.
    pub large: Option<f64>,
    /// The largest ratio seen and its size.
    pub worst: Option<(f64, u64)>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Misalignment cost of every clearing routine at every offset measured besides 0. Pure.
pub fn align_costs(points: &[Point]) -> Vec<AlignCost> {
    let aligns: BTreeSet<u64> = points.iter().map(|p| p.align).filter(|&a| a != 0).collect();
    let mut out = Vec::new();
    for r in routines(points) {
        let base = curve(points, &r, 0);
        for &a in &aligns {
            let ratios: Vec<(f64, u64)> = curve(points, &r, a)
                .iter()
                .filter_map(|p| {
                    base.iter().find(|b| b.size == p.size).map(|b| (p.ns / b.ns.max(1e-12), p.size))
                })
                .collect();
            if ratios.is_empty() {
                continue;
            }
            out.push(AlignCost {
                routine: r.clone(),
                align: a,
                small: median(ratios.iter().filter(|x| x.1 <= 128).map(|x| x.0).collect()),
                large: median(ratios.iter().filter(|x| x.1 > 128).map(|x| x.0).collect()),
                worst: ratios.iter().copied().max_by(|a, b| a.0.total_cmp(&b.0)),
            });
        }
    }
    out
}

/// Everything derived from one run's `mem.clear` results.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The points analysed.
    pub points: Vec<Point>,
    /// The cache levels used (from the results' notes, else the caller's).
    pub caches: Vec<CacheLevel>,
    /// The crossover of each pair of [`PAIRS`] with data, at offset 0.
    pub crossovers: Vec<(String, String, Crossover)>,
    /// Best clearing routine per size range, offset 0.
    pub best: Vec<BestRange>,
    /// Best allocation routine per size range.
    pub best_alloc: Vec<BestRange>,
    /// Peak GB/s per level, offset 0.
    pub bandwidth: Bandwidth,
    /// Our best routine against memset, per size, offset 0.
    pub fractions: Vec<Fraction>,
    /// The issue's goal (95% of memset from 1 MiB on).
    pub goal: Goal,
    /// Time per byte within L1.
    pub slopes: Vec<Slope>,
    /// Misalignment costs.
    pub align_costs: Vec<AlignCost>,
}

/// Size from which the goal applies, and the fraction it asks for.
pub const GOAL_FROM: u64 = 1 << 20;
/// See [`GOAL_FROM`].
pub const GOAL_TARGET: f64 = 0.95;

/// Analyses the `mem.clear` results among `results`; `None` when there are none.
/// `fallback_caches` is used when the results do not record cache sizes.
pub fn analyse(results: &[Measurement], fallback_caches: &[CacheLevel]) -> Option<Analysis> {
    let points = points(results);
    if points.is_empty() {
        return None;
    }
    let mut caches = caches_from_notes(results);
    if caches.is_empty() {
        caches = fallback_caches.to_vec();
    }
    let names = routines(&points);
    let crossovers = PAIRS
        .iter()
        .filter(|(a, b)| names.iter().any(|n| n == a) && names.iter().any(|n| n == b))
        .map(|(a, b)| (a.to_string(), b.to_string(), crossover(&points, a, b, 0)))
        .filter(|(_, _, c)| *c != Crossover::NoData)
        .collect();
    let l1 = caches.first().map_or(32 << 10, |c| c.bytes);
    let fractions = memset_fractions(&points, 0);
    Some(Analysis {
        crossovers,
        best: best_ranges(&points, 0, |p| p.kind.clears()),
        best_alloc: best_ranges(&points, 0, |p| p.kind == Kind::Alloc),
        bandwidth: bandwidth(&points, &caches, 0),
        goal: goal(&fractions, GOAL_FROM, GOAL_TARGET),
        fractions,
        slopes: slopes(&points, 0, l1),
        align_costs: align_costs(&points),
        caches,
        points,
    })
}

/// A titled table with notes under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// The table.
    pub table: Table,
    /// Lines printed under the table (how to read it, verdicts).
    pub notes: Vec<String>,
}

fn size_label(s: u64) -> String {
    bytes_label(s as f64)
}

fn ratio(x: f64) -> String {
    format!("×{x:.2}")
}

/// The analysis as tables, in reading order: crossovers, best per range, memset fraction and
/// the goal, bandwidth per level, the loops' time per byte, misalignment, and the raw
/// matrix of times per call.
pub fn sections(a: &Analysis) -> Vec<Section> {
    let mut out = Vec::new();

    let mut t =
        Table::new(&[("pair", Align::Left), ("crossover", Align::Right), ("reading", Align::Left)]);
    for (x, y, c) in &a.crossovers {
        let noise = |ties: usize| {
            if ties > 0 {
                format!("; within noise at {ties} size{}", if ties == 1 { "" } else { "s" })
            } else {
                String::new()
            }
        };
        let (cell, reading) = match c {
            Crossover::NoData => continue,
            Crossover::Tied { sizes, ties } => (
                "tied".to_string(),
                format!("within noise of each other at {ties} of {sizes} sizes"),
            ),
            Crossover::Always { faster, sizes, ties } => (
                "none".to_string(),
                format!("{faster} faster at all {sizes} sizes measured{}", noise(*ties)),
            ),
            Crossover::Cross { small, large, at, before, flips, ties } => (
                size_label(*at),
                format!(
                    "{small} beats {large} below {} (crossover in {}–{}){}{}",
                    size_label(*at),
                    size_label(*before),
                    size_label(*at),
                    if *flips > 0 {
                        format!("; lead changed {flips}× below it")
                    } else {
                        String::new()
                    },
                    noise(*ties)
                ),
            ),
        };
        t.row(vec![format!("{x} vs {y}"), cell, reading]);
    }
    out.push(Section {
        title: "Crossover points (aligned buffers)".into(),
        table: t,
        notes: vec!["medians compared size by size, sizes where the 95% intervals overlap left out; the crossover is the first size from which the large-size winner always wins".into()],
    });

    for (title, ranges) in [
        ("Best clearing routine per size range (aligned)", &a.best),
        ("Best allocation of zeroed memory per size range", &a.best_alloc),
    ] {
        if ranges.is_empty() {
            continue;
        }
        let mut t = Table::new(&[
            ("sizes", Align::Left),
            ("best", Align::Left),
            ("within noise of it", Align::Left),
        ]);
        for r in ranges {
            let span = if r.from == r.to {
                size_label(r.from)
            } else {
                format!("{} – {}", size_label(r.from), size_label(r.to))
            };
            t.row(vec![span, r.routine.clone(), r.tied.join(", ")]);
        }
        out.push(Section {
            title: title.into(),
            table: t,
            notes: vec!["a range continues while its leader is best or its 95% interval overlaps the best's".into()],
        });
    }

    if !a.fractions.is_empty() {
        let mut t = Table::new(&[
            ("size", Align::Right),
            ("our best", Align::Left),
            ("ns/call", Align::Right),
            ("memset ns/call", Align::Right),
            ("of memset", Align::Right),
            ("", Align::Left),
        ]);
        for f in a.fractions.iter().filter(|f| f.size.is_power_of_two()) {
            t.row(vec![
                size_label(f.size),
                f.best.clone(),
                sig4(f.best_ns),
                sig4(f.memset_ns),
                format!("{:.0}%", f.fraction * 100.0),
                if f.within_noise { "within noise".into() } else { String::new() },
            ]);
        }
        let g = &a.goal;
        let verdict = match &g.worst {
            None => format!(
                "goal (≥ {:.0}% of memset from {}): no sizes measured",
                g.target * 100.0,
                size_label(g.from)
            ),
            Some(w) => format!(
                "goal (≥ {:.0}% of memset from {}): {} — worst {:.1}% at {} ({}), over {} sizes",
                g.target * 100.0,
                size_label(g.from),
                if g.met() {
                    "met"
                } else if g.met_within_noise() {
                    "met within noise (every size below it overlaps memset's interval)"
                } else {
                    "MISSED"
                },
                w.fraction * 100.0,
                size_label(w.size),
                w.best,
                g.checked
            ),
        };
        out.push(Section {
            title: "Our best routine as a fraction of libc memset (aligned, power-of-two sizes)"
                .into(),
            table: t,
            notes: vec![
                "speed fraction = memset's time / ours; above 100% is faster than memset".into(),
                verdict,
            ],
        });
    }

    if !a.bandwidth.rows.is_empty() {
        let mut cols: Vec<(String, Align)> = vec![("routine".into(), Align::Left)];
        for (i, l) in a.bandwidth.levels.iter().enumerate() {
            let span = match (i.checked_sub(1).and_then(|j| a.caches.get(j)), a.caches.get(i)) {
                (_, Some(c)) => format!("{l} ≤{}", size_label(c.bytes)),
                (Some(p), None) => format!("{l} >{}", size_label(p.bytes)),
                (None, None) => l.clone(),
            };
            cols.push((span, Align::Right));
        }
        let cols: Vec<(&str, Align)> = cols.iter().map(|(s, a)| (s.as_str(), *a)).collect();
        let mut t = Table::new(&cols);
        for r in &a.bandwidth.rows {
            let mut row = vec![r.routine.clone()];
            for p in &r.peaks {
                row.push(
                    p.map_or("—".into(), |p| format!("{} @{}", sig4(p.gbps), size_label(p.size))),
                );
            }
            t.row(row);
        }
        out.push(Section {
            title: "Bandwidth in GB/s per level (peak over the sizes that fit it, aligned)".into(),
            table: t,
            notes: vec![format!(
                "levels from the run's notes: {}",
                if a.caches.is_empty() {
                    "none recorded".to_string()
                } else {
                    a.caches
                        .iter()
                        .map(|c| format!("{} {}", c.name, size_label(c.bytes)))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )],
        });
    }

    if !a.slopes.is_empty() {
        let mut t = Table::new(&[
            ("routine", Align::Left),
            ("ns/byte", Align::Right),
            ("bytes/ns", Align::Right),
            ("fixed ns", Align::Right),
            ("r²", Align::Right),
            ("× memset per byte", Align::Right),
            ("verdict", Align::Left),
        ]);
        for s in &a.slopes {
            t.row(vec![
                s.routine.clone(),
                format!("{:.4}", s.ns_per_byte),
                sig4(1.0 / s.ns_per_byte.max(1e-12)),
                format!("{:.1}", s.fixed_ns),
                format!("{:.4}", s.r2),
                s.vs_memset.map_or("—".into(), ratio),
                match s.honest() {
                    Some(true) => "a real loop, not a memset call".into(),
                    Some(false) => "SUSPECT: as fast per byte as memset".into(),
                    None => String::new(),
                },
            ]);
        }
        let span = a
            .slopes
            .first()
            .map(|s| format!("{} to {}", size_label(s.from), size_label(s.to)))
            .unwrap_or_default();
        out.push(Section {
            title: format!("Time per byte, fitted over {span} (in L1; aligned)"),
            table: t,
            notes: vec!["a loop compiled into a memset call would clear each extra byte as fast as memset; time growing linearly at ≥ 2× memset's rate shows the loop is real".into()],
        });
    }

    if !a.align_costs.is_empty() {
        let aligns: BTreeSet<u64> = a.align_costs.iter().map(|c| c.align).collect();
        let mut cols: Vec<String> = vec!["routine".into()];
        cols.extend(aligns.iter().map(|x| format!("+{x}: ≤128 B / larger")));
        let cols: Vec<(&str, Align)> = cols
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), if i == 0 { Align::Left } else { Align::Right }))
            .collect();
        let mut t = Table::new(&cols);
        for r in routines(&a.points) {
            let mut row = vec![r.clone()];
            let mut any = false;
            for al in &aligns {
                row.push(match a.align_costs.iter().find(|c| c.routine == r && c.align == *al) {
                    Some(c) => {
                        any = true;
                        format!(
                            "{} / {}",
                            c.small.map_or("—".into(), ratio),
                            c.large.map_or("—".into(), ratio)
                        )
                    }
                    None => "—".into(),
                });
            }
            if any {
                t.row(row);
            }
        }
        out.push(Section {
            title: "Misalignment: time at offset +N over time at offset 0 (median over sizes)".into(),
            table: t,
            notes: vec!["seed 004 found Metrowerks' memset up to 50% slower when misaligned on a 68030, and Apple's word loop crashing on a 68000".into()],
        });
    }

    out.push(matrix(a, 0));
    out
}

/// Time per call of every routine at every size for one offset: the data behind the charts.
pub fn matrix(a: &Analysis, align: u64) -> Section {
    let names = routines(&a.points);
    let mut cols: Vec<(&str, Align)> = vec![("size", Align::Right)];
    cols.extend(names.iter().map(|n| (n.as_str(), Align::Right)));
    let mut t = Table::new(&cols);
    let sizes: BTreeSet<u64> =
        a.points.iter().filter(|p| p.align == align).map(|p| p.size).collect();
    for s in sizes {
        let mut row = vec![size_label(s)];
        for n in &names {
            row.push(
                a.points
                    .iter()
                    .find(|p| p.routine == *n && p.size == s && p.align == align)
                    .map_or(String::new(), |p| sig4(p.ns)),
            );
        }
        t.row(row);
    }
    Section {
        title: format!("Time per call in ns (= µs for the seed's 1000 calls), offset {align}"),
        table: t,
        notes: vec![],
    }
}

/// The routines drawn aligned against misaligned, as the seed drew AppleWord against
/// AppleWord+1 and Metrowerks against Metrowerks+.
pub const ALIGN_CHART: &[&str] = &["word16", "u32x8", "u64x8", "memset", "rep_stosb", "avx512"];

/// The offset drawn as "misaligned" (the seed's "+1").
pub const MISALIGNED: u64 = 1;

/// The SVG charts of an analysis, as (file name, chart). `subtitle` names the run and
/// machine. Charts without data are left out.
pub fn charts(a: &Analysis, subtitle: &str) -> Vec<(String, Chart)> {
    let names = routines(&a.points);
    let kind = |r: &str| a.points.iter().find(|p| p.routine == r).map(|p| p.kind);
    let clearing: Vec<&String> =
        names.iter().filter(|n| kind(n).is_some_and(Kind::clears)).collect();
    let allocs: Vec<&String> = names.iter().filter(|n| kind(n) == Some(Kind::Alloc)).collect();
    // A routine keeps its colour from chart to chart; allocations, drawn on their own chart,
    // start the palette again so that no two lines there share a hue family.
    let color_of = |r: &str| {
        clearing
            .iter()
            .position(|n| *n == r)
            .or_else(|| allocs.iter().position(|n| *n == r))
            .unwrap_or(0)
    };
    let y_time = |log: bool| Axis {
        label: "time for 1000 calls (1 µs here = 1 ns per call)".into(),
        log,
        ticks: Ticks::Micros,
    };
    let series = |r: &str,
                  align: u64,
                  keep: &dyn Fn(u64) -> bool,
                  dashed: bool,
                  value: &dyn Fn(&Point) -> f64| Series {
        name: if align == 0 { r.to_string() } else { format!("{r}+{align}") },
        points: curve(&a.points, r, align)
            .into_iter()
            .filter(|p| keep(p.size))
            .map(|p| (p.size as f64, value(p)))
            .collect(),
        dashed,
        color: color_of(r),
    };
    let time = |p: &Point| p.ns;
    let markers: Vec<Marker> =
        a.caches.iter().map(|c| Marker { x: c.bytes as f64, label: c.name.clone() }).collect();
    let small = |s: u64| s <= 128;
    let large = |s: u64| s >= 128;
    let all = |_: u64| true;
    let bytes_axis =
        |log: bool| Axis { label: "bytes cleared per call".into(), log, ticks: Ticks::Bytes };

    let mut out = Vec::new();
    let mut push =
        |file: &str, title: &str, x: Axis, y: Axis, series: Vec<Series>, markers: Vec<Marker>| {
            let series: Vec<Series> = series.into_iter().filter(|s| !s.points.is_empty()).collect();
            if !series.is_empty() {
                out.push((
                    file.to_string(),
                    Chart { title: title.into(), subtitle: subtitle.into(), x, y, series, markers },
                ));
            }
        };
    push(
        "clear-small.svg",
        "Clearing 1 to 128 bytes: time for 1000 calls (aligned; lower is better)",
        bytes_axis(false),
        y_time(false),
        clearing.iter().map(|r| series(r, 0, &small, false, &time)).collect(),
        vec![],
    );
    push(
        "clear-large.svg",
        "Clearing at scale, 128 B to 64 MiB: time for 1000 calls (aligned, log-log)",
        bytes_axis(true),
        y_time(true),
        clearing.iter().map(|r| series(r, 0, &large, false, &time)).collect(),
        markers.clone(),
    );
    push(
        "clear-bandwidth.svg",
        "Clearing bandwidth in GB/s (aligned; higher is better)",
        bytes_axis(true),
        Axis { label: "GB/s (bytes per ns)".into(), log: false, ticks: Ticks::Number },
        clearing.iter().map(|r| series(r, 0, &all, false, &Point::gbps)).collect(),
        markers.clone(),
    );
    let twins = |keep: &dyn Fn(u64) -> bool| -> Vec<Series> {
        ALIGN_CHART
            .iter()
            .filter(|r| names.iter().any(|n| n == *r))
            .flat_map(|r| {
                [series(r, 0, keep, false, &time), series(r, MISALIGNED, keep, true, &time)]
            })
            .collect()
    };
    push(
        "clear-align-small.svg",
        "Aligned (solid) against misaligned by +1 (dashed), 1 to 128 bytes",
        bytes_axis(false),
        y_time(false),
        twins(&small),
        vec![],
    );
    push(
        "clear-align-large.svg",
        "Aligned (solid) against misaligned by +1 (dashed), 128 B to 64 MiB (log-log)",
        bytes_axis(true),
        y_time(true),
        twins(&large),
        markers,
    );
    let mut alloc_series: Vec<Series> =
        allocs.iter().map(|r| series(r, 0, &all, false, &time)).collect();
    if !alloc_series.is_empty() && names.iter().any(|n| n == "memset") {
        let mut m = series("memset", 0, &all, true, &time);
        m.name = "memset (clear only)".into();
        alloc_series.push(m);
    }
    push(
        "alloc.svg",
        "Getting zeroed memory: allocate, touch every page, free (log-log)",
        Axis { label: "bytes per allocation".into(), log: true, ticks: Ticks::Bytes },
        y_time(true),
        alloc_series,
        vec![],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::model::{Params, Unit};
    use schedlab_measure::stats::Summary;

    fn p(routine: &str, size: u64, align: u64, ns: f64) -> Point {
        Point {
            routine: routine.into(),
            kind: kind_by_name(routine),
            size,
            align,
            ns,
            lo: ns * 0.99,
            hi: ns * 1.01,
        }
    }

    /// Synthetic curves with known shapes: a byte loop at 0.25 ns/B, a word loop at
    /// 0.125 ns/B, an unrolled routine with a 6 ns setup and 0.02 ns/B, memset at 2 ns +
    /// 0.004 ns/B, and avx512 a touch faster than memset everywhere.
    fn synthetic() -> Vec<Point> {
        let mut v = Vec::new();
        let sizes: Vec<u64> = (1..=8)
            .chain([16, 32, 64, 128, 256, 1024, 4096, 16384, 1 << 20, 4 << 20, 64 << 20])
            .collect();
        for &s in &sizes {
            let x = s as f64;
            for align in [0, 1] {
                let mis = if align == 1 { 1.1 } else { 1.0 };
                v.push(p("byte_count", s, align, 1.0 + 0.25 * x));
                v.push(p("word16", s, align, (1.5 + 0.125 * x) * mis));
                v.push(p("u32x8", s, align, (6.0 + 0.02 * x) * mis));
                v.push(p("memset", s, align, 2.0 + 0.004 * x));
                v.push(p("avx512", s, align, (1.9 + 0.0039 * x) * mis));
            }
            v.push(p("calloc", s, 0, 20.0 + 0.01 * x));
        }
        v
    }

    #[test]
    fn crossover_finds_where_the_word_loop_stops_beating_the_unrolled_stores() {
        let pts = synthetic();
        // 1.5 + 0.125x = 6 + 0.02x at x ≈ 42.9: word16 wins at 32, u32x8 from 64 on.
        assert_eq!(
            crossover(&pts, "word16", "u32x8", 0),
            Crossover::Cross {
                small: "word16".into(),
                large: "u32x8".into(),
                at: 64,
                before: 32,
                flips: 0,
                ties: 0
            }
        );
        assert_eq!(
            crossover(&pts, "avx512", "memset", 0),
            Crossover::Always { faster: "avx512".into(), sizes: 19, ties: 0 }
        );
        assert_eq!(crossover(&pts, "word16", "nothing", 0), Crossover::NoData);
    }

    #[test]
    fn noisy_leads_are_counted_not_hidden() {
        let mut pts = vec![];
        for (s, a, b) in [(1, 1.0, 2.0), (2, 3.0, 2.0), (3, 1.0, 2.0), (4, 3.0, 2.0), (5, 3.0, 2.0)]
        {
            pts.push(p("x", s, 0, a));
            pts.push(p("y", s, 0, b));
        }
        match crossover(&pts, "x", "y", 0) {
            Crossover::Cross { small, large, at, before, flips, ties } => {
                assert_eq!(
                    (small.as_str(), large.as_str(), at, before, flips, ties),
                    ("x", "y", 4, 3, 2, 0)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn overlapping_intervals_are_ties_not_wins() {
        let wide =
            |r: &str, s: u64, ns: f64| Point { lo: ns * 0.8, hi: ns * 1.2, ..p(r, s, 0, ns) };
        // Equal within noise at every size but one: tied, whatever the medians say.
        let mut pts = vec![];
        for (s, a, b) in [(1, 1.0, 1.05), (2, 1.05, 1.0), (3, 1.0, 1.1), (4, 1.0, 3.0)] {
            pts.push(wide("x", s, a));
            pts.push(wide("y", s, b));
        }
        assert_eq!(crossover(&pts, "x", "y", 0), Crossover::Tied { sizes: 4, ties: 3 });
        // Ties between decided sizes do not move the crossover.
        let mut pts = vec![];
        for (s, a, b) in
            [(1, 1.0, 3.0), (2, 1.0, 1.05), (3, 1.0, 3.0), (4, 3.0, 1.0), (5, 3.0, 1.0)]
        {
            pts.push(wide("x", s, a));
            pts.push(wide("y", s, b));
        }
        assert_eq!(
            crossover(&pts, "x", "y", 0),
            Crossover::Cross {
                small: "x".into(),
                large: "y".into(),
                at: 4,
                before: 3,
                flips: 0,
                ties: 1
            }
        );
    }

    #[test]
    fn best_ranges_follow_the_leader_and_absorb_ties() {
        let pts = synthetic();
        let r = best_ranges(&pts, 0, |p| p.kind.clears());
        // byte_count (1 + 0.25x) leads at 1..=2 bytes; memset/avx512 (within noise of each
        // other for small sizes? no: 1.9 vs 2.0 is outside ±1%) take over.
        assert_eq!(r.first().unwrap().routine, "byte_count");
        assert_eq!(r.last().unwrap().routine, "avx512");
        assert_eq!(r.last().unwrap().to, 64 << 20);
        // Ranges tile the sizes in order without overlap.
        assert!(r.windows(2).all(|w| w[0].to < w[1].from));
        // A tie: two routines within each other's interval keep the first leader.
        let tie =
            vec![p("a", 1, 0, 1.0), p("b", 1, 0, 1.1), p("a", 2, 0, 1.005), p("b", 2, 0, 1.0)];
        let r = best_ranges(&tie, 0, |_| true);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].routine.as_str(), r[0].to, r[0].tied.clone()), ("a", 2, vec![]));
    }

    #[test]
    fn bandwidth_takes_the_peak_per_level() {
        let pts = synthetic();
        let caches = vec![
            CacheLevel { name: "L1d".into(), bytes: 48 << 10 },
            CacheLevel { name: "L2".into(), bytes: 1 << 20 },
        ];
        let b = bandwidth(&pts, &caches, 0);
        assert_eq!(b.levels, vec!["L1d", "L2", "DRAM"]);
        let memset = &b.rows.iter().find(|r| r.routine == "memset").unwrap().peaks;
        // In L1 the biggest size (16 KiB) amortises the 2 ns best.
        let p = memset[0].unwrap();
        assert_eq!(p.size, 16384);
        assert!((p.gbps - 16384.0 / (2.0 + 0.004 * 16384.0)).abs() < 1e-9);
        assert_eq!(memset[1].unwrap().size, 1 << 20);
        assert_eq!(memset[2].unwrap().size, 64 << 20);
    }

    #[test]
    fn memset_fraction_and_goal() {
        let pts = synthetic();
        let f = memset_fractions(&pts, 0);
        let at = |s: u64| f.iter().find(|x| x.size == s).unwrap();
        assert_eq!(at(1 << 20).best, "avx512");
        assert!(at(1 << 20).fraction > 1.0);
        let g = goal(&f, GOAL_FROM, GOAL_TARGET);
        assert!(g.met() && g.checked == 3, "{g:?}");
        // Without avx512, u32x8 (0.02 ns/B) is 5× slower than memset: missed.
        let slow: Vec<Point> = pts.into_iter().filter(|p| p.routine != "avx512").collect();
        let g = goal(&memset_fractions(&slow, 0), GOAL_FROM, GOAL_TARGET);
        assert!(!g.met());
        assert_eq!(g.worst.unwrap().best, "u32x8");
        assert!(!goal(&[], GOAL_FROM, GOAL_TARGET).met());
        // 90% of memset, but the intervals overlap: not shown either way.
        let close = Fraction {
            size: 1 << 20,
            best: "rep_stosb".into(),
            best_ns: 1.0,
            memset_ns: 0.9,
            fraction: 0.9,
            within_noise: true,
        };
        let g = goal(std::slice::from_ref(&close), GOAL_FROM, GOAL_TARGET);
        assert!(!g.met() && g.met_within_noise());
        let g = goal(&[Fraction { within_noise: false, ..close }], GOAL_FROM, GOAL_TARGET);
        assert!(!g.met() && !g.met_within_noise());
    }

    #[test]
    fn slopes_recover_the_time_per_byte_and_judge_the_loops() {
        let pts = synthetic();
        let s = slopes(&pts, 0, 48 << 10);
        let get = |r: &str| s.iter().find(|x| x.routine == r).unwrap();
        assert!((get("byte_count").ns_per_byte - 0.25).abs() < 1e-9);
        assert!((get("byte_count").r2 - 1.0).abs() < 1e-9);
        assert!((get("byte_count").vs_memset.unwrap() - 62.5).abs() < 1e-6);
        assert_eq!(get("byte_count").honest(), Some(true));
        assert_eq!(get("memset").honest(), None);
        assert!(s.iter().all(|x| x.routine != "calloc"));
        // A "loop" that is really memset is caught.
        let mut fake = pts.clone();
        fake.extend(curve(&pts, "memset", 0).into_iter().map(|q| Point {
            routine: "byte_end".into(),
            kind: Kind::Loop,
            ..q.clone()
        }));
        let s = slopes(&fake, 0, 48 << 10);
        assert_eq!(s.iter().find(|x| x.routine == "byte_end").unwrap().honest(), Some(false));
    }

    #[test]
    fn fit_is_least_squares() {
        let (s, i, r2) = fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((s - 2.0).abs() < 1e-12 && (i - 1.0).abs() < 1e-12 && (r2 - 1.0).abs() < 1e-12);
        assert!(fit(&[(0.0, 1.0), (1.0, 3.0)]).is_none());
        assert!(fit(&[(1.0, 1.0), (1.0, 3.0), (1.0, 2.0)]).is_none());
    }

    #[test]
    fn misalignment_ratios_split_small_and_large() {
        let c = align_costs(&synthetic());
        let w = c.iter().find(|x| x.routine == "word16" && x.align == 1).unwrap();
        assert!((w.small.unwrap() - 1.1).abs() < 1e-9 && (w.large.unwrap() - 1.1).abs() < 1e-9);
        let m = c.iter().find(|x| x.routine == "memset").unwrap();
        assert!((m.small.unwrap() - 1.0).abs() < 1e-12);
        assert!(c.iter().all(|x| x.routine != "calloc"), "calloc has no offset 1");
    }

    fn measurement(routine: &str, size: u64, align: u64, ns: f64, notes: Params) -> Measurement {
        Measurement {
            summary: Summary::of(&[ns, ns, ns]),
            notes,
            ..Measurement::without_samples(
                CLEAR,
                Params::new().with("routine", routine).with("size", size).with("align", align),
                Unit::Nanos,
                Outcome::Ok,
                0.0,
            )
        }
    }

    #[test]
    fn points_and_caches_come_from_stored_results() {
        let notes = Params::new()
            .with("kind", "isa")
            .with("l1d_kib", 48)
            .with("l2_kib", 1024)
            .with("l3_kib", 32768)
            .with("level", "L1d");
        let mut skipped = measurement("avx512", 64, 0, 1.0, Params::new());
        skipped.outcome = Outcome::Skipped("no AVX-512".into());
        let rs = vec![
            measurement("rep_stosb", 64, 3, 5.0, notes),
            skipped,
            measurement("memset", 64, 0, 4.0, Params::new()),
        ];
        let pts = points(&rs);
        assert_eq!(pts.len(), 2);
        assert_eq!(
            (pts[0].routine.as_str(), pts[0].size, pts[0].align, pts[0].kind),
            ("rep_stosb", 64, 3, Kind::Isa)
        );
        assert_eq!(pts[1].kind, Kind::Libc, "kind from the name when the note is missing");
        let c = caches_from_notes(&rs);
        assert_eq!(
            c.iter().map(|c| (c.name.as_str(), c.bytes)).collect::<Vec<_>>(),
            vec![("L1d", 48 << 10), ("L2", 1 << 20), ("L3", 32 << 20)]
        );
        assert!(analyse(&rs[1..2], &[]).is_none());
    }

    #[test]
    fn sections_render_every_table() {
        let pts = synthetic();
        let a = Analysis {
            crossovers: PAIRS
                .iter()
                .map(|(x, y)| (x.to_string(), y.to_string(), crossover(&pts, x, y, 0)))
                .filter(|c| c.2 != Crossover::NoData)
                .collect(),
            best: best_ranges(&pts, 0, |p| p.kind.clears()),
            best_alloc: best_ranges(&pts, 0, |p| p.kind == Kind::Alloc),
            bandwidth: bandwidth(&pts, &[], 0),
            fractions: memset_fractions(&pts, 0),
            goal: goal(&memset_fractions(&pts, 0), GOAL_FROM, GOAL_TARGET),
            slopes: slopes(&pts, 0, 48 << 10),
            align_costs: align_costs(&pts),
            caches: vec![],
            points: pts,
        };
        let s = sections(&a);
        let text: String = s
            .iter()
            .map(|x| format!("{}\n{}{}\n", x.title, x.table.to_terminal(), x.notes.join("\n")))
            .collect();
        assert!(text.contains("word16 beats u32x8 below 64 B (crossover in 32 B–64 B)"), "{text}");
        assert!(text.contains("goal (≥ 95% of memset from 1 MiB): met"), "{text}");
        assert!(text.contains("a real loop, not a memset call"));
        assert!(text.contains("×1.10 / ×1.10"), "{text}");
        assert_eq!(s.last().unwrap().table.len(), 19, "one matrix row per size");
    }

    #[test]
    fn charts_are_well_formed_with_one_path_per_routine() {
        let pts = synthetic();
        let a = Analysis {
            crossovers: vec![],
            best: vec![],
            best_alloc: vec![],
            bandwidth: bandwidth(&pts, &[], 0),
            fractions: vec![],
            goal: goal(&[], GOAL_FROM, GOAL_TARGET),
            slopes: vec![],
            align_costs: vec![],
            caches: vec![CacheLevel { name: "L1d".into(), bytes: 48 << 10 }],
            points: pts,
        };
        let charts = charts(&a, "run #1 on test");
        let files: Vec<&str> = charts.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(
            files,
            [
                "clear-small.svg",
                "clear-large.svg",
                "clear-bandwidth.svg",
                "clear-align-small.svg",
                "clear-align-large.svg",
                "alloc.svg"
            ]
        );
        for (file, chart) in &charts {
            let svg = chart.to_svg();
            crate::svg::tests::well_formed(&svg).unwrap_or_else(|e| panic!("{file}: {e}"));
            let paths = svg.matches(r#"<path class="series""#).count();
            let expected = match file.as_str() {
                // byte_count, word16, u32x8, memset, avx512
                "clear-small.svg" | "clear-large.svg" | "clear-bandwidth.svg" => 5,
                // word16, u32x8, memset, avx512: aligned and +1 each
                "clear-align-small.svg" | "clear-align-large.svg" => 8,
                // calloc and the memset reference
                "alloc.svg" => 2,
                _ => unreachable!(),
            };
            assert_eq!(paths, expected, "{file}");
            for r in ["word16", "memset"] {
                assert!(
                    file == "alloc.svg" || svg.contains(&format!("<title>{r}</title>")),
                    "{file} lacks {r}"
                );
            }
        }
    }
}
