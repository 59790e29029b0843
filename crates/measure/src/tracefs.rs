//! What schedlab leaves in tracefs, and what of it a killed process left behind.
//!
//! The kernel recorder (schedlab-trace's `kernel`) changes two things, both undone when it
//! ends normally: it makes a tracing instance `instances/schedlab-PID-START` (named by its
//! [`Owner`], so a reused pid is not taken for it), and it mounts tracefs when none is
//! mounted, recording that mount in [`MOUNT_NOTE`] in the state directory. A process killed
//! with SIGKILL undoes neither: its instance keeps recording system-wide into a buffer of
//! several MiB per CPU, and the mount stays. This module finds both ([`stale`]): `doctor`
//! reports them, and every command that uses tracefs removes them first (the recorder).
//!
//! An instance of a live process, or of a process of another boot (impossible: tracefs lives
//! in memory), is never touched.

use std::fs;
use std::path::{Path, PathBuf};

use crate::owner::{self, Owner};

/// Where tracefs is usually mounted, preferred first.
pub const MOUNTS: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The file in [`owner::state_dir`] naming the process that mounted tracefs and where.
pub const MOUNT_NOTE: &str = "tracefs-mount";

/// The prefix of our instances' names.
const PREFIX: &str = "schedlab-";

/// The name of `o`'s tracing instance.
pub fn instance_name(o: &Owner) -> String {
    format!("{PREFIX}{}-{}", o.pid, o.start)
}

/// The owner an instance name gives: `schedlab-PID-START`, or `schedlab-PID` (older
/// schedlab: compared by pid alone). `None` for names that are not ours.
pub fn instance_owner(name: &str) -> Option<Owner> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, start) = match rest.split_once('-') {
        Some((pid, start)) => (pid.parse().ok()?, start.parse().ok()?),
        None => (rest.parse().ok()?, 0),
    };
    // Tracefs does not outlive a boot: the instance is of this one.
    Some(Owner { pid, start, boot_id: String::new() })
}

/// What killed schedlab processes left in tracefs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stale {
    /// Tracing instances whose process is gone (full paths).
    pub instances: Vec<PathBuf>,
    /// A tracefs mount made by a process that is gone, and still mounted.
    pub mount: Option<PathBuf>,
    /// Whether a live schedlab has an instance there (its mount must then stay).
    pub in_use: bool,
}

impl Stale {
    /// Whether there is nothing to undo.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty() && self.mount.is_none()
    }

    /// One line for people: what is left and by whom.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.instances.is_empty() {
            let names: Vec<String> = self
                .instances
                .iter()
                .map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned())
                .collect();
            parts.push(format!(
                "tracing instance{} {} left recording by a schedlab that was killed",
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            ));
        }
        if let Some(m) = &self.mount {
            parts.push(format!("tracefs at {} mounted by a schedlab that was killed", m.display()));
        }
        parts.join("; ")
    }
}

/// The tracefs mount points in `mountinfo` (the text of /proc/self/mountinfo).
pub fn mounted(mountinfo: &str) -> Vec<PathBuf> {
    crate::mounts::parse_mountinfo(mountinfo)
        .into_iter()
        .filter(|m| m.fstype == "tracefs")
        .map(|m| PathBuf::from(m.point))
        .collect()
}

/// The instances under `root` (a tracefs mount) that are ours and whose process is gone, and
/// whether a live one is there.
pub fn stale_instances(root: &Path) -> (Vec<PathBuf>, bool) {
    let Ok(dir) = fs::read_dir(root.join("instances")) else { return (Vec::new(), false) };
    let (mut dead, mut live) = (Vec::new(), false);
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(o) = instance_owner(&name) else { continue };
        if o.is_alive() {
            live = true;
        } else {
            dead.push(e.path());
        }
    }
    dead.sort();
    (dead, live)
}

/// The process that mounted tracefs, and where, from [`MOUNT_NOTE`].
pub fn mount_note() -> Option<(Owner, PathBuf)> {
    let text = fs::read_to_string(owner::state_dir().join(MOUNT_NOTE)).ok()?;
    let mut lines = text.lines();
    let o = Owner::parse(lines.next()?)?;
    Some((o, PathBuf::from(lines.next()?)))
}

/// Records that this process mounted tracefs at `point`.
///
/// # Errors
/// When the note cannot be written (the mount is then undone only by this process).
pub fn note_mount(point: &Path) -> std::io::Result<()> {
    let text = format!("{}\n{}\n", Owner::current().to_line(), point.display());
    fs::write(owner::state_dir().join(MOUNT_NOTE), text)
}

/// Forgets the mount note (the mount was undone).
pub fn forget_mount() {
    let _ = fs::remove_file(owner::state_dir().join(MOUNT_NOTE));
}

/// What killed schedlab processes left in tracefs now.
pub fn stale() -> Stale {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let points = mounted(&info);
    let mut s = Stale::default();
    for p in &points {
        let (dead, live) = stale_instances(p);
        // The same tracefs may be mounted twice: list each instance once.
        for d in dead {
            let name = d.file_name().map(|n| n.to_os_string());
            if !s.instances.iter().any(|x| x.file_name().map(|n| n.to_os_string()) == name) {
                s.instances.push(d);
            }
        }
        s.in_use |= live;
    }
    if let Some((o, point)) = mount_note() {
        if !o.is_alive() {
            if points.contains(&point) {
                s.mount = Some(point);
            } else {
                // Unmounted by someone else: the note is all that is left of it.
                forget_mount();
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_carry_their_owner_and_old_names_their_pid() {
        let me = Owner::current();
        let name = instance_name(&me);
        let o = instance_owner(&name).unwrap();
        assert_eq!((o.pid, o.start), (me.pid, me.start));
        assert!(o.is_alive());
        assert_eq!(instance_owner("schedlab-42").map(|o| (o.pid, o.start)), Some((42, 0)));
        assert_eq!(instance_owner("other-42"), None);
        assert_eq!(instance_owner("schedlab-x"), None);
    }

    #[test]
    fn stale_instances_are_those_of_gone_processes_only() {
        let dir = tempfile::tempdir().unwrap();
        let inst = dir.path().join("instances");
        let me = Owner::current();
        let reused = Owner { start: me.start + 1, ..me.clone() };
        for name in [
            instance_name(&me),
            instance_name(&reused),
            "schedlab-4194305".to_string(),
            "someone-elses".to_string(),
        ] {
            fs::create_dir_all(inst.join(name)).unwrap();
        }
        let (dead, live) = stale_instances(dir.path());
        let names: Vec<String> =
            dead.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        let mut want = vec![instance_name(&reused), "schedlab-4194305".to_string()];
        want.sort();
        assert_eq!(names, want);
        assert!(live);
    }
}
