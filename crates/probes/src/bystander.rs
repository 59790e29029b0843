//! `rt.bystander`: seed 003's §7 claim for schedlab-rt — the thread system costs programs
//! that do not use it nothing (issue 26).
//!
//! The seed ran HBench-OS's five system-call rows (getpid, getrusage, gettimeofday, sbrk,
//! sigaction) on a NetBSD kernel before and after scheduler activations and found them
//! "mixed; some faster, others slower". Our runtime lives in user space, so the question here
//! is what a *live* runtime in the same process does to those calls: the same OS probe's
//! timed body (`os.syscall.getpid`, `os.syscall.getrusage`, `os.syscall.gettimeofday`
//! `via=syscall`, `os.mm.sbrk`, `os.signal.install`), run by the measuring thread with the
//! runtime in one of four states (`runtime=`):
//!
//! - `none`: no runtime in the process (the baseline);
//! - `idle`: a one-processor runtime built with preemption armed (its `SIGURG` handler
//!   installed, its monitor thread started) and one user thread parked in it;
//! - `running`: the same runtime with two user threads computing on its processor, so the
//!   monitor preempts one every quantum (10 ms) with `SIGURG`; the processor's kernel thread
//!   is pinned to another CPU than the measuring thread's, so what is measured is the
//!   runtime's presence, not a share of a CPU (skipped on one CPU);
//! - `inside`: the calls made by a user thread of an otherwise idle runtime, on its
//!   processor's kernel thread, pinned to the measuring CPU.
//!
//! The runtime is built in setup, never timed, and its `Drop` stops the threads and the
//! runtime. The variants of one call are adjacent in catalog order, and `--rounds N` rotates
//! the order, so the states are interleaved in time; `show RUN --view hbench` prints each
//! state's median as a ratio to `runtime=none` in the same run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sys::{self, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};
use schedlab_rt::{Preemption, Runtime};

use crate::{Context, Info, Instance, Probe, Suite};

/// The bystander probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(Bystander)]
}

/// Seed 003's HBench-OS rows: the `call=` value, the OS probe that makes the call and its
/// parameters.
pub const CALLS: [(&str, &str, &str); 5] = [
    ("getpid", "os.syscall.getpid", ""),
    ("getrusage", "os.syscall.getrusage", ""),
    ("gettimeofday", "os.syscall.gettimeofday", "via=syscall"),
    ("sbrk", "os.mm.sbrk", ""),
    ("sigaction", "os.signal.install", ""),
];

/// The runtime states, baseline first.
pub const STATES: [&str; 4] = ["none", "idle", "running", "inside"];

struct Bystander;

impl Probe for Bystander {
    fn info(&self) -> Info {
        Info {
            id: "rt.bystander",
            doc: "seed 003's HBench-OS system calls (call=) with no schedlab-rt runtime in the process, an idle one, one running preempted threads, and from inside a user thread (runtime=); per call",
            unit: Unit::Nanos,
            mirrors: "HBench-OS getpid, getrusage, gettimeofday, sbrk, sigaction before and after scheduler activations (seed 003 §7)",
            requires: "2 CPUs for runtime=running",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        // The quick suite (kept within its time budget) takes the cheapest and the costliest
        // call; full takes all five.
        let (calls, states): (&[&str], &[&str]) = match suite {
            Suite::Smoke => (&["getpid"], &["none", "idle", "inside"]),
            Suite::Quick => (&["getpid", "getrusage"], &STATES),
            Suite::Full => (&["getpid", "getrusage", "gettimeofday", "sbrk", "sigaction"], &STATES),
        };
        calls
            .iter()
            .flat_map(|call| {
                states.iter().map(move |s| Params::new().with("call", call).with("runtime", s))
            })
            .collect()
    }

    fn setup(&self, params: &Params, ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let call = params.get("call").unwrap_or("getpid");
        let Some(&(_, id, key)) = CALLS.iter().find(|c| c.0 == call) else {
            let names: Vec<&str> = CALLS.iter().map(|c| c.0).collect();
            return Err(ProbeError::Failed(format!("call={call:?}: use {}", names.join(", "))));
        };
        let state = params.get("runtime").unwrap_or("none");
        if !STATES.contains(&state) {
            return Err(ProbeError::Failed(format!(
                "runtime={state:?}: use {}",
                STATES.join(", ")
            )));
        }
        let cpus = sys::allowed_cpus();
        if state == "running" && cpus.len() < 2 {
            return Err(ProbeError::Skip(
                "runtime=running needs 2 CPUs: the runtime's processor on one, the measuring thread on another".into(),
            ));
        }
        let probe = crate::os::probes()
            .into_iter()
            .find(|p| p.info().id == id)
            .expect("every call names an OS probe");
        let inner = probe.setup(&Params::from_key(key), ctx)?;
        let (here, there) = (cpus[0], cpus.get(1).copied().unwrap_or(cpus[0]));
        let pin = PinGuard::pin(here)?;
        let live = match state {
            "none" => None,
            _ => Some(Live::start(state, there)?),
        };
        let mut notes = Params::new().with("os_probe", id).with("cpu", here);
        if state == "running" {
            notes.set("runtime_cpu", there);
        }
        let inside = state == "inside";
        Ok(Box::new(Calls { inner: Some(inner), live, inside, here, notes, _pin: pin }))
    }
}

/// A runtime kept alive around the measurement, and how to stop its threads.
struct Live {
    rt: Option<Runtime>,
    stop: Arc<AtomicBool>,
    threads: Vec<schedlab_rt::JoinHandle<()>>,
}

impl Live {
    /// Builds the runtime for `state` (`idle`, `running`, `inside`); `running`'s processor
    /// is pinned to `cpu`.
    fn start(state: &str, cpu: usize) -> Result<Live, ProbeError> {
        let rt = Runtime::builder()
            .processors(1)
            .preemption(Preemption::Quantum(Duration::from_millis(10)))
            .build()
            .map_err(|e| ProbeError::io("schedlab-rt runtime", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        match state {
            "idle" => {
                let s = stop.clone();
                threads.push(rt.spawn(move || {
                    while !s.load(Ordering::Acquire) {
                        schedlab_rt::park();
                    }
                }));
            }
            "running" => {
                for _ in 0..2 {
                    let s = stop.clone();
                    threads.push(rt.spawn(move || {
                        // The processor's kernel thread, wherever this user thread runs
                        // (there is one processor): off the measuring CPU.
                        let _ = sys::pin_to(cpu);
                        let mut x = 1u64;
                        while !s.load(Ordering::Relaxed) {
                            for _ in 0..1000 {
                                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                            }
                            std::hint::black_box(x);
                        }
                    }));
                }
            }
            _ => {}
        }
        Ok(Live { rt: Some(rt), stop, threads })
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            t.thread().unpark();
            let _ = t.join();
        }
        drop(self.rt.take());
    }
}

/// The OS probe's body, run by the measuring thread or (`inside`) by a user thread.
struct Calls {
    inner: Option<Box<dyn Instance>>,
    live: Option<Live>,
    /// The calls are made by a user thread of `live`'s runtime.
    inside: bool,
    here: usize,
    notes: Params,
    _pin: PinGuard,
}

/// The OS probe's instance, handed to a user thread for one `run` call.
struct Lent(*mut dyn Instance);
// SAFETY: the instance is used by exactly one thread at a time: the caller lends it to a
// user thread and waits in `block_on` until that thread has returned it. The OS probes'
// instances hold descriptors and plain data, no thread-affine state.
unsafe impl Send for Lent {}

impl Workload for Calls {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let inner = self.inner.as_mut().expect("the instance lives until drop");
        let Some(rt) = self.live.as_ref().filter(|_| self.inside) else {
            return inner.run(iters);
        };
        let rt = rt.rt.as_ref().expect("the runtime lives until drop");
        let lent = Lent(&mut **inner as *mut dyn Instance);
        let cpu = self.here;
        rt.block_on(move || {
            let lent = lent;
            let _ = sys::pin_to(cpu);
            // SAFETY: see `Lent`: the owner waits in block_on, so this is the only use.
            unsafe { (*lent.0).run(iters) }
        })
        .map_err(|d| ProbeError::Failed(d.to_string()))?
    }
}

impl Instance for Calls {
    fn metric(&self) -> Metric {
        self.inner.as_ref().map_or(Metric::per_op(), |i| i.metric())
    }

    fn notes(&self) -> Params {
        let mut n = self.inner.as_ref().map_or_else(Params::new, |i| i.notes());
        for (k, v) in &self.notes.0 {
            n.set(k, v);
        }
        n
    }
}

impl Drop for Calls {
    fn drop(&mut self) {
        // The OS probe's teardown first (it may restore a signal disposition), then the
        // runtime.
        drop(self.inner.take());
        drop(self.live.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call and state runs and gives a finite positive time; the runtime is gone after
    /// each (the process is single-threaded again only when its threads joined, which a
    /// hang would show).
    #[test]
    fn every_call_runs_in_every_state() {
        let ctx = Context::for_tests();
        for call in CALLS.iter().map(|c| c.0) {
            for state in STATES {
                let params = Params::new().with("call", call).with("runtime", state);
                let mut inst = match Bystander.setup(&params, &ctx) {
                    Ok(i) => i,
                    Err(ProbeError::Skip(why)) => {
                        eprintln!("skipped {call} {state}: {why}");
                        continue;
                    }
                    Err(e) => panic!("{call} {state}: {e}"),
                };
                let t = inst.run(50).unwrap_or_else(|e| panic!("{call} {state}: {e}"));
                assert!(t.elapsed > Duration::ZERO, "{call} {state}");
                assert_eq!(
                    inst.notes().get("os_probe"),
                    Some(CALLS.iter().find(|c| c.0 == call).unwrap().1)
                );
            }
        }
    }

    #[test]
    fn unknown_call_or_state_is_named() {
        let ctx = Context::for_tests();
        let e = Bystander.setup(&Params::from_key("call=fork,runtime=none"), &ctx).err().unwrap();
        assert!(e.to_string().contains("\"fork\"") && e.to_string().contains("getpid"), "{e}");
        let e = Bystander.setup(&Params::from_key("call=getpid,runtime=busy"), &ctx).err().unwrap();
        assert!(e.to_string().contains("\"busy\""), "{e}");
    }
}
