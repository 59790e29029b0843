//! Creating a user thread: the one function behind every way of spawning
//! ([`crate::spawn`], [`crate::Builder::spawn`], [`crate::Builder::spawn_on`],
//! [`crate::Runtime::spawn`] and the main thread of `block_on`).

use super::{Here, Processor};
use crate::arch;
use crate::event::Event;
use crate::hooks::JoinHandle;
use crate::stack::Stack;
use crate::state::{Shared, SharedRef};
use crate::task::{self, Task, ThreadId};
use std::io;
use std::sync::Arc;

/// What a new user thread is given besides its closure.
#[derive(Debug, Default, Clone)]
pub(crate) struct SpawnOptions {
    pub(crate) name: Option<String>,
    pub(crate) stack_size: Option<usize>,
    /// `Builder::preemptible(false)` sets this.
    pub(crate) not_preemptible: bool,
    /// `Builder::cpu_budget`: the share of a processor and its period.
    pub(crate) budget: Option<(f64, std::time::Duration)>,
    /// `Builder::priority`.
    pub(crate) priority: crate::Priority,
    /// `Builder::realtime`: the real-time priority among `High` threads, 0 for none.
    pub(crate) rt_priority: u8,
    /// `Builder::fifo`: a real-time thread under `SCHED_FIFO` (`realtime.rs`).
    pub(crate) rt_fifo: bool,
    /// `Builder::thread_pointer` (`shared-library` build): the thread's own
    /// TLS block and thread control block; 0 for none.
    pub(crate) thread_pointer: usize,
    /// `Builder::signal_mask` (`shared-library` build).
    #[cfg(feature = "shared-library")]
    pub(crate) signal_mask: u64,
    /// `Builder::stack_memory` (`shared-library` build): the lent stack's
    /// base address and length.
    #[cfg(feature = "shared-library")]
    pub(crate) lent_stack: Option<(usize, usize, crate::StackReleased)>,
}

/// Which runtime a new user thread joins.
pub(crate) enum Target<'a> {
    /// The calling user thread's (panics on an OS thread).
    Current,
    /// The given one, from anywhere.
    Runtime(&'a Arc<Shared>),
}

/// Creates a user thread running `f` and makes it runnable: queued on the
/// calling processor when it belongs to the target runtime, else injected.
///
/// # Panics
///
/// With [`Target::Current`] outside a user thread.
#[inline]
pub(crate) fn spawn<F, T>(target: Target<'_>, opts: SpawnOptions, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (policies, priority, budget) = (opts.has_policies(), opts.priority, opts.budget);
    let rt_priority = (opts.rt_priority, opts.rt_fifo);
    if policies {
        check_policies(&opts)?;
    }
    // A runtime section: spawning never switches. The common case (on a
    // processor) with the lighter section; `here` tells the others apart.
    let here = match super::enter() {
        Some(vp) => Here::Processor(vp),
        None => super::here(),
    };
    let detached_shared;
    let (vp, shared) = match (&here, target) {
        (Here::Processor(vp), Target::Current) if vp.current_task_ptr().is_some() => {
            (Some(vp.processor()), &vp.shared)
        }
        (Here::Detached(d), Target::Current) => {
            // A detached user thread (`blocking.rs`) spawns as from outside.
            // SAFETY: the caller, alive.
            detached_shared = unsafe { d.task().as_ref() }.shared.arc();
            (None, &detached_shared)
        }
        (_, Target::Current) => {
            panic!("schedlab_rt::spawn called outside a user thread; use Runtime::spawn")
        }
        (Here::Processor(vp), Target::Runtime(shared)) if Arc::ptr_eq(&vp.shared, shared) => {
            (Some(vp.processor()), shared)
        }
        (_, Target::Runtime(shared)) => (None, shared),
    };
    let size = match opts.stack_size {
        None => shared.stack_size,
        Some(bytes) => crate::stack::checked_size(bytes, "Builder::stack_size")?,
    };
    // A thread of the runtime's stack size gets its stack when it first
    // runs (`Processor::context_of`), from the pool of the processor that
    // runs it: a backlog of queued children costs a task record each, not a
    // stack and its page faults, and a child its joiner runs inline
    // (`inline.rs`) never takes one. Any other size (rare: it maps a stack
    // of its own) is mapped now, so that a failure is the spawner's error.
    // The `shared-library` build, whose threads carry a thread pointer set
    // up with the stack, keeps the eager path.
    let lazy = size == shared.stack_size && cfg!(not(feature = "shared-library"));
    #[cfg(feature = "shared-library")]
    let lent = match opts.lent_stack {
        // SAFETY: `Builder::stack_memory`'s contract.
        Some((base, len, released)) => Some(
            std::ptr::NonNull::new(base as *mut u8)
                .and_then(|base| unsafe { Stack::lent(base, len, released) })
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "Builder::stack_memory: {len} bytes at {base:#x} leave less than \
                             MIN_STACK_SIZE ({}) once aligned",
                            crate::MIN_STACK_SIZE
                        ),
                    )
                })?,
        ),
        None => None,
    };
    #[cfg(not(feature = "shared-library"))]
    let lent: Option<Stack> = None;
    let size = lent.as_ref().map_or(size, Stack::size);
    let stack = match vp {
        _ if lent.is_some() => lent,
        _ if lazy => None,
        Some(vp) => Some(vp.stack(size)?),
        // SAFETY: as in `Processor::stack`.
        None if size == shared.stack_size => Some(unsafe { shared.depot.get(&shared.registry)? }),
        None => match shared.depot.take_other(size) {
            Some(stack) => Some(stack),
            // SAFETY: as in `Processor::stack`.
            None => Some(unsafe { Stack::new_registered(size, &shared.registry)? }),
        },
    };
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
        opts.name.map(String::into_boxed_str),
        shared_ref,
        stack,
        f,
        vp.map(Processor::blocks),
    );
    task.stack_size.store(size, std::sync::atomic::Ordering::Relaxed);
    if !lazy {
        // SAFETY: nobody else sees the task yet, so its stack cell is ours.
        let stack = unsafe { (*task.stack.get()).as_ref() }.expect("an eager task has its stack");
        debug_assert!(stack.size() > arch::INIT_STACK_BYTES);
        stack.set_owner(task.as_ptr().as_ptr());
        // SAFETY: `top` is the aligned end of the task's fresh stack, which it
        // owns until it exits; `task_entry` never returns. Nobody else sees the
        // task yet, so writing its context is unshared.
        unsafe {
            *task.ctx.get() = arch::init_stack(
                stack.top(),
                super::entry::task_entry,
                std::ptr::null_mut(),
                opts.thread_pointer,
            )
        };
    }
    task.set_preemptible(!opts.not_preemptible);
    #[cfg(feature = "shared-library")]
    task.sigmask.store(opts.signal_mask, std::sync::atomic::Ordering::Relaxed);
    if policies {
        apply_policies(&task, priority, rt_priority, budget, shared);
    }
    let event = || Event::Spawned { thread: id, processor: vp.map(|vp| vp.index) };
    match vp {
        Some(vp) => {
            vp.emit(event);
            vp.schedule_next(queued);
        }
        None => {
            if let Some(h) = &shared.hook {
                h(&event());
            }
            shared.inject(queued);
        }
    }
    Ok(JoinHandle::new::<F>(task))
}

impl SpawnOptions {
    /// A priority or a budget was asked for (the rare case, kept out of line so
    /// that the common spawn stays small enough to inline).
    #[inline(always)]
    fn has_policies(&self) -> bool {
        self.priority != crate::Priority::Normal || self.budget.is_some()
    }
}

/// Refuses bad policy parameters before anything is allocated.
#[cold]
#[inline(never)]
fn check_policies(opts: &SpawnOptions) -> io::Result<()> {
    if let Some((fraction, period)) = opts.budget {
        crate::budget::check(fraction, period)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    }
    Ok(())
}

/// Gives a new task its level and budget, and turns the runtime's policy
/// paths on at the first such thread. Before the task is published (which
/// releases): whichever processor runs it sees the flags.
#[cold]
#[inline(never)]
fn apply_policies(
    task: &Task,
    priority: crate::Priority,
    (rt_priority, rt_fifo): (u8, bool),
    budget: Option<(f64, std::time::Duration)>,
    shared: &Shared,
) {
    if priority != crate::Priority::Normal {
        task.set_priority(priority);
        task.set_rt_priority(rt_priority);
        task.set_rt_flag(crate::task::RT_FIFO, rt_fifo);
        enable_levels(shared);
    }
    if let Some((fraction, period)) = budget {
        task.set_budget(Box::new(crate::budget::Budget::new(fraction, period)));
        task.cpu.want();
        enable_cpu_accounting(shared);
    }
}

/// Turns CPU-time accounting on for good in `shared`'s runtime (`cputime.rs`,
/// "When"): at its first budgeted spawn (before the task is published, so
/// whichever processor runs it accounts for it) or the first request for a
/// thread's CPU time. From then on a switch looks at whether the threads it
/// changes between are accounted.
pub(crate) fn enable_cpu_accounting(shared: &Shared) {
    use std::sync::atomic::Ordering;
    if !shared.cpu_accounting.swap(true, Ordering::Relaxed) {
        for p in shared.processors() {
            // SAFETY: processors live as long as their runtime's `Shared`.
            let p = unsafe { &*p.0 };
            p.cpu_accounting.store(true, Ordering::Relaxed);
            p.policies.store(true, Ordering::Relaxed);
        }
    }
}

/// Asks every other processor running a user thread for a preemption, whose
/// safe point starts the stint of a thread just accounted (`account_cpu`)
/// if it runs there: it would start at its next switch, which one alone
/// there may never make (`preempt::preempted`; with nothing else to run it
/// goes on, one `Preempted` event the only trace).
pub(crate) fn start_stints_elsewhere(shared: &Shared) {
    use std::sync::atomic::Ordering;
    // SAFETY: no preconditions.
    let me = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    for p in shared.processors() {
        // SAFETY: processors live as long as their runtime's `Shared`.
        let p = unsafe { &*p.0 };
        let m = p.machine.load(Ordering::Acquire);
        if p.in_user.load(Ordering::Relaxed) && !m.is_null() {
            // SAFETY: a machine bound to a processor outlives that binding
            // (the monitor's requests read it the same way).
            let m = unsafe { &*m };
            if m.tid.load(Ordering::Relaxed) != me {
                crate::hooks::ask_preemption(m);
            }
        }
    }
}

/// Turns the levels' paths on for good in `shared`'s runtime (`priority.rs`): at its
/// first thread of a level other than `Normal`, spawned (`apply_policies`) or changed
/// (`realtime.rs`).
pub(crate) fn enable_levels(shared: &Shared) {
    use std::sync::atomic::Ordering;
    if !crate::priority::LEVELS.load(Ordering::Relaxed) {
        // Mutexes record their holders from now on (`priority.rs`, "Inheritance").
        crate::priority::LEVELS.store(true, Ordering::Relaxed);
    }
    if !shared.prios.swap(true, Ordering::Relaxed) {
        for p in shared.processors() {
            // SAFETY: processors live as long as their runtime's `Shared`.
            let p = unsafe { &*p.0 };
            p.prios.store(true, Ordering::Relaxed);
            p.policies.store(true, Ordering::Relaxed);
        }
    }
}
