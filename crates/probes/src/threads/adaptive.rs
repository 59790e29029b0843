//! `threads.mutex.adaptive`: a lock that spins before it sleeps against one that sleeps at
//! once, across the time the lock is held (seed 002, issue 26). Seed 002 credits FreeBSD's
//! adaptive mutexes ("the thread spins if the lock holder is currently executed on some CPU
//! ... when the holder is not in execution ... it is wasteful to spin, so the thread is
//! sleeping") and turnstiles for its thread rows. The question is where spinning pays: a
//! waiter that spins saves the sleep and the wake-up (microseconds each) when the lock comes
//! free soon, and burns a CPU for nothing when it does not.
//!
//! Each of `threads` threads, pinned round-robin over the CPUs, repeats: lock, increment the
//! protected counter, work `hold_us` microseconds (a busy loop on the clock), unlock, then
//! work as long again outside the lock. So the lock is wanted half of each thread's time, and
//! with two threads on two CPUs (or four on two, where a holder is often preempted) it is
//! contended. The sample is the span from the first thread's start to the last one's end,
//! per critical section: the ideal is `hold_us` itself (the sections are serial, and with
//! four threads on two CPUs the work fills both CPUs just as well), so the figure minus
//! `hold_us` is what the lock costs. The counter is checked against the sections run.
//!
//! The locks (`lock=`):
//! - `backend=os`: `sleep` is a futex mutex (Drepper, "Futexes Are Tricky", mutex 3: the word
//!   0 free, 1 locked, 2 locked with waiters; a waiter swaps in 2 and `FUTEX_WAIT`s, an
//!   unlocker that swapped out 2 wakes one); `spin` is the same lock with a spin phase first:
//!   up to [`SPIN_BUDGET`] of `pause`s, testing the word, before it sleeps. A user-space lock
//!   cannot see whether the holder runs (FreeBSD's can), so the spin is bounded by time, about
//!   one sleep and wake-up on this machine (Karlin et al.'s competitive spinning, SOSP 1991).
//!   The notes give the share of lock calls that slept. `pthread-adaptive` and
//!   `pthread-normal` are glibc's `PTHREAD_MUTEX_ADAPTIVE_NP` (spins up to
//!   `glibc.pthread.mutex_spin_count`, 100 by default, then sleeps) and its default mutex.
//! - `backend=rt`: `spin` is `schedlab_rt::sync::Mutex`, which spins only while some other
//!   processor may be running the holder (its module doc); it has no switch to turn the spin
//!   off, so `sleep` is a lock written here that parks at once: a count of holders and
//!   waiters with a `schedlab_rt::sync::Semaphore` to park on (a "benaphore": lock adds one
//!   and waits on the semaphore if it was not 0; unlock subtracts one and releases the
//!   semaphore if someone waits). It hands the lock to the first waiter in line; the futex
//!   and rt mutexes let a running thread take it first.
//!
//! tokio has no row: its Mutex parks a task at once and has no spinning phase to compare.

use std::cell::UnsafeCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::sys;
use schedlab_measure::{ProbeError, Timing};

use super::backend::{self, futex_wait, futex_wake, rt_pinned, rt_run, Backend, Bench};
use super::mutex::{check, span_of, Crew};
use crate::{Context, Info, Instance, Probe, Suite};

/// How long the futex lock's spin phase may last before it sleeps: about one futex sleep and
/// wake-up on the lab machine (os.pipe.latency's same-CPU round trip is two of them).
const SPIN_BUDGET: Duration = Duration::from_micros(5);

/// glibc's `PTHREAD_MUTEX_ADAPTIVE_NP` (pthread.h; the libc crate has it only for some
/// targets).
const PTHREAD_MUTEX_ADAPTIVE_NP: libc::c_int = 3;

/// The locks compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockKind {
    Spin,
    Sleep,
    PthreadAdaptive,
    PthreadNormal,
}

impl LockKind {
    fn key(self) -> &'static str {
        match self {
            LockKind::Spin => "spin",
            LockKind::Sleep => "sleep",
            LockKind::PthreadAdaptive => "pthread-adaptive",
            LockKind::PthreadNormal => "pthread-normal",
        }
    }

    fn from_params(p: &Params, backend: Backend) -> Result<LockKind, ProbeError> {
        let text = p.get("lock").unwrap_or("spin");
        let offered: &[LockKind] = match backend {
            Backend::Rt => &[LockKind::Spin, LockKind::Sleep],
            _ => &[
                LockKind::Spin,
                LockKind::Sleep,
                LockKind::PthreadAdaptive,
                LockKind::PthreadNormal,
            ],
        };
        offered.iter().copied().find(|l| l.key() == text).ok_or_else(|| {
            let names: Vec<&str> = offered.iter().map(|l| l.key()).collect();
            ProbeError::Failed(format!(
                "bad lock {text:?} for backend={}: use {}",
                backend.key(),
                names.join(", ")
            ))
        })
    }
}

// ---------------------------------------------------------------------------------------
// The OS locks.
// ---------------------------------------------------------------------------------------

/// Drepper's mutex 3 with an optional spin phase; see the module doc.
struct FutexLock {
    word: AtomicU32,
    spin: bool,
    /// Times a locker went to sleep (FUTEX_WAIT calls).
    sleeps: AtomicU64,
}

impl FutexLock {
    #[inline]
    fn lock(&self) {
        if self.word.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return;
        }
        if self.spin && self.spin_phase() {
            return;
        }
        let mut c = self.word.swap(2, Ordering::Acquire);
        while c != 0 {
            self.sleeps.fetch_add(1, Ordering::Relaxed);
            futex_wait(&self.word, 2);
            c = self.word.swap(2, Ordering::Acquire);
        }
    }

    /// Spins up to SPIN_BUDGET, testing the word before each attempt (a locked instruction
    /// on a held lock would take its line from the holder); whether it took the lock.
    #[cold]
    fn spin_phase(&self) -> bool {
        let start = Instant::now();
        loop {
            for _ in 0..16 {
                std::hint::spin_loop();
                if self.word.load(Ordering::Relaxed) == 0
                    && self
                        .word
                        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    return true;
                }
            }
            if start.elapsed() >= SPIN_BUDGET {
                return false;
            }
        }
    }

    #[inline]
    fn unlock(&self) {
        if self.word.swap(0, Ordering::Release) == 2 {
            futex_wake(&self.word, 1);
        }
    }
}

/// A glibc mutex of a given type, on the heap (a pthread mutex must not move).
struct PthreadLock(Box<UnsafeCell<libc::pthread_mutex_t>>);

// SAFETY: a pthread mutex is made to be locked and unlocked from any thread.
unsafe impl Sync for PthreadLock {}
// SAFETY: as above; it is destroyed by whichever thread drops it, unlocked.
unsafe impl Send for PthreadLock {}

impl PthreadLock {
    fn new(kind: libc::c_int) -> Result<PthreadLock, ProbeError> {
        let m = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: attr is initialised before use and destroyed after; the mutex lives on the
        // heap at a fixed address and is not in use yet.
        let rc = unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            let rc = libc::pthread_mutexattr_settype(&mut attr, kind);
            let rc = if rc == 0 { libc::pthread_mutex_init(m.get(), &attr) } else { rc };
            libc::pthread_mutexattr_destroy(&mut attr);
            rc
        };
        if rc != 0 {
            return Err(ProbeError::Failed(format!(
                "pthread_mutex_init(type {kind}): {}",
                std::io::Error::from_raw_os_error(rc)
            )));
        }
        Ok(PthreadLock(m))
    }
}

impl Drop for PthreadLock {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, unlocked (every lock in the body is paired).
        unsafe { libc::pthread_mutex_destroy(self.0.get()) };
    }
}

enum OsLock {
    Futex(FutexLock),
    Pthread(PthreadLock),
}

impl OsLock {
    #[inline]
    fn lock(&self) {
        match self {
            OsLock::Futex(f) => f.lock(),
            // SAFETY: an initialised mutex, locked by a thread that does not hold it.
            OsLock::Pthread(p) => unsafe {
                libc::pthread_mutex_lock(p.0.get());
            },
        }
    }

    #[inline]
    fn unlock(&self) {
        match self {
            OsLock::Futex(f) => f.unlock(),
            // SAFETY: unlocked by the thread that locked it.
            OsLock::Pthread(p) => unsafe {
                libc::pthread_mutex_unlock(p.0.get());
            },
        }
    }
}

/// A lock and the counter it protects.
struct Guarded<L> {
    lock: L,
    count: UnsafeCell<u64>,
}

// SAFETY: `count` is touched only between `lock` and `unlock` (or with no other thread
// running: after a sample), so one thread at a time.
unsafe impl<L: Sync> Sync for Guarded<L> {}

/// Works for `d`: a busy loop on the clock (the work of a critical section or outside it).
#[inline]
fn work(d: Duration) {
    if d.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

// ---------------------------------------------------------------------------------------
// The rt lock that parks at once.
// ---------------------------------------------------------------------------------------

/// A lock that parks at once: a count of holders and waiters and a semaphore to park on.
struct Benaphore {
    count: AtomicU32,
    sem: schedlab_rt::sync::Semaphore,
}

impl Benaphore {
    fn new() -> Benaphore {
        Benaphore { count: AtomicU32::new(0), sem: schedlab_rt::sync::Semaphore::new(0) }
    }

    #[inline]
    fn lock(&self) {
        if self.count.fetch_add(1, Ordering::Acquire) > 0 {
            // Held: wait for the holder's release, which hands the lock over.
            self.sem.acquire();
        }
    }

    #[inline]
    fn unlock(&self) {
        if self.count.fetch_sub(1, Ordering::Release) > 1 {
            // Someone counted themselves in after us: hand the lock to a waiter (a permit
            // released before its waiter parks is kept and taken at once).
            self.sem.release();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The probe.
// ---------------------------------------------------------------------------------------

struct Adaptive;

/// The adaptive-spinning probe, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(Adaptive)]
}

impl Probe for Adaptive {
    fn info(&self) -> Info {
        Info {
            id: "threads.mutex.adaptive",
            doc: "N threads on all CPUs each lock, work hold_us, unlock, work hold_us: wall time per critical section (ideal = hold_us), for a lock that spins before sleeping (lock=spin) against one that sleeps at once (lock=sleep)",
            unit: Unit::Micros,
            mirrors: "- (seed 002: FreeBSD's adaptive mutexes; os = a futex mutex with and without a 5 µs spin, and glibc's PTHREAD_MUTEX_ADAPTIVE_NP against its default; rt = schedlab_rt::sync::Mutex against a lock parking on a schedlab_rt Semaphore at once)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let (holds, threads, os_locks): (&[u32], &[usize], &[LockKind]) = match suite {
            Suite::Smoke => (&[1], &[2], &[LockKind::Spin, LockKind::Sleep]),
            Suite::Quick => (&[1, 10], &[2, 4], &[LockKind::Spin, LockKind::Sleep]),
            Suite::Full => (
                &[0, 1, 10, 100],
                &[2, 4],
                &[
                    LockKind::Spin,
                    LockKind::Sleep,
                    LockKind::PthreadAdaptive,
                    LockKind::PthreadNormal,
                ],
            ),
        };
        let mut v = Vec::new();
        for &t in threads {
            for &h in holds {
                let base = Params::new().with("threads", t).with("hold_us", h);
                for l in os_locks {
                    v.push(base.clone().with("backend", "os").with("lock", l.key()));
                }
                for l in [LockKind::Spin, LockKind::Sleep] {
                    v.push(base.clone().with("backend", "rt").with("lock", l.key()));
                }
            }
        }
        v
    }

    /// The quick suite's lighter sampling: sixteen variants of a steady loop.
    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        match suite {
            Suite::Quick => Settings {
                samples: 7,
                target: Duration::from_millis(5),
                warmup: Duration::from_millis(10),
                ..default.clone()
            },
            _ => default.clone(),
        }
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let backend = Backend::from_params(params)?;
        if backend == Backend::Tokio {
            return Err(ProbeError::Failed("bad backend \"tokio\": use os or rt".into()));
        }
        let lock = LockKind::from_params(params, backend)?;
        let threads: usize = params.parse_or("threads", 2).map_err(ProbeError::Failed)?;
        if !(1..=64).contains(&threads) {
            return Err(ProbeError::Failed(format!("threads={threads}: use 1 to 64")));
        }
        let hold_us: u64 = params.parse_or("hold_us", 1).map_err(ProbeError::Failed)?;
        if hold_us > 10_000 {
            return Err(ProbeError::Failed(format!("hold_us={hold_us}: at most 10000")));
        }
        let hold = Duration::from_micros(hold_us);
        let cpus = sys::allowed_cpus();
        let notes = Params::new()
            .with("cpus", backend::cpu_list(&cpus))
            .with("ideal_us", hold_us)
            .with("placement", "round-robin");
        let bench = Bench::new(Metric::per_ops(threads as f64), notes);
        Ok(match backend {
            Backend::Os => {
                let os_lock = match lock {
                    LockKind::Spin | LockKind::Sleep => OsLock::Futex(FutexLock {
                        word: AtomicU32::new(0),
                        spin: lock == LockKind::Spin,
                        sleeps: AtomicU64::new(0),
                    }),
                    LockKind::PthreadAdaptive => {
                        OsLock::Pthread(PthreadLock::new(PTHREAD_MUTEX_ADAPTIVE_NP)?)
                    }
                    LockKind::PthreadNormal => {
                        OsLock::Pthread(PthreadLock::new(libc::PTHREAD_MUTEX_NORMAL)?)
                    }
                };
                let g = Arc::new(Guarded { lock: os_lock, count: UnsafeCell::new(0) });
                let g2 = g.clone();
                let crew = Crew::start(
                    threads,
                    &cpus,
                    Arc::new(move |iters| {
                        for _ in 0..iters {
                            g2.lock.lock();
                            // SAFETY: the lock is held.
                            unsafe { *g2.count.get() += 1 };
                            work(hold);
                            g2.lock.unlock();
                            work(hold);
                        }
                    }),
                )?;
                let mut expected = 0u64;
                let g3 = g.clone();
                let bench = bench.body(move |iters| {
                    let timing = crew.run(iters)?;
                    expected += threads as u64 * iters;
                    // SAFETY: the crew is idle between samples: nobody holds the lock.
                    check(unsafe { *g3.count.get() }, expected)?;
                    Ok(timing)
                });
                Box::new(WithSleeps { bench, guarded: g })
            }
            _ => {
                let rt = rt_pinned(&cpus)?;
                let note = format!("rt processors={}", cpus.len());
                let sleep = lock == LockKind::Sleep;
                bench
                    .note("runtime", note)
                    .body(move |iters| {
                        let (span, count) =
                            rt_run(&rt, move || rt_sample(threads, iters, hold, sleep))?;
                        check(count, threads as u64 * iters)?;
                        Ok(Timing::from_elapsed(span))
                    })
                    .boxed()
            }
        })
    }
}

/// One rt sample: `threads` user threads run `iters` sections each on one lock; the span
/// from the first start to the last end, and the counter.
fn rt_sample(threads: usize, iters: u64, hold: Duration, sleep: bool) -> (Duration, u64) {
    use schedlab_rt::sync::{Barrier, Mutex};
    let barrier = Arc::new(Barrier::new(threads));
    if sleep {
        let g = Arc::new(Guarded { lock: Benaphore::new(), count: UnsafeCell::new(0) });
        let crew: Vec<_> = (0..threads)
            .map(|_| {
                let (g, barrier) = (g.clone(), barrier.clone());
                schedlab_rt::spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        g.lock.lock();
                        // SAFETY: the lock is held.
                        unsafe { *g.count.get() += 1 };
                        work(hold);
                        g.lock.unlock();
                        work(hold);
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        let span = span_of(crew.into_iter().filter_map(|h| h.join().ok()));
        // SAFETY: every user thread has been joined: nobody holds the lock.
        (span, unsafe { *g.count.get() })
    } else {
        let m = Arc::new(Mutex::new(0u64));
        let crew: Vec<_> = (0..threads)
            .map(|_| {
                let (m, barrier) = (m.clone(), barrier.clone());
                schedlab_rt::spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        let mut c = m.lock();
                        *c += 1;
                        work(hold);
                        drop(black_box(c));
                        work(hold);
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        let span = span_of(crew.into_iter().filter_map(|h| h.join().ok()));
        let count = *m.lock();
        (span, count)
    }
}

/// The OS bench with the share of lock calls that slept (the futex locks count them).
struct WithSleeps {
    bench: Bench,
    guarded: Arc<Guarded<OsLock>>,
}

impl schedlab_measure::Workload for WithSleeps {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        self.bench.run(iters)
    }

    fn parties(&self) -> Vec<schedlab_measure::placement::Party> {
        schedlab_measure::Workload::parties(&self.bench)
    }
}

impl Instance for WithSleeps {
    fn metric(&self) -> Metric {
        self.bench.metric()
    }

    fn notes(&self) -> Params {
        let mut n = self.bench.notes();
        if let OsLock::Futex(f) = &self.guarded.lock {
            // SAFETY: read between samples, when the crew is idle.
            let locks = unsafe { *self.guarded.count.get() };
            if locks > 0 {
                let share = f.sleeps.load(Ordering::Relaxed) as f64 / locks as f64;
                n.set("sleeps_per_lock", format!("{share:.3}"));
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_futex_locks_exclude_and_end_unlocked() {
        for spin in [false, true] {
            let g = Arc::new(Guarded {
                lock: FutexLock { word: AtomicU32::new(0), spin, sleeps: AtomicU64::new(0) },
                count: UnsafeCell::new(0),
            });
            let crew: Vec<_> = (0..4)
                .map(|_| {
                    let g = g.clone();
                    std::thread::spawn(move || {
                        for _ in 0..2000 {
                            g.lock.lock();
                            // SAFETY: the lock is held.
                            unsafe { *g.count.get() += 1 };
                            work(Duration::from_micros(2));
                            g.lock.unlock();
                        }
                    })
                })
                .collect();
            for h in crew {
                h.join().unwrap();
            }
            // SAFETY: every thread has been joined.
            assert_eq!(unsafe { *g.count.get() }, 8000, "spin={spin}");
            assert_eq!(g.lock.word.load(Ordering::Relaxed), 0, "left locked");
        }
    }

    #[test]
    fn every_variant_runs_and_counts_every_section() {
        for params in Adaptive.variants(Suite::Smoke) {
            let mut inst = Adaptive.setup(&params, &Context::for_tests()).unwrap();
            inst.run(50).unwrap();
            inst.run(50).unwrap();
            assert_eq!(inst.notes().get("ideal_us"), Some("1"), "[{params}]");
        }
    }

    #[test]
    fn the_pthread_locks_run_and_rt_refuses_them_by_name() {
        for lock in ["pthread-adaptive", "pthread-normal"] {
            let p = Params::new().with("backend", "os").with("lock", lock).with("hold_us", 0);
            Adaptive.setup(&p, &Context::for_tests()).unwrap().run(100).unwrap();
            let p = Params::new().with("backend", "rt").with("lock", lock);
            let e = Adaptive.setup(&p, &Context::for_tests()).err().unwrap();
            assert!(e.to_string().contains(lock) && e.to_string().contains("spin, sleep"), "{e}");
        }
    }
}
