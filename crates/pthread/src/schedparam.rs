//! What glibc would answer from a thread's kernel identity: scheduling
//! policy and priority, CPU affinity, CPU-time clock, concurrency, and the
//! GNU join variants.
//!
//! glibc implements these on the target's kernel thread id; a user thread
//! has none of its own (its control block holds the process id, which would
//! make glibc act on the initial thread). So for a user thread:
//! - `pthread_setschedparam`/`getschedparam`/`setschedprio`: the policy and
//!   priority are kept and reported back as given (validated as glibc does:
//!   `EINVAL` for a priority outside the policy's range). A thread created
//!   with `SCHED_FIFO` or `SCHED_RR` runs as a real-time `High` thread of the
//!   runtime (`thread.rs`, `Builder::realtime`, `Builder::fifo`); a change here
//!   moves it in the runtime's queues as POSIX asks (`Thread::set_realtime`,
//!   the runtime's `realtime.rs`): a thread raised above the caller runs when
//!   the call returns, the caller lowering itself yields to a higher waiting
//!   thread and goes to the head of its new priority's list, and one running
//!   on another processor is preempted there to follow its new priority. A
//!   priority lent by a protocol mutex (`prio.rs`) is not reported: as on
//!   Linux, where a PI boost does not show in `sched_getparam`, and glibc's
//!   PP raise not in `pthread_getschedparam`. A change of a thread waiting on
//!   a PI mutex moves it in that queue and down the chain (`prio::adjust`).
//!   A kernel thread (glibc's) that `prio.rs` raised through the kernel
//!   reports, and is given by `pthread_setschedparam`, its own policy and
//!   priority, the one it goes back to.
//! - `pthread_getcpuclockid`: the user thread's own CPU clock, of itself or
//!   of another user thread (`cpuclock.rs`: a clock id the library reads
//!   from the runtime's per-thread accounting, which the call turns on for
//!   another thread, and the first reading for the caller's own).
//! - `pthread_setaffinity_np`/`getaffinity_np`: a user thread runs on the
//!   runtime's processors, which may run anywhere the process may: `get`
//!   reports the process's mask, `set` is `EINVAL` unless it allows every
//!   CPU the process has.
//! - `pthread_setconcurrency`: seed 003's `sa_setconcurrency` — the number
//!   of virtual processors, within what the runtime was built with.
//! - `pthread_tryjoin_np`, `pthread_timedjoin_np`, `pthread_clockjoin_np`.

use crate::thread::{gone, user_thread};
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

/// glibc's definitions.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_void};
    crate::glibc::real!(pthread_setschedparam: fn(libc::pthread_t, c_int, *const libc::sched_param) -> c_int);
    crate::glibc::real!(pthread_getschedparam: fn(libc::pthread_t, *mut c_int, *mut libc::sched_param) -> c_int);
    crate::glibc::real!(pthread_setschedprio: fn(libc::pthread_t, c_int) -> c_int);
    crate::glibc::real!(pthread_getcpuclockid: fn(libc::pthread_t, *mut libc::clockid_t) -> c_int);
    crate::glibc::real!(pthread_setaffinity_np: fn(libc::pthread_t, libc::size_t, *const libc::cpu_set_t) -> c_int);
    crate::glibc::real!(pthread_getaffinity_np: fn(libc::pthread_t, libc::size_t, *mut libc::cpu_set_t) -> c_int);
    crate::glibc::real!(pthread_tryjoin_np: fn(libc::pthread_t, *mut *mut c_void) -> c_int);
    crate::glibc::real!(pthread_timedjoin_np: fn(libc::pthread_t, *mut *mut c_void, *const libc::timespec) -> c_int);
    crate::glibc::real!(pthread_clockjoin_np: fn(libc::pthread_t, *mut *mut c_void, libc::clockid_t, *const libc::timespec) -> c_int);
}

fn valid(policy: c_int, prio: c_int) -> bool {
    // SAFETY: plain queries.
    let (lo, hi) =
        unsafe { (libc::sched_get_priority_min(policy), libc::sched_get_priority_max(policy)) };
    lo >= 0 && (lo..=hi).contains(&prio)
}

/// `pthread_setschedparam`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_setschedparam(
    t: libc::pthread_t,
    policy: c_int,
    param: *const libc::sched_param,
) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: the caller's parameter.
        let prio = unsafe { (*param).sched_priority };
        if crate::prio::used()
            && valid(policy, prio)
            && crate::prio::lock().set_kernel_own(t as usize, pack(policy, prio))
        {
            // A kernel thread a protocol mutex raised: what it goes back to.
            return 0;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_setschedparam()(t, policy, param) };
    };
    // SAFETY: the caller's parameter.
    let prio = unsafe { (*param).sched_priority };
    if !valid(policy, prio) {
        return libc::EINVAL;
    }
    d.sched.store(pack(policy, prio), Ordering::Relaxed);
    take_effect(d);
    crate::prio::adjust(d);
    0
}

/// Moves a user thread whose policy or priority was just recorded, or whose protocol
/// mutexes lend it another priority (`prio.rs`), in the runtime's queues
/// (`schedlab_rt::Thread::set_realtime`): `SCHED_FIFO` and `SCHED_RR` as real-time
/// `High` threads of their priority, the others as `Normal` ones; lent a higher priority
/// than its own, a thread runs at it, under `SCHED_FIFO` unless its own policy is
/// `SCHED_RR` (as Linux's PI futexes raise a `SCHED_OTHER` holder). A thread already
/// joined has nothing left to move.
pub(crate) fn take_effect(d: &crate::thread::ThreadData) {
    if let Some(t) = d.runtime_thread() {
        let (rt, fifo) = effective(d);
        t.set_realtime(rt, fifo);
    }
}

/// The real-time priority (0: none) and policy (`SCHED_FIFO`: true) `d` runs at now
/// ([`take_effect`]).
pub(crate) fn effective(d: &crate::thread::ThreadData) -> (u8, bool) {
    let sched = d.sched.load(Ordering::Relaxed);
    let (own, policy) = (wait_priority(sched), sched >> 16);
    let lent = d.lent.load(Ordering::Relaxed);
    let (rt, fifo) = if lent > own {
        (lent, policy != libc::SCHED_RR)
    } else {
        (own, policy == libc::SCHED_FIFO)
    };
    (rt.clamp(0, 255) as u8, fifo)
}

/// The place a thread with `sched` (as [`pack`]ed) takes in a wait queue:
/// its priority under `SCHED_FIFO` or `SCHED_RR`, 0 under the others (which
/// POSIX leaves unordered), so that a wake-up goes to the highest-priority
/// waiter as under glibc's real-time threads.
pub(crate) fn wait_priority(sched: i32) -> i32 {
    let policy = sched >> 16;
    if policy == libc::SCHED_FIFO || policy == libc::SCHED_RR {
        sched & 0xffff
    } else {
        0
    }
}

/// Policy and priority as one word (`ThreadData::sched`).
pub(crate) fn pack(policy: c_int, prio: c_int) -> i32 {
    (policy << 16) | (prio & 0xffff)
}

/// `pthread_getschedparam`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_getschedparam(
    t: libc::pthread_t,
    policy: *mut c_int,
    param: *mut libc::sched_param,
) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        if let Some(own) =
            crate::prio::used().then(|| crate::prio::lock().kernel_own(t as usize)).flatten()
        {
            // A kernel thread a protocol mutex raised: its own, as Linux reports a PI
            // boost's owner (and glibc a PP mutex's holder).
            // SAFETY: the caller's out-parameters.
            unsafe {
                *policy = own >> 16;
                (*param).sched_priority = own & 0xffff;
            }
            return 0;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_getschedparam()(t, policy, param) };
    };
    let v = d.sched.load(Ordering::Relaxed);
    // SAFETY: the caller's out-parameters.
    unsafe {
        *policy = v >> 16;
        (*param).sched_priority = v & 0xffff;
    }
    0
}

/// `pthread_setschedprio`.
#[no_mangle]
pub extern "C-unwind" fn pthread_setschedprio(t: libc::pthread_t, prio: c_int) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_setschedprio()(t, prio) };
    };
    let policy = d.sched.load(Ordering::Relaxed) >> 16;
    if !valid(policy, prio) {
        return libc::EINVAL;
    }
    d.sched.store(pack(policy, prio), Ordering::Relaxed);
    take_effect(d);
    crate::prio::adjust(d);
    0
}

/// `pthread_getcpuclockid`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_getcpuclockid(
    t: libc::pthread_t,
    clock: *mut libc::clockid_t,
) -> c_int {
    match user_thread(t) {
        Some(d) => match crate::cpuclock::clock_of(d) {
            Ok(c) => {
                // SAFETY: the caller's out-parameter.
                unsafe { *clock = c };
                0
            }
            Err(e) => e,
        },
        None if gone(t) => libc::ESRCH,
        // SAFETY: forwarded unchanged.
        None => unsafe { next::pthread_getcpuclockid()(t, clock) },
    }
}

fn process_affinity(set: &mut libc::cpu_set_t) -> bool {
    // SAFETY: the process's (main thread's) mask into a set on the caller's stack.
    unsafe {
        libc::sched_getaffinity(libc::getpid(), std::mem::size_of::<libc::cpu_set_t>(), set) == 0
    }
}

/// `pthread_getaffinity_np`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_getaffinity_np(
    t: libc::pthread_t,
    size: libc::size_t,
    set: *mut libc::cpu_set_t,
) -> c_int {
    if user_thread(t).is_none() {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_getaffinity_np()(t, size, set) };
    }
    // SAFETY: a zeroed set is valid.
    let mut all: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if !process_affinity(&mut all) {
        return libc::EINVAL;
    }
    let n = size.min(std::mem::size_of::<libc::cpu_set_t>());
    // SAFETY: the caller's set of `size` bytes; we copy at most ours.
    unsafe {
        std::ptr::write_bytes(set.cast::<u8>(), 0, size);
        std::ptr::copy_nonoverlapping(
            (&all as *const libc::cpu_set_t).cast::<u8>(),
            set.cast::<u8>(),
            n,
        );
    }
    0
}

/// `pthread_setaffinity_np`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_setaffinity_np(
    t: libc::pthread_t,
    size: libc::size_t,
    set: *const libc::cpu_set_t,
) -> c_int {
    if user_thread(t).is_none() {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_setaffinity_np()(t, size, set) };
    }
    // SAFETY: a zeroed set is valid.
    let mut all: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if !process_affinity(&mut all) {
        return libc::EINVAL;
    }
    for cpu in 0..(8 * std::mem::size_of::<libc::cpu_set_t>()).min(8 * size) {
        // SAFETY: a CPU index within both sets.
        let (want, have) = unsafe { (libc::CPU_ISSET(cpu, &*set), libc::CPU_ISSET(cpu, &all)) };
        if have && !want {
            return libc::EINVAL;
        }
    }
    0
}

static CONCURRENCY: AtomicI32 = AtomicI32::new(0);

/// `pthread_setconcurrency`: the number of virtual processors (0: the
/// runtime's choice), within what it was built with.
#[no_mangle]
pub extern "C-unwind" fn pthread_setconcurrency(level: c_int) -> c_int {
    if level < 0 {
        return libc::EINVAL;
    }
    CONCURRENCY.store(level, Ordering::Relaxed);
    if let (Some(rt), true) = (crate::runtime::enter(), level > 0) {
        let n = (level as usize).min(rt.max_processors());
        if rt.set_processors(n).is_err() {
            return libc::EAGAIN;
        }
    }
    0
}

/// `pthread_getconcurrency`: the last level set (0 if none), as POSIX asks.
#[no_mangle]
pub extern "C-unwind" fn pthread_getconcurrency() -> c_int {
    CONCURRENCY.load(Ordering::Relaxed)
}

/// `pthread_tryjoin_np`: `EBUSY` while the thread runs.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_tryjoin_np(
    t: libc::pthread_t,
    ret: *mut *mut std::ffi::c_void,
) -> c_int {
    match user_thread(t) {
        // SAFETY: joining a thread that has exited does not wait.
        Some(d) if d.has_exited() => unsafe { crate::thread::pthread_join(t, ret) },
        Some(_) => libc::EBUSY,
        None if gone(t) => libc::ESRCH,
        // SAFETY: forwarded unchanged.
        None => unsafe { next::pthread_tryjoin_np()(t, ret) },
    }
}

/// `pthread_timedjoin_np`: as `pthread_clockjoin_np` on `CLOCK_REALTIME`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_timedjoin_np(
    t: libc::pthread_t,
    ret: *mut *mut std::ffi::c_void,
    abstime: *const libc::timespec,
) -> c_int {
    if user_thread(t).is_none() {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_timedjoin_np()(t, ret, abstime) };
    }
    // SAFETY: forwarded to ours.
    unsafe { pthread_clockjoin_np(t, ret, libc::CLOCK_REALTIME, abstime) }
}

/// `pthread_clockjoin_np`: waits until the thread exits or `abstime` on
/// `clock` passes (`ETIMEDOUT`).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_clockjoin_np(
    t: libc::pthread_t,
    ret: *mut *mut std::ffi::c_void,
    clock: libc::clockid_t,
    abstime: *const libc::timespec,
) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_clockjoin_np()(t, ret, clock, abstime) };
    };
    if abstime.is_null() {
        // SAFETY: forwarded to ours.
        return unsafe { crate::thread::pthread_join(t, ret) };
    }
    // SAFETY: the caller's time.
    let at = unsafe { *abstime };
    if !crate::wait::Deadline::valid(&at) {
        return libc::EINVAL;
    }
    let deadline = crate::wait::Deadline { clock, at };
    match crate::thread::wait_exit(d, Some(&deadline), false) {
        // SAFETY: exited: the join does not wait.
        crate::wait::Outcome::Woken => unsafe { crate::thread::pthread_join(t, ret) },
        _ => libc::ETIMEDOUT,
    }
}
