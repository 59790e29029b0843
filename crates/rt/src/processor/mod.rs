//! Virtual processors: the kernel threads that run user threads, their
//! scheduler loop, and every context switch the runtime makes.
//!
//! Each processor (`Processor`) owns, and alone touches: its FIFO run queue
//! (`queue.rs`: a private part, and a shared part others steal from), the
//! user thread it runs (`current`), a pending action (below) and its pool of
//! stacks. It is run by one kernel thread at a time (`machine.rs`), whose
//! native stack is the scheduler context (where it searches, steals and
//! sleeps) and whose runtime-section counter keeps preemption and hand-off
//! out of the code below. The machine's thread-local finds the processor of
//! the calling kernel thread; a processor can change kernel threads when its
//! user thread blocks in the kernel (`blocking.rs`).
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
//! A processor removed by `Runtime::set_processors` leaves the loop for
//! [`Processor::retire`] (the protocol is in `runtime.rs`, "Resizing").
//!
//! # Shutdown
//!
//! 1. `Runtime::drop` sets `shutdown` and every processor's `halt`, and
//!    unparks every processor (retired ones too).
//! 2. A processor sees the flag in its scheduler context (user threads that
//!    yield are sent there: `next_local` returns nothing once `halt` is
//!    set), moves its queued threads to the injection queue, frees its stack
//!    pool and exits.
//! 3. `Runtime::drop` joins the kernel threads and frees what is left (see
//!    `runtime.rs`). A user thread that never reaches a switch point (a
//!    non-preemptible spinner, or one blocked in the kernel for good) keeps
//!    the drop waiting.

mod entry;
mod idle_spin;
mod inline;
mod spawn;
mod switch;
mod yield_to;

pub(crate) use self::inline::join_inline;
pub(crate) use self::yield_to::yield_to;

pub(crate) use self::spawn::{enable_cpu_accounting, enable_levels, spawn, SpawnOptions, Target};
pub(crate) use self::switch::{after_switch, complete_leave, Pending};
pub(crate) use self::switch::{
    join_park, make_runnable, park_current, park_unlocking, unpark_sync, unpark_user, wake_queued,
    yield_current, yield_if_free,
};

use crate::arch::{self, StackPointer};
use crate::event::{Event, Hook};
use crate::machine::Machine;
use crate::queue::{LifoSlot, RunQueue, MAX_LIFO_STREAK};
use crate::stack::{Stack, StackPool};
use crate::state::{Shared, SharedRef};
use crate::task::{self, BlockCache, Task, TaskRef, ThreadId, ID_BLOCK};
use crossbeam_deque::Steal;
use std::cell::{Cell, UnsafeCell};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Scheduling decisions between two polls of the timers (and of the
/// injection queue, which every decision also glances at). A power of two,
/// so the decision counter tells it with one mask (and other switches can
/// count in its multiples: `count_switch`); Go and tokio use 61, a
/// prime, against resonance with a program's own period, which would only
/// make the poll land at the same point of that period here: harmless.
const MAINTENANCE_INTERVAL: u32 = 64;

/// How many injected threads a processor moves to its own queue at one scheduling decision
/// (see `Processor::drain_injector`).
const INJECT_DRAIN: usize = 256;

/// How long a thief leaves a thread in another processor's next slot before
/// it takes it (`Processor::schedule_next`): longer than a waker takes to
/// park after it woke a thread (a few hundred ns), short beside a wake-up
/// across CPUs. Go waits 3 µs; measured here (`threads.ring`,
/// `threads.wake`), 1 µs keeps a ring's hops on one CPU and adds 1 µs where
/// the waker keeps running.
const SLOT_GRACE: Duration = Duration::from_micros(1);

/// The pause between two looks of a spinning processor: the first, after a
/// look that saw the other processors computing or idle, and the bound it
/// doubles to while looks keep seeing one of them switch (`steal_slot`).
/// New work from a computing processor is found within a fraction of a µs
/// (a futex wake of a sleeping processor costs 11–35 µs), while a processor
/// handing off at full speed loses its lines to the looks rarely. (Looking
/// every few dozen `pause`s, a two-processor ring of 503 threads cost
/// 2.2–2.5 times its one-processor figure on the lab's Intel host; with
/// this back-off 1.4–1.7 times, alternated in one sitting.)
const SEARCH_BACKOFF: std::ops::Range<Duration> =
    Duration::from_nanos(200)..Duration::from_micros(16);

/// How long a processor sleeps when its last look saw another processor
/// switching and nothing it could take: deaf to that processor's next slot
/// (`idle.rs`, "Slots"), it looks again after this. Nearly the bound on how
/// late a slot's thread is taken from an owner that stopped switching and
/// went on computing (measured, `tests/lifo.rs`: 5-130 µs, the kernel's
/// timer slack and wake-up included; 120-360 µs when the look after the
/// timeout was a single one, [`DEAF_LOOK`]); the
/// idle processor's cost while a conversation lasts is one timer wake-up
/// per period on its own CPU, none on the conversing one's. (200 µs made
/// no difference to a two-processor ring.)
const DEAF_POLL: Duration = Duration::from_micros(100);

/// How long a processor looks after a deaf sleep's timeout before it sleeps
/// again: two looks this far apart tell an owner that still converses (its
/// decision count moves every few hundred ns) from one that computes (still
/// for longer than [`SLOT_GRACE`], and its slot's thread is taken).
const DEAF_LOOK: Duration = Duration::from_micros(4);

/// Stacks a processor keeps in its pool while it sleeps for want of work.
const STACK_POOL_KEEP_IDLE: usize = 64;

/// Stacks a processor keeps for reuse. Enough for a burst of a thousand
/// threads to recycle its stacks on its own processor: at 256, three
/// quarters of such a burst went through the depot's lock and back
/// (spawn+join in batches of 1000: 45.9 -> 44.1 ns). Pooled stacks keep only
/// the pages their threads touched resident.
const STACK_POOL_CAP: usize = 1024;

/// The processor of the calling kernel thread with the runtime-section
/// counter raised (`machine.rs`), or `None` (counter untouched) on a kernel
/// thread that runs no processor. Dropping it lowers the counter.
///
/// Inline: the section is opened by one `fs`-relative instruction
/// (`Machine::enter_section`) that the compiler cannot move or reuse, so a
/// user thread calling this before and after a context switch gets the
/// kernel thread it runs on each time.
#[inline(always)]
pub(crate) fn enter<'a>() -> Option<Entered<'a>> {
    // SAFETY: the section ends with the `Entered`, which must not live
    // across a switch (its contract).
    unsafe { enter_at_entry() }
}

/// Where the calling code runs, in a runtime section when on a processor or
/// a detached user thread (see [`here`]).
pub(crate) enum Here<'a> {
    /// On a processor.
    Processor(Entered<'a>),
    /// On a detached user thread (`blocking.rs`), which cannot rejoin a
    /// processor (and so change this answer) while this lasts.
    Detached(Detached),
    /// On a kernel thread with no user thread (section not open).
    Os,
}

/// A runtime section on a detached user thread.
pub(crate) struct Detached {
    m: &'static Machine,
    task: NonNull<Task>,
}

impl Detached {
    /// The detached thread (the caller).
    pub(crate) fn task(&self) -> NonNull<Task> {
        self.task
    }
}

impl Drop for Detached {
    #[inline]
    fn drop(&mut self) {
        // Same kernel thread: a detached thread leaves it only by switching,
        // which it does not do while this lasts.
        self.m.lower();
    }
}

/// [`enter`], telling a detached user thread from an OS thread in the same
/// section (a rejoin between two separate looks would confuse them).
#[inline(never)]
#[link_section = "schedlab_rt_np"]
pub(crate) fn here<'a>() -> Here<'a> {
    let m = Machine::enter_section();
    let p = m.processor();
    if !p.is_null() {
        // SAFETY: as in `enter_at_entry`.
        return Here::Processor(Entered(unsafe { &*p }));
    }
    match NonNull::new(m.detached.load(Ordering::Relaxed)) {
        Some(task) => Here::Detached(Detached { m, task }),
        None => {
            m.lower_quietly();
            Here::Os
        }
    }
}

/// [`here`] without guard objects, for the entry points of the switch path:
/// the section is open for `Processor` and `Detached`, and the caller ends
/// it or hands it to the context it switches to.
pub(crate) enum HereRaw<'a> {
    Processor(&'a Processor),
    Detached(&'static Machine),
    Os,
}

/// See [`HereRaw`]. Inline: for `#[inline(never)]` callers that do not look
/// up the machine again after a switch.
#[inline(always)]
pub(crate) fn here_raw<'a>() -> HereRaw<'a> {
    let m = Machine::enter_section();
    let p = m.processor();
    if !p.is_null() {
        // SAFETY: as in `enter_at_entry`.
        return HereRaw::Processor(unsafe { &*p });
    }
    if !m.detached.load(Ordering::Relaxed).is_null() {
        return HereRaw::Detached(m);
    }
    m.lower_quietly();
    HereRaw::Os
}

/// A runtime section on the processor of the calling kernel thread (see
/// [`enter`]). Must be dropped on the same kernel thread, with no switch in
/// between (the raised counter rules out preemption and hand-off meanwhile).
pub(crate) struct Entered<'a>(&'a Processor);

impl<'a> std::ops::Deref for Entered<'a> {
    type Target = Processor;
    #[inline]
    fn deref(&self) -> &Processor {
        self.0
    }
}

impl<'a> Entered<'a> {
    /// The processor, for as long as the section lasts.
    #[inline]
    pub(crate) fn processor(&self) -> &'a Processor {
        self.0
    }
}

impl Drop for Entered<'_> {
    #[inline]
    fn drop(&mut self) {
        // The section is the calling kernel thread's (type docs).
        Machine::lower_here();
    }
}

/// [`enter`], inline, for the `#[inline(never)]` entry points of the switch
/// path.
///
/// # Safety
///
/// The calling function must be `#[inline(never)]` and must not look up the
/// machine again after it switches, so that no thread-local address computed
/// here is reused on another kernel thread (see the module docs).
#[inline(always)]
unsafe fn enter_at_entry<'a>() -> Option<Entered<'a>> {
    let m = Machine::enter_section();
    let p = m.processor();
    if p.is_null() {
        m.lower_quietly();
        return None;
    }
    // SAFETY: the machine's processor outlives its binding (processors are
    // freed only after every machine has stopped), and with the counter
    // raised it cannot be handed away while the section lasts.
    Some(Entered(unsafe { &*p }))
}

/// One virtual processor. See the module docs for what it owns.
pub(crate) struct Processor {
    pub(crate) index: usize,
    /// The runtime has this one processor only, for good (nobody steals,
    /// nobody idles): its maximum is one.
    solo: bool,
    /// Leave user code for the scheduler context at the next decision that
    /// looks (`next_local`'s maintenance turn, a yield with nothing else to
    /// run): set for every processor at shutdown, and for a processor
    /// removed by `Runtime::set_processors` (cleared when it is added back).
    /// The flag those paths read for shutdown alone before.
    pub(crate) halt: AtomicBool,
    /// `NewProcessor` was emitted for this processor and `ProcessorRemoved`
    /// not since. Changed, with the event, by its machine under the resize
    /// lock, which the monitor holds to emit `NewProcessor` after
    /// `ProcessorLost` only while this is set: so a processor's events read
    /// in order say whether it is in the set (`monitor.rs`, `emit_found`).
    pub(crate) announced: AtomicBool,
    pub(crate) shared: Arc<Shared>,
    hook: Option<Hook>,
    queue: RunQueue,
    current: UnsafeCell<Option<TaskRef>>,
    pending: UnsafeCell<Pending>,
    /// Where an exiting thread's last switch saves a context nobody resumes.
    exit_ctx: UnsafeCell<StackPointer>,
    pool: UnsafeCell<StackPool>,
    /// Free task blocks (`task.rs`).
    blocks: BlockCache,
    /// Task references to `shared` this processor holds (`runtime.rs`,
    /// `Shared`, "Lifetime").
    credits: Cell<usize>,
    /// The machine running this processor: written by the machine that
    /// binds it, read by the monitor (null while released, `blocking.rs`).
    pub(crate) machine: AtomicPtr<Machine>,
    /// Scheduling decisions made here (and switches made without one):
    /// changes whenever another user thread (or the scheduler context) may
    /// have started running. Read by the monitor and by thieves; also the
    /// maintenance countdown ([`Processor::decision_begins`]). One counter
    /// for both: a second read-modify-write of processor memory at every
    /// decision made a yield 8% slower (a chain of store-forwarded updates
    /// from one decision to the next).
    pub(crate) switches: AtomicU32,
    /// A user thread (not the scheduler context) runs here. Read by the monitor.
    pub(crate) in_user: AtomicBool,
    /// Who may use the processor (`blocking.rs`: RUNNING, SYSCALL, RELEASED).
    pub(crate) status: crate::handoff::Status,
    /// The runtime has a policy (CPU-time accounting or a level other than
    /// `Normal`): every switch here calls `policy_switch`.
    pub(crate) policies: AtomicBool,
    /// The runtime has threads of levels other than `Normal` (`priority.rs`).
    pub(crate) prios: AtomicBool,
    /// The level of the running user thread (`Priority::as_u8`; `Normal` for
    /// the scheduler context), plus `task::TURN` while its stint is a turn
    /// (`priority.rs`, "Aging"), for the monitor, while `prios` is set.
    pub(crate) cur_prio: std::sync::atomic::AtomicU8,
    /// The running thread's real-time priority, plus `CUR_FIFO` under `SCHED_FIFO`
    /// (`realtime.rs`), for the monitor, while `prios` is set.
    pub(crate) cur_rt: std::sync::atomic::AtomicU16,
    /// The last turn given here went to an aged `Low` thread, and no `Normal`
    /// thread has run here since: the next aged one waits behind `Normal`
    /// work (`priority.rs`, "Aging"). Only this processor's kernel thread.
    aged_last: Cell<bool>,
    /// Set by the monitor: the next decision skips the `High` queue once, so
    /// `Normal` work that waited under `High` threads for `AGING` gets a turn.
    pub(crate) normal_turn: AtomicBool,
    /// The runtime accounts for its threads' CPU time (`cputime.rs`): a
    /// thread's CPU time was asked for, or a thread with a CPU budget
    /// exists. Every switch here reads the kernel thread's CPU clock. Set
    /// once, by the first asker or budgeted spawner, on every processor (one
    /// test of a line the switch touches anyway, where the runtime's flag
    /// cost a pointer chase).
    pub(crate) cpu_accounting: AtomicBool,
    /// The thread whose CPU-time stint runs here (`cputime.rs`): the current
    /// one, once accounting is on and it was switched in or asked.
    cpu_current: Cell<Option<NonNull<Task>>>,
    /// When the running thread's CPU budget runs out (timer-clock ns), or
    /// `u64::MAX`; read by the monitor.
    pub(crate) budget_deadline: AtomicU64,
    /// How long the thread the monitor last asked to preempt had run, in ns.
    pub(crate) preempt_ran: AtomicU64,
    /// The user thread last detached from this processor (for the monitor's
    /// `Blocked` event).
    pub(crate) detached_id: AtomicU64,
    /// Decisions in a row that took the next slot (`queue.rs`, `MAX_LIFO_STREAK`).
    lifo_streak: Cell<u32>,
    /// This processor's next slot, in `shared.slots` (which outlives us).
    slot: NonNull<LifoSlot>,
    ids: Cell<(u64, u64)>,
    rng: Cell<u64>,
    /// Per other processor, the scheduling-decision count this one last saw
    /// there and when it first saw it (`steal_slot`).
    seen_decisions: std::cell::RefCell<Vec<(u32, Instant)>>,
    /// The last look of this (searching) processor saw another processor's
    /// decision count move: back off (`search`).
    owner_busy: Cell<bool>,
    /// The last search's work came from this processor's own queue, timers
    /// or poll, not from another processor or the injection queue
    /// (`idle_spin.rs`).
    fed_here: Cell<bool>,
}

impl Processor {
    pub(crate) fn new(index: usize, shared: Arc<Shared>, queue: RunQueue) -> Processor {
        let slot = NonNull::from(&*shared.slots[index]);
        Processor {
            index,
            solo: shared.max_procs == 1,
            halt: AtomicBool::new(false),
            announced: AtomicBool::new(false),
            hook: shared.hook.clone(),
            pool: UnsafeCell::new(StackPool::new(shared.stack_size, STACK_POOL_CAP)),
            shared,
            queue,
            current: UnsafeCell::new(None),
            pending: UnsafeCell::new(Pending::None),
            exit_ctx: UnsafeCell::new(std::ptr::null_mut()),
            blocks: BlockCache::default(),
            credits: Cell::new(0),
            machine: AtomicPtr::new(std::ptr::null_mut()),
            switches: AtomicU32::new(0),
            in_user: AtomicBool::new(false),
            status: crate::handoff::Status::new(),
            preempt_ran: AtomicU64::new(0),
            policies: AtomicBool::new(false),
            prios: AtomicBool::new(false),
            cur_prio: std::sync::atomic::AtomicU8::new(1),
            cur_rt: std::sync::atomic::AtomicU16::new(0),
            normal_turn: AtomicBool::new(false),
            aged_last: Cell::new(false),
            cpu_accounting: AtomicBool::new(false),
            cpu_current: Cell::new(None),
            budget_deadline: AtomicU64::new(u64::MAX),
            detached_id: AtomicU64::new(0),
            lifo_streak: Cell::new(0),
            slot,
            ids: Cell::new((0, 0)),
            rng: Cell::new(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1)),
            seen_decisions: std::cell::RefCell::new(Vec::new()),
            owner_busy: Cell::new(false),
            fed_here: Cell::new(false),
        }
    }

    /// The value every switch made by this processor passes on.
    #[inline]
    fn as_pass(&self) -> *mut u8 {
        (self as *const Processor).cast_mut().cast()
    }

    /// The machine running this processor (the calling kernel thread's,
    /// for code running on the processor).
    #[inline(always)]
    pub(crate) fn machine(&self) -> &Machine {
        // SAFETY: set by the machine that bound this processor before it ran
        // anything on it; machines outlive the processors' use.
        unsafe { &*self.machine.load(Ordering::Relaxed) }
    }

    /// Counts a switch made without a scheduling decision here (one by the
    /// scheduler context, a detach, a rejoin), for the monitor and thieves.
    /// By [`MAINTENANCE_INTERVAL`], so the count's low bits keep counting
    /// decisions alone and the maintenance period stays exact: counted by
    /// one, a switch and a decision per thread (as when each of a queue's
    /// threads runs and exits) could step over every multiple of it, and a
    /// removed processor then never saw its flag.
    #[inline(always)]
    pub(crate) fn count_switch(&self) {
        let n = self.switches.load(Ordering::Relaxed);
        self.switches.store(n.wrapping_add(MAINTENANCE_INTERVAL), Ordering::Relaxed);
    }

    /// Whether work waits here besides the running thread (for the monitor;
    /// a hint, read without synchronisation).
    pub(crate) fn has_waiting(&self) -> bool {
        self.queue.len_hint() > 0
            || self.lifo().is_occupied()
            || !self.shared.stealers[self.index].is_empty()
    }

    /// The next slot's thread, else the oldest queued one (for the
    /// scheduler context, where no streak is counted).
    fn pop_local(&self) -> Option<TaskRef> {
        self.take_lifo().or_else(|| self.queue.pop())
    }

    /// This processor's next slot (`queue.rs`).
    #[inline]
    fn lifo(&self) -> &LifoSlot {
        // SAFETY: an element of `shared.slots`, which lives as long as the
        // `Shared` this processor holds.
        unsafe { self.slot.as_ref() }
    }

    /// Takes the next slot's thread, if the owner may have put one there.
    #[inline]
    fn take_lifo(&self) -> Option<TaskRef> {
        if !self.queue.slot_used() {
            return None;
        }
        let t = self.lifo().take(!self.solo);
        if t.is_none() {
            self.queue.set_slot_used(false);
            self.lifo_streak.set(0);
        }
        t
    }

    /// Always inlined: without a hook it is one test, and as a call (which
    /// LLVM chose in the yield path once that grew) it cost a call, a return
    /// and the spilled closure.
    #[inline(always)]
    pub(crate) fn emit(&self, e: impl FnOnce() -> Event) {
        if let Some(h) = &self.hook {
            h(&e());
        }
    }

    /// The running user thread, if any.
    #[inline]
    pub(crate) fn current_task(&self) -> Option<&Task> {
        // SAFETY: `current` is only replaced by this kernel thread, in the
        // switch paths, which hold no other reference to it; the task it
        // holds stays alive at least until the next switch.
        unsafe { (*self.current.get()).as_deref() }
    }

    /// Takes the running user thread out of the processor (a detach,
    /// `blocking.rs`). Only the machine running the processor calls it.
    pub(crate) fn take_current(&self) -> Option<TaskRef> {
        // SAFETY: only this processor's machine touches `current`.
        let t = unsafe { (*self.current.get()).take() };
        if self.policies.load(Ordering::Relaxed) {
            // Its stint ends here (an exit or a detach), not at the next switch.
            self.policy_switch();
        }
        t
    }

    /// Makes `t` the running user thread (a rejoin, `blocking.rs`).
    pub(crate) fn set_current(&self, t: TaskRef) {
        // SAFETY: as in `take_current`; it was empty.
        unsafe { *self.current.get() = Some(t) };
        if self.policies.load(Ordering::Relaxed) {
            self.policy_switch();
        }
    }

    /// What a change of the running context means for the policies: the
    /// CPU-time accounting and budgets, and the running level published for
    /// the monitor.
    #[cold]
    #[inline(never)]
    pub(crate) fn policy_switch(&self) {
        if self.cpu_accounting.load(Ordering::Relaxed) {
            self.cpu_switch();
        }
        if self.prios.load(Ordering::Relaxed) {
            let cur = self.current_task();
            let p = cur.map_or(crate::Priority::Normal, Task::priority);
            let turn = cur.is_some_and(Task::take_turn);
            if turn && p == crate::Priority::Low {
                self.aged_last.set(true);
            } else if p == crate::Priority::Normal && cur.is_some() {
                self.aged_last.set(false);
            }
            let turn_bit = if turn { crate::task::TURN } else { 0 };
            self.cur_prio.store(p.as_u8() | turn_bit, Ordering::Relaxed);
            self.cur_rt.store(cur.map_or(0, crate::hooks::published_rt), Ordering::Relaxed);
        }
    }

    /// The running stint is a turn (`priority.rs`, "Aging"): no level takes
    /// the processor from it. While `prios` is set.
    #[inline]
    fn on_turn(&self) -> bool {
        self.cur_prio.load(Ordering::Relaxed) & crate::task::TURN != 0
    }

    /// The CPU-time accounting of a change of the running context
    /// (`cputime.rs`, `budget.rs`): ends the stint of the thread that ran
    /// here, if any, and starts the current thread's, at one reading of this
    /// kernel thread's CPU clock; charges a budget the stint's CPU time, and
    /// arms this kernel thread's CPU-time timer for what the current thread's
    /// budget has left (or disarms it). Runs on this processor's kernel
    /// thread, after a switch and before its pending action (so the thread
    /// that left is still private to us), or where a thread leaves or takes
    /// the processor without a switch.
    #[cold]
    #[inline(never)]
    pub(crate) fn cpu_switch(&self) {
        // The calling kernel thread's: the one whose CPU clock is read.
        let m = Machine::here();
        // SAFETY: `cpu_current` names the thread that was current when it
        // was set. One that left by a switch is kept alive by its pending
        // action, which runs after this; one that left without a switch
        // (exit, detach, the end of an inline run) went through
        // `take_current` or `set_current`, which called this while it was
        // still alive.
        let prev = self.cpu_current.take().map(|p| unsafe { &*p.as_ptr() });
        // Only a thread whose time someone asked for (`cputime.rs`, "When"):
        // a switch between two others reads no clock.
        let next = self.current_task().filter(|t| t.cpu.wanted());
        let ran =
            crate::cputime::hand_over(prev.map(|t| &t.cpu), next.map(|t| &t.cpu), m.cpu_clock());
        self.cpu_current.set(next.map(NonNull::from));
        let (prev_b, next_b) = (prev.and_then(Task::budget), next.and_then(Task::budget));
        if prev_b.is_none() && next_b.is_none() {
            return;
        }
        let now = self.shared.timers.now();
        let mut armed = false;
        if let Some(b) = prev_b {
            b.stop(now, ran);
            armed = true;
        }
        let mut deadline = u64::MAX;
        if let Some(b) = next_b {
            let left = b.start(now);
            if left == 0 {
                // Already spent (woken, or owing an overrun): throttled as the
                // switch's runtime section ends, not a kernel tick later.
                m.defer_in_section();
            }
            match m.budget_timer() {
                Some(timer) => {
                    timer.arm(left, crate::budget::RETRY_CPU.as_nanos() as u64);
                    armed = false;
                }
                // No timer: the monitor enforces a wall-clock deadline.
                None => deadline = now + left,
            }
        }
        if armed {
            if let Some(timer) = m.budget_timer() {
                timer.disarm();
            }
        }
        if deadline != self.budget_deadline.load(Ordering::Relaxed) {
            self.budget_deadline.store(deadline, Ordering::Relaxed);
            if deadline != u64::MAX {
                self.shared.monitor.poke();
            }
        }
    }

    /// Starts the calling thread's CPU-time stint if accounting is on and
    /// none runs (`cputime.rs`, "When": the thread that asks first is
    /// counted from its request, not from its next switch). On this
    /// processor's kernel thread, in a runtime section, with `t` current.
    pub(crate) fn start_own_stint(&self, t: &Task) {
        if !self.cpu_accounting.load(Ordering::Relaxed)
            || self.cpu_current.get().is_some()
            || !t.cpu.wanted()
        {
            return;
        }
        if !self.current_task().is_some_and(|c| std::ptr::eq(c, t)) {
            return;
        }
        t.cpu.start_here(self.machine().cpu_clock());
        self.cpu_current.set(Some(NonNull::from(t)));
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
    pub(crate) fn return_credits(&self) {
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

    /// The context to load to run `t`, which came out of a run queue: its
    /// saved context, or — a thread that has not started, which has no stack
    /// yet (`spawn.rs`) — a first context on a stack taken now.
    #[inline(always)]
    pub(crate) fn context_of(&self, t: &Task) -> StackPointer {
        // SAFETY: `t` came out of a run queue, so its context was saved and
        // published, and nobody else resumes it.
        let sp = unsafe { *t.ctx.get() };
        if !sp.is_null() {
            return sp;
        }
        self.first_context(t)
    }

    /// Gives a thread that has not started its stack (from this processor's
    /// pool, else the depot) and its first context. A stack cannot be had only
    /// when the kernel refuses memory; the spawn returned long ago, so the
    /// process aborts with a message naming the thread (Go's runtime throws on
    /// a failed stack allocation too).
    #[inline(never)]
    fn first_context(&self, t: &Task) -> StackPointer {
        // SAFETY: the task is ours (came out of a queue). A started thread
        // whose stack was reclaimed has a null context too (`reclaim.rs`).
        if let Some(sp) = unsafe { crate::reclaim::restore(t) } {
            return sp;
        }
        let cell = t.stack.get();
        // SAFETY: as in `stack`; the task is ours (came out of a queue) and
        // has not run, so its stack cell is empty and unshared.
        unsafe {
            let pool = &mut *self.pool.get();
            // Written straight into the cell (see the note in `spawn.rs` on
            // moving a `Stack` through a `Result`).
            cell.write(pool.pop());
            if (*cell).is_none() {
                match self.stack(self.shared.stack_size) {
                    Ok(s) => cell.write(Some(s)),
                    Err(e) => no_stack(t, e),
                }
            }
        }
        // SAFETY: just filled; only the task (not running yet) uses it.
        let stack = unsafe { (*cell).as_ref() }.expect("a stack was just placed");
        stack.set_owner(t);
        // SAFETY: `top` is the aligned end of the task's own fresh stack, on
        // which nothing runs yet; `task_entry` never returns.
        unsafe { arch::init_stack(stack.top(), entry::task_entry, std::ptr::null_mut(), 0) }
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
            } else if let Some(stack) = self.shared.depot.take_other(size) {
                Ok(stack)
            } else {
                Stack::new_registered(size, &self.shared.registry)
            }
        }
    }

    /// Makes `t`, just spawned or woken by the running thread, the next to
    /// run here (Go's `runnext`): a spawn tree then runs depth-first, with
    /// only its current path alive. The thread it displaces from the next
    /// slot runs next after it, before older queued threads (`queue.rs`,
    /// `push_fresh`). With other processors, both can be stolen, so an idle
    /// processor is told as for any queued thread (Go's `wakep` after
    /// `runqput`). The slot's thread is usually run here within a few hundred
    /// nanoseconds (its waker is about to park: a ping-pong, a ring, a
    /// fork-join), so a thief leaves it a grace period ([`SLOT_GRACE`], as
    /// Go's `runqsteal` waits 3 µs) before it takes it: otherwise every hop
    /// of such a conversation would move across CPUs. For the same reason a
    /// processor that saw this one switching sleeps deaf to the slot's
    /// notification, and looks again after [`DEAF_POLL`] (`idle.rs`, "Slots").
    #[inline(always)]
    pub(crate) fn schedule_next(&self, t: TaskRef) {
        let Some(t) = self.divert(t, true) else { return };
        let shared = !self.solo;
        self.queue.set_slot_used(true);
        if let Some(old) = self.lifo().put(t, shared) {
            self.queue.push_fresh(old);
            if shared {
                // Queued work: any sleeper.
                self.shared.notify();
            }
        } else if shared {
            self.shared.notify_slot();
        }
        self.shared.monitor.work_arrived();
    }

    /// Queues a saved, runnable thread on this processor: privately when no
    /// other processor exists to take it (see `queue.rs`), else where
    /// thieves can. Returns `true` if the caller should let an idle
    /// processor know.
    #[inline]
    pub(crate) fn enqueue(&self, t: TaskRef) -> bool {
        let Some(t) = self.divert(t, false) else { return false };
        if self.solo {
            self.queue.push_private(t);
            false
        } else {
            self.queue.push_shared(t);
            true
        }
    }

    /// Sends `t` to its level's queue if it is not `Normal` and the runtime
    /// has levels (`priority.rs`); gives it back otherwise. `woken`: the
    /// running thread just made `t` runnable, and yields to it at the end of
    /// its runtime section if `t` is of a higher level.
    #[inline(always)]
    pub(crate) fn divert(&self, t: TaskRef, woken: bool) -> Option<TaskRef> {
        if !self.prios.load(Ordering::Relaxed) {
            return Some(t);
        }
        // One read of the level: an inherited one may be given back meanwhile
        // (`priority.rs`, "Inheritance"), and a second read could say `Normal`,
        // which the levels' queues do not hold.
        let p = t.priority();
        if p == crate::Priority::Normal {
            return Some(t);
        }
        self.divert_slow(t, p, woken);
        None
    }

    #[cold]
    #[inline(never)]
    fn divert_slow(&self, t: TaskRef, p: crate::Priority, woken: bool) {
        if woken
            && !self.on_turn()
            && self.current_task().is_some_and(|c| {
                (c.priority() > p
                    || (p == crate::Priority::High
                        && c.priority() == p
                        && c.rt_priority() < t.rt_priority()))
                    && c.preemptible()
            })
        {
            // Strict levels on this processor: the waker is preempted when
            // its section ends (`Machine::lower`), and the decision that
            // follows takes `t` from its queue.
            self.machine().defer_in_section();
        }
        self.shared.prio.push(t, p, self.shared.timers.now());
        self.shared.notify();
        // The monitor preempts a processor running a lower level elsewhere.
        self.shared.monitor.poke();
    }

    /// The thread a decision takes from the levels' queues before its own
    /// work (`priority.rs`): a `High` one, then an aged `Low` one for its turn
    /// unless the last turn here went to one; or, when the monitor asked this
    /// processor to let the work under its `High` threads have a turn (aging),
    /// that turn's thread: an aged one on the same condition, else its own
    /// `Normal` work.
    ///
    /// `Err(())`: the current thread is a real-time one and nothing waits that may take
    /// its processor from it (`priority.rs`, "Real-time order"): the decision takes
    /// nothing.
    #[cold]
    #[inline(never)]
    fn prio_first(&self) -> Result<Option<TaskRef>, ()> {
        let prio = &self.shared.prio;
        let aged = || if self.aged_last.get() { None } else { prio.pop_aged() };
        let turn = if self.normal_turn.swap(false, Ordering::Relaxed) {
            aged().or_else(|| self.pop_local())
        } else {
            let cur = self.current_task().filter(|c| c.priority() == crate::Priority::High);
            let rt = cur.map_or(0, |c| c.rt_priority());
            if rt != 0 {
                // A real-time thread's decision (`realtime.rs`).
                let cur = cur.expect("rt != 0");
                return crate::hooks::realtime_decision(prio, cur, rt).map(Some).ok_or(());
            }
            if let Some(t) = prio.pop_high_from(rt) {
                return Ok(Some(t));
            }
            aged()
        };
        Ok(turn.inspect(|t| t.give_turn()))
    }

    /// Next thread to run, from the local queue (task or scheduler context).
    /// Always inlined: it is most of a switch's scheduling decision, and as
    /// a call (which LLVM chose once the next slot made it longer) it cost a
    /// yield 13% more instructions.
    #[inline(always)]
    fn next_local(&self) -> Option<TaskRef> {
        if !self.decision_begins() {
            return None;
        }
        self.decide()
    }

    /// The decision proper, after [`Processor::decision_begins`].
    #[inline(always)]
    pub(super) fn decide(&self) -> Option<TaskRef> {
        if self.prios.load(Ordering::Relaxed) {
            match self.prio_first() {
                Ok(Some(t)) => return Some(t),
                Ok(None) => {}
                Err(()) => return None,
            }
        }
        if let Some(t) = self.take_lifo() {
            let streak = self.lifo_streak.get();
            if streak < MAX_LIFO_STREAK {
                self.lifo_streak.set(streak + 1);
                return Some(t);
            }
            // The queue's turn, unless nothing waits there: then the streak
            // goes on (at its bound, so the first thread queued gets the
            // next decision). Two threads handing off to each other alone
            // used to requeue and pop one of them every fourth switch.
            if self.queue.is_empty_owner() {
                return Some(t);
            }
            self.lifo_streak_over(t);
        }
        self.lifo_streak.set(0);
        match self.queue.pop() {
            Some(t) => Some(t),
            None => self.pull_injector().or_else(|| self.low_last()),
        }
    }

    /// What every scheduling decision does first: count it (the monitor's and
    /// the thieves' view of this processor, and the maintenance period) and
    /// look at the injection queue. `false`: this processor is halting (shutdown, or removed:
    /// `runtime.rs`, "Resizing", step 2), and the decision takes nothing.
    #[inline(always)]
    pub(super) fn decision_begins(&self) -> bool {
        let n = self.switches.load(Ordering::Relaxed).wrapping_add(1);
        self.switches.store(n, Ordering::Relaxed);
        if n.is_multiple_of(MAINTENANCE_INTERVAL) {
            if self.halt.load(Ordering::Relaxed) {
                return false;
            }
            self.maintenance();
        }
        if !self.shared.injector.is_empty() {
            self.drain_injector();
        }
        true
    }

    /// Whether a decision here needs only the private part of the queue: the
    /// next slot and the stealable parts are empty (one test of the queue's
    /// flags) and the runtime has no levels. Then the slot's streak is zero
    /// too (`take_lifo` ends it when it finds the slot empty). Tested by a
    /// yield only (`switch.rs`, `yield_plain`): in a hand-off the slot is in
    /// use, and the test would only add to [`Processor::decide`].
    #[inline(always)]
    pub(super) fn plain(&self) -> bool {
        self.queue.only_private() && !self.prios.load(Ordering::Relaxed)
    }

    /// A `Low` thread, when the runtime has levels: what a decision takes when
    /// it has nothing else (`priority.rs`). An aged one, for its turn; else one
    /// waiting at its level, unless the decision is a user thread's of a higher
    /// level: that thread may be yielding, runnable but not yet queued, and
    /// must not lose the processor to a lower level (the scheduler context
    /// takes the `Low` thread if it parks or exits instead).
    #[inline]
    fn low_last(&self) -> Option<TaskRef> {
        if !self.prios.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(t) = self.shared.prio.pop_aged() {
            t.give_turn();
            return Some(t);
        }
        if self.current_task().is_some_and(|c| c.priority() < crate::Priority::Low) {
            return None;
        }
        self.shared.prio.pop_low()
    }

    /// The queue's turn after [`MAX_LIFO_STREAK`] decisions from the next
    /// slot: the slot's thread goes behind it.
    #[cold]
    #[inline(never)]
    fn lifo_streak_over(&self, t: TaskRef) {
        self.enqueue(t);
    }

    #[cold]
    fn maintenance(&self) {
        self.shared.timers.fire(|t| self.wake_timer(t));
        if let Some(p) = crate::hooks::active_poller() {
            // A busy processor still sees I/O readiness (at most every
            // `poll::POLL_EVERY`) when none sleeps in `epoll_wait`.
            p.poll_busy(crate::hooks::POLL_EVERY);
        }
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
    /// them. Without this, those waited for the next maintenance poll (61 decisions then): three
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
    #[inline]
    fn wake_timer(&self, t: TaskRef) {
        let ptr = NonNull::from(&*t);
        drop(t);
        // SAFETY: the sleeping task waits for exactly this `Sync` token, so it
        // is alive until it is delivered (park.rs).
        unsafe { unpark_sync(ptr) };
    }

    // --- the scheduler context: loop, search, steal, shutdown ---

    /// Looks for work until some turns up, or shutdown; sleeps in between.
    fn search(&self) -> Option<TaskRef> {
        let shared = &*self.shared;
        let idle = &shared.idle;
        let first = idle.start_searching() == 0;
        // Only one processor spins at a time; the others sleep at once. Nor
        // does one whose only source of work is the poller (`idle_spin.rs`).
        let mut spin_until = (first && self.spin_pays()).then(|| Instant::now() + shared.spin);
        let mut backoff = SEARCH_BACKOFF.start;
        // The last look saw another processor switching (`steal_slot`).
        let mut saw_switching;
        loop {
            if !shared.is_active(self.index) {
                // Removed ("Resizing", step 2). A producer may have counted
                // on us (or woken us, counting us as searching): as any
                // searcher that leaves, the last one passes the wake-up on.
                if idle.stop_searching() {
                    shared.notify();
                }
                return None;
            }
            if let Some((t, here)) = self.steal_round() {
                self.fed_here.set(here);
                if idle.stop_searching() {
                    shared.notify();
                }
                return Some(t);
            }
            saw_switching = self.owner_busy.replace(false);
            if shared.shutdown.load(Ordering::Acquire) {
                idle.stop_searching();
                return None;
            }
            if let Some(until) = spin_until {
                let now = Instant::now();
                if now < until {
                    // Look again soon, unless the look saw another
                    // processor switching threads: then after a pause that
                    // doubles while that goes on. A look reads the lines
                    // such a processor writes at every switch (its next
                    // slot and its decision count), and each read costs
                    // its next write a miss; a processor that computes
                    // writes neither, and is looked at freely.
                    if saw_switching {
                        backoff = (backoff * 2).min(SEARCH_BACKOFF.end);
                    } else {
                        backoff = SEARCH_BACKOFF.start;
                    }
                    let next = (now + backoff).min(until);
                    while Instant::now() < next {
                        for _ in 0..8 {
                            std::hint::spin_loop();
                        }
                    }
                    continue;
                }
            }
            // Sleep, following idle.rs. Idle stacks beyond a few go to the depot first,
            // where the monitor gives their memory back if they stay idle.
            // SAFETY: only this kernel thread touches the pool, and the search runs
            // on the scheduler's own stack, so no pooled stack is in use.
            unsafe { &mut *self.pool.get() }.trim(STACK_POOL_KEEP_IDLE, &shared.depot);
            // Another processor converses: what it puts in its next slot is
            // not ours to take, and waking us for it would cost it a futex
            // wake at every end of our search (`idle.rs`, "Slots").
            let deaf = saw_switching;
            idle.prepare_sleep(self.index, !deaf);
            if let Some((t, here)) = self.steal_round() {
                self.fed_here.set(here);
                idle.cancel_sleep(self.index);
                crate::ring::event(crate::ring::Event::SleepCancelled, self.index as u64);
                shared.monitor.processor_starts();
                shared.wait_for_check();
                return Some(t);
            }
            if shared.shutdown.load(Ordering::Acquire) {
                idle.cancel_sleep(self.index);
                return None;
            }
            let mut timeout = shared.timers.until_next();
            if deaf {
                timeout = Some(timeout.map_or(DEAF_POLL, |t| t.min(DEAF_POLL)));
            } else if timeout.is_none()
                && shared.deadlock_detection
                && idle.stopped() == shared.max_procs
            {
                shared.check_deadlock();
            }
            #[cfg(feature = "shared-library")]
            crate::hooks::before_idle_sleep();
            crate::ring::event(crate::ring::Event::Sleep, self.index as u64);
            crate::hooks::poll_sleep(&shared.parkers[self.index], timeout);
            let by_itself = idle.after_wake(self.index);
            crate::ring::event(
                crate::ring::Event::Woke,
                self.index as u64 | u64::from(by_itself) << 8,
            );
            shared.monitor.processor_starts();
            shared.wait_for_check();
            // Woken for work: search as usual. At a deaf sleep's timeout:
            // look for a moment, then sleep again (the conversation goes on)
            // or take what its owner left in its slot (it stopped).
            let (look, first_pause) = if deaf && by_itself {
                // Two looks, DEAF_LOOK apart (the first sees the counter
                // moved since before the sleep, which doubles the pause).
                (DEAF_LOOK, DEAF_LOOK / 2)
            } else if self.spin_pays() {
                (shared.spin, SEARCH_BACKOFF.start)
            } else {
                (Duration::ZERO, SEARCH_BACKOFF.start)
            };
            // No spin: no clock read either (a look, then sleep).
            spin_until = (!look.is_zero()).then(|| Instant::now() + look);
            backoff = first_pause;
        }
    }

    /// One look at every source of work. With the thread found, whether it
    /// came from this processor's own queue, timers or poll (`true`), or
    /// from elsewhere: another processor, the injection queue, the
    /// priority queues (`idle_spin.rs`).
    fn steal_round(&self) -> Option<(TaskRef, bool)> {
        if self.prios.load(Ordering::Relaxed) {
            // The scheduler context's: no current thread to hold the processor.
            if let Ok(Some(t)) = self.prio_first() {
                return Some((t, false));
            }
        }
        if let Some(t) = self.pop_local() {
            return Some((t, true));
        }
        // A fired timer's thread lands in the next slot.
        self.shared.timers.fire(|t| self.wake_timer(t));
        if let Some(t) = self.pop_local() {
            return Some((t, true));
        }
        if let Some(t) = self.pull_injector() {
            return Some((t, false));
        }
        // Threads whose descriptors became ready land in the next slot and
        // the queue (Go's `findrunnable` polls the network here too).
        if let Some(p) = crate::hooks::active_poller() {
            if p.poll_idle() != 0 {
                if let Some(t) = self.pop_local() {
                    return Some((t, true));
                }
            }
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
                    match stealers[victim].steal_into(self.queue.shared()) {
                        Steal::Success(t) => return Some((t, false)),
                        Steal::Empty => break,
                        Steal::Retry => {}
                    }
                }
            }
            // Nothing queued anywhere: a thread waiting in another
            // processor's next slot (its owner busy with a long
            // computation) is better run here than later there.
            for k in 0..n {
                let victim = (start + k) % n;
                if victim != self.index {
                    if let Some(t) = self.steal_slot(victim) {
                        return Some((t, false));
                    }
                }
            }
        }
        self.low_last().map(|t| (t, false))
    }

    /// Takes the thread in `victim`'s next slot, unless its owner is likely
    /// to run it at once. Its owner put it there a moment ago, usually just
    /// before parking (a ping-pong, a ring): so the thread is left alone
    /// until its owner has gone [`SLOT_GRACE`] without a scheduling decision
    /// — then it is computing, and the thread had better run here. (Go's
    /// `runqsteal` waits 3 µs after it sees `runnext`, whatever the owner
    /// did before; counting from the owner's last decision instead, which
    /// this thief saw on its earlier rounds, takes the thread at once from
    /// an owner that has long been computing.)
    ///
    /// One look per round, no waiting here: a thief that watched the slot
    /// and the owner's decision count through the grace read the two lines
    /// the owner writes at every hand-off every few dozen nanoseconds, and
    /// each of the owner's next writes then had to take its line back from
    /// this CPU — a ring of 503 threads cost 2.5 times more per hop on two
    /// processors than on one. The search's back-off spaces the looks
    /// ([`SEARCH_BACKOFF`]).
    fn steal_slot(&self, victim: usize) -> Option<TaskRef> {
        // SAFETY: processors outlive every machine that runs one.
        let owner = unsafe { &*self.shared.processors()[victim].0 };
        let decisions = owner.switches.load(Ordering::Relaxed);
        let now = Instant::now();
        let since = {
            let mut seen = self.seen_decisions.borrow_mut();
            if seen.len() <= victim {
                seen.resize(victim + 1, (u32::MAX, now));
            }
            if seen[victim].0 != decisions {
                // The owner is switching: a conversation, or a run of short
                // stints. Our looks cost it misses; look less often.
                seen[victim] = (decisions, now);
                self.owner_busy.set(true);
            }
            seen[victim].1
        };
        let slot = &self.shared.slots[victim];
        let t = slot.peek();
        if t.is_null() || now < since + SLOT_GRACE {
            return None;
        }
        slot.take_if(t)
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

    /// Steps 3 and 4 of "Resizing" (`runtime.rs`), in the scheduler context
    /// of a processor that found itself removed: moves its work to the
    /// injection queue and parks, retired, until it is added back (then
    /// returns, and the caller searches) or the runtime shuts down.
    #[cold]
    fn retire(&self) {
        let shared = &*self.shared;
        // Its next slot and queue: only this processor pushes there, and it
        // runs nothing more, so once moved they stay empty. Thieves may
        // take from them meanwhile; each thread ends up in one place.
        let mut moved = false;
        if let Some(t) = self.lifo().take(true) {
            shared.injector.push(t);
            moved = true;
        }
        self.queue.set_slot_used(false);
        self.lifo_streak.set(0);
        for t in self.queue.drain() {
            shared.injector.push(t);
            moved = true;
        }
        if moved {
            shared.notify();
            shared.monitor.work_arrived();
        }
        // SAFETY: only this kernel thread touches the pool, and the
        // scheduler context runs on its own stack, so no pooled stack is in
        // use.
        unsafe { &mut *self.pool.get() }.trim(0, &shared.depot);
        {
            let _events_in_order = shared.resize.lock().unwrap_or_else(|e| e.into_inner());
            if self.announced.swap(false, Ordering::Relaxed) {
                self.emit(|| Event::ProcessorRemoved { processor: self.index });
            }
        }
        shared.idle.retire();
        loop {
            if shared.shutdown.load(Ordering::Acquire) || shared.is_active(self.index) {
                break;
            }
            // The last processor to stop runs the deadlock check, as in
            // `search`: it may be this one, when the active ones sleep.
            if shared.deadlock_detection
                && shared.timers.until_next().is_none()
                && shared.idle.stopped() == shared.max_procs
            {
                shared.check_deadlock();
            }
            // Re-checked after every return: an unpark that came before the
            // park leaves its token, and stray ones (an idle notification
            // aimed at us before we were removed) only cost a loop.
            shared.parkers[self.index].park(None);
        }
        shared.idle.unretire();
        shared.monitor.processor_starts();
        shared.wait_for_check();
        if !shared.shutdown.load(Ordering::Acquire) {
            self.announce();
        }
    }

    /// Emits `NewProcessor` for this processor (at start, or added back).
    fn announce(&self) {
        let _events_in_order = self.shared.resize.lock().unwrap_or_else(|e| e.into_inner());
        self.announced.store(true, Ordering::Relaxed);
        self.emit(|| Event::NewProcessor { processor: self.index });
    }

    /// Shutdown step 2.
    pub(crate) fn shut_down(&self) {
        if let Some(t) = self.lifo().take(true) {
            self.shared.injector.push(t);
        }
        self.queue.set_slot_used(false);
        self.lifo_streak.set(0);
        for t in self.queue.drain() {
            self.shared.injector.push(t);
        }
        // SAFETY: only this kernel thread touches the pool.
        let pool = std::mem::replace(unsafe { &mut *self.pool.get() }, StackPool::new(0, 0));
        drop(pool);
    }
}

/// A timer fired for `t` on a thread that runs no processor (the monitor).
pub(crate) fn wake_timer_from_outside(t: TaskRef) {
    let ptr = NonNull::from(&*t);
    drop(t);
    // SAFETY: as in `Processor::wake_timer`.
    unsafe { unpark_sync(ptr) };
}

/// A processor handed from one thread to another (processors are owned by
/// the `Runtime` and freed after every machine has stopped).
#[derive(Clone, Copy)]
pub(crate) struct ProcPtr(pub(crate) *const Processor);

// SAFETY: a processor is used by one machine at a time, by the binding
// protocol (`blocking.rs`); the pointer only carries it to that machine.
unsafe impl Send for ProcPtr {}
// SAFETY: other threads only read its atomics through it.
unsafe impl Sync for ProcPtr {}

/// Body of every kernel thread of a runtime ("machine"): runs `first` (a
/// processor of its own at start) or, as a spare, whatever processor the
/// monitor hands it, until shutdown. `announce`: emit `NewProcessor` for
/// `first` (a processor active when the thread was made).
pub(crate) fn machine_main(shared: Arc<Shared>, first: Option<ProcPtr>, announce: bool) {
    let _altstack = crate::guard::AltStack::install();
    let m = Machine::here();
    m.init_identity();
    crate::hooks::init_preemption();
    let registered = shared.machines.register(m);
    let mut next = first.map(|p| p.0);
    if let Some(p) = next {
        // SAFETY: a live processor of this runtime, not yet running: ours.
        let vp = unsafe { &*p };
        // Removed since, it retires at once, with `ProcessorRemoved`; one
        // beyond the active count at build retires quietly.
        if announce {
            vp.announce();
        }
    }
    loop {
        let p = match next.take() {
            Some(p) => p,
            None => match crate::hooks::wait_as_spare(m, &shared) {
                Some(p) => p,
                None => break,
            },
        };
        bind(m, p);
        if !run_loop(m) {
            break;
        }
        // Lost the processor to a hand-off (`blocking.rs`): become a spare.
    }
    shared.machines.unregister(registered);
}

/// Makes `p` the processor of the calling machine `m`.
pub(crate) fn bind(m: &Machine, p: *const Processor) {
    // SAFETY: a live processor that nobody else runs (it was released or
    // handed to us).
    let vp = unsafe { &*p };
    vp.machine.store((m as *const Machine).cast_mut(), Ordering::Relaxed);
    m.set_processor(p);
    vp.count_switch();
}

/// The scheduler loop of a machine, on its native stack: runs the machine's
/// processor (which may change while a detached user thread rejoins another
/// one, `blocking.rs`). Returns `false` at shutdown, `true` when the machine
/// has no processor any more.
fn run_loop(m: &Machine) -> bool {
    loop {
        let p = m.processor();
        if p.is_null() {
            return true;
        }
        // SAFETY: our processor; bound to this machine until we give it up.
        let vp = unsafe { &*p };
        if vp.shared.shutdown.load(Ordering::Acquire) {
            vp.shut_down();
            m.set_processor(std::ptr::null());
            return false;
        }
        if !vp.shared.is_active(vp.index) {
            vp.retire();
            continue;
        }
        if !vp.announced.load(Ordering::Relaxed) {
            // Built inactive and added before it ever retired.
            vp.announce();
        }
        if let Some(t) = vp.next_local().or_else(|| vp.search()) {
            vp.run_task(t);
        }
    }
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

/// Most other processors a [`SpinWatch`] keeps an eye on.
const WATCHED: usize = 8;

/// What a thread about to spin on a lock (`sync/mutex.rs`) knows of where
/// the holder may be running: the *other* processors of its runtime that run
/// user code right now, each with its switch count then. A lock's holder runs
/// only on one of them (never on the spinner's own processor, which the
/// spinner occupies), and only for as long as that processor's stint lasts:
/// once each watched processor has switched or left user code, a holder that
/// was running is no longer (it parked, was preempted or exited), and
/// spinning would only burn this processor.
pub(crate) struct SpinWatch {
    watched: [(*const Processor, u32); WATCHED],
    len: usize,
}

impl SpinWatch {
    /// The watch for the calling user thread; `None` on an OS thread or a
    /// detached user thread (no processor to reason from).
    pub(crate) fn here() -> Option<SpinWatch> {
        let vp = enter()?;
        let mut w = SpinWatch { watched: [(std::ptr::null(), 0); WATCHED], len: 0 };
        if vp.solo {
            return Some(w);
        }
        for p in vp.shared.processors() {
            if w.len == WATCHED {
                break;
            }
            if std::ptr::eq(p.0, vp.processor()) {
                continue;
            }
            // SAFETY: processors live as long as their runtime's `Shared`,
            // which the calling thread's task keeps alive.
            let other = unsafe { &*p.0 };
            if other.in_user.load(Ordering::Relaxed) {
                w.watched[w.len] = (p.0, other.switches.load(Ordering::Relaxed));
                w.len += 1;
            }
        }
        Some(w)
    }

    /// Whether a holder may still be running: some watched processor is in
    /// the same stint as when the watch began.
    #[inline]
    pub(crate) fn holder_may_run(&self) -> bool {
        self.watched[..self.len].iter().any(|&(p, seen)| {
            // SAFETY: as in `here`; the caller is the thread that made the watch.
            let p = unsafe { &*p };
            p.in_user.load(Ordering::Relaxed) && p.switches.load(Ordering::Relaxed) == seen
        })
    }
}

/// A thread could not be given a stack when it first ran (`first_context`).
#[cold]
fn no_stack(t: &Task, e: io::Error) -> ! {
    let name = t.name().map_or_else(String::new, |n| format!(" '{n}'"));
    eprintln!("schedlab-rt: no stack for user thread {}{name} at its first run: {e}", t.id);
    std::process::abort()
}

/// The running user thread, or `None` on an OS thread (or a scheduler
/// context). A detached user thread (`blocking.rs`) counts as running.
#[inline]
pub(crate) fn current_task_ptr() -> Option<NonNull<Task>> {
    // The common case first, with the lighter section.
    if let Some(vp) = enter() {
        return vp.current_task().map(NonNull::from);
    }
    match here() {
        Here::Processor(vp) => vp.current_task().map(NonNull::from),
        Here::Detached(d) => Some(d.task()),
        Here::Os => None,
    }
}

/// A counted reference to the running user thread.
pub(crate) fn current_task_ref() -> Option<TaskRef> {
    let task = current_task_ptr()?;
    // SAFETY: the running thread (the caller) is alive while it runs; we
    // take a new counted reference to it.
    Some(unsafe { TaskRef::clone_from_raw(task) })
}

/// A request for `t`'s CPU time (`cputime.rs`, "When"): accounts `t` from
/// now on, turning accounting on in its runtime if it is not, and starts
/// `t`'s stint at once: here if `t` is the caller, at the safe point of a
/// preemption request if it runs on another processor.
pub(crate) fn account_cpu(t: &Task) {
    let newly = t.cpu.want();
    if !t.shared.cpu_accounting.load(Ordering::Relaxed) {
        enable_cpu_accounting(&t.shared);
    }
    if t.cpu.running() {
        return;
    }
    let own = current_task_ptr().is_some_and(|c| std::ptr::eq(c.as_ptr(), t));
    if own {
        if let Some(entered) = enter() {
            entered.processor().start_own_stint(t);
        }
    } else if newly {
        self::spawn::start_stints_elsewhere(&t.shared);
    }
}

/// The guard-page range, name and stack size of the running user thread, for
/// the overflow handler. Async-signal-safe: reads only.
pub(crate) fn overflow_info() -> Option<(std::ops::Range<usize>, Option<&'static str>, usize, u64)>
{
    let vp = Machine::here().processor();
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
        Some((guard, name, task.stack_size.load(Ordering::Relaxed), task.id.as_u64()))
    }
}
