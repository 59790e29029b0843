//! The echo probe's client: a process of its own (our binary re-executed with
//! [`CLIENT_ARG`]), so the server's process holds only the server and the client's threads
//! never share a scheduler, an allocator or a CPU with it.
//!
//! The client process ([`client_main`]) pins itself to its CPU, opens every connection
//! (`TCP_NODELAY`) and checks one round trip on each, splits them over a few OS threads
//! and says `ready`. Then it serves requests on its standard input, one line each:
//!
//! | request   | answer                         | meaning                                        |
//! |-----------|--------------------------------|------------------------------------------------|
//! | `run W`   | `done NS` or `error MESSAGE`   | W waves on every connection, NS ns wall time   |
//! | `quit`    | (exits 0)                      | close every connection and exit; so does EOF   |
//!
//! A wave is a round trip on each connection of a thread, pipelined: the thread writes one
//! byte to every connection it owns, then reads each echo back and checks it. So every
//! connection has one byte in flight and the server sees all its connections busy at once,
//! which is the load a thread-per-connection server is built for; the client spends two
//! system calls per round trip and never waits on one connection while others have
//! answers. Each connection sends its own sequence (connection index plus wave, modulo
//! 256), so a lost, repeated or misrouted byte is an error naming the connection.
//!
//! The parent side ([`ClientProcess`]) starts it, waits for each answer with a deadline
//! (a hang guard: a stuck server fails the sample instead of hanging the run), and on drop
//! asks it to quit, then kills and reaps it if it does not.

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use schedlab_measure::{interrupt, sys, ProbeError};

use super::limits;

/// `argv[1]` that makes our binary the echo client:
/// `__echo-client ADDR CONNECTIONS THREADS CPU` (CPU `-` for unpinned).
pub const CLIENT_ARG: &str = "__echo-client";

/// The waves value that tells the client threads to leave.
const QUIT: u64 = u64::MAX;

/// The client process's entry: its arguments after [`CLIENT_ARG`]; returns the exit code
/// (0 after `quit` or EOF, 1 after an error, reported as an `error` line, 2 for bad
/// arguments).
pub fn client_main(args: &[String]) -> i32 {
    let spec = match ClientSpec::parse(args) {
        Ok(s) => s,
        Err(msg) => {
            eprintln!("schedlab {CLIENT_ARG}: {msg}");
            return 2;
        }
    };
    let mut out = std::io::stdout().lock();
    match serve(&spec, &mut out) {
        Ok(()) => 0,
        Err(msg) => {
            let _ = writeln!(out, "error {}", msg.replace('\n', " "));
            let _ = out.flush();
            1
        }
    }
}

/// What the parent asks of the client.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClientSpec {
    addr: SocketAddr,
    connections: usize,
    threads: usize,
    cpu: Option<usize>,
}

impl ClientSpec {
    fn parse(args: &[String]) -> Result<ClientSpec, String> {
        let [addr, connections, threads, cpu] = args else {
            return Err(format!(
                "expected ADDR CONNECTIONS THREADS CPU, got {} arguments",
                args.len()
            ));
        };
        let addr = addr.parse().map_err(|e| format!("ADDR {addr:?}: {e}"))?;
        let connections: usize =
            connections.parse().map_err(|e| format!("CONNECTIONS {connections:?}: {e}"))?;
        let threads: usize = threads.parse().map_err(|e| format!("THREADS {threads:?}: {e}"))?;
        let cpu = match cpu.as_str() {
            "-" => None,
            c => Some(c.parse().map_err(|e| format!("CPU {c:?}: {e}"))?),
        };
        if connections == 0 || threads == 0 {
            return Err("CONNECTIONS and THREADS must be at least 1".into());
        }
        Ok(ClientSpec { addr, connections, threads: threads.min(connections), cpu })
    }

    fn args(&self) -> Vec<String> {
        vec![
            CLIENT_ARG.to_string(),
            self.addr.to_string(),
            self.connections.to_string(),
            self.threads.to_string(),
            self.cpu.map_or("-".into(), |c| c.to_string()),
        ]
    }
}

/// What the client threads share with the client's main thread.
struct Control {
    waves: AtomicU64,
    start: Barrier,
    end: Barrier,
    error: Mutex<Option<String>>,
}

fn serve(spec: &ClientSpec, out: &mut impl Write) -> Result<(), String> {
    if let Some(cpu) = spec.cpu {
        // Threads created from now on inherit the mask.
        sys::pin_to(cpu).map_err(|e| format!("pin the client to CPU {cpu}: {e}"))?;
    }
    limits::raise_nofile(spec.connections as u64 + limits::SPARE_FDS)
        .map_err(|e| format!("client: {e}"))?;
    let mut conns = Vec::with_capacity(spec.connections);
    for i in 0..spec.connections {
        let s = TcpStream::connect(spec.addr)
            .map_err(|e| format!("connection {i} of {} to {}: {e}", spec.connections, spec.addr))?;
        s.set_nodelay(true).map_err(|e| format!("TCP_NODELAY on connection {i}: {e}"))?;
        conns.push(Conn { stream: s, index: i, next: i as u8 });
    }
    // One checked round trip each: every connection accepted and served once before the
    // parent reads the server's idle memory.
    for c in &mut conns {
        c.send()?;
        c.receive()?;
    }
    let control = Arc::new(Control {
        waves: AtomicU64::new(0),
        start: Barrier::new(spec.threads + 1),
        end: Barrier::new(spec.threads + 1),
        error: Mutex::new(None),
    });
    let mut groups: Vec<Vec<Conn>> = (0..spec.threads).map(|_| Vec::new()).collect();
    for (i, c) in conns.into_iter().enumerate() {
        groups[i % spec.threads].push(c);
    }
    let mut handles = Vec::with_capacity(spec.threads);
    for (t, group) in groups.into_iter().enumerate() {
        let control = control.clone();
        let h = std::thread::Builder::new()
            .name(format!("echo-client-{t}"))
            .stack_size(256 * 1024)
            .spawn(move || client_thread(group, &control))
            .map_err(|e| format!("spawn client thread {t}: {e}"))?;
        handles.push(h);
    }
    let said = writeln!(out, "ready").and_then(|()| out.flush());
    let result = said.map_err(|e| format!("write to the parent: {e}")).and_then(|()| {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line.map_err(|e| format!("read from the parent: {e}"))?;
            let line = line.trim();
            if line == "quit" {
                break;
            }
            let Some(waves) = line.strip_prefix("run ").and_then(|w| w.parse::<u64>().ok()) else {
                return Err(format!("unknown request {line:?}"));
            };
            let waves = waves.min(QUIT - 1);
            control.waves.store(waves, Ordering::Relaxed);
            control.start.wait();
            let t = Instant::now();
            control.end.wait();
            let ns = t.elapsed().as_nanos();
            if let Some(e) = control.error.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return Err(e);
            }
            writeln!(out, "done {ns}")
                .and_then(|()| out.flush())
                .map_err(|e| format!("write to the parent: {e}"))?;
        }
        Ok(())
    });
    control.waves.store(QUIT, Ordering::Relaxed);
    control.start.wait();
    for h in handles {
        let _ = h.join();
    }
    result
}

/// One connection of the client and the byte it sends next.
struct Conn {
    stream: TcpStream,
    index: usize,
    next: u8,
}

impl Conn {
    fn send(&mut self) -> Result<(), String> {
        self.stream
            .write_all(&[self.next])
            .map_err(|e| format!("connection {}: write: {e}", self.index))
    }

    fn receive(&mut self) -> Result<(), String> {
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(1) if b[0] == self.next => {
                self.next = self.next.wrapping_add(1);
                Ok(())
            }
            Ok(1) => Err(format!(
                "connection {}: sent byte {}, the server echoed {}",
                self.index, self.next, b[0]
            )),
            Ok(_) => Err(format!("connection {}: the server closed it", self.index)),
            Err(e) => Err(format!("connection {}: read: {e}", self.index)),
        }
    }
}

fn client_thread(mut conns: Vec<Conn>, control: &Control) {
    let mut failed = false;
    loop {
        control.start.wait();
        let waves = control.waves.load(Ordering::Relaxed);
        if waves == QUIT {
            return;
        }
        if !failed {
            if let Err(e) = waves_on(&mut conns, waves) {
                failed = true;
                control.error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
            }
        }
        control.end.wait();
    }
}

/// `waves` pipelined round trips on every connection of `conns`.
fn waves_on(conns: &mut [Conn], waves: u64) -> Result<(), String> {
    for _ in 0..waves {
        for c in conns.iter_mut() {
            c.send()?;
        }
        for c in conns.iter_mut() {
            c.receive()?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The parent's side.
// ---------------------------------------------------------------------------------------

/// Longest wait for the answer to a request: a hang guard, far above any sample (the
/// sampler asks for one wave first, then for about 50 ms of them), so a server that falls
/// this far behind fails the sample rather than holding the run.
const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// Added to [`ANSWER_LIMIT`] per connection for the first answer (every connection opened
/// and checked once).
const READY_PER_CONNECTION: Duration = Duration::from_millis(5);

/// A running client process; asked to quit, then killed and reaped, when dropped.
pub(super) struct ClientProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    /// Bytes read past the last answer's newline.
    pending: Vec<u8>,
}

impl ClientProcess {
    /// Starts `program` as the client of `addr` with `connections` connections over
    /// `threads` threads pinned to `cpu`, and waits until it is ready, calling `check`
    /// (the server's health) while it waits.
    pub(super) fn start(
        program: &Path,
        addr: SocketAddr,
        connections: usize,
        threads: usize,
        cpu: Option<usize>,
        mut check: impl FnMut() -> Result<(), ProbeError>,
    ) -> Result<ClientProcess, ProbeError> {
        let spec = ClientSpec { addr, connections, threads: threads.min(connections), cpu };
        let mut child = Command::new(program)
            .args(spec.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                ProbeError::io(&format!("start the echo client {}", program.display()), e)
            })?;
        let stdin = child.stdin.take().expect("stdin was piped");
        let stdout = child.stdout.take().expect("stdout was piped");
        let mut client = ClientProcess { child, stdin: Some(stdin), stdout, pending: Vec::new() };
        let limit = ANSWER_LIMIT + READY_PER_CONNECTION * connections as u32;
        let answer = client.answer(limit, &mut check)?;
        if answer != "ready" {
            return Err(client.failure(&answer));
        }
        Ok(client)
    }

    /// `waves` waves on every connection; the client's wall time for them.
    pub(super) fn run(&mut self, waves: u64) -> Result<Duration, ProbeError> {
        let stdin = self.stdin.as_mut().expect("stdin is open until drop");
        if let Err(e) = writeln!(stdin, "run {waves}").and_then(|()| stdin.flush()) {
            return Err(self.failure(&format!("send a request: {e}")));
        }
        let answer = self.answer(ANSWER_LIMIT, &mut || Ok(()))?;
        match answer.strip_prefix("done ").and_then(|ns| ns.parse::<u64>().ok()) {
            Some(ns) => Ok(Duration::from_nanos(ns)),
            None => Err(self.failure(&answer)),
        }
    }

    /// The next line the client writes, within `limit`.
    fn answer(
        &mut self,
        limit: Duration,
        check: &mut dyn FnMut() -> Result<(), ProbeError>,
    ) -> Result<String, ProbeError> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=nl).collect();
                return Ok(String::from_utf8_lossy(&line).trim().to_string());
            }
            check()?;
            if interrupt::requested() {
                return Err(ProbeError::Interrupted);
            }
            if Instant::now() > deadline {
                return Err(self.failure(&format!(
                    "no answer after {limit:?}: the server fell that far behind or stopped"
                )));
            }
            let mut pfd =
                libc::pollfd { fd: self.stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: `pfd` is one valid pollfd for the duration of the call.
            let rc = unsafe { libc::poll(&mut pfd, 1, 100) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    if interrupt::requested() {
                        return Err(ProbeError::Interrupted);
                    }
                    continue;
                }
                return Err(ProbeError::io("poll the echo client", e));
            }
            if rc == 0 {
                continue;
            }
            let mut buf = [0u8; 256];
            match self.stdout.read(&mut buf) {
                Ok(0) => {
                    if interrupt::requested() {
                        return Err(ProbeError::Interrupted);
                    }
                    return Err(self.failure("it exited without answering"));
                }
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ProbeError::io("read from the echo client", e)),
            }
        }
    }

    /// A failure naming what went wrong and the end of the client's standard error; the
    /// client is killed and reaped first, so its standard error is complete.
    fn failure(&mut self, what: &str) -> ProbeError {
        let what = what.strip_prefix("error ").unwrap_or(what);
        self.stop(Duration::ZERO);
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let err = err.trim();
        let mut start = err.len().saturating_sub(400);
        while !err.is_char_boundary(start) {
            start += 1;
        }
        let tail = &err[start..];
        if tail.is_empty() {
            ProbeError::Failed(format!("echo client: {what}"))
        } else {
            ProbeError::Failed(format!("echo client: {what} (its stderr: {tail})"))
        }
    }

    /// Closes the client's input (it quits), waits up to `grace` for it to exit, then
    /// kills it; reaps it either way.
    fn stop(&mut self, grace: Duration) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "quit");
        }
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                _ => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn client_arguments_round_trip_and_bad_ones_are_named() {
        let spec = ClientSpec {
            addr: "127.0.0.1:7000".parse().unwrap(),
            connections: 256,
            threads: 4,
            cpu: Some(1),
        };
        assert_eq!(ClientSpec::parse(&spec.args()[1..]).unwrap(), spec);
        let unpinned = ClientSpec::parse(&args(&["127.0.0.1:1", "2", "4", "-"])).unwrap();
        assert_eq!((unpinned.cpu, unpinned.threads), (None, 2), "threads capped by connections");
        let e = ClientSpec::parse(&args(&["localhost", "2", "4", "-"])).unwrap_err();
        assert!(e.contains("ADDR \"localhost\""), "{e}");
        let e = ClientSpec::parse(&args(&["127.0.0.1:1", "0", "4", "-"])).unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        assert!(ClientSpec::parse(&args(&["127.0.0.1:1"])).unwrap_err().contains("1 arguments"));
    }
}
