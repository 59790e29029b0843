//! Peak resident memory of a sample, for the probes that keep many threads alive, and what
//! a process holds now (resident size, kernel threads) from `/proc`.
//!
//! The kernel's high-water mark of the process (`VmHWM`) is reset before each sample
//! (`/proc/self/clear_refs` with `5`, Linux 4.0+) and read after it; the note is the peak
//! minus the resident size before the sample, also per thread of the sample. Without the
//! reset (another kernel, no permission) the note says so instead of showing a stale peak.
//! Beside it, `peak_rss_mib` is the whole process's peak over the samples, the figure
//! `/usr/bin/time -v` gives for a peer program (Go's, for one).

use std::sync::{Arc, Mutex};

use schedlab_measure::model::{Metric, Params};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::backend::Bench;
use crate::Instance;

/// The resident memory a sample added at its peak, in KiB, or `None` when the peak could
/// not be reset (it would then be an earlier sample's).
pub(super) struct PeakSample {
    before_kib: Option<u64>,
}

/// A sample's peaks: what it added, and the whole process's high-water mark (KiB).
#[derive(Clone, Copy, Debug)]
pub(super) struct Peak {
    pub(super) added_kib: u64,
    pub(super) process_kib: u64,
}

impl PeakSample {
    pub(super) fn start() -> PeakSample {
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        PeakSample { before_kib: reset.then(|| status_kib("self", "VmRSS:")).flatten() }
    }

    pub(super) fn finish(self) -> Option<Peak> {
        let before = self.before_kib?;
        let process_kib = status_kib("self", "VmHWM:")?;
        Some(Peak { added_kib: process_kib.saturating_sub(before), process_kib })
    }
}

/// A `kB` field of `/proc/<pid>/status` (`self` for this process), in KiB.
pub(super) fn status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Kernel threads of a process (`/proc/<pid>/task`).
pub(super) fn kernel_threads(pid: &str) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.count())
}

/// The largest peak seen over the samples.
pub(super) struct PeakMemory {
    max_kib: Option<u64>,
    /// The process's own peak (`VmHWM`), the largest over the samples: the figure to set
    /// beside another program's peak RSS (Go's, tokio's), as `/usr/bin/time` reports it.
    process_kib: Option<u64>,
    unknown: bool,
    /// What the peak is divided by: `node`, `thread`...
    per: &'static str,
    count: u64,
}

impl PeakMemory {
    /// No samples yet; the per-item note will be `peak_rss_bytes_per_{per}`.
    pub(super) fn new(per: &'static str) -> PeakMemory {
        PeakMemory { max_kib: None, process_kib: None, unknown: false, per, count: 0 }
    }

    /// One sample's peak (`None`: unknown) over `count` items (nodes, threads).
    pub(super) fn add(&mut self, sample: Option<Peak>, count: u64) {
        self.count = count;
        match sample {
            Some(p) => {
                self.max_kib = Some(self.max_kib.map_or(p.added_kib, |m| m.max(p.added_kib)));
                self.process_kib =
                    Some(self.process_kib.map_or(p.process_kib, |m| m.max(p.process_kib)));
            }
            None => self.unknown = true,
        }
    }

    pub(super) fn apply(&self, n: &mut Params) {
        match (self.max_kib, self.unknown) {
            (Some(k), false) => {
                if let Some(p) = self.process_kib {
                    n.set("peak_rss_mib", format!("{:.1}", p as f64 / 1024.0));
                }
                n.set("peak_rss_added_mib", format!("{:.1}", k as f64 / 1024.0));
                n.set(
                    &format!("peak_rss_bytes_per_{}", self.per),
                    format!("{:.0}", k as f64 * 1024.0 / self.count.max(1) as f64),
                );
            }
            (None, false) => {}
            _ => n.set("peak_rss_added_mib", "unknown (VmHWM could not be reset)"),
        }
    }
}

/// A bench plus the memory notes gathered while it runs.
pub(super) struct WithPeak {
    pub(super) bench: Bench,
    pub(super) peak: Arc<Mutex<PeakMemory>>,
}

impl Workload for WithPeak {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        self.bench.run(iters)
    }
}

impl Instance for WithPeak {
    fn metric(&self) -> Metric {
        self.bench.metric()
    }

    fn notes(&self) -> Params {
        let mut n = self.bench.notes();
        self.peak.lock().unwrap_or_else(|e| e.into_inner()).apply(&mut n);
        n
    }
}
