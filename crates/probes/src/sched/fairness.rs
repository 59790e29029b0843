//! `sched.lock_fairness`: who wins a released lock (seed 001's last paragraph: "behavior
//! ... when competing for synchronization object capture").
//!
//! Four contenders on every usable CPU take one lock, hold it for 1 µs of work, release it
//! and ask for it again at once, so the releaser competes with the threads already waiting.
//! A lock that lets the releaser take it back (*barging*: glibc's `pthread_mutex_t`, std's
//! futex mutex, schedlab-rt's `Mutex`) keeps its holder running and its waiters parked — a
//! convoy in reverse, fast and unfair; one that hands it to the first waiter (tokio's FIFO
//! `Mutex`) pays a wake-up per acquisition and is fair. The sample's value is the worst
//! wait of any contender for the lock over the sample (one that never got it waited from its
//! first request to the sample's end); the notes give the acquisitions per
//! second, each contender's share (as the smallest and largest, and Jain's index: 1 is
//! even, 1/n is one thread taking everything), the hand-offs (acquisitions by a thread
//! other than the last holder, as a share), the wait's p50/p99, and the *resume* time of a
//! hand-off: from the release to the next holder's return from its lock call, which for a
//! parked waiter is the cost of waking it.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sampler::Settings;
use schedlab_measure::sys::now_ns;
use schedlab_measure::{ProbeError, Timing, Workload};

use super::inversion::{tail_notes, PthreadMutex, Work};
use crate::{Context, Info, Instance, Probe, Suite};

/// Contenders for the lock.
const CONTENDERS: usize = 4;
/// The work done while holding it.
const HOLD: Duration = Duration::from_micros(1);
/// The most resume times kept per sample (a sample may hand off millions of times).
const RESUMES_KEPT: usize = 100_000;

const LOCKS: &[&str] = &["std", "pthread", "rt", "tokio"];

pub(crate) struct LockFairness;

impl Probe for LockFairness {
    fn info(&self) -> Info {
        Info {
            id: "sched.lock_fairness",
            doc: "Who wins a released lock: 4 threads take one lock, hold it 1 µs and ask again at once; the worst wait for it per sample (acquisitions/s, each thread's share and Jain's index, hand-offs, wait p50/p99 and the resume time of a hand-off in notes), for std's and glibc's mutexes, schedlab-rt's Mutex and tokio's",
            unit: Unit::Nanos,
            mirrors: "- (seed 001's last paragraph: competing for a synchronization object)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        match suite {
            // The quick suite is at its time budget: one variant, briefly (`sampling`).
            Suite::Smoke | Suite::Quick => vec![Params::new().with("lock", "rt")],
            Suite::Full => LOCKS.iter().map(|l| Params::new().with("lock", l)).collect(),
        }
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // A fixed count of acquisitions per sample: the value (the worst wait, charged once
        // per acquisition) is no time per iteration a calibration could aim with, and a
        // sample sized by it would end before a starved contender's wait shows.
        let mut s = default.clone();
        if suite == Suite::Quick {
            s.fixed_iters = Some(20_000);
            s.samples = 2;
        } else if suite != Suite::Smoke {
            s.fixed_iters = Some(200_000);
            s.samples = 5;
        }
        s
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let lock = params.get("lock").unwrap_or("rt");
        if !LOCKS.contains(&lock) {
            return Err(ProbeError::Failed(format!("lock={lock}: one of {}", LOCKS.join(", "))));
        }
        let work = Work::calibrate();
        let cpus = schedlab_measure::sys::allowed_cpus().len().max(1);
        let side = match lock {
            "rt" => Side::Rt(Arc::new(
                schedlab_rt::Runtime::builder()
                    .processors(cpus)
                    .build()
                    .map_err(|e| ProbeError::Failed(format!("building a runtime: {e}")))?,
            )),
            "tokio" => Side::Tokio(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(cpus)
                    .build()
                    .map_err(|e| ProbeError::io("building a tokio runtime", e))?,
            ),
            _ => Side::Os,
        };
        let notes =
            Params::new().with("contenders", CONTENDERS).with("cpus", cpus).with("hold_us", 1);
        Ok(Box::new(Run { lock: lock.to_string(), side, work, all: Tally::default(), notes }))
    }
}

/// Where the contenders run.
enum Side {
    Os,
    Rt(Arc<schedlab_rt::Runtime>),
    Tokio(tokio::runtime::Runtime),
}

/// What the lock protects: the sample's bookkeeping, touched only by its holder.
struct Inner {
    remaining: u64,
    last: usize,
    released_at: u64,
    handoffs: u64,
    resumes: Vec<u64>,
}

impl Inner {
    fn new(iters: u64) -> Inner {
        Inner {
            remaining: iters,
            last: usize::MAX,
            released_at: 0,
            handoffs: 0,
            resumes: Vec::new(),
        }
    }

    /// Step of contender `me`, which got the lock at `got`: false when the sample is over.
    fn acquired(&mut self, me: usize, got: u64) -> bool {
        if self.remaining == 0 {
            return false;
        }
        self.remaining -= 1;
        if self.last != me && self.last != usize::MAX {
            self.handoffs += 1;
            if self.resumes.len() < RESUMES_KEPT {
                self.resumes.push(got.saturating_sub(self.released_at));
            }
        }
        self.last = me;
        true
    }
}

/// One contender's record of a sample.
#[derive(Default)]
struct Mine {
    count: u64,
    waits: Vec<u64>,
}

/// Everything measured so far, for the notes.
#[derive(Default)]
struct Tally {
    counts: [u64; CONTENDERS],
    waits: Vec<u64>,
    resumes: Vec<u64>,
    handoffs: u64,
    acquisitions: u64,
    wall_ns: u64,
}

struct Run {
    lock: String,
    side: Side,
    work: Work,
    all: Tally,
    notes: Params,
}

/// Runs the closure with the lock held, on what it protects; gives back its answer.
type WithLock<'a> = dyn Fn(&mut dyn FnMut(&mut Inner) -> bool) -> bool + 'a;

/// One contender's side of the protocol, whatever the lock: what it does while holding the
/// lock ([`Contender::holding`]) and after releasing it ([`Contender::released`]).
struct Contender {
    me: usize,
    work: Work,
    mine: Mine,
    /// When it last asked for the lock.
    asked: u64,
}

impl Contender {
    /// Contender `me`, whose first request counts from the sample's start.
    fn new(me: usize, work: Work, began: &AtomicU64) -> Contender {
        Contender { me, work, mine: Mine::default(), asked: sample_start(began) }
    }

    /// With the lock held: records the wait, takes a step of the sample and holds the lock
    /// for `HOLD`; false when the sample is over.
    fn holding(&mut self, inner: &mut Inner) -> bool {
        let got = now_ns();
        // Counted even for the acquisition that finds the sample over: a thread starved for
        // the whole sample waited that long.
        self.mine.waits.push(got - self.asked);
        if !inner.acquired(self.me, got) {
            return false;
        }
        self.mine.count += 1;
        self.work.run(HOLD);
        inner.released_at = now_ns();
        true
    }

    /// Just released: asks again at once.
    fn released(&mut self) {
        self.asked = now_ns();
    }
}

/// A contender's loop over a lock reached through `with`: asks, holds for `HOLD`, releases
/// and asks again at once, until the sample's acquisitions are spent. Its wait for each
/// acquisition runs from its previous release, or for the first from the sample's start.
fn contend(me: usize, work: Work, began: &AtomicU64, with: &WithLock) -> Mine {
    let mut c = Contender::new(me, work, began);
    while with(&mut |inner: &mut Inner| c.holding(inner)) {
        c.released();
    }
    c.mine
}

/// When the sample began (set by the measuring thread once every contender is ready): a
/// contender's first request counts from there, so one that waits for a CPU before it can
/// even ask is seen waiting too.
fn sample_start(began: &AtomicU64) -> u64 {
    loop {
        let t = began.load(Ordering::Acquire);
        if t != 0 {
            return t;
        }
        std::hint::spin_loop();
    }
}

/// A pthread mutex beside the data it protects.
struct PLocked {
    m: PthreadMutex,
    data: UnsafeCell<Inner>,
}

// SAFETY: `data` is touched only while `m` is held.
unsafe impl Sync for PLocked {}

/// A blocking lock the contenders share, whatever its kind: [`sample_with`]'s one loop
/// runs over each.
trait Lock: Send + Sync + 'static {
    /// Runs `f` with the lock held, on what it protects; gives back its answer.
    fn with(&self, f: &mut dyn FnMut(&mut Inner) -> bool) -> bool;
    /// What it protected, once the contenders are done; `None` if one panicked holding it.
    fn into_inner(self) -> Option<Inner>;
}

/// std's futex mutex (barging).
impl Lock for std::sync::Mutex<Inner> {
    fn with(&self, f: &mut dyn FnMut(&mut Inner) -> bool) -> bool {
        f(&mut self.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn into_inner(self) -> Option<Inner> {
        std::sync::Mutex::into_inner(self).ok()
    }
}

/// glibc's `pthread_mutex_t` (barging).
impl Lock for PLocked {
    fn with(&self, f: &mut dyn FnMut(&mut Inner) -> bool) -> bool {
        self.m.lock();
        // SAFETY: the mutex is held.
        let r = f(unsafe { &mut *self.data.get() });
        self.m.unlock();
        r
    }

    fn into_inner(self) -> Option<Inner> {
        Some(self.data.into_inner())
    }
}

/// schedlab-rt's `Mutex` (barging), taken by user threads.
impl Lock for schedlab_rt::sync::Mutex<Inner> {
    fn with(&self, f: &mut dyn FnMut(&mut Inner) -> bool) -> bool {
        f(&mut self.lock())
    }

    fn into_inner(self) -> Option<Inner> {
        Some(schedlab_rt::sync::Mutex::into_inner(self))
    }
}

/// A contender's body, as handed to the threads that run it.
type Body = Box<dyn FnOnce() -> Mine + Send>;
/// Waits for a contender's record; `None` when it panicked.
type Joiner = Box<dyn FnOnce() -> Option<Mine>>;

/// One sample of `lock` shared by [`CONTENDERS`] contenders that `spawn` starts (OS threads
/// or user threads), each waiting at `start` (which this thread waits at too) before its
/// first request. Returns their records, what the lock protected, and when the sample began.
fn sample_with<L: Lock>(
    lock: L,
    start: Arc<dyn Fn() + Send + Sync>,
    spawn: &dyn Fn(Body) -> Joiner,
    began: &Arc<AtomicU64>,
    work: Work,
) -> Result<(Vec<Mine>, Inner, u64), ProbeError> {
    let lock = Arc::new(lock);
    let joins: Vec<Joiner> = (0..CONTENDERS)
        .map(|i| {
            let (lock, start, began) = (lock.clone(), start.clone(), began.clone());
            spawn(Box::new(move || {
                start();
                contend(i, work, &began, &|f| lock.with(f))
            }))
        })
        .collect();
    start();
    let t0 = now_ns();
    began.store(t0, Ordering::Release);
    let mines = joins.into_iter().map(|j| j().ok_or_else(died)).collect::<Result<Vec<_>, _>>()?;
    let inner = Arc::try_unwrap(lock).map_err(|_| died())?.into_inner().ok_or_else(died)?;
    Ok((mines, inner, t0))
}

/// A contender panicked.
fn died() -> ProbeError {
    ProbeError::Failed("a contender panicked".into())
}

impl Run {
    fn sample(&mut self, iters: u64) -> Result<(Vec<Mine>, Inner, u64), ProbeError> {
        let work = self.work;
        let began = Arc::new(AtomicU64::new(0));
        let os_start = || -> Arc<dyn Fn() + Send + Sync> {
            let b = Arc::new(Barrier::new(CONTENDERS + 1));
            Arc::new(move || {
                b.wait();
            })
        };
        let os_spawn = |body: Body| -> Joiner {
            let h = std::thread::spawn(body);
            Box::new(move || h.join().ok())
        };
        let (mines, inner, t0) = match (&self.side, self.lock.as_str()) {
            (Side::Os, "std") => sample_with(
                std::sync::Mutex::new(Inner::new(iters)),
                os_start(),
                &os_spawn,
                &began,
                work,
            )?,
            (Side::Os, _) => sample_with(
                PLocked { m: PthreadMutex::new(false)?, data: UnsafeCell::new(Inner::new(iters)) },
                os_start(),
                &os_spawn,
                &began,
                work,
            )?,
            (Side::Rt(rt), _) => {
                // The runtime's barrier parks user threads, and this OS thread too.
                let b = Arc::new(schedlab_rt::sync::Barrier::new(CONTENDERS + 1));
                let rt_spawn = |body: Body| -> Joiner {
                    let h = rt.spawn(body);
                    Box::new(move || h.join().ok())
                };
                sample_with(
                    schedlab_rt::sync::Mutex::new(Inner::new(iters)),
                    Arc::new(move || {
                        b.wait();
                    }),
                    &rt_spawn,
                    &began,
                    work,
                )?
            }
            (Side::Tokio(rt), _) => {
                // An async lock: the same protocol ([`Contender`]) in a task's loop.
                let m = Arc::new(tokio::sync::Mutex::new(Inner::new(iters)));
                let go = Arc::new(AtomicBool::new(false));
                let hs: Vec<_> = (0..CONTENDERS)
                    .map(|me| {
                        let (m, go, began) = (m.clone(), go.clone(), began.clone());
                        rt.spawn(async move {
                            while !go.load(Ordering::Acquire) {
                                tokio::task::yield_now().await;
                            }
                            let mut c = Contender::new(me, work, &began);
                            loop {
                                let mut g = m.lock().await;
                                let go_on = c.holding(&mut g);
                                drop(g);
                                if !go_on {
                                    return c.mine;
                                }
                                c.released();
                            }
                        })
                    })
                    .collect();
                let t0 = now_ns();
                began.store(t0, Ordering::Release);
                go.store(true, Ordering::Release);
                let mines = rt.block_on(async {
                    let mut out = Vec::new();
                    for h in hs {
                        out.push(h.await.map_err(|_| died())?);
                    }
                    Ok::<_, ProbeError>(out)
                })?;
                let inner = Arc::try_unwrap(m).map_err(|_| died())?.into_inner();
                (mines, inner, t0)
            }
        };
        Ok((mines, inner, now_ns() - t0))
    }
}

impl Workload for Run {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let (mines, inner, wall) = self.sample(iters)?;
        let waits: Vec<u64> = mines.iter().flat_map(|m| m.waits.iter().copied()).collect();
        let t = &mut self.all;
        for (i, m) in mines.iter().enumerate() {
            t.counts[i] += m.count;
            t.waits.extend_from_slice(&m.waits);
        }
        t.resumes.extend_from_slice(&inner.resumes);
        t.handoffs += inner.handoffs;
        t.acquisitions += mines.iter().map(|m| m.count).sum::<u64>();
        t.wall_ns += wall;
        // One wait per acquisition, plus each contender's last (the one that found the
        // sample over): the value is the worst, once per acquisition.
        let worst = waits.iter().copied().max().unwrap_or(0);
        let value = Duration::from_nanos(worst.saturating_mul(iters.max(1)));
        let wall = Duration::from_nanos(wall);
        Ok(Timing {
            elapsed: wall.max(value),
            migrated: false,
            overhead: wall.saturating_sub(value),
        })
    }

    fn parties(&self) -> Vec<Party> {
        vec![Party::caller("main")]
    }
}

/// Jain's fairness index of `x`: (Σx)² / (n Σx²); 1 when all are equal.
fn jain(x: &[u64]) -> f64 {
    let s: f64 = x.iter().map(|&v| v as f64).sum();
    let q: f64 = x.iter().map(|&v| (v as f64).powi(2)).sum();
    if q == 0.0 {
        return 0.0;
    }
    s * s / (x.len() as f64 * q)
}

impl Instance for Run {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let mut n = self.notes.clone();
        let t = &self.all;
        if t.acquisitions == 0 {
            return n;
        }
        let total = t.acquisitions as f64;
        let share = |c: u64| format!("{:.3}", c as f64 / total);
        n.set("acq_per_s", format!("{:.0}", total / (t.wall_ns as f64 / 1e9)));
        n.set("min_share", share(*t.counts.iter().min().unwrap_or(&0)));
        n.set("max_share", share(*t.counts.iter().max().unwrap_or(&0)));
        n.set("jain", format!("{:.3}", jain(&t.counts)));
        n.set("handoff_share", format!("{:.3}", t.handoffs as f64 / total));
        tail_notes(&mut n, "wait_", &t.waits);
        tail_notes(&mut n, "resume_", &t.resumes);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lock_runs_in_smoke_settings_and_counts_every_acquisition() {
        let ctx = Context::for_tests();
        let p = LockFairness;
        for lock in LOCKS {
            let params = Params::new().with("lock", lock);
            let inst = crate::testkit::smoke_one(&p, &params, &ctx)
                .unwrap_or_else(|| panic!("lock={lock} skipped"));
            let n = inst.notes();
            let share = |k: &str| n.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap();
            assert!(share("min_share") <= share("max_share"), "lock={lock}: {n}");
            assert!(n.get("wait_max_us").is_some(), "lock={lock}: {n}");
        }
    }

    #[test]
    fn jains_index_is_one_when_even_and_one_over_n_when_one_takes_all() {
        assert!((jain(&[5, 5, 5, 5]) - 1.0).abs() < 1e-12);
        assert!((jain(&[20, 0, 0, 0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[0, 0]), 0.0);
    }

    #[test]
    fn a_hand_off_is_an_acquisition_by_another_thread_than_the_last() {
        let mut i = Inner::new(4);
        assert!(i.acquired(0, 10));
        i.released_at = 20;
        assert!(i.acquired(0, 25));
        i.released_at = 30;
        assert!(i.acquired(1, 45));
        assert!(i.acquired(1, 50));
        assert!(!i.acquired(0, 60), "the sample's acquisitions are spent");
        assert_eq!((i.handoffs, i.resumes.as_slice()), (1, &[15u64][..]));
    }
}
