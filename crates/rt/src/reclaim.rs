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
//! - **Live part too** ([`RuntimeBuilder::idle_stack_reclaim_live`], on by
//!   default): the pages from the one holding the saved stack pointer to the
//!   top (the live frames: a few hundred bytes for a thread in a `read`) go
//!   too, their live bytes kept in a heap buffer and the pages registered
//!   with userfaultfd, so that they come back with their contents on *any*
//!   access ("The live part", below). Go moves a goroutine's stack freely
//!   because escape analysis puts whatever another goroutine can reach on
//!   the heap; in Rust another thread may use a parked thread's stack (a
//!   local borrowed by a scoped thread while its owner blocks in a `read`,
//!   or the kernel writing into it for that scoped thread's `read(2)`), so
//!   an unsound copy-and-restore would show it zeros and undo its writes.
//!   Where userfaultfd is refused, the live pages stay (dead pages only).
//!
//! # The live part
//!
//! Linux's userfaultfd (man 2 `userfaultfd`, `ioctl_userfaultfd`; `uffd.rs`)
//! lets a process fill its own missing pages: an access to a missing page of
//! a range registered in `MISSING` mode waits until someone fills it with
//! `UFFDIO_COPY`, and filling a page that is there already fails (`EEXIST`),
//! so of two fills the first wins. CRIU's lazy restore and QEMU's postcopy
//! migration serve a whole address space that way; we serve a few pages per
//! idle thread. The protocol, for a thread `t` whose live part is `lo..top`:
//!
//! 1. **Out** (the monitor, owning the parked `t`): take the map's lock;
//!    register `lo..top`; move each page out with `UFFDIO_MOVE` (Linux 6.8)
//!    into a registered scratch page, keep its live bytes, and empty the
//!    scratch page; publish the part in the map (keyed by `lo`, which `t`
//!    keeps); unlock. The move is atomic: another thread's write before it is
//!    in the page moved, one after it faults — and that fault waits for the
//!    map's lock, so it never sees a part half made. A copy followed by
//!    `MADV_DONTNEED` would lose a write landing between the two.
//! 2. **Another thread's access** (any thread, or the kernel: the descriptor
//!    is opened without `UFFD_USER_MODE_ONLY`, so `copy_to_user` waits as a
//!    user access does): the runtime's helper kernel thread, blocked in
//!    `poll` on the descriptor, reads the fault; under the map's lock it
//!    looks the page up in the part there *now* and fills it from that part
//!    (`UFFDIO_COPY`). Under the lock, because an event read before `t`
//!    resumed may be served after `t` was reclaimed again: the current part
//!    is the truth, an old one would undo writes. A page in no part gets a
//!    zero page (`EEXIST` or nothing: the page is back). The page is then
//!    the truth; later writes by anyone stay.
//! 3. **Back** (the processor about to run `t`, on the cold branch of its
//!    null context, before switching to it — so `t` itself never faults on
//!    its own frames and no processor waits for itself): fill every page
//!    of the part (`EEXIST` where the helper did), drop the part from the
//!    map, unregister `lo..top`, free the buffer.
//!
//! Costs and limits: the helper is one kernel thread per runtime, started at
//! the first live reclaim; the pages of a registered range are a VMA of
//! their own, which splits the stacks' reservation (up to two more VMAs per
//! idle thread, merged back at the restore), counted against
//! `vm.max_map_count` (65530 by default): past it the registration fails
//! with `ENOMEM` and the thread keeps its live pages. Refused userfaultfd
//! (`EPERM` without `CAP_SYS_PTRACE` while `vm.unprivileged_userfaultfd` is
//! 0 and `/dev/userfaultfd` is root's; a seccomp filter; a kernel before
//! 6.8) keeps the live pages. Either is said once on standard error when the
//! program asked for the live mode (`idle_stack_reclaim_live(true)`); the
//! default falls back silently, as a library should not write to a
//! program's standard error on its own (a C program under `schedlab exec`). A page shared with a child after `fork` cannot be moved
//! (`EBUSY`) and stays. The runtime's drop puts the pages of threads that
//! never ran again back and frees their buffers before it stops the
//! helper. Each idle period costs the monitor a registration, a move per
//! page and a lock, and the resume a fill per page, a lock and an
//! unregistration: a few system calls, paid only by threads idle for the
//! threshold.
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
//! live mode pays a fill per page and an unregistration at its next resume. With the
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
//! [`restore`] first, which puts the pages back (step 3 above) and returns
//! the saved stack pointer. So the hot path gains no instruction. Threads on
//! lent stacks (`Builder::stack_memory`: the memory is the caller's) are
//! never reclaimed; guard pages survive `MADV_DONTNEED`; `stack_usage`
//! reports the most the stack held at a reclaim when that is more than it
//! holds now.

use crate::arch::StackPointer;
use crate::park::Kind;
use crate::task::{Task, TaskRef};
use crate::uffd::{Miss, PageBuf, Uffd};
use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a user thread waits on I/O before its stack's memory is given
/// back, by default ([`RuntimeBuilder::idle_stack_reclaim`](crate::RuntimeBuilder::idle_stack_reclaim)).
/// The module docs of `reclaim.rs` say why 1 s.
pub const DEFAULT_IDLE_RECLAIM: Duration = Duration::from_secs(1);

/// The shortest threshold taken: below it the monitor would wake more often
/// than its other work needs.
pub(crate) const MIN_IDLE_RECLAIM: Duration = Duration::from_millis(1);

/// The largest live part moved out (bytes). A thread parked deeper than this
/// keeps its live part in place (its dead pages still go): a move and a
/// fill per page of several at each wake-up would cost more than the memory
/// is worth.
const MAX_LIVE: usize = 16 * 1024;

/// The reclaim state of one user thread (a field of `Task`).
#[derive(Default)]
pub(crate) struct IdleStack {
    /// While the live part of the stack is away (live mode): the address of
    /// its first page, the key of its bytes in the resolver's map (which
    /// owns them, so that a runtime dropped with reclaimed threads frees
    /// them); 0 otherwise. Owned by whoever owns the thread's saved context
    /// (the park word's protocol, module docs).
    saved: UnsafeCell<usize>,
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
    /// Give the live part back too (module docs, "The live part").
    live: bool,
    /// The program asked for the live mode: a fallback is said (once).
    live_asked: bool,
    /// Threads that listed themselves since the monitor's last look.
    inbox: Mutex<Vec<TaskRef>>,
    /// The userfaultfd side of the live mode, set up by the monitor at the
    /// first live reclaim: `None` inside when it was refused.
    resolver: OnceLock<Option<Arc<Resolver>>>,
    /// The resolver's kernel thread, joined at the runtime's drop.
    helper: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Reclaim {
    /// `live`: `None` for the default (on, falling back silently).
    pub(crate) fn new(after: Option<Duration>, live: Option<bool>) -> Reclaim {
        Reclaim {
            after,
            live: live.unwrap_or(true),
            live_asked: live == Some(true),
            inbox: Mutex::new(Vec::new()),
            resolver: OnceLock::new(),
            helper: Mutex::new(None),
        }
    }

    /// Drops the listed threads' references and stops the resolver's
    /// kernel thread (the runtime's drop, after every kernel thread
    /// stopped: no user thread touches a stack any more).
    pub(crate) fn clear(&self) {
        let v = std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner()));
        drop(v);
        if let Some(Some(r)) = self.resolver.get() {
            // The reclaimed threads that never run again: their stacks are
            // made whole and their buffers freed, then the helper stops.
            r.put_all_back();
            r.stop();
            if let Some(h) = self.helper.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = h.join();
            }
        }
    }

    /// The resolver, set up at the first call (by the monitor); `None` when
    /// userfaultfd is refused here (said once per process).
    fn resolver(&self) -> Option<&Arc<Resolver>> {
        self.resolver
            .get_or_init(|| match Resolver::start() {
                Ok((r, helper)) => {
                    *self.helper.lock().unwrap_or_else(|e| e.into_inner()) = Some(helper);
                    Some(r)
                }
                Err(e) => {
                    if self.live_asked {
                        say_once(&format!(
                            "userfaultfd is unavailable ({e}); idle threads keep their live stack page"
                        ));
                    }
                    None
                }
            })
            .as_ref()
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
            if w & 1 == 1 && w == *seen && t.park.is_parked() && reclaim(t, w, r) {
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
fn reclaim(t: &TaskRef, w: u32, r: &Reclaim) -> bool {
    if !t.park.take_parked(Kind::User) {
        return false;
    }
    // We own the thread now (module docs): its context, stack cell and
    // reclaim state are ours until `commit` below. The acquire of
    // `take_parked` read the park's commit, so `waits` is the thread's own.
    let done = t.idle.waits.load(Ordering::Relaxed) == w && {
        // SAFETY: the thread is parked and ours (above).
        unsafe { give_back(t, r) }
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
/// and in the live mode the live part too (moved out). Whether it did.
///
/// # Safety
///
/// `t` must be parked, its context saved, and owned by the caller (taken
/// over from its park word).
unsafe fn give_back(t: &Task, r: &Reclaim) -> bool {
    // SAFETY: owned by the caller (contract).
    let (sp, stack, saved) =
        unsafe { (*t.ctx.get(), (*t.stack.get()).as_ref(), &mut *t.idle.saved.get()) };
    let Some(stack) = stack else { return false };
    if !stack.reusable() || sp.is_null() || *saved != 0 {
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
    // The first page of the live part: everything below it is dead.
    let live_lo = sp & !(page - 1);
    // Most idle threads never went deeper than their live frames: one
    // `mincore` finds that, and spares the `madvise`.
    let dead = resident_bytes(low, live_lo, page);
    // The live part, moved out when the mode and the kernel allow.
    let moved = if r.live && top - sp <= MAX_LIVE {
        r.resolver().and_then(|res| res.take_out(live_lo, top, sp, r.live_asked))
    } else {
        None
    };
    if dead == 0 && moved.is_none() {
        return true;
    }
    // What the stack held, for `stack_usage`: the dead pages resident and
    // the pages of the live part.
    let held = u32::try_from(dead + (top - live_lo)).unwrap_or(u32::MAX);
    if held > t.idle.peak.load(Ordering::Relaxed) {
        t.idle.peak.store(held, Ordering::Relaxed);
    }
    if let Some(lo) = moved {
        *saved = lo;
        // SAFETY: owned (contract). A null context sends the next resume
        // through `restore`.
        unsafe { *t.ctx.get() = std::ptr::null_mut() };
    }
    if dead > 0 {
        // SAFETY: `low..live_lo` is in the thread's own mapping, page
        // aligned; nothing lives below its stack pointer's page.
        let rc =
            unsafe { libc::madvise(low as *mut libc::c_void, live_lo - low, libc::MADV_DONTNEED) };
        debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) of an idle stack failed");
    }
    true
}

/// Says `what` on standard error, once per process: the live mode falling
/// back is worth knowing, not worth a line per thread.
fn say_once(what: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("schedlab-rt: {what}");
    }
}

/// Live parts of stacks held in heap buffers now, in the whole process
/// (tests count them: a reclaimed thread that exits, or whose runtime is
/// dropped, must not leak its buffer).
static SAVED_BUFFERS: AtomicUsize = AtomicUsize::new(0);

/// How many live parts of idle stacks are held in heap buffers now, in
/// every runtime of the process. For tests.
#[doc(hidden)]
pub fn reclaimed_stack_buffers() -> usize {
    SAVED_BUFFERS.load(Ordering::Relaxed)
}

/// The live part of a reclaimed stack, while its pages are away: the bytes
/// from the saved stack pointer to the top. Immutable once made; whoever
/// fills a page from it (the resolver for another thread's fault, or the
/// owner's processor before it runs the thread) fills the same bytes, and
/// the first fill wins (`UFFDIO_COPY` on a present page is `EEXIST`).
pub(crate) struct Saved {
    /// The first page of the live part (page aligned).
    lo: usize,
    /// The stack's top (page aligned).
    top: usize,
    /// The saved stack pointer; `bytes` starts there.
    sp: usize,
    bytes: Box<[u8]>,
}

impl Saved {
    fn new(lo: usize, top: usize, sp: usize) -> Saved {
        SAVED_BUFFERS.fetch_add(1, Ordering::Relaxed);
        Saved { lo, top, sp, bytes: vec![0; top - sp].into_boxed_slice() }
    }

    /// The bytes of the page at `at` (page aligned, in `lo..top`) into
    /// `out`: zeros below the stack pointer (dead), the saved bytes above.
    fn fill(&self, at: usize, out: &mut [u8]) {
        let from = at.max(self.sp);
        let to = (at + out.len()).min(self.top);
        out[..from - at].fill(0);
        out[from - at..to - at].copy_from_slice(&self.bytes[from - self.sp..to - self.sp]);
    }

    /// Keeps the bytes of `src`, a copy of the page that was at `at`.
    fn keep(&mut self, at: usize, src: &[u8]) {
        let from = at.max(self.sp);
        let to = (at + src.len()).min(self.top);
        self.bytes[from - self.sp..to - self.sp].copy_from_slice(&src[from - at..to - at]);
    }
}

impl Drop for Saved {
    fn drop(&mut self) {
        SAVED_BUFFERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The userfaultfd side of the live mode: the descriptor, the live parts by
/// their first page, the monitor's scratch page, and the stop signal of the
/// helper kernel thread that serves other threads' faults.
struct Resolver {
    uffd: Uffd,
    page: usize,
    /// Reclaimed live parts by their first page. Taken by the monitor while
    /// it moves pages out and publishes a part, by the helper while it
    /// looks a fault up and fills the page, by an owner's processor while
    /// it drops a part (module docs, "The live part").
    parts: Mutex<BTreeMap<usize, Arc<Saved>>>,
    /// One registered page, missing between uses, that `UFFDIO_MOVE` moves
    /// a stack page into (the call's destination must be registered); used
    /// under `parts`'s lock.
    scratch: usize,
    /// An eventfd: readable once the runtime drops.
    stop: OwnedFd,
}

impl Resolver {
    /// Opens the descriptor, maps and registers the scratch page, and
    /// starts the helper kernel thread.
    fn start() -> std::io::Result<(Arc<Resolver>, std::thread::JoinHandle<()>)> {
        let uffd = Uffd::open()?;
        let page = crate::stack::page_size();
        // SAFETY: a fresh anonymous private page; no pointer of ours is in it.
        let scratch = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if scratch == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let scratch = scratch as usize;
        // SAFETY: no flags but close-on-exec.
        let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if stop < 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: mapped just above, unused.
            unsafe { libc::munmap(scratch as *mut libc::c_void, page) };
            return Err(e);
        }
        let r = Arc::new(Resolver {
            uffd,
            page,
            parts: Mutex::new(BTreeMap::new()),
            scratch,
            // SAFETY: just created, owned by nobody else.
            stop: unsafe { OwnedFd::from_raw_fd(stop) },
        });
        r.uffd.register(scratch, page)?;
        register_fork_handlers();
        RESOLVERS.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(&r));
        let helper = {
            let r = r.clone();
            // One of the runtime's own kernel threads (in the
            // `shared-library` build, with its own per-kernel-thread block).
            crate::hooks::spawn_kernel_thread("schedlab-uffd".into(), move || r.serve())?
        };
        Ok((r, helper))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Arc<Saved>>> {
        self.parts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the live part `lo..top` of a parked thread's stack (saved
    /// stack pointer `sp`) out: registers it, moves each page out through
    /// the scratch page keeping its live bytes, and publishes the part.
    /// `None` when it could not (the pages stay, the thread is as before).
    /// `say`: a refused registration is said (once).
    fn take_out(&self, lo: usize, top: usize, sp: usize, say: bool) -> Option<usize> {
        let mut parts = self.lock();
        if FORKING.load(Ordering::Acquire) > 0 {
            // A `fork` took its list of parts: one made now would be
            // missing from the child ("A forked child").
            return None;
        }
        // Registered first: an access by another thread after a page moves
        // out must wait for the part, not find a fresh zero page. It waits
        // in the helper, which takes `parts`'s lock we hold until the part
        // is published.
        if let Err(e) = self.uffd.register(lo, top - lo) {
            if !say {
                return None;
            }
            say_once(&if e.raw_os_error() == Some(libc::ENOMEM) {
                format!(
                    "registering an idle stack with userfaultfd passed vm.max_map_count ({e}); \
                     such threads keep their live stack page"
                )
            } else {
                format!("userfaultfd refused an idle stack ({e}); such threads keep their live stack page")
            });
            return None;
        }
        let mut part = Saved::new(lo, top, sp);
        let mut moved = false;
        for at in (lo..top).step_by(self.page) {
            // SAFETY: `at` is a page of the parked thread's stack, which the
            // caller owns; `scratch` is ours, registered, and missing.
            match unsafe { self.uffd.move_page(self.scratch, at, self.page) } {
                Ok(()) => {
                    // SAFETY: the page just moved in; only we use it.
                    let src =
                        unsafe { std::slice::from_raw_parts(self.scratch as *const u8, self.page) };
                    part.keep(at, src);
                    // SAFETY: our scratch page; missing again for the next move.
                    unsafe {
                        libc::madvise(
                            self.scratch as *mut libc::c_void,
                            self.page,
                            libc::MADV_DONTNEED,
                        )
                    };
                    moved = true;
                }
                // Not resident: it reads as zeros, and so does the part.
                Err(Miss::NoSource(_)) => {}
                // Shared (after a `fork`) or pinned: the page stays, and
                // stays present, so nobody fills it from the part.
                Err(_) => {}
            }
        }
        if !moved {
            let _ = self.uffd.unregister(lo, top - lo);
            return None;
        }
        parts.insert(lo, Arc::new(part));
        Some(lo)
    }

    /// Puts the pages of the part at `lo` back (the owner's processor,
    /// before it runs the thread), then forgets the part and unregisters its
    /// pages; returns the thread's saved stack pointer.
    fn put_back(&self, lo: usize) -> usize {
        let part = self.lock().get(&lo).cloned().expect("a reclaimed thread's part is kept");
        if let Err(e) = self.fill_all(&part) {
            // The thread's frames cannot be put back: running it would run
            // on zeros.
            eprintln!("schedlab-rt: an idle stack's page could not be restored: {e}");
            std::process::abort();
        }
        self.lock().remove(&lo);
        // Every page is present: a fault queued for one of them meanwhile
        // finds it so (`EEXIST`), and its thread was woken by our fill.
        let _ = self.uffd.unregister(part.lo, part.top - part.lo);
        part.sp
    }

    /// Fills every page of `part` that is still missing.
    fn fill_all(&self, part: &Saved) -> std::io::Result<()> {
        let mut buf = PageBuf::new(self.page);
        for at in (part.lo..part.top).step_by(self.page) {
            part.fill(at, buf.as_mut());
            // SAFETY: `buf` is a readable page; `at` is in the registered part.
            match unsafe { self.uffd.copy(at, buf.as_ptr(), self.page) } {
                // Filled by us, or already there (the helper filled it for
                // another thread, or the page never moved): the page is the
                // truth from now on.
                Ok(()) | Err(Miss::Exists) => {}
                Err(Miss::Failed(e)) | Err(Miss::NoSource(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// Puts back the pages of every part left (the runtime's drop: their
    /// threads never run again, but a thread outside the runtime may still
    /// hold a pointer into one), unregisters them and frees the parts.
    fn put_all_back(&self) {
        let parts = std::mem::take(&mut *self.lock());
        for part in parts.into_values() {
            // A stack already unmapped (its task dropped) fails here,
            // harmlessly: only a registered range can be filled.
            let _ = self.fill_all(&part);
            let _ = self.uffd.unregister(part.lo, part.top - part.lo);
        }
    }

    /// The helper kernel thread: serves faults until the runtime drops.
    fn serve(&self) {
        let mut faults = Vec::new();
        let mut buf = PageBuf::new(self.page);
        loop {
            if self.uffd.wait(self.stop.as_raw_fd()) {
                return;
            }
            faults.clear();
            self.uffd.read_faults(&mut faults);
            for &addr in &faults {
                self.serve_one(addr & !(self.page - 1), &mut buf);
            }
        }
    }

    /// Fills the page `at` another thread faulted on from the part it is in
    /// now. Under `parts`'s lock, so the part is the current one: a fault
    /// event read before its owner resumed, served after the owner was
    /// reclaimed again, finds the new part (or the page present).
    fn serve_one(&self, at: usize, buf: &mut PageBuf) {
        let parts = self.lock();
        let part = parts.range(..=at).next_back().map(|(_, p)| p).filter(|p| at < p.top);
        let filled = match part {
            Some(p) => {
                p.fill(at, buf.as_mut());
                // SAFETY: `buf` is a readable page; `at` is in a registered part.
                unsafe { self.uffd.copy(at, buf.as_ptr(), self.page) }
            }
            // A page of no part: a stale event whose page is back (then
            // `EEXIST`, or not registered any more), or the scratch page.
            None => self.uffd.zero(at, self.page),
        };
        drop(parts);
        if filled.is_err() {
            // Whoever filled the page woke its waiters; one more wake-up
            // costs nothing and makes sure.
            self.uffd.wake(at, self.page);
        }
    }

    fn stop(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from our stack to our eventfd. The system
        // call: libc's `write` is the pthread library's in its process.
        unsafe { libc::syscall(libc::SYS_write, self.stop.as_raw_fd(), &one as *const u64, 8) };
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        // SAFETY: mapped in `start`; nobody uses it once the resolver goes.
        unsafe { libc::munmap(self.scratch as *mut libc::c_void, self.page) };
    }
}

/// Forks under way in the process (between their `pthread_atfork` prepare
/// and parent handlers): no part is taken out meanwhile.
static FORKING: AtomicUsize = AtomicUsize::new(0);

/// Every resolver of the process (a runtime's drop leaves its entry, whose
/// map is then empty): what a `fork` must put back in its child.
static RESOLVERS: Mutex<Vec<std::sync::Weak<Resolver>>> = Mutex::new(Vec::new());

/// What a `fork`'s prepare handler leaves its parent and child handlers, on
/// the forking thread: the parts it found, and the resolvers' list held
/// across the `fork` (so the child's copy of the lock is not left taken by a
/// runtime that was starting its resolver).
type AtFork =
    (Vec<Arc<Saved>>, Option<std::sync::MutexGuard<'static, Vec<std::sync::Weak<Resolver>>>>);

std::thread_local! {
    static AT_FORK: std::cell::RefCell<AtFork> = const { std::cell::RefCell::new((Vec::new(), None)) };
}

/// Registers the `fork` handlers once per process, at the first resolver.
fn register_fork_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: three `extern "C" fn()` of ours, valid for the process.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    });
}

/// A forked child does not inherit the userfaultfd registration: a page of
/// a reclaimed live part is missing in it, and reads as zeros there (a local
/// of an idle parent thread that the forking thread has a pointer to). So
/// `fork`'s prepare handler takes the list of parts (under each resolver's
/// lock, so none is half made; `FORKING` stops new ones until the parent's
/// handler), and the child's handler fills every page of them still missing
/// in the child, through a descriptor of the child's own (`UFFDIO_COPY`
/// fills only a missing page: a part whose owner resumed in between has its
/// pages present, and they stay as they are). The parent pays a lock and a
/// list per fork; the child a registration, one fill per page of each part
/// and an unregistration.
extern "C" fn fork_prepare() {
    FORKING.fetch_add(1, Ordering::AcqRel);
    let list = RESOLVERS.lock().unwrap_or_else(|e| e.into_inner());
    let mut all = Vec::new();
    for r in list.iter().filter_map(std::sync::Weak::upgrade) {
        all.extend(r.lock().values().cloned());
    }
    AT_FORK.with(|f| *f.borrow_mut() = (all, Some(list)));
}

extern "C" fn fork_parent() {
    drop(AT_FORK.with(|f| std::mem::take(&mut *f.borrow_mut())));
    FORKING.fetch_sub(1, Ordering::AcqRel);
}

extern "C" fn fork_child() {
    FORKING.store(0, Ordering::Release);
    let (parts, list) = AT_FORK.with(|f| std::mem::take(&mut *f.borrow_mut()));
    drop(list);
    if parts.is_empty() {
        return;
    }
    let page = crate::stack::page_size();
    let uffd = Uffd::open().ok();
    let mut buf = PageBuf::new(page);
    for part in &parts {
        let registered = uffd.as_ref().filter(|u| u.register(part.lo, part.top - part.lo).is_ok());
        for at in (part.lo..part.top).step_by(page) {
            part.fill(at, buf.as_mut());
            match registered {
                // SAFETY: `buf` is a readable page; `at` is in the range
                // just registered.
                Some(u) => drop(unsafe { u.copy(at, buf.as_ptr(), page) }),
                // No descriptor here: a page not resident is written whole
                // (one present is the truth, as with the fill's `EEXIST`).
                None => {
                    if resident_bytes(at, at + page, page) == 0 {
                        // SAFETY: a page of a stack mapping the child has.
                        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), at as *mut u8, page) };
                    }
                }
            }
        }
        if let Some(u) = registered {
            let _ = u.unregister(part.lo, part.top - part.lo);
        }
    }
    if let Some(u) = uffd {
        u.close();
    }
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
/// processor about to run `t`, on the cold branch of a null context (so
/// never by `t` itself: its own stack is back before it runs).
///
/// # Safety
///
/// `t` came out of a run queue: its context, stack and reclaim state are
/// the caller's.
#[inline]
pub(crate) unsafe fn restore(t: &Task) -> Option<StackPointer> {
    // SAFETY: the caller's (contract).
    let lo = unsafe { std::mem::take(&mut *t.idle.saved.get()) };
    if lo == 0 {
        return None;
    }
    let resolver = t.shared.reclaim.resolver.get().and_then(|r| r.as_ref());
    let sp = resolver.expect("a reclaimed part was made by the resolver").put_back(lo);
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
        assert!(std::mem::size_of::<IdleStack>() <= 32);
        assert!(header + 64 <= crate::task::BLOCK.size(), "task header {header} bytes");
    }
}
