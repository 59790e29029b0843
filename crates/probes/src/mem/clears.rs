//! `mem.clears`: where real programs clear memory (seed 004's practical conclusion, "most
//! NewPtrClear calls are erasing small structs, so a patch would not likely improve many
//! programs", measured today; issue 26).
//!
//! Each `program=` runs once per sample with `libschedlab_clears.so` (`csrc/clears.c`,
//! built by `build.rs`) preloaded; the library counts every call that reaches libc's
//! `memset` (zero and non-zero apart), `calloc`, `bzero` and `explicit_bzero` in a size
//! histogram, and each process of the program's tree appends it, with its minor page faults
//! (fresh pages the kernel clears, 4 KiB each), to a file at exit. The value is the wall time
//! of one run of the program (so a sample is one run); the histogram of the last sample is
//! the result's notes: `hist_KIND=LOW:CALLS:BYTES;...` per kind (LOW the size class's lower
//! bound: exact below 64 B, eight classes per octave above), `minflt`, `processes`. A
//! process that ends by `_exit` or a signal runs no destructor and reports nothing.
//! `schedlab mem` puts the histograms beside the same run's crossover points
//! (`report::mem::clears`).
//!
//! The programs (each skipped with the reason when its tool is absent):
//! - `cc`: `cc -O2 -c` of the recorder's own C source (a real translation unit);
//! - `git`: `git log --stat -200` and `git status` in the repository schedlab was built from
//!   (run by `sh`, whose own clears count too);
//! - `python3`: a script that builds, serialises, parses and sorts 20,000 records (json, re);
//! - `sqlite3`: an in-memory database: 20,000 rows inserted, an index, a grouped query.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::{ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe, Suite};

include!(concat!(env!("OUT_DIR"), "/clears_lib.rs"));

/// The programs, in display order.
pub const PROGRAMS: [&str; 4] = ["cc", "git", "python3", "sqlite3"];

/// The recorder's C source: `program=cc` compiles it.
const SOURCE: &str = include_str!("../../csrc/clears.c");

/// The repository schedlab was built from: `program=git` reads it.
const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

const PYTHON: &str = "import json, re\n\
d = [{'id': i, 'name': 'item%d' % i, 'tags': [str(i % 7), str(i % 11)]} for i in range(20000)]\n\
s = json.dumps(d)\n\
e = json.loads(s)\n\
n = sorted(int(x) for x in re.findall(r'\\d+', s[:200000]))\n\
print(len(e), len(n))\n";

const SQL: &str = "create table t(id integer primary key, k integer, v text);\n\
with recursive c(x) as (select 1 union all select x + 1 from c where x < 20000)\n\
insert into t(k, v) select x % 97, printf('value %d', x) from c;\n\
create index tk on t(k);\n\
select k, count(*), max(v) from t group by k order by k limit 3;\n";

/// The `mem.clears` probe.
pub struct ClearsProbe;

impl Probe for ClearsProbe {
    fn info(&self) -> Info {
        Info {
            id: "mem.clears",
            doc: "a real program (program=cc|git|python3|sqlite3) run with a preloaded recorder of its memset/calloc/bzero/explicit_bzero sizes and fresh pages: µs per run, the histogram in the notes",
            unit: Unit::Micros,
            mirrors: "seed 004's conclusion that most NewPtrClear calls clear small structs",
            requires: "a C compiler at build time; each program's tool on PATH",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let programs: &[&str] = match suite {
            Suite::Smoke => &["git"],
            _ => &PROGRAMS,
        };
        programs.iter().map(|p| Params::new().with("program", p)).collect()
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // A sample is one run of the program (tens to hundreds of ms): a few suffice.
        let mut s = default.clone();
        if suite != Suite::Smoke {
            s.samples = 3;
            s.warmup = Duration::ZERO;
        }
        s
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let program = params.get("program").unwrap_or("git");
        if !PROGRAMS.contains(&program) {
            return Err(ProbeError::Failed(format!(
                "program={program:?}: use {}",
                PROGRAMS.join(", ")
            )));
        }
        let library = LIBRARY.map_err(|why| ProbeError::Skip(why.to_string()))?;
        let tool = program;
        if !on_path(tool) {
            return Err(ProbeError::Skip(format!("{tool} is not on PATH")));
        }
        let dir = Scratch::new(&ctx.tmp_dir)?;
        let lib = dir.path().join("libschedlab_clears.so");
        std::fs::write(&lib, library).map_err(|e| ProbeError::io("writing the recorder", e))?;
        let mut cmd = match program {
            "cc" => {
                let src = dir.path().join("clears.c");
                std::fs::write(&src, SOURCE)
                    .map_err(|e| ProbeError::io("writing cc's input", e))?;
                let mut c = Command::new("cc");
                c.args(["-O2", "-c", "-o"]).arg(dir.path().join("clears.o")).arg(&src);
                c
            }
            "git" => {
                let repo = Path::new(REPO);
                if !repo.join(".git").exists() {
                    return Err(ProbeError::Skip(format!(
                        "{} is not a git repository (schedlab was built elsewhere)",
                        repo.display()
                    )));
                }
                let mut c = Command::new("sh");
                c.arg("-c")
                    // A repository owned by another user (a non-root run of a root's
                    // checkout) is "dubious" to git; these commands only read it.
                    .arg(
                        "git -c safe.directory='*' log --stat -200 >/dev/null && \
                         git -c safe.directory='*' status >/dev/null",
                    )
                    .current_dir(repo);
                c
            }
            "python3" => {
                let mut c = Command::new("python3");
                c.arg("-c").arg(PYTHON);
                c
            }
            _ => {
                let mut c = Command::new("sqlite3");
                c.arg(":memory:").arg(SQL);
                c
            }
        };
        let out = dir.path().join("clears.txt");
        cmd.env("LD_PRELOAD", &lib)
            .env("SCHEDLAB_CLEARS_OUT", &out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        Ok(Box::new(Runs { cmd, out, last: None, _dir: dir, program: program.to_string() }))
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

struct Runs {
    cmd: Command,
    out: PathBuf,
    /// The histogram notes of the last run.
    last: Option<Params>,
    _dir: Scratch,
    program: String,
}

/// A directory of our own under `--tmp-dir`, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tmp_dir: &Path) -> Result<Scratch, ProbeError> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = tmp_dir.join(format!("schedlab-clears-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| ProbeError::Failed(format!("creating {}: {e}", dir.display())))?;
        Ok(Scratch(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Workload for Runs {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let mut elapsed = Duration::ZERO;
        for _ in 0..iters {
            let _ = std::fs::remove_file(&self.out);
            let t = Instant::now();
            let done = self.cmd.output().map_err(|e| ProbeError::io(&self.program, e))?;
            elapsed += t.elapsed();
            if !done.status.success() {
                let err = String::from_utf8_lossy(&done.stderr);
                return Err(ProbeError::Failed(format!(
                    "{} failed ({}): {}",
                    self.program,
                    done.status,
                    err.lines().next().unwrap_or("")
                )));
            }
            let text = std::fs::read_to_string(&self.out)
                .map_err(|e| ProbeError::io("the recorder's output (did the preload take?)", e))?;
            self.last = Some(notes_of(&text));
        }
        Ok(Timing { elapsed, migrated: false, overhead: Duration::ZERO })
    }
}

impl Instance for Runs {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let mut n = self.last.clone().unwrap_or_default();
        n.set("program", &self.program);
        n
    }
}

/// The recorder's lines (`PID EXE KIND LOW CALLS BYTES`, and `PID EXE minflt N BYTES`)
/// summed over the processes, as notes: `hist_KIND=LOW:CALLS:BYTES;...` in size order,
/// `minflt`, `processes`. Pure.
pub fn notes_of(text: &str) -> Params {
    use std::collections::BTreeMap;
    let mut hist: BTreeMap<String, BTreeMap<u64, (u64, u64)>> = BTreeMap::new();
    let mut minflt = 0u64;
    let mut pids = std::collections::BTreeSet::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            [pid, _exe, "minflt", n, _bytes] => {
                pids.insert(pid.to_string());
                minflt += n.parse::<u64>().unwrap_or(0);
            }
            [_pid, _exe, kind, low, calls, bytes] => {
                let (Ok(low), Ok(calls), Ok(bytes)) =
                    (low.parse::<u64>(), calls.parse::<u64>(), bytes.parse::<u64>())
                else {
                    continue;
                };
                let e = hist.entry(kind.to_string()).or_default().entry(low).or_default();
                e.0 += calls;
                e.1 += bytes;
            }
            _ => {}
        }
    }
    let mut p = Params::new().with("minflt", minflt).with("processes", pids.len());
    for (kind, classes) in hist {
        let cells: Vec<String> =
            classes.iter().map(|(low, (c, b))| format!("{low}:{c}:{b}")).collect();
        p.set(&format!("hist_{kind}"), cells.join(";"));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_lines_sum_over_processes() {
        let text = "10 cc1 minflt 100 409600\n10 cc1 memset 12 3 36\n10 cc1 calloc 64 1 70\n\
                    11 as minflt 5 20480\n11 as memset 12 1 12\n11 as memset 4096 2 8192\nbad line\n";
        let n = notes_of(text);
        assert_eq!(n.get("minflt"), Some("105"));
        assert_eq!(n.get("processes"), Some("2"));
        assert_eq!(n.get("hist_memset"), Some("12:4:48;4096:2:8192"));
        assert_eq!(n.get("hist_calloc"), Some("64:1:70"));
        // Notes are stored as `k=v,...`: no separator inside a value.
        assert!(!n.get("hist_memset").unwrap().contains([',', '=']));
    }

    /// The recorder preloaded under a real program counts its clears (git, present on
    /// every machine that builds schedlab from its repository; skipped otherwise).
    #[test]
    fn a_real_program_run_records_a_histogram() {
        let ctx = Context::for_tests();
        let mut run = match ClearsProbe.setup(&Params::from_key("program=git"), &ctx) {
            Ok(r) => r,
            Err(ProbeError::Skip(why)) => {
                eprintln!("skipped: {why}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        run.run(1).unwrap();
        let n = run.notes();
        assert!(n.get("processes").unwrap().parse::<u64>().unwrap() >= 1, "{n:?}");
        assert!(n.get("minflt").unwrap().parse::<u64>().unwrap() > 0, "{n:?}");
        assert!(n.0.iter().any(|(k, _)| k.starts_with("hist_")), "{n:?}");
    }
}
