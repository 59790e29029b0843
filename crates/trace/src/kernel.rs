//! The kernel recorder: `sched_switch` and `sched_wakeup` from the kernel's tracefs, turned
//! into a timeline with the same lanes as the sampling recorder — the kernel's truth against
//! what the threads could see.
//!
//! # Leaving the machine as it was
//! All tracing happens in a tracing *instance* of our own (`instances/schedlab-PID-START`, see
//! Documentation/trace/ftrace.rst, "Instances"): its events, buffer, clock and on/off switch
//! are separate from the top-level buffer's, so no global tracing setting is ever written.
//! What we change, and how it is undone by [`KernelTrace`]'s `Drop` (which also runs on an
//! error; the CLI turns Ctrl-C into a flag so it runs then too):
//! 1. tracefs is mounted at /sys/kernel/tracing if no tracefs is mounted, and the mount
//!    noted in the state directory → unmounted again, the note removed;
//! 2. the instance directory is created → removed (which frees its buffer and events).
//!
//! A process killed with SIGKILL undoes neither; [`remove_stale`], which every start runs
//! first, does it for it (`schedlab_measure::tracefs` finds what is left, by owner).
//!
//! The recording is system-wide for the short window (a few thousand events per CPU per
//! second on an idle machine) and filtered by thread id when parsed; the instance's clock is
//! `mono`, the CLOCK_MONOTONIC the sampling recorder reads, so both timelines share an origin.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::model::{Lane, Mark, Span, Timeline};

use schedlab_measure::tracefs::{self, MOUNTS};

/// Per-CPU buffer for our instance, KiB.
const BUFFER_KB: u32 = 8192;

/// A running kernel recording; dropping it removes every trace of it.
#[derive(Debug)]
pub struct KernelTrace {
    root: PathBuf,
    instance: PathBuf,
    mounted_by_us: bool,
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("writing {value:?} to {}: {e}", path.display()))
}

/// The tracefs root if one is mounted and usable.
fn find_tracefs() -> Option<PathBuf> {
    MOUNTS.iter().map(PathBuf::from).find(|p| p.join("instances").is_dir())
}

impl KernelTrace {
    /// Starts recording `sched_switch` and `sched_wakeup` in a new tracing instance.
    ///
    /// # Errors
    /// A reason to skip: not root, no tracefs in this kernel, the mount or the instance refused.
    pub fn start() -> Result<KernelTrace, String> {
        // SAFETY: geteuid cannot fail and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            return Err("needs root (tracefs)".into());
        }
        // First what a killed schedlab left: its instances, and its mount (which this
        // recording then makes, and undoes, itself).
        remove_stale();
        let mut mounted_by_us = false;
        let root = match find_tracefs() {
            Some(r) => r,
            None => {
                let supported = fs::read_to_string("/proc/filesystems")
                    .map(|s| s.contains("tracefs"))
                    .unwrap_or(false);
                if !supported {
                    return Err("this kernel has no tracefs".into());
                }
                let target = PathBuf::from(MOUNTS[0]);
                if !target.is_dir() {
                    return Err(format!("{} does not exist to mount tracefs on", target.display()));
                }
                let c = |s: &str| std::ffi::CString::new(s).expect("no NUL in constant strings");
                let (src, dst, fstype) = (c("nodev"), c(MOUNTS[0]), c("tracefs"));
                // SAFETY: all three are valid NUL-terminated strings that outlive the call; no
                // data argument is passed.
                let rc = unsafe {
                    libc::mount(src.as_ptr(), dst.as_ptr(), fstype.as_ptr(), 0, std::ptr::null())
                };
                if rc != 0 {
                    return Err(format!(
                        "mounting tracefs on {}: {}",
                        MOUNTS[0],
                        std::io::Error::last_os_error()
                    ));
                }
                mounted_by_us = true;
                // Noted, so a later command undoes it if this process is killed.
                let _ = tracefs::note_mount(&target);
                target
            }
        };
        let name = tracefs::instance_name(&schedlab_measure::owner::Owner::current());
        let instance = root.join("instances").join(name);
        // From here on, Drop undoes whatever was done, also when a step below fails.
        let mut t = KernelTrace { root, instance: PathBuf::new(), mounted_by_us };
        fs::create_dir(&instance)
            .map_err(|e| format!("creating tracing instance {}: {e}", instance.display()))?;
        t.instance = instance;
        let i = &t.instance;
        write(&i.join("tracing_on"), "0")?;
        write(&i.join("trace_clock"), "mono")?;
        write(&i.join("buffer_size_kb"), &BUFFER_KB.to_string())?;
        write(&i.join("events/sched/sched_switch/enable"), "1")?;
        write(&i.join("events/sched/sched_wakeup/enable"), "1")?;
        write(&i.join("tracing_on"), "1")?;
        Ok(t)
    }

    /// The tracefs root in use.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The instance directory.
    pub fn instance(&self) -> &Path {
        &self.instance
    }

    /// Stops recording and returns the trace text.
    ///
    /// # Errors
    /// When the trace cannot be read.
    pub fn stop(&self) -> Result<String, String> {
        write(&self.instance.join("tracing_on"), "0")?;
        fs::read_to_string(self.instance.join("trace"))
            .map_err(|e| format!("reading {}: {e}", self.instance.join("trace").display()))
    }
}

/// Undoes what schedlab processes killed before their `Drop` ran left in tracefs (SIGKILL
/// during `timeline --kernel` left tracing on for good, and tracefs mounted): their
/// instances are stopped and removed, and a mount one of them made is unmounted unless a
/// live schedlab records in it. An instance of a live process is left alone. Returns what
/// was undone, for people (empty: nothing was left).
pub fn remove_stale() -> String {
    let stale = tracefs::stale();
    let mut done = Vec::new();
    for i in &stale.instances {
        let _ = fs::write(i.join("tracing_on"), "0");
        if fs::remove_dir(i).is_ok() {
            done.push(format!("removed the tracing instance {}", i.display()));
        }
    }
    if let Some(point) = stale.mount.as_ref().filter(|_| !stale.in_use) {
        if unmount(point) {
            tracefs::forget_mount();
            done.push(format!("unmounted tracefs at {}", point.display()));
        }
    }
    done.join("; ")
}

/// Detaches the tracefs mount at `point`; whether it worked.
fn unmount(point: &Path) -> bool {
    let Ok(dst) = std::ffi::CString::new(point.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `dst` is a valid NUL-terminated path; a tracefs mount is detached there.
    unsafe { libc::umount2(dst.as_ptr(), libc::MNT_DETACH) == 0 }
}

impl Drop for KernelTrace {
    fn drop(&mut self) {
        if !self.instance.as_os_str().is_empty() {
            let _ = fs::write(self.instance.join("tracing_on"), "0");
            // rmdir of an instance directory removes the instance (events, buffers) with it.
            let _ = fs::remove_dir(&self.instance);
        }
        if self.mounted_by_us && unmount(&self.root) {
            tracefs::forget_mount();
        }
    }
}

/// One parsed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A context switch on a CPU.
    Switch {
        /// CLOCK_MONOTONIC, ns (µs resolution in the text format).
        at_ns: u64,
        /// The task leaving the CPU.
        prev: i32,
        /// Its state (`R`/`R+`: preempted while runnable; `S`, `D`...: blocked).
        prev_state: String,
        /// The task taking it.
        next: i32,
    },
    /// A task woken.
    Wakeup {
        /// When, ns.
        at_ns: u64,
        /// Which task.
        pid: i32,
    },
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let i = line.find(key)? + key.len();
    let rest = &line[i..];
    Some(rest.split_whitespace().next().unwrap_or(""))
}

/// Parses one line of the `trace` text; `None` for comments and other events.
pub fn parse_line(line: &str) -> Option<Event> {
    let (head, body, switch) = if let Some(i) = line.find(": sched_switch: ") {
        (&line[..i], &line[i + 16..], true)
    } else if let Some(i) = line.find(": sched_wakeup: ") {
        (&line[..i], &line[i + 16..], false)
    } else {
        return None;
    };
    let ts = head.rsplit(' ').next()?;
    let (secs, frac) = ts.split_once('.')?;
    let frac_ns: u64 = format!("{frac:0<9}")[..9].parse().ok()?;
    let at_ns = secs.trim().parse::<u64>().ok()? * 1_000_000_000 + frac_ns;
    if switch {
        Some(Event::Switch {
            at_ns,
            prev: field(body, "prev_pid=")?.parse().ok()?,
            prev_state: field(body, "prev_state=")?.to_string(),
            next: field(body, "next_pid=")?.parse().ok()?,
        })
    } else {
        // " pid=" so that a comm ending in "pid" cannot match.
        Some(Event::Wakeup { at_ns, pid: field(body, " pid=")?.parse().ok()? })
    }
}

/// Builds the kernel's timeline for the lanes of `sampled` (matched by tid) from the trace
/// text: a run from each switch to a thread until the switch away from it; wakeups and
/// preemptions as marks.
pub fn timeline(sampled: &Timeline, origin_ns: u64, text: &str) -> Timeline {
    let index: HashMap<i32, usize> =
        sampled.lanes.iter().enumerate().map(|(i, l)| (l.tid, i)).collect();
    let mut lanes: Vec<Lane> = sampled
        .lanes
        .iter()
        .map(|l| {
            let mut k = Lane::new(&l.name, &l.detail);
            k.tid = l.tid;
            k.ready_ns = l.ready_ns;
            k.done_ns = l.done_ns;
            k.work_units = l.work_units;
            k
        })
        .collect();
    let window = sampled.window_ns;
    let rel = |at: u64| at.saturating_sub(origin_ns).min(window);
    let mut open: Vec<Option<u64>> = vec![None; lanes.len()];
    for ev in text.lines().filter_map(parse_line) {
        match ev {
            Event::Switch { at_ns, prev, prev_state, next } => {
                if at_ns < origin_ns {
                    // Before the window: only note who is on the CPU.
                    if let Some(&i) = index.get(&next) {
                        open[i] = Some(origin_ns);
                    }
                    if let Some(&i) = index.get(&prev) {
                        open[i] = None;
                    }
                    continue;
                }
                if let Some(&i) = index.get(&prev) {
                    if let Some(start) = open[i].take() {
                        lanes[i].runs.push(Span { start_ns: rel(start), end_ns: rel(at_ns) });
                    }
                    lanes[i].samples += 1;
                    if prev_state.starts_with('R') && at_ns - origin_ns < window {
                        lanes[i].marks.push(Mark { at_ns: rel(at_ns), name: "preempted".into() });
                    }
                }
                if let Some(&i) = index.get(&next) {
                    open[i] = Some(at_ns);
                    lanes[i].samples += 1;
                }
            }
            Event::Wakeup { at_ns, pid } => {
                if let Some(&i) = index.get(&pid) {
                    if at_ns >= origin_ns && at_ns - origin_ns < window {
                        lanes[i].marks.push(Mark { at_ns: rel(at_ns), name: "wakeup".into() });
                    }
                }
            }
        }
    }
    for (i, start) in open.into_iter().enumerate() {
        if let Some(s) = start {
            lanes[i].runs.push(Span { start_ns: rel(s), end_ns: window });
        }
    }
    for l in &mut lanes {
        l.runs.retain(|r| r.start_ns < window && r.len_ns() > 0);
    }
    Timeline {
        scenario: sampled.scenario.clone(),
        title: format!("{} (kernel: sched_switch)", sampled.title),
        recorder: "kernel".into(),
        window_ns: window,
        threshold_ns: 0,
        interval_ns: 0,
        lanes,
        marks: sampled.marks.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# tracer: nop
#
      tl-a-100   [001] d..2.   10.000100: sched_switch: prev_comm=tl-a prev_pid=100 prev_prio=120 prev_state=R ==> next_comm=tl-b next_pid=101 next_prio=120
      tl-b-101   [001] dNh3.   10.004000: sched_wakeup: comm=kworker/1:1 pid=55 prio=120 target_cpu=001
      tl-b-101   [001] d..2.   10.004100: sched_switch: prev_comm=tl-b prev_pid=101 prev_prio=120 prev_state=R+ ==> next_comm=tl-a next_pid=100 next_prio=120
      tl-a-100   [001] d..2.   10.008100: sched_switch: prev_comm=tl-a prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0 [001] dNh4.   10.009000: sched_wakeup: comm=tl-a pid=100 prio=120 target_cpu=001
";

    fn sampled() -> Timeline {
        let mut a = Lane::new("a", "");
        a.tid = 100;
        a.done_ns = 20_000_000;
        let mut b = Lane::new("b", "");
        b.tid = 101;
        b.done_ns = 20_000_000;
        Timeline {
            scenario: "3 two-equal".into(),
            title: "t".into(),
            recorder: "sampling".into(),
            window_ns: 20_000_000,
            threshold_ns: 1,
            interval_ns: 1,
            lanes: vec![a, b],
            marks: vec![],
        }
    }

    #[test]
    fn switch_and_wakeup_lines_parse() {
        let evs: Vec<Event> = TEXT.lines().filter_map(parse_line).collect();
        assert_eq!(evs.len(), 5);
        assert_eq!(
            evs[0],
            Event::Switch { at_ns: 10_000_100_000, prev: 100, prev_state: "R".into(), next: 101 }
        );
        assert_eq!(evs[1], Event::Wakeup { at_ns: 10_004_000_000, pid: 55 });
    }

    #[test]
    fn runs_go_from_switch_in_to_switch_out() {
        let t = timeline(&sampled(), 10_000_000_000, TEXT);
        let a: Vec<(u64, u64)> = t.lanes[0].runs.iter().map(|r| (r.start_ns, r.end_ns)).collect();
        let b: Vec<(u64, u64)> = t.lanes[1].runs.iter().map(|r| (r.start_ns, r.end_ns)).collect();
        assert_eq!(b, vec![(100_000, 4_100_000)]);
        assert_eq!(a, vec![(4_100_000, 8_100_000)]);
        assert!(t.lanes[0].marks.iter().any(|m| m.name == "wakeup" && m.at_ns == 9_000_000));
        assert!(t.lanes[1].marks.iter().any(|m| m.name == "preempted"));
        t.check().unwrap();
    }

    /// A tracing instance left by a killed schedlab (named after a pid that no longer runs)
    /// is found and removed by the next recording. Skipped (with the reason) without root
    /// and a tracefs with instances.
    /// The kernel tests mount and unmount tracefs: one at a time.
    static TRACEFS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn a_stale_instance_of_a_dead_schedlab_is_removed() {
        let _one = TRACEFS.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to create tracing instances");
            return;
        }
        // A recording of our own mounts tracefs if needed (and unmounts it after).
        let kt = match KernelTrace::start() {
            Ok(k) => k,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let root = kt.root().to_path_buf();
        // A pid that cannot be running: above the kernel's pid_max.
        let stale = root.join("instances").join("schedlab-4194305");
        if let Err(e) = fs::create_dir(&stale) {
            eprintln!("skipped: cannot create a tracing instance: {e}");
            return;
        }
        let _ = fs::write(stale.join("tracing_on"), "1");
        let removed = remove_stale();
        assert!(removed.contains("schedlab-4194305"), "{removed:?}");
        assert!(!stale.exists());
        assert!(kt.instance().exists(), "our own live instance was kept");
        drop(kt);
    }

    /// The test: the recorder leaves tracefs as it found it. Skipped (with the
    /// reason printed) where it cannot run: not root, no tracefs.
    #[test]
    fn the_kernel_recorder_restores_tracefs_state() {
        let _one = TRACEFS.lock().unwrap_or_else(|e| e.into_inner());
        let before_mount = find_tracefs();
        let top = |root: &Path| {
            ["tracing_on", "current_tracer", "set_event", "trace_clock", "buffer_size_kb"]
                .iter()
                .map(|f| fs::read_to_string(root.join(f)).unwrap_or_default())
                .collect::<Vec<_>>()
        };
        let before_top = before_mount.as_deref().map(top);
        let kt = match KernelTrace::start() {
            Ok(k) => k,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let root = kt.root().to_path_buf();
        let instance = kt.instance().to_path_buf();
        assert!(instance.is_dir());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let text = kt.stop().unwrap();
        assert!(text.contains("sched_switch"), "a busy kernel switches within 5 ms");
        drop(kt);
        assert!(!instance.exists(), "the instance is removed");
        assert_eq!(find_tracefs(), before_mount, "tracefs mounted as before");
        if let Some(before) = before_top {
            assert_eq!(top(&root), before, "top-level settings untouched");
        }
    }
}
