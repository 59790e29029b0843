//! Mach's IPC, the Linux way (seed 002, issue 26): a port right passed in a message, and
//! kernel message queues. Seed 002 credits Mach's port messages and port rights for its
//! design and blames them for its speed; Linux has no ports, but it has the three things a
//! Mach message is made of:
//!
//! - **a right carried in a message**: a file descriptor passed over an `AF_UNIX` socket
//!   (`SCM_RIGHTS`), the receiver getting a new descriptor for the same open file, as a
//!   Mach receiver gets a send right in its own name space (`os.fdpass.latency`);
//! - **a queue of typed messages in the kernel**: POSIX message queues (`mq_send` /
//!   `mq_receive`, `os.mq.*`) and System V messages (`msgsnd` / `msgrcv`, `os.sysv.*`).
//!
//! Latency is a round trip, as `os.pipe.latency` and `lmbench lat_pipe` measure one, with the
//! same protocol (`ipc.rs`): everything is created before the fork, the pinned child echoes,
//! the pinned parent times `iters` round trips. Messages: 1 byte plus one descriptor each way
//! for `fdpass` (the receiver closes the descriptor it got, so nothing accumulates; the
//! difference from `os.unix.latency`, the same socket without a descriptor, is the price of
//! two rights), a 4-byte word each way for the queues (the pipe row's message).
//!
//! Bandwidth is `os.pipe.bandwidth`'s control-pipe scheme (`bandwidth.rs`): the writer child
//! sends exactly the messages each sample asks for. A queue message is at most
//! `fs.mqueue.msgsize_max` / `kernel.msgmax` bytes, 8 KiB by default on Linux (a SysV queue
//! also holds at most `kernel.msgmnb`, 16 KiB: two such messages), so the queues move 8 KiB
//! messages where the pipe row moves 64 KiB writes; the size is in the notes.
//!
//! A queue gives no end-of-file when its peer dies, so a dead child cannot be seen the way a
//! pipe's reader sees it: the parent's POSIX receive has a deadline (`mq_timedreceive`, 5 s),
//! and a watcher thread, blocked in `poll` on the child's pidfd, removes the SysV queue when
//! the child exits, which fails the parent's `msgrcv` with `EIDRM` instead of leaving it
//! blocked for ever.
//!
//! Skips: a kernel without POSIX queues (`ENOSYS`, `CONFIG_POSIX_MQUEUE`) or SysV IPC, or
//! limits that refuse the queue (`fs.mqueue.*`, `RLIMIT_MSGQUEUE`, `kernel.msgmni`), each with
//! the reason. POSIX queues need no mounted `/dev/mqueue`: `mq_open` uses the kernel's own
//! internal mount.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sys::{self, raw, Placement};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::child::{peer_error, placement_variants, Pair};
use super::ipc::unix_pair;
use crate::{Context, Info, Instance, Probe, Suite};

/// The largest message any channel here carries: Linux's default `msgsize_max` and `msgmax`.
const MSG_MAX: usize = 8192;

/// Bytes per message of the latency probes' queues: the pipe row's 4-byte word.
const WORD: usize = 4;

/// How long the parent waits for one POSIX queue message before calling the child dead.
const MQ_DEADLINE: Duration = Duration::from_secs(5);

/// The facilities measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A descriptor in a 1-byte `AF_UNIX` stream message (`SCM_RIGHTS`).
    FdPass,
    /// POSIX message queues.
    Mq,
    /// System V message queues.
    SysV,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::FdPass => "fd passing",
            Kind::Mq => "posix mq",
            Kind::SysV => "sysv msg",
        }
    }
}

/// A message buffer laid out as System V wants it (`long mtype; char mtext[]`); the other
/// channels use `text` alone. Allocated before the fork, so the child never allocates.
#[repr(C)]
struct Msg {
    mtype: libc::c_long,
    text: [u8; MSG_MAX],
}

impl Msg {
    fn boxed(fill: u8) -> Box<Msg> {
        Box::new(Msg { mtype: 0, text: [fill; MSG_MAX] })
    }
}

/// One direction of a channel, as raw handles a forked child can use (async-signal-safe
/// calls only, no allocation).
#[derive(Debug, Clone, Copy)]
enum End {
    /// A stream socket; `pass` is the descriptor every message sent carries.
    Sock { fd: RawFd, pass: RawFd },
    /// A POSIX queue descriptor.
    Mq(libc::mqd_t),
    /// A SysV queue and the message type of this direction.
    SysV { id: libc::c_int, mtype: libc::c_long },
}

/// Control-message space for one descriptor, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; 32]);

impl End {
    /// Sends the first `len` bytes of `msg` as one message. Async-signal-safe.
    fn send(self, msg: &mut Msg, len: usize) -> io::Result<()> {
        match self {
            End::Sock { fd, pass } => send_fd(fd, pass, &msg.text[..len]),
            End::Mq(q) => loop {
                // SAFETY: `text` holds at least `len` bytes; `q` is an open queue.
                let rc = unsafe { libc::mq_send(q, msg.text.as_ptr().cast(), len, 0) };
                if rc == 0 {
                    return Ok(());
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            },
            End::SysV { id, mtype } => loop {
                msg.mtype = mtype;
                // SAFETY: `msg` is a `long` type followed by at least `len` bytes of text.
                let rc = unsafe { libc::msgsnd(id, (msg as *const Msg).cast(), len, 0) };
                if rc == 0 {
                    return Ok(());
                }
                let e = io::Error::last_os_error();
                if matches!(e.raw_os_error(), Some(libc::EIDRM | libc::EINVAL)) {
                    // The watcher removed the queue (EIDRM while blocked, EINVAL after): the
                    // child is gone.
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            },
        }
    }

    /// Receives one message of exactly `len` bytes into `msg`; with `deadline`, a POSIX
    /// receive gives up then (`EAGAIN`, read as a lost peer). Async-signal-safe.
    fn recv(self, msg: &mut Msg, len: usize, deadline: Option<&libc::timespec>) -> io::Result<()> {
        let got = match self {
            End::Sock { fd, .. } => return recv_fd(fd, &mut msg.text[..len]),
            End::Mq(q) => loop {
                let buf = msg.text.as_mut_ptr().cast();
                // SAFETY: `text` has MSG_MAX bytes, at least the queue's message size (set in
                // setup); a null priority pointer is allowed; `deadline` outlives the call.
                let n = unsafe {
                    match deadline {
                        Some(t) => libc::mq_timedreceive(q, buf, MSG_MAX, std::ptr::null_mut(), t),
                        None => libc::mq_receive(q, buf, MSG_MAX, std::ptr::null_mut()),
                    }
                };
                if n >= 0 {
                    break n as usize;
                }
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ETIMEDOUT) {
                    return Err(io::Error::from_raw_os_error(libc::EAGAIN));
                }
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            },
            End::SysV { id, mtype } => loop {
                // SAFETY: `msg` is a `long` type followed by MSG_MAX bytes of text.
                let n = unsafe { libc::msgrcv(id, (msg as *mut Msg).cast(), MSG_MAX, mtype, 0) };
                if n >= 0 {
                    break n as usize;
                }
                let e = io::Error::last_os_error();
                if matches!(e.raw_os_error(), Some(libc::EIDRM | libc::EINVAL)) {
                    // The watcher removed the queue: the child is gone.
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            },
        };
        if got != len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a message of the wrong length",
            ));
        }
        Ok(())
    }
}

/// `sendmsg` of `data` with one descriptor, `pass`, as `SCM_RIGHTS`. Async-signal-safe.
fn send_fd(fd: RawFd, pass: RawFd, data: &[u8]) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut _, iov_len: data.len() };
    let mut cbuf = CmsgBuf([0; 32]);
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = cbuf.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic.
    hdr.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
    // SAFETY: the control buffer is 32 bytes, at least CMSG_SPACE(4) = 24, and aligned; so
    // the first header and its data lie inside it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&hdr);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as usize;
        libc::CMSG_DATA(c).cast::<RawFd>().write_unaligned(pass);
    }
    loop {
        // SAFETY: `hdr` points at live buffers described by their lengths.
        let n = unsafe { libc::sendmsg(fd, &hdr, libc::MSG_NOSIGNAL) };
        if n == data.len() as isize {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if n >= 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short sendmsg"));
        }
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `recvmsg` of exactly `buf.len()` bytes and one descriptor, which is closed at once (the
/// right arrived; nothing here uses it). A message without one is an error.
/// Async-signal-safe.
fn recv_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut cbuf = CmsgBuf([0; 32]);
    // SAFETY: all-zero is a valid empty header.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = cbuf.0.as_mut_ptr().cast();
    hdr.msg_controllen = cbuf.0.len();
    let n = loop {
        // SAFETY: `hdr` describes live, writable buffers.
        let n = unsafe { libc::recvmsg(fd, &mut hdr, libc::MSG_CMSG_CLOEXEC | libc::MSG_WAITALL) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    // SAFETY: the kernel filled `hdr.msg_control` up to `msg_controllen`; CMSG_FIRSTHDR
    // returns null when no header fits.
    let got = unsafe {
        let c = libc::CMSG_FIRSTHDR(&hdr);
        if c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            None
        } else {
            Some(libc::CMSG_DATA(c).cast::<RawFd>().read_unaligned())
        }
    };
    match got {
        Some(passed) => {
            // SAFETY: a fresh descriptor the kernel just installed for us; ours to close.
            unsafe { libc::close(passed) };
        }
        None => return Err(io::Error::new(io::ErrorKind::InvalidData, "no descriptor arrived")),
    }
    if n != buf.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "short message"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Setting the channels up.
// ---------------------------------------------------------------------------------------

/// A POSIX queue, closed on drop. Unlinked as soon as it is open: only our descriptors (and
/// the child's copies) keep it, so nothing is left behind, even after a crash.
struct MqQueue(libc::mqd_t);

impl Drop for MqQueue {
    fn drop(&mut self) {
        // SAFETY: our open queue descriptor, closed only here.
        unsafe { libc::mq_close(self.0) };
    }
}

/// Opens a new, private POSIX queue of `maxmsg` messages of `msgsize` bytes.
fn mq_queue(maxmsg: usize, msgsize: usize) -> Result<MqQueue, ProbeError> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let name = CString::new(format!("/schedlab-{pid}-{}", SEQ.fetch_add(1, Ordering::Relaxed)))
        .expect("a queue name has no NUL");
    // SAFETY: mq_attr is plain data; all-zero is valid before the fields are set.
    let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
    attr.mq_maxmsg = maxmsg as _;
    attr.mq_msgsize = msgsize as _;
    // SAFETY: `name` is NUL-terminated; mode and attr are the variadic arguments O_CREAT
    // asks for, attr alive for the call.
    let q = unsafe {
        libc::mq_open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o600 as libc::mode_t,
            &attr as *const libc::mq_attr,
        )
    };
    if q < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => ProbeError::Skip(
                "POSIX message queues are not in this kernel (CONFIG_POSIX_MQUEUE)".into(),
            ),
            Some(libc::EINVAL | libc::EMFILE | libc::ENOSPC | libc::ENOMEM | libc::EACCES) => {
                ProbeError::Skip(format!(
                    "mq_open of {maxmsg} × {msgsize}-byte messages refused ({e}): see fs.mqueue.msg_max, msgsize_max, queues_max and RLIMIT_MSGQUEUE"
                ))
            }
            _ => ProbeError::Failed(format!("mq_open: {e}")),
        });
    }
    let queue = MqQueue(q);
    // SAFETY: `name` is NUL-terminated; the open descriptor keeps the queue alive.
    unsafe { libc::mq_unlink(name.as_ptr()) };
    Ok(queue)
}

/// A private SysV queue, removed on drop.
struct SysVQueue(libc::c_int);

impl Drop for SysVQueue {
    fn drop(&mut self) {
        // SAFETY: IPC_RMID on our queue id takes no buffer (null is allowed); removing it
        // twice (the watcher did) fails harmlessly with EINVAL.
        unsafe { libc::msgctl(self.0, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

fn sysv_queue() -> Result<SysVQueue, ProbeError> {
    // SAFETY: msgget takes no pointers.
    let id = unsafe { libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) };
    if id < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => {
                ProbeError::Skip("System V IPC is not in this kernel (CONFIG_SYSVIPC)".into())
            }
            Some(libc::ENOSPC | libc::EACCES) => {
                ProbeError::Skip(format!("msgget refused ({e}): see kernel.msgmni"))
            }
            _ => ProbeError::Failed(format!("msgget: {e}")),
        });
    }
    Ok(SysVQueue(id))
}

/// Removes SysV queue `queue`: what the watcher does when the child exits, so that a parent
/// blocked in `msgrcv` fails (`EIDRM`) instead of waiting for ever.
fn remove_queue(queue: libc::c_int) {
    // SAFETY: IPC_RMID takes no buffer; the queue may already be gone (EINVAL).
    unsafe { libc::msgctl(queue, libc::IPC_RMID, std::ptr::null_mut()) };
}

/// Everything a channel's parent side owns; dropped with the instance, after its [`Pair`]
/// (the child killed, the watcher joined), so the queues and descriptors go last.
struct Owned {
    _mq: Vec<MqQueue>,
    _sysv: Option<SysVQueue>,
    _fds: Vec<OwnedFd>,
    /// The child's socket end, which the parent closes once it has forked, so that the
    /// child's death reaches the parent as end-of-file.
    child_end: Option<OwnedFd>,
}

/// A channel's two directions: (parent → child, child → parent), and what keeps them open.
/// `msgsize` is the size of a queue's messages.
fn channel(kind: Kind, msgsize: usize, maxmsg: usize) -> Result<(End, End, Owned), ProbeError> {
    let mut owned = Owned { _mq: Vec::new(), _sysv: None, _fds: Vec::new(), child_end: None };
    let (down, up) = match kind {
        Kind::FdPass => {
            let (a, b) = unix_pair()?;
            // The rights passed: the two ends of a pipe (any open file would do).
            let (r, w) = sys::pipe()?;
            let down = End::Sock { fd: raw(&a), pass: raw(&r) };
            let up = End::Sock { fd: raw(&b), pass: raw(&w) };
            owned._fds.extend([a, r, w]);
            owned.child_end = Some(b);
            (down, up)
        }
        Kind::Mq => {
            let d = mq_queue(maxmsg, msgsize)?;
            let u = mq_queue(maxmsg, msgsize)?;
            let ends = (End::Mq(d.0), End::Mq(u.0));
            owned._mq.extend([d, u]);
            ends
        }
        Kind::SysV => {
            let q = sysv_queue()?;
            let ends = (End::SysV { id: q.0, mtype: 1 }, End::SysV { id: q.0, mtype: 2 });
            owned._sysv = Some(q);
            ends
        }
    };
    Ok((down, up, owned))
}

/// Where each side receives: (parent, child). A socket is one end per process, each sending
/// and receiving on its own end (`down` is the parent's, `up` the child's); a queue is read
/// by the side the other one sends to.
fn receive_ends(down: End, up: End) -> (End, End) {
    match down {
        End::Sock { .. } => (down, up),
        _ => (up, down),
    }
}

/// A deadline `patience` from now on CLOCK_REALTIME (mq_timedreceive's clock).
fn mq_deadline(patience: Duration) -> libc::timespec {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut t) };
    let ns = t.tv_nsec as u64 + u64::from(patience.subsec_nanos());
    t.tv_sec += (patience.as_secs() + ns / 1_000_000_000) as libc::time_t;
    t.tv_nsec = (ns % 1_000_000_000) as _;
    t
}

// ---------------------------------------------------------------------------------------
// Latency.
// ---------------------------------------------------------------------------------------

struct LatencyProbe(Kind);
struct BandwidthProbe(Kind);

/// The message probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![
        Box::new(LatencyProbe(Kind::FdPass)),
        Box::new(LatencyProbe(Kind::Mq)),
        Box::new(BandwidthProbe(Kind::Mq)),
        Box::new(LatencyProbe(Kind::SysV)),
        Box::new(BandwidthProbe(Kind::SysV)),
    ]
}

impl Probe for LatencyProbe {
    fn info(&self) -> Info {
        let (id, doc, mirrors) = match self.0 {
            Kind::FdPass => (
                "os.fdpass.latency",
                "Round trip between two processes over an AF_UNIX stream socketpair, each 1-byte message carrying one file descriptor (SCM_RIGHTS), closed by its receiver",
                "- (seed 002: a Mach message carrying a port right; compare os.unix.latency, the same socket without a descriptor); both processes pinned",
            ),
            Kind::Mq => (
                "os.mq.latency",
                "Round trip of a 4-byte message between two processes over two POSIX message queues (mq_send / mq_receive)",
                "- (seed 002: Mach port messages; protocol of os.pipe.latency / lmbench lat_pipe); both processes pinned",
            ),
            Kind::SysV => (
                "os.sysv.latency",
                "Round trip of a 4-byte message between two processes over one System V message queue, one message type per direction (msgsnd / msgrcv)",
                "- (seed 002: Mach port messages; protocol of os.pipe.latency / lmbench lat_pipe); both processes pinned",
            ),
        };
        Info { id, doc, unit: Unit::Micros, mirrors, requires: "2 CPUs for placement=cross" }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        placement_variants(suite)
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        Ok(Box::new(self.start(params)?))
    }
}

impl LatencyProbe {
    /// Setup, returning the concrete instance.
    fn start(&self, params: &Params) -> Result<Latency, ProbeError> {
        let kind = self.0;
        let len = if kind == Kind::FdPass { 1 } else { WORD };
        let (down, up, mut owned) = channel(kind, WORD, 1)?;
        let (p_rx, c_rx) = receive_ends(down, up);
        let (p_tx, c_tx) = (down, up);
        let mut child_msg = Msg::boxed(0);
        let mut pair =
            Pair::fork(Placement::from_params(params)?, ["client", "server"], &[], move || {
                // Report the CPU, then echo until the parent goes.
                let cpu = sys::current_cpu().map_or(u32::MAX, |c| c as u32);
                child_msg.text[..4].copy_from_slice(&cpu.to_ne_bytes());
                if c_tx.send(&mut child_msg, 4).is_err() {
                    return 1;
                }
                loop {
                    if c_rx.recv(&mut child_msg, len, None).is_err() {
                        return 0;
                    }
                    if c_tx.send(&mut child_msg, len).is_err() {
                        return 1;
                    }
                }
            })?;
        owned.child_end = None;
        if let End::SysV { id, .. } = down {
            pair.watch("sysv-watcher", move || remove_queue(id))?;
        }
        let mut msg = Msg::boxed(0);
        let deadline = mq_deadline(MQ_DEADLINE);
        p_rx.recv(&mut msg, 4, Some(&deadline))
            .map_err(|e| peer_error(kind.name(), "read child's cpu", e))?;
        pair.child_reported(u32::from_ne_bytes(msg.text[..4].try_into().expect("4 bytes")));
        let mut inst = Latency {
            kind,
            len,
            tx: p_tx,
            rx: p_rx,
            msg,
            patience: MQ_DEADLINE,
            pair,
            _owned: owned,
        };
        inst.round_trips(1)?;
        Ok(inst)
    }
}

struct Latency {
    kind: Kind,
    len: usize,
    tx: End,
    rx: End,
    msg: Box<Msg>,
    /// How long a POSIX receive waits before the child is called dead.
    patience: Duration,
    /// The pinned echo child (its CPU as it reported) and the pinned parent; dropped
    /// before the channel.
    pair: Pair,
    _owned: Owned,
}

impl Latency {
    /// `iters` round trips, untimed; the caller times them.
    fn round_trips(&mut self, iters: u64) -> Result<(), ProbeError> {
        let name = self.kind.name();
        let mut deadline = mq_deadline(self.patience);
        for i in 0..iters {
            // A fresh deadline every 1024 round trips: it only has to stay seconds away, and
            // a clock read per message would be timed with it.
            if i % 1024 == 1023 {
                deadline = mq_deadline(self.patience);
            }
            self.tx.send(&mut self.msg, self.len).map_err(|e| peer_error(name, "send", e))?;
            self.rx
                .recv(&mut self.msg, self.len, Some(&deadline))
                .map_err(|e| peer_error(name, "receive", e))?;
        }
        Ok(())
    }
}

impl Workload for Latency {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let start = Instant::now();
        self.round_trips(iters)?;
        Ok(self.pair.timing(start))
    }

    fn parties(&self) -> Vec<Party> {
        self.pair.parties()
    }
}

impl Instance for Latency {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let n = Params::new().with("cpus", self.pair.cpus_note()).with("msg_bytes", self.len);
        if self.kind == Kind::FdPass {
            n.with("fds_per_round_trip", 2)
        } else {
            n
        }
    }
}

// ---------------------------------------------------------------------------------------
// Bandwidth.
// ---------------------------------------------------------------------------------------

/// Messages the POSIX queue holds: Linux's default `fs.mqueue.msg_max`.
const MQ_DEPTH: usize = 10;

impl Probe for BandwidthProbe {
    fn info(&self) -> Info {
        let (id, doc) = match self.0 {
            Kind::Mq => (
                "os.mq.bandwidth",
                "Bytes per second through a POSIX message queue (10 × 8 KiB) from a writer child to the reading parent, 8 KiB messages",
            ),
            _ => (
                "os.sysv.bandwidth",
                "Bytes per second through a System V message queue from a writer child to the reading parent, 8 KiB messages",
            ),
        };
        Info {
            id,
            doc,
            unit: Unit::MibPerSec,
            mirrors: "- (seed 002: Mach port messages; protocol of os.pipe.bandwidth / lmbench bw_pipe, with 8 KiB messages, Linux's default maximum, where the pipe row writes 64 KiB); both processes pinned",
            requires: "2 CPUs for placement=cross",
        }
    }

    /// Both placements in the full suite; the quick suite keeps `same`, the steadier on a
    /// busy VM, to stay short.
    fn variants(&self, suite: Suite) -> Vec<Params> {
        match suite {
            Suite::Full => placement_variants(suite),
            Suite::Smoke | Suite::Quick => vec![Params::new().with("placement", "same")],
        }
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let kind = self.0;
        let (down, _up, owned) = channel(kind, MSG_MAX, MQ_DEPTH)?;
        // Messages flow one way, child to parent: the child sends on `down`'s queue (SysV: its
        // message type) and the parent receives there.
        let (control_r, control_w) = sys::pipe()?;
        let mut child_msg = Msg::boxed(0x5a);
        let (ctl, parent_end) = (raw(&control_r), raw(&control_w));
        let mut pair = Pair::fork(
            Placement::from_params(params)?,
            ["reader", "writer"],
            &[parent_end],
            move || {
                let mut count = [0u8; 8];
                loop {
                    if sys::read_exact(ctl, &mut count).is_err() {
                        return 0;
                    }
                    for _ in 0..u64::from_ne_bytes(count) {
                        if down.send(&mut child_msg, MSG_MAX).is_err() {
                            return 1;
                        }
                    }
                }
            },
        )?;
        drop(control_r);
        if let End::SysV { id, .. } = down {
            pair.watch("sysv-watcher", move || remove_queue(id))?;
        }
        let mut inst = Stream {
            kind,
            control: control_w,
            rx: down,
            msg: Msg::boxed(0xa5),
            pair,
            _owned: owned,
        };
        inst.transfer(1)?;
        if inst.msg.text[0] != 0x5a || inst.msg.text[MSG_MAX - 1] != 0x5a {
            return Err(ProbeError::Failed(format!(
                "{}: the message arrived altered",
                kind.name()
            )));
        }
        Ok(Box::new(inst))
    }
}

struct Stream {
    kind: Kind,
    control: OwnedFd,
    rx: End,
    msg: Box<Msg>,
    /// The pinned writer child and the pinned reader; dropped before the channel.
    pair: Pair,
    _owned: Owned,
}

impl Stream {
    /// Asks the writer for `messages` messages and receives them; untimed.
    fn transfer(&mut self, messages: u64) -> Result<(), ProbeError> {
        let name = self.kind.name();
        sys::write_all(raw(&self.control), &messages.to_ne_bytes())
            .map_err(|e| peer_error(name, "write message count", e))?;
        let mut deadline = mq_deadline(MQ_DEADLINE);
        for i in 0..messages {
            if i % 1024 == 1023 {
                deadline = mq_deadline(MQ_DEADLINE);
            }
            self.rx
                .recv(&mut self.msg, MSG_MAX, Some(&deadline))
                .map_err(|e| peer_error(name, "receive", e))?;
        }
        Ok(())
    }
}

impl Workload for Stream {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let start = Instant::now();
        self.transfer(iters)?;
        Ok(self.pair.timing(start))
    }

    fn parties(&self) -> Vec<Party> {
        self.pair.parties()
    }
}

impl Instance for Stream {
    fn metric(&self) -> Metric {
        Metric::bandwidth(MSG_MAX as f64)
    }

    fn notes(&self) -> Params {
        let n = Params::new().with("cpus", self.pair.cpus_note()).with("msg_bytes", MSG_MAX);
        match self.kind {
            Kind::Mq => n.with("queue_msgs", MQ_DEPTH),
            _ => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets `probe` up with `placement` and runs `iters` iterations; `None` when it skips
    /// here (the reason printed).
    fn run(probe: &dyn Probe, placement: &str, iters: u64) -> Option<Box<dyn Instance>> {
        let params = Params::new().with("placement", placement);
        match probe.setup(&params, &Context::for_tests()) {
            Err(ProbeError::Skip(why)) => {
                eprintln!("{} skipped: {why}", probe.info().id);
                None
            }
            Err(e) => panic!("{} {placement}: {e}", probe.info().id),
            Ok(mut inst) => {
                inst.run(iters).unwrap();
                Some(inst)
            }
        }
    }

    #[test]
    fn every_message_probe_runs_or_skips_with_a_reason() {
        for p in probes() {
            for placement in ["same", "cross"] {
                if sys::allowed_cpus().len() < 2 && placement == "cross" {
                    continue;
                }
                if let Some(inst) = run(&*p, placement, 50) {
                    assert!(inst.notes().get("cpus").is_some());
                }
            }
        }
    }

    #[test]
    fn a_passed_descriptor_arrives_and_is_closed() {
        let (a, b) = unix_pair().unwrap();
        let (r, w) = sys::pipe().unwrap();
        send_fd(raw(&a), raw(&w), b"x").unwrap();
        let before = std::fs::read_dir("/proc/self/fd").unwrap().count();
        let mut buf = [0u8; 1];
        recv_fd(raw(&b), &mut buf).unwrap();
        assert_eq!(&buf, b"x");
        // The received copy was closed again: no descriptor left over.
        assert!(std::fs::read_dir("/proc/self/fd").unwrap().count() <= before);
        drop(r);
    }

    #[test]
    fn a_message_without_a_descriptor_is_an_error() {
        let (a, b) = unix_pair().unwrap();
        sys::write_all(raw(&a), b"x").unwrap();
        let mut buf = [0u8; 1];
        let e = recv_fd(raw(&b), &mut buf).unwrap_err();
        assert!(e.to_string().contains("no descriptor"), "{e}");
    }

    #[test]
    fn a_dead_child_fails_every_latency_probe_by_name() {
        for kind in [Kind::FdPass, Kind::Mq, Kind::SysV] {
            let mut inst = match LatencyProbe(kind).start(&Params::new()) {
                Ok(inst) => inst,
                Err(ProbeError::Skip(_)) => continue,
                Err(e) => panic!("{kind:?}: {e}"),
            };
            inst.patience = Duration::from_millis(200);
            // SAFETY: the pid is the instance's live, unreaped child.
            unsafe { libc::kill(inst.pair.pid(), libc::SIGKILL) };
            if kind == Kind::SysV {
                // The race that once failed this test: the watcher removes the queue before
                // the parent's next msgsnd, which then fails with EINVAL, not EIDRM.
                std::thread::sleep(Duration::from_millis(50));
            }
            let e = inst.run(10).unwrap_err();
            assert!(
                matches!(&e, ProbeError::Failed(m) if m.contains("died") || m.contains("timed out")),
                "{kind:?}: {e}"
            );
        }
    }
}
