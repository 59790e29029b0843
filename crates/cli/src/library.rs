//! The embedded `libschedlab_pthread.so` on disk: `schedlab exec` preloads it into a
//! program, and `schedlab run` names it to the `pthread-rt` probe rows
//! ([`library_for_probes`]). The library is built by this crate's build script (build.rs)
//! and embedded in the binary; it is written once per content hash to a private cache
//! directory (`SCHEDLAB_PTHREAD_LIB=/path.so` names another, for development).

use std::ffi::{CString, OsString};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// The library, as built by build.rs for this binary.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libschedlab_pthread.so"));
/// Its content hash (FNV-1a, build.rs), which names the cached copy.
const LIBRARY_HASH: &str = env!("SCHEDLAB_PTHREAD_HASH");

/// The library file to preload, and the directory to remove afterwards if it is a
/// temporary one.
pub struct Library {
    /// The file to preload.
    pub path: PathBuf,
    _tmp: Option<PrivateDir>,
}

/// For `schedlab run`: the library the `pthread-rt` rows preload, named in
/// `SCHEDLAB_PTHREAD_LIB` for the probes (crates/probes/src/threads/pthread.rs) unless the
/// user named one. Returns the guard that keeps a temporary copy alive, or `None` when no
/// copy could be written (those rows then skip and say why) or the machine cannot run it.
pub fn library_for_probes() -> Option<Library> {
    if std::env::var_os(schedlab_probes::threads::pthread::LIBRARY_ENV).is_some()
        || !schedlab_rt::fsgsbase_usable()
    {
        return None;
    }
    let lib = library().ok()?;
    // The binary is single-threaded here (no probe has run): nothing reads the
    // environment concurrently.
    std::env::set_var(schedlab_probes::threads::pthread::LIBRARY_ENV, &lib.path);
    Some(lib)
}

/// `SCHEDLAB_PTHREAD_LIB`, else the embedded library in the first private directory that
/// takes it: `$XDG_CACHE_HOME/schedlab` or `~/.cache/schedlab`, `$XDG_RUNTIME_DIR/schedlab`,
/// then a fresh `mkdtemp` directory under the system's temp dir, removed afterwards.
pub fn library() -> Result<Library> {
    if let Some(p) = std::env::var_os("SCHEDLAB_PTHREAD_LIB").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(p);
        if !path.is_file() {
            anyhow::bail!("SCHEDLAB_PTHREAD_LIB={}: no such file", path.display());
        }
        let path = path
            .canonicalize()
            .with_context(|| format!("SCHEDLAB_PTHREAD_LIB={}", path.display()))?;
        check_preloadable(&path)?;
        return Ok(Library { path, _tmp: None });
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = env("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| env("HOME").map(|h| h.join(".cache")))
        .map(|d| d.join("schedlab"));
    let runtime = env("XDG_RUNTIME_DIR").filter(|p| p.is_absolute()).map(|d| d.join("schedlab"));
    let mut tried = Vec::new();
    for dir in cache.into_iter().chain(runtime) {
        match cached_copy(&dir) {
            Ok(path) => return Ok(Library { path, _tmp: None }),
            Err(e) => tried.push(format!("{}: {e:#}", dir.display())),
        }
    }
    let tmp = PrivateDir::new(&std::env::temp_dir())
        .with_context(|| format!("no place to write the library ({})", tried.join("; ")))?;
    let path = write_copy(&tmp.path)?;
    Ok(Library { path, _tmp: Some(tmp) })
}

/// The cached copy in `dir` (made private, mode 0700), written if it is not there yet.
fn cached_copy(dir: &Path) -> Result<PathBuf> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.into()),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    if !meta.is_dir() || meta.uid() != uid {
        anyhow::bail!("not a directory of this user's");
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let path = dir.join(format!("libschedlab_pthread-{LIBRARY_HASH}.so"));
    if std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == LIBRARY.len() as u64) {
        check_preloadable(&path)?;
        return Ok(path);
    }
    write_copy(dir)
}

/// Writes the library into `dir` through a temporary file renamed into place, so a reader
/// (another `exec` at the same moment) never sees a partial file.
fn write_copy(dir: &Path) -> Result<PathBuf> {
    let path = dir.join(format!("libschedlab_pthread-{LIBRARY_HASH}.so"));
    check_preloadable(&path)?;
    let tmp = dir.join(format!(".libschedlab_pthread-{LIBRARY_HASH}.{}.tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o700)
            .open(&tmp)?;
        f.write_all(LIBRARY)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(path)
}

/// `LD_PRELOAD` splits its value at spaces and colons: a path with either cannot be given.
fn check_preloadable(path: &Path) -> Result<()> {
    if path.as_os_str().as_bytes().iter().any(|&b| b == b' ' || b == b':') {
        anyhow::bail!(
            "{} contains a space or a colon, which LD_PRELOAD cannot carry",
            path.display()
        );
    }
    Ok(())
}

/// A directory made by `mkdtemp` (mode 0700) under `parent`, removed with its contents
/// when dropped.
pub struct PrivateDir {
    /// The directory.
    pub path: PathBuf,
}

impl PrivateDir {
    /// Makes one under `parent`.
    pub fn new(parent: &Path) -> Result<PrivateDir> {
        let template = parent.join("schedlab-exec-XXXXXX");
        let mut buf = CString::new(template.as_os_str().as_bytes())
            .context("a temporary directory's name")?
            .into_bytes_with_nul();
        // SAFETY: a writable NUL-terminated template ending in XXXXXX.
        let p = unsafe { libc::mkdtemp(buf.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("creating a directory in {}", parent.display()));
        }
        buf.pop();
        let path = PathBuf::from(<OsString as std::os::unix::ffi::OsStringExt>::from_vec(buf));
        Ok(PrivateDir { path })
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
