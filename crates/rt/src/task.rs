//! The user thread as the scheduler sees it: [`Task`], one allocation
//! holding the saved context, the park word, the stack, the join state and
//! the closure with its result.
//!
//! A task is shared through [`TaskRef`], a thin counted pointer. Its memory
//! is a fixed-size block recycled by the processors ([`BlockCache`]), so
//! spawning on a processor does not call the allocator. The fields in
//! `UnsafeCell`s are each owned by one party at a time, by protocol:
//! - `ctx`: written by `arch::switch` when the task is suspended, read by the
//!   processor that resumes it; the hand-over goes through a run queue or the
//!   park word (`park.rs`), both release/acquire.
//! - `stack`: set at spawn or by the processor that first runs the task
//!   (`Processor::context_of`), taken once by the processor that runs the task's
//!   exit (after its last switch), or at shutdown.
//! - `joiner`: written once by (or for) the joining thread before it
//!   registers in `state`, read by the exiting task after it sees that.
//! - the body's closure and result: the closure is taken by the task itself;
//!   the result is written by the task before it completes (`state`,
//!   release) and read by the joiner after it (acquire).
//! - `locals`: touched only by the task itself, while it runs.
//!
//! A task of the runtime's stack size has no stack until it first runs
//! (`Processor::context_of`): its context is null until then. A task run
//! inline by its joiner (`processor/inline.rs`) borrows the joiner's stack in
//! its `stack` cell for the while, and names the joiner in `host`.

use crate::arch::StackPointer;
use crate::budget::Budget;
use crate::hooks::SharedRef;
use crate::lifecycle::TaskState;
use crate::park::ParkState;
use crate::stack::Stack;
use crate::wait::WaiterRef;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::mem::ManuallyDrop;
use std::num::NonZeroU64;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// A user thread's identifier, unique within the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ThreadId(NonZeroU64);

impl ThreadId {
    /// The identifier as a number (never 0).
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }

    pub(crate) fn from_u64(v: u64) -> Option<ThreadId> {
        NonZeroU64::new(v).map(ThreadId)
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Source of thread identifiers; processors take them in blocks.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Identifiers a processor takes from [`NEXT_ID`] at a time.
pub(crate) const ID_BLOCK: u64 = 1024;

/// Reserves `n` consecutive identifiers; returns the first.
pub(crate) fn reserve_ids(n: u64) -> u64 {
    NEXT_ID.fetch_add(n, Ordering::Relaxed)
}

// Joining: the task's state word (`lifecycle.rs`) holds the join state and
// the reference count. A joiner registers in `joiner`, then in the word:
// - an OS thread registers a `Waiter` and blocks on it;
// - a user thread registers *itself* and is parked by the state word: it
//   switches away first, and the next context on its processor writes
//   `joiner` and registers (the pending action `Join` of processor.rs); on
//   success the word owns the joiner's reference, as a park word would
//   (park.rs), and the joiner's `parked_in_queue` flag is set for the
//   deadlock detector; on failure (completed meanwhile) the joiner goes
//   straight back to a run queue.
// The exit wakes the registered joiner: wakes the `Waiter`, or clears the
// joiner's flag and queues it, taking over the reference the word owned.
// So a user thread joining costs one atomic operation and the exit one,
// where a join through a `Waiter` also parked and unparked through the park
// word (two more locked instructions, ~11 ns).

/// Who waits for a task to complete (see above).
#[derive(Clone, Copy)]
pub(crate) enum Joiner {
    /// Nobody registered.
    None,
    /// An OS thread, woken through its `Waiter`.
    Waiter(WaiterRef),
    /// A user thread parked in the task's state word, which owns this
    /// reference (made by `TaskRef::into_raw`).
    Task(NonNull<Task>),
}

/// What a user thread waits on, kept for the deadlock report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitReason {
    /// Not waiting.
    None,
    /// [`park`](crate::park()).
    Park,
    /// Joining the given thread.
    Join(ThreadId),
    /// [`sleep`](crate::sleep).
    Sleep,
    /// Locking the [`Mutex`](crate::sync::Mutex) at this address.
    Mutex(usize),
    /// Waiting on the [`Condvar`](crate::sync::Condvar) at this address.
    Condvar(usize),
    /// Read-locking the [`RwLock`](crate::sync::RwLock) at this address.
    RwLockRead(usize),
    /// Write-locking the [`RwLock`](crate::sync::RwLock) at this address.
    RwLockWrite(usize),
    /// Acquiring the [`Semaphore`](crate::sync::Semaphore) at this address.
    Semaphore(usize),
    /// Waiting at the [`Barrier`](crate::sync::Barrier) at this address.
    Barrier(usize),
    /// Sending on the channel whose shared state is at this address.
    ChannelSend(usize),
    /// Receiving from the channel whose shared state is at this address.
    ChannelRecv(usize),
    /// Throttled to the end of its CPU budget's period
    /// ([`Builder::cpu_budget`](crate::Builder::cpu_budget)).
    Throttled,
}

impl WaitReason {
    fn encode(self) -> (u8, u64) {
        match self {
            WaitReason::None => (0, 0),
            WaitReason::Park => (1, 0),
            WaitReason::Join(id) => (2, id.as_u64()),
            WaitReason::Sleep => (3, 0),
            WaitReason::Mutex(a) => (4, a as u64),
            WaitReason::Condvar(a) => (5, a as u64),
            WaitReason::RwLockRead(a) => (6, a as u64),
            WaitReason::RwLockWrite(a) => (7, a as u64),
            WaitReason::Semaphore(a) => (8, a as u64),
            WaitReason::Barrier(a) => (9, a as u64),
            WaitReason::ChannelSend(a) => (10, a as u64),
            WaitReason::ChannelRecv(a) => (11, a as u64),
            WaitReason::Throttled => (12, 0),
        }
    }

    fn decode(kind: u8, v: u64) -> WaitReason {
        let a = v as usize;
        match kind {
            1 => WaitReason::Park,
            2 => ThreadId::from_u64(v).map_or(WaitReason::None, WaitReason::Join),
            3 => WaitReason::Sleep,
            4 => WaitReason::Mutex(a),
            5 => WaitReason::Condvar(a),
            6 => WaitReason::RwLockRead(a),
            7 => WaitReason::RwLockWrite(a),
            8 => WaitReason::Semaphore(a),
            9 => WaitReason::Barrier(a),
            10 => WaitReason::ChannelSend(a),
            11 => WaitReason::ChannelRecv(a),
            12 => WaitReason::Throttled,
            _ => WaitReason::None,
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WaitReason::None => write!(f, "nothing"),
            WaitReason::Park => write!(f, "park()"),
            WaitReason::Join(id) => write!(f, "join of thread {id}"),
            WaitReason::Sleep => write!(f, "sleep"),
            WaitReason::Throttled => write!(f, "the end of its CPU budget's period"),
            WaitReason::Mutex(a) => write!(f, "Mutex at {a:#x}"),
            WaitReason::Condvar(a) => write!(f, "Condvar at {a:#x}"),
            WaitReason::RwLockRead(a) => write!(f, "RwLock (read) at {a:#x}"),
            WaitReason::RwLockWrite(a) => write!(f, "RwLock (write) at {a:#x}"),
            WaitReason::Semaphore(a) => write!(f, "Semaphore at {a:#x}"),
            WaitReason::Barrier(a) => write!(f, "Barrier at {a:#x}"),
            WaitReason::ChannelSend(a) => write!(f, "channel send at {a:#x}"),
            WaitReason::ChannelRecv(a) => write!(f, "channel receive at {a:#x}"),
        }
    }
}

/// The closure of a task spawned with `F` returning `T`, then its result.
pub(crate) struct Closure<F, T> {
    f: UnsafeCell<Option<F>>,
    out: UnsafeCell<Option<std::thread::Result<T>>>,
}

/// What the type-erased header needs to know about its body: a hand-made
/// vtable, so that a task is a thin pointer (an `Arc<Task<dyn Body>>` was a
/// fat one, and every field access computed the header's offset from the
/// vtable's alignment).
pub(crate) struct BodyVTable {
    /// Runs the closure, catching a panic, and stores the outcome. Called
    /// once, by the task itself.
    run: unsafe fn(NonNull<Task>),
    /// Drops the closure (if it never ran) and the result (if never taken).
    drop_body: unsafe fn(NonNull<Task>),
    /// Layout of the whole allocation ([`TaskCell`]).
    layout: Layout,
}

/// The allocation of a task: the header, then the typed body.
#[repr(C)]
struct TaskCell<F, T> {
    task: Task,
    body: Closure<F, T>,
}

impl<F, T> TaskCell<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    const VTABLE: BodyVTable =
        BodyVTable { run: Self::run, drop_body: Self::drop_body, layout: Layout::new::<Self>() };

    /// The typed body of the task at `t`.
    ///
    /// # Safety
    ///
    /// `t` must be a live task spawned with this `F` and `T`.
    #[inline]
    unsafe fn body<'a>(t: NonNull<Task>) -> &'a Closure<F, T> {
        // SAFETY: `TaskCell` is `repr(C)` with the header first, so the task
        // pointer is the cell pointer; the caller vouches for the types.
        unsafe { &(*t.as_ptr().cast::<Self>()).body }
    }

    unsafe fn run(t: NonNull<Task>) {
        // SAFETY: called through this type's vtable, so the types match.
        let body = unsafe { Self::body(t) };
        // SAFETY: only the task itself calls `run`, once (module docs).
        let f = unsafe { (*body.f.get()).take() }.expect("a task body runs once");
        let result = catch_unwind(AssertUnwindSafe(f))
            // SAFETY: `t` is the running task (`run`'s contract).
            .map_err(|p| crate::hooks::explain_panic(p, unsafe { t.as_ref() }));
        // SAFETY: the joiner reads `out` only after the completion, which the
        // task publishes after this write.
        unsafe { *body.out.get() = Some(result) };
    }

    unsafe fn drop_body(t: NonNull<Task>) {
        // SAFETY: called by `Task::free` with the last reference, through
        // this type's vtable; nothing uses the body afterwards.
        unsafe {
            std::ptr::drop_in_place(std::ptr::addr_of_mut!((*t.as_ptr().cast::<Self>()).body))
        };
    }
}

// SAFETY: `f` is moved into the task at spawn and taken once by the task
// itself; `out` is written by the task before it completes and read by the
// single joiner after that (see the module docs). No `&F`/`&T` is ever shared.
unsafe impl<F: Send, T: Send> Sync for Closure<F, T> {}

/// Takes the result out of a finished task spawned with `F` returning `T`.
///
/// # Safety
///
/// The task must be complete (`state`, read with acquire), the
/// caller must be the task's only joiner, and the task must have been
/// spawned with this `F` and `T`.
pub(crate) unsafe fn take_output<F, T>(task: &Task) -> std::thread::Result<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: the caller vouches for the types.
    let body = unsafe { TaskCell::<F, T>::body(NonNull::from(task)) };
    // SAFETY: the caller guarantees the task finished and we are the only reader.
    unsafe { (*body.out.get()).take() }.expect("a task's result is taken once")
}

/// Map of user-thread-local values (see `local.rs`), keyed by the address
/// of their `LocalKey`; boxed on first use, so that a thread that uses none
/// (most) pays one null test at its end, not an empty `Vec`'s drop.
pub(crate) type LocalMap = Option<Box<Vec<(usize, Box<dyn Any>)>>>;

/// The bit of `Task::priority` that marks a thread taken for a turn
/// (`priority.rs`, "Aging"), above every level's value.
pub(crate) const TURN: u8 = 0x80;

/// The bit of `Task::priority` that marks a level inherited from a waiter on a
/// `Mutex` the thread holds (`priority.rs`, "Inheritance"); the thread's own
/// level is then kept in the [`BASE`] bits.
pub(crate) const BOOSTED: u8 = 0x40;

/// The bit of `Task::rt_flags` of a real-time thread under POSIX's `SCHED_FIFO`: its
/// quantum does not pass the processor to a thread of its own real-time priority
/// (`realtime.rs`).
pub(crate) const RT_FIFO: u8 = 0x01;

/// The bit of `Task::rt_flags` that puts the thread at the head of its real-time
/// priority's list when it is next queued, not at the tail (POSIX: a preempted thread,
/// or one whose priority was lowered; `realtime.rs`). Cleared by that queueing.
pub(crate) const RT_HEAD: u8 = 0x02;

/// The bit of `Task::rt_flags` that makes the task's next decision yield only to a
/// higher real-time priority, putting the task at the head of its list if one takes
/// the processor (its own priority lowered, `realtime.rs`).
pub(crate) const RT_STRICT: u8 = 0x04;

/// The bits of `Task::priority` holding the effective level (the one every
/// scheduling path reads).
const LEVEL: u8 = 0x03;

/// Where `Task::priority` keeps the thread's own level while [`BOOSTED`].
const BASE_SHIFT: u32 = 2;
const BASE: u8 = LEVEL << BASE_SHIFT;

/// A user thread: the header of its allocation (the typed body follows it).
#[repr(C)]
pub(crate) struct Task {
    /// Saved stack pointer while suspended.
    pub(crate) ctx: UnsafeCell<StackPointer>,
    /// The park word (`park.rs`).
    pub(crate) park: ParkState,
    /// Join state and reference count (`lifecycle.rs`).
    pub(crate) state: TaskState,
    /// Identifier.
    pub(crate) id: ThreadId,
    /// The body's vtable.
    vtable: &'static BodyVTable,
    /// The stack, from its first run (or the spawn, for a size other than
    /// the runtime's) until the task has exited; the joiner's, lent, while
    /// the task runs inline. Declared before `shared`: a
    /// stack still here when the task is freed unregisters from its
    /// runtime's registry as it drops, so the runtime must still be alive.
    pub(crate) stack: UnsafeCell<Option<Stack>>,
    /// The runtime the task belongs to (released by `Task::free`, with the
    /// processor it already looked up, hence not dropped with the rest).
    pub(crate) shared: ManuallyDrop<SharedRef>,
    /// Name given by `Builder::name`.
    pub(crate) name: Option<Box<str>>,
    /// Usable size of the stack (kept after the stack is gone, for messages).
    /// Written by the spawner before the task is published (a stack from a
    /// processor's pool is placed after the task is allocated: `spawn.rs`).
    pub(crate) stack_size: AtomicUsize,
    /// The registered joiner, valid once it registered in `state`.
    pub(crate) joiner: UnsafeCell<Joiner>,
    /// This task is parked in a wait queue (`wait.rs`) or in some other
    /// task's `join` word, rather than on its park word.
    pub(crate) parked_in_queue: AtomicBool,
    /// While the task runs inline in its joiner (`processor/inline.rs`): that
    /// joiner, suspended below it on the same stack, which the registry
    /// (`registry.rs`) reaches only through here. Null otherwise.
    pub(crate) host: AtomicPtr<Task>,
    /// What the task waits on ([`WaitReason`] encoded), for deadlock reports.
    wait_kind: AtomicU8,
    /// Not preemptible (`Builder::preemptible(false)`).
    no_preempt_ever: AtomicBool,
    /// The task waits on a primitive an OS thread may wake (`wait.rs`), so
    /// the deadlock detector must not count it as stuck.
    pub(crate) external_wait: AtomicBool,
    /// Its runtime was dropped while the task was parked or queued: it will
    /// never run again (`runtime.rs`, `Drop`). Set once nothing runs.
    pub(crate) cancelled: AtomicBool,
    /// Depth of [`no_preempt`](crate::no_preempt) regions, plus `DEFERRED`
    /// when a preemption arrived inside one. Touched only by the task itself
    /// and the signal handler interrupting it.
    region: AtomicU32,
    /// The task is inside a preemption's yield (`preempt::preempted`): a
    /// request deferred to the end of the section its resume ends is dropped,
    /// not taken inside it, which would nest one yield in the other's frame
    /// for every preemption in a row (seen: a thread preempted a thousand
    /// times before it ran again, under priority hand-offs, overflowed its
    /// stack). Touched only by the task itself.
    pub(crate) preempting: AtomicBool,
    wait_arg: AtomicU64,
    /// User-thread-local values.
    pub(crate) locals: UnsafeCell<LocalMap>,
    /// The thread's CPU budget (`budget.rs`), an owned `Box`, or null. Set at
    /// spawn before the task is published; freed with the task.
    budget: AtomicPtr<Budget>,
    /// The thread's CPU time, once its runtime accounts for it (`cputime.rs`).
    pub(crate) cpu: crate::cputime::CpuAccount,
    /// The thread's level (`priority.rs`), as `Priority::as_u8`, set at spawn; plus
    /// [`TURN`] from when a processor takes it for a turn to when that turn starts.
    priority: AtomicU8,
    /// The thread's real-time priority among `High` threads (POSIX's `SCHED_FIFO` and
    /// `SCHED_RR` priority, `Builder::realtime`), 0 for none: orders the `High` queue and
    /// its decisions (`priority.rs`, "Real-time order").
    rt: AtomicU8,
    /// [`RT_FIFO`], [`RT_HEAD`] and [`RT_STRICT`] (`realtime.rs`).
    rt_flags: AtomicU8,
    /// Idle-stack reclaim's state of the thread (`reclaim.rs`).
    pub(crate) idle: crate::reclaim::IdleStack,
    /// The address of the lock core of the `Mutex` the thread is in the slow
    /// path of, 0 otherwise; set and cleared by the thread itself, only once the
    /// process has levels (`sync/chain.rs`: the lock keeps the mutex alive for a
    /// priority chain walk that reads it).
    pub(crate) blocked_on: crate::spin::SpinLock<usize>,
    /// How many of the `Mutex`es the thread holds lend it each level
    /// (`priority.rs`, "Inheritance", step 3).
    pub(crate) lent: crate::priority::Lent,
    /// `shared-library` build: the user thread's signal mask (the first 64
    /// signals), applied to whichever kernel thread resumes it
    /// (`shared.rs`, "Signals").
    #[cfg(feature = "shared-library")]
    pub(crate) sigmask: AtomicU64,
    /// `shared-library` build: run the library's resume hook when the thread
    /// next resumes or passes a preemption point.
    #[cfg(feature = "shared-library")]
    pub(crate) notify: AtomicBool,
    /// `shared-library` build: how many times the runtime's own signal
    /// interrupted the thread (`shared::interruptions`).
    #[cfg(feature = "shared-library")]
    pub(crate) interruptions: AtomicU32,
    /// `shared-library` build: the machine that last resumed the thread.
    #[cfg(feature = "shared-library")]
    pub(crate) machine: AtomicPtr<crate::hooks::Machine>,
}

impl Drop for Task {
    fn drop(&mut self) {
        let b = *self.budget.get_mut();
        if !b.is_null() {
            // SAFETY: set from `Box::into_raw` in `set_budget`, freed only here.
            drop(unsafe { Box::from_raw(b) });
        }
    }
}

// SAFETY: every `UnsafeCell` field is owned by one party at a time by the
// protocols in the module docs; the rest are atomics or immutable. The
// user-thread-local values may be `!Send`, but they are only touched by the
// task itself and move across kernel threads together with its whole stack,
// which is what running a user thread on any processor already means. The
// body is `Send` (the spawn bounds) and reached only by the protocols above.
unsafe impl Sync for Task {}
// SAFETY: as above.
unsafe impl Send for Task {}

/// Size of the blocks processors recycle for task allocations: a header and
/// a closure capturing a few words fit. Larger tasks use the global
/// allocator directly.
pub(crate) const BLOCK: Layout = match Layout::from_size_align(384, 64) {
    Ok(l) => l,
    Err(_) => panic!("a valid layout"),
};

/// The layout actually allocated for a task whose cell has `layout`: one
/// block if it fits, so blocks can be recycled between task types.
#[inline]
fn alloc_layout(layout: Layout) -> Layout {
    if layout.size() <= BLOCK.size() && layout.align() <= BLOCK.align() {
        BLOCK
    } else {
        layout
    }
}

/// A cache of free task blocks, owned by one processor (not `Sync`).
#[derive(Default)]
pub(crate) struct BlockCache {
    free: UnsafeCell<Vec<NonNull<u8>>>,
}

/// Blocks a processor keeps for reuse.
const BLOCK_CACHE_CAP: usize = 1024;

impl BlockCache {
    #[allow(clippy::mut_from_ref)] // owner-only access, see the type docs
    #[inline]
    fn free(&self) -> &mut Vec<NonNull<u8>> {
        // SAFETY: only the owning processor's kernel thread uses the cache,
        // and no method calls out while holding this borrow.
        unsafe { &mut *self.free.get() }
    }

    #[inline]
    fn get(&self) -> Option<NonNull<u8>> {
        self.free().pop()
    }

    /// Keeps `block` (allocated with [`BLOCK`]), or gives it back.
    #[inline]
    fn put(&self, block: NonNull<u8>) {
        let free = self.free();
        if free.len() < BLOCK_CACHE_CAP {
            free.push(block);
        } else {
            // SAFETY: allocated with `BLOCK` by `Task::new`, no longer used.
            unsafe { dealloc(block.as_ptr(), BLOCK) };
        }
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        for b in self.free.get_mut().drain(..) {
            // SAFETY: every cached block was allocated with `BLOCK` and is unused.
            unsafe { dealloc(b.as_ptr(), BLOCK) };
        }
    }
}

/// A counted reference to a task (a thin pointer).
///
/// Dropping the last one frees the task: its header fields, its body, and
/// its memory (into the dropping processor's [`BlockCache`] when it runs on
/// one). The last owner is usually alone by then, so `drop` first looks
/// whether the count is 1 and, if so, frees without a locked instruction
/// (nobody else holds a reference, so nobody can make a new one).
pub(crate) struct TaskRef(NonNull<Task>);

// SAFETY: a `TaskRef` is an `Arc`-like counted pointer to a `Task`, which is
// `Send + Sync`.
unsafe impl Send for TaskRef {}
// SAFETY: as above.
unsafe impl Sync for TaskRef {}

impl std::ops::Deref for TaskRef {
    type Target = Task;
    #[inline]
    fn deref(&self) -> &Task {
        // SAFETY: a counted reference keeps the task alive.
        unsafe { self.0.as_ref() }
    }
}

impl Clone for TaskRef {
    #[inline]
    fn clone(&self) -> TaskRef {
        self.state.acquire_ref();
        TaskRef(self.0)
    }
}

impl Drop for TaskRef {
    #[inline]
    fn drop(&mut self) {
        if self.state.release_ref() {
            // SAFETY: this was the last reference.
            unsafe { Task::free(self.0) };
        }
    }
}

impl TaskRef {
    /// Gives up the reference without dropping it (see [`TaskRef::from_raw`]).
    #[inline]
    pub(crate) fn into_raw(self) -> NonNull<Task> {
        let p = self.0;
        std::mem::forget(self);
        p
    }

    /// Takes back a reference given up by [`TaskRef::into_raw`].
    ///
    /// # Safety
    ///
    /// `p` must come from `into_raw`, and each such reference be taken back once.
    #[inline]
    pub(crate) unsafe fn from_raw(p: NonNull<Task>) -> TaskRef {
        TaskRef(p)
    }

    /// A new counted reference to a task known to be alive.
    ///
    /// # Safety
    ///
    /// `p` must point to a live task (someone holds a reference meanwhile).
    #[inline]
    pub(crate) unsafe fn clone_from_raw(p: NonNull<Task>) -> TaskRef {
        // SAFETY: alive by the caller's guarantee.
        unsafe { p.as_ref() }.state.acquire_ref();
        TaskRef(p)
    }

    /// The task's address.
    #[inline]
    pub(crate) fn as_ptr(&self) -> NonNull<Task> {
        self.0
    }
}

impl Task {
    /// A new task running `f`, not yet runnable (its context is null), with
    /// two references: both returned, one for the run queue and one for the
    /// spawner. Its memory comes from `cache` when given and possible.
    /// Always inlined: its one caller is the spawn path, which a spawn inlines
    /// into the spawner (as a call, a spawn and join cost 6% more).
    #[inline(always)]
    pub(crate) fn allocate<F, T>(
        id: ThreadId,
        name: Option<Box<str>>,
        shared: SharedRef,
        stack: Option<Stack>,
        f: F,
        cache: Option<&BlockCache>,
    ) -> (TaskRef, TaskRef)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let vtable = &TaskCell::<F, T>::VTABLE;
        let layout = alloc_layout(vtable.layout);
        let mem = match cache {
            Some(c) if layout == BLOCK => c.get(),
            _ => None,
        };
        let mem = mem.unwrap_or_else(|| {
            // SAFETY: the layout has a non-zero size (the header alone).
            NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout))
        });
        let cell = mem.cast::<TaskCell<F, T>>();
        let stack_size = stack.as_ref().map_or(0, Stack::size);
        // SAFETY: `mem` is fresh memory with room and alignment for a
        // `TaskCell<F, T>` (`alloc_layout` is at least its layout).
        unsafe {
            cell.as_ptr().write(TaskCell {
                task: Task {
                    ctx: UnsafeCell::new(std::ptr::null_mut()),
                    park: ParkState::new(),
                    state: TaskState::new(),
                    id,
                    vtable,
                    stack: UnsafeCell::new(stack),
                    shared: ManuallyDrop::new(shared),
                    name,
                    stack_size: AtomicUsize::new(stack_size),
                    joiner: UnsafeCell::new(Joiner::None),
                    parked_in_queue: AtomicBool::new(false),
                    host: AtomicPtr::new(std::ptr::null_mut()),
                    wait_kind: AtomicU8::new(0),
                    no_preempt_ever: AtomicBool::new(false),
                    external_wait: AtomicBool::new(false),
                    cancelled: AtomicBool::new(false),
                    region: AtomicU32::new(0),
                    preempting: AtomicBool::new(false),
                    wait_arg: AtomicU64::new(0),
                    locals: UnsafeCell::new(None),
                    budget: AtomicPtr::new(std::ptr::null_mut()),
                    cpu: crate::cputime::CpuAccount::new(),
                    priority: AtomicU8::new(1),
                    rt: AtomicU8::new(0),
                    rt_flags: AtomicU8::new(0),
                    idle: Default::default(),
                    blocked_on: crate::spin::SpinLock::new(0),
                    lent: Default::default(),
                    #[cfg(feature = "shared-library")]
                    sigmask: AtomicU64::new(0),
                    #[cfg(feature = "shared-library")]
                    notify: AtomicBool::new(false),
                    #[cfg(feature = "shared-library")]
                    interruptions: AtomicU32::new(0),
                    #[cfg(feature = "shared-library")]
                    machine: AtomicPtr::new(std::ptr::null_mut()),
                },
                body: Closure { f: UnsafeCell::new(Some(f)), out: UnsafeCell::new(None) },
            })
        };
        let t = cell.cast::<Task>();
        (TaskRef(t), TaskRef(t))
    }

    /// Runs the task's closure and stores its outcome. Called once, by the
    /// task itself.
    pub(crate) fn run_body(&self) {
        // SAFETY: the vtable is the body's; `run` is called once, by the task.
        unsafe { (self.vtable.run)(NonNull::from(self)) }
    }

    /// Drops everything the task owns and frees its memory.
    ///
    /// # Safety
    ///
    /// `t` must be live, and the caller must have held its last reference.
    #[inline(never)]
    pub(crate) unsafe fn free(t: NonNull<Task>) {
        // SAFETY: the last reference: nobody else touches the task.
        let vtable = unsafe { t.as_ref() }.vtable;
        // SAFETY: as above; the body first, the header after (the body's
        // vtable is read above, out of the header), the runtime reference
        // last (the header's stack, if still there, unregisters from it).
        let shared = unsafe {
            (vtable.drop_body)(t);
            let shared = ManuallyDrop::take(&mut (*t.as_ptr()).shared);
            std::ptr::drop_in_place(t.as_ptr());
            shared
        };
        // A runtime section (user code in the body's destructors ran above).
        let vp = crate::hooks::enter();
        crate::hooks::release_task_ref(shared, vp.as_deref());
        let layout = alloc_layout(vtable.layout);
        if layout == BLOCK {
            if let Some(vp) = &vp {
                vp.blocks().put(t.cast());
                return;
            }
        }
        // SAFETY: allocated in `Task::new` with this layout.
        unsafe { dealloc(t.as_ptr().cast(), layout) };
    }

    /// Gives the task a CPU budget (at spawn, before it is published).
    pub(crate) fn set_budget(&self, b: Box<Budget>) {
        let old = self.budget.swap(Box::into_raw(b), Ordering::Release);
        debug_assert!(old.is_null(), "a budget is set once");
    }

    /// The task's CPU budget, if it has one.
    #[inline]
    pub(crate) fn budget(&self) -> Option<&Budget> {
        // SAFETY: set before the task was published and freed with it.
        unsafe { self.budget.load(Ordering::Acquire).as_ref() }
    }

    /// Sets the task's level (at spawn, before it is published).
    pub(crate) fn set_priority(&self, p: crate::Priority) {
        self.priority.store(p.as_u8(), Ordering::Relaxed);
    }

    /// The task's real-time priority among `High` threads (0: none).
    #[inline]
    pub(crate) fn rt_priority(&self) -> u8 {
        self.rt.load(Ordering::Relaxed)
    }

    /// Sets the task's real-time priority (`Builder::realtime`; `Thread::set_realtime`,
    /// which takes effect from the thread's next queueing).
    pub(crate) fn set_rt_priority(&self, p: u8) {
        self.rt.store(p, Ordering::Relaxed);
    }

    /// Whether the task has `flag` (one of [`RT_FIFO`], [`RT_HEAD`], [`RT_STRICT`]).
    #[inline]
    pub(crate) fn rt_flag(&self, flag: u8) -> bool {
        self.rt_flags.load(Ordering::Relaxed) & flag != 0
    }

    /// Sets or clears `flag` (`realtime.rs`).
    pub(crate) fn set_rt_flag(&self, flag: u8, on: bool) {
        if on {
            self.rt_flags.fetch_or(flag, Ordering::Relaxed);
        } else {
            self.rt_flags.fetch_and(!flag, Ordering::Relaxed);
        }
    }

    /// Whether the task goes to the head of its list now (the mark is cleared). Under
    /// the `High` queue's lock.
    pub(crate) fn take_rt_head(&self) -> bool {
        self.rt_flags.load(Ordering::Relaxed) & RT_HEAD != 0
            && self.rt_flags.fetch_and(!RT_HEAD, Ordering::Relaxed) & RT_HEAD != 0
    }

    /// Sets the task's own level to `p` while it may be running or queued
    /// (`realtime.rs`): an inherited level it holds is kept while it is higher.
    pub(crate) fn set_own_priority(&self, p: crate::Priority) {
        let _ = self.priority.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
            Some(if cur & BOOSTED != 0 && (cur & LEVEL) < p.as_u8() {
                (cur & TURN) | BOOSTED | (p.as_u8() << BASE_SHIFT) | (cur & LEVEL)
            } else {
                (cur & TURN) | p.as_u8()
            })
        });
    }

    /// The task's level: its own, or the one it inherited while it holds a
    /// `Mutex` a thread of a higher level waits on.
    #[inline]
    pub(crate) fn priority(&self) -> crate::Priority {
        crate::Priority::from_u8(self.priority.load(Ordering::Relaxed) & LEVEL)
    }

    /// Raises the task's level to `to` for as long as it holds a lock a thread
    /// of that level waits on (`priority.rs`, "Inheritance"); keeps its own
    /// level to come back to. Whether the level changed (it was lower).
    pub(crate) fn inherit(&self, to: crate::Priority) -> bool {
        self.priority
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                let level = cur & LEVEL;
                let base = if cur & BOOSTED != 0 { cur & BASE } else { level << BASE_SHIFT };
                (to.as_u8() < level).then_some((cur & TURN) | BOOSTED | base | to.as_u8())
            })
            .is_ok()
    }

    /// Sets the inherited level to `to` (`None`: none), whether that raises or
    /// lowers the one it has: the task runs at the higher of `to` and its own
    /// (`priority.rs`, "Inheritance", step 3, for a holder of several locks).
    pub(crate) fn set_inherited(&self, to: Option<crate::Priority>) {
        let _ = self.priority.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
            let own = if cur & BOOSTED != 0 { (cur & BASE) >> BASE_SHIFT } else { cur & LEVEL };
            Some(match to {
                Some(to) if to.as_u8() < own => {
                    (cur & TURN) | BOOSTED | (own << BASE_SHIFT) | to.as_u8()
                }
                _ => (cur & TURN) | own,
            })
        });
    }

    /// Marks the task as taken for a turn (`priority.rs`, "Aging"), by the
    /// processor about to run it.
    pub(crate) fn give_turn(&self) {
        self.priority.fetch_or(TURN, Ordering::Relaxed);
    }

    /// Whether the task was taken for a turn, which starts now (the mark is
    /// cleared). On the processor that took it.
    pub(crate) fn take_turn(&self) -> bool {
        self.priority.load(Ordering::Relaxed) & TURN != 0
            && self.priority.fetch_and(!TURN, Ordering::Relaxed) & TURN != 0
    }

    /// Makes the task never preemptible (at spawn, before it is published).
    pub(crate) fn set_preemptible(&self, on: bool) {
        self.no_preempt_ever.store(!on, Ordering::Relaxed);
    }

    /// Whether the task may be preempted at all.
    #[inline]
    pub(crate) fn preemptible(&self) -> bool {
        !self.no_preempt_ever.load(Ordering::Relaxed)
    }

    /// Whether the task is inside a `no_preempt` region.
    #[inline]
    pub(crate) fn in_no_preempt(&self) -> bool {
        self.region.load(Ordering::Relaxed) & !crate::arch::DEFERRED != 0
    }

    /// Remembers a preemption for the end of the region (signal handler).
    #[inline]
    pub(crate) fn defer_preemption(&self) {
        let r = self.region.load(Ordering::Relaxed);
        self.region.store(r | crate::arch::DEFERRED, Ordering::Relaxed);
    }

    /// Enters a `no_preempt` region (the task itself).
    #[inline]
    pub(crate) fn enter_no_preempt(&self) {
        let r = self.region.load(Ordering::Relaxed);
        self.region.store(r + 1, Ordering::Relaxed);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    }

    /// Leaves a `no_preempt` region; returns whether a preemption deferred
    /// inside it is now due.
    #[inline]
    pub(crate) fn leave_no_preempt(&self) -> bool {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        let r = self.region.load(Ordering::Relaxed) - 1;
        if r == crate::arch::DEFERRED {
            self.region.store(0, Ordering::Relaxed);
            return true;
        }
        self.region.store(r, Ordering::Relaxed);
        false
    }

    /// The usable range of the task's stack (above its guard page), while it
    /// has one. Read by the signal handler on the task's own thread.
    pub(crate) fn stack_range(&self) -> Option<std::ops::Range<usize>> {
        // SAFETY: the stack is taken only by the task's own exit, which does
        // not run while the task is interrupted here.
        unsafe { (*self.stack.get()).as_ref() }.map(|s| s.guard_range().end..s.top() as usize)
    }

    /// Records what the task is about to wait on.
    #[inline]
    pub(crate) fn set_wait_reason(&self, r: WaitReason) {
        let (k, v) = r.encode();
        self.wait_kind.store(k, Ordering::Relaxed);
        self.wait_arg.store(v, Ordering::Relaxed);
    }

    /// What the task last said it waits on.
    pub(crate) fn wait_reason(&self) -> WaitReason {
        WaitReason::decode(
            self.wait_kind.load(Ordering::Relaxed),
            self.wait_arg.load(Ordering::Relaxed),
        )
    }

    /// Whether the task is parked, on its park word, in a wait queue or in
    /// another task's state word (for
    /// the deadlock detector).
    pub(crate) fn is_parked(&self) -> bool {
        self.park.is_parked() || self.parked_in_queue.load(Ordering::Acquire)
    }

    /// The thread's name, if it has one.
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
