//! The published tables as reference runs: `schedlab reference list|import SET`.
//!
//! Each set is a table of a seed paper transcribed cell by cell, as printed (the printed
//! text is kept beside the number), with the machine each column was measured on as the
//! paper describes it. A cell becomes a result of a run labelled `SET:COLUMN` (suite
//! `published`) when its row has a schedlab probe: the row is looked up in the suite views'
//! mapping ([`crate::suites`], the rows `show --view lmbench|unixbench` print) and the value
//! is converted from the paper's unit to the probe's:
//!
//! - seed 002 Table 1 (UnixBench, "absolute counts of operations over 20 seconds"): count /
//!   20 is the rate in UnixBench's unit for the row (lps; KBps for the file rows, whose
//!   count is KB), then lps -> ns per operation as 1e9 / lps, KBps -> MiB/s as / 1024.
//! - seed 002 Table 2 (lmbench, "in microseconds"; bandwidths in lmbench's MB/s, 10^6 bytes
//!   in lmbench 3, the version whose row names the table uses): µs -> ns × 1000; MB/s ->
//!   MiB/s as / 1.048576.
//! - seed 003 §7 (thread operations on a 500 MHz G3 iBook, µs): µs -> ns × 1000.
//!
//! Table 1's thread and malloc rows (seed 002's own programs) map to `threads.compute`,
//! `threads.atomic.contended` (OS threads) and `mem.malloc_free`, as a count of threads or
//! rounds over 20 s. A row without a probe would stay in the data, listed as "no probe"; a
//! cell that cannot be read unambiguously is kept as printed with no value.

use schedlab_measure::machine::Machine;
use schedlab_measure::model::{Measurement, Params, Run, RunMeta, RunStatus, Sample, Unit};

use crate::suites::{self, Fidelity, Suite, Their};
use crate::table::{Align, Table};

/// The suite every published run is stored under.
pub const SUITE: &str = "published";

/// The unit a paper printed a table in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printed {
    /// A count of operations over 20 seconds (seed 002 Table 1).
    CountPer20s,
    /// Microseconds per operation.
    Micros,
    /// MB per second (lmbench's MB: 10^6 bytes).
    MbPerSec,
}

impl Printed {
    /// How the paper states the unit.
    pub fn label(self) -> &'static str {
        match self {
            Printed::CountPer20s => "count in 20 s",
            Printed::Micros => "µs",
            Printed::MbPerSec => "MB/s",
        }
    }
}

/// Where a published row is measured in our catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// The row of a suite view with this name ([`suites::suite_row`]).
    Suite(Suite, &'static str),
    /// A probe and params key, with how its definition compares ([`Fidelity`]).
    Direct(&'static str, &'static str, Fidelity),
    /// No probe measures it.
    None,
}

/// One row of a published table: its printed name, how it is measured here and one printed
/// cell per column (`None`: left out, unreadable; the reason is in [`Set::unread`]).
struct Row {
    name: &'static str,
    table: &'static str,
    unit: Printed,
    probe: Probe,
    cells: &'static [Option<&'static str>],
}

/// A machine column of a published table.
#[derive(Debug, Clone)]
pub struct Column {
    /// The label suffix: `seed002:` + key.
    pub key: &'static str,
    /// The column as printed.
    pub name: &'static str,
    /// OS as printed.
    pub os: &'static str,
    /// Kernel version as printed ("not printed" when it is not).
    pub kernel: &'static str,
    /// Architecture as printed or named by the CPU.
    pub arch: &'static str,
    /// CPU as printed.
    pub cpu: &'static str,
    /// CPU clock in MHz as printed.
    pub mhz: f64,
    /// Memory in bytes, when printed.
    pub memory_bytes: Option<u64>,
}

/// One published reference set.
pub struct Set {
    /// `seed002`, `seed003`.
    pub name: &'static str,
    /// The paper and tables.
    pub source: &'static str,
    /// Machine columns, in the paper's order.
    pub columns: Vec<Column>,
    rows: Vec<Row>,
    /// Cells left out and why.
    pub unread: &'static [&'static str],
}

/// One published cell, resolved: what the paper printed and what it is here.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The set (`seed002`).
    pub set: &'static str,
    /// `Table 1`, `Table 2`, `§7`.
    pub table: &'static str,
    /// The machine column key.
    pub column: &'static str,
    /// The row as printed.
    pub row: &'static str,
    /// The cell exactly as printed.
    pub printed: &'static str,
    /// Its number.
    pub value: f64,
    /// Its unit as printed.
    pub unit: Printed,
    /// Our probe, params key, unit and value in that unit; `None` when no probe measures it.
    pub ours: Option<(&'static str, &'static str, Unit, f64)>,
    /// How the value was converted, or why it was not.
    pub conversion: String,
    /// Whose definition the probe measures ("theirs", "ours: ...").
    pub definition: String,
}

const MIB: u64 = 1 << 20;

/// The names of the sets, for `reference list` and error messages.
pub const SETS: [&str; 2] = ["seed002", "seed003"];

/// The set called `name`.
pub fn set(name: &str) -> Option<Set> {
    match name {
        "seed002" => Some(seed002()),
        "seed003" => Some(seed003()),
        _ => None,
    }
}

fn seed002() -> Set {
    // "Both the iMac and HP PC had a 3200 MHz Intel i5 processor with 8192 Mbytes of memory."
    let col = |key, name, os, kernel| Column {
        key,
        name,
        os,
        kernel,
        arch: "x86 (Intel i5)",
        cpu: "Intel i5, 3200 MHz",
        mhz: 3200.0,
        memory_bytes: Some(8192 * MIB),
    };
    let t1 = |name, ub: &'static str, cells| Row {
        name,
        table: "Table 1",
        unit: Printed::CountPer20s,
        probe: if ub.is_empty() { Probe::None } else { Probe::Suite(Suite::UnixBench, ub) },
        cells,
    };
    let t2 = |name, unit, cells| Row {
        name,
        table: "Table 2",
        unit,
        probe: Probe::Suite(Suite::Lmbench, name),
        cells,
    };
    let us = Printed::Micros;
    let mb = Printed::MbPerSec;
    Set {
        name: "seed002",
        source: "seed 002, Papadimitriou and Moussiades, \"Mac OS versus FreeBSD: A Comparative Evaluation\": Table 1 (UnixBench, counts over 20 s) and Table 2 (lmbench, µs)",
        columns: vec![
            col("mac-os", "Mac OS", "Mac OS (xnu; version not printed)", "not printed"),
            col("freebsd-imac", "FreeBSD iMac", "FreeBSD (version not printed)", "not printed"),
            col("freebsd-hp", "FreeBSD HP PC", "FreeBSD (version not printed)", "not printed"),
            col("linux-hp", "Linux HP PC", "Linux (distribution not printed)", "not printed"),
            col("linux-imac", "Linux iMac", "OpenSuSE 42.3 Leap", "4.4.76-1"),
        ],
        rows: vec![
            // Table 1 has no Linux iMac column.
            t1("execl 20", "Execl Throughput", &[Some("7139"), Some("24110"), Some("33347"), Some("49469"), None]),
            t1("syscall 20", "System Call Overhead", &[Some("12884110"), Some("10620877"), Some("14665300"), Some("28773938"), None]),
            t1("spawn 20", "Process Creation", &[Some("35638"), Some("71768"), Some("120943"), Some("168546"), None]),
            t1("context switching 20", "Pipe-based Context Switching", &[Some("1597858"), Some("2484023"), Some("3261091"), Some("2312248"), None]),
            t1("hanoi 20", "hanoi", &[Some("4603145"), Some("5025719"), Some("4575185"), Some("4364714"), None]),
            t1("pipe throughput", "Pipe Throughput", &[Some("25591689"), Some("44677193"), Some("39667978"), Some("45399029"), None]),
            t1("mcopy 20", "mcopy", &[Some("56937707"), Some("375264695"), Some("309153485"), Some("1906408815"), None]),
            t1("threadsWithComputation no joining", "threadsWithComputation no joining", &[Some("38642"), Some("30279"), Some("28103"), Some("21126"), None]),
            t1("threadsWithSmallComputation no joining", "threadsWithSmallComputation no joining", &[Some("74551"), Some("48152"), Some("40782"), Some("106691"), None]),
            t1("threadsPerformingAtomicOps", "threadsPerformingAtomicOps", &[Some("73579"), Some("47262"), Some("42472"), Some("107903"), None]),
            t1("threadsComp 10 16 joining", "threadsComp 10 16 joining", &[Some("21102"), Some("26025"), Some("27135"), Some("11194"), None]),
            t1("threadsComp 10 32 joining", "threadsComp 10 32 joining", &[Some("11098"), Some("14667"), Some("24244"), Some("5932"), None]),
            t1("mallocMemCopy", "mallocMemCopy", &[Some("1331726526"), Some("1243759142"), Some("802439723"), Some("572844647"), None]),
            t1("fstime write 20", "fstime write", &[Some("1686255"), Some("102547"), Some("187417"), Some("1211860"), None]),
            t1("fstime read 20", "fstime read", &[Some("1862444"), Some("1752057"), Some("512512"), Some("4140431"), None]),
            t1("fstime copy 20", "File Copy 1024 bufsize 2000 maxblocks", &[Some("812984"), Some("96719"), Some("126403"), Some("862759"), None]),
            t2("simple syscall", us, &[Some("0.1061"), Some("0.1015"), Some("0.11098"), Some("0.1022"), Some("0.071")]),
            t2("simple read", us, &[Some("0.3750"), Some("0.1670"), Some("0.19080"), Some("0.1663"), Some("0.145")]),
            t2("simple write", us, &[Some("0.3222"), Some("0.1374"), Some("0.16430"), Some("0.1318"), Some("0.090")]),
            t2("simple stat", us, &[Some("1.1455"), Some("1.2639"), Some("3.23270"), Some("0.5105"), Some("0.560")]),
            t2("simple fstat", us, &[Some("0.3858"), Some("0.2521"), Some("0.53070"), Some("0.1098"), Some("0.170")]),
            t2("simple open/close", us, &[Some("2.1956"), Some("1.6104"), Some("3.65570"), Some("1.0097"), Some("1.070")]),
            t2("select on 10 fds", us, &[Some("1.0893"), Some("0.3352"), Some("0.46590"), Some("0.2411"), Some("0.270")]),
            t2("select on 100 fds", us, &[Some("18.6181"), Some("2.8129"), Some("8.76470"), Some("0.8377"), Some("0.760")]),
            t2("select on 10 tcp fds", us, &[Some("0.9444"), Some("0.3772"), Some("0.41380"), Some("1.2411"), Some("1.280")]),
            t2("select on 100 tcp fds", us, &[Some("17.1393"), Some("5.0446"), Some("6.15760"), Some("2.2007"), Some("1.810")]),
            t2("signal handler installation", us, &[Some("0.2382"), Some("0.1904"), Some("0.19470"), Some("0.1269"), Some("0.155")]),
            t2("signal handler overhead", us, &[Some("1.6820"), Some("1.3483"), Some("1.47840"), Some("0.6557"), Some("0.950")]),
            t2("page fault", us, &[Some("4.4007"), Some("0.0300"), Some("0.01190"), Some("0.1785"), Some("0.330")]),
            t2("pipe latency", us, &[Some("5.7449"), Some("3.2599"), Some("3.02500"), Some("4.3439"), Some("3.540")]),
            t2("process fork+exit", us, &[Some("262.9545"), Some("95.1455"), Some("105.24000"), Some("81.5161"), Some("90.730")]),
            t2("process fork+execve", us, &[Some("1859.0000"), Some("335.5333"), Some("401.70650"), Some("264.9545"), Some("460.230")]),
            t2("process fork+/bin/sh", us, &[Some("3081.5000"), Some("757.2500"), Some("1348.88610"), Some("1398.0000"), Some("4426.400")]),
            t2("AF_UNIX sock stream latency", us, &[Some("7.3108"), Some("3.5611"), Some("3.79670"), Some("4.0548"), Some("3.390")]),
            t2("UDP latency using localhost", us, &[Some("18.1897"), Some("6.7410"), Some("7.66220"), Some("8.0423"), Some("4.200")]),
            t2("TCP latency using localhost", us, &[Some("18.6043"), Some("7.3267"), Some("9.05000"), Some("9.6713"), Some("6.260")]),
            t2("pipe bandwidth", mb, &[Some("5301.4400"), Some("9951.7100"), Some("9252.23000"), Some("13251.0500"), Some("6942.800")]),
            t2("TCP bandwidth", mb, &[Some("1421.8100"), Some("2182.8100"), Some("2276.84000"), Some("5291.8800"), Some("3769.900")]),
            t2("AF_UNIX socket bandwidth", mb, &[Some("1421.8100"), Some("2182.8100"), None, Some("5291.8800"), Some("14107.050")]),
        ],
        unread: &[
            "Table 1 has no Linux iMac column (the text says its results were \"very close to the HP PC results\")",
            "Table 2, AF_UNIX socket bandwidth, FreeBSD HP PC: printed \"2276.84.00000\" (two decimal points), left out",
            "Table 1 spawn 20 and Table 2 process fork+exit are both measured by os.proc.fork_exit: a run stores Table 2's figure and notes Table 1's on it (also=...)",
            "Table 2, AF_UNIX socket bandwidth: the Mac OS, FreeBSD and Linux HP cells are printed identical to the TCP bandwidth row; kept as printed",
        ],
    }
}

/// What stands for each of seed 003's thread systems here (none of them exists on Linux
/// today), per column: SA, PTH, Linux. The seed measured each through its POSIX threads
/// interface, so the two pthreads libraries are measured by the same C program
/// (`backend=pthread-rt|pthread-os`); GNU PTH, a user-level library with its own API, by
/// schedlab-rt's own (Rust) API. The three modern rows are one probe's backends, so
/// `compare` shows them one under the other beside the published cells.
const SEED003_STAND_INS: [Fidelity; 3] = [
    Fidelity::Ours("schedlab-rt's M:N user threads behind POSIX threads (libschedlab_pthread.so, the same C program as glibc's row) stand for the NetBSD SA pthread library"),
    Fidelity::Ours("schedlab-rt's user threads through its own Rust API stand for GNU PTH (N:1, pure user space, its own API)"),
    Fidelity::Ours("glibc's NPTL 1:1 threads, the same C program as the library's row, stand for LinuxThreads (1:1)"),
];

fn seed003() -> Set {
    // "an Apple iBook, with a 500MHz G3 processor with 256k of L2 cache"
    let col = |key, name, os, kernel| Column {
        key,
        name,
        os,
        kernel,
        arch: "powerpc (G3)",
        cpu: "500MHz G3 processor with 256k of L2 cache (Apple iBook)",
        mhz: 500.0,
        memory_bytes: None,
    };
    // Per column: SA is a POSIX threads library on M:N user threads, measured here by the C
    // program on libschedlab_pthread.so (backend=pthread-rt); PTH is a user-level library,
    // schedlab-rt through Rust (backend=rt); LinuxThreads is glibc's 1:1 POSIX threads
    // (backend=pthread-os).
    let row = |name, probe: [(&'static str, &'static str); 3], cells| -> [Row; 3] {
        let mk = |i: usize, cells: &'static [Option<&'static str>]| Row {
            name,
            table: "§7",
            unit: Printed::Micros,
            probe: Probe::Direct(probe[i].0, probe[i].1, SEED003_STAND_INS[i]),
            cells,
        };
        let [a, b, c]: [&'static [Option<&'static str>]; 3] = cells;
        [mk(0, a), mk(1, b), mk(2, c)]
    };
    let create = [
        ("threads.create", "batch=1,backend=pthread-rt"),
        ("threads.create", "batch=1,backend=rt"),
        ("threads.create", "batch=1,backend=pthread-os"),
    ];
    let mutex = [
        ("threads.mutex.uncontended", "backend=pthread-rt"),
        ("threads.mutex.uncontended", "backend=rt"),
        ("threads.mutex.uncontended", "backend=pthread-os"),
    ];
    let switch = [
        ("threads.switch", "backend=pthread-rt"),
        ("threads.switch", "backend=rt"),
        ("threads.switch", "backend=pthread-os"),
    ];
    let mut rows = Vec::new();
    // Printed "15µs 96µs 90µs", "0.4µs 0.3µs 0.6µs" (the text extraction shows the decimal
    // point as ':' and µ as an invalid byte), "225µs 166µs 82µs".
    rows.extend(row(
        "Thread",
        create,
        [&[Some("15"), None, None], &[None, Some("96"), None], &[None, None, Some("90")]],
    ));
    rows.extend(row(
        "Mutex",
        mutex,
        [&[Some("0.4"), None, None], &[None, Some("0.3"), None], &[None, None, Some("0.6")]],
    ));
    rows.extend(row(
        "Context",
        switch,
        [&[Some("225"), None, None], &[None, Some("166"), None], &[None, None, Some("82")]],
    ));
    rows.extend(hbench_rows());
    let alpha = |key, name, os| Column {
        key,
        name,
        os,
        kernel: "not printed",
        arch: "alpha (Digital Alpha 21164)",
        cpu: "500 MHz Digital Alpha 21164",
        mhz: 500.0,
        memory_bytes: None,
    };
    Set {
        name: "seed003",
        source: "seed 003, \"An Implementation of Scheduler Activations on the NetBSD Operating System\", §7: thread create, mutex and context switch (µs) on an Apple iBook; HBench-OS system calls (µs) on a 500 MHz Alpha before and after scheduler activations",
        columns: vec![
            col("sa", "SA", "NetBSD, scheduler activations thread library (nathanw_sa branch)", "not printed"),
            col("pth", "PTH", "NetBSD, GNU PTH library", "not printed"),
            col("linux", "Linux", "Linuxppc 2.4.19, LinuxThreads", "2.4.19"),
            // Seed 003 issue 26: HBench-OS columns.
            alpha("before-sa", "before SA", "NetBSD-current before scheduler activations (version not printed)"),
            alpha("after-sa", "after SA", "NetBSD-current with scheduler activations (nathanw_sa branch)"),
        ],
        rows,
        unread: &[
            "§7's HBench-OS table prints no unit; its cells are read as HBench-OS's lat_syscall reports them, microseconds (0.631 for getpid: about 315 cycles at 500 MHz)",
        ],
    }
}

/// Seed 003 §7's HBench-OS table, "before SA" and "after SA" on NetBSD/Alpha (issue 26): the
/// five system-call rows, each on the probe that makes the same call. The first three
/// columns (the iBook's thread systems) are left empty.
fn hbench_rows() -> Vec<Row> {
    let row = |name, probe, key, fidelity, cells| Row {
        name,
        table: "§7 HBench-OS",
        unit: Printed::Micros,
        probe: Probe::Direct(probe, key, fidelity),
        cells,
    };
    let hbench = Fidelity::Exact;
    vec![
        row("getpid", "os.syscall.getpid", "", hbench, &[None, None, None, Some("0.631"), Some("0.601")]),
        row("getrusage", "os.syscall.getrusage", "", hbench, &[None, None, None, Some("4.053"), Some("4.332")]),
        row(
            "timeofday",
            "os.syscall.gettimeofday",
            "via=syscall",
            Fidelity::Ours("the gettimeofday system call, which HBench-OS timed in 2002; programs now read the clock through the vDSO (via=vdso)"),
            &[None, None, None, Some("1.627"), Some("1.911")],
        ),
        row(
            "sbrk",
            "os.mm.sbrk",
            "",
            Fidelity::Ours("brk(0) as a system call: glibc answers sbrk(0) without entering the kernel, NetBSD's libc did not"),
            &[None, None, None, Some("0.722"), Some("0.687")],
        ),
        row(
            "sigaction",
            "os.signal.install",
            "",
            Fidelity::Ours("lmbench's lat_sig install: sigaction(SIGUSR1) installing a handler"),
            &[None, None, None, Some("1.345"), Some("1.315")],
        ),
    ]
}

impl Set {
    /// Every printed cell of the set, in table order (row by row, column by column),
    /// resolved to our probe and unit. `units` gives a probe's unit (the catalog's).
    pub fn cells(&self, units: &dyn Fn(&str) -> Option<Unit>) -> Vec<Cell> {
        let mut out = Vec::new();
        for row in &self.rows {
            let mapped = match row.probe {
                Probe::Suite(suite, name) => {
                    suites::suite_row(suite, name).map(|(p, k, f, their)| (p, k, f, Some(their)))
                }
                Probe::Direct(p, k, f) => Some((p, k, f, None)),
                Probe::None => None,
            };
            for (col, printed) in self.columns.iter().zip(row.cells) {
                let Some(printed) = *printed else { continue };
                let value: f64 = printed.parse().expect("a transcribed cell is a number");
                let mut cell = Cell {
                    set: self.name,
                    table: row.table,
                    column: col.key,
                    row: row.name,
                    printed,
                    value,
                    unit: row.unit,
                    ours: None,
                    conversion: "no probe".into(),
                    definition: String::new(),
                };
                if let Some((probe, key, fidelity, their)) = mapped {
                    cell.definition = suites::definition(fidelity);
                    match units(probe) {
                        None => {
                            cell.conversion = format!("no probe: {probe} is not in the catalog")
                        }
                        Some(unit) => match convert(value, row.unit, their, unit) {
                            Ok((v, how)) => {
                                cell.ours = Some((probe, key, unit, v));
                                cell.conversion = how;
                            }
                            Err(why) => cell.conversion = format!("not converted: {why}"),
                        },
                    }
                }
                out.push(cell);
            }
        }
        out
    }

    /// The runs the set imports: one per column, with the cells that have a probe, each a
    /// result with one sample (the published value in the probe's unit).
    pub fn runs(&self, units: &dyn Fn(&str) -> Option<Unit>, build: (&str, &str)) -> Vec<Run> {
        let cells = self.cells(units);
        self.columns
            .iter()
            .map(|col| {
                let mut meta = RunMeta::starting(SUITE, machine(self, col), build);
                meta.label = Some(format!("{}:{}", self.name, col.key));
                meta.status = RunStatus::Complete;
                meta.settings = Params::new()
                    .with("source", self.source)
                    .with("column", col.name)
                    .with("published", "true");
                let mine: Vec<&Cell> = cells.iter().filter(|c| c.column == col.key).collect();
                // Two rows measured by one probe and params (Table 1's spawn and Table 2's
                // fork+exit): the later table's cell is stored, the earlier one noted on it.
                let shadowed = |c: &Cell| {
                    mine.iter()
                        .rev()
                        .find(|o| {
                            o.ours.is_some()
                                && o.ours.map(|x| (x.0, x.1)) == c.ours.map(|x| (x.0, x.1))
                        })
                        .filter(|o| o.row != c.row)
                        .copied()
                };
                let results =
                    mine.iter()
                        .filter_map(|&c| {
                            if shadowed(c).is_some() {
                                return None;
                            }
                            let (probe, key, unit, v) = c.ours?;
                            let sample = Sample {
                                iters: 1,
                                elapsed_ns: 0,
                                value: v,
                                other_cpu_ns: None,
                                migrated: false,
                            };
                            let mut m = Measurement::of_samples(
                                probe,
                                Params::from_key(key),
                                unit,
                                vec![sample],
                                0.0,
                            );
                            m.notes = Params::new()
                                .with("published", format!("{} {}", c.printed, c.unit.label()))
                                .with("source", format!("{} {}, {}", self.name, c.table, c.row))
                                .with("conversion", &c.conversion)
                                .with("definition", &c.definition);
                            if let Some(earlier) = mine.iter().find(|o| {
                                o.row != c.row && shadowed(o).is_some_and(|k| k.row == c.row)
                            }) {
                                m.notes.set(
                                    "also",
                                    format!(
                                        "{} {}, {} {} = {}",
                                        earlier.table,
                                        earlier.row,
                                        earlier.printed,
                                        earlier.unit.label(),
                                        earlier.ours.map_or(String::new(), |o| format!(
                                            "{} {}",
                                            o.3,
                                            o.2.symbol()
                                        ))
                                    ),
                                );
                            }
                            Some(m)
                        })
                        .collect();
                Run { meta, results, warnings: Vec::new() }
            })
            .collect()
    }
}

/// The machine of a published column, as the paper describes it; what it does not print is
/// left empty or says "not printed".
fn machine(set: &Set, col: &Column) -> Machine {
    Machine {
        host: format!("{} {}", set.name, col.name),
        os: col.os.to_string(),
        kernel: col.kernel.to_string(),
        kernel_version: String::new(),
        arch: col.arch.to_string(),
        cpu_model: col.cpu.to_string(),
        logical_cpus: 0,
        usable_cpus: 0,
        physical_cores: None,
        smt: None,
        memory_bytes: col.memory_bytes,
        governor: None,
        cpu_mhz: Some(col.mhz),
        hypervisor: false,
        clocksource: None,
        loadavg: None,
        others_at_start: None,
        preempt: None,
        doctor: Vec::new(),
    }
}

/// `value` printed in `printed` as a value in `ours`, with the conversion spelled out.
/// `their` is the suite's unit for the row (UnixBench's lps or KBps for Table 1's counts).
fn convert(
    value: f64,
    printed: Printed,
    their: Option<Their>,
    ours: Unit,
) -> Result<(f64, String), String> {
    let (their, v, step) = match printed {
        Printed::CountPer20s => {
            let their = their.ok_or("a count without the suite's unit")?;
            if their == Their::Lpm {
                return Err("lpm rows are not counted over 20 s".into());
            }
            (
                their,
                value / 20.0,
                format!("{value} in 20 s / 20 = {} {}; ", value / 20.0, their.symbol()),
            )
        }
        Printed::Micros => (Their::Micros, value, String::new()),
        Printed::MbPerSec => (Their::MbPerSec, value, String::new()),
    };
    let out = their
        .to_ours(v, ours)
        .ok_or_else(|| format!("{} does not convert to {}", their.symbol(), ours.symbol()))?;
    let rule = match (their, ours) {
        (Their::Micros, Unit::Nanos) => "µs × 1000".to_string(),
        (Their::Micros, Unit::Micros) => "unchanged".to_string(),
        (Their::MbPerSec, Unit::MibPerSec) => "MB/s × 10^6 / 2^20".to_string(),
        (Their::Kbps, Unit::MibPerSec) => "KBps / 1024".to_string(),
        (Their::Lps, Unit::Nanos) => "1e9 / lps".to_string(),
        (Their::Lps, Unit::Micros) => "1e6 / lps".to_string(),
        (Their::Lps, Unit::OpsPerSec) => "lps".to_string(),
        (Their::Micros, Unit::OpsPerSec) => "1e6 / µs".to_string(),
        (t, u) => format!("{} -> {}", t.symbol(), u.symbol()),
    };
    Ok((out, format!("{step}{rule} = {out} {}", ours.symbol())))
}

/// `schedlab reference list`: every set with its columns and row counts, then every row
/// with its probe or "no probe".
pub fn list_text(units: &dyn Fn(&str) -> Option<Unit>) -> String {
    let mut text = String::new();
    for name in SETS {
        let set = set(name).expect("listed sets exist");
        let cells = set.cells(units);
        text.push_str(&format!("{} — {}\n\n", set.name, set.source));
        let mut t = Table::new(&[
            ("run label", Align::Left),
            ("column", Align::Left),
            ("machine", Align::Left),
            ("cells", Align::Right),
            ("with a probe", Align::Right),
        ]);
        for col in &set.columns {
            let mine: Vec<&Cell> = cells.iter().filter(|c| c.column == col.key).collect();
            let mem = col.memory_bytes.map_or(String::new(), |b| format!(", {} MiB", b / MIB));
            t.row(vec![
                format!("{}:{}", set.name, col.key),
                col.name.to_string(),
                format!("{}; {}{mem}; kernel {}", col.os, col.cpu, col.kernel),
                mine.len().to_string(),
                mine.iter().filter(|c| c.ours.is_some()).count().to_string(),
            ]);
        }
        text.push_str(&t.to_terminal());
        let mut rows = Table::new(&[
            ("table", Align::Left),
            ("row", Align::Left),
            ("unit", Align::Left),
            ("schedlab row", Align::Left),
            ("definition", Align::Left),
        ]);
        let mut seen: Vec<(&str, String)> = Vec::new();
        for c in &cells {
            let probe = match c.ours {
                Some((p, "", ..)) => p.to_string(),
                Some((p, k, ..)) => format!("{p} [{k}]"),
                None => c.conversion.clone(),
            };
            if seen.contains(&(c.row, probe.clone())) {
                continue;
            }
            seen.push((c.row, probe.clone()));
            rows.row(vec![
                c.table.to_string(),
                c.row.to_string(),
                c.unit.label().to_string(),
                probe,
                c.definition.clone(),
            ]);
        }
        text.push('\n');
        text.push_str(&rows.to_terminal());
        for u in set.unread {
            text.push_str(&format!("note: {u}\n"));
        }
        text.push('\n');
    }
    text.push_str("`schedlab reference import SET` stores one run per column, labelled SET:COLUMN (suite published); `schedlab compare latest seed002:linux-hp` puts a run beside it.\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(probe: &str) -> Option<Unit> {
        schedlab_probes::catalog().iter().map(|p| p.info()).find(|i| i.id == probe).map(|i| i.unit)
    }

    fn cell<'a>(cells: &'a [Cell], row: &str, column: &str) -> &'a Cell {
        cells
            .iter()
            .find(|c| c.row == row && c.column == column)
            .unwrap_or_else(|| panic!("{row} {column}"))
    }

    /// Seed 002's two tables and seed 003's §7 table, copied byte for byte from the seeds
    /// (seed 002 lines 168-186 and 238-262, seed 003 lines 846-856).
    const SEED002: &str = include_str!("../testdata/seed002_tables.txt");

    /// Every row of both seed-002 tables is transcribed as printed: the seed's table line is
    /// the row name and the printed cells joined by tabs.
    #[test]
    fn seed002_is_transcribed_as_printed() {
        let set = seed002();
        for row in &set.rows {
            let printed: Vec<&str> =
                row.cells.iter().map(|c| c.unwrap_or("2276.84.00000")).collect();
            let width = if row.table == "Table 1" { 4 } else { 5 };
            let line = format!("{}\t{}", row.name, printed[..width].join("\t"));
            assert!(SEED002.lines().any(|l| l == line), "not in the seed: {line:?}");
            if row.table == "Table 1" {
                assert!(row.cells[4].is_none(), "{}", row.name);
            }
        }
        assert_eq!(set.rows.iter().filter(|r| r.table == "Table 1").count(), 16);
        assert_eq!(set.rows.iter().filter(|r| r.table == "Table 2").count(), 23);
        let cells = set.cells(&units);
        assert_eq!(cell(&cells, "simple syscall", "linux-hp").printed, "0.1022");
        assert_eq!(cell(&cells, "execl 20", "mac-os").value, 7139.0);
        assert_eq!(cell(&cells, "process fork+/bin/sh", "linux-imac").value, 4426.4);
        assert!(!cells
            .iter()
            .any(|c| c.row == "AF_UNIX socket bandwidth" && c.column == "freebsd-hp"));
    }

    #[test]
    fn seed003_cells_are_in_the_seed() {
        let text = include_str!("../testdata/seed003_section7.txt");
        assert!(text.contains("Thread 15\u{fffd}s 96\u{fffd}s 90\u{fffd}s"), "the printed line");
        assert!(text.contains("Mutex 0:4\u{fffd}s 0:3\u{fffd}s 0:6\u{fffd}s"));
        assert!(text.contains("Context 225\u{fffd}s 166\u{fffd}s 82\u{fffd}s"));
        let cells = seed003().cells(&units);
        assert_eq!(cells.len(), 9 + 10);
        // §7's HBench-OS table: every row printed as "name before after", on its probe.
        for row in seed003().rows.iter().filter(|r| r.table == "§7 HBench-OS") {
            let line = format!("{} {} {}", row.name, row.cells[3].unwrap(), row.cells[4].unwrap());
            assert!(text.lines().any(|l| l == line), "not in the seed: {line:?}");
            assert!(row.cells[..3].iter().all(Option::is_none), "{}", row.name);
        }
        let getpid = cell(&cells, "getpid", "before-sa");
        assert_eq!(getpid.ours.map(|o| (o.0, o.1, o.3)), Some(("os.syscall.getpid", "", 631.0)));
        let tod = cell(&cells, "timeofday", "after-sa");
        assert_eq!(tod.ours.map(|o| (o.0, o.1)), Some(("os.syscall.gettimeofday", "via=syscall")));
        assert_eq!(cell(&cells, "sigaction", "after-sa").ours.unwrap().0, "os.signal.install");
        assert_eq!(cell(&cells, "sbrk", "before-sa").ours.unwrap().0, "os.mm.sbrk");
        let c = cell(&cells, "Mutex", "linux");
        assert_eq!(
            c.ours.map(|o| (o.0, o.1, o.3)),
            Some(("threads.mutex.uncontended", "backend=pthread-os", 600.0))
        );
        // The SA library is a pthreads library: the C program on ours; PTH: the Rust API.
        assert_eq!(cell(&cells, "Thread", "sa").ours.unwrap().1, "batch=1,backend=pthread-rt");
        assert_eq!(cell(&cells, "Context", "pth").ours.unwrap().1, "backend=rt");
        assert_eq!(cell(&cells, "Context", "sa").ours.unwrap().3, 225_000.0);
        assert!(
            c.definition.contains("NPTL") && c.definition.contains("LinuxThreads"),
            "{}",
            c.definition
        );
        assert!(cell(&cells, "Thread", "pth").definition.contains("GNU PTH"));
    }

    /// Counts over 20 s become time per operation; µs become ns; MB/s (10^6) become MiB/s.
    #[test]
    fn units_convert() {
        let cells = seed002().cells(&units);
        // syscall 20 on Linux HP: 28773938 / 20 = 1438696.9 lps; 1e9 / that = 695.07 ns.
        let c = cell(&cells, "syscall 20", "linux-hp");
        let (probe, key, unit, v) = c.ours.unwrap();
        assert_eq!((probe, key, unit), ("os.syscall.mix", "", Unit::Nanos));
        assert!((v - 1e9 / (28_773_938.0 / 20.0)).abs() < 1e-9, "{v}");
        assert!(
            c.conversion.contains("/ 20") && c.conversion.contains("1e9 / lps"),
            "{}",
            c.conversion
        );
        // simple syscall: 0.1022 µs = 102.2 ns.
        let v = cell(&cells, "simple syscall", "linux-hp").ours.unwrap().3;
        assert!((v - 102.2).abs() < 1e-9, "{v}");
        // pipe bandwidth: lmbench's MB/s are 10^6 bytes: 6942.8 MB/s = 6621.2 MiB/s.
        let c = cell(&cells, "pipe bandwidth", "linux-imac");
        let (_, _, unit, v) = c.ours.unwrap();
        assert_eq!(unit, Unit::MibPerSec);
        assert!((v - 6942.8e6 / 1_048_576.0).abs() < 1e-6, "{v}");
        assert!(c.conversion.contains("10^6 / 2^20"), "{}", c.conversion);
        // fstime read on FreeBSD HP: 512512 KB in 20 s = 25625.6 KBps = 25.025 MiB/s.
        let (_, _, unit, v) = cell(&cells, "fstime read 20", "freebsd-hp").ours.unwrap();
        assert_eq!(unit, Unit::MibPerSec);
        assert!((v - 512_512.0 / 20.0 / 1024.0).abs() < 1e-9, "{v}");
        // Seed 002's own rows: a count of threads (or rounds) over 20 s, as ns per thread on
        // OS threads; 21126 threads in 20 s on Linux HP = 1056.3 per s = 946.7 µs each.
        let c = cell(&cells, "threadsWithComputation no joining", "linux-hp");
        let (probe, key, unit, v) = c.ours.unwrap();
        assert_eq!(
            (probe, key, unit),
            ("threads.compute", "join=none,work=10000,backend=os", Unit::Nanos)
        );
        assert!((v - 1e9 / (21_126.0 / 20.0)).abs() < 1e-6, "{v}");
        for (row, probe) in [
            ("threadsWithSmallComputation no joining", "threads.compute"),
            ("threadsPerformingAtomicOps", "threads.atomic.contended"),
            ("threadsComp 10 16 joining", "threads.compute"),
            ("threadsComp 10 32 joining", "threads.compute"),
            ("mallocMemCopy", "mem.malloc_free"),
        ] {
            let c = cell(&cells, row, "mac-os");
            assert_eq!(c.ours.map(|o| o.0), Some(probe), "{row}: {}", c.conversion);
        }
    }

    #[test]
    fn runs_have_one_sample_per_result() {
        let set = seed002();
        let runs = set.runs(&units, ("t", "t"));
        let labels: Vec<_> = runs.iter().map(|r| r.meta.label.clone().unwrap()).collect();
        assert_eq!(
            labels,
            [
                "seed002:mac-os",
                "seed002:freebsd-imac",
                "seed002:freebsd-hp",
                "seed002:linux-hp",
                "seed002:linux-imac"
            ]
        );
        let hp = &runs[3];
        assert_eq!(hp.meta.suite, "published");
        assert_eq!(hp.meta.machine.memory_bytes, Some(8192 * MIB));
        // 16 Table 1 rows, every one with a probe, of which one (spawn) shares Table 2's
        // fork+exit probe; 23 Table 2 rows.
        assert_eq!(hp.results.len(), 15 + 23);
        assert_eq!(runs[4].results.len(), 23);
        assert_eq!(runs[2].results.len(), 15 + 22);
        let fork = hp.results.iter().find(|m| m.probe == "os.proc.fork_exit").unwrap();
        assert_eq!((fork.unit, fork.samples[0].value), (Unit::Micros, 81.5161));
        assert!(fork.notes.get("also").unwrap().contains("spawn 20, 168546"), "{:?}", fork.notes);
        for m in &hp.results {
            assert_eq!(m.samples.len(), 1, "{}", m.probe);
            assert_eq!(m.summary.as_ref().unwrap().median, m.samples[0].value);
            assert!(m.notes.get("published").is_some());
        }
        let mut keys: Vec<_> =
            hp.results.iter().map(|m| (m.probe.clone(), m.params.key())).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), hp.results.len(), "one result per probe and params");
        assert!(!list_text(&units).contains("no probe"), "every row has a probe");
    }
}
