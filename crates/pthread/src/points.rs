//! The cancellation points that wait in the kernel, made through one
//! mechanism: a user thread's call is the kernel's system call made with
//! [`blocking`] — the runtime's cancellable system call
//! (`cancel::syscall`, musl's design) plus the kernel's own rule for a call a
//! signal handler interrupts — so that `pthread_cancel` stops it while it
//! waits and a signal ends it, or not, as it ends a kernel thread's call.
//!
//! Most points are a system call with the caller's arguments and are defined
//! by one table ([`points!`], below): the C name, its glibc signature, the
//! system call, how the arguments map onto it, and how the kernel treats the
//! call when a signal handler interrupts it (signal(7), "Interruption of
//! system calls and library functions by signal handlers"):
//!
//! - [`Restart::Sa`]: restarted after a handler with `SA_RESTART`, `EINTR`
//!   after one without (`read`/`write` of a slow device, `open` of a FIFO,
//!   the `wait` family, `fcntl(F_SETLKW)`, the message queues, `tcdrain`...).
//!   The runtime's own signal (hand-off, preemption, a cancellation's
//!   wake-up) has `SA_RESTART`, so the kernel restarts the call after it —
//!   the stub sends a restarted call back to its test of the cancellation
//!   word — and a program's signal raised on the thread's kernel thread
//!   (`pthread_kill`, or one the kernel routes there) decides by the
//!   program's own flags, exactly as for a kernel thread.
//! - [`Restart::Never`]: `EINTR` after any handler, whatever `SA_RESTART`
//!   says (`pause`, `sigsuspend`, `sigtimedwait`, `msgrcv`, `msgsnd`,
//!   `semop`, the `poll` family...). The runtime's own signal ends these
//!   too: the program would see an `EINTR` for a signal it never got. So a
//!   call the runtime's signal ended (`schedlab_rt::shared::interruptions`
//!   moved) while no signal of the program's was delivered to the thread by
//!   the library (`ThreadData::signals_seen`) is made again, with the time
//!   left when it has a timeout ([`retrying`], as Go's runtime retries its
//!   own `EINTR`s). A process-directed signal the kernel delivers in the
//!   same moment as the runtime's is the one case whose `EINTR` is absorbed
//!   (its handler has run; the call goes on waiting).
//!
//! Data already transferred is the program's: a `read` or `write` the kernel
//! ended part-way returns its count, and a cancellation that comes after the
//! call finished waits for the next point (`cancel::syscall`).
//!
//! The calls of kernel threads (the program's initial thread, glibc's own
//! threads) and those made inside the runtime's own code are glibc's,
//! unchanged (`thread::user_path`). glibc's internal calls (`system`'s wait,
//! `lockf` inside glibc, stdio's `__read`) do not come here.
//!
//! Defined elsewhere, through the same [`blocking`]: the pipe and socket
//! calls and `close` (`fdio.rs`, whose blocking fallback for a terminal or
//! a regular file comes here), the `poll` family (`io.rs`), `sigwait` and
//! its variants and `sigsuspend` (`signal.rs`).

use crate::thread::{current, user_path};
use std::ffi::{c_char, c_int, c_long, c_uint, c_void};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How the kernel treats a call that a signal handler interrupted
/// (module docs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Restart {
    /// Restarted after a handler with `SA_RESTART`.
    Sa,
    /// Never restarted: `EINTR` after any handler.
    Never,
}

fn errno() -> c_int {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Calls `call` with the time left of `deadline` (`None`: no limit) until
/// it returns anything but an `EINTR` of the runtime's own making: the
/// runtime's signal interrupted the calling user thread meanwhile, and the
/// library delivered no signal of the program's to it (module docs,
/// [`Restart::Never`]). `call` has C's convention: -1 and `errno`.
pub(crate) fn retrying<R: PartialEq + From<i8>>(
    deadline: Option<Instant>,
    mut call: impl FnMut(Option<Duration>) -> R,
) -> R {
    let d = current();
    loop {
        let ours = schedlab_rt::shared::interruptions();
        let seen = d.signals_seen.load(Ordering::Acquire);
        let left = deadline.map(|at| at.saturating_duration_since(Instant::now()));
        let r = call(left);
        if r == R::from(-1) && errno() == libc::EINTR {
            // A signal kept for the thread while it was in the kernel (a
            // `SIGURG`, `urg.rs`, whose doorbell the runtime's request hid)
            // is delivered now, and ends the call as it would have.
            crate::signal::deliver_pending();
            // SAFETY: the calling thread's errno, as the call left it.
            unsafe { *libc::__errno_location() = libc::EINTR };
            if schedlab_rt::shared::interruptions() != ours
                && d.signals_seen.load(Ordering::Acquire) == seen
            {
                continue;
            }
        }
        return r;
    }
}

/// A cancellation point's system call `nr` on the calling user thread (the
/// caller checked `user_path`), C's convention: -1 and `errno` on failure.
/// A pending or arriving deferred cancellation acts instead of a call that
/// has not finished (`cancel::syscall`); a [`Restart::Never`] call ended by
/// the runtime's own signal alone is made again.
///
/// # Safety
///
/// The system call's contract.
pub(crate) unsafe fn blocking(restart: Restart, nr: c_long, args: [usize; 6]) -> isize {
    // SAFETY: the caller's call.
    let once = || unsafe { crate::cancel::syscall_c(nr, args) };
    match restart {
        Restart::Sa => once(),
        Restart::Never => retrying(None, |_| once()),
    }
}

/// Six system call arguments from the ones a table row names.
fn args<const N: usize>(a: [usize; N]) -> [usize; 6] {
    let mut out = [0; 6];
    out[..N].copy_from_slice(&a);
    out
}

/// `open`'s third argument is read only when the flags create a file: a
/// call without one leaves garbage in its register.
fn mode_of(flags: c_int, mode: c_uint) -> usize {
    let creates = flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE;
    if creates {
        mode as usize
    } else {
        0
    }
}

/// The high word of a 64-bit file offset, as the `preadv` family takes it
/// (ignored by a 64-bit kernel; glibc passes it all the same).
fn hi(off: libc::off_t) -> usize {
    (off as u64 >> 32) as usize
}

/// The table (module docs): for each row a C function that is glibc's on a
/// kernel thread and the system call through [`blocking`] on a user thread.
/// Its glibc definition is found with `dlsym(RTLD_NEXT)` only when a kernel
/// thread calls it.
macro_rules! points {
    ($(
        $(#[$doc:meta])*
        fn $name:ident($($a:ident: $t:ty),*) -> $ret:ty = $nr:ident [$($arg:expr),*] $class:ident;
    )*) => {
        /// glibc's definitions.
        mod next {
            #![allow(clippy::type_complexity)]
            #[allow(unused_imports)]
            use super::*;
            $(crate::glibc::real!($name: fn($($t),*) -> $ret);)*
        }
        $(
            $(#[$doc])*
            ///
            /// # Safety
            ///
            /// C's contract.
            #[no_mangle]
            pub unsafe extern "C-unwind" fn $name($($a: $t),*) -> $ret {
                if !user_path() {
                    // SAFETY: forwarded unchanged.
                    return unsafe { next::$name()($($a),*) };
                }
                // SAFETY: the caller's arguments, as the kernel's call takes them.
                unsafe { blocking(Restart::$class, libc::$nr, args([$($arg as usize),*])) as $ret }
            }
        )*
    };
}

points! {
    /// `open` (any file; a FIFO's waits for its other end).
    fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int
        = SYS_openat [libc::AT_FDCWD, path, flags, mode_of(flags, mode)] Sa;
    /// `open64`: `open`.
    fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int
        = SYS_openat [libc::AT_FDCWD, path, flags, mode_of(flags, mode)] Sa;
    /// `openat`.
    fn openat(dir: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int
        = SYS_openat [dir, path, flags, mode_of(flags, mode)] Sa;
    /// `openat64`: `openat`.
    fn openat64(dir: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int
        = SYS_openat [dir, path, flags, mode_of(flags, mode)] Sa;
    /// `__open_2`: `open` without a mode, as `_FORTIFY_SOURCE` calls it.
    fn __open_2(path: *const c_char, flags: c_int) -> c_int
        = SYS_openat [libc::AT_FDCWD, path, flags, 0] Sa;
    /// `__open64_2`: as `__open_2`.
    fn __open64_2(path: *const c_char, flags: c_int) -> c_int
        = SYS_openat [libc::AT_FDCWD, path, flags, 0] Sa;
    /// `__openat_2`: `openat` without a mode, as `_FORTIFY_SOURCE` calls it.
    fn __openat_2(dir: c_int, path: *const c_char, flags: c_int) -> c_int
        = SYS_openat [dir, path, flags, 0] Sa;
    /// `__openat64_2`: as `__openat_2`.
    fn __openat64_2(dir: c_int, path: *const c_char, flags: c_int) -> c_int
        = SYS_openat [dir, path, flags, 0] Sa;
    /// `creat`.
    fn creat(path: *const c_char, mode: c_uint) -> c_int
        = SYS_openat [libc::AT_FDCWD, path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode] Sa;
    /// `creat64`: `creat`.
    fn creat64(path: *const c_char, mode: c_uint) -> c_int
        = SYS_openat [libc::AT_FDCWD, path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode] Sa;
    /// `pread`.
    fn pread(fd: c_int, buf: *mut c_void, n: usize, off: libc::off_t) -> isize
        = SYS_pread64 [fd, buf, n, off] Sa;
    /// `pread64`: `pread`.
    fn pread64(fd: c_int, buf: *mut c_void, n: usize, off: libc::off_t) -> isize
        = SYS_pread64 [fd, buf, n, off] Sa;
    /// `pwrite`.
    fn pwrite(fd: c_int, buf: *const c_void, n: usize, off: libc::off_t) -> isize
        = SYS_pwrite64 [fd, buf, n, off] Sa;
    /// `pwrite64`: `pwrite`.
    fn pwrite64(fd: c_int, buf: *const c_void, n: usize, off: libc::off_t) -> isize
        = SYS_pwrite64 [fd, buf, n, off] Sa;
    /// `preadv`.
    fn preadv(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t) -> isize
        = SYS_preadv [fd, iov, n, off, hi(off)] Sa;
    /// `preadv64`: `preadv`.
    fn preadv64(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t) -> isize
        = SYS_preadv [fd, iov, n, off, hi(off)] Sa;
    /// `pwritev`.
    fn pwritev(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t) -> isize
        = SYS_pwritev [fd, iov, n, off, hi(off)] Sa;
    /// `pwritev64`: `pwritev`.
    fn pwritev64(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t) -> isize
        = SYS_pwritev [fd, iov, n, off, hi(off)] Sa;
    /// `preadv2`.
    fn preadv2(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t, flags: c_int) -> isize
        = SYS_preadv2 [fd, iov, n, off, hi(off), flags] Sa;
    /// `preadv64v2`: `preadv2`.
    fn preadv64v2(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t, flags: c_int) -> isize
        = SYS_preadv2 [fd, iov, n, off, hi(off), flags] Sa;
    /// `pwritev2`.
    fn pwritev2(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t, flags: c_int) -> isize
        = SYS_pwritev2 [fd, iov, n, off, hi(off), flags] Sa;
    /// `pwritev64v2`: `pwritev2`.
    fn pwritev64v2(fd: c_int, iov: *const libc::iovec, n: c_int, off: libc::off_t, flags: c_int) -> isize
        = SYS_pwritev2 [fd, iov, n, off, hi(off), flags] Sa;
    /// `wait`.
    fn wait(status: *mut c_int) -> libc::pid_t
        = SYS_wait4 [-1i32, status, 0, 0] Sa;
    /// `waitpid`.
    fn waitpid(pid: libc::pid_t, status: *mut c_int, options: c_int) -> libc::pid_t
        = SYS_wait4 [pid, status, options, 0] Sa;
    /// `wait3`.
    fn wait3(status: *mut c_int, options: c_int, usage: *mut libc::rusage) -> libc::pid_t
        = SYS_wait4 [-1i32, status, options, usage] Sa;
    /// `wait4`.
    fn wait4(pid: libc::pid_t, status: *mut c_int, options: c_int, usage: *mut libc::rusage) -> libc::pid_t
        = SYS_wait4 [pid, status, options, usage] Sa;
    /// `waitid`.
    fn waitid(kind: libc::idtype_t, id: libc::id_t, info: *mut libc::siginfo_t, options: c_int) -> c_int
        = SYS_waitid [kind, id, info, options, 0] Sa;
    /// `mq_receive`.
    fn mq_receive(q: libc::mqd_t, buf: *mut c_char, len: usize, prio: *mut c_uint) -> isize
        = SYS_mq_timedreceive [q, buf, len, prio, 0] Sa;
    /// `mq_timedreceive` (an absolute timeout: restarted as it is).
    fn mq_timedreceive(q: libc::mqd_t, buf: *mut c_char, len: usize, prio: *mut c_uint, at: *const libc::timespec) -> isize
        = SYS_mq_timedreceive [q, buf, len, prio, at] Sa;
    /// `mq_send`.
    fn mq_send(q: libc::mqd_t, buf: *const c_char, len: usize, prio: c_uint) -> c_int
        = SYS_mq_timedsend [q, buf, len, prio, 0] Sa;
    /// `mq_timedsend`.
    fn mq_timedsend(q: libc::mqd_t, buf: *const c_char, len: usize, prio: c_uint, at: *const libc::timespec) -> c_int
        = SYS_mq_timedsend [q, buf, len, prio, at] Sa;
    /// `tcdrain`: `ioctl(TCSBRK, 1)`, as glibc makes it.
    fn tcdrain(fd: c_int) -> c_int
        = SYS_ioctl [fd, libc::TCSBRK, 1] Sa;
    /// `fsync`.
    fn fsync(fd: c_int) -> c_int
        = SYS_fsync [fd] Sa;
    /// `fdatasync`.
    fn fdatasync(fd: c_int) -> c_int
        = SYS_fdatasync [fd] Sa;
    /// `msync`.
    fn msync(addr: *mut c_void, len: usize, flags: c_int) -> c_int
        = SYS_msync [addr, len, flags] Sa;
    /// `fallocate` (glibc's is a cancellation point).
    fn fallocate(fd: c_int, mode: c_int, off: libc::off_t, len: libc::off_t) -> c_int
        = SYS_fallocate [fd, mode, off, len] Sa;
    /// `fallocate64`: `fallocate`.
    fn fallocate64(fd: c_int, mode: c_int, off: libc::off_t, len: libc::off_t) -> c_int
        = SYS_fallocate [fd, mode, off, len] Sa;
    /// `sync_file_range` (glibc's is a cancellation point).
    fn sync_file_range(fd: c_int, off: libc::off_t, n: libc::off_t, flags: c_uint) -> c_int
        = SYS_sync_file_range [fd, off, n, flags] Sa;
    /// `recvmmsg`.
    fn recvmmsg(fd: c_int, v: *mut libc::mmsghdr, n: c_uint, flags: c_int, timeout: *mut libc::timespec) -> c_int
        = SYS_recvmmsg [fd, v, n, flags, timeout] Sa;
    /// `sendmmsg`.
    fn sendmmsg(fd: c_int, v: *mut libc::mmsghdr, n: c_uint, flags: c_int) -> c_int
        = SYS_sendmmsg [fd, v, n, flags] Sa;
    /// `pause`.
    fn pause() -> c_int
        = SYS_pause [] Never;
    /// `msgrcv`.
    fn msgrcv(id: c_int, buf: *mut c_void, size: usize, kind: c_long, flags: c_int) -> isize
        = SYS_msgrcv [id, buf, size, kind, flags] Never;
    /// `msgsnd`.
    fn msgsnd(id: c_int, buf: *const c_void, size: usize, flags: c_int) -> c_int
        = SYS_msgsnd [id, buf, size, flags] Never;
}

/// The `fcntl` commands that wait: the record locks' `F_SETLKW` and
/// `F_OFD_SETLKW` (the only ones that are cancellation points).
fn waits(cmd: c_int) -> bool {
    cmd == libc::F_SETLKW || cmd == libc::F_OFD_SETLKW
}

/// glibc's `fcntl` or `fcntl64` (variadic: the third argument is an
/// integer or a pointer, passed in the same register), found once.
fn next_fcntl(
    cache: &std::sync::atomic::AtomicPtr<c_void>,
    name: &std::ffi::CStr,
) -> unsafe extern "C" fn(c_int, c_int, ...) -> c_int {
    let mut p = cache.load(Ordering::Relaxed);
    if p.is_null() {
        p = crate::glibc::next(name);
        cache.store(p, Ordering::Relaxed);
    }
    // SAFETY: glibc's definition of that very function.
    unsafe {
        std::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int, c_int, ...) -> c_int>(p)
    }
}

static FCNTL: std::sync::atomic::AtomicPtr<c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
static FCNTL64: std::sync::atomic::AtomicPtr<c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// `fcntl`: `F_SETLKW` and `F_OFD_SETLKW` on a user thread through
/// [`blocking`]; every other command is glibc's. (Rust cannot define a
/// variadic function: the third argument is taken as the word in its
/// register, which is what a variadic caller passes.)
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { fcntl_through(&FCNTL, c"fcntl", fd, cmd, arg) }
}

/// [`fcntl`] and [`fcntl64`]: a wait for a lock on a user thread through the
/// cancellable call, anything else to glibc's `name`.
///
/// # Safety
///
/// C's contract for `fcntl`.
unsafe fn fcntl_through(
    cache: &std::sync::atomic::AtomicPtr<c_void>,
    name: &std::ffi::CStr,
    fd: c_int,
    cmd: c_int,
    arg: usize,
) -> c_int {
    if waits(cmd) && user_path() {
        // SAFETY: the caller's lock description.
        return unsafe {
            blocking(Restart::Sa, libc::SYS_fcntl, args([fd as usize, cmd as usize, arg])) as c_int
        };
    }
    // SAFETY: forwarded unchanged.
    unsafe { next_fcntl(cache, name)(fd, cmd, arg) }
}

/// `fcntl64`: `fcntl`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { fcntl_through(&FCNTL64, c"fcntl64", fd, cmd, arg) }
}

/// glibc's `lockf`.
mod glibc_lockf {
    use std::ffi::c_int;
    crate::glibc::real!(lockf: fn(c_int, c_int, libc::off_t) -> c_int);
}

/// `lockf`: `F_LOCK` waits, as glibc makes it, in `fcntl(F_SETLKW)` on a
/// write lock from the current position over `len` bytes (glibc's own call
/// is internal, so it is made here); the other commands are glibc's.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn lockf(fd: c_int, cmd: c_int, len: libc::off_t) -> c_int {
    if cmd != libc::F_LOCK || !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { glibc_lockf::lockf()(fd, cmd, len) };
    }
    // SAFETY: an all-zero flock is valid; the fields glibc sets are set.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_CUR as _;
    fl.l_len = len;
    // SAFETY: our lock description, alive for the call.
    unsafe {
        blocking(
            Restart::Sa,
            libc::SYS_fcntl,
            args([fd as usize, libc::F_SETLKW as usize, &mut fl as *mut libc::flock as usize]),
        ) as c_int
    }
}

/// `lockf64`: `lockf`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn lockf64(fd: c_int, cmd: c_int, len: libc::off_t) -> c_int {
    // SAFETY: the same function on a 64-bit system.
    unsafe { lockf(fd, cmd, len) }
}

extern "C" {
    /// glibc's "buffer overflow detected" abort.
    fn __chk_fail() -> !;
}

/// `__read_chk`: `read` as `_FORTIFY_SOURCE` calls it when the buffer's
/// size is known (Debian builds its packages so). glibc's goes to its
/// internal `__read`, past the library: here the check, then the library's
/// `read` (`fdio.rs`), a cancellation point that parks on a pipe or socket.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    size: usize,
) -> isize {
    if n > size {
        // SAFETY: glibc's abort for an overflow it detected.
        unsafe { __chk_fail() }
    }
    // SAFETY: the caller's buffer, checked above.
    unsafe { crate::fdio::read(fd, buf, n) }
}

/// `__pread_chk`: as `__read_chk`, for `pread`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn __pread_chk(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    off: libc::off_t,
    size: usize,
) -> isize {
    if n > size {
        // SAFETY: as above.
        unsafe { __chk_fail() }
    }
    // SAFETY: as above.
    unsafe { pread(fd, buf, n, off) }
}

/// `__pread64_chk`: `__pread_chk`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn __pread64_chk(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    off: libc::off_t,
    size: usize,
) -> isize {
    // SAFETY: the same function on a 64-bit system.
    unsafe { __pread_chk(fd, buf, n, off, size) }
}

/// `__recv_chk`: as `__read_chk`, for `recv`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    size: usize,
    flags: c_int,
) -> isize {
    if n > size {
        // SAFETY: as above.
        unsafe { __chk_fail() }
    }
    // SAFETY: as above.
    unsafe { crate::fdio::recv(fd, buf, n, flags) }
}

/// `__recvfrom_chk`: as `__read_chk`, for `recvfrom`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    size: usize,
    flags: c_int,
    from: *mut libc::sockaddr,
    from_len: *mut libc::socklen_t,
) -> isize {
    if n > size {
        // SAFETY: as above.
        unsafe { __chk_fail() }
    }
    // SAFETY: as above.
    unsafe { crate::fdio::recvfrom(fd, buf, n, flags, from, from_len) }
}

/// `__poll_chk`: as `__read_chk`, for `poll` (`io.rs`).
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn __poll_chk(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: c_int,
    size: usize,
) -> c_int {
    if (n as usize).saturating_mul(std::mem::size_of::<libc::pollfd>()) > size {
        // SAFETY: as above.
        unsafe { __chk_fail() }
    }
    // SAFETY: as above.
    unsafe { crate::io::poll(fds, n, timeout) }
}

/// glibc's `semop` and `semtimedop`.
mod glibc_sem {
    use std::ffi::c_int;
    crate::glibc::real!(semop: fn(c_int, *mut libc::sembuf, usize) -> c_int);
    crate::glibc::real!(semtimedop: fn(c_int, *mut libc::sembuf, usize, *const libc::timespec) -> c_int);
}

/// `semop`: not a cancellation point, but never restarted by the kernel
/// ([`Restart::Never`]): on a user thread an `EINTR` of the runtime's own
/// signal alone waits again.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn semop(id: c_int, ops: *mut libc::sembuf, n: usize) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { glibc_sem::semop()(id, ops, n) };
    }
    // SAFETY: forwarded, again after the runtime's own EINTR.
    retrying(None, |_| unsafe { glibc_sem::semop()(id, ops, n) })
}

/// `semtimedop`: as `semop`, again with the time left.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn semtimedop(
    id: c_int,
    ops: *mut libc::sembuf,
    n: usize,
    timeout: *const libc::timespec,
) -> c_int {
    if !user_path() {
        // SAFETY: forwarded unchanged.
        return unsafe { glibc_sem::semtimedop()(id, ops, n, timeout) };
    }
    retrying(crate::io::ts_deadline(timeout), |left| {
        let t = left.map(crate::io::ts);
        let tp = t.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: forwarded, with the time left.
        unsafe { glibc_sem::semtimedop()(id, ops, n, tp) }
    })
}
