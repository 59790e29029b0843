//! `threads.wake`: the latency from waking a blocked thread on one CPU until it runs on
//! another — the cost that decides a runtime's idle policy. On this kind of VM an idle
//! virtual CPU halts at once, so a cross-CPU wake-up of a sleeping kernel thread costs
//! tens of microseconds while a processor that is still spinning picks work up in well
//! under one; the `idle_us` parameter says how long the woken side sat idle first (10 µs:
//! inside schedlab-rt's default 50 µs search; 200 µs: long after it went to sleep).
//!
//! Protocol, per iteration (the waker keeps its CPU busy throughout):
//! 1. The woken thread W has acknowledged the previous wake-up and blocked again; the
//!    waker spins `idle_us`.
//! 2. The waker bumps the shared sequence number `go`, reads the clock (t0) and wakes W.
//! 3. W, on running, reads the clock (t1), records t1 and its CPU, then publishes the
//!    sequence number as `ack` and blocks again.
//! 4. The waker spins until `ack` matches and adds t1 − t0 to the sample's latency.
//!
//! The sample's wall time is reported with everything but the summed latencies as the
//! probe's own overhead, so the value is the mean latency per wake-up and calibration still
//! aims at the usual wall time. A sample in which W ran on the waker's CPU is flagged as
//! migrated. Both clocks are CLOCK_MONOTONIC, one system-wide clock.
//!
//! Who is who:
//! - os: the measuring thread (pinned to the first CPU) wakes a helper kernel thread pinned
//!   to the second, blocked in FUTEX_WAIT.
//! - rt: a two-processor runtime with one processor pinned to each CPU; the waker is a user
//!   thread that spins, so its processor stays busy and the parked user thread it unparks
//!   (queued on the waker's processor) must be taken by the other processor: searching, or
//!   woken from its futex.
//! - tokio: a one-worker multi-thread runtime pinned to the second CPU; the waker is the
//!   measuring thread outside it, calling `Notify::notify_one`. (A waker task inside the
//!   runtime cannot keep its worker busy: tokio puts the woken task in that worker's LIFO
//!   slot, which other workers do not steal, so it would never run.)

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sys::{self, PinGuard};
use schedlab_measure::{ProbeError, Timing};

use super::backend::{
    self, futex_wait, futex_wake, rt_pinned, rt_run, spin_until, Backend, Bench, Partner,
};
use crate::{Context, Info, Instance, Probe, Suite};

struct WakeProbe;

/// The wake-up latency probe.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(WakeProbe)]
}

/// How long the waker waits for an acknowledgement before declaring the wake-up lost.
const LOST: Duration = Duration::from_secs(2);

/// `ack` before the woken thread is ready.
const NOT_READY: u32 = u32::MAX;

impl Probe for WakeProbe {
    fn info(&self) -> Info {
        Info {
            id: "threads.wake",
            doc: "Latency from waking a blocked thread (futex, rt unpark, tokio Notify) on one CPU until it runs on the other, after it sat idle idle_us; per wake-up",
            unit: Unit::Nanos,
            mirrors: "- (the cross-CPU wake-up behind bimodal ping-pongs, docs/SOURCES.md; cf. schbench/cyclictest wake-up latency); waker and woken pinned to two CPUs",
            requires: "2 CPUs",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let idle: &[u64] = match suite {
            Suite::Smoke => &[10],
            Suite::Quick => &[10, 200],
            // Either side of schedlab-rt's default 50 µs search, to trace the edge.
            Suite::Full => &[10, 30, 100, 200],
        };
        backend::per_backend(
            &idle.iter().map(|i| Params::new().with("idle_us", i)).collect::<Vec<_>>(),
        )
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let backend = Backend::from_params(params)?;
        let idle_us: u64 = params.parse_or("idle_us", 10).map_err(ProbeError::Failed)?;
        if idle_us > 1_000_000 {
            return Err(ProbeError::Failed(format!("idle_us={idle_us}: at most 1000000")));
        }
        let idle = Duration::from_micros(idle_us);
        let (c0, c1) = backend::two_cpus()?;
        let sh = Arc::new(Shared::new());
        let bench = Bench::new(Metric::per_ops(1.0), Params::new().with("idle_us", idle_us));
        Ok(match backend {
            Backend::Os => {
                let pin = PinGuard::pin(c0)?;
                let (w, s) = (sh.clone(), sh.clone());
                let partner = Partner::spawn(
                    "woken",
                    Some(c1),
                    move || os_woken(&w),
                    move || {
                        s.stop.store(true, Ordering::Release);
                        s.go.fetch_add(1, Ordering::AcqRel);
                        futex_wake(&s.go, 1);
                    },
                )?;
                spin_until("futex woken thread start", LOST, || sh.ready())?;
                bench
                    .note("cpus", format!("{c0},{c1}"))
                    .note("waker", "measuring thread, FUTEX_WAKE")
                    .body(move |iters| {
                        let out = waker(&sh, iters, idle, || futex_wake(&sh.go, 1))?;
                        Ok(out.timing())
                    })
                    .partner(partner)
                    .keep(pin)
            }
            Backend::Rt => {
                let rt = rt_pinned(&[c0, c1])?;
                bench
                    .note("cpus", format!("{c0},{c1}"))
                    .note("runtime", "rt processors=2")
                    .note("waker", "user thread spinning on the other processor, Thread::unpark")
                    .body(move |iters| {
                        let sh = sh.clone();
                        let out = rt_run(&rt, move || rt_waker(&sh, iters, idle))??;
                        Ok(out.timing())
                    })
            }
            Backend::Tokio => {
                let pin = PinGuard::pin(c0)?;
                let tk = backend::tokio_multi(1, Some(vec![c1]))?;
                let notify = Arc::new(tokio::sync::Notify::new());
                let (w, n) = (sh.clone(), notify.clone());
                tk.spawn(async move { tokio_woken(&w, &n).await });
                spin_until("tokio woken task start", LOST, || sh.ready())?;
                bench
                    .note("cpus", format!("{c0},{c1}"))
                    .note("runtime", "tokio multi_thread workers=1")
                    .note("waker", "measuring thread outside the runtime, Notify::notify_one")
                    .body(move |iters| {
                        let out = waker(&sh, iters, idle, || notify.notify_one())?;
                        // The runtime and its parked task go with the body.
                        let _ = &tk;
                        Ok(out.timing())
                    })
                    .keep(pin)
            }
        }
        .boxed())
    }
}

/// What the waker and the woken thread share.
struct Shared {
    /// Clock origin for the timestamps exchanged as integers.
    base: Instant,
    /// Sequence number of the latest wake-up request (the futex word for kernel threads).
    go: AtomicU32,
    /// The last request the woken thread handled, or [`NOT_READY`].
    ack: AtomicU32,
    /// When the woken thread ran, in ns since `base`.
    woke_at: AtomicU64,
    /// Where it ran.
    woke_cpu: AtomicUsize,
    stop: AtomicBool,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            base: Instant::now(),
            go: AtomicU32::new(0),
            ack: AtomicU32::new(NOT_READY),
            woke_at: AtomicU64::new(0),
            woke_cpu: AtomicUsize::new(usize::MAX),
            stop: AtomicBool::new(false),
        }
    }

    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// The woken thread is up and blocked waiting for the current sequence number.
    fn ready(&self) -> bool {
        self.ack.load(Ordering::Acquire) == self.go.load(Ordering::Acquire)
    }

    /// Step 3 of the protocol, run by the woken thread as soon as it runs: whether it
    /// handled a wake-up, was woken spuriously (block again) or should stop.
    #[inline]
    fn woken(&self, seen: &mut u32) -> Woke {
        let t1 = self.now_ns();
        let go = self.go.load(Ordering::Acquire);
        if self.stop.load(Ordering::Acquire) {
            return Woke::Stop;
        }
        if go == *seen {
            return Woke::Spurious;
        }
        *seen = go;
        self.woke_at.store(t1, Ordering::Relaxed);
        self.woke_cpu.store(sys::current_cpu().unwrap_or(usize::MAX), Ordering::Relaxed);
        self.ack.store(go, Ordering::Release);
        Woke::Ran
    }

    /// The woken thread's start: ready for the current sequence number.
    fn start(&self) -> u32 {
        let seen = self.go.load(Ordering::Acquire);
        self.ack.store(seen, Ordering::Release);
        seen
    }
}

enum Woke {
    Ran,
    Spurious,
    Stop,
}

/// A sample: wall time, summed latencies, placement.
struct Outcome {
    wall: Duration,
    latency: Duration,
    migrated: bool,
}

impl Outcome {
    fn timing(&self) -> Timing {
        Timing {
            elapsed: self.wall,
            migrated: self.migrated,
            overhead: self.wall.saturating_sub(self.latency),
        }
    }
}

/// The waker's side (steps 1, 2 and 4) for `iters` wake-ups, `wake` doing the backend's
/// wake-up after `go` was bumped.
fn waker(
    sh: &Shared,
    iters: u64,
    idle: Duration,
    mut wake: impl FnMut(),
) -> Result<Outcome, ProbeError> {
    let my_cpu = sys::current_cpu();
    let start = Instant::now();
    let mut latency_ns = 0u64;
    let mut migrated = false;
    for _ in 0..iters {
        let until = Instant::now() + idle;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let seq = sh.go.load(Ordering::Relaxed).wrapping_add(1);
        let t0 = sh.now_ns();
        sh.go.store(seq, Ordering::Release);
        wake();
        spin_until("wake-up", LOST, || sh.ack.load(Ordering::Acquire) == seq)?;
        latency_ns += sh.woke_at.load(Ordering::Relaxed).saturating_sub(t0);
        migrated |= Some(sh.woke_cpu.load(Ordering::Relaxed)) == my_cpu;
    }
    migrated |= sys::current_cpu() != my_cpu;
    Ok(Outcome { wall: start.elapsed(), latency: Duration::from_nanos(latency_ns), migrated })
}

/// The woken kernel thread: FUTEX_WAIT on `go` until it moves.
fn os_woken(sh: &Shared) {
    let mut seen = sh.start();
    loop {
        while sh.go.load(Ordering::Acquire) == seen {
            futex_wait(&sh.go, seen);
        }
        if let Woke::Stop = sh.woken(&mut seen) {
            return;
        }
    }
}

/// The woken tokio task: waits on `notify` until told to stop.
async fn tokio_woken(sh: &Shared, notify: &tokio::sync::Notify) {
    let mut seen = sh.start();
    loop {
        notify.notified().await;
        if let Woke::Stop = sh.woken(&mut seen) {
            return;
        }
    }
}

/// One rt sample, run as the `block_on` user thread: spawn the woken user thread (it must
/// go to the other processor, since this one spins), wake it `iters` times, stop it.
fn rt_waker(sh: &Arc<Shared>, iters: u64, idle: Duration) -> Result<Outcome, ProbeError> {
    sh.ack.store(NOT_READY, Ordering::Release);
    let w = sh.clone();
    let woken = schedlab_rt::spawn(move || {
        let mut seen = w.start();
        loop {
            schedlab_rt::park();
            if let Woke::Stop = w.woken(&mut seen) {
                return;
            }
        }
    });
    let thread = woken.thread().clone();
    let result = spin_until("rt woken thread start", LOST, || sh.ready())
        .and_then(|()| waker(sh, iters, idle, || thread.unpark()));
    sh.stop.store(true, Ordering::Release);
    sh.go.fetch_add(1, Ordering::AcqRel);
    thread.unpark();
    let _ = woken.join();
    sh.stop.store(false, Ordering::Release);
    result
}
