//! Idle-stack reclaim (`reclaim.rs`): a user thread waiting on I/O past the
//! threshold gives its stack's memory back (seen with `mincore`), resumes
//! with its stack intact (locals, and pointers into them), and the race
//! with its wake-up loses nothing (random wakes around the threshold). In
//! the live mode (userfaultfd), another thread — or the kernel — touching a
//! reclaimed stack gets its contents back, and no saved buffer outlives its
//! thread or its runtime. The tests run one at a time (`serial`): they count
//! the process's saved buffers.

mod common;

use common::watchdog;
use schedlab_rt::net::UnixStream;
use schedlab_rt::Runtime;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One test at a time: the buffer count is the process's.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why the live mode falls back here, if it does: the runtime's own test of
/// userfaultfd (without `UFFD_USER_MODE_ONLY`), redone.
fn uffd_refused() -> Option<String> {
    // SAFETY: userfaultfd(2) takes flags only; the descriptor is closed.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) };
    if fd >= 0 {
        // SAFETY: ours.
        unsafe { libc::close(fd as i32) };
        return None;
    }
    let err = std::io::Error::last_os_error();
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/userfaultfd") {
        Ok(_) => None,
        Err(e) => Some(format!("userfaultfd: {err}; /dev/userfaultfd: {e}")),
    }
}

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
    let _one = serial();
    watchdog(60, || {
        let rt = Runtime::builder()
            .processors(2)
            .idle_stack_reclaim(Some(Duration::from_millis(1)))
            .idle_stack_reclaim_live(false)
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
    let _one = serial();
    if let Some(why) = uffd_refused() {
        eprintln!("skipped: {why} (the fallback test covers this case)");
        return;
    }
    watchdog(60, || {
        let buffers = schedlab_rt::reclaimed_stack_buffers();
        let rt = Runtime::builder()
            .processors(2)
            .idle_stack_reclaim(Some(Duration::from_millis(1)))
            .idle_stack_reclaim_live(true)
            .build()
            .unwrap();
        let n = 8;
        let (mut ends, bounds, handles) = readers(&rt, n);
        eventually("every reader listed its stack", || bounds.lock().unwrap().len() == n);
        let ranges: Vec<_> = bounds.lock().unwrap().iter().map(|r| r.0.clone()).collect();
        eventually("every page of the readers' stacks was given back", || {
            ranges.iter().all(|r| resident(r.clone()) == 0)
        });
        assert_eq!(schedlab_rt::reclaimed_stack_buffers(), buffers + n, "a buffer per reader");
        for (i, e) in ends.iter_mut().enumerate() {
            e.write_all(&[i as u8]).unwrap();
            let mut b = [0u8; 1];
            e.read_exact(&mut b).unwrap();
            assert_eq!(b[0], i as u8);
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(schedlab_rt::reclaimed_stack_buffers(), buffers, "each resume freed its buffer");
    });
}

#[test]
fn turned_off_an_idle_reader_keeps_its_pages() {
    let _one = serial();
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

/// The client side of the stress tests: `rounds` one-byte round trips on `b`,
/// each after a pseudo-random sleep of 0 to 2.5 ms (seeded by `i`): either
/// side of the 1 ms reclaim threshold and its period.
fn random_client(i: usize, mut b: UnixStream, rounds: usize) {
    let mut x = (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
    for k in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        schedlab_rt::sleep(Duration::from_micros(x % 2500));
        let out = [(k % 251) as u8];
        b.write_all(&out).unwrap();
        let mut back = [0u8; 1];
        b.read_exact(&mut back).unwrap();
        assert_eq!(back, out);
    }
}

/// The server side: echoes every byte on `a` until the client closes it,
/// checking after each wake that thread `i`'s pattern, kept on its stack
/// while it blocked, survived; returns how many it echoed.
fn echo(i: usize, a: &mut UnixStream) -> usize {
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
}

/// The stress tests' scaffolding: a runtime from `builder` whose idle
/// threads are reclaimed after 1 ms (live mode), `conns` socket pairs, a
/// `server(i, end)` thread on one end of each and a [`random_client`] of
/// `rounds` round trips on the other; every server must have echoed every
/// round.
fn echo_stress(
    builder: schedlab_rt::RuntimeBuilder,
    conns: usize,
    rounds: usize,
    server: fn(usize, UnixStream) -> usize,
) {
    let _one = serial();
    watchdog(120, move || {
        let rt = builder
            .idle_stack_reclaim(Some(Duration::from_millis(1)))
            .idle_stack_reclaim_live(true)
            .build()
            .unwrap();
        let mut servers = Vec::new();
        let mut clients = Vec::new();
        for i in 0..conns {
            let (a, b) = UnixStream::pair().unwrap();
            servers.push(rt.spawn(move || server(i, a)));
            clients.push(rt.spawn(move || random_client(i, b, rounds)));
        }
        for c in clients {
            c.join().unwrap();
        }
        for s in servers {
            assert_eq!(s.join().unwrap(), rounds);
        }
    });
}

/// Random wakes around the threshold: echo threads whose stacks are
/// reclaimed (live mode) and restored while clients write after random
/// pauses; every reply and every thread's stack pattern must survive.
fn stress(procs: usize) {
    echo_stress(Runtime::builder().processors(procs), 24, 30, |i, mut a| echo(i, &mut a));
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

/// Waits (from a user thread, hang guard 20 s) until the reclaimer has taken
/// what it can of the stack `range`: every page when the live mode works
/// here, else the dead pages (all but the top 4, which hold the live frames
/// of a debug build; `before` were resident, 6 of them deeper).
fn until_given_back(range: &std::ops::Range<usize>, before: usize, live: bool) {
    for _ in 0..20_000 {
        let now = resident(range.clone());
        let deep = resident(range.start..range.end - 4 * page());
        if (live && now == 0) || (!live && now >= 1 && deep == 0) {
            return;
        }
        schedlab_rt::sleep(Duration::from_millis(1));
    }
    panic!("the stack {range:x?} was never given back (live: {live}; {} pages resident, {before} before)", resident(range.clone()));
}

/// A runtime whose idle threads are reclaimed after 1 ms, in the default
/// mode (the live part too, where userfaultfd is allowed).
fn quick_reclaim(procs: usize) -> Runtime {
    Runtime::builder()
        .processors(procs)
        .idle_stack_reclaim(Some(Duration::from_millis(1)))
        .build()
        .unwrap()
}

/// A scoped thread reads and writes locals of its parent while the parent
/// is blocked in a `read` and its whole stack was given back (the default,
/// live mode): it reads what the parent stored, and the parent sees its
/// writes after it resumes. With the live mode's copy and no userfaultfd,
/// the scoped thread read zeros and its writes were lost (here: SIGSEGV).
#[test]
fn a_scoped_thread_reads_and_writes_a_local_of_a_reader_whose_stack_was_given_back() {
    let _one = serial();
    let live = uffd_refused().is_none();
    watchdog(60, move || {
        let rt = quick_reclaim(2);
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let reader = rt.spawn(move || {
            std::hint::black_box(go_deep(6));
            let range = schedlab_rt::stack_bounds().unwrap();
            let before = resident(range.clone());
            let mut local = pattern(7);
            let counter = std::sync::atomic::AtomicUsize::new(41);
            schedlab_rt::scope(|s| {
                // Only these two point into the parent's stack: the scoped
                // thread's wait reads nothing there.
                let (local, counter) = (&mut local, &counter);
                s.spawn(move || {
                    until_given_back(&range, before, live);
                    // Each access faults on a missing page of the parent's
                    // stack; the runtime's helper fills it.
                    let seen = counter.load(std::sync::atomic::Ordering::SeqCst);
                    let intact = *local == pattern(7);
                    counter.store(seen + 1, std::sync::atomic::Ordering::SeqCst);
                    local[0] = 99;
                    seen_tx.send((seen, intact)).unwrap();
                });
                let mut byte = [0u8; 1];
                a.read_exact(&mut byte).unwrap();
            });
            (counter.into_inner(), local[0], local[1..] == pattern(7)[1..])
        });
        let (seen, intact) = seen_rx.recv().unwrap();
        assert_eq!(seen, 41, "the scoped thread read the parent's local");
        assert!(intact, "the scoped thread read the parent's array");
        b.write_all(&[1]).unwrap();
        assert_eq!(
            reader.join().unwrap(),
            (42, 99, true),
            "the parent sees the scoped thread's writes"
        );
    });
}

/// A child forked while a thread's stack is given back reads that stack as
/// it was: the scoped thread forks, and the child reads its parent's local
/// through the borrowed pointer. The child does not inherit the
/// userfaultfd registration, so without the fork handlers (`reclaim.rs`, "A
/// forked child") the page was missing there and read as zeros.
#[test]
fn a_child_forked_while_a_stack_is_given_back_reads_the_stack_as_it_was() {
    let _one = serial();
    let live = uffd_refused().is_none();
    watchdog(60, move || {
        let rt = quick_reclaim(2);
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let reader = rt.spawn(move || {
            std::hint::black_box(go_deep(6));
            let range = schedlab_rt::stack_bounds().unwrap();
            let before = resident(range.clone());
            let local = pattern(5);
            schedlab_rt::scope(|s| {
                let local = &local;
                s.spawn(move || {
                    until_given_back(&range, before, live);
                    // SAFETY: the child only reads memory and exits.
                    let pid = unsafe { libc::fork() };
                    if pid == 0 {
                        let same = std::hint::black_box(*local) == pattern(5);
                        // SAFETY: ends the child at once.
                        unsafe { libc::_exit(if same { 0 } else { 3 }) };
                    }
                    let mut status = 0;
                    // SAFETY: our own child, into our int.
                    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
                    done_tx.send((pid > 0 && waited == pid, status)).unwrap();
                });
                let mut byte = [0u8; 1];
                a.read_exact(&mut byte).unwrap();
            });
            local == pattern(5)
        });
        let (forked, status) = done_rx.recv().unwrap();
        assert!(forked, "fork and waitpid");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child read the idle thread's local as something else (status {status:#x})"
        );
        b.write_all(&[1]).unwrap();
        assert!(reader.join().unwrap(), "the parent's local after the fork");
    });
}

/// The kernel writes into a reclaimed stack: another thread `read(2)`s
/// from a pipe into a buffer on the stack of a thread blocked in a socket
/// read, whose pages were given back. The kernel's access waits for the
/// page like a user access (no `UFFD_USER_MODE_ONLY`), and the owner finds
/// the bytes when it resumes. With the old copy, the bytes went to a fresh
/// zero page and the owner's restore overwrote them.
#[test]
fn the_kernel_reads_into_a_buffer_on_a_stack_that_was_given_back() {
    let _one = serial();
    let live = uffd_refused().is_none();
    watchdog(60, move || {
        let rt = quick_reclaim(2);
        let mut fds = [0; 2];
        // SAFETY: two descriptors into our array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let [pr, pw] = fds;
        // SAFETY: writes 6 bytes of a literal to our pipe.
        assert_eq!(unsafe { libc::write(pw, b"kernel".as_ptr().cast(), 6) }, 6);
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let reader = rt.spawn(move || {
            std::hint::black_box(go_deep(6));
            let range = schedlab_rt::stack_bounds().unwrap();
            let before = resident(range.clone());
            let mut buf = [0u8; 6];
            schedlab_rt::scope(|s| {
                // Only `buf` is on the parent's stack: the scoped thread's
                // wait reads nothing there.
                let buf = &mut buf;
                s.spawn(move || {
                    until_given_back(&range, before, live);
                    // SAFETY: reads 6 bytes into the borrowed buffer.
                    let n = unsafe { libc::read(pr, buf.as_mut_ptr().cast(), buf.len()) };
                    done_tx.send(n).unwrap();
                });
                let mut byte = [0u8; 1];
                a.read_exact(&mut byte).unwrap();
            });
            buf
        });
        assert_eq!(done_rx.recv().unwrap(), 6, "read(2) into the reclaimed stack");
        b.write_all(&[1]).unwrap();
        assert_eq!(&reader.join().unwrap(), b"kernel");
        // SAFETY: ours, not used again.
        unsafe {
            libc::close(pr);
            libc::close(pw);
        }
    });
}

/// A runtime dropped while its threads' stacks are given back (they never
/// run again): every saved buffer is freed, and nothing hangs.
#[test]
fn a_runtime_dropped_while_its_readers_are_reclaimed_frees_their_buffers() {
    let _one = serial();
    if let Some(why) = uffd_refused() {
        eprintln!("skipped: {why} (no buffer is made without userfaultfd)");
        return;
    }
    watchdog(60, || {
        let buffers = schedlab_rt::reclaimed_stack_buffers();
        let rt = quick_reclaim(2);
        let n = 6;
        let (ends, bounds, handles) = readers(&rt, n);
        eventually("every reader listed its stack", || bounds.lock().unwrap().len() == n);
        let ranges: Vec<_> = bounds.lock().unwrap().iter().map(|r| r.0.clone()).collect();
        eventually("every page of the readers' stacks was given back", || {
            ranges.iter().all(|r| resident(r.clone()) == 0)
        });
        assert_eq!(schedlab_rt::reclaimed_stack_buffers(), buffers + n);
        drop(rt);
        drop(handles);
        drop(ends);
        assert_eq!(
            schedlab_rt::reclaimed_stack_buffers(),
            buffers,
            "no buffer outlives its runtime"
        );
    });
}

/// Where userfaultfd is refused, the live mode keeps the live page (and,
/// asked for explicitly, says so once): the dead pages still go, the thread resumes intact, no
/// buffer is made. Run here as `nobody` (`setpriv`) when the tests run as
/// root, where the sysctl `vm.unprivileged_userfaultfd` is 0.
#[test]
fn the_live_mode_falls_back_to_keeping_the_live_page_where_userfaultfd_is_refused() {
    let _one = serial();
    if uffd_refused().is_none() {
        // SAFETY: getuid has no preconditions.
        let root = unsafe { libc::getuid() } == 0;
        let unpriv = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
            .map(|s| s.trim() == "0")
            .unwrap_or(false);
        let dev_private = std::fs::metadata("/dev/userfaultfd")
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o006 == 0)
            .unwrap_or(true);
        if !(root && unpriv && dev_private) {
            eprintln!("skipped: userfaultfd is allowed here, and not refused to nobody either");
            return;
        }
        let name = "the_live_mode_falls_back_to_keeping_the_live_page_where_userfaultfd_is_refused";
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .output();
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                eprintln!("skipped: setpriv: {e}");
                return;
            }
        };
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "as nobody:\n{text}");
        assert!(text.contains("1 passed"), "as nobody, the test ran:\n{text}");
        assert!(text.contains("userfaultfd is unavailable"), "the fallback was said:\n{text}");
        return;
    }
    watchdog(60, || {
        let buffers = schedlab_rt::reclaimed_stack_buffers();
        // Asked for explicitly: the fallback is said (the default is silent).
        let rt = Runtime::builder()
            .processors(2)
            .idle_stack_reclaim(Some(Duration::from_millis(1)))
            .idle_stack_reclaim_live(true)
            .build()
            .unwrap();
        let n = 4;
        let (mut ends, bounds, handles) = readers(&rt, n);
        eventually("every reader listed its stack", || bounds.lock().unwrap().len() == n);
        let ranges = bounds.lock().unwrap().clone();
        eventually("the readers' dead stack pages were given back", || {
            ranges.iter().all(|(r, b)| {
                let now = resident(r.clone());
                now >= 1 && now + 5 <= *b
            })
        });
        // 50 periods more: the live page stays.
        std::thread::sleep(Duration::from_millis(50));
        assert!(ranges.iter().all(|(r, _)| resident(r.clone()) >= 1), "the live page stays");
        assert_eq!(schedlab_rt::reclaimed_stack_buffers(), buffers);
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

/// Threads park in reads and wake at random around the threshold while a
/// scoped thread of each keeps writing a counter on its stack, with random
/// sleeps and yields, under preemption: every write lands (the parent's
/// counter equals the writer's count) and every stack pattern survives.
fn touched_stress(procs: usize) {
    echo_stress(common::builder_in(procs, common::Mode::Both), 8, 25, |i, mut a| {
        let counter = std::sync::atomic::AtomicU64::new(0);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (echoed, written) = schedlab_rt::scope(|s| {
            let writer = s.spawn(|| {
                let mut x = (i as u64 + 7).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x.is_multiple_of(3) {
                        schedlab_rt::yield_now();
                    } else {
                        schedlab_rt::sleep(Duration::from_micros(x % 2500));
                    }
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    n += 1;
                }
                n
            });
            let n = echo(i, &mut a);
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            (n, writer.join().unwrap())
        });
        assert_eq!(
            counter.into_inner(),
            written,
            "thread {i}: every write of its scoped thread kept"
        );
        echoed
    });
}

#[test]
fn stacks_touched_by_scoped_threads_across_random_reclaims_lose_nothing_on_one_processor() {
    touched_stress(1);
}

#[test]
fn stacks_touched_by_scoped_threads_across_random_reclaims_lose_nothing_on_two_processors() {
    touched_stress(2);
}

#[test]
fn stacks_touched_by_scoped_threads_across_random_reclaims_lose_nothing_on_four_processors() {
    touched_stress(4);
}
