//! What repeats across runs, stored once (schema version 6): a result's series (probe,
//! parameters, unit, direction) in `series`, its notes and a warning's advice in `texts`,
//! and a warning's kind, probe, severity and the head of its message (the probe and ": ",
//! when it starts so) in `warning_kinds`, each referred to by id from `results` and
//! `warnings`.
//!
//! Rows are read and copied in their logical shape (the columns of `columns.rs`, what the
//! views `result_rows` and `warning_rows` give back); an [`Interner`] turns such a row into
//! the row stored, finding or creating the ids. It lives inside one transaction: an id it
//! remembers may belong to a row that transaction created, gone if it rolls back.
//!
//! Two writers may create the same series or text at once (two machines pushing to a new
//! fleet): the insert does nothing on the unique index's conflict and the id is read again,
//! so each is stored once. In PostgreSQL the second insert waits for the first writer's
//! transaction to end; two transactions each waiting for a row the other created would
//! deadlock, so every transaction creates what it needs in one order: its series, sorted,
//! then its texts, sorted, then its warning kinds, sorted ([`Interner::prepare`]; a single
//! result needs one series, then one text). A transaction creating texts then no longer
//! waits for any series, nor one creating kinds for any text, and within each the sorted
//! order allows no cycle.

use std::collections::HashMap;

use crate::columns::{RESULT_COLS, STORED_RESULT_COLS, STORED_WARNING_COLS, WARNING_COLS};
use crate::db::{Conn, DbError, Row, V};

/// (probe, params, params_json, unit, better): a series' identity.
type SeriesKey = [String; 5];

/// (kind, probe, severity, head): a warning kind's identity.
type KindKey = (String, Option<String>, String, String);

/// Ids of series and texts found or created in the current transaction.
#[derive(Default)]
pub(crate) struct Interner {
    series: HashMap<SeriesKey, i64>,
    texts: HashMap<String, i64>,
    kinds: HashMap<KindKey, i64>,
}

const SERIES_COLS: &str = "probe, params, params_json, unit, better";

impl Interner {
    /// Reads every series at once: a copy of a run needs thousands of them, the fleet's
    /// database holds a few thousand in all (one per probe and parameter set).
    pub(crate) fn load_series(&mut self, c: &mut Conn) -> Result<(), DbError> {
        for r in c.query(&format!("SELECT id, {SERIES_COLS} FROM series"), &[])? {
            self.series.insert([r[1].t(), r[2].t(), r[3].t(), r[4].t(), r[5].t()], r[0].i());
        }
        Ok(())
    }

    /// Finds or creates, in the one order every writer uses (series sorted, then texts
    /// sorted), everything `results` and `warnings` (rows as `RESULT_COLS` and
    /// `WARNING_COLS` list them) need, so that storing them creates nothing more.
    pub(crate) fn prepare(
        &mut self,
        c: &mut Conn,
        results: &[&[V]],
        warnings: &[&[V]],
    ) -> Result<(), DbError> {
        let col =
            |cols: &[&str], name: &str| cols.iter().position(|c| *c == name).expect("a column");
        let key_cols =
            ["probe", "params", "params_json", "unit", "better"].map(|n| col(RESULT_COLS, n));
        let mut keys: Vec<SeriesKey> = results.iter().map(|r| key_cols.map(|i| r[i].t())).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            self.series(c, key)?;
        }
        let (notes, advice) = (col(RESULT_COLS, "notes"), col(WARNING_COLS, "advice"));
        let mut texts: Vec<String> = results
            .iter()
            .map(|r| r[notes].t())
            .chain(warnings.iter().map(|w| w[advice].t()))
            .collect();
        texts.sort();
        texts.dedup();
        for text in texts {
            self.text(c, &text)?;
        }
        let mut kinds: Vec<KindKey> = warnings.iter().map(|w| kind_key(w).0).collect();
        kinds.sort();
        kinds.dedup();
        for key in kinds {
            self.kind(c, key)?;
        }
        Ok(())
    }

    /// The id of a warning kind, created if the database has none yet.
    pub(crate) fn kind(&mut self, c: &mut Conn, key: KindKey) -> Result<i64, DbError> {
        if let Some(&id) = self.kinds.get(&key) {
            return Ok(id);
        }
        // By the unique index `warning_kinds_key` (a NULL probe is one kind, not many).
        let find = "SELECT id FROM warning_kinds WHERE kind = $1 AND severity = $3 AND head = $4
                    AND coalesce(probe, '') = coalesce($2, '') AND (probe IS NULL) = ($2 IS NULL)";
        let values: Vec<V> = vec![
            key.0.clone().into(),
            key.1.clone().into(),
            key.2.clone().into(),
            key.3.clone().into(),
        ];
        let id = match c.row(find, &values)? {
            Some(r) => r[0].i(),
            None => {
                c.exec(
                    "INSERT INTO warning_kinds (kind, probe, severity, head) VALUES ($1, $2, $3, $4)
                     ON CONFLICT DO NOTHING",
                    &values,
                )?;
                c.row(find, &values)?.map(|r| r[0].i()).expect("the kind was just stored")
            }
        };
        self.kinds.insert(key, id);
        Ok(id)
    }

    /// The id of a series, created if the database has none yet.
    pub(crate) fn series(&mut self, c: &mut Conn, key: SeriesKey) -> Result<i64, DbError> {
        if let Some(&id) = self.series.get(&key) {
            return Ok(id);
        }
        let find = "SELECT id FROM series
                    WHERE probe = $1 AND params = $2 AND params_json = $3 AND unit = $4 AND better = $5";
        let values: Vec<V> = key.iter().map(V::from).collect();
        let id = match c.row(find, &values)? {
            Some(r) => r[0].i(),
            None => {
                c.exec(
                    &format!(
                        "INSERT INTO series ({SERIES_COLS}) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
                    ),
                    &values,
                )?;
                c.row(find, &values)?.map(|r| r[0].i()).expect("the series was just stored")
            }
        };
        self.series.insert(key, id);
        Ok(id)
    }

    /// The id of a text (notes, advice), stored if the database has it not yet.
    pub(crate) fn text(&mut self, c: &mut Conn, text: &str) -> Result<i64, DbError> {
        if let Some(&id) = self.texts.get(text) {
            return Ok(id);
        }
        // By the unique index `texts_text` (on the text in SQLite, its md5 in PostgreSQL).
        let find = if c.is_pg() {
            "SELECT id FROM texts WHERE md5(text) = md5($1) AND text = $1"
        } else {
            "SELECT id FROM texts WHERE text = $1"
        };
        let value = [V::from(text)];
        let id = match c.row(find, &value)? {
            Some(r) => r[0].i(),
            None => {
                c.exec("INSERT INTO texts (text) VALUES ($1) ON CONFLICT DO NOTHING", &value)?;
                // Nothing found after the insert: another text has the same md5 (made to).
                c.row(find, &value)?.map(|r| r[0].i()).ok_or_else(|| {
                    DbError::Conflict(format!("another stored text has the same md5 as {text:?}"))
                })?
            }
        };
        self.texts.insert(text.to_string(), id);
        Ok(id)
    }

    /// A result as `RESULT_COLS` lists it, with its raw samples (`RAW_COLS`' `n` and
    /// `data`), as `results` stores it (`STORED_RESULT_COLS`).
    pub(crate) fn stored_result(
        &mut self,
        c: &mut Conn,
        row: &[V],
        raw: Option<(i64, V)>,
    ) -> Result<Row, DbError> {
        let at = |name: &str| &row[RESULT_COLS.iter().position(|c| *c == name).expect("a column")];
        let mut out = Vec::with_capacity(STORED_RESULT_COLS.len());
        for col in STORED_RESULT_COLS {
            out.push(match *col {
                "series_id" => {
                    let key =
                        ["probe", "params", "params_json", "unit", "better"].map(|n| at(n).t());
                    V::I(self.series(c, key)?)
                }
                "notes_id" => V::I(self.text(c, &at("notes").t())?),
                // NULL when it is the summary's count (always, for a run schedlab measured).
                "raw_n" => match &raw {
                    Some((n, _)) if at("n").oi() != Some(*n) => V::I(*n),
                    _ => V::Null,
                },
                "raw" => raw.as_ref().map_or(V::Null, |(_, data)| data.clone()),
                name => at(name).clone(),
            });
        }
        Ok(out)
    }

    /// A warning as `WARNING_COLS` lists it, as `warnings` stores it (`STORED_WARNING_COLS`).
    pub(crate) fn stored_warning(&mut self, c: &mut Conn, row: &[V]) -> Result<Row, DbError> {
        let at = |name: &str| &row[WARNING_COLS.iter().position(|c| *c == name).expect("a column")];
        let mut out = Vec::with_capacity(STORED_WARNING_COLS.len());
        let (key, rest) = kind_key(row);
        for col in STORED_WARNING_COLS {
            out.push(match *col {
                "advice_id" => V::I(self.text(c, &at("advice").t())?),
                "kind_id" => V::I(self.kind(c, key.clone())?),
                "message" => V::T(rest.clone()),
                name => at(name).clone(),
            });
        }
        Ok(out)
    }
}

/// A warning's kind (as `WARNING_COLS` lists it) and the rest of its message after the head.
fn kind_key(w: &[V]) -> (KindKey, String) {
    let at = |name: &str| &w[WARNING_COLS.iter().position(|c| *c == name).expect("a column")];
    let (probe, message) = (at("probe").ot(), at("message").t());
    let head = probe
        .as_ref()
        .map(|p| format!("{p}: "))
        .filter(|h| message.starts_with(h.as_str()))
        .unwrap_or_default();
    let rest = message[head.len()..].to_string();
    ((at("kind").t(), probe, at("severity").t(), head), rest)
}
