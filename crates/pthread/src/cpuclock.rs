//! A user thread's CPU-time clock: `clock_gettime` and `clock_getres` of
//! `CLOCK_THREAD_CPUTIME_ID` on a user thread and of the clock
//! `pthread_getcpuclockid` gives for one, `getrusage(RUSAGE_THREAD)`, and
//! `timer_create` refused on them.
//!
//! glibc answers all of these from the calling kernel thread's clock, which
//! on a user thread counts every user thread that kernel thread ran and
//! jumps when the thread migrates. Here they read the thread's own CPU
//! time, which the runtime accounts per stint on a processor
//! (`schedlab_rt::Thread::cpu_time`; its `cputime.rs` says what is counted).
//! The runtime accounts for a thread from the first request for its time
//! on — the first reading of its clock or `getrusage`, or
//! `pthread_getcpuclockid` of it by another thread — so a switch between
//! threads nobody asked about costs nothing more (the Java virtual machine
//! takes its main thread's clock id at start and asks
//! `getrusage(RUSAGE_THREAD)` of its garbage collector's threads); the time
//! before is not counted (a thread's clock starts at zero then), and the
//! difference of two readings is exact.
//!
//! # The clock ids
//!
//! glibc gives a thread's clock as Linux encodes it: `(~tid << 3) | 6`
//! (per-thread bit 4, clock type 2, `CPUCLOCK_SCHED`). A user thread has no
//! kernel thread id of its own, so its clock is `(~k << 3) | 7`: the same
//! layout with clock type 3, `CPUCLOCK_MAX`, which the kernel refuses for
//! every id (`posix-cpu-timers.c`, `validate_clock_permissions`), so it can
//! never be a real clock, and passed on to glibc or the kernel (a call this
//! library does not stand in front of) it fails with `EINVAL`. `k`, in
//! `1..2^28`, is the thread's library number ([`ThreadData::id`]) folded into
//! that range; like a kernel thread id, it names a new thread again after
//! 2^28 threads. The numbers in use are kept in a small table, entered by
//! `pthread_getcpuclockid` and left when the thread's data is freed.
//!
//! # What costs what
//!
//! `clock_gettime` is the hot one (a program's timing loop): on any clock
//! but the thread CPU clocks it is one compare and a jump to glibc's
//! (`CLOCK_THREAD_CPUTIME_ID` is 3, the CPU clocks are negative, and one
//! unsigned compare of `clock ^ 3` tells both from the rest).
//!
//! [`ThreadData::id`]: crate::thread::ThreadData

use crate::thread::{user_path, user_thread, ThreadData};
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// glibc's definitions of what this file stands in front of.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_void};
    crate::glibc::real!(clock_gettime: fn(libc::clockid_t, *mut libc::timespec) -> c_int);
    crate::glibc::real!(clock_getres: fn(libc::clockid_t, *mut libc::timespec) -> c_int);
    crate::glibc::real!(getrusage: fn(c_int, *mut libc::rusage) -> c_int);
    crate::glibc::real!(timer_create: fn(libc::clockid_t, *mut libc::sigevent, *mut libc::timer_t) -> c_int);
}

/// The numbers `k` of the user threads whose clock was given out, with the
/// thread's library number and control block.
static CLOCKS: Mutex<BTreeMap<u32, (u32, usize)>> = Mutex::new(BTreeMap::new());
/// [`CLOCKS`] has ever held one: a thread's end looks no further otherwise.
static ANY: AtomicBool = AtomicBool::new(false);

/// How many thread numbers the encoding holds: `~k << 3` stays a negative
/// `i32` for `k < 2^28`.
const SPAN: u32 = (1 << 28) - 1;

/// The number in `1..2^28` a thread's clock carries.
fn fold(id: u32) -> u32 {
    (id - 1) % SPAN + 1
}

/// The clock id of user-thread number `k`.
fn encode(k: u32) -> libc::clockid_t {
    (!(k as i32) << 3) | 7
}

/// The user-thread number a clock id of ours carries.
fn decode(clock: libc::clockid_t) -> Option<u32> {
    (clock < 0 && clock & 7 == 7).then_some(!(clock >> 3) as u32)
}

/// The clock id of user thread `d`, for `pthread_getcpuclockid`. For
/// another thread than the caller, accounts for it from here (or from the
/// safe point a preemption request finds if it runs on another processor
/// now): the id may be read only once, at the thread's end. The caller's own
/// is accounted from its first reading, as `CLOCK_THREAD_CPUTIME_ID` is: the
/// Java virtual machine takes its main thread's id at start, to see whether
/// thread CPU clocks work, and seldom reads it. `ESRCH` for a thread already
/// joined.
pub(crate) fn clock_of(d: &ThreadData) -> Result<libc::clockid_t, c_int> {
    let t = d.runtime_thread().ok_or(libc::ESRCH)?;
    if !user_path() || crate::thread::current().tcb != d.tcb {
        t.cpu_time();
    }
    let k = fold(d.id);
    CLOCKS.lock().unwrap_or_else(|e| e.into_inner()).insert(k, (d.id, d.tcb));
    ANY.store(true, Ordering::Relaxed);
    Ok(encode(k))
}

/// Forgets the clock of thread `d`, whose data is being freed.
pub(crate) fn forget(d: &ThreadData) {
    if !ANY.load(Ordering::Relaxed) {
        return;
    }
    let mut clocks = CLOCKS.lock().unwrap_or_else(|e| e.into_inner());
    let k = fold(d.id);
    if clocks.get(&k).is_some_and(|&(id, _)| id == d.id) {
        clocks.remove(&k);
    }
}

/// The runtime's handle of the user thread whose clock `clock` is, if it
/// names one: the caller's for `CLOCK_THREAD_CPUTIME_ID` on a user thread,
/// the thread numbered in one of ours. `Err(EINVAL)` for one of ours whose
/// thread is gone; `Ok(None)` for every other clock (glibc's).
fn thread_of(clock: libc::clockid_t) -> Result<Option<schedlab_rt::Thread>, c_int> {
    if clock == libc::CLOCK_THREAD_CPUTIME_ID {
        if !user_path() {
            return Ok(None);
        }
        return Ok(crate::thread::current().own_handle().cloned());
    }
    let Some(k) = decode(clock) else { return Ok(None) };
    // Under the table's lock: the thread's data is freed only after it
    // leaves the table (`forget`), so the block the entry names is mapped.
    let clocks = CLOCKS.lock().unwrap_or_else(|e| e.into_inner());
    let &(id, tcb) = clocks.get(&k).ok_or(libc::EINVAL)?;
    let d = user_thread(tcb as libc::pthread_t).filter(|d| d.id == id).ok_or(libc::EINVAL)?;
    d.runtime_thread().map(Some).ok_or(libc::EINVAL)
}

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as _ }
}

/// The slow path of `clock_gettime`: a thread CPU clock, or something not a
/// clock at all.
#[cold]
#[inline(never)]
unsafe fn thread_clock_gettime(clock: libc::clockid_t, ts: *mut libc::timespec) -> c_int {
    match thread_of(clock) {
        Ok(Some(t)) => {
            // SAFETY: the caller's out-parameter.
            unsafe { *ts = timespec(t.cpu_time()) };
            0
        }
        // SAFETY: forwarded unchanged.
        Ok(None) => unsafe { next::clock_gettime()(clock, ts) },
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// `clock_gettime`: a user thread's CPU clock is its own (module docs);
/// every other clock is glibc's after one compare.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn clock_gettime(
    clock: libc::clockid_t,
    ts: *mut libc::timespec,
) -> c_int {
    // `clock ^ 3` is 0 for CLOCK_THREAD_CPUTIME_ID, at least 2^31 for the
    // CPU clocks (negative) and 1..=15 for the kernel's fixed clocks
    // (CLOCK_REALTIME 0 ... CLOCK_TAI 11): one unsigned compare after
    // subtracting 1 sends only the first two kinds (and invalid ids) aside.
    if ((clock as u32) ^ 3).wrapping_sub(1) >= 15 {
        // SAFETY: forwarded.
        return unsafe { thread_clock_gettime(clock, ts) };
    }
    // glibc's, through a pointer read without `real!`'s inlined first
    // look-up, whose register saves the compiler hoisted into this path
    // (15 instructions more than glibc's own call, against 9 now).
    let mut f = GLIBC_CLOCK_GETTIME.load(Ordering::Relaxed);
    if f.is_null() {
        f = resolve_clock_gettime();
    }
    // SAFETY: glibc's `clock_gettime`, whose C signature this is; forwarded
    // unchanged.
    unsafe {
        std::mem::transmute::<
            *mut std::ffi::c_void,
            unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> c_int,
        >(f)(clock, ts)
    }
}

/// glibc's `clock_gettime`, once looked up.
static GLIBC_CLOCK_GETTIME: std::sync::atomic::AtomicPtr<std::ffi::c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

#[cold]
#[inline(never)]
fn resolve_clock_gettime() -> *mut std::ffi::c_void {
    let f = next::clock_gettime() as *mut std::ffi::c_void;
    GLIBC_CLOCK_GETTIME.store(f, Ordering::Relaxed);
    f
}

/// `clock_getres`: 1 ns for a user thread's CPU clock (glibc's for its
/// CPU clocks), glibc's for the rest.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn clock_getres(
    clock: libc::clockid_t,
    res: *mut libc::timespec,
) -> c_int {
    if decode(clock).is_none() {
        // SAFETY: forwarded unchanged (its CLOCK_THREAD_CPUTIME_ID answer,
        // 1 ns, is a user thread's too).
        return unsafe { next::clock_getres()(clock, res) };
    }
    if let Err(e) = thread_of(clock) {
        set_errno(e);
        return -1;
    }
    if !res.is_null() {
        // SAFETY: the caller's out-parameter.
        unsafe { *res = libc::timespec { tv_sec: 0, tv_nsec: 1 } };
    }
    0
}

/// `getrusage`: `RUSAGE_THREAD` on a user thread reports the thread's own
/// CPU time as `ru_utime + ru_stime`, split between the two in the
/// proportion its kernel thread's own figures have (the runtime measures
/// CPU time, not the kernel's user/system split, which the kernel itself
/// samples at its tick); the other fields are the kernel thread's. The rest
/// is glibc's.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn getrusage(who: c_int, usage: *mut libc::rusage) -> c_int {
    // SAFETY: forwarded unchanged.
    let r = unsafe { next::getrusage()(who, usage) };
    if r != 0 || who != libc::RUSAGE_THREAD || !user_path() {
        return r;
    }
    let Some(t) = crate::thread::current().own_handle() else { return r };
    let total = t.cpu_time().as_nanos() as u64;
    // SAFETY: glibc filled the caller's structure.
    let u = unsafe { &mut *usage };
    let us = |tv: &libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    let (ku, ks) = (us(&u.ru_utime), us(&u.ru_stime));
    let total_us = total / 1_000;
    let user_us = if ku + ks == 0 {
        total_us
    } else {
        (total_us as u128 * ku as u128 / (ku + ks) as u128) as u64
    };
    let tv = |us: u64| libc::timeval {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_usec: (us % 1_000_000) as libc::suseconds_t,
    };
    u.ru_utime = tv(user_us);
    u.ru_stime = tv(total_us - user_us);
    0
}

/// `timer_create`: a timer on a user thread's CPU clock (the caller's
/// `CLOCK_THREAD_CPUTIME_ID`, or any thread's clock of ours) is refused with
/// `ENOTSUP` — it would have to be armed and disarmed at every switch of the
/// thread, as the runtime does for CPU budgets, which is not done — rather
/// than made on the kernel thread's clock, which would fire after other user
/// threads' time. The rest is glibc's.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn timer_create(
    clock: libc::clockid_t,
    sev: *mut libc::sigevent,
    id: *mut libc::timer_t,
) -> c_int {
    let ours = decode(clock).is_some() || (clock == libc::CLOCK_THREAD_CPUTIME_ID && user_path());
    if ours {
        set_errno(libc::ENOTSUP);
        return -1;
    }
    // SAFETY: forwarded unchanged.
    unsafe { next::timer_create()(clock, sev, id) }
}

/// For `clock_nanosleep`: the error for sleeping on `clock`, if it is a
/// user thread's CPU clock — `EINVAL` for the caller's own
/// `CLOCK_THREAD_CPUTIME_ID` (glibc's and the kernel's answer), `ENOTSUP`
/// for one of ours (POSIX's answer for a CPU-time clock it does not sleep
/// on; Linux sleeps on another kernel thread's, which would take a timer
/// armed at every switch, as `timer_create` would). `None` for the rest.
pub(crate) fn no_sleep_on(clock: libc::clockid_t) -> Option<c_int> {
    if clock == libc::CLOCK_THREAD_CPUTIME_ID {
        Some(libc::EINVAL)
    } else {
        decode(clock).map(|_| libc::ENOTSUP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_ids_round_trip_and_never_look_like_the_kernels() {
        for id in [1, 2, 7, SPAN - 1, SPAN, SPAN + 1, u32::MAX] {
            let k = fold(id);
            assert!((1..=SPAN).contains(&k), "{id} folds to {k}");
            let c = encode(k);
            assert!(c < 0 && c != -1);
            assert_eq!(decode(c), Some(k));
        }
        // glibc's thread and process clocks, and the fixed ones, are not ours.
        let glibc_thread = (!1234i32 << 3) | 6;
        assert_eq!(decode(glibc_thread), None);
        assert_eq!(decode((!1234i32 << 3) | 2), None);
        for c in 0..16 {
            assert_eq!(decode(c), None);
        }
    }

    #[test]
    fn one_compare_sends_only_thread_clocks_aside() {
        let aside = |c: i32| ((c as u32) ^ 3).wrapping_sub(1) >= 15;
        assert!(aside(libc::CLOCK_THREAD_CPUTIME_ID));
        assert!(aside(encode(5)));
        assert!(aside((!1234i32 << 3) | 6));
        for c in [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11] {
            assert!(!aside(c), "clock {c}");
        }
    }
}
