//! Where a PostgreSQL password comes from when the URL has none, as libpq users expect: the
//! `PGPASSWORD` environment variable, else the password file (`PGPASSFILE`, else
//! `~/.pgpass`), so that a password need not travel in a command line (which every local
//! user can read in `ps`).
//!
//! The password file is libpq's (<https://www.postgresql.org/docs/current/libpq-pgpass.html>):
//! one `hostname:port:database:username:password` per line, the first line whose first four
//! fields match the connection wins, `*` in any of them matches anything, `\:` and `\\` are a
//! literal `:` and `\`, lines starting with `#` are comments. A connection over a Unix socket
//! matches its socket directory, or `localhost` when that is the default directory. Where
//! the URL names several hosts (`postgres://lab@localhost/lab?host=/run/postgresql` is two
//! to this driver, which tries each in turn with one password, where libpq takes the
//! option's host alone), the first host that has a line gives the password. A file
//! that its group or others may read or write is ignored, as libpq ignores it, and the
//! connection's error then says so.

use std::error::Error;
use std::ffi::CStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tokio_postgres::config::Host;
use tokio_postgres::Config;

/// libpq's default port.
const DEFAULT_PORT: u16 = 5432;

/// Socket directories whose connections the password file calls `localhost` (libpq's
/// `DEFAULT_PGSOCKET_DIR`: `/tmp` upstream, `/var/run/postgresql` in Debian's build).
const DEFAULT_SOCKET_DIRS: &[&str] = &["/tmp", "/var/run/postgresql", "/run/postgresql"];

/// Gives `config` a password from `PGPASSWORD` or the password file when the URL has none.
/// Returns a note to add to a failed connection's error: a password file that was ignored,
/// and why.
pub(crate) fn supply(config: &mut Config) -> Option<String> {
    if config.get_password().is_some() {
        return None;
    }
    if let Some(pw) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
        config.password(std::os::unix::ffi::OsStrExt::as_bytes(pw.as_os_str()));
        return None;
    }
    let account = Account::current();
    let file = match std::env::var_os("PGPASSFILE").filter(|p| !p.is_empty()) {
        Some(f) => PathBuf::from(f),
        None => account.as_ref()?.home.join(".pgpass"),
    };
    let meta = std::fs::metadata(&file).ok()?;
    if !meta.is_file() {
        return Some(format!("the password file {} is not a plain file; ignored", file.display()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Some(format!(
            "the password file {} has group or world access, so it was ignored (as libpq \
             ignores it); permissions should be u=rw (0600) or less: chmod 0600 {}",
            file.display(),
            file.display()
        ));
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let user = match config.get_user() {
        Some(u) => u.to_string(),
        None => account?.name,
    };
    let db = config.get_dbname().unwrap_or(&user).to_string();
    // The driver tries each host in turn (`postgres://lab@localhost/lab?host=/run/sock` is
    // two), with one password for all: the first host that has a line gives it.
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(DEFAULT_PORT);
    let hosts: Vec<(String, u16)> = match config.get_hosts() {
        [] => vec![("localhost".to_string(), port(0))],
        hosts => hosts
            .iter()
            .enumerate()
            .flat_map(|(i, h)| {
                let names = match h {
                    Host::Tcp(h) => vec![h.clone()],
                    Host::Unix(dir) => socket_names(dir),
                };
                names.into_iter().map(move |n| (n, port(i)))
            })
            .collect(),
    };
    let pw = hosts.iter().find_map(|(h, p)| lookup(&text, h, &p.to_string(), &db, &user))?;
    config.password(pw);
    None
}

/// A failed connection's error with what [`supply`] noted (a password file it ignored), and
/// the driver's "password missing" in words that say where a password comes from.
pub(crate) fn explain(
    e: Box<dyn Error + Send + Sync>,
    note: Option<&str>,
) -> Box<dyn Error + Send + Sync> {
    let mut chain = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        chain.push_str(&format!(": {s}"));
        source = s.source();
    }
    let e: Box<dyn Error + Send + Sync> = if chain.ends_with("password missing") {
        "the server asks for a password and none was given: put it in the password file \
         (~/.pgpass, or the file $PGPASSFILE names; a line host:port:database:user:password, \
         chmod 0600), or in $PGPASSWORD, rather than in the URL"
            .into()
    } else {
        e
    };
    match note {
        Some(note) => Box::new(Noted { note: note.to_string(), source: e }),
        None => e,
    }
}

/// An error and a note that explains it.
#[derive(Debug)]
struct Noted {
    note: String,
    source: Box<dyn Error + Send + Sync>,
}

impl std::fmt::Display for Noted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.note)
    }
}

impl Error for Noted {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// The names a socket directory has in a password file.
fn socket_names(dir: &Path) -> Vec<String> {
    let path = dir.to_string_lossy().trim_end_matches('/').to_string();
    let mut names = vec![path.clone()];
    if DEFAULT_SOCKET_DIRS.contains(&path.as_str()) {
        names.push("localhost".to_string());
    }
    names
}

/// The password of the first line of `text` that matches, if any.
fn lookup(text: &str, host: &str, port: &str, db: &str, user: &str) -> Option<String> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let raw = split(line.strip_suffix('\r').unwrap_or(line));
        if raw.len() < 5 {
            return None;
        }
        // As libpq: a field that is exactly `*` matches anything; `\*` is a literal star.
        let matches = |field: &str, wanted: &str| field == "*" || unescape(field) == wanted;
        [host, port, db, user]
            .iter()
            .zip(&raw)
            .all(|(wanted, field)| matches(field, wanted))
            .then(|| unescape(raw[4]))
    })
}

/// A line's fields as written, split at each `:` that is not escaped.
fn split(line: &str) -> Vec<&str> {
    let mut fields = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ':' => {
                fields.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    fields.push(&line[start..]);
    fields
}

/// A field with its escapes undone: `\x` is `x`.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(e) = chars.next() {
                out.push(e);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The user running this process: its name (the user the driver connects as when the URL
/// names none) and its home directory (`$HOME`, else the password database's).
struct Account {
    name: String,
    home: PathBuf,
}

impl Account {
    fn current() -> Option<Account> {
        let mut buf = vec![0u8; 16 * 1024];
        // SAFETY: an all-zero passwd is a valid value for getpwuid_r to fill in.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer points to memory of the size given, alive for the call;
        // getpwuid_r writes the entry's strings into `buf`.
        let rc = unsafe {
            libc::getpwuid_r(
                libc::geteuid(),
                &mut pw,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        let entry = (rc == 0 && !found.is_null()).then(|| {
            // SAFETY: getpwuid_r succeeded: pw_name and pw_dir are NUL-terminated strings
            // in `buf`, which outlives these borrows.
            let (name, dir) = unsafe { (CStr::from_ptr(pw.pw_name), CStr::from_ptr(pw.pw_dir)) };
            (name.to_string_lossy().into_owned(), PathBuf::from(dir.to_string_lossy().as_ref()))
        });
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| entry.as_ref().map(|e| e.1.clone()))?;
        let name = entry.map(|e| e.0).or_else(|| std::env::var("USER").ok())?;
        Some(Account { name, home })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r"# a comment
db.example:5432:lab:lab:first
db.example:*:*:lab:second
*:*:*:other:any\:one\\two
/run/sock:5433:lab:lab:socket
we\:ird:5432:lab:lab:escaped
";

    #[test]
    fn the_first_line_that_matches_wins_and_stars_match_anything() {
        assert_eq!(lookup(FILE, "db.example", "5432", "lab", "lab").as_deref(), Some("first"));
        assert_eq!(lookup(FILE, "db.example", "6543", "x", "lab").as_deref(), Some("second"));
        assert_eq!(lookup(FILE, "h", "1", "d", "other").as_deref(), Some(r"any:one\two"));
        assert_eq!(lookup(FILE, "/run/sock", "5433", "lab", "lab").as_deref(), Some("socket"));
        assert_eq!(lookup(FILE, "we:ird", "5432", "lab", "lab").as_deref(), Some("escaped"));
        assert_eq!(lookup(FILE, "elsewhere", "5432", "lab", "lab"), None);
        assert_eq!(lookup("# a:b:c:d:e\nshort:line\n", "#a", "b", "c", "d"), None);
    }

    #[test]
    fn an_escaped_star_is_a_star_not_a_wildcard() {
        let file = r"\*:5432:lab:lab:literal";
        assert_eq!(lookup(file, "db", "5432", "lab", "lab"), None);
    }

    #[test]
    fn a_socket_in_the_default_directory_is_also_localhost() {
        assert_eq!(
            socket_names(Path::new("/var/run/postgresql/")),
            ["/var/run/postgresql", "localhost"]
        );
        assert_eq!(socket_names(Path::new("/srv/pg")), ["/srv/pg"]);
    }
}
