//! The registry of live user threads of one runtime, for the deadlock
//! detector and for shutdown (which must find the stacks of threads that
//! will never run again).
//!
//! One shard per processor, each a slab of task pointers under a spin lock:
//! a thread is inserted into the shard of the processor that spawns it (no
//! contention) and removed, by slot, when it exits. Entries are plain
//! pointers: a task removes itself before its last switch, while it still
//! holds a reference to itself, so an entry never outlives its task.

use crate::spin::SpinLock;
use crate::task::{Task, TaskRef, ThreadId, WaitReason};
use crossbeam_utils::CachePadded;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

#[derive(Clone, Copy)]
struct Entry(NonNull<Task>);
// SAFETY: see the module docs: an entry is only dereferenced under the shard
// lock while its task is alive.
unsafe impl Send for Entry {}

#[derive(Default)]
struct Slab {
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
}

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

/// Live tasks of one runtime.
pub(crate) struct Registry {
    shards: Box<[CachePadded<SpinLock<Slab>>]>,
}

const SHARD_BITS: u32 = 6;

impl Registry {
    pub(crate) fn new(shards: usize) -> Registry {
        assert!(shards <= 1 << SHARD_BITS, "at most 64 processors");
        Registry {
            shards: (0..shards.max(1))
                .map(|_| CachePadded::new(SpinLock::new(Slab::default())))
                .collect(),
        }
    }

    /// Adds `task` to shard `shard` and records the slot in the task.
    pub(crate) fn insert(&self, shard: usize, task: &TaskRef) {
        let shard = shard % self.shards.len();
        let entry = Entry(NonNull::from(&**task));
        let mut s = self.shards[shard].lock();
        let key = match s.free.pop() {
            Some(k) => {
                s.entries[k as usize] = Some(entry);
                k
            }
            None => {
                s.entries.push(Some(entry));
                (s.entries.len() - 1) as u32
            }
        };
        drop(s);
        task.registry_slot.store((key << SHARD_BITS) | shard as u32, Ordering::Relaxed);
    }

    /// Removes `task` (which must be inserted).
    pub(crate) fn remove(&self, task: &Task) {
        let slot = task.registry_slot.load(Ordering::Relaxed);
        let shard = (slot & ((1 << SHARD_BITS) - 1)) as usize;
        let key = slot >> SHARD_BITS;
        let mut s = self.shards[shard].lock();
        s.entries[key as usize] = None;
        s.free.push(key);
    }

    /// If every registered task is parked (and there is at least one),
    /// returns them. Meaningful only when no processor runs a task.
    pub(crate) fn all_parked(&self) -> Option<Vec<ParkedThread>> {
        let guards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        let mut out = Vec::new();
        for g in &guards {
            for e in g.entries.iter().flatten() {
                // SAFETY: entries are alive while registered (module docs),
                // and we hold the shard lock.
                let task = unsafe { e.0.as_ref() };
                if !task.park.is_parked() {
                    return None;
                }
                out.push(ParkedThread {
                    id: task.id,
                    name: task.name().map(str::to_owned),
                    waiting_on: task.wait_reason(),
                });
            }
        }
        if out.is_empty() {
            None
        } else {
            out.sort_by_key(|p| p.id);
            Some(out)
        }
    }

    /// Empties the registry, calling `f` on every task still registered.
    ///
    /// # Safety
    ///
    /// No processor may run, and `f` must not drop the last reference to a
    /// task other than through the reference it is handed... in practice: it
    /// is called at shutdown, after all processors stopped.
    pub(crate) unsafe fn drain(&self, mut f: impl FnMut(&Task)) {
        for shard in self.shards.iter() {
            let slab = std::mem::take(&mut *shard.lock());
            for e in slab.entries.into_iter().flatten() {
                // SAFETY: registered tasks are alive (module docs); the caller
                // guarantees nothing runs that could make them exit.
                f(unsafe { e.0.as_ref() });
            }
        }
    }
}
