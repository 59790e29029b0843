//! The runner: turns a [`Scenario`] into a [`Timeline`], with the sampling recorder for OS
//! threads or the runtime's events for schedlab-rt ones.
//!
//! # How a scenario runs
//! 1. The batch size is calibrated (work units per ~5 µs) and the hog process, if any, started.
//! 2. Every worker thread sets itself up (CPU, nice, policy, timer slack), then waits on a
//!    barrier with the caller; a setup error is reported after the barrier so nobody waits
//!    forever.
//! 3. The first thread through the barrier fixes the origin; every worker runs its behaviour
//!    until origin + window, recording into its preallocated [`Recorder`].
//! 4. After every worker has joined, runs are derived from the timestamps (pure functions)
//!    and the lanes assembled. Nothing is allocated or printed while recording.
//!
//! Pinned threads share the last CPU this process may use: the seed's single-processor
//! machine, on a multi-CPU one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use schedlab_measure::sys::{self, Child};
use schedlab_measure::ProbeError;

use super::{Behaviour, Hog, Policy, Scenario, ThreadSpec};
use crate::model::{Lane, Mark, Span, Timeline};
use crate::sampling::{self, derive_runs, now_ns, Recorder, INTERVAL_NS, THRESHOLD_NS};

/// What a worker hands back.
struct WorkerOut {
    tid: i32,
    rec: Recorder,
    units: u64,
    /// Explicit runs (sleepers), absolute ns.
    runs: Vec<Span>,
    overshoot: Vec<u64>,
    /// When the thread went to sleep (Budget, SleepOnce), absolute ns.
    sleeps: Vec<u64>,
}

/// Sets the calling thread up as `spec` says.
fn setup(spec: &ThreadSpec, cpu: usize) -> Result<(), String> {
    if spec.pinned {
        sys::pin_to(cpu).map_err(|e| format!("{}: pinning to CPU {cpu}: {e}", spec.name))?;
    }
    match spec.policy {
        Policy::Other => sys::set_nice(spec.nice)
            .map_err(|e| format!("{}: setting nice {}: {e}", spec.name, spec.nice))?,
        Policy::Idle => sys::set_policy(libc::SCHED_IDLE, 0)
            .map_err(|e| format!("{}: setting SCHED_IDLE: {e}", spec.name))?,
        Policy::Fifo(p) => sys::set_policy(libc::SCHED_FIFO, p)
            .map_err(|e| format!("{}: setting SCHED_FIFO (needs root): {e}", spec.name))?,
    }
    if let Behaviour::Sleeper { slack_ns: Some(ns), .. } = spec.behaviour {
        sys::set_timer_slack(ns).map_err(|e| format!("{}: setting timer slack: {e}", spec.name))?;
    }
    Ok(())
}

/// The worker's loop, from `origin` to `end` (absolute CLOCK_MONOTONIC ns).
fn work_loop(
    spec: &ThreadSpec,
    batch: u64,
    origin: u64,
    end: u64,
    rec: &mut Recorder,
) -> WorkerOut {
    let mut out = WorkerOut {
        tid: sys::gettid(),
        rec: Recorder::for_window(0),
        units: 0,
        runs: Vec::new(),
        overshoot: Vec::new(),
        sleeps: Vec::new(),
    };
    let window = end - origin;
    let mut units = 0u64;
    if let Behaviour::Sleeper { period_us, half, .. } = spec.behaviour {
        let period = period_us * 1000;
        let (begin, end) =
            if half == 0 { (origin, origin + window / 2) } else { (origin + window / 2, end) };
        sys::sleep_until(begin);
        out.runs.reserve((window / period) as usize + 16);
        out.overshoot.reserve((window / period) as usize + 16);
        let mut woke = now_ns();
        loop {
            sampling::work(1, units);
            units += 1;
            let before = now_ns();
            out.runs.push(Span { start_ns: woke, end_ns: before });
            if before >= end {
                break;
            }
            sys::sleep_until(before + period);
            woke = now_ns();
            out.overshoot.push(woke.saturating_sub(before + period));
        }
        out.units = units;
        return out;
    }
    let yield_from = match spec.behaviour {
        Behaviour::Yield { from_permille } => origin + window * from_permille / 1000,
        _ => u64::MAX,
    };
    let (work_ns, sleep_ns) = match spec.behaviour {
        Behaviour::Budget { work_us, sleep_us } => (work_us * 1000, sleep_us * 1000),
        Behaviour::SleepOnce { at_us, sleep_us } => (at_us * 1000, sleep_us * 1000),
        _ => (u64::MAX, 0),
    };
    let once = matches!(spec.behaviour, Behaviour::SleepOnce { .. });
    if sleep_ns > 0 {
        out.sleeps.reserve((window / (work_ns.min(window) + sleep_ns)) as usize + 16);
    }
    let mut phase_end = origin.saturating_add(work_ns);
    rec.force(now_ns(), 0);
    loop {
        sampling::work(batch, units);
        units += batch;
        let now = now_ns();
        rec.tick(now, units);
        if now >= end {
            rec.force(now, units);
            break;
        }
        if now >= yield_from {
            // SAFETY: sched_yield takes no arguments and cannot fail on Linux.
            unsafe { libc::sched_yield() };
        }
        if now >= phase_end {
            // The last timestamp before the sleep bounds the gap exactly.
            rec.force(now, units);
            out.sleeps.push(now);
            sys::sleep_until(now + sleep_ns);
            phase_end = if once { u64::MAX } else { now_ns() + work_ns };
        }
    }
    out.units = units;
    out
}

/// Records `scenario` with the sampling recorder.
///
/// # Errors
/// A reason when the scenario cannot run here (needs root, a setting refused); the caller
/// reports it as skipped.
pub fn record(scenario: &Scenario) -> Result<Timeline, String> {
    record_with(scenario, THRESHOLD_NS)
}

/// [`record`] with a chosen gap threshold.
///
/// # Errors
/// As [`record`].
pub fn record_with(scenario: &Scenario, threshold_ns: u64) -> Result<Timeline, String> {
    record_at(scenario, threshold_ns).map(|(t, _)| t)
}

/// [`record_with`], also returning the origin: the CLOCK_MONOTONIC time (ns) the timeline's
/// zero stands for, to line other recorders up with it.
///
/// # Errors
/// As [`record`].
pub fn record_at(scenario: &Scenario, threshold_ns: u64) -> Result<(Timeline, u64), String> {
    // SAFETY: geteuid cannot fail and touches no memory.
    if scenario.needs_root && unsafe { libc::geteuid() } != 0 {
        return Err("needs root (SCHED_FIFO)".into());
    }
    if let Some(setup) = &scenario.rt {
        let (lanes, origin) = crate::rt::record(setup, scenario.window_ms)?;
        let t = Timeline {
            scenario: format!("{} {}", scenario.id, scenario.name),
            title: scenario.title.to_string(),
            recorder: "rt".to_string(),
            window_ns: scenario.window_ms * 1_000_000,
            threshold_ns: 0,
            interval_ns: 0,
            lanes,
            marks: Vec::new(),
        };
        t.check()?;
        return Ok((t, origin));
    }
    let cpu = *sys::allowed_cpus().last().expect("a process may run on at least one CPU");
    let batch = sampling::calibrate_batch();
    let window_ns = scenario.window_ms * 1_000_000;
    let _hog = match scenario.hog {
        Hog::None => None,
        Hog::Process => Some(HogProcess {
            child: hog(cpu).map_err(|e| format!("starting the hog process: {e}"))?,
            group: false,
        }),
        Hog::Group { processes, own_session } => {
            if own_session {
                autogroup_applies()?;
            }
            Some(HogProcess {
                child: hog_group(cpu, processes, own_session)
                    .map_err(|e| format!("starting the hog processes: {e}"))?,
                group: true,
            })
        }
    };
    if _hog.is_some() {
        // Let it get going, so the scenario starts with it runnable.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let n = scenario.threads.len();
    let barrier = Arc::new(Barrier::new(n + 1));
    let origin = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(n);
    for spec in scenario.threads.iter().cloned() {
        let (barrier, origin) = (barrier.clone(), origin.clone());
        let h = thread::Builder::new()
            .name(format!("tl-{}", spec.name))
            .spawn(move || -> Result<WorkerOut, String> {
                let mut rec = Recorder::for_window(window_ns);
                let ready = setup(&spec, cpu);
                barrier.wait();
                let now = now_ns();
                let t0 = match origin.compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => now,
                    Err(t) => t,
                };
                ready?;
                let mut out = work_loop(&spec, batch, t0, t0 + window_ns, &mut rec);
                out.rec = rec;
                Ok(out)
            })
            .map_err(|e| format!("spawning a worker: {e}"))?;
        handles.push(h);
    }
    barrier.wait();
    let mut outs = Vec::with_capacity(n);
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(o)) => outs.push(o),
            Ok(Err(e)) => err = err.or(Some(e)),
            Err(_) => err = err.or(Some("a worker panicked".to_string())),
        }
    }
    drop(_hog);
    if let Some(e) = err {
        return Err(e);
    }
    let t0 = origin.load(Ordering::Acquire);
    let lanes = scenario
        .threads
        .iter()
        .zip(outs)
        .map(|(spec, o)| build_lane(spec, o, t0, window_ns, threshold_ns))
        .collect();
    let mut marks = Vec::new();
    for spec in &scenario.threads {
        if let Behaviour::Yield { from_permille } = spec.behaviour {
            if from_permille > 0 {
                marks.push(Mark {
                    at_ns: window_ns * from_permille / 1000,
                    name: format!("{} starts yielding", spec.name),
                });
            }
        }
    }
    let t = Timeline {
        scenario: format!("{} {}", scenario.id, scenario.name),
        title: scenario.title.to_string(),
        recorder: "sampling".to_string(),
        window_ns,
        threshold_ns,
        interval_ns: INTERVAL_NS,
        lanes,
        marks,
    };
    t.check()?;
    Ok((t, t0))
}

/// A child process that burns CPU on `cpu` until dropped (killed and reaped then); it dies
/// with us if we die first.
fn hog(cpu: usize) -> Result<Child, ProbeError> {
    Child::fork(Some(cpu), || {
        let mut x = 0u64;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    })
}

/// The hog, killed (with its whole process group, for [`Hog::Group`]) and reaped when
/// dropped.
struct HogProcess {
    child: Child,
    group: bool,
}

impl Drop for HogProcess {
    fn drop(&mut self) {
        if self.group {
            // SAFETY: signals the hog's own process group (its leader is our child, so the
            // group exists until we reap it below).
            unsafe { libc::kill(-self.child.pid(), libc::SIGKILL) };
        }
    }
}

/// `processes` spinning processes on `cpu` in a new process group, and a new session when
/// `own_session`; the first is our child and the group's leader, the others its children,
/// each dying with its parent.
fn hog_group(cpu: usize, processes: usize, own_session: bool) -> Result<Child, ProbeError> {
    Child::fork(Some(cpu), move || {
        // SAFETY: setsid and setpgid are async-signal-safe and touch no memory; the child
        // is not a group leader yet, so both succeed.
        let ok = unsafe {
            if own_session {
                libc::setsid() >= 0
            } else {
                libc::setpgid(0, 0) == 0
            }
        };
        if !ok {
            return 3;
        }
        for _ in 1..processes {
            // SAFETY: fork from a single-threaded child; the grandchild only spins.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: as in `Child::fork`.
                unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
                break;
            }
        }
        let mut x = 0u64;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    })
}

/// Whether a new session gets a scheduling group of its own here (seed 001's Figure 5,
/// scenario 19): autogroup on, and this process in the root of the `cpu` controller (a
/// task in any other cgroup is grouped by its cgroup, not its session).
fn autogroup_applies() -> Result<(), String> {
    const KNOB: &str = "/proc/sys/kernel/sched_autogroup_enabled";
    match std::fs::read_to_string(KNOB) {
        Ok(v) if v.trim() == "1" => {}
        Ok(v) => {
            return Err(format!(
                "autogroup is off ({KNOB} = {}): every session shares one group, so another \
                 session's load weighs as its threads do (scenario 20 shows that case)",
                v.trim()
            ))
        }
        Err(_) => {
            return Err(format!(
                "the kernel has no autogroup ({KNOB} is missing: CONFIG_SCHED_AUTOGROUP off)"
            ))
        }
    }
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if let Some(path) = cpu_cgroup(&cgroups) {
        if path != "/" {
            return Err(format!(
                "this process is in the cpu cgroup {path}, where the kernel groups tasks by \
                 cgroup, not by session (autogroup applies only in the root cgroup)"
            ));
        }
    }
    Ok(())
}

/// The path of the `cpu` controller's cgroup in a `/proc/PID/cgroup` text: the v1 line
/// that names `cpu`, else the v2 line (`0::`).
fn cpu_cgroup(text: &str) -> Option<&str> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        if ctrls.split(',').any(|c| c == "cpu") {
            return Some(path);
        }
        if ctrls.is_empty() {
            v2 = Some(path);
        }
    }
    v2
}

/// Turns a worker's record into a lane, clamped to the window.
fn build_lane(spec: &ThreadSpec, o: WorkerOut, t0: u64, window: u64, threshold: u64) -> Lane {
    let mut lane = Lane::new(spec.name, &spec.detail());
    lane.tid = o.tid;
    // Work done inside the window only: a starved thread may run (and count) after it.
    lane.work_units = if o.runs.is_empty() {
        o.rec
            .timestamps()
            .iter()
            .zip(o.rec.units())
            .take_while(|(&ts, _)| ts.saturating_sub(t0) <= window)
            .last()
            .map_or(0, |(_, &u)| u)
    } else {
        o.units
    };
    lane.overflowed = o.rec.overflowed;
    let runs = if o.runs.is_empty() {
        lane.samples = o.rec.timestamps().len() as u64;
        derive_runs(o.rec.timestamps(), threshold, t0)
    } else {
        lane.samples = o.runs.len() as u64;
        o.runs
            .iter()
            .map(|r| Span {
                start_ns: r.start_ns.saturating_sub(t0),
                end_ns: r.end_ns.saturating_sub(t0),
            })
            .collect()
    };
    // One progress point per millisecond is plenty for rates over phases.
    let mut next = 0u64;
    for (&ts, &units) in o.rec.timestamps().iter().zip(o.rec.units()) {
        let at = ts.saturating_sub(t0);
        if at >= next && at <= window {
            lane.progress.push([at, units]);
            next = at + 1_000_000;
        }
    }
    lane.runs = runs
        .into_iter()
        .filter(|r| r.start_ns < window)
        .map(|r| Span { start_ns: r.start_ns, end_ns: r.end_ns.min(window) })
        .collect();
    lane.ready_ns = 0;
    lane.done_ns = window;
    lane.sleep_overshoot_ns = o.overshoot;
    lane.marks = o
        .sleeps
        .iter()
        .map(|&at| at.saturating_sub(t0))
        .filter(|&at| at < window)
        .map(|at_ns| Mark { at_ns, name: "sleep".into() })
        .collect();
    lane
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::find;

    #[test]
    fn the_cpu_cgroup_is_the_v1_cpu_line_else_the_v2_one() {
        let v1 = "4:memory:/a\n2:cpuacct,cpu:/user.slice\n0::/\n";
        assert_eq!(cpu_cgroup(v1), Some("/user.slice"));
        assert_eq!(cpu_cgroup("1:cpu:/\n0::/x\n"), Some("/"));
        assert_eq!(
            cpu_cgroup("0::/user.slice/session-3.scope\n"),
            Some("/user.slice/session-3.scope")
        );
        assert_eq!(cpu_cgroup(""), None);
    }

    /// The test: a worker that sleeps 5 ms is seen by the sampling recorder as a
    /// 5 ± 1 ms gap. The gap is measured from the recorded timestamps themselves; the sleep
    /// runs on its own CPU and to an absolute deadline, so only the wakeup latency adds to it.
    #[test]
    fn an_induced_5ms_sleep_is_found_as_a_5ms_gap() {
        let s = Scenario {
            id: "t",
            name: "gap",
            title: "induced gap",
            window_ms: 100,
            hog: Hog::None,
            needs_root: false,
            measures_overhead: false,
            rt: None,
            threads: vec![ThreadSpec {
                pinned: false,
                behaviour: Behaviour::SleepOnce { at_us: 10_000, sleep_us: 5_000 },
                ..ThreadSpec::busy("sleeper")
            }],
            explanation: "",
            verdict: |_, stats| super::super::shares(stats),
        };
        // A loaded test machine can preempt the worker too; retry a few times and require
        // that the sleep shows up as one gap of 5 ± 1 ms.
        let mut seen = Vec::new();
        for _ in 0..8 {
            let t = record(&s).expect("an unprivileged scenario runs");
            // The gap that starts at the timestamp taken just before the sleep.
            let lane = &t.lanes[0];
            // On a very busy machine the worker may not even reach its sleep in the window.
            let Some(slept) = lane.marks.iter().find(|m| m.name == "sleep").map(|m| m.at_ns) else {
                seen.push(0);
                continue;
            };
            let len = lane.gaps().iter().find(|g| g.start_ns == slept).map_or(0, |g| g.len_ns());
            if (4_000_000..=6_000_000).contains(&len) {
                return;
            }
            seen.push(len);
        }
        panic!("no 5 ± 1 ms gap where the worker slept; the gaps there were {seen:?} ns");
    }

    #[test]
    fn sleepers_record_overshoots_and_runs() {
        let mut s = find("9").unwrap();
        s.window_ms = 100;
        let t = record(&s).unwrap();
        for l in &t.lanes {
            assert!(!l.sleep_overshoot_ns.is_empty());
            assert!(!l.runs.is_empty());
        }
    }
}
