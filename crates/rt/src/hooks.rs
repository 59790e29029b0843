//! The one way up: every name a lower layer of the runtime takes from a layer
//! above it, listed here and nowhere else.
//!
//! The runtime is built in five layers (docs/ARCHITECTURE.md, "schedlab-rt",
//! and the table in `tests/layers.rs`, which keeps it):
//!
//! ```text
//! api        thread sync scope local net io runtime yielder (lib.rs)
//! policy     hooks preempt blocking monitor poll shared realtime
//! processor  processor machine state guard
//! data       task lifecycle park slot handoff queue priority budget cputime
//!            wait timer spin registry event idle reclaim pollplace
//! machine    loom futex arch stack cputimer sigframe
//! ```
//!
//! A file imports files of its own layer and of the layers below it. What a
//! lower layer needs from above — the processor's loop calling a policy at a
//! switch, a wait list making a thread runnable again, the machine code naming
//! the preemption handler — it names through this module, so a reader of a
//! lower file sees at once which names come from above, and this file is the
//! whole list of them, grouped by the layer that uses them.
//!
//! The items are re-exports, not wrappers: a call through here is the same
//! call to the same function, inlined exactly as before, so the hot paths pay
//! nothing for the interface. A trait the processor is generic over (tokio's
//! `Schedule`) would also cost nothing, but would make every function of the
//! loop, the switches and the waits generic; a table of function pointers
//! would cost an indirect call on every switch.

// The machine-dependent layer (`arch`, `stack`).
#[cfg(not(loom))]
pub(crate) use crate::machine::Machine;
#[cfg(not(loom))]
pub(crate) use crate::preempt::schedlab_rt_preempted;
#[cfg(not(loom))]
pub(crate) use crate::registry::{set_owner, Registry, Slot};
#[cfg(not(loom))]
pub(crate) use crate::task::Task;
#[cfg(not(loom))]
pub(crate) use crate::thread::{try_current, yield_now};

// The data layer: a task's release and panic report, a wait list's or a
// timer's wake-up, a spin lock's yield, an idle processor's wake-up of the
// poller's sleeper, idle-stack reclaim's runtime section, its return of
// a taken-over thread to the run queues and its helper kernel thread.
#[cfg(not(loom))]
pub(crate) use crate::machine::spawn_kernel_thread;
#[cfg(not(loom))]
pub(crate) use crate::poll::interrupt as interrupt_poller;
#[cfg(not(loom))]
pub(crate) use crate::preempt::explain_panic;
#[cfg(not(loom))]
pub(crate) use crate::processor::{
    current_task_ptr, enter, here, make_runnable, park_unlocking, release_task_ref, unpark_user,
    wake_queued, yield_if_free,
};
#[cfg(not(loom))]
pub(crate) use crate::state::SharedRef;

// The processor layer: the policies its loop and switches call (blocking
// hand-off of a detached kernel thread, preemption's per-thread
// setup, the poller, the shared-library build's resume hooks), and what a
// spawn returns and a thread's exit runs.
#[cfg(not(loom))]
pub(crate) use crate::blocking::{
    after_detached_leave, detached_join, detached_park, detached_park_unlocking, exit_detached,
    rejoin, rejoin_in, take_detached, wait_as_spare,
};
#[cfg(not(loom))]
pub(crate) use crate::local::destroy_all as destroy_locals;
#[cfg(not(loom))]
pub(crate) use crate::poll::{active as active_poller, sleep as poll_sleep, POLL_EVERY};
#[cfg(not(loom))]
pub(crate) use crate::preempt::{
    ask as ask_preemption, init_thread as init_preemption, take_deferred, SIGNAL as PREEMPT_SIGNAL,
};
#[cfg(all(feature = "shared-library", not(loom)))]
pub(crate) use crate::shared::{before_idle_sleep, quiet_signals, resumed, run_hook};
// And the real-time policies' decision and what a switch publishes for the monitor.
#[cfg(not(loom))]
pub(crate) use crate::realtime::{published_rt, realtime_decision};
#[cfg(not(loom))]
pub(crate) use crate::thread::JoinHandle;

// The policy layer: the API's thread handle, which the shared-library
// build's `interrupt` and `kernel_thread_of` take.
#[cfg(all(feature = "shared-library", not(loom)))]
pub(crate) use crate::Thread;
