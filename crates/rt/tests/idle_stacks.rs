//! Idle-stack reclaim (`reclaim.rs`): a user thread waiting on I/O past the
//! threshold gives its stack's memory back (seen with `mincore`), resumes
//! with its stack intact (locals, and pointers into them), and the race
//! with its wake-up loses nothing (random wakes around the threshold).

mod common;

use common::watchdog;
use schedlab_rt::net::UnixStream;
use schedlab_rt::Runtime;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// How many pages of `range` (page aligned) are resident.
fn resident(range: std::ops::Range<usize>) -> usize {
    let p = page();
    let mut v = vec![0u8; (range.end - range.start) / p];
    // SAFETY: the range is a live thread's stack mapping, page aligned; `v`
    // has one byte per page.
    let rc = unsafe {
        libc::mincore(range.start as *mut libc::c_void, range.end - range.start, v.as_mut_ptr())
    };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    v.iter().filter(|b| **b & 1 == 1).count()
}

/// Waits (hang guard: 20 s) until `f` holds, looking every few ms.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..4000 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("never happened: {what}");
}

/// Touches about `depth` × 4 KiB of stack below the caller, then returns.
#[inline(never)]
fn go_deep(depth: usize) -> u64 {
    let mut buf = [0u8; 4096];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = i as u8;
    }
    let below = if depth > 1 { go_deep(depth - 1) } else { 0 };
    std::hint::black_box(&buf).iter().map(|&b| b as u64).sum::<u64>() + below
}

/// A pattern a thread keeps in a local and checks after its wait.
fn pattern(i: usize) -> [u64; 48] {
    std::array::from_fn(|k| (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k as u64)
}

/// `n` user threads each go deep, keep a pattern and a pointer to it on
/// their stacks, and block reading one end of a socket pair; returns the
/// other ends, the threads' stack ranges and their handles (each yields its
/// `stack_usage`).
#[allow(clippy::type_complexity)]
fn readers(
    rt: &Runtime,
    n: usize,
) -> (
    Vec<UnixStream>,
    Arc<Mutex<Vec<(std::ops::Range<usize>, usize)>>>,
    Vec<schedlab_rt::JoinHandle<usize>>,
) {
    let bounds = Arc::new(Mutex::new(Vec::new()));
    let mut ends = Vec::new();
    let mut handles = Vec::new();
    for i in 0..n {
        let (mut a, b) = UnixStream::pair().unwrap();
        ends.push(b);
        let bounds = bounds.clone();
        handles.push(rt.spawn(move || {
            std::hint::black_box(go_deep(6));
            let kept = pattern(i);
            let at: &[u64; 48] = std::hint::black_box(&kept);
            let range = schedlab_rt::stack_bounds().unwrap();
            // Resident before the wait (only the wait reclaims).
            let before = resident(range.clone());
            bounds.lock().unwrap().push((range, before));
            let mut byte = [0u8; 1];
            a.read_exact(&mut byte).unwrap();
            assert_eq!(*at, pattern(i), "thread {i}'s stack came back intact");
            assert_eq!(byte[0], i as u8);
            a.write_all(&byte).unwrap();
            schedlab_rt::stack_usage().unwrap().0
        }));
    }
    (ends, bounds, handles)
}

#[test]
fn an_idle_reader_gives_back_its_dead_pages_and_keeps_its_live_one() {
    watchdog(60, || {
        let rt = Runtime::builder()
            .processors(2)
            .idle_stack_reclaim(Some(Duration::from_millis(1)))
            .build()
            .unwrap();
        let n = 8;
        let (mut ends, bounds, handles) = readers(&rt, n);
        eventually("every reader listed its stack", || bounds.lock().unwrap().len() == n);
        let ranges = bounds.lock().unwrap().clone();
        // Each went 6 pages deep before its read; the dead pages go, the
        // pages of its live frames (one in a release build, a few in a debug
        // one) stay.
        let before: Vec<usize> = ranges.iter().map(|r| r.1).collect();
        let ranges: Vec<_> = ranges.into_iter().map(|r| r.0).collect();
        assert!(before.iter().all(|&b| b >= 7), "the readers touched their deep pages: {before:?}");
        eventually("the readers' dead stack pages were given back", || {
            ranges.iter().zip(&before).all(|(r, &b)| {
                let now = resident(r.clone());
                now >= 1 && now + 5 <= b
            })
        });
        for (i, e) in ends.iter_mut().enumerate() {
            e.write_all(&[i as u8]).unwrap();
            let mut b = [0u8; 1];
            e.read_exact(&mut b).unwrap();
            assert_eq!(b[0], i as u8);
        }
        for h in handles {
            let used = h.join().unwrap();
            assert!(used >= 6 * 4096, "stack_usage keeps the peak a reclaim saw: {used}");
        }
    });
}

#[test]
fn the_live_mode_gives_back_every_page_and_restores_the_frames() {
    watchdog(60, || {
        // SAFETY: no reader's stack is borrowed by another thread.
        let rt = unsafe {
            Runtime::builder()
                .processors(2)
                .idle_stack_reclaim(Some(Duration::from_millis(1)))
                .idle_stack_reclaim_live(true)
        }
        .build()
        .unwrap();
        let n = 8;
        let (mut ends, bounds, handles) = readers(&rt, n);
        eventually("every reader listed its stack", || bounds.lock().unwrap().len() == n);
        let ranges: Vec<_> = bounds.lock().unwrap().iter().map(|r| r.0.clone()).collect();
        eventually("every page of the readers' stacks was given back", || {
            ranges.iter().all(|r| resident(r.clone()) == 0)
        });
        for (i, e) in ends.iter_mut().enumerate() {
            e.write_all(&[i as u8]).unwrap();
            let mut b = [0u8; 1];
            e.read_exact(&mut b).unwrap();
            assert_eq!(b[0], i as u8);
        }
        for h in handles {
            h.join().unwrap();
        }
    });
}

#[test]
fn turned_off_an_idle_reader_keeps_its_pages() {
    watchdog(60, || {
        let rt = Runtime::builder().processors(2).idle_stack_reclaim(None).build().unwrap();
        let n = 4;
        let (mut ends, bounds, handles) = readers(&rt, n);
        eventually("every reader listed its stack", || bounds.lock().unwrap().len() == n);
        let ranges: Vec<_> = bounds.lock().unwrap().iter().map(|r| r.0.clone()).collect();
        // 50 periods of the shortest threshold: off, nothing goes.
        std::thread::sleep(Duration::from_millis(50));
        for r in &ranges {
            assert!(resident(r.clone()) >= 6, "off, the deep pages stay");
        }
        for (i, e) in ends.iter_mut().enumerate() {
            e.write_all(&[i as u8]).unwrap();
            let mut b = [0u8; 1];
            e.read_exact(&mut b).unwrap();
        }
        for h in handles {
            h.join().unwrap();
        }
    });
}

/// Random wakes around the threshold: echo threads whose stacks are
/// reclaimed (live mode) and restored while clients write after random
/// pauses; every reply and every thread's stack pattern must survive.
fn stress(procs: usize) {
    watchdog(120, move || {
        // SAFETY: no echo thread's stack is borrowed by another thread.
        let rt = unsafe {
            Runtime::builder()
                .processors(procs)
                .idle_stack_reclaim(Some(Duration::from_millis(1)))
                .idle_stack_reclaim_live(true)
        }
        .build()
        .unwrap();
        let conns = 24;
        let rounds = 30;
        let mut servers = Vec::new();
        let mut clients = Vec::new();
        for i in 0..conns {
            let (mut a, mut b) = UnixStream::pair().unwrap();
            servers.push(rt.spawn(move || {
                let kept = pattern(i);
                let at = std::hint::black_box(&kept);
                let mut byte = [0u8; 1];
                let mut n = 0;
                while a.read(&mut byte).unwrap() == 1 {
                    assert_eq!(*at, pattern(i), "thread {i}'s stack intact after wake {n}");
                    a.write_all(&byte).unwrap();
                    n += 1;
                }
                n
            }));
            clients.push(rt.spawn(move || {
                let mut x = (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
                for k in 0..rounds {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // 0 to 2.5 ms: either side of the 1 ms threshold and
                    // its period.
                    schedlab_rt::sleep(Duration::from_micros(x % 2500));
                    let out = [(k % 251) as u8];
                    b.write_all(&out).unwrap();
                    let mut back = [0u8; 1];
                    b.read_exact(&mut back).unwrap();
                    assert_eq!(back, out);
                }
            }));
        }
        for c in clients {
            c.join().unwrap();
        }
        for s in servers {
            assert_eq!(s.join().unwrap(), rounds);
        }
    });
}

#[test]
fn random_wakes_around_the_threshold_lose_nothing_on_one_processor() {
    stress(1);
}

#[test]
fn random_wakes_around_the_threshold_lose_nothing_on_two_processors() {
    stress(2);
}

#[test]
fn random_wakes_around_the_threshold_lose_nothing_on_four_processors() {
    stress(4);
}

/// The default mode is sound for a local another thread uses while its
/// owner waits on I/O (the reason the live mode is an `unsafe` opt-in): a
/// scoped thread counts on the blocked reader's stack across many periods.
#[test]
fn a_local_borrowed_by_a_scoped_thread_survives_the_default_mode() {
    watchdog(60, || {
        let rt = Runtime::builder()
            .processors(2)
            .idle_stack_reclaim(Some(Duration::from_millis(1)))
            .build()
            .unwrap();
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let reader = rt.spawn(move || {
            std::hint::black_box(go_deep(6));
            let counter = std::sync::atomic::AtomicUsize::new(0);
            schedlab_rt::scope(|s| {
                s.spawn(|| {
                    for _ in 0..40 {
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        schedlab_rt::sleep(Duration::from_millis(1));
                    }
                    done_tx.send(()).unwrap();
                });
                let mut byte = [0u8; 1];
                a.read_exact(&mut byte).unwrap();
            });
            counter.into_inner()
        });
        done_rx.recv().unwrap();
        b.write_all(&[1]).unwrap();
        assert_eq!(reader.join().unwrap(), 40, "every increment on the reader's stack kept");
    });
}
