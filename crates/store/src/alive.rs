//! Whose is a run, and is its process still alive: a machine's fingerprint id, a run left
//! `running` read as interrupted once its process (pid, start time, boot id) is gone, with
//! the reason the process left in a note when the database could not be told.

use std::fs;
use std::path::PathBuf;

use schedlab_measure::machine::Machine;
use schedlab_measure::model::RunStatus;
use schedlab_measure::owner::Owner;

use crate::db::V;
use crate::ENDED_UNFINISHED;

/// A machine's fingerprint id: a UUID (version 5) of its host name, architecture, CPU model
/// and logical CPU count, so the same machine gets the same id in every run and every
/// database, and two machines that share a host name (two cloud instances called `ubuntu`)
/// but not their hardware do not.
pub fn machine_id(m: &Machine) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x5343_484c_6d61_6368_696e_6520_6964_0001);
    let key = format!("{}\n{}\n{}\n{}", m.host, m.arch, m.cpu_model, m.logical_cpus);
    uuid::Uuid::new_v5(&NAMESPACE, key.as_bytes()).to_string()
}

/// Leaves, for whichever later command settles this process's run, the reason it ended when
/// the database could not be told (the disk full, the lock held, the server gone): a note in
/// the state directory (`schedlab_measure::owner::state_dir`, in memory), keyed by this
/// process. The note is removed once the run is marked.
///
/// # Errors
/// When the note cannot be written.
pub fn note_end_reason(reason: &str) -> std::io::Result<()> {
    let me = Owner::current();
    fs::write(note_path(&me), format!("{}\n{reason}", me.to_line()))
}

pub(crate) fn note_path(o: &Owner) -> PathBuf {
    schedlab_measure::owner::state_dir().join(format!("run-end-{}-{}", o.pid, o.start))
}

/// The reason a run left `running` stopped, with the note it came from, when its process
/// (`pid, pid_start, boot_id, machine_id` of its row) was of this machine and is gone; `None`
/// while it may still run (or ran elsewhere: only its own machine can tell).
pub(crate) fn abandoned(cols: &[V]) -> Option<(String, Option<PathBuf>)> {
    if cols[3].ot().as_deref() != Some(machine_id(&this_machine()).as_str()) {
        return None;
    }
    let pid = u32::try_from(cols[0].i()).ok()?;
    let owner = Owner {
        pid,
        start: cols[1].oi().unwrap_or(0) as u64,
        boot_id: cols[2].ot().unwrap_or_default(),
    };
    if owner.is_alive() {
        return None;
    }
    let path = note_path(&owner);
    let noted = fs::read_to_string(&path).ok().and_then(|text| {
        let (who, reason) = text.split_once('\n')?;
        (Owner::parse(who)? == owner && !reason.trim().is_empty())
            .then(|| reason.trim().to_string())
    });
    Some(match noted {
        Some(reason) => (reason, Some(path)),
        None => (ENDED_UNFINISHED.to_string(), None),
    })
}

/// A run's status and reason as they stand: a `running` run whose process is gone reads as
/// interrupted, with the reason it left or [`ENDED_UNFINISHED`] (`owner`: as [`abandoned`]).
pub(crate) fn settled(
    status: String,
    reason: Option<String>,
    owner: &[V],
) -> (RunStatus, Option<String>) {
    let status = run_status(status);
    if status == RunStatus::Running {
        if let Some((why, _)) = abandoned(owner) {
            return (RunStatus::Interrupted, Some(why));
        }
    }
    (status, reason)
}

/// This machine's fingerprint, taken once per process (it reads /proc and /sys).
pub(crate) fn this_machine() -> Machine {
    static MACHINE: std::sync::OnceLock<Machine> = std::sync::OnceLock::new();
    MACHINE.get_or_init(Machine::fingerprint).clone()
}

/// A stored run status; anything unknown reads as interrupted (never as complete).
pub(crate) fn run_status(key: String) -> RunStatus {
    RunStatus::from_key(&key).unwrap_or(RunStatus::Interrupted)
}
