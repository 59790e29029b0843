//! The three thread systems the `threads` probes compare, and what every probe needs to set
//! them up and tear them down: the `backend=` parameter, schedlab-rt runtimes whose
//! processors are pinned, tokio runtimes (current-thread for one processor, multi-thread for
//! several, workers optionally pinned), pinned OS helper threads that stop and are joined on
//! drop, a raw futex, and [`Bench`], the instance type every threads probe returns.
//!
//! Invariants: nothing here is timed; every thread started here is gone when its owner is
//! dropped (rt processors and tokio workers are joined by their runtimes' `Drop`, helper
//! threads by [`Partner`]'s), because the `schedlab` binary measures the OS probes
//! single-threaded.

use std::any::Any;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params};
use schedlab_measure::placement::Party;
use schedlab_measure::sys::{self, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};

use crate::Instance;

/// Prefix of the names of every OS thread these probes start by name (helpers, tokio
/// workers); the smoke test checks none survives its instance.
pub(super) const THREAD_PREFIX: &str = "thprobe-";

/// Which thread system a variant measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Backend {
    /// Kernel threads: `std::thread`, `std::sync`, raw futexes.
    Os,
    /// schedlab-rt user threads.
    Rt,
    /// tokio tasks, the ecosystem's reference.
    Tokio,
}

impl Backend {
    /// Every backend, in display order.
    pub(super) const ALL: [Backend; 3] = [Backend::Os, Backend::Rt, Backend::Tokio];

    /// The parameter value.
    pub(super) fn key(self) -> &'static str {
        match self {
            Backend::Os => "os",
            Backend::Rt => "rt",
            Backend::Tokio => "tokio",
        }
    }

    /// Parses the `backend` parameter (default `os`).
    pub(super) fn from_params(p: &Params) -> Result<Backend, ProbeError> {
        match p.get("backend").unwrap_or("os") {
            "os" => Ok(Backend::Os),
            "rt" => Ok(Backend::Rt),
            "tokio" => Ok(Backend::Tokio),
            other => Err(ProbeError::Failed(format!("bad backend {other:?}: use os, rt or tokio"))),
        }
    }

    /// Time per operation with `ops` operations per iteration. User-level operations are
    /// tens of nanoseconds, so the calibrated loop cost is subtracted; kernel threads take
    /// microseconds, where it is noise.
    pub(super) fn metric(self, ops: f64) -> Metric {
        Metric::TimePerOp { ops_per_iter: ops, subtract_loop: self != Backend::Os }
    }
}

/// `base` with `backend=` set, once per backend.
pub(super) fn per_backend(base: &[Params]) -> Vec<Params> {
    base.iter()
        .flat_map(|p| Backend::ALL.iter().map(move |b| p.clone().with("backend", b.key())))
        .collect()
}

/// The CPU for probes that run on one processor: the first allowed one.
pub(super) fn one_cpu() -> usize {
    sys::allowed_cpus()[0]
}

/// Two different CPUs, or a skip on a machine (or affinity mask) with one.
pub(super) fn two_cpus() -> Result<(usize, usize), ProbeError> {
    match sys::allowed_cpus()[..] {
        [a, b, ..] => Ok((a, b)),
        _ => Err(ProbeError::Skip("needs two usable CPUs".into())),
    }
}

/// The CPUs for the `processors` parameter (1 or 2, default 1) of the probes that scale
/// with processors: the first allowed ones; a skip on a machine with fewer.
pub(super) fn processors_param(params: &Params) -> Result<Vec<usize>, ProbeError> {
    let procs: usize = params.parse_or("processors", 1).map_err(ProbeError::Failed)?;
    if !(1..=2).contains(&procs) {
        return Err(ProbeError::Failed(format!("processors={procs}: 1 or 2")));
    }
    let cpus: Vec<usize> = sys::allowed_cpus().into_iter().take(procs).collect();
    if cpus.len() < procs {
        return Err(ProbeError::Skip(format!("needs {procs} usable CPUs")));
    }
    Ok(cpus)
}

/// A CPU list as `0,1` (notes are stored as JSON, so commas are safe there).
pub(super) fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

// ---------------------------------------------------------------------------------------
// The instance every threads probe returns.
// ---------------------------------------------------------------------------------------

/// A set-up probe: the timed body as a closure, plus what it needs kept alive.
///
/// Drop order is field order: the body (and whatever it captured, such as a runtime or the
/// sending half of a channel) goes first, then `keep` (helper threads, pins), each of which
/// cleans up in its own `Drop`.
pub(super) struct Bench {
    body: Box<dyn FnMut(u64) -> Result<Timing, ProbeError>>,
    metric: Metric,
    notes: Params,
    /// Whose placement the sampler records; the measuring thread when empty.
    parties: Vec<Party>,
    keep: Vec<Box<dyn Any>>,
}

impl Bench {
    /// A bench with no body yet (its body fails until [`Bench::body`] sets one).
    pub(super) fn new(metric: Metric, notes: Params) -> Bench {
        Bench {
            body: Box::new(|_| Err(ProbeError::Failed("probe has no body".into()))),
            metric,
            notes,
            parties: Vec::new(),
            keep: Vec::new(),
        }
    }

    /// Names the threads whose placement the sampler records (instead of the measuring
    /// thread): a runtime's kernel threads, when the kernel places them.
    pub(super) fn parties(mut self, parties: Vec<Party>) -> Bench {
        self.parties = parties;
        self
    }

    /// Sets the timed body: `iters` iterations, their timing.
    pub(super) fn body(
        mut self,
        body: impl FnMut(u64) -> Result<Timing, ProbeError> + 'static,
    ) -> Bench {
        self.body = Box::new(body);
        self
    }

    /// Adds (or replaces) a note.
    pub(super) fn note(mut self, key: &str, value: impl ToString) -> Bench {
        self.notes.set(key, value);
        self
    }

    /// Keeps `partner` alive until the bench is dropped, and records its placement beside
    /// the measuring thread's (the sampler checks a pinned partner stayed on its CPU).
    pub(super) fn partner(mut self, partner: Partner) -> Bench {
        if self.parties.is_empty() {
            self.parties.push(Party::caller("main"));
        }
        self.parties.push(Party::task(&partner.role, partner.tid));
        self.keep(partner)
    }

    /// Keeps `thing` alive until the bench is dropped (after the body).
    pub(super) fn keep(mut self, thing: impl Any) -> Bench {
        self.keep.push(Box::new(thing));
        self
    }

    /// Boxed as the catalog wants it.
    pub(super) fn boxed(self) -> Box<dyn Instance> {
        Box::new(self)
    }
}

impl Workload for Bench {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        (self.body)(iters)
    }

    fn parties(&self) -> Vec<Party> {
        if self.parties.is_empty() {
            vec![Party::caller("main")]
        } else {
            self.parties.clone()
        }
    }
}

impl Instance for Bench {
    fn metric(&self) -> Metric {
        self.metric
    }

    fn notes(&self) -> Params {
        self.notes.clone()
    }
}

/// A timing whose `migrated` flag says whether the calling thread left `cpu`.
pub(super) fn timing_on(elapsed: Duration, cpu: usize) -> Timing {
    Timing { elapsed, migrated: sys::current_cpu() != Some(cpu), overhead: Duration::ZERO }
}

// ---------------------------------------------------------------------------------------
// schedlab-rt.
// ---------------------------------------------------------------------------------------

/// A schedlab-rt runtime with one processor per entry of `cpus`, processor `i`'s kernel
/// thread pinned to `cpus[i]`.
///
/// The runtime has no affinity setting, so the pinning is done from outside: its
/// processors are the kernel threads named `schedlab-vp-<i>` that appear in
/// `/proc/self/task` when it is built, and `sched_setaffinity` takes any thread id of the
/// process. (Pinning from inside, by user threads that spin on each processor, would rely
/// on the scheduler spreading them; the hook for "new processor" events would put a call
/// into every switch of the measured runtime.)
pub(crate) fn rt_pinned(cpus: &[usize]) -> Result<schedlab_rt::Runtime, ProbeError> {
    rt_pinned_with(cpus, |b| b)
}

/// [`rt_pinned`] with the builder adjusted by `configure`.
pub(crate) fn rt_pinned_with(
    cpus: &[usize],
    configure: impl FnOnce(schedlab_rt::RuntimeBuilder) -> schedlab_rt::RuntimeBuilder,
) -> Result<schedlab_rt::Runtime, ProbeError> {
    let before: Vec<libc::pid_t> = vp_threads().into_iter().map(|(tid, _)| tid).collect();
    let rt = configure(schedlab_rt::Runtime::builder().processors(cpus.len()))
        .build()
        .map_err(|e| ProbeError::io("schedlab-rt runtime", e))?;
    let ours = new_vp_threads(&before, cpus.len())?;
    let mut pinned = vec![false; cpus.len()];
    for (tid, index) in ours {
        let Some(&cpu) = cpus.get(index) else { continue };
        if std::mem::replace(&mut pinned[index], true) {
            return Err(ProbeError::Failed(format!(
                "rt: two new threads named schedlab-vp-{index} (another runtime starting?)"
            )));
        }
        sys::pin_thread(tid, cpu)?;
    }
    Ok(rt)
}

/// The processor threads of a runtime just built: those not in `before`. Each processor
/// names its kernel thread as it starts, so this waits (up to 2 s) for `n` of them.
fn new_vp_threads(
    before: &[libc::pid_t],
    n: usize,
) -> Result<Vec<(libc::pid_t, usize)>, ProbeError> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let ours: Vec<(libc::pid_t, usize)> =
            vp_threads().into_iter().filter(|(tid, _)| !before.contains(tid)).collect();
        if ours.len() >= n {
            return Ok(ours);
        }
        if Instant::now() > deadline {
            return Err(ProbeError::Failed(format!(
                "rt: found {} of {n} processor threads",
                ours.len()
            )));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The kernel threads of this process that run schedlab-rt processors: (thread id,
/// processor index), from their names.
fn vp_threads() -> Vec<(libc::pid_t, usize)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        let index = comm.trim().strip_prefix("schedlab-vp-")?.parse().ok()?;
        Some((tid, index))
    })
    .collect()
}

/// A schedlab-rt runtime with `n` processors, placed by the kernel, and its processors'
/// kernel threads as parties (`vp0`, `vp1`...) for the placement record.
pub(crate) fn rt_unpinned(n: usize) -> Result<(schedlab_rt::Runtime, Vec<Party>), ProbeError> {
    let before: Vec<libc::pid_t> = vp_threads().into_iter().map(|(tid, _)| tid).collect();
    let rt = schedlab_rt::Runtime::builder()
        .processors(n)
        .build()
        .map_err(|e| ProbeError::io("schedlab-rt runtime", e))?;
    // The record is a note, not the measurement: processors not found (or found twice, when
    // another runtime starts at the same moment, as in a test harness) leave it to the
    // measuring thread rather than fail the probe.
    let mut ours = new_vp_threads(&before, n).unwrap_or_default();
    ours.sort_by_key(|(_, index)| *index);
    let indices: Vec<usize> = ours.iter().map(|(_, i)| *i).collect();
    if indices != (0..n).collect::<Vec<_>>() {
        return Ok((rt, Vec::new()));
    }
    let parties = ours.iter().map(|(tid, i)| Party::task(&format!("vp{i}"), *tid)).collect();
    Ok((rt, parties))
}

/// `rt.block_on(f)`, a deadlock report becoming a failure.
pub(super) fn rt_run<T: Send + 'static>(
    rt: &schedlab_rt::Runtime,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ProbeError> {
    rt.block_on(f).map_err(|d| ProbeError::Failed(format!("schedlab-rt: {d}")))
}

// ---------------------------------------------------------------------------------------
// tokio.
// ---------------------------------------------------------------------------------------

/// A tokio current-thread runtime: tasks run on the thread that calls `block_on`.
pub(super) fn tokio_current() -> Result<tokio::runtime::Runtime, ProbeError> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| ProbeError::io("tokio current-thread runtime", e))
}

/// A tokio multi-thread runtime with `workers` worker threads placed by the kernel, and the
/// workers as parties (`worker0`, `worker1`...) for the placement record. Each worker
/// reports its thread id as it starts; this waits (up to 2 s) for all of them.
pub(super) fn tokio_unpinned(
    workers: usize,
) -> Result<(tokio::runtime::Runtime, Vec<Party>), ProbeError> {
    let tids = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = tids.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(format!("{THREAD_PREFIX}tokio"))
        .on_thread_start(move || {
            seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(sys::gettid())
        })
        .build()
        .map_err(|e| ProbeError::io("tokio multi-thread runtime", e))?;
    let deadline = Instant::now() + Duration::from_secs(2);
    let started = loop {
        let started = tids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if started.len() >= workers || Instant::now() > deadline {
            break started;
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    // Only worker threads have started so far (nothing was given to the blocking pool).
    let parties = started
        .iter()
        .take(workers)
        .enumerate()
        .map(|(i, tid)| Party::task(&format!("worker{i}"), *tid))
        .collect();
    Ok((rt, parties))
}

/// A tokio multi-thread runtime with `workers` worker threads; with `pin`, worker `i` is
/// pinned to `pin[i % pin.len()]` as it starts.
pub(super) fn tokio_multi(
    workers: usize,
    pin: Option<Vec<usize>>,
) -> Result<tokio::runtime::Runtime, ProbeError> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.worker_threads(workers).thread_name(format!("{THREAD_PREFIX}tokio"));
    if let Some(cpus) = pin {
        let next = AtomicUsize::new(0);
        // A failed pin leaves the worker unpinned; the probes that care check where their
        // tasks ran and flag the sample.
        b.on_thread_start(move || {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let _ = sys::pin_to(cpus[i % cpus.len()]);
        });
    }
    b.build().map_err(|e| ProbeError::io("tokio multi-thread runtime", e))
}

/// tokio on `cpus` (one or more) as the thread probes that scale with processors use it: on
/// one CPU a current-thread runtime with the calling thread pinned there (the pin is
/// returned, to keep), on several a multi-thread runtime with a worker pinned to each. The
/// third value is the `runtime` note.
pub(super) fn tokio_on(
    cpus: &[usize],
) -> Result<(tokio::runtime::Runtime, Option<PinGuard>, String), ProbeError> {
    if let [cpu] = cpus {
        let rt = tokio_current()?;
        Ok((rt, Some(PinGuard::pin(*cpu)?), "tokio current_thread workers=1".into()))
    } else {
        let rt = tokio_multi(cpus.len(), Some(cpus.to_vec()))?;
        Ok((rt, None, format!("tokio multi_thread workers={}", cpus.len())))
    }
}

// ---------------------------------------------------------------------------------------
// OS helper threads.
// ---------------------------------------------------------------------------------------

/// A helper OS thread that is told to stop and joined when dropped.
pub(super) struct Partner {
    handle: Option<JoinHandle<()>>,
    stop: Option<Box<dyn FnOnce()>>,
    /// Its role (the thread's name without the prefix) and kernel thread id, for the
    /// placement record.
    role: String,
    tid: libc::pid_t,
}

impl Partner {
    /// Starts `body` on a thread named `thprobe-<role>`, pinned to `cpu` when given; returns
    /// once the thread runs there (or with the pinning error). `stop` must make `body`
    /// return; it runs on drop, before the join.
    pub(super) fn spawn(
        role: &str,
        cpu: Option<usize>,
        body: impl FnOnce() + Send + 'static,
        stop: impl FnOnce() + 'static,
    ) -> Result<Partner, ProbeError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(format!("{THREAD_PREFIX}{role}"))
            .spawn(move || {
                let pinned = cpu.map_or(Ok(()), sys::pin_to).map(|()| sys::gettid());
                let ok = pinned.is_ok();
                let _ = ready_tx.send(pinned);
                if ok {
                    body();
                }
            })
            .map_err(|e| ProbeError::io("spawn helper thread", e))?;
        let mut partner = Partner { handle: Some(handle), stop: None, role: role.into(), tid: 0 };
        match ready_rx.recv() {
            Ok(Ok(tid)) => {
                partner.stop = Some(Box::new(stop));
                partner.tid = tid;
                Ok(partner)
            }
            // The thread has returned (or died): dropping `partner` joins it.
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ProbeError::Failed("helper thread died at start".into())),
        }
    }
}

impl Drop for Partner {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Blocks while `word` holds `expected` (a wake-up, a changed value or a signal ends it;
/// callers re-check their condition).
pub(super) fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic for the duration of the call; a null
    // timeout means no timeout. FUTEX_WAIT only reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Wakes up to `n` threads blocked in [`futex_wait`] on `word`.
pub(super) fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE does not access memory
    // through the pointer beyond using its address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}

/// Spins until `done()` holds; a failure naming `what` after `limit`, so a lost wake-up
/// fails the probe instead of hanging the run.
#[inline]
pub(super) fn spin_until(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) -> Result<(), ProbeError> {
    let mut n = 0u32;
    let mut started: Option<Instant> = None;
    while !done() {
        std::hint::spin_loop();
        n = n.wrapping_add(1);
        // Read the clock only now and then: the common wait is far shorter than the limit.
        if n & 1023 == 0 {
            let s = *started.get_or_insert_with(Instant::now);
            if s.elapsed() > limit {
                return Err(ProbeError::Failed(format!("{what}: no answer after {limit:?}")));
            }
        }
    }
    Ok(())
}
