//! The columns of each table that travel with a run from one database to another, in the
//! order the store writes and reads them (`write`, `read`, `copy` and the door share them).

/// The columns of `runs` that travel with a run from one database to another (all but `id`).
pub(crate) const RUN_COLS: &[&str] = &[
    "label",
    "suite",
    "status",
    "started_at",
    "finished_at",
    "host",
    "os",
    "kernel",
    "cpu_model",
    "logical_cpus",
    "version",
    "git_rev",
    "pid",
    "filters",
    "settings",
    "calibration",
    "machine",
    "uuid",
    "machine_id",
    "reason",
];

/// The columns of `results` that travel (all but `id` and `run_id`).
pub(crate) const RESULT_COLS: &[&str] = &[
    "seq",
    "probe",
    "params",
    "params_json",
    "unit",
    "better",
    "status",
    "reason",
    "notes",
    "iters_per_sample",
    "overhead_ns_per_iter",
    "n",
    "median",
    "min",
    "max",
    "mean",
    "stddev",
    "p5",
    "p95",
    "ci_low",
    "ci_high",
    "ci_level",
    "cv",
    "outliers",
    "window_ns",
    "other_cpu_ns",
    "steal_ns",
    "wall_s",
    "measured_at",
];

/// The columns `results` stores (schema version 6) for [`RESULT_COLS`]: the series (probe,
/// params, params_json, unit, better) and the notes by id (`intern.rs`), and the raw
/// samples (`raw_n`, `raw`: what the view `raw_samples` gives back). Readers read
/// [`RESULT_COLS`] from the view `result_rows`.
pub(crate) const STORED_RESULT_COLS: &[&str] = &[
    "seq",
    "series_id",
    "notes_id",
    "status",
    "reason",
    "iters_per_sample",
    "overhead_ns_per_iter",
    "n",
    "median",
    "min",
    "max",
    "mean",
    "stddev",
    "p5",
    "p95",
    "ci_low",
    "ci_high",
    "ci_level",
    "cv",
    "outliers",
    "window_ns",
    "other_cpu_ns",
    "steal_ns",
    "wall_s",
    "measured_at",
    "raw_n",
    "raw",
];

/// The columns of the view `raw_samples` (a table in schema version 5; since version 6 the
/// columns `raw_n` and `raw` of `results`): a result's samples as one blob (`raw.rs`).
pub(crate) const RAW_COLS: &[&str] = &["result_id", "n", "data"];
/// A run's raw samples as [`RAW_COLS`] (what the view `raw_samples` gives), read from its
/// results by `run_id` (`$1`): the run's own index, no join by result id.
pub(crate) const RUN_RAW_SAMPLES: &str =
    "SELECT id, coalesce(raw_n, n), raw FROM results WHERE run_id = $1 AND raw IS NOT NULL ORDER BY id";
/// The columns of a warning (read from the view `warning_rows`).
pub(crate) const WARNING_COLS: &[&str] =
    &["run_id", "kind", "probe", "severity", "message", "advice"];
/// The columns `warnings` stores (schema version 6): its kind, probe, severity and the
/// message's head by id, the rest of the message, and the advice by id (`intern.rs`).
pub(crate) const STORED_WARNING_COLS: &[&str] = &["run_id", "kind_id", "message", "advice_id"];
pub(crate) const TIMELINE_COLS: &[&str] = &["run_id", "scenario", "recorder", "window_ns", "data"];

pub(crate) fn placeholders(from: usize, n: usize) -> String {
    (from..from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// Sets a run's result counts (schema version 5: `results_ok`, `results_skipped`,
/// `results_failed`) from its results, in an `UPDATE runs SET` of that run.
pub(crate) const RECOUNT: &str = "
    results_ok = (SELECT count(*) FROM results x WHERE x.run_id = runs.id AND x.status = 'ok'),
    results_skipped = (SELECT count(*) FROM results x WHERE x.run_id = runs.id AND x.status = 'skipped'),
    results_failed = (SELECT count(*) FROM results x WHERE x.run_id = runs.id
                      AND x.status IN ('failed', 'interrupted'))";
