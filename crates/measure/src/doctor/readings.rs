//! One reader per finding: each reads its files under a [`Root`] (and the answers in
//! [`Probed`]) and says where the value came from. Called in order by [`super::collect_at`].

use std::collections::BTreeMap;
use std::path::Path;

use super::finding::{Finding, Reading};
use super::parse::*;
use super::probed::{hypervisor_name, Probed};
use super::root::Root;
use crate::mounts::parse_mountinfo;

/// The running kernel's build config and where it came from: `/boot/config-RELEASE`, else
/// `/proc/config.gz` through `gzip -dc` (schedlab links no decompressor).
pub fn read_config(
    root: &Root,
    release: &str,
) -> Result<(BTreeMap<String, String>, String), String> {
    let boot = format!("/boot/config-{release}");
    let boot_err = match root.read(&boot) {
        Ok(t) => return Ok((parse_config(&t), boot)),
        Err(e) => e,
    };
    let gz = root.path("/proc/config.gz");
    if !gz.exists() {
        return Err(format!("{boot_err}; /proc/config.gz: absent"));
    }
    match std::process::Command::new("gzip").arg("-dc").arg(&gz).output() {
        Ok(o) if o.status.success() => Ok((
            parse_config(&String::from_utf8_lossy(&o.stdout)),
            "/proc/config.gz (gzip -dc)".into(),
        )),
        Ok(o) => Err(format!(
            "{boot_err}; gzip -dc /proc/config.gz: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{boot_err}; /proc/config.gz needs gzip: {e}")),
    }
}

pub(super) fn hz(root: &Root, cfg: Option<&BTreeMap<String, String>>, cfg_src: &str) -> Finding {
    if let Some(hz) = cfg.and_then(|c| c.get("CONFIG_HZ")) {
        return Finding::new(
            "hz",
            "HZ",
            Reading::Known(hz.clone()),
            format!("CONFIG_HZ in {cfg_src}"),
        );
    }
    // Estimate from jiffies counted over a short interval, and say that it is one.
    let first = root.read("/proc/timer_list").map(|t| parse_jiffies(&t));
    let reading = match first {
        Ok(Some(j0)) => {
            let t0 = std::time::Instant::now();
            std::thread::sleep(std::time::Duration::from_millis(200));
            let j1 = root.read("/proc/timer_list").ok().and_then(|t| parse_jiffies(&t));
            let secs = t0.elapsed().as_secs_f64();
            match j1.and_then(|j1| round_hz(j1.saturating_sub(j0), secs)) {
                Some(hz) => Reading::Known(format!("≈{hz} (estimated)")),
                None => Reading::Unknown(format!(
                    "{cfg_src}; jiffies in /proc/timer_list gave no standard tick rate"
                )),
            }
        }
        Ok(None) => Reading::Unknown(format!("{cfg_src}; no jiffies line in /proc/timer_list")),
        Err(e) => Reading::Unknown(format!("{cfg_src}; {e}")),
    };
    Finding::new(
        "hz",
        "HZ",
        reading,
        "jiffies in /proc/timer_list counted over 200 ms (no kernel config readable)",
    )
}

pub(super) fn nohz(root: &Root, cfg: Option<&BTreeMap<String, String>>, cfg_src: &str) -> Finding {
    let full_cpus = root
        .read("/sys/devices/system/cpu/nohz_full")
        .ok()
        .filter(|s| !s.is_empty() && s != "(null)");
    let reading = match cfg {
        Some(c) => {
            let on = |k: &str| c.get(k).is_some_and(|v| v == "y");
            let mode = if on("CONFIG_NO_HZ_FULL") {
                "full"
            } else if on("CONFIG_NO_HZ_IDLE") {
                "idle"
            } else if on("CONFIG_HZ_PERIODIC") {
                "periodic (tick never stops)"
            } else {
                "periodic (no NO_HZ option set)"
            };
            Reading::Known(match &full_cpus {
                Some(cpus) => format!("{mode}, nohz_full CPUs {cpus}"),
                None if mode == "full" => format!("{mode} built, no nohz_full CPUs"),
                None => mode.to_string(),
            })
        }
        None => match &full_cpus {
            Some(cpus) => Reading::Known(format!("full on CPUs {cpus}")),
            None => Reading::Unknown(cfg_src.to_string()),
        },
    };
    Finding::new(
        "nohz",
        "NO_HZ",
        reading,
        format!("CONFIG_NO_HZ_* in {cfg_src}; /sys/devices/system/cpu/nohz_full"),
    )
}

pub(super) fn preempt(
    root: &Root,
    p: &Probed,
    cfg: Option<&BTreeMap<String, String>>,
    cfg_src: &str,
) -> Finding {
    let dynamic = p.version.split_whitespace().any(|w| w == "PREEMPT_DYNAMIC")
        || cfg.is_some_and(|c| c.get("CONFIG_PREEMPT_DYNAMIC").is_some_and(|v| v == "y"));
    let debugfs = root.read("/sys/kernel/debug/sched/preempt");
    if let Some(m) = debugfs.as_ref().ok().and_then(|t| preempt_from_debugfs(t)) {
        return Finding::new(
            "preempt",
            "preemption model",
            Reading::Known(m),
            "/sys/kernel/debug/sched/preempt",
        );
    }
    let dbg = debugfs.err().unwrap_or_else(|| "/sys/kernel/debug/sched/preempt: unparsed".into());
    let cmdline = root.read("/proc/cmdline").ok();
    if dynamic {
        if let Some(m) = cmdline.as_deref().and_then(preempt_from_cmdline) {
            return Finding::new(
                "preempt",
                "preemption model",
                Reading::Known(format!("{m} (set at boot; PREEMPT_DYNAMIC)")),
                format!(
                    "preempt= in /proc/cmdline (debugfs can change it later, unreadable: {dbg})"
                ),
            );
        }
    }
    if let Some(m) = cfg.and_then(preempt_from_config) {
        let how = if dynamic {
            format!(
                "build default CONFIG_PREEMPT_* in {cfg_src}, no preempt= in /proc/cmdline \
                 (debugfs can change it later, unreadable: {dbg})"
            )
        } else {
            format!("CONFIG_PREEMPT_* in {cfg_src}")
        };
        let v =
            if dynamic { format!("{m} (boot default; PREEMPT_DYNAMIC)") } else { m.to_string() };
        return Finding::new("preempt", "preemption model", Reading::Known(v), how);
    }
    // Only uname -v is left: it names PREEMPT_RT/PREEMPT, but not which dynamic model runs.
    let words: Vec<&str> = p.version.split_whitespace().collect();
    let reading = if words.contains(&"PREEMPT_RT") {
        Reading::Known("rt".into())
    } else if dynamic {
        Reading::Unknown(format!("PREEMPT_DYNAMIC, current model not readable: {dbg}; {cfg_src}"))
    } else if words.contains(&"PREEMPT") {
        Reading::Known("full".into())
    } else {
        Reading::Unknown(format!("uname -v names no PREEMPT; {dbg}; {cfg_src}"))
    };
    Finding::new("preempt", "preemption model", reading, "uname -v")
}

pub(super) fn fair_server(root: &Root, release: &str) -> Finding {
    let dir = "/sys/kernel/debug/sched/fair_server/cpu0";
    let params = root.read(&format!("{dir}/runtime")).and_then(|r| {
        let p = root.read(&format!("{dir}/period"))?;
        Ok((r, p))
    });
    let reading = match (kernel_version(release), params) {
        (_, Ok((r, p))) => Reading::Known(format!("runtime {r} ns per {p} ns (cpu0)")),
        (Some(v), Err(e)) if v >= (6, 12) => {
            Reading::Known(format!("present (kernel ≥ 6.12); parameters unknown: {e}"))
        }
        (Some(_), Err(_)) => Reading::Known("absent (kernel < 6.12)".into()),
        (None, Err(e)) => Reading::Unknown(format!("kernel release unparsed; {e}")),
    };
    Finding::new(
        "fair_server",
        "fair deadline server",
        reading,
        format!("kernel version (6.12 added it); {dir}/runtime, period"),
    )
}

pub(super) fn cpuidle(root: &Root) -> Finding {
    let base = "/sys/devices/system/cpu/cpuidle";
    let driver = root.read(&format!("{base}/current_driver"));
    let governor = root
        .read(&format!("{base}/current_governor"))
        .or_else(|_| root.read(&format!("{base}/current_governor_ro")));
    let states: Vec<String> = root
        .list("/sys/devices/system/cpu/cpu0/cpuidle")
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.starts_with("state"))
        .filter_map(|s| {
            let dir = format!("/sys/devices/system/cpu/cpu0/cpuidle/{s}");
            let name = root.read(&format!("{dir}/name")).ok()?;
            let lat = root.read(&format!("{dir}/latency")).ok();
            Some(match lat {
                Some(l) => format!("{name} {l}µs"),
                None => name,
            })
        })
        .collect();
    let reading = match (driver, governor) {
        (Ok(d), Ok(g)) => Reading::Known(format!(
            "driver {d}, governor {g}{}",
            if states.is_empty() {
                String::new()
            } else {
                format!("; states {}", states.join(", "))
            }
        )),
        (Ok(d), Err(e)) => Reading::Known(format!("driver {d}, governor unknown ({e})")),
        (Err(e), _) if !root.exists(base) => Reading::Known(format!(
            "no cpuidle ({e}): idle CPUs use the architecture's default halt"
        )),
        (Err(e), _) => Reading::Unknown(e),
    };
    Finding::new(
        "cpuidle",
        "cpuidle",
        reading,
        format!("{base}/current_driver, current_governor; cpu0/cpuidle/state*/name, latency"),
    )
}

pub(super) fn halt_poll(root: &Root) -> Finding {
    let guest_driver = root.read("/sys/devices/system/cpu/cpuidle/current_driver").ok();
    let guest = root.read("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
    let host = root.read("/sys/module/kvm/parameters/halt_poll_ns");
    let mut parts = Vec::new();
    if guest_driver.as_deref() == Some("haltpoll") {
        match &guest {
            Ok(ns) => parts.push(format!("guest haltpoll, polls {ns} ns")),
            Err(e) => parts.push(format!("guest haltpoll driver, poll time unknown ({e})")),
        }
    } else if let Ok(ns) = &guest {
        parts.push(format!("haltpoll module loaded ({ns} ns) but not the cpuidle driver"));
    }
    if let Ok(ns) = &host {
        parts.push(format!("KVM host halt_poll_ns {ns}"));
    }
    let reading = if parts.is_empty() {
        Reading::Known("none (no guest haltpoll driver, no kvm module)".into())
    } else {
        Reading::Known(parts.join("; "))
    };
    Finding::new(
        "halt_poll",
        "halt polling",
        reading,
        "/sys/module/haltpoll/parameters/guest_halt_poll_ns, cpuidle current_driver, \
         /sys/module/kvm/parameters/halt_poll_ns",
    )
}

pub(super) fn hypervisor(root: &Root, p: &Probed) -> Finding {
    let flag = root.read("/proc/cpuinfo").map(|c| {
        c.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == "hypervisor"))
    });
    let sys_type = root.read("/sys/hypervisor/type").ok();
    let reading = match (&p.cpuid_vendor, &sys_type, &flag) {
        (Ok(sig), _, _) => Reading::Known(match hypervisor_name(sig) {
            Some(n) => n.to_string(),
            None => format!("unrecognised ({sig:?})"),
        }),
        (Err(_), Some(t), _) => Reading::Known(t.clone()),
        (Err(_), None, Ok(true)) => Reading::Known("yes (vendor not named)".into()),
        (Err(_), None, Ok(false)) => Reading::Known("none (bare metal)".into()),
        (Err(c), None, Err(e)) => Reading::Unknown(format!("{c}; {e}")),
    };
    Finding::new(
        "hypervisor",
        "hypervisor",
        reading,
        "CPUID leaf 0x40000000 vendor; /sys/hypervisor/type; hypervisor flag in /proc/cpuinfo",
    )
}

pub(super) fn cgroup(root: &Root) -> Finding {
    let mounts = match root.read("/proc/self/mountinfo") {
        Ok(t) => parse_mountinfo(&t),
        Err(e) => {
            return Finding::new("cgroup", "cgroups", Reading::Unknown(e), "/proc/self/mountinfo")
        }
    };
    let (layout, v2, v1) = cgroup_layout(&mounts);
    let Some(layout) = layout else {
        return Finding::new(
            "cgroup",
            "cgroups",
            Reading::Known("none mounted".into()),
            "/proc/self/mountinfo",
        );
    };
    let mut parts = vec![layout.to_string()];
    if let Some(point) = &v2 {
        let controllers = root.read(&format!("{point}/cgroup.controllers"));
        parts.push(match controllers {
            Ok(c) if c.is_empty() => "v2 controllers: none".into(),
            Ok(c) => format!("v2 controllers: {c}"),
            Err(e) => format!("v2 controllers unknown ({e})"),
        });
        let own = root.read("/proc/self/cgroup").ok().and_then(|t| cgroup_v2_path(&t));
        if let Some(path) = own {
            let file = format!("{point}{}/cpu.max", if path == "/" { "" } else { &path });
            if let Ok(max) = root.read(&file) {
                parts.push(format!("cpu.max {max}"));
            }
        }
    }
    if !v1.is_empty() {
        parts.push(format!("v1 controllers: {}", v1.join(",")));
        let cpu_mount = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpu"));
        let own = root.read("/proc/self/cgroup").ok().and_then(|t| cgroup_v1_path(&t, "cpu"));
        if let (Some(m), Some(path)) = (cpu_mount, own) {
            let dir = format!("{}{}", m.point, if path == "/" { "" } else { &path });
            let quota = root.read(&format!("{dir}/cpu.cfs_quota_us"));
            let period = root.read(&format!("{dir}/cpu.cfs_period_us"));
            match (quota, period) {
                (Ok(q), _) if q == "-1" => parts.push("v1 cpu quota none".into()),
                (Ok(q), Ok(p)) => parts.push(format!("v1 cpu quota {q} µs per {p} µs")),
                (Err(e), _) | (_, Err(e)) => parts.push(format!("v1 cpu quota unknown ({e})")),
            }
        }
    }
    Finding::new(
        "cgroup",
        "cgroups",
        Reading::Known(parts.join("; ")),
        "/proc/self/mountinfo; cgroup.controllers and cpu.max (v2) or cpu.cfs_quota_us (v1) \
         of our cgroup (/proc/self/cgroup)",
    )
}

pub(super) fn tracefs(root: &Root) -> Finding {
    let mounts = root.read("/proc/self/mountinfo").map(|t| parse_mountinfo(&t));
    let reading = match mounts {
        Err(e) => Reading::Unknown(e),
        Ok(m) => match m.iter().find(|m| m.fstype == "tracefs") {
            Some(t) => {
                let ev = format!("{}/events/sched/sched_switch/enable", t.point);
                let access = if std::fs::OpenOptions::new().write(true).open(root.path(&ev)).is_ok() {
                    "sched events writable".to_string()
                } else {
                    match root.read(&ev) {
                        Ok(_) => "sched events read-only".into(),
                        Err(e) => e,
                    }
                };
                // What a killed schedlab left there (only for the real system: a stand-in
                // root has no processes to ask).
                let stale = if root.0 == Path::new("/") {
                    crate::tracefs::stale()
                } else {
                    crate::tracefs::Stale::default()
                };
                let left = if stale.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} (the next `schedlab timeline --kernel` or `--probe` removes it)",
                        stale.describe()
                    )
                };
                Reading::Known(format!("mounted at {} ({access}){left}", t.point))
            }
            None if root.exists("/sys/kernel/tracing") => Reading::Known(
                "not mounted; /sys/kernel/tracing exists (`timeline --kernel` mounts it there as root)"
                    .into(),
            ),
            None => Reading::Known("not mounted, no /sys/kernel/tracing (kernel without tracing?)".into()),
        },
    };
    Finding::new(
        "tracefs",
        "tracefs",
        reading,
        "tracefs in /proc/self/mountinfo; events/sched/sched_switch/enable opened for writing; \
         instances/schedlab-PID-START of processes that are gone, and the mount note in the \
         state directory (/run/schedlab or $XDG_RUNTIME_DIR/schedlab)",
    )
}

pub(super) fn perf(root: &Root) -> Finding {
    let reading = match root.read("/proc/sys/kernel/perf_event_paranoid") {
        Ok(v) => {
            let meaning = match v.parse::<i32>() {
                Ok(n) if n <= -1 => "everything allowed",
                Ok(0) => "no raw tracepoints for users",
                Ok(1) => "users: user and kernel profiling of own processes",
                Ok(2) => "users: user-space profiling only",
                Ok(_) => "users: no perf events",
                Err(_) => "unparsed",
            };
            Reading::Known(format!("perf_event_paranoid {v} ({meaning})"))
        }
        Err(e) => Reading::Unknown(e),
    };
    Finding::new("perf", "perf access", reading, "/proc/sys/kernel/perf_event_paranoid")
}

pub(super) fn cap_sys_nice(root: &Root, p: &Probed) -> Finding {
    const CAP_SYS_NICE: u32 = 23;
    let cap =
        root.read("/proc/self/status").map(|s| cap_eff(&s).map(|c| c & (1 << CAP_SYS_NICE) != 0));
    let cap_text = match cap {
        Ok(Some(true)) => "CAP_SYS_NICE yes".to_string(),
        Ok(Some(false)) => "CAP_SYS_NICE no".to_string(),
        Ok(None) => "CAP_SYS_NICE unknown (no CapEff line)".to_string(),
        Err(e) => format!("CAP_SYS_NICE unknown ({e})"),
    };
    let t = |r: &Result<(), String>| match r {
        Ok(()) => "yes".to_string(),
        Err(e) => format!("no ({e})"),
    };
    Finding::new(
        "cap_sys_nice",
        "privilege",
        Reading::Known(format!(
            "{cap_text}; SCHED_FIFO {}, SCHED_DEADLINE {}, nice -5 {}",
            t(&p.tries.fifo),
            t(&p.tries.deadline),
            t(&p.tries.nice)
        )),
        "CapEff in /proc/self/status; sched_setscheduler, sched_setattr, setpriority tried on a \
         scratch thread",
    )
}

pub(super) fn clocksource(root: &Root) -> Finding {
    let base = "/sys/devices/system/clocksource/clocksource0";
    let reading = match root.read(&format!("{base}/current_clocksource")) {
        Ok(c) => Reading::Known(match root.read(&format!("{base}/available_clocksource")) {
            Ok(a) => format!("{c} (available: {a})"),
            Err(_) => c,
        }),
        Err(e) => Reading::Unknown(e),
    };
    Finding::new("clocksource", "clocksource", reading, format!("{base}/current_clocksource"))
}
