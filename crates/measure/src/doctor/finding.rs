//! The record of one finding (what it is, its value or why it could not be read, where it
//! was read, what it changes), as `doctor` reports it and every run stores it in its machine
//! fingerprint ([`crate::machine::Machine::doctor`]). Data only: reading the machine is
//! [`super::readings`]' job.

use serde::{Deserialize, Serialize};

use super::explain::changes;

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
    pub(super) fn new(
        key: &str,
        name: &str,
        reading: Reading,
        source: impl Into<String>,
    ) -> Finding {
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
