//! What can go wrong: the store's errors ([`StoreError`], every message naming the file or
//! the server's URL without its password and what to do), a backend's own error
//! ([`DbError`]), and the translation from one to the other.

use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// Migrating the database to this build's schema failed for a reason other than its
    /// tables (the server timed out or went away, the disk filled, a lock was held): the
    /// step was rolled back and the database left at the version it had.
    #[error("{path} could not be migrated from schema version {version} to {known}; that step was rolled back and the database left as it was", path = .path.display())]
    Migration {
        /// The database file or URL.
        path: PathBuf,
        /// The version it had (and still has).
        version: i64,
        /// The version this build writes.
        known: i64,
        /// Why the step failed.
        #[source]
        cause: Box<StoreError>,
    },
    /// A RUN argument matched nothing.
    #[error("no run matches {0:?} in {1}; `schedlab runs` lists them (RUN is an id, a label, a UUID or `latest`)")]
    NoSuchRun(String, PathBuf),
}

impl StoreError {
    pub(crate) fn open(
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
            StoreError::Migration { cause, .. } => cause.is_storage_failure(),
            _ => false,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, StoreError>;

/// What a backend reported.
#[derive(Debug)]
pub enum DbError {
    /// SQLite's error.
    Sqlite(rusqlite::Error),
    /// PostgreSQL's error.
    Pg(tokio_postgres::Error),
    /// The PostgreSQL server did not answer within this long; the connection was given up.
    Silent(Duration),
    /// A row that must be unique already exists (what it is, in words).
    Conflict(String),
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> DbError {
        DbError::Sqlite(e)
    }
}
impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> DbError {
        DbError::Pg(e)
    }
}

/// Whether a migration step failed because the tables are not those of the version the
/// database claims (a table or column missing, or there already): the only failure that
/// says the version was changed by hand. Anything else — a timeout, a lost server, a full
/// disk, a lock — is reported as itself.
pub(crate) fn is_shape_mismatch(e: &DbError) -> bool {
    use tokio_postgres::error::SqlState;
    match e {
        DbError::Pg(e) => e.code().is_some_and(|c| {
            [
                SqlState::UNDEFINED_TABLE,
                SqlState::UNDEFINED_COLUMN,
                SqlState::UNDEFINED_OBJECT,
                SqlState::DUPLICATE_TABLE,
                SqlState::DUPLICATE_COLUMN,
                SqlState::DUPLICATE_OBJECT,
            ]
            .contains(c)
        }),
        // SQLite gives these its generic error code (and rusqlite, for a statement it could
        // not prepare, none): its message tells them apart.
        DbError::Sqlite(e) => {
            let said = e.to_string();
            [
                "no such table",
                "no such column",
                "no such index",
                "no such view",
                "already exists",
                "duplicate column",
                "has no column named",
            ]
            .iter()
            .any(|m| said.contains(m))
        }
        _ => false,
    }
}

/// A database error as words: SQLite's or the server's message without the SQL that
/// rusqlite appends.
pub(crate) fn in_words(e: &DbError) -> String {
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
pub(crate) fn db_error(path: &Path, e: DbError) -> StoreError {
    match e {
        DbError::Sqlite(e) => sql_error(path, e),
        DbError::Pg(e) => pg_error(path, e),
        DbError::Silent(waited) => StoreError::NoAnswer { path: path.into(), waited },
        DbError::Conflict(what) => StoreError::Duplicate(path.into(), what),
    }
}

pub(crate) fn pg_error(path: &Path, e: tokio_postgres::Error) -> StoreError {
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

/// Turns an SQLite error into one that names the file and says what to do.
pub(crate) fn sql_error(path: &Path, e: rusqlite::Error) -> StoreError {
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
