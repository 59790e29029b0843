//! `os.mm.uffd`: a page fault served by a pager in user space (seed 002, issue 26). Mach
//! let a user task back memory: on a fault the kernel sends the task's pager a message and
//! the faulting thread waits for the reply with the data; seed 002 notes the cost ("two
//! switches between user and kernel mode ... and the housekeeping of the message queues")
//! and that xnu moved its pagers into the kernel for it. Linux's external pager is
//! `userfaultfd(2)`, and this probe measures its round trip beside the kernel's own.
//!
//! One iteration is one write fault on a fresh page of a private anonymous region (4 MiB,
//! huge pages refused with `MADV_NOHUGEPAGE` so that every fault is one 4 KiB page):
//! - `pager=kernel`: the kernel allocates and zeroes the page, the usual anonymous fault;
//! - `pager=uffd`: the region is registered with a userfaultfd (`UFFDIO_REGISTER_MODE_MISSING`);
//!   the fault queues a message and the faulting thread sleeps; a handler thread, blocked in
//!   `poll` on the descriptor as in the man page's example, reads the message and answers
//!   with `UFFDIO_COPY` of a prepared page, which maps it and wakes the faulting thread. The
//!   handler runs on the measuring thread's CPU (`placement=same`: each fault is two context
//!   switches) or on the other CPU (`cross`: a cross-CPU wake-up each way).
//!
//! When every page has been touched the region is emptied again with `MADV_DONTNEED`, outside
//! the timed part (the clock is stopped around it), so the figure is the fault alone;
//! `os.mm.pagefault` is the other fault path, a read of a cached file page.
//!
//! Permission: an unprivileged process may create a userfaultfd only for faults taken in user
//! mode (`UFFD_USER_MODE_ONLY`, Linux 5.11), or with `vm.unprivileged_userfaultfd=1`, or
//! through `/dev/userfaultfd` (Linux 6.1) when its mode allows; each is tried in turn and a
//! refusal of all skips with the reasons.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sys::{self, raw, PinGuard, Placement};
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe, Suite};

// The userfaultfd ABI (linux/userfaultfd.h): the libc crate does not carry it, and the
// runtime's idle-stack reclaim needs it too, so its one copy is schedlab-rt's.
use schedlab_rt::userfaultfd::{
    UffdMsg, UffdioApi, UffdioCopy, UffdioRange, UffdioRegister, UffdioZeropage, UFFDIO_API,
    UFFDIO_COPY, UFFDIO_REGISTER, UFFDIO_REGISTER_MODE_MISSING, UFFDIO_ZEROPAGE, UFFD_API,
    UFFD_EVENT_PAGEFAULT, UFFD_USER_MODE_ONLY, USERFAULTFD_IOC_NEW,
};

/// The region faulted in, page by page: 1024 pages of 4 KiB.
const REGION: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pager {
    Kernel,
    Uffd,
}

struct UffdProbe;

/// The user-space pager probe, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(UffdProbe)]
}

impl Probe for UffdProbe {
    fn info(&self) -> Info {
        Info {
            id: "os.mm.uffd",
            doc: "A write fault on a fresh anonymous 4 KiB page, served by the kernel (pager=kernel) or by a userfaultfd handler thread with UFFDIO_COPY (pager=uffd): µs per fault",
            unit: Unit::Micros,
            mirrors: "- (seed 002: Mach's external pagers; beside os.mm.pagefault, lmbench lat_pagefault's file fault); the region is emptied with MADV_DONTNEED outside the timing",
            requires: "userfaultfd permitted for pager=uffd (UFFD_USER_MODE_ONLY, vm.unprivileged_userfaultfd=1, /dev/userfaultfd or CAP_SYS_PTRACE); 2 CPUs for placement=cross",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let mut v = vec![Params::new().with("pager", "kernel")];
        let placements: &[&str] = match suite {
            Suite::Smoke => &["same"],
            Suite::Quick | Suite::Full => &["same", "cross"],
        };
        v.extend(
            placements.iter().map(|p| Params::new().with("pager", "uffd").with("placement", p)),
        );
        v
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        Ok(Box::new(start(params)?))
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}

/// An anonymous private mapping, unmapped on drop.
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    fn new(len: usize) -> Result<Region, ProbeError> {
        // SAFETY: a fresh mapping at an address of the kernel's choosing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ProbeError::last_os("mmap"));
        }
        let r = Region { ptr: p.cast(), len };
        // One page per fault: no transparent huge pages here. Refused only where THP is not
        // built in, where there are none anyway.
        // SAFETY: advice on our own mapping.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        Ok(r)
    }

    /// Drops every page, so the next touch of each faults again.
    fn empty(&self) -> Result<(), ProbeError> {
        // SAFETY: our own mapping; its contents are ours to discard.
        if unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_DONTNEED) } != 0 {
            return Err(ProbeError::last_os("madvise(MADV_DONTNEED)"));
        }
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `new` made.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A new userfaultfd, by the first way this process is allowed; a skip naming every refusal.
fn open_uffd() -> Result<OwnedFd, ProbeError> {
    let mut why = Vec::new();
    // Non-blocking, as poll needs: on a blocking userfaultfd poll always reports POLLERR
    // (fs/userfaultfd.c), and the handler would sit in read, deaf to its stop pipe.
    let base = libc::O_CLOEXEC | libc::O_NONBLOCK;
    for flags in [base | UFFD_USER_MODE_ONLY, base] {
        // SAFETY: userfaultfd takes flags only.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as RawFd;
        if fd >= 0 {
            // SAFETY: a fresh descriptor nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSYS) {
            return Err(ProbeError::Skip(
                "userfaultfd is not in this kernel (CONFIG_USERFAULTFD)".into(),
            ));
        }
        let mode = if flags & UFFD_USER_MODE_ONLY != 0 { "user-mode-only" } else { "plain" };
        why.push(format!("userfaultfd({mode}): {e}"));
    }
    // SAFETY: the path is NUL-terminated.
    let dev = unsafe { libc::open(c"/dev/userfaultfd".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if dev >= 0 {
        // SAFETY: a fresh descriptor nothing else owns.
        let dev = unsafe { OwnedFd::from_raw_fd(dev) };
        // SAFETY: USERFAULTFD_IOC_NEW takes the new descriptor's flags.
        let fd = unsafe { libc::ioctl(raw(&dev), USERFAULTFD_IOC_NEW, base) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        why.push(format!("/dev/userfaultfd: {}", io::Error::last_os_error()));
    } else {
        why.push(format!("/dev/userfaultfd: {}", io::Error::last_os_error()));
    }
    let sysctl = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    Err(ProbeError::Skip(format!(
        "userfaultfd not permitted (vm.unprivileged_userfaultfd={sysctl}; {})",
        why.join("; ")
    )))
}

/// Handshakes the API and registers `region` for missing-page faults.
fn register(uffd: RawFd, region: &Region) -> Result<(), ProbeError> {
    let mut api = UffdioApi { api: UFFD_API, features: 0, ioctls: 0 };
    // SAFETY: `api` is the struct UFFDIO_API reads and writes.
    if unsafe { libc::ioctl(uffd, UFFDIO_API, &mut api) } != 0 {
        return Err(ProbeError::last_os("ioctl(UFFDIO_API)"));
    }
    let mut reg = UffdioRegister {
        range: UffdioRange { start: region.ptr as u64, len: region.len as u64 },
        mode: UFFDIO_REGISTER_MODE_MISSING,
        ioctls: 0,
    };
    // SAFETY: `reg` is the struct UFFDIO_REGISTER reads and writes; the range is our mapping.
    if unsafe { libc::ioctl(uffd, UFFDIO_REGISTER, &mut reg) } != 0 {
        return Err(ProbeError::last_os("ioctl(UFFDIO_REGISTER)"));
    }
    Ok(())
}

/// The handler thread's body: answer every fault with a copy of `source` until `stop` is
/// readable. A failed copy is recorded in `error` and the page zero-filled instead, so the
/// faulting thread never waits for ever.
fn serve(uffd: RawFd, stop: RawFd, source: usize, page: usize, error: &AtomicI32) {
    let mut fds = [
        libc::pollfd { fd: uffd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
    ];
    loop {
        // SAFETY: two valid pollfds; no timeout.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            continue;
        }
        if fds[1].revents != 0 {
            return;
        }
        // One message. A read that finds nothing (EAGAIN: another wake-up) goes back to poll.
        let mut msg = UffdMsg::default();
        let size = std::mem::size_of::<UffdMsg>();
        // SAFETY: `msg` is `size` writable bytes.
        let got = unsafe { libc::read(uffd, (&raw mut msg).cast(), size) };
        if got != size as isize || msg.event != UFFD_EVENT_PAGEFAULT {
            continue;
        }
        let dst = msg.address & !(page as u64 - 1);
        let mut copy = UffdioCopy { dst, src: source as u64, len: page as u64, mode: 0, copy: 0 };
        // SAFETY: `copy` is the struct UFFDIO_COPY reads and writes; `src` is a live page.
        if unsafe { libc::ioctl(uffd, UFFDIO_COPY, &mut copy) } != 0 {
            let e = io::Error::last_os_error().raw_os_error().unwrap_or(-1);
            if e == libc::EEXIST {
                continue;
            }
            error.store(e, Ordering::Relaxed);
            let range = UffdioRange { start: dst, len: page as u64 };
            let mut zero = UffdioZeropage { range, mode: 0, zeropage: 0 };
            // SAFETY: as above, UFFDIO_ZEROPAGE's struct.
            unsafe { libc::ioctl(uffd, UFFDIO_ZEROPAGE, &mut zero) };
        }
    }
}

/// The handler thread, stopped and joined on drop.
struct Handler {
    stop: OwnedFd,
    thread: Option<JoinHandle<()>>,
    tid: libc::pid_t,
    error: Arc<AtomicI32>,
}

impl Drop for Handler {
    fn drop(&mut self) {
        let _ = sys::write_all(raw(&self.stop), &[1]);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start(params: &Params) -> Result<Faults, ProbeError> {
    let pager = match params.get("pager").unwrap_or("kernel") {
        "kernel" => Pager::Kernel,
        "uffd" => Pager::Uffd,
        other => {
            return Err(ProbeError::Failed(format!("bad pager {other:?}: use kernel or uffd")))
        }
    };
    let (cpu, handler_cpu) = Placement::from_params(params)?.cpus()?;
    let page = page_size();
    let region = Region::new(REGION)?;
    let source = Region::new(page)?;
    // SAFETY: `source` is one writable page of ours.
    unsafe { std::ptr::write_bytes(source.ptr, 0x5a, page) };
    let (uffd, handler) = match pager {
        Pager::Kernel => (None, None),
        Pager::Uffd => {
            let uffd = open_uffd()?;
            register(uffd.as_raw_fd(), &region)?;
            let (stop_r, stop_w) = sys::pipe()?;
            let error = Arc::new(AtomicI32::new(0));
            let (fd, src, err) = (uffd.as_raw_fd(), source.ptr as usize, error.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            let thread = std::thread::Builder::new()
                .name("uffd-pager".into())
                .spawn(move || {
                    let pinned = sys::pin_to(handler_cpu).map(|()| sys::gettid());
                    let ok = pinned.is_ok();
                    let _ = tx.send(pinned);
                    if ok {
                        serve(fd, raw(&stop_r), src, page, &err);
                    }
                })
                .map_err(|e| ProbeError::io("spawn the uffd handler", e))?;
            let mut h = Handler { stop: stop_w, thread: Some(thread), tid: 0, error };
            h.tid = rx.recv().map_err(|_| ProbeError::Failed("uffd handler died".into()))??;
            (Some(uffd), Some(h))
        }
    };
    let pin = PinGuard::pin(cpu)?;
    let mut f = Faults {
        pager,
        page,
        next: 0,
        faults: 0,
        cpus: (cpu, handler_cpu),
        handler,
        region,
        _source: source,
        _uffd: uffd,
        _pin: pin,
    };
    // One fault, and the page's content checked: the handler's copy, or the kernel's zeroes.
    f.touch(1)?;
    // SAFETY: the first page was just faulted in; the touch wrote byte 0 only.
    let second = unsafe { f.region.ptr.add(1).read_volatile() };
    let want = if pager == Pager::Uffd { 0x5a } else { 0 };
    if second != want {
        return Err(ProbeError::Failed(format!(
            "pager={pager:?}: the page holds {second:#x}, not {want:#x}"
        )));
    }
    Ok(f)
}

struct Faults {
    pager: Pager,
    page: usize,
    /// The next untouched page.
    next: usize,
    faults: u64,
    cpus: (usize, usize),
    /// Dropped first: stops and joins the handler before the region, the source page and the
    /// descriptor it uses go.
    handler: Option<Handler>,
    region: Region,
    /// The page the handler copies from; outlives it (dropped after `handler`).
    _source: Region,
    _uffd: Option<OwnedFd>,
    _pin: PinGuard,
}

impl Faults {
    /// `iters` faults; returns the time of the touches alone (the emptying of the region,
    /// when it runs out, is not counted).
    fn touch(&mut self, iters: u64) -> Result<Duration, ProbeError> {
        let pages = self.region.len / self.page;
        let mut left = iters;
        let mut elapsed = Duration::ZERO;
        while left > 0 {
            let n = (left as usize).min(pages - self.next);
            let start = Instant::now();
            for k in self.next..self.next + n {
                // SAFETY: page `k` < pages lies inside our writable region.
                unsafe { self.region.ptr.add(k * self.page).write_volatile(1) };
            }
            elapsed += start.elapsed();
            self.next += n;
            left -= n as u64;
            if self.next == pages {
                self.region.empty()?;
                self.next = 0;
                if interrupt::requested() {
                    return Err(ProbeError::Interrupted);
                }
            }
        }
        self.faults += iters;
        if let Some(h) = &self.handler {
            let e = h.error.load(Ordering::Relaxed);
            if e != 0 {
                return Err(ProbeError::Failed(format!(
                    "UFFDIO_COPY: {}",
                    io::Error::from_raw_os_error(e)
                )));
            }
        }
        Ok(elapsed)
    }
}

impl Workload for Faults {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let elapsed = self.touch(iters)?;
        Ok(Timing {
            elapsed,
            migrated: sys::current_cpu() != Some(self.cpus.0),
            overhead: Duration::ZERO,
        })
    }

    fn parties(&self) -> Vec<Party> {
        match &self.handler {
            Some(h) => vec![Party::caller("faulter"), Party::task("pager", h.tid)],
            None => vec![Party::caller("faulter")],
        }
    }
}

impl Instance for Faults {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let n = Params::new().with("page_bytes", self.page).with("region_bytes", self.region.len);
        match self.pager {
            Pager::Uffd => n
                .with("cpus", format!("{},{}", self.cpus.0, self.cpus.1))
                .with("handler", "poll+read+UFFDIO_COPY"),
            Pager::Kernel => n.with("cpus", self.cpus.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_is_served_and_the_pages_hold_the_pagers_bytes() {
        for params in UffdProbe.variants(Suite::Full) {
            let mut f = match start(&params) {
                Ok(f) => f,
                Err(ProbeError::Skip(why)) => {
                    eprintln!("[{params}] skipped: {why}");
                    continue;
                }
                Err(e) => panic!("[{params}]: {e}"),
            };
            // More faults than the region has pages: it is emptied and faulted again.
            f.run(1500).unwrap();
            let want = if f.pager == Pager::Uffd { 0x5a } else { 0 };
            // SAFETY: page 1500 - 1024 + 1 = 477 was faulted in after the emptying; its
            // second byte was not written by the touch.
            let b = unsafe { f.region.ptr.add(476 * f.page + 1).read_volatile() };
            assert_eq!(b, want, "[{params}]");
        }
    }

    #[test]
    fn a_bad_pager_is_an_error_naming_it() {
        let e = start(&Params::new().with("pager", "mach")).err().unwrap();
        assert!(e.to_string().contains("mach"), "{e}");
    }
}
