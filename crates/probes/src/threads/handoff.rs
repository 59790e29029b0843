//! Two threads handing control back and forth on one processor: `threads.switch` (the bare
//! switch: yield, or a futex for kernel threads), `threads.condvar.pingpong` (mutex and
//! condition variable) and `threads.channel.pingpong` (a pair of one-slot channels).
//! Seed 003's third micro-operation, the context switch (SA 225 µs, PTH 166 µs,
//! LinuxThreads 82 µs there).
//!
//! Placement: both parties on one CPU, always (docs/SOURCES.md, Placement decides the answer: across CPUs this would
//! measure wake-ups, which `threads.wake` does). Kernel threads: the measuring thread is
//! pinned for the life of the instance and its partner, started in setup, pins itself to
//! the same CPU; the measuring thread checks its CPU after each sample. schedlab-rt: a
//! one-processor runtime, its processor pinned. tokio: a current-thread runtime driven by
//! the pinned measuring thread.
//!
//! Protocol: one iteration is a round trip, two hand-offs; values are per hand-off. The
//! user-level partners are spawned at the start of each sample (untimed) and run exactly
//! the sample's iterations; the OS partners live from setup to drop and are stopped by a
//! flag or a sentinel message, then joined.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use schedlab_measure::model::{Params, Unit};
use schedlab_measure::sys::PinGuard;
use schedlab_measure::{ProbeError, Timing};

use super::backend::{
    self, futex_wait, futex_wake, rt_pinned, rt_run, timing_on, Backend, Bench, Partner,
};
use super::pthread;
use crate::{Context, Info, Instance, Probe, Suite};

/// Which hand-off mechanism a probe measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Yield (user level) or a futex word (kernel threads).
    Switch,
    /// A mutex-protected turn variable and a condition variable.
    Condvar,
    /// Two bounded channels of capacity 1.
    Channel,
}

struct HandoffProbe(Kind);

/// The hand-off probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    [Kind::Switch, Kind::Condvar, Kind::Channel]
        .into_iter()
        .map(|k| Box::new(HandoffProbe(k)) as Box<dyn Probe>)
        .collect()
}

/// Whose turn it is, for the futex and condvar protocols.
const MAIN: u32 = 0;
const PARTNER: u32 = 1;

/// The value the OS channel partner takes as "stop".
const SENTINEL: u64 = u64::MAX;

impl HandoffProbe {
    /// The C program's operation for the pthread rows; the channel ping-pong has none
    /// (POSIX threads have no channel).
    fn c_op(&self) -> Option<pthread::Op> {
        match self.0 {
            Kind::Switch => Some(pthread::Op::Yield),
            Kind::Condvar => Some(pthread::Op::Condvar),
            Kind::Channel => None,
        }
    }
}

impl Probe for HandoffProbe {
    fn info(&self) -> Info {
        match self.0 {
            Kind::Switch => Info {
                id: "threads.switch",
                doc: "Two threads on one processor hand control back and forth (rt and tokio: both yield; os: a futex word, FUTEX_WAIT/FUTEX_WAKE); per switch",
                unit: Unit::Nanos,
                mirrors: "seed 003 table, row Context (switch between threads: SA 225 µs, PTH 166 µs, LinuxThreads 82 µs); both parties pinned to one CPU; pthread-os / pthread-rt = csrc/pthread_bench.c `yield`: two created threads each call sched_yield, as rt's two threads yield (glibc: the kernel's sched_yield)",
                requires: pthread::REQUIRES,
            },
            Kind::Condvar => Info {
                id: "threads.condvar.pingpong",
                doc: "Two threads on one processor pass a turn through a mutex and a condition variable (tokio, which has none: a pair of Notify); per hand-off",
                unit: Unit::Nanos,
                mirrors: "seed 003 table, row Context, synchronised the pthread way (pthread_cond_wait/signal); both parties pinned to one CPU; pthread-os / pthread-rt = csrc/pthread_bench.c `condvar` (pthread_mutex_t and pthread_cond_t, the loop in a created thread)",
                requires: pthread::REQUIRES,
            },
            Kind::Channel => Info {
                id: "threads.channel.pingpong",
                doc: "Two threads on one processor bounce a u64 over two channels of capacity 1 (os: std::sync::mpsc::sync_channel); per one-way message",
                unit: Unit::Nanos,
                mirrors: "the Go channel ping-pong (unbuffered channels there; capacity 1 here for all three backends, as tokio has no rendezvous channel); both parties pinned to one CPU",
                requires: "",
            },
        }
    }

    fn variants(&self, _suite: Suite) -> Vec<Params> {
        let mut v = backend::per_backend(&[Params::new()]);
        if self.c_op().is_some() {
            v.extend(pthread::per_library(&[Params::new()]));
        }
        v
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        if let Some(op) = self.c_op() {
            if let Some(lib) = pthread::Library::from_params(params)? {
                return pthread::setup(op, lib, ctx);
            }
        }
        let backend = Backend::from_params(params)?;
        let cpu = backend::one_cpu();
        let notes = Params::new().with("cpus", format!("{cpu},{cpu}"));
        let metric = backend.metric(2.0);
        let bench = Bench::new(metric, notes);
        Ok(match (self.0, backend) {
            (Kind::Switch, Backend::Os) => os_futex(bench, cpu)?,
            (Kind::Condvar, Backend::Os) => os_condvar(bench, cpu)?,
            (Kind::Channel, Backend::Os) => os_channel(bench, cpu)?,
            (kind, Backend::Rt) => rt_handoff(bench, kind, cpu)?,
            (kind, Backend::Tokio) => tokio_handoff(bench, kind, cpu)?,
        }
        .boxed())
    }
}

/// Kernel threads over a futex word: the measuring thread hands the turn to its partner
/// (store, FUTEX_WAKE) and sleeps in FUTEX_WAIT until the turn comes back.
fn os_futex(bench: Bench, cpu: usize) -> Result<Bench, ProbeError> {
    let pin = PinGuard::pin(cpu)?;
    let turn = Arc::new(AtomicU32::new(MAIN));
    let stop = Arc::new(AtomicBool::new(false));
    let partner = {
        let (turn, stop) = (turn.clone(), stop.clone());
        let (turn2, stop2) = (turn.clone(), stop.clone());
        Partner::spawn(
            "switch",
            Some(cpu),
            move || loop {
                while turn.load(Ordering::Acquire) != PARTNER {
                    futex_wait(&turn, MAIN);
                }
                if stop.load(Ordering::Acquire) {
                    return;
                }
                turn.store(MAIN, Ordering::Release);
                futex_wake(&turn, 1);
            },
            move || {
                stop2.store(true, Ordering::Release);
                turn2.store(PARTNER, Ordering::Release);
                futex_wake(&turn2, 1);
            },
        )?
    };
    Ok(bench
        .body(move |iters| {
            let start = Instant::now();
            for _ in 0..iters {
                turn.store(PARTNER, Ordering::Release);
                futex_wake(&turn, 1);
                while turn.load(Ordering::Acquire) != MAIN {
                    futex_wait(&turn, PARTNER);
                }
            }
            Ok(timing_on(start.elapsed(), cpu))
        })
        .partner(partner)
        .keep(pin)
        .note("mechanism", "futex"))
}

/// State of the OS condvar ping-pong.
struct Turn {
    turn: u32,
    stop: bool,
}

/// Kernel threads over `std::sync::{Mutex, Condvar}` (futex-based on Linux).
fn os_condvar(bench: Bench, cpu: usize) -> Result<Bench, ProbeError> {
    use std::sync::{Condvar, Mutex};
    let pin = PinGuard::pin(cpu)?;
    let state = Arc::new((Mutex::new(Turn { turn: MAIN, stop: false }), Condvar::new()));
    let partner = {
        let (s, s2) = (state.clone(), state.clone());
        Partner::spawn(
            "condvar",
            Some(cpu),
            move || {
                let (m, cv) = &*s;
                let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    while g.turn != PARTNER && !g.stop {
                        g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
                    }
                    if g.stop {
                        return;
                    }
                    g.turn = MAIN;
                    cv.notify_one();
                }
            },
            move || {
                let (m, cv) = &*s2;
                m.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
                cv.notify_all();
            },
        )?
    };
    Ok(bench
        .body(move |iters| {
            let (m, cv) = &*state;
            let start = Instant::now();
            for _ in 0..iters {
                let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
                g.turn = PARTNER;
                cv.notify_one();
                while g.turn != MAIN {
                    g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
                }
            }
            Ok(timing_on(start.elapsed(), cpu))
        })
        .partner(partner)
        .keep(pin)
        .note("mechanism", "std::sync::Condvar"))
}

/// Kernel threads over two `std::sync::mpsc::sync_channel(1)`.
fn os_channel(bench: Bench, cpu: usize) -> Result<Bench, ProbeError> {
    use std::sync::mpsc::sync_channel;
    let pin = PinGuard::pin(cpu)?;
    let (to_partner, partner_rx) = sync_channel::<u64>(1);
    let (partner_tx, from_partner) = sync_channel::<u64>(1);
    let stopper = to_partner.clone();
    let partner = Partner::spawn(
        "channel",
        Some(cpu),
        move || {
            while let Ok(v) = partner_rx.recv() {
                if v == SENTINEL || partner_tx.send(v).is_err() {
                    return;
                }
            }
        },
        move || {
            let _ = stopper.send(SENTINEL);
        },
    )?;
    Ok(bench
        .body(move |iters| {
            let dead = |_| ProbeError::Failed("channel partner thread is gone".into());
            let start = Instant::now();
            for i in 0..iters {
                to_partner
                    .send(i)
                    .map_err(|_| ProbeError::Failed("channel partner is gone".into()))?;
                std::hint::black_box(from_partner.recv().map_err(dead)?);
            }
            Ok(timing_on(start.elapsed(), cpu))
        })
        .partner(partner)
        .keep(pin)
        .note("mechanism", "std::sync::mpsc::sync_channel(1)"))
}

/// schedlab-rt: a one-processor runtime, pinned; per sample two user threads (switch) or
/// the measuring user thread and one partner (condvar, channel).
fn rt_handoff(bench: Bench, kind: Kind, cpu: usize) -> Result<Bench, ProbeError> {
    let rt = rt_pinned(&[cpu])?;
    let mechanism = match kind {
        Kind::Switch => "schedlab_rt::yield_now",
        Kind::Condvar => "schedlab_rt::sync::{Mutex, Condvar}",
        Kind::Channel => "schedlab_rt::sync::channel(1)",
    };
    Ok(bench
        .body(move |iters| {
            let elapsed = rt_run(&rt, move || match kind {
                Kind::Switch => {
                    let side = move || {
                        for _ in 0..iters {
                            schedlab_rt::yield_now();
                        }
                    };
                    let (a, b) = (schedlab_rt::spawn(side), schedlab_rt::spawn(side));
                    // The two run only once this thread parks in `join`.
                    let start = Instant::now();
                    let _ = a.join();
                    let _ = b.join();
                    start.elapsed()
                }
                Kind::Condvar => {
                    use schedlab_rt::sync::{Condvar, Mutex};
                    let state = Arc::new((Mutex::new(MAIN), Condvar::new()));
                    let s = state.clone();
                    let partner = schedlab_rt::spawn(move || {
                        let (m, cv) = &*s;
                        for _ in 0..iters {
                            let mut g = m.lock();
                            while *g != PARTNER {
                                g = cv.wait(g);
                            }
                            *g = MAIN;
                            cv.notify_one();
                        }
                    });
                    let (m, cv) = &*state;
                    let start = Instant::now();
                    for _ in 0..iters {
                        let mut g = m.lock();
                        *g = PARTNER;
                        cv.notify_one();
                        while *g != MAIN {
                            g = cv.wait(g);
                        }
                    }
                    let elapsed = start.elapsed();
                    let _ = partner.join();
                    elapsed
                }
                Kind::Channel => {
                    use schedlab_rt::sync::channel;
                    let (to_partner, partner_rx) = channel::<u64>(1);
                    let (partner_tx, from_partner) = channel::<u64>(1);
                    let partner = schedlab_rt::spawn(move || {
                        while let Ok(v) = partner_rx.recv() {
                            if partner_tx.send(v).is_err() {
                                return;
                            }
                        }
                    });
                    let start = Instant::now();
                    for i in 0..iters {
                        let _ = to_partner.send(i);
                        let _ = std::hint::black_box(from_partner.recv());
                    }
                    let elapsed = start.elapsed();
                    drop(to_partner);
                    let _ = partner.join();
                    elapsed
                }
            })?;
            Ok(Timing::from_elapsed(elapsed))
        })
        .note("mechanism", mechanism)
        .note("runtime", "rt processors=1"))
}

/// tokio: a current-thread runtime on the pinned measuring thread; both parties are spawned
/// tasks (the `block_on` future is polled differently from tasks, so it only waits).
fn tokio_handoff(bench: Bench, kind: Kind, cpu: usize) -> Result<Bench, ProbeError> {
    let pin = PinGuard::pin(cpu)?;
    let tk = backend::tokio_current()?;
    let mechanism = match kind {
        Kind::Switch => "tokio::task::yield_now",
        Kind::Condvar => "tokio::sync::Notify pair and an atomic turn",
        Kind::Channel => "tokio::sync::mpsc::channel(1)",
    };
    Ok(bench
        .body(move |iters| {
            let elapsed = tk.block_on(async move {
                match kind {
                    Kind::Switch => {
                        let side = || async move {
                            for _ in 0..iters {
                                tokio::task::yield_now().await;
                            }
                        };
                        let (a, b) = (tokio::spawn(side()), tokio::spawn(side()));
                        let start = Instant::now();
                        let _ = a.await;
                        let _ = b.await;
                        start.elapsed()
                    }
                    Kind::Condvar => {
                        use tokio::sync::Notify;
                        let turn = Arc::new(AtomicU32::new(MAIN));
                        let (to_partner, to_main) =
                            (Arc::new(Notify::new()), Arc::new(Notify::new()));
                        let (t, tp, tm) = (turn.clone(), to_partner.clone(), to_main.clone());
                        let partner = tokio::spawn(async move {
                            for _ in 0..iters {
                                while t.load(Ordering::Acquire) != PARTNER {
                                    tp.notified().await;
                                }
                                t.store(MAIN, Ordering::Release);
                                tm.notify_one();
                            }
                        });
                        let main = tokio::spawn(async move {
                            let start = Instant::now();
                            for _ in 0..iters {
                                turn.store(PARTNER, Ordering::Release);
                                to_partner.notify_one();
                                while turn.load(Ordering::Acquire) != MAIN {
                                    to_main.notified().await;
                                }
                            }
                            start.elapsed()
                        });
                        let elapsed = main.await.unwrap_or_default();
                        let _ = partner.await;
                        elapsed
                    }
                    Kind::Channel => {
                        use tokio::sync::mpsc::channel;
                        let (to_partner, mut partner_rx) = channel::<u64>(1);
                        let (partner_tx, mut from_partner) = channel::<u64>(1);
                        let partner = tokio::spawn(async move {
                            while let Some(v) = partner_rx.recv().await {
                                if partner_tx.send(v).await.is_err() {
                                    return;
                                }
                            }
                        });
                        let main = tokio::spawn(async move {
                            let start = Instant::now();
                            for i in 0..iters {
                                let _ = to_partner.send(i).await;
                                let _ = std::hint::black_box(from_partner.recv().await);
                            }
                            start.elapsed()
                        });
                        let elapsed = main.await.unwrap_or_default();
                        let _ = partner.await;
                        elapsed
                    }
                }
            });
            Ok(timing_on(elapsed, cpu))
        })
        .keep(pin)
        .note("mechanism", mechanism)
        .note("runtime", "tokio current_thread"))
}
