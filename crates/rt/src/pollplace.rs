//! The poller's one blocking place, and the processors standing by for it
//! (`poll.rs`): which sleeping processor, in the whole process, is the one
//! that sees I/O readiness.
//!
//! The poller is the process's, shared by every runtime in it. While
//! threads wait on descriptors, at most one processor sleeps in
//! `epoll_wait` (it *holds the place*); a processor that goes to sleep
//! while the place is held sleeps on its futex instead, relying on the
//! holder. The holder gives the place back whenever it wakes (for work, a
//! timer, or its runtime's end), and then either comes back to sleep and
//! takes it again, or polls at its decisions meanwhile (`POLL_EVERY`, and
//! its runtime's monitor). A processor whose runtime is dropped does
//! neither. If every other processor in the process slept on its futex
//! relying on it, nobody polled any more, and a reader whose data had
//! arrived slept for good (issue 29: seen with several runtimes in one
//! test binary, one of them being dropped). (A processor removed by
//! `Runtime::set_processors` stops too, but its runtime keeps one: the
//! removed one leaves searching, and as the last searcher it wakes a
//! sleeper of its runtime (`idle.rs`), which takes the place as it goes
//! back to sleep.)
//!
//! So a processor that sleeps on its futex because the place was held
//! *stands by*: it is listed here while it sleeps, and a runtime's drop,
//! once its processors stopped, passes the place on ([`Place::pass_on`])
//! by waking one listed processor, which looks (a non-blocking poll in its
//! search) and, going back to sleep, takes the place. Only stopping for
//! good passes it on: a holder that wakes for work keeps polling at its
//! decisions, and a futex wake at each of its wake-ups would cost a busy
//! server's other processors several µs each.
//!
//! # Protocol
//!
//! Sleeping (processor `P`, threads wait on I/O):
//! 1. Try to take the place (`blocked`: false → true). Taken: sleep in
//!    `epoll_wait`, give the place back on waking (`blocked = false`), done.
//! 2. Else stand by: list `P`'s parker, `standing += 1`, then a `SeqCst`
//!    fence.
//! 3. Try to take the place again. Taken: delist, and sleep as in step 1.
//! 4. Else sleep on `P`'s parker (the futex); on waking, delist.
//!
//! Passing on (processor `L` stopped for good, after it gave the place
//! back if it held it; the runtime's drop does it for all of its
//! processors once they stopped): a `SeqCst` fence; if the place is held, done (its
//! holder polls, and passes on in turn if it stops for good); else, under
//! the list's lock, unpark the last listed parker, if any.
//!
//! Why the place is not left empty while a processor relies on it: the two
//! fences are totally ordered. If `P`'s comes first, `L`'s reads after its
//! own fence see `P` listed (`standing`), so `L` wakes `P` or another
//! listed processor (which looks, then takes the place as it sleeps). If
//! `L`'s comes first, `P`'s step 3 sees the place given back, and takes it.
//! The parker keeps an unpark that arrives before `P` parks. A woken
//! processor that finds work instead runs, and polls at its decisions;
//! one that stops for good passes on in turn. `loom` checks the race below.
//!
//! A listed parker is valid while listed: its processor delists itself,
//! under the list's lock, before its sleep returns, and `pass_on` unparks
//! under that lock.

use crate::idle::Parker;
use crate::loom::{fence, AtomicBool, AtomicUsize, Mutex, Ordering};
use std::time::Duration;

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Place {
    /// A processor sleeps in `epoll_wait`.
    blocked: AtomicBool,
    /// How many parkers `standby` lists (read without its lock).
    standing: AtomicUsize,
    /// The parkers of processors asleep on their futex while the place was
    /// held, as addresses.
    standby: Mutex<Vec<usize>>,
}

impl Place {
    /// An empty place, nobody standing by.
    pub(crate) fn new() -> Place {
        Place::default()
    }

    /// Whether a processor holds the place (sleeps in `epoll_wait`).
    #[inline]
    pub(crate) fn is_held(&self) -> bool {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Takes the place; `false` if held.
    fn try_take(&self) -> bool {
        !self.blocked.load(Ordering::SeqCst)
            && self
                .blocked
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }

    /// Gives the place back.
    fn give_back(&self) {
        self.blocked.store(false, Ordering::SeqCst);
    }

    /// A processor with nothing to do sleeps, with threads waiting on I/O:
    /// holding the place if it can (`poll`: its sleep in `epoll_wait`),
    /// else standing by on `parker` (protocol steps 1–4).
    pub(crate) fn sleep(
        &self,
        parker: &Parker,
        timeout: Option<Duration>,
        poll: impl FnOnce(Option<Duration>),
    ) {
        if self.try_take() {
            poll(timeout);
            self.give_back();
            return;
        }
        let me = parker as *const Parker as usize;
        {
            let mut list = self.standby.lock().unwrap_or_else(|e| e.into_inner());
            list.push(me);
            self.standing.fetch_add(1, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
        let took = self.try_take();
        if !took {
            parker.park(timeout);
        }
        {
            let mut list = self.standby.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = list.iter().rposition(|&p| p == me) {
                list.swap_remove(i);
                self.standing.fetch_sub(1, Ordering::SeqCst);
            }
        }
        if took {
            poll(timeout);
            self.give_back();
        }
    }

    /// Processors stopped for good (at their runtime's drop): if nobody
    /// holds the place, wake one processor standing by, so that somebody
    /// polls.
    pub(crate) fn pass_on(&self) {
        fence(Ordering::SeqCst);
        if self.blocked.load(Ordering::SeqCst) || self.standing.load(Ordering::SeqCst) == 0 {
            return;
        }
        let list = self.standby.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&p) = list.last() {
            // SAFETY: a listed parker is alive until its processor delists
            // it, under this lock (module docs).
            unsafe { &*(p as *const Parker) }.unpark();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model of passing the place on: processor `L` holds the place and
    //! stops for good (gives it back, then passes on) while processor `P`
    //! goes to sleep relying on it. loom fails the model (a deadlock) if
    //! `P` can sleep on its parker for good with the place empty; without
    //! the pass-on, or without step 3's second look, it does.
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn loom_a_processor_that_stops_passes_the_place_on() {
        loom::model(|| {
            let place = Arc::new(Place::new());
            let parker = Arc::new(Parker::new());
            // `L` sleeps in `epoll_wait`.
            assert!(place.try_take());
            let p = {
                let (place, parker) = (place.clone(), parker.clone());
                loom::thread::spawn(move || {
                    let mut polled = false;
                    place.sleep(&parker, None, |_| polled = true);
                    polled
                })
            };
            // `L` is woken for its runtime's end.
            place.give_back();
            place.pass_on();
            p.join().unwrap();
        });
    }

    /// The processor woken by a pass-on looks, then sleeps again: that
    /// sleep takes the place (nobody else will). loom fails the model if
    /// it can stand by again with the place empty.
    #[test]
    fn loom_a_processor_woken_by_a_pass_on_takes_the_place() {
        loom::model(|| {
            let place = Arc::new(Place::new());
            let parker = Arc::new(Parker::new());
            assert!(place.try_take());
            let p = {
                let (place, parker) = (place.clone(), parker.clone());
                loom::thread::spawn(move || {
                    let mut held = false;
                    place.sleep(&parker, None, |_| held = true);
                    if !held {
                        place.sleep(&parker, None, |_| held = true);
                    }
                    held
                })
            };
            place.give_back();
            place.pass_on();
            assert!(p.join().unwrap(), "the place was left empty");
        });
    }
}
