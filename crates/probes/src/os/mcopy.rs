//! `os.fs.mcopy`: the `mcopy` row of seed 002's UnixBench table, "code adapted from W. R.
//! Stevens and S. A. Rago's *Advanced Programming in the UNIX Environment*", which copies a
//! file through memory mappings (APUE figure 14.27).
//!
//! What that program does, and so one iteration here: the output file is truncated
//! (`O_TRUNC`) and grown to the input's size with `ftruncate`; then the input is mapped
//! `PROT_READ, MAP_SHARED`, the output `PROT_READ|PROT_WRITE, MAP_SHARED`, one `memcpy`
//! copies it all (APUE maps up to 1 GiB at a time: our sizes fit in one), and both are
//! unmapped. Timed: everything from the truncation to the last `munmap`; the `open`s are in
//! setup (both scratch files stay open, see `fs.rs`). MiB/s of file copied.
//!
//! The input is a cached, clean file (filled and `fsync`ed in setup); the copy faults the
//! input in (read faults, which map several pages each) and every output page (write faults
//! on a shared file mapping allocate a page-cache page and mark it dirty, one page per
//! fault). The truncation at the start of the next iteration drops those dirty pages before
//! writeback, so like fstime this measures the page cache and the VM, not the disk. After
//! each call the output is compared with the input.
//!
//! The seed's table gives counts over 20 s without a unit (Linux 1.9 G, six times FreeBSD,
//! FreeBSD six times Mac OS); the ratios between systems are what it reads.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::Instant;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use super::fs::{fill, fs_type, scratch_file};
use super::mm::Mapping;
use crate::{Context, Info, Instance, Probe, Suite};

struct Mcopy;

/// The mcopy probe, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(Mcopy)]
}

/// Parses `size` (lmbench's k/m/g suffixes), at least one page and at most 1 GiB (one APUE
/// chunk).
fn parse_size(params: &Params) -> Result<usize, ProbeError> {
    let text = params.get("size").unwrap_or("1m");
    let size = super::mm::parse_size(text)
        .ok_or_else(|| ProbeError::Failed(format!("bad size {text:?}")))?;
    if !(4096..=1 << 30).contains(&size) {
        return Err(ProbeError::Failed(format!("size {text} out of range 4k..1024m")));
    }
    Ok(size)
}

impl Probe for Mcopy {
    fn info(&self) -> Info {
        Info {
            id: "os.fs.mcopy",
            doc: "copy a cached file to another through mmap: truncate + ftruncate the output, map both MAP_SHARED, memcpy, munmap (APUE's mcopy)",
            unit: Unit::MibPerSec,
            mirrors: "seed 002's UnixBench mcopy row (APUE figure 14.27; the opens are in setup, the output compared with the input after every call)",
            requires: "a writable --tmp-dir",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let sizes: &[&str] = match suite {
            Suite::Smoke | Suite::Quick => &["1m"],
            Suite::Full => &["1m", "16m"],
        };
        sizes.iter().map(|s| Params::new().with("size", s)).collect()
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let size = parse_size(params)?;
        let input = scratch_file(&ctx.tmp_dir, "mcopy-in", libc::O_RDWR)?;
        fill(&input.file, size, 8 << 10)?;
        let output = scratch_file(&ctx.tmp_dir, "mcopy-out", libc::O_RDWR)?;
        Ok(Box::new(Copy {
            input: input.file,
            output: output.file,
            size,
            fs: fs_type(&ctx.tmp_dir),
        }))
    }
}

struct Copy {
    input: File,
    output: File,
    size: usize,
    fs: String,
}

impl Copy {
    /// APUE's mcopy after its opens.
    fn once(&self) -> Result<(), ProbeError> {
        let out = self.output.as_raw_fd();
        // O_TRUNC, then ftruncate(fdout, st_size).
        for len in [0, self.size as libc::off_t] {
            // SAFETY: ftruncate on our open, writable descriptor.
            if unsafe { libc::ftruncate(out, len) } != 0 {
                return Err(ProbeError::last_os("ftruncate"));
            }
        }
        let src = Mapping::new(&self.input, self.size, libc::PROT_READ)?;
        let dst = Mapping::new(&self.output, self.size, libc::PROT_READ | libc::PROT_WRITE)?;
        // SAFETY: both mappings are `size` bytes, readable and writable respectively, and
        // distinct (two mmap calls), so they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.ptr, dst.ptr, self.size) };
        drop(src);
        drop(dst);
        Ok(())
    }

    /// The output holds the input's bytes.
    fn check(&self) -> Result<(), ProbeError> {
        let src = Mapping::new(&self.input, self.size, libc::PROT_READ)?;
        let dst = Mapping::new(&self.output, self.size, libc::PROT_READ)?;
        // SAFETY: both are readable mappings of `size` bytes, alive for this scope.
        let same = unsafe {
            std::slice::from_raw_parts(src.ptr, self.size)
                == std::slice::from_raw_parts(dst.ptr, self.size)
        };
        if same {
            Ok(())
        } else {
            Err(ProbeError::Failed("the copy differs from its input".into()))
        }
    }
}

impl Workload for Copy {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let start = Instant::now();
        for _ in 0..iters {
            if interrupt::requested() {
                return Err(ProbeError::Interrupted);
            }
            self.once()?;
        }
        let elapsed = start.elapsed();
        if iters > 0 {
            self.check()?;
        }
        Ok(Timing::from_elapsed(elapsed))
    }
}

impl Instance for Copy {
    fn metric(&self) -> Metric {
        Metric::bandwidth(self.size as f64)
    }

    fn notes(&self) -> Params {
        Params::new().with("file_kib", self.size >> 10).with("fs", &self.fs).with("chunks", 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_stay_in_range() {
        let p = |s: &str| parse_size(&Params::from_key(s));
        assert_eq!(p("").unwrap(), 1 << 20);
        assert_eq!(p("size=64k").unwrap(), 64 << 10);
        assert_eq!(p("size=16m").unwrap(), 16 << 20);
        assert!(p("size=1").is_err());
        assert!(p("size=2048m").is_err());
        assert!(p("size=x").is_err());
    }

    /// The copy carries the input's bytes (fill's pattern, not zeros) and a wrong output is
    /// caught.
    #[test]
    fn the_copy_matches_its_input() {
        let ctx = Context::for_tests();
        let mut inst = Mcopy.setup(&Params::from_key("size=64k"), &ctx).unwrap();
        inst.run(3).unwrap();
        let c = Copy {
            input: scratch_file(&ctx.tmp_dir, "t-in", libc::O_RDWR).unwrap().file,
            output: scratch_file(&ctx.tmp_dir, "t-out", libc::O_RDWR).unwrap().file,
            size: 8192,
            fs: String::new(),
        };
        fill(&c.input, 8192, 8192).unwrap();
        c.once().unwrap();
        c.check().unwrap();
        // Corrupt one byte of the output: check fails.
        let fd = c.output.as_raw_fd();
        // SAFETY: pwrite of one byte from a valid buffer to our open file.
        let n = unsafe { libc::pwrite(fd, [0xEEu8].as_ptr().cast(), 1, 5) };
        assert_eq!(n, 1);
        assert!(c.check().is_err());
    }
}
