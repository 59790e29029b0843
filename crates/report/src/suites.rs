//! A run read the way another suite prints its results: `schedlab show RUN --view unixbench`
//! and `--view lmbench`. Each row of that suite's table is mapped to the schedlab row that
//! measures it (probe and exact parameters), its median converted to the suite's unit, and
//! the row says whose definition was measured, so a figure can be put beside the suite's own.
//!
//! # UnixBench
//! UnixBench reports a rate per test (lps: loops per second, lpm: loops per minute, KBps)
//! and an index: each index test's score × 10 / the score of its baseline machine, "George",
//! a SPARCstation 20-61 (128 MB RAM, Solaris 2.3) rated 10.0, and the system index is the
//! geometric mean of those indexes. The baselines are UnixBench 5.1's `pgms/index.base`
//! ([`UNIXBENCH_INDEX`]). Two of its twelve index tests, Dhrystone and Whetstone, have no
//! schedlab row, so our index is over the tests present and says so, as UnixBench's "Partial
//! Index" does. Counts are also given per 10 s (seed 002's Table 1 counts over 20 s: twice
//! those).
//!
//! # lmbench
//! The rows of seed 002's Table 2 in its order and with its names, in lmbench's units
//! (microseconds, and MB/s with lmbench's MB of 10^6 bytes: `#define MB (1000*1000.0)` in
//! lmbench 3's `lib_timing.c` and `bw_mem.c`). Where a row has a `def=lmbench`
//! variant it is used; otherwise our definition is shown and marked.

use schedlab_measure::model::{Measurement, Outcome, Params, Run, Unit};

use crate::table::{Align, Table};

/// The unit a suite reports a row in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Their {
    /// Loops (operations) per second.
    Lps,
    /// Loops per minute.
    Lpm,
    /// KiB per second (UnixBench's KBps: 1024 bytes).
    Kbps,
    /// Microseconds per operation.
    Micros,
    /// MB per second, lmbench's MB of 10^6 bytes.
    MbPerSec,
}

/// Bytes in a MiB over bytes in lmbench's MB: MiB/s × this = lmbench's MB/s.
const MIB_PER_MB: f64 = 1_048_576.0 / 1e6;

impl Their {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Their::Lps => "lps",
            Their::Lpm => "lpm",
            Their::Kbps => "KBps",
            Their::Micros => "µs",
            Their::MbPerSec => "MB/s",
        }
    }

    /// Converts a median in `ours` to this unit; `None` when they do not convert.
    fn convert(self, value: f64, ours: Unit) -> Option<f64> {
        let per_sec = match ours {
            Unit::Nanos => 1e9 / value,
            Unit::Micros => 1e6 / value,
            Unit::OpsPerSec => value,
            Unit::MibPerSec => value,
        };
        let micros = match ours {
            Unit::Nanos => Some(value / 1e3),
            Unit::Micros => Some(value),
            _ => None,
        };
        match (self, ours) {
            (Their::Kbps, Unit::MibPerSec) => Some(value * 1024.0),
            (Their::MbPerSec, Unit::MibPerSec) => Some(value * MIB_PER_MB),
            (Their::Kbps | Their::MbPerSec, _) | (_, Unit::MibPerSec) => None,
            (Their::Lps, _) => Some(per_sec),
            (Their::Lpm, _) => Some(per_sec * 60.0),
            (Their::Micros, _) => micros,
        }
        .filter(|v| v.is_finite())
    }

    /// The inverse of [`Their::convert`]: a value `v` in this unit as a value in `ours`;
    /// `None` when they do not convert. lps -> ns: 1e9 / lps; lpm -> lps: / 60; KBps ->
    /// MiB/s: / 1024; µs -> ns: × 1000; MB/s (10^6) -> MiB/s: / 1.048576. As in
    /// `convert`, a time does not become a rate.
    pub(crate) fn to_ours(self, v: f64, ours: Unit) -> Option<f64> {
        let per_sec = match self {
            Their::Lps => Some(v),
            Their::Lpm => Some(v / 60.0),
            Their::Micros | Their::Kbps | Their::MbPerSec => None,
        };
        match (self, ours) {
            (Their::Kbps, Unit::MibPerSec) => Some(v / 1024.0),
            (Their::MbPerSec, Unit::MibPerSec) => Some(v / MIB_PER_MB),
            (Their::Kbps | Their::MbPerSec, _) | (_, Unit::MibPerSec) => None,
            (Their::Micros, Unit::Nanos) => Some(v * 1e3),
            (Their::Micros, Unit::Micros) => Some(v),
            (_, Unit::OpsPerSec) => per_sec,
            (_, Unit::Nanos) => per_sec.map(|r| 1e9 / r),
            (_, Unit::Micros) => per_sec.map(|r| 1e6 / r),
        }
        .filter(|v| v.is_finite())
    }

    /// How many of this unit's things happen in `secs` seconds at rate `v`.
    fn count_in(self, v: f64, secs: f64) -> Option<f64> {
        match self {
            Their::Lps | Their::Kbps => Some(v * secs),
            Their::Lpm => Some(v / 60.0 * secs),
            Their::Micros | Their::MbPerSec => None,
        }
    }
}

/// Whose definition the schedlab row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fidelity {
    /// The suite's own definition (a `def=` variant, or a row that has only that one).
    Exact,
    /// A different definition; the text says how.
    Ours(&'static str),
}

/// One row of the suite's table: its name, and the schedlab rows that can stand for it, the
/// first present in the run winning.
struct SuiteRow {
    name: &'static str,
    unit: Their,
    candidates: &'static [(&'static str, &'static str, Fidelity)],
    /// UnixBench index baseline (George's score in `unit`), when it is an index test.
    baseline: Option<f64>,
}

/// UnixBench 5.1's `pgms/index.base`: George's scores for the twelve index tests, as
/// (test, unit, baseline). Dhrystone and Whetstone have no schedlab row.
pub const UNIXBENCH_INDEX: [(&str, &str, f64); 12] = [
    ("dhry2reg", "lps", 116_700.0),
    ("whetstone-double", "MWIPS", 55.0),
    ("execl", "lps", 43.0),
    ("fstime", "KBps", 3960.0),
    ("fsbuffer", "KBps", 1655.0),
    ("fsdisk", "KBps", 5800.0),
    ("pipe", "lps", 12_440.0),
    ("context1", "lps", 4000.0),
    ("spawn", "lps", 126.0),
    ("shell1", "lpm", 42.4),
    ("shell8", "lpm", 6.0),
    ("syscall", "lps", 15_000.0),
];

fn baseline(test: &str) -> Option<f64> {
    UNIXBENCH_INDEX.iter().find(|t| t.0 == test).map(|t| t.2)
}

const EXACT: Fidelity = Fidelity::Exact;

/// The placement lmbench's ping-pongs are closest to (see MEASUREMENT.md: unpinned they are
/// bimodal, and the same-CPU mode is lmbench's usual answer on a small VM).
const SAME: &str = "placement=same";

fn unixbench_rows() -> Vec<SuiteRow> {
    let row = |name, unit, candidates, test: Option<&str>| SuiteRow {
        name,
        unit,
        candidates,
        baseline: test.and_then(baseline),
    };
    vec![
        row(
            "Execl Throughput",
            Their::Lps,
            &[(
                "os.proc.execl",
                "",
                Fidelity::Ours("a chain of /usr/bin/env, not execl re-executing itself"),
            )],
            Some("execl"),
        ),
        row(
            "File Copy 1024 bufsize 2000 maxblocks",
            Their::Kbps,
            &[("os.fs.copy", "bufsize=1024,maxblocks=2000", EXACT)],
            Some("fstime"),
        ),
        row(
            "File Copy 256 bufsize 500 maxblocks",
            Their::Kbps,
            &[("os.fs.copy", "bufsize=256,maxblocks=500", EXACT)],
            Some("fsbuffer"),
        ),
        row(
            "File Copy 4096 bufsize 8000 maxblocks",
            Their::Kbps,
            &[("os.fs.copy", "bufsize=4096,maxblocks=8000", EXACT)],
            Some("fsdisk"),
        ),
        row("Pipe Throughput", Their::Lps, &[("os.pipe.throughput", "", EXACT)], Some("pipe")),
        row(
            "Pipe-based Context Switching",
            Their::Lps,
            &[
                ("os.pipe.context1", "", EXACT),
                (
                    "os.pipe.latency",
                    "placement=same",
                    Fidelity::Ours(
                        "lmbench's lat_pipe round trip, both ends on one CPU; context1 is unpinned",
                    ),
                ),
            ],
            Some("context1"),
        ),
        row(
            "Process Creation",
            Their::Lps,
            &[("os.proc.fork_exit", "", Fidelity::Ours("child runs a 5-syscall prologue"))],
            Some("spawn"),
        ),
        row(
            "Shell Scripts (1 concurrent)",
            Their::Lpm,
            &[("os.proc.shell_scripts", "copies=1", Fidelity::Ours("generated sort.src"))],
            Some("shell1"),
        ),
        row(
            "Shell Scripts (8 concurrent)",
            Their::Lpm,
            &[("os.proc.shell_scripts", "copies=8", Fidelity::Ours("generated sort.src"))],
            Some("shell8"),
        ),
        row("System Call Overhead", Their::Lps, &[("os.syscall.mix", "", EXACT)], Some("syscall")),
        // Rows of seed 002's Table 1 outside the index.
        row(
            "Shell Scripts (2 concurrent)",
            Their::Lpm,
            &[("os.proc.shell_scripts", "copies=2", Fidelity::Ours("generated sort.src"))],
            None,
        ),
        row(
            "Shell Scripts (4 concurrent)",
            Their::Lpm,
            &[("os.proc.shell_scripts", "copies=4", Fidelity::Ours("generated sort.src"))],
            None,
        ),
        row("hanoi", Their::Lps, &[("os.cpu.hanoi", "", EXACT)], None),
        row(
            "mcopy",
            Their::Kbps,
            &[(
                "os.fs.mcopy",
                "size=1m",
                Fidelity::Ours("APUE's mcopy of a 1 MiB file, opens in setup"),
            )],
            None,
        ),
        row(
            "fstime write",
            Their::Kbps,
            &[("os.fs.write", "bufsize=1024,maxblocks=2000", EXACT)],
            None,
        ),
        row(
            "fstime write O_SYNC",
            Their::Kbps,
            &[(
                "os.fs.write",
                "bufsize=1024,maxblocks=2000,sync=osync",
                Fidelity::Ours("fstime -w on a descriptor opened O_SYNC"),
            )],
            None,
        ),
        row(
            "fstime write O_DSYNC",
            Their::Kbps,
            &[(
                "os.fs.write",
                "bufsize=1024,maxblocks=2000,sync=dsync",
                Fidelity::Ours("fstime -w on a descriptor opened O_DSYNC"),
            )],
            None,
        ),
        row(
            "fstime read",
            Their::Kbps,
            &[("os.fs.read", "bufsize=1024,maxblocks=2000", EXACT)],
            None,
        ),
        // Seed 002's own rows of Table 1 (its C programs, run by UnixBench's harness): a
        // count of threads (or rounds) over 20 s, here time per thread on OS threads,
        // which is what the seed's pthreads programs made.
        row(
            "threadsWithComputation no joining",
            Their::Lps,
            &[("threads.compute", "join=none,work=10000,backend=os", SEED_THREADS)],
            None,
        ),
        row(
            "threadsWithSmallComputation no joining",
            Their::Lps,
            &[("threads.compute", "join=none,work=100,backend=os", SEED_THREADS)],
            None,
        ),
        row(
            "threadsPerformingAtomicOps",
            Their::Lps,
            &[("threads.atomic.contended", "ops=1000,backend=os", SEED_THREADS)],
            None,
        ),
        row(
            "threadsComp 10 16 joining",
            Their::Lps,
            &[("threads.compute", "join=16,work=10000,backend=os", SEED_THREADS)],
            None,
        ),
        row(
            "threadsComp 10 32 joining",
            Their::Lps,
            &[("threads.compute", "join=32,work=10000,backend=os", SEED_THREADS)],
            None,
        ),
        row(
            "mallocMemCopy",
            Their::Lps,
            &[(
                "mem.malloc_free",
                "size=64",
                Fidelity::Ours(
                    "64-byte blocks (the seed does not print its size), 16 bytes copied; \
                     rounds per second",
                ),
            )],
            None,
        ),
    ]
}

/// How the thread rows of seed 002's Table 1 are measured here.
const SEED_THREADS: Fidelity = Fidelity::Ours(
    "POSIX threads (glibc), time per thread; the work is xorshift64 steps (atomic adds for \
     the atomic row), not the seed's own loop",
);

fn lmbench_rows() -> Vec<SuiteRow> {
    let row = |name, unit, candidates| SuiteRow { name, unit, candidates, baseline: None };
    let us = Their::Micros;
    vec![
        row("simple syscall", us, &[("os.syscall.null", "", EXACT)]),
        row("simple read", us, &[("os.syscall.read", "", EXACT)]),
        row("simple write", us, &[("os.syscall.write", "", EXACT)]),
        row(
            "simple stat",
            us,
            &[("os.syscall.stat", "", Fidelity::Ours("stats /etc/passwd, not its temp file"))],
        ),
        row("simple fstat", us, &[("os.syscall.fstat", "", EXACT)]),
        row("simple open/close", us, &[("os.syscall.open_close", "", EXACT)]),
        row(
            "select on 10 fds",
            us,
            &[
                ("os.select.fds", "kind=file,fds=10,def=lmbench", EXACT),
                (
                    "os.select.fds",
                    "kind=file,fds=10",
                    Fidelity::Ours("nfds = max + 1: all 10 polled"),
                ),
            ],
        ),
        row(
            "select on 100 fds",
            us,
            &[
                ("os.select.fds", "kind=file,fds=100,def=lmbench", EXACT),
                (
                    "os.select.fds",
                    "kind=file,fds=100",
                    Fidelity::Ours("nfds = max + 1: all 100 polled"),
                ),
            ],
        ),
        row(
            "select on 10 tcp fds",
            us,
            &[
                ("os.select.fds", "kind=tcp,fds=10,def=lmbench", EXACT),
                (
                    "os.select.fds",
                    "kind=tcp,fds=10",
                    Fidelity::Ours("nfds = max + 1: all 10 polled"),
                ),
            ],
        ),
        row(
            "select on 100 tcp fds",
            us,
            &[
                ("os.select.fds", "kind=tcp,fds=100,def=lmbench", EXACT),
                (
                    "os.select.fds",
                    "kind=tcp,fds=100",
                    Fidelity::Ours("nfds = max + 1: all 100 polled"),
                ),
            ],
        ),
        row("signal handler installation", us, &[("os.signal.install", "", EXACT)]),
        row("signal handler overhead", us, &[("os.signal.catch", "", EXACT)]),
        row(
            "page fault",
            us,
            &[
                ("os.mm.pagefault", "folios=small,def=lmbench", EXACT),
                (
                    "os.mm.pagefault",
                    "folios=small",
                    Fidelity::Ours("touches alone, without the unmapping"),
                ),
            ],
        ),
        row(
            "pipe latency",
            us,
            &[("os.pipe.latency", SAME, Fidelity::Ours("both ends pinned to one CPU"))],
        ),
        row(
            "process fork+exit",
            us,
            &[("os.proc.fork_exit", "", Fidelity::Ours("child runs a 5-syscall prologue"))],
        ),
        row(
            "process fork+execve",
            us,
            &[
                ("os.proc.fork_exec", "def=lmbench", EXACT),
                ("os.proc.fork_exec", "def=schedlab", Fidelity::Ours("execs the schedlab binary")),
            ],
        ),
        row(
            "process fork+/bin/sh",
            us,
            &[
                ("os.proc.fork_sh", "def=lmbench", EXACT),
                ("os.proc.fork_sh", "", Fidelity::Ours("sh -c true, a builtin: no second exec")),
            ],
        ),
        row(
            "AF_UNIX sock stream latency",
            us,
            &[("os.unix.latency", SAME, Fidelity::Ours("both ends pinned to one CPU"))],
        ),
        row(
            "UDP latency using localhost",
            us,
            &[("os.udp.latency", SAME, Fidelity::Ours("both ends pinned to one CPU"))],
        ),
        row(
            "TCP latency using localhost",
            us,
            &[("os.tcp.latency", SAME, Fidelity::Ours("both ends pinned to one CPU"))],
        ),
        row(
            "pipe bandwidth",
            Their::MbPerSec,
            &[("os.pipe.bandwidth", SAME, Fidelity::Ours("both ends pinned to one CPU"))],
        ),
        row(
            "TCP bandwidth",
            Their::MbPerSec,
            &[("os.tcp.bandwidth", SAME, Fidelity::Ours("both ends pinned to one CPU"))],
        ),
        row(
            "AF_UNIX socket bandwidth",
            Their::MbPerSec,
            &[("os.unix.bandwidth", SAME, Fidelity::Ours("both ends pinned to one CPU"))],
        ),
    ]
}

/// Which suite's rows to look a name up in ([`suite_row`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suite {
    /// [`unixbench_text`]'s rows.
    UnixBench,
    /// [`lmbench_text`]'s rows (seed 002's Table 2).
    Lmbench,
}

/// The schedlab row a suite's row is measured by: its first (preferred) candidate, as
/// (probe, params key, fidelity) and the suite's unit for it; `None` for a name the view
/// does not know. The published reference runs ([`crate::reference`]) use this mapping.
pub(crate) fn suite_row(
    suite: Suite,
    name: &str,
) -> Option<(&'static str, &'static str, Fidelity, Their)> {
    let rows = match suite {
        Suite::UnixBench => unixbench_rows(),
        Suite::Lmbench => lmbench_rows(),
    };
    let row = rows.into_iter().find(|r| r.name == name)?;
    let &(probe, key, fidelity) = row.candidates.first()?;
    Some((probe, key, fidelity, row.unit))
}

/// The measured median of the first candidate of `row` present in `run`, with the
/// measurement and the candidate's fidelity.
fn find<'a>(run: &'a Run, row: &SuiteRow) -> Option<(&'a Measurement, f64, Fidelity)> {
    row.candidates.iter().find_map(|&(probe, key, fidelity)| {
        let want = Params::from_key(key);
        let m = run
            .results
            .iter()
            .find(|m| m.probe == probe && m.params == want && m.outcome == Outcome::Ok)?;
        let v = row.unit.convert(m.summary.as_ref()?.median, m.unit)?;
        Some((m, v, fidelity))
    })
}

/// A number to a few significant digits, without exponent: 1.2346e7 -> "12345678".
fn num(v: f64) -> String {
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 1.0 {
        2
    } else {
        4
    };
    format!("{v:.digits$}")
}

pub(crate) fn definition(f: Fidelity) -> String {
    match f {
        Fidelity::Exact => "theirs".into(),
        Fidelity::Ours(why) => format!("ours: {why}"),
    }
}

fn schedlab_name(m: &Measurement) -> String {
    if m.params.0.is_empty() {
        m.probe.clone()
    } else {
        format!("{} [{}]", m.probe, m.params.key())
    }
}

/// The UnixBench view's table and its system index: (table, index, index tests used).
fn unixbench_table(run: &Run) -> (Table, Option<f64>, usize) {
    let mut t = Table::new(&[
        ("UnixBench test", Align::Left),
        ("result", Align::Right),
        ("unit", Align::Left),
        ("count in 10 s", Align::Right),
        ("baseline", Align::Right),
        ("index", Align::Right),
        ("schedlab row", Align::Left),
        ("definition", Align::Left),
    ]);
    let mut logs = Vec::new();
    for row in unixbench_rows() {
        let Some((m, v, fidelity)) = find(run, &row) else { continue };
        let index = row.baseline.map(|b| v * 10.0 / b);
        if let Some(i) = index {
            logs.push(i.ln());
        }
        t.row(vec![
            row.name.to_string(),
            num(v),
            row.unit.symbol().to_string(),
            row.unit.count_in(v, 10.0).map_or("-".into(), num),
            row.baseline.map_or("-".into(), num),
            index.map_or("-".into(), |i| format!("{i:.1}")),
            schedlab_name(m),
            definition(fidelity),
        ]);
    }
    let index = (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp());
    (t, index, logs.len())
}

/// `schedlab show RUN --view unixbench`: the run's UnixBench rows in UnixBench's units, with
/// counts per 10 s, each index test's index and the (partial) system index.
pub fn unixbench_text(run: &Run) -> String {
    let (table, index, used) = unixbench_table(run);
    let mut text =
        format!("{}: run #{} as UnixBench reports it\n\n", run.meta.display_name(), run.meta.id);
    if table.is_empty() {
        text.push_str("no UnixBench row in this run: run `schedlab run --filter os` first\n");
        return text;
    }
    text.push_str(&table.to_terminal());
    match index {
        Some(i) => text.push_str(&format!(
            "\nSystem Benchmarks {}Index Score: {i:.1} (geometric mean of {used} of UnixBench's {} index tests)\n",
            if used < UNIXBENCH_INDEX.len() { "Partial " } else { "" },
            UNIXBENCH_INDEX.len()
        )),
        None => text.push_str("\nno index test in this run, so no index\n"),
    }
    text.push_str(
        "index = result × 10 / baseline; baselines: \"George\", a SPARCstation 20-61 (128 MB RAM, Solaris 2.3) rated 10.0, from UnixBench 5.1's pgms/index.base. \
Dhrystone and Whetstone have no schedlab row. Seed 002's Table 1 counts over 20 s: twice the 10 s counts.\n",
    );
    text
}

/// `schedlab show RUN --view lmbench`: seed 002's Table 2 rows, named as there, in
/// lmbench's units, from the run's results.
pub fn lmbench_text(run: &Run) -> String {
    let mut t = Table::new(&[
        ("lmbench row", Align::Left),
        ("result", Align::Right),
        ("unit", Align::Left),
        ("schedlab row", Align::Left),
        ("definition", Align::Left),
    ]);
    for row in lmbench_rows() {
        let Some((m, v, fidelity)) = find(run, &row) else { continue };
        t.row(vec![
            row.name.to_string(),
            num(v),
            row.unit.symbol().to_string(),
            schedlab_name(m),
            definition(fidelity),
        ]);
    }
    let mut text =
        format!("{}: run #{} as lmbench reports it\n\n", run.meta.display_name(), run.meta.id);
    if t.is_empty() {
        text.push_str("no lmbench row in this run: run `schedlab run --filter os` first\n");
        return text;
    }
    text.push_str(&t.to_terminal());
    text.push_str(
        "rows and names of seed 002's Table 2; µs per operation, MB/s with lmbench's MB of 10^6 bytes. \
\"theirs\": lmbench's definition (a def=lmbench variant where ours differs); \"ours\": schedlab's, how it differs.\n",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::model::{Better, RunMeta};
    use schedlab_measure::stats::Summary;

    fn measurement(probe: &str, key: &str, unit: Unit, median: f64) -> Measurement {
        let mut s = Summary::of(&[median, median, median]).unwrap();
        s.median = median;
        Measurement {
            probe: probe.into(),
            params: Params::from_key(key),
            unit,
            better: Better::Lower,
            outcome: Outcome::Ok,
            notes: Params::new(),
            iters_per_sample: 1,
            overhead_ns_per_iter: 0.0,
            samples: Vec::new(),
            summary: Some(s),
            noise: None,
            wall_s: 0.0,
        }
    }

    fn run(results: Vec<Measurement>) -> Run {
        let meta = RunMeta::starting(
            "quick",
            schedlab_measure::machine::Machine::fingerprint(),
            ("t", "t"),
        );
        Run { meta, results, warnings: Vec::new() }
    }

    #[test]
    fn units_convert_as_the_suites_count() {
        assert_eq!(Their::Lps.convert(1000.0, Unit::Nanos), Some(1e6));
        assert_eq!(Their::Lps.convert(2.0, Unit::Micros), Some(5e5));
        assert_eq!(Their::Lpm.convert(30e6, Unit::Micros), Some(2.0));
        assert_eq!(Their::Kbps.convert(2.0, Unit::MibPerSec), Some(2048.0));
        assert_eq!(Their::Micros.convert(250.0, Unit::Nanos), Some(0.25));
        assert_eq!(Their::Micros.convert(1.0, Unit::MibPerSec), None);
        assert_eq!(Their::Kbps.convert(1.0, Unit::Nanos), None);
        assert_eq!(Their::Lpm.count_in(120.0, 10.0), Some(20.0));
        assert_eq!(Their::Lps.count_in(3.0, 10.0), Some(30.0));
    }

    /// `to_ours` undoes `convert` for every pair that converts, and refuses the others.
    #[test]
    fn to_ours_is_the_inverse_of_convert() {
        let units = [Unit::Nanos, Unit::Micros, Unit::OpsPerSec, Unit::MibPerSec];
        let theirs = [Their::Lps, Their::Lpm, Their::Kbps, Their::Micros, Their::MbPerSec];
        for t in theirs {
            for u in units {
                match (t.convert(250.0, u), t.to_ours(250.0, u)) {
                    (Some(theirs), Some(_)) => {
                        let back = t.to_ours(theirs, u).unwrap();
                        assert!((back - 250.0).abs() < 1e-9, "{t:?} {u:?}: {back}");
                    }
                    (None, None) => {}
                    other => panic!("{t:?} {u:?}: {other:?}"),
                }
            }
        }
        assert_eq!(Their::Lps.to_ours(500.0, Unit::Nanos), Some(2e6));
        assert_eq!(Their::Kbps.to_ours(2048.0, Unit::MibPerSec), Some(2.0));
        // lmbench's MB is 10^6 bytes: 1 MiB/s is 1.048576 of its MB/s.
        let mb = Their::MbPerSec.convert(1000.0, Unit::MibPerSec).unwrap();
        assert!((mb - 1048.576).abs() < 1e-9, "{mb}");
        let mib = Their::MbPerSec.to_ours(1048.576, Unit::MibPerSec).unwrap();
        assert!((mib - 1000.0).abs() < 1e-9, "{mib}");
        assert_eq!(Their::Micros.to_ours(0.5, Unit::Nanos), Some(500.0));
        assert_eq!(suite_row(Suite::Lmbench, "simple syscall").unwrap().0, "os.syscall.null");
        assert_eq!(suite_row(Suite::UnixBench, "mallocMemCopy").unwrap().0, "mem.malloc_free");
    }

    /// Seed 002's own Table 1 rows (threads, malloc) are read from their probes' OS-thread
    /// rows: 946.7 µs per thread is 1056.3 threads per second, 10563 in 10 s.
    #[test]
    fn the_unixbench_view_reads_seed_002s_thread_and_malloc_rows() {
        let r = run(vec![
            measurement(
                "threads.compute",
                "join=none,work=10000,backend=os",
                Unit::Nanos,
                946_700.0,
            ),
            measurement("threads.compute", "join=none,work=10000,backend=rt", Unit::Nanos, 1.0),
            measurement("threads.atomic.contended", "ops=1000,backend=os", Unit::Nanos, 500_000.0),
            measurement("mem.malloc_free", "size=64", Unit::Nanos, 50.0),
        ]);
        let text = unixbench_text(&r);
        let line =
            |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or("").to_string();
        let compute = line("threadsWithComputation no joining");
        assert!(compute.contains("1056") && compute.contains("backend=os"), "{text}");
        assert!(line("threadsPerformingAtomicOps").contains("2000"), "{text}");
        assert!(line("mallocMemCopy").contains("20000000"), "{text}");
        assert!(!text.contains("backend=rt"), "{text}");
    }

    /// The index is the geometric mean of result × 10 / baseline over the index tests
    /// present; rows outside the index show no index.
    #[test]
    fn the_unixbench_index_is_a_geometric_mean_against_george() {
        // syscall mix at 1 µs: 1e6 lps, index 1e6 * 10 / 15000 = 666.7;
        // spawn at 1 ms: 1000 lps, index 1000 * 10 / 126 = 79.37.
        let r = run(vec![
            measurement("os.syscall.mix", "", Unit::Nanos, 1000.0),
            measurement("os.proc.fork_exit", "", Unit::Micros, 1000.0),
            measurement("os.cpu.hanoi", "", Unit::Nanos, 5000.0),
        ]);
        let (t, index, used) = unixbench_table(&r);
        assert_eq!(used, 2);
        let want = (1e6_f64 * 10.0 / 15000.0 * (1000.0 * 10.0 / 126.0)).sqrt();
        assert!((index.unwrap() - want).abs() < 1e-6 * want, "{index:?} vs {want}");
        assert_eq!(t.len(), 3);
        let text = unixbench_text(&r);
        assert!(text.contains("Partial Index Score: 230.0"), "{text}");
        assert!(text.contains("666.7") && text.contains("79.4"), "{text}");
        // hanoi: 200000 lps, 2000000 in 10 s, no index.
        assert!(text.contains("2000000"), "{text}");
    }

    /// lmbench's definition wins over ours when both were measured, and ours is marked.
    #[test]
    fn the_lmbench_view_prefers_lmbench_definitions() {
        let r = run(vec![
            measurement("os.select.fds", "kind=tcp,fds=10", Unit::Micros, 0.5),
            measurement("os.select.fds", "kind=tcp,fds=10,def=lmbench", Unit::Micros, 0.3),
            measurement("os.select.fds", "kind=file,fds=10", Unit::Micros, 0.2),
            measurement("os.syscall.null", "", Unit::Nanos, 150.0),
        ]);
        let text = lmbench_text(&r);
        let line =
            |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or("").to_string();
        assert!(line("select on 10 tcp fds").contains("0.3000"), "{text}");
        assert!(line("select on 10 tcp fds").contains("theirs"), "{text}");
        assert!(line("select on 10 fds ").contains("ours: nfds"), "{text}");
        assert!(line("simple syscall").contains("0.1500"), "{text}");
        assert!(!text.contains("page fault"), "{text}");
        assert!(lmbench_text(&run(Vec::new())).contains("no lmbench row"));
        assert!(unixbench_text(&run(Vec::new())).contains("no UnixBench row"));
    }

    /// Every candidate names a catalog-style id and a parseable key, and every index
    /// baseline the view uses is in the cited table.
    #[test]
    fn rows_are_well_formed() {
        for row in unixbench_rows().iter().chain(lmbench_rows().iter()) {
            assert!(!row.candidates.is_empty(), "{}", row.name);
            for (probe, key, _) in row.candidates {
                assert!(
                    ["os.", "threads.", "mem."].iter().any(|f| probe.starts_with(f)),
                    "{probe}"
                );
                assert_eq!(Params::from_key(key).key(), *key, "{probe} [{key}]");
            }
        }
        let used = unixbench_rows().iter().filter(|r| r.baseline.is_some()).count();
        assert_eq!(used, 10);
    }
}
