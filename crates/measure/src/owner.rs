//! Which process made something that outlives a command, and whether it still exists.
//!
//! A run left `running` in the database, a tracing instance in tracefs, a tracefs mount: each
//! is undone or marked by its owner when it ends normally, and by a later command when the
//! owner was killed (SIGKILL, a crash, power loss). A pid alone cannot tell: pids are reused,
//! and after a reboot any pid may be alive again. So an [`Owner`] is the pid, the process's
//! start time (`/proc/PID/stat` field 22, clock ticks since boot: a reused pid starts later)
//! and the boot id (`/proc/sys/kernel/random/boot_id`: a new one at every boot). The owner is
//! alive only when all three match a process that exists now.
//!
//! What a command must leave for a later one (a tracefs mount to undo, why a run ended when
//! the database itself could not be written) goes into [`state_dir`]: a directory in memory
//! (`$XDG_RUNTIME_DIR/schedlab`, or `/run/schedlab` for root), so a full disk does not stop
//! the note and a reboot, which ends every owner, clears it.

use std::fs;
use std::path::PathBuf;

/// A process, identified so that a reused pid or a reboot is not mistaken for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Its process id.
    pub pid: u32,
    /// When it started: clock ticks since boot (`/proc/PID/stat` field 22); 0 when unknown.
    pub start: u64,
    /// The boot it ran in (`/proc/sys/kernel/random/boot_id`); empty when unknown.
    pub boot_id: String,
}

/// The id of the current boot, or empty when the kernel does not say.
pub fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The start time of process `pid` in clock ticks since boot, or `None` when there is no such
/// process.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start(&stat)
}

/// Field 22 (`starttime`) of a `/proc/PID/stat` line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_start(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ")": field 3 (state) is the first; starttime is field 22, the 20th from there.
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl Owner {
    /// This process.
    pub fn current() -> Owner {
        let pid = std::process::id();
        Owner { pid, start: start_ticks(pid).unwrap_or(0), boot_id: boot_id() }
    }

    /// Whether this owner is a process that exists now: same boot, the pid exists, and it
    /// started when the owner did. Unknown parts (a start of 0, an empty boot id: rows written
    /// before they were recorded) are not compared.
    pub fn is_alive(&self) -> bool {
        if self.pid == 0 {
            return false;
        }
        if !self.boot_id.is_empty() {
            let now = boot_id();
            if !now.is_empty() && now != self.boot_id {
                return false;
            }
        }
        match start_ticks(self.pid) {
            None => false,
            Some(start) => self.start == 0 || start == self.start,
        }
    }

    /// One line naming the owner: `PID START BOOT_ID`, as [`Owner::parse`] reads it.
    pub fn to_line(&self) -> String {
        format!("{} {} {}", self.pid, self.start, self.boot_id)
    }

    /// Reads [`Owner::to_line`]'s form.
    pub fn parse(line: &str) -> Option<Owner> {
        let mut f = line.split_whitespace();
        let pid = f.next()?.parse().ok()?;
        let start = f.next()?.parse().ok()?;
        Some(Owner { pid, start, boot_id: f.next().unwrap_or("").to_string() })
    }
}

/// The directory for notes one command leaves for a later one (created when needed, mode
/// 0700): `$XDG_RUNTIME_DIR/schedlab` when that is set, `/run/schedlab` for root, else
/// `schedlab-UID` in the temporary directory.
pub fn state_dir() -> PathBuf {
    // SAFETY: geteuid cannot fail and touches no memory.
    let uid = unsafe { libc::geteuid() };
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("schedlab"),
        None if uid == 0 && std::path::Path::new("/run").is_dir() => PathBuf::from("/run/schedlab"),
        None => std::env::temp_dir().join(format!("schedlab-{uid}")),
    };
    use std::os::unix::fs::DirBuilderExt;
    let _ = fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir);
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_is_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 50";
        assert_eq!(parse_start(stat), Some(987654));
    }

    #[test]
    fn this_process_is_alive_and_a_reused_pid_or_another_boot_is_not() {
        let me = Owner::current();
        assert!(me.start > 0, "/proc/self/stat gave no start time");
        assert!(me.is_alive());
        assert!(!Owner { start: me.start + 1, ..me.clone() }.is_alive(), "a reused pid");
        if !me.boot_id.is_empty() {
            assert!(!Owner { boot_id: "another-boot".into(), ..me.clone() }.is_alive());
        }
        assert_eq!(Owner::parse(&me.to_line()), Some(me));
    }

    #[test]
    fn a_pid_that_does_not_exist_is_dead() {
        // Above the largest pid_max Linux allows (4194304).
        assert!(!Owner { pid: 4_194_305, start: 0, boot_id: String::new() }.is_alive());
    }
}
