//! The runtime's scheduling events, recorded for `schedlab exec --trace` when
//! `SCHEDLAB_RT_EVENTS` names a file.
//!
//! The hook runs inside the scheduler (schedlab_rt's event docs: quick, no
//! blocking, no runtime calls), so it only claims a slot of a preallocated
//! array with one atomic add and fills it: the `CLOCK_MONOTONIC` time (the
//! vDSO, no system call) and the event as [`Event::to_words`]. The array is
//! one anonymous `MAP_NORESERVE` mapping of [`CAPACITY`] records, its pages
//! touched only as they fill; an event past the end is counted as dropped.
//! A slot's first word is stored last (release), so a reader skips a slot
//! another thread is still filling.
//!
//! At exit (`atexit`) the process appends one block to the file under
//! `flock` (several processes of one program may write it: a shell script, a
//! `fork`), in the format `schedlab_trace::rt::read_event_file` reads: a
//! 32-byte header (`SLRTEV01`, pid, processors, records, dropped) and 40-byte
//! records. A process that ends by `_exit`, `exec` or a signal runs no
//! `atexit` handler and writes nothing: its events are lost, and
//! `schedlab exec --trace` says the trace is empty.
//!
//! After `fork` the child inherits the parent's array and its `atexit`
//! registration: the block is written only by the process that made the
//! array ([`OWNER`]), and a child that starts its own runtime gets a new one.

use schedlab_rt::Event;
use std::ffi::CString;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Records the array holds (40 bytes each: 80 MiB of address space).
const CAPACITY: usize = 1 << 21;
/// A record: time, then the event's four words.
type Slot = [AtomicU64; 5];

static BUF: AtomicPtr<Slot> = AtomicPtr::new(std::ptr::null_mut());
/// Slots claimed (may run past `CAPACITY`: the excess is the dropped count).
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// The process that made the array, and alone writes it out.
static OWNER: AtomicU32 = AtomicU32::new(0);
static PROCESSORS: AtomicU32 = AtomicU32::new(0);
/// The file (a leaked C string), once registered.
static PATH: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// The hook to give the runtime when `SCHEDLAB_RT_EVENTS` names a file
/// (called once per runtime start, before any user thread exists).
pub(crate) fn hook(processors: usize) -> Option<fn(&Event)> {
    let path = std::env::var_os("SCHEDLAB_RT_EVENTS").filter(|p| !p.is_empty())?;
    let bytes = CAPACITY * std::mem::size_of::<Slot>();
    // SAFETY: a fresh anonymous mapping, zeroed by the kernel.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        crate::fatal("SCHEDLAB_RT_EVENTS: cannot map the event buffer");
    }
    NEXT.store(0, Ordering::Relaxed);
    BUF.store(p.cast(), Ordering::Release);
    PROCESSORS.store(processors as u32, Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() } as u32, Ordering::Release);
    if PATH.load(Ordering::Acquire).is_null() {
        let Ok(c) = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str())) else {
            crate::fatal("SCHEDLAB_RT_EVENTS contains a NUL byte")
        };
        PATH.store(c.into_raw(), Ordering::Release);
        // SAFETY: registers a function that takes nothing and returns nothing.
        unsafe { libc::atexit(write_out) };
    }
    Some(record)
}

/// The hook: claim a slot, fill it, publish its first word last.
fn record(e: &Event) {
    let i = NEXT.fetch_add(1, Ordering::Relaxed);
    let buf = BUF.load(Ordering::Acquire);
    if i >= CAPACITY || buf.is_null() {
        return;
    }
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-parameter on our stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let at = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let w = e.to_words();
    // SAFETY: slot `i` < CAPACITY of the live mapping, claimed by us alone.
    let slot = unsafe { &*buf.add(i) };
    slot[1].store(at, Ordering::Relaxed);
    slot[2].store(w[1], Ordering::Relaxed);
    slot[3].store(w[2], Ordering::Relaxed);
    slot[4].store(w[3], Ordering::Relaxed);
    slot[0].store(w[0], Ordering::Release);
}

/// The `atexit` handler: appends this process's block to the file.
extern "C" fn write_out() {
    let buf = BUF.load(Ordering::Acquire);
    let path = PATH.load(Ordering::Acquire);
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() } as u32;
    if buf.is_null() || path.is_null() || OWNER.load(Ordering::Acquire) != me {
        return;
    }
    let claimed = NEXT.load(Ordering::Acquire);
    let n = claimed.min(CAPACITY);
    let dropped = (claimed - n) as u64;
    let mut body = Vec::with_capacity(n * 40);
    for i in 0..n {
        // SAFETY: a slot of the live mapping.
        let slot = unsafe { &*buf.add(i) };
        let kind = slot[0].load(Ordering::Acquire);
        if kind == 0 {
            continue; // claimed, not yet filled: a thread still running at exit
        }
        for x in [slot[1].load(Ordering::Relaxed), kind]
            .into_iter()
            .chain((2..5).map(|k| slot[k].load(Ordering::Relaxed)))
        {
            body.extend_from_slice(&x.to_ne_bytes());
        }
    }
    let records = (body.len() / 40) as u64;
    let mut block = Vec::with_capacity(32 + body.len());
    block.extend_from_slice(b"SLRTEV01");
    block.extend_from_slice(&me.to_ne_bytes());
    block.extend_from_slice(&PROCESSORS.load(Ordering::Relaxed).to_ne_bytes());
    block.extend_from_slice(&records.to_ne_bytes());
    block.extend_from_slice(&dropped.to_ne_bytes());
    block.extend_from_slice(&body);
    // SAFETY: open/flock/write/close on a descriptor we own; `path` is our C string.
    // The system calls themselves: libc's `open`, `write` and `close` are this
    // library's, cancellation points on a user thread, and `exit` may run
    // this on one with a cancellation pending.
    unsafe {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC;
        let fd = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path, flags, 0o600) as libc::c_int;
        if fd < 0 {
            return;
        }
        libc::flock(fd, libc::LOCK_EX);
        let mut rest = &block[..];
        while !rest.is_empty() {
            let w = libc::syscall(libc::SYS_write, fd, rest.as_ptr(), rest.len());
            if w <= 0 {
                if w < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            rest = &rest[w as usize..];
        }
        libc::flock(fd, libc::LOCK_UN);
        libc::syscall(libc::SYS_close, fd);
    }
}
