//! Idle-stack reclaim: the stack memory of a user thread that has waited on
//! I/O for a while goes back to the kernel (issue 29: 10,000 idle
//! connections held by user threads should cost no more than Go's
//! goroutines).
//!
//! A thread parked in a readiness wait (`poll.rs`, `Poller::wait`) keeps
//! every stack page it ever touched: the top page with its live frames, and
//! any deeper page an earlier call reached. Go shrinks a goroutine's stack at
//! garbage collection by copying its live frames into a smaller one and
//! fixing every pointer into it (`runtime/stack.go`, `shrinkstack` and
//! `copystack`), which it can do because it knows where every pointer is. We
//! cannot move a stack (Rust code holds raw addresses into it), so we keep
//! its addresses and give back its memory, in one of two modes:
//!
//! - **Dead pages** (the default): the pages wholly below the page holding
//!   the saved stack pointer are given back (`MADV_DONTNEED`). Nothing lives
//!   there (the thread is suspended in `arch::switch`, whose frame is the
//!   lowest; signal handlers run on the stack of whichever thread is
//!   current, not on a suspended one), so this is sound whatever the program
//!   does, but it frees only what deeper calls touched before the wait.
//! - **Live part too** ([`RuntimeBuilder::idle_stack_reclaim_live`], unsafe):
//!   the live part, from the saved stack pointer to the top (a few hundred
//!   bytes for a thread in a `read`), is copied into a heap buffer and every
//!   page is given back; the bytes go back to the same addresses before the
//!   thread runs again, so pointers into the stack stay valid *for the thread
//!   itself*. What it cannot keep valid is another thread reading or writing
//!   the parked thread's stack meanwhile, which safe Rust allows: a local
//!   borrowed by a scoped thread (`std::thread::scope`, `schedlab_rt::scope`)
//!   while its owner blocks in a `read` would read as zeros, and its writes
//!   would be lost at the restore. Go has no such case (escape analysis puts
//!   any variable another goroutine can reach on the heap), so there the
//!   copy is always sound; here only the program can promise it, hence an
//!   `unsafe` opt-in rather than the default.
//!
//! # Who reclaims, and when
//!
//! The monitor (`monitor.rs`), once per period (the threshold,
//! [`DEFAULT_IDLE_RECLAIM`]): a thread that begins a readiness wait lists
//! itself once (a flag on the task: no lock on later waits), and the
//! monitor's list keeps a counter of each thread's waits as it last saw it.
//! A thread seen inside the same wait at two looks a period apart, and
//! parked, has waited at least a period: its stack is reclaimed and it
//! leaves the list (it lists itself again at its next wait). The monitor
//! looks only while the list is not empty, so a server whose connections
//! all went idle lets it sleep again.
//!
//! Why 1 s by default: each reclaim costs the monitor a compare-and-swap
//! pair and a `mincore` (and a `madvise` when there is something to give),
//! on the CPU of the processors it preempts, and a thread reclaimed in the
//! live mode pays a page fault and a copy at its next resume. With the
//! threshold at 10 ms (the first choice: Go's sysmon and our monitor's
//! network poll run at that period), an echo server of 2,000 busy
//! connections on one CPU, each waiting ~60 ms between its bytes, had every
//! connection reclaimed at every wait, for nothing (an echo thread has no
//! dead page): a median of 0.58× the round trips of the build before, on a
//! machine so loaded that the same comparison at 1 s swung 0.46–1.44×
//! (docs/PERFORMANCE.md) — not proof, but a cost with no return. A connection idle for
//! a second is idle in any server's terms, and no busy one waits that long
//! between requests, so the cost is paid only by threads whose memory is
//! worth taking; a program that wants the memory sooner sets the
//! threshold (the echo probe's `io=net-live` uses 10 ms).
//!
//! # The race with a wake-up
//!
//! The reclaimer takes the parked thread over through its park word
//! (`park.rs`, `ParkState::take_parked`): the word's `PARKED_USER` bit is
//! cleared by compare-and-swap, so the reclaimer now holds the thread as the
//! next context holds it between a park's steps 2 and 3. A waker that comes
//! meanwhile finds no `PARKED` bit and leaves a token; the reclaimer ends
//! with `ParkState::commit`, which parks the thread again or, finding that
//! token, makes the reclaimer schedule it. So the waker and the reclaimer
//! never both own the thread, and exactly one of them schedules it (a loom
//! model in `park.rs`, `loom_reclaim_races_unpark`; a stress test with
//! random wakes, `tests/idle_stacks.rs`). The stores below (the saved
//! buffer, the context) are published by `commit`'s release to the
//! processor that later runs the thread.
//!
//! # Resuming a reclaimed thread
//!
//! A live-mode reclaim sets the thread's saved context to null, which the
//! switch path already tests (a thread that has not started has none:
//! `Processor::context_of`). Its cold branch (`first_context`) asks
//! [`restore`] first, which copies the bytes back and returns the saved
//! stack pointer. So the hot path gains no instruction. Threads on lent
//! stacks (`Builder::stack_memory`: the memory is the caller's) are never
//! reclaimed; guard pages survive `MADV_DONTNEED`; `stack_usage` reports
//! the most the stack held at a reclaim when that is more than it holds now.

use crate::arch::StackPointer;
use crate::park::Kind;
use crate::task::{Task, TaskRef};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a user thread waits on I/O before its stack's memory is given
/// back, by default ([`RuntimeBuilder::idle_stack_reclaim`](crate::RuntimeBuilder::idle_stack_reclaim)).
/// The module docs of `reclaim.rs` say why 1 s.
pub const DEFAULT_IDLE_RECLAIM: Duration = Duration::from_secs(1);

/// The shortest threshold taken: below it the monitor would wake more often
/// than its other work needs.
pub(crate) const MIN_IDLE_RECLAIM: Duration = Duration::from_millis(1);

/// The largest live part copied out (bytes). A thread parked deeper than this
/// keeps its live part in place (its dead pages still go): copying tens of
/// KiB per wake-up would cost more than the memory is worth.
const MAX_LIVE: usize = 16 * 1024;

/// The reclaim state of one user thread (a field of `Task`).
#[derive(Default)]
pub(crate) struct IdleStack {
    /// The live part of the stack while it is reclaimed (live mode): the
    /// bytes from the saved stack pointer to the top. Owned by whoever owns
    /// the thread's saved context (the park word's protocol, module docs).
    saved: UnsafeCell<Option<Box<[u8]>>>,
    /// Readiness waits begun and ended: odd while the thread is inside one.
    /// Written by the thread only.
    waits: AtomicU32,
    /// The thread is in the reclaimer's list (or on its way there). Set by
    /// the thread; cleared by the reclaimer while it owns the parked thread.
    listed: AtomicBool,
    /// The most stack bytes found resident at a reclaim, for `stack_usage`.
    peak: AtomicU32,
}

// SAFETY: `saved` is owned by one party at a time (the module docs); the
// rest are atomics.
unsafe impl Sync for IdleStack {}

impl IdleStack {
    /// The most stack bytes resident at a reclaim of this thread.
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed) as usize
    }
}

/// The runtime's side: the setting and the list threads add themselves to.
pub(crate) struct Reclaim {
    /// The threshold, `None` when reclaim is off.
    after: Option<Duration>,
    /// Copy the live part out too (module docs).
    live: bool,
    /// Threads that listed themselves since the monitor's last look.
    inbox: Mutex<Vec<TaskRef>>,
}

impl Reclaim {
    pub(crate) fn new(after: Option<Duration>, live: bool) -> Reclaim {
        Reclaim { after, live, inbox: Mutex::new(Vec::new()) }
    }

    /// Drops the listed threads' references (the runtime's drop, after
    /// every kernel thread stopped).
    pub(crate) fn clear(&self) {
        let v = std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner()));
        drop(v);
    }
}

/// Marks the calling thread `task` inside a readiness wait until dropped.
pub(crate) struct Waiting<'a>(&'a Task);

impl<'a> Waiting<'a> {
    /// The thread `task` (the caller) begins a readiness wait: counted, and
    /// listed for the reclaimer if it is not.
    #[inline]
    pub(crate) fn enter(task: &'a TaskRef) -> Waiting<'a> {
        let s = &task.idle;
        s.waits.store(s.waits.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        if !s.listed.load(Ordering::Relaxed) && task.shared.reclaim.after.is_some() {
            enlist(task);
        }
        Waiting(task)
    }
}

impl Drop for Waiting<'_> {
    #[inline]
    fn drop(&mut self) {
        let s = &self.0.idle;
        s.waits.store(s.waits.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }
}

#[cold]
#[inline(never)]
fn enlist(task: &TaskRef) {
    task.idle.listed.store(true, Ordering::Relaxed);
    let r = &task.shared.reclaim;
    let first = {
        // In a runtime section: preempted holding the lock, this thread
        // would leave it to the next thread of its kernel thread (and to the
        // monitor), as `poll.rs` says of its slot locks.
        let _section = crate::hooks::here();
        let mut inbox = r.inbox.lock().unwrap_or_else(|e| e.into_inner());
        inbox.push(task.clone());
        inbox.len() == 1
    };
    if first {
        // A quiet monitor may sleep with no deadline: it must start looking.
        task.shared.monitor.poke();
    }
}

/// The monitor's list of threads to look at.
pub(crate) struct Reclaimer {
    /// Each listed thread with its wait counter as last seen.
    list: Vec<(TaskRef, u32)>,
    /// When the monitor last looked.
    last: Instant,
}

impl Reclaimer {
    pub(crate) fn new(now: Instant) -> Reclaimer {
        Reclaimer { list: Vec::new(), last: now }
    }

    /// The monitor's turn: looks if a period has passed since the last look;
    /// returns when to look next, `None` while nothing is listed (a listing
    /// thread pokes the monitor).
    pub(crate) fn tick(&mut self, r: &Reclaim, now: Instant) -> Option<Instant> {
        let period = r.after?;
        if now.saturating_duration_since(self.last) >= period {
            self.last = now;
            self.look(r);
        }
        let pending =
            !self.list.is_empty() || !r.inbox.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
        pending.then_some(self.last + period)
    }

    fn look(&mut self, r: &Reclaim) {
        let new = std::mem::take(&mut *r.inbox.lock().unwrap_or_else(|e| e.into_inner()));
        // A thread just listed has not been seen in a wait yet: its counter
        // as of now is the first sight.
        self.list.extend(new.into_iter().map(|t| {
            let w = t.idle.waits.load(Ordering::Relaxed);
            (t, w)
        }));
        self.list.retain_mut(|(t, seen)| {
            if t.state.is_complete() {
                return false;
            }
            let w = t.idle.waits.load(Ordering::Relaxed);
            if w & 1 == 1 && w == *seen && t.park.is_parked() && reclaim(t, w, r.live) {
                return false;
            }
            *seen = w;
            true
        });
    }
}

/// Reclaims the stack of `t`, seen inside its readiness wait number `w` a
/// period ago and now, if it is still parked there. Returns whether it did
/// (then `t` left the list: its `listed` flag is cleared).
fn reclaim(t: &TaskRef, w: u32, live: bool) -> bool {
    if !t.park.take_parked(Kind::User) {
        return false;
    }
    // We own the thread now (module docs): its context, stack cell and
    // reclaim state are ours until `commit` below. The acquire of
    // `take_parked` read the park's commit, so `waits` is the thread's own.
    let done = t.idle.waits.load(Ordering::Relaxed) == w && {
        // SAFETY: the thread is parked and ours (above).
        unsafe { give_back(t, live) }
    };
    if done {
        t.idle.listed.store(false, Ordering::Relaxed);
    }
    if !t.park.commit(Kind::User) {
        // Woken meanwhile: its token was left for us, so we schedule it.
        // SAFETY: the park word's reference, which `take_parked` gave us and
        // `commit` did not take back.
        crate::hooks::make_runnable(unsafe { TaskRef::from_raw(t.as_ptr()) });
    }
    done
}

/// Gives back the memory of the parked thread `t`'s stack: the dead pages,
/// and in the live mode the live part too (copied out). Whether it did.
///
/// # Safety
///
/// `t` must be parked, its context saved, and owned by the caller (taken
/// over from its park word).
unsafe fn give_back(t: &Task, live: bool) -> bool {
    // SAFETY: owned by the caller (contract).
    let (sp, stack, saved) =
        unsafe { (*t.ctx.get(), (*t.stack.get()).as_ref(), &mut *t.idle.saved.get()) };
    let Some(stack) = stack else { return false };
    if !stack.reusable() || sp.is_null() || saved.is_some() {
        // Lent memory (the caller's), or a thread not started or already
        // reclaimed.
        return false;
    }
    let top = stack.top() as usize;
    let low = top - stack.size();
    let sp = sp as usize;
    if !(low..top).contains(&sp) {
        return false;
    }
    let page = crate::stack::page_size();
    let len = top - sp;
    let live_too = live && len <= MAX_LIVE;
    // The pages to give back: below the page of the stack pointer (dead),
    // or all of them when the live part is copied out.
    let end = if live_too { top } else { sp & !(page - 1) };
    // Most idle threads never went deeper than their live frames: one
    // `mincore` finds that, and spares the `madvise`.
    let dead = resident_bytes(low, end, page);
    if dead == 0 && !live_too {
        return true;
    }
    // What the stack held, for `stack_usage`: the dead pages resident and
    // the pages of the live part.
    let held = dead + if live_too { 0 } else { top - end };
    let held = u32::try_from(held).unwrap_or(u32::MAX);
    if held > t.idle.peak.load(Ordering::Relaxed) {
        t.idle.peak.store(held, Ordering::Relaxed);
    }
    if live_too {
        // SAFETY: `sp..top` is the thread's own stack, mapped and not
        // running (contract).
        let bytes = unsafe { std::slice::from_raw_parts(sp as *const u8, len) };
        *saved = Some(bytes.into());
        // SAFETY: owned (contract). A null context sends the next resume
        // through `restore`.
        unsafe { *t.ctx.get() = std::ptr::null_mut() };
    }
    if end > low {
        // SAFETY: `low..end` is in the thread's own mapping, page aligned;
        // nothing lives below its stack pointer, and what lives above it
        // was copied out (when `end` is `top`) and is restored before it runs.
        let rc = unsafe { libc::madvise(low as *mut libc::c_void, end - low, libc::MADV_DONTNEED) };
        debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) of an idle stack failed");
    }
    true
}

/// Bytes of `low..end` (page aligned) whose pages are resident, with no
/// allocation (a few `mincore` calls of 64 pages each).
fn resident_bytes(low: usize, end: usize, page: usize) -> usize {
    let mut v = [0u8; 64];
    let mut at = low;
    let mut n = 0;
    while at < end {
        let len = (end - at).min(v.len() * page);
        // SAFETY: `at..at + len` is in a mapping of ours, page aligned; `v`
        // has a byte for each of its pages.
        if unsafe { libc::mincore(at as *mut libc::c_void, len, v.as_mut_ptr()) } != 0 {
            // Unknown: count it all, so the caller gives it back.
            return end - low;
        }
        n += v[..len / page].iter().filter(|&&b| b & 1 == 1).count();
        at += len;
    }
    n * page
}

/// Puts back the live part of a reclaimed thread's stack and returns its
/// saved stack pointer; `None` if it was not reclaimed. Called by the
/// processor about to run `t`, on the cold branch of a null context.
///
/// # Safety
///
/// `t` came out of a run queue: its context, stack and reclaim state are
/// the caller's.
#[inline]
pub(crate) unsafe fn restore(t: &Task) -> Option<StackPointer> {
    // SAFETY: the caller's (contract).
    let saved = unsafe { (*t.idle.saved.get()).take() }?;
    // SAFETY: as above.
    let stack = unsafe { (*t.stack.get()).as_ref() }.expect("a reclaimed thread keeps its stack");
    let sp = stack.top() as usize - saved.len();
    // SAFETY: `sp..top` is the thread's own stack, where these bytes were
    // copied from; nothing runs on it.
    unsafe { std::ptr::copy_nonoverlapping(saved.as_ptr(), sp as *mut u8, saved.len()) };
    Some(sp as StackPointer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_with_a_few_captured_words_still_fits_a_recycled_block() {
        // The state costs 32 bytes of the task header; a spawn whose closure
        // captures a few words must still get a processor's recycled block
        // (`task.rs`, `BLOCK`), not a call to the allocator.
        let header = std::mem::size_of::<Task>();
        assert_eq!(std::mem::size_of::<IdleStack>(), 32);
        assert!(header + 64 <= crate::task::BLOCK.size(), "task header {header} bytes");
    }
}
