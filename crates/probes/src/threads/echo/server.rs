//! The echo probe's servers, in this process: a thread (os, rt) or a task (tokio) per
//! connection, each reading one byte and writing it back until the client closes. Written
//! as a user would write them: blocking `read`/`write_all` on the connection (the rt
//! server with `std::net` as it is, `io=std`, or with `schedlab_rt::net`, `io=net`: the
//! same code but for the import), `tokio::net` with `AsyncReadExt` for tokio.
//!
//! Life of a server ([`Server::start`], then drop):
//! 1. A server thread (`thprobe-echo-server`) pins itself to the server's CPU, then builds
//!    the runtime, so every kernel thread the runtime or the server ever starts (rt
//!    processors, spare kernel threads for blocked user threads, tokio workers, one
//!    thread per connection) inherits the pin.
//! 2. It binds 127.0.0.1 on an ephemeral port and reports the address, then accepts
//!    exactly the expected number of connections, starting a thread or task for each, and
//!    closes the listener.
//! 3. It waits for every connection's thread or task, which ends when its client closes
//!    the connection; then it drops the runtime and says it is done.
//!
//! Teardown (drop) closes the client first (the probe's field order), so step 3 ends; it
//! also shuts down every connection of the std servers through a duplicate kept at accept
//! (a server far behind, or a client killed mid-wave, must not keep its threads). If the
//! client never connected them all, drop sets the stop flag and connects to the listener
//! itself until the accept loop sees it. The drop waits a bounded time for the server
//! thread; a server that does not finish is reported, not waited on for ever.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use schedlab_measure::{sys, ProbeError};

use super::super::backend::THREAD_PREFIX;

/// Which server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `std::thread` per connection, `std::net`.
    Os,
    /// A schedlab-rt user thread per connection, plain `std::net` (`io=std`).
    RtStd,
    /// The same with `schedlab_rt::net` (`io=net`): a read that would block parks the
    /// user thread on the runtime's poller.
    RtNet,
    /// `RtNet` with every page of an idle connection thread's stack given back
    /// after 10 ms instead of the default 1 s (`io=net-live`:
    /// `RuntimeBuilder::idle_stack_reclaim_live`, on by default, and
    /// `idle_stack_reclaim`), so that the probe's memory reading shows it.
    RtNetLive,
    /// A tokio task per connection on a multi-thread runtime with one worker.
    Tokio,
}

impl Kind {
    /// The `runtime` note.
    pub(super) fn runtime(self) -> &'static str {
        match self {
            Kind::Os => "std::thread per connection (default stack), std::net",
            Kind::RtStd => "rt processors=1, a user thread per connection, std::net (io=std)",
            Kind::RtNet => {
                "rt processors=1, a user thread per connection, schedlab_rt::net (io=net)"
            }
            Kind::RtNetLive => {
                "rt processors=1, a user thread per connection, schedlab_rt::net, idle stacks' live frames reclaimed too (io=net-live)"
            }
            Kind::Tokio => "tokio multi_thread workers=1, a task per connection, tokio::net",
        }
    }
}

/// How long drop waits for the server thread to finish.
const FINISH_LIMIT: Duration = Duration::from_secs(20);

/// A server running on its own thread.
pub(super) struct Server {
    addr: SocketAddr,
    expected: usize,
    stop: Arc<AtomicBool>,
    /// How many connections the accept loop has taken.
    accepted: Arc<AtomicUsize>,
    /// A duplicate of every std connection the server holds, shut down on drop so that
    /// every blocked `read` returns whatever state the client or the runtime is in.
    conns: Conns,
    /// The server thread's outcome: `Err` when accepting or starting a runtime failed.
    done: mpsc::Receiver<Result<(), String>>,
    outcome: Option<Result<(), String>>,
    handle: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts a `kind` server for `connections` connections, its threads on `cpu`.
    pub(super) fn start(
        kind: Kind,
        connections: usize,
        cpu: Option<usize>,
    ) -> Result<Server, ProbeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Shared {
            stop: stop.clone(),
            accepted: Arc::new(AtomicUsize::new(0)),
            conns: Conns::default(),
        };
        let (accepted, conns) = (shared.accepted.clone(), shared.conns.clone());
        let (addr_tx, addr_rx) = mpsc::channel::<Result<SocketAddr, String>>();
        let (done_tx, done) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(format!("{THREAD_PREFIX}echo-server"))
            .spawn(move || {
                let result = match cpu.map_or(Ok(()), sys::pin_to) {
                    Ok(()) => serve(kind, connections, &shared, &addr_tx),
                    Err(e) => Err(format!("pin the server to its CPU: {e}")),
                };
                if let Err(e) = &result {
                    // Setup may still wait for the address.
                    let _ = addr_tx.send(Err(e.clone()));
                }
                let _ = done_tx.send(result);
            })
            .map_err(|e| ProbeError::io("spawn the echo server thread", e))?;
        let mut server = Server {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            expected: connections,
            stop,
            accepted,
            conns,
            done,
            outcome: None,
            handle: Some(handle),
        };
        match addr_rx.recv_timeout(FINISH_LIMIT) {
            Ok(Ok(addr)) => server.addr = addr,
            Ok(Err(e)) => return Err(ProbeError::Failed(format!("echo server: {e}"))),
            Err(_) => return Err(ProbeError::Failed("echo server: no address".into())),
        }
        Ok(server)
    }

    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// An error once the server thread has stopped with one (checked while the client
    /// connects, so a server that cannot accept fails setup instead of hanging it).
    pub(super) fn health(&mut self) -> Result<(), ProbeError> {
        if self.outcome.is_none() {
            self.outcome = self.done.try_recv().ok();
        }
        match &self.outcome {
            Some(Err(e)) => Err(ProbeError::Failed(format!("echo server: {e}"))),
            _ => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // 1. No more connections; 2. every held connection shut down, so its thread's
        // `read` returns 0 even if the client is stuck or the runtime far behind;
        // 3. an accept loop still waiting is woken by connections of our own (each wakes
        // one accept, which sees the flag and leaves); 4. a bounded wait for the thread.
        self.stop.store(true, Ordering::SeqCst);
        self.conns.shut_down();
        if self.outcome.is_none() {
            self.outcome = self.done.try_recv().ok();
        }
        let mut tries = 0;
        while self.outcome.is_none()
            && self.accepted.load(Ordering::SeqCst) < self.expected
            && tries <= self.expected
        {
            let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
            tries += 1;
            match self.done.recv_timeout(Duration::from_millis(5)) {
                Ok(r) => self.outcome = Some(r),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        if self.outcome.is_none() {
            self.outcome = self.done.recv_timeout(FINISH_LIMIT).ok();
        }
        match self.outcome {
            Some(_) => {
                if let Some(h) = self.handle.take() {
                    let _ = h.join();
                }
            }
            // Left running: the threads check of the tests names it.
            None => {
                eprintln!("threads.net.echo: the echo server did not stop within {FINISH_LIMIT:?}")
            }
        }
    }
}

/// What the server thread shares with its owner.
#[derive(Clone)]
struct Shared {
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    conns: Conns,
}

/// Duplicates of the server's connections (their own descriptors, so shutting one down
/// can never reach a descriptor number the kernel has since given to something else).
#[derive(Clone, Default)]
struct Conns(Arc<Mutex<Vec<OwnedFd>>>);

impl Conns {
    fn keep(&self, s: &impl AsFd) -> Result<(), String> {
        let dup =
            s.as_fd().try_clone_to_owned().map_err(|e| format!("duplicate a connection: {e}"))?;
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(dup);
        Ok(())
    }

    fn shut_down(&self) {
        for fd in self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            // SAFETY: `fd` is an open socket descriptor this value owns; shutdown only
            // changes the socket's state (every descriptor of it sees end of file).
            unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }
}

/// The server thread's work (steps 1-3 above, after the pin).
fn serve(
    kind: Kind,
    n: usize,
    shared: &Shared,
    addr_tx: &mpsc::Sender<Result<SocketAddr, String>>,
) -> Result<(), String> {
    match kind {
        Kind::Os => {
            let accept = listener!(std::net, addr_tx, shared.conns);
            let handles = accept_loop(n, shared, accept, |s| {
                std::thread::Builder::new()
                    .name(format!("{THREAD_PREFIX}echo-conn"))
                    .spawn(move || echo_blocking(s))
                    .map_err(|e| format!("spawn a connection thread: {e}"))
            });
            for h in handles? {
                let _ = h.join();
            }
            Ok(())
        }
        Kind::RtStd => on_rt(addr_tx, shared, false, move |addr_tx, shared| {
            let accept = listener!(std::net, addr_tx, shared.conns);
            let handles = accept_loop(n, shared, accept, |s| {
                Ok(schedlab_rt::spawn(move || echo_blocking(s)))
            });
            for h in handles? {
                let _ = h.join();
            }
            Ok(())
        }),
        // The same server as `RtStd` but for the import.
        Kind::RtNet | Kind::RtNetLive => {
            on_rt(addr_tx, shared, kind == Kind::RtNetLive, move |addr_tx, shared| {
                let accept = listener!(schedlab_rt::net, addr_tx, shared.conns);
                let handles = accept_loop(n, shared, accept, |s| {
                    Ok(schedlab_rt::spawn(move || echo_blocking(s)))
                });
                for h in handles? {
                    let _ = h.join();
                }
                Ok(())
            })
        }
        Kind::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(format!("{THREAD_PREFIX}tokio"))
                .enable_io()
                .build()
                .map_err(|e| format!("tokio runtime: {e}"))?;
            let addr_tx = addr_tx.clone();
            let shared = shared.clone();
            let accept = rt.spawn(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
                let addr = listener.local_addr().map_err(|e| format!("local_addr: {e}"))?;
                let _ = addr_tx.send(Ok(addr));
                let mut tasks = Vec::with_capacity(n);
                while tasks.len() < n {
                    let (s, _) = listener.accept().await.map_err(|e| format!("accept: {e}"))?;
                    shared.accepted.fetch_add(1, Ordering::SeqCst);
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    s.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
                    tasks.push(tokio::spawn(echo_tokio(s)));
                }
                drop(listener);
                for t in tasks {
                    let _ = t.await;
                }
                Ok::<(), String>(())
            });
            rt.block_on(accept).map_err(|e| format!("the accept task: {e}"))?
        }
    }
}

/// A one-processor schedlab-rt runtime running `server` as its main user thread;
/// `live`: idle stacks' live frames are reclaimed too.
fn on_rt(
    addr_tx: &mpsc::Sender<Result<SocketAddr, String>>,
    shared: &Shared,
    live: bool,
    server: impl FnOnce(&mpsc::Sender<Result<SocketAddr, String>>, &Shared) -> Result<(), String>
        + Send
        + 'static,
) -> Result<(), String> {
    // The live mode at 10 ms, so the memory read after `SETTLE` (100 ms) shows it;
    // the others with the runtime's defaults (the live mode too, at 1 s).
    let builder = schedlab_rt::Runtime::builder();
    let builder = if live {
        builder.idle_stack_reclaim_live(true).idle_stack_reclaim(Some(Duration::from_millis(10)))
    } else {
        builder
    };
    let rt = builder.processors(1).build().map_err(|e| format!("schedlab-rt runtime: {e}"))?;
    let (addr_tx, shared) = (addr_tx.clone(), shared.clone());
    rt.block_on(move || server(&addr_tx, &shared)).map_err(|d| format!("schedlab-rt: {d}"))?
}

/// Binds `$net::TcpListener` (`std::net`, `schedlab_rt::net`: the same names) on
/// 127.0.0.1, reports its address and returns the accept closure the accept loop calls,
/// which owns the listener (closed when the loop is done): each accepted connection gets
/// `TCP_NODELAY` and a duplicate kept for teardown.
macro_rules! listener {
    ($($net:ident)::+, $addr_tx:expr, $conns:expr) => {{
        let listener = $($net)::+::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("local_addr: {e}"))?;
        let _ = $addr_tx.send(Ok(addr));
        let conns = $conns.clone();
        move || {
            let (s, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
            s.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
            conns.keep(&s)?;
            Ok(s)
        }
    }};
}
use listener;

/// Accepts up to `n` connections (fewer when `stop` is set), starting each with `start`;
/// the handles of those started.
fn accept_loop<S, H>(
    n: usize,
    shared: &Shared,
    mut accept: impl FnMut() -> Result<S, String>,
    mut start: impl FnMut(S) -> Result<H, String>,
) -> Result<Vec<H>, String> {
    // `accept` owns the listener: it is closed when this returns.
    let mut handles = Vec::with_capacity(n);
    while handles.len() < n {
        let s = accept()?;
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        handles.push(start(s)?);
    }
    Ok(handles)
}

/// One connection, blocking: read a byte, write it back, until the client closes.
fn echo_blocking<S: Read + Write>(mut s: S) {
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b) {
            // A signal (schedlab-rt's monitor sends some) is not the client's doing.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if s.write_all(&b[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

async fn echo_tokio(mut s: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if s.write_all(&b[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}
