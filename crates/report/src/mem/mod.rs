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
//! - tables for the terminal and Markdown ([`sections()`]) and SVG line charts ([`charts()`]).
//!
//! The code is split the same way: `analysis` (the findings), `sections` (tables),
//! `charts` (SVG).
//!
//! Everything here is a pure function of measurements; nothing measures, reads files or
//! talks to the database. Cache sizes come from the results' notes (the probe records them),
//! so a run is analysed with the caches of the machine it ran on.

mod analysis;
mod charts;
mod sections;
// Seed 004 (issue 26): real programs' clears.
mod clears;

pub use analysis::*;
pub use charts::*;
pub use clears::*;
pub use sections::*;

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::model::{Measurement, Outcome, Params, Unit};
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
