//! A throwaway PostgreSQL server for tests: `initdb` in a temporary directory, listening on
//! a Unix socket only (no TCP port), password authentication, stopped and removed when the
//! [`PgServer`] is dropped — also when the test fails (unwinding drops it).
//!
//! [`PgServer::start_tls`] makes one that also listens on 127.0.0.1 with `ssl=on` and the
//! certificate and key it is given, and accepts TCP connections only over TLS (`hostssl`).
//!
//! As root (CI) the cluster runs as an unprivileged user (`postgres` when Debian's package
//! made one, else `nobody`): PostgreSQL refuses to run as root. Where no `initdb`/`pg_ctl`
//! can be found (Debian's `postgresql` package puts them in /usr/lib/postgresql/*/bin),
//! [`PgServer::start`] returns the reason, and the tests print it and skip.

#![allow(dead_code)]

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The superuser the cluster is made with.
pub const USER: &str = "schedlab";
/// Its password.
pub const PASSWORD: &str = "s3cret-fleet-pw";

/// A running throwaway cluster.
pub struct PgServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    /// The TCP port on 127.0.0.1, for a server started with [`PgServer::start_tls`].
    pub port: Option<u16>,
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`: `$PG_BINDIR`, the newest
/// /usr/lib/postgresql/*/bin, one on `$PATH`, or the one `pg_config --bindir` names.
fn bindir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("PG_BINDIR").map(PathBuf::from) {
        return Some(d);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, b)| b.join("initdb").exists() && b.join("pg_ctl").exists())
        .collect();
    versions.sort();
    if let Some((_, b)) = versions.pop() {
        return Some(b);
    }
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
    });
    if on_path.is_some() {
        return on_path;
    }
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let b = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (b.join("initdb").exists() && b.join("pg_ctl").exists()).then_some(b)
}

/// The uid and gid of `name` from /etc/passwd.
fn user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

fn chown_tree(path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))?;
    if path.is_dir() {
        for e in std::fs::read_dir(path)? {
            chown_tree(&e?.path(), uid, gid)?;
        }
    }
    Ok(())
}

impl PgServer {
    /// Makes and starts a cluster, or says why none can be.
    pub fn start() -> Result<PgServer, String> {
        PgServer::start_with(None)
    }

    /// Makes and starts a cluster that also listens on 127.0.0.1 (its port in
    /// [`PgServer::port`]) with TLS on, `cert_pem` and `key_pem` as its certificate and key;
    /// TCP connections without TLS are rejected. Or says why none can be.
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> Result<PgServer, String> {
        PgServer::start_with(Some((cert_pem, key_pem)))
    }

    fn start_with(tls: Option<(&str, &str)>) -> Result<PgServer, String> {
        let bin = bindir().ok_or(
            "no initdb/pg_ctl found (install Debian's `postgresql` package, or set PG_BINDIR)",
        )?;
        let root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
        let owner = if root {
            Some(user_ids("postgres").or_else(|| user_ids("nobody")).ok_or(
                "running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as",
            )?)
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix("schedlab-pg-")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        std::fs::write(dir.path().join("pw"), PASSWORD).map_err(|e| e.to_string())?;
        std::fs::create_dir(dir.path().join("sock")).map_err(|e| e.to_string())?;
        if let Some((cert, key)) = tls {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(dir.path().join("server.crt"), cert).map_err(|e| e.to_string())?;
            let key_file = dir.path().join("server.key");
            std::fs::write(&key_file, key).map_err(|e| e.to_string())?;
            // PostgreSQL refuses a key that others can read.
            std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
        }
        let port = match tls {
            // A port free a moment ago; another process taking it in between fails the start.
            Some(_) => Some(
                std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .map_err(|e| format!("no free TCP port on 127.0.0.1: {e}"))?
                    .port(),
            ),
            None => None,
        };
        if let Some((uid, gid)) = owner {
            chown_tree(dir.path(), uid, gid).map_err(|e| format!("chown: {e}"))?;
        }
        let server = PgServer { dir, bin, owner, port };
        let data = server.dir.path().join("data");
        let o = server
            .cmd("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "-E", "UTF8", "--no-sync", "--auth-local=scram-sha-256"])
            .arg(if tls.is_some() { "--auth-host=scram-sha-256" } else { "--auth-host=reject" })
            .arg("--pwfile")
            .arg(server.dir.path().join("pw"))
            .output()
            .map_err(|e| format!("cannot run initdb: {e}"))?;
        if !o.status.success() {
            return Err(format!("initdb failed: {}", String::from_utf8_lossy(&o.stderr)));
        }
        if tls.is_some() {
            // TCP only over TLS: `host` lines become `hostssl` (the file keeps its owner).
            let hba = data.join("pg_hba.conf");
            let conf = std::fs::read_to_string(&hba).map_err(|e| e.to_string())?;
            let conf: String = conf
                .lines()
                .map(|l| match l.strip_prefix("host ") {
                    Some(rest) => format!("hostssl {rest}\n"),
                    None => format!("{l}\n"),
                })
                .collect();
            std::fs::write(&hba, conf).map_err(|e| e.to_string())?;
        }
        server.pg_ctl_start()?;
        Ok(server)
    }

    fn cmd(&self, tool: &str) -> Command {
        let mut c = Command::new(self.bin.join(tool));
        c.stdin(Stdio::null()).env("LC_ALL", "C");
        if let Some((uid, gid)) = self.owner {
            c.uid(uid).gid(gid);
        }
        c
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let sock = self.dir.path().join("sock");
        let listen = match self.port {
            Some(port) => {
                let d = self.dir.path();
                format!(
                    "-c listen_addresses=127.0.0.1 -p {port} -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                    d.join("server.crt").display(),
                    d.join("server.key").display()
                )
            }
            None => "-c listen_addresses=''".to_string(),
        };
        let o = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .arg("-o")
            .arg(format!("{listen} -k {} -c fsync=off -c max_connections=40", sock.display()))
            .args(["-w", "-t", "60", "start"])
            .stdout(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
        if !o.status.success() {
            let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
            return Err(format!(
                "pg_ctl start failed: {}\n{log}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        Ok(())
    }

    /// The server stopped at once, as by a crash (`pg_ctl stop -m immediate`: every backend
    /// quits without finishing its transaction).
    pub fn kill(&self) {
        let _ = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Starts the server again after [`PgServer::kill`].
    pub fn restart(&self) {
        self.pg_ctl_start().expect("the server starts again");
    }

    /// The URL of database `db` for `user:password`.
    pub fn url_as(&self, user: &str, password: &str, db: &str) -> String {
        // The socket's name carries the port (`.s.PGSQL.PORT`).
        let port = self.port.map_or(String::new(), |p| format!("&port={p}"));
        format!(
            "postgres://{user}:{password}@localhost/{db}?host={}{port}",
            self.dir.path().join("sock").display()
        )
    }

    /// The URL of database `db` for the superuser over TCP to 127.0.0.1 (a server started
    /// with [`PgServer::start_tls`]), connecting as to `host` (the name a certificate is
    /// checked against), with `options` (`sslmode=...`) appended.
    pub fn tcp_url(&self, host: &str, db: &str, options: &str) -> String {
        let port = self.port.expect("a server started with start_tls");
        format!("postgres://{USER}:{PASSWORD}@{host}:{port}/{db}?hostaddr=127.0.0.1&{options}")
    }

    /// The URL of database `db` for the superuser.
    pub fn url(&self, db: &str) -> String {
        self.url_as(USER, PASSWORD, db)
    }

    /// A new empty database called `name`; returns its URL.
    pub fn create_db(&self, name: &str) -> String {
        let mut c = self.client("postgres");
        c.batch_execute(&format!("CREATE DATABASE {name}")).expect("CREATE DATABASE");
        self.url(name)
    }

    /// A plain client of database `db`, as the superuser.
    pub fn client(&self, db: &str) -> postgres::Client {
        postgres::Client::connect(&self.url(db), postgres::NoTls)
            .expect("connect to the test server")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The server, or `None` after printing why the test skips.
pub fn server_or_skip(test: &str) -> Option<PgServer> {
    match PgServer::start() {
        Ok(s) => Some(s),
        Err(why) => {
            eprintln!("skipping {test}: no PostgreSQL server can be started here: {why}");
            None
        }
    }
}

/// A server that accepts connections on 127.0.0.1 and never says a word (nor closes them):
/// its port. The listener lives as long as the process.
pub fn mute_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    port
}

/// The pid of the server process (backend) serving connections of `application`.
pub fn backend_of(server: &PgServer, db: &str, application: &str) -> i32 {
    let rows = server
        .client(db)
        .query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", &[&application])
        .unwrap();
    assert_eq!(rows.len(), 1, "one connection of {application}");
    rows[0].get(0)
}

/// A process stopped with SIGSTOP until this is dropped (then SIGCONT), as a server that
/// stops answering: the kernel keeps its sockets open and acknowledges what is sent to it.
pub struct Stopped(pub i32);

impl Stopped {
    pub fn new(pid: i32) -> Stopped {
        // SAFETY: kill only sends a signal, to a process of the test's own server.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0, "SIGSTOP {pid}");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// Runs `f` on another thread and returns what it returns; a hang guard, not a timing
/// assertion: panics if it has not returned within `guard`.
pub fn within<T: Send + 'static>(
    guard: std::time::Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(guard).expect("it hung: no return within the hang guard")
}
