//! Signal costs: lmbench's `lat_sig install` and `lat_sig catch`, in nanoseconds (lmbench
//! prints microseconds; we use the syscall probes' unit, these being system calls of the same
//! order).
//!
//! - `os.signal.install`: `sigaction(SIGUSR1)` installing a handler, the `struct sigaction`
//!   filled anew each time, exactly lmbench's `do_install` loop.
//! - `os.signal.catch`: a signal sent to ourselves and delivered to a handler that counts it,
//!   minus the cost of sending signal 0 (permission check and lookup, no delivery), as
//!   lmbench's `bench_catch` subtracts `kill(me, 0)` from `kill(me, SIGUSR1)`.
//!
//! # One deliberate difference: tgkill instead of kill
//! lmbench is single-threaded, so `kill(getpid(), SIGUSR1)` is handled by the sender before
//! `kill` returns. schedlab is not (the progress ticker; test threads), and a process-directed
//! signal may be delivered to *another* thread, asynchronously, perhaps on another CPU. We
//! send with `tgkill(getpid(), gettid(), ...)` to the calling thread, which the kernel then
//! handles on that thread's way out of the system call: the same work lmbench times, made
//! deterministic. The handler's count is checked against the iterations after every call.
//!
//! # Protocol
//! 1. Setup takes exclusive ownership of SIGUSR1 for this process ([`SignalOwner`]: a flag,
//!    waited for, since tests may set two signal probes up at once) and records the current
//!    disposition.
//! 2. The timed body changes the disposition (install) or sends and catches (catch). For catch
//!    the send-only loop runs right after the catch loop in the same call and is reported as
//!    the timing's `overhead`: each sample carries its own subtraction, and the sampler keeps
//!    the raw send-and-catch time beside the value.
//! 3. Drop restores the recorded disposition, then releases ownership.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::{interrupt, ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe};

/// The signal both probes use, as lmbench does.
const SIGNAL: libc::c_int = libc::SIGUSR1;

/// Signals caught by [`count_signal`] since the last reset.
static CAUGHT: AtomicU64 = AtomicU64::new(0);

/// Set while a [`SignalOwner`] exists: SIGUSR1's disposition belongs to it.
static OWNED: AtomicBool = AtomicBool::new(false);

/// The catch probe's handler. An atomic add is async-signal-safe.
extern "C" fn count_signal(_: libc::c_int) {
    CAUGHT.fetch_add(1, Ordering::Relaxed);
}

/// lmbench's `handler() { }`, for the install loop.
extern "C" fn empty_handler(_: libc::c_int) {}

/// The value `sa_sigaction` holds for `handler`.
fn addr(handler: extern "C" fn(libc::c_int)) -> libc::sighandler_t {
    handler as libc::sighandler_t
}

/// A `struct sigaction` for `handler` with an empty mask and no flags (lmbench's settings:
/// no SA_RESTART, no SA_SIGINFO).
fn action(handler: extern "C" fn(libc::c_int)) -> libc::sigaction {
    // SAFETY: sigaction is plain data; all-zero is a valid (default) value.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = addr(handler);
    // SAFETY: `sa.sa_mask` is a valid sigset_t.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    sa.sa_flags = 0;
    sa
}

/// Exclusive use of SIGUSR1 in this process, and its disposition from before we took it,
/// restored on drop.
struct SignalOwner {
    old: libc::sigaction,
}

impl SignalOwner {
    /// Waits (up to 10 s) for no other signal probe to be set up, then records the current
    /// disposition.
    fn acquire() -> Result<SignalOwner, ProbeError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while OWNED.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err() {
            if interrupt::requested() {
                return Err(ProbeError::Interrupted);
            }
            if Instant::now() > deadline {
                return Err(ProbeError::Skip(
                    "another signal probe holds SIGUSR1 in this process".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: sigaction is plain data; all-zero is valid.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only queries; `old` is a writable sigaction.
        if unsafe { libc::sigaction(SIGNAL, std::ptr::null(), &mut old) } != 0 {
            let e = ProbeError::last_os("sigaction(SIGUSR1, query)");
            OWNED.store(false, Ordering::Release);
            return Err(e);
        }
        Ok(SignalOwner { old })
    }

    /// Installs `handler` for SIGUSR1.
    fn install(&self, handler: extern "C" fn(libc::c_int)) -> Result<(), ProbeError> {
        let sa = action(handler);
        // SAFETY: `sa` is a valid sigaction whose handler is a static async-signal-safe fn.
        if unsafe { libc::sigaction(SIGNAL, &sa, std::ptr::null_mut()) } != 0 {
            return Err(ProbeError::last_os("sigaction(SIGUSR1)"));
        }
        Ok(())
    }
}

impl Drop for SignalOwner {
    fn drop(&mut self) {
        // SAFETY: `old` is the disposition the kernel gave us in `acquire`.
        unsafe { libc::sigaction(SIGNAL, &self.old, std::ptr::null_mut()) };
        OWNED.store(false, Ordering::Release);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Install,
    Catch,
}

struct SignalProbe(Kind);

/// The signal probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(SignalProbe(Kind::Install)), Box::new(SignalProbe(Kind::Catch))]
}

impl Probe for SignalProbe {
    fn info(&self) -> Info {
        match self.0 {
            Kind::Install => Info {
                id: "os.signal.install",
                doc: "sigaction() installing a SIGUSR1 handler, ns per call",
                unit: Unit::Nanos,
                mirrors: "lmbench lat_sig install",
                requires: "",
            },
            Kind::Catch => Info {
                id: "os.signal.catch",
                doc: "a SIGUSR1 sent to ourselves and caught by a counting handler, minus the send alone (signal 0)",
                unit: Unit::Nanos,
                mirrors: "lmbench lat_sig catch (tgkill to the calling thread instead of kill(getpid()): deterministic delivery in a threaded process)",
                requires: "",
            },
        }
    }

    fn setup(&self, _params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let owner = SignalOwner::acquire()?;
        match self.0 {
            Kind::Install => Ok(Box::new(Install { _owner: owner })),
            Kind::Catch => {
                owner.install(count_signal)?;
                Ok(Box::new(Catch { _owner: owner, iters: 0, catch_ns: 0, send_ns: 0 }))
            }
        }
    }
}

struct Install {
    _owner: SignalOwner,
}

impl Workload for Install {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        // SAFETY: sigaction is plain data; all-zero is valid.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        let mut failed = false;
        let t = Timing::measure(|| {
            for _ in 0..iters {
                // Filled anew each time, as lmbench's do_install does.
                sa.sa_sigaction = addr(empty_handler);
                // SAFETY: `sa.sa_mask` is a valid sigset_t.
                unsafe { libc::sigemptyset(&mut sa.sa_mask) };
                sa.sa_flags = 0;
                // SAFETY: `sa` is a valid sigaction with a static handler; `old` is writable.
                failed |= unsafe { libc::sigaction(SIGNAL, black_box(&sa), &mut old) } != 0;
            }
        });
        black_box(&old);
        if failed {
            return Err(ProbeError::last_os("sigaction in timed loop"));
        }
        Ok(t)
    }
}

impl Instance for Install {
    fn metric(&self) -> Metric {
        Metric::per_op()
    }
}

struct Catch {
    _owner: SignalOwner,
    /// Totals over every call, for the notes.
    iters: u64,
    catch_ns: u128,
    send_ns: u128,
}

/// True when `sig` is blocked in the calling thread (it would then never be delivered).
fn blocked(sig: libc::c_int) -> bool {
    // SAFETY: sigset_t is plain data; all-zero is valid (pthread_sigmask overwrites it).
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a null new set only queries the mask into `set`.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) };
    // SAFETY: `set` is a valid sigset_t.
    rc == 0 && unsafe { libc::sigismember(&set, sig) } == 1
}

impl Workload for Catch {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        if blocked(SIGNAL) {
            return Err(ProbeError::Failed("SIGUSR1 is blocked in the measuring thread".into()));
        }
        // SAFETY: getpid and gettid have no preconditions.
        let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
        let mut failed = false;
        CAUGHT.store(0, Ordering::Relaxed);
        let catch = Timing::measure(|| {
            for _ in 0..iters {
                // The handler runs before tgkill returns to us (signal to the calling thread).
                // SAFETY: tgkill to our own thread; the handler installed in setup only adds
                // to an atomic.
                failed |= unsafe { libc::tgkill(black_box(pid), tid, SIGNAL) } != 0;
            }
        });
        if failed {
            return Err(ProbeError::last_os("tgkill(SIGUSR1)"));
        }
        let caught = CAUGHT.load(Ordering::Relaxed);
        if caught != iters {
            return Err(ProbeError::Failed(format!("caught {caught} of {iters} signals sent")));
        }
        let send = Timing::measure(|| {
            for _ in 0..iters {
                // Signal 0: the same lookup and permission check, nothing delivered.
                // SAFETY: tgkill with signal 0 only checks the target.
                failed |= unsafe { libc::tgkill(black_box(pid), tid, 0) } != 0;
            }
        });
        if failed {
            return Err(ProbeError::last_os("tgkill(0)"));
        }
        self.iters += iters;
        self.catch_ns += catch.elapsed.as_nanos();
        self.send_ns += send.elapsed.as_nanos();
        // The sampler takes the send-only time off and keeps the raw catch time.
        Ok(Timing { overhead: send.elapsed, ..catch })
    }
}

impl Instance for Catch {
    fn metric(&self) -> Metric {
        // The paired subtraction already removes the loop; nothing else to take off.
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let per = |ns: u128| format!("{:.1}", ns as f64 / self.iters.max(1) as f64);
        Params::new()
            .with("send_and_catch_ns", per(self.catch_ns))
            .with("send_only_ns", per(self.send_ns))
            .with("subtracted", "send_only_ns (as lmbench)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::clock::Calibration;
    use schedlab_measure::sampler::{self, Settings};

    fn current_handler() -> libc::sighandler_t {
        // SAFETY: sigaction is plain data; all-zero is valid.
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: query only.
        assert_eq!(unsafe { libc::sigaction(SIGNAL, std::ptr::null(), &mut now) }, 0);
        now.sa_sigaction
    }

    #[test]
    fn catch_counts_every_signal_and_restores_the_disposition() {
        let ctx = Context::for_tests();
        let mut inst = SignalProbe(Kind::Catch).setup(&Params::new(), &ctx).unwrap();
        // While set up, the counting handler is installed.
        assert_eq!(current_handler(), addr(count_signal));
        let metric = inst.metric();
        let settings = Settings { fixed_iters: Some(1000), ..Settings::smoke() };
        let c =
            sampler::collect_in(&mut *inst, &settings, &Calibration::zero(), metric, Unit::Nanos)
                .unwrap();
        assert_eq!(c.samples.len(), 2);
        assert_eq!(CAUGHT.load(Ordering::Relaxed), 1000);
        let notes = inst.notes();
        assert!(notes.get("send_only_ns").is_some());
        drop(inst);
        // The owner gave SIGUSR1 back: a new owner can be taken at once.
        let owner = SignalOwner::acquire().unwrap();
        assert_ne!(owner.old.sa_sigaction, addr(count_signal));
    }

    #[test]
    fn install_leaves_the_previous_handler_in_place() {
        let ctx = Context::for_tests();
        let owner = SignalOwner::acquire().unwrap();
        let original = owner.old.sa_sigaction;
        drop(owner);
        let mut inst = SignalProbe(Kind::Install).setup(&Params::new(), &ctx).unwrap();
        inst.run(100).unwrap();
        assert_eq!(current_handler(), addr(empty_handler));
        drop(inst);
        // Nothing else in this crate's tests touches SIGUSR1 outside an owner, so the
        // disposition is the one found before.
        let owner = SignalOwner::acquire().unwrap();
        assert_eq!(owner.old.sa_sigaction, original);
    }

    #[test]
    fn owners_exclude_each_other() {
        use std::sync::Arc;
        let a = SignalOwner::acquire().unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&released);
        let waiter = std::thread::spawn(move || {
            let b = SignalOwner::acquire().unwrap();
            // We only get here once `a` is gone.
            let was_released = seen.load(Ordering::SeqCst);
            drop(b);
            was_released
        });
        std::thread::sleep(Duration::from_millis(20));
        released.store(true, Ordering::SeqCst);
        drop(a);
        assert!(waiter.join().unwrap(), "a second owner existed while the first was alive");
    }
}
