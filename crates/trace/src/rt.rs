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

use schedlab_rt::Event;

use crate::model::{Lane, Mark, Span, Timeline};
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

/// A switch on a processor's lane: `(processor, from, to)`, user thread ids (`None`: the
/// processor's own scheduler context).
pub type LaneSwitch = (usize, Option<u64>, Option<u64>);
/// A mark on a processor's lane: `(processor, text)`.
pub type LaneMark = (usize, String);

/// What a timeline draws of one runtime event: a switch on a processor's lane
/// (`(processor, from, to)`) and a mark (`(processor, text)`). The one mapping the live
/// recorder ([`record`]) and the recorded file of `schedlab exec --trace`
/// ([`process_timeline`]) share.
pub fn what_to_draw(e: &Event) -> (Option<LaneSwitch>, Option<LaneMark>) {
    let id = |t: &schedlab_rt::ThreadId| t.as_u64();
    match e {
        Event::Switched { from, to, processor } => {
            (Some((*processor, from.map(|t| t.as_u64()), to.map(|t| t.as_u64()))), None)
        }
        Event::Preempted { thread, processor, .. } => {
            (None, Some((*processor, format!("preempted u{thread}"))))
        }
        // The processor went on with another kernel thread: the blocked thread's slice
        // ends here.
        Event::Blocked { thread, processor, detection } => (
            Some((*processor, Some(id(thread)), None)),
            Some((*processor, format!("blocked u{thread} ({detection:?})"))),
        ),
        // It took a processor back without a switch.
        Event::Unblocked { thread, processor: Some(p), .. } => {
            (Some((*p, None, Some(id(thread)))), Some((*p, format!("unblocked u{thread}"))))
        }
        Event::Unblocked { thread, processor: None, .. } => {
            (None, Some((0, format!("unblocked u{thread}, queued"))))
        }
        Event::ProcessorLost { processor } => (None, Some((*processor, "processor lost".into()))),
        Event::NewProcessor { processor } => (None, Some((*processor, "new processor".into()))),
        Event::ProcessorRemoved { processor } => {
            (None, Some((*processor, "processor removed".into())))
        }
        Event::Throttled { thread, processor, used, .. } => (
            None,
            Some((
                *processor,
                format!("throttled u{thread} after {:.2} ms", used.as_secs_f64() * 1e3),
            )),
        ),
        _ => (None, None),
    }
}

/// Magic of one process's block in a `SCHEDLAB_RT_EVENTS` file.
pub const EVENT_FILE_MAGIC: [u8; 8] = *b"SLRTEV01";

/// One process's recorded events, as `libschedlab_pthread.so` appends them to the file
/// `SCHEDLAB_RT_EVENTS` names when the process exits (crates/pthread/src/events.rs).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessEvents {
    /// The process.
    pub pid: u32,
    /// Its runtime's virtual processors.
    pub processors: usize,
    /// Events the buffer had no room for (the record ends early).
    pub dropped: u64,
    /// `(CLOCK_MONOTONIC ns, event)`, in the order they were recorded.
    pub events: Vec<(u64, Event)>,
}

/// Reads a `SCHEDLAB_RT_EVENTS` file: blocks of a 32-byte header (the magic, pid `u32`,
/// processors `u32`, records `u64`, dropped `u64`) and that many 40-byte records (time in
/// ns, then [`Event::to_words`]), native-endian, one block per process that started the
/// runtime, appended under `flock` at its exit.
///
/// # Errors
/// A block that is cut short or does not start with the magic.
pub fn read_event_file(bytes: &[u8]) -> Result<Vec<ProcessEvents>, String> {
    let word = |b: &[u8], i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        if rest.len() < 32 || rest[..8] != EVENT_FILE_MAGIC {
            return Err(format!(
                "at byte {}: not a block of the runtime's events",
                bytes.len() - rest.len()
            ));
        }
        let pid = u32::from_ne_bytes(rest[8..12].try_into().unwrap());
        let processors = u32::from_ne_bytes(rest[12..16].try_into().unwrap()) as usize;
        let n = word(rest, 2) as usize;
        let dropped = word(rest, 3);
        let body = n.checked_mul(40).filter(|&len| rest.len() >= 32 + len).ok_or_else(|| {
            format!("process {pid}: its block says {n} records but the file is shorter")
        })?;
        let events = rest[32..32 + body]
            .chunks_exact(40)
            .filter_map(|r| {
                let w = |i| word(r, i);
                Event::from_words([w(1), w(2), w(3), w(4)]).map(|e| (w(0), e))
            })
            .collect();
        out.push(ProcessEvents { pid, processors, dropped, events });
        rest = &rest[32 + body..];
    }
    Ok(out)
}

/// One process's events as a timeline: a lane per virtual processor (slices labelled with
/// the user thread, the upcalls as marks), then a lane per user thread it spawned. Times
/// are relative to its first event.
pub fn process_timeline(p: &ProcessEvents, program: &str) -> Timeline {
    let origin = p.events.iter().map(|e| e.0).min().unwrap_or(0);
    let end = p.events.iter().map(|e| e.0).max().unwrap_or(origin);
    let window = end - origin + 1;
    let mut switches = Vec::new();
    let mut marks = Vec::new();
    let mut threads: Vec<(u64, String, u64)> = Vec::new();
    for (at_ns, e) in &p.events {
        if let Event::Spawned { thread, .. } = e {
            threads.push((thread.as_u64(), format!("u{thread}"), 0));
        }
        let (sw, mk) = what_to_draw(e);
        if let Some((processor, from, to)) = sw {
            switches.push(RtSwitch { at_ns: *at_ns, processor, from, to });
        }
        if let Some((processor, name)) = mk {
            marks.push((processor, Mark { at_ns: at_ns - origin, name }));
        }
        if let Event::Exited { thread, processor } = e {
            marks.push((
                *processor,
                Mark { at_ns: at_ns - origin, name: format!("exited u{thread}") },
            ));
        }
    }
    let mut lanes = timeline_from_switches(p.processors, &threads, &switches, origin, window);
    for (processor, m) in marks {
        if let Some(lane) = lanes.get_mut(processor) {
            lane.marks.push(m);
        }
    }
    let mut scenario_marks = Vec::new();
    if p.dropped > 0 {
        scenario_marks.push(Mark {
            at_ns: window - 1,
            name: format!("{} events lost: the buffer was full", p.dropped),
        });
    }
    Timeline {
        scenario: format!("exec {program} (pid {})", p.pid),
        title: format!("{program} on schedlab-rt"),
        recorder: "rt".into(),
        window_ns: window,
        threshold_ns: 0,
        interval_ns: 0,
        lanes,
        marks: scenario_marks,
    }
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

    /// Every user thread the scenario runs: the computing ones and the blocker.
    pub fn user_threads(&self) -> usize {
        self.threads + usize::from(self.blocker.is_some())
    }

    /// What runs, for the header `schedlab timeline` prints above the lanes: read from
    /// the setup itself, so a scenario's description cannot drift from what it does.
    pub fn detail(&self) -> String {
        let us = |v: u64| {
            if v.is_multiple_of(1000) {
                format!("{} ms", v / 1000)
            } else {
                format!("{v} µs")
            }
        };
        let mut text =
            format!("{} schedlab-rt user threads on one virtual processor", self.user_threads());
        if self.blocker.is_some() {
            text.push_str(&format!(": {} computing", self.threads));
        }
        match self.yield_every_us {
            Some(v) => text.push_str(&format!(", yield_now after each {} of work", us(v))),
            None => text.push_str(", never yielding"),
        }
        match self.quantum_us {
            Some(q) => text.push_str(&format!(", preempted after a {} quantum", us(q))),
            None => text.push_str(", cooperative (no preemption)"),
        }
        if let Some(b) = self.blocker {
            text.push_str(&format!(
                "; 1 that computes {} then sleeps {} in the kernel, {}",
                us(b.work_us),
                us(b.block_us),
                if b.handoff { "its processor handed off" } else { "no hand-off" }
            ));
        }
        if let Some(b) = self.budget {
            text.push_str(&format!(
                "; the last held to {}% per {} (cpu_budget)",
                b.percent,
                us(b.period_us)
            ));
        }
        text
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
    use schedlab_rt::Preemption;
    let window = window_ms * 1_000_000;
    let cap = (window / 100_000) as usize * 4 + 4096;
    let log: Arc<Mutex<Vec<RtSwitch>>> = Arc::new(Mutex::new(Vec::with_capacity(cap)));
    let marks: Arc<Mutex<Vec<(usize, Mark)>>> = Arc::new(Mutex::new(Vec::with_capacity(cap)));
    let (hook_log, hook_marks) = (log.clone(), marks.clone());
    let hook = move |e: &Event| {
        let at_ns = now_ns();
        let (sw, mk) = what_to_draw(e);
        if let (Some((processor, from, to)), Ok(mut v)) = (sw, hook_log.lock()) {
            v.push(RtSwitch { at_ns, processor, from, to });
        }
        if let (Some((processor, name)), Ok(mut v)) = (mk, hook_marks.lock()) {
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
        .on_event(hook)
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

    /// A file as the library writes it: one block per process.
    fn block(pid: u32, processors: u32, events: &[(u64, [u64; 4])], dropped: u64) -> Vec<u8> {
        let mut b = EVENT_FILE_MAGIC.to_vec();
        b.extend(pid.to_ne_bytes());
        b.extend(processors.to_ne_bytes());
        b.extend((events.len() as u64).to_ne_bytes());
        b.extend(dropped.to_ne_bytes());
        for (at, w) in events {
            for x in std::iter::once(at).chain(w) {
                b.extend(x.to_ne_bytes());
            }
        }
        b
    }

    #[test]
    fn an_event_file_becomes_one_timeline_per_process() {
        let p = |p: u64| (p + 1) << 32;
        let ev = |kind, proc, thread, arg| [kind | p(proc), thread, arg, 0];
        let mut bytes = block(
            10,
            2,
            &[
                (1_000, ev(2, 0, 7, 0)),   // spawned u7
                (2_000, ev(3, 1, 0, 7)),   // vp1: idle -> u7
                (5_000, ev(8, 1, 7, 1)),   // blocked u7 (transparent): its slice ends
                (9_000, ev(9, 0, 7, 1)),   // unblocked u7 on vp0: a slice starts
                (12_000, ev(12, 0, 7, 0)), // exited u7
                (12_000, ev(3, 0, 7, 0)),  // vp0: u7 -> idle
            ],
            0,
        );
        bytes.extend(block(11, 1, &[(500, ev(1, 0, 0, 0))], 3));
        let procs = read_event_file(&bytes).unwrap();
        assert_eq!(procs.len(), 2);
        assert_eq!((procs[0].pid, procs[0].processors, procs[0].events.len()), (10, 2, 6));
        let t = process_timeline(&procs[0], "prog");
        t.check().unwrap();
        assert_eq!(t.lanes.len(), 3, "vp0, vp1 and u7");
        let spans = |l: &Lane| l.runs.iter().map(|r| (r.start_ns, r.end_ns)).collect::<Vec<_>>();
        assert_eq!(spans(&t.lanes[1]), vec![(1_000, 4_000)]);
        assert_eq!(spans(&t.lanes[0]), vec![(8_000, 11_000)]);
        assert_eq!(spans(&t.lanes[2]), vec![(1_000, 4_000), (8_000, 11_000)]);
        let marks: Vec<&str> =
            t.lanes.iter().flat_map(|l| l.marks.iter().map(|m| m.name.as_str())).collect();
        assert!(marks.contains(&"blocked u7 (Transparent)"), "{marks:?}");
        assert!(marks.contains(&"unblocked u7"), "{marks:?}");
        assert!(marks.contains(&"exited u7"), "{marks:?}");
        crate::perfetto::validate(&crate::perfetto::to_json(&t)).unwrap();
        let second = process_timeline(&procs[1], "prog");
        assert!(second.marks[0].name.contains("3 events lost"));
    }

    #[test]
    fn a_cut_or_foreign_event_file_is_refused() {
        let b = block(1, 1, &[(1, [3 | 1 << 32, 0, 0, 0])], 0);
        assert!(read_event_file(&b[..b.len() - 1]).unwrap_err().contains("shorter"));
        assert!(read_event_file(b"not events at all, not at all....").is_err());
        assert_eq!(read_event_file(&[]).unwrap(), vec![]);
    }

    #[test]
    fn cooperative_user_threads_share_one_processor() {
        let (lanes, _) = record(&RtSetup::cooperative(2), 20).unwrap();
        assert_eq!(lanes.len(), 3, "vp0 and two user threads");
        assert!(lanes[1].work_units > 0 && lanes[2].work_units > 0);
        assert!(!lanes[0].runs.is_empty());
    }
}
