//! Virtual processors: the kernel threads that run user threads, their
//! scheduler loop, and every context switch the runtime makes.
//!
//! Each processor (`Processor`) owns, and alone touches: its FIFO run queue
//! (`queue.rs`: a private part, and a shared part others steal from), the
//! user thread it runs (`current`), a pending action (below), its scheduler
//! context (the kernel thread's own stack, where it searches, steals and
//! sleeps), its pool of stacks, and a "no preemption here" counter that the
//! preemption issue will consult from its timer signal handler. A thread-local
//! pointer finds the processor of the calling kernel thread.
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
//! # The scheduler loop
//!
//! The scheduler context takes work from, in order: the local queue (with the
//! injection queue and timers polled every [`MAINTENANCE_INTERVAL`]
//! decisions, so neither starves), then — having nothing — searches: due
//! timers, the injection queue, and the other processors' queues (stealing
//! half). A searcher that finds nothing for the configured spin time goes to
//! sleep on its futex following the protocol in `idle.rs`; the last processor
//! to fall asleep with no timer pending runs the deadlock check.
//!
//! # Shutdown
//!
//! 1. `Runtime::drop` sets `shutdown` and unparks every processor.
//! 2. A processor sees the flag in its scheduler context (user threads that
//!    yield are sent there: `next_local` returns nothing once the flag is
//!    set), moves its queued threads to the injection queue, frees its stack
//!    pool and exits.
//! 3. `Runtime::drop` joins the kernel threads and frees what is left (see
//!    `runtime.rs`). A user thread that never reaches a switch point keeps
//!    its processor, and the drop, waiting: scheduling is cooperative.

use crate::arch::{self, StackPointer};
use crate::event::{Event, Hook};
use crate::park::Kind;
use crate::queue::RunQueue;
use crate::runtime::{Shared, SharedRef};
use crate::stack::{Stack, StackPool};
use crate::task::{self, BlockCache, Joiner, Task, TaskRef, ThreadId, WaitReason, ID_BLOCK};
use crossbeam_deque::Steal;
use std::cell::{Cell, UnsafeCell};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Scheduling decisions between two polls of the injection queue and timers
/// (a prime, as in Go and tokio, so it does not resonate with user patterns).
const MAINTENANCE_INTERVAL: u32 = 61;

/// How many injected threads a processor moves to its own queue at one scheduling decision
/// (see `Processor::drain_injector`).
const INJECT_DRAIN: usize = 256;

/// Stacks a processor keeps for reuse. Enough for a burst of a thousand
/// threads to recycle its stacks on its own processor: at 256, three
/// quarters of such a burst went through the depot's lock and back
/// (spawn+join in batches of 1000: 45.9 -> 44.1 ns). Pooled stacks keep only
/// the pages their threads touched resident.
const STACK_POOL_CAP: usize = 1024;

thread_local! {
    /// The processor run by this kernel thread, or null.
    static CURRENT: Cell<*const Processor> = const { Cell::new(std::ptr::null()) };
}

/// The processor of the calling kernel thread, as a raw pointer.
///
/// Never inlined: a user thread calling this before and after a context
/// switch may be on two different kernel threads, and the thread-local
/// address must be computed afresh each time.
#[inline(never)]
fn current_raw() -> *const Processor {
    CURRENT.with(Cell::get)
}

/// The processor of the calling kernel thread.
///
/// # Safety
///
/// The reference must not be used after the calling user thread switches
/// away (it may resume on another processor, and this one may be gone).
#[inline]
pub(crate) unsafe fn current<'a>() -> Option<&'a Processor> {
    // SAFETY: the pointer is set by the processor's kernel thread to a
    // `Processor` that outlives every context it runs; the caller keeps the
    // reference within the current stint on this kernel thread.
    unsafe { current_raw().as_ref() }
}

/// What the next context must do with the thread that just left (step 2 of
/// the switching protocol).
enum Pending {
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
enum Leave {
    Yield,
    Park(Kind),
    Join(NonNull<Task>),
    ParkUnlock(NonNull<AtomicBool>),
}

/// One virtual processor. See the module docs for what it owns.
pub(crate) struct Processor {
    pub(crate) index: usize,
    /// The runtime has this one processor only (nobody steals, nobody idles).
    solo: bool,
    pub(crate) shared: Arc<Shared>,
    hook: Option<Hook>,
    queue: RunQueue,
    current: UnsafeCell<Option<TaskRef>>,
    pending: UnsafeCell<Pending>,
    sched_ctx: UnsafeCell<StackPointer>,
    /// Where an exiting thread's last switch saves a context nobody resumes.
    exit_ctx: UnsafeCell<StackPointer>,
    pool: UnsafeCell<StackPool>,
    /// Free task blocks (`task.rs`).
    blocks: BlockCache,
    /// Task references to `shared` this processor holds (`runtime.rs`,
    /// `Shared`, "Lifetime").
    credits: Cell<usize>,
    /// Nesting depth of regions that must not be preempted (read by the
    /// future preemption signal handler on this same kernel thread).
    pub(crate) no_preempt: AtomicU32,
    tick: Cell<u32>,
    ids: Cell<(u64, u64)>,
    rng: Cell<u64>,
}

impl Processor {
    fn new(index: usize, shared: Arc<Shared>, queue: RunQueue) -> Processor {
        Processor {
            index,
            solo: shared.nprocs == 1,
            hook: shared.hook.clone(),
            pool: UnsafeCell::new(StackPool::new(shared.stack_size, STACK_POOL_CAP)),
            shared,
            queue,
            current: UnsafeCell::new(None),
            pending: UnsafeCell::new(Pending::None),
            sched_ctx: UnsafeCell::new(std::ptr::null_mut()),
            exit_ctx: UnsafeCell::new(std::ptr::null_mut()),
            blocks: BlockCache::default(),
            credits: Cell::new(0),
            no_preempt: AtomicU32::new(0),
            tick: Cell::new(0),
            ids: Cell::new((0, 0)),
            rng: Cell::new(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1)),
        }
    }

    /// The value every switch made by this processor passes on.
    #[inline]
    fn as_pass(&self) -> *mut u8 {
        (self as *const Processor).cast_mut().cast()
    }

    /// Enters a region the (future) preemption signal must not interrupt.
    ///
    /// Only this kernel thread writes the counter and only a signal handler on
    /// this same thread will read it, so a plain load and store suffice: a
    /// `fetch_add` would be a locked instruction (~6 ns) on every switch.
    #[inline]
    fn enter_no_preempt(&self) {
        let n = self.no_preempt.load(Ordering::Relaxed);
        self.no_preempt.store(n + 1, Ordering::Relaxed);
    }

    /// Leaves a region entered with [`Processor::enter_no_preempt`].
    #[inline]
    fn exit_no_preempt(&self) {
        let n = self.no_preempt.load(Ordering::Relaxed);
        self.no_preempt.store(n - 1, Ordering::Relaxed);
    }

    #[inline]
    fn emit(&self, e: impl FnOnce() -> Event) {
        if let Some(h) = &self.hook {
            h(&e());
        }
    }

    /// The running user thread, if any.
    #[inline]
    fn current_task(&self) -> Option<&Task> {
        // SAFETY: `current` is only replaced by this kernel thread, in the
        // switch paths, which hold no other reference to it; the task it
        // holds stays alive at least until the next switch.
        unsafe { (*self.current.get()).as_deref() }
    }

    /// The running user thread's address, if any.
    #[inline]
    pub(crate) fn current_task_ptr(&self) -> Option<NonNull<Task>> {
        self.current_task().map(NonNull::from)
    }

    /// A fresh thread identifier (from this processor's block).
    #[inline]
    pub(crate) fn next_id(&self) -> ThreadId {
        let (mut next, mut end) = self.ids.get();
        if next == end {
            next = task::reserve_ids(ID_BLOCK);
            end = next + ID_BLOCK;
        }
        self.ids.set((next + 1, end));
        ThreadId::from_u64(next).expect("ids start at 1")
    }

    /// A counted reference to this processor's runtime for a new task,
    /// from the processor's credits.
    #[inline]
    fn task_ref(&self) -> SharedRef {
        let mut c = self.credits.get();
        if c == 0 {
            self.shared.acquire_refs(CREDIT_BATCH);
            c = CREDIT_BATCH;
        }
        self.credits.set(c - 1);
        // SAFETY: the credit just taken is the counted reference.
        unsafe { SharedRef::counted(&self.shared) }
    }

    /// Returns the processor's credits to `task_refs` (at exit).
    fn return_credits(&self) {
        let c = self.credits.replace(0);
        // SAFETY: the processor owns its `c` credits; `self.shared` (an
        // `Arc`) keeps `Shared` alive beyond this call.
        unsafe { Shared::release_refs(NonNull::from(&*self.shared), c) };
    }

    /// This processor's cache of task blocks.
    #[inline]
    pub(crate) fn blocks(&self) -> &BlockCache {
        &self.blocks
    }

    /// A stack of `size` bytes, from the pool when it has that size.
    #[inline]
    pub(crate) fn stack(&self, size: usize) -> io::Result<Stack> {
        // SAFETY: the pool is touched only by this kernel thread, and not
        // re-entrantly (no user code runs while it is borrowed).
        let pool = unsafe { &mut *self.pool.get() };
        // SAFETY: the registry lives in `Shared`, which outlives every stack
        // of the runtime (`runtime.rs`).
        unsafe {
            if pool.stack_size() == size {
                pool.get(&self.shared.depot, &self.shared.registry)
            } else {
                Stack::new_registered(size, &self.shared.registry)
            }
        }
    }

    /// Makes `t` runnable on this processor and, with other processors
    /// around, lets an idle one know.
    #[inline]
    pub(crate) fn schedule(&self, t: TaskRef) {
        if self.enqueue(t) {
            self.shared.notify();
        }
    }

    /// Queues a saved, runnable thread on this processor: privately when no
    /// other processor exists to take it (see `queue.rs`), else where
    /// thieves can. Returns `true` if the caller should let an idle
    /// processor know.
    #[inline]
    fn enqueue(&self, t: TaskRef) -> bool {
        if self.solo {
            self.queue.push_private(t);
            false
        } else {
            self.queue.push_shared(t);
            true
        }
    }

    /// Next thread to run, from the local queue (task or scheduler context).
    #[inline]
    fn next_local(&self) -> Option<TaskRef> {
        // A countdown rather than a modulo: one decrement and a test.
        let left = self.tick.get();
        if left == 0 {
            self.tick.set(MAINTENANCE_INTERVAL);
            if self.shared.shutdown.load(Ordering::Relaxed) {
                return None;
            }
            self.maintenance();
        } else {
            self.tick.set(left - 1);
        }
        if !self.shared.injector.is_empty() {
            self.drain_injector();
        }
        match self.queue.pop() {
            Some(t) => Some(t),
            None => self.pull_injector(),
        }
    }

    #[cold]
    fn maintenance(&self) {
        self.shared.timers.fire(|t| self.wake_timer(t));
        if !self.shared.injector.is_empty() {
            if let Some(t) = self.pull_injector() {
                self.queue.push_shared(t);
            }
        }
    }

    fn pull_injector(&self) -> Option<TaskRef> {
        if self.shared.injector.is_empty() {
            return None;
        }
        loop {
            match self.shared.injector.steal_batch_and_pop(self.queue.shared()) {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
                Steal::Retry => {}
            }
        }
    }

    /// Moves what waits in the injection queue to the tail of the local queue, so a thread
    /// that yields goes behind threads spawned or woken from outside rather than ahead of
    /// them. Without this, those waited for the next maintenance poll (61 decisions): three
    /// threads spawned together from outside, yielding every millisecond, ran as u1/u2 alone
    /// for 61 ms before u3 first ran (timeline scenario 11). Go's `Gosched` puts the
    /// yielder on the global queue for the same reason. Cost when nothing was injected: the
    /// `is_empty` check in `next_local`, two loads of a line nobody writes.
    #[cold]
    fn drain_injector(&self) {
        for _ in 0..INJECT_DRAIN {
            match self.shared.injector.steal() {
                Steal::Success(t) => {
                    // Other processors were told when the thread was injected.
                    let _ = self.enqueue(t);
                }
                Steal::Empty => break,
                Steal::Retry => {}
            }
        }
    }

    /// A timer fired for `t` (which the heap held a reference to).
    fn wake_timer(&self, t: TaskRef) {
        let ptr = NonNull::from(&*t);
        drop(t);
        // SAFETY: the sleeping task waits for exactly this `Sync` token, so it
        // is alive until it is delivered (park.rs).
        unsafe { unpark_sync(ptr) };
    }

    /// Runs the pending action left by the context that switched to us.
    #[inline]
    fn run_pending(&self) {
        // SAFETY: only this kernel thread touches `pending`, and not re-entrantly.
        if !matches!(unsafe { &*self.pending.get() }, Pending::None) {
            self.run_pending_action();
        }
    }

    #[inline(never)]
    fn run_pending_action(&self) {
        // SAFETY: only this kernel thread touches `pending`, and not re-entrantly.
        let pending = unsafe { std::mem::replace(&mut *self.pending.get(), Pending::None) };
        match pending {
            Pending::None => {}
            Pending::Requeue(t) => self.queue.push_shared(t),
            Pending::Park(t, kind) => {
                let id = t.id;
                let raw = t.into_raw();
                // SAFETY: `raw` is the reference we own. If `commit` parks the
                // thread, the park word owns that reference from now on and we
                // do not touch `raw` again.
                if unsafe { raw.as_ref() }.park.commit(kind) {
                    self.emit(|| Event::Parked { thread: id, processor: self.index });
                } else {
                    // SAFETY: not parked: the reference is still ours.
                    self.enqueue(unsafe { TaskRef::from_raw(raw) });
                }
            }
            Pending::Join(t, target) => {
                let id = t.id;
                let raw = t.into_raw();
                // SAFETY: the joiner holds the `JoinHandle` of `target` on
                // its (saved) stack, so `target` is alive; we are the only
                // writer of `joiner` (task.rs), and publish it with the CAS.
                let target = unsafe { target.as_ref() };
                // SAFETY: as above.
                unsafe { *target.joiner.get() = Joiner::Task(raw) };
                // Set before the CAS: once it succeeds the joiner may be
                // woken, and its waker clears the flag.
                // SAFETY: `raw` is the joiner, alive (we hold its reference).
                unsafe { raw.as_ref() }.parked_in_queue.store(true, Ordering::Relaxed);
                if target.state.register_joiner() {
                    // The state word owns the reference now; `target` may be
                    // gone from here on.
                    self.emit(|| Event::Parked { thread: id, processor: self.index });
                } else {
                    // Completed meanwhile: it never looks at `joiner`.
                    // SAFETY: not parked: the reference is still ours.
                    unsafe { raw.as_ref() }.parked_in_queue.store(false, Ordering::Relaxed);
                    // SAFETY: as above.
                    self.enqueue(unsafe { TaskRef::from_raw(raw) });
                }
            }
            Pending::ParkUnlock(t, lock) => {
                let id = t.id;
                // The queue entry owns the reference from now on (wait.rs).
                let raw = t.into_raw();
                // SAFETY: alive: nobody can dequeue and wake it before the
                // unlock below.
                unsafe { raw.as_ref() }.parked_in_queue.store(true, Ordering::Relaxed);
                self.emit(|| Event::Parked { thread: id, processor: self.index });
                // SAFETY: the lock the thread held when it switched away;
                // its queue is alive while a waiter is registered in it.
                unsafe { crate::spin::unlock_word(lock) };
            }
            Pending::Exit(stack) => {
                // The thread has switched away for the last time: nobody runs
                // on its stack any more.
                // SAFETY: as in `stack`.
                unsafe { (*self.pool.get()).put(stack, &self.shared.depot) };
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
        let next = self.next_local();
        if leave == Leave::Yield && next.is_none() && !self.shared.shutdown.load(Ordering::Relaxed)
        {
            // Nothing else to run: keep going (unless shutting down, when the
            // scheduler context must get the processor back).
            return None;
        }
        // SAFETY: only this kernel thread touches `current`.
        let cur = unsafe { (*self.current.get()).take() }.expect("switch_away on a user thread");
        let save = cur.ctx.get();
        let from = cur.id;
        let load = match next {
            Some(n) => {
                // SAFETY: `n` came out of a run queue, so its context was saved
                // and published (step 3) and nobody else resumes it.
                let sp = unsafe { *n.ctx.get() };
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
                // SAFETY: the scheduler context is suspended while a user
                // thread runs on this processor; its pointer is ours to read.
                unsafe { *self.sched_ctx.get() }
            }
        };
        let pending = match leave {
            // Kept private: queued now, nothing pending (module docs).
            Leave::Yield if self.solo => {
                self.queue.push_private(cur);
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
        self.enter_no_preempt();
        Some((save, load))
    }

    /// Runs `t` from the scheduler context until it switches back here.
    fn run_task(&self, t: TaskRef) {
        // SAFETY: `t` came out of a run queue: saved, published, ours.
        let load = unsafe { *t.ctx.get() };
        self.emit(|| Event::Switched { from: None, to: Some(t.id), processor: self.index });
        // SAFETY: only this kernel thread touches `current`.
        unsafe { *self.current.get() = Some(t) };
        self.enter_no_preempt();
        // SAFETY: `sched_ctx` belongs to this processor; `load` as above.
        // What comes back is `self` again: only this processor resumes its
        // scheduler context.
        unsafe { arch::switch(self.sched_ctx.get(), load, self.as_pass()) };
        // The scheduler context never migrates: `self` is still ours.
        self.exit_no_preempt();
        self.run_pending();
    }

    /// The scheduler loop of the processor's kernel thread.
    fn run(&self) {
        while !self.shared.shutdown.load(Ordering::Acquire) {
            if let Some(t) = self.next_local().or_else(|| self.search()) {
                self.run_task(t);
            }
        }
    }

    /// Looks for work until some turns up, or shutdown; sleeps in between.
    fn search(&self) -> Option<TaskRef> {
        let shared = &*self.shared;
        let idle = &shared.idle;
        let first = idle.start_searching() == 0;
        // Only one processor spins at a time; the others sleep at once.
        let mut spin_until = first.then(|| Instant::now() + shared.spin);
        loop {
            if let Some(t) = self.steal_round() {
                if idle.stop_searching() {
                    shared.notify();
                }
                return Some(t);
            }
            if shared.shutdown.load(Ordering::Acquire) {
                idle.stop_searching();
                return None;
            }
            if spin_until.is_some_and(|u| Instant::now() < u) {
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
                continue;
            }
            // Sleep, following idle.rs.
            idle.prepare_sleep(self.index);
            if let Some(t) = self.steal_round() {
                idle.cancel_sleep(self.index);
                shared.wait_for_check();
                return Some(t);
            }
            if shared.shutdown.load(Ordering::Acquire) {
                idle.cancel_sleep(self.index);
                return None;
            }
            let timeout = shared.timers.until_next();
            if timeout.is_none() && shared.deadlock_detection && idle.sleeping() == shared.nprocs {
                shared.check_deadlock();
            }
            shared.parkers[self.index].park(timeout);
            idle.after_wake(self.index);
            shared.wait_for_check();
            spin_until = Some(Instant::now() + shared.spin);
        }
    }

    /// One look at every source of work.
    fn steal_round(&self) -> Option<TaskRef> {
        if let Some(t) = self.queue.pop() {
            return Some(t);
        }
        self.shared.timers.fire(|t| self.wake_timer(t));
        if let Some(t) = self.queue.pop() {
            return Some(t);
        }
        if let Some(t) = self.pull_injector() {
            return Some(t);
        }
        let stealers = &self.shared.stealers;
        let n = stealers.len();
        if n > 1 {
            let start = self.random() as usize % n;
            for k in 0..n {
                let victim = (start + k) % n;
                if victim == self.index {
                    continue;
                }
                loop {
                    match stealers[victim].steal_batch_and_pop(self.queue.shared()) {
                        Steal::Success(t) => return Some(t),
                        Steal::Empty => break,
                        Steal::Retry => {}
                    }
                }
            }
        }
        None
    }

    fn random(&self) -> u64 {
        // xorshift64: only spreads the choice of steal victims.
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        x
    }

    /// Shutdown step 2.
    fn shut_down(&self) {
        for t in self.queue.drain() {
            self.shared.injector.push(t);
        }
        // SAFETY: only this kernel thread touches the pool.
        let pool = std::mem::replace(unsafe { &mut *self.pool.get() }, StackPool::new(0, 0));
        drop(pool);
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
unsafe fn after_switch(vp: *mut u8) {
    // SAFETY: by the contract above, a live processor of this kernel thread;
    // the reference is dropped before any further switch.
    let vp = unsafe { &*vp.cast_const().cast::<Processor>() };
    vp.exit_no_preempt();
    vp.run_pending();
}

/// Body of a processor's kernel thread.
pub(crate) fn processor_main(index: usize, shared: Arc<Shared>, queue: RunQueue) {
    let _altstack = crate::guard::AltStack::install();
    let vp = Processor::new(index, shared, queue);
    CURRENT.with(|c| c.set(&vp));
    vp.emit(|| Event::NewProcessor { processor: index });
    vp.run();
    vp.shut_down();
    CURRENT.with(|c| c.set(std::ptr::null()));
    vp.return_credits();
}

/// Drops a task's reference to its runtime, on `vp` (the calling
/// processor, if any).
#[inline]
pub(crate) fn release_task_ref(r: SharedRef, vp: Option<&Processor>) {
    r.release_on(vp);
}

/// Task references a processor takes from `task_refs` at a time.
const CREDIT_BATCH: usize = 256;

/// Takes back `r`, a task's reference to its runtime, as a credit of `vp`
/// (the calling processor) if it runs that runtime (no atomic operation).
/// Returns `false` if the caller must release it atomically.
#[inline]
pub(crate) fn take_back_ref(r: &SharedRef, vp: Option<&Processor>) -> bool {
    match vp {
        Some(vp) if r.is(&vp.shared) => {
            let c = vp.credits.get() + 1;
            if c > 2 * CREDIT_BATCH {
                // Keep at most two batches; hand one back. We still hold
                // CREDIT_BATCH + 1, so this never releases the last one.
                // SAFETY: the processor owns these credits.
                unsafe { Shared::release_refs(NonNull::from(&*vp.shared), CREDIT_BATCH) };
                vp.credits.set(c - CREDIT_BATCH);
            } else {
                vp.credits.set(c);
            }
            true
        }
        _ => false,
    }
}

/// Where every user thread starts (on its own stack, via the trampoline).
unsafe extern "C" fn task_entry(passed: *mut u8, _arg: *mut u8) -> ! {
    // SAFETY: `passed` is the processor that switched to us.
    unsafe { after_switch(passed) };
    // SAFETY: as above; `passed` is not used after the body (it may run on
    // other processors by then).
    let task = unsafe { &*passed.cast_const().cast::<Processor>() }
        .current_task_ptr()
        .expect("task_entry runs a user thread");
    let (vp, stack, id) = run_body(task);
    // SAFETY: `run_body` returns the processor it completed on, and nothing
    // switches in between.
    exit_current(unsafe { &*vp }, stack, id)
}

/// Runs the current thread's closure and its user-thread-local destructors,
/// then completes it (`lifecycle.rs`): hands the result to its joiner and
/// drops the running reference, freeing the task if that was the last.
/// Returns the thread's stack, which it still runs on, for the exit switch.
/// May switch any number of times before the completion, never after.
#[inline(never)]
fn run_body(task: NonNull<Task>) -> (*const Processor, Stack, ThreadId) {
    {
        // SAFETY: the running thread is kept alive by the `current` slot of
        // whichever processor runs it, until it completes below.
        let task = unsafe { task.as_ref() };
        task.run_body();
        crate::local::destroy_all(task);
    }
    // SAFETY: used before any further switch.
    let vp = unsafe { current() }.expect("a user thread runs on a processor");
    // The running reference: `complete` drops it. From here the exit never
    // touches the task again, except as `complete` allows.
    // SAFETY: only this kernel thread touches `current`.
    let running = unsafe { (*vp.current.get()).take() }.expect("exit on a user thread");
    debug_assert_eq!(running.as_ptr(), task);
    let raw = running.into_raw();
    // SAFETY: alive until `complete` below.
    let t = unsafe { raw.as_ref() };
    let id = t.id;
    // SAFETY: only the task itself and its exit touch its stack.
    let stack = unsafe { (*t.stack.get()).take() }.expect("a running thread owns its stack");
    stack.set_owner(std::ptr::null());
    let c = t.state.complete();
    if c.joiner_waits {
        // SAFETY: the joiner wrote `joiner` before registering, which we saw
        // with acquire; it holds the handle, so the task is alive here.
        match unsafe { *t.joiner.get() } {
            // SAFETY: registered and not yet woken; woken only here.
            Joiner::Waiter(w) => unsafe { w.wake() },
            Joiner::Task(j) => {
                // SAFETY: the state word owned this reference to the parked
                // joiner (task.rs); it is ours now.
                let j = unsafe { TaskRef::from_raw(j) };
                j.parked_in_queue.store(false, Ordering::Relaxed);
                make_runnable_on(Some(vp), j);
            }
            Joiner::None => unreachable!("a waiting joiner with no joiner registered"),
        }
    } else if c.last {
        // SAFETY: the last reference (the handle is gone); the task's stack
        // is out of it, so freeing it leaves the stack we run on alone.
        unsafe { Task::free(raw) };
    }
    (vp, stack, id)
}

/// The last switch of a user thread, which has completed (`run_body`) and
/// hands its stack to the next context for recycling.
fn exit_current(vp: &Processor, stack: Stack, id: ThreadId) -> ! {
    vp.emit(|| Event::Exited { thread: id, processor: vp.index });
    let load = match vp.next_local() {
        Some(n) => {
            // SAFETY: `n` came out of a run queue: saved, published, ours.
            let sp = unsafe { *n.ctx.get() };
            vp.emit(|| Event::Switched { from: Some(id), to: Some(n.id), processor: vp.index });
            // SAFETY: only this kernel thread touches `current` (empty now).
            unsafe { *vp.current.get() = Some(n) };
            sp
        }
        None => {
            vp.emit(|| Event::Switched { from: Some(id), to: None, processor: vp.index });
            // SAFETY: the scheduler context is suspended while a user thread
            // runs on this processor.
            unsafe { *vp.sched_ctx.get() }
        }
    };
    // The stack we still run on goes back to this processor's pool now if
    // it can stay there: only this kernel thread takes stacks from the pool,
    // and it does so only after the switch below. Otherwise (it would spill
    // to the shared depot, or be unmapped) the next context recycles it.
    // SAFETY: the pool is touched only by this kernel thread, not re-entrantly.
    if let Err(stack) = unsafe { (*vp.pool.get()).put_local(stack) } {
        // SAFETY: only this kernel thread touches `pending`; it is empty.
        unsafe { std::ptr::write(vp.pending.get(), Pending::Exit(stack)) };
    }
    vp.enter_no_preempt();
    // SAFETY: `load` is a saved context nobody else resumes; our own context
    // is never resumed, so it is saved into the processor's scratch slot.
    unsafe { arch::switch(vp.exit_ctx.get(), load, vp.as_pass()) };
    unreachable!("an exited user thread was resumed")
}

/// The running user thread, or `None` on an OS thread (or a scheduler context).
#[inline]
pub(crate) fn current_task_ptr() -> Option<NonNull<Task>> {
    // SAFETY: used right away.
    unsafe { current() }.and_then(|vp| vp.current_task()).map(NonNull::from)
}

/// A counted reference to the running user thread.
pub(crate) fn current_task_ref() -> Option<TaskRef> {
    // SAFETY: used right away.
    let vp = unsafe { current() }?;
    // SAFETY: as in `Processor::current_task`.
    unsafe { (*vp.current.get()).clone() }
}

/// The processor of the calling kernel thread, read inline, for the entry
/// points of the switch path.
///
/// # Safety
///
/// Besides the contract of [`current`]: the calling function must be
/// `#[inline(never)]` and must not look up the processor again after it
/// switches, so that no thread-local address computed here is reused on
/// another kernel thread (see the module docs). This saves a call on the
/// hottest paths.
#[inline(always)]
unsafe fn current_at_entry<'a>() -> Option<&'a Processor> {
    // SAFETY: as in `current`.
    unsafe { CURRENT.with(Cell::get).as_ref() }
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
fn yield_prepare() -> YieldTo {
    let null = std::ptr::null_mut();
    // SAFETY: `vp` is not used after this function returns, and the switch
    // happens in the caller; an entry point.
    match unsafe { current_at_entry() } {
        Some(vp) if vp.current_task().is_some() => match vp.prepare_switch(Leave::Yield) {
            Some((save, load)) => YieldTo { save, load, pass: vp.as_pass() },
            // On a user thread, but nothing to switch to.
            None => YieldTo { save: NonNull::dangling().as_ptr(), load: null, pass: null },
        },
        _ => YieldTo { save: std::ptr::null_mut(), load: null, pass: null },
    }
}

/// Parks the running user thread until a token of `kind` (park.rs).
///
/// Never inlined: see "Return prediction" in the module docs.
#[inline(never)]
pub(crate) fn park_current(kind: Kind, reason: WaitReason) {
    // SAFETY: `vp` is not used after `switch_away`; an entry point.
    let vp = unsafe { current_at_entry() }.expect("park_current on a user thread");
    let task = vp.current_task().expect("park_current on a user thread");
    if task.park.try_take(kind) {
        return;
    }
    task.set_wait_reason(reason);
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
fn join_prepare(target: &Task) -> YieldTo {
    const NOT_A_USER_THREAD: YieldTo = YieldTo {
        save: std::ptr::null_mut(),
        load: std::ptr::null_mut(),
        pass: std::ptr::null_mut(),
    };
    // SAFETY: `vp` is not used after this function returns, and the switch
    // happens in the caller; an entry point.
    match unsafe { current_at_entry() } {
        Some(vp) => match vp.current_task() {
            Some(task) => {
                task.set_wait_reason(WaitReason::Join(target.id));
                let (save, load) = vp
                    .prepare_switch(Leave::Join(NonNull::from(target)))
                    .expect("a join always switches");
                YieldTo { save, load, pass: vp.as_pass() }
            }
            None => NOT_A_USER_THREAD,
        },
        None => NOT_A_USER_THREAD,
    }
}

/// Parks the running user thread, registered in a wait queue whose spin lock
/// (`lock`) it holds; the lock is released after the switch (wait.rs).
///
/// Never inlined: see "Return prediction" in the module docs.
#[inline(never)]
pub(crate) fn park_unlocking(lock: NonNull<AtomicBool>, reason: WaitReason) {
    // SAFETY: `vp` is not used after `switch_away`; an entry point.
    let vp = unsafe { current_at_entry() }.expect("park_unlocking on a user thread");
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
fn make_runnable(t: TaskRef) {
    // SAFETY: used right away.
    make_runnable_on(unsafe { current() }, t);
}

/// [`make_runnable`], with the calling processor (if any) looked up.
#[inline]
fn make_runnable_on(vp: Option<&Processor>, t: TaskRef) {
    match vp {
        Some(vp) if t.shared.is(&vp.shared) => {
            vp.emit(|| Event::Unparked { thread: t.id, processor: Some(vp.index) });
            vp.schedule(t);
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

/// Creates a user thread of the runtime `shared` running `f`, and makes it
/// runnable. Returns the task (already registered and queued).
pub(crate) fn spawn_task<F, T>(
    shared: &Arc<Shared>,
    name: Option<String>,
    stack_size: Option<usize>,
    f: F,
) -> io::Result<TaskRef>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: spawning never switches; `vp` is used only in this call.
    let vp = unsafe { current() }.filter(|vp| Arc::ptr_eq(&vp.shared, shared));
    spawn_task_on(vp, shared, name, stack_size, f)
}

/// [`spawn_task`] for a caller that has looked up the calling processor:
/// `vp` must be it if it runs `shared`'s runtime, else `None`.
#[inline]
pub(crate) fn spawn_task_on<F, T>(
    vp: Option<&Processor>,
    shared: &Arc<Shared>,
    name: Option<String>,
    stack_size: Option<usize>,
    f: F,
) -> io::Result<TaskRef>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    debug_assert!(vp.is_none_or(|vp| Arc::ptr_eq(&vp.shared, shared)));
    let size = stack_size.map_or(shared.stack_size, crate::stack::rounded_size);
    let stack = match vp {
        Some(vp) => vp.stack(size)?,
        // SAFETY: as in `Processor::stack`.
        None => unsafe { Stack::new_registered(size, &shared.registry)? },
    };
    let top = stack.top();
    debug_assert!(stack.size() > arch::INIT_STACK_BYTES);
    let id = match vp {
        Some(vp) => vp.next_id(),
        None => ThreadId::from_u64(task::reserve_ids(1)).expect("ids start at 1"),
    };
    let shared_ref = match vp {
        Some(vp) => vp.task_ref(),
        None => {
            shared.acquire_refs(1);
            // SAFETY: just counted.
            unsafe { SharedRef::counted(shared) }
        }
    };
    let (task, queued) = Task::allocate(
        id,
        name.map(String::into_boxed_str),
        shared_ref,
        stack,
        f,
        vp.map(Processor::blocks),
    );
    // SAFETY: `top` is the aligned end of the task's fresh stack, which it
    // owns until it exits; `task_entry` never returns. Nobody else sees the
    // task yet, so writing its context is unshared.
    unsafe { *task.ctx.get() = arch::init_stack(top, task_entry, std::ptr::null_mut()) };
    // SAFETY: nobody else sees the task yet.
    if let Some(stack) = unsafe { (*task.stack.get()).as_ref() } {
        stack.set_owner(task.as_ptr().as_ptr());
    }
    let event = || Event::Spawned { thread: id, processor: vp.map(|vp| vp.index) };
    match vp {
        Some(vp) => {
            vp.emit(event);
            vp.schedule(queued);
        }
        None => {
            if let Some(h) = &shared.hook {
                h(&event());
            }
            shared.inject(queued);
        }
    }
    Ok(task)
}

/// The guard-page range, name and stack size of the running user thread, for
/// the overflow handler. Async-signal-safe: reads only.
pub(crate) fn overflow_info() -> Option<(std::ops::Range<usize>, Option<&'static str>, usize, u64)>
{
    let vp = CURRENT.with(Cell::get);
    if vp.is_null() {
        return None;
    }
    // SAFETY: a signal on this kernel thread interrupts user code of the
    // running task; the processor and its current task are alive meanwhile.
    // The `'static` name is only used before the handler aborts the process.
    unsafe {
        let task = (*(*vp).current.get()).as_deref()?;
        let guard = (*task.stack.get()).as_ref()?.guard_range();
        let name: Option<&'static str> = task.name.as_deref().map(|s| &*(s as *const str));
        Some((guard, name, task.stack_size, task.id.as_u64()))
    }
}
