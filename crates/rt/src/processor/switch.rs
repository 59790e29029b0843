//! The context switches of user threads: the pending-action protocol, yield, park and join.
//!
//! # Switching: the pending-action hand-off
//!
//! A user thread that stops running (yield, park, exit) must not become
//! visible to other processors before its registers are saved, or another
//! processor could resume it from a stale stack pointer. So the switch is
//! done in three steps:
//! 1. The leaving thread `A` picks the next context `B` (a thread from the
//!    local queue, or the processor's scheduler context), stores "what to do
//!    with `A`" as the processor's pending action, and calls `arch::switch`,
//!    which saves `A`'s registers and stack pointer.
//! 2. `B` starts running on the same kernel thread. The first thing every
//!    resumed context does (`after_switch`, also at the top of a new
//!    thread's entry and after the scheduler's own switches) is run the
//!    pending action: push `A` to the shared run queue (`Requeue`), commit
//!    its park on its park word (`Park`, park.rs), register it in the state
//!    word of the thread it joins (`Join`, lifecycle.rs), release the lock
//!    of the wait queue it registered in (`ParkUnlock`, wait.rs), or recycle
//!    the stack of an exited thread (`Exit`).
//! 3. Only now can `A` be seen by others; the queue push, the park or state
//!    word, or the lock release publishes its saved context with release
//!    ordering.
//!
//! An exiting thread completes (hands its result over and drops its own
//! reference, `lifecycle.rs`) *before* its last switch, having taken its
//! stack out of the task: the task may be freed at once by its joiner, and
//! the last switch saves into a scratch slot of the processor, touching only
//! the stack, which the pending `Exit` then recycles.
//!
//! A yield that keeps `A` in the *private* part of the run queue skips the
//! pending action: nobody but this processor can see that part, and this
//! processor looks at it again only after the switch has saved `A`. So a
//! yield on a runtime of one processor (the only kind with a private part)
//! queues `A` *before* the switch and leaves nothing pending, and the resumed
//! context's `after_switch` is one test of an empty slot.
//!
//! A user thread migrates between processors, so code on a user thread must
//! not keep a reference to "its" processor across a switch. The switch itself
//! hands the resumed context the processor it now runs on (`arch::switch`
//! passes a value; every switch passes the processor that makes it, and a
//! switch never leaves its kernel thread). Elsewhere the thread-local pointer
//! is read through a function the compiler cannot inline (LLVM may otherwise
//! reuse a thread-local address computed before a switch, on the old kernel
//! thread), except at the top of the `#[inline(never)]` entry points of the
//! switch path, which never read it again (`current_at_entry`).
//!
//! # Return prediction
//!
//! After a switch, the resumed thread returns through *its* frames while the
//! CPU's return-stack predictor still holds the *leaving* thread's return
//! addresses, so every return whose address differs between the two call
//! chains is mispredicted (~6.5 ns each here: see `arch/x86_64.rs`, whose
//! switch therefore resumes with a predicted jump rather than a return). An
//! `#[inline]` function is compiled into each codegen unit that calls it, so
//! two user threads yielding from two places used to run two copies of the
//! switch path, with two or three mispredicted returns per switch (yield:
//! 26.5 ns per switch; 9.2 ns when both threads yield from the same
//! instruction). So:
//! - the park paths — [`park_current`], [`park_unlocking`],
//!   [`Processor::switch_away`] — exist in exactly one copy
//!   (`#[inline(never)]`), so a thread resumed by another that parked the
//!   same way only misses its return into the user's own code;
//! - a yield does its bookkeeping out of line ([`yield_prepare`]) but its
//!   switch inline, in the frame of the caller of `yield_now`
//!   ([`yield_current`]), so two threads yielding in loops switch straight
//!   from one loop to the other with no return at all (yield: 15.4 ns per
//!   switch before, with the yield going through `switch_away`); a join's
//!   park does the same in `JoinHandle::join` ([`join_park`]).
//!

use super::{here_raw, HereRaw, Processor};
use crate::arch::{self, StackPointer};
use crate::event::Event;
use crate::park::Kind;
use crate::stack::Stack;
use crate::task::{Joiner, Task, TaskRef, WaitReason};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the next context must do with the thread that just left (step 2 of
/// the switching protocol). `repr(u8)`: an explicit tag byte, which
/// `run_pending_action` dispatches on directly (with the compiler's niche
/// layout the tag was decoded with four more instructions per hand-off).
#[repr(u8)]
pub(crate) enum Pending {
    None,
    Requeue(TaskRef),
    Park(TaskRef, Kind),
    /// Park the thread in the state word of the task it joins (task.rs,
    /// lifecycle.rs).
    Join(TaskRef, NonNull<Task>),
    /// The thread is registered in a wait queue whose spin lock it holds:
    /// mark it parked and unlock (wait.rs).
    ParkUnlock(TaskRef, NonNull<AtomicBool>),
    /// Recycle the stack of a thread that has exited.
    Exit(Stack),
}

/// What the leaving thread asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leave {
    Yield,
    Park(Kind),
    Join(NonNull<Task>),
    ParkUnlock(NonNull<AtomicBool>),
}

impl Processor {
    /// Runs the pending action left by the context that switched to us.
    #[inline]
    fn run_pending(&self) {
        // SAFETY: only this kernel thread touches `pending`, and not re-entrantly.
        if !matches!(unsafe { &*self.pending.get() }, Pending::None) {
            self.run_pending_action();
        }
    }

    /// Takes the pending action field by field, each with a load of the size
    /// the leaving context stored it with, and completes it in the arm that
    /// read it. A `mem::replace` of the whole enum compiled to 16-byte and
    /// 8-byte loads spanning several smaller stores made just before the
    /// switch, which the CPU cannot forward from its store buffer: each such
    /// load waited for the stores to reach the cache (a park's hand-off cost
    /// 10% more for it). Rebuilding the enum from the fields and passing it
    /// on did the same once the enum grew (LLVM copied it whole through the
    /// stack, one 16-byte load and a second jump table), so each arm calls
    /// its own completion.
    #[inline(never)]
    fn run_pending_action(&self) {
        let slot = self.pending.get();
        let home = Some(self);
        // SAFETY: only this kernel thread touches `pending`, and not
        // re-entrantly. Each field is moved out with `ptr::read` and the slot
        // is overwritten with `None` before anything can read it again, so
        // nothing is dropped twice.
        unsafe {
            match &*slot {
                Pending::None => {}
                Pending::Requeue(t) => {
                    let t = std::ptr::read(t);
                    std::ptr::write(slot, Pending::None);
                    leave_requeue(t, home);
                }
                Pending::Park(t, kind) => {
                    let (t, kind) = (std::ptr::read(t), *kind);
                    std::ptr::write(slot, Pending::None);
                    leave_park(t, kind, home);
                }
                Pending::Join(t, target) => {
                    let (t, target) = (std::ptr::read(t), *target);
                    std::ptr::write(slot, Pending::None);
                    leave_join(t, target, home);
                }
                Pending::ParkUnlock(t, lock) => {
                    let (t, lock) = (std::ptr::read(t), *lock);
                    std::ptr::write(slot, Pending::None);
                    leave_park_unlock(t, lock, home);
                }
                Pending::Exit(stack) => {
                    let stack = std::ptr::read(stack);
                    std::ptr::write(slot, Pending::None);
                    leave_exit(stack, home);
                }
            }
        }
    }

    /// Switches from the running user thread to the next context (steps 1 and
    /// 2 of the module docs). For `Leave::Yield` with nothing else to run,
    /// returns at once.
    ///
    /// Never inlined, and so are its callers [`park_current`] and
    /// [`join_park`]: see "Return prediction" in the module docs.
    #[inline(never)]
    fn switch_away(&self, leave: Leave) {
        let Some((save, load)) = self.prepare_switch(leave) else { return };
        // SAFETY: `save` points into the leaving task, kept alive by the
        // pending action (or the private queue) until after the switch;
        // `load` is a saved context nobody else resumes (see
        // `prepare_switch`).
        let vp = unsafe { arch::switch(save, load, self.as_pass()) };
        // Resumed, perhaps on another kernel thread: `self` may be stale, and
        // `vp` is the processor that resumed us.
        // SAFETY: every switch passes the processor making it (`as_pass`).
        unsafe { after_switch(vp) };
    }

    /// Step 1 of the switching protocol for the running user thread: picks
    /// the next context and settles what becomes of the leaving one. Returns
    /// where to save the leaving context and the context to load, or `None`
    /// for a yield with nothing else to run (the caller goes on).
    #[inline(always)]
    fn prepare_switch(&self, leave: Leave) -> Option<(*mut StackPointer, StackPointer)> {
        debug_assert!(std::ptr::eq(self.machine(), crate::machine::Machine::here_fresh()));
        debug_assert!(std::ptr::eq(crate::machine::Machine::here_fresh().processor(), self));
        let next = if leave == Leave::Yield && self.solo {
            if !self.decision_begins() {
                None
            } else if let Some(to) = self.yield_plain() {
                return Some(to);
            } else {
                self.decide()
            }
        } else {
            self.next_local()
        };
        if leave == Leave::Yield && next.is_none() && !self.halt.load(Ordering::Relaxed) {
            // Nothing else to run: keep going (unless shutting down or
            // removed, when the scheduler context must get the processor back).
            return None;
        }
        // SAFETY: only this kernel thread touches `current`.
        let cur = unsafe { (*self.current.get()).take() }.expect("switch_away on a user thread");
        let save = cur.ctx.get();
        let from = cur.id;
        let load = match next {
            Some(n) => {
                // `n` came out of a run queue: its context was saved and
                // published (step 3), or it has not started.
                let sp = self.context_of(&n);
                self.emit(|| Event::Switched {
                    from: Some(from),
                    to: Some(n.id),
                    processor: self.index,
                });
                // SAFETY: as above for `current`.
                unsafe { *self.current.get() = Some(n) };
                sp
            }
            None => {
                self.emit(|| Event::Switched { from: Some(from), to: None, processor: self.index });
                self.in_user.store(false, Ordering::Relaxed);
                // SAFETY: the scheduler context of the machine running this
                // processor is suspended while a user thread runs here.
                unsafe { *self.machine().sched_ctx.get() }
            }
        };
        let pending = match leave {
            // Kept private: queued now, nothing pending (module docs).
            Leave::Yield if self.solo => {
                // A thread of another level goes to its level's queue, which
                // only this processor takes from (the only one).
                if let Some(cur) = self.divert(cur, false) {
                    self.queue.push_private(cur);
                }
                None
            }
            Leave::Yield => Some(Pending::Requeue(cur)),
            Leave::Park(kind) => Some(Pending::Park(cur, kind)),
            Leave::Join(target) => Some(Pending::Join(cur, target)),
            Leave::ParkUnlock(lock) => Some(Pending::ParkUnlock(cur, lock)),
        };
        if let Some(pending) = pending {
            // SAFETY: only this kernel thread touches `pending`; it is empty
            // (every resumed context empties it first), so nothing is lost.
            unsafe { std::ptr::write(self.pending.get(), pending) };
        }
        Some((save, load))
    }

    /// The yield of a one-processor runtime in the common case — no levels,
    /// nothing in the next slot, another thread in the private queue: the
    /// oldest thread comes out and the leaving one goes to the back
    /// ([`RunQueue::rotate`](crate::queue::RunQueue::rotate)), with
    /// nothing pending (module docs). Called once the decision has begun
    /// ([`Processor::decision_begins`]). `None`: not that case, nothing
    /// changed, and the caller decides as usual.
    #[inline(always)]
    fn yield_plain(&self) -> Option<(*mut StackPointer, StackPointer)> {
        if !self.plain() {
            return None;
        }
        // SAFETY: only this kernel thread touches `current`.
        let current = unsafe { &mut *self.current.get() };
        let cur = current.take().expect("yield_plain on a user thread");
        let save = cur.ctx.get();
        let from = cur.id;
        match self.queue.rotate(cur) {
            Ok(next) => {
                // `next` came out of the run queue (saved, or not started).
                let load = self.context_of(&next);
                let to = next.id;
                // `current` is empty: nothing to drop (and no call to drop it).
                std::mem::forget(current.replace(next));
                self.emit(|| Event::Switched {
                    from: Some(from),
                    to: Some(to),
                    processor: self.index,
                });
                // Counted by the decision (`decision_begins`).
                Some((save, load))
            }
            Err(cur) => {
                // Alone: the caller finds the queue empty again.
                *current = Some(cur);
                None
            }
        }
    }

    /// Sends the running user thread back to this processor's queue and
    /// switches to the scheduler context (not to the next queued thread):
    /// a thread preempted on a removed processor (`runtime.rs`, "Resizing",
    /// step 2), whose scheduler context then retires it with the rest of
    /// the queue. The caller has opened a section, which the context
    /// resumed after the switch ends. A copy of `prepare_switch`'s
    /// scheduler-context case, so the hot paths do not test for it.
    #[cold]
    #[inline(never)]
    pub(crate) fn yield_to_scheduler(&self) {
        // SAFETY: only this kernel thread touches `current`.
        let cur = unsafe { (*self.current.get()).take() }.expect("a user thread");
        let save = cur.ctx.get();
        let from = cur.id;
        self.emit(|| Event::Switched { from: Some(from), to: None, processor: self.index });
        self.in_user.store(false, Ordering::Relaxed);
        // SAFETY: the scheduler context of the machine running this
        // processor is suspended while a user thread runs here.
        let load = unsafe { *self.machine().sched_ctx.get() };
        self.count_switch();
        // SAFETY: only this kernel thread touches `pending`; it is empty.
        unsafe { std::ptr::write(self.pending.get(), Pending::Requeue(cur)) };
        // SAFETY: as in `switch_away`: `save` is kept alive by the pending
        // action, `load` is suspended and resumed by nobody else.
        let vp = unsafe { arch::switch(save, load, self.as_pass()) };
        // SAFETY: every switch passes the processor making it.
        unsafe { after_switch(vp) };
    }

    /// Runs `t` from the scheduler context until it switches back here.
    pub(super) fn run_task(&self, t: TaskRef) {
        // The section starts before `current` is set: the signal handler
        // takes a processor with a current thread and no open section for
        // one interrupted in that thread's code.
        let m = self.machine();
        m.raise();
        // `t` came out of a run queue: saved and published, or not started.
        let load = self.context_of(&t);
        self.emit(|| Event::Switched { from: None, to: Some(t.id), processor: self.index });
        // SAFETY: only this kernel thread touches `current`.
        unsafe { *self.current.get() = Some(t) };
        self.count_switch();
        self.in_user.store(true, Ordering::Relaxed);
        // SAFETY: `sched_ctx` belongs to this machine; `load` as above.
        let passed = unsafe { arch::switch(m.sched_ctx.get(), load, self.as_pass()) };
        // The scheduler context never migrates: `m` is still ours. Its
        // processor may have changed, or be gone (`blocking.rs`).
        if passed.is_null() {
            // A detached user thread left this kernel thread.
            crate::hooks::after_detached_leave(m);
            return;
        }
        // SAFETY: every switch passes the processor making it.
        unsafe { after_switch(passed) };
    }
}

/// Step 2 of the switching protocol: does what the leaving thread asked for.
/// `home` is the processor of the resuming context, or `None` when a detached
/// user thread left its kernel thread (`blocking.rs`): then a thread that
/// stays runnable goes to the runtime's injection queue. The `leave_*`
/// functions below are its arms, always inlined, so each caller gets a copy
/// specialised for its `home` (the processor's is on the path of every park).
pub(crate) fn complete_leave(pending: Pending, home: Option<&Processor>) {
    match pending {
        Pending::None => {}
        Pending::Requeue(t) => leave_requeue(t, home),
        Pending::Park(t, kind) => leave_park(t, kind, home),
        Pending::Join(t, target) => leave_join(t, target, home),
        Pending::ParkUnlock(t, lock) => leave_park_unlock(t, lock, home),
        Pending::Exit(stack) => leave_exit(stack, home),
    }
}

/// A thread that stays runnable: to `home`'s queue, else the injection queue.
#[inline(always)]
fn requeue(t: TaskRef, home: Option<&Processor>) {
    match home {
        Some(vp) => {
            vp.enqueue(t);
        }
        None => {
            // Our own reference: `t` may be run and freed by the time
            // `inject` wakes a processor.
            let shared = t.shared.clone_counted();
            shared.inject(t);
        }
    }
}

#[inline(always)]
fn emit_on(home: Option<&Processor>, e: impl FnOnce(usize) -> Event) {
    if let Some(vp) = home {
        vp.emit(|| e(vp.index));
    }
}

/// [`Pending::Requeue`].
#[inline(always)]
fn leave_requeue(t: TaskRef, home: Option<&Processor>) {
    match home {
        Some(vp) => {
            if let Some(t) = vp.divert(t, false) {
                vp.queue.push_shared(t);
            }
        }
        None => requeue(t, None),
    }
}

/// [`Pending::Park`].
#[inline(always)]
fn leave_park(t: TaskRef, kind: Kind, home: Option<&Processor>) {
    let id = t.id;
    let raw = t.into_raw();
    // SAFETY: `raw` is the reference we own. If `commit` parks the thread,
    // the park word owns that reference from now on and we do not touch
    // `raw` again.
    if unsafe { raw.as_ref() }.park.commit(kind) {
        emit_on(home, |processor| Event::Parked { thread: id, processor });
    } else {
        // SAFETY: not parked: the reference is still ours.
        requeue(unsafe { TaskRef::from_raw(raw) }, home);
    }
}

/// [`Pending::Join`].
#[inline(always)]
fn leave_join(t: TaskRef, target: NonNull<Task>, home: Option<&Processor>) {
    let id = t.id;
    let raw = t.into_raw();
    // SAFETY: the joiner holds the `JoinHandle` of `target` on its (saved)
    // stack, so `target` is alive; we are the only writer of `joiner`
    // (task.rs), and publish it with the CAS.
    let target = unsafe { target.as_ref() };
    // SAFETY: as above.
    unsafe { *target.joiner.get() = Joiner::Task(raw) };
    // Set before the CAS: once it succeeds the joiner may be woken, and its
    // waker clears the flag.
    // SAFETY: `raw` is the joiner, alive (we hold its reference).
    unsafe { raw.as_ref() }.parked_in_queue.store(true, Ordering::Relaxed);
    if target.state.register_joiner() {
        // The state word owns the reference now; `target` may be gone from
        // here on.
        emit_on(home, |processor| Event::Parked { thread: id, processor });
    } else {
        // Completed meanwhile: it never looks at `joiner`.
        // SAFETY: not parked: the reference is still ours.
        unsafe { raw.as_ref() }.parked_in_queue.store(false, Ordering::Relaxed);
        // SAFETY: as above.
        requeue(unsafe { TaskRef::from_raw(raw) }, home);
    }
}

/// [`Pending::ParkUnlock`].
#[inline(always)]
fn leave_park_unlock(t: TaskRef, lock: NonNull<AtomicBool>, home: Option<&Processor>) {
    let id = t.id;
    // The queue entry owns the reference from now on (wait.rs).
    let raw = t.into_raw();
    // SAFETY: alive: nobody can dequeue and wake it before the unlock below.
    unsafe { raw.as_ref() }.parked_in_queue.store(true, Ordering::Relaxed);
    emit_on(home, |processor| Event::Parked { thread: id, processor });
    // SAFETY: the lock the thread held when it switched away; its queue is
    // alive while a waiter is registered in it.
    unsafe { crate::spin::unlock_word(lock) };
}

/// [`Pending::Exit`].
#[inline(always)]
fn leave_exit(stack: Stack, home: Option<&Processor>) {
    match home {
        // The thread has switched away for the last time: nobody runs on its
        // stack any more.
        // SAFETY: as in `Processor::stack`.
        Some(vp) => unsafe { (*vp.pool.get()).put(stack, &vp.shared.depot) },
        None => drop(stack),
    }
}

/// Step 2 of the switching protocol, for a context that just resumed.
///
/// # Safety
///
/// `vp` must be the value the switch to this context passed, which is always
/// the processor that made it ([`Processor::as_pass`]): a switch never leaves
/// its kernel thread, so that is the processor the context now runs on. No
/// thread-local lookup is needed, which matters on the hottest path.
#[inline]
pub(crate) unsafe fn after_switch(vp: *mut u8) {
    // SAFETY: by the contract above, a live processor of this kernel thread;
    // the reference is dropped before any further switch.
    let vp = unsafe { &*vp.cast_const().cast::<Processor>() };
    debug_assert!(
        std::ptr::eq(vp.machine(), crate::machine::Machine::here_fresh()),
        "resumed by processor {} whose machine is not this kernel thread's",
        vp.index
    );
    if vp.policies.load(Ordering::Relaxed) {
        vp.policy_switch();
    }
    vp.run_pending();
    #[cfg(feature = "shared-library")]
    let notify = crate::hooks::resumed(vp);
    // The section the leaving context raised ends here (`machine.rs`).
    crate::machine::Machine::lower_here();
    #[cfg(feature = "shared-library")]
    if notify {
        crate::hooks::run_hook();
    }
}

/// Gives up the processor to the next runnable thread, if any. Returns
/// `false` on an OS thread.
///
/// Always inlined, so that with `yield_now` the switch itself lands in the
/// caller's own frame: see "Return prediction" in the module docs.
#[inline(always)]
pub(crate) fn yield_current() -> bool {
    yield_prepare().switch_here()
}

/// Yields the calling user thread unless it is inside a runtime section
/// (where a switch would break the section's hand-over). Returns `false`,
/// doing nothing, on an OS thread or inside a section.
#[inline(never)]
pub(crate) fn yield_if_free() -> bool {
    let m = crate::machine::Machine::here_fresh();
    // A stale answer (read on one kernel thread, used on another) only
    // makes the caller spin once more: a section, if open, pins us here.
    if m.guard_word() != 0
        || (m.processor().is_null() && m.detached.load(Ordering::Relaxed).is_null())
    {
        return false;
    }
    yield_current()
}

/// What `yield_prepare` or `join_prepare` settled: where to save the leaving
/// context, the context to load, and the value to pass (the processor). A
/// null `save`: not on a user thread; a null `load`: nothing else to run.
#[repr(C)]
pub(crate) struct YieldTo {
    save: *mut StackPointer,
    load: StackPointer,
    pass: *mut u8,
}

impl YieldTo {
    /// Makes the switch settled, in the caller's frame (always inlined; see
    /// "Return prediction" in the module docs). Returns `false` if not on a
    /// user thread (nothing done).
    #[inline(always)]
    pub(crate) fn switch_here(self) -> bool {
        if self.save.is_null() {
            return false;
        }
        if !self.load.is_null() {
            // SAFETY: as in `Processor::switch_away`, which the `*_prepare`
            // functions stand for up to the switch.
            let vp = unsafe { arch::switch(self.save, self.load, self.pass) };
            // SAFETY: every switch passes the processor making it.
            unsafe { after_switch(vp) };
        }
        true
    }
}

/// Everything a yield does before its switch (one copy, out of line).
#[inline(never)]
#[link_section = "schedlab_rt_np"]
fn yield_prepare() -> YieldTo {
    let null = std::ptr::null_mut();
    // SAFETY: `vp` is not used after this function returns, and the switch
    // happens in the caller; an entry point. The raised section is handed to
    // the context the caller switches to, or ended here.
    match here_raw() {
        HereRaw::Processor(vp) if vp.current_task().is_some() => {
            match vp.prepare_switch(Leave::Yield) {
                Some((save, load)) => YieldTo { save, load, pass: vp.as_pass() },
                // On a user thread, but nothing to switch to.
                None => {
                    crate::machine::Machine::lower_here();
                    YieldTo { save: NonNull::dangling().as_ptr(), load: null, pass: null }
                }
            }
        }
        HereRaw::Processor(_) => {
            crate::machine::Machine::lower_here();
            YieldTo { save: std::ptr::null_mut(), load: null, pass: null }
        }
        HereRaw::Detached(m) => {
            crate::hooks::rejoin_in(m, crate::event::Detection::Transparent);
            YieldTo { save: NonNull::dangling().as_ptr(), load: null, pass: null }
        }
        HereRaw::Os => YieldTo { save: std::ptr::null_mut(), load: null, pass: null },
    }
}

/// Parks the running user thread until a token of `kind` (park.rs).
///
/// Never inlined: see "Return prediction" in the module docs.
#[inline(never)]
#[link_section = "schedlab_rt_np"]
pub(crate) fn park_current(kind: Kind, reason: WaitReason) {
    let vp = match here_raw() {
        HereRaw::Processor(vp) => vp,
        HereRaw::Detached(m) => return crate::hooks::detached_park(m, kind, reason),
        HereRaw::Os => panic!("park_current outside a user thread"),
    };
    let task = vp.current_task().expect("park_current on a user thread");
    if task.park.try_take(kind) {
        crate::machine::Machine::lower_here();
        return;
    }
    task.set_wait_reason(reason);
    crate::ring::event(crate::ring::Event::Park, task.id.as_u64());
    vp.switch_away(Leave::Park(kind));
}

/// Parks the running user thread in the state word of `target` until it
/// completes (the protocol in task.rs and lifecycle.rs). Returns `false`,
/// doing nothing, on an OS thread.
///
/// Always inlined: the switch lands in the joiner's frame, like a yield's
/// (see "Return prediction" in the module docs): a joiner woken by the exit
/// of the thread it joins used to return through three frames the exited
/// thread's calls had not pushed, each return a misprediction.
#[inline(always)]
pub(crate) fn join_park(target: &Task) -> bool {
    join_prepare(target).switch_here()
}

/// Everything a join's park does before its switch (one copy, out of line).
#[inline(never)]
#[link_section = "schedlab_rt_np"]
fn join_prepare(target: &Task) -> YieldTo {
    const NOT_A_USER_THREAD: YieldTo = YieldTo {
        save: std::ptr::null_mut(),
        load: std::ptr::null_mut(),
        pass: std::ptr::null_mut(),
    };
    // SAFETY: `vp` is not used after this function returns, and the switch
    // happens in the caller; an entry point.
    match here_raw() {
        HereRaw::Processor(vp) => match vp.current_task() {
            Some(task) => {
                task.set_wait_reason(WaitReason::Join(target.id));
                let (save, load) = vp
                    .prepare_switch(Leave::Join(NonNull::from(target)))
                    .expect("a join always switches");
                YieldTo { save, load, pass: vp.as_pass() }
            }
            None => {
                crate::machine::Machine::lower_here();
                NOT_A_USER_THREAD
            }
        },
        HereRaw::Detached(m) => {
            crate::hooks::detached_join(m, target);
            YieldTo {
                save: NonNull::dangling().as_ptr(),
                load: std::ptr::null_mut(),
                pass: std::ptr::null_mut(),
            }
        }
        HereRaw::Os => NOT_A_USER_THREAD,
    }
}

/// Parks the running user thread, registered in a wait queue whose spin lock
/// (`lock`) it holds; the lock is released after the switch (wait.rs).
///
/// Never inlined: see "Return prediction" in the module docs.
#[inline(never)]
#[link_section = "schedlab_rt_np"]
pub(crate) fn park_unlocking(lock: NonNull<AtomicBool>, reason: WaitReason) {
    let vp = match here_raw() {
        HereRaw::Processor(vp) => vp,
        HereRaw::Detached(m) => return crate::hooks::detached_park_unlocking(m, lock, reason),
        HereRaw::Os => panic!("park_unlocking outside a user thread"),
    };
    vp.current_task().expect("park_unlocking on a user thread").set_wait_reason(reason);
    vp.switch_away(Leave::ParkUnlock(lock));
}

/// Wakes `t`, parked in a wait queue it was just dequeued from (wait.rs).
///
/// # Safety
///
/// `t` must be parked through [`park_unlocking`], and dequeued by the
/// caller, which takes over the reference the queue held.
#[inline]
pub(crate) unsafe fn wake_queued(t: NonNull<Task>) {
    // SAFETY: the caller's guarantee.
    let t = unsafe { TaskRef::from_raw(t) };
    t.parked_in_queue.store(false, Ordering::Relaxed);
    make_runnable(t);
}

/// Delivers a `Sync` token to `t` and schedules it if it was parked.
///
/// # Safety
///
/// `t` must be alive: in practice, it waits for exactly this token.
#[inline]
pub(crate) unsafe fn unpark_sync(t: NonNull<Task>) {
    // SAFETY: alive by the caller's guarantee; we touch it only through the
    // atomic delivery, and afterwards only if we own the parked reference.
    if unsafe { t.as_ref() }.park.unpark(Kind::Sync) {
        // SAFETY: `unpark` returned true: the park word's reference is ours.
        make_runnable(unsafe { TaskRef::from_raw(t) });
    }
}

/// Delivers a `User` token to `t` and schedules it if it was parked.
pub(crate) fn unpark_user(t: &TaskRef) {
    if t.park.unpark(Kind::User) {
        // SAFETY: `unpark` returned true: the park word's reference is ours.
        make_runnable(unsafe { TaskRef::from_raw(t.as_ptr()) });
    }
}

/// Queues a thread that was just unparked: on the calling processor if it
/// belongs to the thread's runtime, else on the runtime's injection queue.
///
/// On a detached user thread (`blocking.rs`) the section stays open while it
/// injects, as on a processor: a rejoin request landing in the middle of the
/// injection queue's push would otherwise switch the thread away with a slot
/// of the queue reserved and unwritten, and put the thread itself in the
/// queue behind it — where a lone processor would wait for that slot
/// forever (seen under the stress test on one processor with transparent
/// blocking).
pub(crate) fn make_runnable(t: TaskRef) {
    // Like `spawn`: the light section in the common case, `here` for the rest.
    match super::enter() {
        Some(vp) => make_runnable_on(Some(&vp), t),
        None => {
            let _section = super::here();
            make_runnable_on(None, t);
        }
    }
}

/// [`make_runnable`], with the calling processor (if any) looked up.
#[inline]
pub(super) fn make_runnable_on(vp: Option<&Processor>, t: TaskRef) {
    crate::ring::event(crate::ring::Event::Unpark, t.id.as_u64());
    match vp {
        Some(vp) if t.shared.is(&vp.shared) => {
            vp.emit(|| Event::Unparked { thread: t.id, processor: Some(vp.index) });
            vp.schedule_next(t);
        }
        _ => {
            if let Some(h) = &t.shared.hook {
                h(&Event::Unparked { thread: t.id, processor: None });
            }
            // Our own reference: `t` may be run and freed by the time
            // `inject` wakes a processor.
            let shared = t.shared.clone_counted();
            shared.inject(t);
        }
    }
}
