//! Scenarios 19 and 20: seed 001's Figure 5, the application in the background. On XP the
//! active window's threads got a quantum three times longer, so the same test run while
//! WinRar was in front got a quarter of the CPU instead of three quarters. Linux has no
//! foreground: its analogue is *autogroup* — each session (`setsid`: a terminal, a desktop
//! launcher's program) is one scheduling group, and groups share the CPU equally however
//! many threads each has. The same busy thread runs against four spinning processes on its
//! CPU, started in a session of their own (19) or in ours (20).

use super::{pct, shares, Hog, Scenario, ThreadSpec};

/// Scenarios 19 and 20.
pub(super) fn scenarios() -> Vec<Scenario> {
    let t = ThreadSpec::busy;
    vec![
        Scenario {
            id: "19",
            name: "other-session",
            title: "19. Busy thread while another session's four processes burn the same CPU",
            window_ms: 500,
            hog: Hog::Group { processes: 4, own_session: true },
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![t("main")],
            explanation: "Seed 001's Figure 5 on Linux: the load is another program started \
                from another terminal (a session of its own). On XP the application in front \
                got three quarters of the CPU and in the background a quarter. Linux has no \
                foreground boost; with autogroup (sched_autogroup_enabled = 1) each session \
                is one group and groups weigh the same, so our one thread keeps about half \
                of the CPU against the other session's four processes, where as equals in \
                one group (scenario 20) it would get a fifth. Skipped where autogroup is off \
                or this process sits in a cpu cgroup (then cgroups group tasks, not sessions).",
            verdict: |_, stats| {
                format!(
                    "{}. Against four spinning processes of another session our thread had {} \
                     of the CPU (half: the two sessions' groups weigh the same; a fifth in one \
                     group, scenario 20). XP gave the background application a quarter.",
                    shares(stats),
                    pct(stats[0].cpu_share)
                )
            },
        },
        Scenario {
            id: "20",
            name: "same-session",
            title: "20. Busy thread while four processes of its own session burn the same CPU",
            window_ms: 500,
            hog: Hog::Group { processes: 4, own_session: false },
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![t("main")],
            explanation: "Scenario 19's load in our own session (a new process group, not a \
                new session): one group, five equal tasks, about a fifth each. This is also \
                what every session gets where autogroup is off.",
            verdict: |_, stats| {
                format!(
                    "{}. Against four spinning processes of its own session our thread had {} \
                     of the CPU (a fifth: five equal tasks in one group).",
                    shares(stats),
                    pct(stats[0].cpu_share)
                )
            },
        },
    ]
}
