//! Scenarios 1–10: the seed's ThreadTest tests on OS threads under the kernel's scheduler,
//! recorded by the threads themselves (the sampling recorder). Each entry holds its threads,
//! what it shows and its verdict; a verdict reads the lanes in the order the threads are
//! listed, so `stats[1]` is the second thread of its own entry.

use schedlab_measure::units::human_ns;

use super::Behaviour::*;
use super::{pct, shares, slice, Hog, Policy, Scenario, ThreadSpec};
use crate::stats::ThreadStats;
use crate::Timeline;

/// Scenarios 1–10, in the seed's order.
pub(super) fn scenarios() -> Vec<Scenario> {
    let t = ThreadSpec::busy;
    vec![
        Scenario {
            id: "1",
            name: "one-busy",
            title: "1. One busy thread",
            window_ms: 500,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: true,
            rt: None,
            threads: vec![t("main")],
            explanation: "One thread computes alone on its CPU. The seed saw short interruptions \
                every 10 ms (XP's clock interrupt, the quantum). On Linux the interruptions are \
                the timer tick (CONFIG_HZ, often 250 or 1000 Hz, or none at all with NO_HZ_FULL), \
                interrupts and other tasks woken on this CPU; with nothing else runnable the \
                thread keeps the CPU, and what remains are gaps of a few microseconds, mostly \
                below the recorder's threshold.",
            verdict: |_, stats| {
                let s = &stats[0];
                let gap = s.gap_len.map_or("no gap above the threshold".to_string(), |g| {
                    format!("{} gaps, longest {}, median {}", g.n, human_ns(g.max), human_ns(g.p50))
                });
                format!(
                    "The thread had the CPU {} of the time: {gap}. Useful work: {:.0} inverses/s \
                     (the reference rate for the other scenarios).",
                    pct(s.cpu_share),
                    s.work_rate
                )
            },
        },
        Scenario {
            id: "2",
            name: "busy-vs-process",
            title: "2. Busy thread while another process burns the same CPU",
            window_ms: 500,
            hog: Hog::Process,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![t("main")],
            explanation: "A child process spins on the same CPU. On XP the foreground \
                application got a 3x longer quantum and the background one ran in 130 ms \
                slices, so the thread kept ~75% with long holes. Linux has no foreground boost: \
                EEVDF gives both runnable tasks equal weight (with autogroup, both sit in the \
                same session group), so each gets about half, in slices of about the base slice \
                (3 ms by default), not 130 ms.",
            verdict: |_, stats| {
                let s = &stats[0];
                format!(
                    "Against a CPU-bound process the thread kept {} (XP: ~75% for the foreground \
                     window), in runs of median {} separated by gaps of median {} (XP: 130 ms).",
                    pct(s.cpu_share),
                    slice(s),
                    s.gap_len.map_or("-".into(), |g| human_ns(g.p50))
                )
            },
        },
        Scenario {
            id: "3",
            name: "two-equal",
            title: "3. Two equal threads pinned to one CPU",
            window_ms: 600,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![t("a"), t("b")],
            explanation: "Two equal busy threads share one CPU. As on XP, each gets half and \
                the sum of their useful-work rates is one thread's rate. The difference is the \
                slice: EEVDF alternates them in slices of a few milliseconds (the base slice, \
                rounded up to the next timer tick), where XP switched every 130 ms.",
            verdict: shared_equally,
        },
        Scenario {
            id: "4",
            name: "four-equal",
            title: "4. Four equal threads pinned to one CPU",
            window_ms: 600,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![t("a"), t("b"), t("c"), t("d")],
            explanation: "Four equal busy threads on one CPU: a quarter each, and each waits \
                about three slices between its runs. EEVDF keeps the slice fixed rather than \
                dividing a latency target among the threads, so the gaps grow with the number \
                of threads while the runs stay the same length.",
            verdict: shared_equally,
        },
        Scenario {
            id: "5",
            name: "nice",
            title: "5. nice 0 against nice 5 on one CPU",
            window_ms: 600,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![t("nice0"), ThreadSpec { name: "nice5", nice: 5, ..t("") }],
            explanation: "The seed's 'below normal' thread got nothing at all while a normal \
                one was busy: XP ran the highest non-empty priority queue only. Linux's fair \
                classes (CFS, now EEVDF) never starve a lower nice value: they share the CPU by \
                weight, nice 0 = 1024 against nice 5 = 335, so 75% against 25%. Priority \
                changes how much CPU a thread gets, not whether it gets any.",
            verdict: |_, stats| {
                let (a, b) = (stats[0].cpu_share, stats[1].cpu_share);
                format!(
                    "{}. Ratio {:.2}:1 (weights 1024:335 predict 3.06:1). The nice 5 thread \
                     was not starved, unlike XP's below-normal thread.",
                    shares(stats),
                    if b > 0.0 { a / b } else { f64::INFINITY }
                )
            },
        },
        Scenario {
            id: "6",
            name: "yield",
            title: "6. sched_yield from one thread, then from both",
            window_ms: 600,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![
                ThreadSpec { behaviour: Yield { from_permille: 0 }, ..t("a") },
                ThreadSpec { behaviour: Yield { from_permille: 500 }, ..t("b") },
            ],
            explanation: "First half: thread a calls sched_yield after every ~5 µs batch while \
                b computes; second half: both yield. XP's Sleep(0) gave the CPU only to an \
                equal-priority ready thread, and two threads both calling Sleep(0) shared the CPU \
                in rapid alternation, losing much of it to switching. Under EEVDF a yield pushes \
                the yielder's deadline back, so a thread yielding against a busy one gets almost \
                nothing (a run now and then); when both yield they alternate every batch, both \
                lanes look continuously busy at this resolution, and the sum of their work \
                rates shows what the switching costs",
            verdict: |timeline, _| {
                let (t, l) = (timeline, &timeline.lanes);
                let half = t.window_ns / 2;
                let r = |i: usize, from: u64, to: u64| l[i].rate_in(from, to).unwrap_or(0.0);
                let (a1, b1) = (r(0, 0, half), r(1, 0, half));
                let (a2, b2) = (r(0, half, t.window_ns), r(1, half, t.window_ns));
                format!(
                    "Useful work, first half (only {} yields): {} {a1:.0}/s, {} {b1:.0}/s, sum \
                     {:.0}/s. Second half (both yield): {a2:.0}/s + {b2:.0}/s = {:.0}/s, {:.0}% of \
                     the first half's sum: the rest went to switching. When both yield they \
                     alternate every few µs, faster than the 40 µs gap threshold, so both lanes \
                     look busy; the work rates tell the truth.",
                    l[0].name,
                    l[0].name,
                    l[1].name,
                    a1 + b1,
                    a2 + b2,
                    if a1 + b1 > 0.0 { (a2 + b2) / (a1 + b1) * 100.0 } else { 0.0 }
                )
            },
        },
        Scenario {
            id: "7",
            name: "idle",
            title: "7. SCHED_IDLE against a busy normal thread",
            window_ms: 600,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![t("normal"), ThreadSpec { policy: Policy::Idle, ..t("idle") }],
            explanation: "SCHED_IDLE is Linux's nearest analogue of an idle-priority thread. XP \
                starved it completely and rescued it after ~5 s (the balance-set manager's \
                starvation boost). On Linux SCHED_IDLE is still part of the fair class with \
                weight 3 (against 1024): it is not starved but gets about 0.3% of the CPU, in \
                occasional short runs; the time to its first run is shown.",
            verdict: |_, stats| {
                let idle = &stats[1];
                format!(
                    "{}. The SCHED_IDLE thread first ran after {} and got {} of the CPU \
                     (weight 3/1027 = 0.3%); XP gave it nothing for ~5 s.",
                    shares(stats),
                    idle.first_run_ns.map_or("never".into(), human_ns),
                    pct(idle.cpu_share)
                )
            },
        },
        Scenario {
            id: "8",
            name: "budget",
            title: "8. A background thread budgeting itself: 2 ms work, 10 ms sleep",
            window_ms: 600,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![
                t("main"),
                ThreadSpec {
                    behaviour: Budget { work_us: 2_000, sleep_us: 10_000 },
                    ..t("background")
                },
            ],
            explanation: "The seed's workaround for strict priorities: a normal-priority \
                background thread that works 2 ms and sleeps 10 ms takes ~15% of the CPU. On \
                Linux the same loop takes about 2/12 = 17%; a sleeper waking up gets placed \
                with its lag preserved, so it runs promptly. Linux does not need the trick to \
                get a 'background share': nice or SCHED_IDLE give one (scenarios 5 and 7).",
            verdict: |_, stats| {
                format!(
                    "{}. The background thread took {} (2 ms of every 12 ms = 16.7%); the main \
                     thread kept {}.",
                    shares(stats),
                    pct(stats[1].cpu_share),
                    pct(stats[0].cpu_share)
                )
            },
        },
        Scenario {
            id: "9",
            name: "sleep",
            title: "9. sleep(1 ms) accuracy: default timer slack, then 1 ns",
            window_ms: 800,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![
                ThreadSpec {
                    pinned: false,
                    behaviour: Sleeper { period_us: 1_000, slack_ns: None, half: 0 },
                    ..t("default-slack")
                },
                ThreadSpec {
                    pinned: false,
                    behaviour: Sleeper { period_us: 1_000, slack_ns: Some(1), half: 1 },
                    ..t("slack-1ns")
                },
            ],
            explanation: "On XP, Sleep(1) lasted until the next 10 ms clock interrupt unless \
                timeBeginPeriod(1) shortened the quantum for the whole system. Linux sleeps on \
                high-resolution timers: a 1 ms sleep ends within the thread's timer slack \
                (50 µs by default, so wakeups can be coalesced) plus the wakeup latency. \
                PR_SET_TIMERSLACK of 1 ns is the per-thread answer to timeBeginPeriod: it \
                removes the deliberate lateness and leaves only the wakeup latency.",
            verdict: |_, stats| {
                stats
                    .iter()
                    .map(|s| match s.overshoot {
                        Some(d) => format!(
                            "{}: {} sleeps of 1 ms overshot by p50 {}, p99 {}, max {}",
                            s.name,
                            d.n,
                            human_ns(d.p50),
                            human_ns(d.p99),
                            human_ns(d.max)
                        ),
                        None => format!("{}: no sleeps", s.name),
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
                    + ". XP: up to 10 ms without timeBeginPeriod(1)."
            },
        },
        Scenario {
            id: "10",
            name: "fifo",
            title: "10. SCHED_FIFO against SCHED_OTHER on one CPU (root)",
            window_ms: 300,
            hog: Hog::None,
            needs_root: true,
            measures_overhead: false,
            rt: None,
            threads: vec![ThreadSpec { policy: Policy::Fifo(10), ..t("fifo") }, t("other")],
            explanation: "The real-time class is Linux's strict priority, like XP's scheduler: \
                a runnable SCHED_FIFO thread runs until it blocks, and a SCHED_OTHER thread on \
                its CPU gets nothing, except through RT throttling (sched_rt_runtime_us, 950 ms \
                of every second by default), which over this 300 ms window never applies.",
            verdict: |_, stats| {
                format!(
                    "{}. The SCHED_OTHER thread got {} while the SCHED_FIFO one was runnable: \
                     strict priority, as on XP.",
                    shares(stats),
                    pct(stats[1].cpu_share)
                )
            },
        },
    ]
}

/// Scenarios 17 and 18: seed 001's Tests 5 and 7 as the seed ran them, recorded after the
/// schedlab-rt ones so that the numbers the earlier scenarios have kept do not move.
pub(super) fn later() -> Vec<Scenario> {
    let t = ThreadSpec::busy;
    vec![
        Scenario {
            id: "17",
            name: "yield-priority",
            title: "17. sched_yield from a higher-priority thread against a lower one",
            window_ms: 600,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![
                ThreadSpec { behaviour: Yield { from_permille: 0 }, ..t("nice0-yields") },
                ThreadSpec { nice: 5, ..t("nice5-busy") },
            ],
            explanation: "Seed Test 5 as the seed ran it: the thread that yields has the \
                higher priority. On XP, Sleep(0) gave the CPU only to a ready thread of equal or \
                higher priority, so a normal thread calling it against a below-normal one kept \
                the CPU and the yield did nothing. In Linux's fair class a yield moves the \
                yielder's deadline back by a slice whatever its weight, so the lower-weight \
                thread is picked next: a nice 0 thread that yields after every ~5 µs batch \
                gives most of the CPU to a busy nice 5 one, the opposite of what the weights \
                (75:25, scenario 5) would give two busy threads.",
            verdict: |_, stats| {
                let (a, b) = (&stats[0], &stats[1]);
                format!(
                    "{}. The yielding nice 0 thread kept {} against {} for the busy nice 5 one \
                     (two busy threads at these weights share 75:25): on Linux a yield gives \
                     the CPU away to a lower priority; on XP it did not.",
                    shares(stats),
                    pct(a.cpu_share),
                    pct(b.cpu_share)
                )
            },
        },
        Scenario {
            id: "18",
            name: "rt-throttle",
            title: "18. A SCHED_FIFO hog against a normal thread for 2.5 s (root)",
            window_ms: 2_500,
            hog: Hog::None,
            needs_root: true,
            measures_overhead: false,
            rt: None,
            threads: vec![ThreadSpec { policy: Policy::Fifo(10), ..t("fifo") }, t("other")],
            explanation: "Seed Test 7 long enough for the answer: XP starved a low-priority \
                thread under a busy higher one until the balance-set manager boosted it, after \
                about 4 s, for one quantum. Linux's strict class is the real-time one, and its \
                answer to starvation is bandwidth, not a boost: RT throttling \
                (sched_rt_runtime_us = 950 ms of every sched_rt_period_us = 1 s by default) or, \
                on kernels since 6.12, the fair deadline server, which reserves 50 ms of every \
                second for the fair class while real-time tasks hog the CPU. Either way the \
                normal thread runs about once a second for about 50 ms, starting within a \
                period, which scenario 10's 300 ms window was too short to see.",
            verdict: |_, stats| {
                let o = &stats[1];
                format!(
                    "{}. The SCHED_FIFO thread held the CPU except {} for the normal thread, \
                     which first ran after {} and then in runs of median {} (the kernel's \
                     reservation for the fair class, 50 ms per second by default = 5%); XP \
                     rescued a starved thread only after ~4 s.",
                    shares(stats),
                    pct(o.cpu_share),
                    o.first_run_ns.map_or("never".into(), human_ns),
                    slice(o)
                )
            },
        },
    ]
}

/// Scenarios 3 and 4: equal threads share the CPU, they do not multiply it.
fn shared_equally(_: &Timeline, stats: &[ThreadStats]) -> String {
    let total_rate: f64 = stats.iter().map(|s| s.work_rate).sum();
    format!(
        "{}. Sum of useful-work rates {:.0}/s: the CPU is shared, not multiplied; the \
         effective time slice is the median run.",
        shares(stats),
        total_rate
    )
}
