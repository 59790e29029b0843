//! The `std::thread`-shaped API for user threads: [`spawn`], [`Builder`],
//! [`JoinHandle`], [`Thread`], [`current`], [`yield_now`], [`yield_to`], [`sleep`],
//! [`park`].
//!
//! These functions act on the runtime of the calling user thread. Called from
//! an ordinary OS thread, [`yield_now`] and [`sleep`] fall back to their
//! `std::thread` counterparts, and [`spawn`], [`current`] and [`park`] panic
//! (there is no runtime to spawn on, or no user thread to park); use
//! [`Runtime::spawn`](crate::Runtime::spawn) from outside.

use crate::park::Kind;
use crate::processor::{self, SpawnOptions, Target};
use crate::task::{self, Joiner, Task, TaskRef, ThreadId, WaitReason};
use crate::wait::Waiter;
use std::any::Any;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A handle to a user thread.
#[derive(Clone)]
pub struct Thread {
    task: TaskRef,
}

impl Thread {
    /// The thread's identifier.
    pub fn id(&self) -> ThreadId {
        self.task.id
    }

    /// The thread's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.task.name()
    }

    /// Usable size of the thread's stack, in bytes.
    pub fn stack_size(&self) -> usize {
        self.task.stack_size.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The thread's scheduling level: its own, or, while it holds a
    /// [`Mutex`](crate::sync::Mutex) that a thread of a higher level waits on,
    /// that thread's level (priority inheritance, `priority.rs`).
    pub fn priority(&self) -> crate::Priority {
        self.task.priority()
    }

    /// What the thread's CPU budget allows and what it has used, from the
    /// scheduler's own accounting; `None` for a thread without a budget
    /// ([`Builder::cpu_budget`]).
    pub fn budget_stats(&self) -> Option<crate::BudgetStats> {
        self.task.budget().map(|b| b.stats(self.task.cpu.finished()))
    }

    /// The CPU time the thread has consumed: what its kernel threads' CPU
    /// clocks advanced while it was current on a processor, up to now for a
    /// running thread (whichever processor runs it), from any thread. The
    /// user-thread counterpart of `CLOCK_THREAD_CPUTIME_ID`, which on a user
    /// thread reads its kernel thread's clock, other threads' time included.
    ///
    /// The runtime accounts for a thread's CPU time from the first call on
    /// it (or its spawn with a budget) on, at the cost of a read of the
    /// kernel thread's CPU clock at each of its switches; so the time before
    /// that is not counted: the thread's figure starts at zero then (the
    /// caller's own at once, a thread running on another processor at the
    /// safe point a preemption request finds, or at its next switch), and
    /// the difference of two calls is exact. Time a thread spends blocked in the
    /// kernel after its processor was handed off is not counted
    /// (`cputime.rs`).
    pub fn cpu_time(&self) -> Duration {
        processor::account_cpu(&self.task);
        Duration::from_nanos(self.task.cpu.read())
    }

    /// The thread's task (`shared.rs`).
    #[cfg(feature = "shared-library")]
    pub(crate) fn task(&self) -> &TaskRef {
        &self.task
    }

    /// The handle of `task`.
    #[cfg(feature = "shared-library")]
    pub(crate) fn from_task(task: TaskRef) -> Thread {
        Thread { task }
    }

    /// Changes the thread's scheduling while it runs, waits to run or is parked
    /// (POSIX's `pthread_setschedparam`): real-time priority `rt` under `SCHED_FIFO`
    /// (`fifo`) or `SCHED_RR`, as [`Builder::realtime`] and [`Builder::fifo`] give at
    /// spawn; `rt` 0 makes it a [`Normal`](crate::Priority) thread. Raised above the
    /// caller's, it takes the caller's processor when the caller leaves the runtime's code;
    /// the caller lowering its own yields at once to a higher waiting thread and goes to
    /// the head of its new priority's list (`realtime.rs`, rule 3, for where a thread
    /// running on another processor or queued among `Normal` work stands).
    pub fn set_realtime(&self, rt: u8, fifo: bool) {
        crate::realtime::set(&self.task, rt, fifo);
    }

    /// Makes the thread's park token available: a parked thread runs again,
    /// and a running thread's next [`park`] returns at once. Can be called
    /// from any thread, inside or outside the runtime.
    pub fn unpark(&self) {
        processor::unpark_user(&self.task);
    }
}

impl fmt::Debug for Thread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Thread").field("id", &self.id()).field("name", &self.name()).finish()
    }
}

/// Owned permission to join a user thread. Dropping it detaches the thread.
pub struct JoinHandle<T> {
    thread: Thread,
    take: unsafe fn(&Task) -> std::thread::Result<T>,
    _result: PhantomData<T>,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("thread", &self.thread).finish()
    }
}

impl<T> JoinHandle<T> {
    /// The handle of `task`, a thread running a closure of type `F`.
    pub(crate) fn new<F>(task: TaskRef) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        JoinHandle {
            thread: Thread { task },
            take: task::take_output::<F, T>,
            _result: PhantomData,
        }
    }

    /// The thread this handle joins.
    pub fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Whether the thread has finished (so `join` will not block).
    pub fn is_finished(&self) -> bool {
        self.thread.task.state.is_complete()
    }

    /// Waits for the thread to finish and returns its result, or the payload
    /// of the panic that ended it. On a user thread this parks the user
    /// thread; on an OS thread it blocks the OS thread.
    ///
    /// A user thread joining a thread it spawned that has not started yet
    /// (still in its processor's next slot or fresh queue, not stolen) runs
    /// it *inline*, on its own stack, as a function call: see the crate docs,
    /// "Fork-join", for what such a child may observe differently.
    pub fn join(self) -> Result<T, Box<dyn Any + Send + 'static>> {
        let task = &*self.thread.task;
        if !task.state.is_complete() && !processor::join_inline(task) && !processor::join_park(task)
        {
            // An OS thread: wait through a `Waiter` (the protocol in
            // lifecycle.rs and task.rs), unless the runtime is gone: then
            // the thread never finishes (checked again, as completion is
            // final: it may have finished before the runtime stopped).
            if task.shared.stopped.load(Ordering::SeqCst) && !task.state.is_complete() {
                return Err(Box::new(crate::runtime::Cancelled));
            }
            let waiter = Waiter::new();
            // SAFETY: we are the only joiner (join consumes the handle), and
            // the task reads `joiner` only after seeing us registered, which
            // we publish below with release ordering.
            unsafe { *task.joiner.get() = Joiner::Waiter(waiter.as_ref()) };
            if task.state.register_joiner() {
                waiter.wait_os();
            }
            // Otherwise it completed meanwhile and never looks at `joiner`.
        }
        debug_assert!(task.state.is_complete());
        // SAFETY: the completion was seen with acquire (above, or by the
        // wake that ended our wait), and we are the only joiner.
        unsafe { (self.take)(task) }
    }
}

/// Thread factory, to set the name and stack size of a new user thread.
#[derive(Debug, Default)]
pub struct Builder {
    opts: SpawnOptions,
}

impl Builder {
    /// A builder with no name and the runtime's default stack size.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (shown in deadlock reports and overflow messages).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.opts.name = Some(name.into());
        self
    }

    /// Usable stack size in bytes: rounded up to pages, and a size under
    /// [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE) (0 included) saturates to it;
    /// `spawn` fails with [`io::ErrorKind::InvalidInput`] naming the value past
    /// [`MAX_STACK_SIZE`](crate::MAX_STACK_SIZE). Stacks of the runtime's
    /// default size come from a pool; others cost an `mmap` each.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.opts.stack_size = Some(bytes);
        self
    }

    /// Whether the thread may be preempted (default `true`). A thread that
    /// holds kernel-thread-affine state across long stretches of code (see
    /// [`crate::preempt`]; a tokio runtime, for one) can opt out: it is then
    /// neither preempted nor moved to another kernel thread when it blocks in
    /// the kernel. It still switches when it yields or blocks on a runtime
    /// primitive.
    pub fn preemptible(mut self, on: bool) -> Builder {
        self.opts.not_preemptible = !on;
        self
    }

    /// Holds the thread to at most `fraction` of one processor per `period`,
    /// like cgroup v2's `cpu.max` for one thread: once it has run
    /// `fraction × period` in a period it is preempted and sleeps until the
    /// period ends ([`crate::Event::Throttled`]), even when nothing else
    /// would run. The charge is the CPU time the thread consumes (its kernel
    /// thread's CPU clock while it is current; time waiting for a CPU on a
    /// loaded machine, or blocked in the kernel after a hand-off, is not
    /// charged), and a CPU-time timer of its kernel thread interrupts it when
    /// the allowance is used, however loaded the machine. A period's charge
    /// may exceed the allowance by the kernel's check of CPU timers (a tick),
    /// or by a [`no_preempt`](crate::no_preempt) region, and the excess is
    /// taken from the next period; a thread that is not
    /// [`preemptible`](Builder::preemptible) is throttled only when it
    /// yields. See `budget.rs` for the accounting.
    ///
    /// `spawn` fails with [`io::ErrorKind::InvalidInput`] unless `fraction`
    /// is in (0, 1] (not NaN), `period` is at least 500 µs, and the budget
    /// allows at least 1 µs per period (`fraction × period`, rounded to ns). A
    /// period past 2⁶³ ns (292 years) saturates to that: never renewed, in
    /// practice.
    pub fn cpu_budget(mut self, fraction: f64, period: Duration) -> Builder {
        self.opts.budget = Some((fraction, period));
        self
    }

    /// The thread's scheduling level (default [`Priority::Normal`](crate::Priority); every
    /// value is valid):
    /// strict between levels, with aging so no level starves forever. See
    /// [`Priority`](crate::Priority) and `priority.rs` for the rule and its bound.
    pub fn priority(mut self, p: crate::Priority) -> Builder {
        self.opts.priority = p;
        self.opts.rt_priority = 0;
        self.opts.rt_fifo = false;
        self
    }

    /// A real-time thread: level [`Priority::High`](crate::Priority) with real-time
    /// priority `rt` (1–255; POSIX's `SCHED_FIFO`/`SCHED_RR` priority), strictly ordered
    /// among `High` threads: one of a higher `rt` made runnable on a processor running a
    /// lower one takes it at once, and a yield or a quantum passes the processor only to a
    /// `High` thread of the same or a higher `rt` (`priority.rs`, "Real-time order"). 0 is
    /// a plain `High` thread, below every real-time one.
    pub fn realtime(mut self, rt: u8) -> Builder {
        self.opts.priority = crate::Priority::High;
        self.opts.rt_priority = rt;
        self
    }

    /// With [`realtime`](Builder::realtime): POSIX's `SCHED_FIFO` (`true`) rather than
    /// `SCHED_RR` (the default): the thread's quantum never passes the processor to a
    /// thread of its own real-time priority; it keeps it until it blocks, yields, or a
    /// higher one comes (`realtime.rs`).
    pub fn fifo(mut self, on: bool) -> Builder {
        self.opts.rt_fifo = on;
        self
    }

    /// Gives the thread its own thread pointer (`fs` base): a TLS block and
    /// glibc thread control block made for it (`_dl_allocate_tls`), switched
    /// in and out with its stack, so `errno`, `__thread` variables and every
    /// library's per-thread state follow the user thread from one kernel
    /// thread to another. When the thread's closure has returned, the rest
    /// of its exit runs on the kernel thread's own block, so the block may be
    /// freed as soon as [`JoinHandle::join`] returns. Only in the
    /// `shared-library` build (`libschedlab_pthread.so`).
    ///
    /// # Safety
    ///
    /// `tp` must be a valid thread control block for this process's TLS
    /// layout, used by no other thread, and kept alive until the thread has
    /// completed (its join returned or, detached, its closure returned and a
    /// moment passed — see `libschedlab_pthread`'s thread exit).
    #[cfg(feature = "shared-library")]
    pub unsafe fn thread_pointer(mut self, tp: usize) -> Builder {
        self.opts.thread_pointer = tp;
        self
    }

    /// Runs the thread on memory the caller provides (POSIX's
    /// `pthread_attr_setstack`): `len` bytes at `base`, with no guard page,
    /// never unmapped or reused for another thread. Overrides
    /// [`stack_size`](Builder::stack_size); `spawn` fails with
    /// [`io::ErrorKind::InvalidInput`] when less than
    /// [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE) remains once the top is
    /// aligned. A thread on lent memory is never run inline by its joiner
    /// (the crate docs, "Fork-join"): it runs where it was told to.
    ///
    /// # Safety
    ///
    /// `base..base + len` must be writable memory that nothing else uses
    /// until the thread has completed (its join returned or, detached, its
    /// closure returned and a moment passed), as for
    /// [`thread_pointer`](Builder::thread_pointer).
    ///
    /// `released` is raised once nothing runs on the memory any more, after
    /// the thread's last switch away from it: later than its join returns, so
    /// a spawner that reuses the memory waits for it first
    /// ([`StackReleased::wait`](crate::StackReleased::wait)).
    #[cfg(feature = "shared-library")]
    pub unsafe fn stack_memory(
        mut self,
        base: *mut u8,
        len: usize,
        released: crate::StackReleased,
    ) -> Builder {
        self.opts.lent_stack = Some((base as usize, len, released));
        self
    }

    /// The thread's signal mask (the first 64 signals, bit `n - 1` for
    /// signal `n`), applied to the kernel thread whenever the thread resumes
    /// (`shared-library` build; see `schedlab_rt::shared`, "Signals").
    #[cfg(feature = "shared-library")]
    pub fn signal_mask(mut self, mask: u64) -> Builder {
        self.opts.signal_mask = mask;
        self
    }

    /// Spawns the thread on the calling user thread's runtime.
    ///
    /// # Panics
    ///
    /// When called outside a user thread.
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        processor::spawn(Target::Current, self.opts, f)
    }

    /// Spawns the thread on `runtime` (from anywhere).
    pub fn spawn_on<F, T>(self, runtime: &crate::Runtime, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        processor::spawn(Target::Runtime(runtime.shared()), self.opts, f)
    }
}

/// Spawns a user thread on the calling user thread's runtime.
///
/// # Panics
///
/// When called outside a user thread, or when no stack can be mapped.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    processor::spawn(Target::Current, SpawnOptions::default(), f)
        .expect("failed to map a stack for a user thread")
}

/// The calling user thread.
///
/// # Panics
///
/// When called outside a user thread; see [`try_current`].
pub fn current() -> Thread {
    try_current().expect("schedlab_rt::current called outside a user thread")
}

/// The calling user thread, or `None` on an ordinary OS thread.
pub fn try_current() -> Option<Thread> {
    processor::current_task_ref().map(|task| Thread { task })
}

/// How much of the calling user thread's stack has been touched, and its size, in bytes
/// (`None` on an OS thread): the resident pages of the stack, from `mincore`. For choosing
/// a stack size (`Builder::stack_size`, `RuntimeBuilder::stack_size`) with evidence: call
/// it at the end of a thread's work. A stack is reused by later threads and keeps the pages
/// earlier ones touched until the runtime gives idle stacks' memory back, so give the
/// thread under study a stack size no other thread uses (it then gets a fresh stack).
/// Pages given back while the thread waited on I/O
/// ([`RuntimeBuilder::idle_stack_reclaim`](crate::RuntimeBuilder::idle_stack_reclaim)) still
/// count: the figure is at least what the stack held at such a reclaim.
pub fn stack_usage() -> Option<(usize, usize)> {
    let task = processor::current_task_ref()?;
    // SAFETY: the calling thread's own stack, which it runs on: it is not
    // freed or replaced while the thread runs.
    let stack = unsafe { (*task.stack.get()).as_ref() }?;
    // A stack whose pages were given back while the thread waited on I/O
    // (`reclaim.rs`) held at most `peak` then.
    Some((stack.touched().max(task.idle.peak()), stack.size()))
}

/// The address range of the calling user thread's usable stack, the memory it runs
/// on now (`None` on an OS thread): what `pthread_getattr_np` reports, and what a
/// garbage collector scans. A child its joiner runs inline (the crate docs,
/// "Fork-join") runs on, and reports, the joiner's stack.
pub fn stack_bounds() -> Option<std::ops::Range<usize>> {
    let task = processor::current_task_ptr()?;
    // SAFETY: as in `stack_usage`; the running thread (the caller) is alive
    // while it runs, so no counted reference is taken.
    let stack = unsafe { (*task.as_ref().stack.get()).as_ref() }?;
    let top = stack.top() as usize;
    Some(top - stack.size()..top)
}

/// Lets the processor run another runnable user thread, if there is one.
/// On an OS thread, `std::thread::yield_now`.
///
/// Always inlined: the switch happens in the caller's own frame, where the
/// CPU predicts the return into it best (see `processor.rs`).
#[inline(always)]
pub fn yield_now() {
    if !processor::yield_current() {
        os_yield();
    }
}

/// Hand-off scheduling (Mach's `thread_switch`): lets the processor run
/// `thread` next if it is runnable on the caller's processor and not
/// running, else behaves as [`yield_now`]. The caller goes behind it as a
/// yield puts it.
///
/// "Runnable on the caller's processor": in its next slot, at the top of
/// its fresh part (a thread the caller just spawned or woke), or — on a
/// runtime of one processor — anywhere in its queue. A thread queued on
/// another processor, running, parked or finished is not taken (the call
/// is then a plain yield); neither the next slot's streak bound nor
/// priority levels are bypassed. `processor/yield_to.rs` gives the cases
/// and why. On an OS thread, `std::thread::yield_now`.
pub fn yield_to(thread: &Thread) {
    if !processor::yield_to(&thread.task) {
        os_yield();
    }
}

/// The kernel's yield, for a caller outside any processor. In the
/// `shared-library` build the system call itself: libc's `sched_yield` is
/// the library's there, which would call back here.
#[cold]
fn os_yield() {
    #[cfg(not(feature = "shared-library"))]
    std::thread::yield_now();
    // SAFETY: sched_yield has no arguments and no preconditions.
    #[cfg(feature = "shared-library")]
    unsafe {
        libc::syscall(libc::SYS_sched_yield);
    }
}

/// Blocks the calling user thread until its park token is available (see
/// [`Thread::unpark`]), consuming it. May also return spuriously, as
/// `std::thread::park` may.
///
/// # Panics
///
/// When called outside a user thread.
pub fn park() {
    assert!(
        processor::current_task_ptr().is_some(),
        "schedlab_rt::park called outside a user thread"
    );
    processor::park_current(Kind::User, WaitReason::Park);
}

/// [`park`] with a time limit: returns when the park token is available
/// (consuming it), when `d` has passed, or spuriously. On an OS thread,
/// `std::thread::park_timeout`... of the OS thread, which a user thread's
/// [`Thread::unpark`] never reaches: callers outside the runtime use their
/// own wake-ups.
///
/// The timer that ends the wait stays in the runtime's timer heap until it
/// fires, even when the thread was unparked before: it then makes the
/// thread's token available once more, one more spurious return that the
/// caller's loop absorbs (as with `park`).
pub fn park_timeout(d: Duration) {
    let Some(task) = processor::current_task_ref() else {
        std::thread::park_timeout(d);
        return;
    };
    {
        // Inside a runtime section, as in `sleep`.
        let _section = processor::here();
        task.shared.timers.insert_unpark(d, task.clone());
    }
    drop(task);
    processor::park_current(Kind::User, WaitReason::Park);
}

/// Puts the calling user thread to sleep for at least `d`; the processor runs
/// other threads meanwhile. On an OS thread, `std::thread::sleep`.
pub fn sleep(d: Duration) {
    let Some(task) = processor::current_task_ref() else {
        std::thread::sleep(d);
        return;
    };
    if d.is_zero() {
        yield_now();
        return;
    }
    let deadline = Instant::now() + d;
    {
        // Inside a runtime section: preempted while holding the timer heap's
        // lock, this thread would leave it locked to the next thread on its
        // kernel thread, which blocks on it (and the monitor with it).
        let _section = processor::here();
        task.shared.timers.insert(d, task.clone());
    }
    drop(task);
    // Exactly one Sync token comes, from the timer.
    processor::park_current(Kind::Sync, WaitReason::Sleep);
    debug_assert!(Instant::now() >= deadline);
}
