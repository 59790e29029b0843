//! Kernel-thread semantics for user threads: a user thread that blocks in the
//! kernel or computes forever does not stop the others (preemption and the
//! hand-off of a blocked processor, `preempt.rs`, `blocking.rs`).
//!
//! Every test is causal, not timed: it can only finish if the runtime
//! behaves (a frozen processor makes it hang, and the watchdog fails it).

mod common;

use common::watchdog;
use schedlab_rt::{spawn, yield_now, Detection, Event, Preemption, Runtime};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

fn close(fd: i32) {
    // SAFETY: a descriptor this test opened.
    unsafe { libc::close(fd) };
}

/// A runtime of one processor with the given scheduling, recording events.
fn runtime(preemption: Preemption, transparent: bool) -> (Runtime, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let rt = Runtime::builder()
        .processors(1)
        .preemption(preemption)
        .transparent_blocking(transparent)
        .on_event(move |e| {
            if matches!(
                e,
                Event::Preempted { .. } | Event::Blocked { .. } | Event::Unblocked { .. }
            ) {
                sink.lock().unwrap().push(e.clone());
            }
        })
        .build()
        .unwrap();
    (rt, events)
}

/// One processor; thread R blocks in `read` on a pipe that only thread W,
/// spawned after it, writes to. Without a hand-off the processor's only
/// kernel thread would sit in `read` and W would never run.
fn reader_waits_for_a_writer_behind_it(explicit: bool) -> Vec<Event> {
    let (rt, events) = runtime(Preemption::Cooperative, !explicit);
    let got = rt
        .block_on(move || {
            let (r, w) = pipe();
            let reader = spawn(move || {
                let mut b = [0u8; 1];
                let n = if explicit {
                    schedlab_rt::blocking::read(r, &mut b).unwrap()
                } else {
                    // SAFETY: a valid buffer of one byte.
                    unsafe { libc::read(r, b.as_mut_ptr().cast(), 1) as usize }
                };
                (n, b[0])
            });
            let writer = spawn(move || {
                for _ in 0..100 {
                    yield_now();
                }
                // SAFETY: one byte from a valid buffer.
                unsafe { libc::write(w, [42u8].as_ptr().cast(), 1) };
            });
            writer.join().unwrap();
            let got = reader.join().unwrap();
            close(r);
            close(w);
            got
        })
        .unwrap();
    assert_eq!(got, (1, 42));
    drop(rt);
    let e = events.lock().unwrap().clone();
    e
}

#[test]
fn a_thread_blocked_in_an_explicit_read_does_not_hold_its_processor() {
    let events = watchdog(60, || reader_waits_for_a_writer_behind_it(true));
    assert!(
        events.iter().any(|e| matches!(e, Event::Blocked { detection: Detection::Explicit, .. })),
        "the hand-off is reported: {events:?}"
    );
    assert!(events.iter().any(|e| matches!(e, Event::Unblocked { .. })), "{events:?}");
}

#[test]
fn a_thread_blocked_in_a_plain_read_does_not_hold_its_processor() {
    let events = watchdog(60, || reader_waits_for_a_writer_behind_it(false));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Blocked { detection: Detection::Transparent, .. })),
        "the hand-off is reported: {events:?}"
    );
}

/// Issue 21's hang (the Open POSIX Test Suite's `pthread_cond_signal/1-2`
/// under the C library): threads spawned from an OS thread, outside the
/// runtime, while the only processor's thread is blocked in the kernel (a
/// plain `read`) and another sleeps with a far deadline. The monitor, which
/// had seen no work waiting, slept until that deadline without telling
/// producers to wake it, so the spawned writer never ran and the reader
/// never returned.
#[test]
fn a_thread_spawned_from_outside_runs_while_the_processor_is_blocked() {
    watchdog(60, || {
        let rt = Runtime::builder()
            .processors(1)
            .preemption(Preemption::Cooperative)
            .transparent_blocking(true)
            .build()
            .unwrap();
        let (r, w) = pipe();
        // A timer far away: the monitor's next deadline.
        let sleeper = rt.spawn(|| schedlab_rt::sleep(Duration::from_secs(3600)));
        let reading = Arc::new(AtomicBool::new(false));
        let flag = reading.clone();
        let reader = rt.spawn(move || {
            flag.store(true, Ordering::SeqCst);
            let mut b = [0u8; 1];
            // SAFETY: a valid buffer of one byte.
            let n = unsafe { libc::read(r, b.as_mut_ptr().cast(), 1) };
            (n, b[0])
        });
        while !reading.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Long enough for the reader to be in `read` and the monitor to have
        // seen no work waiting for a while (its `IDLE_AFTER`).
        std::thread::sleep(Duration::from_millis(200));
        let writer = rt.spawn(move || {
            // SAFETY: one byte from a valid buffer.
            unsafe { libc::write(w, [42u8].as_ptr().cast(), 1) };
        });
        writer.join().unwrap();
        assert_eq!(reader.join().unwrap(), (1, 42));
        close(r);
        close(w);
        drop(rt);
        drop(sleeper);
    });
}

/// Seed 003's upcalls come in pairs: a thread the monitor reported `Blocked`
/// is reported `Unblocked` once it is back, even when it exits right after
/// the call, before any runtime call would make it rejoin (the reader here
/// returns from `read` and ends).
#[test]
fn a_thread_that_exits_right_after_blocking_gets_its_unblocked() {
    let events = watchdog(60, || reader_waits_for_a_writer_behind_it(false));
    let count = |blocked: bool, thread| {
        events
            .iter()
            .filter(|e| match e {
                Event::Blocked { thread: t, .. } => blocked && *t == thread,
                Event::Unblocked { thread: t, .. } => !blocked && *t == thread,
                _ => false,
            })
            .count()
    };
    let blocked: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Blocked { thread, .. } => Some(*thread),
            _ => None,
        })
        .collect();
    assert!(!blocked.is_empty(), "the reader's hand-off is reported: {events:?}");
    for t in blocked {
        assert_eq!(
            count(true, t),
            count(false, t),
            "u{t}: every Blocked has its Unblocked: {events:?}"
        );
    }
}

#[test]
fn other_threads_run_while_one_is_in_std_thread_sleep() {
    watchdog(60, || {
        let (rt, _) = runtime(Preemption::Cooperative, true);
        let seen = rt
            .block_on(|| {
                let counter = Arc::new(AtomicUsize::new(0));
                let c = counter.clone();
                let sleeper = spawn(move || {
                    std::thread::sleep(Duration::from_millis(300));
                    c.load(Ordering::SeqCst)
                });
                let c = counter.clone();
                let counter_thread = spawn(move || {
                    for _ in 0..1000 {
                        c.fetch_add(1, Ordering::SeqCst);
                        yield_now();
                    }
                });
                let seen = sleeper.join().unwrap();
                counter_thread.join().unwrap();
                seen
            })
            .unwrap();
        // Whichever ran first, the counter ran while the sleeper slept.
        assert!(seen > 0, "nothing ran while a user thread slept in the kernel");
    });
}

#[test]
fn a_spinning_thread_does_not_starve_the_others() {
    watchdog(60, || {
        let (rt, events) = runtime(Preemption::Quantum(Duration::from_millis(1)), false);
        rt.block_on(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let started = Arc::new(AtomicBool::new(false));
            let (s, st) = (stop.clone(), started.clone());
            let spinner = spawn(move || {
                st.store(true, Ordering::Relaxed);
                let mut n = 0u64;
                while !s.load(Ordering::Relaxed) {
                    n = n.wrapping_add(1);
                    std::hint::spin_loop();
                }
                n
            });
            // Waits (in either scheduling order) until the spinner spins;
            // runs again only if the spinner, which never yields, is preempted.
            let stopper = spawn(move || {
                while !started.load(Ordering::Relaxed) {
                    yield_now();
                }
                stop.store(true, Ordering::Relaxed)
            });
            stopper.join().unwrap();
            spinner.join().unwrap();
        })
        .unwrap();
        drop(rt);
        let events = events.lock().unwrap();
        assert!(events.iter().any(|e| matches!(e, Event::Preempted { .. })), "{events:?}");
    });
}

#[test]
fn a_std_mutex_held_across_yield_does_not_hang_the_runtime() {
    watchdog(60, || {
        let (rt, _) = runtime(Preemption::default(), true);
        let total = rt
            .block_on(|| {
                let m = Arc::new(Mutex::new(0u32));
                let hs: Vec<_> = (0..4)
                    .map(|_| {
                        let m = m.clone();
                        spawn(move || {
                            for _ in 0..20 {
                                let mut g = m.lock().unwrap();
                                yield_now(); // the holder leaves the processor
                                *g += 1;
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                let total = *m.lock().unwrap();
                total
            })
            .unwrap();
        assert_eq!(total, 80);
    });
}

#[test]
fn a_thread_that_opts_out_is_never_preempted_and_a_region_defers_it() {
    watchdog(60, || {
        let (rt, events) = runtime(Preemption::Quantum(Duration::from_micros(200)), false);
        rt.block_on(|| {
            let inside = Arc::new(AtomicUsize::new(0));
            let started = Arc::new(AtomicBool::new(false));
            let (i, st) = (inside.clone(), started.clone());
            // Spins 20 ms inside a region while another thread is runnable:
            // the other thread must not run before the region ends.
            let region = spawn(move || {
                st.store(true, Ordering::SeqCst);
                schedlab_rt::no_preempt(|| {
                    let t = std::time::Instant::now();
                    while t.elapsed() < Duration::from_millis(20) {
                        std::hint::spin_loop();
                    }
                    i.load(Ordering::SeqCst)
                })
            });
            let i = inside.clone();
            let st = started.clone();
            // In either scheduling order, `other` stores only once the
            // region has begun.
            let other = spawn(move || {
                while !st.load(Ordering::SeqCst) {
                    yield_now();
                }
                i.store(1, Ordering::SeqCst)
            });
            assert_eq!(region.join().unwrap(), 0, "ran inside a no_preempt region");
            other.join().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let started = Arc::new(AtomicBool::new(false));
            let (s, st) = (stop.clone(), started.clone());
            let pinned = schedlab_rt::Builder::new()
                .preemptible(false)
                .spawn(move || {
                    st.store(true, Ordering::SeqCst);
                    let t = std::time::Instant::now();
                    while t.elapsed() < Duration::from_millis(20) {
                        std::hint::spin_loop();
                    }
                    s.load(Ordering::SeqCst)
                })
                .unwrap();
            let other = spawn(move || {
                while !started.load(Ordering::SeqCst) {
                    yield_now();
                }
                stop.store(true, Ordering::SeqCst)
            });
            assert!(!pinned.join().unwrap(), "a non-preemptible thread was preempted");
            other.join().unwrap();
        })
        .unwrap();
        drop(rt);
        // The deferred request was taken when the region ended.
        assert!(events.lock().unwrap().iter().any(|e| matches!(e, Event::Preempted { .. })));
    });
}

#[test]
fn one_runnable_thread_per_processor_gets_no_preemption() {
    watchdog(60, || {
        let (rt, events) = runtime(Preemption::Quantum(Duration::from_micros(200)), true);
        rt.block_on(|| {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(50) {
                std::hint::spin_loop();
            }
        })
        .unwrap();
        drop(rt);
        assert_eq!(events.lock().unwrap().len(), 0, "{:?}", events.lock().unwrap());
    });
}

/// Fills xmm0–xmm15 and r8–r15 with known values, spins in assembly (where
/// the preemption signal lands), and stores what the registers hold after.
#[cfg(target_arch = "x86_64")]
fn spin_with_registers(seed: u64, iters: u64) -> bool {
    let input: [u64; 32] =
        std::array::from_fn(|i| seed.wrapping_mul(0x9E37_79B9).wrapping_add(i as u64));
    let mut output = [0u64; 32];
    let gp_in: [u64; 8] = std::array::from_fn(|i| seed ^ (0xA5A5_0000 + i as u64));
    let mut gp_out = [0u64; 8];
    // SAFETY: reads 256 bytes from `input` and 64 from `gp_in`, writes the
    // same amounts to the outputs; every register it changes is declared.
    unsafe {
        std::arch::asm!(
            "movdqu xmm0, [{i} + 0]", "movdqu xmm1, [{i} + 16]", "movdqu xmm2, [{i} + 32]",
            "movdqu xmm3, [{i} + 48]", "movdqu xmm4, [{i} + 64]", "movdqu xmm5, [{i} + 80]",
            "movdqu xmm6, [{i} + 96]", "movdqu xmm7, [{i} + 112]", "movdqu xmm8, [{i} + 128]",
            "movdqu xmm9, [{i} + 144]", "movdqu xmm10, [{i} + 160]", "movdqu xmm11, [{i} + 176]",
            "movdqu xmm12, [{i} + 192]", "movdqu xmm13, [{i} + 208]", "movdqu xmm14, [{i} + 224]",
            "movdqu xmm15, [{i} + 240]",
            "push rbx",
            "mov rbx, {g}",
            "mov r8, [rbx]", "mov r9, [rbx + 8]", "mov r10, [rbx + 16]", "mov r11, [rbx + 24]",
            "mov r12, [rbx + 32]", "mov r13, [rbx + 40]", "mov r14, [rbx + 48]", "mov r15, [rbx + 56]",
            "pop rbx",
            "2:",
            "dec {n}",
            "jnz 2b",
            "movdqu [{o} + 0], xmm0", "movdqu [{o} + 16], xmm1", "movdqu [{o} + 32], xmm2",
            "movdqu [{o} + 48], xmm3", "movdqu [{o} + 64], xmm4", "movdqu [{o} + 80], xmm5",
            "movdqu [{o} + 96], xmm6", "movdqu [{o} + 112], xmm7", "movdqu [{o} + 128], xmm8",
            "movdqu [{o} + 144], xmm9", "movdqu [{o} + 160], xmm10", "movdqu [{o} + 176], xmm11",
            "movdqu [{o} + 192], xmm12", "movdqu [{o} + 208], xmm13", "movdqu [{o} + 224], xmm14",
            "movdqu [{o} + 240], xmm15",
            "mov [{go}], r8", "mov [{go} + 8], r9", "mov [{go} + 16], r10", "mov [{go} + 24], r11",
            "mov [{go} + 32], r12", "mov [{go} + 40], r13", "mov [{go} + 48], r14", "mov [{go} + 56], r15",
            i = in(reg) input.as_ptr(),
            o = in(reg) output.as_mut_ptr(),
            g = in(reg) gp_in.as_ptr(),
            go = in(reg) gp_out.as_mut_ptr(),
            n = inout(reg) iters => _,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
            out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
        );
    }
    input == output && gp_in == gp_out
}

#[cfg(target_arch = "x86_64")]
#[test]
fn registers_survive_preemption_bit_exact() {
    watchdog(120, || {
        let (rt, events) = runtime(Preemption::Quantum(Duration::from_micros(100)), false);
        let ok = rt
            .block_on(|| {
                let hs: Vec<_> = (0..3u64)
                    .map(|s| {
                        spawn(move || (0..40).all(|k| spin_with_registers(s * 100 + k, 2_000_000)))
                    })
                    .collect();
                hs.into_iter().all(|h| h.join().unwrap())
            })
            .unwrap();
        drop(rt);
        let preemptions =
            events.lock().unwrap().iter().filter(|e| matches!(e, Event::Preempted { .. })).count();
        assert!(preemptions > 0, "the test preempted nothing");
        assert!(ok, "a register changed across {preemptions} preemptions");
    });
}

/// A kernel-thread-affine resource: tokio's runtime context is a
/// thread-local of the kernel thread. Two user threads on one processor each
/// run a tokio runtime's `block_on`, which parks the kernel thread. Inside
/// `no_preempt` neither is switched away in the middle (which would let the
/// other enter tokio on the same kernel thread and panic), and the hand-off
/// gives the processor to another kernel thread while the first is parked
/// in tokio, so the second runs too.
#[test]
fn tokio_inside_two_user_threads_works_inside_no_preempt() {
    watchdog(60, || {
        let (rt, _) = runtime(Preemption::Quantum(Duration::from_micros(200)), true);
        let sum = rt
            .block_on(|| {
                let hs: Vec<_> = (0..2u64)
                    .map(|i| {
                        spawn(move || {
                            // The runtime's whole life inside: its drop
                            // enters tokio's context too.
                            schedlab_rt::no_preempt(|| {
                                let tokio_rt = tokio::runtime::Builder::new_current_thread()
                                    .enable_time()
                                    .build()
                                    .unwrap();
                                tokio_rt.block_on(async move {
                                    tokio::time::sleep(Duration::from_millis(30)).await;
                                    i + 1
                                })
                            })
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            })
            .unwrap();
        assert_eq!(sum, 3);
    });
}

/// Per-user-thread state survives preemption and migration: each thread
/// counts in its own `LocalKey` while being preempted every 100 µs on two
/// processors, and ends with exactly its own count.
#[test]
fn local_keys_stay_per_user_thread_under_preemption() {
    use schedlab_rt::LocalKey;
    use std::cell::Cell;
    static COUNT: LocalKey<Cell<u64>> = LocalKey::new(|| Cell::new(0));
    watchdog(60, || {
        let rt = Runtime::builder()
            .processors(2)
            .preemption(Preemption::Quantum(Duration::from_micros(100)))
            .build()
            .unwrap();
        let ok = rt
            .block_on(|| {
                let hs: Vec<_> = (0..6u64)
                    .map(|i| {
                        spawn(move || {
                            let n = 200_000 + i * 1000;
                            for _ in 0..n {
                                COUNT.with(|c| c.set(c.get() + 1));
                            }
                            COUNT.with(|c| c.get()) == n
                        })
                    })
                    .collect();
                hs.into_iter().all(|h| h.join().unwrap())
            })
            .unwrap();
        assert!(ok, "a user thread saw another's count");
    });
}

/// The monitor asks to run ahead of user code (`SCHED_FIFO` when permitted),
/// but the spare kernel threads it starts for hand-offs run user code and get
/// the ordinary policy back (reset-on-fork), whatever the monitor got.
#[test]
fn spare_kernel_threads_do_not_inherit_the_monitors_policy() {
    watchdog(60, || {
        let (rt, events) = runtime(Preemption::Cooperative, false);
        rt.block_on(|| {
            let sleeper =
                spawn(|| schedlab_rt::blocking(|| std::thread::sleep(Duration::from_millis(50))));
            let worker = spawn(|| {
                for _ in 0..200 {
                    std::thread::sleep(Duration::from_micros(10));
                    yield_now();
                }
            });
            sleeper.join().unwrap();
            worker.join().unwrap();
        })
        .unwrap();
        assert!(
            events.lock().unwrap().iter().any(|e| matches!(e, Event::Blocked { .. })),
            "no hand-off happened, so no spare was started"
        );
        let mut spares = 0;
        for entry in std::fs::read_dir("/proc/self/task").unwrap() {
            let path = entry.unwrap().path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            let tid: i32 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
            // SAFETY: queries the policy of a thread of ours (or fails if it exited).
            let policy = unsafe { libc::sched_getscheduler(tid) };
            let comm = comm.trim();
            if comm == "schedlab-monito" {
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } == 0 {
                    assert_eq!(
                        policy & !libc::SCHED_RESET_ON_FORK,
                        libc::SCHED_FIFO,
                        "the monitor did not get SCHED_FIFO, as root"
                    );
                }
            } else if comm.strip_prefix("schedlab-m").is_some_and(|n| n.parse::<u32>().is_ok()) {
                spares += 1;
                assert!(
                    policy == libc::SCHED_OTHER || policy == -1,
                    "{comm} runs user code under policy {policy}"
                );
            }
        }
        assert!(spares > 0, "found no spare kernel thread");
    });
}

/// Spare kernel threads beyond the few a runtime keeps exit, and are joined: a kernel
/// thread nobody joins keeps its stack and guard mapped for good, and a runtime that
/// lives as long as its process (`libschedlab_pthread`'s) kept every one — thousands of
/// 2 MiB stacks after a program's waves of blocking calls, which every later `fork` copied.
/// Six waves of 32 threads blocked at once (32 hand-offs, so about 24 spares too many
/// after each) must not leave the process's mappings growing wave after wave.
#[test]
fn exited_spare_kernel_threads_are_joined() {
    fn mappings() -> usize {
        std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
    }
    watchdog(60, || {
        let (rt, events) = runtime(Preemption::Cooperative, false);
        let wave = || {
            rt.block_on(|| {
                let hs: Vec<_> = (0..32)
                    .map(|_| {
                        spawn(|| {
                            schedlab_rt::blocking(|| std::thread::sleep(Duration::from_millis(20)))
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
            })
            .unwrap();
        };
        wave();
        let after_one = mappings();
        for _ in 0..5 {
            wave();
        }
        let after_six = mappings();
        assert!(
            events.lock().unwrap().iter().filter(|e| matches!(e, Event::Blocked { .. })).count()
                >= 6 * 32,
            "the waves' threads did not block in hand-offs"
        );
        // Each spare left unjoined keeps two mappings (its stack and its guard): five
        // waves of about 24 each would add about 240.
        assert!(
            after_six < after_one + 64,
            "the process's mappings grew from {after_one} after one wave to {after_six} \
             after six: exited kernel threads are not joined"
        );
    });
}
