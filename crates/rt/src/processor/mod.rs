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
//! The code is split by role, as tokio splits its scheduler: this file holds
//! the processor itself, its scheduler loop (search, steal, sleep) and
//! shutdown; `switch.rs` every context switch of a user thread (the pending
//! actions, yield, park, join, wake); `entry.rs` a user thread's first and
//! last moments; `spawn.rs` the one function that creates user threads.
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

mod entry;
mod spawn;
mod switch;

pub(crate) use self::spawn::{spawn, SpawnOptions, Target};
use self::switch::Pending;
pub(crate) use self::switch::{
    join_park, park_current, park_unlocking, unpark_sync, unpark_user, wake_queued, yield_current,
};

use crate::arch::StackPointer;
use crate::event::{Event, Hook};
use crate::queue::RunQueue;
use crate::runtime::{Shared, SharedRef};
use crate::stack::{Stack, StackPool};
use crate::task::{self, BlockCache, Task, TaskRef, ThreadId, ID_BLOCK};
use crossbeam_deque::Steal;
use std::cell::{Cell, UnsafeCell};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
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

    // --- the scheduler context: loop, search, steal, shutdown ---

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
