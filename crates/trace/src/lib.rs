//! schedlab-trace: scheduler timelines — who ran when.
//!
//! The seed (ThreadTest, "What no one told you about multitasking in Windows") made the
//! scheduler visible by having each worker thread record a timestamp, at most every 10 µs,
//! while it computed 4x4 matrix inverses: the holes in a thread's record are the times the OS
//! took the CPU away. This crate does the same on Linux:
//!
//! - [`model`]: the timeline (lanes, runs, gaps, marks);
//! - [`sampling`]: the recorder (work units, preallocated buffer, runs derived afterwards);
//! - [`scenario`]: the seed's tests as data, each with its verdict, and the runner that
//!   records them;
//! - [`stats`]: per-thread CPU share, time slices, gaps, useful-work rate (pure functions);
//! - [`results`]: a recording as stored results (slices, gaps, work rate per thread) and
//!   the sampled record's agreement with the kernel's;
//! - [`rt`]: the schedlab-rt recorder (the runtime's `Switched` events, a lane per virtual
//!   processor);
//! - [`kernel`]: the kernel recorder (tracefs `sched_switch`/`sched_wakeup`, root);
//! - [`session`]: a whole recording, as `schedlab_probes::runner` is a whole run: a scenario
//!   with its recorders, or a probe variant's body under the kernel's, handed to a sink;
//! - [`term`], [`perfetto`]: terminal lanes, Chrome trace JSON (SVG pictures of a
//!   timeline are `schedlab-report`'s `lanes`, on its one SVG toolkit).
//!
//! It does not store anything (the CLI's [`session::TimelineSink`] hands timelines to
//! `schedlab-store` as JSON) and does not print.
//!
//! ```
//! use schedlab_trace::{scenario, stats};
//! let mut s = scenario::find("3").unwrap(); // two equal threads on one CPU
//! s.window_ms = 20;
//! let t = scenario::record(&s).unwrap();
//! let st = stats::timeline_stats(&t);
//! assert_eq!(st.len(), 2);
//! assert!(st.iter().all(|s| s.cpu_share <= 1.0));
//! println!("{}", schedlab_trace::term::lanes(&t, 0, t.window_ns, 80));
//! ```
#![deny(missing_docs)]

pub mod kernel;
pub mod model;
pub mod perfetto;
pub mod results;
pub mod rt;
pub mod sampling;
pub mod scenario;
pub mod session;
pub mod stats;
pub mod term;

pub use model::{Lane, Mark, Span, Timeline};
