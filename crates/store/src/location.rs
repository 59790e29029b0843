//! Where a database is — an SQLite file or a PostgreSQL server — and a server URL with its
//! password hidden, for every message.

use std::ffi::OsStr;

use crate::tls;
use std::path::PathBuf;

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
