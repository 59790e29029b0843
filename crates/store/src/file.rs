//! The SQLite dialect: opening a file (its header checked before SQLite sees it, so a foreign
//! file is never journaled or rewritten), the busy timeout, write-ahead logging.

use std::cell::RefCell;
use std::fs;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::db::{Conn, DbError};
use crate::error::{sql_error, Result, StoreError};
use crate::{Store, BUSY_TIMEOUT, SCHEMA_VERSION};

/// Checks that `path` holds an SQLite file before SQLite sees it, so a foreign file is never
/// opened (and so never journaled or rewritten) by us.
pub(crate) fn check_header(path: &Path) -> Result<()> {
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

    /// How long an SQLite write waits for another writer ([`BUSY_TIMEOUT`] unless set here).
    pub fn set_busy_timeout(&self, t: Duration) -> Result<()> {
        if let Conn::Sqlite(c) = &*self.conn.borrow() {
            c.busy_timeout(t).map_err(|e| sql_error(&self.path, e))?;
        }
        Ok(())
    }

    /// Puts an SQLite file in write-ahead-log mode: readers never block the run's writes (nor
    /// it them), and a crash loses no committed transaction. The switch needs the file to
    /// itself, and SQLite reports "locked" at once, without its busy handler, when another
    /// connection is reading or switching it at that moment (several processes opening a
    /// new file together): the switch is tried again until [`BUSY_TIMEOUT`] has passed, as
    /// any other write waits. A file system that cannot do WAL leaves the file in the mode
    /// SQLite keeps, as before.
    pub(crate) fn switch_to_wal(&self) -> Result<()> {
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
}
