//! The two backends behind one small interface: run a statement with values, get rows of
//! values back. The store's SQL is written once, with `$1`-style placeholders (PostgreSQL's;
//! rewritten to `?1` for SQLite), and only the schema's DDL differs between the backends.
//!
//! Integers are bound and read as 64-bit (`BIGINT` in PostgreSQL), reals as `DOUBLE
//! PRECISION`, text as text, so the same Rust values round-trip through either.

use tokio_postgres::types::{ToSql, Type};

pub use crate::error::DbError;
use crate::pg::PgConn;

/// One SQL value.
#[derive(Debug, Clone, PartialEq)]
pub enum V {
    /// NULL.
    Null,
    /// An integer.
    I(i64),
    /// A real.
    F(f64),
    /// Text.
    T(String),
    /// Bytes (`BLOB` in SQLite, `BYTEA` in PostgreSQL): the raw samples' encoding.
    B(Vec<u8>),
}

impl V {
    pub fn i(&self) -> i64 {
        match self {
            V::I(i) => *i,
            V::F(f) => *f as i64,
            V::T(t) => t.parse().unwrap_or(0),
            V::Null | V::B(_) => 0,
        }
    }
    pub fn oi(&self) -> Option<i64> {
        match self {
            V::Null => None,
            v => Some(v.i()),
        }
    }
    pub fn f(&self) -> f64 {
        match self {
            V::I(i) => *i as f64,
            V::F(f) => *f,
            V::T(t) => t.parse().unwrap_or(f64::NAN),
            V::Null | V::B(_) => f64::NAN,
        }
    }
    pub fn t(&self) -> String {
        match self {
            V::T(t) => t.clone(),
            V::I(i) => i.to_string(),
            V::F(f) => f.to_string(),
            V::B(b) => String::from_utf8_lossy(b).into_owned(),
            V::Null => String::new(),
        }
    }
    /// The bytes of a blob (empty for anything else).
    pub fn b(&self) -> &[u8] {
        match self {
            V::B(b) => b,
            _ => &[],
        }
    }
    pub fn ot(&self) -> Option<String> {
        match self {
            V::Null => None,
            v => Some(v.t()),
        }
    }
}

impl From<i64> for V {
    fn from(v: i64) -> V {
        V::I(v)
    }
}
impl From<f64> for V {
    fn from(v: f64) -> V {
        V::F(v)
    }
}
impl From<bool> for V {
    fn from(v: bool) -> V {
        V::I(v as i64)
    }
}
impl From<&str> for V {
    fn from(v: &str) -> V {
        V::T(v.to_string())
    }
}
impl From<Vec<u8>> for V {
    fn from(v: Vec<u8>) -> V {
        V::B(v)
    }
}
impl From<String> for V {
    fn from(v: String) -> V {
        V::T(v)
    }
}
impl From<&String> for V {
    fn from(v: &String) -> V {
        V::T(v.clone())
    }
}
impl<T: Into<V>> From<Option<T>> for V {
    fn from(v: Option<T>) -> V {
        v.map_or(V::Null, Into::into)
    }
}

/// A row: its values in column order.
pub type Row = Vec<V>;

/// An open connection to either backend.
pub enum Conn {
    /// An SQLite file.
    Sqlite(rusqlite::Connection),
    /// A PostgreSQL server.
    Pg(Box<PgConn>),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Conn::Sqlite(_) => "Conn::Sqlite",
            Conn::Pg(_) => "Conn::Pg",
        })
    }
}

/// Inserts `rows` into `table`'s `cols`, many rows per statement (far fewer round trips to a
/// server than one statement per row).
pub fn insert_many(
    conn: &mut Conn,
    table: &str,
    cols: &[&str],
    rows: &[Row],
) -> Result<(), DbError> {
    const PER_STATEMENT: usize = 400;
    for chunk in rows.chunks(PER_STATEMENT) {
        let mut sql = format!("INSERT INTO {table} ({}) VALUES ", cols.join(", "));
        let mut n = 0;
        for (i, _) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for c in 0..cols.len() {
                if c > 0 {
                    sql.push_str(", ");
                }
                n += 1;
                sql.push_str(&format!("${n}"));
            }
            sql.push(')');
        }
        let params: Vec<V> = chunk.iter().flat_map(|r| r.iter().cloned()).collect();
        conn.exec(&sql, &params)?;
    }
    Ok(())
}

/// `$1` placeholders as SQLite's `?1` (the store's SQL has no `$` anywhere else).
fn sqlite_sql(sql: &str) -> String {
    sql.replace('$', "?")
}

impl rusqlite::ToSql for V {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value, ValueRef};
        Ok(match self {
            V::Null => ToSqlOutput::Owned(Value::Null),
            V::I(i) => ToSqlOutput::Owned(Value::Integer(*i)),
            V::F(f) => ToSqlOutput::Owned(Value::Real(*f)),
            V::T(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            V::B(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

/// A value as PostgreSQL wants it for a parameter of type `ty`.
fn pg_param(v: &V, ty: &Type) -> Box<dyn ToSql + Sync> {
    match (v, ty) {
        (V::Null, t) if *t == Type::INT8 => Box::new(None::<i64>),
        (V::Null, t) if *t == Type::INT4 => Box::new(None::<i32>),
        (V::Null, t) if *t == Type::FLOAT8 => Box::new(None::<f64>),
        (V::Null, t) if *t == Type::BOOL => Box::new(None::<bool>),
        (V::Null, t) if *t == Type::BYTEA => Box::new(None::<Vec<u8>>),
        (V::Null, _) => Box::new(None::<String>),
        // A value past an INTEGER column's range is refused by the driver (a wrong type),
        // never cut to its low 32 bits.
        (V::I(i), t) if *t == Type::INT4 => match i32::try_from(*i) {
            Ok(i) => Box::new(i),
            Err(_) => Box::new(*i),
        },
        (V::I(i), t) if *t == Type::FLOAT8 => Box::new(*i as f64),
        (V::I(i), t) if *t == Type::BOOL => Box::new(*i != 0),
        (V::I(i), t) if *t == Type::TEXT || *t == Type::VARCHAR => Box::new(i.to_string()),
        (V::I(i), _) => Box::new(*i),
        (V::F(f), _) => Box::new(*f),
        (V::T(s), _) => Box::new(s.clone()),
        (V::B(b), _) => Box::new(b.clone()),
    }
}

fn pg_value(row: &tokio_postgres::Row, i: usize) -> Result<V, tokio_postgres::Error> {
    let ty = row.columns()[i].type_().clone();
    Ok(if ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map_or(V::Null, V::I)
    } else if ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?.map_or(V::Null, |x| V::I(x.into()))
    } else if ty == Type::INT2 {
        row.try_get::<_, Option<i16>>(i)?.map_or(V::Null, |x| V::I(x.into()))
    } else if ty == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i)?.map_or(V::Null, V::F)
    } else if ty == Type::FLOAT4 {
        row.try_get::<_, Option<f32>>(i)?.map_or(V::Null, |x| V::F(x.into()))
    } else if ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)?.map_or(V::Null, |x| V::I(x.into()))
    } else if ty == Type::BYTEA {
        row.try_get::<_, Option<Vec<u8>>>(i)?.map_or(V::Null, V::B)
    } else {
        row.try_get::<_, Option<String>>(i)?.map_or(V::Null, V::T)
    })
}

impl Conn {
    /// Whether this is PostgreSQL.
    pub fn is_pg(&self) -> bool {
        matches!(self, Conn::Pg(..))
    }

    /// Runs a statement; returns the rows it changed.
    pub fn exec(&mut self, sql: &str, params: &[V]) -> Result<u64, DbError> {
        match self {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(&sqlite_sql(sql))?;
                Ok(stmt.execute(rusqlite::params_from_iter(params.iter()))? as u64)
            }
            Conn::Pg(pg) => {
                let stmt = pg.statement(sql)?;
                let boxed: Vec<Box<dyn ToSql + Sync>> =
                    params.iter().zip(stmt.params()).map(|(v, t)| pg_param(v, t)).collect();
                let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref()).collect();
                pg.execute(&stmt, &refs)
            }
        }
    }

    /// Runs a query; returns its rows.
    pub fn query(&mut self, sql: &str, params: &[V]) -> Result<Vec<Row>, DbError> {
        match self {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(&sqlite_sql(sql))?;
                let n = stmt.column_count();
                let rows = stmt.query_map(rusqlite::params_from_iter(params.iter()), |r| {
                    (0..n)
                        .map(|i| {
                            use rusqlite::types::ValueRef;
                            Ok(match r.get_ref(i)? {
                                ValueRef::Null => V::Null,
                                ValueRef::Integer(i) => V::I(i),
                                ValueRef::Real(f) => V::F(f),
                                ValueRef::Text(t) => V::T(String::from_utf8_lossy(t).into_owned()),
                                ValueRef::Blob(b) => V::B(b.to_vec()),
                            })
                        })
                        .collect::<rusqlite::Result<Row>>()
                })?;
                Ok(rows.collect::<rusqlite::Result<Vec<Row>>>()?)
            }
            Conn::Pg(pg) => {
                let stmt = pg.statement(sql)?;
                let boxed: Vec<Box<dyn ToSql + Sync>> =
                    params.iter().zip(stmt.params()).map(|(v, t)| pg_param(v, t)).collect();
                let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref()).collect();
                let rows = pg.query(&stmt, &refs)?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    out.push((0..r.len()).map(|i| pg_value(r, i)).collect::<Result<Row, _>>()?);
                }
                Ok(out)
            }
        }
    }

    /// The first row of a query, if any.
    pub fn row(&mut self, sql: &str, params: &[V]) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs statements without parameters (DDL, transaction control).
    pub fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        match self {
            Conn::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Conn::Pg(pg) => pg.batch(sql),
        }
    }

    /// Runs `f`, which only reads, in one read transaction: everything it reads comes from
    /// one state of the database (SQLite: a deferred `BEGIN`, which a read-only connection
    /// may take; PostgreSQL: one snapshot, `REPEATABLE READ`).
    pub fn read_tx<T>(
        &mut self,
        f: impl FnOnce(&mut Conn) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        self.batch(if self.is_pg() {
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        } else {
            "BEGIN DEFERRED"
        })?;
        let r = f(self);
        // Nothing was written: ending it either way is the same, and a failure to end it
        // matters only if the reads failed too.
        let end = self.batch(if r.is_ok() { "COMMIT" } else { "ROLLBACK" });
        let v = r?;
        end?;
        Ok(v)
    }

    /// Runs `f` in one transaction: committed when it returns `Ok`, rolled back otherwise.
    /// SQLite takes the write lock at once (`BEGIN IMMEDIATE`), so a busy database fails
    /// here, after its busy timeout, rather than half way.
    pub fn tx<T, E: From<DbError>>(
        &mut self,
        f: impl FnOnce(&mut Conn) -> Result<T, E>,
    ) -> Result<T, E> {
        self.batch(if self.is_pg() { "BEGIN" } else { "BEGIN IMMEDIATE" })?;
        match f(self) {
            Ok(v) => match self.batch("COMMIT") {
                Ok(()) => Ok(v),
                Err(e) => {
                    let _ = self.batch("ROLLBACK");
                    Err(e.into())
                }
            },
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}
