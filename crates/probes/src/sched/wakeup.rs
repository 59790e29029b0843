//! `sched.wakeup_latency`: how late a periodic timer thread wakes — cyclictest's question,
//! asked of OS threads (`SCHED_OTHER` and `SCHED_FIFO`) and of a schedlab-rt user thread at
//! `Priority::High`, idle and beside a thread that never sleeps, and with the Linux analogues
//! of seed 001's `timeBeginPeriod(1)` (issue 25).
//!
//! The sleeper wakes every [`PERIOD`] (1 ms) at an absolute time (`clock_nanosleep` with
//! `TIMER_ABSTIME` on `CLOCK_MONOTONIC`, as cyclictest does; for the rt backend
//! `schedlab_rt::sleep` to the same due times) and records `now − due` for each wake. A
//! sample's value is the **mean** lateness of its wakes — cyclictest's `Avg:`, so the
//! crosscheck rows compare like with like — and the notes give the nearest-rank p50, p99 and
//! maximum over every wake of every sample (each percentile a wake that happened).
//!
//! | param | values | what changes |
//! |---|---|---|
//! | `backend` | `os`, `rt` | the probe's thread, or a user thread at `Priority::High` on a one-processor runtime |
//! | `policy` | `other`, `fifo` | `SCHED_OTHER`, or `SCHED_FIFO` priority 80 (cyclictest `-p 80`); os only; skipped with the reason without `CAP_SYS_NICE` |
//! | `load` | `idle`, `busy` | nothing else on the CPU, or a thread on it that never sleeps (an OS thread at nice 0; for rt a `Normal` user thread on the same processor) |
//! | `slack` | `default`, `1ns` | the sleeper's own timer slack (`PR_SET_TIMERSLACK`: 50 µs by default for `SCHED_OTHER`, ignored for real-time policies) |
//! | `other` | `none`, `dma0`, `slack1ns` | another process: nothing; holding `/dev/cpu_dma_latency` open with 0 (PM QoS: no deep idle state on any CPU; root); or waking every 1 ms with a 1 ns slack on the sleeper's CPU |
//!
//! Why the last two: Windows' `timeBeginPeriod(1)` is one process's call that changes every
//! process's timer resolution (seed 001, Test 9 and its note "another application is running
//! that called timeBeginPeriod(1)"). Linux has two knobs a program might reach for: timer
//! slack, which is per thread (so `other=slack1ns` should change nothing for us, and
//! `slack=1ns` only the sleeper itself), and the PM QoS request behind
//! `/dev/cpu_dma_latency`, which is system-wide for as long as any process holds the file
//! open (so `other=dma0` is the true analogue: a bystander changes everyone's wake-ups).
//! cyclictest itself holds that file at 0 unless told `--laptop`, which is why its rows say
//! which they do.
//!
//! Everything runs on the first usable CPU: the sleeper, the load and the other process's
//! waker, so the load competes with the sleeper for that CPU.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::stats;
use schedlab_measure::sys::{self, now_ns, Child, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe, Suite};

/// The timer's period: cyclictest's `-i 1000`.
pub const PERIOD: Duration = Duration::from_millis(1);

/// The `SCHED_FIFO` priority of `policy=fifo` (cyclictest `-p 80`).
pub const FIFO_PRIORITY: i32 = 80;

/// The probe's id.
pub const ID: &str = "sched.wakeup_latency";

pub(crate) struct WakeupLatency;

/// One variant as (backend, policy, load, slack, other).
type Variant = (&'static str, &'static str, &'static str, &'static str, &'static str);

/// The study's variants: the baseline, each knob alone, and the load with each policy.
const STUDY: &[Variant] = &[
    ("os", "other", "idle", "default", "none"),
    ("os", "other", "busy", "default", "none"),
    ("os", "fifo", "idle", "default", "none"),
    ("os", "fifo", "busy", "default", "none"),
    ("rt", "other", "idle", "default", "none"),
    ("rt", "other", "busy", "default", "none"),
    ("os", "other", "idle", "1ns", "none"),
    ("os", "other", "idle", "default", "dma0"),
    ("os", "other", "idle", "default", "slack1ns"),
    ("os", "other", "busy", "default", "dma0"),
];

fn params((backend, policy, load, slack, other): Variant) -> Params {
    Params::new()
        .with("backend", backend)
        .with("policy", policy)
        .with("load", load)
        .with("slack", slack)
        .with("other", other)
}

impl Probe for WakeupLatency {
    fn info(&self) -> Info {
        Info {
            id: ID,
            doc: "Lateness of a thread woken every 1 ms at an absolute time (clock_nanosleep TIMER_ABSTIME; rt: schedlab_rt::sleep at Priority::High), idle or beside a thread that never sleeps, SCHED_OTHER or SCHED_FIFO 80, with its own timer slack or another process holding /dev/cpu_dma_latency at 0; mean per sample (cyclictest's Avg), p50/p99/max over every wake in notes",
            unit: Unit::Nanos,
            mirrors: "cyclictest -t1 -i1000 (rt-tests): the same timer and the same mean; see the crosscheck rows",
            requires: "policy=fifo: CAP_SYS_NICE (root); other=dma0: write access to /dev/cpu_dma_latency (root)",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let list: &[Variant] = match suite {
            // The smoke path covers each mechanism once (the root-only ones skip elsewhere).
            Suite::Smoke => &[
                ("os", "other", "busy", "1ns", "none"),
                ("os", "fifo", "busy", "default", "dma0"),
                ("rt", "other", "busy", "default", "none"),
                ("os", "other", "idle", "default", "slack1ns"),
            ],
            // The quick suite stays within its time: the baseline and the loaded CPU only.
            Suite::Quick => &STUDY[..2],
            Suite::Full => STUDY,
        };
        list.iter().copied().map(params).collect()
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // 100 wakes per sample: enough for a mean, short enough for 11 samples in ~1 s.
        let mut s = default.clone();
        if suite != Suite::Smoke {
            s.target = PERIOD * 100;
            s.warmup = PERIOD * 20;
        }
        s
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let get = |k: &str, d: &'static str| params.get(k).unwrap_or(d).to_string();
        let (backend, policy, load) =
            (get("backend", "os"), get("policy", "other"), get("load", "idle"));
        let (slack, other) = (get("slack", "default"), get("other", "none"));
        let one_of = |k: &str, v: &str, ok: &[&str]| {
            if ok.contains(&v) {
                Ok(())
            } else {
                Err(ProbeError::Failed(format!("{k}={v}: one of {}", ok.join(", "))))
            }
        };
        one_of("backend", &backend, &["os", "rt"])?;
        one_of("policy", &policy, &["other", "fifo"])?;
        one_of("load", &load, &["idle", "busy"])?;
        one_of("slack", &slack, &["default", "1ns"])?;
        one_of("other", &other, &["none", "dma0", "slack1ns"])?;
        if backend == "rt" && (policy != "other" || slack != "default") {
            return Err(ProbeError::Failed(
                "backend=rt: its sleeper is a user thread at Priority::High; policy and slack \
                 are the OS thread's"
                    .into(),
            ));
        }
        let cpu = sys::allowed_cpus()[0];
        let pin = PinGuard::pin(cpu)?;
        let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
        // Another process first, so a refusal skips before anything else starts.
        match other.as_str() {
            "dma0" => keep.push(Box::new(hold_dma_latency(cpu)?)),
            "slack1ns" => keep.push(Box::new(fine_waker(cpu)?)),
            _ => {}
        }
        let mut notes = Params::new().with("cpus", cpu).with("period_us", PERIOD.as_micros());
        let live = Arc::new(Mutex::new(Vec::<u64>::new()));
        let body: Body = if backend == "os" {
            // The sleeper is the sampling thread itself; its policy and slack are restored
            // when the instance drops (the guard is kept below).
            // The load first: a thread inherits its creator's policy, and a SCHED_FIFO
            // spinner would shut the sleeper out (the spinner also sets SCHED_OTHER itself).
            if load == "busy" {
                keep.push(Box::new(Spinner::start()?));
            }
            if policy == "fifo" {
                keep.push(Box::new(Fifo::set()?));
                notes.set("priority", FIFO_PRIORITY);
            }
            if slack == "1ns" {
                sys::set_timer_slack(1).map_err(|e| ProbeError::io("PR_SET_TIMERSLACK", e))?;
                keep.push(Box::new(SlackReset));
            }
            Box::new(|iters| Ok(os_wakes(iters)))
        } else {
            rt_body(cpu, load == "busy")?
        };
        keep.push(Box::new(pin));
        Ok(Box::new(Run { body, live, notes, _keep: keep }))
    }
}

type Body = Box<dyn FnMut(u64) -> Result<Vec<u64>, ProbeError>>;

struct Run {
    body: Body,
    /// Every wake's lateness so far, ns.
    live: Arc<Mutex<Vec<u64>>>,
    notes: Params,
    /// The load, the other process, the policy and slack guards, then the pin: dropped
    /// after the body (which owns the rt variant's runtime).
    _keep: Vec<Box<dyn std::any::Any>>,
}

impl Workload for Run {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let t0 = Instant::now();
        let late = (self.body)(iters)?;
        let wall = t0.elapsed();
        if late.is_empty() {
            return Err(ProbeError::Failed("the sleeper recorded no wake-up".into()));
        }
        let mean = late.iter().sum::<u64>() / late.len() as u64;
        self.live.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&late);
        // The value is the sample's mean lateness (cyclictest's Avg); the rest of the wall
        // time (the periods slept) is overhead.
        let value = Duration::from_nanos(mean.saturating_mul(iters));
        Ok(Timing {
            elapsed: wall.max(value),
            migrated: false,
            overhead: wall.saturating_sub(value),
        })
    }
}

impl Instance for Run {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let mut n = self.notes.clone();
        let mut all = self.live.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(p) = Percentiles::of(&mut all) {
            p.note(&mut n);
        }
        n
    }
}

/// Nearest-rank percentiles of wake-up lateness, in ns (a wake that happened, as cyclictest
/// and the timelines report them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    /// How many wakes.
    pub wakes: usize,
    /// Median lateness.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// The latest wake.
    pub max: u64,
}

impl Percentiles {
    /// Of `late` (sorted in place); `None` when empty.
    pub fn of(late: &mut [u64]) -> Option<Percentiles> {
        if late.is_empty() {
            return None;
        }
        late.sort_unstable();
        Some(Percentiles {
            wakes: late.len(),
            p50: stats::nearest_rank(late, 50.0),
            p99: stats::nearest_rank(late, 99.0),
            max: late[late.len() - 1],
        })
    }

    /// Stored as `wakes`, `p50_us`, `p99_us`, `max_us` (µs with one decimal).
    pub fn note(&self, n: &mut Params) {
        n.set("wakes", self.wakes);
        n.set("p50_us", format!("{:.1}", self.p50 as f64 / 1e3));
        n.set("p99_us", format!("{:.1}", self.p99 as f64 / 1e3));
        n.set("max_us", format!("{:.1}", self.max as f64 / 1e3));
    }
}

/// `iters` wakes of the calling thread, due every [`PERIOD`] from one period from now.
fn os_wakes(iters: u64) -> Vec<u64> {
    let period = PERIOD.as_nanos() as u64;
    let mut late = Vec::with_capacity(iters as usize);
    let mut due = now_ns() + period;
    for _ in 0..iters {
        sys::sleep_until(due);
        late.push(now_ns().saturating_sub(due));
        due += period;
    }
    late
}

/// The rt backend: a one-processor runtime on `cpu`; each sample's wakes made by a user
/// thread at `Priority::High`, beside a `Normal` user thread that spins until they are done
/// when `busy`.
fn rt_body(cpu: usize, busy: bool) -> Result<Body, ProbeError> {
    let rt = crate::threads::backend::rt_pinned(&[cpu])?;
    Ok(Box::new(move |iters: u64| {
        rt.block_on(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let spinner = busy.then(|| {
                let s = stop.clone();
                schedlab_rt::Builder::new()
                    .name("load")
                    .priority(schedlab_rt::Priority::Normal)
                    .spawn(move || {
                        let mut x = 0u64;
                        while !s.load(Ordering::Relaxed) {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                    })
            });
            let sleeper = schedlab_rt::Builder::new()
                .name("sleeper")
                .priority(schedlab_rt::Priority::High)
                .spawn(move || {
                    let period = PERIOD.as_nanos() as u64;
                    let mut late = Vec::with_capacity(iters as usize);
                    let mut due = now_ns() + period;
                    for _ in 0..iters {
                        let now = now_ns();
                        if due > now {
                            schedlab_rt::sleep(Duration::from_nanos(due - now));
                        }
                        late.push(now_ns().saturating_sub(due));
                        due += period;
                    }
                    late
                });
            let late = match sleeper {
                Ok(h) => h.join().map_err(|_| "the sleeper panicked".to_string()),
                Err(e) => Err(format!("spawning the sleeper: {e}")),
            };
            stop.store(true, Ordering::Relaxed);
            if let Some(Ok(h)) = spinner {
                let _ = h.join();
            }
            late
        })
        .map_err(|d| ProbeError::Failed(d.to_string()))?
        .map_err(ProbeError::Failed)
    }))
}

/// An OS thread on the caller's CPU (it inherits the pin) that never sleeps, under
/// `SCHED_OTHER` at nice 0 whatever its creator runs under, stopped and joined when dropped.
struct Spinner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    fn start() -> Result<Spinner, ProbeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("load".into())
            .spawn(move || {
                // Never a real-time spinner: it would lock the sleeper out of its CPU.
                let _ = sys::set_policy(libc::SCHED_OTHER, 0);
                let mut x = 0u64;
                while !s.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
            .map_err(|e| ProbeError::io("spawning the load thread", e))?;
        Ok(Spinner { stop, thread: Some(thread) })
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The calling thread under `SCHED_FIFO` [`FIFO_PRIORITY`] until dropped.
struct Fifo;

impl Fifo {
    fn set() -> Result<Fifo, ProbeError> {
        match sys::set_policy(libc::SCHED_FIFO, FIFO_PRIORITY) {
            Ok(()) => Ok(Fifo),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
                Err(ProbeError::Skip(format!(
                    "SCHED_FIFO needs CAP_SYS_NICE (root) or an RLIMIT_RTPRIO of {FIFO_PRIORITY}: {e}"
                )))
            }
            Err(e) => Err(ProbeError::io("sched_setscheduler(SCHED_FIFO)", e)),
        }
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = sys::set_policy(libc::SCHED_OTHER, 0);
    }
}

/// Puts the calling thread's timer slack back to its default when dropped.
struct SlackReset;

impl Drop for SlackReset {
    fn drop(&mut self) {
        let _ = sys::set_timer_slack(0);
    }
}

/// `/dev/cpu_dma_latency`, the PM QoS request the kernel keeps while the file is open.
const DMA_LATENCY: &str = "/dev/cpu_dma_latency";

/// Another process holding `/dev/cpu_dma_latency` open with 0 µs written to it: the kernel
/// keeps every CPU out of idle states that take longer to leave (Documentation/power/pm_qos_interface.rst).
/// We open and write it here, so a refusal skips with its reason, then fork a child that
/// inherits the open file and pauses; our copy is closed, so the request lives exactly as
/// long as the child (killed and reaped when dropped).
fn hold_dma_latency(cpu: usize) -> Result<Child, ProbeError> {
    let path = CString::new(DMA_LATENCY).expect("no NUL in a constant");
    // SAFETY: a valid C string; the flags are plain.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(ProbeError::Skip(format!(
            "other=dma0 needs write access to {DMA_LATENCY} (root): {e}"
        )));
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    sys::write_all(file.as_raw_fd(), &0i32.to_ne_bytes())
        .map_err(|e| ProbeError::io(&format!("writing 0 to {DMA_LATENCY}"), e))?;
    let child = Child::fork(Some(cpu), || loop {
        // SAFETY: pause is async-signal-safe; the child only waits to be killed.
        unsafe { libc::pause() };
    })?;
    drop(file);
    Ok(child)
}

/// Another process that sets its own timer slack to 1 ns and wakes every [`PERIOD`] on
/// `cpu`, as a program that asked Windows for `timeBeginPeriod(1)` would.
fn fine_waker(cpu: usize) -> Result<Child, ProbeError> {
    Child::fork(Some(cpu), || {
        // SAFETY: prctl with plain integers; async-signal-safe.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let ts = libc::timespec { tv_sec: 0, tv_nsec: PERIOD.as_nanos() as libc::c_long };
        loop {
            // SAFETY: a valid timespec; the remainder is not asked for.
            unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &ts, std::ptr::null_mut()) };
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit;

    #[test]
    fn every_wakeup_variant_runs_or_skips_with_its_reason_in_smoke_settings() {
        let ctx = Context::for_tests();
        for params in WakeupLatency.variants(Suite::Smoke) {
            let Some(inst) = testkit::smoke_one(&WakeupLatency, &params, &ctx) else {
                continue;
            };
            let notes = inst.notes();
            for k in ["wakes", "p50_us", "p99_us", "max_us"] {
                assert!(notes.get(k).is_some(), "[{params}] has no {k}: {notes}");
            }
        }
    }

    #[test]
    fn the_load_beside_a_fifo_sleeper_is_not_real_time() {
        // A spinner that inherited SCHED_FIFO would lock the sleeper out of the CPU (the
        // sample never ends); it must run under SCHED_OTHER whatever its creator runs under.
        let fifo = Fifo::set();
        let spinner = Spinner::start().unwrap();
        let tid = {
            let t = spinner.thread.as_ref().unwrap();
            std::os::unix::thread::JoinHandleExt::as_pthread_t(t)
        };
        let mut policy = 0;
        let mut param = libc::sched_param { sched_priority: 0 };
        // Give the spinner its first instructions (it sets its policy first thing).
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: a live thread's handle (joined only when `spinner` drops) and two out
        // parameters that live across the call.
        let rc = unsafe { libc::pthread_getschedparam(tid, &mut policy, &mut param) };
        drop(spinner);
        drop(fifo);
        assert_eq!(rc, 0);
        assert_eq!(policy, libc::SCHED_OTHER);
    }

    #[test]
    fn a_refused_variant_is_a_skip_not_a_failure() {
        // As root FIFO is allowed and this checks nothing; as a user without the capability
        // the refusal must read as a skip naming what is missing.
        match Fifo::set() {
            Ok(f) => drop(f),
            Err(ProbeError::Skip(why)) => assert!(why.contains("CAP_SYS_NICE"), "{why}"),
            Err(e) => panic!("not a skip: {e}"),
        }
    }

    #[test]
    fn unknown_values_and_rt_with_os_knobs_are_refused_naming_the_input() {
        let ctx = Context::for_tests();
        for (params, says) in [
            (Params::new().with("load", "heavy"), "load=heavy"),
            (Params::new().with("backend", "rt").with("policy", "fifo"), "backend=rt"),
        ] {
            match WakeupLatency.setup(&params, &ctx) {
                Err(ProbeError::Failed(why)) => assert!(why.contains(says), "{why}"),
                Err(e) => panic!("[{params}] {e}"),
                Ok(_) => panic!("[{params}] accepted"),
            }
        }
    }

    #[test]
    fn percentiles_are_wakes_that_happened() {
        let mut late: Vec<u64> = (1..=100).rev().map(|x| x * 1000).collect();
        let p = Percentiles::of(&mut late).unwrap();
        assert_eq!(p, Percentiles { wakes: 100, p50: 50_000, p99: 99_000, max: 100_000 });
        let mut n = Params::new();
        p.note(&mut n);
        assert_eq!(n.get("p99_us"), Some("99.0"));
        assert!(Percentiles::of(&mut []).is_none());
    }
}
