//! The registry of a runtime's stacks, through which the deadlock detector
//! finds every live user thread.
//!
//! Registering each *thread* at spawn and removing it at exit cost two locked
//! instructions per thread (a spin lock, ~11 ns of a ~90 ns spawn+join).
//! Stacks are made and unmapped far more rarely than threads (they are
//! pooled; creating one is an `mmap` anyway), and a live thread that has
//! started always owns exactly one stack (one not yet started is queued, so
//! runnable: no deadlock check needs it; one run inline by its joiner owns
//! the joiner's stack meanwhile, and the joiner is found through it,
//! `Task::host`). So the runtime registers *stacks*, under a lock, when
//! they are mapped and unmapped, and each registered stack has a [`Slot`]
//! naming the thread that runs on it:
//!
//! | slot `task` | meaning                                              |
//! |-------------|------------------------------------------------------|
//! | null        | the stack is free (in a pool or the depot)            |
//! | `t`         | thread `t` owns it: set when `t` first runs (or at spawn for a stack of its own size), or lent to `t` by its joiner |
//! |             | (release); cleared by `t` itself before its last switch |
//!
//! Both stores are plain `mov`s on x86_64.
//!
//! # Reading the slots safely
//!
//! The slots are written without the registry lock, so a reader could find a
//! thread that exits and is freed while it looks at it. The only reader is
//! the deadlock check (`runtime.rs`), which runs when every processor is
//! asleep, and it holds them off while it reads:
//! 1. The checker sets a flag (`idle::CheckGate`), issues a SeqCst fence,
//!    then checks again that every processor is asleep (`Idle::sleeping`),
//!    and gives up if not.
//! 2. A processor that stops sleeping (woken, timed out, or finding work in
//!    its last look before sleeping) has `sleeping` decremented first (by
//!    itself or by its waker, before it resumes), then issues a SeqCst fence
//!    and waits while the flag is set, before it runs any thread.
//!
//! Both sides write one location, fence, then read the other's, so at least
//! one sees the other: either the checker gives up, or the processor waits
//! until the check is over (`loom` checks this in `idle.rs`). Nothing else frees a thread that owns a
//! stack: only a processor runs a thread to its exit (a thread that owns a
//! stack holds a reference to itself until then), and threads outside the
//! runtime can only queue or wake them.

use crate::task::{Task, ThreadId, WaitReason};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

/// A parked user thread, as listed in a deadlock report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParkedThread {
    /// Its identifier.
    pub id: ThreadId,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// What it waits on.
    pub waiting_on: WaitReason,
}

/// The per-stack record (see the module docs), boxed so its address is stable.
pub(crate) struct Slot {
    task: AtomicPtr<Task>,
    /// Position in `Registry::slots` (changed under the registry lock only).
    index: usize,
    registry: NonNull<Registry>,
}

/// The registered stacks of one runtime.
#[derive(Default)]
pub(crate) struct Registry {
    slots: Mutex<Vec<SlotPtr>>,
}

#[derive(Clone, Copy)]
struct SlotPtr(NonNull<Slot>);
// SAFETY: a slot is owned by its stack; the registry only reads its atomic
// and, under its lock, its index.
unsafe impl Send for SlotPtr {}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry::default()
    }

    /// A new slot for a stack just mapped.
    ///
    /// # Safety
    ///
    /// The registry must outlive the slot (the stack unregisters it when
    /// dropped, which happens before its runtime's `Shared` is freed).
    pub(crate) unsafe fn register(&self) -> NonNull<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = Box::new(Slot {
            task: AtomicPtr::new(std::ptr::null_mut()),
            index: slots.len(),
            registry: NonNull::from(self),
        });
        let p = NonNull::from(Box::leak(slot));
        slots.push(SlotPtr(p));
        p
    }

    /// Removes and frees `slot`.
    ///
    /// # Safety
    ///
    /// `slot` must come from [`Registry::register`] and not be used afterwards.
    pub(crate) unsafe fn unregister(slot: NonNull<Slot>) {
        // SAFETY: a registered slot points to its live registry.
        let registry = unsafe { slot.as_ref().registry.as_ref() };
        let mut slots = registry.slots.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: `index` is read and written under the lock only.
        let index = unsafe { slot.as_ref().index };
        slots.swap_remove(index);
        if let Some(moved) = slots.get(index) {
            // SAFETY: as above; the moved slot is registered, so alive.
            unsafe { (*moved.0.as_ptr()).index = index };
        }
        drop(slots);
        // SAFETY: made by `Box::leak` in `register`; the caller gives it up.
        drop(unsafe { Box::from_raw(slot.as_ptr()) });
    }

    /// If every thread owning a registered stack is parked (and there is at
    /// least one), none of them on a primitive an OS thread may wake,
    /// returns them.
    ///
    /// # Safety
    ///
    /// No processor may run a thread meanwhile (module docs).
    pub(crate) unsafe fn all_parked(&self) -> Option<Vec<ParkedThread>> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for s in slots.iter() {
            // SAFETY: registered slots are alive while the lock is held.
            let t = unsafe { s.0.as_ref() }.task.load(Ordering::Acquire);
            // SAFETY: a thread named by a slot stays alive while no processor
            // runs (module docs).
            let Some(task) = (unsafe { t.as_ref() }) else { continue };
            // A thread waiting on something an OS thread may wake is not
            // stuck for good (`runtime.rs`, "Deadlock detection").
            if !task.is_parked() || task.external_wait.load(Ordering::Relaxed) {
                return None;
            }
            // The thread and the joiners it runs inline in, which wait for
            // it on its stack (`processor/inline.rs`).
            each_host(task, |task| {
                out.push(ParkedThread {
                    id: task.id,
                    name: task.name().map(str::to_owned),
                    waiting_on: task.wait_reason(),
                })
            });
        }
        if out.is_empty() {
            None
        } else {
            out.sort_by_key(|p| p.id);
            Some(out)
        }
    }
}

impl Registry {
    /// Calls `f` for every thread that owns a registered stack.
    ///
    /// # Safety
    ///
    /// No thread of the runtime may run, ever again (the runtime's kernel
    /// threads have all stopped), so every thread named by a slot is alive.
    pub(crate) unsafe fn for_each_owner(&self, mut f: impl FnMut(&Task)) {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for s in slots.iter() {
            // SAFETY: registered slots are alive while the lock is held.
            let t = unsafe { s.0.as_ref() }.task.load(Ordering::Acquire);
            // SAFETY: the caller's guarantee.
            if let Some(task) = unsafe { t.as_ref() } {
                each_host(task, &mut f);
            }
        }
    }
}

/// Calls `f` for `task` and for each joiner it runs inline in, innermost
/// first (`Task::host`): a stack's owner is the innermost, and the joiners
/// below it own no stack meanwhile. Callers read while no thread runs, so
/// the chain stands still and its tasks are alive (each holds its child's
/// handle, and is held by the frames of its own host or stack).
fn each_host(task: &Task, mut f: impl FnMut(&Task)) {
    let mut t = task;
    loop {
        f(t);
        // SAFETY: as above.
        match unsafe { t.host.load(Ordering::Acquire).as_ref() } {
            Some(h) => t = h,
            None => return,
        }
    }
}

/// Records in `slot` that `task` owns the stack (null: nobody).
///
/// # Safety
///
/// `slot` must be registered (its stack owns it).
#[inline]
pub(crate) unsafe fn set_owner(slot: NonNull<Slot>, task: *const Task) {
    // SAFETY: the caller's guarantee.
    unsafe { slot.as_ref() }.task.store(task.cast_mut(), Ordering::Release);
}
