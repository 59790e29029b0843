//! The PostgreSQL dialect: connecting to a server (TLS as the URL's `sslmode` asks, the
//! password from `~/.pgpass` or `$PGPASSWORD`, every wait under a deadline), and refusing a
//! server without a schedlab schema when only reading.

use std::cell::RefCell;
use std::path::PathBuf;

use crate::db::Conn;
use crate::error::{Result, StoreError};
use crate::location::redact;
use crate::{passfile, pg, schema, tls, Store};

impl Store {
    pub(crate) fn connect(url: &str, write: bool) -> Result<Store> {
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
}
