//! The few userfaultfd calls idle-stack reclaim needs (`reclaim.rs`), in one
//! place: open a descriptor, register a range for missing-page faults, move a
//! page out of a range, fill a missing page, read fault events.
//!
//! A range registered in `MISSING` mode does not zero-fill a missing page on
//! access: the access — by any thread, and by the kernel itself (a `read(2)`
//! into that page), since we never ask for `UFFD_USER_MODE_ONLY` — waits until
//! someone fills the page with [`Uffd::copy`] (man 2 `ioctl_userfaultfd`,
//! `UFFDIO_COPY`). [`Uffd::move_page`] (`UFFDIO_MOVE`, Linux 6.8) takes a
//! page out of such a range atomically: an access after it faults, one before
//! it is in the page moved. This file knows nothing of stacks or threads.
//!
//! The constants and structures are the kernel's uapi, from
//! [`crate::userfaultfd`] (the one copy, which the lab's probe uses too).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use crate::userfaultfd::{
    UffdMsg, UffdioApi, UffdioCopy, UffdioRange, UffdioRegister, UffdioZeropage, UFFDIO_API,
    UFFDIO_COPY, UFFDIO_MOVE, UFFDIO_REGISTER, UFFDIO_REGISTER_MODE_MISSING, UFFDIO_UNREGISTER,
    UFFDIO_WAKE, UFFDIO_ZEROPAGE, UFFD_API, UFFD_EVENT_PAGEFAULT, UFFD_FEATURE_MOVE,
    USERFAULTFD_IOC_NEW,
};

/// A userfaultfd descriptor set up for missing-page faults and page moves.
#[derive(Debug)]
pub(crate) struct Uffd(OwnedFd);

/// How a fill or a move ended when it did not fill or move the page.
#[derive(Debug)]
pub(crate) enum Miss {
    /// The destination page is already there (another fill won).
    Exists,
    /// The source page of a move is not there (nothing to move).
    NoSource(io::Error),
    /// Any other error.
    Failed(io::Error),
}

/// Runs `f` (a system call) and leaves `errno` as it found it, returning the
/// call's result and the error it set. The restore path runs on a kernel
/// thread about to resume a user thread whose `errno` may be the one in
/// effect (the `shared-library` build, as `futex.rs` says).
fn keep_errno(f: impl FnOnce() -> libc::c_long) -> Result<libc::c_long, io::Error> {
    // SAFETY: errno is the calling thread's.
    let saved = unsafe { *libc::__errno_location() };
    let rc = f();
    let err = io::Error::last_os_error();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    if rc < 0 {
        Err(err)
    } else {
        Ok(rc)
    }
}

impl Uffd {
    /// Opens a descriptor whose faults include the kernel's own accesses
    /// (not `UFFD_USER_MODE_ONLY`: a `read(2)` into a reclaimed page must be
    /// served, not fail with `EFAULT`), non-blocking, with `UFFDIO_MOVE`.
    /// The system call needs `CAP_SYS_PTRACE` unless
    /// `vm.unprivileged_userfaultfd` is 1; `/dev/userfaultfd` (Linux 6.1)
    /// needs its file permission instead: both are tried.
    pub(crate) fn open() -> io::Result<Uffd> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: userfaultfd(2) takes flags only.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        let fd = if fd >= 0 {
            fd as libc::c_int
        } else {
            let first = io::Error::last_os_error();
            // SAFETY: a NUL-terminated path; the flags ask for nothing else.
            // The system call: libc's `open` is the pthread library's, a
            // cancellation point on a user thread (a forked child's handler
            // runs on the forking one).
            let dev = unsafe {
                libc::syscall(
                    libc::SYS_openat,
                    libc::AT_FDCWD,
                    c"/dev/userfaultfd".as_ptr(),
                    libc::O_RDWR | libc::O_CLOEXEC,
                )
            } as libc::c_int;
            if dev < 0 {
                return Err(first);
            }
            // SAFETY: `dev` is ours; the ioctl takes the new descriptor's flags.
            let fd = unsafe { libc::ioctl(dev, USERFAULTFD_IOC_NEW as _, flags) };
            let err = io::Error::last_os_error();
            // SAFETY: `dev` is ours and not used again (the system call:
            // libc's `close` is the pthread library's, which asks its
            // poller, whose locks a forked child may have inherited taken).
            unsafe { libc::syscall(libc::SYS_close, dev) };
            if fd < 0 {
                return Err(err);
            }
            fd
        };
        // SAFETY: a descriptor just returned to us, owned by nobody else.
        let uffd = Uffd(unsafe { OwnedFd::from_raw_fd(fd) });
        let mut api = UffdioApi { api: UFFD_API, features: UFFD_FEATURE_MOVE, ioctls: 0 };
        // SAFETY: UFFDIO_API reads and writes the `UffdioApi` on our stack.
        if unsafe { libc::ioctl(uffd.fd(), UFFDIO_API as _, &mut api) } != 0 {
            // EINVAL: a kernel without UFFDIO_MOVE (before 6.8).
            return Err(io::Error::last_os_error());
        }
        if api.features & UFFD_FEATURE_MOVE == 0 {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        Ok(uffd)
    }

    /// Closes the descriptor with the system call (see `open`), for a
    /// forked child's handler.
    pub(crate) fn close(self) {
        let fd = self.0.into_raw_fd();
        // SAFETY: ours, not used again.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    }

    fn fd(&self) -> libc::c_int {
        self.0.as_raw_fd()
    }

    fn ioctl<T>(&self, req: u64, arg: &mut T) -> Result<libc::c_long, io::Error> {
        // SAFETY: every request of this file takes a pointer to the
        // structure its constant was sized for, which `arg` is; the kernel
        // only reads and writes that structure (and the memory it names,
        // whose validity each caller states).
        keep_errno(|| unsafe { libc::ioctl(self.fd(), req as _, arg as *mut T) } as libc::c_long)
    }

    /// Registers `start..start + len` (page aligned, anonymous private
    /// memory) for missing-page faults. `ENOMEM` when splitting its mapping
    /// would pass `vm.max_map_count`.
    pub(crate) fn register(&self, start: usize, len: usize) -> io::Result<()> {
        let mut r = UffdioRegister {
            range: UffdioRange { start: start as u64, len: len as u64 },
            mode: UFFDIO_REGISTER_MODE_MISSING,
            ioctls: 0,
        };
        self.ioctl(UFFDIO_REGISTER, &mut r).map(drop)
    }

    /// Undoes [`register`](Self::register); threads waiting on a fault there
    /// are woken (and retry it as an ordinary fault).
    pub(crate) fn unregister(&self, start: usize, len: usize) -> io::Result<()> {
        let mut r = UffdioRange { start: start as u64, len: len as u64 };
        self.ioctl(UFFDIO_UNREGISTER, &mut r).map(drop)
    }

    /// Wakes threads waiting on a fault in `start..start + len`.
    pub(crate) fn wake(&self, start: usize, len: usize) {
        let mut r = UffdioRange { start: start as u64, len: len as u64 };
        let _ = self.ioctl(UFFDIO_WAKE, &mut r);
    }

    /// Fills the missing page(s) `dst..dst + len` of a registered range with
    /// the bytes at `src` (page aligned) and wakes who waits on them.
    /// Retries while the kernel says `EAGAIN`.
    ///
    /// # Safety
    ///
    /// `src..src + len` must be readable; `dst` must be in a registered range
    /// (the kernel checks the rest).
    pub(crate) unsafe fn copy(&self, dst: usize, src: *const u8, len: usize) -> Result<(), Miss> {
        loop {
            let mut c =
                UffdioCopy { dst: dst as u64, src: src as u64, len: len as u64, mode: 0, copy: 0 };
            return match self.ioctl(UFFDIO_COPY, &mut c) {
                Ok(_) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Err(Miss::Exists),
                Err(e) => Err(Miss::Failed(e)),
            };
        }
    }

    /// Fills the missing page `dst` of a registered range with zeros.
    pub(crate) fn zero(&self, dst: usize, len: usize) -> Result<(), Miss> {
        loop {
            let mut z = UffdioZeropage {
                range: UffdioRange { start: dst as u64, len: len as u64 },
                mode: 0,
                zeropage: 0,
            };
            return match self.ioctl(UFFDIO_ZEROPAGE, &mut z) {
                Ok(_) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Err(Miss::Exists),
                Err(e) => Err(Miss::Failed(e)),
            };
        }
    }

    /// Moves the page at `src` to the missing page `dst` (in a registered
    /// range) atomically: `src` is missing afterwards. `EBUSY` when the page
    /// is shared (after a `fork`, or pinned).
    ///
    /// # Safety
    ///
    /// Both are page aligned pages of anonymous private mappings of ours whose
    /// contents the caller may take.
    pub(crate) unsafe fn move_page(&self, dst: usize, src: usize, len: usize) -> Result<(), Miss> {
        loop {
            let mut m =
                UffdioCopy { dst: dst as u64, src: src as u64, len: len as u64, mode: 0, copy: 0 };
            return match self.ioctl(UFFDIO_MOVE, &mut m) {
                Ok(_) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Err(Miss::Exists),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(Miss::NoSource(e)),
                Err(e) => Err(Miss::Failed(e)),
            };
        }
    }

    /// The faulting addresses of the page-fault events queued now (none if
    /// none: the descriptor does not block), appended to `out`.
    pub(crate) fn read_faults(&self, out: &mut Vec<usize>) {
        let mut buf = [UffdMsg::default(); 16];
        loop {
            // SAFETY: reads whole messages into our own buffer, of its length.
            let n = unsafe {
                libc::read(self.fd(), buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf))
            };
            if n <= 0 {
                return;
            }
            let got = n as usize / std::mem::size_of::<UffdMsg>();
            for msg in buf[..got].iter().filter(|m| m.event == UFFD_EVENT_PAGEFAULT) {
                out.push(msg.address as usize);
            }
        }
    }

    /// Waits until fault events are queued or `stop` (a descriptor) becomes
    /// readable; whether `stop` did.
    pub(crate) fn wait(&self, stop: libc::c_int) -> bool {
        let mut fds = [
            libc::pollfd { fd: self.fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: two pollfds on our stack.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        rc > 0 && fds[1].revents != 0
    }
}

/// One page of heap memory, page aligned (`UFFDIO_COPY` wants an aligned
/// source), zeroed when made.
pub(crate) struct PageBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl PageBuf {
    pub(crate) fn new(page: usize) -> PageBuf {
        let layout = std::alloc::Layout::from_size_align(page, page).expect("a page is a layout");
        // SAFETY: a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        PageBuf { ptr, layout }
    }

    pub(crate) fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ours, of this length, initialized (zeroed at first).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }

    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

// SAFETY: a plain owned allocation.
unsafe impl Send for PageBuf {}
