//! A processor that stays busy while a user thread blocks in the kernel: the
//! hand-off of a virtual processor to a spare kernel thread, the explicit
//! [`blocking`] call, and the detached state of a user thread whose kernel
//! thread lost its processor.
//!
//! Linux has no upcalls (seed 003's BLOCKED/UNBLOCKED; UMCG was never
//! merged), so the runtime does what the Go runtime does (`entersyscall`,
//! `exitsyscall`, sysmon's `retake` and `handoffp`; docs/SOURCES.md): a
//! monitor thread (`monitor.rs`) notices a kernel thread that stopped running
//! while work waits, and gives its processor to another kernel thread.
//!
//! # States of a processor
//!
//! `Processor::status` (`handoff.rs`, with its loom model): `RUNNING` (its
//! machine uses it), `SYSCALL` (its machine is inside [`blocking`]),
//! `RELEASED` (no machine).
//!
//! # The hand-off, explicit and transparent
//!
//! 1. **Detach.** The kernel thread `K` running user thread `T` on processor
//!    `P` takes `T` out of `P.current` into `K`'s machine (`detached`) and
//!    forgets `P` (`Machine::processor` = null). Explicitly, in [`blocking`]
//!    before the call, leaving `P` in `SYSCALL`. Transparently, in `K`'s
//!    signal handler, when the monitor saw `K` blocked (its CPU clock stopped
//!    while `T` was current and work waited) and asked (`REQ_RELEASE`): the
//!    handler runs only where no runtime section is open on `K` (the
//!    counter of `machine.rs` is zero), so nothing on `K`'s stack holds `P`;
//!    it leaves `P` `RELEASED`.
//! 2. **Retake.** The monitor moves `P` from `SYSCALL` to `RELEASED` by CAS
//!    (a `blocking` call that lasted past the threshold with work waiting);
//!    `K` is still blocked, and promised not to touch `P` unless its own CAS
//!    from `SYSCALL` succeeds, so exactly one of the two owns `P`.
//! 3. **Hand-off.** The monitor moves `P` from `RELEASED` to `RUNNING` by CAS
//!    and gives it to a spare machine, kept ahead in a small pool (like
//!    NetBSD's pre-allocated spare LWP, seed 003) so that the hand-off never
//!    waits for thread creation. The spare binds `P` (`Processor::machine`)
//!    and runs its scheduler loop on its own native stack: `P`'s queue runs on.
//! 4. **Return.** When the call returns, `K` runs `T` with no processor.
//!    Explicitly, [`blocking`]'s CAS `SYSCALL` → `RUNNING` fails; `K` tries to
//!    take a `RELEASED` processor (its own first: the monitor may not have
//!    handed it yet); failing that, it queues `T` on the runtime's injection
//!    queue and parks as a spare. Transparently, `T`'s next runtime call does
//!    the same (every entry point checks for a detached thread on its slow
//!    path), or the monitor, seeing `K`'s CPU clock run again and `K`
//!    running (not blocked in the kernel again: a loop of plain blocking
//!    calls runs on as an OS thread would), asks it to rejoin
//!    (`REQ_REJOIN`) and the preemption trampoline does it at a safe
//!    point. So the kernel threads running user code stay `P`, up to the
//!    monitor's reaction time for a thread that returns and computes.
//!
//! Why it is correct: a processor is used by at most one machine, because
//! each transition that gives it a user is a CAS that only one party wins
//! (`SYSCALL` → `RUNNING` by the blocked machine or → `RELEASED` by the
//! monitor; `RELEASED` → `RUNNING` by a spare or a returning machine), and the
//! one that gives it up (detach) is done by its only user. A detached thread
//! is run by exactly one kernel thread, its own, until it leaves it through
//! the switch protocol (`processor/switch.rs`), with its pending action kept
//! by the machine and run by that machine's native context, which queues it
//! on the injection queue instead of a processor's.

//! # Telling blocked from descheduled
//!
//! A kernel thread's CPU clock also stands still when it is runnable but the
//! kernel runs something else (more runtime threads than CPUs, a noisy
//! neighbour, a hypervisor). The monitor reads its `/proc` state first: `R`
//! is a processor the kernel took away (`ProcessorLost`), not a blocked one.

use crate::event::{Detection, Event};
use crate::machine::Machine;
use crate::park::Kind;
use crate::processor::{self, bind, complete_leave, Pending, ProcPtr, Processor};
use crate::stack::Stack;
use crate::state::Shared;
use crate::task::{Task, TaskRef, WaitReason};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub(crate) use crate::handoff::{RELEASED, RUNNING, SYSCALL};

/// Runs `f`, a call that may block in the kernel, without holding up the
/// calling user thread's processor: if `f` blocks for longer than the
/// runtime's detection threshold while other work waits, the processor goes
/// to another kernel thread, and this user thread queues for a processor
/// again when `f` returns. A call that returns quickly costs a few atomic
/// operations and no system call of ours. On an OS thread, just calls `f`.
///
/// Inside `f` the calling thread behaves as a detached one: runtime calls
/// work, but a wake-up it causes goes through the injection queue.
#[inline]
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let entered = enter_syscall();
    let r = f();
    if let Some(word) = entered {
        exit_syscall(word);
    }
    r
}

/// Step 1 (explicit): detach the current user thread, leaving its processor
/// in `SYSCALL`. Returns the status word it set, or `None` (nothing done)
/// when not on a processor.
#[inline(never)]
#[link_section = "schedlab_rt_np"]
fn enter_syscall() -> Option<u32> {
    let m = Machine::enter_section();
    let p = m.processor();
    if p.is_null() {
        m.lower_quietly();
        return None;
    }
    // SAFETY: our processor, within a raised section.
    let vp = unsafe { &*p };
    let Some(t) = vp.take_current() else {
        m.lower_quietly();
        return None;
    };
    m.detached.store(t.into_raw().as_ptr(), Ordering::Relaxed);
    m.last_processor.store(p.cast_mut(), Ordering::Relaxed);
    m.explicit.store(true, Ordering::Relaxed);
    m.set_processor(std::ptr::null());
    // SAFETY: the thread just detached: the caller, alive.
    let id = unsafe { &*m.detached.load(Ordering::Relaxed) }.id;
    vp.detached_id.store(id.as_u64(), Ordering::Relaxed);
    vp.count_switch();
    // Publishes the detach to the monitor's CAS (step 2).
    let word = vp.status.enter_syscall();
    // A preemption deferred inside this section is moot: the thread is about
    // to block, and has no processor to give up. A program's signal handler
    // deferred inside it runs now, before the call (`shared.rs`).
    m.clear_deferred();
    m.lower_quietly();
    #[cfg(feature = "shared-library")]
    crate::shared::hand_over_deferred_signals(m);
    Some(word)
}

/// Step 4 (explicit): take the processor back, or another, or queue.
#[inline(never)]
#[link_section = "schedlab_rt_np"]
fn exit_syscall(word: u32) {
    let m = Machine::enter_section();
    m.explicit.store(false, Ordering::Relaxed);
    let p = m.last_processor.load(Ordering::Relaxed);
    // SAFETY: processors outlive the machines' use of them.
    let vp = unsafe { &*p };
    if vp.status.exit_syscall(word) {
        // Plain load and store: only this kernel thread touches its `detached`
        // (a swap is a locked instruction on x86).
        let t = m.detached.load(Ordering::Relaxed);
        m.detached.store(std::ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the reference `enter_syscall` stored.
        vp.set_current(unsafe { TaskRef::from_raw(NonNull::new_unchecked(t)) });
        m.set_processor(p);
        vp.count_switch();
        m.lower();
        return;
    }
    m.lower_quietly();
    rejoin(Detection::Explicit);
}

/// Takes the detached thread's running reference (at its exit; `m` is the
/// calling thread's machine, in a section).
///
/// A thread that returned from the kernel and exits before any runtime call
/// (or the monitor's `REQ_REJOIN`) would rejoin never does: its `Unblocked`
/// is emitted here, queued-style (`processor: None`), so that the `Blocked`
/// the monitor emits for it (now or later) has its pair.
pub(crate) fn take_detached(m: &Machine) -> TaskRef {
    let t = m.detached.load(Ordering::Relaxed);
    m.detached.store(std::ptr::null_mut(), Ordering::Relaxed);
    if !t.is_null() {
        // SAFETY: the detached thread is the caller: alive.
        let task = unsafe { &*t };
        if let Some(h) = &task.shared.hook {
            let detection = if m.explicit.load(Ordering::Relaxed) {
                Detection::Explicit
            } else {
                Detection::Transparent
            };
            h(&Event::Unblocked { thread: task.id, processor: None, detection });
        }
        // The native context uncounts the machine once the exit is done.
        let shared = task.shared.arc();
        m.exit_shared.store(Arc::into_raw(shared).cast_mut(), Ordering::Relaxed);
    }
    // SAFETY: the owned reference stored at the detach.
    unsafe { TaskRef::from_raw(NonNull::new(t).expect("exit on a detached thread")) }
}

/// Step 4 for a detached thread at a safe point (a runtime call, or the
/// preemption trampoline after `REQ_REJOIN`): binds a released processor and
/// goes on, or queues itself and leaves its kernel thread to be a spare.
#[inline(never)]
#[link_section = "schedlab_rt_np"]
pub(crate) fn rejoin(how: Detection) {
    rejoin_in(Machine::enter_section(), how);
}

/// [`rejoin`] in a section already open on `m`, the caller's machine.
pub(crate) fn rejoin_in(m: &'static Machine, how: Detection) {
    let t = m.detached.load(Ordering::Relaxed);
    if t.is_null() {
        m.lower();
        return;
    }
    // SAFETY: the detached thread is the caller: alive.
    let task = unsafe { &*t };
    let shared: &Shared = &task.shared;
    let last = m.last_processor.load(Ordering::Relaxed);
    if let Some(vp) = take_released(shared, last) {
        m.detached.store(std::ptr::null_mut(), Ordering::Relaxed);
        bind(m, vp);
        uncount_detached(shared, m);
        // SAFETY: the reference stored at the detach.
        vp.set_current(unsafe { TaskRef::from_raw(NonNull::new_unchecked(t)) });
        vp.in_user.store(true, Ordering::Relaxed);
        crate::ring::event(crate::ring::Event::Rejoined, vp.index as u64);
        vp.emit(|| Event::Unblocked { thread: task.id, processor: Some(vp.index), detection: how });
        m.lower();
        return;
    }
    if let Some(h) = &shared.hook {
        h(&Event::Unblocked { thread: task.id, processor: None, detection: how });
    }
    crate::ring::event(crate::ring::Event::RejoinQueued, task.id.as_u64());
    leave(m, Pending::Requeue);
}

/// Binds a `RELEASED` processor of `shared`: `first` if it is, else any;
/// active ones only (a removed one is for the monitor to hand to a spare,
/// which retires it: `runtime.rs`, "Resizing").
fn take_released(shared: &Shared, first: *mut Processor) -> Option<&Processor> {
    let try_take = |p: *const Processor| {
        // SAFETY: processors live as long as the runtime's machines.
        let vp = unsafe { &*p };
        (shared.is_active(vp.index) && vp.status.take_released()).then_some(vp)
    };
    // SAFETY: as above.
    if !first.is_null() && std::ptr::eq(unsafe { &*first }.shared.as_ref(), shared) {
        if let Some(vp) = try_take(first) {
            return Some(vp);
        }
    }
    shared.processors().iter().find_map(|p| try_take(p.0))
}

/// Leaves the calling kernel thread: the detached thread switches to its
/// machine's native context, which completes `make(thread)` with no
/// processor (queues it on the injection queue when it stays runnable).
/// Returns when the thread is resumed, on some processor. The caller has
/// raised the section counter; the resuming context lowers it.
fn leave(m: &Machine, make: impl FnOnce(TaskRef) -> Pending) {
    let t = m.detached.load(Ordering::Relaxed);
    m.detached.store(std::ptr::null_mut(), Ordering::Relaxed);
    // SAFETY: the reference stored at the detach.
    let t = unsafe { TaskRef::from_raw(NonNull::new_unchecked(t)) };
    let save = t.ctx.get();
    // SAFETY: only this kernel thread touches `leave`; the native context
    // takes it right after the switch.
    unsafe { (*m.leave.get()).write(make(t)) };
    // SAFETY: `save` is the leaving thread's slot, kept alive by the pending
    // action; the native context of this machine is suspended (a detached
    // machine's only other context) and resumes knowing nothing is passed.
    let vp = unsafe { crate::arch::switch(save, *m.sched_ctx.get(), std::ptr::null_mut()) };
    // SAFETY: resumed by a processor, which passes itself.
    unsafe { processor::after_switch(vp) };
}

/// The native context's half of [`leave`] (run right after the switch).
pub(crate) fn after_detached_leave(m: &Machine) {
    // SAFETY: written by `leave` just before the switch that resumed us.
    let pending = unsafe { (*m.leave.get()).assume_init_read() };
    let shared = match &pending {
        Pending::Requeue(t)
        | Pending::Park(t, _)
        | Pending::Join(t, _)
        | Pending::ParkUnlock(t, _) => Some(t.shared.clone_counted()),
        _ => None,
    };
    complete_leave(pending, None);
    // The thread is parked or queued now (or gone): no longer outside.
    if let Some(shared) = shared {
        uncount_detached(&shared, m);
    } else {
        let raw = m.exit_shared.swap(std::ptr::null_mut(), Ordering::Relaxed);
        if !raw.is_null() {
            // SAFETY: `Arc::into_raw` by the exiting thread (`take_detached`).
            let shared = unsafe { Arc::from_raw(raw) };
            uncount_detached(&shared, m);
        }
    }
    m.lower_quietly();
}

/// A detached thread's park (section open on `m`): leaves the kernel thread
/// parked.
pub(crate) fn detached_park(m: &'static Machine, kind: Kind, reason: WaitReason) {
    let t = NonNull::new(m.detached.load(Ordering::Relaxed)).expect("a detached thread");
    // SAFETY: the caller.
    let task = unsafe { t.as_ref() };
    if task.park.try_take(kind) {
        m.lower();
        return;
    }
    task.set_wait_reason(reason);
    leave(m, |t| Pending::Park(t, kind));
}

/// A detached thread's join (section open on `m`).
pub(crate) fn detached_join(m: &'static Machine, target: &Task) {
    let t = NonNull::new(m.detached.load(Ordering::Relaxed)).expect("a detached thread");
    // SAFETY: the caller.
    unsafe { t.as_ref() }.set_wait_reason(WaitReason::Join(target.id));
    leave(m, |t| Pending::Join(t, NonNull::from(target)));
}

/// A detached thread's park in a wait queue whose lock it holds (section
/// open on `m`).
pub(crate) fn detached_park_unlocking(
    m: &'static Machine,
    lock: NonNull<AtomicBool>,
    reason: WaitReason,
) {
    let t = NonNull::new(m.detached.load(Ordering::Relaxed)).expect("a detached thread");
    // SAFETY: the caller.
    unsafe { t.as_ref() }.set_wait_reason(reason);
    leave(m, |t| Pending::ParkUnlock(t, lock));
}

/// The last switch of a detached thread that has completed (`entry.rs`),
/// with the section its exit opened still open.
pub(crate) fn exit_detached(stack: Stack) -> ! {
    // The section is open: this kernel thread cannot have changed since.
    let m = Machine::here_fresh();
    let mut scratch: crate::arch::StackPointer = std::ptr::null_mut();
    // SAFETY: only this kernel thread touches `leave`.
    unsafe { (*m.leave.get()).write(Pending::Exit(stack)) };
    // SAFETY: our context is never resumed (saved into a local of the stack
    // being recycled, written before the switch and never read); the native
    // context frees the stack after the switch.
    unsafe { crate::arch::switch(&mut scratch, *m.sched_ctx.get(), std::ptr::null_mut()) };
    unreachable!("an exited user thread was resumed")
}

/// Step 1 (transparent), in the signal handler of a kernel thread the monitor
/// saw blocked. Async-signal-safe: atomics and one futex wake.
pub(crate) fn release_from_signal(m: &Machine, pc: usize) {
    if m.guard_word() != 0 || crate::preempt::in_section_opener(pc) {
        // Blocked inside a runtime section (or one is open): not now.
        return;
    }
    let p = m.processor();
    if p.is_null() {
        return;
    }
    // SAFETY: our processor; no runtime section is open on this thread, so
    // the interrupted code holds no reference into it.
    let vp = unsafe { &*p };
    let Some(t) = vp.take_current() else { return };
    count_detached(&vp.shared, m);
    m.detached.store(t.into_raw().as_ptr(), Ordering::Relaxed);
    m.last_processor.store(p.cast_mut(), Ordering::Relaxed);
    m.set_processor(std::ptr::null());
    // SAFETY: the thread just detached, alive.
    vp.detached_id
        .store(unsafe { &*m.detached.load(Ordering::Relaxed) }.id.as_u64(), Ordering::Relaxed);
    vp.in_user.store(false, Ordering::Relaxed);
    vp.machine.store(std::ptr::null_mut(), Ordering::Relaxed);
    vp.count_switch();
    vp.status.release();
    crate::ring::event(crate::ring::Event::Released, vp.index as u64);
    vp.shared.monitor.poke();
}

/// A spare machine's wait for a processor (step 3); `None` at shutdown.
pub(crate) fn wait_as_spare(m: &'static Machine, shared: &Shared) -> Option<*const Processor> {
    if !shared.spares.add(m) {
        return None;
    }
    // The mask of the user thread it carried, which a process-directed
    // signal must not find on a kernel thread that runs none (`shared.rs`).
    #[cfg(feature = "shared-library")]
    crate::shared::quiet_signals();
    loop {
        if shared.shutdown.load(Ordering::Acquire) {
            shared.spares.remove(m);
            return None;
        }
        let p = m.assigned.swap(std::ptr::null_mut(), Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: a processor of the runtime, alive as long as its machines.
            crate::ring::event(crate::ring::Event::Assigned, unsafe { &*p }.index as u64);
            return Some(p);
        }
        // No timeout: an assignment and shutdown both notify, and a notify
        // before the wait makes it return at once.
        m.wait_assigned(None);
    }
}

/// Step 3, by the monitor: gives `p` (`RELEASED`) to a spare, or to a new
/// kernel thread when no spare waits. Returns `false` if someone took it
/// meanwhile.
pub(crate) fn hand_off(shared: &Arc<Shared>, p: ProcPtr) -> bool {
    // SAFETY: a processor of the runtime.
    let vp = unsafe { &*p.0 };
    if !vp.status.take_released() {
        return false;
    }
    crate::ring::event(crate::ring::Event::HandOff, vp.index as u64);
    match shared.spares.take() {
        Some(spare) => {
            spare.assigned.store(p.0.cast_mut(), Ordering::Release);
            spare.notify();
            // Keep one ahead, so the next hand-off does not wait for a
            // thread to be created either.
            if shared.spares.is_empty() {
                shared.start_machine(None);
            }
        }
        None => shared.start_machine(Some(p)),
    }
    true
}

/// Step 2, by the monitor: retakes `p` from a machine in [`blocking`].
///
/// `p.machine` is left alone: the blocked machine may take a released `p`
/// back at once (`take_released`) and bind it, and a late store here would
/// undo that binding. The machine (still `p.machine` when this starts) is
/// counted as detached before the CAS and uncounted if the CAS fails, so the
/// deadlock check never runs while it runs user code outside the processors.
pub(crate) fn retake(shared: &Shared, p: &Processor) -> bool {
    let m = p.machine.load(Ordering::Relaxed);
    // SAFETY: machines outlive the monitor's use of them.
    let m = (!m.is_null()).then(|| unsafe { &*m });
    if let Some(m) = m {
        count_detached(shared, m);
    }
    if p.status.retake() {
        return true;
    }
    if let Some(m) = m {
        uncount_detached(shared, m);
    }
    false
}

/// Counts `m` among the machines that run a user thread outside every
/// processor (the deadlock check waits until there is none: such a thread may
/// wake others, or be between two states the check reads). Async-signal-safe.
fn count_detached(shared: &Shared, m: &Machine) {
    m.counted.store(true, Ordering::Relaxed);
    shared.detached.fetch_add(1, Ordering::SeqCst);
}

/// Undoes [`count_detached`] for `m`, once.
fn uncount_detached(shared: &Shared, m: &Machine) {
    if m.counted.swap(false, Ordering::AcqRel) {
        shared.detached.fetch_sub(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------
// Ready-made wrappers: the common blocking system calls through [`blocking`],
// retrying `EINTR` (the preemption and hand-off signal may interrupt them).
// ---------------------------------------------------------------------------

/// Runs a system call that returns -1 with `errno` on failure, through
/// [`blocking`], retrying `EINTR`.
fn retry<T: PartialEq + From<i8> + Copy>(mut call: impl FnMut() -> T) -> std::io::Result<T> {
    blocking(|| loop {
        let r = call();
        if r != T::from(-1) {
            return Ok(r);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    })
}

/// `read(2)` through [`blocking`]: bytes read into `buf`.
pub fn read(fd: std::os::fd::RawFd, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    retry(|| unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }).map(|n| n as usize)
}

/// `write(2)` through [`blocking`]: bytes written from `buf`.
pub fn write(fd: std::os::fd::RawFd, buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: `buf` is valid for reads of its length.
    retry(|| unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) }).map(|n| n as usize)
}

/// `recv(2)` through [`blocking`].
pub fn recv(fd: std::os::fd::RawFd, buf: &mut [u8], flags: i32) -> std::io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    retry(|| unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) })
        .map(|n| n as usize)
}

/// `send(2)` through [`blocking`].
pub fn send(fd: std::os::fd::RawFd, buf: &[u8], flags: i32) -> std::io::Result<usize> {
    // SAFETY: `buf` is valid for reads of its length.
    retry(|| unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) }).map(|n| n as usize)
}

/// `accept4(2)` through [`blocking`] (address not returned): the new socket.
pub fn accept(fd: std::os::fd::RawFd, flags: i32) -> std::io::Result<std::os::fd::RawFd> {
    // SAFETY: null address and length are allowed.
    retry(|| unsafe { libc::accept4(fd, std::ptr::null_mut(), std::ptr::null_mut(), flags) })
}

/// `connect(2)` through [`blocking`].
///
/// # Safety
///
/// `addr` must point to a socket address of `len` bytes.
pub unsafe fn connect(
    fd: std::os::fd::RawFd,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> std::io::Result<()> {
    // SAFETY: the caller's guarantee. (A connect interrupted and retried may
    // report EALREADY/EISCONN; the caller sees it as the kernel said.)
    retry(|| unsafe { libc::connect(fd, addr, len) }).map(|_| ())
}

/// `poll(2)` through [`blocking`]: descriptors ready. An interrupted poll is
/// retried with the whole timeout.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> std::io::Result<usize> {
    // SAFETY: `fds` is valid for its length.
    retry(|| unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) })
        .map(|n| n as usize)
}

/// Sleeps for `d` in the kernel (`clock_nanosleep`) through [`blocking`],
/// resuming after interruptions until the whole time has passed. (The
/// runtime's own [`sleep`](crate::sleep) parks the user thread instead and
/// costs no kernel thread.)
pub fn nanosleep(d: std::time::Duration) {
    let deadline = std::time::Instant::now() + d;
    blocking(|| loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        let ts = libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a valid timespec on our stack; no remainder wanted.
        unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &ts, std::ptr::null_mut()) };
    })
}

/// `waitpid(2)` through [`blocking`]: the child's pid and its status.
pub fn waitpid(pid: libc::pid_t, options: i32) -> std::io::Result<(libc::pid_t, i32)> {
    let mut status = 0;
    // SAFETY: `status` is ours to write.
    let p = retry(|| unsafe { libc::waitpid(pid, &mut status, options) })?;
    Ok((p, status))
}

/// `open(2)` through [`blocking`] (slow on network file systems and FIFOs).
pub fn open(path: &std::ffi::CStr, flags: i32, mode: libc::mode_t) -> std::io::Result<i32> {
    // SAFETY: a NUL-terminated path.
    retry(|| unsafe { libc::open(path.as_ptr(), flags, mode as libc::c_uint) })
}

/// `fsync(2)` through [`blocking`].
pub fn fsync(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: fsync takes any descriptor.
    retry(|| unsafe { libc::fsync(fd) }).map(|_| ())
}
