//! From stored `mem.clear` results to the lab's findings: points, crossovers, best routine
//! per range, bandwidth per cache level, fractions of memset, slopes, misalignment costs.
//! Pure functions of measurements.

use std::collections::BTreeSet;

use schedlab_measure::model::{Measurement, Outcome};
use schedlab_measure::stats;

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
pub(crate) fn kind_by_name(routine: &str) -> Kind {
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

/// The goal: our best routine reaches `target` of memset's speed at every size from
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
        let (s, i, r2) = stats::least_squares(&xy)?;
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
                small: stats::median(
                    &ratios.iter().filter(|x| x.1 <= 128).map(|x| x.0).collect::<Vec<_>>(),
                ),
                large: stats::median(
                    &ratios.iter().filter(|x| x.1 > 128).map(|x| x.0).collect::<Vec<_>>(),
                ),
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
    /// The goal (95% of memset from 1 MiB on).
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
