//! Attributing noise: how much CPU did *other* processes use while a sample ran?
//!
//! We read the machine's busy time from `/proc/stat` and our own CPU time (this process, its
//! reaped children, and every live descendant, since probes fork helpers) from
//! `/proc/<pid>/stat` before and after each sample; the difference is someone else's work.
//! `/proc/stat` counts in clock ticks (10 ms with USER_HZ = 100), so a single short sample
//! reads 0 or one tick; summed over a probe's samples it tells "this probe shared the CPU with
//! 0.4 s of someone else's work". `/proc/schedstat` would give nanoseconds but needs
//! CONFIG_SCHEDSTATS, which many kernels (this VM's among them) lack.

use std::fs;

/// CPU counters at one instant, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuCounters {
    /// Busy ticks of all CPUs (user, nice, system, irq, softirq).
    pub busy: u64,
    /// Ticks the hypervisor ran something else while we wanted the CPU (steal).
    pub steal: u64,
    /// Ticks used by this process, its reaped children and its live descendants.
    pub own: u64,
}

/// Ticks per second of the counters (`sysconf(_SC_CLK_TCK)`).
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

impl CpuCounters {
    /// Reads the counters; `None` where /proc is not available.
    pub fn read() -> Option<CpuCounters> {
        let stat = fs::read_to_string("/proc/stat").ok()?;
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let f: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal guest guest_nice
        if f.len() < 8 {
            return None;
        }
        let busy = f[0] + f[1] + f[2] + f[5] + f[6];
        Some(CpuCounters { busy, steal: f[7], own: own_ticks() })
    }

    /// Nanoseconds of CPU others used between `self` (before) and `after`.
    ///
    /// Signed on purpose: both counters are quantised to ticks, so over a short window the
    /// difference is off by a tick either way. Clamping each window at zero would turn that
    /// zero-mean error into a positive bias; summing signed values (or measuring one long
    /// window) lets it cancel.
    pub fn other_ns(&self, after: &CpuCounters) -> i64 {
        let busy = after.busy as i64 - self.busy as i64;
        let own = after.own as i64 - self.own as i64;
        (busy - own) * tick_ns()
    }

    /// Nanoseconds the hypervisor kept runnable vCPUs off the host CPU (steal time) between
    /// `self` and `after`.
    pub fn steal_ns(&self, after: &CpuCounters) -> i64 {
        (after.steal as i64 - self.steal as i64) * tick_ns()
    }
}

/// Nanoseconds per clock tick.
pub fn tick_ns() -> i64 {
    1_000_000_000 / ticks_per_second() as i64
}

/// What other processes and the hypervisor took while a probe sampled: one window from
/// before the first sample to after the last, so tick quantisation errs by a tick or two in
/// total rather than per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Noise {
    /// Wall time of the window, in ns.
    pub window_ns: u64,
    /// CPU time used by other processes (all CPUs) in the window, in ns; may read a tick
    /// below zero.
    pub other_cpu_ns: i64,
    /// Steal time in the window, in ns (VMs only).
    pub steal_ns: i64,
}

/// The share of one CPU that other processes use, measured over `window` (which this
/// sleeps through). `None` where /proc is unavailable.
pub fn others_share(window: std::time::Duration) -> Option<f64> {
    let start = std::time::Instant::now();
    let before = CpuCounters::read()?;
    std::thread::sleep(window);
    let after = CpuCounters::read()?;
    let wall = start.elapsed().as_nanos() as f64;
    Some((before.other_ns(&after) as f64 / wall).max(0.0))
}

/// utime + stime + cutime + cstime of one `/proc/<pid>/stat` text, and its parent pid.
fn parse_stat(text: &str) -> Option<(i32, u64)> {
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); ppid is field 4, utime..cstime fields 14..17.
    let ppid = f.get(1)?.parse().ok()?;
    let t: u64 = f.get(11..15)?.iter().filter_map(|x| x.parse::<u64>().ok()).sum();
    Some((ppid, t))
}

/// True unless the kernel says this process has no child at all, live or zombie: one
/// `waitid(P_ALL, WNOHANG | WNOWAIT)` that reaps nothing and fails with ECHILD exactly then.
fn has_children() -> bool {
    // SAFETY: siginfo_t is plain data; all-zero is valid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a writable siginfo_t; WNOWAIT leaves any child waitable, so this
    // cannot steal a child from whoever waits for it.
    let rc = unsafe {
        libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    !(rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
}

/// CPU ticks of this process and all its live descendants (reaped children are in cutime).
///
/// Finding descendants means reading every `/proc/<pid>/stat` (~0.7 ms with 80 processes,
/// twice per sample); a process without children (most probes) reads only its own.
fn own_ticks() -> u64 {
    if !has_children() {
        return fs::read_to_string("/proc/self/stat")
            .ok()
            .as_deref()
            .and_then(parse_stat)
            .map_or(0, |(_, t)| t);
    }
    let me = std::process::id() as i32;
    let mut procs: Vec<(i32, i32, u64)> = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some((ppid, t)) =
                fs::read_to_string(format!("/proc/{pid}/stat")).ok().as_deref().and_then(parse_stat)
            {
                procs.push((pid, ppid, t));
            }
        }
    }
    let mut total = 0;
    let mut frontier = vec![me];
    while let Some(p) = frontier.pop() {
        for &(pid, ppid, t) in &procs {
            if pid == p {
                total += t;
            }
            if ppid == p && pid != p {
                frontier.push(pid);
            }
        }
    }
    total
}

/// The drift sentinel: the time of a fixed reference workload (a dependent chain of integer
/// multiply-adds, about 100 µs on a 3 GHz core), the best of three tries so that one
/// preemption does not count. Re-measured between the results of a run, it moves when the
/// machine's speed does (the host's clock or turbo state, a neighbour on the same core, steal)
/// while nothing in the workload changed: results measured while it moved are flagged
/// ([`drift`]).
pub fn sentinel_ns() -> u64 {
    let mut best = u64::MAX;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let mut x = std::hint::black_box(0x9E37_79B9_7F4A_7C15u64);
        for _ in 0..100_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
        std::hint::black_box(x);
        best = best.min(t.elapsed().as_nanos() as u64);
    }
    best
}

/// How far the sentinel moved around one result, relative to the run's first reading: the
/// larger deviation of the readings before and after it, when above `DRIFT` (10%), signed
/// (+0.12: the machine ran 12% slower).
pub fn drift(reference: u64, before: u64, after: u64) -> Option<f64> {
    if reference == 0 {
        return None;
    }
    let rel = |x: u64| x as f64 / reference as f64 - 1.0;
    let worst = [rel(before), rel(after)].into_iter().max_by(|a, b| a.abs().total_cmp(&b.abs()))?;
    (worst.abs() > DRIFT).then_some(worst)
}

/// The sentinel's deviation above which a result is flagged.
pub const DRIFT: f64 = 0.10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194304 100 0 0 0 11 22 33 44 20 0 1 0 5 0 0";
        assert_eq!(parse_stat(line), Some((7, 11 + 22 + 33 + 44)));
    }

    #[test]
    fn children_are_seen_until_reaped() {
        // No test in this crate forks, so the harness process has no child of its own.
        assert!(!has_children());
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        assert!(has_children(), "a live or zombie child is a child");
        let before = own_ticks();
        child.wait().unwrap();
        assert!(!has_children());
        assert!(own_ticks() >= before);
    }

    #[test]
    fn counters_are_readable_and_monotonic() {
        let a = CpuCounters::read().expect("/proc is mounted in tests");
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        let b = CpuCounters::read().unwrap();
        assert!(b.busy >= a.busy && b.own >= a.own);
        let _ = a.other_ns(&b);
    }

    #[test]
    fn drift_is_the_larger_deviation_beyond_ten_percent() {
        assert_eq!(drift(1000, 1020, 980), None);
        let d = drift(1000, 1050, 1150).unwrap();
        assert!((d - 0.15).abs() < 1e-9, "{d}");
        let d = drift(1000, 850, 1020).unwrap();
        assert!((d + 0.15).abs() < 1e-9, "{d}");
        assert_eq!(drift(0, 5, 5), None);
    }

    #[test]
    fn the_sentinel_measures_something() {
        assert!(sentinel_ns() > 0);
    }
}
