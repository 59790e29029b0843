//! The runtime: building it (processors, stack size, event hook), running a
//! closure to completion with [`Runtime::block_on`], deadlock reports, and
//! shutting down in `Drop`.
//!
//! The state all processors of one runtime share (`Shared`: the injection
//! queue, the stealers of every processor's queue, the idle set and parkers,
//! timers, the registry of stacks through which the deadlock detector finds
//! live threads, and the configuration) is defined in `state.rs`, in the
//! processor layer; this file, in the API layer, builds it. The protocols
//! below (deadlock detection, resizing) are the runtime's as a whole.
//!
//! # Deadlock detection
//!
//! When the last processor is about to sleep with no timer pending, it asks
//! the registry (`registry.rs`, which also says how the check reads it
//! safely) whether every live user thread is parked for good. If so, no
//! user thread can ever wake another, and every [`Runtime::block_on`] in
//! progress returns [`Deadlock`] listing the parked threads and what they
//! wait on.
//!
//! "For good" needs to know that nothing *outside* the runtime will wake
//! them. The rule: a thread parked on a primitive an OS thread may use is
//! not stuck, and while one is parked so, no deadlock is declared. The
//! runtime knows a primitive to be reachable from OS threads when it can see
//! it, without cost on the paths user threads take between themselves:
//! - a [`channel`](crate::sync::channel) made on an OS thread outside any
//!   runtime (the common case: `main` makes it, moves one end into
//!   `block_on` and the other into a `std::thread`), or whose endpoint an OS
//!   thread has cloned, dropped or waited on (`sync/channel.rs`, "OS
//!   threads"); the mark is for good.
//!
//! Limits. The runtime cannot see an endpoint or a reference being *moved*:
//! a channel made by a user thread whose sender is passed to an OS thread
//! that only sends on it, a [`Mutex`](crate::sync::Mutex) or `Condvar` (made
//! by a `const fn`, so nowhere in particular) unlocked or notified by an OS
//! thread, a [`Thread`](crate::Thread) handle unparked from an OS thread,
//! and user threads of *another* runtime, are all invisible to it. If every
//! user thread is parked waiting for such a wake-up, a deadlock is reported;
//! the parked threads stay parked (nothing cancels them), so if the wake-up
//! does come later the closure of `block_on` goes on and its result is
//! dropped. Programs that wake user threads that way should turn detection
//! off with [`RuntimeBuilder::deadlock_detection`] (or make the channel on
//! the OS thread).
//!
//! # Resizing
//!
//! [`Runtime::set_processors`] is seed 003's `sa_setconcurrency`: the number
//! of virtual processors that run user threads changes while they run. A
//! runtime makes `max` processors at build ([`RuntimeBuilder::max_processors`]),
//! each with its kernel thread, run queue, next slot and parker; those arrays
//! never change, so nothing that indexes them needs a lock. `active` of them
//! run user threads: those of index `< active`, a prefix (Go's `procresize`
//! keeps `allp[:gomaxprocs]` the same way).
//!
//! **Invariant.** A processor of index `>= active` ("removed") runs at most
//! what it is running when it is removed, up to its next look at its `halt`
//! flag; then it moves its next slot and queue to the injection queue and
//! parks *retired* (`Idle::retire`): outside the idle protocol, never the
//! target of a wake-up, counted with the sleepers by the deadlock check.
//!
//! **Protocol.** One resize at a time (the `resize` lock).
//! 1. *Shrink* from `a` to `n`: store `active = n`; for each removed
//!    processor set `halt` and unpark its parker; poke the monitor.
//! 2. The removed processor leaves user code at its next scheduling decision
//!    that reads `halt`: the periodic maintenance decision (every
//!    `MAINTENANCE_INTERVAL`) picks nothing, as at shutdown, and a yield with
//!    nothing else to run goes to the scheduler context instead of going
//!    on; a park with nothing local goes there anyway. No switch pays for this: `halt` replaces the
//!    shutdown flag those paths already read. With preemption on, the
//!    monitor asks it at once (`REQ_PREEMPT`, regardless of the quantum) and
//!    the preempted thread goes back to the processor's own queue through
//!    the scheduler context (`Processor::yield_to_scheduler`). A searching
//!    one stops searching at its next round; a sleeping one is woken by
//!    step 1's unpark (and one a producer woke meanwhile passes the wake-up
//!    on, `Processor::search`). One whose kernel thread is blocked is
//!    retaken and handed to a spare by the monitor whether or not work
//!    waits, and a machine returning from the kernel binds only active
//!    processors (`blocking.rs`).
//! 3. In its scheduler context it sees `index >= active`
//!    (`Processor::retire`): moves its next slot's thread and its queue to the
//!    injection queue and notifies, emits [`Event::ProcessorRemoved`],
//!    retires, runs the deadlock check if it is the last to stop, and parks
//!    until `index < active` or shutdown, checking again after every wake.
//! 4. *Grow* from `a` to `n`: store `active = n`; for each added processor
//!    clear `halt` and unpark it. A retired one wakes, sees it is active,
//!    unretires, waits for the deadlock check's gate, emits
//!    [`Event::NewProcessor`] and searches (it finds the injected work
//!    without being notified). One that had not yet retired goes on.
//!
//! **Why it is correct.** *No thread lost or run twice:* a runnable thread is
//! in one place at a time, and retiring moves the slot's and the queue's
//! threads, which only their owner pushes, to the injection queue, which
//! every active processor polls; until then they stay stealable, since
//! thieves look at all `max` processors (and the monitor, seeing work wait
//! behind a removed processor's thread, wakes an idle one). *No wake-up
//! lost:* wake-ups go to processors in the idle set; a removed one is there
//! only until step 1's unpark has woken it, and, counted as searching by a
//! producer meanwhile, it leaves the search as any searcher does: the last
//! one notifies again. *No lost re-add:* step 4 stores `active` before it
//! unparks, and a retired processor reads `active` before every park, whose
//! token outlives an early unpark. *Deadlock check:* it requires all `max`
//! processors asleep or retired (`CheckGate::begin` says why the sum is
//! exact), and a processor that retires last runs it. *Events in order:* a
//! processor's `NewProcessor` and `ProcessorRemoved`, and the monitor's
//! `NewProcessor` after `ProcessorLost` (only for an announced, active
//! processor), are emitted under the resize lock, so after a processor's
//! `ProcessorRemoved` the hook sees nothing of it before the
//! `NewProcessor` of its return (`tests/resize.rs` checks this).

use crate::event::{Event, Hook};
use crate::idle::{CheckGate, Idle, Parker};
use crate::monitor::DEFAULT_BLOCK_THRESHOLD;
use crate::preempt::Preemption;
use crate::processor::{self, ProcPtr, Processor, SpawnOptions, Target};
use crate::queue::{LifoSlot, QueueStealer, RunQueue};
use crate::registry::{ParkedThread, Registry};
use crate::stack::Depot;
use crate::state::MonitorCtl;
use crate::state::{Blocking, MachineSet, Shared, Spares};
use crate::thread::JoinHandle;
use crate::timer::Timers;
use crossbeam_deque::Steal;
use crossbeam_deque::{Injector, Worker};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::io;
use std::panic::resume_unwind;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle as OsJoinHandle;
use std::time::Duration;

/// Default usable stack size of a user thread.
///
/// Chosen with evidence (`tests/stack_usage.rs`, [`crate::stack_usage`]): channel
/// operations, `format!`, reading a file, a `HashMap` of 10,000 entries, `sort_unstable` of
/// a million values and a node of a spawn tree each touch 4 KiB; a stable sort or a panic
/// caught with the default hook 8 KiB; a panic that prints its backtrace
/// (`RUST_BACKTRACE=1`) or `Backtrace::force_capture` 16–20 KiB, the most of anything we
/// run. 64 KiB leaves three times that. A stack costs address space, not memory, beyond
/// the pages its threads touch (a live thread of a spawn tree costs about 4.5 KiB resident
/// with its task), so a larger default would cost little — but it would hide overflows
/// that a guard page reports today. Ask for more with `Builder::stack_size` or
/// `RuntimeBuilder::stack_size`.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// Default time a processor that ran out of work keeps searching before it
/// sleeps (waking a sleeping kernel thread costs 11–35 µs on the lab machine).
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// The longest search [`RuntimeBuilder::spin`] accepts: a processor searching
/// longer only burns its CPU (and an idle runtime never sleeps, so its
/// deadlock check never runs).
pub const MAX_SPIN: Duration = Duration::from_secs(1);

/// What a duration that means "after this long" saturates to
/// ([`RuntimeBuilder::block_threshold`], a [`Preemption::Quantum`]): never, in
/// practice, while the monitor's deadline arithmetic on `Instant`s (a
/// quantum's end, a doubling poll interval) cannot overflow, as it did with
/// `Duration::MAX`.
const LONGEST_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// Idle stacks of the default size whose memory a runtime keeps beyond its
/// processors' pools; the memory of any more is given back in the background
/// (`stack.rs`, `Depot`).
const STACK_RETAIN: usize = 1024;

/// The payload of the `Err` a [`JoinHandle::join`] returns for a user
/// thread that never finished because its [`Runtime`] was dropped first
/// (it was queued or parked then; see [`Runtime`]'s drop). Test for it with
/// `payload.is::<Cancelled>()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cancelled;

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the user thread's runtime was dropped before it finished")
    }
}

impl std::error::Error for Cancelled {}

/// Every user thread is parked on a runtime primitive, none on one the
/// runtime knows an OS thread may use, and no timer is pending, so none of
/// them can run again unless woken from outside in a way the runtime cannot
/// see (module docs, "Deadlock detection"). Returned by
/// [`Runtime::block_on`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    /// The parked threads, by identifier.
    pub threads: Vec<ParkedThread>,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "deadlock: all {} user threads are parked", self.threads.len())?;
        for t in &self.threads {
            write!(f, "\n  thread {}", t.id)?;
            if let Some(n) = &t.name {
                write!(f, " '{n}'")?;
            }
            write!(f, " waits on {}", t.waiting_on)?;
        }
        Ok(())
    }
}

impl std::error::Error for Deadlock {}

/// Configures and builds a [`Runtime`].
pub struct RuntimeBuilder {
    processors: usize,
    max_processors: Option<usize>,
    stack_size: usize,
    spin: Duration,
    deadlock_detection: bool,
    hook: Option<Hook>,
    preemption: Preemption,
    block_threshold: Duration,
    transparent_blocking: bool,
    idle_reclaim: Option<Duration>,
    /// `None`: the default (on, and silent where it falls back).
    idle_reclaim_live: Option<bool>,
}

impl fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("processors", &self.processors)
            .field("max_processors", &self.max_processors)
            .field("stack_size", &self.stack_size)
            .field("spin", &self.spin)
            .field("deadlock_detection", &self.deadlock_detection)
            .field("hook", &self.hook.is_some())
            .field("preemption", &self.preemption)
            .field("block_threshold", &self.block_threshold)
            .field("transparent_blocking", &self.transparent_blocking)
            .field("idle_reclaim", &self.idle_reclaim)
            .field("idle_reclaim_live", &self.idle_reclaim_live)
            .finish()
    }
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            processors: std::thread::available_parallelism().map_or(1, |n| n.get().min(64)),
            max_processors: None,
            stack_size: DEFAULT_STACK_SIZE,
            spin: DEFAULT_SPIN,
            deadlock_detection: true,
            hook: None,
            preemption: Preemption::default(),
            block_threshold: DEFAULT_BLOCK_THRESHOLD,
            transparent_blocking: true,
            idle_reclaim: Some(crate::DEFAULT_IDLE_RECLAIM),
            idle_reclaim_live: None,
        }
    }
}

impl RuntimeBuilder {
    /// Number of virtual processors (kernel threads running user threads),
    /// 1 to 64, at first ([`Runtime::set_processors`] changes it); `build`
    /// fails with [`io::ErrorKind::InvalidInput`] naming any other value.
    /// Default: the CPUs available to the process (at most 64).
    pub fn processors(mut self, n: usize) -> Self {
        self.processors = n;
        self
    }

    /// The most processors [`Runtime::set_processors`] may ask for, at least
    /// [`processors`](RuntimeBuilder::processors) and at most 64 (`build` fails
    /// with [`io::ErrorKind::InvalidInput`] naming any other value). Default:
    /// `processors`, so a runtime can shrink and grow back but not beyond
    /// what it was built with unless asked.
    ///
    /// Every processor up to the maximum is made at build, with its kernel
    /// thread, which parks at once when it is not among the active ones (it
    /// costs a thread and its stack, no CPU). The default is not the
    /// machine's CPU count because a runtime with a maximum of one processor
    /// runs its queue unsynchronised (nobody can ever steal from it,
    /// `queue.rs`), and one that may grow cannot: a one-processor runtime
    /// that may gain a second pays a locked instruction per queue operation.
    pub fn max_processors(mut self, m: usize) -> Self {
        self.max_processors = Some(m);
        self
    }

    /// Default usable stack size of user threads, rounded up to whole pages;
    /// a size under [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE) (0 included)
    /// saturates to it, and
    /// `build` fails with [`io::ErrorKind::InvalidInput`] naming one past
    /// [`MAX_STACK_SIZE`](crate::MAX_STACK_SIZE). Default [`DEFAULT_STACK_SIZE`].
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// How long a processor that ran out of work searches before sleeping.
    /// Default [`DEFAULT_SPIN`]; `Duration::ZERO` sleeps at once. A
    /// processor that only I/O readiness can feed (threads wait on
    /// descriptors, the runtime's other processors sleep, and its last work
    /// came from its own queue or poll) sleeps at once in the poller
    /// whatever this says, as Go's and tokio's do; so does one whose
    /// runtime's other awake processors already fill the CPUs the process
    /// may use (more processors than CPUs). `build`
    /// fails with [`io::ErrorKind::InvalidInput`] naming a value past
    /// [`MAX_SPIN`].
    pub fn spin(mut self, d: Duration) -> Self {
        self.spin = d;
        self
    }

    /// Whether [`Runtime::block_on`] reports deadlocks (default on; see the
    /// module docs for when to turn it off).
    pub fn deadlock_detection(mut self, on: bool) -> Self {
        self.deadlock_detection = on;
        self
    }

    /// How user threads share a processor (default
    /// [`Preemption::Quantum`]`(`[`DEFAULT_QUANTUM`](crate::DEFAULT_QUANTUM)`)`;
    /// see [`crate::preempt`] for the argument and the hazards). `build`
    /// fails with [`io::ErrorKind::InvalidInput`] naming a quantum under
    /// [`MIN_QUANTUM`](crate::MIN_QUANTUM); one over a day saturates to a day.
    pub fn preemption(mut self, p: Preemption) -> Self {
        self.preemption = p;
        self
    }

    /// How long a kernel thread must have been blocked in the kernel, with
    /// work waiting, before its processor goes to another kernel thread
    /// (default [`DEFAULT_BLOCK_THRESHOLD`](crate::DEFAULT_BLOCK_THRESHOLD)).
    /// Saturates: under 1 µs is taken as 1 µs, over a day as a day (never,
    /// in practice).
    pub fn block_threshold(mut self, d: Duration) -> Self {
        self.block_threshold = d.clamp(Duration::from_micros(1), LONGEST_WAIT);
        self
    }

    /// Whether the monitor finds kernel threads blocked in calls the program
    /// did not wrap in [`blocking`](crate::blocking()) (`std::thread::sleep`,
    /// `std::fs`, a `std` mutex, a C library) and hands their processors off
    /// too. Default on; off, only [`blocking`](crate::blocking()) hands off.
    pub fn transparent_blocking(mut self, on: bool) -> Self {
        self.transparent_blocking = on;
        self
    }

    /// After how long a user thread waiting on I/O (a `schedlab_rt::net` or
    /// `io` readiness wait) gives its stack's memory back: the pages below
    /// its live frames, and with [`idle_stack_reclaim_live`](Self::idle_stack_reclaim_live)
    /// every page. `None` turns it off. Default
    /// [`DEFAULT_IDLE_RECLAIM`](crate::DEFAULT_IDLE_RECLAIM) (1 s);
    /// saturates at 1 ms below and a day above. The thread's stack keeps its
    /// addresses; it costs the thread's next resume a page fault.
    pub fn idle_stack_reclaim(mut self, after: Option<Duration>) -> Self {
        self.idle_reclaim = after.map(|d| d.clamp(crate::reclaim::MIN_IDLE_RECLAIM, LONGEST_WAIT));
        self
    }

    /// Also gives back the page(s) holding the live frames of a thread
    /// waiting on I/O ([`idle_stack_reclaim`](Self::idle_stack_reclaim)):
    /// their bytes are kept in a heap buffer of their size (a few hundred
    /// bytes for a thread in a `read`) and the pages are registered with
    /// userfaultfd, so that any access to them meanwhile — by another thread
    /// borrowing a local, or by the kernel (a `read(2)` into a buffer there)
    /// — gets them back with their contents, as the thread's own resume
    /// does. Default on; where userfaultfd is refused (no `CAP_SYS_PTRACE`
    /// and `vm.unprivileged_userfaultfd` 0, a seccomp filter, a kernel
    /// before 6.8), or `vm.max_map_count` is reached, the live pages stay
    /// (said once on standard error when this was called with `true`; the
    /// default falls back silently).
    pub fn idle_stack_reclaim_live(mut self, on: bool) -> Self {
        self.idle_reclaim_live = Some(on);
        self
    }

    /// Calls `hook` for every scheduling [`Event`]. See [`crate::event`] for
    /// the rules a hook must follow.
    pub fn on_event(mut self, hook: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Checks every knob, or saturates it where its docs say so; an error
    /// names the knob and the value. Nothing has been started yet.
    fn validated(mut self) -> io::Result<Self> {
        let invalid = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        if !(1..=64).contains(&self.processors) {
            return invalid(format!("processors must be 1 to 64, not {}", self.processors));
        }
        let max = self.max_processors.unwrap_or(self.processors);
        if !(self.processors..=64).contains(&max) {
            return invalid(format!(
                "max_processors must be {} (processors) to 64, not {max}",
                self.processors
            ));
        }
        self.stack_size = crate::stack::checked_size(self.stack_size, "stack_size")?;
        if self.spin > MAX_SPIN {
            return invalid(format!("spin must be at most {MAX_SPIN:?}, not {:?}", self.spin));
        }
        if let Preemption::Quantum(q) = self.preemption {
            if q < crate::MIN_QUANTUM {
                return invalid(format!(
                    "the preemption quantum must be at least {:?}, not {q:?}",
                    crate::MIN_QUANTUM
                ));
            }
            self.preemption = Preemption::Quantum(q.min(LONGEST_WAIT));
        }
        self.block_threshold = self.block_threshold.clamp(Duration::from_micros(1), LONGEST_WAIT);
        Ok(self)
    }

    fn shared(self, stealers: Vec<QueueStealer>) -> Shared {
        let max = self.max_processors.unwrap_or(self.processors).max(self.processors);
        Shared {
            max_procs: max,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            active: CachePadded::new(AtomicUsize::new(self.processors)),
            resize: Mutex::new(()),
            stack_size: self.stack_size,
            spin: self.spin,
            deadlock_detection: self.deadlock_detection,
            hook: self.hook,
            injector: Injector::new(),
            stealers,
            slots: (0..max).map(|_| CachePadded::new(LifoSlot::new())).collect(),
            parkers: (0..max).map(|_| CachePadded::new(Parker::new())).collect(),
            idle: Idle::new(),
            timers: Timers::new(),
            depot: Depot::new(self.stack_size, STACK_RETAIN),
            shutdown: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            task_refs: CachePadded::new(AtomicUsize::new(1)),
            check_gate: CheckGate::new(),
            blocking: Mutex::new(Blocking::default()),
            blocking_cv: Condvar::new(),
            preemption: self.preemption,
            cpu_accounting: AtomicBool::new(false),
            prios: AtomicBool::new(false),
            prio: Default::default(),
            block_threshold: self.block_threshold,
            transparent_blocking: self.transparent_blocking,
            reclaim: crate::reclaim::Reclaim::new(self.idle_reclaim, self.idle_reclaim_live),
            #[cfg(feature = "shared-library")]
            interrupted: std::sync::Mutex::new(Vec::new()),
            procs: OnceLock::new(),
            machines: MachineSet::default(),
            spares: Spares::default(),
            detached: std::sync::atomic::AtomicIsize::new(0),
            monitor: MonitorCtl::default(),
            extra_threads: Mutex::new(Vec::new()),
            registry: Registry::new(),
        }
    }

    /// Starts the processors. Fails with [`io::ErrorKind::InvalidInput`]
    /// naming the knob and its value when one is out of range (each knob's
    /// docs say which values are refused and which saturate), or with the
    /// error of a kernel thread that could not be started.
    pub fn build(self) -> io::Result<Runtime> {
        let this = self.validated()?;
        let max = this.max_processors.unwrap_or(this.processors);
        crate::guard::install_handler();
        crate::preempt::install_handler();
        crate::queue::make_steal_collector();
        // With one processor for good nobody steals: its whole run queue is
        // private. With more, or more to come, nothing is (`queue.rs`).
        let private_cap = if max == 1 { usize::MAX } else { 0 };
        let queues: Vec<RunQueue> =
            (0..max).map(|_| RunQueue::new(Worker::new_fifo(), private_cap)).collect();
        let shared = Arc::new(this.shared(queues.iter().map(RunQueue::stealer).collect()));
        // The strong count owned by the population of task references
        // (`Shared`, "Lifetime"); released by `Shared::release_refs`.
        std::mem::forget(Arc::clone(&shared));
        let processors: Box<[Processor]> = queues
            .into_iter()
            .enumerate()
            .map(|(index, queue)| Processor::new(index, shared.clone(), queue))
            .collect();
        let ptrs: Box<[ProcPtr]> = processors.iter().map(|p| ProcPtr(p)).collect();
        let _ = shared.procs.set(ptrs.clone());
        let mut runtime = Runtime {
            shared: shared.clone(),
            threads: Vec::new(),
            processors: Processors(processors),
            monitor: None,
        };
        // The monitor also hands off processors of blocked kernel threads,
        // and retakes removed ones: always.
        let watch = true;
        let initial = shared.active.load(Ordering::SeqCst);
        for (index, p) in ptrs.iter().enumerate() {
            let shared = shared.clone();
            let p = *p;
            let announce = index < initial;
            // If this fails, dropping `runtime` stops the processors started so far.
            let t =
                crate::machine::spawn_kernel_thread(format!("schedlab-vp-{index}"), move || {
                    processor::machine_main(shared, Some(p), announce)
                })?;
            runtime.threads.push(t);
        }
        if watch {
            let s = shared.clone();
            runtime.monitor =
                Some(crate::machine::spawn_kernel_thread("schedlab-monitor".into(), move || {
                    crate::monitor::monitor_main(s)
                })?);
            // One spare ahead, so the first hand-off need not create a thread.
            shared.start_machine(None);
        }
        Ok(runtime)
    }
}

/// The processors a [`Runtime`] owns. The `Runtime` itself never touches them while
/// its kernel threads run (each processor is used by the machine bound to it,
/// `blocking.rs`); it shuts them down and frees them after joining every kernel
/// thread. So the handle can move and be shared between threads like the
/// `Arc<Shared>` beside it.
struct Processors(Box<[Processor]>);

// SAFETY: see the type's docs: no access through the `Runtime` while machines
// run; after they are joined, the dropping thread is the only user.
unsafe impl Send for Processors {}
// SAFETY: as above; `&Runtime` gives no access to the processors.
unsafe impl Sync for Processors {}

/// A two-level thread runtime: user threads multiplexed on virtual processors.
///
/// Dropping the runtime stops the processors (after their running user
/// threads reach a switch point), joins their kernel threads and unmaps the
/// stacks of user threads that were still queued. User threads still
/// *parked* at that point can never run again; they are leaked with their
/// stacks (nothing on them is dropped), as a process exit leaks detached
/// threads, because other objects may still point into those stacks (the
/// wait queues of the primitives they wait on).
///
/// Every user thread left, queued or parked, is marked cancelled, so that:
/// - [`JoinHandle::join`] on it from an OS thread returns
///   `Err(Box<`[`Cancelled`]`>)` instead of waiting forever (a join that was
///   *already* waiting on another OS thread while the runtime dropped still
///   waits: nobody is left to wake it);
/// - a channel never hands a value to a receiver that is parked for good:
///   [`Sender::try_send`](crate::sync::Sender::try_send) and `send` skip it,
///   so the value is buffered, given back (`Full`), or waited on, never
///   lost in a dead thread's slot.
///
/// - the `sync` primitives never hand a permit, a lock or a notification to
///   one (`Semaphore`, `RwLock`, `Condvar::notify_one` skip it; a `Mutex`
///   wakes waiters to retry, so a cancelled one only drops out).
///
/// Not done: unwinding the cancelled threads so their destructors run (a
/// `Receiver` they hold is not dropped, so senders do not see
/// `Disconnected`, and a `MutexGuard` they hold keeps its mutex locked).
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<OsJoinHandle<()>>,
    /// The processors; freed after every kernel thread has stopped.
    processors: Processors,
    monitor: Option<OsJoinHandle<()>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("processors", &self.processors())
            .field("max_processors", &self.shared.max_procs)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// A runtime with the defaults.
    pub fn new() -> io::Result<Runtime> {
        Runtime::builder().build()
    }

    /// Number of virtual processors that run user threads: the last count
    /// given to [`Runtime::set_processors`], else the one built with.
    /// Removed processors may still be finishing a thread's stint.
    pub fn processors(&self) -> usize {
        self.shared.active.load(Ordering::SeqCst)
    }

    /// The most processors [`Runtime::set_processors`] accepts
    /// ([`RuntimeBuilder::max_processors`]).
    pub fn max_processors(&self) -> usize {
        self.shared.max_procs
    }

    /// Grows or shrinks the set of virtual processors that run user threads
    /// to `n`, while they run (seed 003's `sa_setconcurrency`); callable from
    /// any thread, including a user thread of this runtime.
    ///
    /// Returns at once. A removed processor (the highest indices go first)
    /// finishes the stint of the thread it runs: with preemption on
    /// ([`RuntimeBuilder::preemption`]) the monitor preempts that thread at
    /// its next safe point; cooperative, the processor stops at the thread's
    /// next scheduling decision (a park, an exit, or within
    /// a few dozen yields), so a thread that never yields keeps it. Its
    /// queued threads, and the one in its next slot, move to the injection
    /// queue, where the other processors take them (they can also steal
    /// them until then); then its kernel thread parks, emitting
    /// [`Event::ProcessorRemoved`]. No user thread is lost or run twice.
    /// An added processor's kernel thread (made at build) wakes, emits
    /// [`Event::NewProcessor`] and looks for work. A processor whose kernel
    /// thread is blocked in the kernel is handed to another kernel thread to
    /// retire, as for any blocked thread (`blocking`).
    ///
    /// # Errors
    ///
    /// `InvalidInput` if `n` is 0 or more than [`Runtime::max_processors`].
    pub fn set_processors(&self, n: usize) -> io::Result<()> {
        let shared = &*self.shared;
        let max = shared.max_procs;
        if n == 0 || n > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "set_processors: the count must be 1 to {max} (the runtime's \
                     max_processors), not {n}"
                ),
            ));
        }
        // "Resizing" in the module docs: steps 1 and 4. Not preempted while
        // holding the lock (on a user thread): the next thread to resize on
        // its kernel thread would block it.
        crate::preempt::no_preempt(|| self.resize(n))
    }

    fn resize(&self, n: usize) -> io::Result<()> {
        let shared = &*self.shared;
        let _one_at_a_time = shared.resize.lock().unwrap_or_else(|e| e.into_inner());
        let old = shared.active.load(Ordering::SeqCst);
        if n == old {
            return Ok(());
        }
        // Before any unpark: a woken processor reads it.
        shared.active.store(n, Ordering::SeqCst);
        // The removed (n..old) or added (old..n) ones.
        let changed = n.min(old)..n.max(old);
        for (p, parker) in shared.processors()[changed.clone()].iter().zip(&shared.parkers[changed])
        {
            // SAFETY: processors outlive the runtime's `Shared` users.
            unsafe { &*p.0 }.halt.store(n < old, Ordering::SeqCst);
            parker.unpark();
        }
        // It preempts removed processors and retakes blocked ones.
        shared.monitor.poke();
        Ok(())
    }

    /// The runtime's stacks of the default size: how many were carved, and how many
    /// idle ones keep their memory or gave it back.
    pub fn stack_stats(&self) -> crate::stack::StackStats {
        self.shared.depot.stats()
    }

    /// Spawns a user thread from outside the runtime (or from another runtime).
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        processor::spawn(Target::Runtime(&self.shared), SpawnOptions::default(), f)
            .expect("failed to spawn a user thread")
    }

    /// Runs `f` as a user thread named `main` and waits for it, blocking the
    /// calling OS thread. Returns its result, or [`Deadlock`] if every user
    /// thread ends up parked for good. A panic in `f` is resumed here.
    ///
    /// # Panics
    ///
    /// When called from a user thread (that would block a processor), and
    /// when the main thread's stack cannot be mapped.
    pub fn block_on<F, T>(&self, f: F) -> Result<T, Deadlock>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        assert!(
            processor::current_task_ptr().is_none(),
            "Runtime::block_on called from a user thread; use spawn and join instead"
        );
        struct Done(Arc<Shared>, Arc<AtomicBool>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.1.store(true, Ordering::Release);
                self.0.signal_done();
            }
        }
        let done = Arc::new(AtomicBool::new(false));
        let signal = Done(self.shared.clone(), done.clone());
        let start = self.shared.blocking.lock().unwrap().epoch;
        let opts = SpawnOptions { name: Some("main".into()), ..SpawnOptions::default() };
        let handle = processor::spawn(Target::Runtime(&self.shared), opts, move || {
            let _signal = signal;
            f()
        })
        .expect("failed to spawn the main user thread");
        let main = handle.thread().id();
        let mut seen = start;
        let mut b = self.shared.blocking.lock().unwrap();
        loop {
            if done.load(Ordering::Acquire) {
                break;
            }
            if b.epoch != seen {
                // A deadlock of this call parks its main thread too. A report
                // without it was taken before the main thread was queued (a
                // check that began while only the threads an earlier deadlock
                // left behind were there): not ours, keep waiting.
                if b.report.iter().any(|t| t.id == main) {
                    return Err(Deadlock { threads: b.report.clone() });
                }
                seen = b.epoch;
            }
            b = self.shared.blocking_cv.wait(b).unwrap();
        }
        drop(b);
        match handle.join() {
            Ok(v) => Ok(v),
            Err(payload) => resume_unwind(payload),
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Shutdown step 1 (processor.rs): every processor, active or
        // retired, leaves user code at its next decision and is woken.
        self.shared.shutdown.store(true, Ordering::SeqCst);
        for p in self.shared.processors() {
            // SAFETY: the processors are freed below, after every kernel
            // thread has stopped.
            unsafe { &*p.0 }.halt.store(true, Ordering::SeqCst);
        }
        for p in self.shared.parkers.iter() {
            p.unpark();
        }
        // A kernel thread that lost its processor waits as a spare: wake
        // them all now (one that becomes a spare later sees `shutdown`
        // first, `blocking.rs`).
        self.shared.spares.wake_all();
        self.shared.monitor.poke();
        if let Some(m) = self.monitor.take() {
            let _ = m.join();
        }
        // Step 3.
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        loop {
            self.shared.spares.wake_all();
            let extra = std::mem::take(&mut *self.shared.extra_threads.lock().unwrap());
            if extra.is_empty() && self.shared.spares.is_empty() {
                break;
            }
            for t in extra {
                let _ = t.join();
            }
        }
        // Every kernel thread has stopped: no user thread runs again. Mark
        // the ones left (parked, or queued) cancelled, so nothing is handed
        // to them (a channel's value, `sync/channel.rs`), and let joins
        // return instead of waiting for them (`thread.rs`).
        let mut any = false;
        // SAFETY: every kernel thread of the runtime has been joined.
        unsafe {
            self.shared.registry.for_each_owner(|t| {
                t.cancelled.store(true, Ordering::Relaxed);
                any = true;
            })
        };
        if any {
            // Release: a waker that sees it sees the marks (`wait.rs`).
            crate::wait::ANY_CANCELLED.store(true, Ordering::Release);
        }
        // Its threads waiting on descriptors will never run: off the
        // poller's lists, and the `net` descriptors they waited on closed
        // (`poll.rs`, `cancel_runtime`).
        if any {
            crate::poll::cancel_runtime(&self.shared);
        }
        // None of its processors sleeps in the poller's `epoll_wait` any
        // more: another runtime's processor standing by takes that place
        // (`pollplace.rs`).
        crate::poll::pass_on();
        self.shared.stopped.store(true, Ordering::SeqCst);
        // The processors are ours. Those left released (their machine lost
        // them) are shut down here.
        for p in self.processors.0.iter() {
            p.shut_down();
            p.return_credits();
        }
        self.shared.timers.clear();
        self.shared.reclaim.clear();
        for t in self.shared.prio.drain() {
            self.shared.injector.push(t);
        }
        // The processors moved their queued threads here (shutdown step 2).
        loop {
            match self.shared.injector.steal() {
                Steal::Success(task) => {
                    // Queued, never to run again: nothing points into its
                    // stack (a queued thread has no registered waiter), and
                    // no processor runs any more.
                    // SAFETY: the stack is taken by whoever runs the thread's
                    // exit, and nobody will.
                    drop(unsafe { (*task.stack.get()).take() });
                }
                Steal::Empty => break,
                Steal::Retry => {}
            }
        }
        self.shared.depot.clear();
        // SAFETY: the runtime's own task reference (`Shared`, "Lifetime");
        // `self.shared` is a separate strong count.
        unsafe { Shared::release_refs(NonNull::from(&*self.shared), 1) };
    }
}

#[cfg(test)]
impl Shared {
    /// A runtime's shared state with no processor started, for unit tests.
    /// Its `Runtime` token is never released: it is leaked.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Arc<Shared> {
        let shared = Arc::new(Runtime::builder().processors(1).shared(Vec::new()));
        std::mem::forget(Arc::clone(&shared));
        shared
    }
}

impl Runtime {
    /// The state shared by the runtime's processors.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}
