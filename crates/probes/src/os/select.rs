//! `select()` on many descriptors: lmbench's `lat_select -n N file|tcp`, µs per call.
//!
//! What lat_select does (lmbench 3, `initialize`/`doit`), and so what we do:
//! - `file`: create a temporary file, open it `O_RDONLY`, `dup` it N times, close the original;
//! - `tcp`: connect one TCP socket to a local server, `dup` it N times, close the original;
//! - the timed loop copies the prepared `fd_set` and calls
//!   `select(nfds, NULL, &set, NULL, &(struct timeval){0, 0})`: the set goes in as the *write*
//!   set with a zero timeout. Both kinds are therefore ready at once (a regular file always
//!   polls ready; a connected socket with an empty send buffer is writable), and every call
//!   walks all N descriptors, calls each one's poll, and returns N. We check that it does.
//!
//! Deliberate differences, each for a reason:
//! - lat_select passes `state->num` (N) as `nfds`, although it computes `max + 1`, so it
//!   examines only its descriptors numbered below N. By default (`def=schedlab`) we pass
//!   `max + 1`, which is what the test means: every call polls all N descriptors.
//!   `def=lmbench` reproduces lmbench exactly (see below): `nfds = N`, and the duplicates
//!   carry the numbers they get in lmbench's measuring process, so the same ones are polled.
//! - The TCP peer: lmbench forks a server process on a fixed port that accepts and blocks in
//!   `read`. We listen on 127.0.0.1 with an ephemeral port in-process and accept the
//!   connection in setup; the client socket is in the same ESTABLISHED state, and no process
//!   or fixed port is involved.
//! - Duplicates are close-on-exec (`F_DUPFD_CLOEXEC`), so the process probes' children do not
//!   inherit hundreds of descriptors; that flag plays no part in `select`.
//!
//! # Measured in a single-threaded child
//! lmbench is one thread. In a process with several threads (ours: the progress ticker, test
//! threads) the kernel cannot take its fast path for looking up a descriptor (`fdget` skips
//! the reference count only while the descriptor table is not shared), so every descriptor
//! select examines costs two more atomic operations: measured here, 100 file descriptors take
//! 1.4 µs single-threaded and 4.0 µs with one idle extra thread. To measure what lat_select
//! measures, whatever threads the harness runs, the timed loop runs in a forked child, which
//! has one thread and its own descriptor table:
//! 1. Setup prepares the descriptors and the `fd_set`, then forks the child
//!    ([`sys::Child::fork`]); the child inherits the duplicates.
//! 2. Each `run(iters)` writes `iters` down a pipe; the child times `iters` calls with the
//!    monotonic clock (async-signal-safe: `clock_gettime`, `select`, `read`, `write`) and
//!    writes back the elapsed nanoseconds and the first wrong result, if any.
//! 3. Drop closes the command pipe (the child exits on end of file) and the `Child` handle
//!    kills and reaps it whatever state it is in.
//!
//! lmbench's script runs N = 10, 100, 250 and 500 for both kinds. `fd_set` holds descriptors
//! below `FD_SETSIZE` (1024); setup skips when ours would not fit.
//!
//! # def=lmbench: the same descriptor numbers, `nfds = N`
//! Which of lmbench's descriptors a call examines depends on their numbers, and those follow
//! from what is open in lmbench 3's measuring process (the `benchmp` child) when `initialize`
//! dups: 0-2 (stdio); for `tcp`, 3, the server's listening socket, opened before `benchmp`;
//! then `benchmp`'s four pipes (response, start, result, exit), of which the child keeps
//! `response[1]`, `start[0]`, `result[0]`, `exit[0]`. The file or socket then takes the lowest
//! free number and its N duplicates the next lowest ones ([`lmbench_fds`]). For `tcp` N = 10
//! that is 7, 9, 11, 12, ..., 18, and `select(10, ...)` polls two of them (7 and 9) and
//! returns 2; for `file` N = 10 (no listening socket) it is 6, 8, 10, ..., 17, again two.
//! With `def=lmbench` the measuring child moves the duplicates to exactly those numbers
//! (`dup2`, after closing everything else it inherited below them and moving its own pipes
//! above), passes `nfds = N`, and checks that each call reports the descriptors below N that
//! lmbench's call reports. The notes give `polled`, how many of the N each call examines.

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sys::{self, Child};
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use super::fs::scratch_file;
use super::Def;
use crate::{Context, Info, Instance, Probe, Suite};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Tcp,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Tcp => "tcp",
        }
    }
}

/// Parses `kind`, `fds` and `def`. Pure.
fn parse(params: &Params) -> Result<(Kind, usize, Def), ProbeError> {
    let kind = match params.get("kind").unwrap_or("file") {
        "file" => Kind::File,
        "tcp" => Kind::Tcp,
        other => return Err(ProbeError::Failed(format!("bad kind {other:?}: use file or tcp"))),
    };
    let n: usize = params.parse_or("fds", 100).map_err(ProbeError::Failed)?;
    if !(1..libc::FD_SETSIZE).contains(&n) {
        return Err(ProbeError::Failed(format!("fds={n} out of range 1..{}", libc::FD_SETSIZE)));
    }
    let def = Def::from_params(params, Def::Schedlab, &[Def::Schedlab, Def::Lmbench])?;
    Ok((kind, n, def))
}

/// The numbers lmbench 3's `lat_select -n n` gives its `n` duplicates in the `benchmp`
/// child (see the module doc), in the order `dup` returns them. Pure.
fn lmbench_fds(kind: Kind, n: usize) -> Vec<RawFd> {
    let mut open: Vec<RawFd> = vec![0, 1, 2];
    if kind == Kind::Tcp {
        // server(): the listening socket, still open in the parent when benchmp forks.
        open.push(3);
    }
    let lowest_free = |open: &[RawFd]| (0..).find(|fd| !open.contains(fd)).expect("a free fd");
    // benchmp: pipe(response), pipe(start_signal), pipe(result_signal), pipe(exit_signal).
    let mut pipes = Vec::with_capacity(8);
    for _ in 0..8 {
        let fd = lowest_free(&open);
        open.push(fd);
        pipes.push(fd);
    }
    // The child closes response[0], start_signal[1], result_signal[1], exit_signal[1].
    for closed in [pipes[0], pipes[3], pipes[5], pipes[7]] {
        open.retain(|&fd| fd != closed);
    }
    // initialize(): fid = open()/tcp_connect(), then n dups of it.
    let fid = lowest_free(&open);
    open.push(fid);
    (0..n)
        .map(|_| {
            let fd = lowest_free(&open);
            open.push(fd);
            fd
        })
        .collect()
}

/// In the forked child: gives the child exactly lmbench's descriptor numbers. Moves `keep`
/// (the command and result pipes) and `src` (one duplicate) above `targets`, closes every
/// other descriptor from 3 up to there, and `dup2`s `src` onto each target. Returns the new
/// numbers of `keep`, or `None` when a call failed. Async-signal-safe (no allocation).
fn arrange(src: RawFd, keep: [RawFd; 2], targets: &[RawFd]) -> Option<[RawFd; 2]> {
    let hi = targets.iter().max().map_or(3, |&m| m + 1);
    // SAFETY: fcntl(F_DUPFD) on descriptors the child inherited open.
    let moved = keep.map(|fd| unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, hi) });
    // SAFETY: as above.
    let src = unsafe { libc::fcntl(src, libc::F_DUPFD_CLOEXEC, hi) };
    if moved.contains(&-1) || src < 0 {
        return None;
    }
    for fd in 3..hi {
        // SAFETY: the child's own copies; closing one that is not open fails harmlessly.
        unsafe { libc::close(fd) };
    }
    for &t in targets {
        // SAFETY: `t` < hi is free now; `src` is open.
        if unsafe { libc::dup2(src, t) } != t {
            return None;
        }
    }
    // SAFETY: the child's temporary copy, no longer needed.
    unsafe { libc::close(src) };
    Some(moved)
}

/// `dup`s `fd` `n` times (close-on-exec) and builds the `fd_set` of the copies.
fn duplicate(fd: RawFd, n: usize) -> Result<(Vec<OwnedFd>, libc::fd_set, RawFd), ProbeError> {
    let mut fds = Vec::with_capacity(n);
    // SAFETY: fd_set is plain data; FD_ZERO below initialises it properly.
    let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid fd_set.
    unsafe { libc::FD_ZERO(&mut set) };
    let mut max = -1;
    for _ in 0..n {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on an open descriptor.
        let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if d < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EMFILE) {
                return Err(ProbeError::Skip(format!(
                    "needs {n} more descriptors than RLIMIT_NOFILE allows"
                )));
            }
            return Err(ProbeError::io("dup", err));
        }
        // SAFETY: fcntl returned a fresh descriptor that nothing else owns.
        fds.push(unsafe { OwnedFd::from_raw_fd(d) });
        if d as usize >= libc::FD_SETSIZE {
            return Err(ProbeError::Skip(format!(
                "descriptor {d} is beyond FD_SETSIZE ({}): too many files open",
                libc::FD_SETSIZE
            )));
        }
        // SAFETY: 0 <= d < FD_SETSIZE, checked above.
        unsafe { libc::FD_SET(d, &mut set) };
        max = max.max(d);
    }
    Ok((fds, set, max + 1))
}

struct SelectProbe;

/// The select probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(SelectProbe)]
}

impl Probe for SelectProbe {
    fn info(&self) -> Info {
        Info {
            id: "os.select.fds",
            doc: "select() with a zero timeout on N ready descriptors (dups of one file or one connected TCP socket): µs per call",
            unit: Unit::Micros,
            mirrors: "lmbench lat_select -n N file|tcp (default: nfds = max fd + 1, all N polled, where lmbench passes N; def=lmbench: nfds = N with lmbench's own descriptor numbers, so only those below N are polled; in-process 127.0.0.1 peer instead of a forked server)",
            requires: "a writable --tmp-dir (kind=file)",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let counts: &[usize] = match suite {
            Suite::Smoke => &[10],
            Suite::Quick => &[10, 100],
            Suite::Full => &[10, 100, 250, 500],
        };
        let ours = [Kind::File, Kind::Tcp].into_iter().flat_map(|k| {
            counts.iter().map(move |&n| Params::new().with("kind", k.key()).with("fds", n))
        });
        // lmbench's definition, after ours (whose keys predate it and carry no def).
        let lmbench = ours.clone().map(|p| p.with("def", Def::Lmbench.key()));
        ours.chain(lmbench).collect()
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let (kind, n, def) = parse(params)?;
        let (original, peer) = match kind {
            Kind::File => {
                let scratch = scratch_file(&ctx.tmp_dir, "select", libc::O_RDONLY)?;
                (OwnedFd::from(scratch.file), None)
            }
            Kind::Tcp => {
                let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .map_err(|e| ProbeError::io("bind 127.0.0.1:0", e))?;
                let addr = listener.local_addr().map_err(|e| ProbeError::io("local_addr", e))?;
                let mut client =
                    TcpStream::connect(addr).map_err(|e| ProbeError::io("connect", e))?;
                let (mut server, _) = listener.accept().map_err(|e| ProbeError::io("accept", e))?;
                // One byte across proves the connection is up, as lmbench's server reads one.
                client.write_all(b"x").map_err(|e| ProbeError::io("write", e))?;
                let mut b = [0u8; 1];
                server.read_exact(&mut b).map_err(|e| ProbeError::io("read", e))?;
                (OwnedFd::from(client), Some(Peer { _listener: listener, _server: server }))
            }
        };
        let (fds, set, nfds) = duplicate(original.as_raw_fd(), n)?;
        // lmbench closes the original: the duplicates keep the file or socket open.
        drop(original);
        let layout = match def {
            Def::Schedlab => Layout::Ours { set, nfds },
            _ => Layout::lmbench(kind, n)?,
        };
        Ok(Box::new(Select::start(kind, fds, layout, peer)?))
    }
}

/// lat_select's `doit`: `iters` selects on a fresh copy of `set` as the write set, zero
/// timeout. Returns the elapsed nanoseconds and the first result that was not `want`
/// (or `want`), with errno when it was -1. Async-signal-safe: runs in the forked child.
fn doit(set: &libc::fd_set, nfds: RawFd, want: libc::c_int, iters: u64) -> (u64, i32, i32) {
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    let (mut bad, mut errno) = (want, 0);
    let start = sys::now_ns();
    for _ in 0..iters {
        // lmbench's `nosave = state->set`: select overwrites the set it is given.
        let mut nosave = black_box(*set);
        // SAFETY: `nosave` is a valid fd_set whose members are all below `nfds` and open
        // (inherited from the parent, which keeps its own copies open); `tv` is valid.
        let rc = unsafe {
            libc::select(nfds, std::ptr::null_mut(), &mut nosave, std::ptr::null_mut(), &mut tv)
        };
        if rc != want && bad == want {
            bad = rc;
            // Reading errno allocates nothing.
            errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        }
    }
    (sys::now_ns() - start, bad, errno)
}

/// The child's loop: read an iteration count, run [`doit`], write back 16 bytes
/// (elapsed ns, result, errno); leave on end of file. Async-signal-safe.
fn serve(cmd: RawFd, res: RawFd, set: &libc::fd_set, nfds: RawFd, want: libc::c_int) -> i32 {
    loop {
        let mut b = [0u8; 8];
        if sys::read_exact(cmd, &mut b).is_err() {
            return 0;
        }
        let (ns, bad, errno) = doit(set, nfds, want, u64::from_ne_bytes(b));
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&ns.to_ne_bytes());
        out[8..12].copy_from_slice(&bad.to_ne_bytes());
        out[12..].copy_from_slice(&errno.to_ne_bytes());
        if sys::write_all(res, &out).is_err() {
            return 1;
        }
    }
}

/// Which descriptors the measuring child polls, and with which `nfds`.
enum Layout {
    /// The duplicates as numbered in our process, `nfds = max + 1`: all N polled.
    Ours { set: libc::fd_set, nfds: RawFd },
    /// lmbench's numbers ([`lmbench_fds`]), `nfds = N`.
    Lmbench { targets: Vec<RawFd>, set: libc::fd_set, nfds: RawFd },
}

impl Layout {
    /// lmbench's layout for `n` descriptors of `kind`.
    fn lmbench(kind: Kind, n: usize) -> Result<Layout, ProbeError> {
        let targets = lmbench_fds(kind, n);
        // SAFETY: fd_set is plain data; FD_ZERO below initialises it properly.
        let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid fd_set.
        unsafe { libc::FD_ZERO(&mut set) };
        for &t in &targets {
            if t as usize >= libc::FD_SETSIZE {
                return Err(ProbeError::Skip(format!(
                    "lmbench's descriptor {t} is beyond FD_SETSIZE ({})",
                    libc::FD_SETSIZE
                )));
            }
            // SAFETY: 0 <= t < FD_SETSIZE, checked above.
            unsafe { libc::FD_SET(t, &mut set) };
        }
        Ok(Layout::Lmbench { targets, set, nfds: n as RawFd })
    }

    fn set(&self) -> &libc::fd_set {
        match self {
            Layout::Ours { set, .. } | Layout::Lmbench { set, .. } => set,
        }
    }

    fn nfds(&self) -> RawFd {
        match self {
            Layout::Ours { nfds, .. } | Layout::Lmbench { nfds, .. } => *nfds,
        }
    }

    /// How many descriptors each call examines and reports ready: those in the set below
    /// `nfds`.
    fn polled(&self, n: usize) -> usize {
        match self {
            Layout::Ours { .. } => n,
            Layout::Lmbench { targets, nfds, .. } => targets.iter().filter(|&&t| t < *nfds).count(),
        }
    }
}

/// The server end of the TCP connection, kept open while the probe runs.
struct Peer {
    _listener: TcpListener,
    _server: TcpStream,
}

struct Select {
    kind: Kind,
    /// The parent's copies of the duplicates (the child has its own).
    fds: Vec<OwnedFd>,
    nfds: RawFd,
    /// Descriptors each call must report ready.
    want: usize,
    /// lmbench's descriptor numbers, when the child uses them.
    lmbench: Option<(RawFd, RawFd)>,
    /// Command pipe to the child (write end) and result pipe from it (read end).
    cmd: OwnedFd,
    res: OwnedFd,
    /// Declared after the pipes: dropped after them, so the child sees end of file first.
    child: Child,
    _peer: Option<Peer>,
}

impl Select {
    /// Forks the measuring child (protocol step 1).
    fn start(
        kind: Kind,
        fds: Vec<OwnedFd>,
        layout: Layout,
        peer: Option<Peer>,
    ) -> Result<Select, ProbeError> {
        let want = layout.polled(fds.len());
        let (set, nfds) = (*layout.set(), layout.nfds());
        let src = fds.first().map_or(-1, |f| f.as_raw_fd());
        let (cmd_r, cmd_w) = sys::pipe()?;
        let (res_r, res_w) = sys::pipe()?;
        let (c_r, c_w, r_r, r_w) =
            (sys::raw(&cmd_r), sys::raw(&cmd_w), sys::raw(&res_r), sys::raw(&res_w));
        let lmbench = match &layout {
            Layout::Lmbench { targets, .. } => Some((targets[0], targets[targets.len() - 1])),
            Layout::Ours { .. } => None,
        };
        let child = Child::fork(None, move || {
            // Close the parent's ends so that the parent's drop is seen as end of file.
            // SAFETY: these are the child's copies of descriptors it does not use.
            unsafe {
                libc::close(c_w);
                libc::close(r_r);
            }
            let (c_r, r_w) = match &layout {
                Layout::Ours { .. } => (c_r, r_w),
                Layout::Lmbench { targets, .. } => match arrange(src, [c_r, r_w], targets) {
                    Some([c, r]) => (c, r),
                    None => return 3,
                },
            };
            serve(c_r, r_w, &set, nfds, want as libc::c_int)
        })?;
        Ok(Select { kind, fds, nfds, want, lmbench, cmd: cmd_w, res: res_r, child, _peer: peer })
    }
}

impl Workload for Select {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let gone = |what: &str, e: std::io::Error| {
            if interrupt::requested() {
                ProbeError::Interrupted
            } else {
                ProbeError::Failed(format!("select child (pid {}) {what}: {e}", self.child.pid()))
            }
        };
        sys::write_all(self.cmd.as_raw_fd(), &iters.to_ne_bytes())
            .map_err(|e| gone("took no command", e))?;
        let mut out = [0u8; 16];
        sys::read_exact(self.res.as_raw_fd(), &mut out).map_err(|e| gone("sent no result", e))?;
        let ns = u64::from_ne_bytes(out[..8].try_into().expect("8 bytes"));
        let bad = i32::from_ne_bytes(out[8..12].try_into().expect("4 bytes"));
        let errno = i32::from_ne_bytes(out[12..].try_into().expect("4 bytes"));
        let want = self.want as i32;
        if bad < 0 {
            return Err(ProbeError::Failed(format!(
                "select: {}",
                std::io::Error::from_raw_os_error(errno)
            )));
        }
        if bad != want {
            return Err(ProbeError::Failed(format!(
                "select reported {bad} descriptors ready, not {want}"
            )));
        }
        Ok(Timing::from_elapsed(std::time::Duration::from_nanos(ns)))
    }

    /// The child times `select`; this process only waits for its answer.
    fn parties(&self) -> Vec<schedlab_measure::placement::Party> {
        vec![schedlab_measure::placement::Party::task("child", self.child.pid())]
    }
}

impl Instance for Select {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }

    fn notes(&self) -> Params {
        let (first, last) = self.lmbench.unwrap_or((
            self.fds.first().map_or(-1, |f| f.as_raw_fd()),
            self.fds.last().map_or(-1, |f| f.as_raw_fd()),
        ));
        Params::new()
            .with("kind", self.kind.key())
            .with("nfds", self.nfds)
            .with("polled", self.want)
            .with("fd_range", format!("{first}-{last}"))
            .with("fd_numbers", if self.lmbench.is_some() { "lmbench's" } else { "ours" })
            .with("set", "write")
            .with("process", "single-threaded child")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_parse_and_reject_nonsense() {
        let p = |s: &str| parse(&Params::from_key(s));
        assert_eq!(p("kind=tcp,fds=10").unwrap(), (Kind::Tcp, 10, Def::Schedlab));
        assert_eq!(p("").unwrap(), (Kind::File, 100, Def::Schedlab));
        assert_eq!(p("kind=tcp,fds=10,def=lmbench").unwrap(), (Kind::Tcp, 10, Def::Lmbench));
        assert!(p("def=unixbench").is_err());
        assert!(p("kind=udp").is_err());
        assert!(p("fds=0").is_err());
        assert!(p("fds=1024").is_err());
        assert!(p("fds=many").is_err());
    }

    #[test]
    fn quick_variants_cover_both_kinds_and_counts() {
        let v: Vec<String> = SelectProbe.variants(Suite::Quick).iter().map(Params::key).collect();
        assert_eq!(
            v,
            [
                "kind=file,fds=10",
                "kind=file,fds=100",
                "kind=tcp,fds=10",
                "kind=tcp,fds=100",
                "kind=file,fds=10,def=lmbench",
                "kind=file,fds=100,def=lmbench",
                "kind=tcp,fds=10,def=lmbench",
                "kind=tcp,fds=100,def=lmbench"
            ]
        );
    }

    /// lmbench 3's numbering, worked out by hand from lat_select.c and benchmp (module doc).
    #[test]
    fn lmbench_numbers_follow_its_open_descriptors() {
        assert_eq!(lmbench_fds(Kind::Tcp, 10), [7, 9, 11, 12, 13, 14, 15, 16, 17, 18]);
        assert_eq!(lmbench_fds(Kind::File, 10), [6, 8, 10, 11, 12, 13, 14, 15, 16, 17]);
        let polled = |k, n| Layout::lmbench(k, n).unwrap().polled(n);
        // select(10, ...) sees two of the ten; select(100, ...) 100 - 9 and 100 - 8.
        assert_eq!(polled(Kind::Tcp, 10), 2);
        assert_eq!(polled(Kind::File, 10), 2);
        assert_eq!(polled(Kind::Tcp, 100), 91);
        assert_eq!(polled(Kind::File, 100), 92);
        assert_eq!(lmbench_fds(Kind::Tcp, 500).last(), Some(&508));
    }

    /// In lmbench's layout the child really polls only the descriptors below N: `run` fails
    /// unless every call reports exactly that many ready.
    #[test]
    fn lmbench_definition_polls_only_the_descriptors_below_n() {
        let ctx = Context::for_tests();
        for (kind, n, want) in [("tcp", 10, 2), ("file", 10, 2), ("tcp", 100, 91)] {
            let params = Params::new().with("kind", kind).with("fds", n).with("def", "lmbench");
            let mut inst = SelectProbe.setup(&params, &ctx).unwrap();
            inst.run(20).unwrap_or_else(|e| panic!("{params}: {e}"));
            let notes = inst.notes();
            assert_eq!(notes.get("polled"), Some(want.to_string().as_str()), "{notes}");
            assert_eq!(notes.get("nfds"), Some(n.to_string().as_str()), "{notes}");
        }
    }

    #[test]
    fn every_descriptor_is_ready_for_both_kinds() {
        let ctx = Context::for_tests();
        for kind in ["file", "tcp"] {
            let params = Params::new().with("kind", kind).with("fds", 25);
            let mut inst = SelectProbe.setup(&params, &ctx).unwrap();
            // run() fails unless select reports all 25 ready.
            inst.run(50).unwrap();
            let notes = inst.notes();
            let nfds: i32 = notes.get("nfds").unwrap().parse().unwrap();
            assert!(nfds >= 25, "{notes}");
        }
    }

    #[test]
    fn duplicates_are_closed_on_drop() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let (fds, set, nfds) = duplicate(client.as_raw_fd(), 5).unwrap();
        drop(client);
        let mut sel = Select::start(Kind::Tcp, fds, Layout::Ours { set, nfds }, None).unwrap();
        sel.run(3).unwrap();
        drop(sel);
        // The server sees end-of-file only once every duplicate of the client is closed.
        server.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(server.read(&mut b).unwrap(), 0, "a duplicate outlived the probe");
    }

    /// The full suite's largest sets (500 descriptors) fit in an fd_set and run.
    #[test]
    fn full_suite_variants_run() {
        let ctx = Context::for_tests();
        for params in SelectProbe.variants(Suite::Full) {
            let mut inst = match SelectProbe.setup(&params, &ctx) {
                Ok(i) => i,
                Err(ProbeError::Skip(why)) => {
                    eprintln!("{params} skipped: {why}");
                    continue;
                }
                Err(e) => panic!("{params}: {e}"),
            };
            inst.run(5).unwrap_or_else(|e| panic!("{params}: {e}"));
        }
    }
}
