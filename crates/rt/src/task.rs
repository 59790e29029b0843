//! The user thread as the scheduler sees it: [`Task`], one heap allocation
//! holding the saved context, the park word, the stack, the join state and
//! the closure with its result.
//!
//! A task is shared through [`TaskRef`] (an `Arc`). The fields in
//! `UnsafeCell`s are each owned by one party at a time, by protocol:
//! - `ctx`: written by `arch::switch` when the task is suspended, read by the
//!   processor that resumes it; the hand-over goes through a run queue or the
//!   park word (`park.rs`), both release/acquire.
//! - `stack`: set at spawn, taken once by the processor that runs the task's
//!   exit (after its last switch), or at shutdown.
//! - `joiner`: written once by the joining thread before it publishes
//!   `JOIN_WAITING`, read by the exiting task after it sees that state.
//! - the body's closure and result: the closure is taken by the task itself;
//!   the result is written by the task before `JOIN_COMPLETE` (release) and
//!   read by the joiner after it (acquire).
//! - `locals`: touched only by the task itself, while it runs.

use crate::arch::StackPointer;
use crate::park::ParkState;
use crate::runtime::Shared;
use crate::stack::Stack;
use crate::wait::WaiterRef;
use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::num::NonZeroU64;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

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

/// `join` word: the task has not finished and nobody waits.
pub(crate) const JOIN_RUNNING: u32 = 0;
/// `join` word: a joiner registered in `joiner` and waits.
pub(crate) const JOIN_WAITING: u32 = 1;
/// `join` word: the result is written.
pub(crate) const JOIN_COMPLETE: u32 = 2;

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

/// The type-erased part of a task: its closure and result.
pub(crate) trait Body: Send + Sync + 'static {
    /// Runs the closure, catching a panic, and stores the outcome. Called
    /// once, by the task itself.
    fn run(&self);
    /// For the typed downcast in [`JoinHandle`](crate::JoinHandle).
    fn as_any(&self) -> &dyn Any;
}

/// The body of a task spawned with closure `F` returning `T`.
pub(crate) struct Closure<F, T> {
    f: UnsafeCell<Option<F>>,
    out: UnsafeCell<Option<std::thread::Result<T>>>,
}

impl<F, T> Closure<F, T> {
    pub(crate) fn new(f: F) -> Closure<F, T> {
        Closure { f: UnsafeCell::new(Some(f)), out: UnsafeCell::new(None) }
    }
}

// SAFETY: `f` is moved into the task at spawn and taken once by the task
// itself; `out` is written by the task before `JOIN_COMPLETE` and read by the
// single joiner after it (see the module docs). No `&F`/`&T` is ever shared.
unsafe impl<F: Send, T: Send> Sync for Closure<F, T> {}

impl<F, T> Body for Closure<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(&self) {
        // SAFETY: only the task itself calls `run`, once (module docs).
        let f = unsafe { (*self.f.get()).take() }.expect("a task body runs once");
        let result = catch_unwind(AssertUnwindSafe(f));
        // SAFETY: the joiner reads `out` only after JOIN_COMPLETE, which the
        // task publishes after this write.
        unsafe { *self.out.get() = Some(result) };
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Takes the result out of a finished task spawned with `F` returning `T`.
///
/// # Safety
///
/// The task's `join` word must be `JOIN_COMPLETE` (read with acquire), and
/// the caller must be the task's only joiner.
pub(crate) unsafe fn take_output<F, T>(task: &Task) -> std::thread::Result<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let body = task
        .body
        .as_any()
        .downcast_ref::<Closure<F, T>>()
        .expect("JoinHandle<T> always matches its task's body type");
    // SAFETY: the caller guarantees the task finished and we are the only reader.
    unsafe { (*body.out.get()).take() }.expect("a task's result is taken once")
}

/// Map of user-thread-local values (see `local.rs`), keyed by the address
/// of their `LocalKey`.
pub(crate) type LocalMap = Vec<(usize, Box<dyn Any>)>;

/// A user thread.
pub(crate) struct Task<B: ?Sized = dyn Body> {
    /// Saved stack pointer while suspended.
    pub(crate) ctx: UnsafeCell<StackPointer>,
    /// The park word (`park.rs`).
    pub(crate) park: ParkState,
    /// Identifier.
    pub(crate) id: ThreadId,
    /// Name given by `Builder::name`.
    pub(crate) name: Option<Box<str>>,
    /// The runtime the task belongs to.
    pub(crate) shared: Arc<Shared>,
    /// The stack, until the task has exited.
    pub(crate) stack: UnsafeCell<Option<Stack>>,
    /// Usable size of the stack (kept after the stack is gone, for messages).
    pub(crate) stack_size: usize,
    /// `JOIN_RUNNING` / `JOIN_WAITING` / `JOIN_COMPLETE`.
    pub(crate) join: AtomicU32,
    /// The joiner's waiter, valid while `join == JOIN_WAITING`.
    pub(crate) joiner: UnsafeCell<Option<WaiterRef>>,
    /// What the task waits on ([`WaitReason`] encoded), for deadlock reports.
    wait_kind: AtomicU8,
    wait_arg: AtomicU64,
    /// Slot in the runtime's registry of live tasks.
    pub(crate) registry_slot: AtomicU32,
    /// User-thread-local values.
    pub(crate) locals: UnsafeCell<LocalMap>,
    /// Closure and result.
    pub(crate) body: B,
}

// SAFETY: every `UnsafeCell` field is owned by one party at a time by the
// protocols in the module docs; the rest are atomics or immutable. The
// user-thread-local values may be `!Send`, but they are only touched by the
// task itself and move across kernel threads together with its whole stack,
// which is what running a user thread on any processor already means.
unsafe impl<B: ?Sized + Sync> Sync for Task<B> {}
// SAFETY: as above.
unsafe impl<B: ?Sized + Send> Send for Task<B> {}

/// A counted reference to a task.
pub(crate) type TaskRef = Arc<Task>;

impl Task {
    /// A new task with `body`, not yet runnable (its context is null).
    pub(crate) fn new<F, T>(
        id: ThreadId,
        name: Option<Box<str>>,
        shared: Arc<Shared>,
        stack: Stack,
        f: F,
    ) -> TaskRef
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let stack_size = stack.size();
        Arc::new(Task {
            ctx: UnsafeCell::new(std::ptr::null_mut()),
            park: ParkState::new(),
            id,
            name,
            shared,
            stack: UnsafeCell::new(Some(stack)),
            stack_size,
            join: AtomicU32::new(JOIN_RUNNING),
            joiner: UnsafeCell::new(None),
            wait_kind: AtomicU8::new(0),
            wait_arg: AtomicU64::new(0),
            registry_slot: AtomicU32::new(u32::MAX),
            locals: UnsafeCell::new(Vec::new()),
            body: Closure::<F, T>::new(f),
        })
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
