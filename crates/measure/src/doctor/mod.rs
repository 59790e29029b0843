//! `schedlab doctor`: what this machine's kernel and platform do that changes scheduling and
//! measurement — seed 000's Gestalt check ("know what the system does before believing a
//! number") for today's kernels.
//!
//! Each [`Finding`] says what it is, its value, where it was read (a file or a system call)
//! and which probes and timeline scenarios it changes. A value that cannot be read is
//! [`Reading::Unknown`] with the reason (permission, file absent); nothing is guessed and
//! shown as fact, and an estimate says that it is one.
//!
//! The findings are stored with every run in its machine fingerprint
//! ([`crate::machine::Machine::doctor`]), so `show` prints them and `compare` names the ones
//! that differ between two runs.
//!
//! Diagnosis, apart from measurement: nothing here is used while a probe runs. The files:
//! - `finding.rs`: the record ([`Finding`], [`Reading`]) that runs store; data only.
//! - `explain.rs`: what each finding changes ([`changes`], [`KEYS`]); text only.
//! - `parse.rs`: pure parsers over text (a release, a config, a cgroup path...).
//! - `root.rs`: the [`Root`] every reader reads under, so tests can stand in for `/`.
//! - `probed.rs`: what only system calls answer ([`Probed`]), asked once.
//! - `readings.rs`: one reader per finding, each saying where its value came from.
//!
//! This file gathers them in order ([`collect`]). The dependencies point one way: the
//! readers use the parsers, the root and the record; nothing below imports this file.

mod explain;
mod finding;
mod parse;
mod probed;
mod readings;
mod root;

pub use explain::{changes, KEYS};
pub use finding::{differences, stored, Finding, Reading};
pub use parse::*;
pub use probed::{hypervisor_name, PolicyTries, Probed};
pub use readings::read_config;
pub use root::Root;

use readings::*;

/// Every finding for this machine.
pub fn collect() -> Vec<Finding> {
    collect_at(&Root::system(), &Probed::system())
}

/// Every finding, reading files under `root` and taking the system calls' answers from
/// `probed`.
pub fn collect_at(root: &Root, p: &Probed) -> Vec<Finding> {
    let config = read_config(root, &p.release);
    let cfg = config.as_ref().ok().map(|c| &c.0);
    let cfg_src = match &config {
        Ok((_, src)) => src.clone(),
        Err(e) => e.clone(),
    };
    let mut f = Vec::new();

    // Scheduler and sched_ext.
    let debug_sched = root.list("/sys/kernel/debug/sched");
    let (r, src) = scheduler_reading(&p.release, &debug_sched);
    f.push(Finding::new(
        "scheduler",
        "fair scheduler",
        r,
        format!("uname -r {}; {src}", p.release),
    ));
    f.push(Finding::new(
        "sched_ext",
        "sched_ext",
        sched_ext_reading(
            root.read("/sys/kernel/sched_ext/state"),
            root.read("/sys/kernel/sched_ext/root_ops"),
            cfg,
        ),
        "/sys/kernel/sched_ext/state, root_ops",
    ));

    // HZ and NO_HZ.
    f.push(hz(root, cfg, &cfg_src));
    f.push(nohz(root, cfg, &cfg_src));

    // Preemption model.
    f.push(preempt(root, p, cfg, &cfg_src));

    // Timer slack.
    f.push(Finding::new(
        "timer_slack",
        "timer slack",
        match &p.timer_slack {
            Ok(ns) => Reading::Known(format!("{ns} ns")),
            Err(e) => Reading::Unknown(e.clone()),
        },
        "prctl(PR_GET_TIMERSLACK) of this thread (inherited from the parent)",
    ));

    // RT throttling and the fair deadline server.
    let rt = match (
        root.read("/proc/sys/kernel/sched_rt_runtime_us"),
        root.read("/proc/sys/kernel/sched_rt_period_us"),
    ) {
        (Ok(r), Ok(p)) if r == "-1" => Reading::Known(format!("off (runtime -1, period {p} µs)")),
        (Ok(r), Ok(per)) => match (r.parse::<f64>(), per.parse::<f64>()) {
            (Ok(rv), Ok(pv)) if pv > 0.0 => {
                Reading::Known(format!("{r} µs per {per} µs ({:.0}% for RT)", rv / pv * 100.0))
            }
            _ => Reading::Unknown(format!("unparsed runtime {r:?} period {per:?}")),
        },
        (Err(e), _) | (_, Err(e)) => Reading::Unknown(e),
    };
    f.push(Finding::new(
        "rt_throttling",
        "RT throttling",
        rt,
        "/proc/sys/kernel/sched_rt_runtime_us, sched_rt_period_us",
    ));
    f.push(fair_server(root, &p.release));

    // Idle.
    f.push(cpuidle(root));
    f.push(halt_poll(root));

    // SMT and the hypervisor.
    let smt = match root.read("/sys/devices/system/cpu/smt/active") {
        Ok(a) => {
            let control = root.read("/sys/devices/system/cpu/smt/control").unwrap_or_default();
            let on = if a == "1" { "active" } else { "inactive" };
            Reading::Known(if control.is_empty() {
                on.into()
            } else {
                format!("{on} (control {control})")
            })
        }
        Err(e) => Reading::Unknown(e),
    };
    f.push(Finding::new("smt", "SMT", smt, "/sys/devices/system/cpu/smt/active, control"));
    f.push(hypervisor(root, p));

    // cgroups, tracing, privileges, clock.
    f.push(cgroup(root));
    f.push(tracefs(root));
    f.push(perf(root));
    f.push(cap_sys_nice(root, p));
    f.push(clocksource(root));
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mounts::{parse_mountinfo, Mount};

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    fn probed(release: &str, version: &str) -> Probed {
        Probed {
            release: release.into(),
            version: version.into(),
            timer_slack: Ok(50_000),
            cpuid_vendor: Err("test".into()),
            tries: PolicyTries {
                fifo: Ok(()),
                deadline: Err("sched_setattr(SCHED_DEADLINE): Operation not permitted".into()),
                nice: Ok(()),
            },
        }
    }

    fn find<'a>(f: &'a [Finding], key: &str) -> &'a Finding {
        f.iter().find(|x| x.key == key).unwrap_or_else(|| panic!("no finding {key}"))
    }

    #[test]
    fn kernel_versions_parse() {
        assert_eq!(kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(kernel_version("6.6"), Some((6, 6)));
        assert_eq!(kernel_version("linux"), None);
    }

    #[test]
    fn config_lines_parse_and_name_the_preemption_model() {
        let cfg = parse_config(
            "# comment\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n# CONFIG_PREEMPT_VOLUNTARY is not set\n\
             CONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_LOCALVERSION=\"-x\"\n",
        );
        assert_eq!(cfg.get("CONFIG_HZ").map(String::as_str), Some("250"));
        assert_eq!(cfg.get("CONFIG_LOCALVERSION").map(String::as_str), Some("-x"));
        assert!(!cfg.contains_key("CONFIG_PREEMPT_VOLUNTARY"));
        assert_eq!(preempt_from_config(&cfg), Some("none"));
        let full = parse_config("CONFIG_PREEMPT=y\nCONFIG_PREEMPT_NONE=y\n");
        assert_eq!(preempt_from_config(&full), Some("full"));
        assert_eq!(preempt_from_config(&parse_config("CONFIG_HZ=100\n")), None);
    }

    #[test]
    fn preempt_debugfs_and_cmdline_parse() {
        assert_eq!(
            preempt_from_debugfs("none (voluntary) full lazy").as_deref(),
            Some("voluntary")
        );
        assert_eq!(preempt_from_debugfs("none voluntary full"), None);
        assert_eq!(preempt_from_cmdline("quiet preempt=full ro").as_deref(), Some("full"));
        assert_eq!(preempt_from_cmdline("quiet ro"), None);
    }

    #[test]
    fn jiffies_give_the_nearest_standard_hz() {
        let tl = "Timer List Version: v0.10\nnow at 1 nsecs\n\ncpu: 0\n jiffies: 4295892456\n";
        assert_eq!(parse_jiffies(tl), Some(4_295_892_456));
        assert_eq!(parse_jiffies("cpu: 0\n"), None);
        assert_eq!(round_hz(51, 0.2), Some(250));
        assert_eq!(round_hz(199, 0.2), Some(1000));
        assert_eq!(round_hz(20, 0.2), Some(100));
        assert_eq!(round_hz(5, 0.0), None);
        assert_eq!(round_hz(0, 0.2), None, "jiffies that stand still are no rate");
        assert_eq!(round_hz(120, 0.2), None, "600/s is no standard HZ");
        // A static file: the estimate is tried and refused, not guessed.
        let dir = tree(&[("/proc/timer_list", tl)]);
        let f = collect_at(&Root::at(dir.path()), &probed("6.18.1", "#1 SMP"));
        let hz = find(&f, "hz");
        assert!(
            matches!(&hz.reading, Reading::Unknown(w) if w.contains("no standard tick rate")),
            "{hz:?}"
        );
    }

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime shared:5 - cgroup cgroup rw,cpuacct
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 / /mnt/my\\040disk rw - ext4 /dev/sda1 rw
";

    #[test]
    fn mountinfo_parses_and_tells_the_cgroup_layout() {
        let m = parse_mountinfo(HYBRID);
        assert_eq!(m.len(), 6);
        assert_eq!(
            m[2],
            Mount {
                point: "/sys/fs/cgroup/cpuacct".into(),
                fstype: "cgroup".into(),
                options: "rw,cpuacct".into()
            }
        );
        assert_eq!(m[5].point, "/mnt/my disk");
        let (layout, v2, v1) = cgroup_layout(&m);
        assert_eq!(layout, Some("hybrid"));
        assert_eq!(v2.as_deref(), Some("/sys/fs/cgroup/unified"));
        assert_eq!(v1, vec!["cpu".to_string(), "cpuacct".to_string()]);
        let pure =
            parse_mountinfo("30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n");
        assert_eq!(cgroup_layout(&pure).0, Some("v2"));
        assert_eq!(cgroup_layout(&[]).0, None);
        assert_eq!(
            cgroup_v2_path("1:cpu:/\n0::/user.slice/x.scope\n").as_deref(),
            Some("/user.slice/x.scope")
        );
    }

    #[test]
    fn v1_paths_parse() {
        let pc = "4:memory:/process_api/e31d\n2:cpu,cpuacct:/box\n0::/\n";
        assert_eq!(cgroup_v1_path(pc, "cpu").as_deref(), Some("/box"));
        assert_eq!(cgroup_v1_path(pc, "memory").as_deref(), Some("/process_api/e31d"));
        assert_eq!(cgroup_v1_path(pc, "pids"), None);
        let dir = tree(&[
            (
                "/proc/self/mountinfo",
                "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
            ),
            ("/proc/self/cgroup", pc),
            ("/sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_quota_us", "50000\n"),
            ("/sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_period_us", "100000\n"),
        ]);
        let f = cgroup(&Root::at(dir.path()));
        assert_eq!(
            f.reading.text(),
            "v1; v1 controllers: cpu,cpuacct; v1 cpu quota 50000 µs per 100000 µs"
        );
    }

    #[test]
    fn capabilities_parse() {
        let s = "Name:\tx\nCapPrm:\t0\nCapEff:\t000001fffeffffff\n";
        assert_eq!(cap_eff(s), Some(0x1fffeffffff));
        assert!(cap_eff(s).unwrap() & (1 << 23) != 0);
        assert_eq!(cap_eff("Name:\tx\n"), None);
    }

    #[test]
    fn sched_ext_states() {
        let ok = |s: &str| Ok::<String, String>(s.to_string());
        assert_eq!(
            sched_ext_reading(ok("enabled"), ok("rustland"), None),
            Reading::Known("loaded: rustland".into())
        );
        assert_eq!(
            sched_ext_reading(ok("disabled"), ok(""), None),
            Reading::Known("available, none loaded (state disabled)".into())
        );
        let absent = || Err("/sys/kernel/sched_ext/state: absent".to_string());
        assert_eq!(
            sched_ext_reading(absent(), absent(), None),
            Reading::Known("not available (kernel without sched_ext)".into())
        );
        let cfg = parse_config("CONFIG_SCHED_CLASS_EXT=y\n");
        assert!(matches!(sched_ext_reading(absent(), absent(), Some(&cfg)), Reading::Unknown(_)));
        let denied = Err("/sys/kernel/sched_ext/state: permission denied".to_string());
        assert!(matches!(sched_ext_reading(denied, absent(), None), Reading::Unknown(_)));
    }

    #[test]
    fn scheduler_prefers_debugfs_evidence_over_the_version() {
        let eevdf = Ok(vec!["base_slice_ns".to_string(), "preempt".to_string()]);
        assert_eq!(scheduler_reading("5.15.0", &eevdf).0, Reading::Known("EEVDF".into()));
        let cfs = Ok(vec!["latency_ns".to_string()]);
        assert_eq!(scheduler_reading("6.8.0", &cfs).0, Reading::Known("CFS".into()));
        let none = Err("/sys/kernel/debug/sched: absent".to_string());
        let (r, src) = scheduler_reading("6.6.1", &none);
        assert_eq!(r, Reading::Known("EEVDF".into()));
        assert!(src.contains("≥ 6.6") && src.contains("absent"), "{src}");
        assert_eq!(scheduler_reading("6.1.0", &none).0, Reading::Known("CFS".into()));
        assert!(matches!(scheduler_reading("x", &none).0, Reading::Unknown(_)));
    }

    #[test]
    fn a_tree_gives_every_finding_and_unknowns_say_why() {
        let dir = tree(&[
            ("/boot/config-6.18.1", "CONFIG_HZ=1000\nCONFIG_NO_HZ_IDLE=y\nCONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n"),
            ("/proc/cmdline", "root=/dev/vda preempt=full quiet"),
            ("/proc/sys/kernel/sched_rt_runtime_us", "950000\n"),
            ("/proc/sys/kernel/sched_rt_period_us", "1000000\n"),
            ("/sys/kernel/sched_ext/state", "disabled\n"),
            ("/sys/devices/system/cpu/cpuidle/current_driver", "intel_idle\n"),
            ("/sys/devices/system/cpu/cpuidle/current_governor", "menu\n"),
            ("/sys/devices/system/cpu/cpu0/cpuidle/state0/name", "POLL\n"),
            ("/sys/devices/system/cpu/cpu0/cpuidle/state0/latency", "0\n"),
            ("/sys/devices/system/cpu/cpu0/cpuidle/state1/name", "C1E\n"),
            ("/sys/devices/system/cpu/cpu0/cpuidle/state1/latency", "10\n"),
            ("/sys/devices/system/cpu/smt/active", "1\n"),
            ("/sys/devices/system/cpu/smt/control", "on\n"),
            ("/proc/self/mountinfo", "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
            ("/proc/self/cgroup", "0::/user.slice\n"),
            ("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n"),
            ("/sys/fs/cgroup/user.slice/cpu.max", "200000 100000\n"),
            ("/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu sse2\n"),
            ("/proc/self/status", "CapEff:\t0000000000000000\n"),
            ("/sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc\n"),
        ]);
        let f = collect_at(&Root::at(dir.path()), &probed("6.18.1", "#1 SMP PREEMPT_DYNAMIC"));
        let keys: Vec<&str> = f.iter().map(|x| x.key.as_str()).collect();
        assert_eq!(keys, KEYS);
        let text = |k: &str| find(&f, k).reading.text();
        assert_eq!(text("scheduler"), "EEVDF");
        assert_eq!(text("sched_ext"), "available, none loaded (state disabled)");
        assert_eq!(text("hz"), "1000");
        assert!(find(&f, "hz").source.contains("/boot/config-6.18.1"));
        assert_eq!(text("nohz"), "idle");
        assert_eq!(text("preempt"), "full (set at boot; PREEMPT_DYNAMIC)");
        assert_eq!(text("timer_slack"), "50000 ns");
        assert_eq!(text("rt_throttling"), "950000 µs per 1000000 µs (95% for RT)");
        assert!(
            text("fair_server").starts_with("present (kernel ≥ 6.12)"),
            "{}",
            text("fair_server")
        );
        assert_eq!(text("cpuidle"), "driver intel_idle, governor menu; states POLL 0µs, C1E 10µs");
        assert_eq!(text("halt_poll"), "none (no guest haltpoll driver, no kvm module)");
        assert_eq!(text("smt"), "active (control on)");
        assert_eq!(text("hypervisor"), "none (bare metal)");
        assert_eq!(
            text("cgroup"),
            "v2; v2 controllers: cpuset cpu io memory pids; cpu.max 200000 100000"
        );
        assert!(text("tracefs").starts_with("not mounted"));
        // The kernel recorder mounts tracefs itself: doctor must not send the user to do it.
        assert!(!text("tracefs").contains("mount -t"), "{}", text("tracefs"));
        let tracefs = f.iter().find(|x| x.key == "tracefs").expect("a tracefs finding");
        assert!(tracefs.changes.contains("mounts tracefs itself"), "{}", tracefs.changes);
        assert_eq!(text("perf"), "unknown (/proc/sys/kernel/perf_event_paranoid: absent)");
        assert!(text("cap_sys_nice")
            .starts_with("CAP_SYS_NICE no; SCHED_FIFO yes, SCHED_DEADLINE no ("));
        assert_eq!(text("clocksource"), "tsc");
        assert!(f.iter().all(|x| !x.changes.is_empty()), "every finding says what it changes");
    }

    #[test]
    fn preemption_model_from_debugfs_then_cmdline_then_config() {
        let cfg = ("/boot/config-6.18.1", "CONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\n");
        let dynamic = probed("6.18.1", "#1 SMP PREEMPT_DYNAMIC");
        let read = |files: &[(&str, &str)], p: &Probed| {
            let dir = tree(files);
            let f = collect_at(&Root::at(dir.path()), p);
            find(&f, "preempt").clone()
        };
        let f = read(
            &[cfg, ("/sys/kernel/debug/sched/preempt", "none voluntary (full) lazy\n")],
            &dynamic,
        );
        assert_eq!(f.reading.text(), "full");
        assert_eq!(f.source, "/sys/kernel/debug/sched/preempt");
        let f = read(&[cfg, ("/proc/cmdline", "quiet")], &dynamic);
        assert_eq!(f.reading.text(), "none (boot default; PREEMPT_DYNAMIC)");
        assert!(f.source.contains("debugfs can change it later"), "{}", f.source);
        let fixed = probed("6.18.1", "#1 SMP");
        let f = read(&[("/boot/config-6.18.1", "CONFIG_PREEMPT=y\n")], &fixed);
        assert_eq!(f.reading.text(), "full");
        let f = read(&[], &probed("6.18.1", "#1 SMP PREEMPT_RT"));
        assert_eq!(f.reading.text(), "rt");
    }

    #[test]
    fn an_empty_tree_is_unknown_not_guessed() {
        let dir = tree(&[]);
        let f = collect_at(&Root::at(dir.path()), &probed("5.10.0", "#1 SMP PREEMPT_DYNAMIC"));
        for key in ["hz", "nohz", "preempt", "rt_throttling", "smt", "perf", "clocksource"] {
            let r = &find(&f, key).reading;
            assert!(matches!(r, Reading::Unknown(why) if why.contains("absent")), "{key}: {r:?}");
        }
        assert_eq!(find(&f, "scheduler").reading.text(), "CFS");
        assert_eq!(find(&f, "fair_server").reading.text(), "absent (kernel < 6.12)");
    }

    #[test]
    fn stored_findings_drop_the_explanation_and_differences_name_the_change() {
        let dir = tree(&[]);
        let a = stored(&collect_at(&Root::at(dir.path()), &probed("6.18.1", "#1 SMP")));
        assert!(a.iter().all(|x| x.changes.is_empty()));
        let mut b = a.clone();
        b.iter_mut().find(|x| x.key == "timer_slack").unwrap().reading =
            Reading::Known("1 ns".into());
        assert_eq!(
            differences(&a, &b),
            vec![("timer slack".to_string(), "50000 ns".to_string(), "1 ns".to_string())]
        );
        assert!(differences(&a, &a).is_empty());
        let json = serde_json::to_string(&a).unwrap();
        let back: Vec<Finding> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
    }
}
