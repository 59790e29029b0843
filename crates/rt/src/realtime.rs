//! POSIX's two real-time policies on the `High` level (`priority.rs`, "Real-time
//! order"): `SCHED_FIFO` against `SCHED_RR`, where a thread goes in its priority's list
//! when it is preempted, and a running or waiting thread's policy or priority changed
//! (`pthread_setschedparam`, `pthread_setschedprio`: [`crate::Thread::set_realtime`]).
//!
//! # The rules (POSIX XSH 2.8.4, "Scheduling Policies")
//!
//! 1. **A decision while a real-time thread runs** ([`realtime_decision`]): a yield passes
//!    the processor to a waiting thread of the same or a higher real-time priority (the
//!    yielder goes to the tail of its list); a preemption — the quantum, the monitor, or
//!    a higher thread woken here — passes it to a thread of a higher priority, or under
//!    `SCHED_RR` (its quantum) of the same one; a `SCHED_FIFO` thread is never preempted
//!    for one of its own priority (it keeps the processor until it blocks, yields or a
//!    higher one comes). A thread preempted by a higher one goes to the **head** of its
//!    priority's list (`Task::RT_HEAD`, taken by `PrioQueues::push`), so it runs before
//!    the equals that waited behind it.
//! 2. **The quantum and the monitor** ([`quantum_yields`], [`preemptable`]): the
//!    processor publishes its running thread's real-time priority and policy
//!    (`Processor::cur_rt`, [`published_rt`]). The quantum of a real-time thread ends only
//!    if a thread it would pass the processor to waits (rule 1); and when the first
//!    waiting `High` thread has a higher priority than every processor's running one, the
//!    monitor preempts the processor running the lowest (the kernel's `push_rt_task`
//!    likewise sends a woken real-time task to the CPU running the lowest priority), so a
//!    thread woken from outside (a timer, an OS thread) does not wait for a lower one's
//!    next decision. A processor running a lower level is preempted first, as before.
//! 3. **A changed policy or priority** ([`set`]). The values are stored first, so a
//!    queueing from then on reads them; then, by where the thread is:
//!    - **running, and the caller**: raised, it goes on; lowered, it yields at once to a
//!      waiting thread of a higher priority, if any, and goes to the head of its new
//!      priority's list (POSIX since 2008: "if the priority is lowered, the thread becomes
//!      the head of the thread list", for `pthread_setschedparam` and `setschedprio`
//!      both, as Linux's `sched_setscheduler` queues it since 3.15); moved to
//!      `SCHED_OTHER`, it yields to any waiting `High` thread.
//!    - **waiting in the `High` queue**: taken out and queued again at its new place
//!      (lowered: the head of its new list; raised: the tail), as a thread woken by the
//!      caller, so a thread raised above the caller takes the caller's processor when
//!      the caller leaves the runtime's code, and one raised above another processor's
//!      thread is the monitor's (rule 2).
//!    - **parked**: nothing to move; its next wake-up queues it at its new place.
//!    - **running on another processor** (`shared-library` build, which records the
//!      kernel thread that resumed each thread): that kernel thread is asked for a
//!      preemption (`shared::preempt_running`), as the kernel's `sched_setscheduler`
//!      reschedules the task's CPU. At the safe point the decision follows rule 1 with
//!      the new values (lowered below a waiting thread, it passes the processor to it,
//!      going to the head of its new list); a preemption with nothing to pass the
//!      processor to is dropped and the processor's published values are brought up to
//!      date ([`republish`]), so the monitor judges it by the new ones (rule 2).
//!    - **queued among `Normal` work** (a `SCHED_OTHER` thread made real-time while it
//!      waited to run), or running elsewhere in the Rust API's build: takes effect at its
//!      next switch (not at once; docs/PTHREAD.md, "Not done yet").

use crate::priority::{PrioQueues, Priority};
use crate::task::{Task, TaskRef, RT_FIFO, RT_STRICT};
use std::sync::atomic::Ordering;

/// The bit of `Processor::cur_rt` of a running `SCHED_FIFO` thread.
pub(crate) const CUR_FIFO: u16 = 0x100;

/// What the processor publishes of its running thread `t` for the monitor
/// (`Processor::cur_rt`): its real-time priority, with [`CUR_FIFO`]; 0 below `High`.
pub(crate) fn published_rt(t: &Task) -> u16 {
    if t.priority() != Priority::High {
        return 0;
    }
    u16::from(t.rt_priority()) | if t.rt_flag(RT_FIFO) { CUR_FIFO } else { 0 }
}

/// Whether a thread whose real-time priority is `top` waits for a processor whose
/// running `High` thread published `cur` may take it at a preemption (rule 1): a higher
/// priority, or an equal one unless the running thread is `SCHED_FIFO`. Plain `High`
/// threads (0) pass it among themselves as before.
#[inline]
pub(crate) fn quantum_yields(cur: u16, top: Option<u8>) -> bool {
    let rt = cur as u8;
    top.is_some_and(|top| top > rt || (top == rt && cur & CUR_FIFO == 0))
}

/// Whether a preemption of the running `High` thread `t` has a thread to give its
/// processor to (rule 1; `preempt.rs`, `stale_for_high`, drops it otherwise).
pub(crate) fn preemptable(t: &Task, prio: &PrioQueues) -> bool {
    quantum_yields(published_rt(t), prio.top_rt())
}

/// The monitor's rule 2 for the processor at `index`, among `running`: each processor's
/// `(index, cur_rt)` if it runs a `High` thread that no turn protects, and `lower_runs`
/// if one runs a lower level (which the monitor preempts first). Whether `index` is the
/// one to preempt for a waiting thread of real-time priority `top`.
pub(crate) fn preempt_lowest(
    index: usize,
    running: &[(usize, u16)],
    lower_runs: bool,
    top: Option<u8>,
) -> bool {
    let Some(top) = top else { return false };
    if lower_runs {
        return false;
    }
    let lowest = running.iter().min_by_key(|(_, rt)| *rt as u8);
    lowest.is_some_and(|&(i, rt)| i == index && (rt as u8) < top)
}

/// The decision made while the real-time thread `cur` (of real-time priority `rt` ≥ 1)
/// runs on this processor (rule 1): the thread to pass the processor to, or `None`,
/// nothing (the yield or the preemption goes on with `cur`; a park passes to the
/// scheduler context, whose decision takes the best waiting thread).
pub(crate) fn realtime_decision(prio: &PrioQueues, cur: &Task, rt: u8) -> Option<TaskRef> {
    let preempted = cur.preempting.load(Ordering::Relaxed);
    let strict = cur.rt_flag(RT_STRICT) || (preempted && cur.rt_flag(RT_FIFO));
    let min = if strict { rt.checked_add(1)? } else { rt };
    let t = prio.pop_high_from(min)?;
    if (strict || preempted) && t.rt_priority() > rt {
        // Preempted by a higher one: first among its equals when it is queued.
        cur.set_rt_flag(crate::task::RT_HEAD, true);
    }
    Some(t)
}

/// Where a thread stands among the levels and real-time priorities: lower is better.
fn rank(level: Priority, rt: u8) -> (u8, std::cmp::Reverse<u8>) {
    (level.as_u8(), std::cmp::Reverse(rt))
}

/// Rule 3: gives `t` real-time priority `rt` (0: back to `Normal`) and policy
/// `SCHED_FIFO` (`fifo`) or `SCHED_RR`, and moves it as POSIX asks. From any thread
/// of any runtime, or an OS thread.
pub(crate) fn set(t: &TaskRef, rt: u8, fifo: bool) {
    let shared = &*t.shared;
    let level = if rt == 0 { Priority::Normal } else { Priority::High };
    // The effective level: a `High` one inherited with no real-time priority ranks as
    // a plain `High` thread, below every real-time priority.
    let before = rank(t.priority(), t.rt_priority());
    let lowered = rank(level, rt) > before;
    // Unchanged: a waiting thread keeps its place (POSIX).
    let moves = rank(level, rt) != before;
    if level != Priority::Normal {
        crate::processor::enable_levels(shared);
    }
    // The values first: a queueing from now on reads them (the `High` queue under its
    // lock), so a thread being queued meanwhile lands at its new place or is found below.
    t.set_rt_flag(RT_FIFO, fifo && rt != 0);
    t.set_rt_priority(rt);
    t.set_own_priority(level);
    let Some(vp) = crate::processor::enter() else {
        // An OS thread, a detached user thread, or the scheduler context.
        let _section = crate::processor::here();
        if moves && !requeue(t, lowered, None) {
            elsewhere(t);
        }
        return;
    };
    let me = vp.current_task().is_some_and(|c| std::ptr::eq(c, &**t));
    if !me {
        if moves && !requeue(t, lowered, t.shared.is(&vp.shared).then_some(&*vp)) {
            elsewhere(t);
        }
        return;
    }
    // The caller: what the monitor reads of it changes now.
    republish(&vp, t);
    drop(vp);
    let top = shared.prio.top_rt();
    if t.priority() == Priority::High {
        if lowered && top.is_some_and(|top| top > rt) {
            t.set_rt_flag(RT_STRICT, true);
            crate::processor::yield_current();
            t.set_rt_flag(RT_STRICT, false);
        }
    } else if top.is_some() {
        crate::processor::yield_current();
    }
}

/// What the monitor reads of `vp`'s running thread `t` (rule 2), published again after
/// its policy or priority changed: by `t` itself ([`set`]), or at the preemption another
/// thread's change asked for (`preempt.rs`, a preemption dropped as stale).
pub(crate) fn republish(vp: &crate::processor::Processor, t: &Task) {
    if vp.prios.load(Ordering::Relaxed) {
        let turn = vp.cur_prio.load(Ordering::Relaxed) & crate::task::TURN;
        vp.cur_prio.store(t.priority().as_u8() | turn, Ordering::Relaxed);
        vp.cur_rt.store(published_rt(t), Ordering::Relaxed);
    }
}

/// Rule 3 for a thread that is neither the caller nor waiting in the `High` queue: if it
/// runs on another kernel thread, that one is asked for a preemption (module docs).
fn elsewhere(t: &Task) {
    #[cfg(feature = "shared-library")]
    crate::shared::preempt_running(t);
    #[cfg(not(feature = "shared-library"))]
    let _ = t;
}

/// Rule 3 for a thread that is not the caller: if it waits in the `High` queue, it is
/// queued again at its new place, as a thread the caller woke (on `here`, the caller's
/// processor of the same runtime, if any). Whether it waited there.
fn requeue(t: &TaskRef, lowered: bool, here: Option<&crate::processor::Processor>) -> bool {
    let Some(q) = t.shared.prio.take_high(t) else { return false };
    if lowered {
        q.set_rt_flag(crate::task::RT_HEAD, true);
    }
    match here {
        Some(vp) => {
            if let Some(q) = vp.divert(q, true) {
                // Moved to `SCHED_OTHER`: among the caller's `Normal` work.
                if vp.enqueue(q) {
                    vp.shared.notify();
                }
            }
        }
        None => t.shared.inject(q),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quantum_passes_equals_only_under_round_robin() {
        assert!(quantum_yields(10, Some(10)), "SCHED_RR: an equal one after the quantum");
        assert!(!quantum_yields(10 | CUR_FIFO, Some(10)), "SCHED_FIFO keeps it against equals");
        assert!(quantum_yields(10 | CUR_FIFO, Some(11)), "a higher one takes it");
        assert!(!quantum_yields(10, Some(9)), "never to a lower one");
        assert!(!quantum_yields(10, None));
        assert!(quantum_yields(0, Some(0)), "plain High threads share as before");
    }

    #[test]
    fn the_monitor_preempts_the_lowest_running_priority_only() {
        let running = [(0, 30), (1, 10 | CUR_FIFO)];
        assert!(preempt_lowest(1, &running, false, Some(20)));
        assert!(!preempt_lowest(0, &running, false, Some(20)));
        assert!(!preempt_lowest(1, &running, false, Some(10)), "not for an equal");
        assert!(!preempt_lowest(1, &running, true, Some(20)), "a lower level goes first");
        assert!(!preempt_lowest(1, &running, false, None));
    }
}
