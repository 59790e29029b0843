//! What the measuring commands show while they measure: a progress bar on stderr and a line
//! per result on stdout, for the run loop ([`RunTerminal`]: `run`, `mem` and the study) and
//! for the crosscheck ([`CrosscheckTerminal`]: `crosscheck` and the study). No ticker thread
//! draws the bars: a second thread would make the process multi-threaded while it
//! measures (see [`RunTerminal::new`]). Shared by those commands; it imports none of them.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use schedlab_measure::model::{Measurement, Outcome, Params};
use schedlab_probes::crosscheck::{self as cc, Row, Side};
use schedlab_probes::{runner, Probe};
use schedlab_report::{crosscheck as view, views};

use crate::out;

/// Widths of the run loop's live result rows (they are printed before the whole table is known).
const LIVE_WIDTHS: &[usize] = &[22, 28, 11, 6, 6, 3, 0];

/// A probe with more parameter sets than this is a sweep: its points are summarised in one
/// line instead of one row each (`schedlab show` and `export` still have every point).
const SWEEP: usize = 40;

/// One line for a sweep's points: how many were measured, skipped (by reason) and failed.
fn sweep_line(id: &str, results: &[Measurement]) -> String {
    let ok = results.iter().filter(|m| m.outcome == Outcome::Ok).count();
    let mut line = format!("{id}: {} points, {ok} measured", results.len());
    let mut reasons: Vec<(String, usize)> = Vec::new();
    for m in results {
        if let Some(r) = m.outcome.reason() {
            let what =
                format!("{} {}: {r}", m.params.get("routine").unwrap_or(""), m.outcome.key());
            match reasons.iter_mut().find(|(w, _)| *w == what) {
                Some(e) => e.1 += 1,
                None => reasons.push((what, 1)),
            }
        }
    }
    for (what, n) in reasons {
        line.push_str(&format!("; {n} {}", what.trim_start()));
    }
    line
}

/// The terminal side of a run: a progress bar on stderr and the rows on stdout.
pub struct RunTerminal {
    /// The bar, finished by the caller.
    pub pb: ProgressBar,
    table: schedlab_report::table::Table,
    /// Points of sweeps not yet summarised, per probe.
    sweep: std::collections::HashMap<String, Vec<Measurement>>,
}

impl RunTerminal {
    /// A bar of `total` steps, the header printed.
    pub fn new(total: usize) -> RunTerminal {
        let pb = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} {msg}",
            )
            .expect("static template is valid"),
        );
        // No steady tick: a ticker thread would make this process multi-threaded while it
        // measures, and the kernel then takes a reference on every file descriptor lookup
        // (fdget on a shared table), adding ~30 ns to read/write/fstat and to every IPC
        // probe. The bar redraws between probes instead.
        let table = views::result_table();
        let header: Vec<String> = views::RESULT_COLUMNS.iter().map(|c| c.0.to_string()).collect();
        let _ = pb.suspend(|| out(&format!("{}\n", table.terminal_line(&header, LIVE_WIDTHS))));
        RunTerminal { pb, table, sweep: std::collections::HashMap::new() }
    }
}

impl runner::RunObserver for RunTerminal {
    fn measuring(&mut self, probe: &dyn Probe, params: &Params, _done: usize, _total: usize) {
        let id = probe.info().id;
        self.pb.set_message(if params.is_empty() {
            id.to_string()
        } else {
            format!("{id} [{params}]")
        });
    }

    fn measured(&mut self, m: &Measurement, variants: usize) {
        // A closed stdout must not stop the measurement: the database is the record.
        if variants > SWEEP {
            let done = self.sweep.entry(m.probe.clone()).or_default();
            done.push(m.clone());
            if done.len() == variants {
                let line = sweep_line(&m.probe, done);
                let _ = self.pb.suspend(|| out(&format!("{line}\n")));
            }
        } else {
            let line = self.table.terminal_line(&views::result_cells(m), LIVE_WIDTHS);
            let _ = self.pb.suspend(|| out(&format!("{line}\n")));
        }
        self.pb.inc(1);
    }
}

/// A progress bar on stderr (no ticker thread: the probes need a single-threaded process)
/// and a line per finished row on stdout.
pub struct CrosscheckTerminal {
    /// The bar, finished by the caller.
    pub pb: ProgressBar,
    table: schedlab_report::table::Table,
    pairs: usize,
    done: usize,
}

/// Widths of the live lines (the table is printed whole at the end).
const CROSSCHECK_WIDTHS: &[usize] = &[28, 18, 22, 11, 11, 7, 30, 0];

impl CrosscheckTerminal {
    /// A bar of `rows` rows of `pairs` pairs, the header printed.
    pub fn new(rows: usize, pairs: usize) -> CrosscheckTerminal {
        let pb = ProgressBar::with_draw_target(
            Some((rows * pairs * 2) as u64),
            ProgressDrawTarget::stderr(),
        );
        pb.set_style(
            ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
                .expect("static template is valid"),
        );
        let table = view::table();
        let header: Vec<String> = view::COLUMNS.iter().map(|c| c.0.to_string()).collect();
        let _ =
            pb.suspend(|| out(&format!("{}\n", table.terminal_line(&header, CROSSCHECK_WIDTHS))));
        CrosscheckTerminal { pb, table, pairs, done: 0 }
    }
}

impl cc::Observer for CrosscheckTerminal {
    fn step(&mut self, row: &Row, index: usize, _total: usize, pair: usize, side: Side) {
        let what = match side {
            Side::Probe => row.probe.map_or("probe", |p| p.0),
            Side::Tool => row.program,
        };
        let first = (side == Side::Probe) == pair.is_multiple_of(2);
        self.pb.set_position(((index * self.pairs + pair) * 2 + usize::from(!first)) as u64);
        self.pb.set_message(format!("{} pair {}: {what}", row.id, pair + 1));
    }

    fn done(&mut self, _row: &Row, m: &Measurement) {
        let line = self.table.terminal_line(&view::cells(m), CROSSCHECK_WIDTHS);
        let _ = self.pb.suspend(|| out(&format!("{line}\n")));
        self.done += 1;
        self.pb.set_position((self.done * self.pairs * 2) as u64);
    }
}
