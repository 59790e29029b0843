//! Reads and writes on pipes and sockets at the cost of a park: `read`,
//! `write`, `readv`, `writev`, `recv`, `recvfrom`, `recvmsg`, `send`,
//! `sendto`, `sendmsg`, `accept`, `accept4`, and `close`, `dup2`, `dup3` for
//! the poller's bookkeeping. `connect` does not park: a connection is
//! started by the call itself, which no per-call flag makes non-blocking
//! (only the socket's shared `O_NONBLOCK`), so a user thread's `connect`
//! that waits for the handshake holds a kernel thread, with the runtime's
//! hand-off, as every other blocking call does; it is defined here only to
//! be a cancellation point (`cancel::syscall`).
//!
//! Without this file, a user thread whose `read` waits for data blocks its
//! kernel thread, and the runtime hands the thread's processor to a spare
//! kernel thread until the call returns (`schedlab_rt`'s blocking hand-off):
//! correct for every call, but a kernel-thread switch and a hand-off per
//! waiting read. Here a user thread's call is made so that it cannot block,
//! and when it would, the thread parks on the descriptor's readiness in the
//! runtime's poller (`schedlab_rt::io::wait`, epoll) and makes the call again:
//! no kernel thread is held while it waits, as with Go's netpoller.
//!
//! # Without changing the descriptor
//!
//! Go and tokio put every socket in non-blocking mode. A preloaded library
//! cannot: the file status flags belong to the open file description, which
//! the program may share with other processes (a shell's pipe, a forked
//! worker's listening socket). So each call asks for non-blocking behaviour
//! for itself alone: `preadv2`/`pwritev2` with `RWF_NOWAIT` (offset -1: the
//! file's position, as `read` and `write`) for `read`, `write`, `readv`,
//! `writev` — pipes and sockets honour it (this VM's Linux 6.18 does; a kernel
//! that refuses it answers `EOPNOTSUPP`, and the call then blocks as before); `MSG_DONTWAIT` for
//! `recv`/`send`/`recvmsg`/`sendmsg`; a zero-timeout `poll` before `accept`. When the call would
//! block (`EAGAIN`):
//!
//! 1. the program's own `O_NONBLOCK` (`fcntl`, asked only now) or
//!    `MSG_DONTWAIT`: `EAGAIN` is the program's answer, returned as is;
//! 2. otherwise the thread waits in the poller, until the socket's
//!    `SO_RCVTIMEO`/`SO_SNDTIMEO` if it has one (then `EAGAIN`, as the
//!    kernel's blocking call returns), and calls again;
//! 3. a descriptor the poller cannot watch (a regular file, whose
//!    `RWF_NOWAIT` read says `EAGAIN` when the page is not cached; a
//!    terminal, which refuses `RWF_NOWAIT`): the plain blocking call, with
//!    the runtime's hand-off, made as a cancellation point
//!    (`points::blocking`).
//!
//! A blocking `write` or `send` on a stream transfers everything before it
//! returns; a non-blocking one may stop part-way, so these go on with the
//! rest after each wait and return the total (or, after a part went, the
//! part, when an error or a signal ends them, as the kernel's do).
//!
//! # Signals and cancellation
//!
//! Each of these calls is a cancellation point: a pending deferred
//! cancellation acts before the call, and a `pthread_cancel` ends the wait
//! in the poller (`schedlab_rt::io::wait_since_unless`), after which it
//! acts — unless part of a write (or a `MSG_WAITALL` read) already went:
//! the call then returns that part, as POSIX has a call that transferred
//! data not be cancelled, and the cancellation acts at the next point. A signal delivered to the
//! parked thread (`pthread_kill`, `signal.rs`) runs its handler when the
//! thread resumes; the call then ends with `EINTR` unless every handler
//! that ran asked for `SA_RESTART`, as the kernel's blocking call would.
//!
//! Calls of kernel threads (the program's initial thread, and any thread
//! not created through this library) and of glibc's own internals (stdio's
//! `fread` calls glibc's private `__read`) are glibc's, unchanged.

use crate::thread::{current, user_path};
use schedlab_rt::io::{snapshot, Interest, Snapshot};
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// glibc's definitions.
mod next {
    #![allow(clippy::type_complexity)]
    #[allow(unused_imports)]
    use std::ffi::{c_int, c_void};
    crate::glibc::real!(read: fn(c_int, *mut c_void, usize) -> isize);
    crate::glibc::real!(write: fn(c_int, *const c_void, usize) -> isize);
    crate::glibc::real!(readv: fn(c_int, *const libc::iovec, c_int) -> isize);
    crate::glibc::real!(writev: fn(c_int, *const libc::iovec, c_int) -> isize);
    crate::glibc::real!(recvfrom: fn(c_int, *mut c_void, usize, c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> isize);
    crate::glibc::real!(sendto: fn(c_int, *const c_void, usize, c_int, *const libc::sockaddr, libc::socklen_t) -> isize);
    crate::glibc::real!(recvmsg: fn(c_int, *mut libc::msghdr, c_int) -> isize);
    crate::glibc::real!(sendmsg: fn(c_int, *const libc::msghdr, c_int) -> isize);
    crate::glibc::real!(accept4: fn(c_int, *mut libc::sockaddr, *mut libc::socklen_t, c_int) -> c_int);
    crate::glibc::real!(connect: fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int);
    crate::glibc::real!(close: fn(c_int) -> c_int);
    crate::glibc::real!(dup2: fn(c_int, c_int) -> c_int);
    crate::glibc::real!(dup3: fn(c_int, c_int, c_int) -> c_int);
}

/// `RWF_NOWAIT` (linux/fs.h; the libc crate has no binding).
const RWF_NOWAIT: c_int = 0x8;

fn errno() -> c_int {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(e: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

/// What to do after a call said `EAGAIN` (module docs, steps 1 to 3).
enum Next {
    /// The descriptor is ready (or may be): call again.
    Again,
    /// Return -1 with this errno.
    Fail(c_int),
    /// Make the plain blocking call.
    Plain,
    /// A cancellation is pending: act on it unless data already went.
    Cancel,
}

/// The wait after an `EAGAIN` on `fd` (module docs). `dontwait`: the
/// program asked for a non-blocking call itself (`MSG_DONTWAIT`).
/// `before`: the descriptor's readiness counters taken before the call, so
/// the wait needs no `poll(2)` of its own (`schedlab_rt::io::wait_since`).
fn after_eagain(fd: c_int, before: Snapshot, interest: Interest, dontwait: bool) -> Next {
    // SAFETY: fcntl on a descriptor number; a bad one answers EBADF.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if dontwait || (fl != -1 && fl & libc::O_NONBLOCK != 0) {
        return Next::Fail(libc::EAGAIN);
    }
    let deadline = socket_timeout(fd, interest).map(|t| Instant::now() + t);
    let d = current();
    // `signal.rs` counts a restarting delivery in `signals_restart` before
    // `signals_seen`: read in that order, a delivery between the two reads
    // can only make the first difference below smaller.
    let restart = d.signals_restart.load(Ordering::Acquire);
    let seen = d.signals_seen.load(Ordering::Acquire);
    // A `pthread_cancel` or a delivered signal ends the wait: each changes
    // what `stop` reads, then unparks the thread.
    let stop =
        || crate::cancel::cancel_pending(d) || d.signals_seen.load(Ordering::Acquire) != seen;
    let waited = schedlab_rt::io::wait_since_unless(before, interest, deadline, Some(&stop));
    let seen = d.signals_seen.load(Ordering::Acquire).wrapping_sub(seen);
    if seen > d.signals_restart.load(Ordering::Acquire).wrapping_sub(restart) {
        // A handler without SA_RESTART ran meanwhile.
        return Next::Fail(libc::EINTR);
    }
    if crate::cancel::cancel_pending(d) {
        return Next::Cancel;
    }
    match waited {
        Ok(_) => Next::Again,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Next::Fail(libc::EAGAIN),
        // Stopped for a signal whose handler asked for SA_RESTART: go on.
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Next::Again,
        Err(_) => Next::Plain,
    }
}

/// The socket's `SO_RCVTIMEO` (reading) or `SO_SNDTIMEO` (writing), if it
/// is a socket and has one.
fn socket_timeout(fd: c_int, interest: Interest) -> Option<Duration> {
    let opt = if interest == Interest::READ { libc::SO_RCVTIMEO } else { libc::SO_SNDTIMEO };
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    let mut len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
    // SAFETY: getsockopt into a timeval of ours; ENOTSOCK for a pipe.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&mut tv as *mut libc::timeval).cast(),
            &mut len,
        )
    };
    (r == 0 && (tv.tv_sec > 0 || tv.tv_usec > 0))
        .then(|| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
}

/// A call that may stop part-way: `call(done)` transfers what is left after
/// `done` bytes, without blocking. A read returns what came; with `whole`
/// (a write; a read with `MSG_WAITALL`) it loops until `total` bytes went,
/// waiting in the poller between tries (module docs).
fn transfer(
    fd: c_int,
    interest: Interest,
    total: usize,
    whole: bool,
    dontwait: bool,
    mut call: impl FnMut(usize) -> isize,
    plain: impl FnOnce(usize) -> isize,
) -> isize {
    crate::cancel::test();
    let mut done = 0usize;
    loop {
        let before = snapshot(fd);
        let r = call(done);
        if r >= 0 {
            done += r as usize;
            // Reads return what came; a write goes on to the end.
            if !whole || done >= total || r == 0 {
                return done as isize;
            }
            continue;
        }
        let e = errno();
        match e {
            libc::EAGAIN => {}
            // RWF_NOWAIT refused (a terminal, an older kernel): blocking.
            libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS if !dontwait => return plain(done),
            _ => return if done > 0 { done as isize } else { -1 },
        }
        match after_eagain(fd, before, interest, dontwait) {
            Next::Again => {}
            Next::Fail(e) => {
                if done > 0 {
                    return done as isize;
                }
                set_errno(e);
                return -1;
            }
            Next::Plain => return plain(done),
            // POSIX: a call that already transferred data is not cancelled;
            // the cancellation waits for the next cancellation point.
            Next::Cancel if done > 0 => return done as isize,
            Next::Cancel => crate::cancel::act(),
        }
    }
}

/// `preadv2`/`pwritev2` at the file's position with `RWF_NOWAIT`.
fn rw_nowait(write: bool, fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    let nr = if write { libc::SYS_pwritev2 } else { libc::SYS_preadv2 };
    // SAFETY: the caller's buffers, described by `iov`; offset -1 (low word,
    // high word 0) is "the file's position".
    unsafe { libc::syscall(nr, fd, iov, n, -1i64, 0i64, RWF_NOWAIT) as isize }
}

/// One buffer from `buf + done`.
fn rest(buf: *const c_void, len: usize, done: usize) -> libc::iovec {
    libc::iovec {
        iov_base: buf.cast::<u8>().wrapping_add(done).cast_mut().cast(),
        iov_len: len - done,
    }
}

/// `read`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn read(fd: c_int, buf: *mut c_void, len: usize) -> isize {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::read()(fd, buf, len) };
    }
    transfer(
        fd,
        Interest::READ,
        len,
        false,
        false,
        move |_| rw_nowait(false, fd, &rest(buf, len, 0), 1),
        // SAFETY: the caller's buffer.
        move |_| unsafe { blocking_read(fd, buf, len) },
    )
}

/// The blocking call itself, as a cancellation point (`points::blocking`;
/// each of these is restarted after a handler with `SA_RESTART`): C's
/// convention. Out of line and cold: the fallback must not take registers
/// or stack from the calls' fast paths.
///
/// # Safety
///
/// The system call's contract.
#[cold]
#[inline(never)]
unsafe fn kernel(
    nr: libc::c_long,
    a: usize,
    b: usize,
    c: usize,
    d: usize,
    e: usize,
    f: usize,
) -> isize {
    // SAFETY: the caller's contract.
    unsafe { crate::points::blocking(crate::points::Restart::Sa, nr, [a, b, c, d, e, f]) }
}

/// `read(2)` through [`kernel`], with `read`'s own arguments: the plain
/// call of [`read`] costs its fast path nothing (the same shape as the
/// call of glibc's it replaced; [`kernel`]'s seven arguments there cost
/// `read` a spill, 3 instructions a call).
///
/// # Safety
///
/// `read`'s contract.
#[cold]
#[inline(never)]
unsafe fn blocking_read(fd: c_int, buf: *mut c_void, len: usize) -> isize {
    // SAFETY: the caller's contract.
    unsafe { kernel(libc::SYS_read, fd as usize, buf as usize, len, 0, 0, 0) }
}

/// `write(2)` through [`kernel`], as [`blocking_read`].
///
/// # Safety
///
/// `write`'s contract.
#[cold]
#[inline(never)]
unsafe fn blocking_write(fd: c_int, buf: *const c_void, len: usize) -> isize {
    // SAFETY: the caller's contract.
    unsafe { kernel(libc::SYS_write, fd as usize, buf as usize, len, 0, 0, 0) }
}

/// The blocking call's result after `done` bytes already went: the total,
/// or, failing with nothing sent, -1.
fn plain_total(done: usize, r: isize) -> isize {
    match (r, done) {
        (r, _) if r >= 0 => done as isize + r,
        (_, 0) => -1,
        _ => done as isize,
    }
}

/// `write`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn write(fd: c_int, buf: *const c_void, len: usize) -> isize {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::write()(fd, buf, len) };
    }
    transfer(
        fd,
        Interest::WRITE,
        len,
        true,
        false,
        move |done| rw_nowait(true, fd, &rest(buf, len, done), 1),
        move |done| {
            // SAFETY: the rest of the caller's buffer.
            let r = unsafe { blocking_write(fd, buf.cast::<u8>().add(done).cast(), len - done) };
            plain_total(done, r)
        },
    )
}

/// The part of `iov[..n]` after its first `done` bytes.
///
/// # Safety
///
/// `iov` points at `n` iovecs.
unsafe fn advanced(iov: *const libc::iovec, n: c_int, mut done: usize) -> Vec<libc::iovec> {
    // SAFETY: the caller's array.
    let all = unsafe { std::slice::from_raw_parts(iov, n.max(0) as usize) };
    let mut out = Vec::with_capacity(all.len());
    for v in all {
        if done >= v.iov_len {
            done -= v.iov_len;
            continue;
        }
        out.push(rest(v.iov_base, v.iov_len, done));
        done = 0;
    }
    out
}

/// Bytes `iov[..n]` describes.
///
/// # Safety
///
/// `iov` points at `n` iovecs.
unsafe fn iov_len(iov: *const libc::iovec, n: c_int) -> usize {
    // SAFETY: the caller's array.
    unsafe { std::slice::from_raw_parts(iov, n.max(0) as usize) }.iter().map(|v| v.iov_len).sum()
}

/// `readv`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    if !user_path() || n <= 0 {
        // SAFETY: forwarded unchanged.
        return unsafe { next::readv()(fd, iov, n) };
    }
    transfer(
        fd,
        Interest::READ,
        // SAFETY: the caller's array.
        unsafe { iov_len(iov, n) },
        false,
        false,
        |_| rw_nowait(false, fd, iov, n),
        // SAFETY: the caller's buffers.
        |_| unsafe { kernel(libc::SYS_readv, fd as usize, iov as usize, n as usize, 0, 0, 0) },
    )
}

/// `writev`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    if !user_path() || n <= 0 {
        // SAFETY: forwarded unchanged.
        return unsafe { next::writev()(fd, iov, n) };
    }
    let at = |done: usize| -> Vec<libc::iovec> {
        // SAFETY: the caller's array.
        unsafe { advanced(iov, n, done) }
    };
    transfer(
        fd,
        Interest::WRITE,
        // SAFETY: the caller's array.
        unsafe { iov_len(iov, n) },
        true,
        false,
        |done| {
            if done == 0 {
                return rw_nowait(true, fd, iov, n);
            }
            let v = at(done);
            rw_nowait(true, fd, v.as_ptr(), v.len() as c_int)
        },
        |done| {
            let v = at(done);
            let (p, n) = (v.as_ptr() as usize, v.len());
            // SAFETY: the rest of the caller's buffers.
            plain_total(done, unsafe { kernel(libc::SYS_writev, fd as usize, p, n, 0, 0, 0) })
        },
    )
}

/// `recv`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn recv(
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
) -> isize {
    // SAFETY: forwarded.
    unsafe { recvfrom(fd, buf, len, flags, std::ptr::null_mut(), std::ptr::null_mut()) }
}

/// `recvfrom`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    from: *mut libc::sockaddr,
    from_len: *mut libc::socklen_t,
) -> isize {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::recvfrom()(fd, buf, len, flags, from, from_len) };
    }
    transfer(
        fd,
        Interest::READ,
        len,
        flags & libc::MSG_WAITALL != 0,
        flags & libc::MSG_DONTWAIT != 0,
        // SAFETY: the rest of the caller's buffer.
        |done| unsafe {
            let rest = buf.cast::<u8>().add(done).cast();
            next::recvfrom()(fd, rest, len - done, flags | libc::MSG_DONTWAIT, from, from_len)
        },
        |done| {
            let at = buf.cast::<u8>().wrapping_add(done) as usize;
            let (f, from, from_len) = (flags as usize, from as usize, from_len as usize);
            // SAFETY: as above.
            let r = unsafe {
                kernel(libc::SYS_recvfrom, fd as usize, at, len - done, f, from, from_len)
            };
            plain_total(done, r)
        },
    )
}

/// `recvmsg`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize {
    if !user_path() || msg.is_null() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::recvmsg()(fd, msg, flags) };
    }
    // SAFETY: the caller's header.
    let (iov, n) = unsafe { ((*msg).msg_iov, (*msg).msg_iovlen as c_int) };
    let whole = flags & libc::MSG_WAITALL != 0;
    // With MSG_WAITALL, what follows a first part goes into the rest of the
    // buffers, through a copy of the header (the caller's keeps its iovecs).
    // `plain`: the blocking call, a cancellation point (`kernel`).
    let rest_of = |done: usize, flags: c_int, plain: bool| -> isize {
        let call = |m: *mut libc::msghdr| {
            if plain {
                // SAFETY: a header over the caller's buffers.
                unsafe {
                    kernel(libc::SYS_recvmsg, fd as usize, m as usize, flags as usize, 0, 0, 0)
                }
            } else {
                // SAFETY: as above.
                unsafe { next::recvmsg()(fd, m, flags) }
            }
        };
        if done == 0 {
            return call(msg);
        }
        // SAFETY: the caller's array.
        let mut v = unsafe { advanced(iov, n, done) };
        // SAFETY: a copy of the caller's header over the rest of its buffers.
        unsafe {
            let mut m = *msg;
            m.msg_iov = v.as_mut_ptr();
            m.msg_iovlen = v.len() as _;
            let r = call(&mut m);
            (*msg).msg_flags = m.msg_flags;
            r
        }
    };
    transfer(
        fd,
        Interest::READ,
        // SAFETY: the caller's array.
        unsafe { iov_len(iov, n) },
        whole,
        flags & libc::MSG_DONTWAIT != 0,
        |done| rest_of(done, flags | libc::MSG_DONTWAIT, false),
        |done| plain_total(done, rest_of(done, flags, true)),
    )
}

/// `sendmsg`: like `writev` on a stream, everything before it returns; the
/// ancillary data (descriptors, credentials) goes with the first part only.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sendmsg(
    fd: c_int,
    msg: *const libc::msghdr,
    flags: c_int,
) -> isize {
    if !user_path() || msg.is_null() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::sendmsg()(fd, msg, flags) };
    }
    // SAFETY: the caller's header.
    let (iov, n) = unsafe { ((*msg).msg_iov, (*msg).msg_iovlen as c_int) };
    // `plain`: the blocking call, a cancellation point (`kernel`).
    let send = |m: *const libc::msghdr, flags: c_int, plain: bool| -> isize {
        if plain {
            // SAFETY: a header over the caller's buffers.
            unsafe { kernel(libc::SYS_sendmsg, fd as usize, m as usize, flags as usize, 0, 0, 0) }
        } else {
            // SAFETY: as above.
            unsafe { next::sendmsg()(fd, m, flags) }
        }
    };
    let call = |done: usize, flags: c_int, plain: bool| -> isize {
        if done == 0 {
            return send(msg, flags, plain);
        }
        // SAFETY: the caller's array.
        let mut v = unsafe { advanced(iov, n, done) };
        // SAFETY: a copy of the caller's header over the rest of its
        // buffers, without the ancillary data, which went with the first part.
        unsafe {
            let mut m = *msg;
            m.msg_iov = v.as_mut_ptr();
            m.msg_iovlen = v.len() as _;
            m.msg_control = std::ptr::null_mut();
            m.msg_controllen = 0;
            send(&m, flags, plain)
        }
    };
    transfer(
        fd,
        Interest::WRITE,
        // SAFETY: the caller's array.
        unsafe { iov_len(iov, n) },
        true,
        flags & libc::MSG_DONTWAIT != 0,
        |done| call(done, flags | libc::MSG_DONTWAIT, false),
        |done| plain_total(done, call(done, flags, true)),
    )
}

/// `send`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn send(
    fd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
) -> isize {
    // SAFETY: forwarded.
    unsafe { sendto(fd, buf, len, flags, std::ptr::null(), 0) }
}

/// `sendto`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    to: *const libc::sockaddr,
    to_len: libc::socklen_t,
) -> isize {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::sendto()(fd, buf, len, flags, to, to_len) };
    }
    let at = |done: usize| buf.cast::<u8>().wrapping_add(done).cast::<c_void>();
    transfer(
        fd,
        Interest::WRITE,
        len,
        true,
        flags & libc::MSG_DONTWAIT != 0,
        // SAFETY: the rest of the caller's buffer.
        |done| unsafe {
            next::sendto()(fd, at(done), len - done, flags | libc::MSG_DONTWAIT, to, to_len)
        },
        |done| {
            let (p, f, to, to_len) =
                (at(done) as usize, flags as usize, to as usize, to_len as usize);
            // SAFETY: as above.
            let r = unsafe { kernel(libc::SYS_sendto, fd as usize, p, len - done, f, to, to_len) };
            plain_total(done, r)
        },
    )
}

/// `accept`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn accept(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> c_int {
    // SAFETY: forwarded (accept is accept4 with no flags).
    unsafe { accept4(fd, addr, len, 0) }
}

/// `accept4`: waits in the poller until a connection is pending (a
/// zero-timeout `poll` says so), then accepts it. Another thread may take
/// it first; the accept then blocks, with the runtime's hand-off.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn accept4(
    fd: c_int,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
    flags: c_int,
) -> c_int {
    if user_path() {
        crate::cancel::test();
        loop {
            let before = snapshot(fd);
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one pollfd of ours; glibc's poll (ours would retry).
            if unsafe { crate::io::real_poll(&mut p, 1, 0) } != 0 {
                break;
            }
            match after_eagain(fd, before, Interest::READ, false) {
                Next::Again => {}
                Next::Fail(e) => {
                    set_errno(e);
                    return -1;
                }
                Next::Plain => break,
                Next::Cancel => crate::cancel::act(),
            }
        }
    }
    if user_path() {
        // Another thread may have taken the connection: a blocking accept,
        // which a cancellation stops (`cancel::syscall`).
        // SAFETY: the caller's arguments.
        return unsafe {
            kernel(
                libc::SYS_accept4,
                fd as usize,
                addr as usize,
                len as usize,
                flags as usize,
                0,
                0,
            ) as c_int
        };
    }
    // SAFETY: forwarded unchanged.
    unsafe { next::accept4()(fd, addr, len, flags) }
}

/// `connect`: on a user thread the kernel's call, as a cancellation point
/// that a `pthread_cancel` stops while the handshake waits
/// (`cancel::syscall`); it still holds its kernel thread (module docs).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn connect(
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { next::connect()(fd, addr, len) };
    }
    // SAFETY: the caller's arguments.
    unsafe { kernel(libc::SYS_connect, fd as usize, addr as usize, len as usize, 0, 0, 0) as c_int }
}

/// `close`: the poller forgets the descriptor first (a number C reuses).
/// A cancellation point on a user thread (POSIX's, and glibc's): a
/// cancellation pending acts before the descriptor is closed; one that
/// comes while the kernel's close waits (a flush to a network file system)
/// acts after it, the descriptor closed, as on glibc.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn close(fd: c_int) -> c_int {
    schedlab_rt::io::forget(fd);
    if user_path() {
        // SAFETY: the caller's descriptor.
        return unsafe { kernel(libc::SYS_close, fd as usize, 0, 0, 0, 0, 0) as c_int };
    }
    // SAFETY: forwarded unchanged.
    unsafe { next::close()(fd) }
}

/// `dup2`: closes `new` (when it differs), so the poller forgets it.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn dup2(old: c_int, new: c_int) -> c_int {
    if old != new {
        schedlab_rt::io::forget(new);
    }
    // SAFETY: forwarded unchanged.
    unsafe { next::dup2()(old, new) }
}

/// `dup3`: as `dup2`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if old != new {
        schedlab_rt::io::forget(new);
    }
    // SAFETY: forwarded unchanged.
    unsafe { next::dup3()(old, new, flags) }
}
