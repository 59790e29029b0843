//! The state the processors of one runtime share (`Shared`): the injection
//! queue, the thieves' view of each processor's queue and next slot, the
//! parkers and the idle protocol, the timers, the stack depot, the kernel
//! threads (running, spare, detached), the deadlock check's gate, and the
//! policies' runtime-wide settings; and a task's counted reference to it
//! (`SharedRef`, "Lifetime" below).
//!
//! It sits in the processor layer (docs/ARCHITECTURE.md, "schedlab-rt"): the
//! processors, the monitor and the policies read it; the public `Runtime`
//! (`runtime.rs`) builds it and owns one reference.

use crate::event::Hook;
use crate::idle::{CheckGate, Idle, Parker};
use crate::machine::Machine;
use crate::processor::{self, ProcPtr};
use crate::queue::{LifoSlot, QueueStealer};
use crate::registry::{ParkedThread, Registry};
use crate::stack::Depot;
use crate::task::TaskRef;
use crate::timer::Timers;
use crossbeam_deque::Injector;
use crossbeam_utils::CachePadded;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle as OsJoinHandle;
use std::time::Duration;

/// State shared by the processors of one runtime.
///
/// # Lifetime
///
/// `Shared` lives in an `Arc` held by the [`Runtime`] and by each processor.
/// Tasks reach it through a [`SharedRef`], which is *not* an `Arc` clone:
/// cloning and dropping an `Arc` per task were two locked instructions
/// (~11 ns) of every spawn+join. Instead, task references are counted in
/// `task_refs`, by *biased* reference counting (Choi, Shull and Torrellas,
/// PACT 2018): a processor takes references in batches (one atomic add per
/// [`CREDIT_BATCH`] spawns) and keeps them in a plain per-processor counter,
/// its credits; a task spawned there takes a credit, and a task freed there
/// gives one back, with no atomic operation. References made or dropped
/// anywhere else are counted atomically, one by one. So:
///
/// `task_refs` = live tasks + credits held by processors + 1 while the
/// [`Runtime`] exists.
///
/// The whole population of task references owns one strong count of the
/// `Arc` (taken in `build`), released when `task_refs` drops to zero: when
/// the runtime is gone, its processors have returned their credits and the
/// last task is freed. Until then every `SharedRef` points to live memory.
pub(crate) struct Shared {
    /// Processors made at build (the length of every per-processor array).
    pub(crate) max_procs: usize,
    /// The CPUs the process could use at build (`available_parallelism`:
    /// the building thread's affinity mask, its cgroup's quota): more awake
    /// processors than that take CPU time from each other (`idle_spin.rs`).
    pub(crate) cpus: usize,
    /// Processors that run user threads: those of index `< active`
    /// ("Resizing" above). Read on slow paths only.
    pub(crate) active: CachePadded<AtomicUsize>,
    /// One resize at a time (and the monitor's `NewProcessor`, `monitor.rs`).
    pub(crate) resize: Mutex<()>,
    pub(crate) stack_size: usize,
    pub(crate) spin: Duration,
    pub(crate) deadlock_detection: bool,
    pub(crate) hook: Option<Hook>,
    pub(crate) injector: Injector<TaskRef>,
    pub(crate) stealers: Vec<QueueStealer>,
    /// Each processor's next slot (`queue.rs`), here so thieves reach it.
    pub(crate) slots: Box<[CachePadded<LifoSlot>]>,
    pub(crate) parkers: Box<[CachePadded<Parker>]>,
    pub(crate) idle: Idle,
    pub(crate) timers: Timers,
    pub(crate) depot: Depot,
    pub(crate) shutdown: AtomicBool,
    /// Set by `Runtime::drop` once every kernel thread has stopped: no
    /// thread of the runtime runs again.
    pub(crate) stopped: AtomicBool,
    /// See "Lifetime" above.
    pub(crate) task_refs: CachePadded<AtomicUsize>,
    /// Holds processors off while a deadlock check reads the registry.
    pub(crate) check_gate: CheckGate,
    pub(crate) blocking: Mutex<Blocking>,
    pub(crate) blocking_cv: Condvar,
    /// How user threads share a processor.
    pub(crate) preemption: Preemption,
    /// The runtime accounts for its threads' CPU time (`cputime.rs`: a
    /// thread's CPU time was asked for, or a thread with a CPU budget was
    /// spawned): from then on every switch does the accounting.
    pub(crate) cpu_accounting: AtomicBool,
    /// A thread of a level other than `Normal` was spawned (`priority.rs`).
    pub(crate) prios: AtomicBool,
    /// The `High` and `Low` levels' queues (`priority.rs`).
    pub(crate) prio: crate::priority::PrioQueues,
    /// How long a kernel thread must have been blocked before its processor
    /// is handed off.
    pub(crate) block_threshold: Duration,
    /// Whether the monitor looks for kernel threads blocked outside
    /// [`blocking`](crate::blocking()).
    pub(crate) transparent_blocking: bool,
    /// Idle-stack reclaim's setting and list (`reclaim.rs`).
    pub(crate) reclaim: crate::reclaim::Reclaim,
    /// Threads asked to run the resume hook (`shared::interrupt`), for the
    /// monitor to ask again until they do (`shared::Interrupted`).
    #[cfg(feature = "shared-library")]
    pub(crate) interrupted: Mutex<Vec<crate::task::TaskRef>>,
    /// The processors (owned by the `Runtime`, set once at build).
    pub(crate) procs: OnceLock<Box<[ProcPtr]>>,
    /// Every running kernel thread of the runtime, for the monitor.
    pub(crate) machines: MachineSet,
    /// Kernel threads waiting for a processor (`blocking.rs`).
    pub(crate) spares: Spares,
    /// Kernel threads running a user thread outside every processor
    /// (`blocking.rs`, counted once retaken or released); the deadlock check
    /// waits until there is none. Signed: a count and its undo may cross.
    pub(crate) detached: std::sync::atomic::AtomicIsize,
    /// The monitor's wake-up word.
    pub(crate) monitor: MonitorCtl,
    /// Kernel threads started after `build` (spares), joined at drop.
    pub(crate) extra_threads: Mutex<Vec<OsJoinHandle<()>>>,
    /// The stacks of the runtime. Last, so it is dropped after everything
    /// that may hold a registered stack (the depot, queued tasks, timers).
    pub(crate) registry: Registry,
}

#[derive(Default)]
pub(crate) struct Blocking {
    /// Incremented at each deadlock report.
    pub(crate) epoch: u64,
    pub(crate) report: Vec<ParkedThread>,
}

impl Shared {
    /// Adds `n` task references (credits for a processor, or one for a task
    /// made outside the processors).
    #[inline]
    pub(crate) fn acquire_refs(&self, n: usize) {
        // Relaxed, as `Arc::clone`: made while holding a counted reference
        // (the runtime, a processor, or a task).
        if self.task_refs.fetch_add(n, Ordering::Relaxed) > isize::MAX as usize {
            std::process::abort();
        }
    }

    /// Drops `n` task references; the last one releases the population's
    /// strong count of the `Arc`.
    ///
    /// # Safety
    ///
    /// The caller owns `n` references, and does not use `this` afterwards
    /// unless it holds another reference.
    pub(crate) unsafe fn release_refs(this: NonNull<Shared>, n: usize) {
        if n == 0 {
            return;
        }
        // SAFETY: the caller's references keep it alive until this decrement.
        let refs = unsafe { &this.as_ref().task_refs };
        if refs.fetch_sub(n, Ordering::Release) == n {
            fence(Ordering::Acquire);
            // SAFETY: the last task reference: the population's strong count
            // (taken in `build`) is ours to release.
            unsafe { Arc::decrement_strong_count(this.as_ptr()) };
        }
    }

    /// Producer step 2 of `idle.rs`: wake a processor if nobody searches.
    #[inline]
    pub(crate) fn notify(&self) {
        if let Some(i) = self.idle.notify_one() {
            crate::ring::event(crate::ring::Event::Wake, i as u64);
            self.parkers[i].unpark();
        }
    }

    /// As [`Shared::notify`], for a thread put in a next slot: wakes only a
    /// processor that hears slots (`idle.rs`, "Slots").
    #[inline]
    pub(crate) fn notify_slot(&self) {
        if let Some(i) = self.idle.notify_slot() {
            self.parkers[i].unpark();
        }
    }

    /// Queues `t` from outside the runtime's processors.
    pub(crate) fn inject(&self, t: TaskRef) {
        crate::ring::event(crate::ring::Event::Inject, t.id.as_u64());
        // One read of the level: an inherited one may be given back meanwhile
        // (`priority.rs`, "Inheritance"), and a second read could say `Normal`.
        let p = t.priority();
        if self.prios.load(Ordering::Relaxed) && p != crate::Priority::Normal {
            self.prio.push(t, p, self.timers.now());
            self.notify();
            self.monitor.poke();
            return;
        }
        self.injector.push(t);
        self.notify();
        self.monitor.work_arrived();
    }

    /// Whether processor `index` is among the active ones ("Resizing").
    #[inline]
    pub(crate) fn is_active(&self, index: usize) -> bool {
        index < self.active.load(Ordering::SeqCst)
    }

    /// Every processor, active or not (`max_procs` of them).
    pub(crate) fn processors(&self) -> &[ProcPtr] {
        self.procs.get().map_or(&[], |p| &p[..])
    }

    /// A new `Arc` of this `Shared` (which always lives in one).
    pub(crate) fn arc(&self) -> Arc<Shared> {
        let p: *const Shared = self;
        // SAFETY: every `Shared` is made inside an `Arc` (`build`), and the
        // caller's reference keeps that alive while the count goes up.
        unsafe {
            Arc::increment_strong_count(p);
            Arc::from_raw(p)
        }
    }

    /// Starts a kernel thread running `first`, or as a spare.
    pub(crate) fn start_machine(&self, first: Option<ProcPtr>) {
        let shared = self.arc();
        let n = self.machines.len();
        match crate::machine::spawn_kernel_thread(format!("schedlab-m{n}"), move || {
            // A processor handed off: announced again if active (as it
            // always was before processors could be removed).
            let announce = first.is_some_and(|p| {
                // SAFETY: a processor of this runtime.
                shared.is_active(unsafe { &*p.0 }.index)
            });
            processor::machine_main(shared, first, announce)
        }) {
            Ok(t) => {
                let mut kept = self.extra_threads.lock().unwrap();
                // Joins the machines that have exited (spares beyond `MAX_SPARES`): a
                // kernel thread nobody joins keeps its stack and its guard mapped for
                // good (glibc frees them at the join), and a runtime that is never shut
                // down (`libschedlab_pthread`'s) kept every one — 3,860 stacks of 2 MiB
                // after `pthread_cond_broadcast/1-2`'s process-shared waits, each copied
                // by every later `fork` (page tables and mappings: 65% of the test's
                // time). Here, where one starts, the list stays as long as the
                // machines alive; a finished one's join returns at once.
                let (done, alive): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut *kept).into_iter().partition(|h| h.is_finished());
                *kept = alive;
                kept.push(t);
                drop(kept);
                for h in done {
                    let _ = h.join();
                }
            }
            Err(_) => {
                // No thread: put the processor back for someone else.
                if let Some(p) = first {
                    // SAFETY: a processor of this runtime.
                    let vp = unsafe { &*p.0 };
                    vp.machine.store(std::ptr::null_mut(), Ordering::Relaxed);
                    vp.status.release();
                }
            }
        }
    }

    /// Run by the last processor going to sleep or retiring (module docs).
    #[cold]
    pub(crate) fn check_deadlock(&self) {
        if self.timers.pending()
            || !self.injector.is_empty()
            || self.prio.high_waiting()
            || self.prio.low_waiting()
        {
            return;
        }
        // Hold the processors off (`registry.rs`, step 1). A user thread running
        // outside the processors (detached, `blocking.rs`) may wake others, or
        // be half way between two states the registry shows: no check then.
        let parked = if self.check_gate.begin(&self.idle, self.max_procs)
            && self.detached.load(Ordering::SeqCst) == 0
        {
            // SAFETY: every processor is asleep, and any that wakes waits
            // for the gate to open before it runs a thread.
            unsafe { self.registry.all_parked() }
        } else {
            None
        };
        self.check_gate.end();
        if let Some(parked) = parked {
            let mut b = self.blocking.lock().unwrap();
            b.epoch += 1;
            b.report = parked;
            drop(b);
            self.blocking_cv.notify_all();
        }
    }

    /// Step 2 of `registry.rs`: called by a processor that stops sleeping,
    /// before it runs a thread.
    #[inline]
    pub(crate) fn wait_for_check(&self) {
        self.check_gate.wait();
    }

    pub(crate) fn signal_done(&self) {
        drop(self.blocking.lock().unwrap());
        self.blocking_cv.notify_all();
    }
}

/// The running kernel threads of a runtime.
#[derive(Default)]
pub(crate) struct MachineSet {
    list: Mutex<Vec<usize>>,
}

impl MachineSet {
    /// Adds the calling thread's machine; returns the key to remove it with.
    pub(crate) fn register(&self, m: &'static Machine) -> usize {
        let key = m as *const Machine as usize;
        self.list.lock().unwrap().push(key);
        key
    }

    pub(crate) fn unregister(&self, key: usize) {
        self.list.lock().unwrap().retain(|&k| k != key);
    }

    pub(crate) fn len(&self) -> usize {
        self.list.lock().unwrap().len()
    }

    /// Calls `f` for each machine (under the set's lock: a machine cannot
    /// exit meanwhile).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Machine)) {
        for &k in self.list.lock().unwrap().iter() {
            // SAFETY: a registered machine's thread is alive until it
            // unregisters, which waits for this lock.
            f(unsafe { &*(k as *const Machine) });
        }
    }
}

/// Spare kernel threads waiting for a processor (`blocking.rs`).
#[derive(Default)]
pub(crate) struct Spares {
    list: Mutex<Vec<usize>>,
}

/// Spares kept beyond this many exit instead of waiting.
const MAX_SPARES: usize = 8;

impl Spares {
    /// Adds `m`; `false` if enough spares wait already (`m` should exit).
    pub(crate) fn add(&self, m: &'static Machine) -> bool {
        let mut l = self.list.lock().unwrap();
        if l.len() >= MAX_SPARES {
            return false;
        }
        l.push(m as *const Machine as usize);
        true
    }

    pub(crate) fn remove(&self, m: &Machine) {
        let key = m as *const Machine as usize;
        self.list.lock().unwrap().retain(|&k| k != key);
    }

    /// Takes a waiting spare.
    pub(crate) fn take(&self) -> Option<&'static Machine> {
        // SAFETY: a spare waits (alive) until it is taken or removes itself,
        // both under this lock.
        self.list.lock().unwrap().pop().map(|k| unsafe { &*(k as *const Machine) })
    }

    /// Wakes every waiting spare (shutdown).
    pub(crate) fn wake_all(&self) {
        for &k in self.list.lock().unwrap().iter() {
            // SAFETY: as in `take`.
            unsafe { &*(k as *const Machine) }.notify();
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.lock().unwrap().is_empty()
    }
}

/// A task's reference to its runtime's [`Shared`], counted in
/// `Shared::task_refs` (see "Lifetime" there), not in the `Arc`.
pub(crate) struct SharedRef(NonNull<Shared>);

// SAFETY: a counted pointer to `Shared`, which is `Send + Sync`.
unsafe impl Send for SharedRef {}
// SAFETY: as above.
unsafe impl Sync for SharedRef {}

impl SharedRef {
    /// A reference to `shared` for which the caller has already counted one
    /// in `task_refs` (a processor's credit, or [`Shared::acquire_refs`]).
    ///
    /// # Safety
    ///
    /// That reference must be counted and not owned by anything else.
    #[inline]
    pub(crate) unsafe fn counted(shared: &Shared) -> SharedRef {
        SharedRef(NonNull::from(shared))
    }

    /// Another counted reference, made with an atomic increment.
    pub(crate) fn clone_counted(&self) -> SharedRef {
        self.acquire_refs(1);
        SharedRef(self.0)
    }

    /// Whether this refers to `shared`.
    #[inline]
    pub(crate) fn is(&self, shared: &Shared) -> bool {
        std::ptr::eq(self.0.as_ptr(), shared)
    }
}

impl std::ops::Deref for SharedRef {
    type Target = Shared;
    #[inline]
    fn deref(&self) -> &Shared {
        // SAFETY: a counted reference keeps `Shared` alive ("Lifetime").
        unsafe { self.0.as_ref() }
    }
}

impl Drop for SharedRef {
    #[inline]
    fn drop(&mut self) {
        let vp = processor::enter();
        if !processor::take_back_ref(self, vp.as_deref()) {
            // SAFETY: we own this counted reference and drop it.
            unsafe { Shared::release_refs(self.0, 1) };
        }
    }
}

impl SharedRef {
    /// Drops the reference as a credit of `vp` if it runs this runtime,
    /// else atomically (`Drop`, with the processor already looked up).
    #[inline]
    pub(crate) fn release_on(self, vp: Option<&processor::Processor>) {
        let this = std::mem::ManuallyDrop::new(self);
        if !processor::take_back_ref(&this, vp) {
            // SAFETY: we own this counted reference and drop it.
            unsafe { Shared::release_refs(this.0, 1) };
        }
    }
}

/// How a runtime's user threads share a processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// A user thread runs until it yields, blocks on a runtime primitive, or
    /// ends; a thread that computes forever keeps its processor.
    Cooperative,
    /// A user thread that has run this long while other work waits on its
    /// processor (or in the runtime) is preempted at its next safe point. At
    /// least [`MIN_QUANTUM`] (`build` fails otherwise); a quantum over a day
    /// saturates to a day (never, in practice).
    Quantum(Duration),
}

/// The default quantum, as in Go (`forcePreemptNS`): long enough that a
/// compute-bound thread loses well under 1% to switches, short enough that a
/// spinning thread cannot hold up the others for longer than a frame.
pub const DEFAULT_QUANTUM: Duration = Duration::from_millis(10);

/// The shortest quantum a runtime accepts: the monitor's wake-up and the
/// signal's delivery take tens of µs, so a shorter quantum would be all
/// overhead (a quantum of zero kept the monitor from ever sleeping while
/// work waited). [`RuntimeBuilder::build`](crate::RuntimeBuilder::build)
/// refuses a shorter one.
pub const MIN_QUANTUM: Duration = Duration::from_micros(50);

impl Default for Preemption {
    /// `Quantum(DEFAULT_QUANTUM)`: user threads get the semantics of kernel
    /// threads (a spinning thread cannot starve the others), as goroutines
    /// are preempted by default after 10 ms. A program that holds
    /// kernel-thread-affine state across long stretches (module docs) opts
    /// out per thread, per region, or for the runtime.
    fn default() -> Preemption {
        Preemption::Quantum(DEFAULT_QUANTUM)
    }
}

/// The monitor's wake-up word.
#[derive(Default)]
pub(crate) struct MonitorCtl {
    word: AtomicU32,
    /// The monitor is quiet (`monitor.rs`, "Quiet"): producers of work poke it,
    /// and so does a processor that starts running.
    pub(crate) idle: AtomicBool,
}

impl MonitorCtl {
    /// Wakes the monitor. Async-signal-safe.
    pub(crate) fn poke(&self) {
        self.word.store(1, Ordering::Release);
        crate::futex::wake(&self.word, 1);
    }

    /// Pokes the monitor if it is quiet (cheap otherwise: one load of a line
    /// that rarely changes).
    #[inline]
    pub(crate) fn work_arrived(&self) {
        if self.idle.load(Ordering::Relaxed) {
            self.idle.store(false, Ordering::Relaxed);
            self.poke();
        }
    }

    /// A processor leaves the stopped ones (`idle.rs`: asleep or retired) to
    /// run: pokes the monitor if it is quiet, which may be asleep with no
    /// deadline because it saw every processor stopped. The fence pairs with
    /// the monitor's, after the processor's update of those counters: if the
    /// monitor read them before the update, its announcement (stored before
    /// its fence) is seen here (`monitor.rs`, "Quiet"). Off the hot paths: a
    /// processor gets here from a sleep.
    #[inline]
    pub(crate) fn processor_starts(&self) {
        fence(Ordering::SeqCst);
        if self.idle.load(Ordering::Relaxed) {
            self.idle.store(false, Ordering::Relaxed);
            self.poke();
        }
    }

    pub(crate) fn wait(&self, timeout: Option<Duration>) {
        if self.word.swap(0, Ordering::Acquire) == 1 {
            return;
        }
        crate::futex::wait(&self.word, 0, timeout);
        self.word.store(0, Ordering::Relaxed);
    }
}
