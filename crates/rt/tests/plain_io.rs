//! Plain `std` I/O in user threads: each call that blocks is a kernel-thread
//! hand-off (`blocking.rs`: the monitor sees the kernel thread stopped and
//! gives its processor to a spare), so a thread-per-connection program that
//! works on OS threads must work on the runtime too, at about their cost,
//! however many threads block at once.

mod common;

use common::watchdog;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

/// Pins the calling thread, and every thread it starts afterwards (the
/// runtime's processor, its monitor and spare kernel threads), to the first
/// CPU it may run on, as the echo probe pins its servers: the monitor then
/// shares its CPU with the processors, so the monitor's own work is taken
/// from theirs.
fn pin_to_one_cpu() {
    // SAFETY: a zeroed cpu_set_t is empty; the calls read and write only
    // the set on this stack.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return;
        }
        let Some(cpu) = (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)) else {
            return;
        };
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
    }
}

/// `N` user threads on one processor, each in a plain `std` read on its own
/// socket, get a byte each from an OS thread and echo it, wave after wave.
///
/// Before the monitor's scan of detached kernel threads was gated
/// (`monitor.rs`, `ScanGate`), every look of the monitor read the CPU clock
/// of every detached kernel thread; a hand-off takes three or four looks,
/// so setting up `N` blocked threads cost O(N²) clock reads on the
/// processor's CPU (the monitor runs ahead of it), and the echo probe's
/// `rt io=std` server at 2,000 connections never answered its first wave.
/// At this `N` that took minutes here; now seconds (the bound is only a hang
/// guard).
#[test]
fn many_user_threads_blocked_in_plain_std_reads_all_answer() {
    const N: usize = 1_000;
    const WAVES: u8 = 3;
    watchdog(90, || {
        pin_to_one_cpu();
        let rt = schedlab_rt::Runtime::builder()
            .processors(1)
            .stack_size(64 * 1024)
            .transparent_blocking(true)
            .build()
            .expect("build a runtime");
        let mut ours = Vec::with_capacity(N);
        let mut threads = Vec::with_capacity(N);
        for _ in 0..N {
            let (a, mut b) = UnixStream::pair().expect("a socket pair");
            threads.push(rt.spawn(move || {
                let mut byte = [0u8; 1];
                let mut echoed = 0;
                loop {
                    match b.read(&mut byte) {
                        Ok(0) => return echoed,
                        Ok(_) => {
                            b.write_all(&byte).expect("echo");
                            echoed += 1;
                        }
                        Err(e) => panic!("read: {e}"),
                    }
                }
            }));
            ours.push(a);
        }
        for wave in 0..WAVES {
            for a in &mut ours {
                a.write_all(&[wave]).expect("send");
            }
            for (i, a) in ours.iter_mut().enumerate() {
                let mut byte = [0u8; 1];
                a.read_exact(&mut byte).expect("an echo");
                assert_eq!(byte[0], wave, "connection {i}, wave {wave}");
            }
        }
        drop(ours);
        for t in threads {
            assert_eq!(t.join().expect("a user thread"), usize::from(WAVES));
        }
    });
}
