//! Virtual processors: the kernel threads that run user threads, their
//! scheduler loop, and every context switch the runtime makes.
//!
//! Each processor (`Processor`) owns, and alone touches: its FIFO run queue
//! (the `crossbeam_deque::Worker`; others steal through its `Stealer`), the
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
//!    with `A`" as the processor's pending action (requeue, park, exit), and
//!    calls `arch::switch`, which saves `A`'s registers and stack pointer.
//! 2. `B` starts running on the same kernel thread. The first thing every
//!    resumed context does (`after_switch`, also at the top of a new
//!    thread's entry and after the scheduler's own switches) is run the
//!    pending action: push `A` to the run queue, commit its park (`park.rs`),
//!    or recycle its stack.
//! 3. Only now can `A` be seen by others; the queue push or the park word
//!    publishes its saved context with release ordering.
//!
//! A user thread migrates between processors, so code on a user thread must
//! not keep a reference to "its" processor across a switch. The switch itself
//! hands the resumed context the processor it now runs on (`arch::switch`
//! passes a value; every switch passes the processor that makes it, and a
//! switch never leaves its kernel thread). Elsewhere the thread-local pointer
//! is read through a function the compiler cannot inline (LLVM may otherwise
//! reuse a thread-local address computed before a switch, on the old kernel
//! thread).
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
use crate::runtime::Shared;
use crate::stack::{Stack, StackPool};
use crate::task::{
    self, Task, TaskRef, ThreadId, WaitReason, ID_BLOCK, JOIN_COMPLETE, JOIN_WAITING,
};
use crossbeam_deque::{Steal, Worker};
use std::cell::{Cell, UnsafeCell};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Scheduling decisions between two polls of the injection queue and timers
/// (a prime, as in Go and tokio, so it does not resonate with user patterns).
const MAINTENANCE_INTERVAL: u32 = 61;

/// Stacks a processor keeps for reuse.
const STACK_POOL_CAP: usize = 256;

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
    Exit(TaskRef),
}

/// What the leaving thread asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leave {
    Yield,
    Park(Kind),
    Exit,
}

/// One virtual processor. See the module docs for what it owns.
pub(crate) struct Processor {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    hook: Option<Hook>,
    worker: Worker<TaskRef>,
    current: UnsafeCell<Option<TaskRef>>,
    pending: UnsafeCell<Pending>,
    sched_ctx: UnsafeCell<StackPointer>,
    pool: UnsafeCell<StackPool>,
    /// Nesting depth of regions that must not be preempted (read by the
    /// future preemption signal handler on this same kernel thread).
    pub(crate) no_preempt: AtomicU32,
    tick: Cell<u32>,
    ids: Cell<(u64, u64)>,
    rng: Cell<u64>,
}

impl Processor {
    fn new(index: usize, shared: Arc<Shared>, worker: Worker<TaskRef>) -> Processor {
        Processor {
            index,
            hook: shared.hook.clone(),
            pool: UnsafeCell::new(StackPool::new(shared.stack_size, STACK_POOL_CAP)),
            shared,
            worker,
            current: UnsafeCell::new(None),
            pending: UnsafeCell::new(Pending::None),
            sched_ctx: UnsafeCell::new(std::ptr::null_mut()),
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

    /// A stack of `size` bytes, from the pool when it has that size.
    #[inline]
    pub(crate) fn stack(&self, size: usize) -> io::Result<Stack> {
        // SAFETY: the pool is touched only by this kernel thread, and not
        // re-entrantly (no user code runs while it is borrowed).
        let pool = unsafe { &mut *self.pool.get() };
        if pool.stack_size() == size {
            pool.get(&self.shared.depot)
        } else {
            Stack::new(size)
        }
    }

    /// Makes `t` runnable on this processor and, with other processors
    /// around, lets an idle one know.
    #[inline]
    pub(crate) fn schedule(&self, t: TaskRef) {
        self.worker.push(t);
        if self.shared.nprocs > 1 {
            self.shared.notify();
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
        match self.worker.pop() {
            Some(t) => Some(t),
            None => self.pull_injector(),
        }
    }

    #[cold]
    fn maintenance(&self) {
        self.shared.timers.fire(|t| self.wake_timer(t));
        if !self.shared.injector.is_empty() {
            if let Some(t) = self.pull_injector() {
                self.worker.push(t);
            }
        }
    }

    fn pull_injector(&self) -> Option<TaskRef> {
        if self.shared.injector.is_empty() {
            return None;
        }
        loop {
            match self.shared.injector.steal_batch_and_pop(&self.worker) {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
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
        let pending = unsafe { std::mem::replace(&mut *self.pending.get(), Pending::None) };
        match pending {
            Pending::None => {}
            Pending::Requeue(t) => self.worker.push(t),
            Pending::Park(t, kind) => {
                let id = t.id;
                let raw = Arc::into_raw(t);
                // SAFETY: `raw` is the reference we own. If `commit` parks the
                // thread, the park word owns that reference from now on and we
                // do not touch `raw` again.
                if unsafe { (*raw).park.commit(kind) } {
                    self.emit(|| Event::Parked { thread: id, processor: self.index });
                } else {
                    // SAFETY: not parked: the reference is still ours.
                    self.worker.push(unsafe { Arc::from_raw(raw) });
                }
            }
            Pending::Exit(t) => {
                // SAFETY: the thread has switched away for the last time, so
                // nobody runs on its stack and nobody else takes it.
                if let Some(stack) = unsafe { (*t.stack.get()).take() } {
                    // SAFETY: as in `stack`.
                    unsafe { (*self.pool.get()).put(stack, &self.shared.depot) };
                }
                drop(t);
            }
        }
    }

    /// Switches from the running user thread to the next context (steps 1 and
    /// 2 of the module docs). For `Leave::Yield` with nothing else to run,
    /// returns at once.
    #[inline]
    fn switch_away(&self, leave: Leave) {
        let next = self.next_local();
        if leave == Leave::Yield && next.is_none() && !self.shared.shutdown.load(Ordering::Relaxed)
        {
            // Nothing else to run: keep going (unless shutting down, when the
            // scheduler context must get the processor back).
            return;
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
            Leave::Yield => Pending::Requeue(cur),
            Leave::Park(kind) => Pending::Park(cur, kind),
            Leave::Exit => Pending::Exit(cur),
        };
        // SAFETY: only this kernel thread touches `pending`; it is empty
        // (every resumed context empties it first).
        unsafe { *self.pending.get() = pending };
        self.enter_no_preempt();
        // SAFETY: `save` points into the leaving task, kept alive by the
        // pending action until after the switch; `load` is a saved context
        // nobody else resumes (see above).
        let vp = unsafe { arch::switch(save, load, self.as_pass()) };
        // Resumed, perhaps on another kernel thread: `self` may be stale, and
        // `vp` is the processor that resumed us.
        // SAFETY: every switch passes the processor making it (`as_pass`).
        unsafe { after_switch(vp) };
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
            spin_until = Some(Instant::now() + shared.spin);
        }
    }

    /// One look at every source of work.
    fn steal_round(&self) -> Option<TaskRef> {
        if let Some(t) = self.worker.pop() {
            return Some(t);
        }
        self.shared.timers.fire(|t| self.wake_timer(t));
        if let Some(t) = self.worker.pop() {
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
                    match stealers[victim].steal_batch_and_pop(&self.worker) {
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
        while let Some(t) = self.worker.pop() {
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
pub(crate) fn processor_main(index: usize, shared: Arc<Shared>, worker: Worker<TaskRef>) {
    let _altstack = crate::guard::AltStack::install();
    let vp = Processor::new(index, shared, worker);
    CURRENT.with(|c| c.set(&vp));
    vp.emit(|| Event::NewProcessor { processor: index });
    vp.run();
    vp.shut_down();
    CURRENT.with(|c| c.set(std::ptr::null()));
}

/// Where every user thread starts (on its own stack, via the trampoline).
unsafe extern "C" fn task_entry(passed: *mut u8, _arg: *mut u8) -> ! {
    // SAFETY: `passed` is the processor that switched to us.
    unsafe { after_switch(passed) };
    run_body();
    exit_current()
}

/// Runs the current thread's closure, its user-thread-local destructors, and
/// hands the result to its joiner. May switch any number of times.
#[inline(never)]
fn run_body() {
    let task: *const Task = {
        // SAFETY: used before any switch.
        let vp = unsafe { current() }.expect("a user thread runs on a processor");
        vp.current_task().expect("task_entry runs a user thread")
    };
    // SAFETY: the running thread is kept alive by the `current` slot of
    // whichever processor runs it, until its exit switch.
    let task = unsafe { &*task };
    task.body.run();
    crate::local::destroy_all(task);
    if task.join.swap(JOIN_COMPLETE, Ordering::AcqRel) == JOIN_WAITING {
        // SAFETY: the joiner wrote `joiner` before publishing JOIN_WAITING,
        // which we just read with acquire; nobody else touches it.
        let w = unsafe { (*task.joiner.get()).take() }.expect("a waiting joiner registered");
        // SAFETY: registered and not yet woken; woken only here.
        unsafe { w.wake() };
    }
}

/// The last switch of a user thread.
fn exit_current() -> ! {
    {
        // SAFETY: used before the final switch only.
        let vp = unsafe { current() }.expect("a user thread runs on a processor");
        let task = vp.current_task().expect("exit on a user thread");
        let id = task.id;
        task.shared.registry.remove(task);
        vp.emit(|| Event::Exited { thread: id, processor: vp.index });
        vp.switch_away(Leave::Exit);
    }
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

/// Gives up the processor to the next runnable thread, if any.
#[inline]
pub(crate) fn yield_current() -> bool {
    // SAFETY: `vp` is not used after `switch_away`.
    match unsafe { current() } {
        Some(vp) if vp.current_task().is_some() => {
            vp.switch_away(Leave::Yield);
            true
        }
        _ => false,
    }
}

/// Parks the running user thread until a token of `kind` (park.rs).
#[inline]
pub(crate) fn park_current(kind: Kind, reason: WaitReason) {
    // SAFETY: `vp` is not used after `switch_away`.
    let vp = unsafe { current() }.expect("park_current on a user thread");
    let task = vp.current_task().expect("park_current on a user thread");
    if task.park.try_take(kind) {
        return;
    }
    task.set_wait_reason(reason);
    vp.switch_away(Leave::Park(kind));
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
        make_runnable(unsafe { Arc::from_raw(t.as_ptr()) });
    }
}

/// Delivers a `User` token to `t` and schedules it if it was parked.
pub(crate) fn unpark_user(t: &TaskRef) {
    if t.park.unpark(Kind::User) {
        // SAFETY: `unpark` returned true: the park word's reference is ours.
        make_runnable(unsafe { Arc::from_raw(Arc::as_ptr(t)) });
    }
}

/// Queues a thread that was just unparked: on the calling processor if it
/// belongs to the thread's runtime, else on the runtime's injection queue.
fn make_runnable(t: TaskRef) {
    // SAFETY: used right away.
    match unsafe { current() } {
        Some(vp) if Arc::ptr_eq(&vp.shared, &t.shared) => {
            vp.emit(|| Event::Unparked { thread: t.id, processor: Some(vp.index) });
            vp.schedule(t);
        }
        _ => {
            if let Some(h) = &t.shared.hook {
                h(&Event::Unparked { thread: t.id, processor: None });
            }
            let shared = t.shared.clone();
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
    let size = stack_size.map_or(shared.stack_size, crate::stack::rounded_size);
    // SAFETY: spawning never switches; `vp` is used only in this function.
    let vp = unsafe { current() }.filter(|vp| Arc::ptr_eq(&vp.shared, shared));
    let stack = match vp {
        Some(vp) => vp.stack(size)?,
        None => Stack::new(size)?,
    };
    let top = stack.top();
    debug_assert!(stack.size() > arch::INIT_STACK_BYTES);
    let id = match vp {
        Some(vp) => vp.next_id(),
        None => ThreadId::from_u64(task::reserve_ids(1)).expect("ids start at 1"),
    };
    let task = Task::new(id, name.map(String::into_boxed_str), shared.clone(), stack, f);
    // SAFETY: `top` is the aligned end of the task's fresh stack, which it
    // owns until it exits; `task_entry` never returns. Nobody else sees the
    // task yet, so writing its context is unshared.
    unsafe { *task.ctx.get() = arch::init_stack(top, task_entry, std::ptr::null_mut()) };
    shared.registry.insert(vp.map_or(0, |vp| vp.index), &task);
    let event = || Event::Spawned { thread: id, processor: vp.map(|vp| vp.index) };
    match vp {
        Some(vp) => {
            vp.emit(event);
            vp.schedule(task.clone());
        }
        None => {
            if let Some(h) = &shared.hook {
                h(&event());
            }
            shared.inject(task.clone());
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
