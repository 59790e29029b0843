//! The result model shared by the sampler, the store and the reports.
//!
//! One [`Measurement`] is one probe with one parameter set in one run: its unit and better
//! direction, how it was obtained (iterations per sample, overhead subtracted, notes such as the
//! CPU placement), the raw samples and their [`Summary`]. A probe that could not run is still a
//! measurement, with an [`Outcome`] that says why.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::stats::Summary;

/// The unit a result is expressed in. Values are stored in this unit, unscaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Unit {
    /// Nanoseconds per operation.
    #[serde(rename = "ns")]
    Nanos,
    /// Microseconds per operation (lmbench's unit for latencies).
    #[serde(rename = "us")]
    Micros,
    /// Mebibytes (2^20 bytes) per second. (lmbench's `bw_*` "MB/sec" are 10^6 bytes per
    /// second: the lmbench view and the crosscheck convert.)
    #[serde(rename = "MiB/s")]
    MibPerSec,
    /// Operations per second.
    #[serde(rename = "ops/s")]
    OpsPerSec,
}

impl Unit {
    /// The short symbol used on screen and in files.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Nanos => "ns",
            Unit::Micros => "µs",
            Unit::MibPerSec => "MiB/s",
            Unit::OpsPerSec => "ops/s",
        }
    }

    /// The ASCII spelling stored in the database and exports.
    pub fn key(self) -> &'static str {
        match self {
            Unit::Nanos => "ns",
            Unit::Micros => "us",
            Unit::MibPerSec => "MiB/s",
            Unit::OpsPerSec => "ops/s",
        }
    }

    /// Parses [`Unit::key`].
    pub fn from_key(s: &str) -> Option<Unit> {
        Some(match s {
            "ns" => Unit::Nanos,
            "us" | "µs" => Unit::Micros,
            "MiB/s" => Unit::MibPerSec,
            "ops/s" => Unit::OpsPerSec,
            _ => return None,
        })
    }

    /// Which direction is better for values in this unit.
    pub fn better(self) -> Better {
        match self {
            Unit::Nanos | Unit::Micros => Better::Lower,
            Unit::MibPerSec | Unit::OpsPerSec => Better::Higher,
        }
    }

    /// Converts a time per operation, in nanoseconds, into this unit.
    ///
    /// Only meaningful for time units and rates; bandwidth needs bytes (see [`Metric`]).
    pub fn from_ns_per_op(self, ns: f64) -> f64 {
        match self {
            Unit::Nanos => ns,
            Unit::Micros => ns / 1e3,
            Unit::OpsPerSec => {
                if ns > 0.0 {
                    1e9 / ns
                } else {
                    f64::INFINITY
                }
            }
            Unit::MibPerSec => f64::NAN,
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

pub use crate::stats::Better;

/// How a sample's elapsed time turns into a value in the probe's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Time per operation; each iteration performs `ops_per_iter` operations.
    /// `subtract_loop` removes the calibrated empty-loop cost per iteration and one clock
    /// read per sample, as lmbench's harness does for sub-microsecond operations.
    TimePerOp {
        /// Operations per iteration of the timed body (e.g. switches per token lap).
        ops_per_iter: f64,
        /// Subtract the empty-loop and clock-read overhead.
        subtract_loop: bool,
    },
    /// Bytes moved per iteration; the value is MiB/s.
    Bandwidth {
        /// Bytes per iteration of the timed body.
        bytes_per_iter: f64,
    },
}

impl Metric {
    /// One operation per iteration, with the loop overhead subtracted.
    pub fn per_op() -> Metric {
        Metric::TimePerOp { ops_per_iter: 1.0, subtract_loop: true }
    }

    /// `ops` operations per iteration, loop overhead not subtracted (operations of a
    /// microsecond or more, where the loop is lost in the noise anyway).
    pub fn per_ops(ops: f64) -> Metric {
        Metric::TimePerOp { ops_per_iter: ops, subtract_loop: false }
    }

    /// `bytes` per iteration, reported as MiB/s.
    pub fn bandwidth(bytes: f64) -> Metric {
        Metric::Bandwidth { bytes_per_iter: bytes }
    }
}

/// The suffix of a note that holds a result's raw values for a later analysis (numbers
/// separated by spaces, e.g. `frame_us_raw`, every frame's time): stored and exported with
/// the result, left out of tables (a few hundred numbers would hide the rest of the row), and
/// pooled across `--rounds` where the other notes are the first round's.
pub const RAW_NOTE_SUFFIX: &str = "_raw";

/// Whether note `key` holds raw values ([`RAW_NOTE_SUFFIX`]).
pub fn is_raw_note(key: &str) -> bool {
    key.ends_with(RAW_NOTE_SUFFIX)
}

/// The values of raw note `key` of `notes` ([`RAW_NOTE_SUFFIX`]); `None` when it is absent or
/// a value does not parse.
pub fn raw_note(notes: &Params, key: &str) -> Option<Vec<f64>> {
    notes.get(key)?.split_whitespace().map(|v| v.parse::<f64>().ok()).collect()
}

/// A probe's parameters, in the order the probe declares them. Part of a result's identity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Params(pub Vec<(String, String)>);

impl Params {
    /// No parameters.
    pub fn new() -> Params {
        Params(Vec::new())
    }

    /// Adds (or replaces) `key=value`, builder style.
    pub fn with(mut self, key: &str, value: impl ToString) -> Params {
        self.set(key, value);
        self
    }

    /// Sets `key=value`, replacing an earlier value of the same key in place.
    pub fn set(&mut self, key: &str, value: impl ToString) {
        let value = value.to_string();
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key.to_string(), value)),
        }
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The value of `key` parsed, or `default` when absent.
    ///
    /// # Errors
    /// A message naming the key and the bad value when it does not parse.
    pub fn parse_or<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("bad value {v:?} for parameter {key}")),
        }
    }

    /// True when there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The canonical text form, `k=v,k=v` in declaration order (empty for no parameters).
    pub fn key(&self) -> String {
        self.0.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    /// Parses [`Params::key`].
    pub fn from_key(s: &str) -> Params {
        Params(
            s.split(',')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (k.to_string(), v.to_string()),
                    None => (p.to_string(), String::new()),
                })
                .collect(),
        )
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// One sample as taken: the raw timing and the value it gives in the probe's unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Iterations of the timed body in this sample.
    pub iters: u64,
    /// Wall time of the sample in nanoseconds, before any overhead was subtracted.
    pub elapsed_ns: u64,
    /// The value in the probe's unit, overhead subtracted.
    pub value: f64,
    /// CPU time other processes used on this machine while the sample ran, in nanoseconds
    /// (from /proc/stat, so in clock ticks: off by a tick either way for short samples,
    /// hence signed).
    pub other_cpu_ns: Option<i64>,
    /// A party of the measurement was found on another CPU than it was pinned to.
    pub migrated: bool,
}

/// What became of a probe in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "lowercase")]
pub enum Outcome {
    /// Measured; samples and summary are valid.
    Ok,
    /// Could not run here; the reason says why (missing privilege, ...).
    Skipped(String),
    /// Tried and failed; the reason names the error.
    Failed(String),
    /// Stopped by the user before it produced a summary.
    Interrupted,
}

impl Outcome {
    /// `ok`, `skipped`, `failed` or `interrupted`.
    pub fn key(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Skipped(_) => "skipped",
            Outcome::Failed(_) => "failed",
            Outcome::Interrupted => "interrupted",
        }
    }

    /// The reason, for skipped and failed outcomes.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Skipped(r) | Outcome::Failed(r) => Some(r),
            _ => None,
        }
    }
}

/// One probe, one parameter set, in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The probe's stable dotted id, e.g. `os.pipe.latency`.
    pub probe: String,
    /// The parameters that are part of the result's identity.
    pub params: Params,
    /// The unit of `samples[].value` and of the summary.
    pub unit: Unit,
    /// Which direction is better.
    pub better: Better,
    /// Whether it was measured, skipped or failed.
    pub outcome: Outcome,
    /// How the result was obtained: placement, overheads removed, pipe overhead for lat_ctx...
    pub notes: Params,
    /// Iterations of the timed body per sample after calibration.
    pub iters_per_sample: u64,
    /// Empty-loop plus clock-read overhead subtracted per iteration, in ns (0 when none).
    pub overhead_ns_per_iter: f64,
    /// The raw samples.
    pub samples: Vec<Sample>,
    /// Statistics over `samples[].value`; `None` unless the outcome is `Ok`.
    pub summary: Option<Summary>,
    /// CPU taken by others and by the hypervisor while the samples were taken.
    pub noise: Option<crate::noise::Noise>,
    /// Wall time the whole probe took, setup and calibration included, in seconds.
    pub wall_s: f64,
}

impl Measurement {
    /// A measurement of `samples` (values in `unit`): its summary computed here, outcome
    /// `Ok`, or `Failed` when no sample has a valid value (NaN). Notes, iterations per
    /// sample, overhead and noise start empty; set them on the result.
    pub fn of_samples(
        probe: &str,
        params: Params,
        unit: Unit,
        samples: Vec<Sample>,
        wall_s: f64,
    ) -> Measurement {
        let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
        match crate::stats::Summary::of(&values) {
            Some(summary) => Measurement {
                summary: Some(summary),
                samples,
                ..Measurement::without_samples(probe, params, unit, Outcome::Ok, wall_s)
            },
            None => Measurement::without_samples(
                probe,
                params,
                unit,
                Outcome::Failed("the probe produced no valid samples (NaN)".into()),
                wall_s,
            ),
        }
    }

    /// A measurement that produced no samples (skipped, failed, interrupted).
    pub fn without_samples(
        probe: &str,
        params: Params,
        unit: Unit,
        outcome: Outcome,
        wall_s: f64,
    ) -> Measurement {
        Measurement {
            probe: probe.to_string(),
            params,
            unit,
            better: unit.better(),
            outcome,
            notes: Params::new(),
            iters_per_sample: 0,
            overhead_ns_per_iter: 0.0,
            samples: Vec::new(),
            summary: None,
            noise: None,
            wall_s,
        }
    }
}

/// How serious a warning is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; results are still fine.
    Info,
    /// Results may be off; the message says what to do.
    Warn,
}

/// A noise warning: what was seen and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// A short stable kind: `high-variation`, `load`, `vm`, `governor`, `other-cpu`, `migrated`...
    pub kind: String,
    /// The probe (with params) it concerns, if any.
    pub probe: Option<String>,
    /// How serious it is.
    pub severity: Severity,
    /// What was seen.
    pub message: String,
    /// What to do about it.
    pub advice: String,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Being measured (or the process died without saying otherwise).
    Running,
    /// Every selected probe was attempted.
    Complete,
    /// Stopped by the user (SIGINT/SIGTERM) or found abandoned by a crash; what was measured
    /// before is kept.
    Interrupted,
}

impl RunStatus {
    /// `running`, `complete` or `interrupted`.
    pub fn key(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
        }
    }

    /// Parses [`RunStatus::key`].
    pub fn from_key(s: &str) -> Option<RunStatus> {
        Some(match s {
            "running" => RunStatus::Running,
            "complete" => RunStatus::Complete,
            "interrupted" => RunStatus::Interrupted,
            _ => return None,
        })
    }
}

/// Everything about a run except its results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The database id (0 before it is stored).
    pub id: i64,
    /// The user's label, if any.
    pub label: Option<String>,
    /// `smoke`, `quick` or `full`.
    pub suite: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// RFC 3339 UTC start time.
    pub started_at: String,
    /// RFC 3339 UTC end time, once finished.
    pub finished_at: Option<String>,
    /// Why it was interrupted, when it was and the reason is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The filters given (empty: all probes).
    pub filters: Vec<String>,
    /// schedlab's version.
    pub version: String,
    /// The git revision schedlab was built from (`unknown` outside a checkout).
    pub git_rev: String,
    /// Sampling settings as the user chose them: target ms, samples, warm-up ms.
    pub settings: Params,
    /// Clock and loop calibration.
    pub calibration: Option<crate::clock::Calibration>,
    /// The machine fingerprint.
    pub machine: crate::machine::Machine,
}

impl RunMeta {
    /// A run about to start now on `machine`: status `Running`, no id yet (the store gives
    /// it one), built from `build` (version, git revision). The label, filters, settings and
    /// calibration start empty; set them on the result.
    pub fn starting(suite: &str, machine: crate::machine::Machine, build: (&str, &str)) -> RunMeta {
        RunMeta {
            id: 0,
            label: None,
            suite: suite.to_string(),
            status: RunStatus::Running,
            started_at: crate::machine::now_rfc3339(),
            finished_at: None,
            reason: None,
            filters: Vec::new(),
            version: build.0.to_string(),
            git_rev: build.1.to_string(),
            settings: Params::new(),
            calibration: None,
            machine,
        }
    }

    /// What a column or a title calls this run: its label, else `#id host kernel`; escaped
    /// ([`crate::text::escape`]) since it is only ever shown, and a run from elsewhere may
    /// carry control characters in either.
    pub fn display_name(&self) -> String {
        let name = match &self.label {
            Some(l) => l.clone(),
            None => format!("#{} {}", self.id, self.machine.short_name()),
        };
        crate::text::escape(&name).into_owned()
    }
}

/// A stored run with its results and warnings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Metadata and fingerprint.
    pub meta: RunMeta,
    /// Results, in the order they were measured.
    pub results: Vec<Measurement>,
    /// Noise warnings recorded at the end of the run.
    pub warnings: Vec<Warning>,
}

impl crate::sys::Placement {
    /// Parses the `placement` parameter of `p` (default `same`).
    ///
    /// # Errors
    /// A value other than `same` or `cross`.
    pub fn from_params(p: &Params) -> Result<crate::sys::Placement, crate::ProbeError> {
        crate::sys::Placement::parse(p.get("placement"))
    }
}
