//! The files a command writes when it is done (`--svg`, `--perfetto`, `--report`, `export -o`,
//! `mem --svg-dir`): claimed before anything is measured, written whole at the end.
//!
//! Checking permissions is not enough: root passes `access(2)` for any path, `/proc` and
//! `/sys` included, and then fails to write after minutes of measuring. So [`Output::claim`]
//! opens the file for writing (creating it, truncating nothing) at once: whatever would stop
//! the write stops the command now, with exit 2 and the path named. A path on a kernel
//! interface (proc, sysfs, tracefs, cgroup...) is refused even where root may open it: writing
//! a report there is never meant. A file the claim created is removed again when the command
//! fails before writing it, so no empty file is left behind.
//!
//! The write itself goes to a temporary file beside the output and is renamed over it, so a
//! failure never leaves half a file (devices such as `/dev/stdout` are written directly).

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::UsageError;

/// `statfs` magic numbers of the kernel's interfaces (linux/magic.h): proc, sysfs, debugfs,
/// tracefs, cgroup v1 and v2, securityfs, bpf, configfs, pstore, efivarfs.
const KERNEL_FS: &[(i64, &str)] = &[
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpf"),
    (0x6265_6570, "configfs"),
    (0x6165_676c, "pstore"),
    (0xde5e_81e4, "efivarfs"),
];

/// The kernel interface `path` (which exists) lives on, if it does.
fn kernel_fs(path: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `st` is plain data filled by statfs; `c` is a NUL-terminated path.
    let magic = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        st.f_type as i64
    };
    KERNEL_FS.iter().find(|(m, _)| *m == magic).map(|(_, name)| *name)
}

fn refuse(path: &Path, why: impl std::fmt::Display) -> anyhow::Error {
    UsageError(format!("cannot write {}: {why}", path.display())).into()
}

/// An output file, claimed: it can be written, and it exists (created empty if it did not).
#[derive(Debug)]
pub struct Output {
    path: PathBuf,
    /// The claim made the file: it is removed unless written.
    created: bool,
    /// Written in place rather than renamed over (a device, a FIFO).
    device: bool,
    written: bool,
}

impl Output {
    /// Opens `path` for writing now (creating it, keeping what it holds until the write).
    ///
    /// # Errors
    /// A [`UsageError`] naming the path: a directory, a kernel interface, or what the
    /// operating system said when opening it (no such directory, permission denied, a
    /// read-only file system...).
    pub fn claim(path: &Path) -> Result<Output> {
        if path.is_dir() {
            return Err(refuse(path, "it is a directory"));
        }
        let existed = path.symlink_metadata().is_ok();
        let file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| refuse(path, e))?;
        let created = !existed;
        let mut out = Output { path: path.into(), created, device: false, written: false };
        if let Some(fs) = kernel_fs(path) {
            // `out` is dropped here: a file the claim created goes again.
            return Err(refuse(
                path,
                format!("it is on {fs}, a kernel interface, not a place for files"),
            ));
        }
        let kind = file.metadata().map_err(|e| refuse(path, e))?.file_type();
        out.device = kind.is_char_device() || kind.is_fifo() || kind.is_socket();
        Ok(out)
    }

    /// The path as the user gave it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` as the whole file: beside it, then renamed over it (a device is written
    /// directly).
    ///
    /// # Errors
    /// When writing fails; the output is then as it was before the command.
    pub fn write(mut self, text: &str) -> Result<()> {
        let path = self.path.clone();
        if self.device {
            fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .with_context(|| format!("writing {}", path.display()))?;
        } else {
            let name =
                path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
            let written = fs::write(&tmp, text)
                .and_then(|()| fs::rename(&tmp, &path))
                .with_context(|| format!("writing {}", path.display()));
            if written.is_err() {
                let _ = fs::remove_file(&tmp);
            }
            written?;
        }
        self.written = true;
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if self.created && !self.written {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// An output directory (`mem --svg-dir`), claimed: created if needed and shown writable by
/// making a file in it; one the claim created is removed again if nothing was written to it.
#[derive(Debug)]
pub struct OutputDir {
    path: PathBuf,
    created: bool,
}

impl OutputDir {
    /// Creates `dir` if needed and checks that files can be made in it.
    ///
    /// # Errors
    /// A [`UsageError`] naming the directory.
    pub fn claim(dir: &Path) -> Result<OutputDir> {
        let created = !dir.exists();
        fs::create_dir_all(dir).map_err(|e| refuse(dir, e))?;
        let claimed = OutputDir { path: dir.into(), created };
        if let Some(fs) = kernel_fs(dir) {
            return Err(refuse(
                dir,
                format!("it is on {fs}, a kernel interface, not a place for files"),
            ));
        }
        let probe = dir.join(format!(".schedlab-write-test-{}", std::process::id()));
        fs::write(&probe, b"").map_err(|e| refuse(dir, e))?;
        let _ = fs::remove_file(&probe);
        Ok(claimed)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if self.created {
            // Fails, keeping it, once anything was written into it.
            let _ = fs::remove_dir(&self.path);
        }
    }
}
