//! The monitor: one kernel thread per runtime that watches the processors
//! from outside, as the Go runtime's sysmon does (docs/SOURCES.md), and acts
//! only when work waits:
//!
//! - **quanta**: a user thread that has run past the quantum while work waits
//!   gets the preemption signal (`preempt.rs`), retried shortly while it is
//!   not at a safe point;
//! - **blocked kernel threads**: a processor in an explicit `blocking` call
//!   past the threshold is retaken; a processor whose kernel thread's CPU
//!   clock stopped while a user thread was current is asked to release
//!   itself (`blocking.rs`); released processors go to spare kernel threads;
//! - **detached kernel threads running again** are asked to rejoin;
//! - **timers** of sleeping user threads are fired when every processor is
//!   busy (idle processors fire their own);
//! - **work waiting behind a running thread** since the last look wakes an
//!   idle processor, also one asleep deaf to next slots (`idle.rs`, "Slots");
//! - **removed processors** (`runtime.rs`, "Resizing") still running a user
//!   thread are preempted at once when preemption is on, and blocked ones are
//!   retaken and handed to a spare whether or not work waits, so each gets
//!   to its scheduler context and retires. The loops below run over all the
//!   runtime's processors, active or not.
//!
//! # Cost
//!
//! The monitor sleeps without a deadline while no processor runs ("Quiet",
//! below), and at most [`QUIET_POLL`] while processors run with no work
//! waiting (a producer that queues work pokes it with one futex wake). While
//! work waits it wakes at the next quantum deadline, and, for the
//! blocked-thread check, first `threshold` after a thread starts and then at
//! doubling intervals up to [`MAX_POLL`] while the thread keeps running: a
//! thread that blocks soon after it got the CPU (the usual case: it was woken
//! to do I/O) is found within tens of µs; one that blocks after computing for
//! a long time, within [`MAX_POLL`]. While kernel threads block, that first
//! look comes `threshold` after the switch; after 50 looks in a row that
//! found none blocked it comes twice as late at each look, up to
//! [`MAX_POLL`] ([`Calm`]), so a processor switching thousands of times a
//! second with nothing blocking (a server on `schedlab_rt::net`) is not
//! preempted by the monitor at every `threshold`. The time a processor's thread started is
//! when the monitor first saw its decision counter change (`Processor::switches`,
//! which every scheduling decision and every switch moves), as in Go. For the
//! quantum it is earlier and exact in the common case: a thread that starts
//! because the monitor preempted the last one started when the signal was
//! sent, so the monitor wakes once per quantum, at its end, and a quantum
//! ends late only by the signal's delivery; otherwise the monitor's previous
//! look, when recent. The monitor runs ahead of user code on its CPU
//! ([`ask_to_run_promptly`]), or its own wake-ups would be late. For
//! [`ACTIVE_FOR`] after
//! it handed a processor off, the monitor looks at least every
//! [`ACTIVE_POLL`]: a processor entering an explicit `blocking` call is seen
//! only at the next look, and programs that block once block again.
//!
//! # Quiet
//!
//! After [`IDLE_AFTER`] with no work waiting the monitor is *quiet*: it
//! announces it (`MonitorCtl::idle`, stored `SeqCst`, then a `SeqCst`
//! fence), looks at every queue once more, and sleeps. Producers that queue
//! work look at the flag after their push (behind the idle protocol's
//! `SeqCst` fence, `idle.rs`) and poke a quiet monitor. Not every push does
//! (a yield requeues its thread, a processor's timers and maintenance queue
//! what they find, and a lone processor's next slot skips the fence), and a
//! thread that blocks in the kernel transparently announces nothing: so
//! while any processor runs, a quiet monitor still looks every
//! [`QUIET_POLL`], as Go's sysmon does while a P runs. It sleeps with no
//! deadline only when it read, after its announcement, every processor
//! stopped (`Idle::stopped`: asleep or retired); a processor that leaves
//! the stopped ones reads the flag after its own update of those counters
//! and a `SeqCst` fence, and pokes a quiet monitor (`MonitorCtl::processor_starts`), so
//! one of the two sees the other (a Dekker pair, modelled with loom in
//! `idle.rs`). Before, a quiet monitor with a far deadline (a user thread
//! sleeping for minutes) slept until it without telling producers to poke
//! it: threads spawned from outside while the only running thread was
//! blocked in the kernel waited for that deadline (issue 21, the Open POSIX
//! Test Suite's `pthread_cond_signal/1-2` under the C library). A monitor
//! that is not quiet is not announced either, so with transparent blocking
//! it never sleeps longer than [`MAX_POLL`] (`busy_sleep`): one that looked
//! while a processor was between two threads, and slept to a far deadline,
//! missed the next thread's block in the kernel the same way.

use crate::blocking::{self, RELEASED, RUNNING, SYSCALL};
use crate::event::{Detection, Event};
use crate::machine::{Machine, REQ_PREEMPT, REQ_REJOIN, REQ_RELEASE};
use crate::preempt::{signal_thread, Preemption};
use crate::priority::{Priority, AGING};
use crate::state::Shared;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest interval between two checks of a busy processor for a blocked
/// kernel thread.
pub(crate) const MAX_POLL: Duration = Duration::from_millis(2);

/// How soon a signal is sent again to a thread that was not at a safe point.
const RETRY: Duration = Duration::from_micros(100);

/// After a hand-off the monitor keeps looking at least this often for a
/// while ([`ACTIVE_FOR`]): a program that blocked once is likely to block
/// again soon, and a processor in a `blocking` call is only noticed at the
/// monitor's next look, which would otherwise have backed off to
/// [`MAX_POLL`]. (Go's sysmon likewise drops back to its shortest delay
/// whenever `retake` took a P.)
const ACTIVE_POLL: Duration = Duration::from_micros(200);

/// How long after the last hand-off the monitor keeps to [`ACTIVE_POLL`].
const ACTIVE_FOR: Duration = Duration::from_millis(20);

/// After this long with no work waiting anywhere, the monitor is quiet: it
/// sleeps until poked, or, while a processor runs, [`QUIET_POLL`] at most.
const IDLE_AFTER: Duration = Duration::from_millis(20);

/// Longest sleep of a quiet monitor while some processor runs ("Quiet",
/// above): Go's sysmon likewise never sleeps longer than 10 ms while a P
/// runs.
const QUIET_POLL: Duration = Duration::from_millis(10);

/// Most idle stacks whose memory one look of the monitor gives back
/// (`stack.rs`, `Depot::scavenge`): neighbouring ones go in one `madvise`,
/// so after a burst of threads ends this is usually a few calls.
const SCAVENGE_BATCH: usize = 4096;

/// The scavenging period (`stack.rs`, `Depot`): idle stacks past the bound
/// that stay idle this long give their memory back.
const SCAVENGE_EVERY: Duration = Duration::from_millis(100);

/// The scan of detached kernel threads for ones running again waits at
/// least this many times its own duration for the next, so that with
/// thousands of them it takes at most a small share of its CPU.
const SCAN_SHARE: u32 = 20;

/// Looks in a row that found no blocked kernel thread before the first
/// look after a switch backs off ([`Calm`]; Go's sysmon: 50 idle cycles).
const CALM_AFTER: u32 = 50;

/// When the monitor first looks for a blocked kernel thread after a
/// processor's switch. `threshold` after it while kernel threads block;
/// after [`CALM_AFTER`] looks that found none, twice as late at every
/// further look, up to [`MAX_POLL`]; back to `threshold` at the next one
/// found. Without it a processor that switches thousands of times a second
/// and never blocks (a server on `schedlab_rt::net`) had the monitor, which
/// runs ahead of it on its CPU, look every `threshold` (20,000 times a
/// second at 50 µs): each look two context switches of that CPU. Go's sysmon
/// backs off the same way (`runtime/proc.go`, `sysmon`: its delay doubles
/// after 50 cycles with nothing to do).
struct Calm {
    threshold: Duration,
    first: Duration,
    looks: u32,
}

impl Calm {
    fn new(threshold: Duration) -> Calm {
        Calm { threshold, first: threshold, looks: 0 }
    }

    /// How long after a switch to look first.
    fn first_look(&self) -> Duration {
        self.first
    }

    /// A look ended.
    fn look(&mut self) {
        self.looks = self.looks.saturating_add(1);
        if self.looks > CALM_AFTER {
            self.first = (self.first * 2).min(MAX_POLL.max(self.threshold));
        }
    }

    /// A blocked kernel thread was found (or a processor released).
    fn found(&mut self) {
        self.looks = 0;
        self.first = self.threshold;
    }
}

/// What the monitor knows of the detached kernel threads (`blocking.rs`):
/// each one's CPU time at the last look, and when it was last asked to
/// rejoin. Keyed by machine address; O(1) per kernel thread and look (it
/// was a list searched for every kernel thread: with 2,000 connections
/// each blocked in `read` on its own kernel thread, 4 million comparisons
/// per look, every 100 µs).
#[derive(Default)]
struct Detached {
    map: std::collections::HashMap<usize, DetachedSeen>,
    /// The current look's number.
    look: u64,
}

struct DetachedSeen {
    cpu: u64,
    asked: Option<Instant>,
    /// The last look that saw it detached.
    look: u64,
}

impl Detached {
    /// `key` is detached with CPU time `cpu`. Returns `true` if it ran
    /// since the last look (it returned from the kernel to user code with
    /// no processor) and should be asked to rejoin (at most every
    /// [`RETRY`]).
    fn see(&mut self, key: usize, cpu: u64, now: Instant) -> bool {
        let look = self.look;
        match self.map.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(DetachedSeen { cpu, asked: None, look });
                false
            }
            std::collections::hash_map::Entry::Occupied(o) => {
                let d = o.into_mut();
                let ask = cpu > d.cpu && d.asked.is_none_or(|t| now - t >= RETRY);
                if ask {
                    d.asked = Some(now);
                }
                d.cpu = cpu;
                d.look = look;
                ask
            }
        }
    }

    /// `key` is not detached (any more).
    fn forget(&mut self, key: usize) {
        self.map.remove(&key);
    }

    /// The look is over: kernel threads it did not see detached (exited,
    /// or no CPU clock) are forgotten.
    fn end_look(&mut self) {
        let look = self.look;
        self.map.retain(|_, d| d.look == look);
        self.look += 1;
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// When the scan of detached kernel threads (for ones running again) is
/// due: the next one waits [`SCAN_SHARE`] times the last one's duration
/// (and at least the blocked-thread threshold, or 100 µs), so that with
/// thousands of them the scan takes at most a small share of the monitor's
/// CPU, which is the processors' CPU (the monitor runs ahead of them).
/// Before, the wait was only a wish among the look's others: every look
/// scanned, so each hand-off's three or four looks read the CPU clock of
/// every detached kernel thread. At 2,000 connections of a plain
/// `std::net` echo server on one processor the monitor took 98% of that
/// CPU reading clocks, made about 40 hand-offs a second, and the server
/// never answered its first wave (issue 29).
#[derive(Default)]
struct ScanGate {
    /// When the next scan is due (`None`: at the next look).
    due: Option<Instant>,
    /// The last scan found detached kernel threads (so a later one is
    /// wanted even if nothing else wakes the monitor).
    any: bool,
}

impl ScanGate {
    /// Whether the scan runs in the look at `now`.
    fn due(&self, now: Instant) -> bool {
        self.due.is_none_or(|t| now >= t)
    }

    /// A scan ran from `start` to `end`, and found detached kernel threads
    /// (`any`).
    fn scanned(&mut self, start: Instant, end: Instant, any: bool, threshold: Duration) {
        let took = end.saturating_duration_since(start);
        let wait = threshold.max(Duration::from_micros(100)).max(took * SCAN_SHARE);
        self.due = Some(end + wait);
        self.any = any;
    }

    /// When the monitor should wake for the next scan, if one is wanted.
    fn next(&self) -> Option<Instant> {
        if self.any {
            self.due
        } else {
            None
        }
    }
}

/// Default threshold for declaring a kernel thread blocked.
pub const DEFAULT_BLOCK_THRESHOLD: Duration = Duration::from_micros(50);

/// What the monitor last saw of one processor.
#[derive(Clone, Copy)]
struct Seen {
    switches: u32,
    status: u32,
    since: Instant,
    /// When its running thread started, for the quantum: the monitor's
    /// previous look when that was recent (the switch happened after it),
    /// so a quantum ends late only by the signal's delivery, never by the
    /// polling interval.
    started: Instant,
    /// When the monitor last looked at it.
    looked: Instant,
    /// CPU time of its kernel thread at a given moment, for the blocked check.
    cpu: Option<(u64, Instant)>,
    /// The quantum's preemption signal sent in this stint.
    signalled: Option<Sent>,
    poll: Duration,
    /// The kernel took its kernel thread's CPU away (`ProcessorLost` sent).
    lost: bool,
}

/// A preemption signal the monitor sent to a processor's kernel thread.
#[derive(Clone, Copy)]
struct Sent {
    at: Instant,
    /// The kernel thread's CPU time then.
    cpu: Option<u64>,
}

impl Sent {
    fn now(now: Instant, m: &Machine) -> Sent {
        Sent { at: now, cpu: m.cpu_time_ns() }
    }

    /// Whether the signal may be sent again to `m`, whose stint has not
    /// changed since: its kernel thread has run [`RETRY`] since the signal,
    /// so it took it and was not at a safe point (or, without a CPU clock to
    /// read, `RETRY` has passed). A signal still in flight is never doubled:
    /// the request word belongs to the kernel thread, not to the stint, so a
    /// second signal lands on whichever thread runs next and ends its stint
    /// at once. On a loaded machine, where delivery took over `RETRY`, that
    /// ended the turn of an aged `Low` thread (`priority.rs`) a few µs after
    /// it began, charged with its predecessor's run.
    fn may_resend(this: Option<Sent>, now: Instant, m: &Machine) -> bool {
        let Some(sent) = this else { return true };
        match (sent.cpu, m.cpu_time_ns()) {
            (Some(then), Some(c)) => c.saturating_sub(then) >= RETRY.as_nanos() as u64,
            _ => now - sent.at >= RETRY,
        }
    }
}

/// Body of the monitor thread.
pub(crate) fn monitor_main(shared: Arc<Shared>) {
    // SAFETY: sets this thread's timer slack (1 ns), so its deadlines are kept
    // to the µs rather than the default 50 µs.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
    ask_to_run_promptly();
    // Whatever `ask_to_run_promptly` got, the monitor must not spin on a
    // lock a processor of its CPU holds (`spin.rs`, `give_way`).
    crate::spin::raised_priority();
    let procs = shared.processors();
    let quantum = match shared.preemption {
        Preemption::Quantum(q) => Some(q),
        Preemption::Cooperative => None,
    };
    let threshold = shared.block_threshold;
    let transparent = shared.transparent_blocking;
    let start = Instant::now();
    let fresh = |sw, st, now| Seen {
        switches: sw,
        status: st,
        since: now,
        started: now,
        looked: now,
        cpu: None,
        signalled: None,
        poll: threshold,
        lost: false,
    };
    let mut seen: Vec<Seen> = vec![fresh(u32::MAX, u32::MAX, start); procs.len()];
    // Per processor: the CPU-budget deadline last seen and when the signal
    // enforcing it was last sent (`budget.rs`).
    let mut budget_seen: Vec<(u64, Option<Sent>)> = vec![(u64::MAX, None); procs.len()];
    // Per processor, for the levels (`priority.rs`): since when it has run
    // `High` threads, and the signal the monitor sent it for a level in this stint.
    let mut prio_seen: Vec<(Option<Instant>, Option<Sent>)> = vec![(None, None); procs.len()];
    // Per look, the processors running a `High` thread outside a turn, with its real-time
    // priority as published (`realtime.rs`, rule 2).
    let mut rt_running: Vec<(usize, u16)> = Vec::with_capacity(procs.len());
    let mut detached = Detached::default();
    let mut scan_gate = ScanGate::default();
    // The first look for a blocked kernel thread after a switch
    // (`threshold`, stretched while nothing blocks: `Calm`).
    let mut calm = Calm::new(threshold);
    let mut last_waiting = start;
    let mut last_handoff: Option<Instant> = None;
    shared.depot.scavenge_in_background();
    let mut last_scavenge = start;
    let mut idle_stacks = crate::reclaim::Reclaimer::new(start);
    #[cfg(feature = "shared-library")]
    let mut interrupted = crate::shared::Interrupted::default();
    while !shared.shutdown.load(Ordering::Acquire) {
        let now = Instant::now();
        if shared.depot.has_excess() && now - last_scavenge >= SCAVENGE_EVERY {
            shared.depot.scavenge(SCAVENGE_BATCH);
            last_scavenge = now;
        }
        let mut next: Option<Instant> = None;
        let mut want = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        let busy = procs.iter().any(|p| {
            // SAFETY: processors outlive the monitor.
            let vp = unsafe { &*p.0 };
            vp.in_user.load(Ordering::Relaxed) || vp.status.state(Ordering::Relaxed) != RUNNING
        });
        if busy {
            // Idle processors fire their own timers; busy ones only at their
            // next decision, which a spinning thread may never make.
            shared.timers.fire(crate::processor::wake_timer_from_outside);
            if let Some(d) = shared.timers.until_next() {
                want(now + d);
            }
            // Likewise I/O readiness (`poll.rs`), which a processor polls
            // when it searches or decides, and no processor may do for as
            // long as a thread computes without a decision: Go's sysmon
            // polls the network when nobody has for 10 ms. The woken
            // threads are injected, so the monitor preempts for them.
            if let Some(p) = crate::poll::active() {
                p.poll_busy(crate::poll::MONITOR_POLL);
                want(now + crate::poll::MONITOR_POLL);
            }
        }
        // Aging (`priority.rs`): `Low` threads that waited AGING wait for a
        // turn, ahead of `Normal` work.
        let prios = shared.prios.load(Ordering::Relaxed);
        // The oldest waiting `Low` thread's aging is among this look's
        // deadlines (the quiet re-check below counts it as planned for).
        let mut aging_planned = false;
        if prios && shared.prio.low_waiting() {
            let tnow = shared.timers.now();
            let aging = AGING.as_nanos() as u64;
            let (moved, next_at) = shared.prio.age(tnow.saturating_sub(aging));
            if moved {
                shared.notify();
            }
            if let Some(at) = next_at {
                want(now + Duration::from_nanos((at + aging).saturating_sub(tnow)));
                aging_planned = true;
            }
        }
        // Work any processor takes before its own `Normal` work may wait:
        // the injection queue, and aged `Low` threads.
        let global = !shared.injector.is_empty() || (prios && shared.prio.aged_waiting());
        // Work any processor could take: the injection queue or a queue it
        // can steal from. A processor stuck with a blocked thread is given
        // away when work waits *anywhere*, not only in its own queue: its
        // next machine steals (Go's `retake` likewise hands off a P in a
        // syscall when no other P is idle to pick up new work). Judging by
        // its own queue alone left one of two processors blocked while the
        // other ran every computing thread (rt.blocking.throughput, 2
        // processors: 50%).
        let high_waiting = prios && shared.prio.high_waiting();
        // A waiting real-time thread takes the processor running the lowest real-time
        // priority below its own, when no processor runs a lower level (`realtime.rs`,
        // rule 2).
        let top_rt = if high_waiting { shared.prio.top_rt() } else { None };
        rt_running.clear();
        let mut lower_runs = false;
        if top_rt.is_some() {
            for (i, p) in procs.iter().enumerate() {
                // SAFETY: processors outlive the monitor.
                let vp = unsafe { &*p.0 };
                let cur = vp.cur_prio.load(Ordering::Relaxed);
                if cur & crate::task::TURN != 0
                    || vp.status.state(Ordering::Relaxed) != RUNNING
                    || !vp.in_user.load(Ordering::Relaxed)
                {
                    continue;
                }
                if Priority::from_u8(cur) == Priority::High {
                    rt_running.push((i, vp.cur_rt.load(Ordering::Relaxed)));
                } else {
                    lower_runs = true;
                }
            }
        }
        let stealable = global
            || high_waiting
            || procs.iter().any(|p| {
                // SAFETY: processors outlive the monitor.
                unsafe { &*p.0 }.has_waiting()
            });
        let mut any_waiting = stealable;
        let mut stale = false;
        let active = shared.active.load(Ordering::SeqCst);
        for (i, p) in procs.iter().enumerate() {
            // Removed, and not yet retired: it must reach its scheduler
            // context ("Resizing", step 2).
            let removed = i >= active;
            // SAFETY: processors outlive the monitor.
            let vp = unsafe { &*p.0 };
            let status = vp.status.state(Ordering::Acquire);
            let sw = vp.switches.load(Ordering::Relaxed);
            let s = &mut seen[i];
            let changed = sw != s.switches || status != s.status;
            if changed {
                if s.lost {
                    emit_found(&shared, vp);
                }
                if status == RELEASED && s.status == RUNNING {
                    // Released by its own signal handler (transparent).
                    emit_blocked(&shared, vp, Detection::Transparent);
                }
                let poll = if s.status == status && status == RUNNING {
                    // Progress since the last look: back off.
                    (s.poll * 2).min(MAX_POLL.max(threshold))
                } else {
                    threshold
                };
                // When the new thread started, for its quantum: right after
                // our preemption signal if we sent one (the usual switch of a
                // spinning thread); else after the previous look if that was
                // recent (too early by at most that interval, never late);
                // after a long sleep, now.
                let started = match (quantum, s.signalled) {
                    (Some(_), Some(t)) => t.at,
                    (Some(q), None) if now - s.looked <= q / 2 => s.looked,
                    _ => now,
                };
                *s = Seen { poll, started, ..fresh(sw, status, now) };
                prio_seen[i].1 = None;
            }
            s.looked = now;
            // A level waiting above the running one takes the processor at
            // once (`priority.rs`); `High` threads that ran AGING while
            // `Normal` work waited here give it a turn. A turn is not cut
            // short by a level: its quantum ends it (below).
            let cur_prio = vp.cur_prio.load(Ordering::Relaxed);
            let turn = cur_prio & crate::task::TURN != 0;
            if prios && !turn && status == RUNNING && vp.in_user.load(Ordering::Relaxed) {
                let running = Priority::from_u8(cur_prio);
                let normal_waits = global || vp.has_waiting();
                let ps = &mut prio_seen[i];
                if running == Priority::High {
                    ps.0.get_or_insert(now);
                } else {
                    ps.0 = None;
                }
                let mut preempt = (running > Priority::High && high_waiting)
                    || (running == Priority::Low && normal_waits)
                    || (running == Priority::High
                        && crate::realtime::preempt_lowest(i, &rt_running, lower_runs, top_rt));
                if running == Priority::High && normal_waits {
                    match ps.0 {
                        Some(t) if now - t >= AGING => {
                            vp.normal_turn.store(true, Ordering::Relaxed);
                            ps.0 = Some(now);
                            preempt = true;
                        }
                        Some(t) => want(t + AGING),
                        None => {}
                    }
                }
                if preempt {
                    // SAFETY: machines outlive the monitor.
                    let m = unsafe { vp.machine.load(Ordering::Relaxed).as_ref() };
                    if let Some(m) = m.filter(|m| Sent::may_resend(ps.1, now, m)) {
                        vp.preempt_ran
                            .store((now - s.started).as_nanos() as u64, Ordering::Relaxed);
                        m.request.store(REQ_PREEMPT, Ordering::Release);
                        signal_thread(m.tid.load(Ordering::Relaxed));
                        ps.1 = Some(Sent::now(now, m));
                    }
                    want(now + RETRY);
                }
            }
            // A CPU budget that has run out is enforced whether or not work
            // waits (`budget.rs`).
            let deadline = vp.budget_deadline.load(Ordering::Relaxed);
            let b = &mut budget_seen[i];
            if deadline != b.0 {
                *b = (deadline, None);
            }
            if deadline != u64::MAX && status == RUNNING && vp.in_user.load(Ordering::Relaxed) {
                let left = deadline.saturating_sub(shared.timers.now());
                if left == 0 {
                    // SAFETY: machines outlive the monitor.
                    let m = unsafe { vp.machine.load(Ordering::Relaxed).as_ref() };
                    if let Some(m) = m.filter(|m| Sent::may_resend(b.1, now, m)) {
                        m.request.store(REQ_PREEMPT, Ordering::Release);
                        signal_thread(m.tid.load(Ordering::Relaxed));
                        b.1 = Some(Sent::now(now, m));
                    }
                    want(now + RETRY);
                } else {
                    want(now + Duration::from_nanos(left));
                }
            }
            // Preemption is judged by this processor's own queue (another
            // processor's waiting work is its own quantum's business).
            let waiting = global || vp.has_waiting();
            // What the quantum yields to (`priority.rs`): a turn, to any
            // level; a `High` thread, to another `High` one only, of its real-time
            // priority or a higher one (the decision
            // after its preemption is made before it is queued again, so
            // `Normal` work would take the processor, to be preempted at once
            // for it: a few µs of `Normal` work per quantum instead of the
            // turn per `AGING` that the monitor gives below the level).
            let quantum_over = if !prios {
                waiting
            } else if turn {
                waiting || high_waiting
            } else if Priority::from_u8(cur_prio) == Priority::High {
                // Real-time ones: to an equal only under `SCHED_RR` (`realtime.rs`).
                crate::realtime::quantum_yields(vp.cur_rt.load(Ordering::Relaxed), top_rt)
            } else {
                waiting
            };
            any_waiting |= waiting;
            // Work has waited behind the same running thread since the last
            // look: an idle processor should take it. (A thread put in a
            // next slot does not wake a processor asleep deaf to slots,
            // `idle.rs`, "Slots"; this notification does.)
            stale |= waiting && !changed && status == RUNNING;
            match status {
                SYSCALL if stealable || removed => {
                    if now - s.since >= threshold {
                        if blocking::retake(&shared, vp) {
                            emit_blocked(&shared, vp, Detection::Explicit);
                            blocking::hand_off(&shared, *p);
                            last_handoff = Some(now);
                            calm.found();
                        }
                    } else {
                        want(s.since + threshold);
                    }
                }
                RELEASED if stealable || removed => {
                    blocking::hand_off(&shared, *p);
                    last_handoff = Some(now);
                    calm.found();
                }
                RUNNING if (stealable || removed) && vp.in_user.load(Ordering::Relaxed) => {
                    let m = vp.machine.load(Ordering::Relaxed);
                    if m.is_null() {
                        continue;
                    }
                    // SAFETY: machines outlive the monitor.
                    let m: &Machine = unsafe { &*m };
                    let ran = now - s.since;
                    if let (Some(q), true) = (quantum, quantum_over || removed) {
                        let ran = now - s.started;
                        // A removed processor's thread is preempted now:
                        // its stint ends with its processor.
                        if ran >= q || removed {
                            let retry = s.signalled.is_some();
                            if Sent::may_resend(s.signalled, now, m) {
                                vp.preempt_ran.store(ran.as_nanos() as u64, Ordering::Relaxed);
                                m.request.store(REQ_PREEMPT, Ordering::Release);
                                signal_thread(m.tid.load(Ordering::Relaxed));
                                s.signalled = Some(Sent::now(now, m));
                            }
                            // A first signal almost always lands (a thread
                            // inside a runtime section takes it at the
                            // section's end): look again when the next
                            // thread's quantum ends, one wake-up per quantum.
                            // A thread that was not at a safe point is found
                            // then, and signalled every RETRY from there.
                            want(now + if retry || removed { RETRY } else { q });
                        } else {
                            want(s.started + q);
                        }
                    }
                    // Blocked with work waiting anywhere: release it.
                    if transparent {
                        let first = calm.first_look();
                        if ran >= first {
                            let cpu = m.cpu_time_ns();
                            match (s.cpu, cpu) {
                                (Some((c0, t0)), Some(c))
                                    if c == c0 && now - t0 >= threshold / 2 =>
                                {
                                    let tid = m.tid.load(Ordering::Relaxed);
                                    if thread_state(tid) == Some(b'R') {
                                        // Runnable but not running: the kernel
                                        // took the CPU away, nothing blocked.
                                        if !s.lost {
                                            s.lost = true;
                                            emit(&shared, Event::ProcessorLost { processor: i });
                                        }
                                        s.cpu = Some((c, now));
                                        want(now + s.poll);
                                    } else {
                                        // Its CPU clock stood still: blocked.
                                        m.request.store(REQ_RELEASE, Ordering::Release);
                                        signal_thread(tid);
                                        calm.found();
                                        s.cpu = Some((c, now));
                                        want(now + RETRY);
                                    }
                                }
                                (_, Some(c)) => {
                                    if s.lost && s.cpu.is_some_and(|(c0, _)| c != c0) {
                                        s.lost = false;
                                        emit_found(&shared, vp);
                                    }
                                    let confirm = s.cpu.is_none();
                                    s.cpu = Some((c, now));
                                    if confirm {
                                        want(now + threshold / 2);
                                    } else {
                                        want(now + s.poll);
                                        s.poll = (s.poll * 2).min(MAX_POLL.max(threshold));
                                    }
                                }
                                _ => {}
                            }
                        } else {
                            want(s.since + first);
                        }
                    }
                }
                _ => {}
            }
        }
        // Detached kernel threads running user code again: ask them to
        // rejoin, so the kernel threads running user code stay P. One
        // clock read (a system call) per detached kernel thread: with
        // thousands of them (a thread per connection on plain `std::net`)
        // the scan itself takes milliseconds, so it runs only when due
        // ([`ScanGate`]), not at every look.
        if scan_gate.due(now) {
            let scan_start = Instant::now();
            let mut any_detached = false;
            shared.machines.for_each(|m| {
                let det = !m.detached.load(Ordering::Relaxed).is_null()
                    && m.processor().is_null()
                    && !m.explicit.load(Ordering::Relaxed);
                let key = m as *const Machine as usize;
                if !det {
                    detached.forget(key);
                    return;
                }
                any_detached = true;
                let Some(cpu) = m.cpu_time_ns() else { return };
                if detached.see(key, cpu, now) {
                    // It ran since the last scan. Asked only if it runs
                    // now: one blocked in the kernel again (a thread per
                    // connection looping on plain `std::net` calls) would
                    // only be brought back to block its processor at the
                    // next call, a hand-off each (and the signal cuts its
                    // call short, to be restarted): it runs on as an OS
                    // thread would, and is asked when it computes.
                    let tid = m.tid.load(Ordering::Relaxed);
                    if thread_state(tid) == Some(b'R') {
                        m.request.store(REQ_REJOIN, Ordering::Release);
                        signal_thread(tid);
                    }
                }
            });
            detached.end_look();
            scan_gate.scanned(scan_start, Instant::now(), any_detached, threshold);
        }
        if let Some(t) = scan_gate.next() {
            want(t);
        }
        calm.look();
        if stale {
            shared.notify();
        }
        if any_waiting {
            last_waiting = now;
            if last_handoff.is_some_and(|t| now - t < ACTIVE_FOR) {
                want(now + ACTIVE_POLL.max(threshold));
            }
        } else if now - last_waiting < IDLE_AFTER {
            // Work waited a moment ago: this look may have caught a processor
            // mid-decision (one thread taken, the one leaving not yet queued
            // back), so look again soon rather than at a far deadline (seen: a
            // `Normal` spinner kept its processor for 100 ms, to the next
            // aging, while another waited).
            want(now + MAX_POLL);
        }
        if shared.depot.has_excess() {
            want(last_scavenge + SCAVENGE_EVERY);
        }
        // Stacks of threads idle in I/O waits (`reclaim.rs`).
        if let Some(t) = idle_stacks.tick(&shared.reclaim, now) {
            want(t);
        }
        // Threads asked to run the resume hook that have not (`shared.rs`,
        // "Signals").
        #[cfg(feature = "shared-library")]
        if let Some(t) = interrupted.tick(&shared, now) {
            want(t);
        }
        let timeout = match next {
            _ if any_waiting || now - last_waiting < IDLE_AFTER => Some(busy_sleep(
                next.map(|t| t.saturating_duration_since(Instant::now())),
                transparent,
            )),
            // Quiet: no work has waited for a while ("Quiet", above).
            _ => {
                shared.monitor.idle.store(true, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                // Read after announcing: a processor that starts running
                // after this read sees `idle` and pokes us.
                let all_stopped = shared.idle.stopped() >= procs.len();
                // Re-check after announcing: a producer that queued before it
                // saw `idle` left work we must not sleep through. A `Low`
                // thread waiting at its level is work only for its aging, and
                // once that is among the deadlines (`aging_planned`) the
                // monitor sleeps until it: counted as work, it made the
                // monitor look again at once, find nothing to do before the
                // aging, and look again, spinning at `SCHED_FIFO` for up to
                // `AGING`. Pinned to the one CPU of its processor (seed 001's
                // `rt` loader), that spin kept the processor from taking the
                // `Low` thread or firing a frame's timer: 100 ms stalls.
                let low_unplanned = shared.prio.low_waiting() && !aging_planned;
                let work = !shared.injector.is_empty()
                    || (prios
                        && (shared.prio.high_waiting()
                            || shared.prio.aged_waiting()
                            || low_unplanned))
                    || procs.iter().any(|p| {
                        // SAFETY: as above.
                        unsafe { &*p.0 }.has_waiting()
                    });
                let until = next.map(|t| t.saturating_duration_since(Instant::now()));
                if work {
                    shared.monitor.idle.store(false, Ordering::Relaxed);
                    Some(Duration::ZERO)
                } else if all_stopped {
                    until
                } else {
                    Some(until.map_or(QUIET_POLL, |d| d.min(QUIET_POLL)))
                }
            }
        };
        if timeout != Some(Duration::ZERO) {
            crate::ring::event(
                crate::ring::Event::MonitorSleep,
                timeout.map_or(u64::MAX, |t| t.as_micros() as u64),
            );
            shared.monitor.wait(timeout);
            crate::ring::event(crate::ring::Event::MonitorWoke, 0);
        }
        shared.monitor.idle.store(false, Ordering::Relaxed);
    }
}

/// How long a monitor that is not quiet (work waits, or waited within
/// [`IDLE_AFTER`]) sleeps, its next deadline `until` away (`None`: none).
///
/// At most [`MAX_POLL`] with transparent blocking: a processor caught between
/// two threads at the look (or searching) gets no deadline of its own, and
/// the thread it runs next may block in the kernel at once, which announces
/// nothing; nor does a processor that starts poke a monitor that is not
/// quiet (`MonitorCtl::processor_starts`). Sleeping to the next deadline
/// however far, the monitor slept through such blocks until a timer thread's
/// 120 s in the Open POSIX suite's `pthread_cond_signal/1-2` under the C
/// library, whose children all blocked in glibc's process-shared condition
/// wait on both processors (about 1 run in 60 with two runs side by side).
fn busy_sleep(until: Option<Duration>, transparent: bool) -> Duration {
    match until {
        Some(d) if !transparent => d,
        Some(d) => d.min(MAX_POLL),
        None => MAX_POLL,
    }
}

/// Asks the kernel to run the monitor as soon as it wakes, ahead of the
/// thread on its CPU. The monitor often shares a CPU with a processor (a
/// process pinned to one CPU), and there a woken thread of the same policy
/// may wait for the running one: measured with the monitor under
/// `SCHED_OTHER`, a 10 ms quantum ended up to 2.8 ms late (p99 of the
/// monitor's wake-up delay 2.7 ms; under `SCHED_FIFO` 0.19 ms).
///
/// So the monitor asks for `SCHED_FIFO` at the lowest real-time priority,
/// as a kernel's own scheduler work outranks user code. It runs for
/// microseconds per wake-up and never spins (every loop ends in a timed
/// sleep), so it cannot starve the CPU. Without the privilege (no
/// `CAP_SYS_NICE`, `RLIMIT_RTPRIO` 0) it asks for the shortest custom time
/// slice instead (Linux 6.12: `sched_setattr` with `sched_runtime` under
/// `SCHED_OTHER`, no privilege needed), which makes it preempt on most
/// wake-ups; on older kernels that fails too and nothing changes.
///
/// Both are asked with reset-on-fork: the kernel threads the monitor starts
/// (spare machines, `blocking.rs`) run user code and must get the ordinary
/// policy, not the monitor's. A program that already runs under a real-time
/// policy keeps it for the monitor too (it is not lowered).
fn ask_to_run_promptly() {
    // SAFETY: queries this thread's policy.
    if unsafe { libc::sched_getscheduler(0) } != libc::SCHED_OTHER {
        return;
    }
    let fifo = libc::sched_param { sched_priority: 1 };
    // SAFETY: changes this thread's policy; the parameter block is valid.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &fifo) }
        == 0
    {
        return;
    }
    /// `struct sched_attr` (include/uapi/linux/sched/types.h), first version.
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        // SCHED_FLAG_RESET_ON_FORK
        flags: 1,
        nice: 0,
        priority: 0,
        // The shortest slice the kernel accepts.
        runtime: 100_000,
        deadline: 0,
        period: 0,
    };
    // SAFETY: sched_setattr on this thread (pid 0) with a valid, fully
    // initialised attribute block of the size it announces; the kernel only
    // reads it.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
}

/// `NewProcessor` for `vp`, which runs again after `ProcessorLost`, unless
/// it has been removed: finishing a stint (not active), or retired (its
/// `ProcessorRemoved` emitted), announcing it would read as its return.
/// Under the resize lock, under which a removal and the processor's own
/// `NewProcessor` and `ProcessorRemoved` happen: so ours comes between
/// those two, in the order the hook sees them.
fn emit_found(shared: &Shared, vp: &crate::processor::Processor) {
    let _events_in_order = shared.resize.lock().unwrap_or_else(|e| e.into_inner());
    if shared.is_active(vp.index) && vp.announced.load(Ordering::Relaxed) {
        emit(shared, Event::NewProcessor { processor: vp.index });
    }
}

fn emit(shared: &Shared, e: Event) {
    if let Some(h) = &shared.hook {
        h(&e);
    }
}

/// The scheduling state letter of thread `tid` of this process (`R`, `S`,
/// `D`, ...) from `/proc`.
fn thread_state(tid: i32) -> Option<u8> {
    let stat = std::fs::read(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The state follows the command name, which is in parentheses and may
    // itself contain them: take the last ')'.
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(close + 2).copied()
}

fn emit_blocked(shared: &Shared, vp: &crate::processor::Processor, how: Detection) {
    if let Some(h) = &shared.hook {
        let id = vp.detached_id.load(Ordering::Relaxed);
        if let Some(thread) = crate::task::ThreadId::from_u64(id) {
            h(&Event::Blocked { thread, processor: vp.index, detection: how });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_monitor_looks_again_within_max_poll_while_blocks_go_unannounced() {
        let far = Duration::from_secs(120);
        assert_eq!(busy_sleep(Some(far), true), MAX_POLL, "a far deadline is not a look");
        let near = Duration::from_micros(50);
        assert_eq!(busy_sleep(Some(near), true), near);
        assert_eq!(busy_sleep(None, true), MAX_POLL);
        // Without transparent blocking a thread blocks only in `blocking`,
        // whose processor has a deadline of its own: to the next deadline.
        assert_eq!(busy_sleep(Some(far), false), far);
    }

    #[test]
    fn the_detached_scan_waits_twenty_times_its_duration() {
        let mut g = ScanGate::default();
        let t0 = Instant::now();
        assert!(g.due(t0), "the first look scans");
        let threshold = Duration::from_micros(50);
        // A scan of 2 ms (thousands of clock reads): the next in 40 ms, not
        // at the next look.
        g.scanned(t0, t0 + Duration::from_millis(2), true, threshold);
        let end = t0 + Duration::from_millis(2);
        assert!(!g.due(end + Duration::from_micros(100)));
        assert!(!g.due(end + Duration::from_millis(39)));
        assert!(g.due(end + Duration::from_millis(40)));
        assert_eq!(g.next(), Some(end + Duration::from_millis(40)));
        // A quick scan: at least 100 µs; nothing detached, no wake-up for it.
        g.scanned(t0, t0, false, threshold);
        assert!(!g.due(t0 + Duration::from_micros(99)));
        assert!(g.due(t0 + Duration::from_micros(100)));
        assert_eq!(g.next(), None);
    }

    #[test]
    fn a_detached_thread_that_ran_is_asked_to_rejoin_once_per_retry() {
        let mut d = Detached::default();
        let t0 = Instant::now();
        assert!(!d.see(1, 100, t0), "first sight: nothing to compare with");
        d.end_look();
        assert!(!d.see(1, 100, t0 + RETRY), "its clock stood still: still in the kernel");
        d.end_look();
        assert!(d.see(1, 150, t0 + RETRY * 2), "it ran: back in user code");
        d.end_look();
        assert!(!d.see(1, 200, t0 + RETRY * 2), "asked a moment ago");
        d.end_look();
        assert!(d.see(1, 250, t0 + RETRY * 3), "asked again after RETRY");
    }

    #[test]
    fn detached_threads_not_seen_in_a_look_are_forgotten() {
        let mut d = Detached::default();
        let t0 = Instant::now();
        for k in 0..3 {
            d.see(k, 10, t0);
        }
        d.end_look();
        d.see(0, 10, t0);
        d.forget(1);
        d.end_look();
        assert_eq!(d.len(), 1, "1 rejoined, 2 exited");
        // Seen again later: a fresh entry, not the old clock.
        assert!(!d.see(2, 5, t0 + RETRY));
    }

    /// Thousands of kernel threads blocked each on its own connection (a
    /// thread per connection on plain `std::net`): a look is linear in
    /// their number. Before, each one was searched for in a list of all
    /// of them (and each listed one in the machine set): 200,000 here made
    /// 2·10^10 comparisons per look, minutes; now a few milliseconds.
    #[test]
    fn a_look_at_many_detached_threads_is_linear() {
        let mut d = Detached::default();
        let t0 = Instant::now();
        const N: usize = 200_000;
        for look in 0..3u64 {
            for k in 0..N {
                d.see(k * 64, look * 1000, t0 + RETRY * look as u32);
            }
            d.end_look();
        }
        assert_eq!(d.len(), N);
    }

    #[test]
    fn the_first_look_backs_off_while_nothing_blocks() {
        let threshold = Duration::from_micros(50);
        let mut c = Calm::new(threshold);
        for _ in 0..CALM_AFTER {
            c.look();
        }
        assert_eq!(c.first_look(), threshold, "blocking was seen recently enough");
        for _ in 0..20 {
            c.look();
        }
        assert_eq!(c.first_look(), MAX_POLL, "calm: at most MAX_POLL");
        c.found();
        assert_eq!(c.first_look(), threshold, "a blocked thread: back to the threshold");
    }
}
