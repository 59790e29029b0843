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
    pub fn other_ns(&self, after: &CpuCounters) -> u64 {
        let busy = after.busy.saturating_sub(self.busy);
        let own = after.own.saturating_sub(self.own);
        busy.saturating_sub(own) * (1_000_000_000 / ticks_per_second())
    }
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

/// CPU ticks of this process and all its live descendants (reaped children are in cutime).
fn own_ticks() -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194304 100 0 0 0 11 22 33 44 20 0 1 0 5 0 0";
        assert_eq!(parse_stat(line), Some((7, 11 + 22 + 33 + 44)));
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
}
