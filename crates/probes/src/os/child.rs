//! The two-party shape of the IPC probes, written once: a forked helper process pinned to
//! one CPU of a `placement`, the calling thread pinned to the other (or the same), the
//! child's copies of the parent's ends closed so that end-of-file can arrive, an optional
//! watcher that acts when the child dies, the timing of a sample and the parties the
//! sampler checks, and the error that names the probe when the helper died.
//!
//! The fork itself and its contract (only async-signal-safe work in the child; the child
//! killed and reaped on drop, and when the parent dies) are [`schedlab_measure::sys::Child`]'s;
//! this file adds what the probes of `ipc.rs`, `bandwidth.rs`, `message.rs` and
//! `zerocopy.rs` each used to repeat around it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use schedlab_measure::interrupt;
use schedlab_measure::model::Params;
use schedlab_measure::placement::Party;
use schedlab_measure::sys::{self, Child, PinGuard, Placement};
use schedlab_measure::{ProbeError, Timing};

use crate::Suite;

/// The most parent ends a child closes (every probe here has two at most).
const MAX_PARENT_ENDS: usize = 4;

/// `placement=same` in the smoke suite, `same` and `cross` otherwise.
pub(super) fn placement_variants(suite: Suite) -> Vec<Params> {
    let names: &[&str] = match suite {
        Suite::Smoke => &["same"],
        Suite::Quick | Suite::Full => &["same", "cross"],
    };
    names.iter().map(|p| Params::new().with("placement", p)).collect()
}

/// The error for a failed read or write on a channel to a helper process: the user's stop
/// request, a dead peer (EOF, EPIPE, reset) or the OS error, naming the probe's channel
/// (`what`) and the operation.
pub(super) fn peer_error(what: &str, op: &str, err: io::Error) -> ProbeError {
    if interrupt::requested() {
        return ProbeError::Interrupted;
    }
    let dead = err.kind() == io::ErrorKind::UnexpectedEof
        || matches!(err.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET | libc::ECONNREFUSED));
    if dead {
        ProbeError::Failed(format!("{what} {op}: the helper process died ({err})"))
    } else if matches!(err.raw_os_error(), Some(libc::EAGAIN)) {
        ProbeError::Failed(format!("{what} {op}: timed out (message lost?)"))
    } else {
        ProbeError::Failed(format!("{what} {op}: {err}"))
    }
}

/// A pinned helper child and the pinned caller. Field order is drop order: the child is
/// killed and reaped first, then the watcher (woken by its death) is joined, then the
/// caller's affinity is restored.
pub(super) struct Pair {
    child: Child,
    watcher: Option<Watcher>,
    /// The caller's CPU and the child's (as placed, or as the child reported it).
    cpus: (usize, usize),
    /// The parties' names: the caller's, the child's.
    roles: [&'static str; 2],
    _pin: PinGuard,
}

impl Pair {
    /// Forks `body` as a child pinned to the second CPU of `placement`, after it closed its
    /// copies of `parent_ends` (the parent's ends of the channels, so that the parent's
    /// close reaches the child as end-of-file); then pins the caller to the first CPU.
    /// `body` runs under [`Child::fork`]'s contract: async-signal-safe work only.
    pub(super) fn fork(
        placement: Placement,
        roles: [&'static str; 2],
        parent_ends: &[RawFd],
        body: impl FnOnce() -> i32,
    ) -> Result<Pair, ProbeError> {
        let (parent_cpu, child_cpu) = placement.cpus()?;
        // A fixed array, so the child neither allocates nor frees.
        assert!(parent_ends.len() <= MAX_PARENT_ENDS, "at most {MAX_PARENT_ENDS} parent ends");
        let mut ends = [-1 as RawFd; MAX_PARENT_ENDS];
        ends[..parent_ends.len()].copy_from_slice(parent_ends);
        let child = Child::fork(Some(child_cpu), move || {
            for fd in ends.into_iter().filter(|&fd| fd >= 0) {
                // SAFETY: the child's copy of a parent's end; nothing in the child uses it.
                unsafe { libc::close(fd) };
            }
            body()
        })?;
        let pin = PinGuard::pin(parent_cpu)?;
        Ok(Pair { child, watcher: None, cpus: (parent_cpu, child_cpu), roles, _pin: pin })
    }

    /// The child's pid.
    pub(super) fn pid(&self) -> libc::pid_t {
        self.child.pid()
    }

    /// Records the CPU the child reported it runs on (the latency probes' first message).
    pub(super) fn child_reported(&mut self, cpu: u32) {
        self.cpus.1 = cpu as usize;
    }

    /// The `cpus` note: `caller,child`.
    pub(super) fn cpus_note(&self) -> String {
        format!("{},{}", self.cpus.0, self.cpus.1)
    }

    /// Runs `on_exit` on a thread of its own as soon as the child exits, for a channel that
    /// gives no end-of-file when its peer dies (a System V queue: removing it fails the
    /// parent's blocked `msgrcv` instead of leaving it waiting for ever). Joined on drop,
    /// after the child is killed.
    pub(super) fn watch(
        &mut self,
        name: &str,
        on_exit: impl FnOnce() + Send + 'static,
    ) -> Result<(), ProbeError> {
        self.watcher = Some(Watcher::start(self.child.pid(), name, on_exit)?);
        Ok(())
    }

    /// A sample's timing: the time since `start` (the caller read it just before the timed
    /// body), and whether the caller left its CPU meanwhile.
    pub(super) fn timing(&self, start: Instant) -> Timing {
        let elapsed = start.elapsed();
        Timing {
            elapsed,
            migrated: sys::current_cpu() != Some(self.cpus.0),
            overhead: Duration::ZERO,
        }
    }

    /// Both parties are pinned: the sampler checks after each sample that the child is
    /// still on its CPU too.
    pub(super) fn parties(&self) -> Vec<Party> {
        vec![Party::caller(self.roles[0]), Party::task(self.roles[1], self.child.pid())]
    }
}

/// A thread blocked in `poll` on a child's pidfd that runs its action when the child exits.
struct Watcher(Option<std::thread::JoinHandle<()>>);

impl Watcher {
    fn start(
        pid: libc::pid_t,
        name: &str,
        on_exit: impl FnOnce() + Send + 'static,
    ) -> Result<Watcher, ProbeError> {
        // SAFETY: pidfd_open takes a pid and flags.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as RawFd;
        if fd < 0 {
            return Err(ProbeError::last_os("pidfd_open (Linux 5.3)"));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut p =
                    libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd; -1 waits until the child exits.
                while unsafe { libc::poll(&mut p, 1, -1) } < 0 {}
                on_exit();
            })
            .map_err(|e| ProbeError::io(&format!("spawn the {name}"), e))?;
        Ok(Watcher(Some(handle)))
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}
