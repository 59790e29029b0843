//! Which stored runs a command means: a RUN argument (an id, `latest`, `latest~N` or a
//! label) resolved to a run, and [`RunFilter`] (`--host`, `--label`, `--since`) picking runs
//! for `runs`, `compare`, `history`, `push`, `pull` and `import`. Shared by those commands;
//! it imports none of them.

use anyhow::Result;
use schedlab_measure::model::Run;
use schedlab_store::{RunSummary, Store, StoreError};

use crate::args::RunFilterArgs;
use crate::UsageError;

/// Loads the run a RUN argument names; an unknown run is a usage error.
pub fn load(store: &Store, spec: &str) -> Result<Run> {
    Ok(store.load_run(resolve(store, spec, None)?)?)
}

/// The id a RUN argument names, among the runs of `host` only when given (a label then means
/// that host's most recent run with it); an unknown run is a usage error.
pub fn resolve(store: &Store, spec: &str, host: Option<&str>) -> Result<i64> {
    let usage = |e: StoreError| match e {
        StoreError::NoSuchRun(..) => anyhow::Error::new(UsageError(e.to_string())),
        other => other.into(),
    };
    let Some(host) = host else { return store.resolve(spec).map_err(usage) };
    let filter = RunFilter { hosts: vec![host.to_string()], ..Default::default() };
    let on_host = filter.apply(store.runs()?);
    let by_label = on_host.iter().rev().find(|r| r.label.as_deref() == Some(spec));
    if let Some(r) = by_label {
        return Ok(r.id);
    }
    let id = store.resolve(spec).map_err(usage)?;
    if on_host.iter().any(|r| r.id == id) {
        Ok(id)
    } else {
        Err(UsageError(format!("no run of host {host:?} matches {spec:?} in {}; `schedlab runs --host {host}` lists them", store.path().display())).into())
    }
}

/// Which runs: by host (name or machine id prefix), label and start date. Empty lists match
/// everything.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Host names or machine id prefixes (8 characters or more).
    pub hosts: Vec<String>,
    /// Labels.
    pub labels: Vec<String>,
    /// Earliest start, compared as RFC 3339 text (`2026-11-20` is the start of that day).
    pub since: Option<String>,
}

impl RunFilter {
    /// Validates the command line's filter.
    pub fn from_args(a: &RunFilterArgs) -> Result<RunFilter> {
        if let Some(s) = &a.since {
            if let Err(why) = check_since(s) {
                return Err(UsageError(format!(
                    "--since {s:?} is not a date ({why}); write it as 2026-11-20 or 2026-11-20T08:00:00Z"
                ))
                .into());
            }
        }
        if let Some(h) = a.host.iter().find(|h| h.trim().is_empty()) {
            return Err(UsageError(format!("--host {h:?} is empty")).into());
        }
        Ok(RunFilter { hosts: a.host.clone(), labels: a.label.clone(), since: a.since.clone() })
    }

    /// Whether `r` passes.
    pub fn matches(&self, r: &RunSummary) -> bool {
        let host = self.hosts.is_empty()
            || self.hosts.iter().any(|h| {
                r.host == *h || (h.len() >= 8 && r.machine_id.starts_with(&h.to_ascii_lowercase()))
            });
        let label =
            self.labels.is_empty() || self.labels.iter().any(|l| r.label.as_deref() == Some(l));
        let since = self.since.as_ref().is_none_or(|s| r.started_at.as_str() >= s.as_str());
        host && label && since
    }

    /// The runs of `runs` that pass, in their order.
    pub fn apply(&self, runs: Vec<RunSummary>) -> Vec<RunSummary> {
        runs.into_iter().filter(|r| self.matches(r)).collect()
    }
}

/// Checks `--since`: a calendar date `YYYY-MM-DD` (a month 01–12, a day that month has),
/// optionally followed by `T` and a time `HH:MM[:SS[.fraction]]` in range, then `Z` or an
/// offset `±HH:MM`. Runs are compared with it as RFC 3339 text, so a date that does not
/// exist (`2026-13-45`) would silently match every run after `2026-13`; it is refused
/// instead. Returns what is wrong.
pub fn check_since(s: &str) -> Result<(), &'static str> {
    fn num(b: &[u8]) -> Option<u32> {
        b.iter().try_fold(0u32, |n, c| c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0')))
    }
    let b = s.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err("not YYYY-MM-DD");
    }
    let (Some(year), Some(month), Some(day)) = (num(&b[..4]), num(&b[5..7]), num(&b[8..10])) else {
        return Err("not YYYY-MM-DD");
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Err("there is no such month"),
    };
    if !(1..=days).contains(&day) {
        return Err("that month has no such day");
    }
    let rest = &b[10..];
    if rest.is_empty() {
        return Ok(());
    }
    let time = rest.strip_prefix(b"T").ok_or("a time follows the date after a T")?;
    let hm = |t: &[u8]| -> Option<(u32, u32)> {
        (t.len() >= 5 && t[2] == b':').then_some(())?;
        Some((num(&t[..2])?, num(&t[3..5])?))
    };
    let (h, m) = hm(time).ok_or("the time is not HH:MM")?;
    if h > 23 || m > 59 {
        return Err("there is no such time");
    }
    let mut t = &time[5..];
    if let Some(sec) = t.strip_prefix(b":") {
        match num(sec.get(..2).ok_or("the seconds are not SS")?) {
            Some(s) if s <= 60 => t = &sec[2..],
            _ => return Err("the seconds are not SS"),
        }
        if let Some(frac) = t.strip_prefix(b".") {
            let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return Err("a fraction of a second has digits");
            }
            t = &frac[n..];
        }
    }
    match t {
        b"" | b"Z" | b"z" => Ok(()),
        [b'+' | b'-', off @ ..] => match hm(off) {
            Some((h, m)) if off.len() == 5 && h <= 23 && m <= 59 => Ok(()),
            _ => Err("the offset is not ±HH:MM"),
        },
        _ => Err("the time ends in Z or an offset ±HH:MM"),
    }
}

#[cfg(test)]
mod tests {
    use super::check_since;

    #[test]
    fn since_takes_only_dates_and_times_that_exist() {
        for ok in [
            "2026-11-20",
            "2024-02-29",
            "2026-11-20T08:00:00Z",
            "2026-11-20T08:00",
            "2026-11-20T23:59:59.123+02:00",
        ] {
            assert_eq!(check_since(ok), Ok(()), "{ok}");
        }
        for bad in [
            "2026-13-45",
            "2026-00-10",
            "2026-02-29",
            "2026-04-31",
            "2026-11-00",
            "yesterday",
            "2026-1-5",
            "2026-11-20x",
            "2026-11-20T25:00",
            "2026-11-20T08:00:61",
            "2026-11-20T08:00Zjunk",
            "2026-11-20T08:00+2",
        ] {
            assert!(check_since(bad).is_err(), "{bad} was accepted");
        }
    }
}
