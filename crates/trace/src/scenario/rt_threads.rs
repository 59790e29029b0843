//! Scenarios 11–16: schedlab-rt user threads on one virtual processor, recorded from the
//! runtime's own events. The lanes are the processor's first (its slices named after the user
//! thread, its marks the upcalls: preempted, blocked, unblocked), then one per user thread, so
//! a verdict reads `timeline.lanes[0]` for the processor and `stats[1..]` for the threads.

use schedlab_measure::units::human_ns;

use super::{pct, shares, Blocker, BudgetSetup, Hog, RtSetup, Scenario};
use crate::stats::ThreadStats;
use crate::Timeline;

/// Scenarios 11–16, in order.
pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            id: "11",
            name: "rt-coop",
            title: "11. schedlab-rt: three user threads on one virtual processor, cooperative",
            window_ms: 300,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: Some(RtSetup::cooperative(3)),
            threads: vec![],
            explanation: "Three schedlab-rt user threads compute on one virtual processor and \
                call yield_now after every millisecond of work. Nothing preempts them: the \
                runtime switches only where they yield, so no slice is shorter than a \
                millisecond of work, and the timeline comes from the runtime's own Switched \
                events (one lane for the virtual processor, slices named after the user thread, \
                then one lane per user thread). This is the cooperative scheme the seed \
                describes first (PalmOS, Windows 3.x): a thread runs until it gives the CPU up; \
                how fairly the runtime rotates among the yielders is what the lanes show",
            verdict: |timeline, stats| {
                let vp = &timeline.lanes[0];
                let users = &stats[1..];
                let late = users
                    .iter()
                    .filter_map(|u| u.first_run_ns.map(|f| (f, &u.name)))
                    .max()
                    .map_or("-".to_string(), |(f, n)| format!("{n} after {}", human_ns(f)));
                let long = vp.runs.iter().filter(|r| r.len_ns() > 1_500_000).count();
                format!(
                    "{}. The virtual processor made {} switches; the last user thread to \
                     start was {late}; {long} of its {} slices were longer than 1.5 ms (yields \
                     after which the same thread went on). Fair rotation would give each {:.1}%.",
                    shares(stats),
                    vp.samples,
                    vp.runs.len(),
                    100.0 / users.len().max(1) as f64
                )
            },
        },
        Scenario {
            id: "12",
            name: "rt-preempt-10ms",
            title: "12. schedlab-rt: three user threads that never yield, preempted every 10 ms",
            window_ms: 300,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: Some(RtSetup::preemptive(3, 10_000)),
            threads: vec![],
            explanation: "The threads of scenario 11 stop yielding. Cooperatively the first \
                would keep the processor for the whole window; with a 10 ms quantum the \
                runtime's monitor sees the running thread past its quantum while two others \
                wait, and sends its kernel thread a signal; the handler switches it away at a \
                safe point. The marks on the processor's lane are the Preempted upcalls. A \
                slice can run a little past 10 ms: the monitor learns that a thread started \
                when it next looks, as Go's sysmon does",
            verdict: preempted,
        },
        Scenario {
            id: "13",
            name: "rt-preempt-1ms",
            title: "13. schedlab-rt: three user threads that never yield, preempted every 1 ms",
            window_ms: 300,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: Some(RtSetup::preemptive(3, 1_000)),
            threads: vec![],
            explanation: "Scenario 12 with a 1 ms quantum: ten times the switches, each a \
                signal, a register save (xsave) and a user-level switch; compare the useful \
                work with scenario 12 for the price of a short quantum",
            verdict: preempted,
        },
        Scenario {
            id: "14",
            name: "rt-blocking-handoff",
            title: "14. schedlab-rt: a user thread that blocks in the kernel, with hand-off",
            window_ms: 300,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: Some(RtSetup {
                threads: 2,
                yield_every_us: Some(1000),
                quantum_us: Some(10_000),
                blocker: Some(Blocker { work_us: 2000, block_us: 20_000, handoff: true }),
                budget: None,
            }),
            threads: vec![],
            explanation: "Two user threads compute (yielding every millisecond) beside a \
                third that computes 2 ms, then sleeps 20 ms in the kernel with \
                std::thread::sleep, which the runtime cannot see. The monitor notices its \
                kernel thread's CPU clock stand still while work waits and hands the virtual \
                processor to a spare kernel thread (the Blocked mark): the two others go on. \
                When the sleep ends the thread queues for the processor again (Unblocked). \
                This is scheduler activations' BLOCKED/UNBLOCKED pair, done from user space",
            verdict: blocked_in_the_kernel,
        },
        Scenario {
            id: "15",
            name: "rt-blocking-no-handoff",
            title: "15. schedlab-rt: a user thread that blocks in the kernel, no hand-off",
            window_ms: 300,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: Some(RtSetup {
                threads: 2,
                yield_every_us: Some(1000),
                quantum_us: Some(10_000),
                blocker: Some(Blocker { work_us: 2000, block_us: 20_000, handoff: false }),
                budget: None,
            }),
            threads: vec![],
            explanation: "Scenario 14 with transparent blocking detection off, as a plain \
                user-level thread library behaves: while the third thread sleeps in the \
                kernel, its kernel thread is the processor, and nothing else runs; its slices \
                on the processor's lane span its sleeps, and the two computing threads get \
                what is left",
            verdict: blocked_in_the_kernel,
        },
        Scenario {
            id: "16",
            name: "rt-budget",
            title: "16. schedlab-rt: a background thread held to 10% of the processor",
            window_ms: 300,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: Some(RtSetup {
                threads: 2,
                yield_every_us: None,
                quantum_us: Some(10_000),
                blocker: None,
                budget: Some(BudgetSetup { percent: 10, period_us: 20_000 }),
            }),
            threads: vec![],
            explanation: "Seed 001's goal done by the scheduler: two user threads that never \
                yield, the second with Builder::cpu_budget(0.10, 20 ms). The processor charges \
                the budgeted thread the CPU time of each stint; when its 2 ms of a period are \
                spent its kernel thread's CPU-time timer signals it whether or not the other \
                waits, and it sleeps to the end of the period (the Throttled marks). When the period ends the first thread, \
                alone on the processor meanwhile and so long past its 10 ms quantum, is \
                preempted at once: its slices are 18 ms between the other's 2 ms, where a fair \
                scheduler would split the processor evenly",
            verdict: budgeted,
        },
    ]
}

/// Scenario 16: the budgeted thread's share and how often it was throttled.
fn budgeted(timeline: &Timeline, stats: &[ThreadStats]) -> String {
    let throttled =
        timeline.lanes[0].marks.iter().filter(|m| m.name.starts_with("throttled")).count();
    let share = stats.last().map_or(0.0, |s| s.cpu_share);
    format!(
        "{}. The budgeted thread had {} of the processor (budget 10%), throttled {throttled} \
         times.",
        shares(stats),
        pct(share)
    )
}

/// Scenarios 12 and 13: how often the quantum struck, and how fair the rotation was.
fn preempted(timeline: &Timeline, stats: &[ThreadStats]) -> String {
    let vp = &timeline.lanes[0];
    let preempted = vp.marks.iter().filter(|m| m.name.starts_with("preempted")).count();
    format!(
        "{}. {preempted} preemptions, {} slices on the processor; fair rotation would give \
         each {:.1}%.",
        shares(stats),
        vp.runs.len(),
        100.0 / stats.len().saturating_sub(1).max(1) as f64
    )
}

/// Scenarios 14 and 15: what the two computing threads kept while the third slept in the
/// kernel, and how often the processor was handed off.
fn blocked_in_the_kernel(timeline: &Timeline, stats: &[ThreadStats]) -> String {
    let blocked = timeline.lanes[0].marks.iter().filter(|m| m.name.starts_with("blocked")).count();
    let computing: f64 = stats[1..].iter().take(2).map(|s| s.cpu_share).sum();
    format!(
        "{}. The two computing threads together had the processor {} of the window; \
         {blocked} hand-offs.",
        shares(stats),
        pct(computing)
    )
}
