//! IPC bandwidth: lmbench's `bw_pipe`, `bw_unix` and `bw_tcp`, a writer child streaming to a
//! reading parent, both pinned, in MiB/s.
//!
//! Protocol (`bw_pipe`'s control-pipe scheme, used for all three so that every sample moves
//! exactly the bytes it times):
//! 1. Setup creates the data channel (a pipe; an `AF_UNIX` stream socketpair; a TCP
//!    connection over 127.0.0.1 with 1 MiB socket buffers requested, as `bw_tcp` asks for
//!    `SOCKBUF`) and a control pipe, all before forking. Buffers are allocated and touched
//!    before the fork, so the child neither allocates nor page-faults its way into the timing.
//! 2. The writer child, pinned, waits on the control pipe for a byte count and writes exactly
//!    that many bytes in 64 KiB writes (lmbench's `XFERSIZE`), then waits again; it leaves when
//!    the control pipe closes.
//! 3. The parent, pinned for the life of the instance, does one 64 KiB transfer in setup.
//!    `run(iters)` writes `iters × 64 KiB` into the control pipe and times until it has read
//!    exactly that many bytes, in reads of at most 64 KiB. Nothing is written beyond what was
//!    asked for, so no bytes of one sample are left in a buffer to be read for free by the
//!    next (`bw_tcp`'s free-running writer would leave up to a socket buffer's worth).
//! 4. Teardown is `Drop`: the child is killed and reaped, descriptors closed, affinity restored.
//!
//! One iteration is one 64 KiB transfer; the sampler turns iterations into MiB/s.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::time::Instant;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sys::{self, raw, Placement};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::child::{peer_error, placement_variants, Pair};
use super::ipc::{get_opt, tcp_pair, unix_pair};
use crate::{Context, Info, Instance, Probe, Suite};

/// Bytes per write and per iteration: lmbench's `XFERSIZE`.
const XFER: usize = 64 * 1024;

/// Socket buffer size requested for TCP: lmbench's `SOCKBUF` (the kernel may cap it at
/// `net.core.{r,w}mem_max`; the granted sizes go into the notes).
const TCP_SOCKBUF: libc::c_int = 1024 * 1024;

/// The channels measured, one probe each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channel {
    Pipe,
    Unix,
    Tcp,
}

impl Channel {
    fn name(self) -> &'static str {
        match self {
            Channel::Pipe => "pipe",
            Channel::Unix => "unix socket",
            Channel::Tcp => "tcp socket",
        }
    }
}

struct BandwidthProbe(Channel);

/// The bandwidth probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Channel::Pipe, Channel::Unix, Channel::Tcp]
        .into_iter()
        .map(|c| Box::new(BandwidthProbe(c)) as Box<dyn Probe>)
        .collect()
}

impl Probe for BandwidthProbe {
    fn info(&self) -> Info {
        let (id, doc, mirrors) = match self.0 {
            Channel::Pipe => (
                "os.pipe.bandwidth",
                "Bytes per second through a pipe from a writer child to the reading parent, 64 KiB writes and reads",
                "lmbench bw_pipe (64 KiB transfers, control pipe); both processes pinned, lmbench does not pin",
            ),
            Channel::Unix => (
                "os.unix.bandwidth",
                "Bytes per second through an AF_UNIX stream socketpair from a writer child to the parent, 64 KiB transfers",
                "lmbench bw_unix (64 KiB transfers, control pipe); both processes pinned, lmbench does not pin",
            ),
            Channel::Tcp => (
                "os.tcp.bandwidth",
                "Bytes per second over TCP on 127.0.0.1 from a writer child to the parent, 64 KiB transfers, 1 MiB socket buffers",
                "lmbench bw_tcp localhost (64 KiB messages, 1 MiB SO_SNDBUF/SO_RCVBUF); pinned, and the writer sends exactly the bytes each sample reads (bw_tcp's runs free)",
            ),
        };
        Info { id, doc, unit: Unit::MibPerSec, mirrors, requires: "2 CPUs for placement=cross" }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        placement_variants(suite)
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let channel = self.0;
        let mut notes = Params::new();
        // (parent reads, child writes).
        let (data_r, data_w) = match channel {
            Channel::Pipe => {
                let (r, w) = sys::pipe()?;
                // SAFETY: F_GETPIPE_SZ on an open pipe takes no pointers.
                let size = unsafe { libc::fcntl(raw(&r), libc::F_GETPIPE_SZ) };
                notes.set("pipe_bytes", size);
                (r, w)
            }
            Channel::Unix => unix_pair()?,
            Channel::Tcp => {
                let (client, server) = tcp_pair(&[
                    (libc::SOL_SOCKET, libc::SO_RCVBUF, TCP_SOCKBUF),
                    (libc::SOL_SOCKET, libc::SO_SNDBUF, TCP_SOCKBUF),
                ])?;
                // Linux reports twice the granted size (bookkeeping overhead included).
                notes.set("rcvbuf", get_opt(raw(&client), libc::SOL_SOCKET, libc::SO_RCVBUF)?);
                notes.set("sndbuf", get_opt(raw(&server), libc::SOL_SOCKET, libc::SO_SNDBUF)?);
                (client, server)
            }
        };
        let (control_r, control_w) = sys::pipe()?;
        // Touched here (filled), so neither side faults pages in while timed; the child's copy
        // is only read, so copy-on-write never copies it.
        let child_buf = vec![0x5au8; XFER];
        let parent_fds = [raw(&data_r), raw(&control_w)];
        let (ctl, out) = (raw(&control_r), raw(&data_w));
        let pair =
            Pair::fork(Placement::from_params(params)?, ["reader", "writer"], &parent_fds, || {
                writer(ctl, out, &child_buf)
            })?;
        drop((control_r, data_w, child_buf));
        notes.set("cpus", pair.cpus_note());
        notes.set("xfer_bytes", XFER);

        let mut inst = Stream {
            channel,
            control: control_w,
            data: data_r,
            buf: vec![0xa5u8; XFER],
            notes,
            pair,
        };
        // One transfer so that both sides are up and the path is warm.
        inst.transfer(XFER as u64)?;
        Ok(Box::new(inst))
    }
}

/// The child's body: for each byte count read from `control`, write exactly that many bytes
/// to `out`, `XFER` at a time. Leaves with 0 when `control` closes. Async-signal-safe.
fn writer(control: RawFd, out: RawFd, buf: &[u8]) -> i32 {
    let mut count = [0u8; 8];
    loop {
        if sys::read_exact(control, &mut count).is_err() {
            return 0;
        }
        let mut todo = u64::from_ne_bytes(count);
        while todo > 0 {
            let n = buf.len().min(usize::try_from(todo).unwrap_or(usize::MAX));
            if sys::write_all(out, &buf[..n]).is_err() {
                return 1;
            }
            todo -= n as u64;
        }
    }
}

/// A set-up bandwidth probe: the parent's control and data ends, the pinned writer child.
struct Stream {
    channel: Channel,
    control: OwnedFd,
    data: OwnedFd,
    buf: Vec<u8>,
    notes: Params,
    /// The pinned writer child and the pinned reader.
    pair: Pair,
}

impl Stream {
    /// Asks the writer for `bytes` and reads exactly that many; untimed, the caller times it.
    fn transfer(&mut self, bytes: u64) -> Result<(), ProbeError> {
        let what = self.channel.name();
        sys::write_all(raw(&self.control), &bytes.to_ne_bytes())
            .map_err(|e| peer_error(what, "write byte count", e))?;
        let fd = raw(&self.data);
        let mut left = bytes;
        while left > 0 {
            let want = self.buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            // SAFETY: the pointer and length describe the first `want` bytes of `buf`.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), want) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(peer_error(what, "read", e));
            }
            if n == 0 {
                return Err(peer_error(what, "read", io::ErrorKind::UnexpectedEof.into()));
            }
            left -= n as u64;
        }
        Ok(())
    }
}

impl Workload for Stream {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let start = Instant::now();
        self.transfer(iters * XFER as u64)?;
        Ok(self.pair.timing(start))
    }

    fn parties(&self) -> Vec<Party> {
        self.pair.parties()
    }
}

impl Instance for Stream {
    fn metric(&self) -> Metric {
        Metric::bandwidth(XFER as f64)
    }

    fn notes(&self) -> Params {
        self.notes.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::sys::Child;

    #[test]
    fn every_channel_runs_in_both_placements_or_skips() {
        for p in probes() {
            for params in p.variants(Suite::Full) {
                match p.setup(&params, &Context::for_tests()) {
                    Err(ProbeError::Skip(_)) => assert!(sys::allowed_cpus().len() < 2),
                    Err(e) => panic!("{} [{params}]: {e}", p.info().id),
                    Ok(mut inst) => {
                        assert!(inst.run(3).unwrap().elapsed > std::time::Duration::ZERO);
                        assert!(inst.notes().get("cpus").is_some());
                    }
                }
            }
        }
    }

    #[test]
    fn writer_sends_exactly_what_is_asked_and_stops_on_close() {
        let (ctl_r, ctl_w) = sys::pipe().unwrap();
        let (data_r, data_w) = unix_pair().unwrap();
        let buf = vec![1u8; 1000];
        let (c, d, parent_end) = (raw(&ctl_r), raw(&data_w), raw(&ctl_w));
        let mut child = Child::fork(None, || {
            // SAFETY: the child's copy of the parent's control end; closed so EOF can arrive.
            unsafe { libc::close(parent_end) };
            writer(c, d, &buf)
        })
        .unwrap();
        drop((ctl_r, data_w));
        sys::write_all(raw(&ctl_w), &2500u64.to_ne_bytes()).unwrap();
        let mut got = vec![0u8; 2500];
        sys::read_exact(raw(&data_r), &mut got).unwrap();
        assert!(got.iter().all(|&b| b == 1));
        drop(ctl_w);
        assert_eq!(child.wait().unwrap(), 0);
        // Nothing beyond the 2500 bytes. (EOF or EAGAIN: a child another test forked
        // meanwhile may still hold a copy of the write end.)
        let mut extra = [0u8; 1];
        // SAFETY: `extra` is a writable 1-byte buffer.
        let n =
            unsafe { libc::recv(raw(&data_r), extra.as_mut_ptr().cast(), 1, libc::MSG_DONTWAIT) };
        assert!(n <= 0, "writer sent more than asked");
    }
}
