//! Whether a processor that ran out of work spins before it sleeps
//! (`Processor::search`), or sleeps at once because only the poller can
//! give it work.
//!
//! The search's spin (`RuntimeBuilder::spin`, 50 µs by default) is there
//! for work that another *running* party makes: a thread another processor
//! queues or leaves in its next slot, one an OS thread wakes or spawns
//! (the injection queue). Found while spinning, such work costs no futex
//! wake of a sleeping kernel thread (11–35 µs across CPUs here). Work that
//! comes through the poller is another matter: the kernel delivers it to
//! a processor asleep in `epoll_wait` (`poll.rs`) as well as to one that
//! spins, and a spinner looks at it one event at a time — a non-blocking
//! `epoll_wait` per look — where a sleeper wakes to the batch that came
//! meanwhile. On the echo server (issue 29; docs/PERFORMANCE.md) the spin
//! made 0.4–0.7 `epoll_wait` per round trip at 16 connections against
//! tokio's 0.03, and cost 3–4% of the rate and 3–6% of the CPU per round
//! trip; at one connection, 10 per round trip, a quarter of the rate and
//! 4 µs of CPU per round trip: the spinner did not even answer sooner.
//! Neither Go nor tokio spins on time: Go's `findRunnable` makes four
//! stealing rounds, limited to half the busy Ps' worth of spinning Ms,
//! then blocks in `netpoll`; tokio's worker parks (on the I/O driver, when
//! it gets it) after a failed steal.
//!
//! So a processor skips the spin when nothing but the poller can feed it:
//! - threads wait on the poller (else the spin is as before);
//! - every other processor of its runtime is asleep or retired: none runs
//!   that could queue a thread or fill a slot;
//! - its last search's work came from its own queue, timers or poll, not
//!   from another processor or the injection queue. This is the
//!   prediction for OS threads, which the runtime cannot count: a
//!   processor fed from outside (an OS thread's wake-up, a spawn from
//!   outside) keeps spinning at its next search, so a conversation with an
//!   OS thread keeps the spin's hand-off; one fed by its poll sleeps at
//!   once until its work comes from elsewhere again.
//!
//! Nor does a processor spin when the other awake processors already fill
//! every CPU the process may use (`available_parallelism` at the runtime's
//! build: the building thread's affinity mask, its cgroup's quota): more
//! processors than CPUs time-share them, and a spinner takes its time from
//! a processor doing work (seen: two processors on the echo server's one
//! CPU ran at 0.93 of tokio's rate with 13% more CPU per round trip, the one
//! that got its work by stealing spinning beside the one answering).
//!
//! Not spinning changes only when a processor sleeps, never whether it is
//! woken: the idle protocol (`idle.rs`) holds for any spin, zero included
//! (`RuntimeBuilder::spin(Duration::ZERO)`).

use super::Processor;

impl Processor {
    /// Whether this processor, out of work, spins before it sleeps (see the
    /// module docs). Read at the start of a search and after each wake-up.
    pub(super) fn spin_pays(&self) -> bool {
        let procs = self.shared.max_procs;
        // This processor searches, so it is not among the stopped ones. (Only
        // a runtime with more processors than CPUs reads the counts for the
        // first rule: by default it has one per CPU.)
        if procs > self.shared.cpus
            && procs.saturating_sub(self.shared.idle.stopped() + 1) >= self.shared.cpus
        {
            // The other awake processors fill every CPU the process may use:
            // a spin here would take its time from one of them.
            return false;
        }
        if !self.fed_here.get() || crate::hooks::active_poller().is_none() {
            return true;
        }
        self.shared.idle.stopped() + 1 < procs
    }
}
