//! The `shared-library` build (libschedlab_pthread.so) reaches each kernel
//! thread's runtime block through its `gs` base, which `clone` copies to a new
//! thread. These tests check that every kernel thread still gets a block of
//! its own: the runtime's (started by a thread that already had one, as the
//! program's initial thread has once it called `pthread_create`) and the
//! program's own threads. Shared, the block's section counter and processor
//! were one for all: pigz under the library hung about one run in two, its
//! initial thread running a user thread while its `main` was lost.
//!
//! Run with `cargo test --release -p schedlab-rt --features shared-library
//! --test shared_block`; without the feature the file is empty.

#![cfg(all(feature = "shared-library", target_arch = "x86_64"))]

mod common;

use common::{builder_in, watchdog, Mode};
use std::sync::{Arc, Condvar, Mutex};

/// The calling kernel thread's `gs` base: its block, 0 without one.
fn block() -> usize {
    let b: usize;
    // SAFETY: reads the gs base; FSGSBASE is enabled (`usable` checked it).
    unsafe { std::arch::asm!("rdgsbase {b}", b = out(reg) b, options(nostack, nomem)) };
    b
}

/// Whether the machine can run these tests at all; prints why not.
fn usable() -> bool {
    let ok = schedlab_rt::shared::fsgsbase_usable();
    if !ok {
        eprintln!("skipped: FSGSBASE (rdgsbase/wrgsbase) is not enabled here");
    }
    ok
}

#[test]
fn a_thread_started_by_one_with_a_block_gets_its_own() {
    if !usable() {
        return;
    }
    watchdog(30, || {
        schedlab_rt::shared::attach();
        let mine = block();
        assert_ne!(mine, 0);
        let child = std::thread::spawn(|| {
            let inherited = block();
            schedlab_rt::shared::attach();
            (inherited, block())
        })
        .join()
        .unwrap();
        // The premise: clone copied the creator's base.
        assert_eq!(child.0, mine, "the kernel no longer copies the gs base");
        assert_ne!(child.1, mine, "the new thread kept its creator's block");
        assert_ne!(child.1, 0);
        // Attaching again keeps the thread's own block.
        schedlab_rt::shared::attach();
        assert_eq!(block(), mine);
    });
}

#[test]
fn the_runtimes_kernel_threads_do_not_share_their_starters_block() {
    if !usable() {
        return;
    }
    for p in [1, 2] {
        watchdog(60, move || {
            schedlab_rt::shared::attach();
            let mine = block();
            let rt = builder_in(p, Mode::Cooperative).build().expect("build a runtime");
            let handles: Vec<_> = (0..16).map(|_| rt.spawn(block)).collect();
            for h in handles {
                let theirs = h.join().expect("a user thread");
                assert_ne!(theirs, 0);
                assert_ne!(theirs, mine, "{p} processors: a processor runs on its starter's block");
            }
        });
    }
}

/// Jobs handed from an OS thread to user threads through a mutex and
/// condition variable that block in the kernel (std's, futex-based), results
/// back the same way: pigz's shape (its reader hands blocks to compressing
/// threads through its own queue), cooperative as under
/// `SCHEDLAB_RT_PREEMPT=0`.
#[test]
fn an_os_thread_and_user_threads_blocked_in_the_kernel_make_progress() {
    if !usable() {
        return;
    }
    const WORKERS: usize = 8;
    const JOBS: u64 = 2000;
    for p in [1, 2] {
        watchdog(120, move || {
            // The starter has a block, as the library's initial thread has.
            schedlab_rt::shared::attach();
            let rt = builder_in(p, Mode::Transparent).build().expect("build a runtime");
            // (jobs queued, jobs done, sum of results, no more jobs)
            let q = Arc::new((Mutex::new((Vec::<u64>::new(), 0u64, 0u64, false)), Condvar::new()));
            let workers: Vec<_> = (0..WORKERS)
                .map(|_| {
                    let q = q.clone();
                    rt.spawn(move || loop {
                        let (m, cv) = &*q;
                        let mut g = m.lock().unwrap();
                        let job = loop {
                            if let Some(j) = g.0.pop() {
                                break Some(j);
                            }
                            if g.3 {
                                break None;
                            }
                            g = cv.wait(g).unwrap();
                        };
                        let Some(j) = job else { return };
                        drop(g);
                        let r = (0..j % 64).fold(j, |a, x| a.wrapping_mul(31).wrapping_add(x));
                        let mut g = m.lock().unwrap();
                        g.1 += 1;
                        g.2 = g.2.wrapping_add(r);
                        cv.notify_all();
                    })
                })
                .collect();
            let (m, cv) = &*q;
            let mut expected = 0u64;
            for j in 0..JOBS {
                expected = expected
                    .wrapping_add((0..j % 64).fold(j, |a, x| a.wrapping_mul(31).wrapping_add(x)));
                let mut g = m.lock().unwrap();
                // At most a few jobs ahead, so the producer waits as well.
                while g.0.len() >= 4 {
                    g = cv.wait(g).unwrap();
                }
                g.0.push(j);
                cv.notify_all();
            }
            {
                let mut g = m.lock().unwrap();
                while g.1 < JOBS {
                    g = cv.wait(g).unwrap();
                }
                g.3 = true;
                cv.notify_all();
                assert_eq!(g.2, expected, "{p} processors");
            }
            for w in workers {
                w.join().expect("a worker");
            }
        });
    }
}

/// The pthread library's I/O path (`schedlab_rt::io::wait`): a user thread
/// whose non-blocking read found nothing parks until the pipe is written;
/// called outside a user thread it fails at once.
#[test]
fn io_wait_parks_a_user_thread_on_a_pipe_and_refuses_an_os_thread() {
    if !usable() {
        return;
    }
    use schedlab_rt::io::{wait, Interest};
    for p in [1, 2] {
        watchdog(60, move || {
            schedlab_rt::shared::attach();
            let mut fds = [0; 2];
            // SAFETY: pipe2 writes two descriptors into `fds`.
            assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) }, 0);
            let (r, w) = (fds[0], fds[1]);
            let e = wait(r, Interest::READ, None).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{p} processors");
            let rt = builder_in(p, Mode::Cooperative).build().expect("build a runtime");
            let reader = rt.spawn(move || {
                let mut b = 0u8;
                loop {
                    // SAFETY: reads one byte into `b`.
                    let n = unsafe { libc::read(r, (&mut b as *mut u8).cast(), 1) };
                    if n == 1 {
                        return b;
                    }
                    // SAFETY: errno of the calling (user) thread.
                    let errno = unsafe { *libc::__errno_location() };
                    assert_eq!(errno, libc::EAGAIN);
                    wait(r, Interest::READ, None).expect("wait on the pipe");
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            // SAFETY: writes one byte from a static.
            assert_eq!(unsafe { libc::write(w, b"q".as_ptr().cast(), 1) }, 1);
            assert_eq!(reader.join().expect("the reader"), b'q');
            schedlab_rt::io::forget(r);
            // SAFETY: our descriptors, closed once.
            unsafe {
                libc::close(r);
                libc::close(w);
            }
        });
    }
}

/// The calling thread's `fs` base: its thread pointer.
fn thread_pointer() -> usize {
    let p: usize;
    // SAFETY: reads the fs base; FSGSBASE is enabled (`usable` checked it).
    unsafe { std::arch::asm!("rdfsbase {p}", p = out(reg) p, options(nostack, nomem)) };
    p
}

/// A thread with a thread pointer of its own (`Builder::thread_pointer`, a C
/// thread's control block under libschedlab_pthread.so) that its spawner
/// joins before it has run — the case a join runs inline on its own stack in
/// the default build (`processor/inline.rs`) — runs with its own pointer,
/// not its joiner's, and the joiner gets its own back.
#[test]
fn a_thread_joined_before_it_ran_runs_with_its_own_thread_pointer() {
    if !usable() {
        return;
    }
    watchdog(30, || {
        schedlab_rt::shared::attach();
        let rt = builder_in(1, Mode::Cooperative).build().expect("build a runtime");
        rt.spawn(|| {
            // A stand-in block: the child's body only reads its `fs` base,
            // which nothing dereferences; word 0 points at itself as a
            // control block's does.
            let block: &'static mut [usize; 512] = Box::leak(Box::new([0; 512]));
            let tp = block.as_ptr() as usize + 8 * 256;
            block[256] = tp;
            let mine = thread_pointer();
            // SAFETY: a block that outlives the thread, used by it alone;
            // its body reads the fs base and nothing through it.
            let child = unsafe { schedlab_rt::Builder::new().thread_pointer(tp) }
                .spawn(thread_pointer)
                .expect("spawn");
            let seen = child.join().expect("the child");
            assert_eq!(seen, tp, "the child ran with its joiner's thread pointer");
            assert_eq!(thread_pointer(), mine, "the joiner did not get its own back");
        })
        .join()
        .expect("the joiner");
    });
}
