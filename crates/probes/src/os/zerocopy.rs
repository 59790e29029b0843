//! `os.xfer.bandwidth`: moving a buffer from one process to another, by a plain copy through
//! a pipe against the ways Linux offers to copy less (seed 002, issue 26). Mach sends large
//! message bodies "out of line": the kernel maps the sender's pages into the receiver
//! copy-on-write instead of copying them. Linux has no such message, but it has the pieces:
//!
//! | `via`      | what one transfer of `size` bytes is                                   | copies |
//! |------------|-------------------------------------------------------------------------|--------|
//! | `copy`     | the child `write`s its buffer into a pipe, the parent `read`s it out     | 2      |
//! | `vmsplice` | the child `vmsplice`s its buffer into the pipe (the pipe holds references to its pages, no copy), the parent `read`s it out | 1 |
//! | `memfd`    | the child copies its buffer into a `memfd` both map `MAP_SHARED` and writes a 1-byte token; the parent, woken by the token, has the bytes in its own mapping | 1 |
//! | `readv`    | the parent pulls the child's buffer with `process_vm_readv`, the child idle | 1   |
//! | `writev`   | the parent pushes its buffer into the child's with `process_vm_writev`     | 1   |
//!
//! The first three are a request and a reply: the parent writes a 1-byte request on a
//! control pipe and the transfer ends when the bytes are in its memory (`copy`, `vmsplice`)
//! or its token arrived (`memfd`), so the next request is also the permission to reuse the
//! buffer. The last two need no help from the other process at all, which is their point
//! (and they need ptrace access to it: `kernel.yama.ptrace_scope` allows a parent its
//! child; a refusal skips with the reason). No way maps pages copy-on-write as Mach does: a
//! receiver that maps a memfd it was sent pays page faults instead of a copy, which
//! `os.mm.*` measures.
//!
//! Buffers are allocated and touched before the fork; the parent's buffer is compared with
//! the child's pattern after one transfer in setup. The pipe has its default size (noted).
//! One iteration is one transfer; MiB/s of `size`.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};
use std::{io, ptr};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sampler::Settings;
use schedlab_measure::sys::{self, raw, Placement};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::child::{peer_error, Pair};
use crate::{Context, Info, Instance, Probe, Suite};

/// The ways of moving a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Copy,
    Vmsplice,
    Memfd,
    Readv,
    Writev,
}

impl Via {
    const ALL: [Via; 5] = [Via::Copy, Via::Vmsplice, Via::Memfd, Via::Readv, Via::Writev];

    fn key(self) -> &'static str {
        match self {
            Via::Copy => "copy",
            Via::Vmsplice => "vmsplice",
            Via::Memfd => "memfd",
            Via::Readv => "readv",
            Via::Writev => "writev",
        }
    }

    fn from_params(p: &Params) -> Result<Via, ProbeError> {
        let text = p.get("via").unwrap_or("copy");
        Via::ALL.into_iter().find(|v| v.key() == text).ok_or_else(|| {
            ProbeError::Failed(format!(
                "bad via {text:?}: use copy, vmsplice, memfd, readv or writev"
            ))
        })
    }

    /// Whether the child serves each transfer (a request and a reply).
    fn served(self) -> bool {
        matches!(self, Via::Copy | Via::Vmsplice | Via::Memfd)
    }
}

struct Xfer;

/// The buffer-moving probe, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(Xfer)]
}

/// The byte the child's buffer is filled with, and the parent's before a transfer.
const PATTERN: u8 = 0x5a;
const BLANK: u8 = 0xa5;

impl Probe for Xfer {
    fn info(&self) -> Info {
        Info {
            id: "os.xfer.bandwidth",
            doc: "Move a size-byte buffer between two processes: pipe write+read (copy), vmsplice+read, a shared memfd (one copy + a token), process_vm_readv / writev; MiB/s per transfer",
            unit: Unit::MibPerSec,
            mirrors: "- (seed 002: Mach's out-of-line message memory; via=copy is os.pipe.bandwidth's pipe with a request per transfer); both processes pinned",
            requires: "ptrace access to a child for via=readv,writev; 2 CPUs for placement=cross",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let (sizes, placements): (&[&str], &[&str]) = match suite {
            Suite::Smoke => (&["64k"], &["cross"]),
            Suite::Quick => (&["64k", "1m"], &["cross"]),
            Suite::Full => (&["4k", "16k", "64k", "256k", "1m", "4m"], &["cross", "same"]),
        };
        let mut v = Vec::new();
        for p in placements {
            for s in sizes {
                for via in Via::ALL {
                    v.push(
                        Params::new().with("via", via.key()).with("size", s).with("placement", p),
                    );
                }
            }
        }
        v
    }

    /// The quick suite's lighter sampling: ten steady variants.
    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        match suite {
            Suite::Quick => Settings {
                samples: 7,
                target: Duration::from_millis(5),
                warmup: Duration::from_millis(10),
                ..default.clone()
            },
            _ => default.clone(),
        }
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        Ok(Box::new(start(params)?))
    }
}

/// Parses `size`: 1 byte to 64 MiB.
fn parse_size(params: &Params) -> Result<usize, ProbeError> {
    let text = params.get("size").unwrap_or("64k");
    let size = super::mm::parse_size(text)
        .filter(|s| (1..=64 << 20).contains(s))
        .ok_or_else(|| ProbeError::Failed(format!("bad size {text:?}: 1 to 64m")))?;
    Ok(size)
}

/// A shared, writable mapping of a memfd (or an anonymous private one), unmapped on drop.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn new(len: usize, fd: Option<RawFd>) -> Result<Map, ProbeError> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED, fd),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        };
        // SAFETY: a fresh mapping at an address of the kernel's choosing.
        let p = unsafe {
            libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(ProbeError::last_os("mmap"));
        }
        // Touched now (and so faulted in), as lmbench's bw_* touch their buffers.
        // SAFETY: `p` is a fresh writable mapping of `len` bytes.
        unsafe { ptr::write_bytes(p.cast::<u8>(), 0, len) };
        Ok(Map { ptr: p.cast(), len })
    }

    fn fill(&self, byte: u8) {
        // SAFETY: the whole mapping is ours and writable.
        unsafe { ptr::write_bytes(self.ptr, byte, self.len) };
    }

    fn all(&self, byte: u8) -> bool {
        // SAFETY: the whole mapping is readable.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.iter().all(|&b| b == byte)
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `new` made, unmapped only here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A memfd of `len` bytes.
fn memfd(len: usize) -> Result<OwnedFd, ProbeError> {
    // SAFETY: the name is NUL-terminated; flags are plain.
    let fd = unsafe { libc::memfd_create(c"schedlab-xfer".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(ProbeError::last_os("memfd_create"));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our descriptor.
    if unsafe { libc::ftruncate(raw(&fd), len as libc::off_t) } != 0 {
        return Err(ProbeError::last_os("ftruncate(memfd)"));
    }
    Ok(fd)
}

/// vmsplice all of `buf` into the pipe `fd`, in as many calls as the pipe needs.
/// Async-signal-safe.
fn vmsplice_all(fd: RawFd, buf: *const u8, len: usize) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        // SAFETY: `buf + done .. buf + len` is a live, readable buffer.
        let iov = libc::iovec { iov_base: unsafe { buf.add(done) } as *mut _, iov_len: len - done };
        // SAFETY: one valid iovec; the pages stay unchanged until the reader took them (the
        // next request comes after).
        let n = unsafe { libc::vmsplice(fd, &iov, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// process_vm_readv (`write` false) or process_vm_writev of `len` bytes between `local` and
/// `remote` in process `pid`, repeated until all moved.
fn vm_copy(
    pid: libc::pid_t,
    local: *mut u8,
    remote: *mut u8,
    len: usize,
    write: bool,
) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        // SAFETY: offsets inside the two `len`-byte buffers.
        let (l, r) = unsafe { (local.add(done), remote.add(done)) };
        let liov = libc::iovec { iov_base: l.cast(), iov_len: len - done };
        let riov = libc::iovec { iov_base: r.cast(), iov_len: len - done };
        // SAFETY: the local iovec is our live buffer; the remote one is checked by the kernel
        // against the other process's mappings.
        let n = unsafe {
            if write {
                libc::process_vm_writev(pid, &liov, 1, &riov, 1, 0)
            } else {
                libc::process_vm_readv(pid, &liov, 1, &riov, 1, 0)
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "moved no bytes"));
        }
        done += n as usize;
    }
    Ok(())
}

fn start(params: &Params) -> Result<Transfer, ProbeError> {
    let via = Via::from_params(params)?;
    let size = parse_size(params)?;
    let placement = Placement::parse(Some(params.get("placement").unwrap_or("cross")))?;
    let (data_r, data_w) = sys::pipe()?;
    let (ctl_r, ctl_w) = sys::pipe()?;
    let shared = match via {
        Via::Memfd => Some(memfd(size)?),
        _ => None,
    };
    let child_buf = Map::new(size, None)?;
    child_buf.fill(PATTERN);
    let parent_buf = match &shared {
        Some(fd) => Map::new(size, Some(raw(fd)))?,
        None => Map::new(size, None)?,
    };
    let (ctl, out, parent_ends) = (raw(&ctl_r), raw(&data_w), [raw(&data_r), raw(&ctl_w)]);
    let (src, dst) = (child_buf.ptr, parent_buf.ptr);
    let pair = Pair::fork(placement, ["receiver", "sender"], &parent_ends, move || {
        let mut req = [0u8; 1];
        loop {
            if sys::read_exact(ctl, &mut req).is_err() {
                return 0;
            }
            let sent = match via {
                // SAFETY: `src` is the child's `size`-byte buffer (its copy of the mapping).
                Via::Copy => sys::write_all(out, unsafe { std::slice::from_raw_parts(src, size) }),
                Via::Vmsplice => vmsplice_all(out, src, size),
                Via::Memfd => {
                    // SAFETY: `dst` is the shared mapping, `size` bytes, distinct from `src`.
                    unsafe { ptr::copy_nonoverlapping(src, dst, size) };
                    sys::write_all(out, &[1])
                }
                Via::Readv | Via::Writev => Ok(()),
            };
            if sent.is_err() {
                return 1;
            }
        }
    })?;
    drop((ctl_r, data_w));
    // SAFETY: F_GETPIPE_SZ on an open pipe takes no pointers.
    let pipe_bytes = unsafe { libc::fcntl(raw(&data_r), libc::F_GETPIPE_SZ) };
    let mut t = Transfer {
        via,
        size,
        data: data_r,
        control: ctl_w,
        buf: parent_buf,
        remote: src,
        pipe_bytes,
        _child_buf: child_buf,
        _shared: shared,
        pair,
    };
    // One transfer, checked byte for byte (for writev: the child's copy cannot be read
    // here, so the pull of readv checks the path; a refused call skips).
    t.buf.fill(BLANK);
    if via == Via::Writev {
        t.buf.fill(PATTERN);
    }
    t.transfers(1).map_err(|e| match e {
        ProbeError::Failed(m) if m.contains("Operation not permitted") => ProbeError::Skip(format!(
            "process_vm_{} on the child refused ({m}): ptrace access denied (kernel.yama.ptrace_scope, or no CAP_SYS_PTRACE)",
            if via == Via::Readv { "readv" } else { "writev" }
        )),
        ProbeError::Failed(m) if m.contains("Function not implemented") => ProbeError::Skip(format!(
            "{m}: this kernel lacks CONFIG_CROSS_MEMORY_ATTACH"
        )),
        e => e,
    })?;
    if !t.buf.all(PATTERN) {
        return Err(ProbeError::Failed(format!("via={}: the buffer arrived altered", via.key())));
    }
    Ok(t)
}

struct Transfer {
    via: Via,
    size: usize,
    data: OwnedFd,
    control: OwnedFd,
    /// The parent's buffer (for memfd, its view of the shared mapping).
    buf: Map,
    /// The child's buffer's address, the same in both processes (mapped before the fork).
    remote: *mut u8,
    pipe_bytes: libc::c_int,
    _child_buf: Map,
    _shared: Option<OwnedFd>,
    /// The pinned sender child and the pinned receiver.
    pair: Pair,
}

impl Transfer {
    /// `iters` transfers, untimed; the caller times them.
    fn transfers(&mut self, iters: u64) -> Result<(), ProbeError> {
        let what = self.via.key();
        let (ctl, data, pid) = (raw(&self.control), raw(&self.data), self.pair.pid());
        for _ in 0..iters {
            match self.via {
                Via::Readv | Via::Writev => {
                    vm_copy(pid, self.buf.ptr, self.remote, self.size, self.via == Via::Writev)
                        .map_err(|e| peer_error(what, "process_vm", e))?;
                }
                Via::Copy | Via::Vmsplice => {
                    sys::write_all(ctl, &[1]).map_err(|e| peer_error(what, "request", e))?;
                    // SAFETY: the parent's own `size`-byte buffer.
                    let buf = unsafe { std::slice::from_raw_parts_mut(self.buf.ptr, self.size) };
                    sys::read_exact(data, buf).map_err(|e| peer_error(what, "read", e))?;
                }
                Via::Memfd => {
                    sys::write_all(ctl, &[1]).map_err(|e| peer_error(what, "request", e))?;
                    let mut token = [0u8; 1];
                    sys::read_exact(data, &mut token).map_err(|e| peer_error(what, "token", e))?;
                }
            }
        }
        Ok(())
    }
}

impl Workload for Transfer {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let start = Instant::now();
        self.transfers(iters)?;
        Ok(self.pair.timing(start))
    }

    fn parties(&self) -> Vec<Party> {
        self.pair.parties()
    }
}

impl Instance for Transfer {
    fn metric(&self) -> Metric {
        Metric::bandwidth(self.size as f64)
    }

    fn notes(&self) -> Params {
        let n = Params::new()
            .with("cpus", self.pair.cpus_note())
            .with("bytes", self.size)
            .with("child_serves", self.via.served());
        match self.via {
            Via::Copy | Via::Vmsplice => n.with("pipe_bytes", self.pipe_bytes),
            _ => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(via: Via, size: &str, placement: &str) -> Params {
        Params::new().with("via", via.key()).with("size", size).with("placement", placement)
    }

    #[test]
    fn every_way_moves_the_bytes_or_skips_with_a_reason() {
        let placement = if sys::allowed_cpus().len() >= 2 { "cross" } else { "same" };
        for via in Via::ALL {
            // 300 KiB: more than the pipe holds, not a whole number of pages.
            match start(&params(via, "300001", placement)) {
                Err(ProbeError::Skip(why)) => eprintln!("{via:?} skipped: {why}"),
                Err(e) => panic!("{via:?}: {e}"),
                Ok(mut t) => {
                    t.buf.fill(BLANK);
                    if via == Via::Writev {
                        t.buf.fill(PATTERN);
                    }
                    t.run(3).unwrap();
                    assert!(t.buf.all(PATTERN), "{via:?}");
                }
            }
        }
    }

    #[test]
    fn writev_lands_in_the_childs_buffer() {
        let Ok(mut t) = start(&params(Via::Writev, "8k", "same")) else { return };
        // Push a new pattern, pull it back through readv.
        t.buf.fill(0x33);
        t.transfers(1).unwrap();
        t.buf.fill(0);
        t.via = Via::Readv;
        t.transfers(1).unwrap();
        assert!(t.buf.all(0x33));
    }

    #[test]
    fn bad_parameters_are_errors_naming_them() {
        let e = start(&Params::new().with("via", "mmap")).err().unwrap();
        assert!(e.to_string().contains("mmap"), "{e}");
        let e = start(&Params::new().with("size", "0")).err().unwrap();
        assert!(e.to_string().contains("\"0\""), "{e}");
    }
}
