//! The schedlab-rt recorder: the runtime's own scheduling events (`Switched`) turned into a
//! timeline with one lane per virtual processor, one slice per user-thread run (labelled with
//! the user thread), plus one lane per user thread for its statistics.
//!
//! The hook follows the runtime's rules (crates/rt/src/event.rs): it only takes an
//! uncontended lock and pushes into a vector reserved beforehand, then returns. Conversion
//! ([`timeline_from_switches`]) is a pure function, tested on its own.

use std::sync::{Arc, Mutex};

use crate::model::{Lane, Span};
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

/// Runs `threads` computing user threads on one virtual processor for `window_ms`, each
/// calling `yield_now` after every `yield_every_us` of work (cooperative scheduling), and
/// records the runtime's events.
///
/// # Errors
/// When the runtime cannot be built.
pub fn record_cooperative(
    threads: usize,
    window_ms: u64,
    yield_every_us: u64,
) -> Result<(Vec<Lane>, u64), String> {
    let window = window_ms * 1_000_000;
    let log: Arc<Mutex<Vec<RtSwitch>>> = Arc::new(Mutex::new(Vec::with_capacity(
        (window / (yield_every_us * 1000).max(1)) as usize * 2 + 4096,
    )));
    let hook_log = log.clone();
    let rt = schedlab_rt::Runtime::builder()
        .processors(1)
        .on_event(move |e| {
            if let schedlab_rt::Event::Switched { from, to, processor } = e {
                let at_ns = now_ns();
                if let Ok(mut v) = hook_log.lock() {
                    v.push(RtSwitch {
                        at_ns,
                        processor: *processor,
                        from: from.map(|t| t.as_u64()),
                        to: to.map(|t| t.as_u64()),
                    });
                }
            }
        })
        .build()
        .map_err(|e| format!("building the schedlab-rt runtime: {e}"))?;
    let batch = sampling::calibrate_batch();
    let origin = now_ns();
    let end = origin + window;
    let every = yield_every_us * 1000;
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            rt.spawn(move || {
                let mut units = 0u64;
                let mut last = now_ns();
                loop {
                    sampling::work(batch, units);
                    units += batch;
                    let now = now_ns();
                    if now >= end {
                        return units;
                    }
                    if now - last >= every {
                        schedlab_rt::yield_now();
                        last = now_ns();
                    }
                }
            })
        })
        .collect();
    let ids: Vec<u64> = handles.iter().map(|h| h.thread().id().as_u64()).collect();
    let mut done = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        let units = h.join().map_err(|_| "a user thread panicked".to_string())?;
        done.push((ids[i], format!("u{}", ids[i]), units));
    }
    drop(rt);
    let events = log.lock().map_err(|_| "the event log was poisoned".to_string())?.clone();
    Ok((timeline_from_switches(1, &done, &events, origin, window), origin))
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
        let (lanes, _) = record_cooperative(2, 20, 1000).unwrap();
        assert_eq!(lanes.len(), 3, "vp0 and two user threads");
        assert!(lanes[1].work_units > 0 && lanes[2].work_units > 0);
        assert!(!lanes[0].runs.is_empty());
    }
}
