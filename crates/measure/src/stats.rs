//! Statistics over samples: pure functions, no I/O, property-tested.
//!
//! The median's confidence interval uses order statistics of the binomial distribution
//! (a distribution-free interval: the number of samples below the true median is
//! Binomial(n, 1/2)), so it needs no normality assumption, which timing samples never meet.
//! Outliers are counted with Tukey's fences (1.5 × IQR beyond the quartiles), as criterion.rs
//! and hyperfine do.
//!
//! Two percentile definitions, each for its use: [`percentile_sorted`] interpolates between
//! order statistics (an estimate of a continuous quantity from a few samples: the summaries of
//! measurements), [`nearest_rank`] returns one of the values (a description of many observed
//! durations, where a value that never occurred would mislead: a timeline's time slices, the
//! tail of wake-up latencies). Every other crate takes its medians and percentiles from here.
//!
//! [`bootstrap_quantile_diff`] bounds the difference of one percentile between two sets of
//! many values (two runs' frame times): the percentile bootstrap (Efron & Tibshirani, *An
//! Introduction to the Bootstrap*, 1993, ch. 13), each set resampled apart, with a seeded
//! generator so the same values always give the same interval (a verdict read twice, or in a
//! test, never changes).

use serde::{Deserialize, Serialize};

/// The confidence level we aim for in intervals of the median.
pub const CI_LEVEL: f64 = 0.95;

/// Summary statistics of one result's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator; 0 for a single sample).
    pub stddev: f64,
    /// 5th percentile (linear interpolation between order statistics).
    pub p5: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Lower end of the confidence interval of the median.
    pub ci_low: f64,
    /// Upper end of the confidence interval of the median.
    pub ci_high: f64,
    /// The confidence the interval actually has: 0.95 or more from 6 samples on; with fewer
    /// samples the widest possible interval (min..max) is used and this says how sure it is.
    pub ci_level: f64,
    /// Coefficient of variation: stddev / mean (0 when the mean is 0).
    pub cv: f64,
    /// Samples outside Tukey's fences (1.5 × IQR below Q1 or above Q3).
    pub outliers: usize,
}

impl Summary {
    /// Summarises `values`. Returns `None` for an empty slice or one holding a NaN.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(|a, b| a.partial_cmp(b).expect("NaN was rejected above"));
        let n = sorted.len();
        // Equal samples have exactly no spread; summing would leave rounding residue.
        let constant = sorted[0] == sorted[n - 1];
        let mean = if constant { sorted[0] } else { sorted.iter().sum::<f64>() / n as f64 };
        let stddev = if n > 1 && !constant {
            (sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let median = percentile_sorted(&sorted, 50.0);
        let (lo, hi, level) = median_ci_ranks(n, CI_LEVEL);
        let q1 = percentile_sorted(&sorted, 25.0);
        let q3 = percentile_sorted(&sorted, 75.0);
        let iqr = q3 - q1;
        let (fence_lo, fence_hi) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
        let outliers = sorted.iter().filter(|&&v| v < fence_lo || v > fence_hi).count();
        Some(Summary {
            n,
            median,
            min: sorted[0],
            max: sorted[n - 1],
            mean,
            stddev,
            p5: percentile_sorted(&sorted, 5.0),
            p95: percentile_sorted(&sorted, 95.0),
            ci_low: sorted[lo],
            ci_high: sorted[hi],
            ci_level: level,
            cv: if mean != 0.0 { stddev / mean.abs() } else { 0.0 },
            outliers,
        })
    }

    /// Half the width of the median's interval relative to the median (0.02 = ±2 %).
    pub fn ci_rel_halfwidth(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.ci_high - self.ci_low) / 2.0 / self.median.abs()
        }
    }
}

/// The `p`-th percentile (0..=100) of sorted values, interpolating linearly between order
/// statistics (Hyndman & Fan type 7, what R and NumPy use by default).
///
/// # Panics
/// If `sorted` is empty.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of no values");
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// The `p`-th percentile (0..=100) of sorted values by the nearest-rank method (Hyndman & Fan
/// type 1): the smallest value with at least `p`% of the values at or below it. It is always
/// one of the values; the median of an even count is the lower middle one.
///
/// # Panics
/// If `sorted` is empty.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> T {
    assert!(!sorted.is_empty(), "percentile of no values");
    let n = sorted.len();
    sorted[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1]
}

/// The median of `values` in any order (interpolated, as [`percentile_sorted`]); `None` for
/// none or a NaN.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(percentile_sorted(&sorted, 50.0))
}

/// Two modes found in a set of samples ([`modes`]): each cluster's median and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Modes {
    /// The lower cluster's median and how many samples it holds.
    pub low: (f64, usize),
    /// The upper cluster's median and how many samples it holds.
    pub high: (f64, usize),
}

/// Whether `values` fall into two separate clusters, and if so which: a median between
/// them would describe no sample (a cross-CPU latency that is fast when the partner's vCPU
/// is awake and slow when it must be woken; a memory size that sits in or out of a cache
/// level from one sample to the next).
///
/// The rule, deliberately conservative for the 7–15 samples a run takes: sorted, the values
/// are split at their widest gap between neighbours, each side holding at least a fifth of
/// them (and at least two); the split counts when that gap is wider than twice the wider of
/// the two clusters' own ranges and more than 10% of the overall median. `None` for fewer
/// than six values, a NaN, or no such split.
pub fn modes(values: &[f64]) -> Option<Modes> {
    let n = values.len();
    if n < 6 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let least = (n.div_ceil(5)).max(2);
    let (split, gap) =
        (least..=n - least).map(|i| (i, v[i] - v[i - 1])).max_by(|a, b| a.1.total_cmp(&b.1))?;
    let (lo, hi) = v.split_at(split);
    let range = |c: &[f64]| c[c.len() - 1] - c[0];
    let overall = percentile_sorted(&v, 50.0).abs();
    if gap > 2.0 * range(lo).max(range(hi)) && gap > 0.1 * overall {
        Some(Modes {
            low: (percentile_sorted(lo, 50.0), lo.len()),
            high: (percentile_sorted(hi, 50.0), hi.len()),
        })
    } else {
        None
    }
}

/// Ordinary least squares of y on x: `(slope, intercept, r²)`; `None` for fewer than three
/// points or when every x is the same. (The memory lab fits time against size to get each
/// routine's cost per byte.)
pub fn least_squares(xy: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
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

/// P(X <= k) for X ~ Binomial(n, 1/2).
fn binom_half_cdf(n: usize, k: usize) -> f64 {
    // Sum C(n, i) / 2^n in log space to stay finite for large n.
    let ln2n = n as f64 * std::f64::consts::LN_2;
    let mut ln_c = 0.0f64; // ln C(n, 0)
    let mut total = 0.0;
    for i in 0..=k.min(n) {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        total += (ln_c - ln2n).exp();
    }
    total.min(1.0)
}

/// Zero-based ranks `(lo, hi)` of the order statistics that bound the median with at least
/// `level` confidence, and the confidence they actually give.
///
/// The interval [x_(l), x_(n+1-l)] (one-based) covers the median with probability
/// 1 − 2·P(B ≤ l − 1), B ~ Binomial(n, 1/2); we take the largest `l` that keeps that at or
/// above `level`. Below 6 samples no `l` reaches 95 %, and the whole range is returned.
pub fn median_ci_ranks(n: usize, level: f64) -> (usize, usize, f64) {
    assert!(n > 0, "interval of no samples");
    let mut best_l = 1; // one-based
    let mut best_level = 1.0 - 2.0 * binom_half_cdf(n, 0);
    let mut l = 2;
    while l <= n.div_ceil(2) {
        let cov = 1.0 - 2.0 * binom_half_cdf(n, l - 1);
        if cov < level {
            break;
        }
        best_l = l;
        best_level = cov;
        l += 1;
    }
    (best_l - 1, n - best_l, best_level.max(0.0))
}

/// The difference of one percentile between two sets of values (`other − base`), with a
/// bootstrap confidence interval ([`bootstrap_quantile_diff`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileDiff {
    /// The observed difference of the two nearest-rank percentiles.
    pub point: f64,
    /// Lower end of the interval.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
    /// The interval's confidence level (0.95).
    pub level: f64,
}

/// Where a [`QuantileDiff`]'s interval lies against a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bounded {
    /// The whole interval is at or below the bound.
    Within,
    /// The whole interval is above the bound.
    Beyond,
    /// The interval straddles the bound: the values cannot say.
    Undecided,
}

impl QuantileDiff {
    /// Whether the difference is at most `bound`: [`Bounded::Within`] only when the interval's
    /// upper end is, [`Bounded::Beyond`] only when its lower end is above it.
    pub fn against(&self, bound: f64) -> Bounded {
        if self.high <= bound {
            Bounded::Within
        } else if self.low > bound {
            Bounded::Beyond
        } else {
            Bounded::Undecided
        }
    }
}

/// The `p`-th nearest-rank percentile of `other` minus that of `base`, with its `level`
/// confidence interval from `resamples` bootstrap resamples drawn with the generator seeded
/// by `seed`; `None` when either set is empty or holds a NaN.
///
/// Each resample draws `base.len()` values of `base` and `other.len()` of `other` with
/// replacement and takes the difference of their percentiles; the interval is the central
/// `level` of those differences (nearest rank). The values are treated as independent draws:
/// true of frames spaced a period apart unless one stall spans several of them.
///
/// How far out `p` may go is the caller's question: the bootstrap cannot put a percentile
/// above the largest value, so with `k = n·(1 − p/100)` values above it, an upper end is
/// only as good as the few values there are. With k ≈ 2 (p99 of 200) the upper end is the
/// largest value; with k ≈ 10 (p95 of 200) it moves by a rank when one value does.
pub fn bootstrap_quantile_diff(
    base: &[f64],
    other: &[f64],
    p: f64,
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<QuantileDiff> {
    if base.is_empty() || other.is_empty() || base.iter().chain(other).any(|v| v.is_nan()) {
        return None;
    }
    let sorted = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s
    };
    let (base, other) = (sorted(base), sorted(other));
    let point = nearest_rank(&other, p) - nearest_rank(&base, p);
    let mut rng = SplitMix64(seed);
    let mut idx: Vec<usize> = Vec::new();
    // A resample's percentile: the rank-th smallest of indices drawn into the sorted values
    // is the rank-th smallest value drawn, found in linear time.
    let mut resampled = |s: &[f64], rng: &mut SplitMix64| {
        let n = s.len();
        idx.clear();
        idx.extend((0..n).map(|_| rng.below(n)));
        let rank = ((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1;
        s[*idx.select_nth_unstable(rank).1]
    };
    let mut diffs: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            let b = resampled(&base, &mut rng);
            resampled(&other, &mut rng) - b
        })
        .collect();
    diffs.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0 * 100.0;
    Some(QuantileDiff {
        point,
        low: nearest_rank(&diffs, tail),
        high: nearest_rank(&diffs, 100.0 - tail),
        level,
    })
}

/// SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): a tiny seeded generator, enough for resampling and no dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (Lemire's multiply-shift; its bias, below n / 2^64, is nothing here).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// The verdict of comparing one result against a baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// `other.median / baseline.median`.
    pub ratio: f64,
    /// The two medians' confidence intervals overlap: the difference is within noise.
    pub within_noise: bool,
    /// When not within noise: `true` if `other` is better than the baseline.
    pub improved: bool,
}

/// Compares `other` against `baseline` for a unit whose better direction is `better`.
pub fn compare(baseline: &Summary, other: &Summary, better: Better) -> Verdict {
    let ratio = if baseline.median != 0.0 { other.median / baseline.median } else { f64::NAN };
    let within_noise = other.ci_low <= baseline.ci_high && baseline.ci_low <= other.ci_high;
    let improved = match better {
        Better::Lower => other.median < baseline.median,
        Better::Higher => other.median > baseline.median,
    };
    Verdict { ratio, within_noise, improved }
}

/// Which direction of a value is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Lower is better (latencies, times per operation).
    Lower,
    /// Higher is better (bandwidths, rates).
    Higher,
}

impl Better {
    /// `"lower"` or `"higher"`.
    pub fn key(self) -> &'static str {
        match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn summary_of_known_values() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert_eq!(s.mean, 3.0);
        assert!((s.stddev - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((s.p5 - 1.2).abs() < 1e-12);
        assert!((s.p95 - 4.8).abs() < 1e-12);
        // Five samples cannot give 95 %: the interval is the whole range, at 93.75 %.
        assert_eq!((s.ci_low, s.ci_high), (1.0, 5.0));
        assert!((s.ci_level - 0.9375).abs() < 1e-12);
        assert_eq!(s.outliers, 0);
    }

    #[test]
    fn median_interval_ranks_match_tables() {
        // Standard tables for the distribution-free 95 % interval of the median:
        // n = 6 -> (1, 6), n = 10 -> (2, 9), n = 15 -> (4, 12), n = 20 -> (6, 15) one-based.
        assert_eq!(median_ci_ranks(6, 0.95).0, 0);
        assert_eq!(median_ci_ranks(10, 0.95), (1, 8, median_ci_ranks(10, 0.95).2));
        let (lo, hi, lvl) = median_ci_ranks(15, 0.95);
        assert_eq!((lo, hi), (3, 11));
        assert!((0.95..0.99).contains(&lvl));
        let (lo, hi, _) = median_ci_ranks(20, 0.95);
        assert_eq!((lo, hi), (5, 14));
    }

    #[test]
    fn tukey_fences_count_a_far_outlier() {
        let mut v = vec![10.0; 14];
        v.push(1000.0);
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.outliers, 1);
        assert_eq!(s.median, 10.0);
    }

    #[test]
    fn nearest_rank_picks_a_value() {
        let v: Vec<u64> = (1..=100).collect();
        let p = |q| nearest_rank(&v, q);
        assert_eq!((p(0.0), p(50.0), p(95.0), p(99.0), p(100.0)), (1, 50, 95, 99, 100));
        assert_eq!(nearest_rank(&[3, 4], 50.0), 3);
        assert_eq!(nearest_rank(&[7], 99.0), 7);
    }

    #[test]
    fn median_interpolates_an_even_count() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn least_squares_recovers_a_line_and_its_fit() {
        let (s, i, r2) = least_squares(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert_eq!((s, i, r2), (2.0, 1.0, 1.0));
        // Noisy points: the slope and intercept of the textbook example, r² below 1.
        let (s, i, r2) =
            least_squares(&[(1.0, 2.0), (2.0, 4.0), (3.0, 5.0), (4.0, 4.0), (5.0, 5.0)]).unwrap();
        assert!((s - 0.6).abs() < 1e-12 && (i - 2.2).abs() < 1e-12, "{s} {i}");
        assert!((r2 - 0.6).abs() < 1e-12, "{r2}");
        assert!(least_squares(&[(0.0, 1.0), (1.0, 3.0)]).is_none(), "two points");
        assert!(least_squares(&[(1.0, 1.0), (1.0, 3.0), (1.0, 2.0)]).is_none(), "one x");
    }

    #[test]
    fn empty_and_nan_have_no_summary() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn overlapping_intervals_are_within_noise() {
        let a = Summary::of(&[10.0, 10.1, 9.9, 10.2, 9.8, 10.0, 10.05, 9.95]).unwrap();
        let b = Summary::of(&[10.1, 10.2, 10.0, 10.3, 9.9, 10.1, 10.15, 10.05]).unwrap();
        assert!(compare(&a, &b, Better::Lower).within_noise);
        let c = Summary::of(&[20.0, 20.1, 19.9, 20.2, 19.8, 20.0, 20.05, 19.95]).unwrap();
        let v = compare(&a, &c, Better::Lower);
        assert!(!v.within_noise);
        assert!(!v.improved);
        assert!((v.ratio - 2.0).abs() < 1e-9);
        assert!(compare(&a, &c, Better::Higher).improved);
    }

    fn samples() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(0.001f64..1e9, 1..200)
    }

    proptest! {
        #[test]
        fn order_of_statistics_holds(v in samples()) {
            let s = Summary::of(&v).unwrap();
            prop_assert!(s.min <= s.p5 && s.p5 <= s.median);
            prop_assert!(s.median <= s.p95 && s.p95 <= s.max);
            prop_assert!(s.ci_low <= s.median && s.median <= s.ci_high);
            prop_assert!(s.min <= s.mean * (1.0 + 1e-12) && s.mean <= s.max * (1.0 + 1e-12));
            prop_assert!(s.stddev >= 0.0 && s.cv >= 0.0);
            prop_assert!(s.outliers < s.n.max(1) || s.n == 1 && s.outliers == 0);
            prop_assert!(s.ci_level >= 0.0 && s.ci_level <= 1.0);
            if s.n >= 6 { prop_assert!(s.ci_level >= CI_LEVEL); }
        }

        #[test]
        fn summary_ignores_sample_order(v in samples(), seed in any::<u64>()) {
            let mut shuffled = v.clone();
            // Deterministic Fisher-Yates with a tiny LCG: no extra dependency.
            let mut x = seed | 1;
            for i in (1..shuffled.len()).rev() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (x >> 33) as usize % (i + 1));
            }
            let a = Summary::of(&v).unwrap();
            let b = Summary::of(&shuffled).unwrap();
            prop_assert_eq!(a.median, b.median);
            prop_assert_eq!((a.ci_low, a.ci_high), (b.ci_low, b.ci_high));
            prop_assert_eq!(a.outliers, b.outliers);
            prop_assert!((a.mean - b.mean).abs() <= 1e-9 * a.mean.abs().max(1.0));
        }

        #[test]
        fn scaling_scales_location_and_keeps_cv(v in samples(), k in 0.5f64..1000.0) {
            let scaled: Vec<f64> = v.iter().map(|x| x * k).collect();
            let a = Summary::of(&v).unwrap();
            let b = Summary::of(&scaled).unwrap();
            let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-300);
            prop_assert!(close(a.median * k, b.median));
            prop_assert!(close(a.ci_low * k, b.ci_low));
            prop_assert!(close(a.cv, b.cv) || a.cv < 1e-9);
            prop_assert_eq!(a.outliers, b.outliers);
        }

        #[test]
        fn constant_samples_have_no_spread(x in 0.001f64..1e9, n in 1usize..100) {
            let s = Summary::of(&vec![x; n]).unwrap();
            prop_assert_eq!(s.median, x);
            prop_assert_eq!(s.stddev, 0.0);
            prop_assert_eq!(s.outliers, 0);
            prop_assert_eq!((s.ci_low, s.ci_high), (x, x));
        }

        #[test]
        fn interval_coverage_is_at_least_level(n in 6usize..400) {
            let (lo, hi, lvl) = median_ci_ranks(n, CI_LEVEL);
            prop_assert!(lo <= hi && hi < n);
            prop_assert_eq!(lo, n - 1 - hi); // symmetric
            prop_assert!(lvl >= CI_LEVEL);
            // And it is the narrowest such interval: one rank tighter drops below the level.
            let tighter = 1.0 - 2.0 * binom_half_cdf(n, lo + 1);
            prop_assert!(lo + 1 > hi - 1 || tighter < CI_LEVEL);
        }

        #[test]
        fn nearest_rank_has_p_percent_at_or_below(
            mut v in prop::collection::vec(0u64..1000, 1..200),
            p in 0.0f64..=100.0,
        ) {
            v.sort_unstable();
            let r = nearest_rank(&v, p);
            let at_or_below = v.iter().filter(|&&x| x <= r).count();
            let below = v.iter().filter(|&&x| x < r).count();
            let needed = ((p / 100.0 * v.len() as f64).ceil() as usize).max(1);
            prop_assert!(v.contains(&r));
            prop_assert!(at_or_below >= needed, "too small: {r}");
            prop_assert!(below < needed, "not the smallest such value: {r}");
        }

        #[test]
        fn a_result_is_within_noise_of_itself(v in samples()) {
            let s = Summary::of(&v).unwrap();
            let c = compare(&s, &s, Better::Lower);
            prop_assert!(c.within_noise);
        }
    }

    /// `n` values spread evenly over `lo..lo + width` (a deterministic uniform sample).
    fn spread(n: usize, lo: f64, width: f64) -> Vec<f64> {
        (0..n).map(|i| lo + width * (i as f64 + 0.5) / n as f64).collect()
    }

    #[test]
    fn a_quantile_difference_is_within_beyond_or_undecided_against_its_bound() {
        // Two hundred frames of 4.0–4.5 ms; the other set shifted by 0.2, 3 and 1 ms against
        // a 1 ms bound (values in µs). The interval follows the shift, so 0.2 ms is within,
        // 3 ms beyond, and exactly 1 ms straddles it.
        let base = spread(200, 4000.0, 500.0);
        let shifted = |by: f64| base.iter().map(|v| v + by).collect::<Vec<_>>();
        let judge = |by: f64| {
            let d = bootstrap_quantile_diff(&base, &shifted(by), 95.0, 0.95, 2000, 1).unwrap();
            assert!(d.low <= d.point && d.point <= d.high, "{d:?}");
            assert!((d.point - by).abs() < 1e-9, "{d:?}");
            d.against(1000.0)
        };
        assert_eq!(judge(200.0), Bounded::Within);
        assert_eq!(judge(3000.0), Bounded::Beyond);
        assert_eq!(judge(1000.0), Bounded::Undecided);
        // A wider spread at the same shift: 0.8 ms over, but the tail's interval is wider
        // than the 0.2 ms left, so the frames cannot say.
        let wide = spread(200, 4000.0, 8000.0);
        let d = bootstrap_quantile_diff(
            &wide,
            &wide.iter().map(|v| v + 800.0).collect::<Vec<_>>(),
            95.0,
            0.95,
            2000,
            1,
        )
        .unwrap();
        assert_eq!(d.against(1000.0), Bounded::Undecided, "{d:?}");
    }

    #[test]
    fn two_stalls_move_the_p95_by_little_and_the_p99_to_the_stall() {
        // Why a tail verdict on a few hundred frames uses the p95: two 100 ms stalls among
        // 200 frames of 4–4.5 ms are the p99's whole upper interval, and a rank of the p95's.
        let base = spread(200, 4000.0, 500.0);
        let mut stalled = base.clone();
        stalled[0] = 100_000.0;
        stalled[1] = 100_000.0;
        let p99 = bootstrap_quantile_diff(&base, &stalled, 99.0, 0.95, 2000, 1).unwrap();
        assert!(p99.high > 90_000.0, "{p99:?}");
        let p95 = bootstrap_quantile_diff(&base, &stalled, 95.0, 0.95, 2000, 1).unwrap();
        assert!(p95.high < 100.0, "{p95:?}");
        assert_eq!(p95.against(1000.0), Bounded::Within);
    }

    #[test]
    fn no_values_or_a_nan_have_no_difference() {
        assert!(bootstrap_quantile_diff(&[], &[1.0], 95.0, 0.95, 10, 1).is_none());
        assert!(bootstrap_quantile_diff(&[1.0], &[f64::NAN], 95.0, 0.95, 10, 1).is_none());
    }

    proptest! {
        #[test]
        fn a_bootstrap_interval_is_seeded_ordered_and_moves_with_a_shift(
            base in prop::collection::vec(0.0f64..1e5, 1..120),
            other in prop::collection::vec(0.0f64..1e5, 1..120),
            shift in -1e4f64..1e4,
            seed in any::<u64>(),
        ) {
            let d = bootstrap_quantile_diff(&base, &other, 95.0, 0.95, 200, seed).unwrap();
            prop_assert!(d.low <= d.high);
            // The same values and seed give the same interval.
            prop_assert_eq!(d, bootstrap_quantile_diff(&base, &other, 95.0, 0.95, 200, seed).unwrap());
            // Shifting one set shifts the interval by as much (the same draws are made).
            let moved: Vec<f64> = other.iter().map(|v| v + shift).collect();
            let e = bootstrap_quantile_diff(&base, &moved, 95.0, 0.95, 200, seed).unwrap();
            prop_assert!((e.low - d.low - shift).abs() < 1e-6 && (e.high - d.high - shift).abs() < 1e-6);
        }
    }

    #[test]
    fn two_separate_clusters_are_two_modes() {
        let v = [45.0, 46.0, 44.5, 45.5, 46.2, 90.0, 91.0, 89.5, 90.5, 92.0, 45.8];
        let m = modes(&v).expect("two modes");
        assert_eq!(m.low.1, 6);
        assert_eq!(m.high.1, 5);
        assert!((m.low.0 - 45.65).abs() < 1e-9, "{m:?}");
        assert!((m.high.0 - 90.5).abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn one_cluster_one_outlier_or_a_spread_is_not_two_modes() {
        // One stray sample is an outlier, not a mode.
        assert!(modes(&[10.0, 10.1, 10.2, 9.9, 10.0, 10.1, 30.0]).is_none());
        // Evenly spread values have no gap wider than their clusters.
        let spread: Vec<f64> = (0..12).map(|i| 100.0 + i as f64).collect();
        assert!(modes(&spread).is_none());
        // Two clusters 3% apart: real, but too close to matter.
        assert!(modes(&[100.0, 100.1, 100.0, 103.0, 103.1, 103.0, 100.1, 103.05]).is_none());
        // Too few values to say.
        assert!(modes(&[1.0, 1.0, 9.0, 9.0, 9.0]).is_none());
    }
}
