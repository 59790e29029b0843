//! schedlab-report: every way a run is shown to people or handed to other programs.
//!
//! One result model (from `schedlab-measure`), many renderings, and the probe [`catalog`]
//! as `schedlab list` and docs/PROBES.md show it: the terminal and Markdown
//! share one [`table::Table`] builder; [`views`] builds the tables (a run's results, the
//! side-by-side comparison of runs in the layout of seed 002's Table 2, the machine header);
//! [`export`] holds one small type per file format ([`interchange`] those other benchmark
//! tools read: Bencher's and conbench's); [`doctor`] shows `schedlab doctor` and the
//! findings stored with runs; [`history`] one result across runs with its change points, and
//! [`gate`] the CI gate's verdicts and summaries (JUnit XML, Markdown). Values are kept raw in exports and scaled
//! for people on screen ([`units`]). [`mem`] analyses the memory-clearing lab's results
//! (crossovers, best routine per size, bandwidth per cache level) and draws them with
//! [`svg`], the one small hand-written SVG toolkit (line charts; [`lanes`] draws timelines
//! with it). Nothing here measures or touches the
//! database.
//!
//! ```
//! use schedlab_report::table::{Align, Table};
//! let mut t = Table::new(&[("probe", Align::Left), ("median", Align::Right)]);
//! t.row(vec!["os.syscall.null".into(), "125 ns".into()]);
//! assert!(t.to_markdown().contains("| os.syscall.null | 125 ns |"));
//! ```
#![deny(missing_docs)]

// Seed 003 (issue 26): `show --view hbench`.
pub mod bystander;
pub mod catalog;
pub mod coop;
pub mod crosscheck;
pub mod doctor;
pub mod export;
pub mod gate;
pub mod history;
pub mod html;
pub mod interchange;
pub mod lanes;
/// Issue 25's lock and loader probes: their sentences and charts.
pub mod locks;
pub mod mem;
pub mod reference;
pub mod sched;
pub mod suites;
pub mod summary;
pub mod svg;
pub mod table;
pub mod views;

/// Values scaled for people; the rule lives in `schedlab-measure`, which the timelines share.
pub use schedlab_measure::units;
