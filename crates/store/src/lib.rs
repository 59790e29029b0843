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
//! The files, one role each: this one is the store's face (the [`Store`] type, opening a
//! [`Location`], the schema check and migration, the small query helpers the others use);
//! `file.rs` and `server.rs` open each dialect (an SQLite file, a PostgreSQL server: with
//! `pg.rs`, `tls.rs` and `passfile.rs` below it), `db.rs` runs the same SQL on either and
//! `schema.rs` holds the DDL of both; `write.rs` and `read.rs` store and load runs,
//! `history.rs` reads one probe's results across runs, `copy.rs` copies them between
//! stores through the door (`door.rs`); `columns.rs`, `alive.rs` (whose is a run, and is its process alive), `location.rs` and `error.rs` are
//! shared by them. The imports point one way: nothing below imports this file but for the
//! `Store` type the others add methods to.
//!
//! ```
//! use schedlab_store::Store;
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(&dir.path().join("results.db")).unwrap();
//! assert!(store.runs().unwrap().is_empty());
//! ```
#![deny(missing_docs)]

mod alive;
mod columns;
mod copy;
mod db;
mod door;
mod error;
mod file;
mod history;
mod intern;
mod location;
mod passfile;
mod pg;
mod prune;
pub mod raw;
mod read;
mod schema;
mod server;
mod tls;
mod write;

use std::cell::RefCell;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use db::{Conn, DbError, Row, V};

use alive::abandoned;
pub use alive::{machine_id, note_end_reason};
pub use copy::Copied;
use error::{db_error, in_words, is_shape_mismatch};
pub use error::{Result, StoreError};
pub use history::{HistoryPoint, HistoryQuery};
pub use location::{redact, Location};
pub use prune::Pruned;
pub use read::{RunSummary, StoredTimeline};

pub use schema::{APPLICATION_ID, SCHEMA_VERSION};

pub use pg::{CONNECT_TIMEOUT, STATEMENT_TIMEOUT};

/// The reason given to a run whose process ended without marking it (SIGKILL, a crash, power
/// loss) and without leaving a note of why.
pub const ENDED_UNFINISHED: &str = "the process ended without finishing (killed or crashed)";

/// How long an SQLite write waits for another process's write to finish before it fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// An open results database.
#[derive(Debug)]
pub struct Store {
    conn: RefCell<Conn>,
    path: PathBuf,
}

impl Store {
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

    /// The file this store lives in, or the server's URL without its password.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this store is a PostgreSQL server.
    pub fn is_server(&self) -> bool {
        self.conn.borrow().is_pg()
    }

    pub(crate) fn db<T>(&self, r: std::result::Result<T, DbError>) -> Result<T> {
        r.map_err(|e| db_error(&self.path, e))
    }

    pub(crate) fn query(&self, sql: &str, params: &[V]) -> Result<Vec<Row>> {
        let r = self.conn.borrow_mut().query(sql, params);
        self.db(r)
    }

    pub(crate) fn row(&self, sql: &str, params: &[V]) -> Result<Option<Row>> {
        let r = self.conn.borrow_mut().row(sql, params);
        self.db(r)
    }

    pub(crate) fn exec(&self, sql: &str, params: &[V]) -> Result<u64> {
        let r = self.conn.borrow_mut().exec(sql, params);
        self.db(r)
    }

    pub(crate) fn tx<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> std::result::Result<T, DbError>,
    ) -> Result<T> {
        let r = self.conn.borrow_mut().tx(f);
        self.db(r)
    }

    /// Validates identity and version; creates or migrates when `write`. Returns the version
    /// found before any migration.
    pub(crate) fn check_and_migrate(&self, write: bool) -> Result<i64> {
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
                // Only tables that are not those of the claimed version mean it was changed
                // by hand; any other failure (a timeout, a lost server, a full disk, a lock)
                // is said as itself.
                let r = schema::migrate(&mut self.conn.borrow_mut(), version);
                r.map_err(|e| {
                    if fresh {
                        db_error(&self.path, e)
                    } else if is_shape_mismatch(&e) {
                        StoreError::Inconsistent {
                            path: self.path.clone(),
                            version,
                            detail: in_words(&e),
                        }
                    } else {
                        StoreError::Migration {
                            path: self.path.clone(),
                            version,
                            known: SCHEMA_VERSION,
                            cause: Box::new(db_error(&self.path, e)),
                        }
                    }
                })?;
            }
        }
        Ok(version)
    }

    /// Marks runs left `running` by a process of this machine that no longer exists as
    /// interrupted (the process crashed or was killed with SIGKILL), with the reason it left
    /// in a note, if any, else [`ENDED_UNFINISHED`].
    pub(crate) fn mark_abandoned(&self) -> Result<()> {
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
}
