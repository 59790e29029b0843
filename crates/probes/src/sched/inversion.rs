//! `sched.priority_inversion`: seed 001's closing warning that the loader "captures objects
//! required by the first thread", measured as the frame's wait for a lock the loader holds.
//!
//! Three threads share one CPU, the Mars Pathfinder's cast: the frame (highest), a hog
//! (middle: computes in bursts of 30 ms, then sleeps 10 ms) and the loader (lowest), which
//! takes the lock, computes 1 ms inside it, releases it and sleeps 2 ms. Every 20 ms the
//! frame wakes and takes the lock; the time from asking to holding is measured, and the
//! sample's value is its worst frame (100 frames, two seconds; the median, p99 and maximum
//! over every frame are in the notes). A loader that holds the lock when the hog's
//! burst begins keeps the frame waiting for the rest of the burst — unless the loader
//! inherits the frame's priority while the frame waits.
//!
//! | side | prio | frame / hog / loader | lock=plain | lock=inherit |
//! |---|---|---|---|---|
//! | os | fifo | `SCHED_FIFO` 3 / `SCHED_FIFO` 2 / `SCHED_OTHER` (root) | `pthread_mutex_t` | `PTHREAD_PRIO_INHERIT` (a PI futex) |
//! | os | nice | nice 0 / nice 0 / nice 19 | as above | as above |
//! | rt | levels | `High` / `Normal` / `Low` user threads, one processor | `Semaphore(1)` (no holder to lend to) | `sync::Mutex` (inherits) |
//!
//! Linux lends a PI futex's waiter's priority only between real-time priorities: a nice
//! value is a `SCHED_OTHER` weight, not a priority, so `prio=nice` shows what inheritance
//! does for ordinary threads (nothing). tokio has no priorities, so no tokio side.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sampler::Settings;
use schedlab_measure::stats;
use schedlab_measure::sys::{self, now_ns, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe, Suite};

/// The frame's period.
const FRAME: Duration = Duration::from_millis(20);
/// The loader's time inside the lock, its sleep after it, and the hog's burst and rest.
const HOLD: Duration = Duration::from_millis(1);
const LOADER_REST: Duration = Duration::from_millis(2);
const BURST: Duration = Duration::from_millis(30);
const HOG_REST: Duration = Duration::from_millis(10);

pub(crate) struct PriorityInversion;

impl Probe for PriorityInversion {
    fn info(&self) -> Info {
        Info {
            id: "sched.priority_inversion",
            doc: "Seed 001's loader holding a lock the frame needs: a frame every 20 ms takes a lock that a low-priority loader holds 1 ms at a time while a middle-priority hog computes in 30 ms bursts, all on one CPU; the frame's worst wait for the lock per sample of 100 frames (p50/p99/max over all in notes), with and without priority inheritance (PI futex, schedlab-rt Mutex)",
            unit: Unit::Nanos,
            mirrors: "- (seed 001's closing section; the Mars Pathfinder inversion)",
            requires: "prio=fifo: root or CAP_SYS_NICE (SCHED_FIFO)",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let v = |side: &str, prio: &str, lock: &str| {
            Params::new().with("side", side).with("prio", prio).with("lock", lock)
        };
        match suite {
            // The quick suite is at its time budget: one variant, briefly (`sampling`).
            Suite::Smoke | Suite::Quick => vec![v("rt", "levels", "inherit")],
            Suite::Full => {
                let mut out = Vec::new();
                for prio in ["fifo", "nice"] {
                    for lock in ["plain", "inherit"] {
                        out.push(v("os", prio, lock));
                    }
                }
                out.push(v("rt", "levels", "plain"));
                out.push(v("rt", "levels", "inherit"));
                out
            }
        }
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        let mut s = default.clone();
        if suite == Suite::Quick {
            // Half a second in all: a presence check more than a figure.
            s.fixed_iters = Some(12);
            s.samples = 2;
        } else if suite != Suite::Smoke {
            // 100 frames a sample (two seconds, 50 of the hog's cycles), fixed: a frame's
            // time is its period, and a calibration call that met an inversion (or the
            // machine's load) would size every sample by it.
            s.fixed_iters = Some(100);
            s.samples = 3;
        }
        s
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let side = params.get("side").unwrap_or("rt");
        let prio = params.get("prio").unwrap_or(if side == "rt" { "levels" } else { "fifo" });
        let inherit = match params.get("lock").unwrap_or("inherit") {
            "plain" => false,
            "inherit" => true,
            other => return Err(ProbeError::Failed(format!("lock={other}: plain or inherit"))),
        };
        let cpu = *sys::allowed_cpus()
            .first()
            .ok_or_else(|| ProbeError::Failed("no usable CPU in this thread's mask".into()))?;
        let work = Work::calibrate();
        let notes = Params::new()
            .with("cpu", cpu)
            .with("hold_ms", HOLD.as_millis())
            .with("burst_ms", BURST.as_millis())
            .with("frame_ms", FRAME.as_millis());
        let (frames, parties, keep): (Frames, Vec<Party>, Keep) = match (side, prio) {
            ("os", "fifo" | "nice") => os_side(prio == "fifo", inherit, cpu, work)?,
            ("rt", "levels") => rt_side(inherit, cpu, work)?,
            _ => {
                return Err(ProbeError::Failed(format!(
                    "side={side}, prio={prio}: side=os with prio=fifo or nice, or side=rt with prio=levels"
                )))
            }
        };
        Ok(Box::new(Run { frames, parties, notes, waits: Vec::new(), _keep: keep }))
    }
}

/// A fixed amount of computation, calibrated in microseconds on this CPU alone, so a
/// preempted holder holds its lock for longer in wall time, as a real one would.
#[derive(Clone, Copy)]
pub(crate) struct Work {
    per_us: u64,
}

impl Work {
    pub(crate) fn calibrate() -> Work {
        let mut best = u64::MAX;
        for _ in 0..5 {
            let t = now_ns();
            spin(100_000);
            best = best.min(now_ns() - t);
        }
        Work { per_us: (100_000 * 1000 / best.max(1)).max(1) }
    }

    pub(crate) fn run(self, d: Duration) {
        spin(self.per_us * d.as_micros() as u64);
    }
}

#[inline(never)]
fn spin(n: u64) {
    let mut x = 0x9E37_79B9u64;
    for i in 0..n {
        x = std::hint::black_box(x.rotate_left(7) ^ i);
    }
    std::hint::black_box(x);
}

/// Runs `iters` frames and gives back each frame's wait for the lock, in ns.
type Frames = Box<dyn FnMut(u64) -> Result<Vec<u64>, ProbeError>>;
/// What a side keeps alive (threads stopped on drop, the runtime, the pin).
type Keep = Vec<Box<dyn std::any::Any>>;

struct Run {
    frames: Frames,
    parties: Vec<Party>,
    notes: Params,
    /// Every frame's wait so far, for the notes.
    waits: Vec<u64>,
    /// Dropped last: stops the hog and the loader, then the runtime and the pin.
    _keep: Keep,
}

impl Workload for Run {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let t = now_ns();
        let w = (self.frames)(iters)?;
        let wall = Duration::from_nanos(now_ns() - t);
        self.waits.extend_from_slice(&w);
        Ok(worst_timing(&w, wall))
    }

    fn parties(&self) -> Vec<Party> {
        self.parties.clone()
    }
}

/// A sample whose value per iteration is the largest of `v` (one per iteration): the rest
/// of the wall time is overhead (the frames' sleeps, the other acquisitions).
pub(crate) fn worst_timing(v: &[u64], wall: Duration) -> Timing {
    let worst = v.iter().copied().max().unwrap_or(0);
    let value = Duration::from_nanos(worst.saturating_mul(v.len() as u64));
    Timing { elapsed: wall.max(value), migrated: false, overhead: wall.saturating_sub(value) }
}

/// p50/p99/max of `v` in µs, as notes `{prefix}p50_us`...
pub(crate) fn tail_notes(n: &mut Params, prefix: &str, v: &[u64]) {
    if v.is_empty() {
        return;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let us = |x: u64| format!("{:.1}", x as f64 / 1e3);
    n.set(&format!("{prefix}p50_us"), us(stats::nearest_rank(&s, 50.0)));
    n.set(&format!("{prefix}p99_us"), us(stats::nearest_rank(&s, 99.0)));
    n.set(&format!("{prefix}max_us"), us(s[s.len() - 1]));
}

impl Instance for Run {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let mut n = self.notes.clone();
        n.set("frames", self.waits.len());
        tail_notes(&mut n, "wait_", &self.waits);
        n
    }
}

// ---------------------------------------------------------------------------------------
// OS threads.
// ---------------------------------------------------------------------------------------

/// A `pthread_mutex_t`, with or without `PTHREAD_PRIO_INHERIT`; boxed, since a pthread
/// mutex must not move once initialised.
pub(crate) struct PthreadMutex(Box<UnsafeCell<libc::pthread_mutex_t>>);

// SAFETY: a pthread mutex is made to be shared between threads; only its functions
// touch it.
unsafe impl Send for PthreadMutex {}
// SAFETY: as above.
unsafe impl Sync for PthreadMutex {}

/// glibc's value of `PTHREAD_PRIO_INHERIT` (`<pthread.h>`), which the libc crate does
/// not export for Linux.
const PTHREAD_PRIO_INHERIT: libc::c_int = 1;

impl PthreadMutex {
    pub(crate) fn new(inherit: bool) -> Result<PthreadMutex, ProbeError> {
        let m = PthreadMutex(Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)));
        // SAFETY: attr is initialised before use and destroyed after; the mutex lives in
        // its box, never moved, and is not shared yet.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            if libc::pthread_mutexattr_init(&mut attr) != 0 {
                return Err(ProbeError::Failed("pthread_mutexattr_init".into()));
            }
            let proto = if inherit { PTHREAD_PRIO_INHERIT } else { 0 };
            let rc = libc::pthread_mutexattr_setprotocol(&mut attr, proto);
            let rc = if rc == 0 { libc::pthread_mutex_init(m.0.get(), &attr) } else { rc };
            libc::pthread_mutexattr_destroy(&mut attr);
            if rc != 0 {
                return Err(ProbeError::Failed(format!(
                    "pthread_mutex_init with protocol {proto}: {}",
                    std::io::Error::from_raw_os_error(rc)
                )));
            }
        }
        Ok(m)
    }

    pub(crate) fn lock(&self) {
        // SAFETY: an initialised mutex that outlives every thread using it.
        let rc = unsafe { libc::pthread_mutex_lock(self.0.get()) };
        assert_eq!(rc, 0, "pthread_mutex_lock of a valid mutex");
    }

    pub(crate) fn unlock(&self) {
        // SAFETY: as above, unlocked by the thread that locked it.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
    }
}

impl Drop for PthreadMutex {
    fn drop(&mut self) {
        // SAFETY: no thread uses it any more (they are joined before it drops).
        unsafe { libc::pthread_mutex_destroy(self.0.get()) };
    }
}

/// OS threads that run until dropped, then are joined.
pub(crate) struct Threads {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Threads {
    pub(crate) fn new() -> Threads {
        Threads { stop: Arc::new(AtomicBool::new(false)), handles: Vec::new() }
    }

    /// Starts `body` on a thread named `name`; `body` returns when the stop flag is set.
    /// Gives back its thread id once it runs, or the error its `prepare` returned.
    pub(crate) fn spawn(
        &mut self,
        name: &str,
        prepare: impl FnOnce() -> Result<(), ProbeError> + Send + 'static,
        body: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> Result<i32, ProbeError> {
        let stop = self.stop.clone();
        let (tx, rx) = mpsc::channel();
        let h = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let r = prepare();
                let ok = r.is_ok();
                let _ = tx.send(r.map(|()| sys::gettid()));
                if ok {
                    body(&stop);
                }
            })
            .map_err(|e| ProbeError::io("spawning a thread", e))?;
        self.handles.push(h);
        rx.recv().map_err(|_| ProbeError::Failed(format!("the {name} thread died")))?
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Maps a refused scheduling change to a skip that says what is missing.
pub(crate) fn policy(r: std::io::Result<()>, what: &str) -> Result<(), ProbeError> {
    r.map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) => ProbeError::Skip(format!("{what} needs root or CAP_SYS_NICE")),
        _ => ProbeError::Failed(format!("{what}: {e}")),
    })
}

fn os_side(
    fifo: bool,
    inherit: bool,
    cpu: usize,
    work: Work,
) -> Result<(Frames, Vec<Party>, Keep), ProbeError> {
    let lock = Arc::new(PthreadMutex::new(inherit)?);
    let mut threads = Threads::new();
    let pin = move || sys::pin_to(cpu);
    // The hog: bursts of computation, in slices so it sees the stop flag.
    let hog = threads.spawn(
        "hog",
        move || {
            pin()?;
            if fifo {
                policy(sys::set_policy(libc::SCHED_FIFO, 2), "SCHED_FIFO")
            } else {
                Ok(())
            }
        },
        move |stop| {
            while !stop.load(Ordering::Relaxed) {
                let end = now_ns() + BURST.as_nanos() as u64;
                while now_ns() < end && !stop.load(Ordering::Relaxed) {
                    work.run(Duration::from_micros(100));
                }
                std::thread::sleep(HOG_REST);
            }
        },
    )?;
    let l = lock.clone();
    let loader = threads.spawn(
        "loader",
        move || {
            pin()?;
            if fifo {
                Ok(())
            } else {
                sys::set_nice(19).map_err(|e| ProbeError::Failed(format!("nice 19: {e}")))
            }
        },
        move |stop| {
            while !stop.load(Ordering::Relaxed) {
                l.lock();
                work.run(HOLD);
                l.unlock();
                std::thread::sleep(LOADER_REST);
            }
        },
    )?;
    // The frame: its own thread too, so the sampler's thread keeps its policy.
    let (go_tx, go_rx) = mpsc::channel::<u64>();
    let (done_tx, done_rx) = mpsc::channel::<Vec<u64>>();
    let l = lock.clone();
    let frame = threads.spawn(
        "frame",
        move || {
            pin()?;
            if fifo {
                policy(sys::set_policy(libc::SCHED_FIFO, 3), "SCHED_FIFO")
            } else {
                Ok(())
            }
        },
        move |_stop| {
            // Ends when the sender (the instance) is dropped.
            while let Ok(iters) = go_rx.recv() {
                let waits = frame_loop(iters, sys::sleep_until, || {
                    l.lock();
                    l.unlock();
                });
                if done_tx.send(waits).is_err() {
                    return;
                }
            }
        },
    )?;
    let frames: Frames = Box::new(move |iters| {
        go_tx.send(iters).map_err(|_| ProbeError::Failed("the frame thread died".into()))?;
        done_rx.recv().map_err(|_| ProbeError::Failed("the frame thread died".into()))
    });
    let parties =
        vec![Party::task("frame", frame), Party::task("hog", hog), Party::task("loader", loader)];
    // `threads` last: its drop joins the frame thread, whose channel `frames` closes.
    Ok((frames, parties, vec![Box::new(threads), Box::new(lock)]))
}

/// `iters` frames, one every [`FRAME`] (the first one frame from now), each taking and
/// releasing the lock with `lock_unlock`; each frame's wait to hold it, in ns.
fn frame_loop(iters: u64, sleep_until: impl Fn(u64), lock_unlock: impl Fn()) -> Vec<u64> {
    let period = FRAME.as_nanos() as u64;
    let mut due = now_ns() + period;
    let mut waits = Vec::with_capacity(iters as usize);
    for _ in 0..iters {
        sleep_until(due);
        let t = now_ns();
        lock_unlock();
        waits.push(now_ns() - t);
        due += period;
        let now = now_ns();
        while due < now {
            due += period;
        }
    }
    waits
}

// ---------------------------------------------------------------------------------------
// schedlab-rt user threads.
// ---------------------------------------------------------------------------------------

fn rt_side(
    inherit: bool,
    cpu: usize,
    work: Work,
) -> Result<(Frames, Vec<Party>, Keep), ProbeError> {
    use schedlab_rt::sync::{Mutex, Semaphore};
    use schedlab_rt::{Builder, Priority, Runtime};
    // The runtime's kernel threads inherit this thread's mask while it is pinned.
    let pin = PinGuard::pin(cpu)?;
    let rt = Runtime::builder()
        .processors(1)
        .build()
        .map_err(|e| ProbeError::Failed(format!("building a runtime: {e}")))?;
    drop(pin);
    let stop = Arc::new(AtomicBool::new(false));
    // plain: a semaphore of one permit has no holder to lend a level to.
    let mutex = Arc::new(Mutex::new(()));
    let sem = Arc::new(Semaphore::new(1));
    let take = {
        let (mutex, sem) = (mutex.clone(), sem.clone());
        move |f: &dyn Fn()| {
            if inherit {
                let _g = mutex.lock();
                f();
            } else {
                sem.acquire();
                f();
                sem.release();
            }
        }
    };
    let (go_tx, go_rx) = mpsc::channel::<u64>();
    let (done_tx, done_rx) = mpsc::channel::<Vec<u64>>();
    let rt = Arc::new(rt);
    let started = {
        let (stop, take) = (stop.clone(), take.clone());
        let spawn = |p: Priority, name: &str, f: Box<dyn FnOnce() + Send>| {
            Builder::new().priority(p).name(name.to_string()).spawn_on(&rt, f).map(drop)
        };
        let s = stop.clone();
        spawn(
            Priority::Normal,
            "hog",
            Box::new(move || {
                while !s.load(Ordering::Relaxed) {
                    let end = now_ns() + BURST.as_nanos() as u64;
                    while now_ns() < end && !s.load(Ordering::Relaxed) {
                        work.run(Duration::from_micros(100));
                    }
                    schedlab_rt::sleep(HOG_REST);
                }
            }),
        )
        .and_then(|_| {
            let (s, take) = (stop.clone(), take.clone());
            spawn(
                Priority::Low,
                "loader",
                Box::new(move || {
                    while !s.load(Ordering::Relaxed) {
                        take(&|| work.run(HOLD));
                        schedlab_rt::sleep(LOADER_REST);
                    }
                }),
            )
        })
        .and_then(|_| {
            spawn(
                Priority::High,
                "frame",
                Box::new(move || {
                    // The channels are std's: this thread blocks its kernel thread while
                    // it waits for the next sample, which is what the runtime's
                    // transparent blocking detection is for; the frames themselves
                    // sleep on the runtime's timers.
                    while let Ok(iters) = schedlab_rt::blocking(|| go_rx.recv()) {
                        let rt_sleep_until = |due: u64| {
                            let now = now_ns();
                            if due > now {
                                schedlab_rt::sleep(Duration::from_nanos(due - now));
                            }
                        };
                        let waits = frame_loop(iters, rt_sleep_until, || take(&|| ()));
                        if done_tx.send(waits).is_err() {
                            return;
                        }
                    }
                }),
            )
        })
    };
    started.map_err(|e| ProbeError::io("spawning a user thread", e))?;
    let frames: Frames = Box::new(move |iters| {
        go_tx.send(iters).map_err(|_| ProbeError::Failed("the frame thread died".into()))?;
        done_rx.recv().map_err(|_| ProbeError::Failed("the frame thread died".into()))
    });
    let parties = vec![Party::caller("main")];
    // Dropped in order: the stop flag is set, then the runtime waits for its threads.
    let stopper = StopOnDrop(stop);
    Ok((frames, parties, vec![Box::new(stopper), Box::new(rt)]))
}

/// Sets a stop flag when dropped (before the runtime that runs the threads reading it).
pub(crate) struct StopOnDrop(pub(crate) Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit;

    #[test]
    fn the_smoke_variant_runs_and_notes_the_frames_waits() {
        let ctx = Context::for_tests();
        let p = PriorityInversion;
        for params in p.variants(Suite::Smoke) {
            let Some(inst) = testkit::smoke_one(&p, &params, &ctx) else { continue };
            let n = inst.notes();
            assert!(n.get("wait_max_us").is_some(), "[{params}] notes {n}");
        }
    }

    #[test]
    fn a_pi_mutex_is_made_and_excludes() {
        let m = PthreadMutex::new(true).expect("glibc supports PTHREAD_PRIO_INHERIT");
        m.lock();
        m.unlock();
    }
}
