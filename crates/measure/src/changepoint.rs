//! Change points in a result's history: where a series of medians (one per run, in time
//! order) shifts to another level. Pure functions, no I/O, property-tested.
//!
//! The method is E-Divisive means: Matteson & James, "A Nonparametric Approach for Multiple
//! Change Point Analysis of Multivariate Data", JASA 109(505), 2014 — the method MongoDB's
//! performance CI runs (Daly et al., "Change Point Detection in Software Performance
//! Testing", ICPE 2020; their `signal-processing-algorithms` package). It is not a threshold
//! on consecutive pairs: one noisy run does not make a change point, a lasting shift does.
//!
//! The steps:
//! 1. For a segment `x[a..b)` and a split `τ`, the energy statistic with exponent 1:
//!    `ê = 2·mean|X−Y| − mean|X−X'| − mean|Y−Y'|` (X the points left of τ, Y right, the
//!    within-means over distinct pairs), weighted `Q = τ'(m−τ')/m · ê` (τ' = τ−a, m = b−a).
//!    Every split leaves at least [`Settings::min_size`] points on each side. The right end
//!    of a split is the segment's end (Matteson & James also search it; fixing it lets one
//!    pass of running sums score every τ, O(m log m) with the distance rows summed through a
//!    Fenwick tree, and a single lasting shift is found the same).
//! 2. The best split of all current segments is a candidate. Its significance is a
//!    permutation test: the points of each segment are shuffled within it
//!    ([`Settings::permutations`] times, from a fixed seed, so the answer is reproducible),
//!    and `p = (1 + #{shuffles whose best Q ≥ the candidate's}) / (1 + shuffles)`. Under no
//!    change (exchangeable points) `p ≤ α` happens with probability at most α.
//! 3. A candidate with `p ≤ α` ([`Settings::significance`], 0.05) becomes a change point and
//!    splits its segment; the search repeats on the new segments until a candidate is not
//!    significant.
//! 4. A test of significance says a shift is real, not that it matters: a change point whose
//!    segment medians differ by less than [`Settings::min_effect`] (5 % by default) of the
//!    earlier one is dropped, smallest first, its neighbours merged (the practical filter
//!    MongoDB's analysts apply by hand when triaging).
//!
//! So for a series whose points differ only by noise of at most ±δ around one level, no
//! change point survives when `min_effect > 2δ/(1−δ)`, whatever the test says; and the
//! test itself, with `min_effect = 0`, finds one in at most α of such series (the tests
//! check both).

/// How the search decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The permutation test's significance level α: a candidate is a change point when its
    /// p-value is at most this.
    pub significance: f64,
    /// Shuffles per permutation test (p-values come in steps of 1/(permutations+1)).
    pub permutations: usize,
    /// The fewest points a segment may have on either side of a change point (at least 2).
    pub min_size: usize,
    /// The smallest relative change of the median between adjacent segments that is kept
    /// (0.05: 5 %); 0 keeps every significant one.
    pub min_effect: f64,
    /// The seed of the shuffles.
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            significance: 0.05,
            permutations: 199,
            min_size: 3,
            min_effect: 0.05,
            seed: 0x5eed_c4a9_e901_2714,
        }
    }
}

/// One change point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    /// The index of the first point of the new level.
    pub index: usize,
    /// The permutation test's p-value when it was found.
    pub p_value: f64,
    /// The median of the segment before it.
    pub before: f64,
    /// The median of the segment from it on.
    pub after: f64,
}

impl ChangePoint {
    /// `after / before` (NaN when the earlier median is 0).
    pub fn ratio(&self) -> f64 {
        if self.before == 0.0 {
            f64::NAN
        } else {
            self.after / self.before
        }
    }
}

/// The change points of `values` (in time order), in index order. NaNs are not allowed in
/// a series: a series holding one has none.
pub fn e_divisive(values: &[f64], s: &Settings) -> Vec<ChangePoint> {
    let min = s.min_size.max(2);
    if values.iter().any(|v| !v.is_finite()) || values.len() < 2 * min {
        return Vec::new();
    }
    let mut rng = SplitMix(s.seed);
    // Change points found so far as segment boundaries, with their p-values.
    let mut cuts: Vec<(usize, f64)> = Vec::new();
    let mut scratch = values.to_vec();
    loop {
        let bounds = boundaries(values.len(), &cuts);
        let Some((q, tau)) = best_split(values, &bounds, min) else { break };
        // The permutation test: shuffle within the current segments.
        let allowed = (s.significance * (s.permutations + 1) as f64).floor() as usize;
        let mut at_least = 0usize;
        for _ in 0..s.permutations {
            scratch.copy_from_slice(values);
            for w in bounds.windows(2) {
                rng.shuffle(&mut scratch[w[0]..w[1]]);
            }
            if best_split(&scratch, &bounds, min).is_some_and(|(qp, _)| qp >= q) {
                at_least += 1;
                if at_least + 1 > allowed {
                    // p is already above α: no need to shuffle on.
                    break;
                }
            }
        }
        let p = (1 + at_least) as f64 / (1 + s.permutations) as f64;
        if p > s.significance {
            break;
        }
        cuts.push((tau, p));
        cuts.sort_by_key(|c| c.0);
    }
    // Drop the change points too small to matter, smallest first.
    loop {
        let points = describe(values, &cuts);
        let smallest = points
            .iter()
            .enumerate()
            .map(|(i, c)| (i, relative_effect(c)))
            .filter(|(_, e)| *e < s.min_effect)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match smallest {
            Some((i, _)) => {
                cuts.remove(i);
            }
            None => return points,
        }
    }
}

/// `|after − before| / |before|`; a change from 0 counts as infinite, none at all as 0.
fn relative_effect(c: &ChangePoint) -> f64 {
    let d = (c.after - c.before).abs();
    if d == 0.0 {
        0.0
    } else if c.before == 0.0 {
        f64::INFINITY
    } else {
        d / c.before.abs()
    }
}

/// The change points `cuts` as medians on either side.
fn describe(values: &[f64], cuts: &[(usize, f64)]) -> Vec<ChangePoint> {
    let bounds = boundaries(values.len(), cuts);
    let medians: Vec<f64> = bounds
        .windows(2)
        .map(|w| crate::stats::median(&values[w[0]..w[1]]).expect("segments are not empty"))
        .collect();
    cuts.iter()
        .enumerate()
        .map(|(i, &(index, p_value))| ChangePoint {
            index,
            p_value,
            before: medians[i],
            after: medians[i + 1],
        })
        .collect()
}

/// `0, cut₁, cut₂, …, n`.
fn boundaries(n: usize, cuts: &[(usize, f64)]) -> Vec<usize> {
    let mut b = vec![0];
    b.extend(cuts.iter().map(|c| c.0));
    b.push(n);
    b
}

/// The best split over all segments `bounds` delimits: its weighted statistic and index.
fn best_split(values: &[f64], bounds: &[usize], min: usize) -> Option<(f64, usize)> {
    bounds
        .windows(2)
        .filter_map(|w| segment_best(&values[w[0]..w[1]], min).map(|(q, t)| (q, w[0] + t)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The split `τ` of one segment that maximises `Q`, with at least `min` points on each
/// side. The within-sums move by one row as τ moves by one point, and the rows come from
/// [`distance_rows`] in O(m log m), so a history of thousands of runs costs milliseconds
/// per shuffle, not seconds.
fn segment_best(x: &[f64], min: usize) -> Option<(f64, usize)> {
    let m = x.len();
    if m < 2 * min {
        return None;
    }
    let (left, right) = distance_rows(x);
    let total: f64 = right.iter().sum();
    // Within-left sum for τ = 0 is 0, within-right the total.
    let (mut wl, mut wr) = (0.0, total);
    let mut best: Option<(f64, usize)> = None;
    for tau in 1..m {
        // Point tau−1 moves from the right side to the left.
        let p = tau - 1;
        wl += left[p];
        wr -= right[p];
        if tau < min || m - tau < min {
            continue;
        }
        let between = total - wl - wr;
        let (l, r) = (tau as f64, (m - tau) as f64);
        let e = 2.0 * between / (l * r) - wl / (l * (l - 1.0) / 2.0) - wr / (r * (r - 1.0) / 2.0);
        let q = l * r / m as f64 * e;
        if best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, tau));
        }
    }
    best
}

/// `left[p] = Σ_{i<p} |x_i − x_p|` and `right[p] = Σ_{j>p} |x_p − x_j|`, by a pass each way
/// with a Fenwick tree over the values' ranks holding the count and sum of the points seen:
/// `|x_i − x_p|` summed over the `c` seen points below `x_p` (sum `s`) is `c·x_p − s`, over
/// those above it is their sum less their count times `x_p`.
fn distance_rows(x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let m = x.len();
    let mut sorted: Vec<f64> = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = |v: f64| sorted.partition_point(|&s| s.total_cmp(&v).is_lt());
    let ranks: Vec<usize> = x.iter().map(|&v| rank(v)).collect();
    let pass = |order: &mut dyn Iterator<Item = usize>| {
        let mut rows = vec![0.0; m];
        let mut tree = Fenwick::new(m);
        let (mut seen, mut seen_sum) = (0usize, 0.0f64);
        for p in order {
            let (c, s) = tree.below(ranks[p]);
            let v = x[p];
            rows[p] = (c as f64 * v - s) + ((seen_sum - s) - (seen - c) as f64 * v);
            tree.add(ranks[p], v);
            seen += 1;
            seen_sum += v;
        }
        rows
    };
    let left = pass(&mut (0..m));
    let right = pass(&mut (0..m).rev());
    (left, right)
}

/// Counts and sums by rank: `add` at a rank, `below` a rank (exclusive). O(log n) each.
struct Fenwick {
    count: Vec<usize>,
    sum: Vec<f64>,
}

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick { count: vec![0; n + 1], sum: vec![0.0; n + 1] }
    }

    fn add(&mut self, rank: usize, v: f64) {
        let mut i = rank + 1;
        while i < self.count.len() {
            self.count[i] += 1;
            self.sum[i] += v;
            i += i & i.wrapping_neg();
        }
    }

    /// Count and sum of the values added at ranks below `rank`.
    fn below(&self, rank: usize) -> (usize, f64) {
        let (mut c, mut s) = (0, 0.0);
        let mut i = rank;
        while i > 0 {
            c += self.count[i];
            s += self.sum[i];
            i -= i & i.wrapping_neg();
        }
        (c, s)
    }
}

/// SplitMix64 (Steele, Lea & Flood, "Fast Splittable Pseudorandom Number Generators",
/// OOPSLA 2014): a small seeded generator, so a history's change points are the same
/// every time it is drawn.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fisher–Yates.
    fn shuffle(&mut self, v: &mut [f64]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }

    /// Uniform in [0, 1).
    #[cfg(test)]
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_clean_step_is_found_where_it_is() {
        let mut v = vec![10.0, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0];
        v.extend([12.0, 12.1, 11.9, 12.0, 12.05, 11.95]);
        let c = e_divisive(&v, &Settings::default());
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].index, 7);
        assert!(c[0].p_value <= 0.05);
        assert!((c[0].before - 10.0).abs() < 0.06 && (c[0].after - 12.0).abs() < 0.06);
        assert!((c[0].ratio() - 1.2).abs() < 0.01);
    }

    #[test]
    fn two_steps_are_both_found() {
        let mut v = vec![5.0; 8];
        v.extend([9.0; 8]);
        v.extend([6.0; 8]);
        for (i, x) in v.iter_mut().enumerate() {
            *x += (i % 3) as f64 * 0.01;
        }
        let c = e_divisive(&v, &Settings::default());
        let at: Vec<usize> = c.iter().map(|c| c.index).collect();
        assert_eq!(at, vec![8, 16], "{c:?}");
    }

    /// A year of a run per hour on one machine (8,760 points) with one step: found, at
    /// its place, in a test that would take minutes were the search quadratic per shuffle.
    #[test]
    fn a_long_history_is_searched_quickly_enough_to_test() {
        let mut rng = SplitMix(7);
        let v: Vec<f64> = (0..8760)
            .map(|i| if i < 5000 { 100.0 } else { 120.0 } * (1.0 + (rng.unit() - 0.5) * 0.02))
            .collect();
        let s = Settings { permutations: 19, ..Settings::default() };
        let c = e_divisive(&v, &s);
        assert_eq!(c.iter().map(|c| c.index).collect::<Vec<_>>(), vec![5000], "{c:?}");
    }

    #[test]
    fn short_or_broken_series_have_none() {
        let s = Settings::default();
        assert!(e_divisive(&[], &s).is_empty());
        assert!(e_divisive(&[1.0, 2.0, 3.0, 9.0, 9.0], &s).is_empty(), "too short to split");
        assert!(e_divisive(&[1.0, 1.0, 1.0, f64::NAN, 9.0, 9.0, 9.0], &s).is_empty());
    }

    #[test]
    fn a_significant_but_small_shift_is_dropped_by_the_effect_floor() {
        let mut v = vec![100.0; 10];
        v.extend([102.0; 10]);
        let kept = Settings { min_effect: 0.0, ..Settings::default() };
        assert_eq!(e_divisive(&v, &kept).len(), 1);
        assert!(e_divisive(&v, &Settings::default()).is_empty(), "2% < the 5% floor");
    }

    /// The permutation test alone (no effect floor) on series of pure noise finds a change
    /// point in about α of them, not more: 400 series of 30 points (a sum of four uniforms
    /// each, near-normal), from a fixed seed. Expected 20 at α = 0.05; the bound 32 is three
    /// binomial standard deviations (4.4) above it.
    #[test]
    fn on_pure_noise_the_test_fires_at_most_at_its_significance() {
        let s = Settings { min_effect: 0.0, permutations: 99, ..Settings::default() };
        let mut rng = SplitMix(42);
        let mut fired = 0;
        for _ in 0..400 {
            let v: Vec<f64> =
                (0..30).map(|_| 100.0 + (0..4).map(|_| rng.unit()).sum::<f64>()).collect();
            if !e_divisive(&v, &s).is_empty() {
                fired += 1;
            }
        }
        assert!(fired <= 32, "{fired} of 400 noise series had a change point at α = 0.05");
    }

    proptest! {
        /// The O(m log m) distance rows are the O(m²) sums, ties included.
        #[test]
        fn distance_rows_are_the_sums_of_distances(
            x in prop::collection::vec(prop_oneof![-1e3f64..1e3, Just(5.0)], 1..80),
        ) {
            let (left, right) = distance_rows(&x);
            for p in 0..x.len() {
                let l: f64 = x[..p].iter().map(|v| (v - x[p]).abs()).sum();
                let r: f64 = x[p + 1..].iter().map(|v| (v - x[p]).abs()).sum();
                let tol = 1e-9 * (1.0 + l.abs() + r.abs());
                prop_assert!((left[p] - l).abs() <= tol, "left[{}] {} vs {}", p, left[p], l);
                prop_assert!((right[p] - r).abs() <= tol, "right[{}] {} vs {}", p, right[p], r);
            }
        }

        /// A constant level with noise of at most ±2 % has no change point at the default
        /// settings (α = 0.05, 5 % floor): any split's medians differ by less than 4.1 %.
        #[test]
        fn constant_with_noise_has_no_change_point(
            level in 1e-3f64..1e7,
            noise in prop::collection::vec(-0.02f64..0.02, 6..60),
        ) {
            let v: Vec<f64> = noise.iter().map(|e| level * (1.0 + e)).collect();
            let c = e_divisive(&v, &Settings::default());
            prop_assert!(c.is_empty(), "{:?} in {:?}", c, v);
        }

        /// A step of at least 30 % (up or down) in noise of ±2 % is one change point, at the
        /// first point of the new level.
        #[test]
        fn a_step_is_one_change_point_at_the_right_index(
            level in 1e-3f64..1e7,
            factor in prop_oneof![1.3f64..3.0, 0.33f64..0.77],
            before in prop::collection::vec(-0.02f64..0.02, 5..30),
            after in prop::collection::vec(-0.02f64..0.02, 5..30),
        ) {
            let mut v: Vec<f64> = before.iter().map(|e| level * (1.0 + e)).collect();
            v.extend(after.iter().map(|e| level * factor * (1.0 + e)));
            let c = e_divisive(&v, &Settings::default());
            prop_assert_eq!(c.len(), 1, "{:?}", c);
            prop_assert_eq!(c[0].index, before.len());
        }
    }
}
