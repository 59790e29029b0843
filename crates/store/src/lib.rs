//! schedlab-store: the results database.
//!
//! Runs, their results, every raw sample, the noise warnings and the timelines live in one
//! database: an SQLite file (embedded through rusqlite's `bundled` feature: no system library
//! needed), or a PostgreSQL server that a fleet of machines shares (`postgres://...`, through
//! `tokio-postgres`, every wait under a deadline: the `pg` module; a password from the URL,
//! `PGPASSWORD` or `~/.pgpass`: the `passfile` module). Both hold the same schema, written
//! once in two dialects (the `schema` module) and versioned the same way: an SQLite file in
//! `PRAGMA user_version` and `PRAGMA application_id`, a server in the table `schedlab_meta`.
//! A database that is not a schedlab database, or one written by a newer schedlab, is
//! refused with a clear error and never modified. The schema is documented in docs/DATABASE.md.
//!
//! Every run has a UUID and the machine that made it a fingerprint id, so runs copied
//! between databases ([`Store::copy_run`]: `push`, `pull`, `import`) never collide and the
//! same run is never stored twice.
//!
//! Each result is committed in its own transaction the moment it is measured: Ctrl-C, a
//! crash or a storage failure loses nothing already measured. A run left `running` by a
//! process that no longer exists (told by its pid, start time and boot id, so a reused pid
//! is not mistaken for it: `schedlab_measure::owner`) reads as `interrupted` at once, is
//! copied as such, and is marked so the next time the database is opened for writing on
//! that machine, with the reason its process left (see [`note_end_reason`]) or
//! [`ENDED_UNFINISHED`]. SQLite files use write-ahead logging with a busy
//! timeout, so readers never block a run and a run waits for a writer rather than failing.
//!
//! ```
//! use schedlab_store::Store;
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(&dir.path().join("results.db")).unwrap();
//! assert!(store.runs().unwrap().is_empty());
//! ```
#![deny(missing_docs)]

mod db;
mod door;
mod passfile;
mod pg;
mod schema;
mod tls;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use db::{insert_many, Conn, DbError, Row, V};
use rusqlite::{Connection, OpenFlags};
use schedlab_measure::clock::Calibration;
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{
    Better, Measurement, Outcome, Params, Run, RunMeta, RunStatus, Sample, Severity, Unit, Warning,
};
use schedlab_measure::noise::Noise;
use schedlab_measure::owner::Owner;
use schedlab_measure::stats::Summary;
use schedlab_measure::text::escape_prose;

pub use schema::{APPLICATION_ID, SCHEMA_VERSION};

/// The reason given to a run whose process ended without marking it (SIGKILL, a crash, power
/// loss) and without leaving a note of why.
pub const ENDED_UNFINISHED: &str = "the process ended without finishing (killed or crashed)";

/// How long an SQLite write waits for another process's write to finish before it fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub use pg::{CONNECT_TIMEOUT, STATEMENT_TIMEOUT};

/// What can go wrong with the database; every message names the file (or the server's URL,
/// without its password).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// There is no database at the path (for commands that only read).
    #[error(
        "no results database at {0}; run `schedlab run` first, or point --db / SCHEDLAB_DB at one"
    )]
    Missing(PathBuf),
    /// The file exists but is not a schedlab database; it was not touched.
    #[error("{0} is not a schedlab database ({1}); it was left untouched. Use --db to choose another file")]
    NotOurs(PathBuf, String),
    /// Written by a newer schedlab; it was not touched.
    #[error("{path} was written by a newer schedlab (schema version {found}, this build knows up to {known}); it was left untouched. Upgrade schedlab or use another --db")]
    TooNew {
        /// The database file or URL.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// Ours.
        known: i64,
    },
    /// The database cannot be created, opened or connected to.
    #[error("cannot open database {}{hint}", path.display())]
    Open {
        /// The database file or URL.
        path: PathBuf,
        /// What to check, with its leading separator, or empty.
        hint: &'static str,
        /// What the operating system, SQLite or the server said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// SQLite reported an error while reading or writing.
    #[error("database {}{hint}", path.display())]
    Sql {
        /// The database file.
        path: PathBuf,
        /// What it means and what to do, with its leading separator, or empty.
        hint: &'static str,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The PostgreSQL server stopped answering: nothing came back for a statement within
    /// the time it may take plus the connect time limit. The connection was given up.
    #[error("database {}: the server did not answer within {} s (is it stopped, overloaded or cut off?); nothing of the transaction in progress was committed", path.display(), waited.as_secs_f64())]
    NoAnswer {
        /// The server's URL, without its password.
        path: PathBuf,
        /// How long the client waited.
        waited: Duration,
    },
    /// The PostgreSQL server reported an error, or the connection to it failed.
    #[error("database {}{hint}", path.display())]
    Server {
        /// The server's URL, without its password.
        path: PathBuf,
        /// What it means and what to do, with its leading separator, or empty.
        hint: &'static str,
        /// What the server or the connection said.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A row that must be unique exists already (a second result for the same probe and
    /// parameters in a run, say); nothing was written.
    #[error("database {path}: {1}; nothing was written", path = .0.display())]
    Duplicate(PathBuf, String),
    /// A stored value cannot be read back (a column edited by hand).
    #[error("database {path}: {1}", path = .0.display())]
    Unreadable(PathBuf, String),
    /// The database says an older schema version than its tables are (its version was
    /// changed by hand, or a migration was interrupted outside schedlab); nothing was changed.
    #[error("{path} says schema version {version}, but its tables do not match that version ({detail}); it was left untouched. Was its user_version changed by hand? Use --db to choose another file, or restore the file")]
    Inconsistent {
        /// The database file or URL.
        path: PathBuf,
        /// The version it claims.
        version: i64,
        /// What the database said when the migration from that version was tried.
        detail: String,
    },
    /// A RUN argument matched nothing.
    #[error("no run matches {0:?} in {1}; `schedlab runs` lists them (RUN is an id, a label, a UUID or `latest`)")]
    NoSuchRun(String, PathBuf),
}

impl StoreError {
    fn open(
        path: &Path,
        hint: &'static str,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Open { path: path.into(), hint, source: Box::new(e) }
    }

    /// Whether the error came from the storage itself failing (disk full, I/O error, a lock
    /// held too long, a lost server) rather than from what was asked of it.
    pub fn is_storage_failure(&self) -> bool {
        use rusqlite::ErrorCode as C;
        match self {
            StoreError::Sql { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(C::DiskFull | C::SystemIoFailure | C::DatabaseBusy | C::DatabaseLocked)
            ),
            StoreError::Server { source, .. } => source.as_db_error().is_none(),
            StoreError::NoAnswer { .. } => true,
            _ => false,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, StoreError>;

/// Where a database is: an SQLite file or a PostgreSQL server. Its `Debug` and `Display`
/// hide a server's password.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file.
    File(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user:password@host:port/dbname?options`,
    /// or `postgresql://`).
    Server(String),
}

impl Location {
    /// `postgres://...` and `postgresql://...` are servers; anything else is a file path.
    pub fn parse(s: &OsStr) -> Location {
        match s.to_str() {
            Some(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
                Location::Server(u.to_string())
            }
            _ => Location::File(PathBuf::from(s)),
        }
    }

    /// How messages name it: the path, or the URL without its password.
    pub fn shown(&self) -> PathBuf {
        match self {
            Location::File(p) => p.clone(),
            Location::Server(u) => PathBuf::from(redact(u)),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(p) => f.debug_tuple("File").field(p).finish(),
            Location::Server(u) => f.debug_tuple("Server").field(&redact(u)).finish(),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.shown().display())
    }
}

/// A connection URL with its password (in the user part or as a `password=` option)
/// replaced by `***`, so that no message or log line ever carries it.
///
/// The URL is split as the driver (`tokio-postgres`) splits it, not as RFC 3986 would: the
/// credentials run to the first `@` after the scheme, whatever comes before it (a password
/// may hold `/`, `?`, `#` and `:` unencoded), the password is what follows the first `:`
/// in them, and option names are percent-decoded (`pass%77ord=`). Where what follows that
/// `@` up to the path or options holds another `@` (a password with an unencoded `@`, which
/// the driver cannot use), everything up to the last of them is taken as credentials too:
/// more is hidden, never less.
pub fn redact(url: &str) -> String {
    let Some(scheme) = ["postgres://", "postgresql://"].into_iter().find(|p| url.starts_with(p))
    else {
        return url.to_string();
    };
    let mut out = scheme.to_string();
    let mut rest = &url[scheme.len()..];
    if let Some(first_at) = rest.find('@') {
        let after = &rest[first_at + 1..];
        let host_end = after.find(['/', '?']).unwrap_or(after.len());
        let at = after[..host_end].rfind('@').map_or(first_at, |i| first_at + 1 + i);
        let creds = &rest[..at];
        match creds.split_once(':') {
            Some((user, _)) => {
                out.push_str(user);
                out.push_str(":***");
            }
            None => out.push_str(creds),
        }
        out.push('@');
        rest = &rest[at + 1..];
    }
    match rest.split_once('?') {
        Some((base, query)) => {
            out.push_str(base);
            out.push('?');
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if tls::percent_decode(k) == "password" => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            out.push_str(&query.join("&"));
        }
        None => out.push_str(rest),
    }
    out
}

/// A machine's fingerprint id: a UUID (version 5) of its host name, architecture, CPU model
/// and logical CPU count, so the same machine gets the same id in every run and every
/// database, and two machines that share a host name (two cloud instances called `ubuntu`)
/// but not their hardware do not.
pub fn machine_id(m: &Machine) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x5343_484c_6d61_6368_696e_6520_6964_0001);
    let key = format!("{}\n{}\n{}\n{}", m.host, m.arch, m.cpu_model, m.logical_cpus);
    uuid::Uuid::new_v5(&NAMESPACE, key.as_bytes()).to_string()
}

/// An open results database.
#[derive(Debug)]
pub struct Store {
    conn: RefCell<Conn>,
    path: PathBuf,
}

/// A scenario's raw timeline as stored (schema version 2): the store keeps the JSON opaque,
/// `schedlab-trace` defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTimeline {
    /// The scenario (`3 two-equal`).
    pub scenario: String,
    /// The recorder that made it: `sampling`, `kernel`, `rt`.
    pub recorder: String,
    /// The recorded window, ns.
    pub window_ns: u64,
    /// The timeline as JSON.
    pub data: String,
}

/// One line of `schedlab runs`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// Run id (in this database).
    pub id: i64,
    /// The run's UUID (the same in every database it is copied to).
    pub uuid: String,
    /// Label, if any.
    pub label: Option<String>,
    /// Suite name.
    pub suite: String,
    /// Status.
    pub status: RunStatus,
    /// Why it was interrupted, when it was and the reason is known.
    pub reason: Option<String>,
    /// Start time (RFC 3339).
    pub started_at: String,
    /// Host name.
    pub host: String,
    /// The machine's fingerprint id ([`machine_id`]).
    pub machine_id: String,
    /// Kernel release.
    pub kernel: String,
    /// Results measured (`ok`).
    pub ok: i64,
    /// Results skipped.
    pub skipped: i64,
    /// Results failed or interrupted.
    pub failed: i64,
}

/// What [`Store::copy_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Copied {
    /// The run was not there; it is now, whole.
    Copied,
    /// The same run (same UUID, status and results) was there already; nothing was written.
    AlreadyThere,
    /// An older state of the run (interrupted, or fewer results) was there; it was replaced.
    Replaced,
    /// A newer state of the run (complete where this one is interrupted, or more results),
    /// or one still being measured there, was there; it was kept and nothing was written.
    NewerThere,
    /// The run is still being measured; it was not copied (copy it once it has finished).
    StillRunning,
    /// The run holds text that could drive a terminal or forge a table row (an escape
    /// sequence, a line break in a one-line field, a bidirectional override, a label that
    /// shows nothing); it was not copied. Says which field and what it holds:
    /// `label: U+001B (escape)`, `result 3 (os.x) notes.cpus: U+000A (line feed)`.
    Refused(String),
}

/// Checks that `path` holds an SQLite file before SQLite sees it, so a foreign file is never
/// opened (and so never journaled or rewritten) by us.
fn check_header(path: &Path) -> Result<()> {
    let mut f = fs::File::open(path).map_err(|e| StoreError::open(path, "", e))?;
    let mut head = [0u8; 16];
    let n = f.read(&mut head).map_err(|e| StoreError::open(path, "", e))?;
    if n == 0 {
        return Ok(()); // an empty file is a new database to SQLite
    }
    if n < 16 || &head != b"SQLite format 3\0" {
        return Err(StoreError::NotOurs(path.into(), "not an SQLite file".into()));
    }
    Ok(())
}

/// The columns of `runs` that travel with a run from one database to another (all but `id`).
const RUN_COLS: &[&str] = &[
    "label",
    "suite",
    "status",
    "started_at",
    "finished_at",
    "host",
    "os",
    "kernel",
    "cpu_model",
    "logical_cpus",
    "version",
    "git_rev",
    "pid",
    "filters",
    "settings",
    "calibration",
    "machine",
    "uuid",
    "machine_id",
    "reason",
];

/// The columns of `results` that travel (all but `id` and `run_id`).
const RESULT_COLS: &[&str] = &[
    "seq",
    "probe",
    "params",
    "params_json",
    "unit",
    "better",
    "status",
    "reason",
    "notes",
    "iters_per_sample",
    "overhead_ns_per_iter",
    "n",
    "median",
    "min",
    "max",
    "mean",
    "stddev",
    "p5",
    "p95",
    "ci_low",
    "ci_high",
    "ci_level",
    "cv",
    "outliers",
    "window_ns",
    "other_cpu_ns",
    "steal_ns",
    "wall_s",
    "measured_at",
];

const SAMPLE_COLS: &[&str] =
    &["result_id", "idx", "iters", "elapsed_ns", "value", "other_cpu_ns", "migrated"];
const WARNING_COLS: &[&str] = &["run_id", "kind", "probe", "severity", "message", "advice"];
const TIMELINE_COLS: &[&str] = &["run_id", "scenario", "recorder", "window_ns", "data"];

fn placeholders(from: usize, n: usize) -> String {
    (from..from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

impl Store {
    /// Opens the SQLite database at `path` for writing, creating it (and its directory) if
    /// needed and migrating an older schema forward.
    ///
    /// # Errors
    /// See [`StoreError`]: foreign, newer, unreadable or unwritable files are refused.
    pub fn open(path: &Path) -> Result<Store> {
        if path.exists() {
            check_header(path)?;
        } else if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|e| StoreError::open(path, " (cannot create its directory)", e))?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| sql_error(path, e))?;
        let store = Store { conn: RefCell::new(Conn::Sqlite(conn)), path: path.into() };
        store.check_and_migrate(true)?;
        store.mark_abandoned()?;
        Ok(store)
    }

    /// Opens an existing SQLite database for reading only (`runs`, `show`, `export`,
    /// `compare`).
    ///
    /// # Errors
    /// [`StoreError::Missing`] when there is no file; otherwise as [`Store::open`].
    pub fn open_existing(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(StoreError::Missing(path.into()));
        }
        check_header(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_error(path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| sql_error(path, e))?;
        let store = Store { conn: RefCell::new(Conn::Sqlite(conn)), path: path.into() };
        let version = store.check_and_migrate(false)?;
        if version < SCHEMA_VERSION {
            // An older schema needs a migration, which needs write access: reopen that way.
            drop(store);
            return Store::open(path);
        }
        Ok(store)
    }

    /// Opens the database at `at` for writing (created and migrated as needed).
    ///
    /// # Errors
    /// As [`Store::open`]; for a server also when it cannot be reached or refuses the user.
    pub fn open_at(at: &Location) -> Result<Store> {
        match at {
            Location::File(p) => Store::open(p),
            Location::Server(url) => Store::connect(url, true),
        }
    }

    /// Opens the existing database at `at` for reading.
    ///
    /// # Errors
    /// As [`Store::open_existing`]; a server without a schedlab schema is
    /// [`StoreError::Missing`].
    pub fn open_existing_at(at: &Location) -> Result<Store> {
        match at {
            Location::File(p) => Store::open_existing(p),
            Location::Server(url) => Store::connect(url, false),
        }
    }

    fn connect(url: &str, write: bool) -> Result<Store> {
        let shown = PathBuf::from(redact(url));
        let (url, tls) = tls::split_options(url).map_err(|e| StoreError::open(&shown, "", e))?;
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::open(
                &shown,
                " (not a PostgreSQL URL: postgres://user[:password]@host[:port]/dbname[?options])",
                e,
            )
        })?;
        let limits = pg::Limits::apply(&mut config);
        let password_note = passfile::supply(&mut config);
        let rt = pg::runtime().map_err(|e| StoreError::open(&shown, "", e))?;
        let deadline = std::time::Instant::now() + limits.connect;
        let opened = tls::connect(&rt, &mut config, &tls, deadline, limits.connect).map_err(|e| {
            StoreError::Open {
                path: shown.clone(),
                hint: " (is the server running, and are the user, password, host, database and sslmode in the URL right?)",
                source: passfile::explain(e, password_note.as_deref()),
            }
        })?;
        let client = pg::PgConn::new(rt, opened, limits);
        let store = Store { conn: RefCell::new(Conn::Pg(Box::new(client))), path: shown };
        if !write {
            let (_, version, tables) = store.db(schema::identify(&mut store.conn.borrow_mut()))?;
            if version == 0 && tables == 0 {
                return Err(StoreError::Missing(store.path));
            }
        }
        store.check_and_migrate(true)?;
        if write {
            store.mark_abandoned()?;
        }
        Ok(store)
    }

    /// The file this store lives in, or the server's URL without its password.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this store is a PostgreSQL server.
    pub fn is_server(&self) -> bool {
        self.conn.borrow().is_pg()
    }

    /// How long an SQLite write waits for another writer ([`BUSY_TIMEOUT`] unless set here).
    pub fn set_busy_timeout(&self, t: Duration) -> Result<()> {
        if let Conn::Sqlite(c) = &*self.conn.borrow() {
            c.busy_timeout(t).map_err(|e| sql_error(&self.path, e))?;
        }
        Ok(())
    }

    fn db<T>(&self, r: std::result::Result<T, DbError>) -> Result<T> {
        r.map_err(|e| db_error(&self.path, e))
    }

    fn query(&self, sql: &str, params: &[V]) -> Result<Vec<Row>> {
        let r = self.conn.borrow_mut().query(sql, params);
        self.db(r)
    }

    fn row(&self, sql: &str, params: &[V]) -> Result<Option<Row>> {
        let r = self.conn.borrow_mut().row(sql, params);
        self.db(r)
    }

    fn exec(&self, sql: &str, params: &[V]) -> Result<u64> {
        let r = self.conn.borrow_mut().exec(sql, params);
        self.db(r)
    }

    fn tx<T>(&self, f: impl FnOnce(&mut Conn) -> std::result::Result<T, DbError>) -> Result<T> {
        let r = self.conn.borrow_mut().tx(f);
        self.db(r)
    }

    /// Validates identity and version; creates or migrates when `write`. Returns the version
    /// found before any migration.
    fn check_and_migrate(&self, write: bool) -> Result<i64> {
        let (app, version, tables) = self.db(schema::identify(&mut self.conn.borrow_mut()))?;
        let fresh = app == 0 && version == 0 && tables == 0;
        let server = self.is_server();
        if !fresh && app != APPLICATION_ID {
            return Err(StoreError::NotOurs(
                self.path.clone(),
                if server {
                    format!("a PostgreSQL database of another application ({tables} tables, no schedlab_meta)")
                } else {
                    format!("an SQLite database of another application (application_id {app:#x}, {tables} tables)")
                },
            ));
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if write {
            if !server {
                self.set_busy_timeout(BUSY_TIMEOUT)?;
                self.switch_to_wal()?;
                self.exec("PRAGMA foreign_keys = ON", &[])?;
            }
            if version < SCHEMA_VERSION {
                // A migration step runs in one transaction: when it fails, it is rolled back,
                // so the database is left as it was.
                let r = schema::migrate(&mut self.conn.borrow_mut(), version);
                r.map_err(|e| {
                    if fresh {
                        db_error(&self.path, e)
                    } else {
                        StoreError::Inconsistent {
                            path: self.path.clone(),
                            version,
                            detail: in_words(&e),
                        }
                    }
                })?;
            }
        }
        Ok(version)
    }

    /// Puts an SQLite file in write-ahead-log mode: readers never block the run's writes (nor
    /// it them), and a crash loses no committed transaction. The switch needs the file to
    /// itself, and SQLite reports "locked" at once, without its busy handler, when another
    /// connection is reading or switching it at that moment (several processes opening a
    /// new file together): the switch is tried again until [`BUSY_TIMEOUT`] has passed, as
    /// any other write waits. A file system that cannot do WAL leaves the file in the mode
    /// SQLite keeps, as before.
    fn switch_to_wal(&self) -> Result<()> {
        use rusqlite::ErrorCode as C;
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            let r = self.conn.borrow_mut().row("PRAGMA journal_mode = WAL", &[]);
            match r {
                Err(DbError::Sqlite(e))
                    if matches!(
                        e.sqlite_error_code(),
                        Some(C::DatabaseBusy | C::DatabaseLocked)
                    ) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                r => return self.db(r).map(drop),
            }
        }
    }

    /// Marks runs left `running` by a process of this machine that no longer exists as
    /// interrupted (the process crashed or was killed with SIGKILL), with the reason it left
    /// in a note, if any, else [`ENDED_UNFINISHED`].
    fn mark_abandoned(&self) -> Result<()> {
        let rows = self.query(
            "SELECT id, pid, pid_start, boot_id, machine_id FROM runs WHERE status = 'running'",
            &[],
        )?;
        for row in rows {
            let Some((reason, note)) = abandoned(&row[1..]) else { continue };
            self.exec(
                "UPDATE runs SET status = 'interrupted', finished_at = coalesce(finished_at, $1),
                    reason = coalesce(reason, $2) WHERE id = $3 AND status = 'running'",
                &[schedlab_measure::machine::now_rfc3339().into(), reason.into(), row[0].clone()],
            )?;
            if let Some(note) = note {
                let _ = fs::remove_file(note);
            }
        }
        Ok(())
    }

    /// Stores a new run in state `running` and returns its id. It gets a new UUID and its
    /// machine's fingerprint id, and names this process (pid, start time, boot id) so a later
    /// command can tell whether it still runs.
    pub fn begin_run(&self, meta: &RunMeta) -> Result<i64> {
        let m = &meta.machine;
        let me = Owner::current();
        let row = self.row(
            "INSERT INTO runs (label, suite, status, started_at, host, os, kernel, cpu_model, logical_cpus,
                               version, git_rev, pid, filters, settings, calibration, machine, uuid, machine_id,
                               pid_start, boot_id)
             VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
             RETURNING id",
            &[
                meta.label.clone().into(),
                meta.suite.clone().into(),
                meta.started_at.clone().into(),
                m.host.clone().into(),
                m.os.clone().into(),
                m.kernel.clone().into(),
                m.cpu_model.clone().into(),
                (m.logical_cpus as i64).into(),
                meta.version.clone().into(),
                meta.git_rev.clone().into(),
                (me.pid as i64).into(),
                json(&meta.filters).into(),
                json(&params_object(&meta.settings)).into(),
                meta.calibration.as_ref().map(json).into(),
                json(m).into(),
                uuid::Uuid::new_v4().to_string().into(),
                machine_id(m).into(),
                (me.start as i64).into(),
                me.boot_id.into(),
            ],
        )?;
        Ok(row.map_or(0, |r| r[0].i()))
    }

    /// Stores one measurement with its samples, in one transaction (committed on return).
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] when the run has a result for the same probe and parameters.
    pub fn save_result(&mut self, run: i64, m: &Measurement) -> Result<()> {
        let now = schedlab_measure::machine::now_rfc3339();
        let s = m.summary.as_ref();
        let values: Vec<V> = vec![
            run.into(),
            m.probe.clone().into(),
            m.params.key().into(),
            json(&params_object(&m.params)).into(),
            m.unit.key().into(),
            m.better.key().into(),
            m.outcome.key().into(),
            // A reason may quote a tool's output: stored without what could drive a
            // terminal, so the run passes the door of `push` (`door`) like any other.
            m.outcome.reason().map(|r| escape_prose(r).into_owned()).into(),
            json(&params_object(&m.notes)).into(),
            (m.iters_per_sample as i64).into(),
            m.overhead_ns_per_iter.into(),
            s.map(|s| s.n as i64).into(),
            s.map(|s| s.median).into(),
            s.map(|s| s.min).into(),
            s.map(|s| s.max).into(),
            s.map(|s| s.mean).into(),
            s.map(|s| s.stddev).into(),
            s.map(|s| s.p5).into(),
            s.map(|s| s.p95).into(),
            s.map(|s| s.ci_low).into(),
            s.map(|s| s.ci_high).into(),
            s.map(|s| s.ci_level).into(),
            s.map(|s| s.cv).into(),
            s.map(|s| s.outliers as i64).into(),
            m.noise.map(|n| n.window_ns as i64).into(),
            m.noise.map(|n| n.other_cpu_ns).into(),
            m.noise.map(|n| n.steal_ns).into(),
            m.wall_s.into(),
            now.into(),
        ];
        self.tx(|c| {
            let sql = format!(
                "INSERT INTO results (run_id, {}) VALUES ($1, (SELECT count(*) FROM results WHERE run_id = $1), {})
                 ON CONFLICT (run_id, probe, params) DO NOTHING RETURNING id",
                RESULT_COLS.join(", "),
                placeholders(2, RESULT_COLS.len() - 1)
            );
            let Some(row) = c.row(&sql, &values)? else {
                return Err(DbError::Conflict(format!(
                    "run {run} already has a result for {} [{}]",
                    m.probe, m.params
                )));
            };
            let result_id = row[0].i();
            let rows: Vec<Row> = m
                .samples
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    vec![
                        result_id.into(),
                        (i as i64).into(),
                        (x.iters as i64).into(),
                        (x.elapsed_ns as i64).into(),
                        x.value.into(),
                        x.other_cpu_ns.into(),
                        x.migrated.into(),
                    ]
                })
                .collect();
            insert_many(c, "samples", SAMPLE_COLS, &rows)
        })
    }

    /// Stores warnings for a run.
    pub fn save_warnings(&mut self, run: i64, warnings: &[Warning]) -> Result<()> {
        let rows: Vec<Row> = warnings
            .iter()
            .map(|w| {
                let sev = match w.severity {
                    Severity::Info => "info",
                    Severity::Warn => "warn",
                };
                vec![
                    run.into(),
                    w.kind.clone().into(),
                    w.probe.clone().into(),
                    sev.into(),
                    escape_prose(&w.message).into_owned().into(),
                    escape_prose(&w.advice).into_owned().into(),
                ]
            })
            .collect();
        self.tx(|c| insert_many(c, "warnings", WARNING_COLS, &rows))
    }

    /// Stores a scenario's raw timeline (`data`: the timeline as JSON) with its run.
    /// Returns the timeline's id.
    pub fn save_timeline(&self, run: i64, t: &StoredTimeline) -> Result<i64> {
        let row = self.row(
            "INSERT INTO timelines (run_id, scenario, recorder, window_ns, data) VALUES ($1, $2, $3, $4, $5)
             RETURNING id",
            &[
                run.into(),
                t.scenario.clone().into(),
                t.recorder.clone().into(),
                (t.window_ns as i64).into(),
                t.data.clone().into(),
            ],
        )?;
        Ok(row.map_or(0, |r| r[0].i()))
    }

    /// The timelines stored with a run, in the order they were stored.
    pub fn timelines(&self, run: i64) -> Result<Vec<StoredTimeline>> {
        Ok(self
            .query(
                "SELECT scenario, recorder, window_ns, data FROM timelines WHERE run_id = $1 ORDER BY id",
                &[run.into()],
            )?
            .into_iter()
            .map(|r| StoredTimeline {
                scenario: r[0].t(),
                recorder: r[1].t(),
                window_ns: r[2].i() as u64,
                data: r[3].t(),
            })
            .collect())
    }

    /// Sets a run's final status and end time.
    pub fn finish_run(&self, run: i64, status: RunStatus) -> Result<()> {
        self.exec(
            "UPDATE runs SET status = $1, finished_at = $2 WHERE id = $3",
            &[status.key().into(), schedlab_measure::machine::now_rfc3339().into(), run.into()],
        )?;
        Ok(())
    }

    /// Marks a running run of this process interrupted, saying why (a storage failure, a
    /// signal...). Everything already committed for it stays; a run that has finished
    /// meanwhile keeps its status. When the database cannot be written (the very failure
    /// that stopped the run: the disk full, the lock still held), the reason is left in a
    /// note ([`note_end_reason`]) for the next command, and the error returned.
    pub fn interrupt_run(&self, run: i64, reason: &str) -> Result<()> {
        let r = self.exec(
            "UPDATE runs SET status = 'interrupted', finished_at = $1, reason = $2
             WHERE id = $3 AND status = 'running'",
            &[schedlab_measure::machine::now_rfc3339().into(), reason.into(), run.into()],
        );
        if r.is_err() {
            let _ = note_end_reason(reason);
        }
        r.map(drop)
    }

    /// All runs, oldest first.
    pub fn runs(&self) -> Result<Vec<RunSummary>> {
        let rows = self.query(
            "SELECT r.id, r.uuid, r.label, r.suite, r.status, r.reason, r.started_at, r.host,
                    r.machine_id, r.kernel,
                    (SELECT count(*) FROM results x WHERE x.run_id = r.id AND x.status = 'ok'),
                    (SELECT count(*) FROM results x WHERE x.run_id = r.id AND x.status = 'skipped'),
                    (SELECT count(*) FROM results x WHERE x.run_id = r.id AND x.status IN ('failed', 'interrupted')),
                    r.pid, r.pid_start, r.boot_id, r.machine_id
             FROM runs r ORDER BY r.id",
            &[],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let (status, reason) = settled(r[4].t(), r[5].ot(), &r[13..]);
                RunSummary {
                    id: r[0].i(),
                    uuid: r[1].t(),
                    label: r[2].ot(),
                    suite: r[3].t(),
                    status,
                    reason,
                    started_at: r[6].t(),
                    host: r[7].t(),
                    machine_id: r[8].t(),
                    kernel: r[9].t(),
                    ok: r[10].i(),
                    skipped: r[11].i(),
                    failed: r[12].i(),
                }
            })
            .collect())
    }

    /// Resolves a RUN argument: a numeric id, `latest`, `latest~N` (N runs before the latest),
    /// a UUID (or its first 8 or more characters) or a label (the most recent run with it).
    /// `latest` counts measured runs only: the published tables imported as runs (suite
    /// `published`, `schedlab reference import`) are named by their labels.
    ///
    /// # Errors
    /// [`StoreError::NoSuchRun`] when nothing matches.
    pub fn resolve(&self, spec: &str) -> Result<i64> {
        let none = || StoreError::NoSuchRun(spec.to_string(), self.path.clone());
        let first = |rows: Vec<Row>| rows.first().map(|r| r[0].i());
        let mut found: Option<i64> = if spec == "latest" || spec.starts_with("latest~") {
            let back: i64 =
                spec.strip_prefix("latest~").map_or(Ok(0), |n| n.parse()).map_err(|_| none())?;
            first(self.query(
                "SELECT id FROM runs WHERE suite <> 'published' ORDER BY id DESC LIMIT 1 OFFSET $1",
                &[back.into()],
            )?)
        } else if let Ok(id) = spec.parse::<i64>() {
            first(self.query("SELECT id FROM runs WHERE id = $1", &[id.into()])?)
        } else {
            None
        };
        if found.is_none()
            && spec.len() >= 8
            && spec.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        {
            let rows = self.query(
                "SELECT id FROM runs WHERE uuid LIKE $1 LIMIT 2",
                &[format!("{}%", spec.to_ascii_lowercase()).into()],
            )?;
            if rows.len() == 1 {
                found = first(rows);
            }
        }
        if found.is_none() {
            found = first(self.query(
                "SELECT id FROM runs WHERE label = $1 ORDER BY id DESC LIMIT 1",
                &[spec.into()],
            )?);
        }
        found.ok_or_else(none)
    }

    /// A run's UUID and its machine's fingerprint id.
    pub fn identity(&self, id: i64) -> Result<(String, String)> {
        let row = self.row("SELECT uuid, machine_id FROM runs WHERE id = $1", &[id.into()])?;
        let row = row.ok_or_else(|| StoreError::NoSuchRun(id.to_string(), self.path.clone()))?;
        Ok((row[0].t(), row[1].t()))
    }

    /// Loads a run with its results, samples and warnings.
    pub fn load_run(&self, id: i64) -> Result<Run> {
        let row = self
            .row(
                "SELECT id, label, suite, status, started_at, finished_at, filters, version, git_rev,
                    settings, calibration, machine, reason, pid, pid_start, boot_id, machine_id
                 FROM runs WHERE id = $1",
                &[id.into()],
            )?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string(), self.path.clone()))?;
        let machine = serde_json::from_str(&row[11].t()).map_err(|e| {
            StoreError::Unreadable(
                self.path.clone(),
                format!("run {id}'s machine fingerprint is not the JSON schedlab wrote ({e})"),
            )
        })?;
        let (status, reason) = settled(row[3].t(), row[12].ot(), &row[13..]);
        let meta = RunMeta {
            id: row[0].i(),
            label: row[1].ot(),
            suite: row[2].t(),
            status,
            started_at: row[4].t(),
            finished_at: row[5].ot(),
            reason,
            filters: serde_json::from_str(&row[6].t()).unwrap_or_default(),
            version: row[7].t(),
            git_rev: row[8].t(),
            settings: params_from_json(&row[9].t()),
            calibration: row[10].ot().and_then(|c| serde_json::from_str::<Calibration>(&c).ok()),
            machine,
        };
        let rows = self.query(
            "SELECT id, probe, params, unit, better, status, reason, notes, iters_per_sample,
                    overhead_ns_per_iter, n, median, min, max, mean, stddev, p5, p95, ci_low, ci_high,
                    ci_level, cv, outliers, wall_s, window_ns, other_cpu_ns, steal_ns
             FROM results WHERE run_id = $1 ORDER BY seq",
            &[id.into()],
        )?;
        let mut index = HashMap::new();
        let mut results = Vec::with_capacity(rows.len());
        for r in rows {
            let unit = Unit::from_key(&r[3].t()).unwrap_or(Unit::Nanos);
            let better = match r[4].t().as_str() {
                "higher" => Better::Higher,
                _ => Better::Lower,
            };
            let reason = r[6].ot();
            let outcome = match r[5].t().as_str() {
                "ok" => Outcome::Ok,
                "skipped" => Outcome::Skipped(reason.unwrap_or_default()),
                "interrupted" => Outcome::Interrupted,
                _ => Outcome::Failed(reason.unwrap_or_default()),
            };
            let summary = r[10].oi().map(|n| Summary {
                n: n as usize,
                median: r[11].f(),
                min: r[12].f(),
                max: r[13].f(),
                mean: r[14].f(),
                stddev: r[15].f(),
                p5: r[16].f(),
                p95: r[17].f(),
                ci_low: r[18].f(),
                ci_high: r[19].f(),
                ci_level: r[20].f(),
                cv: r[21].f(),
                outliers: r[22].i() as usize,
            });
            index.insert(r[0].i(), results.len());
            results.push(Measurement {
                probe: r[1].t(),
                params: Params::from_key(&r[2].t()),
                unit,
                better,
                outcome,
                notes: params_from_json(&r[7].t()),
                iters_per_sample: r[8].i() as u64,
                overhead_ns_per_iter: r[9].f(),
                samples: Vec::new(),
                summary,
                noise: r[24].oi().map(|window| Noise {
                    window_ns: window as u64,
                    other_cpu_ns: r[25].oi().unwrap_or(0),
                    steal_ns: r[26].oi().unwrap_or(0),
                }),
                wall_s: r[23].f(),
            });
        }
        for s in self.query(
            "SELECT s.result_id, s.iters, s.elapsed_ns, s.value, s.other_cpu_ns, s.migrated
             FROM samples s JOIN results x ON x.id = s.result_id WHERE x.run_id = $1
             ORDER BY s.result_id, s.idx",
            &[id.into()],
        )? {
            if let Some(&i) = index.get(&s[0].i()) {
                results[i].samples.push(Sample {
                    iters: s[1].i() as u64,
                    elapsed_ns: s[2].i() as u64,
                    value: s[3].f(),
                    other_cpu_ns: s[4].oi(),
                    migrated: s[5].i() != 0,
                });
            }
        }
        let warnings = self
            .query(
                "SELECT kind, probe, severity, message, advice FROM warnings WHERE run_id = $1 ORDER BY id",
                &[id.into()],
            )?
            .into_iter()
            .map(|r| Warning {
                kind: r[0].t(),
                probe: r[1].ot(),
                severity: if r[2].t() == "info" { Severity::Info } else { Severity::Warn },
                message: r[3].t(),
                advice: r[4].t(),
            })
            .collect();
        Ok(Run { meta, results, warnings })
    }

    /// Deletes run `id` with everything stored under it (results, raw samples, warnings,
    /// timelines), in one transaction.
    pub fn delete_run(&self, id: i64) -> Result<()> {
        let n = self.tx(|c| c.exec("DELETE FROM runs WHERE id = $1", &[id.into()]))?;
        if n == 0 {
            return Err(StoreError::NoSuchRun(id.to_string(), self.path.clone()));
        }
        Ok(())
    }

    /// Copies run `id` of this database, whole (results, raw samples, warnings, timelines),
    /// into `to`, in one transaction there: an interruption leaves `to` without any of it,
    /// and copying again completes it. A run `to` already has (same UUID) is not copied
    /// twice; a strictly older state of it there (interrupted where this one is complete, or
    /// fewer results) is replaced, and any other state there (newer, or still being
    /// measured) is kept: a stale copy never replaces a newer one. Runs still being measured
    /// here are not copied, nor runs whose text could drive a terminal (`door`:
    /// [`Copied::Refused`] says which field holds what).
    pub fn copy_run(&self, id: i64, to: &Store) -> Result<Copied> {
        let run = self
            .row(&format!("SELECT {} FROM runs WHERE id = $1", RUN_COLS.join(", ")), &[id.into()])?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string(), self.path.clone()))?;
        let col = |name: &str| RUN_COLS.iter().position(|c| *c == name).expect("a run column");
        let mut run = run;
        if run[col("status")].t() == "running" {
            // A run whose process is gone is copied as what it is: interrupted.
            let owner = self.row(
                "SELECT pid, pid_start, boot_id, machine_id FROM runs WHERE id = $1",
                &[id.into()],
            )?;
            let Some((reason, _)) = owner.as_deref().and_then(abandoned) else {
                return Ok(Copied::StillRunning);
            };
            run[col("status")] = "interrupted".to_string().into();
            run[col("reason")] = reason.into();
        }
        let status = run[col("status")].t();
        let uuid = run[col("uuid")].t();
        let results = self.query(
            &format!(
                "SELECT id, {} FROM results WHERE run_id = $1 ORDER BY seq",
                RESULT_COLS.join(", ")
            ),
            &[id.into()],
        )?;
        let samples = self.query(
            &format!(
                "SELECT {} FROM samples s JOIN results x ON x.id = s.result_id WHERE x.run_id = $1
                 ORDER BY s.result_id, s.idx",
                SAMPLE_COLS.iter().map(|c| format!("s.{c}")).collect::<Vec<_>>().join(", ")
            ),
            &[id.into()],
        )?;
        let warnings = self.query(
            &format!(
                "SELECT {} FROM warnings WHERE run_id = $1 ORDER BY id",
                WARNING_COLS.join(", ")
            ),
            &[id.into()],
        )?;
        let timelines = self.query(
            &format!(
                "SELECT {} FROM timelines WHERE run_id = $1 ORDER BY id",
                TIMELINE_COLS.join(", ")
            ),
            &[id.into()],
        )?;
        if let Some(why) = door::refusal(&run, &results, &warnings, &timelines) {
            return Ok(Copied::Refused(why));
        }
        to.tx(|c| {
            let mut replaced = false;
            if let Some(there) = c.row(
                "SELECT id, status, (SELECT count(*) FROM results x WHERE x.run_id = runs.id)
                 FROM runs WHERE uuid = $1",
                &[uuid.clone().into()],
            )? {
                let (there_status, there_results) = (there[1].t(), there[2].i());
                if there_status == status && there_results == results.len() as i64 {
                    return Ok(Copied::AlreadyThere);
                }
                if !strictly_older(&there_status, there_results, &status, results.len() as i64) {
                    return Ok(Copied::NewerThere);
                }
                c.exec("DELETE FROM runs WHERE id = $1", &[there[0].clone()])?;
                replaced = true;
            }
            let Some(new) = c.row(
                &format!(
                    "INSERT INTO runs ({}) VALUES ({}) ON CONFLICT (uuid) DO NOTHING RETURNING id",
                    RUN_COLS.join(", "),
                    placeholders(1, RUN_COLS.len())
                ),
                &run,
            )?
            else {
                // Another copy of the same run committed meanwhile.
                return Ok(Copied::AlreadyThere);
            };
            let new_run = new[0].clone();
            let mut ids = HashMap::new();
            let sql = format!(
                "INSERT INTO results (run_id, {}) VALUES ($1, {}) RETURNING id",
                RESULT_COLS.join(", "),
                placeholders(2, RESULT_COLS.len())
            );
            for r in &results {
                let mut values = Vec::with_capacity(r.len());
                values.push(new_run.clone());
                values.extend(r[1..].iter().cloned());
                let row = c.row(&sql, &values)?.expect("INSERT ... RETURNING returns its row");
                ids.insert(r[0].i(), row[0].clone());
            }
            let samples: Vec<Row> = samples
                .iter()
                .filter_map(|s| {
                    let mut s = s.clone();
                    s[0] = ids.get(&s[0].i())?.clone();
                    Some(s)
                })
                .collect();
            insert_many(c, "samples", SAMPLE_COLS, &samples)?;
            let relink = |rows: &[Row]| -> Vec<Row> {
                rows.iter()
                    .map(|r| {
                        let mut r = r.clone();
                        r[0] = new_run.clone();
                        r
                    })
                    .collect()
            };
            insert_many(c, "warnings", WARNING_COLS, &relink(&warnings))?;
            insert_many(c, "timelines", TIMELINE_COLS, &relink(&timelines))?;
            Ok(if replaced { Copied::Replaced } else { Copied::Copied })
        })
    }
}

/// Whether the copy of a run in state `there` with `there_results` results is strictly
/// older than the same run in state `here` with `here_results`: a run only gains results and
/// goes from `running` to `complete` or `interrupted`, so a copy with fewer results, or an
/// interrupted one where the other is complete with as many, is an earlier state of it.
/// A complete copy is never older than an interrupted one, and a copy still `running` there
/// belongs to a process measuring into that database: neither is replaced.
fn strictly_older(there: &str, there_results: i64, here: &str, here_results: i64) -> bool {
    match (there, here) {
        ("running", _) | ("complete", "interrupted") => false,
        ("interrupted", "complete") => there_results <= here_results,
        _ => there_results < here_results,
    }
}

/// A database error as words: SQLite's or the server's message without the SQL that
/// rusqlite appends.
fn in_words(e: &DbError) -> String {
    let text = match e {
        DbError::Sqlite(e) => e.to_string(),
        DbError::Pg(e) => {
            e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string())
        }
        DbError::Silent(waited) => {
            format!("the server did not answer within {} s", waited.as_secs_f64())
        }
        DbError::Conflict(what) => what.clone(),
    };
    let first = text.lines().next().unwrap_or(&text).trim();
    first.strip_suffix(" in").unwrap_or(first).to_string()
}

/// Turns a backend's error into one that names the database and says what to do.
fn db_error(path: &Path, e: DbError) -> StoreError {
    match e {
        DbError::Sqlite(e) => sql_error(path, e),
        DbError::Pg(e) => pg_error(path, e),
        DbError::Silent(waited) => StoreError::NoAnswer { path: path.into(), waited },
        DbError::Conflict(what) => StoreError::Duplicate(path.into(), what),
    }
}

fn pg_error(path: &Path, e: tokio_postgres::Error) -> StoreError {
    use tokio_postgres::error::SqlState;
    let hint = match e.code() {
        None => ": the connection to the server failed or was lost; nothing of the transaction in progress was committed",
        Some(c) if *c == SqlState::DISK_FULL => ": the server's disk is full",
        Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => {
            ": the user in the URL may not do this (grant it the rights, or use another user)"
        }
        Some(c) if *c == SqlState::ADMIN_SHUTDOWN || *c == SqlState::CRASH_SHUTDOWN => {
            ": the server is shutting down; nothing of the transaction in progress was committed"
        }
        _ => "",
    };
    StoreError::Server { path: path.into(), hint, source: e }
}

/// Leaves, for whichever later command settles this process's run, the reason it ended when
/// the database could not be told (the disk full, the lock held, the server gone): a note in
/// the state directory (`schedlab_measure::owner::state_dir`, in memory), keyed by this
/// process. The note is removed once the run is marked.
///
/// # Errors
/// When the note cannot be written.
pub fn note_end_reason(reason: &str) -> std::io::Result<()> {
    let me = Owner::current();
    fs::write(note_path(&me), format!("{}\n{reason}", me.to_line()))
}

fn note_path(o: &Owner) -> PathBuf {
    schedlab_measure::owner::state_dir().join(format!("run-end-{}-{}", o.pid, o.start))
}

/// The reason a run left `running` stopped, with the note it came from, when its process
/// (`pid, pid_start, boot_id, machine_id` of its row) was of this machine and is gone; `None`
/// while it may still run (or ran elsewhere: only its own machine can tell).
fn abandoned(cols: &[V]) -> Option<(String, Option<PathBuf>)> {
    if cols[3].ot().as_deref() != Some(machine_id(&this_machine()).as_str()) {
        return None;
    }
    let pid = u32::try_from(cols[0].i()).ok()?;
    let owner = Owner {
        pid,
        start: cols[1].oi().unwrap_or(0) as u64,
        boot_id: cols[2].ot().unwrap_or_default(),
    };
    if owner.is_alive() {
        return None;
    }
    let path = note_path(&owner);
    let noted = fs::read_to_string(&path).ok().and_then(|text| {
        let (who, reason) = text.split_once('\n')?;
        (Owner::parse(who)? == owner && !reason.trim().is_empty())
            .then(|| reason.trim().to_string())
    });
    Some(match noted {
        Some(reason) => (reason, Some(path)),
        None => (ENDED_UNFINISHED.to_string(), None),
    })
}

/// A run's status and reason as they stand: a `running` run whose process is gone reads as
/// interrupted, with the reason it left or [`ENDED_UNFINISHED`] (`owner`: as [`abandoned`]).
fn settled(status: String, reason: Option<String>, owner: &[V]) -> (RunStatus, Option<String>) {
    let status = run_status(status);
    if status == RunStatus::Running {
        if let Some((why, _)) = abandoned(owner) {
            return (RunStatus::Interrupted, Some(why));
        }
    }
    (status, reason)
}

/// This machine's fingerprint, taken once per process (it reads /proc and /sys).
fn this_machine() -> Machine {
    static MACHINE: std::sync::OnceLock<Machine> = std::sync::OnceLock::new();
    MACHINE.get_or_init(Machine::fingerprint).clone()
}

/// A stored run status; anything unknown reads as interrupted (never as complete).
fn run_status(key: String) -> RunStatus {
    RunStatus::from_key(&key).unwrap_or(RunStatus::Interrupted)
}

/// Turns an SQLite error into one that names the file and says what to do.
fn sql_error(path: &Path, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            StoreError::NotOurs(path.into(), "SQLite says it is not a database".into())
        }
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Sql {
            path: path.into(),
            hint: " is corrupt (restore it from a backup or use another --db)",
            source: e,
        },
        Some(ErrorCode::DiskFull) => StoreError::Sql {
            path: path.into(),
            hint: " is full: its disk (or quota) has no room left; everything committed before is kept",
            source: e,
        },
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => StoreError::Sql {
            path: path.into(),
            hint: " is locked by another process that held it longer than the busy timeout; try again when it is done",
            source: e,
        },
        Some(ErrorCode::SystemIoFailure) => StoreError::Sql {
            path: path.into(),
            hint: " could not be read or written (an I/O error: a failing disk, a file size limit, a removed file system?)",
            source: e,
        },
        Some(ErrorCode::ReadOnly)
        | Some(ErrorCode::CannotOpen)
        | Some(ErrorCode::PermissionDenied) => {
            StoreError::open(path, " (are the file and its directory writable?)", e)
        }
        _ => StoreError::Sql { path: path.into(), hint: "", source: e },
    }
}

fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("our model types always serialise")
}

/// Params as a JSON object of strings (keys sorted; the canonical order lives in `params`).
fn params_object(p: &Params) -> serde_json::Map<String, serde_json::Value> {
    p.0.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect()
}

fn params_from_json(s: &str) -> Params {
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(s).unwrap_or_default();
    Params(
        map.into_iter()
            .map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
            .collect(),
    )
}
