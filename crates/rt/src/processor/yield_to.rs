//! Hand-off scheduling: a yield that names the thread to run next (Mach's
//! `thread_switch(thread, SWITCH_OPTION_NONE)`, which seed 003 cites; the
//! L4 and QNX IPC paths do the same). `thread::yield_to` calls it.
//!
//! # Semantics
//!
//! `yield_to(target)` runs `target` next on the caller's processor if it is
//! runnable there and not running, and the caller goes behind it as a
//! [`yield_now`](crate::yield_now) puts it; otherwise it is exactly
//! `yield_now`. "Runnable there" is one of:
//!
//! 1. in the processor's next slot (it runs next anyway);
//! 2. at the top of its fresh part (a thread the caller just spawned or woke
//!    on a runtime of several processors), taken with the owner's pop that a
//!    thief's steal races (`queue.rs`, `take_fresh_if`);
//! 3. anywhere in its private part (one processor: every queued thread),
//!    taken out with the threads before it keeping their order
//!    (`RunQueue::take_private`; owner-only, so nothing races it).
//!
//! A thread taken out is put into the next slot (displacing what was there
//! to the fresh part, as a wake-up does), so the switch the yield then makes
//! picks it. No new state: the slot's put and take and the fresh part's pop
//! against a steal are the transitions every wake-up and `join_inline`
//! already make (loom-checked in `slot.rs`), and the private part is the
//! owner's alone.
//!
//! What `yield_to` does not do, and why:
//! - take a thread from another processor's queue: those are other owners'
//!   (only thieves' steals touch them, oldest first); stealing a named one
//!   would need a claim word per thread on every queue path. The caller
//!   yields instead.
//! - take a thread from the stealable FIFO part of a runtime of several
//!   processors: a Chase-Lev deque has no removal from the middle.
//! - bypass the next slot's streak bound (`MAX_LIFO_STREAK`): two threads
//!   handing the processor to each other forever would starve the queue, as
//!   two threads waking each other would, so after that many hand-offs in a
//!   row the queue gets a turn.
//! - bypass priority levels: with levels the target goes to its level's
//!   queue (`Processor::divert`), as any wake-up does.

use super::Processor;
use crate::task::{Task, TaskRef};
use std::ptr::NonNull;

/// Moves `target` into the calling processor's next slot if it waits on
/// this processor (the module's cases 1-3), then yields. Returns `false`,
/// doing nothing, on an OS thread.
#[inline(never)]
pub(crate) fn yield_to(target: &Task) -> bool {
    if let Some(entered) = super::enter() {
        let vp = entered.processor();
        if !vp.current_task().is_some_and(|c| std::ptr::eq(c, target)) {
            if let Some(t) = take_here(vp, target) {
                vp.schedule_next(t);
            }
        }
        // The section ends before the switch (an `Entered` never lives
        // across one).
        drop(entered);
    }
    super::yield_current()
}

/// `target` out of this processor's fresh part or private part; `None` when
/// it is in the next slot already, elsewhere, or running.
fn take_here(vp: &Processor, target: &Task) -> Option<TaskRef> {
    let want = NonNull::from(target);
    if vp.queue.slot_used() && vp.lifo().peek() == want.as_ptr() {
        return None;
    }
    vp.queue.take_fresh_if(target).or_else(|| vp.queue.take_private(target))
}
