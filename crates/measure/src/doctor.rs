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
//! The parsers are pure functions over text; the readers take a [`Root`] so tests can point
//! them at a directory tree that stands in for `/`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// A value as read, or why it could not be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reading {
    /// The value, as read.
    Known(String),
    /// It could not be read; the reason (permission denied, file absent...).
    Unknown(String),
}

impl Reading {
    /// The value, or `unknown (reason)`.
    pub fn text(&self) -> String {
        match self {
            Reading::Known(v) => v.clone(),
            Reading::Unknown(why) => format!("unknown ({why})"),
        }
    }
}

/// One thing the kernel or platform does that changes scheduling or measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// A short stable key (`timer_slack`, `hz`...), the same in every run.
    pub key: String,
    /// What it is, for people (`timer slack`).
    pub name: String,
    /// Its value.
    pub reading: Reading,
    /// How it was read: the files and system calls, and how a value was derived from them.
    pub source: String,
    /// Which probes and timeline scenarios it changes, and how. Not stored with runs (it is
    /// the same text for every run of a version): see [`changes`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub changes: String,
}

impl Finding {
    fn new(key: &str, name: &str, reading: Reading, source: impl Into<String>) -> Finding {
        Finding {
            key: key.to_string(),
            name: name.to_string(),
            reading,
            source: source.into(),
            changes: changes(key).to_string(),
        }
    }
}

/// The findings as stored with a run: without the [`Finding::changes`] text.
pub fn stored(findings: &[Finding]) -> Vec<Finding> {
    findings.iter().map(|f| Finding { changes: String::new(), ..f.clone() }).collect()
}

/// The findings whose values differ between two runs, as `(name, a, b)`; a finding only one
/// of them has is shown against `not recorded`.
pub fn differences(a: &[Finding], b: &[Finding]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for fa in a {
        match b.iter().find(|fb| fb.key == fa.key) {
            Some(fb) if fb.reading != fa.reading => {
                out.push((fa.name.clone(), fa.reading.text(), fb.reading.text()));
            }
            Some(_) => {}
            None => out.push((fa.name.clone(), fa.reading.text(), "not recorded".into())),
        }
    }
    for fb in b.iter().filter(|fb| !a.iter().any(|fa| fa.key == fb.key)) {
        out.push((fb.name.clone(), "not recorded".into(), fb.reading.text()));
    }
    out
}

/// The keys of the findings, in the order [`collect`] gives them.
pub const KEYS: [&str; 17] = [
    "scheduler",
    "sched_ext",
    "hz",
    "nohz",
    "preempt",
    "timer_slack",
    "rt_throttling",
    "fair_server",
    "cpuidle",
    "halt_poll",
    "smt",
    "hypervisor",
    "cgroup",
    "tracefs",
    "perf",
    "cap_sys_nice",
    "clocksource",
];

/// Which probes and scenarios a finding changes and how, by key.
pub fn changes(key: &str) -> &'static str {
    match key {
        "scheduler" => {
            "how SCHED_OTHER threads share a CPU: EEVDF picks the eligible thread with the \
             earliest virtual deadline (slices of base_slice_ns: 0.75 ms times 1 + log2 of the \
             CPUs, at most 8) and lets a waking \
             thread preempt only when its deadline is earlier; CFS picked the smallest vruntime \
             with wakeup granularity. Changes timeline scenarios two-equal, four-equal, nice, \
             yield, budget, busy-vs-process (slice and gap lengths) and os.ctx.switch, \
             threads.switch, threads.wake (who runs after a wake-up)"
        }
        "sched_ext" => {
            "a loaded BPF scheduler replaces the fair class for the tasks it takes: every \
             SCHED_OTHER result and timeline (threads.*, os.ctx.switch, os.pipe.latency, \
             scenarios 1-8) then measures that scheduler, not EEVDF/CFS"
        }
        "hz" => {
            "the tick period (1/HZ): the granularity of tick-driven preemption checks, of \
             jiffies-based timeouts and of the tick-sampled CPU-time accounting behind \
             /proc/stat that noise attribution reads (unless the kernel accounts precisely). \
             Changes \
             scenarios one-busy, two-equal, busy-vs-process (slice ends), and the noise \
             columns of every result"
        }
        "nohz" => {
            "with NO_HZ_IDLE an idle CPU stops its tick, so the first wake-up after idle pays \
             for restarting it; NO_HZ_FULL also stops it on busy isolated CPUs. Changes \
             cross-CPU rows (os.pipe.latency placement=cross, threads.wake, \
             threads.condvar.pingpong) and the sleep scenario"
        }
        "preempt" => {
            "when a woken or higher-priority thread gets the CPU from a thread running kernel \
             code: none waits for the next return to user space or explicit preemption point, \
             voluntary adds cond_resched points, full preempts almost anywhere, lazy \
             preempts fair tasks at the next tick. Changes the wake-up latency of rt.preempt.*, \
             os.signal.catch, threads.wake and the fifo, yield-priority and rt-* scenarios \
             when the other thread is in a system call"
        }
        "timer_slack" => {
            "the kernel may end a non-real-time thread's sleep up to this much late, to \
             batch timer interrupts: the overshoot floor of the sleep scenario (which \
             measures it, then sets 1 ns), of budget and of rt-budget; real-time threads \
             get no slack. A process inherits its parent's slack"
        }
        "rt_throttling" => {
            "real-time threads may use only runtime/period of each CPU; the rest goes to \
             other classes. The rt-throttle and fifo scenarios show a busy SCHED_FIFO thread \
             stopped for the remainder of each period; -1 means a SCHED_FIFO thread can \
             starve everything else"
        }
        "fair_server" => {
            "since 6.12 a deadline server runs fair tasks for runtime/period even under a \
             busy real-time thread, instead of (or beside) RT throttling: what the \
             rt-throttle and fifo scenarios show starved, and for how long"
        }
        "cpuidle" => {
            "what an idle CPU does and how long it takes to wake: deep C-states add exit \
             latency to every wake-up of a sleeping CPU (cross-CPU os.pipe.latency, \
             os.unix.latency, threads.wake, threads.condvar.pingpong, the sleep scenario); \
             the haltpoll driver/governor spins in the guest before halting"
        }
        "halt_poll" => {
            "a vCPU that goes idle first polls (guest haltpoll or the host's KVM \
             halt_poll_ns) before it halts: a wake-up within the poll window is far cheaper \
             than one that exits to the host. Cross-CPU wake-up rows are bimodal around it"
        }
        "smt" => {
            "with SMT two logical CPUs share one core's execution units and caches: \
             placement=cross rows and threads.* results depend on whether the two CPUs are \
             siblings, and a busy sibling slows a probe down"
        }
        "hypervisor" => {
            "under a hypervisor the host steals time (noise columns, bimodal rows), \
             wake-ups of idle vCPUs may exit to the host, the clocksource may be paravirtual, \
             and the host's load changes results from day to day: compare runs of one \
             session, not of two days"
        }
        "cgroup" => {
            "the cgroup this process runs in: a cpu.max / cfs_quota limit throttles every \
             multi-threaded probe and scenario once the quota is used; cpuset limits the \
             CPUs the cross placements can use"
        }
        "tracefs" => {
            "the kernel recorder of `timeline --kernel` and `timeline --probe` \
             (sched_switch/sched_wakeup) needs tracefs and root: the command mounts tracefs \
             itself when it is not mounted (and unmounts it after); without root timelines are \
             sampled by the threads themselves only"
        }
        "perf" => {
            "perf_event_paranoid decides which perf events an unprivileged process may open: \
             crosscheck's `perf bench` references and hardware counters need it at 2 or \
             below (kernel events at 1 or below, -1 for everything)"
        }
        "cap_sys_nice" => {
            "whether schedlab may raise priorities: the fifo, yield-priority, rt-throttle \
             scenarios (SCHED_FIFO), nice scenarios below 0 and SCHED_DEADLINE; without it \
             they are skipped, not measured"
        }
        "clocksource" => {
            "what a clock read costs and how fine it is: tsc (and mostly kvm-clock) is read in user space \
             through the vDSO, hpet/acpi_pm need a system call and a slow device read (around a \
             microsecond) and inflate every short timing; the calibration line of each run measures it"
        }
        _ => "",
    }
}

/// The directory that stands for `/`: `/` itself, or a test's tree.
#[derive(Debug, Clone)]
pub struct Root(PathBuf);

impl Root {
    /// The real file system.
    pub fn system() -> Root {
        Root(PathBuf::from("/"))
    }

    /// A tree under `dir` standing in for `/`.
    pub fn at(dir: &Path) -> Root {
        Root(dir.to_path_buf())
    }

    fn path(&self, p: &str) -> PathBuf {
        self.0.join(p.trim_start_matches('/'))
    }

    /// The trimmed contents of `p`, or why not (`p: absent`, `p: permission denied`).
    pub fn read(&self, p: &str) -> Result<String, String> {
        std::fs::read_to_string(self.path(p)).map(|s| s.trim().to_string()).map_err(|e| why(p, &e))
    }

    fn exists(&self, p: &str) -> bool {
        self.path(p).exists()
    }

    fn list(&self, p: &str) -> Result<Vec<String>, String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(p))
            .map_err(|e| why(p, &e))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }
}

fn why(p: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("{p}: absent"),
        io::ErrorKind::PermissionDenied => format!("{p}: permission denied"),
        _ => format!("{p}: {e}"),
    }
}

/// What the system calls report, gathered once so the findings can be built from them
/// (and tests can supply their own).
#[derive(Debug, Clone)]
pub struct Probed {
    /// `uname -r`.
    pub release: String,
    /// `uname -v`.
    pub version: String,
    /// The calling thread's timer slack (`prctl(PR_GET_TIMERSLACK)`), or the error.
    pub timer_slack: Result<u64, String>,
    /// The CPUID hypervisor vendor signature (leaf 0x40000000), when the hypervisor bit
    /// is set; `Err` when CPUID does not exist here or the bit is clear.
    pub cpuid_vendor: Result<String, String>,
    /// Trying SCHED_FIFO, SCHED_DEADLINE and nice -5 on a scratch thread.
    pub tries: PolicyTries,
}

/// The outcome of trying each privileged setting on a scratch thread that then exits.
#[derive(Debug, Clone)]
pub struct PolicyTries {
    /// `sched_setscheduler(SCHED_FIFO, 1)`.
    pub fifo: Result<(), String>,
    /// `sched_setattr(SCHED_DEADLINE, 1 ms every 10 ms)`.
    pub deadline: Result<(), String>,
    /// `setpriority(-5)`.
    pub nice: Result<(), String>,
}

impl Probed {
    /// Asks this machine.
    pub fn system() -> Probed {
        let uts = crate::machine::uname_fields();
        Probed {
            release: uts.2,
            version: uts.3,
            timer_slack: timer_slack(),
            cpuid_vendor: cpuid_hypervisor(),
            tries: try_policies(),
        }
    }
}

fn timer_slack() -> Result<u64, String> {
    // SAFETY: PR_GET_TIMERSLACK takes no pointers and returns the value.
    let r = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    if r < 0 {
        Err(format!("prctl(PR_GET_TIMERSLACK): {}", io::Error::last_os_error()))
    } else {
        Ok(r as u64)
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor() -> Result<String, String> {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 1 is always valid.
    #[allow(unused_unsafe)]
    let leaf1 = unsafe { __cpuid(1) };
    if leaf1.ecx & (1 << 31) == 0 {
        return Err("CPUID leaf 1 ECX bit 31 (hypervisor) clear".into());
    }
    // SAFETY: with the hypervisor bit set, leaf 0x40000000 is the hypervisor's vendor leaf.
    #[allow(unused_unsafe)]
    let l = unsafe { __cpuid(0x4000_0000) };
    let mut sig = Vec::with_capacity(12);
    for r in [l.ebx, l.ecx, l.edx] {
        sig.extend_from_slice(&r.to_le_bytes());
    }
    Ok(String::from_utf8_lossy(&sig).trim_matches(char::from(0)).trim().to_string())
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor() -> Result<String, String> {
    Err("no CPUID on this architecture".into())
}

/// The hypervisor a CPUID vendor signature names.
pub fn hypervisor_name(sig: &str) -> Option<&'static str> {
    Some(match sig {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU (TCG)",
        "ACRNACRNACRN" => "ACRN",
        "bhyve bhyve" => "bhyve",
        "VBoxVBoxVBox" => "VirtualBox",
        "QNXQVMBSQG" => "QNX",
        "Linux KVM Hv" => "KVM (Hyper-V enlightenments)",
        _ => return None,
    })
}

/// Tries each privileged setting on its own scratch thread, which exits right after, so
/// nothing changes for the caller.
fn try_policies() -> PolicyTries {
    let on_thread = |f: fn() -> Result<(), String>| {
        std::thread::spawn(f).join().unwrap_or_else(|_| Err("the scratch thread panicked".into()))
    };
    PolicyTries {
        fifo: on_thread(|| {
            crate::sys::set_policy(libc::SCHED_FIFO, 1)
                .map_err(|e| format!("sched_setscheduler(SCHED_FIFO): {e}"))
        }),
        deadline: on_thread(|| {
            let ms = std::time::Duration::from_millis;
            crate::sys::set_deadline(ms(1), ms(10), ms(10))
                .map_err(|e| format!("sched_setattr(SCHED_DEADLINE): {e}"))
        }),
        nice: on_thread(|| crate::sys::set_nice(-5).map_err(|e| format!("setpriority(-5): {e}"))),
    }
}

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

/// One line of `/proc/self/mountinfo`: where, which file system type, its super options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Mount point.
    pub point: String,
    /// File system type (`cgroup2`, `tracefs`...).
    pub fstype: String,
    /// Per-superblock options (for cgroup v1, the controllers).
    pub options: String,
}

/// Parses `/proc/self/mountinfo` (fields: id parent dev root point opts [optional...] - type
/// source super-opts).
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?;
            let mut r = right.split_whitespace();
            let fstype = r.next()?;
            let _source = r.next();
            Some(Mount {
                point: unescape_octal(point),
                fstype: fstype.to_string(),
                options: r.next().unwrap_or("").to_string(),
            })
        })
        .collect()
}

fn unescape_octal(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
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

fn hz(root: &Root, cfg: Option<&BTreeMap<String, String>>, cfg_src: &str) -> Finding {
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

fn nohz(root: &Root, cfg: Option<&BTreeMap<String, String>>, cfg_src: &str) -> Finding {
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

fn preempt(
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

fn fair_server(root: &Root, release: &str) -> Finding {
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

fn cpuidle(root: &Root) -> Finding {
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

fn halt_poll(root: &Root) -> Finding {
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

fn hypervisor(root: &Root, p: &Probed) -> Finding {
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

fn cgroup(root: &Root) -> Finding {
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

fn tracefs(root: &Root) -> Finding {
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

fn perf(root: &Root) -> Finding {
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

fn cap_sys_nice(root: &Root, p: &Probed) -> Finding {
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

fn clocksource(root: &Root) -> Finding {
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

#[cfg(test)]
mod tests {
    use super::*;

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
