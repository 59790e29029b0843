//! `sched.semaphore_storm`: seed 000's "No Semaphores" — forty dining philosophers on UNIX
//! semaphores brought an HP-UX workstation to a crawl, and `nice` helped "slightly, but not
//! to a reasonable degree".
//!
//! Forty philosophers (threads here, processes there) sit at a table of forty forks, each
//! fork a semaphore of one permit; each thinks for 20 µs of computation, takes its two
//! forks — the seed's asymmetric solution: even seats the left fork first, odd seats the
//! right — eats for 20 µs and puts them back, until stopped. Beside them an interactive
//! thread (nice 0) wakes every 10 ms; its lateness (from the moment it was due to the
//! moment it runs) is measured, and the sample's value is the worst of 100 wake-ups. The
//! notes give the lateness p50/p99/max over every wake-up and the meals per second.
//!
//! | sem | the forks | the philosophers |
//! |---|---|---|
//! | `sysv` | one System V set of 40 (`semget`, `semop`) | 40 OS threads |
//! | `posix` | 40 `sem_t` (`sem_wait`, `sem_post`: a futex) | 40 OS threads |
//! | `rt` | 40 schedlab-rt `Semaphore`s | 40 user threads on one processor per usable CPU |
//!
//! `nice=19` runs the philosophers (for `rt`, the runtime's kernel threads) at nice 19.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::placement::Party;
use schedlab_measure::sampler::Settings;
use schedlab_measure::sys::{self, now_ns};
use schedlab_measure::{ProbeError, Timing, Workload};

use super::inversion::{tail_notes, worst_timing, StopOnDrop, Threads, Work};
use crate::{Context, Info, Instance, Probe, Suite};

/// Philosophers, and forks.
const SEATS: usize = 40;
/// A philosopher's thinking and eating, each.
const THINK: Duration = Duration::from_micros(20);
/// The interactive thread's period.
const PERIOD: Duration = Duration::from_millis(10);

const SEMS: &[&str] = &["sysv", "posix", "rt"];

pub(crate) struct SemaphoreStorm;

impl Probe for SemaphoreStorm {
    fn info(&self) -> Info {
        Info {
            id: "sched.semaphore_storm",
            doc: "Seed 000's semaphore storm: 40 dining philosophers (asymmetric, 20 µs thinking and eating) on System V semaphores, POSIX sem_t or schedlab-rt Semaphores, with and without nice 19, beside an interactive thread due every 10 ms; its worst lateness per 100 wake-ups (p50/p99/max and the meals per second in notes)",
            unit: Unit::Nanos,
            mirrors: "- (seed 000, \"No Semaphores\": forty philosophers on HP-UX 9)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let v = |sem: &str, nice: u32| Params::new().with("sem", sem).with("nice", nice);
        match suite {
            // The quick suite is at its time budget: one variant, briefly (`sampling`).
            Suite::Smoke | Suite::Quick => vec![v("rt", 0)],
            Suite::Full => {
                SEMS.iter().flat_map(|s| [0, 19].into_iter().map(move |n| v(s, n))).collect()
            }
        }
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        let mut s = default.clone();
        if suite == Suite::Quick {
            s.fixed_iters = Some(25);
            s.samples = 2;
        } else if suite != Suite::Smoke {
            // 100 wake-ups (a second) a sample, fixed: each lasts its period.
            s.fixed_iters = Some(100);
            s.samples = 3;
        }
        s
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let sem = params.get("sem").unwrap_or("rt");
        if !SEMS.contains(&sem) {
            return Err(ProbeError::Failed(format!("sem={sem}: one of {}", SEMS.join(", "))));
        }
        let nice = match params.get("nice").unwrap_or("0") {
            "0" => false,
            "19" => true,
            other => return Err(ProbeError::Failed(format!("nice={other}: 0 or 19"))),
        };
        let work = Work::calibrate();
        let meals = Arc::new(AtomicU64::new(0));
        let cpus = sys::allowed_cpus().len().max(1);
        let keep: Vec<Box<dyn std::any::Any>> = match sem {
            "rt" => rt_table(nice, cpus, work, meals.clone())?,
            _ => {
                let forks: Arc<dyn Forks> =
                    if sem == "sysv" { Arc::new(SysV::new()?) } else { Arc::new(Posix::new()?) };
                let mut threads = Threads::new();
                for seat in 0..SEATS {
                    let (forks, meals) = (forks.clone(), meals.clone());
                    threads.spawn(
                        &format!("philosopher{seat}"),
                        move || {
                            if nice {
                                sys::set_nice(19)
                                    .map_err(|e| ProbeError::Failed(format!("nice 19: {e}")))?;
                            }
                            Ok(())
                        },
                        move |stop| {
                            dine(seat, &*forks, work, &meals, stop);
                        },
                    )?;
                }
                // Joined before the forks are removed.
                vec![Box::new(threads), Box::new(forks)]
            }
        };
        let notes = Params::new()
            .with("philosophers", SEATS)
            .with("cpus", cpus)
            .with("think_us", THINK.as_micros())
            .with("period_ms", PERIOD.as_millis());
        Ok(Box::new(Run { keep, meals, late: Vec::new(), meal_ns: (0, 0), notes }))
    }
}

/// The forks of the table.
trait Forks: Send + Sync {
    /// Takes fork `i`, waiting for it; false when the forks are gone.
    fn take(&self, i: usize) -> bool;
    /// Puts fork `i` back.
    fn put(&self, i: usize);
}

/// One philosopher's life: think, take both forks (the asymmetric order), eat, put them
/// back, until `stop`.
fn dine(seat: usize, forks: &dyn Forks, work: Work, meals: &AtomicU64, stop: &AtomicBool) {
    let (left, right) = (seat, (seat + 1) % SEATS);
    let (first, second) = if seat.is_multiple_of(2) { (left, right) } else { (right, left) };
    while !stop.load(Ordering::Relaxed) {
        work.run(THINK);
        if !forks.take(first) {
            return;
        }
        if !forks.take(second) {
            forks.put(first);
            return;
        }
        work.run(THINK);
        forks.put(second);
        forks.put(first);
        meals.fetch_add(1, Ordering::Relaxed);
    }
}

/// One System V semaphore set of [`SEATS`] semaphores, removed when dropped.
struct SysV(libc::c_int);

impl SysV {
    fn new() -> Result<SysV, ProbeError> {
        // SAFETY: plain system calls; `ones` outlives the SETALL call that reads it.
        unsafe {
            let id = libc::semget(libc::IPC_PRIVATE, SEATS as libc::c_int, libc::IPC_CREAT | 0o600);
            if id < 0 {
                return Err(ProbeError::last_os("semget of 40 semaphores"));
            }
            let set = SysV(id);
            let mut ones = [1u16; SEATS];
            if libc::semctl(id, 0, libc::SETALL, ones.as_mut_ptr()) < 0 {
                return Err(ProbeError::last_os("semctl SETALL"));
            }
            Ok(set)
        }
    }

    fn op(&self, i: usize, delta: i16) -> bool {
        let mut b = libc::sembuf { sem_num: i as u16, sem_op: delta, sem_flg: 0 };
        loop {
            // SAFETY: one valid sembuf on our stack.
            if unsafe { libc::semop(self.0, &mut b, 1) } == 0 {
                return true;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
        }
    }
}

impl Forks for SysV {
    fn take(&self, i: usize) -> bool {
        self.op(i, -1)
    }
    fn put(&self, i: usize) {
        self.op(i, 1);
    }
}

impl Drop for SysV {
    fn drop(&mut self) {
        // SAFETY: removes our own set; nobody uses it any more.
        unsafe { libc::semctl(self.0, 0, libc::IPC_RMID) };
    }
}

/// [`SEATS`] process-private POSIX semaphores, each boxed in place (a `sem_t` must not move).
struct Posix(Box<[UnsafeCell<libc::sem_t>]>);

// SAFETY: sem_t is made to be shared between threads; only its functions touch it.
unsafe impl Send for Posix {}
// SAFETY: as above.
unsafe impl Sync for Posix {}

impl Posix {
    fn new() -> Result<Posix, ProbeError> {
        // SAFETY: zeroed storage is initialised by sem_init before any use.
        let sems: Box<[UnsafeCell<libc::sem_t>]> =
            (0..SEATS).map(|_| UnsafeCell::new(unsafe { std::mem::zeroed() })).collect();
        for s in sems.iter() {
            // SAFETY: a sem_t in its final place, not yet shared.
            if unsafe { libc::sem_init(s.get(), 0, 1) } != 0 {
                return Err(ProbeError::last_os("sem_init"));
            }
        }
        Ok(Posix(sems))
    }
}

impl Forks for Posix {
    fn take(&self, i: usize) -> bool {
        loop {
            // SAFETY: an initialised semaphore that outlives its users.
            if unsafe { libc::sem_wait(self.0[i].get()) } == 0 {
                return true;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
        }
    }
    fn put(&self, i: usize) {
        // SAFETY: as above.
        unsafe { libc::sem_post(self.0[i].get()) };
    }
}

impl Drop for Posix {
    fn drop(&mut self) {
        for s in self.0.iter() {
            // SAFETY: no thread uses it any more (they are joined first).
            unsafe { libc::sem_destroy(s.get()) };
        }
    }
}

struct RtForks(Vec<schedlab_rt::sync::Semaphore>);

impl Forks for RtForks {
    fn take(&self, i: usize) -> bool {
        self.0[i].acquire();
        true
    }
    fn put(&self, i: usize) {
        self.0[i].release();
    }
}

/// The table as user threads: a runtime built on a thread at the philosophers' nice value
/// (its kernel threads inherit it), the philosophers spawned on it.
fn rt_table(
    nice: bool,
    cpus: usize,
    work: Work,
    meals: Arc<AtomicU64>,
) -> Result<Vec<Box<dyn std::any::Any>>, ProbeError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let built = if nice {
            sys::set_nice(19).map_err(|e| ProbeError::Failed(format!("nice 19: {e}")))
        } else {
            Ok(())
        }
        .and_then(|()| {
            schedlab_rt::Runtime::builder()
                .processors(cpus)
                .build()
                .map_err(|e| ProbeError::Failed(format!("building a runtime: {e}")))
        });
        let _ = tx.send(built);
    });
    let rt = rx.recv().map_err(|_| ProbeError::Failed("the runtime's builder died".into()))??;
    let forks =
        Arc::new(RtForks((0..SEATS).map(|_| schedlab_rt::sync::Semaphore::new(1)).collect()));
    let stop = Arc::new(AtomicBool::new(false));
    for seat in 0..SEATS {
        let (forks, meals, stop) = (forks.clone(), meals.clone(), stop.clone());
        rt.spawn(move || dine(seat, &*forks, work, &meals, &stop));
    }
    // The flag is set before the runtime drops and waits for its threads.
    Ok(vec![Box::new(StopOnDrop(stop)), Box::new(rt)])
}

struct Run {
    keep: Vec<Box<dyn std::any::Any>>,
    meals: Arc<AtomicU64>,
    late: Vec<u64>,
    /// Meals and wall time over the samples.
    meal_ns: (u64, u64),
    notes: Params,
}

impl Drop for Run {
    fn drop(&mut self) {
        // In order: the stop flag or the joined threads first, then the forks or runtime.
        while !self.keep.is_empty() {
            drop(self.keep.remove(0));
        }
    }
}

impl Workload for Run {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let m0 = self.meals.load(Ordering::Relaxed);
        let t0 = now_ns();
        let period = PERIOD.as_nanos() as u64;
        let mut due = t0 + period;
        let mut late = Vec::with_capacity(iters as usize);
        for _ in 0..iters {
            sys::sleep_until(due);
            late.push(now_ns().saturating_sub(due));
            due += period;
        }
        let wall = now_ns() - t0;
        self.meal_ns.0 += self.meals.load(Ordering::Relaxed) - m0;
        self.meal_ns.1 += wall;
        self.late.extend_from_slice(&late);
        Ok(worst_timing(&late, Duration::from_nanos(wall)))
    }

    fn parties(&self) -> Vec<Party> {
        vec![Party::caller("interactive")]
    }
}

impl Instance for Run {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let mut n = self.notes.clone();
        tail_notes(&mut n, "late_", &self.late);
        if self.meal_ns.1 > 0 {
            n.set(
                "meals_per_s",
                format!("{:.0}", self.meal_ns.0 as f64 / (self.meal_ns.1 as f64 / 1e9)),
            );
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_runs_in_smoke_settings_and_the_philosophers_eat() {
        let ctx = Context::for_tests();
        let p = SemaphoreStorm;
        for sem in SEMS {
            let params = Params::new().with("sem", sem).with("nice", 0);
            let mut inst = crate::testkit::smoke_one(&p, &params, &ctx)
                .unwrap_or_else(|| panic!("sem={sem} skipped"));
            assert!(inst.notes().get("late_max_us").is_some(), "sem={sem}: {}", inst.notes());
            // The interactive thread sleeps 10 ms a wake-up: forty philosophers eat meanwhile.
            // A smoke sample is a few wake-ups, which a loaded machine can pass without giving
            // the table a CPU at all; so more wake-ups, until someone has eaten (the bound is
            // a hang guard: a table that never eats is the failure).
            let meals = |i: &dyn Instance| -> f64 {
                i.notes().get("meals_per_s").and_then(|v| v.parse().ok()).unwrap_or(0.0)
            };
            let guard = std::time::Instant::now();
            while meals(&*inst) == 0.0 && guard.elapsed() < Duration::from_secs(60) {
                inst.run(10).unwrap();
            }
            assert!(meals(&*inst) > 0.0, "sem={sem}: nobody ate in 60 s ({})", inst.notes());
        }
    }
}
