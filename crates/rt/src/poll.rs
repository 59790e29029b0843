//! The poller: user threads wait for a descriptor's readiness at the cost of
//! a park, not a kernel thread (Go's netpoller, `runtime/netpoll_epoll.go`;
//! tokio's `ScheduledIo`).
//!
//! One per process (descriptors are the process's, and a C program's
//! `close` must reach every registration of a number), made on first use:
//! an epoll instance, an eventfd that interrupts a blocking `epoll_wait`,
//! and a table of slots indexed by descriptor number. A descriptor is
//! registered once, edge-triggered, for reading and writing, when a user
//! thread first waits on it; [`Poller::forget`] (the owner's `close`)
//! removes it. The readiness side ([`Poller::poll`]) runs on processors: a
//! non-blocking poll when one looks for work (`Processor::steal_round`),
//! every [`POLL_EVERY`] at a busy one's maintenance, by the monitor while
//! every processor runs and none has polled for [`MONITOR_POLL`] (a thread
//! that computes makes no decisions: Go's sysmon), and a blocking one by
//! at most one processor that goes to sleep while threads wait on I/O
//! (`Poller::sleep`): it sleeps in `epoll_wait` instead of on its futex,
//! and its parker's `unpark` writes the eventfd (`idle.rs`, `Parker`), so a
//! wake-up for work reaches it as it would reach a futex sleeper. That one
//! place is the process's, across runtimes: processors that sleep on their
//! futex meanwhile stand by, and a runtime's drop, whose processors
//! stopped for good, passes the place on to one of them (`pollplace.rs`,
//! [`pass_on`]), or nobody would poll for their readers.
//!
//! # The park/readiness protocol
//!
//! Each slot has two *edge counters*, one per direction, and a list of
//! waiters under a spin lock, with the slot's generation (bumped by
//! `forget`, and carried in each epoll event's data beside the descriptor).
//!
//! Waiting (user thread `T`, after an operation returned `EAGAIN`):
//! 1. Before the operation, `T` read the counter of its direction (`seen`).
//! 2. After `EAGAIN`, under the slot's lock: if the counter moved since
//!    `seen`, return (retry the operation); otherwise list `T` (a counted
//!    reference) and unlock.
//! 3. Park (`Kind::User`, with the runtime's timer for a deadline). On any
//!    return, under the lock: if `T` is no longer listed, or the counter
//!    moved, it is ready; if the deadline passed, delist and time out;
//!    otherwise (a stray user `unpark`) park again.
//!
//! Readiness (a processor, an epoll event `(fd, generation, events)`):
//! 1. Under the slot's lock, ignore the event if the generation is not the
//!    slot's (a closed descriptor's stale registration); else bump the
//!    counters of the directions the event reports (errors and hang-ups
//!    count for both) and take every waiter of those directions off the list.
//! 2. After unlocking, unpark each taken waiter (`Kind::User`), which
//!    schedules it if it parked or leaves its token if it has not yet.
//!
//! Why no wake-up is lost: the kernel reports an edge for every change after
//! the registration (and the registration reports the state at `ADD`), so
//! readiness that arrives after the operation's `EAGAIN` bumps the counter
//! after step 1's read. Either the bump's lock comes first, and step 2 sees
//! the counter moved, or step 2's does, and the event finds `T` listed. The
//! park word keeps an unpark that lands before the park (`park.rs`). Every
//! waiter of a direction is woken at an edge, and each retries its
//! operation, so two threads accepting on one listener cannot leave a
//! connection with a parked thread (a counter, not a consumed flag, is what
//! lets them all see the edge). `loom` checks the race below.
//!
//! Why a stale registration wakes nobody: `forget` bumps the generation and
//! wakes the slot's waiters under its lock (they retry, and see the closed
//! descriptor), so an event carrying the old generation is dropped, and a
//! new descriptor with the same number registers afresh.
//!
//! # Costs
//!
//! Nothing on a path that does no I/O: the poll in a processor's search and
//! maintenance is one load of [`Poller::waiting`] (the global poller not yet
//! made, or nobody waiting: no system call).

use crate::loom::{AtomicU32, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};

/// The read direction.
pub(crate) const READ: u8 = 1;
/// The write direction.
pub(crate) const WRITE: u8 = 2;

/// A slot's edge counters: the bump of an event (under the lock), the read
/// of a waiter (before its operation), and the comparison (under the lock).
#[derive(Debug, Default)]
pub(crate) struct Edges {
    seq: [AtomicU32; 2],
}

impl Edges {
    /// Step 1 of waiting: the counters now.
    #[inline]
    pub(crate) fn seen(&self) -> [u32; 2] {
        [self.seq[0].load(Ordering::Acquire), self.seq[1].load(Ordering::Acquire)]
    }

    /// Whether an edge of `interest` came since `seen`.
    #[inline]
    pub(crate) fn moved(&self, interest: u8, seen: [u32; 2]) -> bool {
        let now = self.seen();
        (interest & READ != 0 && now[0] != seen[0]) || (interest & WRITE != 0 && now[1] != seen[1])
    }

    /// Readiness step 1: an edge of `dirs`.
    #[inline]
    pub(crate) fn bump(&self, dirs: u8) {
        if dirs & READ != 0 {
            self.seq[0].fetch_add(1, Ordering::AcqRel);
        }
        if dirs & WRITE != 0 {
            self.seq[1].fetch_add(1, Ordering::AcqRel);
        }
    }
}

#[cfg(not(loom))]
pub(crate) use imp::*;

#[cfg(not(loom))]
mod imp {
    use super::*;
    use crate::spin::SpinLock;
    use crate::task::TaskRef;
    use std::io;
    use std::ptr::NonNull;
    use std::sync::atomic::AtomicI32;
    use std::time::{Duration, Instant};

    /// Descriptors per page of the slot table.
    const PAGE: usize = 256;
    /// Descriptors the table can hold; a higher number is waited on with a
    /// blocking `poll(2)` instead (a kernel-thread hand-off).
    pub(crate) const MAX_FD: usize = 1 << 20;
    /// The event data of the eventfd.
    const WAKE: u64 = u64::MAX;
    /// Events taken by one `epoll_wait`.
    const BATCH: usize = 128;
    /// How often a busy processor's maintenance polls while threads wait on
    /// I/O (Go's sysmon polls after 10 ms; a busy processor here looks
    /// sooner, since it is already at a decision).
    pub(crate) const POLL_EVERY: Duration = Duration::from_micros(200);
    /// How often the monitor polls while every processor is busy and
    /// threads wait on I/O (`monitor.rs`), if no processor did: Go's sysmon
    /// polls after 10 ms without a poll too. Only a processor that runs a
    /// thread computing without a decision for that long leaves it to the
    /// monitor; at 1 ms the monitor woke 1,000 times a second beside a busy
    /// echo server, each time preempting it on its CPU.
    pub(crate) const MONITOR_POLL: Duration = Duration::from_millis(10);

    /// A waiting thread, listed in a slot.
    struct Entry {
        task: TaskRef,
        interest: u8,
        /// The `closed` flag of the `net` object waited on, if any: at a
        /// runtime's drop the descriptor of a thread that will never run
        /// again is closed, and the flag tells the object (`net/mod.rs`).
        owner: Option<NonNull<AtomicBool>>,
    }

    // SAFETY: `owner` points into an object borrowed by the waiting thread
    // for as long as it is listed (it is only read then, atomically).
    unsafe impl Send for Entry {}

    #[derive(Default)]
    struct SlotState {
        generation: u32,
        registered: bool,
        waiters: Vec<Entry>,
    }

    struct Slot {
        edges: Edges,
        state: SpinLock<SlotState>,
    }

    struct Page {
        slots: Box<[Slot]>,
    }

    /// The process's poller. See the module docs.
    pub(crate) struct Poller {
        epfd: i32,
        evfd: i32,
        pages: Box<[AtomicPtr<Page>]>,
        /// Threads listed in some slot: zero means nothing to poll for.
        waiting: AtomicUsize,
        /// The one processor asleep in `epoll_wait`, and those standing by
        /// for that place (`pollplace.rs`).
        place: crate::pollplace::Place,
        /// When the last poll ran, in ns since `epoch` (maintenance's rate).
        last_poll: AtomicU64,
        epoch: Instant,
    }

    /// The process's poller, made on first use (leaked: it lives as long as
    /// the process, or, in the child of a `fork`, until [`after_fork_child`]
    /// puts it aside).
    static POLLER: AtomicPtr<Poller> = AtomicPtr::new(std::ptr::null_mut());
    /// The `errno` of a failed making (0: none), kept so that every later
    /// use is not another attempt.
    static POLLER_ERR: AtomicI32 = AtomicI32::new(0);

    /// The poller, made on first use.
    #[inline]
    pub(crate) fn poller() -> io::Result<&'static Poller> {
        match made() {
            Some(p) => Ok(p),
            None => make(),
        }
    }

    #[cold]
    fn make() -> io::Result<&'static Poller> {
        let e = POLLER_ERR.load(Ordering::Acquire);
        if e != 0 {
            return Err(io::Error::from_raw_os_error(e));
        }
        match Poller::new() {
            Ok(p) => {
                let fresh = Box::into_raw(Box::new(p));
                match POLLER.compare_exchange(
                    std::ptr::null_mut(),
                    fresh,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    // SAFETY: published, never freed.
                    Ok(_) => Ok(unsafe { &*fresh }),
                    Err(other) => {
                        // SAFETY: ours, never published.
                        let lost = unsafe { Box::from_raw(fresh) };
                        close_fd(lost.epfd);
                        close_fd(lost.evfd);
                        // SAFETY: published by the winner, never freed.
                        Ok(unsafe { &*other })
                    }
                }
            }
            Err(e) => {
                POLLER_ERR.store(e, Ordering::Release);
                Err(io::Error::from_raw_os_error(e))
            }
        }
    }

    /// The poller if it was made and a thread waits on it (processors' paths).
    #[inline]
    pub(crate) fn active() -> Option<&'static Poller> {
        made().filter(|p| p.waiting.load(Ordering::Relaxed) != 0)
    }

    /// The poller if it was made.
    #[inline]
    fn made() -> Option<&'static Poller> {
        // SAFETY: a published poller is never freed.
        unsafe { POLLER.load(Ordering::Acquire).as_ref() }
    }

    /// In the child after `fork`, which has one thread (the caller, outside
    /// the poller): the poller copied from the parent is the parent's — its
    /// `epoll` instance and eventfd are shared with the parent's process, and
    /// its waiting threads, slot locks and blocking place are the parent's
    /// threads' (seen: a child's processors stood by for a place the parent's
    /// processor held, and its first pipe read waited for good). Put aside
    /// (its descriptors closed in the child, its memory left): the child's
    /// first wait makes its own.
    #[cfg(feature = "shared-library")]
    pub(crate) fn after_fork_child() {
        let old = POLLER.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: a published poller is never freed; nobody in the child uses
        // it any more.
        if let Some(old) = unsafe { old.as_ref() } {
            close_fd(old.epfd);
            close_fd(old.evfd);
        }
        POLLER_ERR.store(0, Ordering::Release);
    }

    /// A raw system call that leaves `errno` alone (as `futex.rs`: in the
    /// shared-library build `errno` is a C program's, and libc's wrappers of
    /// these calls may be the library's own). `Err(errno)` on failure.
    fn sys(n: libc::c_long, a: [usize; 6]) -> Result<usize, i32> {
        // SAFETY: each caller passes arguments valid for its call; errno is
        // the calling thread's.
        unsafe {
            let saved = *libc::__errno_location();
            let r = libc::syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
            let err = *libc::__errno_location();
            *libc::__errno_location() = saved;
            if r < 0 {
                Err(err)
            } else {
                Ok(r as usize)
            }
        }
    }

    /// `close(2)` that leaves `errno` alone.
    pub(crate) fn close_fd(fd: i32) {
        let _ = sys(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]);
    }

    /// `poll(2)` on one descriptor: the events it reports, `0` at the
    /// timeout. Retries `EINTR` (with the whole timeout again: only a bound).
    pub(crate) fn poll_one(fd: i32, interest: u8, timeout: Option<Duration>) -> io::Result<u8> {
        let mut events = 0;
        if interest & READ != 0 {
            events |= libc::POLLIN;
        }
        if interest & WRITE != 0 {
            events |= libc::POLLOUT;
        }
        let mut pfd = libc::pollfd { fd, events, revents: 0 };
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        loop {
            let r = sys(
                libc::SYS_ppoll,
                [&mut pfd as *mut libc::pollfd as usize, 1, ts_ptr as usize, 0, 0, 0],
            );
            match r {
                Ok(0) => return Ok(0),
                Ok(_) => return Ok(revents_dirs(pfd.revents as u32, true)),
                Err(libc::EINTR) => continue,
                Err(e) => return Err(io::Error::from_raw_os_error(e)),
            }
        }
    }

    /// The directions an event (epoll's or poll's bits, which agree for
    /// these) reports.
    fn revents_dirs(ev: u32, from_poll: bool) -> u8 {
        let (inn, out, err, hup, rdhup) = if from_poll {
            (
                libc::POLLIN as u32,
                libc::POLLOUT as u32,
                libc::POLLERR as u32,
                libc::POLLHUP as u32,
                libc::POLLRDHUP as u32,
            )
        } else {
            (
                libc::EPOLLIN as u32,
                libc::EPOLLOUT as u32,
                libc::EPOLLERR as u32,
                libc::EPOLLHUP as u32,
                libc::EPOLLRDHUP as u32,
            )
        };
        let mut d = 0;
        if ev & (inn | rdhup | err | hup) != 0 {
            d |= READ;
        }
        if ev & (out | err | hup) != 0 {
            d |= WRITE;
        }
        d
    }

    /// How a wait ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Woke {
        /// An edge of these directions came (retry the operation).
        Ready(u8),
        /// The deadline passed first.
        TimedOut,
        /// The caller's `stop` said so after an unpark (cancellation).
        Stopped,
    }

    impl Poller {
        fn new() -> Result<Poller, i32> {
            let epfd =
                sys(libc::SYS_epoll_create1, [libc::EPOLL_CLOEXEC as usize, 0, 0, 0, 0, 0])? as i32;
            let evfd = match sys(
                libc::SYS_eventfd2,
                [0, (libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) as usize, 0, 0, 0, 0],
            ) {
                Ok(fd) => fd as i32,
                Err(e) => {
                    close_fd(epfd);
                    return Err(e);
                }
            };
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: WAKE };
            if let Err(e) = sys(
                libc::SYS_epoll_ctl,
                [
                    epfd as usize,
                    libc::EPOLL_CTL_ADD as usize,
                    evfd as usize,
                    &mut ev as *mut libc::epoll_event as usize,
                    0,
                    0,
                ],
            ) {
                close_fd(evfd);
                close_fd(epfd);
                return Err(e);
            }
            Ok(Poller {
                epfd,
                evfd,
                pages: (0..MAX_FD / PAGE).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect(),
                waiting: AtomicUsize::new(0),
                place: crate::pollplace::Place::new(),
                last_poll: AtomicU64::new(0),
                epoch: Instant::now(),
            })
        }

        /// The slot of `fd`, its page made if needed; `None` past [`MAX_FD`].
        fn slot(&self, fd: i32) -> Option<&Slot> {
            let i = usize::try_from(fd).ok().filter(|&i| i < MAX_FD)?;
            let cell = &self.pages[i / PAGE];
            let mut page = cell.load(Ordering::Acquire);
            if page.is_null() {
                let fresh = Box::into_raw(Box::new(Page {
                    slots: (0..PAGE)
                        .map(|_| Slot {
                            edges: Edges::default(),
                            state: SpinLock::new(SlotState::default()),
                        })
                        .collect(),
                }));
                match cell.compare_exchange(
                    std::ptr::null_mut(),
                    fresh,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => page = fresh,
                    Err(other) => {
                        // SAFETY: ours, never published.
                        drop(unsafe { Box::from_raw(fresh) });
                        page = other;
                    }
                }
            }
            // SAFETY: pages live as long as the poller (the process).
            Some(&unsafe { &*page }.slots[i % PAGE])
        }

        /// The slot of `fd` if its page exists.
        fn slot_if_made(&self, fd: i32) -> Option<&Slot> {
            let i = usize::try_from(fd).ok().filter(|&i| i < MAX_FD)?;
            let page = self.pages[i / PAGE].load(Ordering::Acquire);
            // SAFETY: as in `slot`.
            (!page.is_null()).then(|| &unsafe { &*page }.slots[i % PAGE])
        }

        /// Waiting step 1: the edge counters of `fd` before an operation
        /// (`None` past [`MAX_FD`]).
        #[inline]
        pub(crate) fn seen(&self, fd: i32) -> Option<[u32; 2]> {
            self.slot(fd).map(|s| s.edges.seen())
        }

        /// Waiting steps 2 and 3 for the calling user thread `task`.
        /// `check_level`: look at the descriptor's state with `poll(2)` once
        /// listed (for callers with no `seen` from before their operation:
        /// then `seen` is taken here). `stop`: asked once listed and after
        /// every wake-up; `true` ends the wait with [`Woke::Stopped`] (a
        /// pthread cancellation or signal, which sets what `stop` reads and
        /// then unparks the thread), unless readiness already took the
        /// entry, which wins.
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn wait(
            &self,
            fd: i32,
            interest: u8,
            seen: Option<[u32; 2]>,
            deadline: Option<Instant>,
            owner: Option<&AtomicBool>,
            stop: Option<&dyn Fn() -> bool>,
            task: &TaskRef,
        ) -> io::Result<Woke> {
            let slot = self.slot(fd).ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            let check_level = seen.is_none();
            let seen = seen.unwrap_or_else(|| slot.edges.seen());
            // A thread waits once at a time: its address names its entry.
            let ticket = task.as_ptr();
            let detached = {
                // In a runtime section: preempted holding the lock, this
                // thread would leave it to the next thread of its kernel
                // thread, and an event's delivery would spin on it.
                let section = crate::processor::here();
                let mut st = slot.state.lock();
                if !st.registered {
                    self.register(fd, st.generation)?;
                    st.registered = true;
                }
                if slot.edges.moved(interest, seen) {
                    return Ok(Woke::Ready(interest));
                }
                st.waiters.push(Entry {
                    task: task.clone(),
                    interest,
                    owner: owner.map(NonNull::from),
                });
                self.waiting.fetch_add(1, Ordering::SeqCst);
                matches!(section, crate::processor::Here::Detached(_))
            };
            if check_level {
                match poll_one(fd, interest, Some(Duration::ZERO)) {
                    Ok(0) => {}
                    r => {
                        self.delist(slot, ticket);
                        return r.map(Woke::Ready);
                    }
                }
            }
            // A blocked poller may be in a long `epoll_wait` of another
            // runtime's processor: nothing to tell it (the registration is
            // in its set). Processors that sleep on their futex poll when
            // they next look, or the blocked one wakes.
            //
            // Unless none of them will look: a thread that waits here from
            // a detached kernel thread (back from a blocking call whose
            // processor was handed off) has no processor of its own to go
            // to sleep in `epoll_wait` after it, the processors may all be
            // asleep on their futexes (they went to sleep while nobody
            // waited on I/O), and the monitor polls only while a processor
            // runs. Nobody would ever poll: `rustc` under the pthread
            // library hung so about one run in fifteen, its compiler thread
            // waiting on `std::process`'s spawn socket for a linker that had
            // exited. So such a wait wakes a processor, which looks, and
            // going back to sleep takes the place.
            if detached && !self.place.is_held() {
                task.shared.notify();
            }
            task.external_wait.store(true, Ordering::Relaxed);
            // Listed for idle-stack reclaim while it waits (`reclaim.rs`).
            let waiting = crate::reclaim::Waiting::enter(task);
            let stopped = || stop.is_some_and(|f| f());
            let woke = loop {
                if stopped() {
                    break if self.delist(slot, ticket) {
                        Woke::Stopped
                    } else {
                        Woke::Ready(interest)
                    };
                }
                match deadline {
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            break if self.delist(slot, ticket) {
                                Woke::TimedOut
                            } else {
                                Woke::Ready(interest)
                            };
                        }
                        // `park_timeout`, with the timer withdrawn after.
                        let key = {
                            let _section = crate::processor::here();
                            task.shared.timers.insert_unpark(d - now, task.clone())
                        };
                        crate::processor::park_current(
                            crate::park::Kind::User,
                            crate::task::WaitReason::Park,
                        );
                        let _section = crate::processor::here();
                        task.shared.timers.cancel(key);
                    }
                    None => crate::processor::park_current(
                        crate::park::Kind::User,
                        crate::task::WaitReason::Park,
                    ),
                }
                let _section = crate::processor::here();
                let st = slot.state.lock();
                if !st.waiters.iter().any(|e| e.task.as_ptr() == ticket) {
                    break Woke::Ready(interest);
                }
                if slot.edges.moved(interest, seen) {
                    drop(st);
                    self.delist(slot, ticket);
                    break Woke::Ready(interest);
                }
            };
            drop(waiting);
            task.external_wait.store(false, Ordering::Relaxed);
            Ok(woke)
        }

        /// Takes the waiter `ticket` off `slot`'s list; `false` if it was
        /// already taken (woken).
        fn delist(&self, slot: &Slot, ticket: NonNull<crate::task::Task>) -> bool {
            let _section = crate::processor::here();
            let mut st = slot.state.lock();
            match st.waiters.iter().position(|e| e.task.as_ptr() == ticket) {
                Some(i) => {
                    let e = st.waiters.swap_remove(i);
                    drop(st);
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    drop(e);
                    true
                }
                None => false,
            }
        }

        fn register(&self, fd: i32, generation: u32) -> io::Result<()> {
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
                u64: (u64::from(generation) << 32) | fd as u32 as u64,
            };
            sys(
                libc::SYS_epoll_ctl,
                [
                    self.epfd as usize,
                    libc::EPOLL_CTL_ADD as usize,
                    fd as usize,
                    &mut ev as *mut libc::epoll_event as usize,
                    0,
                    0,
                ],
            )
            .map(drop)
            .map_err(io::Error::from_raw_os_error)
        }

        /// The descriptor `fd` is being closed: drop its registration and
        /// wake its waiters (who retry and find it closed). See the module
        /// docs, "stale registration".
        pub(crate) fn forget(&self, fd: i32) {
            let Some(slot) = self.slot_if_made(fd) else { return };
            let woken = {
                let _section = crate::processor::here();
                let mut st = slot.state.lock();
                st.generation = st.generation.wrapping_add(1);
                if st.registered {
                    st.registered = false;
                    let _ = sys(
                        libc::SYS_epoll_ctl,
                        [self.epfd as usize, libc::EPOLL_CTL_DEL as usize, fd as usize, 0, 0, 0],
                    );
                }
                slot.edges.bump(READ | WRITE);
                std::mem::take(&mut st.waiters)
            };
            self.wake_all(woken);
        }

        fn wake_all(&self, woken: Vec<Entry>) {
            if woken.is_empty() {
                return;
            }
            self.waiting.fetch_sub(woken.len(), Ordering::SeqCst);
            for e in woken {
                crate::processor::unpark_user(&e.task);
            }
        }

        /// Readiness: delivers the events ready now, or within `timeout`
        /// (`None`: until one comes or [`Poller::interrupt`]). Returns how
        /// many threads it woke.
        pub(crate) fn poll(&self, timeout: Option<Duration>) -> usize {
            let mut events = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
            let ms = match timeout {
                None => -1,
                // Rounded up: a timer due in 0.3 ms must not spin on 0.
                Some(d) => d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
            };
            // An error (`EINTR`) is a poll that found nothing.
            let n = sys(
                libc::SYS_epoll_wait,
                [
                    self.epfd as usize,
                    events.as_mut_ptr() as usize,
                    BATCH,
                    ms as isize as usize,
                    0,
                    0,
                ],
            )
            .unwrap_or_default();
            self.last_poll.store(self.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
            let mut woken = 0;
            let mut ready = Vec::new();
            for ev in &events[..n] {
                let (bits, data) = (ev.events, ev.u64);
                if data == WAKE {
                    // Only the blocking poller drains the eventfd: a
                    // non-blocking look that took the interrupt meant for it
                    // would leave it asleep (level-triggered, the count
                    // stays readable until then: one spurious return).
                    if timeout == Some(Duration::ZERO) {
                        continue;
                    }
                    let mut buf = 0u64;
                    let _ = sys(
                        libc::SYS_read,
                        [self.evfd as usize, &mut buf as *mut u64 as usize, 8, 0, 0, 0],
                    );
                    continue;
                }
                let fd = data as u32 as i32;
                let generation = (data >> 32) as u32;
                let dirs = revents_dirs(bits, false);
                let Some(slot) = self.slot_if_made(fd) else { continue };
                {
                    let _section = crate::processor::here();
                    let mut st = slot.state.lock();
                    if st.generation != generation {
                        continue;
                    }
                    slot.edges.bump(dirs);
                    let mut i = 0;
                    while i < st.waiters.len() {
                        if st.waiters[i].interest & dirs != 0 {
                            ready.push(st.waiters.swap_remove(i));
                        } else {
                            i += 1;
                        }
                    }
                }
                woken += ready.len();
                self.wake_all(std::mem::take(&mut ready));
            }
            woken
        }

        /// Interrupts a blocking [`Poller::poll`] (the eventfd).
        pub(crate) fn interrupt(&self) {
            let one = 1u64;
            let _ =
                sys(libc::SYS_write, [self.evfd as usize, &one as *const u64 as usize, 8, 0, 0, 0]);
        }

        /// A processor's non-blocking look (its search), unless another
        /// processor sleeps in `epoll_wait` and will see the events itself.
        #[inline]
        pub(crate) fn poll_idle(&self) -> usize {
            if self.place.is_held() {
                return 0;
            }
            self.poll(Some(Duration::ZERO))
        }

        /// A non-blocking look if nobody looked for `every`: a busy
        /// processor's maintenance ([`POLL_EVERY`]), the monitor's
        /// ([`MONITOR_POLL`]: only when no processor has looked for that
        /// long; it runs ahead of the processors on their CPU, and a look
        /// of its own preempts one of them to deliver what that processor
        /// would have seen at its next decision).
        pub(crate) fn poll_busy(&self, every: Duration) {
            if self.place.is_held() {
                return;
            }
            let now = self.epoch.elapsed().as_nanos() as u64;
            if now.saturating_sub(self.last_poll.load(Ordering::Relaxed)) < every.as_nanos() as u64
            {
                return;
            }
            self.poll(Some(Duration::ZERO));
        }

        /// At a runtime's drop, once its kernel threads stopped: its threads
        /// listed here will never run; delist them, and close the `net`
        /// descriptors they waited on (telling each object, so its drop, if
        /// it ever comes, does not close the number again).
        pub(crate) fn cancel_runtime(&self, shared: &crate::state::Shared) {
            for cell in self.pages.iter() {
                let page = cell.load(Ordering::Acquire);
                if page.is_null() {
                    continue;
                }
                // SAFETY: pages live as long as the process.
                let page = unsafe { &*page };
                for (k, slot) in page.slots.iter().enumerate() {
                    let fd = (k + PAGE * (self.page_index(cell))) as i32;
                    let mut cancelled = Vec::new();
                    {
                        let mut st = slot.state.lock();
                        let mut i = 0;
                        while i < st.waiters.len() {
                            if st.waiters[i].task.shared.is(shared) {
                                cancelled.push(st.waiters.swap_remove(i));
                            } else {
                                i += 1;
                            }
                        }
                    }
                    if cancelled.is_empty() {
                        continue;
                    }
                    self.waiting.fetch_sub(cancelled.len(), Ordering::SeqCst);
                    let mut close = false;
                    for e in &cancelled {
                        if let Some(flag) = e.owner {
                            // SAFETY: the object is borrowed by a thread that
                            // never returns from its wait, so it lives on.
                            close |= !unsafe { flag.as_ref() }.swap(true, Ordering::SeqCst);
                        }
                    }
                    if close {
                        self.forget(fd);
                        close_fd(fd);
                    }
                    // The tasks leak with their stacks, as every parked
                    // thread of a dropped runtime does (`runtime.rs`).
                    for e in cancelled {
                        std::mem::forget(e.task);
                    }
                }
            }
        }

        fn page_index(&self, cell: &AtomicPtr<Page>) -> usize {
            (cell as *const AtomicPtr<Page> as usize - self.pages.as_ptr() as usize)
                / std::mem::size_of::<AtomicPtr<Page>>()
        }
    }

    /// [`Poller::cancel_runtime`] on the poller if it was made.
    pub(crate) fn cancel_runtime(shared: &crate::state::Shared) {
        if let Some(p) = made() {
            p.cancel_runtime(shared);
        }
    }

    /// A processor with nothing to do sleeps: in `epoll_wait` if threads
    /// wait on I/O and no other processor does so already, else on its
    /// futex (`parker`), standing by for that place (`pollplace.rs`).
    /// Either way `parker.unpark()` wakes it.
    pub(crate) fn sleep(parker: &crate::idle::Parker, timeout: Option<Duration>) {
        if let Some(p) = active() {
            p.place.sleep(parker, timeout, |t| {
                parker.park_polling(t, |t| {
                    p.poll(t);
                })
            });
            return;
        }
        parker.park(timeout);
    }

    /// A runtime's processors stopped for good (its drop): if they leave
    /// nobody in `epoll_wait`, wake a processor standing by for that place
    /// (`pollplace.rs`, [`Place::pass_on`]).
    ///
    /// [`Place::pass_on`]: crate::pollplace::Place::pass_on
    pub(crate) fn pass_on() {
        if let Some(p) = made() {
            p.place.pass_on();
        }
    }

    /// Waiting step 1 for [`crate::io::snapshot`]: the counters of `fd`
    /// if the poller was made (`None`: the wait then looks at the level).
    #[inline]
    pub(crate) fn seen_if_made(fd: i32) -> Option<[u32; 2]> {
        made().and_then(|p| p.seen(fd))
    }

    /// [`Poller::forget`] on the poller if it was made (a descriptor's
    /// close: nothing to do when nothing was ever waited on).
    pub(crate) fn forget_fd(fd: i32) {
        if let Some(p) = made() {
            p.forget(fd);
        }
    }

    /// [`Poller::interrupt`], for `Parker::unpark`.
    pub(crate) fn interrupt() {
        if let Some(p) = made() {
            p.interrupt();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model of the park/readiness race: a thread reads the edge counter,
    //! finds its operation would block, lists itself and parks, while an
    //! event makes the descriptor ready and bumps the counter. loom fails the
    //! model if the thread can stay parked with the data there (a lost
    //! wake-up) or read data that is not there.
    use super::*;
    use crate::loom::{AtomicBool, Mutex};
    use crate::park::{Kind, ParkState};
    use loom::sync::Arc;

    struct Fd {
        edges: Edges,
        /// The waiter list (one thread, so one flag) under the slot's lock.
        listed: Mutex<bool>,
        /// The kernel's state: data to read.
        data: AtomicBool,
        park: ParkState,
        /// The thread's saved context is published (the park committed).
        parked: AtomicBool,
    }

    #[test]
    fn loom_readiness_wakes_a_parking_reader() {
        loom::model(|| {
            let fd = Arc::new(Fd {
                edges: Edges::default(),
                listed: Mutex::new(false),
                data: AtomicBool::new(false),
                park: ParkState::new(),
                parked: AtomicBool::new(false),
            });
            // The event source: data arrives, then the kernel's edge is
            // delivered by a poll.
            let poller = {
                let fd = fd.clone();
                loom::thread::spawn(move || {
                    fd.data.store(true, Ordering::SeqCst);
                    let listed = {
                        let mut l = fd.listed.lock().unwrap();
                        fd.edges.bump(READ);
                        std::mem::replace(&mut *l, false)
                    };
                    if listed && fd.park.unpark(Kind::User) {
                        // We schedule it: it must have parked.
                        assert!(fd.parked.load(Ordering::SeqCst));
                        return true;
                    }
                    false
                })
            };
            // The reader: step 1, the operation, steps 2 and 3.
            let mut poller = Some(poller);
            loop {
                let seen = fd.edges.seen();
                if fd.data.load(Ordering::SeqCst) {
                    break; // the read succeeded
                }
                {
                    let mut l = fd.listed.lock().unwrap();
                    if fd.edges.moved(READ, seen) {
                        continue;
                    }
                    *l = true;
                }
                if fd.park.try_take(Kind::User) {
                    continue;
                }
                // The switch saves the context, then the park commits.
                fd.parked.store(true, Ordering::SeqCst);
                if fd.park.commit(Kind::User) {
                    // Parked: only the poller can resume us.
                    let scheduled = poller.take().expect("one poller").join().unwrap();
                    assert!(scheduled, "parked with the data there and nobody to wake us");
                }
                fd.parked.store(false, Ordering::SeqCst);
            }
            if let Some(p) = poller {
                p.join().unwrap();
            }
        });
    }
}
