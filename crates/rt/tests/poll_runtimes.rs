//! Several runtimes in one process share its poller (`poll.rs`): at most one
//! processor in the process sleeps in `epoll_wait`, the others on their
//! futex. A reader of one runtime must still wake when the runtime whose
//! processor held that place is dropped (issue 29, "no lost wake-ups").

mod common;

use common::watchdog;
use schedlab_rt::net::UnixStream;
use schedlab_rt::Runtime;
use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::Duration;

/// A bound on one reply, far beyond any scheduling delay: a guard against
/// the hang this file looks for, so that it fails with a message.
const REPLY_BOUND: Duration = Duration::from_secs(10);

fn one_processor() -> Runtime {
    Runtime::builder().processors(1).stack_size(64 * 1024).build().expect("build a runtime")
}

/// An echo thread on `rt` reading one end of a socket pair; returns the
/// other end. Each byte read is written back.
fn echo(rt: &Runtime) -> UnixStream {
    let (mut mine, theirs) = UnixStream::pair().unwrap();
    drop(rt.spawn(move || {
        let mut b = [0u8; 1];
        while let Ok(1) = mine.read(&mut b) {
            if mine.write_all(&b).is_err() {
                break;
            }
        }
    }));
    theirs
}

/// Sends `byte` through `end` and waits (bounded) for it to come back.
fn round_trip(end: &UnixStream, byte: u8, what: &str) {
    let (tx, rx) = mpsc::channel();
    let mut w = end.try_clone().unwrap();
    w.write_all(&[byte]).unwrap();
    let mut r = end.try_clone().unwrap();
    // An OS thread reads the reply: `end` is a runtime socket used from
    // outside any runtime, where it blocks plainly.
    std::thread::spawn(move || {
        let mut b = [0u8; 1];
        let _ = tx.send(r.read_exact(&mut b).map(|()| b[0]));
    });
    match rx.recv_timeout(REPLY_BOUND) {
        Ok(Ok(b)) => assert_eq!(b, byte, "{what}: echoed a wrong byte"),
        Ok(Err(e)) => panic!("{what}: {e}"),
        Err(_) => panic!("{what}: no reply in {REPLY_BOUND:?}: a reader was never woken"),
    }
}

/// The case as found: runtime A's processor sleeps in `epoll_wait` for its
/// reader, B's processor sleeps on its futex (the place is taken), then A
/// is dropped. Before the fix nobody polled any more, and B's reader slept
/// through its data for good.
#[test]
fn a_reader_wakes_after_the_runtime_that_polled_for_it_is_dropped() {
    watchdog(60, || {
        let a = one_processor();
        let a_end = echo(&a);
        round_trip(&a_end, 1, "runtime A");
        // A's reader waits again; A's processor goes to sleep polling.
        std::thread::sleep(Duration::from_millis(50));
        let b = one_processor();
        let b_end = echo(&b);
        round_trip(&b_end, 2, "runtime B");
        // B's reader waits; B's processor sleeps on its futex.
        std::thread::sleep(Duration::from_millis(50));
        drop(a);
        drop(a_end);
        round_trip(&b_end, 3, "runtime B after A's drop");
        drop(b_end);
        drop(b);
    });
}

/// A small xorshift: reproducible choices without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// The shape of the parallel test runs that found it: several runtimes with
/// readers on socket pairs, runtimes dropped at random (and new ones made)
/// while data arrives for the others' readers, with pauses that let every
/// processor fall asleep in between.
#[test]
fn readers_of_live_runtimes_wake_while_others_are_dropped_at_random() {
    watchdog(120, || {
        const RUNTIMES: usize = 4;
        const READERS: usize = 3;
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let make = || {
            let rt = one_processor();
            let ends: Vec<UnixStream> = (0..READERS).map(|_| echo(&rt)).collect();
            (rt, ends)
        };
        let mut live: Vec<(Runtime, Vec<UnixStream>)> = (0..RUNTIMES).map(|_| make()).collect();
        for round in 0..40 {
            // Let every processor go to sleep, one of them in `epoll_wait`.
            std::thread::sleep(Duration::from_millis(rng.below(4) as u64 * 5));
            let gone = live.swap_remove(rng.below(live.len()));
            drop(gone);
            for (k, (_, ends)) in live.iter().enumerate() {
                let end = &ends[rng.below(READERS)];
                round_trip(end, round as u8, &format!("round {round}, runtime {k}"));
            }
            live.push(make());
        }
    });
}

/// The same within one runtime: a processor removed while it slept in
/// `epoll_wait` parks for good, and the remaining one slept on its futex
/// relying on it. Which one holds the place varies, so it goes round.
#[test]
fn a_reader_wakes_after_the_processor_that_polled_for_it_is_removed() {
    watchdog(120, || {
        let rt = Runtime::builder()
            .processors(2)
            .stack_size(64 * 1024)
            .build()
            .expect("build a runtime");
        let end = echo(&rt);
        for round in 0..30u8 {
            round_trip(&end, round, &format!("round {round}, two processors"));
            // Both processors asleep, one of them in `epoll_wait`.
            std::thread::sleep(Duration::from_millis(10));
            rt.set_processors(1).unwrap();
            round_trip(&end, round, &format!("round {round}, one removed"));
            rt.set_processors(2).unwrap();
        }
        drop(end);
    });
}
