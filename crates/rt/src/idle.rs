//! How processors with nothing to run go to sleep and get woken: the idle
//! protocol, and the futex [`Parker`] each processor sleeps on.
//!
//! Waking a kernel thread asleep on another CPU costs 11–35 µs on the lab
//! machine, against ~1.8 µs for a switch on one CPU, so the runtime avoids
//! both needless sleeps and needless wake-ups, as the Go scheduler does:
//! a processor that runs out of work first *searches* (steals, polls the
//! injection queue and timers) for a short bounded time, and a producer of
//! new work wakes a sleeper only when nobody is searching.
//!
//! # Counters
//!
//! - `searching`: processors looking for work (they will find new work
//!   without being woken);
//! - `sleeping` and the `sleepers` list: processors asleep (or about to be)
//!   on their parker.
//! - `retired`: processors removed by `Runtime::set_processors` and parked
//!   outside this protocol (`runtime.rs`, "Resizing"): never in `sleepers`,
//!   never counted as searching, so no wake-up is aimed at them. The
//!   deadlock check counts them with the sleepers (below).
//!
//! # Protocol
//!
//! Going to sleep (processor `P`, which is searching):
//! 1. [`Idle::prepare_sleep`]: `searching -= 1`; add `P` to `sleepers`,
//!    `sleeping += 1`; then a `SeqCst` fence.
//! 2. Look at every queue once more. If work turned up, [`Idle::cancel_sleep`]
//!    and run it.
//! 3. Otherwise sleep on `P`'s parker. On waking, [`Idle::after_wake`]: if `P`
//!    is still listed it woke by itself (timer, spurious) and delists itself;
//!    either way it is searching again.
//!
//! Making work available (any thread):
//! 1. Push the work to a queue.
//! 2. [`Idle::notify_one`]: a `SeqCst` fence, then if `searching == 0` and
//!    `sleeping > 0`, take one sleeper off the list, count it as searching on
//!    its behalf, and unpark it.
//!
//! A searcher that finds work and was the last searcher calls `notify_one`
//! too, so work that a producer left to it is not stranded while it runs
//! something else.
//!
//! Why no wake-up is lost: the two fences are totally ordered. If the
//! sleeper's fence comes first, the producer's loads after its own fence see
//! `searching` decremented and `P` listed, so it wakes `P` (or another
//! sleeper, who is then searching and finds the work). If the producer's
//! fence comes first, `P`'s re-check in step 2 sees the pushed work. The
//! parker keeps a notification that arrives before `P` sleeps. `loom`
//! checks this below.
//!
//! # Slots
//!
//! A thread put in a processor's next slot (`Processor::schedule_next`) is
//! work like any other, but its owner usually runs it within nanoseconds:
//! the waker was about to park. A thief leaves it alone while the owner
//! keeps switching (`Processor::steal_slot`), so a sleeper woken for it
//! usually finds nothing it may take, and goes back to sleep; in a
//! conversation (a ping-pong, a ring) that repeats at every end of its
//! search, and each futex wake costs the conversing processor several µs.
//! So a processor whose last look saw another one switching sleeps *deaf to
//! slots* ([`Idle::prepare_sleep`] with `hears_slots == false`): a slot's
//! notification ([`Idle::notify_slot`]) passes it by, queued work's
//! ([`Idle::notify_one`]) does not, and it sleeps with a timeout, after
//! which it looks again (`Processor::search`). A slot's thread whose owner
//! then stops switching is taken at that look: late by at most the
//! timeout, instead of never lost. The protocol above holds for sleepers
//! that hear slots; `loom` checks both kinds below.

use crate::loom::{fence, AtomicBool, AtomicU32, AtomicUsize, Mutex, Ordering};
use std::time::Duration;

/// The idle bookkeeping shared by all processors of a runtime.
#[derive(Debug, Default)]
pub(crate) struct Idle {
    /// Each sleeper's index, and whether a thread put in a next slot wakes
    /// it ([`Idle::notify_slot`]).
    sleepers: Mutex<Vec<(usize, bool)>>,
    sleeping: AtomicUsize,
    /// Sleepers that hear [`Idle::notify_slot`].
    listening: AtomicUsize,
    searching: AtomicUsize,
    retired: AtomicUsize,
}

impl Idle {
    /// An empty idle set with no searcher.
    pub(crate) fn new() -> Idle {
        Idle::default()
    }

    /// Counts the caller as searching. Returns how many searched before.
    #[inline]
    pub(crate) fn start_searching(&self) -> usize {
        self.searching.fetch_add(1, Ordering::SeqCst)
    }

    /// The caller found work and stops searching. Returns `true` if it was the
    /// last searcher (the caller should then [`Idle::notify_one`]).
    #[inline]
    pub(crate) fn stop_searching(&self) -> bool {
        self.searching.fetch_sub(1, Ordering::SeqCst) == 1
    }

    /// Sleep step 1. The caller must be searching. `hears_slots`: a thread
    /// put in a next slot wakes it too (see "Slots" above); a sleeper that
    /// does not hear them must sleep with a timeout.
    pub(crate) fn prepare_sleep(&self, index: usize, hears_slots: bool) {
        self.searching.fetch_sub(1, Ordering::SeqCst);
        let mut list = self.sleepers.lock().unwrap();
        list.push((index, hears_slots));
        if hears_slots {
            self.listening.fetch_add(1, Ordering::SeqCst);
        }
        self.sleeping.fetch_add(1, Ordering::SeqCst);
        drop(list);
        fence(Ordering::SeqCst);
    }

    /// Sleep step 2 found work: undo step 1. Afterwards the caller is running,
    /// not searching.
    pub(crate) fn cancel_sleep(&self, index: usize) {
        if !self.delist(index) {
            // A producer took us off the list and counted us as searching.
            self.searching.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Sleep step 3, after the parker returned. Afterwards the caller is
    /// searching. Returns `true` if nobody woke it (its timeout, or a
    /// spurious wake-up).
    pub(crate) fn after_wake(&self, index: usize) -> bool {
        let by_itself = self.delist(index);
        if by_itself {
            self.searching.fetch_add(1, Ordering::SeqCst);
        }
        by_itself
    }

    fn delist(&self, index: usize) -> bool {
        let mut list = self.sleepers.lock().unwrap();
        match list.iter().position(|&(i, _)| i == index) {
            Some(pos) => {
                let (_, hears) = list.swap_remove(pos);
                self.unlist(hears);
                true
            }
            None => false,
        }
    }

    /// A sleeper left the list (the caller holds the list's lock).
    fn unlist(&self, hears_slots: bool) {
        if hears_slots {
            self.listening.fetch_sub(1, Ordering::SeqCst);
        }
        self.sleeping.fetch_sub(1, Ordering::SeqCst);
    }

    /// Producer step 2. Returns the processor the caller must unpark, if any.
    #[inline]
    pub(crate) fn notify_one(&self) -> Option<usize> {
        self.notify(&self.sleeping, false)
    }

    /// Producer step 2 for a thread put in a next slot: as
    /// [`Idle::notify_one`], but only a sleeper that hears slots is woken.
    #[inline]
    pub(crate) fn notify_slot(&self) -> Option<usize> {
        self.notify(&self.listening, true)
    }

    /// `waiting`: the count of the sleepers this notification may wake.
    #[inline]
    fn notify(&self, waiting: &AtomicUsize, slot: bool) -> Option<usize> {
        fence(Ordering::SeqCst);
        if self.searching.load(Ordering::SeqCst) != 0 || waiting.load(Ordering::SeqCst) == 0 {
            return None;
        }
        self.notify_slow(slot)
    }

    #[cold]
    fn notify_slow(&self, slot: bool) -> Option<usize> {
        let mut list = self.sleepers.lock().unwrap();
        let pos = if slot {
            list.iter().rposition(|&(_, hears)| hears)?
        } else {
            list.len().checked_sub(1)?
        };
        let (index, hears) = list.swap_remove(pos);
        self.unlist(hears);
        // Counted as searching on its behalf, so no second producer wakes
        // another processor for the same work.
        self.searching.fetch_add(1, Ordering::SeqCst);
        Some(index)
    }

    /// Number of processors asleep or about to sleep.
    #[cfg_attr(not(test), allow(dead_code))] // used by the tests
    pub(crate) fn sleeping(&self) -> usize {
        self.sleeping.load(Ordering::SeqCst)
    }

    /// A removed processor parks for good (it is neither searching nor
    /// sleeping here). The caller has moved its work away first.
    pub(crate) fn retire(&self) {
        self.retired.fetch_add(1, Ordering::SeqCst);
    }

    /// A retired processor was added back (or the runtime shuts down). Like a
    /// sleeper that wakes, it must pass [`CheckGate::wait`] before it runs a
    /// thread.
    pub(crate) fn unretire(&self) {
        self.retired.fetch_sub(1, Ordering::SeqCst);
    }

    /// Processors that run no thread and will not until woken: asleep here
    /// or retired. Equal to the number of processors only when none runs.
    #[cfg_attr(loom, allow(dead_code))] // used by the runtime, not the models
    pub(crate) fn stopped(&self) -> usize {
        self.sleeping.load(Ordering::SeqCst) + self.retired.load(Ordering::SeqCst)
    }
}

/// Holds processors off while the deadlock check reads what they would
/// change (the protocol is in `registry.rs`, "Reading the slots safely").
#[derive(Debug, Default)]
pub(crate) struct CheckGate {
    checking: AtomicBool,
}

impl CheckGate {
    /// A closed gate: nobody checking.
    pub(crate) fn new() -> CheckGate {
        CheckGate::default()
    }

    /// Step 1: announces a check, then returns `true` if every one of the
    /// `n` processors (all of them, active or not) is still asleep or
    /// retired (the caller may read), `false` if not. Either way the caller
    /// must call [`CheckGate::end`] afterwards.
    ///
    /// The two counters are read one after the other, so a processor moving
    /// from one to the other could be counted twice; it cannot, because a
    /// processor that leaves either state decrements it and then passes
    /// [`CheckGate::wait`] before it does anything else, including entering
    /// the other state. If its fence comes after ours, it waits for the
    /// check to end; if before, our reads see its decrement.
    pub(crate) fn begin(&self, idle: &Idle, n: usize) -> bool {
        self.checking.store(true, Ordering::Relaxed);
        // Dekker with `wait`: each side writes, fences, then reads the other.
        fence(Ordering::SeqCst);
        idle.sleeping.load(Ordering::Relaxed) + idle.retired.load(Ordering::Relaxed) == n
    }

    /// Ends a check (release: what the check read happens before what a
    /// held-off processor does next).
    pub(crate) fn end(&self) {
        self.checking.store(false, Ordering::Release);
    }

    /// Step 2: a processor that stopped sleeping or stopped being retired
    /// (`sleeping` or `retired` already decremented, by it or its waker,
    /// which happens before this call) waits for a check in progress.
    #[inline]
    pub(crate) fn wait(&self) {
        fence(Ordering::SeqCst);
        while self.checking.load(Ordering::Acquire) {
            #[cfg(not(loom))]
            std::thread::yield_now();
            #[cfg(loom)]
            loom::thread::yield_now();
        }
    }
}

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = 2;
/// Asleep in the poller's `epoll_wait` (`poll.rs`): `unpark` interrupts it
/// through the poller's eventfd instead of a futex wake.
#[cfg(not(loom))]
const POLLING: u32 = 3;

/// A one-token parker for a kernel thread (a processor), on a futex.
///
/// `unpark` before `park` makes the next `park` return at once; `park` may
/// also return spuriously or at its timeout, so callers re-check their state.
#[derive(Debug, Default)]
pub(crate) struct Parker {
    state: AtomicU32,
    #[cfg(loom)]
    lock: Mutex<()>,
    #[cfg(loom)]
    cond: crate::loom::Condvar,
}

impl Parker {
    /// A parker with no token.
    pub(crate) fn new() -> Parker {
        Parker::default()
    }

    /// Blocks the calling kernel thread until unparked, the timeout passes, or
    /// a spurious wake-up.
    pub(crate) fn park(&self, timeout: Option<Duration>) {
        if self
            .state
            .compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            return;
        }
        if self.state.compare_exchange(EMPTY, PARKED, Ordering::Acquire, Ordering::Acquire).is_err()
        {
            // Only `unpark` changes the state from EMPTY: it is NOTIFIED now.
            self.state.swap(EMPTY, Ordering::Acquire);
            return;
        }
        self.wait_while_parked(timeout);
        // Consume the notification, or withdraw from PARKED after a timeout.
        self.state.swap(EMPTY, Ordering::Acquire);
    }

    /// [`Parker::park`], sleeping in `poll` (the poller's blocking
    /// `epoll_wait`, given the timeout) instead of on the futex: an `unpark`
    /// that finds the state `POLLING` interrupts the poll. One that came
    /// before the state was set left `NOTIFIED`, and `poll` is not called.
    #[cfg(not(loom))]
    pub(crate) fn park_polling(
        &self,
        timeout: Option<Duration>,
        poll: impl FnOnce(Option<Duration>),
    ) {
        if self.state.compare_exchange(EMPTY, POLLING, Ordering::Acquire, Ordering::Acquire).is_ok()
        {
            poll(timeout);
        }
        // Consume a notification (it may have interrupted the poll), or
        // withdraw from POLLING.
        self.state.swap(EMPTY, Ordering::Acquire);
    }

    /// Wakes the thread parked (or about to park) on this parker.
    pub(crate) fn unpark(&self) {
        match self.state.swap(NOTIFIED, Ordering::Release) {
            PARKED => self.wake(),
            #[cfg(not(loom))]
            POLLING => crate::hooks::interrupt_poller(),
            _ => {}
        }
    }

    #[cfg(not(loom))]
    fn wait_while_parked(&self, timeout: Option<Duration>) {
        crate::futex::wait(&self.state, PARKED, timeout);
    }

    #[cfg(not(loom))]
    fn wake(&self) {
        crate::futex::wake(&self.state, 1);
    }

    #[cfg(loom)]
    fn wait_while_parked(&self, _timeout: Option<Duration>) {
        let g = self.lock.lock().unwrap();
        if self.state.load(Ordering::Acquire) == PARKED {
            drop(self.cond.wait(g).unwrap());
        }
    }

    #[cfg(loom)]
    fn wake(&self) {
        let _g = self.lock.lock().unwrap();
        self.cond.notify_one();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Runs `f` on a thread and fails if it has not returned within 5 s (a
    /// park that never returns is the bug these tests look for).
    fn returns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()).unwrap());
        rx.recv_timeout(Duration::from_secs(5)).expect("park did not return within 5 s")
    }

    #[test]
    fn parker_keeps_an_early_token() {
        let p = Arc::new(Parker::new());
        p.unpark();
        assert_eq!(p.state.load(Ordering::Relaxed), NOTIFIED);
        let q = p.clone();
        returns(move || q.park(None)); // the token ends it at once
        assert_eq!(p.state.load(Ordering::Relaxed), EMPTY, "the token was not consumed");
    }

    #[test]
    fn parker_times_out() {
        let p = Arc::new(Parker::new());
        let q = p.clone();
        returns(move || q.park(Some(Duration::from_millis(1))));
        assert_eq!(p.state.load(Ordering::Relaxed), EMPTY, "left PARKED after the timeout");
    }

    #[test]
    fn parker_wakes_another_thread() {
        let p = Arc::new(Parker::new());
        let q = p.clone();
        let t = std::thread::spawn(move || q.park(None));
        // Whether the token arrives before or after the park, it ends it.
        p.unpark();
        returns(move || t.join().unwrap());
        assert_eq!(p.state.load(Ordering::Relaxed), EMPTY);
    }

    #[test]
    fn notify_wakes_a_sleeper_only_when_nobody_searches() {
        let idle = Idle::new();
        idle.start_searching();
        idle.prepare_sleep(3, true);
        assert_eq!(idle.sleeping(), 1);
        idle.start_searching(); // someone else searches
        assert_eq!(idle.notify_one(), None);
        assert!(idle.stop_searching());
        assert_eq!(idle.notify_one(), Some(3));
        assert_eq!(idle.sleeping(), 0);
        assert!(!idle.after_wake(3), "taken off the list: woken, and still counted searching");
        assert!(idle.stop_searching());
    }

    #[test]
    fn a_slot_wakes_only_a_sleeper_that_hears_slots() {
        let idle = Idle::new();
        idle.start_searching();
        idle.prepare_sleep(1, false);
        assert_eq!(idle.notify_slot(), None, "a sleeper that does not hear slots");
        idle.start_searching();
        idle.prepare_sleep(2, true);
        idle.start_searching();
        idle.prepare_sleep(3, false);
        assert_eq!(idle.notify_slot(), Some(2), "the one sleeper that hears slots");
        assert_eq!(idle.notify_slot(), None, "searching: the woken one will look");
        assert!(!idle.after_wake(2));
        assert!(idle.stop_searching());
        assert_eq!(idle.notify_slot(), None, "nobody left who hears slots");
        assert_eq!(idle.notify_one(), Some(3), "queued work wakes any sleeper");
        assert!(idle.after_wake(1), "its timeout: nobody woke it");
        assert_eq!(idle.sleeping(), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model of the run-queue hand-off to an idle processor: a producer pushes
    //! work and notifies while a processor searches, prepares to sleep,
    //! re-checks and sleeps. loom fails the model if the processor can sleep
    //! forever with the work queued (a lost wake-up).
    use super::*;
    use loom::sync::Arc;
    use std::collections::VecDeque;

    struct Model {
        idle: Idle,
        parker: Parker,
        queue: Mutex<VecDeque<u32>>,
    }

    fn processor(m: &Model, hears_slots: bool) -> u32 {
        loop {
            if let Some(x) = m.queue.lock().unwrap().pop_front() {
                m.idle.stop_searching();
                return x;
            }
            m.idle.prepare_sleep(0, hears_slots);
            if let Some(x) = m.queue.lock().unwrap().pop_front() {
                m.idle.cancel_sleep(0);
                return x;
            }
            m.parker.park(None);
            m.idle.after_wake(0);
        }
    }

    /// Model of the deadlock check's hold-off (`registry.rs`): a processor
    /// asleep is woken by a producer and then "runs a thread" (writes the
    /// cell, as an exit would free a task) while a checker that found every
    /// processor asleep reads it. loom fails the model if the read and the
    /// write can overlap.
    #[test]
    fn loom_deadlock_check_holds_off_a_waking_processor() {
        loom::model(|| {
            let m = Arc::new(Model {
                idle: Idle::new(),
                parker: Parker::new(),
                queue: Mutex::new(VecDeque::new()),
            });
            let gate = Arc::new(CheckGate::new());
            let task = Arc::new(loom::cell::UnsafeCell::new(0u32));
            // The processor has searched and is going to sleep.
            m.idle.start_searching();
            let p = {
                let (m, gate, task) = (m.clone(), gate.clone(), task.clone());
                loom::thread::spawn(move || {
                    // `Processor::search`, with the gate where it has it.
                    let x = loop {
                        if let Some(x) = m.queue.lock().unwrap().pop_front() {
                            m.idle.stop_searching();
                            break x;
                        }
                        m.idle.prepare_sleep(0, true);
                        if let Some(x) = m.queue.lock().unwrap().pop_front() {
                            m.idle.cancel_sleep(0);
                            gate.wait();
                            break x;
                        }
                        m.parker.park(None);
                        m.idle.after_wake(0);
                        gate.wait();
                    };
                    // Runs the thread, which exits and is freed.
                    // SAFETY: loom checks this write against the checker's read.
                    task.with_mut(|t| unsafe { *t = x });
                })
            };
            let checker = {
                let (m, gate, task) = (m.clone(), gate.clone(), task.clone());
                loom::thread::spawn(move || {
                    if gate.begin(&m.idle, 1) {
                        // SAFETY: loom checks this read against the write above.
                        task.with(|t| unsafe { *t });
                    }
                    gate.end();
                })
            };
            // A producer outside the runtime queues work and wakes it.
            m.queue.lock().unwrap().push_back(1);
            if m.idle.notify_one().is_some() {
                m.parker.unpark();
            }
            checker.join().unwrap();
            p.join().unwrap();
        });
    }

    /// Model of a processor removed while asleep (`runtime.rs`, "Resizing"):
    /// processors 0 and 1 search and sleep; a controller removes 1 (stores
    /// the active count, unparks it) and a producer queues work and
    /// notifies, which may pick 1 just as it leaves. Processor 1 takes the
    /// work or, on finding itself removed, stops searching (notifying if it
    /// was the last searcher) and retires. loom fails the model if the work
    /// can be left with processor 0 asleep for good (a wake-up lost on the
    /// removed one), or taken twice.
    #[test]
    fn loom_a_removed_sleeper_passes_its_wake_up_on() {
        struct Resizable {
            idle: Idle,
            parkers: [Parker; 2],
            queue: Mutex<VecDeque<u32>>,
            active: AtomicUsize,
            /// Set by the model's end when the work went to processor 1, so
            /// processor 0 may stop waiting for it.
            finished: AtomicBool,
        }
        impl Resizable {
            fn notify(&self) {
                if let Some(i) = self.idle.notify_one() {
                    self.parkers[i].unpark();
                }
            }
        }
        loom::model(|| {
            let m = Arc::new(Resizable {
                idle: Idle::new(),
                parkers: [Parker::new(), Parker::new()],
                queue: Mutex::new(VecDeque::new()),
                active: AtomicUsize::new(2),
                finished: AtomicBool::new(false),
            });
            // Processor 1: `run_loop` and `search`, with the removal checks
            // where they are. Returns whether it took the work.
            let p1 = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    let mut took = false;
                    loop {
                        if m.active.load(Ordering::SeqCst) <= 1 {
                            m.idle.retire();
                            return took;
                        }
                        m.idle.start_searching();
                        loop {
                            if m.active.load(Ordering::SeqCst) <= 1 {
                                if m.idle.stop_searching() {
                                    m.notify();
                                }
                                break;
                            }
                            if m.queue.lock().unwrap().pop_front().is_some() {
                                if m.idle.stop_searching() {
                                    m.notify();
                                }
                                took = true;
                                break;
                            }
                            m.idle.prepare_sleep(1, true);
                            if m.queue.lock().unwrap().pop_front().is_some() {
                                m.idle.cancel_sleep(1);
                                took = true;
                                break;
                            }
                            m.parkers[1].park(None);
                            m.idle.after_wake(1);
                        }
                    }
                })
            };
            // Processor 0, active: searches until it gets the work, or the
            // model's end says processor 1 took it.
            let p0 = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    m.idle.start_searching();
                    loop {
                        if m.queue.lock().unwrap().pop_front().is_some() {
                            if m.idle.stop_searching() {
                                m.notify();
                            }
                            return true;
                        }
                        m.idle.prepare_sleep(0, true);
                        if m.queue.lock().unwrap().pop_front().is_some() {
                            m.idle.cancel_sleep(0);
                            return true;
                        }
                        if m.finished.load(Ordering::SeqCst) {
                            m.idle.cancel_sleep(0);
                            return false;
                        }
                        m.parkers[0].park(None);
                        m.idle.after_wake(0);
                    }
                })
            };
            // The controller (`set_processors(1)`), then a producer.
            m.active.store(1, Ordering::SeqCst);
            m.parkers[1].unpark();
            m.queue.lock().unwrap().push_back(1);
            m.notify();
            let took1 = p1.join().unwrap();
            if took1 {
                m.finished.store(true, Ordering::SeqCst);
                m.parkers[0].unpark();
            }
            let took0 = p0.join().unwrap();
            assert!(took0 ^ took1, "the work was taken exactly once");
        });
    }

    /// Pushed work reaches a processor that sleeps hearing slots, through
    /// either notification, and one that does not hear slots through a
    /// queue's (the models' parker has no timeout: a lost wake-up hangs).
    #[test]
    fn loom_idle_processor_gets_pushed_work() {
        for (hears_slots, slot) in [(true, false), (true, true), (false, false)] {
            loom::model(move || {
                let m = Arc::new(Model {
                    idle: Idle::new(),
                    parker: Parker::new(),
                    queue: Mutex::new(VecDeque::new()),
                });
                m.idle.start_searching();
                let p = {
                    let m = m.clone();
                    loom::thread::spawn(move || processor(&m, hears_slots))
                };
                m.queue.lock().unwrap().push_back(1);
                let woken = if slot { m.idle.notify_slot() } else { m.idle.notify_one() };
                if woken.is_some() {
                    m.parker.unpark();
                }
                assert_eq!(p.join().unwrap(), 1);
            });
        }
    }

    /// Model of the monitor's quiet sleep (`monitor.rs`, "Quiet") against a
    /// processor that leaves the stopped ones and then queues work with no
    /// poke (a timer's thread, a yield) before its thread blocks in the
    /// kernel (here: ends). The processor starts asleep and wakes by itself
    /// (its timer) or by a producer's notification. The monitor announces
    /// it is quiet, reads `stopped`, and sleeps without a deadline only if
    /// every processor was stopped; else it looks again (its `QUIET_POLL`).
    /// The processor, after leaving, reads the announcement and pokes
    /// (`MonitorCtl::processor_starts`). loom fails the model (a deadlock:
    /// the monitor parked for good) if the monitor can sleep through the
    /// queued work; without the processor's poke it does.
    #[test]
    fn loom_a_quiet_monitor_sees_a_processor_that_starts() {
        struct Rt {
            idle: Idle,
            parker: Parker,
            /// The monitor's wake-up word (`MonitorCtl::poke` and `wait`).
            monitor: Parker,
            /// `MonitorCtl::idle`.
            quiet: AtomicBool,
            queue: Mutex<VecDeque<u32>>,
        }
        impl Rt {
            /// `MonitorCtl::work_arrived` (`fenced`: `processor_starts`).
            fn poke_if_quiet(&self, fenced: bool) {
                if fenced {
                    fence(Ordering::SeqCst);
                }
                if self.quiet.load(Ordering::Relaxed) {
                    self.quiet.store(false, Ordering::Relaxed);
                    self.monitor.unpark();
                }
            }
        }
        for woken in [false, true] {
            loom::model(move || {
                let m = Arc::new(Rt {
                    idle: Idle::new(),
                    parker: Parker::new(),
                    monitor: Parker::new(),
                    quiet: AtomicBool::new(false),
                    queue: Mutex::new(VecDeque::new()),
                });
                // The only processor searched and sleeps.
                m.idle.start_searching();
                m.idle.prepare_sleep(0, true);
                let monitor = {
                    let m = m.clone();
                    loom::thread::spawn(move || loop {
                        if m.queue.lock().unwrap().contains(&2) {
                            return;
                        }
                        m.quiet.store(true, Ordering::SeqCst);
                        fence(Ordering::SeqCst);
                        let all_stopped = m.idle.stopped() >= 1;
                        if !m.queue.lock().unwrap().is_empty() {
                            // Work waits: the monitor polls.
                            m.quiet.store(false, Ordering::Relaxed);
                            loom::thread::yield_now();
                        } else if all_stopped {
                            m.monitor.park(None);
                        } else {
                            // A sleep of QUIET_POLL at most.
                            loom::thread::yield_now();
                        }
                        m.quiet.store(false, Ordering::Relaxed);
                    })
                };
                let processor = {
                    let m = m.clone();
                    loom::thread::spawn(move || {
                        if woken {
                            m.parker.park(None);
                        }
                        m.idle.after_wake(0);
                        m.poke_if_quiet(true);
                        m.queue.lock().unwrap().retain(|&x| x != 1);
                        // Queued with no poke; then the thread blocks.
                        m.queue.lock().unwrap().push_back(2);
                    })
                };
                if woken {
                    // A producer outside: `Shared::inject`.
                    m.queue.lock().unwrap().push_back(1);
                    if m.idle.notify_one().is_some() {
                        m.parker.unpark();
                    }
                    m.poke_if_quiet(false);
                }
                processor.join().unwrap();
                monitor.join().unwrap();
            });
        }
    }
}
