//! The machine fingerprint stored with every run, so runs from different machines, kernels or
//! settings can be told apart and compared honestly.
//!
//! Everything is read from /proc, /sys and uname(2); what cannot be read is `None`, never a
//! guess.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs;

/// What a run was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name.
    pub host: String,
    /// OS name and version (`PRETTY_NAME` of /etc/os-release, else the kernel's sysname).
    pub os: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Kernel build string (`uname -v`).
    pub kernel_version: String,
    /// Machine architecture (`uname -m`).
    pub arch: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Logical CPUs online.
    pub logical_cpus: usize,
    /// CPUs this process may run on (its affinity mask).
    pub usable_cpus: usize,
    /// Physical cores (distinct package/core pairs), where topology is readable.
    pub physical_cores: Option<usize>,
    /// Simultaneous multithreading active.
    pub smt: Option<bool>,
    /// Total memory in bytes.
    pub memory_bytes: Option<u64>,
    /// cpufreq scaling governor of CPU 0, where the kernel exposes one.
    pub governor: Option<String>,
    /// Nominal or current CPU frequency in MHz, where readable.
    pub cpu_mhz: Option<f64>,
    /// The CPU reports running under a hypervisor (the `hypervisor` cpuid flag).
    pub hypervisor: bool,
    /// The current clock source (tsc, kvm-clock, hpet...): it decides what a clock read costs.
    pub clocksource: Option<String>,
    /// Load averages (1, 5, 15 minutes) when the run started.
    pub loadavg: Option<[f64; 3]>,
    /// Share of one CPU that other processes used just before the run (measured over a
    /// quarter second by [`crate::noise::others_share`]); the load average lags by a minute
    /// and still counts the previous run.
    #[serde(default)]
    pub others_at_start: Option<f64>,
    /// Kernel preemption model, from `uname -v` (PREEMPT, PREEMPT_DYNAMIC...).
    pub preempt: Option<String>,
    /// What `schedlab doctor` found about the kernel and platform when the run started
    /// ([`crate::doctor`], without the explanations); empty for runs made before it existed
    /// and for a bare [`Machine::fingerprint`].
    #[serde(default)]
    pub doctor: Vec<crate::doctor::Finding>,
}

impl Machine {
    /// Reads the fingerprint of the machine we run on.
    pub fn fingerprint() -> Machine {
        let uts = crate::sys::uname();
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo
                .lines()
                .find(|l| l.split(':').next().map(str::trim) == Some(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let hypervisor =
            field("flags").is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor"));
        let cpu_model = field("model name")
            .or_else(|| field("Model"))
            .or_else(|| field("CPU part"))
            .unwrap_or_else(|| "unknown".into());
        let cpu_mhz = read_trim("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
            .and_then(|k| k.parse::<f64>().ok())
            .map(|khz| khz / 1000.0)
            .or_else(|| field("cpu MHz").and_then(|m| m.parse().ok()));
        let os = fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| uts.0.clone());
        let (physical_cores, smt) = topology();
        let preempt = ["PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT"]
            .into_iter()
            .find(|p| uts.3.split_whitespace().any(|w| w == *p))
            .map(str::to_string);
        Machine {
            host: uts.1,
            os,
            kernel: uts.2,
            kernel_version: uts.3,
            arch: uts.4,
            cpu_model,
            logical_cpus: online_cpus(),
            usable_cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            physical_cores,
            smt,
            memory_bytes: fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                    .map(|kb| kb * 1024)
            }),
            governor: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            cpu_mhz,
            hypervisor,
            clocksource: read_trim(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ),
            loadavg: loadavg(),
            others_at_start: None,
            preempt,
            doctor: Vec::new(),
        }
    }

    /// "host, kernel": how a run is named when it has no label.
    pub fn short_name(&self) -> String {
        format!("{} {}", self.host, self.kernel)
    }
}

/// This machine's host name (`uname -n`).
pub fn hostname() -> String {
    crate::sys::uname().1
}

fn read_trim(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Current load averages.
pub fn loadavg() -> Option<[f64; 3]> {
    let t = fs::read_to_string("/proc/loadavg").ok()?;
    let v: Vec<f64> = t.split_whitespace().take(3).filter_map(|x| x.parse().ok()).collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// (physical cores, SMT active) from /sys/devices/system/cpu/cpu*/topology.
fn topology() -> (Option<usize>, Option<bool>) {
    let mut cores = BTreeSet::new();
    let mut cpus = 0;
    if let Ok(dir) = fs::read_dir("/sys/devices/system/cpu") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !name
                .strip_prefix("cpu")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            {
                continue;
            }
            let base = e.path().join("topology");
            let pkg = fs::read_to_string(base.join("physical_package_id")).ok();
            let core = fs::read_to_string(base.join("core_id")).ok();
            if let (Some(p), Some(c)) = (pkg, core) {
                cores.insert((p.trim().to_string(), c.trim().to_string()));
                cpus += 1;
            }
        }
    }
    let smt_active = read_trim("/sys/devices/system/cpu/smt/active").map(|s| s == "1");
    if cores.is_empty() {
        return (None, smt_active);
    }
    (Some(cores.len()), smt_active.or(Some(cpus > cores.len())))
}

/// Seconds since the Unix epoch as an RFC 3339 UTC timestamp (`2026-11-21T05:00:00Z`).
pub fn rfc3339(unix_secs: i64) -> String {
    let days = unix_secs.div_euclid(86_400);
    let secs = unix_secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Reads a timestamp as [`rfc3339`] writes it (`2026-11-21T05:00:00Z`; a fraction of a
/// second, or a date alone, also read) back into seconds since the Unix epoch; `None` for
/// anything else.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let num = |t: &str| -> Option<i64> {
        (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit())).then(|| t.parse().ok())?
    };
    let (date, time) = match s.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut d = date.splitn(3, '-');
    let (y, m, day) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Howard Hinnant's days_from_civil, the inverse of the above.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = match time {
        None => 0,
        Some(t) => {
            let t = t.strip_suffix('Z').or_else(|| t.strip_suffix('z'))?;
            let t = t.split('.').next()?;
            let mut f = t.splitn(3, ':');
            let (h, mi, se) = (num(f.next()?)?, num(f.next()?)?, num(f.next().unwrap_or("0"))?);
            if h > 23 || mi > 59 || se > 60 {
                return None;
            }
            h * 3600 + mi * 60 + se
        }
    };
    Some(days * 86_400 + secs)
}

/// The current time as [`rfc3339`].
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    rfc3339(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_back_as_written() {
        for secs in [0, 951_782_400, 1_763_701_200, 4_102_444_799] {
            assert_eq!(parse_rfc3339(&rfc3339(secs)), Some(secs), "{}", rfc3339(secs));
        }
        assert_eq!(parse_rfc3339("2026-11-21"), parse_rfc3339("2026-11-21T00:00:00Z"));
        assert_eq!(parse_rfc3339("2026-11-21T05:00:00.25Z"), parse_rfc3339("2026-11-21T05:00:00Z"));
        for bad in ["", "yesterday", "2026-13-01", "2026-11-21T25:00:00Z", "2026-11-21T05:00:00"] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_237_200), "2026-11-21T05:00:00Z");
    }

    #[test]
    fn fingerprint_reads_this_machine() {
        let m = Machine::fingerprint();
        assert!(m.logical_cpus >= 1 && m.usable_cpus >= 1);
        assert!(!m.kernel.is_empty() && m.kernel != "unknown");
        assert!(m.memory_bytes.unwrap_or(1) > 0);
    }
}
