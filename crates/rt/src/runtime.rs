//! The runtime: building it (processors, stack size, event hook), running a
//! closure to completion with [`Runtime::block_on`], deadlock reports, and
//! shutting down in `Drop`.
//!
//! [`Shared`] is the state all processors of one runtime share: the
//! injection queue, the stealers of every processor's queue, the idle set and
//! parkers, timers, the registry of live threads, and the configuration.
//!
//! # Deadlock detection
//!
//! When the last processor is about to sleep with no timer pending, it asks
//! the registry whether every live user thread is parked. If so, no user
//! thread can ever wake another, and every [`Runtime::block_on`] in progress
//! returns [`Deadlock`] listing the parked threads and what they wait on.
//! The check assumes that user threads are woken only by user threads and
//! timers; a program that wakes them from OS threads outside the runtime
//! (sending on a channel from `main` while `block_on` runs on another OS
//! thread, say), or from user threads of *another* runtime, should turn it
//! off with
//! [`RuntimeBuilder::deadlock_detection`].

use crate::event::{Event, Hook};
use crate::idle::{Idle, Parker};
use crate::processor;
use crate::registry::{ParkedThread, Registry};
use crate::stack::{rounded_size, Depot, MIN_STACK_SIZE};
use crate::task::TaskRef;
use crate::thread::JoinHandle;
use crate::timer::Timers;
use crossbeam_deque::{Injector, Stealer, Worker};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::io;
use std::panic::resume_unwind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle as OsJoinHandle;
use std::time::Duration;

/// Default usable stack size of a user thread.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// Default time a processor that ran out of work keeps searching before it
/// sleeps (waking a sleeping kernel thread costs 11–35 µs on the lab machine).
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// Stacks of the default size a runtime keeps beyond its processors' pools.
const STACK_DEPOT_CAP: usize = 4096;

/// State shared by the processors of one runtime.
pub(crate) struct Shared {
    pub(crate) nprocs: usize,
    pub(crate) stack_size: usize,
    pub(crate) spin: Duration,
    pub(crate) deadlock_detection: bool,
    pub(crate) hook: Option<Hook>,
    pub(crate) injector: Injector<TaskRef>,
    pub(crate) stealers: Vec<Stealer<TaskRef>>,
    pub(crate) parkers: Box<[CachePadded<Parker>]>,
    pub(crate) idle: Idle,
    pub(crate) timers: Timers,
    pub(crate) registry: Registry,
    pub(crate) depot: Depot,
    pub(crate) shutdown: AtomicBool,
    blocking: Mutex<Blocking>,
    blocking_cv: Condvar,
}

#[derive(Default)]
struct Blocking {
    /// Incremented at each deadlock report.
    epoch: u64,
    report: Vec<ParkedThread>,
}

impl Shared {
    /// Producer step 2 of `idle.rs`: wake a processor if nobody searches.
    #[inline]
    pub(crate) fn notify(&self) {
        if let Some(i) = self.idle.notify_one() {
            self.parkers[i].unpark();
        }
    }

    /// Queues `t` from outside the runtime's processors.
    pub(crate) fn inject(&self, t: TaskRef) {
        self.injector.push(t);
        self.notify();
    }

    /// Run by the last processor going to sleep (module docs).
    #[cold]
    pub(crate) fn check_deadlock(&self) {
        if self.timers.pending() || !self.injector.is_empty() {
            return;
        }
        if let Some(parked) = self.registry.all_parked() {
            let mut b = self.blocking.lock().unwrap();
            b.epoch += 1;
            b.report = parked;
            drop(b);
            self.blocking_cv.notify_all();
        }
    }

    fn signal_done(&self) {
        drop(self.blocking.lock().unwrap());
        self.blocking_cv.notify_all();
    }
}

/// Every user thread is parked on a runtime primitive, no timer is pending,
/// so none of them can ever run again. Returned by [`Runtime::block_on`].
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
    stack_size: usize,
    spin: Duration,
    deadlock_detection: bool,
    hook: Option<Hook>,
}

impl fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("processors", &self.processors)
            .field("stack_size", &self.stack_size)
            .field("spin", &self.spin)
            .field("deadlock_detection", &self.deadlock_detection)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            processors: std::thread::available_parallelism().map_or(1, |n| n.get()),
            stack_size: DEFAULT_STACK_SIZE,
            spin: DEFAULT_SPIN,
            deadlock_detection: true,
            hook: None,
        }
    }
}

impl RuntimeBuilder {
    /// Number of virtual processors (kernel threads running user threads),
    /// 1 to 64. Default: the CPUs available to the process.
    pub fn processors(mut self, n: usize) -> Self {
        self.processors = n;
        self
    }

    /// Default usable stack size of user threads, rounded up to whole pages
    /// and to at least [`MIN_STACK_SIZE`]. Default [`DEFAULT_STACK_SIZE`].
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// How long a processor that ran out of work searches before sleeping.
    /// Default [`DEFAULT_SPIN`]; `Duration::ZERO` sleeps at once.
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

    /// Calls `hook` for every scheduling [`Event`]. See [`crate::event`] for
    /// the rules a hook must follow.
    pub fn on_event(mut self, hook: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Starts the processors.
    pub fn build(self) -> io::Result<Runtime> {
        if !(1..=64).contains(&self.processors) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("processors must be 1 to 64, not {}", self.processors),
            ));
        }
        crate::guard::install_handler();
        let workers: Vec<Worker<TaskRef>> =
            (0..self.processors).map(|_| Worker::new_fifo()).collect();
        let shared = Arc::new(Shared {
            nprocs: self.processors,
            stack_size: rounded_size(self.stack_size.max(MIN_STACK_SIZE)),
            spin: self.spin,
            deadlock_detection: self.deadlock_detection,
            hook: self.hook,
            injector: Injector::new(),
            stealers: workers.iter().map(Worker::stealer).collect(),
            parkers: (0..self.processors).map(|_| CachePadded::new(Parker::new())).collect(),
            idle: Idle::new(),
            timers: Timers::new(),
            registry: Registry::new(self.processors),
            depot: Depot::new(STACK_DEPOT_CAP),
            shutdown: AtomicBool::new(false),
            blocking: Mutex::new(Blocking::default()),
            blocking_cv: Condvar::new(),
        });
        let mut runtime = Runtime { shared: shared.clone(), threads: Vec::new() };
        for (index, worker) in workers.into_iter().enumerate() {
            let shared = shared.clone();
            // If this fails, dropping `runtime` stops the processors started so far.
            let t = std::thread::Builder::new()
                .name(format!("schedlab-vp-{index}"))
                .spawn(move || processor::processor_main(index, shared, worker))?;
            runtime.threads.push(t);
        }
        Ok(runtime)
    }
}

/// A two-level thread runtime: user threads multiplexed on virtual processors.
///
/// Dropping the runtime stops the processors (after their running user
/// threads reach a switch point), joins their kernel threads and unmaps the
/// stacks of user threads that were still queued. User threads still
/// *parked* at that point can never run again; they are leaked with their
/// stacks (nothing on them is dropped), as a process exit leaks detached
/// threads, because other objects may still point into those stacks.
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<OsJoinHandle<()>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime").field("processors", &self.shared.nprocs).finish_non_exhaustive()
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

    /// Number of virtual processors.
    pub fn processors(&self) -> usize {
        self.shared.nprocs
    }

    /// Spawns a user thread from outside the runtime (or from another runtime).
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        crate::thread::spawn_on(&self.shared, None, None, f).expect("failed to spawn a user thread")
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
        let handle = crate::thread::spawn_on(&self.shared, Some("main".into()), None, move || {
            let _signal = signal;
            f()
        })
        .expect("failed to spawn the main user thread");
        let mut b = self.shared.blocking.lock().unwrap();
        loop {
            if done.load(Ordering::Acquire) {
                break;
            }
            if b.epoch != start {
                return Err(Deadlock { threads: b.report.clone() });
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
        // Shutdown step 1 (processor.rs).
        self.shared.shutdown.store(true, Ordering::SeqCst);
        for p in self.shared.parkers.iter() {
            p.unpark();
        }
        // Step 3.
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.shared.timers.clear();
        // SAFETY: no processor runs any more, so no registered task can run
        // or exit while we look at it.
        unsafe {
            self.shared.registry.drain(|task| {
                if !task.park.is_parked() {
                    // Queued, never to run again: nothing points into its
                    // stack (a queued thread has no registered waiter).
                    drop((*task.stack.get()).take());
                }
            });
        }
        while !self.shared.injector.is_empty() {
            drop(self.shared.injector.steal());
        }
        self.shared.depot.clear();
    }
}

impl Runtime {
    /// [`Builder::spawn_on`](crate::Builder::spawn_on) without the builder.
    pub(crate) fn spawn_with<F, T>(
        &self,
        name: Option<String>,
        stack_size: Option<usize>,
        f: F,
    ) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        crate::thread::spawn_on(&self.shared, name, stack_size, f)
    }
}
