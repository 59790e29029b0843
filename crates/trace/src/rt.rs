//! The schedlab-rt recorder: the runtime's own scheduling events (`Switched`) turned into a
//! timeline with one lane per virtual processor, one slice per user-thread run (labelled with
//! the user thread), plus one lane per user thread for its statistics; the upcalls
//! (`Preempted`, `Blocked`, `Unblocked`, `ProcessorLost`) become instants on the processor's
//! lane (Perfetto shows them on its track).
//!
//! The hook follows the runtime's rules (crates/rt/src/event.rs): it only takes an
//! uncontended lock and pushes into a vector reserved beforehand, then returns. Conversion
//! ([`timeline_from_switches`]) is a pure function, tested on its own.

use std::sync::{Arc, Mutex};

use crate::model::{Lane, Mark, Span};
use crate::sampling::{self, now_ns};

/// One `Switched` event as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtSwitch {
    /// CLOCK_MONOTONIC, ns.
    pub at_ns: u64,
    /// The virtual processor.
    pub processor: usize,
    /// The user thread suspended (`None`: the processor's scheduler context).
    pub from: Option<u64>,
    /// The user thread resumed.
    pub to: Option<u64>,
}

/// Builds the timeline: lanes `vp0..` (slices labelled `u<id>`), then one lane per entry of
/// `threads` (`(id, name, work units)`). Times are relative to `origin` and clamped to
/// `[0, window)`.
pub fn timeline_from_switches(
    processors: usize,
    threads: &[(u64, String, u64)],
    events: &[RtSwitch],
    origin: u64,
    window: u64,
) -> Vec<Lane> {
    let rel = |t: u64| t.saturating_sub(origin).min(window);
    let mut vps: Vec<Lane> =
        (0..processors).map(|p| Lane::new(&format!("vp{p}"), "virtual processor")).collect();
    let mut users: Vec<Lane> = threads
        .iter()
        .map(|(_, name, units)| {
            let mut l = Lane::new(name, "schedlab-rt user thread");
            l.work_units = *units;
            l.done_ns = window;
            l
        })
        .collect();
    for v in &mut vps {
        v.done_ns = window;
    }
    // The user thread running on each processor, and since when.
    let mut current: Vec<Option<(u64, u64)>> = vec![None; processors];
    let close = |vps: &mut Vec<Lane>, users: &mut Vec<Lane>, p: usize, id: u64, s: u64, e: u64| {
        let span = Span { start_ns: rel(s), end_ns: rel(e) };
        if span.len_ns() == 0 {
            return;
        }
        vps[p].runs.push(span);
        vps[p].labels.push(format!("u{id}"));
        if let Some(i) = threads.iter().position(|t| t.0 == id) {
            users[i].runs.push(span);
        }
    };
    for ev in events {
        if ev.processor >= processors {
            continue;
        }
        vps[ev.processor].samples += 1;
        if let Some((id, since)) = current[ev.processor].take() {
            close(&mut vps, &mut users, ev.processor, id, since, ev.at_ns);
        }
        current[ev.processor] = ev.to.map(|id| (id, ev.at_ns));
    }
    for (p, c) in current.into_iter().enumerate() {
        if let Some((id, since)) = c {
            close(&mut vps, &mut users, p, id, since, origin + window);
        }
    }
    vps.extend(users);
    vps
}

/// How a schedlab-rt scenario runs its user threads (on one virtual processor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtSetup {
    /// Computing user threads.
    pub threads: usize,
    /// Each calls `yield_now` after this much work, µs (`None`: never yields).
    pub yield_every_us: Option<u64>,
    /// The runtime preempts after this quantum, µs (`None`: cooperative).
    pub quantum_us: Option<u64>,
    /// One more user thread that alternates work and a blocking system call.
    pub blocker: Option<Blocker>,
    /// A CPU budget for the last thread (`Builder::cpu_budget`): percent of the
    /// processor per period.
    pub budget: Option<BudgetSetup>,
}

/// A user thread that computes `work_us`, then blocks `block_us` in the kernel
/// (`std::thread::sleep`, not wrapped in `blocking`), over and over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocker {
    /// Work between two blocking calls, µs.
    pub work_us: u64,
    /// Time blocked in the kernel per call, µs.
    pub block_us: u64,
    /// Whether the runtime detects the blocked kernel thread and hands its
    /// processor off (transparent blocking detection on).
    pub handoff: bool,
}

/// A CPU budget for one user thread of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetSetup {
    /// Share of the processor, in percent.
    pub percent: u32,
    /// The budget's period, in µs.
    pub period_us: u64,
}

impl RtSetup {
    /// `threads` user threads yielding every millisecond of work, no preemption.
    pub const fn cooperative(threads: usize) -> RtSetup {
        RtSetup {
            threads,
            yield_every_us: Some(1000),
            quantum_us: None,
            blocker: None,
            budget: None,
        }
    }

    /// `threads` user threads that never yield, preempted after `quantum_us`.
    pub const fn preemptive(threads: usize, quantum_us: u64) -> RtSetup {
        RtSetup {
            threads,
            yield_every_us: None,
            quantum_us: Some(quantum_us),
            blocker: None,
            budget: None,
        }
    }
}

/// Runs the scenario's user threads on one virtual processor for `window_ms`
/// and records the runtime's events: its switches as slices on the processor's
/// lane, its upcalls (preempted, blocked, unblocked, processor lost or back) as
/// instants on that lane.
///
/// # Errors
/// When the runtime cannot be built.
pub fn record(setup: &RtSetup, window_ms: u64) -> Result<(Vec<Lane>, u64), String> {
    use schedlab_rt::{Event, Preemption};
    let window = window_ms * 1_000_000;
    let cap = (window / 100_000) as usize * 4 + 4096;
    let log: Arc<Mutex<Vec<RtSwitch>>> = Arc::new(Mutex::new(Vec::with_capacity(cap)));
    let marks: Arc<Mutex<Vec<(usize, Mark)>>> = Arc::new(Mutex::new(Vec::with_capacity(cap)));
    let (hook_log, hook_marks) = (log.clone(), marks.clone());
    let switch = move |processor: usize, from: Option<u64>, to: Option<u64>| {
        let at_ns = now_ns();
        if let Ok(mut v) = hook_log.lock() {
            v.push(RtSwitch { at_ns, processor, from, to });
        }
    };
    let mark = move |processor: usize, name: String| {
        let at_ns = now_ns();
        if let Ok(mut v) = hook_marks.lock() {
            v.push((processor, Mark { at_ns, name }));
        }
    };
    let preemption = match setup.quantum_us {
        Some(q) => Preemption::Quantum(std::time::Duration::from_micros(q)),
        None => Preemption::Cooperative,
    };
    let rt = schedlab_rt::Runtime::builder()
        .processors(1)
        .preemption(preemption)
        .transparent_blocking(setup.blocker.is_some_and(|b| b.handoff))
        .on_event(move |e| match e {
            Event::Switched { from, to, processor } => {
                switch(*processor, from.map(|t| t.as_u64()), to.map(|t| t.as_u64()))
            }
            Event::Preempted { thread, processor, .. } => {
                mark(*processor, format!("preempted u{thread}"))
            }
            Event::Blocked { thread, processor, detection } => {
                // The processor went on with another kernel thread: the
                // blocked thread's slice ends here.
                switch(*processor, Some(thread.as_u64()), None);
                mark(*processor, format!("blocked u{thread} ({detection:?})"))
            }
            Event::Unblocked { thread, processor: Some(p), .. } => {
                // It took a processor back without a switch.
                switch(*p, None, Some(thread.as_u64()));
                mark(*p, format!("unblocked u{thread}"))
            }
            Event::Unblocked { thread, processor: None, .. } => {
                mark(0, format!("unblocked u{thread}, queued"))
            }
            Event::ProcessorLost { processor } => mark(*processor, "processor lost".into()),
            Event::Throttled { thread, processor, used, .. } => mark(
                *processor,
                format!("throttled u{thread} after {:.2} ms", used.as_secs_f64() * 1e3),
            ),
            _ => {}
        })
        .build()
        .map_err(|e| format!("building the schedlab-rt runtime: {e}"))?;
    let batch = sampling::calibrate_batch();
    let origin = now_ns();
    let end = origin + window;
    let every = setup.yield_every_us.map(std::time::Duration::from_micros);
    let budgeted = |i: usize| setup.budget.filter(|_| i + 1 == setup.threads);
    let mut handles: Vec<_> = (0..setup.threads)
        .map(|i| {
            let mut b = schedlab_rt::Builder::new();
            if let Some(bs) = budgeted(i) {
                b = b.cpu_budget(
                    f64::from(bs.percent) / 100.0,
                    std::time::Duration::from_micros(bs.period_us),
                );
            }
            b.spawn_on(&rt, move || {
                let mut units = 0u64;
                // Seed 000's advice: yield by time, not by iteration count.
                let mut yielder = every.map(schedlab_rt::Yielder::new);
                loop {
                    sampling::work(batch, units);
                    units += batch;
                    if now_ns() >= end {
                        return units;
                    }
                    if let Some(y) = &mut yielder {
                        y.tick();
                    }
                }
            })
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("spawning a user thread: {e}"))?;
    if let Some(b) = setup.blocker {
        handles.push(rt.spawn(move || {
            let mut units = 0u64;
            loop {
                let until = now_ns() + b.work_us * 1000;
                while now_ns() < until.min(end) {
                    sampling::work(batch, units);
                    units += batch;
                }
                if now_ns() >= end {
                    return units;
                }
                std::thread::sleep(std::time::Duration::from_micros(b.block_us));
            }
        }));
    }
    let ids: Vec<u64> = handles.iter().map(|h| h.thread().id().as_u64()).collect();
    let mut done = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        let units = h.join().map_err(|_| "a user thread panicked".to_string())?;
        let name = if setup.blocker.is_some() && i == ids.len() - 1 {
            format!("u{} (blocks)", ids[i])
        } else if let Some(b) = budgeted(i) {
            format!("u{} ({}% budget)", ids[i], b.percent)
        } else {
            format!("u{}", ids[i])
        };
        done.push((ids[i], name, units));
    }
    drop(rt);
    let events = log.lock().map_err(|_| "the event log was poisoned".to_string())?.clone();
    let mut lanes = timeline_from_switches(1, &done, &events, origin, window);
    for (p, m) in marks.lock().map_err(|_| "the mark log was poisoned".to_string())?.iter() {
        if let Some(lane) = lanes.get_mut(*p) {
            if m.at_ns >= origin && m.at_ns < end {
                lane.marks.push(Mark { at_ns: m.at_ns - origin, name: m.name.clone() });
            }
        }
    }
    Ok((lanes, origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_become_labelled_slices_per_processor_and_thread() {
        let ev = |at_ns, from, to| RtSwitch { at_ns, processor: 0, from, to };
        let events = [
            ev(1000, None, Some(7)),
            ev(3000, Some(7), Some(8)),
            ev(6000, Some(8), None),
            ev(7000, None, Some(7)),
        ];
        let threads = [(7, "u7".to_string(), 10), (8, "u8".to_string(), 5)];
        let lanes = timeline_from_switches(1, &threads, &events, 1000, 10_000);
        assert_eq!(lanes.len(), 3);
        let spans = |l: &Lane| l.runs.iter().map(|r| (r.start_ns, r.end_ns)).collect::<Vec<_>>();
        assert_eq!(spans(&lanes[0]), vec![(0, 2000), (2000, 5000), (6000, 10_000)]);
        assert_eq!(lanes[0].labels, vec!["u7", "u8", "u7"]);
        assert_eq!(spans(&lanes[1]), vec![(0, 2000), (6000, 10_000)]);
        assert_eq!(spans(&lanes[2]), vec![(2000, 5000)]);
    }

    #[test]
    fn cooperative_user_threads_share_one_processor() {
        let (lanes, _) = record(&RtSetup::cooperative(2), 20).unwrap();
        assert_eq!(lanes.len(), 3, "vp0 and two user threads");
        assert!(lanes[1].work_units > 0 && lanes[2].work_units > 0);
        assert!(!lanes[0].runs.is_empty());
    }
}
