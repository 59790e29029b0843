//! Reading the reference tools' output: one figure per invocation, as the tool prints it.
//!
//! Pure functions over the text a tool wrote (its standard output and standard error
//! together), so each is tested against output captured from the real tool (see the tests).
//! A [`Reading`] keeps the tool's quantity as it is — a time per operation or a byte rate —
//! and [`super::Row`] converts it into the probe's unit.
//!
//! Units, from the tools' sources:
//! - `perf bench sched pipe` and `perf bench syscall basic` print `usecs/op` (µs per loop:
//!   one round trip, one system call).
//! - `perf bench mem` prints `print_bps`: `GB/sec` is bytes / 1024³ per second (its `K` is
//!   1024), `MB/sec` and `KB/sec` likewise (the `KB/sec` line has a stray `d` after the
//!   number); `inf` when gettimeofday saw no time pass.
//! - lmbench's `micro()` prints `LABEL: N microseconds` on stderr; its `mb()` prints
//!   `N MB/sec` with `MB` = 1000 × 1000 (lib_timing.c), so its MB/sec are 10⁶ bytes/s, not MiB/s.
//! - `lat_ctx` prints `"size=0k ovr=0.29` then one `PROCS µs` line per process count.
//! - `lat_mmap` prints `MB µs` (the size in 10⁶ bytes, then the time per round trip).
//! - `cyclictest -q` prints one `T: 0 (...) ... Min: N Act: N Avg: N Max: N` line per thread,
//!   in µs.

/// One figure from one run of a tool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading {
    /// Time per operation, in nanoseconds.
    Time {
        /// Nanoseconds per operation.
        ns: f64,
    },
    /// A byte rate, in bytes per second.
    Rate {
        /// Bytes per second.
        bytes_per_s: f64,
    },
}

/// How to read one tool's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parser {
    /// perf bench's `N usecs/op`.
    PerfUsecsPerOp,
    /// perf bench mem's `N GB/sec` (or MB/KB/bytes).
    PerfRate,
    /// lmbench's `LABEL...: N microseconds`; the label is matched as a prefix.
    LmbenchMicros(&'static str),
    /// lmbench's `LABEL...: N MB/sec` (10⁶ bytes per second).
    LmbenchMbPerSec(&'static str),
    /// lat_ctx's line for this many processes: `PROCS µs`.
    LatCtx(u32),
    /// lat_mmap's `MB µs`.
    LatMmap,
    /// cyclictest's `Avg:` of its first thread, µs.
    CyclictestAvg,
    /// cyclictest's `Avg:` of its first thread, ns (`-N`: its µs are whole numbers, too
    /// coarse for a 15% comparison of a few µs under `SCHED_FIFO`).
    CyclictestAvgNs,
}

impl Parser {
    /// The figure in `text`.
    ///
    /// # Errors
    /// What was expected and not found, with the start of the text.
    pub fn parse(self, text: &str) -> Result<Reading, String> {
        match self {
            Parser::PerfUsecsPerOp => number_before(text, "usecs/op")
                .map(|us| Reading::Time { ns: us * 1e3 })
                .ok_or_else(|| missing("a `N usecs/op` line", text)),
            Parser::PerfRate => perf_rate(text),
            Parser::LmbenchMicros(label) => labelled(text, label, "microseconds")
                .map(|us| Reading::Time { ns: us * 1e3 })
                .ok_or_else(|| missing(&format!("`{label}...: N microseconds`"), text)),
            Parser::LmbenchMbPerSec(label) => labelled(text, label, "MB/sec")
                .map(|mb| Reading::Rate { bytes_per_s: mb * 1e6 })
                .ok_or_else(|| missing(&format!("`{label}...: N MB/sec`"), text)),
            Parser::LatCtx(procs) => text
                .lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    let (p, us) = (w.next()?, w.next()?);
                    (w.next().is_none() && p.parse::<u32>().ok()? == procs)
                        .then(|| us.parse::<f64>().ok())
                        .flatten()
                })
                .next_back()
                .map(|us| Reading::Time { ns: us * 1e3 })
                .ok_or_else(|| missing(&format!("a `{procs} µs` line"), text)),
            Parser::LatMmap => text
                .lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    let (_mb, us) = (w.next()?.parse::<f64>().ok()?, w.next()?);
                    if w.next().is_some() {
                        return None;
                    }
                    us.parse::<f64>().ok()
                })
                .next_back()
                .map(|us| Reading::Time { ns: us * 1e3 })
                .ok_or_else(|| missing("a `MB µs` line", text)),
            Parser::CyclictestAvg => cyclictest_avg(text)
                .map(|us| Reading::Time { ns: us * 1e3 })
                .ok_or_else(|| missing("a `T: ... Avg: N` line", text)),
            Parser::CyclictestAvgNs => cyclictest_avg(text)
                .map(|ns| Reading::Time { ns })
                .ok_or_else(|| missing("a `T: ... Avg: N` line", text)),
        }
    }
}

/// The `Avg:` figure of cyclictest's first thread line, in the unit it printed.
fn cyclictest_avg(text: &str) -> Option<f64> {
    let l = text.lines().find(|l| l.trim_start().starts_with("T:"))?;
    let rest = &l[l.find("Avg:")? + 4..];
    rest.split_whitespace().next()?.parse::<f64>().ok()
}

/// The number right before `unit` on the last line that has one.
fn number_before(text: &str, unit: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| {
            let at = l.find(unit)?;
            l[..at].split_whitespace().next_back()?.parse::<f64>().ok()
        })
        .rfind(|v| v.is_finite())
}

/// The number after `LABEL...:` and before `unit`, on the last line that starts with `label`.
fn labelled(text: &str, label: &str, unit: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.trim_start().starts_with(label))
        .filter_map(|l| {
            let after = &l[l.rfind(':')? + 1..];
            let mut w = after.split_whitespace();
            let v = w.next()?.parse::<f64>().ok()?;
            (w.next() == Some(unit) && v.is_finite()).then_some(v)
        })
        .next_back()
}

/// perf bench mem's `print_bps` line.
fn perf_rate(text: &str) -> Result<Reading, String> {
    const UNITS: [(&str, f64); 4] = [
        ("GB/sec", 1024.0 * 1024.0 * 1024.0),
        ("MB/sec", 1024.0 * 1024.0),
        ("KB/sec", 1024.0),
        ("bytes/sec", 1.0),
    ];
    for line in text.lines().rev() {
        for (unit, scale) in UNITS {
            let Some(at) = line.find(unit) else { continue };
            let Some(word) = line[..at].split_whitespace().next_back() else { continue };
            // `%14lfd KB/sec`: perf's format has a stray `d`.
            let word = word.trim_end_matches('d');
            if word == "inf" {
                return Err("perf saw no time pass (it times with gettimeofday, 1 µs): give it more loops (-l)".into());
            }
            if let Ok(v) = word.parse::<f64>() {
                if v.is_finite() && v > 0.0 {
                    return Ok(Reading::Rate { bytes_per_s: v * scale });
                }
            }
        }
    }
    Err(missing("a `N GB/sec` line", text))
}

/// "expected X, got: <the start of the text>".
fn missing(what: &str, text: &str) -> String {
    let shown: String = text.trim().chars().take(200).collect();
    if shown.is_empty() {
        format!("expected {what}, the tool printed nothing")
    } else {
        format!("expected {what}, got: {}", shown.replace('\n', " / "))
    }
}

#[cfg(test)]
mod tests {
    //! The texts are the tools' real output, captured on the development VM (perf 6.1 from
    //! Debian's linux-perf, lmbench from intel/lmbench 941a0dc, rt-tests 2.4).
    use super::*;

    fn ns(r: Result<Reading, String>) -> f64 {
        match r {
            Ok(Reading::Time { ns }) => ns,
            other => panic!("expected a time, got {other:?}"),
        }
    }

    fn rate(r: Result<Reading, String>) -> f64 {
        match r {
            Ok(Reading::Rate { bytes_per_s }) => bytes_per_s,
            other => panic!("expected a rate, got {other:?}"),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    const PERF_PIPE: &str = "# Running 'sched/pipe' benchmark:\n# Executed 200000 pipe operations between two processes\n\n     Total time: 0.474 [sec]\n\n       2.370320 usecs/op\n         421883 ops/sec\n";
    const PERF_SYSCALL: &str = "# Running 'syscall/basic' benchmark:\n# Executed 10000000 getppid() calls\n     Total time: 1.158 [sec]\n\n       0.115878 usecs/op\n        8629735 ops/sec\n";
    const PERF_MEMCPY: &str = "# Running 'mem/memcpy' benchmark:\n# function 'default' (Default memcpy() provided by glibc)\n# Copying 1MB bytes ...\n\n      25.699013 GB/sec\n";
    const PERF_MEMSET_INF: &str = "# Running 'mem/memset' benchmark:\n# function 'default' (Default memset() provided by glibc)\n# Copying 4KB bytes ...\n\n            inf GB/sec\n";

    #[test]
    fn perf_sched_pipe_and_syscall_basic_give_their_usecs_per_op() {
        assert!(close(ns(Parser::PerfUsecsPerOp.parse(PERF_PIPE)), 2370.320));
        assert!(close(ns(Parser::PerfUsecsPerOp.parse(PERF_SYSCALL)), 115.878));
    }

    #[test]
    fn perf_mem_rates_are_binary_gigabytes() {
        let r = rate(Parser::PerfRate.parse(PERF_MEMCPY));
        assert!(close(r, 25.699013 * 1024.0 * 1024.0 * 1024.0), "{r}");
        // print_bps's KB/sec line carries a stray `d`.
        let r = rate(Parser::PerfRate.parse("  123.500000d KB/sec\n"));
        assert!(close(r, 123.5 * 1024.0), "{r}");
        let e = Parser::PerfRate.parse(PERF_MEMSET_INF).unwrap_err();
        assert!(e.contains("no time pass"), "{e}");
    }

    const LM_NULL: &str = "Simple syscall: 0.0741 microseconds\n";
    const LM_OPEN: &str = "Simple open/close: 0.4823 microseconds\n";
    const LM_SIG: &str = "Signal handler overhead: 0.7232 microseconds\n";
    const LM_SHELL_NOISE: &str = "sh: 1: /tmp/hello: not found\nsh: 1: /tmp/hello: not found\nProcess fork+/bin/sh -c: 764.2143 microseconds\n";
    const LM_PF: &str = "Pagefaults on /tmp/pf.dat: 0.0444 microseconds\n";
    const LM_SELECT: &str = "Select on 100 tcp fd's: 3.4527 microseconds\n";
    const LM_BW_PIPE: &str = "Pipe bandwidth: 4206.19 MB/sec\n";
    const LM_BW_UNIX: &str = "AF_UNIX sock stream bandwidth: 7382.78 MB/sec\n";
    const LM_CTX: &str = "\n\"size=16k ovr=0.57\n2 0.68\n8 1.75\n";
    const LM_MMAP: &str = "0.524288 20\n";

    #[test]
    fn lmbench_microseconds_are_found_by_their_label() {
        assert!(close(ns(Parser::LmbenchMicros("Simple syscall").parse(LM_NULL)), 74.1));
        assert!(close(ns(Parser::LmbenchMicros("Simple open/close").parse(LM_OPEN)), 482.3));
        assert!(close(ns(Parser::LmbenchMicros("Signal handler overhead").parse(LM_SIG)), 723.2));
        // The label is a prefix: lat_pagefault names its file.
        assert!(close(ns(Parser::LmbenchMicros("Pagefaults on").parse(LM_PF)), 44.4));
        assert!(close(ns(Parser::LmbenchMicros("Select on 100 tcp").parse(LM_SELECT)), 3452.7));
        // Other lines around it do not matter.
        let shell = ns(Parser::LmbenchMicros("Process fork+/bin/sh -c").parse(LM_SHELL_NOISE));
        assert!(close(shell, 764214.3), "{shell}");
        // Another row's label is not this row's figure.
        let e = Parser::LmbenchMicros("Simple read").parse(LM_NULL).unwrap_err();
        assert!(e.contains("Simple read") && e.contains("Simple syscall: 0.0741"), "{e}");
    }

    #[test]
    fn lmbench_megabytes_are_decimal() {
        let r = rate(Parser::LmbenchMbPerSec("Pipe bandwidth").parse(LM_BW_PIPE));
        assert!(close(r, 4206.19e6), "{r}");
        let r = rate(Parser::LmbenchMbPerSec("AF_UNIX sock stream bandwidth").parse(LM_BW_UNIX));
        assert!(close(r, 7382.78e6), "{r}");
    }

    #[test]
    fn lat_ctx_and_lat_mmap_give_the_asked_line() {
        assert!(close(ns(Parser::LatCtx(8).parse(LM_CTX)), 1750.0));
        assert!(close(ns(Parser::LatCtx(2).parse(LM_CTX)), 680.0));
        assert!(Parser::LatCtx(16).parse(LM_CTX).is_err());
        assert!(close(ns(Parser::LatMmap.parse(LM_MMAP)), 20_000.0));
    }

    #[test]
    fn cyclictest_average_is_read_in_microseconds() {
        let text = "# /dev/cpu_dma_latency set to 0us\nT: 0 (24125) P: 0 I:1000 C:   1988 Min:     48 Act:   68 Avg:   87 Max:    5307\n";
        assert!(close(ns(Parser::CyclictestAvg.parse(text)), 87_000.0));
    }

    #[test]
    fn cyclictest_average_with_nsecs_is_read_in_nanoseconds() {
        let text = "WARN: not setting cpu_dma_latency to save battery power\nT: 0 (17061) P:80 I:1000 C:    300 Min:  18317 Act:   28728 Avg:   30613 Max:   86202\n";
        assert!(close(ns(Parser::CyclictestAvgNs.parse(text)), 30_613.0));
    }

    #[test]
    fn empty_or_foreign_output_is_an_error_that_shows_it() {
        let e = Parser::PerfUsecsPerOp.parse("").unwrap_err();
        assert!(e.contains("printed nothing"), "{e}");
        let e = Parser::LatMmap.parse("lat_mmap: usage\n").unwrap_err();
        assert!(e.contains("lat_mmap: usage"), "{e}");
    }
}
