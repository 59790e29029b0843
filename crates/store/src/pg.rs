//! A PostgreSQL connection on which nothing waits forever.
//!
//! The driver's own `connect_timeout` covers only the TCP (or Unix socket) connect: a server
//! that accepts the connection and never answers the start-up, or one that stops answering
//! in the middle of a push (a stopped backend, a host cut off behind a firewall that drops
//! packets), would block the command for good. So this module drives `tokio-postgres` on its
//! own single-threaded runtime and puts a deadline on every wait:
//!
//! 1. **Connecting**: one deadline for the socket connect, the TLS handshake, the
//!    authentication and the start-up together: the URL's `connect_timeout`, else
//!    [`CONNECT_TIMEOUT`] (libpq's `connect_timeout` also bounds the whole connection).
//! 2. **Each statement**: the server cancels one that runs longer than its
//!    `statement_timeout`, which is set at start-up to [`STATEMENT_TIMEOUT`] unless the URL
//!    sets it (`options=-c statement_timeout=...`). The client waits for an answer for that
//!    long plus the connect time limit (so a living server's own error arrives first); past
//!    that, the connection is given up: the call and every later one on it fail at once with
//!    [`DbError::Silent`]. A statement timeout of 0 (none) in the URL waits without limit.
//! 3. **Below**: TCP keepalives after 30 s idle (unless the URL sets them) and a TCP user
//!    timeout as long as the client's wait, so the kernel notices a vanished peer too.
//!
//! The connection's task runs on the runtime only while a call waits (a current-thread
//! runtime, as the `postgres` crate's), which is all the protocol needs.

use std::collections::HashMap;
use std::error::Error;
use std::future::Future;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Row, Socket, Statement};

use crate::error::DbError;

/// How long connecting to a PostgreSQL server may take in all (socket, TLS, authentication,
/// start-up), unless the URL says (`?connect_timeout=SECONDS`).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the server lets one statement run, unless the URL sets `statement_timeout` in
/// its `options`. Every statement schedlab sends is short (one result, one run's rows).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// What keepalives wait for after the last packet, unless the URL says (libpq's default is
/// the system's, two hours).
const KEEPALIVES_IDLE: Duration = Duration::from_secs(30);

/// The time limits of one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// For connecting, in all.
    pub(crate) connect: Duration,
    /// For an answer to a statement; `None` waits without limit.
    pub(crate) answer: Option<Duration>,
}

impl Limits {
    /// Sets the URL's unset limits in `config` to ours (connect timeout, statement timeout,
    /// keepalives, TCP user timeout) and returns the limits the client keeps.
    pub(crate) fn apply(config: &mut Config) -> Limits {
        let connect = config.get_connect_timeout().copied().unwrap_or(CONNECT_TIMEOUT);
        config.connect_timeout(connect);
        let options = config.get_options().unwrap_or("").to_string();
        let statement = match statement_timeout(&options) {
            Some(set) => set,
            None => {
                let ours = format!("-c statement_timeout={}", STATEMENT_TIMEOUT.as_millis());
                config.options(&if options.is_empty() {
                    ours
                } else {
                    format!("{options} {ours}")
                });
                Some(STATEMENT_TIMEOUT)
            }
        };
        let answer = statement.map(|s| s + connect);
        if config.get_keepalives() && config.get_keepalives_idle() == Duration::from_secs(7200) {
            config.keepalives_idle(KEEPALIVES_IDLE);
            if config.get_keepalives_interval().is_none() {
                config.keepalives_interval(Duration::from_secs(10));
            }
            if config.get_keepalives_retries().is_none() {
                config.keepalives_retries(3);
            }
        }
        if let (None, Some(answer)) = (config.get_tcp_user_timeout(), answer) {
            config.tcp_user_timeout(answer);
        }
        Limits { connect, answer }
    }
}

/// The `statement_timeout` that start-up `options` set (`-c statement_timeout=V`,
/// `-cstatement_timeout=V` or `--statement_timeout=V`): `Some(None)` for 0 (no limit),
/// `None` when they set none. A value this cannot read counts as ours (the server refuses
/// it at start-up anyway, saying why).
fn statement_timeout(options: &str) -> Option<Option<Duration>> {
    let mut words = options.split_whitespace();
    while let Some(w) = words.next() {
        let setting = match w {
            "-c" => words.next().unwrap_or(""),
            w => w.strip_prefix("-c").or_else(|| w.strip_prefix("--")).unwrap_or(""),
        };
        if let Some(v) = setting.strip_prefix("statement_timeout=") {
            let v = v.trim_matches(['\'', '"']);
            let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
            let n: u64 = v[..split].parse().ok()?;
            let ms = match v[split..].trim() {
                "" | "ms" => n,
                "s" => n * 1000,
                "min" => n * 60_000,
                "h" => n * 3_600_000,
                "d" => n * 86_400_000,
                "us" => n / 1000,
                _ => return None,
            };
            return Some((ms > 0).then(|| Duration::from_millis(ms)));
        }
    }
    None
}

/// The server did not complete the connection in time.
#[derive(Debug)]
pub(crate) struct ConnectTimedOut(pub(crate) Duration);

impl std::fmt::Display for ConnectTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no answer: the connection and its start-up did not complete within {} s \
             (connect_timeout; is it a PostgreSQL server, and is it stopped or overloaded?)",
            self.0.as_secs_f64()
        )
    }
}
impl Error for ConnectTimedOut {}

/// The runtime a connection runs on.
pub(crate) fn runtime() -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// A connection's client and the task that drives its socket.
pub(crate) type Opened = (Client, JoinHandle<()>);

/// Connects with `tls` before `deadline` (socket, TLS, authentication and start-up).
pub(crate) fn connect_with<T>(
    rt: &Runtime,
    config: &Config,
    tls: T,
    deadline: Instant,
    limit: Duration,
) -> Result<Opened, Box<dyn Error + Send + Sync>>
where
    T: MakeTlsConnect<Socket> + 'static + Send,
    T::TlsConnect: Send,
    T::Stream: Send + 'static,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    let at = tokio::time::Instant::from_std(deadline);
    let (client, connection) = rt
        .block_on(async { tokio::time::timeout_at(at, config.connect(tls)).await })
        .map_err(|_| ConnectTimedOut(limit))??;
    let task = rt.spawn(async move {
        // Its error reaches the client as the error of the call that was waiting.
        let _ = connection.await;
    });
    Ok((client, task))
}

/// An open connection.
pub(crate) struct PgConn {
    rt: Runtime,
    client: Option<Client>,
    task: Option<JoinHandle<()>>,
    statements: HashMap<String, Statement>,
    answer: Option<Duration>,
    /// The server did not answer in time: the connection is given up.
    silent: Option<Duration>,
}

impl PgConn {
    pub(crate) fn new(rt: Runtime, (client, task): Opened, limits: Limits) -> PgConn {
        PgConn {
            rt,
            client: Some(client),
            task: Some(task),
            statements: HashMap::new(),
            answer: limits.answer,
            silent: None,
        }
    }

    /// Waits for `f`'s answer, within the limit.
    fn wait<T>(
        rt: &Runtime,
        answer: Option<Duration>,
        silent: &mut Option<Duration>,
        f: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, DbError> {
        if let Some(waited) = *silent {
            return Err(DbError::Silent(waited));
        }
        match answer {
            None => rt.block_on(f).map_err(DbError::Pg),
            Some(limit) => match rt.block_on(async { tokio::time::timeout(limit, f).await }) {
                Ok(r) => r.map_err(DbError::Pg),
                Err(_) => {
                    *silent = Some(limit);
                    Err(DbError::Silent(limit))
                }
            },
        }
    }

    /// The prepared statement of `sql` (prepared once per connection).
    pub(crate) fn statement(&mut self, sql: &str) -> Result<Statement, DbError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let client = self.client.as_ref().expect("the client lives until drop");
        let s = Self::wait(&self.rt, self.answer, &mut self.silent, client.prepare(sql))?;
        self.statements.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    pub(crate) fn execute(
        &mut self,
        stmt: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, DbError> {
        let client = self.client.as_ref().expect("the client lives until drop");
        Self::wait(&self.rt, self.answer, &mut self.silent, client.execute(stmt, params))
    }

    pub(crate) fn query(
        &mut self,
        stmt: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, DbError> {
        let client = self.client.as_ref().expect("the client lives until drop");
        Self::wait(&self.rt, self.answer, &mut self.silent, client.query(stmt, params))
    }

    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        let client = self.client.as_ref().expect("the client lives until drop");
        Self::wait(&self.rt, self.answer, &mut self.silent, client.batch_execute(sql))
    }
}

impl Drop for PgConn {
    fn drop(&mut self) {
        // Without its client, the connection's task says goodbye to the server (a Terminate
        // message) and ends; give it a moment to, unless the server stopped answering.
        drop(self.client.take());
        if let (None, Some(task)) = (self.silent, self.task.take()) {
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(1), task).await });
        }
    }
}
