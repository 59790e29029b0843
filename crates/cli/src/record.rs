//! Where the measuring commands (`run`, `mem`, `crosscheck`, `timeline` and the study) put
//! what they measure: the store as the sink of each loop ([`StoreSink`]: every result
//! committed as it comes, every timeline as JSON), and the end of a run: complete or
//! interrupted ([`finish`]), or stopped by a storage failure ([`storage_failed`]). Shared by
//! those commands; it imports none of them.

use anyhow::{Context as _, Result};
use schedlab_measure::interrupt;
use schedlab_measure::model::{Measurement, RunStatus};
use schedlab_probes::runner;
use schedlab_store::{Store, StoredTimeline};
use schedlab_trace::session::TimelineSink;
use schedlab_trace::Timeline;

/// The store as a sink: each result committed in its own transaction as it comes (and kept
/// in [`StoreSink::results`] too when made with [`StoreSink::keeping`], for a table printed
/// at the end), each timeline as JSON in the `timelines` table.
pub struct StoreSink<'a> {
    /// The store written.
    pub store: &'a mut Store,
    /// The run the results belong to.
    pub run_id: i64,
    /// The results saved, with [`StoreSink::keeping`]; empty otherwise.
    pub results: Vec<Measurement>,
    keep: bool,
}

impl<'a> StoreSink<'a> {
    /// A sink into run `run_id` of `store`.
    pub fn new(store: &'a mut Store, run_id: i64) -> StoreSink<'a> {
        StoreSink { store, run_id, results: Vec::new(), keep: false }
    }

    /// A sink that also keeps a copy of each result saved (the crosscheck's final table).
    pub fn keeping(store: &'a mut Store, run_id: i64) -> StoreSink<'a> {
        StoreSink { keep: true, ..StoreSink::new(store, run_id) }
    }

    fn save_result(&mut self, m: &Measurement) -> Result<()> {
        self.store.save_result(self.run_id, m).with_context(|| format!("storing {}", m.probe))?;
        if self.keep {
            self.results.push(m.clone());
        }
        Ok(())
    }
}

/// The run loop's and the crosscheck's sink.
impl runner::RunSink for StoreSink<'_> {
    type Error = anyhow::Error;

    fn save(&mut self, m: &Measurement) -> Result<()> {
        self.save_result(m)
    }
}

/// A recording's sink (`schedlab timeline`, the study's timelines).
impl TimelineSink for StoreSink<'_> {
    type Error = anyhow::Error;

    fn save(&mut self, m: &Measurement) -> Result<()> {
        self.save_result(m)
    }

    fn save_timeline(&mut self, t: &Timeline) -> Result<()> {
        self.store.save_timeline(
            self.run_id,
            &StoredTimeline {
                scenario: t.scenario.clone(),
                recorder: t.recorder.clone(),
                window_ns: t.window_ns,
                data: serde_json::to_string(t).context("serialising the timeline")?,
            },
        )?;
        Ok(())
    }
}

/// Ends run `run_id` of `store`: complete, or interrupted with the signal that asked as its
/// reason; a second signal no longer needs to mark it.
pub fn finish(store: &Store, run_id: i64, interrupted: bool) -> Result<()> {
    let r = if interrupted {
        store.interrupt_run(run_id, &interrupt::reason())
    } else {
        store.finish_run(run_id, RunStatus::Complete)
    };
    r.context("finishing the run")?;
    crate::stop::disarm();
    Ok(())
}

/// The run stops on a storage failure (disk full, a lock held too long, an I/O error, a lost
/// server): what was committed before stays, and the run is marked interrupted with `e` as
/// its reason — or, when even that cannot be written, the error says so and the next
/// schedlab that opens the database for writing marks it.
pub fn storage_failed(store: &Store, run_id: i64, e: anyhow::Error) -> anyhow::Error {
    let db = store.path().display().to_string();
    let reason = format!("storage failure: {e:#}");
    match store.interrupt_run(run_id, &reason) {
        Ok(()) => e.context(format!(
            "the run stopped: everything measured before is stored as run #{run_id} (marked interrupted) in {db}"
        )),
        Err(mark) => e.context(format!(
            "the run stopped: everything measured before is stored as run #{run_id} in {db}; it could not be marked interrupted ({mark}); the next schedlab command shows it interrupted with this reason"
        )),
    }
}
