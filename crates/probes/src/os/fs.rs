//! File throughput through the page cache: UnixBench's `fstime` (the "File Copy" rows of the
//! index, and its separate read and write passes), plus the scratch-file helpers the other OS
//! probes share (`mm`, `select`).
//!
//! # What fstime does, and what we mirror
//! `fstime -w|-r|-c -b BUFSIZE -m MAXBLOCKS` works on a file of MAXBLOCKS KiB, i.e.
//! `max_buffs = MAXBLOCKS * 1024 / BUFSIZE` blocks (2000 in each of the three index rows:
//! 256/500, 1024/2000, 4096/8000), from a static buffer filled with `i & 0xff`:
//! - write: `write()` BUFSIZE bytes `max_buffs` times, then `lseek(0)`, again and again;
//! - read: `read()` BUFSIZE bytes until a read comes back short (end of file), then `lseek(0)`;
//! - copy: `read()` from the first file and `write()` the block to the second; at the end of the
//!   first file rewind both. Only bytes moved count (once per block for copy).
//!
//! fstime runs each pass for a fixed time and reports KiB/s; we run the same loop for the
//! sampler's iteration count, one iteration = one block (one `read`+`write` for copy), and
//! report MiB/s (fstime's score / 1024). The position in the file carries over from one call
//! of the timed body to the next, as fstime's loop runs on without stopping.
//!
//! Deliberate differences: fstime creates its files empty before each pass (`creat`) and
//! syncs and sleeps 2 s twice before timing; we fill every file completely in setup (so the
//! timed loop always overwrites cached pages, fstime's steady state after its first pass) and
//! `fsync` once, without sleeping. Neither fstime nor we `fsync` inside the timed loop: on any
//! machine with memory to spare this measures the page cache and the system-call path, not
//! the disk, whatever `--tmp-dir` points at.
//!
//! # Synchronous writes: `sync=osync|dsync`
//! Seed 002 explains FreeBSD's poor fstime write figures by its synchronous writes of
//! directory and metadata updates, which no page-cache row can show. `sync=osync` opens the
//! file(s) written `O_SYNC` (every `write` returns once data and metadata, the changed mtime
//! included, are on stable storage: a journal commit on ext4), `sync=dsync` `O_DSYNC` (data,
//! and only the metadata needed to read it back: an overwrite in place skips the journal).
//! Their difference is the synchronous metadata write the seed's finding is about. The
//! descriptor is reopened through `/proc/self/fd` after the fill, so setup stays fast. These
//! rows measure the storage under `--tmp-dir` (the notes name its file system: on tmpfs
//! both flags do nothing).
//!
//! # Scratch files
//! [`scratch_file`] creates a uniquely named file in the user's temporary directory and
//! unlinks it at once: the open descriptor keeps the data alive until the probe drops it, and
//! nothing is left behind even if the process is killed outright.

use std::ffi::CString;
use std::fs::File;
use std::hint::black_box;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::{interrupt, sys, ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe, Suite};

/// A file created for a probe and already unlinked: only the descriptor keeps it alive.
#[derive(Debug)]
pub(crate) struct Scratch {
    /// The open file.
    pub(crate) file: File,
    /// The name it had (no longer exists); the tests check that it is gone.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) name: PathBuf,
}

/// Distinguishes scratch files of one process.
static NEXT_SCRATCH: AtomicU64 = AtomicU64::new(0);

/// Creates `schedlab-<tag>-<pid>-<n>` in `dir` with `access` (`O_RDWR` or `O_RDONLY`),
/// close-on-exec, then unlinks the name.
///
/// # Errors
/// Skip when `dir` is missing, read-only or not ours to write; Failed otherwise.
pub(crate) fn scratch_file(
    dir: &Path,
    tag: &str,
    access: libc::c_int,
) -> Result<Scratch, ProbeError> {
    let n = NEXT_SCRATCH.fetch_add(1, Ordering::Relaxed);
    let name = dir.join(format!("schedlab-{tag}-{}-{n}", std::process::id()));
    let c = CString::new(name.as_os_str().as_bytes())
        .map_err(|_| ProbeError::Failed(format!("--tmp-dir {} contains a NUL", dir.display())))?;
    let flags = access | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` is a valid NUL-terminated path; open with O_CREAT reads the mode argument.
    let fd = unsafe { libc::open(c.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOENT | libc::ENOTDIR) => {
                ProbeError::Skip(format!("needs a writable --tmp-dir ({}: {err})", dir.display()))
            }
            _ => ProbeError::io(&format!("create {}", name.display()), err),
        });
    }
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    // Unlink now: from here on the file lives exactly as long as the descriptor.
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::unlink(c.as_ptr()) } != 0 {
        return Err(ProbeError::last_os(&format!("unlink {}", name.display())));
    }
    Ok(Scratch { file, name })
}

/// Writes `total` bytes of fstime's pattern (`i & 0xff` within each block) to `file` from
/// offset 0 in `block`-byte writes, then `fsync`s it so the pages are cached and clean.
///
/// The block size matters beyond speed: it decides the size of the page-cache folios the
/// file system allocates (see `mm.rs`).
///
/// # Errors
/// Skip when the file system is full; Interrupted when the user asked to stop; Failed on
/// other errors.
pub(crate) fn fill(file: &File, total: usize, block: usize) -> Result<(), ProbeError> {
    let fd = file.as_raw_fd();
    let buf: Vec<u8> = (0..block).map(|i| i as u8).collect();
    // SAFETY: lseek on an open descriptor.
    if unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } != 0 {
        return Err(ProbeError::last_os("lseek"));
    }
    let mut done = 0;
    while done < total {
        if interrupt::requested() {
            return Err(ProbeError::Interrupted);
        }
        let n = block.min(total - done);
        if let Err(e) = sys::write_all(fd, &buf[..n]) {
            if e.raw_os_error() == Some(libc::ENOSPC) {
                return Err(ProbeError::Skip(format!(
                    "needs {} KiB free in --tmp-dir",
                    total.div_ceil(1024)
                )));
            }
            return Err(ProbeError::io("write (filling scratch file)", e));
        }
        done += n;
    }
    file.sync_all().map_err(|e| ProbeError::io("fsync", e))
}

/// A short name for the file system that holds `dir`, for notes: `ext2/3/4`, `tmpfs`...
pub(crate) fn fs_type(dir: &Path) -> String {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else { return "?".into() };
    // SAFETY: statfs is plain data; all-zero is valid.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` a writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return "?".into();
    }
    #[allow(clippy::unnecessary_cast)] // f_type is i64 on some targets, u32 on others
    let magic = st.f_type as i64;
    fs_name(magic)
}

/// Maps a `statfs` magic number to a name. Pure.
fn fs_name(magic: i64) -> String {
    match magic {
        0xEF53 => "ext2/3/4",
        0x0102_1994 => "tmpfs",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0x2FC1_2FC1 => "zfs",
        0xF2F5_2010 => "f2fs",
        0x8584_58F6 => "ramfs",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        _ => return format!("0x{magic:x}"),
    }
    .to_string()
}

/// Synchronous writes for the passes that write (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyncMode {
    None,
    /// `O_SYNC`: data and all metadata.
    OSync,
    /// `O_DSYNC`: data, and metadata only where needed to read it.
    DSync,
}

impl SyncMode {
    fn from_params(p: &Params, pass: Pass) -> Result<SyncMode, ProbeError> {
        let sync = match p.get("sync").unwrap_or("none") {
            "none" => SyncMode::None,
            "osync" => SyncMode::OSync,
            "dsync" => SyncMode::DSync,
            other => {
                return Err(ProbeError::Failed(format!(
                    "bad sync {other:?}: use none, osync or dsync"
                )))
            }
        };
        if sync != SyncMode::None && pass == Pass::Read {
            return Err(ProbeError::Failed("sync applies to the write and copy passes".into()));
        }
        Ok(sync)
    }

    fn key(self) -> &'static str {
        match self {
            SyncMode::None => "none",
            SyncMode::OSync => "osync",
            SyncMode::DSync => "dsync",
        }
    }

    fn flag(self) -> libc::c_int {
        match self {
            SyncMode::None => 0,
            SyncMode::OSync => libc::O_SYNC,
            SyncMode::DSync => libc::O_DSYNC,
        }
    }
}

/// A second open file description of `file`, read-write with `extra` flags, through
/// `/proc/self/fd` (works for an unlinked file).
fn reopen(file: &File, extra: libc::c_int) -> Result<File, ProbeError> {
    let path = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL");
    // SAFETY: `path` is a valid NUL-terminated path; no O_CREAT, so no mode argument.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC | extra) };
    if fd < 0 {
        return Err(ProbeError::last_os("reopen through /proc/self/fd"));
    }
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// The three passes of fstime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Write,
    Read,
    Copy,
}

struct FsProbe(Pass);

/// The file-system probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Pass::Write, Pass::Read, Pass::Copy]
        .into_iter()
        .map(|p| Box::new(FsProbe(p)) as Box<dyn Probe>)
        .collect()
}

/// UnixBench's index rows: (bufsize, maxblocks). Each gives 2000 blocks per file pass.
const ROWS: [(usize, usize); 3] = [(1024, 2000), (256, 500), (4096, 8000)];

/// fstime's static buffer is `char buf[MAX_BUFSIZE]`: the largest block it accepts.
const MAX_BUFSIZE: usize = 8192;

/// fstime's own limits: bufsize from COUNTSIZE (256) to MAX_BUFSIZE, at most 1 Mi blocks.
fn parse_geometry(params: &Params) -> Result<(usize, usize), ProbeError> {
    let bufsize: usize = params.parse_or("bufsize", 1024).map_err(ProbeError::Failed)?;
    let default_blocks = ROWS.iter().find(|r| r.0 == bufsize).map_or(2000, |r| r.1);
    let maxblocks: usize =
        params.parse_or("maxblocks", default_blocks).map_err(ProbeError::Failed)?;
    if !(256..=MAX_BUFSIZE).contains(&bufsize) {
        return Err(ProbeError::Failed(format!(
            "bufsize {bufsize} out of fstime's range 256..={MAX_BUFSIZE}"
        )));
    }
    if !(1..=1 << 20).contains(&maxblocks) {
        return Err(ProbeError::Failed(format!("maxblocks {maxblocks} out of range 1..=1048576")));
    }
    if maxblocks * 1024 < bufsize {
        return Err(ProbeError::Failed(format!(
            "maxblocks {maxblocks} KiB holds no {bufsize}-byte block"
        )));
    }
    Ok((bufsize, maxblocks))
}

impl Probe for FsProbe {
    fn info(&self) -> Info {
        let (id, doc, mirrors) = match self.0 {
            Pass::Write => (
                "os.fs.write",
                "write() of bufsize-byte blocks over a cached file of maxblocks KiB, rewinding at its end (page cache, no fsync)",
                "UnixBench fstime -w (KiB/s there, MiB/s here; file pre-filled and fsynced once in setup, no 2 s settle sleeps)",
            ),
            Pass::Read => (
                "os.fs.read",
                "read() of bufsize-byte blocks from a cached file of maxblocks KiB, rewinding at end of file (page cache)",
                "UnixBench fstime -r (KiB/s there, MiB/s here; file pre-filled and fsynced once in setup, no 2 s settle sleeps)",
            ),
            Pass::Copy => (
                "os.fs.copy",
                "read() a block from one cached file and write() it to another, rewinding both at end of file (page cache)",
                "UnixBench fstime -c, the index's File Copy rows (KiB/s there, MiB/s here; both files pre-filled and fsynced in setup)",
            ),
        };
        let mirrors = match self.0 {
            Pass::Read => mirrors,
            // The writing passes also take sync=osync|dsync.
            Pass::Write => "UnixBench fstime -w (KiB/s there, MiB/s here; file pre-filled and fsynced once in setup, no 2 s settle sleeps); sync=osync|dsync: O_SYNC / O_DSYNC writes, the synchronous writes behind seed 002's FreeBSD finding",
            Pass::Copy => "UnixBench fstime -c, the index's File Copy rows (KiB/s there, MiB/s here; both files pre-filled and fsynced in setup); sync=osync|dsync: the destination written O_SYNC / O_DSYNC",
        };
        Info { id, doc, unit: Unit::MibPerSec, mirrors, requires: "a writable --tmp-dir" }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let row = |(b, m): (usize, usize)| Params::new().with("bufsize", b).with("maxblocks", m);
        let mut v = match suite {
            Suite::Smoke | Suite::Quick => vec![row(ROWS[0])],
            // The order of UnixBench's index: 1024/2000, 256/500, 4096/8000.
            Suite::Full => ROWS.into_iter().map(row).collect(),
        };
        let synced = |sync: SyncMode| row(ROWS[0]).with("sync", sync.key());
        match (self.0, suite) {
            (Pass::Read, _) => {}
            (Pass::Write, Suite::Smoke) => v.push(synced(SyncMode::OSync)),
            (Pass::Write, _) => v.extend([synced(SyncMode::OSync), synced(SyncMode::DSync)]),
            (Pass::Copy, Suite::Full) => {
                v.extend([synced(SyncMode::OSync), synced(SyncMode::DSync)])
            }
            (Pass::Copy, _) => {}
        }
        v
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let (bufsize, maxblocks) = parse_geometry(params)?;
        let sync = SyncMode::from_params(params, self.0)?;
        let max_buffs = maxblocks * 1024 / bufsize;
        let file_bytes = max_buffs * bufsize;
        let src = scratch_file(&ctx.tmp_dir, "fstime0", libc::O_RDWR)?;
        fill(&src.file, file_bytes, bufsize)?;
        let dst = match self.0 {
            Pass::Copy => {
                let dst = scratch_file(&ctx.tmp_dir, "fstime1", libc::O_RDWR)?;
                fill(&dst.file, file_bytes, bufsize)?;
                Some(match sync {
                    SyncMode::None => dst.file,
                    _ => reopen(&dst.file, sync.flag())?,
                })
            }
            _ => None,
        };
        // The write pass writes to its one file: reopen it synchronous.
        let src = match (self.0, sync) {
            (Pass::Write, SyncMode::OSync | SyncMode::DSync) => reopen(&src.file, sync.flag())?,
            _ => src.file,
        };
        let mut buf = Box::new(Block([0; MAX_BUFSIZE]));
        for (i, b) in buf.0.iter_mut().enumerate() {
            *b = i as u8;
        }
        let fs = Fstime {
            pass: self.0,
            sync,
            src,
            dst,
            buf,
            bufsize,
            max_buffs,
            block: 0,
            fs: fs_type(&ctx.tmp_dir),
        };
        fs.rewind()?;
        Ok(Box::new(fs))
    }
}

/// fstime's static buffer; page-aligned like a static array usually is (fstime notes that a
/// malloc'd buffer made 4 KiB reads 50% slower on one system).
#[repr(C, align(4096))]
struct Block([u8; MAX_BUFSIZE]);

struct Fstime {
    pass: Pass,
    sync: SyncMode,
    src: File,
    /// The copy destination (copy pass only).
    dst: Option<File>,
    buf: Box<Block>,
    bufsize: usize,
    /// Blocks per file pass (fstime's `max_buffs`).
    max_buffs: usize,
    /// Blocks written since the last rewind (write pass).
    block: usize,
    fs: String,
}

impl Fstime {
    /// `lseek(0)` on the file(s), as fstime does at the end of a pass.
    fn rewind(&self) -> Result<(), ProbeError> {
        for f in std::iter::once(&self.src).chain(self.dst.as_ref()) {
            // SAFETY: lseek on an open descriptor.
            if unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_SET) } != 0 {
                return Err(ProbeError::last_os("lseek"));
            }
        }
        Ok(())
    }

    /// Reads one full block, rewinding at end of file as fstime does (a short read means the
    /// end; with files a whole number of blocks long it is the 0-byte read at EOF).
    #[inline]
    fn read_block(&mut self) -> Result<(), ProbeError> {
        let fd = self.src.as_raw_fd();
        let mut rewinds = 0;
        loop {
            // SAFETY: `buf` has room for `bufsize` <= MAX_BUFSIZE bytes.
            let n = unsafe { libc::read(fd, self.buf.0.as_mut_ptr().cast(), self.bufsize) };
            if n == self.bufsize as isize {
                return Ok(());
            }
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted && !interrupt::requested() {
                    continue;
                }
                return Err(ProbeError::io("read", e));
            }
            rewinds += 1;
            if rewinds > 1 {
                return Err(ProbeError::Failed("scratch file shorter than one block".into()));
            }
            self.rewind()?;
            if interrupt::requested() {
                return Err(ProbeError::Interrupted);
            }
        }
    }

    #[inline]
    fn write_block(&self, fd: libc::c_int) -> Result<(), ProbeError> {
        // SAFETY: `buf` holds at least `bufsize` <= MAX_BUFSIZE readable bytes.
        let n = unsafe { libc::write(fd, black_box(self.buf.0.as_ptr()).cast(), self.bufsize) };
        if n != self.bufsize as isize {
            if n < 0 {
                return Err(ProbeError::last_os("write"));
            }
            return Err(ProbeError::Failed(format!("short write: {n} of {}", self.bufsize)));
        }
        Ok(())
    }

    fn body(&mut self, iters: u64) -> Result<(), ProbeError> {
        match self.pass {
            Pass::Write => {
                let fd = self.src.as_raw_fd();
                for _ in 0..iters {
                    if self.block == self.max_buffs {
                        self.rewind()?;
                        self.block = 0;
                        if interrupt::requested() {
                            return Err(ProbeError::Interrupted);
                        }
                    }
                    self.write_block(fd)?;
                    self.block += 1;
                }
            }
            Pass::Read => {
                for _ in 0..iters {
                    self.read_block()?;
                }
                black_box(&self.buf.0[..self.bufsize]);
            }
            Pass::Copy => {
                let fd = self.dst.as_ref().map_or(-1, |f| f.as_raw_fd());
                for _ in 0..iters {
                    self.read_block()?;
                    self.write_block(fd)?;
                }
            }
        }
        Ok(())
    }
}

impl Workload for Fstime {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let mut result = Ok(());
        let t = Timing::measure(|| result = self.body(iters));
        result.map(|()| t)
    }
}

impl Instance for Fstime {
    fn metric(&self) -> Metric {
        Metric::bandwidth(self.bufsize as f64)
    }

    fn notes(&self) -> Params {
        Params::new()
            .with("file_kib", self.max_buffs * self.bufsize / 1024)
            .with("blocks_per_pass", self.max_buffs)
            .with("fs", &self.fs)
            .with("fsync", "setup_only")
            .with("measures", if self.sync == SyncMode::None { "page_cache" } else { "storage" })
            .with(
                "open_flags",
                match self.sync {
                    SyncMode::None => "-",
                    SyncMode::OSync => "O_SYNC",
                    SyncMode::DSync => "O_DSYNC",
                },
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::clock::Calibration;
    use schedlab_measure::sampler::{self, Settings};

    #[test]
    fn geometry_defaults_follow_the_unixbench_rows() {
        let p = |s: &str| Params::from_key(s);
        assert_eq!(parse_geometry(&p("")).unwrap(), (1024, 2000));
        assert_eq!(parse_geometry(&p("bufsize=256")).unwrap(), (256, 500));
        assert_eq!(parse_geometry(&p("bufsize=4096")).unwrap(), (4096, 8000));
        assert_eq!(parse_geometry(&p("bufsize=2048,maxblocks=10")).unwrap(), (2048, 10));
        assert!(parse_geometry(&p("bufsize=100")).is_err());
        assert!(parse_geometry(&p("bufsize=16384")).is_err());
        assert!(parse_geometry(&p("bufsize=1024,maxblocks=0")).is_err());
        assert!(parse_geometry(&p("bufsize=x")).is_err());
        // Every index row is 2000 blocks per pass, as in fstime.
        for (b, m) in ROWS {
            assert_eq!(m * 1024 / b, 2000);
        }
    }

    #[test]
    fn scratch_files_are_unlinked_at_once() {
        let dir = std::env::temp_dir();
        let s = scratch_file(&dir, "test", libc::O_RDWR).unwrap();
        assert!(!s.name.exists(), "{} still has a name", s.name.display());
        fill(&s.file, 10_000, 4096).unwrap();
        assert_eq!(s.file.metadata().unwrap().len(), 10_000);
    }

    #[test]
    fn a_missing_tmp_dir_is_a_skip() {
        let e = scratch_file(Path::new("/nonexistent/schedlab"), "t", libc::O_RDWR).unwrap_err();
        assert!(matches!(e, ProbeError::Skip(ref m) if m.contains("--tmp-dir")), "{e}");
    }

    #[test]
    fn fs_names_are_readable() {
        assert_eq!(fs_name(0xEF53), "ext2/3/4");
        assert_eq!(fs_name(0x0102_1994), "tmpfs");
        assert_eq!(fs_name(0x1234), "0x1234");
        assert_ne!(fs_type(&std::env::temp_dir()), "?");
    }

    /// The passes move real data: after copying a whole pass, the destination holds the
    /// source's bytes, and the files leave no names behind.
    #[test]
    fn passes_run_and_copy_moves_the_data() {
        let dir = std::env::temp_dir().join(format!("schedlab-fs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ctx = Context { tmp_dir: dir.clone(), ..Context::for_tests() };
        let params = Params::from_key("bufsize=256,maxblocks=4");
        for pass in [Pass::Write, Pass::Read, Pass::Copy] {
            let mut inst = FsProbe(pass).setup(&params, &ctx).unwrap();
            let metric = inst.metric();
            // 16 blocks per pass: run across several rewinds.
            let c = sampler::collect_in(
                &mut *inst,
                &Settings { fixed_iters: Some(40), ..Settings::smoke() },
                &Calibration::zero(),
                metric,
                Unit::MibPerSec,
            )
            .unwrap();
            assert!(c.samples.iter().all(|s| s.value > 0.0 && s.value.is_finite()));
            drop(inst);
        }
        // Copy semantics, checked directly on an instance.
        let src = scratch_file(&dir, "t0", libc::O_RDWR).unwrap();
        let dst = scratch_file(&dir, "t1", libc::O_RDWR).unwrap();
        fill(&src.file, 4096, 256).unwrap();
        let mut buf = Box::new(Block([0; MAX_BUFSIZE]));
        buf.0[..256].fill(0xAA);
        let mut f = Fstime {
            pass: Pass::Copy,
            sync: SyncMode::None,
            src: src.file,
            dst: Some(dst.file),
            buf,
            bufsize: 256,
            max_buffs: 16,
            block: 0,
            fs: String::new(),
        };
        f.body(16).unwrap();
        let mut got = vec![0u8; 4096];
        // SAFETY: `got` is a writable buffer of the length passed.
        let n = unsafe {
            libc::pread(f.dst.as_ref().unwrap().as_raw_fd(), got.as_mut_ptr().cast(), 4096, 0)
        };
        assert_eq!(n, 4096);
        assert!(got.chunks(256).all(|c| c.iter().enumerate().all(|(i, &b)| b == i as u8)));
        drop(f);
        // Nothing left in the directory: every scratch file was unlinked.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }

    /// The synchronous variants really open their written file O_SYNC / O_DSYNC, still write
    /// the data, and refuse the read pass.
    #[test]
    fn sync_variants_write_synchronously() {
        let ctx = Context::for_tests();
        for (sync, flag) in [("osync", libc::O_SYNC), ("dsync", libc::O_DSYNC)] {
            for pass in [Pass::Write, Pass::Copy] {
                let params = Params::from_key(&format!("bufsize=1024,maxblocks=8,sync={sync}"));
                let mut inst = FsProbe(pass).setup(&params, &ctx).unwrap();
                inst.run(10).unwrap();
                assert!(inst.notes().get("measures").unwrap().starts_with("storage"));
                drop(inst);
                // The flag reaches the descriptor: checked on a reopened scratch file.
                let s = scratch_file(&ctx.tmp_dir, "synctest", libc::O_RDWR).unwrap();
                let f = reopen(&s.file, flag).unwrap();
                // SAFETY: F_GETFL on an open descriptor.
                let fl = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
                assert_eq!(fl & flag, flag, "{sync}: flags {fl:#x}");
            }
        }
        let e = FsProbe(Pass::Read).setup(&Params::from_key("sync=osync"), &ctx).err();
        assert!(matches!(e, Some(ProbeError::Failed(_))), "{e:?}");
        assert!(FsProbe(Pass::Write).setup(&Params::from_key("sync=maybe"), &ctx).is_err());
    }

    /// The full suite's rows (up to 8000 KiB per file) set up, run and clean up.
    #[test]
    fn full_suite_rows_run() {
        let ctx = Context { suite: Suite::Full, ..Context::for_tests() };
        let probe = FsProbe(Pass::Copy);
        // The three index rows, then the synchronous destination twice.
        assert_eq!(probe.variants(Suite::Full).len(), 5);
        for params in probe.variants(Suite::Full) {
            let mut inst = probe.setup(&params, &ctx).unwrap();
            // Past a rewind (2000 blocks); synchronous writes take far longer each.
            let iters = if params.get("sync").is_some() { 20 } else { 2500 };
            inst.run(iters).unwrap_or_else(|e| panic!("{params}: {e}"));
        }
    }
}
