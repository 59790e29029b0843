//! Where the parties of a measurement actually ran, when nothing pinned them.
//!
//! On a small VM the answer of a two-party hand-off depends on whether the kernel put both
//! parties on one CPU (a switch, a few µs) or on two (an idle vCPU woken, tens of µs); an
//! unpinned result is bimodal for that reason, and without a record of the placement it
//! cannot be explained (../shared/design/MEASUREMENT.md, "Placement decides the answer").
//!
//! # What is recorded, and when
//! A workload names its *parties* ([`crate::Workload::parties`]): the thread that calls
//! `run` (the sampler's own thread, [`Who::Caller`]) and any helper thread or child process
//! ([`Who::Task`], by kernel thread id). Nothing runs inside the timed region (fork's children
//! aside, below):
//! 1. before the first sample, each party's affinity mask (a mask of one CPU is a pin) and
//!    its migration count (`se.nr_migrations` of `/proc/<tid>/sched`);
//! 2. after each sample, the CPU each party is on or last ran on: `sched_getcpu` (a vDSO
//!    read) for the caller, the `processor` field of `/proc/<tid>/stat` for the others,
//!    which needs no help from the party (a child blocked in `read` has no sample
//!    boundaries of its own);
//! 3. after the last sample, the migration counts again. Without `/proc/<tid>/sched` the
//!    count is the CPU changes seen between samples, a lower bound (shown `mig ≥N`).
//!
//! Processes that live inside one iteration (fork's children, [`Who::Fresh`]) cannot be
//! read from outside: each writes the CPU it runs on into a shared page as it starts
//! ([`sys::CpuSlot`], a load and a store in the child), and a sample's observation is its
//! last child's; they have no migration count (`mig -`).
//!
//! An observation is one instant per sample (for a party asleep at the sample's end, the CPU
//! it last ran on): a party that moves and comes back within a sample shows up only in its
//! migration count, and with `mig 0` the instants are where it ran throughout.
//!
//! # The note
//! [`Placement::note`] renders the summary as the `placement` note, parseable by
//! [`Placement::parse`] (so rounds are merged and warnings drawn from stored results):
//!
//! ```text
//! parent:cpu0×8,cpu1×3 mig 4; child:cpu1×11 mig 0; same_cpu 3/11 xxSxxSxxxSx
//! ```
//!
//! per party its name, the CPUs seen with how many samples each, its migrations during the
//! sampling window and ` pinned` when its mask was one CPU; for exactly two parties,
//! `same_cpu S/N` (samples in which both were seen on one CPU, of those in which both were
//! seen) and one letter per sample in sample order: `S` same CPU, `x` different CPUs, `-`
//! unknown. A result whose every party was pinned, and stayed, has no note: its placement
//! is its parameter.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::sys;

/// Who a party is, for the recorder.
#[derive(Debug, Clone)]
pub enum Who {
    /// The thread that calls the workload's `run` (the sampler's thread).
    Caller,
    /// Another thread of this process or a child process, by kernel thread id.
    Task(libc::pid_t),
    /// Processes that live inside one iteration (fork's children): each writes its CPU into
    /// `slot` ([`sys::CpuSlot::record`]), and a sample's observation is its last child's.
    /// Their affinity and migrations are not read (each is gone by the sample's end).
    Fresh(std::sync::Arc<sys::CpuSlot>),
}

impl PartialEq for Who {
    fn eq(&self, other: &Who) -> bool {
        match (self, other) {
            (Who::Caller, Who::Caller) => true,
            (Who::Task(a), Who::Task(b)) => a == b,
            (Who::Fresh(a), Who::Fresh(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Who {}

/// One party of a measurement: a name for the note and who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Party {
    /// Short name shown in the note (`parent`, `child`, `frame`, `loader`, `worker1`...).
    pub name: String,
    /// Which thread or process.
    pub who: Who,
}

impl Party {
    /// The calling thread, named `name`.
    pub fn caller(name: &str) -> Party {
        Party { name: name.into(), who: Who::Caller }
    }

    /// Thread or process `tid`, named `name`.
    pub fn task(name: &str, tid: libc::pid_t) -> Party {
        Party { name: name.into(), who: Who::Task(tid) }
    }

    /// The processes created inside each iteration that record their CPU in `slot`.
    pub fn fresh(name: &str, slot: std::sync::Arc<sys::CpuSlot>) -> Party {
        Party { name: name.into(), who: Who::Fresh(slot) }
    }
}

/// Where one party was seen over a measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartyPlacement {
    /// The party's name.
    pub name: String,
    /// Each CPU it was seen on, ascending, with the number of samples it was seen there.
    pub cpus: Vec<(usize, u32)>,
    /// Migrations during the sampling window; `None` for processes that live inside one
    /// iteration ([`Who::Fresh`]: each is a new process, shown `mig -`).
    pub migrations: Option<u64>,
    /// `migrations` counts only the CPU changes seen between samples (no
    /// `/proc/<tid>/sched`): a lower bound.
    pub at_least: bool,
    /// Its affinity mask was one CPU.
    pub pinned: bool,
}

impl PartyPlacement {
    /// Samples in which this party was seen.
    pub fn seen(&self) -> u32 {
        self.cpus.iter().map(|c| c.1).sum()
    }
}

/// A party's migrations as the recorder knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrations {
    /// Counted by the kernel (`se.nr_migrations`) over the sampling window.
    Counted(u64),
    /// Not available: the CPU changes seen between samples are counted, a lower bound.
    Unknown,
    /// Not meaningful: a new process each iteration.
    Fresh,
}

/// Whether the two parties of a two-party measurement shared a CPU, per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shared {
    /// Both seen on one CPU.
    Same,
    /// Seen on two different CPUs.
    Cross,
    /// One of them not seen (its thread gone, `/proc` unreadable).
    Unknown,
}

impl Shared {
    fn letter(self) -> char {
        match self {
            Shared::Same => 'S',
            Shared::Cross => 'x',
            Shared::Unknown => '-',
        }
    }

    fn from_letter(c: char) -> Option<Shared> {
        Some(match c {
            'S' => Shared::Same,
            'x' => Shared::Cross,
            '-' => Shared::Unknown,
            _ => return None,
        })
    }
}

/// The placement summary of one result. Pure data: built by [`Recorder`], rendered to and
/// parsed from the `placement` note.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// Every party, in the workload's order.
    pub parties: Vec<PartyPlacement>,
    /// For exactly two parties: per sample, whether they shared a CPU. Empty otherwise.
    pub shared: Vec<Shared>,
}

impl Placement {
    /// Builds the summary from per-sample observations: `seen[s][p]` is the CPU party `p`
    /// was seen on after sample `s` (`None`: not seen); `migrations[p]` the party's
    /// migrations ([`Migrations::Unknown`]: the CPU changes seen are counted instead, as a
    /// lower bound); `pinned[p]` whether its mask was one CPU.
    pub fn from_observations(
        names: &[String],
        seen: &[Vec<Option<usize>>],
        migrations: &[Migrations],
        pinned: &[bool],
    ) -> Placement {
        let parties = names
            .iter()
            .enumerate()
            .map(|(p, name)| {
                let mut cpus: BTreeMap<usize, u32> = BTreeMap::new();
                let mut changes = 0u64;
                let mut last = None;
                for cpu in seen.iter().filter_map(|s| s.get(p).copied().flatten()) {
                    *cpus.entry(cpu).or_default() += 1;
                    if last.is_some_and(|l| l != cpu) {
                        changes += 1;
                    }
                    last = Some(cpu);
                }
                let kind = migrations.get(p).copied().unwrap_or(Migrations::Unknown);
                PartyPlacement {
                    name: name.clone(),
                    cpus: cpus.into_iter().collect(),
                    migrations: match kind {
                        Migrations::Counted(n) => Some(n),
                        Migrations::Unknown => Some(changes),
                        Migrations::Fresh => None,
                    },
                    at_least: kind == Migrations::Unknown,
                    pinned: pinned.get(p).copied().unwrap_or(false),
                }
            })
            .collect();
        let shared = if names.len() == 2 {
            seen.iter()
                .map(|s| match (s.first().copied().flatten(), s.get(1).copied().flatten()) {
                    (Some(a), Some(b)) if a == b => Shared::Same,
                    (Some(_), Some(_)) => Shared::Cross,
                    _ => Shared::Unknown,
                })
                .collect()
        } else {
            Vec::new()
        };
        Placement { parties, shared }
    }

    /// True when every party was pinned and seen only on one CPU: the parameter says where
    /// it ran, and no note is needed.
    pub fn pinned_and_held(&self) -> bool {
        !self.parties.is_empty() && self.parties.iter().all(|p| p.pinned && p.cpus.len() <= 1)
    }

    /// `(same, known)`: samples in which the two parties shared a CPU, of those in which both
    /// were seen. `None` unless there are exactly two parties.
    pub fn same_cpu(&self) -> Option<(usize, usize)> {
        if self.parties.len() != 2 {
            return None;
        }
        let same = self.shared.iter().filter(|s| **s == Shared::Same).count();
        let known = self.shared.iter().filter(|s| **s != Shared::Unknown).count();
        Some((same, known))
    }

    /// The `placement` note; `None` when every party was pinned and held
    /// ([`Placement::pinned_and_held`]) or there are no parties.
    pub fn note(&self) -> Option<String> {
        if self.parties.is_empty() || self.pinned_and_held() {
            return None;
        }
        let mut out = String::new();
        for (i, p) in self.parties.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            let cpus: Vec<String> = p.cpus.iter().map(|(c, n)| format!("cpu{c}×{n}")).collect();
            let cpus = if cpus.is_empty() { "none".to_string() } else { cpus.join(",") };
            let mig = match p.migrations {
                Some(n) if p.at_least => format!("≥{n}"),
                Some(n) => n.to_string(),
                None => "-".into(),
            };
            let pinned = if p.pinned { " pinned" } else { "" };
            let _ = write!(out, "{}:{cpus} mig {mig}{pinned}", p.name);
        }
        if let Some((same, known)) = self.same_cpu() {
            let letters: String = self.shared.iter().map(|s| s.letter()).collect();
            let _ = write!(out, "; same_cpu {same}/{known} {letters}");
        }
        Some(out)
    }

    /// Parses [`Placement::note`]; `None` for text that is not such a note.
    pub fn parse(note: &str) -> Option<Placement> {
        let mut parties = Vec::new();
        let mut shared = Vec::new();
        for part in note.split("; ") {
            if let Some(rest) = part.strip_prefix("same_cpu ") {
                let (_, letters) = rest.split_once(' ').unwrap_or((rest, ""));
                shared = letters.chars().map(Shared::from_letter).collect::<Option<_>>()?;
                continue;
            }
            let (name, rest) = part.split_once(':')?;
            let (cpus, rest) = rest.split_once(" mig ")?;
            let (mig, pinned) = match rest.strip_suffix(" pinned") {
                Some(m) => (m, true),
                None => (rest, false),
            };
            let (mig, at_least) = match mig.strip_prefix('≥') {
                Some(m) => (m, true),
                None => (mig, false),
            };
            let cpus = if cpus == "none" {
                Vec::new()
            } else {
                cpus.split(',')
                    .map(|c| {
                        let (cpu, n) = c.strip_prefix("cpu")?.split_once('×')?;
                        Some((cpu.parse().ok()?, n.parse().ok()?))
                    })
                    .collect::<Option<Vec<_>>>()?
            };
            parties.push(PartyPlacement {
                name: name.to_string(),
                cpus,
                migrations: if mig == "-" { None } else { Some(mig.parse().ok()?) },
                at_least,
                pinned,
            });
        }
        if parties.is_empty() {
            return None;
        }
        Some(Placement { parties, shared })
    }

    /// Adds `other` (a later round of the same result, `samples` samples long, `None` when it
    /// had no note) to this one: counts and migrations summed party by party (matched by
    /// name), the per-sample letters concatenated in sample order, unknown for a round
    /// without a note.
    pub fn merge(&mut self, other: Option<&Placement>, samples: usize) {
        let two = self.parties.len() == 2;
        match other {
            Some(o) => {
                for op in &o.parties {
                    match self.parties.iter_mut().find(|p| p.name == op.name) {
                        Some(p) => {
                            let mut cpus: BTreeMap<usize, u32> = p.cpus.iter().copied().collect();
                            for &(c, n) in &op.cpus {
                                *cpus.entry(c).or_default() += n;
                            }
                            p.cpus = cpus.into_iter().collect();
                            p.migrations = p.migrations.zip(op.migrations).map(|(a, b)| a + b);
                            p.at_least |= op.at_least;
                            p.pinned &= op.pinned;
                        }
                        None => self.parties.push(op.clone()),
                    }
                }
                if two {
                    let mut letters = o.shared.clone();
                    letters.resize(samples, Shared::Unknown);
                    self.shared.extend(letters);
                }
            }
            None if two => self.shared.extend(std::iter::repeat_n(Shared::Unknown, samples)),
            None => {}
        }
    }

    /// Merges the placements of a result's rounds: `rounds[i]` is round `i`'s note (if any)
    /// and its number of samples. `None` when no round had a note.
    pub fn merge_rounds(rounds: &[(Option<&str>, usize)]) -> Option<Placement> {
        let parsed: Vec<(Option<Placement>, usize)> =
            rounds.iter().map(|(n, len)| (n.and_then(Placement::parse), *len)).collect();
        let first = parsed.iter().position(|(p, _)| p.is_some())?;
        let mut out = Placement {
            parties: parsed[first].0.as_ref()?.parties.iter().map(empty_like).collect(),
            shared: Vec::new(),
        };
        for (p, len) in &parsed {
            out.merge(p.as_ref(), *len);
        }
        Some(out)
    }
}

/// A two-party result's samples split by placement: the median value and the number of
/// samples taken with both parties on one CPU, and with them on two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// Median and count of the samples whose parties shared a CPU.
    pub same: (f64, usize),
    /// Median and count of the samples whose parties were on different CPUs.
    pub cross: (f64, usize),
}

impl Placement {
    /// The samples of a two-party result split by whether the parties shared a CPU, when
    /// both kinds occurred (the usual cause of a bimodal cross-CPU row). `values` are the
    /// samples' values in sample order, as the letters are; `None` when the lengths differ.
    pub fn split(&self, values: &[f64]) -> Option<Split> {
        if self.parties.len() != 2 || self.shared.len() != values.len() {
            return None;
        }
        let pick = |kind: Shared| -> Vec<f64> {
            self.shared.iter().zip(values).filter(|(s, _)| **s == kind).map(|(_, v)| *v).collect()
        };
        let (same, cross) = (pick(Shared::Same), pick(Shared::Cross));
        Some(Split {
            same: (crate::stats::median(&same)?, same.len()),
            cross: (crate::stats::median(&cross)?, cross.len()),
        })
    }

    /// Whether the two modes of `values` (`modes`, from [`crate::stats::modes`]) are the two
    /// placements: `Some(true)` when the low mode is the same-CPU samples and the high one
    /// the cross-CPU samples, `Some(false)` the other way round (a bandwidth, where sharing
    /// a CPU is slower), `None` when the placement does not tell the modes apart (nine in
    /// ten of the samples whose placement is known must agree).
    pub fn explains(&self, values: &[f64], modes: &crate::stats::Modes) -> Option<bool> {
        if self.parties.len() != 2 || self.shared.len() != values.len() {
            return None;
        }
        let cut = (modes.low.0 + modes.high.0) / 2.0;
        let known: Vec<(bool, bool)> = self
            .shared
            .iter()
            .zip(values)
            .filter(|(s, _)| **s != Shared::Unknown)
            .map(|(s, v)| (*v <= cut, *s == Shared::Same))
            .collect();
        if known.is_empty() {
            return None;
        }
        let agree = known.iter().filter(|(low, same)| low == same).count() as f64;
        let n = known.len() as f64;
        if agree >= 0.9 * n {
            Some(true)
        } else if n - agree >= 0.9 * n {
            Some(false)
        } else {
            None
        }
    }
}

/// A party with nothing counted yet (for a merge to fill).
fn empty_like(p: &PartyPlacement) -> PartyPlacement {
    PartyPlacement {
        cpus: Vec::new(),
        migrations: p.migrations.map(|_| 0),
        at_least: false,
        ..p.clone()
    }
}

/// A party as the recorder tracks it.
#[derive(Debug)]
struct Tracked {
    who: Who,
    /// The one CPU of its mask, if its mask is one CPU.
    pinned: Option<usize>,
    /// `se.nr_migrations` before the first sample.
    start_migrations: Option<u64>,
}

/// Records where the parties of one measurement run, at sample boundaries. Used by the
/// sampler; nothing it does is inside a timed region.
#[derive(Debug)]
pub struct Recorder {
    names: Vec<String>,
    tracked: Vec<Tracked>,
    seen: Vec<Vec<Option<usize>>>,
}

impl Recorder {
    /// Starts recording `parties`: reads their masks and migration counts.
    pub fn start(parties: &[Party]) -> Recorder {
        let tracked = parties
            .iter()
            .map(|p| {
                let mask = match p.who {
                    Who::Caller => sys::affinity_of(0),
                    Who::Task(tid) => sys::affinity_of(tid),
                    Who::Fresh(ref slot) => {
                        slot.take(); // a child of the warm-up is no sample's
                        None
                    }
                };
                Tracked {
                    who: p.who.clone(),
                    pinned: match mask.as_deref() {
                        Some([one]) => Some(*one),
                        _ => None,
                    },
                    start_migrations: migrations_of(&p.who),
                }
            })
            .collect();
        Recorder {
            names: parties.iter().map(|p| p.name.clone()).collect(),
            tracked,
            seen: Vec::new(),
        }
    }

    /// Notes where every party is after a sample. True when a pinned party was seen off its
    /// CPU (the sample is then marked as migrated).
    pub fn observe(&mut self) -> bool {
        let now: Vec<Option<usize>> = self.tracked.iter().map(|t| cpu_of(&t.who)).collect();
        let off = self
            .tracked
            .iter()
            .zip(&now)
            .any(|(t, c)| matches!((t.pinned, c), (Some(p), Some(c)) if p != *c));
        self.seen.push(now);
        off
    }

    /// Reads the migration counts again and summarises.
    pub fn finish(self) -> Placement {
        let migrations: Vec<Migrations> = self
            .tracked
            .iter()
            .map(|t| match t.who {
                Who::Fresh(_) => Migrations::Fresh,
                _ => match (migrations_of(&t.who), t.start_migrations) {
                    (Some(end), Some(start)) => Migrations::Counted(end.saturating_sub(start)),
                    _ => Migrations::Unknown,
                },
            })
            .collect();
        let pinned: Vec<bool> = self.tracked.iter().map(|t| t.pinned.is_some()).collect();
        Placement::from_observations(&self.names, &self.seen, &migrations, &pinned)
    }
}

/// The CPU `who` is on (the caller), last ran on (another task), or the last fresh child
/// reported (taken, so a sample without a child shows none).
fn cpu_of(who: &Who) -> Option<usize> {
    match who {
        Who::Caller => sys::current_cpu(),
        Who::Task(tid) => {
            let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
            processor_field(&stat)
        }
        Who::Fresh(slot) => slot.take(),
    }
}

/// The `processor` field (39th) of a `/proc/<tid>/stat` line. The command name (2nd) may
/// hold spaces and parentheses, so fields are counted from after its last `)`.
fn processor_field(stat: &str) -> Option<usize> {
    let after = &stat[stat.rfind(')')? + 1..];
    // After the name come fields 3 (state) onwards: the processor is the 37th of them.
    after.split_whitespace().nth(39 - 3).and_then(|f| f.parse().ok())
}

/// `se.nr_migrations` of `who` from `/proc/<tid>/sched` (`/proc/thread-self/sched` for the
/// caller); `None` where the kernel has no such file.
fn migrations_of(who: &Who) -> Option<u64> {
    let path = match who {
        Who::Caller => "/proc/thread-self/sched".to_string(),
        Who::Task(tid) => format!("/proc/{tid}/sched"),
        Who::Fresh(_) => return None,
    };
    let text = std::fs::read_to_string(path).ok()?;
    nr_migrations_field(&text)
}

fn nr_migrations_field(sched: &str) -> Option<u64> {
    sched
        .lines()
        .find_map(|l| l.strip_prefix("se.nr_migrations"))
        .and_then(|rest| rest.trim_start().strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn observations_become_counts_migrations_and_shared_letters() {
        let seen = vec![
            vec![Some(0), Some(0)],
            vec![Some(0), Some(1)],
            vec![Some(1), Some(1)],
            vec![Some(0), None],
        ];
        let p = Placement::from_observations(
            &names(&["client", "server"]),
            &seen,
            &[Migrations::Counted(3), Migrations::Unknown],
            &[false, false],
        );
        assert_eq!(p.parties[0].cpus, vec![(0, 3), (1, 1)]);
        assert_eq!((p.parties[0].migrations, p.parties[0].at_least), (Some(3), false));
        // No count from the kernel: the changes seen (0 → 1), a lower bound.
        assert_eq!(p.parties[1].cpus, vec![(0, 1), (1, 2)]);
        assert_eq!((p.parties[1].migrations, p.parties[1].at_least), (Some(1), true));
        assert_eq!(p.same_cpu(), Some((2, 3)));
        assert_eq!(
            p.note().unwrap(),
            "client:cpu0×3,cpu1×1 mig 3; server:cpu0×1,cpu1×2 mig ≥1; same_cpu 2/3 SxS-"
        );
    }

    #[test]
    fn the_note_parses_back_to_the_same_summary() {
        let p = Placement {
            parties: vec![
                PartyPlacement {
                    name: "parent".into(),
                    cpus: vec![(0, 8), (1, 3)],
                    migrations: Some(4),
                    at_least: false,
                    pinned: false,
                },
                PartyPlacement {
                    name: "child".into(),
                    cpus: vec![(1, 11)],
                    migrations: Some(2),
                    at_least: true,
                    pinned: true,
                },
            ],
            shared: "xxSxxSxxxS-".chars().map(|c| Shared::from_letter(c).unwrap()).collect(),
        };
        let note = p.note().unwrap();
        assert_eq!(
            note,
            "parent:cpu0×8,cpu1×3 mig 4; child:cpu1×11 mig ≥2 pinned; same_cpu 3/10 xxSxxSxxxS-"
        );
        assert_eq!(Placement::parse(&note), Some(p));
        let fresh = Placement::from_observations(
            &names(&["parent", "child"]),
            &[vec![Some(0), Some(1)], vec![Some(0), None]],
            &[Migrations::Counted(0), Migrations::Fresh],
            &[false, false],
        );
        let note = fresh.note().unwrap();
        assert_eq!(note, "parent:cpu0×2 mig 0; child:cpu1×1 mig -; same_cpu 0/1 x-");
        assert_eq!(Placement::parse(&note), Some(fresh));
        assert_eq!(Placement::parse("cpus=0,1"), None);
        assert_eq!(Placement::parse("a:cpuX×1 mig 0"), None);
    }

    #[test]
    fn one_party_has_no_same_cpu_part() {
        let p = Placement::from_observations(
            &names(&["main"]),
            &[vec![Some(1)], vec![Some(1)]],
            &[Migrations::Counted(0)],
            &[false],
        );
        assert_eq!(p.same_cpu(), None);
        assert_eq!(p.note().unwrap(), "main:cpu1×2 mig 0");
        assert_eq!(Placement::parse("main:cpu1×2 mig 0"), Some(p));
    }

    #[test]
    fn pinned_parties_that_stayed_need_no_note_and_one_that_moved_does() {
        let held = Placement::from_observations(
            &names(&["parent", "child"]),
            &[vec![Some(0), Some(0)], vec![Some(0), Some(0)]],
            &[Migrations::Counted(0), Migrations::Counted(0)],
            &[true, true],
        );
        assert!(held.pinned_and_held());
        assert_eq!(held.note(), None);
        let moved = Placement::from_observations(
            &names(&["parent", "child"]),
            &[vec![Some(0), Some(0)], vec![Some(0), Some(1)]],
            &[Migrations::Counted(0), Migrations::Counted(1)],
            &[true, true],
        );
        assert!(!moved.pinned_and_held());
        assert!(moved.note().unwrap().contains("child:cpu0×1,cpu1×1 mig 1 pinned"));
        // One unpinned party is enough for a note.
        let mixed = Placement::from_observations(
            &names(&["frame", "loader"]),
            &[vec![Some(0), Some(1)]],
            &[Migrations::Counted(0), Migrations::Counted(0)],
            &[true, false],
        );
        assert!(mixed.note().unwrap().starts_with("frame:cpu0×1 mig 0 pinned; loader:"));
    }

    #[test]
    fn rounds_merge_counts_and_keep_the_letters_in_sample_order() {
        let r1 = "a:cpu0×2 mig 1; b:cpu0×1,cpu1×1 mig 0; same_cpu 1/2 Sx";
        let r3 = "a:cpu1×2 mig ≥2; b:cpu1×2 mig 5; same_cpu 2/2 SS";
        let m = Placement::merge_rounds(&[(Some(r1), 2), (None, 3), (Some(r3), 2)]).unwrap();
        assert_eq!(
            m.note().unwrap(),
            "a:cpu0×2,cpu1×2 mig ≥3; b:cpu0×1,cpu1×3 mig 5; same_cpu 3/4 Sx---SS"
        );
        assert_eq!(Placement::merge_rounds(&[(None, 2), (Some("cpus=0"), 2)]), None);
    }

    #[test]
    fn a_split_placement_explains_two_modes() {
        let p = Placement::from_observations(
            &names(&["parent", "child"]),
            &[
                vec![Some(0), Some(0)],
                vec![Some(0), Some(1)],
                vec![Some(0), Some(0)],
                vec![Some(1), Some(0)],
                vec![Some(1), Some(1)],
                vec![Some(1), Some(0)],
            ],
            &[Migrations::Counted(0), Migrations::Counted(0)],
            &[false, false],
        );
        let values = [4.0, 45.0, 4.2, 47.0, 4.1, 44.0];
        let split = p.split(&values).unwrap();
        assert_eq!(split.same, (4.1, 3));
        assert_eq!(split.cross, (45.0, 3));
        let modes = crate::stats::modes(&values).expect("two modes");
        assert_eq!(p.explains(&values, &modes), Some(true));
        // A bandwidth: sharing a CPU is the low mode's opposite.
        let bw = [9.0, 2.0, 9.5, 2.1, 9.2, 2.2];
        let modes = crate::stats::modes(&bw).unwrap();
        assert_eq!(p.explains(&bw, &modes), Some(false));
        // Modes that cut across the placements are not explained by them.
        let mixed = [4.0, 4.1, 45.0, 4.2, 46.0, 47.0];
        let modes = crate::stats::modes(&mixed).unwrap();
        assert_eq!(p.explains(&mixed, &modes), None);
        // One placement throughout: no split.
        let same = Placement::from_observations(
            &names(&["a", "b"]),
            &[vec![Some(0), Some(0)], vec![Some(1), Some(1)]],
            &[Migrations::Counted(0), Migrations::Counted(0)],
            &[false, false],
        );
        assert_eq!(same.split(&[1.0, 2.0]), None);
        assert_eq!(p.split(&values[..5]), None, "letters and values must line up");
    }

    #[test]
    fn proc_fields_are_found_past_an_odd_command_name() {
        let mut stat = String::from("1234 (a) b (c)) S");
        for f in 4..=52 {
            stat.push_str(&format!(" {}", if f == 39 { 7 } else { f * 100 }));
        }
        assert_eq!(processor_field(&stat), Some(7));
        let sched = "x (1, #threads: 1)\n---\nse.exec_start : 1.0\nse.nr_migrations    :     42\n";
        assert_eq!(nr_migrations_field(sched), Some(42));
        assert_eq!(nr_migrations_field("nothing"), None);
    }

    #[test]
    fn the_recorder_sees_this_thread_and_a_child_on_cpus_that_exist() {
        let allowed = sys::allowed_cpus();
        let (r, w) = sys::pipe().unwrap();
        let rfd = sys::raw(&r);
        let child = sys::Child::fork(None, move || {
            let mut b = [0u8; 1];
            let _ = sys::read_exact(rfd, &mut b);
            0
        })
        .unwrap();
        let mut rec =
            Recorder::start(&[Party::caller("parent"), Party::task("child", child.pid())]);
        for _ in 0..3 {
            rec.observe();
        }
        let p = rec.finish();
        drop((child, w));
        assert_eq!(p.parties.len(), 2);
        for party in &p.parties {
            assert_eq!(party.seen(), 3, "{party:?}");
            assert!(party.cpus.iter().all(|(c, _)| allowed.contains(c)), "{party:?}");
        }
        assert_eq!(p.shared.len(), 3);
        if allowed.len() == 1 {
            // Both masks are the one allowed CPU: pinned by whoever started us, no note.
            assert_eq!(p.note(), None);
        } else {
            let note = p.note().expect("the child's mask is the whole machine's");
            assert_eq!(Placement::parse(&note), Some(p));
        }
    }
}
