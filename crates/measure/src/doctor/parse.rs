//! The pure parsers behind the findings: text in (a kernel release, a config, a
//! `/proc/timer_list`, a cgroup path, a capability mask), a value out. No I/O, so each is
//! tested on the text alone.

use std::collections::BTreeMap;

use super::finding::Reading;
use crate::mounts::Mount;

/// `(major, minor)` of a kernel release such as `6.18.44-fc-v669`.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The `CONFIG_X=value` lines of a kernel config (`# CONFIG_X is not set` is left out).
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| l.starts_with("CONFIG_"))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

/// The current preemption model from `/sys/kernel/debug/sched/preempt`, which lists the
/// models with the current one in parentheses (`none (voluntary) full lazy`).
pub fn preempt_from_debugfs(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.starts_with('(') && w.ends_with(')'))
        .map(|w| w.trim_matches(|c| c == '(' || c == ')').to_string())
}

/// The `preempt=` boot parameter, if given.
pub fn preempt_from_cmdline(cmdline: &str) -> Option<String> {
    cmdline.split_whitespace().find_map(|w| w.strip_prefix("preempt=")).map(str::to_string)
}

/// The preemption model a config builds by default.
pub fn preempt_from_config(cfg: &BTreeMap<String, String>) -> Option<&'static str> {
    let on = |k: &str| cfg.get(k).is_some_and(|v| v == "y");
    [
        ("CONFIG_PREEMPT_RT", "rt"),
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_NONE", "none"),
    ]
    .into_iter()
    .find(|(k, _)| on(k))
    .map(|(_, m)| m)
}

/// The `jiffies: N` value of `/proc/timer_list`.
pub fn parse_jiffies(timer_list: &str) -> Option<u64> {
    timer_list.lines().find_map(|l| l.trim().strip_prefix("jiffies:")?.trim().parse().ok())
}

/// The standard HZ value nearest to `ticks` counted over `secs` seconds; `None` when no
/// standard value is within 20% (jiffies stood still, or the count is not a tick rate).
pub fn round_hz(ticks: u64, secs: f64) -> Option<u32> {
    if secs <= 0.0 {
        return None;
    }
    let rate = ticks as f64 / secs;
    [100u32, 250, 300, 1000]
        .into_iter()
        .min_by(|a, b| (f64::from(*a) - rate).abs().total_cmp(&(f64::from(*b) - rate).abs()))
        .filter(|hz| (f64::from(*hz) - rate).abs() <= 0.2 * f64::from(*hz))
}

/// The cgroup layout: `v2`, `v1` or `hybrid`, the v2 mount point and the v1 controllers.
pub fn cgroup_layout(mounts: &[Mount]) -> (Option<&'static str>, Option<String>, Vec<String>) {
    let v2 = mounts.iter().find(|m| m.fstype == "cgroup2").map(|m| m.point.clone());
    let known = [
        "cpu",
        "cpuacct",
        "cpuset",
        "memory",
        "devices",
        "freezer",
        "blkio",
        "pids",
        "net_cls",
        "net_prio",
        "perf_event",
        "hugetlb",
        "rdma",
        "misc",
    ];
    let mut v1: Vec<String> = mounts
        .iter()
        .filter(|m| m.fstype == "cgroup")
        .flat_map(|m| m.options.split(',').map(str::to_string).collect::<Vec<_>>())
        .filter(|o| known.contains(&o.as_str()))
        .collect();
    v1.sort();
    v1.dedup();
    let layout = match (v2.is_some(), !v1.is_empty()) {
        (true, false) => Some("v2"),
        (true, true) => Some("hybrid"),
        (false, true) => Some("v1"),
        (false, false) => None,
    };
    (layout, v2, v1)
}

/// The v2 path of this process from `/proc/self/cgroup` (the `0::PATH` line).
pub fn cgroup_v2_path(proc_cgroup: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string)
}

/// The v1 path of this process in the hierarchy of `controller` from `/proc/self/cgroup`
/// (`N:cpu,cpuacct:PATH` lines).
pub fn cgroup_v1_path(proc_cgroup: &str, controller: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, list, path) = (f.next()?, f.next()?, f.next()?);
        list.split(',').any(|c| c == controller).then(|| path.to_string())
    })
}

/// The effective capability set from `/proc/self/status`.
pub fn cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// The sched_ext finding from `/sys/kernel/sched_ext/state` and `root_ops`.
pub fn sched_ext_reading(
    state: Result<String, String>,
    root_ops: Result<String, String>,
    config: Option<&BTreeMap<String, String>>,
) -> Reading {
    match state {
        Ok(s) if s == "enabled" => match root_ops {
            Ok(ops) if !ops.is_empty() => Reading::Known(format!("loaded: {ops}")),
            Ok(_) => Reading::Known("enabled (no root_ops name)".into()),
            Err(e) => Reading::Known(format!("enabled, scheduler unknown ({e})")),
        },
        Ok(s) => Reading::Known(format!("available, none loaded (state {s})")),
        Err(e) if e.ends_with("absent") => match config.map(|c| c.get("CONFIG_SCHED_CLASS_EXT")) {
            Some(Some(v)) if v == "y" => {
                Reading::Unknown(format!("CONFIG_SCHED_CLASS_EXT=y but {e} (sysfs not mounted?)"))
            }
            _ => Reading::Known("not available (kernel without sched_ext)".into()),
        },
        Err(e) => Reading::Unknown(e),
    }
}

/// The scheduler of SCHED_OTHER from the kernel version and, when readable, the tunables in
/// `/sys/kernel/debug/sched/` (`base_slice_ns` exists only with EEVDF, `latency_ns` and
/// `min_granularity_ns` only with CFS).
pub fn scheduler_reading(
    release: &str,
    debug_sched: &Result<Vec<String>, String>,
) -> (Reading, String) {
    if let Ok(files) = debug_sched {
        if files.iter().any(|f| f == "base_slice_ns") {
            return (
                Reading::Known("EEVDF".into()),
                "base_slice_ns in /sys/kernel/debug/sched/".into(),
            );
        }
        if files.iter().any(|f| f == "min_granularity_ns" || f == "latency_ns") {
            return (
                Reading::Known("CFS".into()),
                "min_granularity_ns/latency_ns in /sys/kernel/debug/sched/".into(),
            );
        }
    }
    let debug_note = match debug_sched {
        Ok(_) => "/sys/kernel/debug/sched/ has neither base_slice_ns nor latency_ns".to_string(),
        Err(e) => e.clone(),
    };
    match kernel_version(release) {
        Some(v) if v >= (6, 6) => (
            Reading::Known("EEVDF".into()),
            format!("kernel {}.{} ≥ 6.6 (EEVDF replaced CFS in 6.6); {debug_note}", v.0, v.1),
        ),
        Some(v) => (
            Reading::Known("CFS".into()),
            format!("kernel {}.{} < 6.6 (EEVDF came in 6.6); {debug_note}", v.0, v.1),
        ),
        None => (
            Reading::Unknown(format!("kernel release {release:?} unparsed; {debug_note}")),
            "uname(2)".into(),
        ),
    }
}
