//! Signals per user thread: `pthread_sigmask`/`sigprocmask`, `pthread_kill`,
//! `sigwait`/`sigwaitinfo`/`sigtimedwait` — seed 003's `SA_UPCALL_SIGNAL`:
//! a signal sent to a user thread is delivered when that thread runs.
//!
//! The runtime keeps each user thread's mask and applies it to whichever
//! kernel thread runs the thread (`schedlab_rt::shared`, "Signals"), so the
//! signals a thread raises on itself (`raise`, `abort`, a fault) are the
//! kernel's business as usual, and so mostly are process-directed ones
//! (`kill`, `SIGCHLD`, timers): the kernel gives one to a kernel thread
//! that does not block it. Where that kernel thread runs no user thread, or
//! only a parked user thread accepts the signal, `procsig.rs` forwards it to
//! a user thread that accepts it, with its `siginfo`, or keeps it pending
//! for the process: `sigpending` reports it, the `sigwait` family takes it
//! (from any thread), and a thread that unblocks it takes it
//! ([`take_process_pending`]). A signal for another user thread (`pthread_kill`) goes into that
//! thread's pending set here; the runtime is asked to run [`deliver_pending`]
//! in the thread's context (`shared::interrupt`), which raises each pending
//! signal the thread does not block on its current kernel thread (with its
//! original `siginfo` if the forwarder placed it there), so its
//! handler runs on the right thread with the right mask — or, for a thread
//! in `sigwait` on the signal, the kernel's `sigwait` returns it. A thread
//! parked in the library's waits is unparked for it: its condition wait
//! returns (spuriously, as POSIX allows), its sleep ends with `EINTR`.
//!
//! A signal stays pending while the thread blocks it and is delivered when
//! `pthread_sigmask` unblocks it: kept in the thread's own pending set, not
//! raised on the kernel thread it is on, where the kernel would keep it when
//! the thread moves.
//!
//! # A thread blocked in a system call
//!
//! A user thread blocked in the kernel is on a kernel thread that has its
//! mask (running, or detached after the runtime's hand-off), so a
//! `pthread_kill` of a signal it does not block (or waits for) is a `tgkill`
//! of that kernel thread: the kernel runs the
//! handler there and ends the call with `EINTR` or restarts it by the
//! handler's own `SA_RESTART`, exactly as for a kernel thread — and so for a
//! process-directed signal the kernel routes there. What the library adds
//! is for the runtime's own signal, which has `SA_RESTART`: the calls the
//! kernel never restarts (signal(7); `sigwaitinfo`, `sigtimedwait` and
//! `sigsuspend` here) are made again after an `EINTR` that was the
//! runtime's alone, with the time left (`points::retrying`).

use crate::thread::{current, gone, on_user_thread, user_thread, Kind, ThreadData};
use std::ffi::c_int;
use std::sync::atomic::Ordering;

/// glibc's definitions.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::c_int;
    crate::glibc::real!(pthread_sigmask: fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int);
    crate::glibc::real!(sigprocmask: fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int);
    crate::glibc::real!(pthread_kill: fn(libc::pthread_t, c_int) -> c_int);
    crate::glibc::real!(sigwait: fn(*const libc::sigset_t, *mut c_int) -> c_int);
    crate::glibc::real!(sigtimedwait: fn(*const libc::sigset_t, *mut libc::siginfo_t, *const libc::timespec) -> c_int);
    crate::glibc::real!(sigsuspend: fn(*const libc::sigset_t) -> c_int);
    crate::glibc::real!(sigpending: fn(*mut libc::sigset_t) -> c_int);
}

fn errno() -> c_int {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

fn word(set: *const libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t is at least 8 bytes on Linux; the caller's set.
    unsafe { std::ptr::read_unaligned(set.cast::<u64>()) }
}

fn store_word(set: *mut libc::sigset_t, w: u64) {
    // SAFETY: the caller's out-parameter; the rest of the set (signals past
    // 64, which Linux does not have) is cleared.
    unsafe {
        libc::sigemptyset(set);
        std::ptr::write_unaligned(set.cast::<u64>(), w);
    }
}

fn bit(sig: c_int) -> u64 {
    1u64 << (sig - 1)
}

/// The common body of `pthread_sigmask` and `sigprocmask` on a user thread;
/// `Err` is an error number.
fn set_mask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> Result<(), c_int> {
    let cur = schedlab_rt::shared::signal_mask();
    if !set.is_null() {
        let s = word(set);
        let new = match how {
            libc::SIG_BLOCK => cur | s,
            libc::SIG_UNBLOCK => cur & !s,
            libc::SIG_SETMASK => s,
            _ => return Err(libc::EINVAL),
        };
        schedlab_rt::shared::set_signal_mask(new);
        // As in `waiting_for`.
        std::sync::atomic::fence(Ordering::SeqCst);
    }
    if !old.is_null() {
        store_word(old, cur);
    }
    take_process_pending();
    deliver_pending();
    Ok(())
}

/// Takes into the calling user thread's own pending set the signals pending
/// for the process (`procsig.rs`) that its mask opens, with their
/// `siginfo`, for [`deliver_pending`] to raise: as the kernel delivers a
/// process-pending signal to the thread that unblocks it. One load when
/// there are none (a new thread's start asks too).
pub(crate) fn take_process_pending() {
    if crate::procsig::process_pending() == 0 {
        return;
    }
    take_process_pending_slow();
}

#[cold]
fn take_process_pending_slow() {
    let d = current();
    if d.kind.get() != Kind::User {
        return;
    }
    let open = !schedlab_rt::shared::signal_mask() | d.sigwait_set.load(Ordering::Acquire);
    while let Some((sig, info)) = crate::procsig::take_process(open) {
        crate::procsig::save(crate::procsig::For::User(d.id), sig, &info);
        d.pending_signals.fetch_or(bit(sig), Ordering::AcqRel);
    }
}

/// As a user thread ends (before the forwarder stops seeing it): the
/// process-directed signals it accepts that wait in the library (for the
/// forwarder, or kept for the process) are delivered to it now. It is their
/// taker as much as any other thread, and the kernel would have delivered
/// them at once; taken by the forwarder a moment later, they found no thread
/// that accepted them (the Open POSIX suite's `pthread_cond_broadcast/4-2`,
/// whose one accepting thread ends at the last `kill`, hung once in twenty
/// runs: a sender waited for that signal's handler).
pub(crate) fn before_exit() {
    take_at_end(crate::procsig::settle_before_exit);
}

/// After a user thread that ends left the forwarder's list: a signal of
/// those it accepts that reached the library meantime (saved for the
/// forwarder, or kept for the process by a forwarder that no longer finds
/// this thread) is still its own, delivered here.
pub(crate) fn after_unlisted() {
    take_at_end(crate::procsig::settle_after_unlisted);
}

/// A user thread's end: `settle` (the signals it accepts, its mask's
/// complement), then what waits for it in the library is delivered.
fn take_at_end(settle: fn(u32, u64)) {
    let d = current();
    if d.kind.get() != Kind::User {
        return;
    }
    let open = !schedlab_rt::shared::signal_mask();
    settle(d.id, open);
    crate::procsig::take_inbox_for(d, open);
    take_process_pending();
    deliver_pending();
}

/// The kernel-thread side of `pthread_sigmask` and `sigprocmask` (the
/// program's initial thread): after glibc's call, raises on the calling
/// kernel thread, with their `siginfo`, the signals pending for the process
/// here that its new mask opens.
fn kernel_thread_takes_process_pending(set: *const libc::sigset_t) {
    // As in `waiting_for` (the forwarder reads this thread's mask from the
    // kernel).
    std::sync::atomic::fence(Ordering::SeqCst);
    if set.is_null() || crate::procsig::process_pending() == 0 {
        return;
    }
    let mut now = empty_set();
    // SAFETY: a query into our own set.
    unsafe { next::pthread_sigmask()(libc::SIG_SETMASK, std::ptr::null(), &mut now) };
    while let Some((sig, info)) = crate::procsig::take_process(!word(&now)) {
        crate::procsig::raise_with(sig, &info);
    }
}

fn empty_set() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is valid (empty).
    unsafe { std::mem::zeroed() }
}

/// `pthread_sigmask`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    if !on_user_thread() {
        // SAFETY: forwarded unchanged.
        let r = unsafe { next::pthread_sigmask()(how, set, old) };
        if r == 0 {
            kernel_thread_takes_process_pending(set);
        }
        return r;
    }
    match set_mask(how, set, old) {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// `sigprocmask` (the calling thread's mask, as in any threaded program).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigprocmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    if !on_user_thread() {
        // SAFETY: forwarded unchanged.
        let r = unsafe { next::sigprocmask()(how, set, old) };
        if r == 0 {
            kernel_thread_takes_process_pending(set);
        }
        return r;
    }
    match set_mask(how, set, old) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: the calling thread's errno.
            unsafe { *libc::__errno_location() = e };
            -1
        }
    }
}

/// `pthread_kill`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_kill(t: libc::pthread_t, sig: c_int) -> c_int {
    let Some(d) = user_thread(t) else {
        if gone(t) {
            return libc::ESRCH;
        }
        // SAFETY: forwarded unchanged.
        return unsafe { next::pthread_kill()(t, sig) };
    };
    if !(0..=64).contains(&sig) {
        return libc::EINVAL;
    }
    if d.has_exited() {
        return libc::ESRCH;
    }
    if sig == 0 {
        return 0;
    }
    if current().tcb == d.tcb {
        if sig == libc::SIGURG {
            crate::urg::raise_own();
        } else {
            raise_here(sig);
        }
        return 0;
    }
    crate::runtime::enter();
    let Some(thread) = d.rt_thread() else { return libc::ESRCH };
    if sig == libc::SIGURG {
        // The runtime's signal too: sent so that neither hides the other
        // (`urg.rs`, "Coalescing").
        crate::urg::send(d, &thread);
        return 0;
    }
    // The signal waits in the thread's pending set, which the thread takes
    // at its next safe point (the runtime's `interrupt`), its resumption or
    // its unblocking. On a kernel thread now (running, or blocked in a
    // system call such as `waitpid` or `pause`), and not blocking the signal
    // or waiting for it (`sigwait`, `sigsuspend`), it also gets a doorbell
    // there (`urg::ring`): the kernel ends or restarts the call by the
    // handler's `SA_RESTART` as for a kernel thread, and the wrapper there
    // delivers the pending signal if the thread is still there, and drops
    // the doorbell otherwise. (A plain `tgkill` of that kernel thread ran the
    // handler on whatever ran there when it came: the thread may have left
    // it, and `kill_moved.c`'s handlers ran on another thread within 50
    // signals.)
    d.pending_signals.fetch_or(bit(sig), Ordering::AcqRel);
    let waits = d.sigwait_set.load(Ordering::Acquire) & bit(sig) != 0;
    let open = schedlab_rt::shared::signal_mask_of(&thread) & bit(sig) == 0 || waits;
    let rung = schedlab_rt::shared::kernel_thread_of(&thread)
        .filter(|_| open)
        .map(|tid| crate::urg::ring(tid, d, sig))
        .is_some();
    // Not for a thread in `sigwait` or `sigsuspend` that the doorbell
    // reached: the runtime's signal, which a handler's count does not
    // follow there (a wait runs no handler for what it waits for), would
    // have the library make its call again (`points::retrying`).
    if !(rung && waits) {
        schedlab_rt::shared::interrupt(&thread);
    }
    thread.unpark();
    0
}

/// In the wrapper (`handlers.rs`) or after a `sigwait` family call on user
/// thread `me` (`None`: a kernel thread running none), for a delivery whose
/// `siginfo` is `info`: whether it is a `pthread_kill`'s doorbell
/// (`urg::ring`), and if it is, the pending signal it rang for, taken from
/// `me`'s pending set with its `siginfo`: `None` when the doorbell was for
/// another thread, which left this kernel thread, or when `me` took the
/// signal already. A delivery that is no doorbell is the raise of one
/// taken from the set ([`deliver_pending`]), seen. Async-signal-safe.
pub(crate) fn answer_doorbell(
    sig: c_int,
    info: &libc::siginfo_t,
    me: Option<&ThreadData>,
) -> Option<Option<libc::siginfo_t>> {
    let b = bit(sig);
    let Some(target) = crate::urg::doorbell_for(info) else {
        if let Some(d) = me {
            d.raising.fetch_and(!b, Ordering::AcqRel);
        }
        return None;
    };
    let Some(d) = me.filter(|d| *d as *const ThreadData as usize == target) else {
        return Some(None);
    };
    if d.pending_signals.fetch_and(!b, Ordering::AcqRel) & b == 0 {
        // Taken from the set and raised here already: if that raise came
        // while this doorbell was pending, the kernel dropped it, and this
        // delivery is the raise's (counted as it was raised).
        if d.raising.fetch_and(!b, Ordering::AcqRel) & b != 0 {
            return Some(Some(tkill_info(sig)));
        }
        return Some(None);
    }
    if d.sigwait_set.load(Ordering::Acquire) & b == 0 {
        count_delivery(d, sig);
    }
    Some(Some(
        crate::procsig::take(crate::procsig::For::User(d.id), sig)
            .unwrap_or_else(|| tkill_info(sig)),
    ))
}

/// In the handler wrapper (`handlers.rs`) on a user thread: if the signal
/// interrupted a runtime section (the runtime's own code, which is not
/// re-entrant, on this thread's stack), keeps it pending for the thread, with
/// its `siginfo`, and has the section's end deliver it
/// (`schedlab_rt::shared::defer_signal_to_section_end`); `true` then, and the
/// wrapper runs nothing now. Not for a fault (a synchronous `SIGSEGV`, ...:
/// the instruction would fault again at once). Async-signal-safe.
pub(crate) fn defer_in_section(sig: c_int, info: *const libc::siginfo_t) -> bool {
    if !schedlab_rt::shared::in_runtime() {
        return false;
    }
    // SAFETY: the kernel's siginfo for this delivery, if any.
    let code = unsafe { info.as_ref() }.map_or(0, |i| i.si_code);
    let fault = matches!(
        sig,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS
    );
    if fault && code > 0 {
        return false;
    }
    let d = current();
    let Some(me) = d.own_handle_if_made() else { return false };
    if sig == libc::SIGURG {
        // The program's, which `urg.rs` keeps with its own `siginfo`.
        if !schedlab_rt::shared::defer_signal_to_section_end(me) {
            return false;
        }
        // SAFETY: as above.
        let i = unsafe { info.as_ref() }.copied().unwrap_or_else(|| crate::procsig::bare_info(sig));
        crate::urg::keep(d, &i);
        return true;
    }
    let b = 1u64 << (sig - 1);
    // Sent to the process (`kill`, `sigqueue`, a timer, or forwarded with its
    // own `siginfo`), not to this thread (`pthread_kill`'s `tgkill`).
    let for_process = code != libc::SI_TKILL;
    // In a switch, the kernel thread's mask may still be the other thread's:
    // a process-directed signal this thread blocks (or one for a thread that
    // is ending) is the process's, and goes to a thread that accepts it.
    if for_process && (schedlab_rt::shared::signal_mask_of(me) & b != 0 || d.has_exited()) {
        // SAFETY: as above.
        let i = unsafe { info.as_ref() }.copied().unwrap_or_else(|| crate::procsig::bare_info(sig));
        return crate::procsig::pass_on(sig, &i);
    }
    if !schedlab_rt::shared::defer_signal_to_section_end(me) {
        return false;
    }
    // The section ends only after this handler returns: nothing takes the
    // signal before it is pending.
    // SAFETY: as above.
    if let Some(i) = unsafe { info.as_ref() } {
        crate::procsig::save(crate::procsig::For::User(d.id), sig, i);
    }
    if for_process {
        d.deferred_signals.fetch_or(b, Ordering::AcqRel);
    }
    d.pending_signals.fetch_or(b, Ordering::AcqRel);
    true
}

/// [`deliver_pending`]'s first step: a process-directed signal that a handler
/// left pending for this thread at the end of a runtime section
/// ([`defer_in_section`]), and that the thread has blocked since, is the
/// process's again: it goes to a thread that accepts it, as the kernel
/// would have had it come a moment later.
fn pass_on_deferred(d: &crate::thread::ThreadData, open: u64) {
    let deferred = d.deferred_signals.swap(0, Ordering::AcqRel);
    let mut blocked = deferred & !open;
    while blocked != 0 {
        let b = blocked & blocked.wrapping_neg();
        blocked &= !b;
        if d.pending_signals.fetch_and(!b, Ordering::AcqRel) & b == 0 {
            continue;
        }
        let sig = b.trailing_zeros() as c_int + 1;
        let info = crate::procsig::take(crate::procsig::For::User(d.id), sig)
            .unwrap_or_else(|| crate::procsig::bare_info(sig));
        if !crate::procsig::pass_on(sig, &info) {
            crate::procsig::keep_for_process(sig, &info);
        }
    }
}

/// Counts a signal delivered to `d` (`ThreadData::signals_seen`), and in
/// `signals_restart` too when it would not end a blocking system call with
/// `EINTR`: its handler asked for `SA_RESTART`, or it has no handler. The
/// caller does not count one `d` waits for in `sigwait` (as it was when
/// the signal was sent), which takes it and runs no handler: counted, it
/// made an `EINTR` of the runtime's own signal in `d`'s next wait look like
/// the program's, and `sigwaitinfo` returned it.
pub(crate) fn count_delivery(d: &ThreadData, sig: c_int) {
    // SAFETY: an all-zero sigaction is valid; sigaction only reads the
    // disposition into it.
    let restarts = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut sa) != 0
            || sa.sa_sigaction == libc::SIG_DFL
            || sa.sa_sigaction == libc::SIG_IGN
            || sa.sa_flags & libc::SA_RESTART != 0
    };
    if restarts {
        d.signals_restart.fetch_add(1, Ordering::AcqRel);
    }
    d.signals_seen.fetch_add(1, Ordering::AcqRel);
}

/// Raises `sig` on the calling kernel thread, for the calling thread.
fn raise_here(sig: c_int) {
    // SAFETY: tgkill to our own kernel thread.
    unsafe {
        libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::syscall(libc::SYS_gettid), sig);
    }
}

/// The runtime's resume hook, and every point where a user thread may take
/// its pending signals: raises each one it does not block (or waits for in
/// `sigwait`) on its current kernel thread.
pub(crate) fn deliver_pending() {
    let d = current();
    if d.kind.get() != Kind::User {
        return;
    }
    if d.deferred_signals.load(Ordering::Relaxed) != 0 {
        pass_on_deferred(
            d,
            !schedlab_rt::shared::signal_mask() | d.sigwait_set.load(Ordering::Acquire),
        );
    }
    loop {
        let pending = d.pending_signals.load(Ordering::Acquire);
        if pending == 0 {
            return;
        }
        // A `SIGURG` a `sigwait` waits for is taken from this set, never
        // from the kernel's (`urg.rs`).
        let waited = d.sigwait_set.load(Ordering::Acquire) & !bit(libc::SIGURG);
        let open = !schedlab_rt::shared::signal_mask() | waited;
        let ready = pending & open;
        if ready == 0 {
            return;
        }
        let b = ready & ready.wrapping_neg();
        if d.pending_signals.fetch_and(!b, Ordering::AcqRel) & b == 0 {
            continue;
        }
        let sig = b.trailing_zeros() as c_int + 1;
        if sig == libc::SIGURG {
            // Raised with its own `siginfo`, and counted as the runtime
            // passes it on (`urg.rs`).
            crate::urg::raise_kept();
            continue;
        }
        if d.sigwait_set.load(Ordering::Acquire) & b == 0 {
            count_delivery(d, sig);
        }
        // A standard signal is blocked in the kernel from its mark to its
        // raise: a `pthread_kill`'s doorbell for it delivered in between took
        // the mark for this raise's, merged with it, and ran the handler;
        // the raise then ran it a second time (`kill_moved.c`: one signal
        // handled twice in 15 runs of 30). Blocked, the raise and any
        // doorbell wait in the kernel together, which keeps one, and the
        // unblock delivers it. (A real-time signal is queued, never merged:
        // no mark, and a doorbell after the take finds nothing pending.)
        // Only system calls in between: nothing that could switch the
        // thread with the kernel mask changed.
        // A process-directed signal forwarded here (`procsig.rs`) goes
        // with its own `siginfo`.
        let info = crate::procsig::take(crate::procsig::For::User(d.id), sig);
        let old = (sig < 32).then(|| {
            let old = block_in_kernel(b);
            d.raising.fetch_or(b, Ordering::AcqRel);
            old
        });
        match info {
            Some(info) => crate::procsig::raise_with(sig, &info),
            None => raise_here(sig),
        }
        if let Some(old) = old {
            set_kernel_mask(old);
        }
    }
}

/// Adds `set` to the calling kernel thread's signal mask with the system
/// call itself (the thread's recorded mask stays as it is); returns the mask
/// before, for [`set_kernel_mask`]. Async-signal-safe.
pub(crate) fn block_in_kernel(set: u64) -> u64 {
    let mut old = 0u64;
    // SAFETY: 8-byte masks on our stack, the kernel's sigset size.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &set as *const u64,
            &mut old as *mut u64,
            8,
        )
    };
    old
}

/// Puts back a kernel mask [`block_in_kernel`] returned. Async-signal-safe.
pub(crate) fn set_kernel_mask(mask: u64) {
    // SAFETY: as above.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &mask as *const u64,
            std::ptr::null_mut::<u64>(),
            8,
        )
    };
}

/// Takes a pending signal of `set` from the calling user thread's own set,
/// or else from the process's (`procsig.rs`), with its `siginfo`: a
/// forwarded one's own, else what a `pthread_kill` gives.
fn take_own(set: u64) -> Option<(c_int, libc::siginfo_t)> {
    let d = current();
    loop {
        let ready = d.pending_signals.load(Ordering::Acquire) & set;
        if ready == 0 {
            return crate::procsig::take_process(set);
        }
        let b = ready & ready.wrapping_neg();
        if d.pending_signals.fetch_and(!b, Ordering::AcqRel) & b != 0 {
            let sig = b.trailing_zeros() as c_int + 1;
            // A kept `SIGURG` has its own (`urg.rs`).
            let info = if sig == libc::SIGURG {
                crate::urg::take_info()
            } else {
                crate::procsig::take(crate::procsig::For::User(d.id), sig)
                    .unwrap_or_else(|| tkill_info(sig))
            };
            return Some((sig, info));
        }
    }
}

/// The `siginfo` a signal of the thread's own pending set is given without
/// a saved one (a `pthread_kill`'s): `si_signo` and `si_code = SI_TKILL`.
fn tkill_info(sig: c_int) -> libc::siginfo_t {
    let mut i = crate::procsig::bare_info(sig);
    i.si_code = libc::SI_TKILL;
    i
}

/// After the kernel's wait returned `sig` into `info`: a signal the
/// forwarder sent this kernel thread (`procsig.rs`) gets its own `siginfo`,
/// and a `pthread_kill`'s doorbell the pending signal's. `false` for a
/// doorbell that brought nothing for this thread (another thread's, or one
/// already taken): the wait goes on.
fn restore_info(sig: c_int, info: *mut libc::siginfo_t) -> bool {
    if sig <= 0 || info.is_null() {
        return true;
    }
    let me = (current().kind.get() == Kind::User).then(current);
    // SAFETY: the caller's out-parameter, just filled by the kernel.
    match answer_doorbell(sig, unsafe { &*info }, me) {
        // SAFETY: as above.
        Some(Some(own)) => unsafe { *info = own },
        Some(None) => return false,
        None => {}
    }
    // SAFETY: the caller's out-parameter, not null (checked above), just
    // filled by the kernel (or by the doorbell's answer).
    let given = unsafe { &*info };
    // The record is for the kernel thread the wait returned on, which a
    // user thread may have left since (its processor handed off while it
    // waited, it resumed on another): then it is found by the thread it was
    // aimed at (seen: `procsig.c`'s `sigwaitinfo` returned the `tgkill`'s
    // own `siginfo`).
    let orig = crate::procsig::original_info(sig, given)
        .map(|(i, _taken_here)| i)
        .or_else(|| me.and_then(|d| crate::procsig::original_info_aimed_at(sig, given, d.id)));
    if let Some(orig) = orig {
        // SAFETY: as above.
        unsafe { *info = orig };
    }
    true
}

/// Runs `f` (the kernel's wait) with `set` marked as waited for, so that
/// [`deliver_pending`] hands those signals to it.
fn waiting_for<R>(set: u64, f: impl FnOnce() -> R) -> R {
    let d = current();
    d.sigwait_set.store(set, Ordering::Release);
    // Against the forwarder keeping one of `set` for the process meanwhile
    // (`procsig.rs`, "The forwarder's last look"): one of the two sees the
    // other's store.
    std::sync::atomic::fence(Ordering::SeqCst);
    take_process_pending();
    deliver_pending();
    let r = f();
    d.sigwait_set.store(0, Ordering::Release);
    r
}

/// The kernel's `rt_sigtimedwait` for a user thread, as a cancellation
/// point (`cancel::syscall`), C's convention. Signals the program may not
/// wait for are left out of `set`, as glibc leaves out its own two (32 and
/// 33): those and the runtime's signal, which a `pthread_cancel` of the
/// waiting thread sends (taken by the wait, it would be returned to the
/// program; a program's `SIGURG` comes through the thread's pending set,
/// `urg.rs`). Never restarted by the kernel, so an `EINTR` of the runtime's
/// own signal alone waits again, for the time left (`points::retrying`).
///
/// # Safety
///
/// C's contract for `sigtimedwait`.
unsafe fn timed_wait(
    set: *const libc::sigset_t,
    info: *mut libc::siginfo_t,
    deadline: Option<std::time::Instant>,
) -> c_int {
    let own = bit(32) | bit(33) | bit(schedlab_rt::shared::runtime_signal());
    let w = word(set) & !own;
    crate::points::retrying(deadline, |left| {
        let t = left.map(crate::io::ts);
        // SAFETY: the caller's out-parameter; our own copy of the set, in
        // the kernel's 8 bytes; the time left (a copy).
        unsafe {
            crate::cancel::syscall_c(
                libc::SYS_rt_sigtimedwait,
                [&w as *const u64 as usize, info as usize, crate::io::opt(&t), 8, 0, 0],
            ) as c_int
        }
    })
}

/// `sigwait`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigwait(set: *const libc::sigset_t, sig: *mut c_int) -> c_int {
    if crate::thread::user_path() {
        if let Some((s, _)) = take_own(word(set)) {
            // SAFETY: the caller's out-parameter.
            unsafe { *sig = s };
            return 0;
        }
        // The kernel's wait, with our pending ones raised first; `EINTR`
        // (a handler ran, or the runtime's signal) waits again, as glibc's.
        return waiting_for(word(set), || loop {
            // A `SIGURG` comes through the pending set (`urg.rs`).
            if let Some((s, _)) = take_own(word(set)) {
                // SAFETY: the caller's out-parameter.
                unsafe { *sig = s };
                return 0;
            }
            let mut info = crate::procsig::bare_info(0);
            // SAFETY: the caller's set; our own siginfo.
            let r = unsafe { timed_wait(set, &mut info, None) };
            // A forwarded signal's record goes with it; a doorbell with
            // nothing for this thread is no signal.
            if r > 0 && restore_info(r, &mut info) {
                // SAFETY: the caller's out-parameter.
                unsafe { *sig = r };
                return 0;
            }
            if r > 0 {
                continue;
            }
            let e = errno();
            if e != libc::EINTR {
                return e;
            }
        });
    }
    let _announced = crate::procsig::KernelWaiter::announce(word(set));
    if let Some((s, _)) = crate::procsig::take_process(word(set)) {
        // SAFETY: the caller's out-parameter.
        unsafe { *sig = s };
        return 0;
    }
    // SAFETY: forwarded unchanged.
    unsafe { next::sigwait()(set, sig) }
}

fn fill_info(info: *mut libc::siginfo_t, taken: (c_int, libc::siginfo_t)) -> c_int {
    if !info.is_null() {
        // SAFETY: the caller's out-parameter.
        unsafe { *info = taken.1 };
    }
    taken.0
}

/// The result of a `sigwaitinfo` or `sigtimedwait`, `r`: one the
/// thread's own pending set took meanwhile (a `SIGURG`, which ends the
/// kernel's wait with `EINTR`: `urg.rs`) in place of that `EINTR`.
fn own_after_eintr(set: *const libc::sigset_t, info: *mut libc::siginfo_t, r: c_int) -> c_int {
    if r == -1 && errno() == libc::EINTR {
        if let Some(taken) = take_own(word(set)) {
            return fill_info(info, taken);
        }
    }
    r
}

/// `sigwaitinfo`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigwaitinfo(
    set: *const libc::sigset_t,
    info: *mut libc::siginfo_t,
) -> c_int {
    // SAFETY: the caller's arguments; no timeout, as glibc's own.
    unsafe { sigtimedwait(set, info, std::ptr::null()) }
}

/// `sigtimedwait`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigtimedwait(
    set: *const libc::sigset_t,
    info: *mut libc::siginfo_t,
    timeout: *const libc::timespec,
) -> c_int {
    if crate::thread::user_path() {
        if let Some(taken) = take_own(word(set)) {
            return fill_info(info, taken);
        }
        let deadline = crate::io::ts_deadline(timeout);
        // The kernel's `siginfo` tells a doorbell: into ours if the caller
        // wants none.
        let mut mine = crate::procsig::bare_info(0);
        let info = if info.is_null() { &mut mine as *mut libc::siginfo_t } else { info };
        return waiting_for(word(set), || loop {
            // SAFETY: as in `sigwait`.
            let r = unsafe { timed_wait(set, info, deadline) };
            if !restore_info(r, info) {
                // A doorbell with nothing for this thread (another
                // thread's, queued on this kernel thread as that one left
                // it) is no signal: the wait goes on for the time left,
                // after what its own set has now. (It ended with `EINTR`,
                // as if a handler had run: `stale_bell.c`.)
                if let Some(taken) = take_own(word(set)) {
                    return fill_info(info, taken);
                }
                continue;
            }
            return own_after_eintr(set, info, r);
        });
    }
    let _announced = crate::procsig::KernelWaiter::announce(word(set));
    if let Some(taken) = crate::procsig::take_process(word(set)) {
        return fill_info(info, taken);
    }
    // SAFETY: forwarded unchanged.
    let r = unsafe { next::sigtimedwait()(set, info, timeout) };
    restore_info(r, info);
    r
}

/// `sigsuspend`: the kernel's, under `mask` — with the runtime's signal left
/// out of it, which must reach every user thread (a hand-off, a
/// cancellation) — as a cancellation point that only a handler ends
/// (`points::Restart::Never`: an `EINTR` of the runtime's signal alone
/// waits again). The thread's pending signals that `mask` opens are raised
/// on its kernel thread first, where the kernel keeps them (the thread's
/// own mask still blocks them) until the suspend opens them.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigsuspend(mask: *const libc::sigset_t) -> c_int {
    if !crate::thread::user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::sigsuspend()(mask) };
    }
    let w = word(mask) & !bit(schedlab_rt::shared::runtime_signal());
    waiting_for(!w, || {
        // SAFETY: our own copy of the set, in the kernel's 8 bytes.
        unsafe {
            crate::points::blocking(
                crate::points::Restart::Never,
                libc::SYS_rt_sigsuspend,
                [&w as *const u64 as usize, 8, 0, 0, 0, 0],
            ) as c_int
        }
    })
}

/// `sigpending`: the kernel's answer, with the signals pending for the
/// process in the library (`procsig.rs`) and, on a user thread, those sent
/// to it that it blocks (kept in its own pending set).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sigpending(set: *mut libc::sigset_t) -> c_int {
    // SAFETY: the caller's out-parameter.
    let r = unsafe { next::sigpending()(set) };
    if r != 0 || set.is_null() {
        return r;
    }
    let mut more = crate::procsig::pending_or_in_flight();
    if on_user_thread() {
        more |= current().pending_signals.load(Ordering::Acquire);
    }
    if more != 0 {
        store_word(set, word(set) | more);
    }
    0
}
