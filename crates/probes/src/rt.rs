//! schedlab-rt's kernel-thread semantics, measured: what preemption costs and how late it
//! comes, what the explicit blocking wrapper costs when nothing blocks, and how much compute
//! a processor keeps while user threads block in the kernel (docs/SOURCES.md: scheduler
//! activations; Go's sysmon).
//!
//! Every probe builds its own runtime in setup (never timed) with the scheduling it
//! measures, and its `Drop` stops helper threads and the runtime, so the binary is back to
//! one thread before the next probe. Values are times per operation; the ratios the issue
//! asks for (slowdown against cooperative, throughput against nothing blocked) come from
//! the reference variants measured beside them (`quantum=coop`, `mode=unblocked`), which
//! `compare` and the report line up.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::stats;
use schedlab_measure::sys::{self, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};
use schedlab_rt::{Event, Preemption, Runtime};

use crate::{Context, Info, Instance, Probe, Suite};

/// The rt probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(FastPath), Box::new(Overhead), Box::new(Latency), Box::new(Throughput)]
}

// ---------------------------------------------------------------------------------------
// Shared parts.
// ---------------------------------------------------------------------------------------

/// A set-up probe: the timed body, fixed notes, notes the body updates (read after the
/// samples), and what must outlive the body (dropped after it, in order).
struct Run {
    body: Box<dyn FnMut(u64) -> Result<Timing, ProbeError>>,
    metric: Metric,
    notes: Params,
    live: Arc<Mutex<Params>>,
    /// Dropped last, in order (helpers, pipes, pins).
    _keep: Vec<Box<dyn std::any::Any>>,
}

impl Workload for Run {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        (self.body)(iters)
    }
}

impl Instance for Run {
    fn metric(&self) -> Metric {
        self.metric
    }

    fn notes(&self) -> Params {
        let mut n = self.notes.clone();
        for (k, v) in &self.live.lock().unwrap_or_else(|e| e.into_inner()).0 {
            n.set(k, v);
        }
        n
    }
}

/// Counts the preemptions of every user thread but one (the measuring one).
#[derive(Default)]
struct PreemptCount {
    n: AtomicU64,
    /// The thread id not counted (0: none).
    except: AtomicU64,
}

/// A runtime of `processors` processors with `preemption` and transparent blocking detection on or
/// off, counting the preemptions it makes in `preempted`.
fn runtime(
    processors: usize,
    preemption: Preemption,
    transparent: bool,
    preempted: Arc<PreemptCount>,
) -> Result<Runtime, ProbeError> {
    Runtime::builder()
        .processors(processors)
        .preemption(preemption)
        .transparent_blocking(transparent)
        .on_event(move |e| {
            if let Event::Preempted { thread, .. } = e {
                if thread.as_u64() != preempted.except.load(Ordering::Relaxed) {
                    preempted.n.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
        .build()
        .map_err(|e| ProbeError::io("schedlab-rt runtime", e))
}

/// `rt.block_on(f)`, a deadlock report becoming a failure.
fn block_on<T: Send + 'static>(
    rt: &Runtime,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ProbeError> {
    rt.block_on(f).map_err(|d| ProbeError::Failed(d.to_string()))
}

/// One unit of compute: a few hundred dependent integer operations (a xorshift chain),
/// which the compiler cannot fold.
#[inline(never)]
fn work_unit(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..256 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Does `units` units of compute, checking nothing else (no yield).
fn compute(units: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..units {
        acc = acc.wrapping_add(work_unit(i ^ acc));
    }
    black_box(acc)
}

/// Every combination of `outer` and `inner` values, `outer` varying slowest; each set
/// names `inner` first.
fn grid(outer: (&str, &[&str]), inner: (&str, &[&str])) -> Vec<Params> {
    outer
        .1
        .iter()
        .flat_map(|o| inner.1.iter().map(move |i| Params::new().with(inner.0, i).with(outer.0, o)))
        .collect()
}

/// The suite's sampling with samples of at least `ms` (fewer of them, at most 7), for
/// probes whose effect needs long samples to show; smoke settings unchanged.
fn long_samples(suite: Suite, default: &Settings, ms: u64) -> Settings {
    let mut s = default.clone();
    if suite != Suite::Smoke {
        s.target = Duration::from_millis(ms);
        s.samples = s.samples.min(7);
    }
    s
}

/// Thread `i`'s share of `iters` units split over `k` threads.
fn share(iters: u64, k: u64, i: u64) -> u64 {
    iters / k + u64::from(i < iters % k)
}

fn parse_quantum(s: &str) -> Result<Preemption, ProbeError> {
    Ok(match s {
        "coop" => Preemption::Cooperative,
        "10ms" => Preemption::Quantum(Duration::from_millis(10)),
        "1ms" => Preemption::Quantum(Duration::from_millis(1)),
        "100us" => Preemption::Quantum(Duration::from_micros(100)),
        _ => return Err(ProbeError::Failed(format!("quantum={s}: coop, 10ms, 1ms or 100us"))),
    })
}

// ---------------------------------------------------------------------------------------
// rt.blocking.fastpath
// ---------------------------------------------------------------------------------------

struct FastPath;

impl Probe for FastPath {
    fn info(&self) -> Info {
        Info {
            id: "rt.blocking.fastpath",
            doc: "Cost of schedlab_rt::blocking() around a call that does not block (getppid), the bare call subtracted; per call",
            unit: Unit::Nanos,
            mirrors: "- (Go's entersyscall/exitsyscall pair, ~30 ns)",
            requires: "",
        }
    }

    fn setup(&self, _params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let cpu = sys::allowed_cpus()[0];
        let rt = runtime(1, Preemption::default(), true, Arc::new(PreemptCount::default()))?;
        let live = Arc::new(Mutex::new(Params::new()));
        let l = live.clone();
        let body = move |iters: u64| {
            let (with, bare) = block_on(&rt, move || {
                // SAFETY: getppid has no preconditions and cannot fail.
                let call = || unsafe { libc::getppid() };
                let t = Instant::now();
                for _ in 0..iters {
                    black_box(schedlab_rt::blocking(call));
                }
                let with = t.elapsed();
                let t = Instant::now();
                for _ in 0..iters {
                    black_box(call());
                }
                (with, t.elapsed())
            })?;
            l.lock().unwrap_or_else(|e| e.into_inner()).set(
                "bare_call_ns",
                format!("{:.1}", bare.as_nanos() as f64 / iters.max(1) as f64),
            );
            // The bare calls are the overhead: the value is what the wrapper adds.
            Ok(Timing { elapsed: with, migrated: false, overhead: bare.min(with) })
        };
        Ok(Box::new(Run {
            body: Box::new(body),
            metric: Metric::per_ops(1.0),
            notes: Params::new().with("cpus", cpu).with("call", "getppid"),
            live,
            _keep: Vec::new(),
        }))
    }
}

// ---------------------------------------------------------------------------------------
// rt.preempt.overhead
// ---------------------------------------------------------------------------------------

struct Overhead;

impl Probe for Overhead {
    fn info(&self) -> Info {
        Info {
            id: "rt.preempt.overhead",
            doc: "Compute time per work unit (256 xorshift steps) of `runnable` never-yielding user threads on one processor, by quantum (coop: the reference); preemptions/s in notes",
            unit: Unit::Nanos,
            mirrors: "- (seed 000's cooperative vs preemptive cost; Go's 10 ms forced preemption)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let quanta: &[&str] = match suite {
            Suite::Smoke => &["coop", "1ms"],
            _ => &["coop", "10ms", "1ms", "100us"],
        };
        let runnable: &[&str] = match suite {
            Suite::Smoke => &["2"],
            _ => &["1", "2"],
        };
        grid(("runnable", runnable), ("quantum", quanta))
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // A sample must span many quanta to show their cost.
        long_samples(suite, default, 100)
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let preemption = parse_quantum(params.get("quantum").unwrap_or("coop"))?;
        let runnable: u64 = params.parse_or("runnable", 2).map_err(ProbeError::Failed)?;
        if !(1..=8).contains(&runnable) {
            return Err(ProbeError::Failed(format!("runnable={runnable}: 1 to 8")));
        }
        let cpu = sys::allowed_cpus()[0];
        let pin = PinGuard::pin(cpu)?;
        let preempted = Arc::new(PreemptCount::default());
        let rt = runtime(1, preemption, false, preempted.clone())?;
        let live = Arc::new(Mutex::new(Params::new()));
        let (l, total_time) = (live.clone(), Arc::new(Mutex::new(Duration::ZERO)));
        let body = move |iters: u64| {
            let before = preempted.n.load(Ordering::Relaxed);
            let p = preempted.clone();
            let elapsed = block_on(&rt, move || {
                // The measuring thread's own preemptions (while it spawns) do not count:
                // `runnable` is the number of computing threads.
                p.except.store(schedlab_rt::current().id().as_u64(), Ordering::Relaxed);
                let t = Instant::now();
                let hs: Vec<_> = (0..runnable)
                    .map(|k| {
                        let n = share(iters, runnable, k);
                        schedlab_rt::spawn(move || compute(n))
                    })
                    .collect();
                for h in hs {
                    black_box(h.join().unwrap_or(0));
                }
                t.elapsed()
            })?;
            let n = preempted.n.load(Ordering::Relaxed) - before;
            let mut total = total_time.lock().unwrap_or_else(|e| e.into_inner());
            *total += elapsed;
            let mut notes = l.lock().unwrap_or_else(|e| e.into_inner());
            let so_far: u64 =
                notes.get("preemptions").and_then(|v| v.parse().ok()).unwrap_or(0) + n;
            notes.set("preemptions", so_far);
            notes.set("preemptions_per_s", format!("{:.1}", so_far as f64 / total.as_secs_f64()));
            Ok(Timing { elapsed, migrated: false, overhead: Duration::ZERO })
        };
        Ok(Box::new(Run {
            body: Box::new(body),
            metric: Metric::per_ops(1.0),
            notes: Params::new().with("cpus", cpu).with("processors", 1),
            live,
            _keep: vec![Box::new(pin)],
        }))
    }
}

// ---------------------------------------------------------------------------------------
// rt.preempt.latency
// ---------------------------------------------------------------------------------------

struct Latency;

impl Probe for Latency {
    fn info(&self) -> Info {
        Info {
            id: "rt.preempt.latency",
            doc: "Delay from due time to running of a user thread woken every 1 ms (schedlab_rt::sleep) while another spins without yielding on the same processor; median per sample, p99 and max in notes",
            unit: Unit::Nanos,
            mirrors: "- (cyclictest-style wake-up latency, here under a user-level spinner)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let q: &[&str] = match suite {
            Suite::Smoke => &["1ms"],
            _ => &["1ms", "10ms"],
        };
        q.iter().map(|q| Params::new().with("quantum", q)).collect()
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // Enough wake-ups per sample for a median, whatever the quantum.
        long_samples(suite, default, 150)
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let quantum = params.get("quantum").unwrap_or("1ms");
        let preemption = parse_quantum(quantum)?;
        if preemption == Preemption::Cooperative {
            return Err(ProbeError::Failed(
                "quantum=coop: a cooperative spinner never lets the sleeper run".into(),
            ));
        }
        let cpu = sys::allowed_cpus()[0];
        let pin = PinGuard::pin(cpu)?;
        let rt = runtime(1, preemption, false, Arc::new(PreemptCount::default()))?;
        let live = Arc::new(Mutex::new(Params::new()));
        let l = live.clone();
        let all: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
        let body = move |iters: u64| {
            let t0 = Instant::now();
            let mut delays = block_on(&rt, move || {
                let stop = Arc::new(AtomicBool::new(false));
                let s = stop.clone();
                let spinner = schedlab_rt::spawn(move || {
                    let mut x = 0u64;
                    while !s.load(Ordering::Relaxed) {
                        x = x.wrapping_add(work_unit(x));
                    }
                    black_box(x)
                });
                let sleeper = schedlab_rt::spawn(move || {
                    let mut d = Vec::with_capacity(iters as usize);
                    for _ in 0..iters {
                        let due = Instant::now() + Duration::from_millis(1);
                        schedlab_rt::sleep(Duration::from_millis(1));
                        d.push(Instant::now().saturating_duration_since(due).as_nanos() as u64);
                    }
                    d
                });
                let d = sleeper.join().unwrap_or_default();
                stop.store(true, Ordering::Relaxed);
                let _ = spinner.join();
                d
            })?;
            let wall = t0.elapsed();
            if delays.is_empty() {
                return Err(ProbeError::Failed("the sleeper recorded no wake-up".into()));
            }
            // Nearest-rank, as the timelines' overshoots: a percentile of wake-up latencies
            // is a wake-up that happened (cyclictest reports them so).
            delays.sort_unstable();
            let p50 = stats::nearest_rank(&delays, 50.0);
            let mut a = all.lock().unwrap_or_else(|e| e.into_inner());
            a.extend_from_slice(&delays);
            a.sort_unstable();
            let mut n = l.lock().unwrap_or_else(|e| e.into_inner());
            n.set("wakeups", a.len());
            n.set("p99_us", format!("{:.1}", stats::nearest_rank(&a, 99.0) as f64 / 1e3));
            n.set("max_us", format!("{:.1}", a[a.len() - 1] as f64 / 1e3));
            // The value is the sample's median delay: everything else is overhead.
            let value = Duration::from_nanos(p50.saturating_mul(iters));
            Ok(Timing {
                elapsed: wall.max(value),
                migrated: false,
                overhead: wall.saturating_sub(value),
            })
        };
        Ok(Box::new(Run {
            body: Box::new(body),
            metric: Metric::per_ops(1.0),
            notes: Params::new().with("cpus", cpu).with("waker", "schedlab_rt::sleep(1ms) timer"),
            live,
            _keep: vec![Box::new(pin)],
        }))
    }
}

// ---------------------------------------------------------------------------------------
// rt.blocking.throughput
// ---------------------------------------------------------------------------------------

struct Throughput;

/// Compute threads and blocked readers of `rt.blocking.throughput`.
const K: usize = 2;

/// How often the writers feed each pipe: a thread blocked in I/O that wakes now and then
/// (a hundred times a second), as a server's idle connections do.
const WRITE_EVERY: Duration = Duration::from_millis(10);

/// Pipes written slowly by OS threads until dropped; dropping stops the writers, wakes
/// every reader with a last byte, and closes everything.
struct SlowPipes {
    readers: Vec<i32>,
    writers: Vec<i32>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl SlowPipes {
    fn new(n: usize) -> Result<SlowPipes, ProbeError> {
        let mut p = SlowPipes {
            readers: vec![],
            writers: vec![],
            stop: Arc::new(AtomicBool::new(false)),
            threads: vec![],
        };
        for _ in 0..n {
            let (r, w) = sys::pipe()?;
            p.readers.push(std::os::fd::IntoRawFd::into_raw_fd(r));
            p.writers.push(std::os::fd::IntoRawFd::into_raw_fd(w));
        }
        for &w in &p.writers {
            let stop = p.stop.clone();
            p.threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(WRITE_EVERY);
                    // SAFETY: one byte from a valid buffer to our pipe.
                    unsafe { libc::write(w, [1u8].as_ptr().cast(), 1) };
                }
            }));
        }
        Ok(p)
    }
}

impl Drop for SlowPipes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for &fd in self.readers.iter().chain(&self.writers) {
            // SAFETY: descriptors this struct opened and nobody uses any more.
            unsafe { libc::close(fd) };
        }
    }
}

/// Reads from `fd` until `stop`, the way `mode` says; a user thread yields after each
/// read (it handled its input), which also bounds how long `mode=none` can starve the
/// computing threads.
fn read_loop(fd: i32, mode: &str, stop: &AtomicBool) {
    let mut b = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        match mode {
            "explicit" => {
                let _ = schedlab_rt::blocking::read(fd, &mut b);
            }
            _ => {
                // SAFETY: a valid buffer of its length.
                unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
            }
        }
        if mode != "os" {
            schedlab_rt::yield_now();
        }
    }
}

impl Probe for Throughput {
    fn info(&self) -> Info {
        Info {
            id: "rt.blocking.throughput",
            doc: "Compute time per work unit of 2 user threads per processor (rt: that many processors; os: kernel threads pinned to that many CPUs) while 2 others per processor block in read() on pipes fed every 10 ms: unblocked (reference), explicit (blocking::read), transparent (plain read), none (no hand-off), os (kernel threads, computing ones pinned)",
            unit: Unit::Nanos,
            mirrors: "- (seed 003: a processor that stays busy when a user thread blocks in the kernel)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let modes: &[&str] = match suite {
            Suite::Smoke => &["unblocked", "transparent"],
            _ => &["unblocked", "explicit", "transparent", "none", "os"],
        };
        let procs: &[&str] = match suite {
            Suite::Smoke => &["1"],
            _ => &["1", "2"],
        };
        grid(("processors", procs), ("mode", modes))
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        long_samples(suite, default, 60)
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let mode = params.get("mode").unwrap_or("transparent").to_string();
        if !["unblocked", "explicit", "transparent", "none", "os"].contains(&mode.as_str()) {
            return Err(ProbeError::Failed(format!(
                "mode={mode}: unblocked, explicit, transparent, none or os"
            )));
        }
        let nprocs: usize = params.parse_or("processors", 1).map_err(ProbeError::Failed)?;
        let allowed = sys::allowed_cpus();
        if !(1..=2).contains(&nprocs) {
            return Err(ProbeError::Failed(format!("processors={nprocs}: 1 or 2")));
        }
        if allowed.len() < nprocs {
            return Err(ProbeError::Skip(format!("needs {nprocs} usable CPUs")));
        }
        let cpus: Vec<usize> = allowed[..nprocs].to_vec();
        // K computing and K blocked threads per processor.
        let k = K * nprocs;
        let pipes = if mode == "unblocked" { None } else { Some(SlowPipes::new(k)?) };
        let fds: Vec<i32> = pipes.as_ref().map_or(vec![], |p| p.readers.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let notes = Params::new()
            .with("cpus", cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","))
            .with("compute_threads", k)
            .with("blocked_threads", if mode == "unblocked" { 0 } else { k });
        let body: Box<dyn FnMut(u64) -> Result<Timing, ProbeError>>;
        let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
        if mode == "os" {
            let mut readers = Vec::new();
            for &fd in &fds {
                let s = stop.clone();
                readers.push(std::thread::spawn(move || read_loop(fd, "os", &s)));
            }
            body = Box::new(move |iters: u64| {
                let t = Instant::now();
                let hs: Vec<_> = (0..k as u64)
                    .map(|i| {
                        let n = share(iters, k as u64, i);
                        let cpu = cpus[i as usize % cpus.len()];
                        std::thread::spawn(move || {
                            let _pin = PinGuard::pin(cpu);
                            compute(n)
                        })
                    })
                    .collect();
                for h in hs {
                    black_box(h.join().unwrap_or(0));
                }
                Ok(Timing { elapsed: t.elapsed(), migrated: false, overhead: Duration::ZERO })
            });
            keep.push(Box::new(ReaderThreads { stop: stop.clone(), threads: readers }));
        } else {
            let transparent = mode == "transparent";
            let rt = runtime(
                nprocs,
                Preemption::default(),
                transparent,
                Arc::new(PreemptCount::default()),
            )?;
            let mut readers = Vec::new();
            for &fd in &fds {
                let (s, m) = (stop.clone(), mode.clone());
                readers.push(rt.spawn(move || read_loop(fd, &m, &s)));
            }
            let rt = Arc::new(rt);
            let r2 = rt.clone();
            body = Box::new(move |iters: u64| {
                let elapsed = block_on(&r2, move || {
                    let t = Instant::now();
                    let hs: Vec<_> = (0..k as u64)
                        .map(|i| {
                            let n = share(iters, k as u64, i);
                            schedlab_rt::spawn(move || compute(n))
                        })
                        .collect();
                    for h in hs {
                        black_box(h.join().unwrap_or(0));
                    }
                    t.elapsed()
                })?;
                Ok(Timing { elapsed, migrated: false, overhead: Duration::ZERO })
            });
            keep.push(Box::new(RtReaders { stop: stop.clone(), readers, _rt: rt }));
        }
        // Drop order: readers are told to stop before the pipes' last byte wakes them.
        keep.push(Box::new(pipes));
        Ok(Box::new(Run {
            body,
            metric: Metric::per_ops(1.0),
            notes,
            live: Arc::new(Mutex::new(Params::new())),
            _keep: keep,
        }))
    }
}

/// Reader OS threads of the `os` mode: stopped, then joined once the pipes wake them.
struct ReaderThreads {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for ReaderThreads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The writers still run (the pipes drop after us): every reader wakes within
        // WRITE_EVERY and sees `stop`.
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Reader user threads of the rt modes, and their runtime.
struct RtReaders {
    stop: Arc<AtomicBool>,
    readers: Vec<schedlab_rt::JoinHandle<()>>,
    _rt: Arc<Runtime>,
}

impl Drop for RtReaders {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every rt probe runs once in smoke settings and produces sensible values; the
    //! preemption counter sees preemptions only where the probe says it should.
    use super::*;
    use crate::testkit;

    #[test]
    fn every_rt_probe_runs_in_smoke_settings() {
        let ctx = Context::for_tests();
        for p in probes() {
            for params in p.variants(Suite::Smoke) {
                let inst = testkit::smoke_one(&*p, &params, &ctx);
                assert!(inst.is_some(), "{} [{params}] skipped", p.info().id);
            }
        }
    }

    #[test]
    fn one_runnable_thread_is_never_preempted() {
        let mut inst = Overhead
            .setup(
                &Params::new().with("quantum", "100us").with("runnable", 1),
                &Context::for_tests(),
            )
            .unwrap();
        inst.run(20_000).unwrap();
        assert_eq!(inst.notes().get("preemptions"), Some("0"));
        let mut inst = Overhead
            .setup(
                &Params::new().with("quantum", "100us").with("runnable", 2),
                &Context::for_tests(),
            )
            .unwrap();
        inst.run(20_000).unwrap();
        let n: u64 = inst.notes().get("preemptions").unwrap().parse().unwrap();
        assert!(n > 0, "two runnable threads and a 100 µs quantum, yet no preemption");
    }

    #[test]
    fn the_sleeper_records_every_wake_up() {
        let mut inst =
            Latency.setup(&Params::new().with("quantum", "1ms"), &Context::for_tests()).unwrap();
        inst.run(20).unwrap();
        assert_eq!(inst.notes().get("wakeups"), Some("20"));
    }
}
