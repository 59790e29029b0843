//! Threads: `pthread_create`, `pthread_join`, `pthread_detach`,
//! `pthread_exit`, names and attributes, and the per-thread data of every
//! thread that calls in.
//!
//! # Who is whose
//!
//! Every thread that calls into the library has a [`ThreadData`], found
//! through the library's thread-local word (`tls.rs`). A *user* thread's is
//! made by `pthread_create` with the thread and written into the new
//! thread's own TLS block before it runs; a *kernel* thread's (the program's
//! initial thread, or one glibc made) is made the first time it calls in
//! ([`current`]). A `pthread_t` is the thread's control block address, as
//! glibc's is (so `pthread_self` and `pthread_equal` stay glibc's), and
//! [`user_thread`] tells whether one is ours by reading the same word in
//! that block.
//!
//! # A user thread's life
//!
//! 1. `pthread_create` makes the control block (`glibc::new_tcb`) and the
//!    data (in the memory kept with a reused block, [`free`]), and spawns a
//!    runtime user thread with that block as its thread pointer, running
//!    [`thread_main`].
//! 2. `thread_main` calls the start routine under `catch_unwind`:
//!    `pthread_exit` and cancellation end it by unwinding (`ExitUnwind`), so
//!    C++ destructors on the way run, as with glibc's forced unwinding; the
//!    C cleanup handlers (`pthread_cleanup_push`) have been run first by
//!    `cancel.rs`.
//! 3. It runs the key destructors (`key.rs`) and the thread's C++
//!    `thread_local` destructors, releases the robust mutexes it still
//!    holds (`mutex.rs`), marks the data exited and wakes a joiner (a user
//!    thread parked in [`join_parked`], or the queue's kernel-thread and
//!    timed joiners) — all still on its own block.
//! 4. The runtime completes the thread on the kernel thread's own block
//!    (`Builder::thread_pointer`), so once the runtime's join returns, the
//!    block is free to go: the joiner frees it, or, for a detached thread,
//!    whoever next reaps ([`reap`]).
//!
//! The state word (`state`) orders joiner, detacher and exit:
//!
//! | from       | event                      | to         |
//! |------------|----------------------------|------------|
//! | `JOINABLE` | `pthread_detach`           | `DETACHED` |
//! | `JOINABLE` | exit (step 3)              | `EXITED`   |
//! | `DETACHED` | exit                       | reaped     |
//! | `EXITED`   | `pthread_detach`           | reaped     |
//! | `EXITED`   | `pthread_join`             | freed      |
//! | `JOINABLE` | `pthread_join` claims it   | `JOINING` (and `JOIN_WAITING` while a user thread parks in [`join_parked`]) |
//! | `JOINING`  | exit                       | `EXITED`: the joiner woken, then it frees |
//! | `JOINING`  | the joiner is cancelled    | `JOINABLE` |
//!
//! "Reaped" puts the data on a list that later calls free once the
//! runtime's handle says the thread has completed (step 4).

use crate::wait::{Cancel, Outcome, Queue, Waiter};
use schedlab_rt::JoinHandle;
use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// glibc's definitions of what this file stands in front of.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_uint, c_void};
    crate::glibc::real!(pthread_create: fn(*mut libc::pthread_t, *const libc::pthread_attr_t, extern "C" fn(*mut c_void) -> *mut c_void, *mut c_void) -> c_int);
    crate::glibc::real!(pthread_join: fn(libc::pthread_t, *mut *mut c_void) -> c_int);
    crate::glibc::real!(pthread_detach: fn(libc::pthread_t) -> c_int);
    crate::glibc::real!(pthread_exit: fn(*mut c_void) -> ());
    crate::glibc::real!(pthread_getattr_np: fn(libc::pthread_t, *mut libc::pthread_attr_t) -> c_int);
    crate::glibc::real!(pthread_setname_np: fn(libc::pthread_t, *const libc::c_char) -> c_int);
    crate::glibc::real!(pthread_getname_np: fn(libc::pthread_t, *mut libc::c_char, libc::size_t) -> c_int);
    crate::glibc::real!(pthread_attr_getscope: fn(*const libc::pthread_attr_t, *mut c_int) -> c_int);
}

extern "C" {
    fn pthread_attr_getinheritsched(
        attr: *const libc::pthread_attr_t,
        inherit: *mut c_int,
    ) -> c_int;
    fn pthread_attr_getdetachstate(attr: *const libc::pthread_attr_t, state: *mut c_int) -> c_int;
    fn pthread_attr_setdetachstate(attr: *mut libc::pthread_attr_t, state: c_int) -> c_int;
    /// glibc's: the stack's top as set, null when no stack was given.
    fn pthread_attr_getstackaddr(
        attr: *const libc::pthread_attr_t,
        addr: *mut *mut c_void,
    ) -> c_int;
}

const MAGIC: u64 = 0x7363_6865_646c_6162; // "schedlab"

const JOINABLE: u32 = 0;
const DETACHED: u32 = 1;
const EXITED: u32 = 2;
/// A joiner has claimed the thread (a second join fails with `EINVAL`).
const JOINING: u32 = 4;
/// The claiming joiner, a user thread, parks until the exit and has put its
/// handle in `join_waiter` for the exit to unpark ([`join_parked`]).
const JOIN_WAITING: u32 = 8;

/// `PTHREAD_SCOPE_SYSTEM`.
const SCOPE_SYSTEM: c_int = 0;
/// `PTHREAD_SCOPE_PROCESS`: glibc refuses it; here it is what a user thread is.
const SCOPE_PROCESS: c_int = 1;
/// glibc's `ATTR_FLAG_SCOPEPROCESS`, in `struct pthread_attr`'s `flags`
/// (the third `int`), where `pthread_attr_getscope` reads it.
const ATTR_FLAG_SCOPEPROCESS: c_int = 0x0004;

/// What kind of thread a [`ThreadData`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Created by our `pthread_create`: a runtime user thread.
    User,
    /// A kernel thread: the program's initial one, or one glibc made.
    Kernel,
}

/// The library's state of one thread.
pub(crate) struct ThreadData {
    magic: u64,
    pub(crate) kind: Cell<Kind>,
    /// A small number unique among live threads, never 0: what a mutex
    /// records as its owner (`mutex.rs`).
    pub(crate) id: u32,
    /// The thread's control block (its `pthread_t`).
    pub(crate) tcb: usize,
    state: AtomicU32,
    /// Set when the start routine is over (step 3); joiners wait for it.
    exited: AtomicU32,
    /// Joiners waiting for `exited` (lock bit 1 of `queue_lock`).
    queue_lock: AtomicU32,
    queue_head: AtomicPtr<Waiter>,
    queue_tail: AtomicPtr<Waiter>,
    value: AtomicUsize,
    /// The handle ([`ThreadData::own_handle`]) of the joiner parked in
    /// [`join_parked`] (written by the joiner that claimed the join before it
    /// sets `JOIN_WAITING`; read by the exit only when it sees that bit,
    /// before it sets `exited`).
    join_waiter: AtomicPtr<schedlab_rt::Thread>,
    /// A user thread's own runtime handle, made on its first wait: written
    /// only by the thread itself, while nothing refers to it (it is `None`);
    /// read by the thread and, through a [`Waiter`] of its, by wakers.
    me: UnsafeCell<Option<schedlab_rt::Thread>>,
    /// The robust mutexes the thread holds (`mutex.rs`; a cell the thread
    /// alone touches).
    pub(crate) robust: UnsafeCell<Vec<usize>>,
    handle: schedlab_rt::shared::SpinLock<Option<JoinHandle<()>>>,
    /// Thread name (`pthread_setname_np`), NUL-terminated, up to 15 bytes.
    name: Mutex<[u8; 16]>,
    /// Usable stack size, for `pthread_getattr_np`.
    pub(crate) stack_size: usize,
    pub(crate) guard_size: usize,
    /// The stack the thread runs on, lowest address and length, recorded
    /// when it starts (0, 0 before), for `pthread_getattr_np`.
    stack_low: AtomicUsize,
    stack_len: AtomicUsize,
    /// For a thread on the caller's memory (`pthread_attr_setstack`): raised
    /// once nothing runs on it, which `pthread_join` waits for, so that the
    /// caller may reuse the memory when the join returns.
    stack_released: Option<schedlab_rt::StackReleased>,
    /// Cancellation: state, type and pending bits (`cancel.rs`).
    pub(crate) cancel: AtomicU32,
    /// The innermost C cleanup buffer (`cancel.rs`).
    pub(crate) cleanup: Cell<*mut c_void>,
    /// Thread-specific values (`key.rs`).
    pub(crate) keys: UnsafeCell<Vec<(u64, *mut c_void)>>,
    /// Signals sent to this thread and not yet delivered (`signal.rs`).
    pub(crate) pending_signals: std::sync::atomic::AtomicU64,
    /// Of `pending_signals`, the process-directed ones a handler left for the
    /// end of a runtime section (`signal::defer_in_section`): passed on to
    /// another thread if this one blocks them by then.
    pub(crate) deferred_signals: std::sync::atomic::AtomicU64,
    /// Standard signals this thread raised on its kernel thread from its
    /// pending set and has not seen delivered yet: a `pthread_kill`'s
    /// doorbell for the same signal, already pending there, takes the
    /// raise's place (the kernel keeps one of each) and stands for it
    /// (`signal::answer_doorbell`).
    pub(crate) raising: std::sync::atomic::AtomicU64,
    /// The signals the thread waits for in `sigwait` now.
    pub(crate) sigwait_set: std::sync::atomic::AtomicU64,
    /// The thread's place in the signal forwarder's list, plus one; 0 when
    /// not listed (`procsig.rs`).
    pub(crate) listed: AtomicUsize,
    /// A kept `SIGURG`'s `siginfo` (`urg.rs`).
    pub(crate) urg: crate::urg::Kept,
    /// Scheduling policy (high 16 bits) and priority, as last set.
    pub(crate) sched: std::sync::atomic::AtomicI32,
    /// The highest priority the protocol mutexes the thread holds lend it (`prio.rs`),
    /// 0 for none; it runs at the higher of this and its own.
    pub(crate) lent: std::sync::atomic::AtomicI32,
    /// A kernel thread's own policy and priority (`schedparam::pack`) while `prio.rs`
    /// has raised it through the kernel, else `prio::NOT_RAISED` (under its record's lock).
    pub(crate) kernel_sched: std::sync::atomic::AtomicI32,
    /// The policy and priority `prio.rs` last planned for a kernel thread, and how many
    /// plans it made (`prio::apply_kernel` makes the last one land).
    pub(crate) kernel_target: std::sync::atomic::AtomicI32,
    pub(crate) kernel_plans: AtomicU32,
    /// Signals delivered to the thread so far (a sleep they interrupt ends
    /// with `EINTR`).
    pub(crate) signals_seen: AtomicU32,
    /// Of those, the ones whose handler asked for `SA_RESTART` (or that had
    /// none): a blocking call they come during goes on (`fdio.rs`).
    pub(crate) signals_restart: AtomicU32,
    /// The process-shared (glibc's) condition variable and mutex the thread
    /// waits on now, or null (`cond.rs`, "Cancelling a process-shared wait").
    pub(crate) shared_cond: AtomicPtr<libc::pthread_cond_t>,
    pub(crate) shared_mutex: AtomicPtr<libc::pthread_mutex_t>,
    /// Cancellers broadcasting on `shared_cond` now.
    pub(crate) shared_waking: AtomicU32,
}

// SAFETY: the cells (`kind`, `cleanup`, `keys`) are touched only by the
// thread itself (and its creator before it runs); the rest is atomic or locked.
unsafe impl Sync for ThreadData {}
// SAFETY: as above.
unsafe impl Send for ThreadData {}

impl ThreadData {
    /// A thread number, never 0.
    fn next_id() -> u32 {
        static NEXT_ID: AtomicU32 = AtomicU32::new(1);
        let mut id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if id == 0 {
            id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        }
        id
    }

    fn new(kind: Kind, id: u32, tcb: usize, stack_size: usize, guard_size: usize) -> ThreadData {
        ThreadData {
            magic: MAGIC,
            kind: Cell::new(kind),
            id,
            tcb,
            state: AtomicU32::new(JOINABLE),
            exited: AtomicU32::new(0),
            queue_lock: AtomicU32::new(0),
            queue_head: AtomicPtr::new(std::ptr::null_mut()),
            queue_tail: AtomicPtr::new(std::ptr::null_mut()),
            value: AtomicUsize::new(0),
            join_waiter: AtomicPtr::new(std::ptr::null_mut()),
            me: UnsafeCell::new(None),
            robust: UnsafeCell::new(Vec::new()),
            handle: schedlab_rt::shared::SpinLock::new(None),
            name: Mutex::new([0; 16]),
            stack_size,
            guard_size,
            stack_low: AtomicUsize::new(0),
            stack_len: AtomicUsize::new(0),
            stack_released: None,
            cancel: AtomicU32::new(0),
            cleanup: Cell::new(std::ptr::null_mut()),
            keys: UnsafeCell::new(Vec::new()),
            pending_signals: std::sync::atomic::AtomicU64::new(0),
            deferred_signals: std::sync::atomic::AtomicU64::new(0),
            raising: std::sync::atomic::AtomicU64::new(0),
            sigwait_set: std::sync::atomic::AtomicU64::new(0),
            listed: AtomicUsize::new(0),
            urg: crate::urg::Kept::new(),
            signals_seen: AtomicU32::new(0),
            signals_restart: AtomicU32::new(0),
            shared_cond: AtomicPtr::new(std::ptr::null_mut()),
            shared_mutex: AtomicPtr::new(std::ptr::null_mut()),
            shared_waking: AtomicU32::new(0),
            sched: std::sync::atomic::AtomicI32::new(0),
            lent: std::sync::atomic::AtomicI32::new(0),
            kernel_sched: std::sync::atomic::AtomicI32::new(crate::prio::NOT_RAISED),
            kernel_target: std::sync::atomic::AtomicI32::new(0),
            kernel_plans: AtomicU32::new(0),
        }
    }

    /// Whether the thread's start routine is over.
    pub(crate) fn has_exited(&self) -> bool {
        self.exited.load(Ordering::Acquire) != 0
    }

    /// The runtime's handle of the thread, while it has one.
    pub(crate) fn rt_thread(&self) -> Option<schedlab_rt::Thread> {
        self.handle.lock().as_ref().map(|h| h.thread().clone())
    }

    /// The calling user thread's own runtime handle, without the reference
    /// count's two atomic operations of `schedlab_rt::try_current` per wait
    /// (it lives as long as the data). `self` must be the caller's own data.
    pub(crate) fn own_handle(&self) -> Option<&schedlab_rt::Thread> {
        let p = self.me.get();
        // SAFETY: only the thread itself writes the cell, once, while it is
        // `None` (nothing can refer to its content then); `self` is the
        // caller's own data.
        unsafe {
            if (*p).is_none() {
                *p = schedlab_rt::try_current();
            }
            (*p).as_ref()
        }
    }

    /// The calling user thread's own runtime handle if it has been made
    /// ([`ThreadData::own_handle`]; at the thread's start), without making
    /// it: for a signal handler. `self` must be the caller's own data.
    pub(crate) fn own_handle_if_made(&self) -> Option<&schedlab_rt::Thread> {
        // SAFETY: as in `own_handle`; only read.
        unsafe { (*self.me.get()).as_ref() }
    }

    /// The runtime's handle of this user thread, from any thread: its own (made on
    /// its first call, so a thread that its creator has not yet given its join handle
    /// has it), else its join handle's; `None` once it was joined.
    pub(crate) fn runtime_thread(&self) -> Option<schedlab_rt::Thread> {
        if std::ptr::eq(self, current()) {
            return self.own_handle().cloned();
        }
        self.handle.lock().as_ref().map(|h| h.thread().clone())
    }

    fn joiners(&self) -> Queue<'_> {
        Queue::new(&self.queue_lock, 1, &self.queue_head, &self.queue_tail)
    }
}

/// The calling thread's data, made on its first call if it is a kernel
/// thread. Touches nothing of the runtime (`runtime::enter` does).
#[inline]
pub(crate) fn current() -> &'static ThreadData {
    let p = crate::tls::get();
    if p != 0 {
        // SAFETY: the word holds a leaked `ThreadData` of this thread.
        return unsafe { &*(p as *const ThreadData) };
    }
    adopt()
}

/// Makes the data of a kernel thread at its first call, in memory of its
/// own, never freed (a kernel thread's data lives as long as the process).
///
/// Not from `malloc`: a kernel thread's first call may come from inside the
/// program's `malloc` itself. jemalloc, which `rustc` links statically in
/// place of glibc's, locks its initialisation mutex with
/// `pthread_mutex_trylock` in `malloc_init_hard`, the first allocation of the
/// process: the data allocated here called that `malloc` again, which called
/// `pthread_mutex_trylock` again, until the stack overflowed (every `rustc`
/// under `schedlab exec` died so, before `main`).
#[cold]
fn adopt() -> &'static ThreadData {
    // glibc's own answer: the kernel thread's control block.
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as usize;
    // SAFETY: a fresh private anonymous mapping, page-aligned and large
    // enough for one `ThreadData`; no other memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<ThreadData>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        // Nothing that allocates (`fatal` formats): said as it is.
        const WHY: &[u8] = b"libschedlab_pthread: no memory for a kernel thread's data\n";
        // SAFETY: write(2) of a static buffer; _exit ends the process.
        unsafe {
            libc::write(2, WHY.as_ptr().cast(), WHY.len());
            libc::_exit(127)
        }
    }
    let d = p.cast::<ThreadData>();
    // SAFETY: the mapping is ours, aligned and large enough; written once
    // before anyone can see it, then only shared (never freed).
    let d: &'static ThreadData = unsafe {
        d.write(ThreadData::new(Kind::Kernel, ThreadData::next_id(), me, 0, 0));
        &*d
    };
    crate::tls::set(d as *const ThreadData as usize);
    d
}

/// The data of `t` if it is a live user thread of ours.
pub(crate) fn user_thread(t: libc::pthread_t) -> Option<&'static ThreadData> {
    if t == 0 {
        return None;
    }
    // SAFETY: POSIX makes using a `pthread_t` that names no live (or
    // unjoined) thread undefined; for one that does, its block is mapped
    // and holds our word at the static offset.
    let p = unsafe { crate::tls::get_in(t as usize) };
    if p == 0 || p == crate::glibc::GONE {
        return None;
    }
    // SAFETY: the word holds null, `GONE` or a `ThreadData`.
    let d = unsafe { &*(p as *const ThreadData) };
    (d.magic == MAGIC && d.kind.get() == Kind::User && d.tcb == t as usize).then_some(d)
}

/// Whether `t` was a user thread of ours that has been joined (or, detached,
/// has ended): its kept block says so (`glibc::GONE`). Every function that
/// names a thread answers `ESRCH` for it rather than pass it to glibc,
/// which would take the block for one of its own.
pub(crate) fn gone(t: libc::pthread_t) -> bool {
    // SAFETY: as in `user_thread`; kept blocks stay mapped.
    t != 0 && unsafe { crate::tls::get_in(t as usize) } == crate::glibc::GONE
}

/// Whether the caller is a user thread.
#[inline]
pub(crate) fn on_user_thread() -> bool {
    let p = crate::tls::get();
    // SAFETY: as in `current`.
    p != 0 && unsafe { &*(p as *const ThreadData) }.kind.get() == Kind::User
}

/// Whether the caller is a user thread running its own code: the path
/// choice of the functions the runtime's own code and its dependencies may
/// reach too (`read`, `write`, the `poll` family, the sleeps, `sched_yield`,
/// `sigwait`). Inside a runtime section (`schedlab_rt::shared::in_runtime`:
/// a scheduling decision made on a user thread's stack, with its thread
/// pointer) the call is the runtime's, and takes glibc's path, which
/// neither parks nor yields nor acts on a cancellation (docs/PTHREAD.md,
/// "Re-entry from the runtime"). The other functions keep
/// [`on_user_thread`]: a program's signal handler that runs inside a
/// section and posts a semaphore is still the user thread's.
#[inline]
pub(crate) fn user_path() -> bool {
    on_user_thread() && !schedlab_rt::shared::in_runtime()
}

/// Live user threads, and whether the initial thread has called
/// `pthread_exit` (then the last user thread to end ends the process, as
/// glibc's last thread does).
static LIVE: AtomicUsize = AtomicUsize::new(0);
static MAIN_EXITED: AtomicU32 = AtomicU32::new(0);

/// Exited detached threads waiting for the runtime to complete them.
static REAP: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// Whether `REAP` may hold any (written under its lock): every
/// `pthread_create` reaps, and most find nothing, which this tells without
/// the lock's two atomic operations.
static REAP_LISTED: AtomicBool = AtomicBool::new(false);

/// Lists exited detached thread `d` for [`reap`].
fn list_for_reaping(d: &ThreadData) {
    let mut list = REAP.lock().unwrap();
    list.push(d as *const ThreadData as usize);
    REAP_LISTED.store(true, Ordering::Release);
}

/// Frees what the reap list holds of threads the runtime has completed.
pub(crate) fn reap() {
    if !REAP_LISTED.load(Ordering::Acquire) {
        return;
    }
    let done: Vec<usize> = {
        let Ok(mut list) = REAP.try_lock() else { return };
        if list.is_empty() {
            REAP_LISTED.store(false, Ordering::Release);
            return;
        }
        let mut done = Vec::new();
        list.retain(|&p| {
            // SAFETY: listed data are leaked until freed here.
            let d = unsafe { &*(p as *const ThreadData) };
            let finished = d.handle.lock().as_ref().is_none_or(JoinHandle::is_finished);
            if finished {
                done.push(p);
            }
            !finished
        });
        REAP_LISTED.store(!list.is_empty(), Ordering::Release);
        done
    };
    for p in done {
        // SAFETY: completed by the runtime (its block no longer in use), and
        // unlisted: nobody else has it.
        unsafe { free(p as *mut ThreadData) };
    }
}

/// Frees a completed user thread's data and block: the block is kept for a
/// later thread with the data's memory beside it (`glibc::free_tcb`), so
/// that the next `pthread_create` reuses both without `malloc` or `free`.
///
/// # Safety
///
/// The runtime has completed the thread, and nothing else refers to `d`.
unsafe fn free(d: *mut ThreadData) {
    // Its CPU clock names it no more (before the block may go).
    // SAFETY: forwarded: alive until dropped below.
    crate::cpuclock::forget(unsafe { &*d });
    // SAFETY: forwarded: alive until dropped below, and ours alone (so the
    // handle's lock needs no atomic operations).
    let tcb = unsafe {
        let handle = (*d).handle.get_mut();
        if let Some(h) = handle.take() {
            let _ = h.join();
        }
        (*d).tcb
    };
    // SAFETY: forwarded: the data is dropped once, and its memory (a
    // `Box<ThreadData>`'s) is kept or freed below, never read as data again
    // until `place` writes a new value into it.
    unsafe { std::ptr::drop_in_place(d) };
    // SAFETY: forwarded: the thread runs no more, on any block.
    if let Some(mem) = unsafe { crate::glibc::free_tcb(tcb, d as usize) } {
        // SAFETY: the memory of a `Box<ThreadData>` whose value was dropped
        // above: freed as uninitialised memory of that layout.
        drop(unsafe { Box::from_raw(mem as *mut std::mem::MaybeUninit<ThreadData>) });
    }
}

/// Puts `value` into the memory kept with a reused control block (`kept`,
/// from [`free`] through `glibc::new_tcb`), or into a new allocation when
/// `kept` is 0.
fn place(kept: usize, value: ThreadData) -> *mut ThreadData {
    if kept == 0 {
        return Box::into_raw(Box::new(value));
    }
    let p = kept as *mut ThreadData;
    // SAFETY: a `Box<ThreadData>`'s memory whose value was dropped by `free`
    // and that nothing else refers to.
    unsafe { p.write(value) };
    p
}

/// glibc's default stack size for a new thread (`RLIMIT_STACK`, or 2 MiB
/// when unlimited): what a default attribute reports and gives.
pub(crate) fn default_stack_size() -> usize {
    // SAFETY: an attribute on our stack, initialised and destroyed here.
    unsafe {
        let mut a: libc::pthread_attr_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut a);
        let mut size = 0;
        libc::pthread_attr_getstacksize(&a, &mut size);
        libc::pthread_attr_destroy(&mut a);
        size
    }
}

/// What `pthread_create` reads of an attribute (glibc's getters: the
/// attribute object is glibc's).
struct Attr {
    detached: bool,
    stack_size: usize,
    guard_size: usize,
    /// The caller's stack (`pthread_attr_setstack`): its lowest address.
    stack_base: Option<usize>,
    /// Policy and priority, when the attribute says `PTHREAD_EXPLICIT_SCHED`.
    sched: Option<(c_int, c_int)>,
}

fn read_attr(attr: *const libc::pthread_attr_t) -> Attr {
    let mut a = Attr {
        detached: false,
        stack_size: crate::runtime::stack_size(),
        guard_size: 4096,
        stack_base: None,
        sched: None,
    };
    if attr.is_null() {
        return a;
    }
    // SAFETY: the caller's attribute, initialised (POSIX: undefined otherwise).
    unsafe {
        let mut ds = 0;
        pthread_attr_getdetachstate(attr, &mut ds);
        a.detached = ds == libc::PTHREAD_CREATE_DETACHED;
        let mut size = 0;
        if libc::pthread_attr_getstacksize(attr, &mut size) == 0 && size > 0 {
            a.stack_size = size;
        }
        // The stack's top as the caller set it, or null: unlike
        // `pthread_attr_getstack`, which makes up an address from the size
        // when none was set.
        let mut top = std::ptr::null_mut();
        if pthread_attr_getstackaddr(attr, &mut top) == 0 && !top.is_null() {
            a.stack_base = Some((top as usize).wrapping_sub(a.stack_size));
        }
        let mut guard = 0;
        if libc::pthread_attr_getguardsize(attr, &mut guard) == 0 {
            a.guard_size = guard;
        }
        let mut inherit = 0;
        if pthread_attr_getinheritsched(attr, &mut inherit) == 0 && inherit == EXPLICIT_SCHED {
            let (mut policy, mut param) = (0, std::mem::zeroed::<libc::sched_param>());
            libc::pthread_attr_getschedpolicy(attr, &mut policy);
            libc::pthread_attr_getschedparam(attr, &mut param);
            a.sched = Some((policy, param.sched_priority));
        }
    }
    a
}

/// `PTHREAD_EXPLICIT_SCHED`.
const EXPLICIT_SCHED: c_int = 1;

/// The scheduling policy and priority a new thread inherits from the caller
/// (packed as `ThreadData::sched`): a user thread's as recorded, a kernel
/// thread's from glibc.
fn inherited_sched() -> i32 {
    let me = current();
    if me.kind.get() == Kind::User {
        return me.sched.load(Ordering::Relaxed);
    }
    let (mut policy, mut param) = (0, unsafe_zeroed::<libc::sched_param>());
    // SAFETY: glibc's, on the calling kernel thread, into our locals.
    if unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) } != 0 {
        return 0;
    }
    crate::schedparam::pack(policy, param.sched_priority)
}

/// Whether `start` is a function of this library (the runtime's own kernel
/// threads, started through `std::thread`, come to our `pthread_create`
/// too: they must be glibc's; the runtime's signal handlers come to our
/// `sigaction`, `handlers.rs`).
pub(crate) fn in_this_library(start: usize) -> bool {
    static RANGE: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
    let &(lo, hi) = RANGE.get_or_init(|| {
        let mut info: libc::Dl_info = unsafe_zeroed();
        // SAFETY: dladdr on one of our own functions, into a struct on our stack.
        unsafe { libc::dladdr(in_this_library as *const c_void, &mut info) };
        let base = info.dli_fbase as usize;
        let mut found = (base, base);
        // The extent of our object: its loaded segments.
        unsafe extern "C" fn each(
            info: *mut libc::dl_phdr_info,
            _: libc::size_t,
            data: *mut c_void,
        ) -> c_int {
            // SAFETY: the loader's info; `data` is our tuple.
            let (info, found) = unsafe { (&*info, &mut *data.cast::<(usize, usize)>()) };
            if info.dlpi_addr as usize != found.0 {
                return 0;
            }
            for i in 0..info.dlpi_phnum as usize {
                // SAFETY: `dlpi_phnum` headers.
                let ph = unsafe { &*info.dlpi_phdr.add(i) };
                if ph.p_type == libc::PT_LOAD {
                    found.1 = found.1.max(found.0 + (ph.p_vaddr + ph.p_memsz) as usize);
                }
            }
            1
        }
        // SAFETY: a callback that only reads what it is given.
        unsafe { libc::dl_iterate_phdr(Some(each), (&mut found as *mut (usize, usize)).cast()) };
        found
    });
    (lo..hi).contains(&start)
}

fn unsafe_zeroed<T>() -> T {
    // SAFETY: used for C structs whose all-zero bit pattern is valid.
    unsafe { std::mem::zeroed() }
}

/// The payload of the unwinding that ends a user thread early
/// (`pthread_exit`, cancellation).
pub(crate) struct ExitUnwind;

/// `pthread_create`.
///
/// # Safety
///
/// C's contract for `pthread_create`.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    if in_this_library(start as usize) {
        // SAFETY: forwarded unchanged to glibc.
        return unsafe { next::pthread_create()(thread, attr, start, arg) };
    }
    crate::runtime::get();
    let Some(rt) = crate::runtime::enter() else { unreachable!("started just now") };
    current();
    reap();
    let a = read_attr(attr);
    let id = ThreadData::next_id();
    // Above `pid_max` (at most 2^22): no kernel thread has it.
    let Some((tcb, kept)) = crate::glibc::new_tcb(0x4000_0000 | id as i32) else {
        return libc::EAGAIN;
    };
    let mut data = ThreadData::new(Kind::User, id, tcb, a.stack_size, a.guard_size);
    if a.stack_base.is_some() {
        data.stack_released = Some(schedlab_rt::StackReleased::new());
    }
    let data = place(kept, data);
    let sched = match a.sched {
        Some((policy, prio)) => crate::schedparam::pack(policy, prio),
        None => inherited_sched(),
    };
    // SAFETY: ours alone until the thread is spawned below.
    unsafe { (*data).sched.store(sched, Ordering::Relaxed) };
    // SAFETY: a fresh block nobody runs on yet.
    unsafe { crate::tls::set_in(tcb, data as usize) };
    let start = start as usize;
    let arg = arg as usize;
    let datap = data as usize;
    // SAFETY: `tcb` is the new thread's own block, alive until it is
    // completed and then freed by its joiner or the reaper (module docs).
    let mut builder = unsafe {
        schedlab_rt::Builder::new()
            .thread_pointer(tcb)
            .signal_mask(schedlab_rt::shared::signal_mask())
    };
    let realtime = crate::schedparam::wait_priority(sched);
    if realtime > 0 {
        // A `SCHED_FIFO`/`SCHED_RR` thread: strictly ordered by its priority among the
        // runtime's `High` threads, above every `SCHED_OTHER` one (docs/PTHREAD.md,
        // "Real-time priorities"). Made by a thread of a lower one, it runs at once.
        builder =
            builder.realtime(realtime.clamp(1, 255) as u8).fifo(sched >> 16 == libc::SCHED_FIFO);
    }
    if a.stack_size != crate::runtime::stack_size() {
        // The runtime's own size needs no word: it is what the runtime was
        // started with, and naming it costs the runtime's size check.
        builder = builder.stack_size(a.stack_size);
    }
    if let Some(base) = a.stack_base {
        // SAFETY: ours until the thread is spawned below.
        let released = unsafe { (*data).stack_released.clone() }.expect("made above");
        // SAFETY: POSIX: the caller's stack is the thread's until it is
        // joined or, detached, has exited; nothing else may use it.
        builder = unsafe { builder.stack_memory(base as *mut u8, a.stack_size, released) };
    }
    LIVE.fetch_add(1, Ordering::Relaxed);
    let spawned = if on_user_thread() {
        builder.spawn(move || thread_main(datap, start, arg))
    } else {
        builder.spawn_on(rt, move || thread_main(datap, start, arg))
    };
    match spawned {
        Ok(h) => {
            // SAFETY: ours until the thread exits; the handle goes in first.
            let d = unsafe { &*data };
            *d.handle.lock() = Some(h);
            if a.detached {
                detach(d);
            }
            // SAFETY: the caller's out-parameter.
            unsafe { *thread = tcb as libc::pthread_t };
            0
        }
        Err(_) => {
            LIVE.fetch_sub(1, Ordering::Relaxed);
            // SAFETY: never ran; nobody else has them.
            unsafe { free(data) };
            libc::EAGAIN
        }
    }
}

/// A user thread's body (module docs, steps 2 and 3).
fn thread_main(data: usize, start: usize, arg: usize) {
    // SAFETY: `data` is this thread's, alive until it is freed after completion.
    let d = unsafe { &*(data as *const ThreadData) };
    // SAFETY: the start routine the program gave, with its argument.
    let start: extern "C-unwind" fn(*mut c_void) -> *mut c_void =
        unsafe { std::mem::transmute(start) };
    crate::glibc::thread_start();
    // Made now, for a signal handler that must not make it
    // (`signal::defer_in_section`).
    d.own_handle();
    crate::procsig::register(d);
    crate::signal::take_process_pending();
    // A `pthread_kill` that came before the thread first ran waits in its
    // pending set.
    crate::signal::deliver_pending();
    if let Some(b) = schedlab_rt::stack_bounds() {
        d.stack_low.store(b.start, Ordering::Relaxed);
        d.stack_len.store(b.len(), Ordering::Release);
    }
    let r = std::panic::catch_unwind(|| start(arg as *mut c_void));
    match r {
        Ok(v) => d.value.store(v as usize, Ordering::Relaxed),
        Err(payload) => {
            if !payload.is::<ExitUnwind>() {
                crate::fatal("a Rust panic reached a thread's start routine");
            }
        }
    }
    finish(d);
}

/// Step 3: TLS and key destructors, then exited, then the joiner.
fn finish(d: &ThreadData) {
    // glibc's order (`start_thread`): the C++ and Rust `thread_local`
    // destructors first, whose frees may make a key's value again (jemalloc
    // registers its per-thread state under a key whenever a thread with
    // none allocates), then the keys' rounds, which see it.
    crate::glibc::call_tls_dtors();
    crate::key::run_destructors(d);
    crate::prio::forget(d);
    crate::mutex::release_robust(d);
    let was = d.state.fetch_or(EXITED, Ordering::AcqRel);
    if was & DETACHED != 0 {
        list_for_reaping(d);
    }
    let parked = if was & JOIN_WAITING != 0 {
        // SAFETY: the joiner stored its handle before setting the bit we saw
        // (acquire above), and stays parked, its data alive, until `exited`
        // is set.
        unsafe { d.join_waiter.load(Ordering::Relaxed).as_ref().cloned() }
    } else {
        None
    };
    crate::signal::before_exit();
    crate::procsig::unregister(d);
    crate::signal::after_unlisted();
    d.exited.store(1, Ordering::Release);
    if let Some(joiner) = parked {
        joiner.unpark();
    }
    // One at a time, each woken after the lock is let go, and nothing
    // allocated: this runs on the exiting thread's block, whose malloc state
    // a thread that never called malloc should not have to make. No joiner
    // joins the queue now that `exited` is set.
    let q = d.joiners();
    loop {
        let popped = q.lock().pop();
        let Some(w) = popped else { break };
        w.wake();
    }
    if LIVE.fetch_sub(1, Ordering::AcqRel) == 1 && MAIN_EXITED.load(Ordering::Acquire) != 0 {
        // The initial thread left with `pthread_exit` and this was the last
        // thread: the process ends, as after glibc's last thread.
        // SAFETY: exit(3), running atexit handlers as glibc's would.
        unsafe { libc::exit(0) };
    }
}

/// `pthread_join`.
///
/// # Safety
///
/// C's contract for `pthread_join`.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_join(t: libc::pthread_t, ret: *mut *mut c_void) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged to glibc.
        return unsafe { next::pthread_join()(t, ret) };
    };
    let me = current();
    if me.tcb == d.tcb {
        return libc::EDEADLK;
    }
    crate::cancel::test();
    // Claim the join.
    let mut s = d.state.load(Ordering::Acquire);
    loop {
        if s & (DETACHED | JOINING) != 0 {
            return libc::EINVAL;
        }
        match d.state.compare_exchange(s, s | JOINING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(now) => s = now,
        }
    }
    // Wait for the exit (a cancellation point): a user thread parks on its
    // own token, a kernel thread waits in the queue.
    if s & EXITED == 0 {
        let mine = (me.kind.get() == Kind::User).then(|| me.own_handle()).flatten();
        let waited = match mine {
            Some(mine) => join_parked(d, mine),
            None => wait_exit(d, None, true),
        };
        if waited == Outcome::Cancelled {
            d.state.fetch_and(!JOINING, Ordering::AcqRel);
            crate::cancel::act();
        }
    }
    let value = d.value.load(Ordering::Relaxed);
    let h = d.handle.lock().take();
    if let Some(h) = h {
        // The runtime's completion follows the exit at once: this finds it
        // complete unless the exit is still on its way out (another
        // processor), and then waits for those few steps.
        let _ = h.join();
    }
    if let Some(released) = &d.stack_released {
        // The caller's stack is the caller's again only once the exit has
        // switched away from it, a moment after the join.
        released.wait();
    }
    if !ret.is_null() {
        // SAFETY: the caller's out-parameter.
        unsafe { *ret = value as *mut c_void };
    }
    // SAFETY: completed (joined above), and the join claim makes us its only owner.
    unsafe { free(d as *const ThreadData as *mut ThreadData) };
    0
}

/// `pthread_join`'s wait on a user thread (`me`, the caller) that claimed the
/// join of `d`: parks until the exit unparks it ([`Outcome::Woken`]) or the
/// caller is cancelled ([`Outcome::Cancelled`]). One park and one unpark,
/// where the queue of [`wait_exit`] costs a `Waiter`, its links and locks.
///
/// The protocol, on `d.state` and `d.exited`:
/// 1. The joiner puts its handle's address in `join_waiter`, then sets
///    `JOIN_WAITING`; if `EXITED` was already set, the exit saw no joiner
///    and the wait is over.
/// 2. The exit sets `EXITED`; if it sees `JOIN_WAITING`, it clones the
///    handle, then sets `exited`, then unparks the clone. It touches the cell
///    only between the two stores, so once the joiner sees `exited` the cell
///    is its own again.
/// 3. The joiner parks until it sees `exited`; the park token keeps an
///    unpark that comes before the park, and a spurious return (a
///    cancellation's unpark, a stale token) only goes round again.
/// 4. Cancelled, the joiner clears `JOIN_WAITING`: if `EXITED` was not yet
///    set, the exit will not look at the cell and the wait ends cancelled;
///    if it was, the exit has committed to the wake-up, and the join waits
///    for it and succeeds (as a woken queue waiter does, `wait.rs` step 4).
fn join_parked(d: &ThreadData, me: &schedlab_rt::Thread) -> Outcome {
    // The caller claimed the join, so no other joiner writes the word; the
    // exit reads it only after the bit is set below (release).
    d.join_waiter.store(me as *const _ as *mut _, Ordering::Relaxed);
    let mut outcome = Outcome::Woken;
    if d.state.fetch_or(JOIN_WAITING, Ordering::AcqRel) & EXITED == 0 {
        let mut committed = false;
        while d.exited.load(Ordering::Acquire) == 0 {
            if !committed && crate::cancel::acts_here(true) {
                if d.state.fetch_and(!JOIN_WAITING, Ordering::AcqRel) & EXITED == 0 {
                    outcome = Outcome::Cancelled;
                    break;
                }
                committed = true;
            }
            schedlab_rt::park();
        }
    }
    // Step 1 found `EXITED` (the exit never saw the bit), step 3 saw
    // `exited` (the exit is done with the word), or step 4 withdrew before
    // `EXITED`: nobody reads the word again.
    d.join_waiter.store(std::ptr::null_mut(), Ordering::Relaxed);
    outcome
}

/// Waits until `d`'s start routine is over ([`Outcome::Woken`]), until
/// `deadline` passes, or — when `cancel_point`, as in `pthread_join` — until
/// the caller is cancelled.
pub(crate) fn wait_exit(
    d: &ThreadData,
    deadline: Option<&crate::wait::Deadline>,
    cancel_point: bool,
) -> Outcome {
    while !d.has_exited() {
        let w = Waiter::new(0);
        let q = d.joiners();
        {
            let g = q.lock();
            if d.has_exited() {
                break;
            }
            g.push(&w);
        }
        let cancel = if cancel_point { Cancel::Point } else { Cancel::Never };
        match w.wait(&q, deadline, cancel) {
            Outcome::Woken | Outcome::Interrupted => {}
            Outcome::TimedOut if d.has_exited() => break,
            other => return other,
        }
    }
    Outcome::Woken
}

fn detach(d: &ThreadData) -> c_int {
    let mut s = d.state.load(Ordering::Acquire);
    loop {
        if s & (DETACHED | JOINING) != 0 {
            return libc::EINVAL;
        }
        match d.state.compare_exchange(s, s | DETACHED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(now) => s = now,
        }
    }
    if s & EXITED != 0 {
        list_for_reaping(d);
    }
    0
}

/// `pthread_detach`.
///
/// # Safety
///
/// C's contract for `pthread_detach`.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_detach(t: libc::pthread_t) -> c_int {
    match user_thread(t) {
        Some(d) => detach(d),
        None if gone(t) => libc::ESRCH,
        // SAFETY: forwarded unchanged to glibc.
        None => unsafe { next::pthread_detach()(t) },
    }
}

/// `pthread_exit`: on a user thread, the cleanup handlers, then an unwind to
/// the thread's base; on the initial thread, glibc's, after which the last
/// user thread to end ends the process.
///
/// # Safety
///
/// C's contract for `pthread_exit`.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_exit(value: *mut c_void) -> ! {
    let d = current();
    if d.kind.get() == Kind::User {
        d.value.store(value as usize, Ordering::Relaxed);
        crate::cancel::unwind(d)
    }
    MAIN_EXITED.store(1, Ordering::Release);
    if LIVE.load(Ordering::Acquire) == 0 {
        // SAFETY: exit(3): no thread of ours is left to wait for.
        unsafe { libc::exit(0) };
    }
    // SAFETY: glibc's pthread_exit on one of glibc's threads.
    unsafe { next::pthread_exit()(value) };
    unreachable!("pthread_exit returned")
}

/// Sets the value a joiner of `d` gets.
pub(crate) fn set_value(d: &ThreadData, v: *mut c_void) {
    d.value.store(v as usize, Ordering::Relaxed);
}

/// Wakes `d` if it is parked (a cancellation to act on).
pub(crate) fn unpark(d: &ThreadData) {
    crate::runtime::enter();
    if let Some(t) = d.rt_thread() {
        t.unpark();
    }
}

/// Ends the calling user thread with an unwind to its base (after the C
/// cleanup handlers, `cancel.rs`).
pub(crate) fn unwind_to_base() -> ! {
    std::panic::resume_unwind(Box::new(ExitUnwind))
}

/// `pthread_attr_setscope`: both scopes; a user thread is
/// `PTHREAD_SCOPE_PROCESS`, and a thread asked for with
/// `PTHREAD_SCOPE_SYSTEM` is a user thread too (the library's threads are
/// all scheduled by the runtime), which `pthread_attr_getscope` reports as
/// given.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_attr_setscope(
    attr: *mut libc::pthread_attr_t,
    scope: c_int,
) -> c_int {
    // SAFETY: glibc's attribute; `flags` is its third int (glibc's
    // `struct pthread_attr`, stable since 2.1).
    let flags = unsafe { attr.cast::<c_int>().add(2) };
    match scope {
        SCOPE_SYSTEM => {
            // SAFETY: as above.
            unsafe { *flags &= !ATTR_FLAG_SCOPEPROCESS };
            0
        }
        SCOPE_PROCESS => {
            // SAFETY: as above.
            unsafe { *flags |= ATTR_FLAG_SCOPEPROCESS };
            0
        }
        _ => libc::EINVAL,
    }
}

/// `pthread_attr_getscope` (see `pthread_attr_setscope`).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_attr_getscope(
    attr: *const libc::pthread_attr_t,
    scope: *mut c_int,
) -> c_int {
    // SAFETY: forwarded to glibc, which reads the flag we set.
    unsafe { next::pthread_attr_getscope()(attr, scope) }
}

/// `pthread_getattr_np`: a user thread's attributes as created, with the
/// stack it runs on once it has started (the runtime's, or the caller's from
/// `pthread_attr_setstack`); a kernel thread's from glibc.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_getattr_np(
    t: libc::pthread_t,
    attr: *mut libc::pthread_attr_t,
) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_getattr_np()(t, attr) };
    };
    // SAFETY: the caller's uninitialised attribute, which glibc initialises.
    unsafe {
        libc::pthread_attr_init(attr);
        let len = d.stack_len.load(Ordering::Acquire);
        if len > 0 {
            // The memory it runs on, as glibc reports a thread's (guard excluded).
            libc::pthread_attr_setstack(
                attr,
                d.stack_low.load(Ordering::Relaxed) as *mut c_void,
                len,
            );
        } else {
            libc::pthread_attr_setstacksize(attr, d.stack_size);
        }
        libc::pthread_attr_setguardsize(attr, d.guard_size);
        pthread_attr_setscope(attr, SCOPE_PROCESS);
        if d.state.load(Ordering::Acquire) & DETACHED != 0 {
            pthread_attr_setdetachstate(attr, libc::PTHREAD_CREATE_DETACHED);
        }
    }
    0
}

/// `pthread_setname_np`: a user thread's name is kept here (and shown by
/// `schedlab exec --trace`); a kernel thread's goes to the kernel.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_setname_np(
    t: libc::pthread_t,
    name: *const libc::c_char,
) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_setname_np()(t, name) };
    };
    // SAFETY: a NUL-terminated string (C's contract).
    let bytes = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
    if bytes.len() > 15 {
        return libc::ERANGE;
    }
    let mut n = [0u8; 16];
    n[..bytes.len()].copy_from_slice(bytes);
    *d.name.lock().unwrap() = n;
    0
}

/// `pthread_getname_np`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_getname_np(
    t: libc::pthread_t,
    buf: *mut libc::c_char,
    len: libc::size_t,
) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_getname_np()(t, buf, len) };
    };
    let n = *d.name.lock().unwrap();
    let used = n.iter().position(|&b| b == 0).unwrap_or(15);
    if len < used + 1 {
        return libc::ERANGE;
    }
    // SAFETY: the caller's buffer of `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(n.as_ptr(), buf.cast(), used + 1) };
    0
}

/// In the child after `fork`: the calling thread is the child's only one,
/// a kernel thread now, whatever it was in the parent.
pub(crate) fn after_fork_child() {
    let p = crate::tls::get();
    if p != 0 {
        // SAFETY: this thread's data.
        let d = unsafe { &*(p as *const ThreadData) };
        d.kind.set(Kind::Kernel);
    }
    LIVE.store(0, Ordering::Relaxed);
    MAIN_EXITED.store(0, Ordering::Relaxed);
    if let Ok(mut l) = REAP.try_lock() {
        l.clear();
        REAP_LISTED.store(false, Ordering::Release);
    }
}
