//! Running a child inline in its joiner: a `join` that finds the thread it
//! joins still unstarted in its own processor's next slot or fresh queue
//! takes it back and runs it on its own stack, as a function call — no stack
//! for the child, no context switch, no wake-up of the joiner. This is the
//! work-first half of Cilk's THE protocol and of rayon's `join`
//! (`rayon-core/src/join/mod.rs`: the joiner pops its own job back off its
//! deque unless a thief stole it); here the child keeps its own identity.
//!
//! # Protocol
//!
//! 1. Not in the `shared-library` build (a thread with a thread pointer of
//!    its own must run with it: see `join_inline`). In a runtime section on a
//!    processor, with no priority levels or CPU
//!    budgets in the runtime (`Processor::policies`: their accounting is
//!    done at switches, which an inline run does not make), and with at
//!    least [`INLINE_STACK_SHARE`] of the child's stack size left below the
//!    joiner's stack pointer.
//! 2. **Take back.** From the next slot with one compare-exchange against a
//!    thief's (`slot.rs`, [`RawSlot::take_back`], loom-checked), else from
//!    the head of the fresh part (`queue.rs`, `take_fresh_if`; crossbeam's
//!    owner pop against a steal). Exactly one of the joiner and a thief gets
//!    the child; a joiner that loses joins as before (`join_park`).
//! 3. A child that has started (it parked and was woken) or that has a stack
//!    of its own (a size other than the runtime's, mapped at spawn) goes
//!    back to the next slot and the join parks as before.
//! 4. **Lend the stack.** The joiner's `Stack` moves into the child's stack
//!    cell (its registry slot now names the child), the child becomes the
//!    processor's `current` (the joiner's reference stays in this frame), a
//!    `Switched` event is emitted, and the section ends.
//! 5. The body and its thread-local destructors run, preemptible, as on a
//!    stack of the child's own. The child may park, be preempted and be
//!    resumed on another processor: its saved context then lies on the
//!    joiner's stack, which moves with it; the joiner, suspended in this
//!    frame below it, moves along.
//! 6. **Return.** In a new section on whichever processor runs it now
//!    (rejoining one first if it was detached by a blocking call), the child
//!    completes (`lifecycle.rs`; nobody else joins it, so nobody is woken),
//!    gives the stack back to the joiner, emits `Exited` and `Switched` back,
//!    and the joiner is `current` again. `join` then finds it complete.
//!
//! # What an inline child may observe differently
//!
//! `current()`, its id and name, its thread-locals (`LocalKey`), its panic
//! (caught and returned by `join`), its events, preemption and every
//! blocking primitive are its own, as on its own stack. What differs:
//! - it runs on its joiner's stack, below the joiner's frames: it has at
//!   least [`INLINE_STACK_SHARE`] of its stack size left, not the whole of it
//!   (a thread that needs its whole stack is given an explicit
//!   `Builder::stack_size`, which is never inlined); an overflow names the
//!   child and the joiner's stack's size;
//! - `stack_usage()` reports the joiner's stack, pages the joiner touched
//!   included;
//! - it starts at once, on the joiner's processor, rather than when the
//!   scheduler picks it; while it runs, the joiner is neither parked nor
//!   runnable (a deadlock report lists the child, not the joiner).

use super::{here, Here, Processor};
use crate::event::{Detection, Event};
use crate::task::{Task, TaskRef, WaitReason};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

#[cfg(doc)]
use crate::slot::RawSlot;

/// The share of a child's stack size that must be left on its joiner's stack
/// for the child to run there (1/2): a fork-join tree run depth-first nests
/// one inline child per level, each a few hundred bytes of frames, so half of
/// a default 64 KiB stack holds a recursion far deeper than any balanced
/// tree, and a child that needs more finds the guard the same way it would
/// on a stack of half its size.
pub(crate) const INLINE_STACK_SHARE: f64 = 0.5;

/// Runs `target`, a thread the caller is about to join, inline if the
/// protocol above allows; returns whether it did (it is then complete).
#[inline(never)]
pub(crate) fn join_inline(target: &Task) -> bool {
    // The `shared-library` build never runs a thread inline (step 1): its
    // threads may carry a thread pointer of their own
    // (`Builder::thread_pointer`), which only their first switch loads
    // (`arch::init_stack`); run here, on the joiner's, a C thread would read
    // and write its joiner's `errno` and TLS. (Its spawns map every stack
    // eagerly, so step 3 refused them too; this keeps the rule if that
    // changes.)
    if cfg!(feature = "shared-library") {
        return false;
    }
    let Some(entered) = super::enter() else { return false };
    let vp = entered.processor();
    // The section is closed by hand below, on each path (step 4 hands the
    // processor to the child before it ends).
    std::mem::forget(entered);
    let Some(child) = take_back(vp, target) else { return false };
    // SAFETY: the child came out of our queue, so it is ours: its context and
    // stack cell are read by nobody else.
    let (started, own_stack) =
        unsafe { (!(*child.ctx.get()).is_null(), (*child.stack.get()).is_some()) };
    if started || own_stack {
        vp.schedule_next(child);
        super::Machine::lower_here();
        return false;
    }
    // SAFETY: only this kernel thread touches `current`; the joiner is it.
    let joiner = unsafe { (*vp.current.get()).take() }.expect("a join on a user thread");
    // SAFETY: the joiner's stack cell is touched only by the joiner (us) and
    // its exit; the child's is ours (above). Nothing runs on either but us.
    unsafe {
        let stack = (*joiner.stack.get()).take().expect("a running thread has its stack");
        stack.set_owner(NonNull::from(&*child).as_ptr());
        *child.stack.get() = Some(stack);
    }
    joiner.set_wait_reason(WaitReason::Join(child.id));
    child.host.store(joiner.as_ptr().as_ptr(), Ordering::Release);
    let child_ptr = child.as_ptr();
    let (from, to) = (joiner.id, child.id);
    vp.emit(|| Event::Switched { from: Some(from), to: Some(to), processor: vp.index });
    // SAFETY: as above for `current`; it is empty.
    unsafe { *vp.current.get() = Some(child) };
    super::Machine::lower_here();

    // The body, as `entry.rs` runs it: user code, preemptible.
    {
        // SAFETY: the child is kept alive by the `current` slot of whichever
        // processor runs it (and by the caller's handle).
        let child = unsafe { child_ptr.as_ref() };
        child.run_body();
        crate::hooks::destroy_locals(child);
    }

    let vp = loop {
        match here() {
            Here::Processor(vp) => break vp,
            // Detached by a blocking call: take a processor back first.
            Here::Detached(d) => {
                drop(d);
                crate::hooks::rejoin(Detection::Transparent);
            }
            Here::Os => unreachable!("an inline child runs on a user thread"),
        }
    };
    // SAFETY: only this kernel thread touches `current`, which holds the
    // child (the running thread: us).
    let running = unsafe { (*vp.current.get()).take() }.expect("the inline child runs");
    debug_assert_eq!(running.as_ptr(), child_ptr);
    // SAFETY: the child's stack cell is the running child's (us) and the
    // joiner's is empty and only the joiner's.
    unsafe {
        let stack = (*running.stack.get()).take().expect("the child runs on the lent stack");
        stack.set_owner(joiner.as_ptr().as_ptr());
        *joiner.stack.get() = Some(stack);
    }
    let id = running.id;
    running.host.store(std::ptr::null_mut(), Ordering::Relaxed);
    // The completion drops the running reference; the caller's handle keeps
    // the task alive, and nobody else can have registered as its joiner.
    let c = running.into_raw();
    // SAFETY: alive (the handle).
    let done = unsafe { c.as_ref() }.state.complete();
    debug_assert!(!done.joiner_waits && !done.last, "the joiner holds the handle");
    vp.emit(|| Event::Exited { thread: id, processor: vp.index });
    vp.emit(|| Event::Switched { from: Some(id), to: Some(joiner.id), processor: vp.index });
    // As a rejoin does: the policies see the change (a CPU-time stint the
    // child started when it asked for its time ends here, while the child
    // is alive).
    vp.set_current(joiner);
    drop(vp);
    true
}

/// Steps 1 and 2: `target` out of this processor's next slot or fresh queue,
/// if the inline path applies and a thief has not taken it. Closes the
/// section when it returns `None`.
#[inline]
fn take_back(vp: &Processor, target: &Task) -> Option<TaskRef> {
    let found = (|| {
        if vp.policies.load(Ordering::Relaxed) {
            return None;
        }
        let joiner = vp.current_task()?;
        // SAFETY: the joiner is the running thread (us); its stack cell is ours.
        let low = unsafe { (*joiner.stack.get()).as_ref() }?.guard_range().end;
        let here = &low as *const usize as usize;
        let need = target.stack_size.load(Ordering::Relaxed) as f64 * INLINE_STACK_SHARE;
        if (here.saturating_sub(low) as f64) < need {
            return None;
        }
        let want = NonNull::from(target);
        if vp.queue.slot_used() && vp.lifo().peek() == want.as_ptr() {
            if let Some(t) = vp.lifo().take_back(want, !vp.solo) {
                return Some(t);
            }
        }
        vp.queue.take_fresh_if(target)
    })();
    if found.is_none() {
        super::Machine::lower_here();
    }
    found
}
