//! A CPU cap from the kernel's CFS bandwidth control, for one thread: `sched.background_budget`'s
//! `loader=cgroup` variant (seed 001's 10% loader, the way a Linux administrator would do it).
//!
//! Two hierarchies can hold the `cpu` controller, and a machine has it in one of them:
//!
//! - **cgroup v2** (`cpu.max`): a thread can sit in a cgroup of its own only inside a
//!   *threaded* subtree. The cap is a child of the process's cgroup, made `threaded`, with
//!   `+cpu` in the parent's `cgroup.subtree_control`, and the thread's id written to its
//!   `cgroup.threads`. Any step the kernel refuses (a parent that cannot become a threaded
//!   domain, a controller that cannot be enabled) turns the variant into a skip naming it.
//! - **cgroup v1** (`cpu.cfs_quota_us` / `cpu.cfs_period_us`, the same bandwidth control
//!   under its first name): the `cpu` hierarchy takes single thread ids in `tasks`.
//!
//! The cap is a new cgroup named `schedlab-PID-N` below the process's own, removed when
//! dropped; the thread is moved back to the process's cgroup first if it still lives. Both
//! need root (or a delegated hierarchy).

use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use schedlab_measure::ProbeError;

/// Which interface the cap uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Version {
    V1,
    V2,
}

/// A cgroup that limits its threads to `quota` of CPU per `period`; removed when dropped.
#[derive(Debug)]
pub(super) struct CpuCap {
    dir: PathBuf,
    parent: PathBuf,
    version: Version,
    threads: std::sync::Mutex<Vec<i32>>,
}

impl CpuCap {
    /// Makes the cgroup, or says why it cannot (`ProbeError::Skip` for a machine without a
    /// writable `cpu` controller, with the step that failed).
    pub(super) fn create(quota: Duration, period: Duration) -> Result<CpuCap, ProbeError> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| ProbeError::io("reading /proc/self/mountinfo", e))?;
        let cgroups = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| ProbeError::io("reading /proc/self/cgroup", e))?;
        let (parent, version) = find_cpu_controller(&mountinfo, &cgroups).ok_or_else(|| {
            ProbeError::Skip(
                "no cgroup hierarchy with the cpu controller is mounted (neither a v2 \
                 hierarchy listing cpu in cgroup.controllers nor a v1 cpu hierarchy)"
                    .into(),
            )
        })?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name =
            format!("schedlab-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = parent.join(name);
        let shown = dir.display().to_string();
        let step = |what: &str, e: io::Error| -> ProbeError {
            let text = format!("cgroup {shown} ({what}): {e}");
            match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => {
                    ProbeError::Skip(format!("{text}; needs root or a delegated cgroup"))
                }
                Some(libc::EOPNOTSUPP)
                | Some(libc::EBUSY)
                | Some(libc::EINVAL)
                | Some(libc::ENOENT) => {
                    ProbeError::Skip(format!("{text}; the kernel refused this setup"))
                }
                _ => ProbeError::Failed(text),
            }
        };
        fs::create_dir(&dir).map_err(|e| step("mkdir", e))?;
        // From here on a failure removes the directory (Drop).
        let cap = CpuCap { dir, parent, version, threads: Default::default() };
        let (q, p) = (quota.as_micros(), period.as_micros());
        match version {
            Version::V1 => {
                // The period first: a quota above the old period would be refused.
                fs::write(cap.dir.join("cpu.cfs_period_us"), p.to_string())
                    .map_err(|e| step("cpu.cfs_period_us", e))?;
                fs::write(cap.dir.join("cpu.cfs_quota_us"), q.to_string())
                    .map_err(|e| step("cpu.cfs_quota_us", e))?;
            }
            Version::V2 => {
                fs::write(cap.dir.join("cgroup.type"), "threaded")
                    .map_err(|e| step("cgroup.type threaded", e))?;
                fs::write(cap.parent.join("cgroup.subtree_control"), "+cpu")
                    .map_err(|e| step("+cpu in the parent's cgroup.subtree_control", e))?;
                fs::write(cap.dir.join("cpu.max"), format!("{q} {p}"))
                    .map_err(|e| step("cpu.max", e))?;
            }
        }
        Ok(cap)
    }

    /// Which interface it uses.
    pub(super) fn version(&self) -> Version {
        self.version
    }

    /// Moves the thread `tid` (of this process) into the cap.
    pub(super) fn add_thread(&self, tid: i32) -> io::Result<()> {
        fs::write(self.dir.join(self.threads_file()), tid.to_string())?;
        self.threads.lock().unwrap_or_else(|e| e.into_inner()).push(tid);
        Ok(())
    }

    /// How often the kernel held the cap's threads back, and for how long in all: `cpu.stat`'s
    /// `nr_throttled` and `throttled_time` (v1, ns) or `throttled_usec` (v2).
    pub(super) fn throttled(&self) -> Option<(u64, Duration)> {
        let text = fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
        let field = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
        };
        let n = field("nr_throttled ")?;
        let t = match self.version {
            Version::V1 => Duration::from_nanos(field("throttled_time ")?),
            Version::V2 => Duration::from_micros(field("throttled_usec ")?),
        };
        Some((n, t))
    }

    fn threads_file(&self) -> &'static str {
        match self.version {
            Version::V1 => "tasks",
            Version::V2 => "cgroup.threads",
        }
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        // A thread still alive goes back where it came from (a dead one has left already;
        // its id fails to write, harmlessly), so the directory is empty and can go.
        let file = self.parent.join(self.threads_file());
        for tid in self.threads.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = fs::write(&file, tid.to_string());
        }
        // An exiting thread leaves its cgroup a moment after `join` returns: retry briefly.
        for _ in 0..100 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(_) => return,
            }
        }
    }
}

/// Where the process's cgroup is in the hierarchy holding the `cpu` controller, and which
/// version that is. v2 is preferred where it has the controller.
fn find_cpu_controller(mountinfo: &str, cgroups: &str) -> Option<(PathBuf, Version)> {
    // /proc/self/cgroup: "hierarchy-id:controllers:path"; v2 is "0::path".
    let own = |want_v2: bool| {
        cgroups.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            let hit = if want_v2 {
                id == "0" && ctrls.is_empty()
            } else {
                ctrls.split(',').any(|c| c == "cpu")
            };
            hit.then(|| path.trim_start_matches('/').to_string())
        })
    };
    // mountinfo: "... mount-point ... - fstype source super-options".
    let mounts = mountinfo.lines().filter_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let point = left.split(' ').nth(4)?;
        let mut r = right.split(' ');
        let fstype = r.next()?;
        let opts = r.nth(1).unwrap_or("");
        Some((PathBuf::from(unescape(point)), fstype.to_string(), opts.to_string()))
    });
    let mut v1 = None;
    for (point, fstype, opts) in mounts {
        if fstype == "cgroup2" {
            let ctrls = fs::read_to_string(point.join("cgroup.controllers")).unwrap_or_default();
            if ctrls.split_whitespace().any(|c| c == "cpu") {
                if let Some(path) = own(true) {
                    return Some((point.join(path), Version::V2));
                }
            }
        } else if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") && v1.is_none() {
            if let Some(path) = own(false) {
                v1 = Some((point.join(path), Version::V1));
            }
        }
    }
    v1
}

/// mountinfo escapes spaces and a few other bytes as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v1_cpu_hierarchy_is_found_with_the_process_path() {
        let mountinfo = "30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                         31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
        let cgroups = "4:memory:/x\n1:cpu:/a/b\n0::/\n";
        let (dir, v) = find_cpu_controller(mountinfo, cgroups).unwrap();
        assert_eq!(v, Version::V1);
        assert_eq!(dir, PathBuf::from("/sys/fs/cgroup/cpu/a/b"));
    }

    #[test]
    fn no_cpu_controller_is_none() {
        let mountinfo = "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert!(find_cpu_controller(mountinfo, "4:memory:/\n").is_none());
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/plain"), "/plain");
    }

    /// Root with a writable cpu controller: a thread in a 10% cap, spinning, is throttled.
    #[test]
    fn a_spinning_thread_in_the_cap_is_throttled() {
        let cap = match CpuCap::create(Duration::from_millis(2), Duration::from_millis(20)) {
            Ok(c) => c,
            Err(ProbeError::Skip(why)) => {
                eprintln!("skipped: {why}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let cap = std::sync::Arc::new(cap);
        let c = cap.clone();
        let spinner = std::thread::spawn(move || {
            c.add_thread(schedlab_measure::sys::gettid()).unwrap();
            let start = schedlab_measure::sys::now_ns();
            let cpu0 = schedlab_measure::sys::thread_cpu_ns();
            // 30 ms of CPU: 15 periods' quota, whatever else the machine runs meanwhile.
            while schedlab_measure::sys::thread_cpu_ns() - cpu0 < 30_000_000 {
                std::hint::spin_loop();
            }
            (schedlab_measure::sys::thread_cpu_ns() - cpu0, schedlab_measure::sys::now_ns() - start)
        });
        let (cpu, wall) = spinner.join().unwrap();
        let (n, _) = cap.throttled().expect("cpu.stat has throttling counts");
        // 2 ms a period: 30 ms of CPU cannot be had without running out of quota in at
        // least 14 periods. The kernel's accounting, not a timing claim.
        assert!(n >= 10, "30 ms of spinning under a 2 ms/20 ms cap: throttled {n} times");
        // And it took at least those periods: more than 4x its CPU time in wall time.
        assert!(cpu * 4 < wall, "capped thread used {cpu} ns of CPU in {wall} ns");
        let dir = cap.dir.clone();
        drop(cap);
        assert!(!dir.exists(), "the cgroup is removed");
    }
}
