//! `rt.handoff`: Mach's hand-off scheduling (seed 003 cites `thread_switch`) against a plain
//! yield and a channel, on one schedlab-rt processor (issue 26).
//!
//! Two user threads pass a turn back and forth; `others=` more runnable threads sit in the
//! same processor's queue, each yielding whenever it runs. Per hand-off (A gives the turn to
//! B), by `how=`:
//!
//! - `yield_to`: the giver flips the turn and calls `schedlab_rt::yield_to(receiver)`; the
//!   receiver runs next, the others do not (until the next slot's streak bound gives the
//!   queue a turn, `MAX_LIFO_STREAK`);
//! - `yield`: the giver flips the turn and calls `yield_now`; each thread that finds it is
//!   not its turn yields again, so a hand-off waits for the whole queue to take a turn;
//! - `channel`: a rendezvous over two `schedlab_rt::sync::channel(1)`s: the receiver parks in
//!   `recv`, the giver's `send` wakes it into the next slot, and the giver parks in its own
//!   `recv`, so the wake-up is the hand-off (Go's `runnext`).
//!
//! The runtime (one processor, cooperative: nothing but the hand-offs moves the threads) is
//! built in setup, pinned to one CPU; each sample spawns the threads, times from the first
//! switch to the join of both parties, then stops the others. Time per hand-off.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sys::{self, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};
use schedlab_rt::{Preemption, Runtime, Thread};

use crate::{Context, Info, Instance, Probe, Suite};

/// The hand-off probes, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    vec![Box::new(Handoff)]
}

/// The `how=` values.
const HOWS: [&str; 3] = ["yield_to", "yield", "channel"];

struct Handoff;

impl Probe for Handoff {
    fn info(&self) -> Info {
        Info {
            id: "rt.handoff",
            doc: "a turn passed between two user threads on one processor with others= runnable threads queued: yield_to(receiver), yield_now, or a channel rendezvous (how=); per hand-off",
            unit: Unit::Nanos,
            mirrors: "- (Mach's thread_switch hand-off, seed 003; the yield and channel rows are the ways without it)",
            requires: "",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let others: &[&str] = match suite {
            Suite::Smoke => &["0"],
            Suite::Quick => &["8"],
            Suite::Full => &["0", "2", "8", "32"],
        };
        others
            .iter()
            .flat_map(|o| HOWS.iter().map(move |h| Params::new().with("how", h).with("others", o)))
            .collect()
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let how = params.get("how").unwrap_or("yield_to");
        if !HOWS.contains(&how) {
            return Err(ProbeError::Failed(format!("how={how:?}: use {}", HOWS.join(", "))));
        }
        let others: usize = params.parse_or("others", 0).map_err(ProbeError::Failed)?;
        if others > 1024 {
            return Err(ProbeError::Failed(format!("others={others}: at most 1024")));
        }
        let cpu = sys::allowed_cpus()[0];
        // The runtime's kernel threads inherit the mask.
        let pin = PinGuard::pin(cpu)?;
        let rt = Runtime::builder()
            .processors(1)
            .preemption(Preemption::Cooperative)
            .build()
            .map_err(|e| ProbeError::io("schedlab-rt runtime", e))?;
        let notes = Params::new().with("cpu", cpu).with("processors", 1);
        Ok(Box::new(Run { rt, how: how.to_string(), others, notes, _pin: pin }))
    }
}

struct Run {
    rt: Runtime,
    how: String,
    others: usize,
    notes: Params,
    _pin: PinGuard,
}

/// One party of a turn-passing pair: `rounds` times, wait for its turn, give it away.
fn turns(me: usize, rounds: u64, turn: &AtomicUsize, peer: &OnceLock<Thread>, hand: bool) {
    let peer = peer.get().expect("set before the parties run");
    for _ in 0..rounds {
        while turn.load(Ordering::Acquire) != me {
            if hand {
                schedlab_rt::yield_to(peer);
            } else {
                schedlab_rt::yield_now();
            }
        }
        turn.store(1 - me, Ordering::Release);
        if hand {
            schedlab_rt::yield_to(peer);
        } else {
            schedlab_rt::yield_now();
        }
    }
}

impl Workload for Run {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let (how, others) = (self.how.clone(), self.others);
        // Each party gives the turn away `rounds` times: 2 × rounds hand-offs ≥ iters.
        let rounds = iters.div_ceil(2).max(1);
        let elapsed = self
            .rt
            .block_on(move || {
                let stop = Arc::new(AtomicBool::new(false));
                let crowd: Vec<_> = (0..others)
                    .map(|_| {
                        let stop = stop.clone();
                        schedlab_rt::spawn(move || {
                            while !stop.load(Ordering::Relaxed) {
                                schedlab_rt::yield_now();
                            }
                        })
                    })
                    .collect();
                let start;
                if how == "channel" {
                    let (to_b, from_a) = schedlab_rt::sync::channel::<()>(1);
                    let (to_a, from_b) = schedlab_rt::sync::channel::<()>(1);
                    let a = schedlab_rt::spawn(move || {
                        for _ in 0..rounds {
                            to_b.send(()).expect("b lives");
                            from_b.recv().expect("b lives");
                        }
                    });
                    let b = schedlab_rt::spawn(move || {
                        for _ in 0..rounds {
                            from_a.recv().expect("a lives");
                            to_a.send(()).expect("a lives");
                        }
                    });
                    start = Instant::now();
                    a.join().expect("a");
                    b.join().expect("b");
                } else {
                    let hand = how == "yield_to";
                    let turn = Arc::new(AtomicUsize::new(0));
                    let (peer_of_a, peer_of_b) =
                        (Arc::new(OnceLock::new()), Arc::new(OnceLock::new()));
                    let (t, p) = (turn.clone(), peer_of_a.clone());
                    let a = schedlab_rt::spawn(move || turns(0, rounds, &t, &p, hand));
                    let (t, p) = (turn.clone(), peer_of_b.clone());
                    let b = schedlab_rt::spawn(move || turns(1, rounds, &t, &p, hand));
                    let _ = peer_of_a.set(b.thread().clone());
                    let _ = peer_of_b.set(a.thread().clone());
                    start = Instant::now();
                    a.join().expect("a");
                    b.join().expect("b");
                }
                let elapsed = start.elapsed();
                stop.store(true, Ordering::Relaxed);
                for c in crowd {
                    c.join().expect("a crowd thread");
                }
                elapsed
            })
            .map_err(|d| ProbeError::Failed(d.to_string()))?;
        Ok(Timing { elapsed, migrated: false, overhead: std::time::Duration::ZERO })
    }
}

impl Instance for Run {
    fn metric(&self) -> Metric {
        // `run(iters)` made 2 × ceil(iters / 2) hand-offs: one per iteration (the odd
        // one's extra is below the noise of a 10 ms sample).
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        self.notes.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_passes_the_turn_with_and_without_a_crowd() {
        let ctx = Context::for_tests();
        for how in HOWS {
            for others in ["0", "3"] {
                let params = Params::new().with("how", how).with("others", others);
                let mut run = Handoff.setup(&params, &ctx).unwrap();
                let t = run.run(101).unwrap_or_else(|e| panic!("{how} {others}: {e}"));
                assert!(t.elapsed > std::time::Duration::ZERO);
            }
        }
    }

    #[test]
    fn a_bad_parameter_is_named() {
        let ctx = Context::for_tests();
        let e = Handoff.setup(&Params::from_key("how=switch"), &ctx).err().unwrap();
        assert!(e.to_string().contains("\"switch\"") && e.to_string().contains("yield_to"), "{e}");
        let e = Handoff.setup(&Params::from_key("others=5000"), &ctx).err().unwrap();
        assert!(e.to_string().contains("others=5000"), "{e}");
    }
}
