//! schedlab-probes: the catalog of everything schedlab measures.
//!
//! Each probe is a small type behind the [`Probe`] trait: its id, one-line doc, unit, better
//! direction, requirements and the lmbench or UnixBench test it mirrors sit beside its code, in
//! one module per family (`os` now; `threads`, `sched` and `mem` as they land). [`catalog`]
//! lists them all, in one order; `schedlab list`, docs/PROBES.md and the run loop are all
//! generated from it.
//!
//! A probe keeps setup, timed body and teardown apart: [`Probe::setup`] forks helpers, binds
//! sockets and creates files (never timed) and returns a [`schedlab_measure::Workload`] whose
//! `run(iters)` times only the work; dropping it tears everything down (children killed and
//! reaped, files removed), also when the run is interrupted or a sample fails.
//!
//! ```
//! use schedlab_probes::{catalog, select};
//! let all = catalog();
//! assert!(all.iter().any(|p| p.info().id == "os.syscall.null"));
//! let pipes = select(&all, &["os.pipe.*".to_string()]).unwrap();
//! assert!(pipes.iter().all(|p| p.info().id.starts_with("os.pipe.")));
//! ```
#![deny(missing_docs)]

pub mod crosscheck;
pub mod mem;
pub mod os;
pub mod rt;
pub mod runner;
pub mod sched;
#[cfg(test)]
mod testkit;
pub mod threads;

// Seed 003 (issue 26): the HBench-OS calls beside a live runtime; hand-off scheduling.
pub mod bystander;
pub mod handoff;

use std::path::PathBuf;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::{ProbeError, Workload};

/// Which suite a run uses; probes offer more parameter variants in bigger suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Suite {
    /// Every probe once, tiny iteration counts: for tests and CI.
    Smoke,
    /// The main parameter sets, fewer samples: the everyday characterisation.
    Quick,
    /// Every parameter set, full sampling.
    Full,
}

impl Suite {
    /// `smoke`, `quick` or `full`.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Smoke => "smoke",
            Suite::Quick => "quick",
            Suite::Full => "full",
        }
    }
}

/// Static description of a probe; everything `schedlab list` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// Stable dotted id, e.g. `os.pipe.latency`.
    pub id: &'static str,
    /// One line: what is measured, per what.
    pub doc: &'static str,
    /// Unit of its results (the better direction follows from it).
    pub unit: Unit,
    /// The established test it corresponds to (`lmbench lat_pipe`), and any deliberate
    /// difference; "-" when none.
    pub mirrors: &'static str,
    /// What it needs to run ("2 CPUs for placement=cross", "root"...); empty when nothing.
    pub requires: &'static str,
}

/// Where and how probes run, supplied by the binary.
#[derive(Debug, Clone)]
pub struct Context {
    /// The suite being run.
    pub suite: Suite,
    /// Directory for temporary files (fs probes create and remove their files in here).
    pub tmp_dir: PathBuf,
    /// How to exec a tiny helper mode of our own binary: program and arguments. `None`
    /// where no such binary exists (library tests); probes that need it skip. The program
    /// also answers `threads.net.echo`'s client entry ([`threads::echo::CLIENT_ARG`]).
    pub exec_helper: Option<(PathBuf, Vec<String>)>,
}

impl Context {
    /// A context for tests: smoke suite, the system temporary directory, no exec helper.
    pub fn for_tests() -> Context {
        Context { suite: Suite::Smoke, tmp_dir: std::env::temp_dir(), exec_helper: None }
    }
}

/// A probe that is set up and ready to be sampled.
pub trait Instance: Workload {
    /// How a timing becomes a value in the probe's unit.
    fn metric(&self) -> Metric;

    /// How the result was obtained, stored with it: placement (`cpus=0,0`), overheads
    /// subtracted inside the probe (`pipe_overhead_us=...`), sizes... Empty by default.
    fn notes(&self) -> Params {
        Params::new()
    }
}

/// One entry of the catalog.
pub trait Probe: Send + Sync {
    /// The static description.
    fn info(&self) -> Info;

    /// The parameter sets to measure in `suite`, in display order; one empty set for a probe
    /// without parameters.
    fn variants(&self, suite: Suite) -> Vec<Params> {
        let _ = suite;
        vec![Params::new()]
    }

    /// The sampling settings for this probe in `suite`, given the suite's defaults. Most
    /// probes take the defaults; a sweep of thousands of short, steady points (`mem.clear`)
    /// takes lighter ones. The user's `--samples` and `--target-ms` still win.
    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        let _ = suite;
        default.clone()
    }

    /// Judges `m`, this probe's result, against the results of the same run kept before it
    /// (`earlier`, in the order kept), adding what it finds to `m`'s notes before `m` is
    /// stored: for a verdict that needs another variant, as seed 001's goal needs the
    /// unloaded run. Returns the warnings it finds (a disturbed baseline), which the run
    /// shows and stores with its others (not in smoke runs). Nothing by default.
    fn judge(
        &self,
        m: &mut schedlab_measure::model::Measurement,
        earlier: &[schedlab_measure::model::Measurement],
    ) -> Vec<schedlab_measure::model::Warning> {
        let _ = (m, earlier);
        Vec::new()
    }

    /// Sets the probe up for `params` (not timed).
    ///
    /// # Errors
    /// [`ProbeError::Skip`] when it cannot run here (with the reason), [`ProbeError::Failed`]
    /// when setup fails, [`ProbeError::Interrupted`] when the user asked to stop.
    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError>;
}

/// Every probe, in catalog order.
pub fn catalog() -> Vec<Box<dyn Probe>> {
    let mut all: Vec<Box<dyn Probe>> = Vec::new();
    all.extend(os::probes());
    all.extend(threads::probes());
    all.extend(rt::probes());
    // Seed 003 (issue 26): the HBench-OS calls beside a live runtime; hand-off scheduling.
    all.extend(bystander::probes());
    all.extend(handoff::probes());
    all.extend(mem::probes());
    all.extend(sched::probes());
    all
}

/// Error for a filter pattern that matches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoMatch {
    /// The pattern the user typed.
    pub pattern: String,
    /// The closest probe ids, best first.
    pub suggestions: Vec<String>,
}

impl std::fmt::Display for NoMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pattern.trim().is_empty() {
            return write!(
                f,
                "an empty filter matches no probe; leave the filter out to select every probe"
            );
        }
        write!(f, "no probe matches {:?}", self.pattern)?;
        if !self.suggestions.is_empty() {
            write!(f, "; did you mean {}?", self.suggestions.join(", "))?;
        }
        write!(f, " (`schedlab list` shows all probes)")
    }
}

impl std::error::Error for NoMatch {}

/// True when `pattern` selects probe `id`: a glob (`*` any run of characters, `?` one
/// character) matched against the whole id, or a prefix that ends at a dot boundary
/// (`os.pipe` selects `os.pipe.latency`, not `os.pipeline`).
pub fn matches(pattern: &str, id: &str) -> bool {
    if pattern.contains(['*', '?']) {
        return glob(pattern.as_bytes(), id.as_bytes());
    }
    let p = pattern.trim_end_matches('.');
    id == p || (id.starts_with(p) && id.as_bytes().get(p.len()) == Some(&b'.'))
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    // Iterative wildcard matching with one backtrack point (linear in practice).
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// The parameter keys `probe` has: every key of its variants in any suite, in the order
/// they first appear.
pub fn param_keys(probe: &dyn Probe) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for suite in [Suite::Smoke, Suite::Quick, Suite::Full] {
        for v in probe.variants(suite) {
            for (k, _) in v.0 {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
    }
    keys
}

/// Checks parameters given by hand for `probe` (`timeline --probe ID --params K=V,...`):
/// each key must be one the probe has ([`param_keys`]), or the probe would run its default
/// for it while the run stored said otherwise. A value is the probe's to judge when it is
/// set up (`bad value "x" for parameter size`).
///
/// # Errors
/// A message naming the first unknown key and the keys the probe has.
pub fn check_params(probe: &dyn Probe, params: &Params) -> Result<(), String> {
    let keys = param_keys(probe);
    let id = probe.info().id;
    for (k, _) in &params.0 {
        if !keys.contains(k) {
            return Err(if keys.is_empty() {
                format!("{id} has no parameter {k:?}; it takes none")
            } else {
                format!("{id} has no parameter {k:?}; its parameters are {}", keys.join(", "))
            });
        }
    }
    Ok(())
}

/// Selects the probes that match any of `patterns` (all probes when there are none), in
/// catalog order.
///
/// # Errors
/// The first pattern that matches nothing, with the closest ids as suggestions.
pub fn select<'a>(
    all: &'a [Box<dyn Probe>],
    patterns: &[String],
) -> Result<Vec<&'a dyn Probe>, NoMatch> {
    for pat in patterns {
        if !all.iter().any(|p| matches(pat, p.info().id)) {
            return Err(NoMatch { pattern: pat.clone(), suggestions: suggest(all, pat) });
        }
    }
    Ok(all
        .iter()
        .filter(|p| patterns.is_empty() || patterns.iter().any(|pat| matches(pat, p.info().id)))
        .map(|p| p.as_ref())
        .collect())
}

/// The ids closest to `pattern` by edit distance (ids that share its prefix first).
fn suggest(all: &[Box<dyn Probe>], pattern: &str) -> Vec<String> {
    let pat = pattern.replace(['*', '?'], "");
    let mut scored: Vec<(usize, &str)> = all
        .iter()
        .map(|p| {
            let id = p.info().id;
            // Compare against the id cut to the pattern's length too, so "os.pip" is close to
            // every os.pipe.* id.
            let cut: String = id.chars().take(pat.chars().count()).collect();
            (strsim::levenshtein(&pat, &cut).min(strsim::levenshtein(&pat, id)), id)
        })
        .collect();
    scored.sort();
    let best = scored.first().map(|s| s.0).unwrap_or(0);
    if best > pat.len().max(3) / 2 {
        return Vec::new();
    }
    scored.into_iter().filter(|s| s.0 == best).take(3).map(|s| s.1.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn patterns_match_by_glob_or_dotted_prefix() {
        assert!(matches("os", "os.pipe.latency"));
        assert!(matches("os.pipe", "os.pipe.latency"));
        assert!(matches("os.pipe.", "os.pipe.latency"));
        assert!(!matches("os.pip", "os.pipe.latency"));
        assert!(matches("os.pipe.*", "os.pipe.bandwidth"));
        assert!(matches("*.latency", "os.tcp.latency"));
        assert!(matches("os.?cp.latency", "os.tcp.latency"));
        assert!(!matches("os.*.bandwidth", "os.tcp.latency"));
        assert!(matches("os.syscall.null", "os.syscall.null"));
    }

    #[test]
    fn unknown_pattern_suggests_close_ids() {
        let all = catalog();
        let Err(err) = select(&all, &["os.pip".to_string()]) else { panic!("os.pip matched") };
        assert!(err.suggestions.iter().any(|s| s.starts_with("os.pipe.")), "{err}");
        assert!(err.to_string().contains("did you mean"));
        let Err(err) = select(&all, &["zzzzzzzzzzzz".to_string()]) else { panic!("matched") };
        assert!(err.suggestions.is_empty(), "{err}");
    }

    #[test]
    fn hand_given_parameters_must_be_ones_the_probe_has() {
        let all = catalog();
        let find = |id: &str| all.iter().find(|p| p.info().id == id).unwrap().as_ref();
        let pipe = find("os.pipe.latency");
        assert_eq!(param_keys(pipe), ["placement"]);
        assert!(check_params(pipe, &Params::new().with("placement", "cross")).is_ok());
        let e = check_params(pipe, &Params::new().with("placment", "cross")).unwrap_err();
        assert!(e.contains("\"placment\"") && e.contains("placement"), "{e}");
        let e = check_params(find("os.syscall.null"), &Params::new().with("x", 1)).unwrap_err();
        assert!(e.contains("takes none"), "{e}");
    }

    #[test]
    fn catalog_ids_are_unique_dotted_and_documented() {
        let all = catalog();
        let mut seen = HashSet::new();
        for p in &all {
            let i = p.info();
            assert!(seen.insert(i.id), "duplicate id {}", i.id);
            assert!(
                i.id.split('.').count() >= 2
                    && i.id.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b == b'.'
                        || b == b'_'),
                "bad id {}",
                i.id
            );
            assert!(!i.doc.is_empty() && !i.doc.contains('\n'), "{} needs a one-line doc", i.id);
            assert!(!i.mirrors.is_empty(), "{} must say what it mirrors", i.id);
            for suite in [Suite::Smoke, Suite::Quick, Suite::Full] {
                let variants = p.variants(suite);
                assert!(!variants.is_empty(), "{} has no variants in {suite:?}", i.id);
                for v in &variants {
                    // Params are a result's identity, stored as `k=v,k=v`: no separators inside.
                    for (k, val) in &v.0 {
                        assert!(
                            !k.contains([',', '=']) && !val.contains([',', '=']),
                            "{}: bad param {k}={val}",
                            i.id
                        );
                    }
                    assert_eq!(&schedlab_measure::model::Params::from_key(&v.key()), v);
                }
                let mut keys: Vec<String> = variants.iter().map(|v| v.key()).collect();
                keys.sort();
                keys.dedup();
                assert_eq!(keys.len(), variants.len(), "{} repeats a variant in {suite:?}", i.id);
            }
        }
    }
}
