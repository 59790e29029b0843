//! IPC round-trip latency: lmbench's `lat_pipe`, `lat_unix`, `lat_udp` and `lat_tcp`, with
//! both parties pinned and their CPUs recorded. Also the small socket helpers that
//! [`super::bandwidth`] shares.
//!
//! Protocol, the same for all four transports:
//! 1. Setup creates every descriptor *before* forking, so the child has nothing left to set up
//!    and nothing can race: two pipes; an `AF_UNIX` stream socketpair; two UDP sockets on
//!    127.0.0.1 with ephemeral ports, connected to each other; a TCP listener on 127.0.0.1
//!    port 0, a connection to it and the accepted socket (the listener is closed again).
//! 2. The child (the echo server), forked and pinned by [`Pair::fork`], closes the parent's ends, sends
//!    its CPU number once (4 bytes, so setup can record where it really runs), then echoes
//!    each message back until its input closes.
//! 3. The parent pins itself for the life of the instance (the same [`Pair`]), reads the child's
//!    CPU and does one warm-up round trip. `run(iters)` times `iters` round trips and flags
//!    the sample as migrated if the parent was not on its CPU at the end.
//! 4. Teardown is `Drop`: the child is killed and reaped, the descriptors closed, the
//!    parent's affinity restored.
//!
//! Message sizes follow lmbench: 1 byte for `lat_unix` and `lat_tcp`, a 4-byte sequence
//! number for `lat_udp` (checked on return, as a lost or stray datagram would otherwise go
//! unnoticed), and a 4-byte word for the pipe (`lat_pipe` sends 1 byte, `perf bench sched
//! pipe` an int; the size is lost in the noise at this scale).

use std::io;
use std::mem::size_of;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sys::{self, raw, Placement};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::child::{peer_error, placement_variants, Pair};
use crate::{Context, Info, Instance, Probe, Suite};

/// The transports measured, one probe each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Pipe,
    Unix,
    Udp,
    Tcp,
}

impl Transport {
    /// Bytes per message in each direction.
    fn msg_len(self) -> usize {
        match self {
            Transport::Pipe | Transport::Udp => 4,
            Transport::Unix | Transport::Tcp => 1,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Transport::Pipe => "pipe",
            Transport::Unix => "unix socket",
            Transport::Udp => "udp socket",
            Transport::Tcp => "tcp socket",
        }
    }
}

struct LatencyProbe(Transport);

/// The IPC latency probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Transport::Pipe, Transport::Unix, Transport::Udp, Transport::Tcp]
        .into_iter()
        .map(|t| Box::new(LatencyProbe(t)) as Box<dyn Probe>)
        .collect()
}

impl Probe for LatencyProbe {
    fn info(&self) -> Info {
        let (id, doc, mirrors) = match self.0 {
            Transport::Pipe => (
                "os.pipe.latency",
                "Round trip of a 4-byte word between two processes over a pair of pipes",
                "lmbench lat_pipe (1-byte message there); both processes pinned, lmbench does not pin",
            ),
            Transport::Unix => (
                "os.unix.latency",
                "Round trip of a 1-byte message between two processes over an AF_UNIX stream socketpair",
                "lmbench lat_unix (default 1-byte message); both processes pinned, lmbench does not pin",
            ),
            Transport::Udp => (
                "os.udp.latency",
                "Round trip of a 4-byte sequence-numbered UDP datagram to a forked echo server on 127.0.0.1",
                "lmbench lat_udp localhost; server is a pinned forked child on an ephemeral port, not a daemon",
            ),
            Transport::Tcp => (
                "os.tcp.latency",
                "Round trip of a 1-byte message over TCP (TCP_NODELAY) to a forked echo server on 127.0.0.1",
                "lmbench lat_tcp localhost (1-byte message); server is a pinned forked child on an ephemeral port, TCP_NODELAY set",
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
        let transport = self.0;
        // (parent reads, parent writes, child reads, child writes).
        let (p_rx, p_tx, c_rx, c_tx) = match transport {
            Transport::Pipe => {
                let (to_child_r, to_child_w) = sys::pipe()?;
                let (to_parent_r, to_parent_w) = sys::pipe()?;
                (to_parent_r, to_child_w, to_child_r, to_parent_w)
            }
            Transport::Unix => {
                let (a, b) = unix_pair()?;
                let (a2, b2) = (dup(&a)?, dup(&b)?);
                (a, a2, b, b2)
            }
            Transport::Udp => {
                let (a, b) = udp_pair()?;
                // A lost datagram would block the parent forever; fail after a second instead.
                set_timeout(raw(&a), libc::SO_RCVTIMEO, 1)?;
                let (a2, b2) = (dup(&a)?, dup(&b)?);
                (a, a2, b, b2)
            }
            Transport::Tcp => {
                let (a, b) = tcp_pair(&[(libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)])?;
                let (a2, b2) = (dup(&a)?, dup(&b)?);
                (a, a2, b, b2)
            }
        };
        let parent_fds = [raw(&p_rx), raw(&p_tx)];
        let (crx, ctx_fd) = (raw(&c_rx), raw(&c_tx));
        let len = transport.msg_len();
        let mut pair = Pair::fork(
            Placement::from_params(params)?,
            ["client", "server"],
            &parent_fds,
            move || echo(crx, ctx_fd, len),
        )?;
        drop((c_rx, c_tx));

        let mut cpu = [0u8; 4];
        sys::read_exact(raw(&p_rx), &mut cpu)
            .map_err(|e| peer_error(transport.name(), "read child's cpu", e))?;
        pair.child_reported(u32::from_ne_bytes(cpu));
        let mut inst = Latency { transport, rx: p_rx, tx: p_tx, seq: 0, pair };
        // One round trip to be sure both processes are up and the path is warm, as lmbench.
        inst.round_trips(1)?;
        Ok(inst)
    }
}

/// The child's body: report the CPU, then echo `len`-byte messages until the input closes.
/// Async-signal-safe: raw reads and writes on a stack buffer.
fn echo(rx: RawFd, tx: RawFd, len: usize) -> i32 {
    let cpu = sys::current_cpu().map_or(u32::MAX, |c| c as u32);
    if sys::write_all(tx, &cpu.to_ne_bytes()).is_err() {
        return 1;
    }
    let mut buf = [0u8; 4];
    loop {
        if sys::read_exact(rx, &mut buf[..len]).is_err() {
            // EOF: the parent closed its end (teardown).
            return 0;
        }
        if sys::write_all(tx, &buf[..len]).is_err() {
            return 1;
        }
    }
}

/// A set-up latency probe: the parent's ends, the pinned echo child.
struct Latency {
    transport: Transport,
    rx: OwnedFd,
    tx: OwnedFd,
    /// Next UDP sequence number.
    seq: u32,
    /// The pinned echo child (its CPU as it reported) and the pinned parent.
    pair: Pair,
}

impl Latency {
    /// `iters` round trips, untimed; the caller times them.
    #[inline]
    fn round_trips(&mut self, iters: u64) -> Result<(), ProbeError> {
        let (rx, tx) = (raw(&self.rx), raw(&self.tx));
        let len = self.transport.msg_len();
        let udp = self.transport == Transport::Udp;
        let mut msg = [0u8; 4];
        for _ in 0..iters {
            if udp {
                self.seq = self.seq.wrapping_add(1);
                msg = self.seq.to_be_bytes();
            }
            sys::write_all(tx, &msg[..len])
                .map_err(|e| peer_error(self.transport.name(), "write", e))?;
            sys::read_exact(rx, &mut msg[..len])
                .map_err(|e| peer_error(self.transport.name(), "read", e))?;
            if udp && msg != self.seq.to_be_bytes() {
                return Err(ProbeError::Failed(format!(
                    "udp echo out of sequence: sent {}, got {}",
                    self.seq,
                    u32::from_be_bytes(msg)
                )));
            }
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
        // One iteration is one round trip, lmbench's unit; microseconds make the loop cost
        // irrelevant.
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        Params::new()
            .with("cpus", self.pair.cpus_note())
            .with("msg_bytes", self.transport.msg_len())
    }
}

// ---------------------------------------------------------------------------------------
// Helpers shared with the bandwidth probes. All return owned, close-on-exec descriptors.
// ---------------------------------------------------------------------------------------

/// Wraps a descriptor a system call just returned, or the error naming `op`.
fn owned(fd: libc::c_int, op: &str) -> Result<OwnedFd, ProbeError> {
    if fd < 0 {
        return Err(ProbeError::last_os(op));
    }
    // SAFETY: the call succeeded, so `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A second descriptor for the same socket, so each direction has its own owner.
fn dup(fd: &OwnedFd) -> Result<OwnedFd, ProbeError> {
    // SAFETY: F_DUPFD_CLOEXEC on an open descriptor has no memory-safety preconditions.
    owned(unsafe { libc::fcntl(raw(fd), libc::F_DUPFD_CLOEXEC, 0) }, "fcntl(F_DUPFD_CLOEXEC)")
}

/// A new socket of `domain` and `ty`, close-on-exec.
fn socket(domain: libc::c_int, ty: libc::c_int) -> Result<OwnedFd, ProbeError> {
    // SAFETY: socket takes no pointers.
    owned(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) }, "socket")
}

/// Sets an integer socket option.
pub(super) fn set_opt(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> Result<(), ProbeError> {
    // SAFETY: `value` is a valid c_int for the duration of the call and we pass its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(ProbeError::last_os(&format!("setsockopt({level}, {name})")));
    }
    Ok(())
}

/// Reads an integer socket option.
pub(super) fn get_opt(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> Result<libc::c_int, ProbeError> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid out-pointers and `len` is the size of `value`.
    let rc = unsafe {
        libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len)
    };
    if rc != 0 {
        return Err(ProbeError::last_os(&format!("getsockopt({level}, {name})")));
    }
    Ok(value)
}

/// Sets a receive or send timeout of `secs` seconds.
fn set_timeout(fd: RawFd, which: libc::c_int, secs: libc::time_t) -> Result<(), ProbeError> {
    let tv = libc::timeval { tv_sec: secs, tv_usec: 0 };
    // SAFETY: `tv` is a valid timeval for the duration of the call and we pass its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            which,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(ProbeError::last_os("setsockopt(timeout)"));
    }
    Ok(())
}

/// 127.0.0.1:`port`.
fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be() },
        sin_zero: [0; 8],
    }
}

/// Binds `fd` to 127.0.0.1 with an ephemeral port and returns the port the kernel chose.
fn bind_loopback(fd: RawFd) -> Result<u16, ProbeError> {
    let addr = loopback(0);
    // SAFETY: `addr` is a valid sockaddr_in and we pass its size.
    let rc = unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(ProbeError::last_os("bind 127.0.0.1:0"));
    }
    let mut got = loopback(0);
    let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `got` and `len` are valid out-pointers; `len` is the size of `got`.
    let rc =
        unsafe { libc::getsockname(fd, (&mut got as *mut libc::sockaddr_in).cast(), &mut len) };
    if rc != 0 {
        return Err(ProbeError::last_os("getsockname"));
    }
    Ok(u16::from_be(got.sin_port))
}

/// Connects `fd` to 127.0.0.1:`port`, retrying on EINTR.
fn connect_loopback(fd: RawFd, port: u16) -> Result<(), ProbeError> {
    let addr = loopback(port);
    loop {
        // SAFETY: `addr` is a valid sockaddr_in and we pass its size.
        let rc = unsafe {
            libc::connect(
                fd,
                (&addr as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(ProbeError::last_os(&format!("connect 127.0.0.1:{port}")));
        }
    }
}

/// A connected `AF_UNIX` stream socketpair.
pub(super) fn unix_pair() -> Result<(OwnedFd, OwnedFd), ProbeError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors socketpair writes.
    let rc = unsafe {
        libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
    };
    if rc != 0 {
        return Err(ProbeError::last_os("socketpair(AF_UNIX, SOCK_STREAM)"));
    }
    Ok((owned(fds[0], "socketpair")?, owned(fds[1], "socketpair")?))
}

/// Two UDP sockets on 127.0.0.1 with ephemeral ports, each connected to the other, so both
/// sides can use plain `read`/`write` (one datagram each).
fn udp_pair() -> Result<(OwnedFd, OwnedFd), ProbeError> {
    let a = socket(libc::AF_INET, libc::SOCK_DGRAM)?;
    let b = socket(libc::AF_INET, libc::SOCK_DGRAM)?;
    let pa = bind_loopback(raw(&a))?;
    let pb = bind_loopback(raw(&b))?;
    connect_loopback(raw(&a), pb)?;
    connect_loopback(raw(&b), pa)?;
    Ok((a, b))
}

/// A TCP connection over 127.0.0.1: (the connecting end, the accepted end).
///
/// The listener binds port 0 (the kernel picks a free port), and both the connect and the
/// accept happen here, before any fork, so a child never races the parent for the port. The
/// `opts` (level, name, value) are set on the listener, which accepted sockets inherit, and
/// on the connecting socket before `connect` (buffer sizes must be set before the handshake
/// to take effect on the window).
pub(super) fn tcp_pair(
    opts: &[(libc::c_int, libc::c_int, libc::c_int)],
) -> Result<(OwnedFd, OwnedFd), ProbeError> {
    let listener = socket(libc::AF_INET, libc::SOCK_STREAM)?;
    let client = socket(libc::AF_INET, libc::SOCK_STREAM)?;
    for &(level, name, value) in opts {
        set_opt(raw(&listener), level, name, value)?;
        set_opt(raw(&client), level, name, value)?;
    }
    let port = bind_loopback(raw(&listener))?;
    // SAFETY: listen takes no pointers.
    if unsafe { libc::listen(raw(&listener), 1) } != 0 {
        return Err(ProbeError::last_os("listen"));
    }
    // The handshake completes in the kernel: connect returns once the connection waits in
    // the listener's queue, before anyone calls accept.
    connect_loopback(raw(&client), port)?;
    let server = loop {
        // SAFETY: null address pointers are allowed when the peer address is not wanted.
        let fd = unsafe {
            libc::accept4(
                raw(&listener),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        break owned(fd, "accept")?;
    };
    for &(level, name, value) in opts {
        // Inherited from the listener on Linux; set again so it holds everywhere.
        set_opt(raw(&server), level, name, value)?;
    }
    Ok((client, server))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_pair_carries_bytes_both_ways() {
        let (a, b) = tcp_pair(&[(libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)]).unwrap();
        sys::write_all(raw(&a), b"ping").unwrap();
        let mut buf = [0u8; 4];
        sys::read_exact(raw(&b), &mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        sys::write_all(raw(&b), b"pong").unwrap();
        sys::read_exact(raw(&a), &mut buf).unwrap();
        assert_eq!(&buf, b"pong");
        assert_eq!(get_opt(raw(&b), libc::IPPROTO_TCP, libc::TCP_NODELAY).unwrap(), 1);
    }

    #[test]
    fn udp_pair_is_connected_both_ways() {
        let (a, b) = udp_pair().unwrap();
        sys::write_all(raw(&a), &7u32.to_be_bytes()).unwrap();
        let mut buf = [0u8; 4];
        sys::read_exact(raw(&b), &mut buf).unwrap();
        sys::write_all(raw(&b), &buf).unwrap();
        sys::read_exact(raw(&a), &mut buf).unwrap();
        assert_eq!(u32::from_be_bytes(buf), 7);
    }

    #[test]
    fn a_dead_peer_is_named_as_such() {
        let e = peer_error("pipe", "read", io::ErrorKind::UnexpectedEof.into());
        assert!(matches!(&e, ProbeError::Failed(m) if m.contains("helper process died")), "{e}");
        let e = peer_error("tcp", "write", io::Error::from_raw_os_error(libc::EPIPE));
        assert!(matches!(&e, ProbeError::Failed(m) if m.contains("helper process died")), "{e}");
    }

    /// Sets up `probe` with `placement`, runs two round trips; `None` when skipped here.
    fn two_iterations(probe: &dyn Probe, placement: &str) -> Option<Timing> {
        let params = Params::new().with("placement", placement);
        match probe.setup(&params, &Context::for_tests()) {
            Err(ProbeError::Skip(_)) => None,
            Err(e) => panic!("{} {placement}: {e}", probe.info().id),
            Ok(mut inst) => Some(inst.run(2).unwrap()),
        }
    }

    #[test]
    fn every_transport_runs_on_two_cpus_or_skips() {
        for p in probes() {
            if let Some(t) = two_iterations(&*p, "cross") {
                assert!(t.elapsed > std::time::Duration::ZERO);
            }
        }
        if sys::allowed_cpus().len() < 2 {
            assert!(two_iterations(&*probes()[0], "cross").is_none());
        }
    }

    #[test]
    fn the_child_reports_the_cpu_it_was_pinned_to() {
        let probe = LatencyProbe(Transport::Pipe);
        let inst = Latency::setup_for_test(&probe, "same");
        let cpus = inst.pair.cpus_note();
        let (parent, child) = cpus.split_once(',').expect("two CPUs");
        assert_eq!(parent, child);
    }

    #[test]
    fn a_dead_child_fails_the_run_by_name() {
        for t in [Transport::Pipe, Transport::Unix, Transport::Udp, Transport::Tcp] {
            let mut inst = Latency::setup_for_test(&LatencyProbe(t), "same");
            // SAFETY: the pid is our live, unreaped child.
            unsafe { libc::kill(inst.pair.pid(), libc::SIGKILL) };
            let err = inst.run(10).unwrap_err();
            // "timed out" for UDP when some other test's child still holds the server socket.
            assert!(
                matches!(&err, ProbeError::Failed(m) if m.contains("died") || m.contains("timed out")),
                "{t:?}: {err}"
            );
        }
    }

    #[test]
    fn a_bad_placement_is_an_error_naming_it() {
        let params = Params::new().with("placement", "far");
        let Err(e) = LatencyProbe(Transport::Pipe).setup(&params, &Context::for_tests()) else {
            panic!("placement=far accepted");
        };
        assert!(e.to_string().contains("far"), "{e}");
    }

    impl Latency {
        /// The concrete instance, for tests that look inside it.
        fn setup_for_test(probe: &LatencyProbe, placement: &str) -> Latency {
            probe.start(&Params::new().with("placement", placement)).unwrap()
        }
    }

    #[test]
    fn quick_and_full_suites_measure_both_placements() {
        assert_eq!(placement_variants(Suite::Smoke).len(), 1);
        for s in [Suite::Quick, Suite::Full] {
            let v: Vec<String> = placement_variants(s).iter().map(Params::key).collect();
            assert_eq!(v, ["placement=same", "placement=cross"]);
        }
    }
}
