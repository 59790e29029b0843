//! A user thread's own CPU time ([`crate::Thread::cpu_time`], and through it
//! the pthread library's `CLOCK_THREAD_CPUTIME_ID`): the CPU time its kernel
//! threads consumed while it was current on a processor.
//!
//! # Accounting
//!
//! A kernel thread's CPU clock counts every user thread it ran, and a user
//! thread moves between kernel threads, so neither clock alone is the user
//! thread's. Each task carries a [`CpuAccount`]: the CPU time of its finished
//! stints (`total`) and, while a stint runs, the CPU clock of the kernel
//! thread running it (`clock`) and that clock's value when the stint began
//! (`start`). The processor closes the leaving thread's stint and opens the
//! next one's at one reading of its kernel thread's clock
//! ([`hand_over`], from `Processor::cpu_switch`): after every switch, and
//! where a thread leaves or takes the processor without one (exit, the
//! detach of a blocking hand-off, the rejoin, the end of an inline run).
//! CPU budgets (`budget.rs`) charge what this accounting measures, per
//! stint: there is one account, not one per policy.
//!
//! # When
//!
//! A reading costs a system call (`CLOCK_THREAD_CPUTIME_ID` has no vDSO
//! path), a few hundred nanoseconds, where a switch costs tens: so it is made
//! only for a thread someone asked about. A thread is accounted for good
//! from the first request for *its* time — a [`crate::Thread::cpu_time`]
//! call on it (the pthread library's `clock_gettime`,
//! `pthread_getcpuclockid`, `getrusage`) — or from its spawn with a CPU
//! budget (`CpuAccount::wanted`). The runtime's first such thread turns the
//! per-processor flags on (`Processor::cpu_accounting`, which sets
//! `policies`, as budgets did): until then a switch pays the one test of
//! `policies` it paid before, and after it a switch between two threads
//! nobody asked about tests their flags and reads no clock. Per thread, not
//! per runtime, because one request is common and cheap to make: the Java
//! virtual machine calls `getrusage(RUSAGE_THREAD)` on a few of its threads
//! as they start, and with accounting per runtime every switch of every
//! thread then read its clock — a `SynchronousQueue` ping-pong between two
//! Java threads took 1.2 µs a round trip against 0.4 µs without the reads
//! (two system calls per round trip). The cost of this choice is the time
//! before the first request, which no one measured:
//!
//! - a thread's clock counts from the first request for it (0 before), or
//!   from its creation if later: a delta between two readings is exact; a
//!   single reading at the end of a thread nobody asked about before reads
//!   0 plus what it ran since;
//! - the asking thread's own stint starts at its request; a thread running
//!   on another processor when first asked about is sent a preemption
//!   request, and its stint starts at the safe point that takes it
//!   (`preempt::preempted`; with nothing else to run the thread goes on,
//!   one `Preempted` event its only trace), or at its next switch if the
//!   request found it where it cannot be preempted (in the C library, a
//!   `no_preempt` region).
//!
//! Not counted either: a thread's time after its processor was handed off
//! while it blocked in the kernel (`blocking.rs`: detached, until it rejoins
//! a processor — mostly sleep, plus the system call's own CPU) and the
//! runtime's switch itself between the two readings' moments (each switch's
//! reading is charged to the thread that leaves).
//!
//! # Reading from any thread
//!
//! The account is written only by the kernel thread running its task (the
//! processor's switch, or the task itself, `preempt.rs`'s budget check) and
//! read by anyone, as a sequence lock (the Linux kernel's `seqcount`): the
//! writer makes `seq` odd *before* it reads its clock and even once the
//! fields are written; a reader reads `seq`, the fields, the running kernel
//! thread's clock (by its clock id: `clock_gettime` on another thread's
//! CPU clock), then `seq` again, and retries if it moved or was odd. The
//! clock is read after the odd mark is visible (a full fence on both sides),
//! so a reader whose clock reading came after the writer's cannot pass the
//! second check with the old `start`: a reading never exceeds the `total`
//! the stint's end then records, and the clock never goes backwards.

use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

/// The CPU time of one user thread (module docs).
pub(crate) struct CpuAccount {
    /// Odd while the running kernel thread writes.
    seq: AtomicU32,
    /// The CPU clock id of the kernel thread running the current stint, or
    /// 0 (`CLOCK_REALTIME`, never a CPU clock) when no stint runs.
    clock: AtomicI32,
    /// That clock's value when the stint began, in ns.
    start: AtomicU64,
    /// CPU time of the finished stints, in ns.
    total: AtomicU64,
    /// The thread's time is accounted: someone asked for it, or it has a
    /// CPU budget (module docs, "When").
    wanted: AtomicBool,
}

impl Default for CpuAccount {
    fn default() -> CpuAccount {
        CpuAccount::new()
    }
}

impl CpuAccount {
    /// No CPU time, no stint.
    pub(crate) const fn new() -> CpuAccount {
        CpuAccount {
            seq: AtomicU32::new(0),
            clock: AtomicI32::new(0),
            start: AtomicU64::new(0),
            total: AtomicU64::new(0),
            wanted: AtomicBool::new(false),
        }
    }

    /// Whether the thread's time is accounted (module docs, "When").
    #[inline]
    pub(crate) fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// Accounts the thread's time from its next stint on; whether this call
    /// turned it on.
    pub(crate) fn want(&self) -> bool {
        !self.wanted.swap(true, Ordering::Relaxed)
    }

    /// Marks a write open (`seq` odd), visible before the caller reads its
    /// clock.
    fn open(&self) {
        let s = self.seq.load(Ordering::Relaxed);
        debug_assert!(s & 1 == 0, "one writer at a time");
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Closes the write.
    fn close(&self) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Release);
    }

    /// A stint runs (for its writer).
    pub(crate) fn running(&self) -> bool {
        self.clock.load(Ordering::Relaxed) != 0
    }

    /// Ends the running stint at `cpu` (nothing if none runs); returns its
    /// CPU time. Inside an open write.
    fn stop_open(&self, cpu: u64) -> u64 {
        if !self.running() {
            return 0;
        }
        let ran = cpu.saturating_sub(self.start.load(Ordering::Relaxed));
        self.total.fetch_add(ran, Ordering::Relaxed);
        self.clock.store(0, Ordering::Relaxed);
        ran
    }

    /// Starts a stint at `cpu` of the kernel thread whose CPU clock is
    /// `clock`. Inside an open write.
    fn start_open(&self, cpu: u64, clock: i32) {
        self.start.store(cpu, Ordering::Relaxed);
        self.clock.store(clock, Ordering::Relaxed);
    }

    /// Charges the running stint up to now and starts the next at once, on
    /// the calling kernel thread (which must be the one running it); returns
    /// the CPU time charged (0 if no stint runs). For a check in the middle
    /// of a stint (`preempt.rs`: a CPU budget's timer).
    pub(crate) fn checkpoint(&self) -> u64 {
        if !self.running() {
            return 0;
        }
        self.open();
        let cpu = crate::cputimer::thread_cpu_ns();
        let clock = self.clock.load(Ordering::Relaxed);
        let ran = self.stop_open(cpu);
        self.start_open(cpu, clock);
        self.close();
        ran
    }

    /// Starts a stint of the calling kernel thread (whose CPU clock id is
    /// `clock`) unless one runs: the thread that asks for its own time first.
    pub(crate) fn start_here(&self, clock: i32) {
        if self.running() {
            return;
        }
        self.open();
        self.start_open(crate::cputimer::thread_cpu_ns(), clock);
        self.close();
    }

    /// CPU time of the finished stints, in ns.
    pub(crate) fn finished(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The thread's CPU time now, in ns, from any thread (module docs).
    pub(crate) fn read(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let total = self.total.load(Ordering::Relaxed);
                let clock = self.clock.load(Ordering::Relaxed);
                let start = self.start.load(Ordering::Relaxed);
                let now = if clock == 0 { None } else { clock_ns(clock) };
                fence(Ordering::SeqCst);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    // A clock that cannot be read (its kernel thread gone,
                    // which ends the stint first): the finished stints.
                    return total + now.map_or(0, |now| now.saturating_sub(start));
                }
            }
            // The writer is between two instructions of a switch, or was
            // descheduled there: a few tries, then give it the CPU.
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                // SAFETY: no preconditions; the kernel's yield, never a
                // runtime switch (the reader may be inside the runtime).
                unsafe { libc::syscall(libc::SYS_sched_yield) };
            }
        }
    }
}

/// The CPU clock `clock` (a kernel thread's), in ns, or `None` if it cannot
/// be read.
fn clock_ns(clock: i32) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-parameter on our stack; a bad clock id fails, it does
    // not fault. The system call, as `cputimer::thread_cpu_ns` makes it.
    (unsafe { libc::syscall(libc::SYS_clock_gettime, clock, &mut ts) } == 0)
        .then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The CPU clock id of kernel thread `tid`: Linux's encoding, which glibc's
/// `pthread_getcpuclockid` returns (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`,
/// include/linux/posix-timers.h).
pub(crate) fn kernel_thread_clock(tid: i32) -> i32 {
    (!tid << 3) | 6
}

/// A change of the running thread on the calling kernel thread, whose CPU
/// clock id is `clock`: `prev`'s stint ends and `next`'s starts at one
/// reading of the clock. Returns `prev`'s stint's CPU time.
pub(crate) fn hand_over(prev: Option<&CpuAccount>, next: Option<&CpuAccount>, clock: i32) -> u64 {
    if let (Some(p), Some(n)) = (prev, next) {
        if std::ptr::eq(p, n) {
            // The same thread again (a rejoin of the one that left).
            return p.checkpoint();
        }
    }
    if prev.is_none() && next.is_none() {
        return 0;
    }
    prev.inspect(|a| a.open());
    next.inspect(|a| a.open());
    let cpu = crate::cputimer::thread_cpu_ns();
    let ran = prev.map_or(0, |a| a.stop_open(cpu));
    next.inspect(|a| a.start_open(cpu, clock));
    prev.inspect(|a| a.close());
    next.inspect(|a| a.close());
    ran
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin_cpu(ns: u64) {
        let a = crate::cputimer::thread_cpu_ns();
        let mut x = 0u64;
        while crate::cputimer::thread_cpu_ns() - a < ns {
            x = std::hint::black_box(x + 1);
        }
    }

    fn here() -> i32 {
        // SAFETY: no preconditions.
        kernel_thread_clock(unsafe { libc::syscall(libc::SYS_gettid) } as i32)
    }

    #[test]
    fn the_encoding_is_glibcs() {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: our own thread, an out-parameter on our stack.
        assert_eq!(unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) }, 0);
        assert_eq!(clock, here());
    }

    #[test]
    fn a_stint_counts_only_while_it_runs() {
        let (a, b) = (CpuAccount::new(), CpuAccount::new());
        assert_eq!(a.read(), 0);
        hand_over(None, Some(&a), here());
        spin_cpu(2_000_000);
        let first = a.read();
        assert!(first >= 2_000_000, "{first}");
        let ran = hand_over(Some(&a), Some(&b), here());
        assert!(ran >= first);
        let stopped = a.read();
        assert_eq!(stopped, a.finished());
        spin_cpu(2_000_000);
        assert_eq!(a.read(), stopped, "a's clock stands still while b runs");
        assert!(b.read() >= 2_000_000);
        hand_over(Some(&b), Some(&a), here());
        assert!(a.read() >= stopped);
        assert_eq!(hand_over(Some(&a), Some(&a), here()) + stopped, a.finished());
    }

    #[test]
    fn another_thread_reads_a_running_stint_monotonically() {
        let a = std::sync::Arc::new(CpuAccount::new());
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (a2, done2) = (a.clone(), done.clone());
        let t = std::thread::spawn(move || {
            let b = CpuAccount::new();
            for _ in 0..50 {
                hand_over(Some(&b), Some(&a2), here());
                spin_cpu(200_000);
                hand_over(Some(&a2), Some(&b), here());
                spin_cpu(100_000);
            }
            hand_over(Some(&b), None, here());
            done2.store(true, Ordering::Release);
        });
        let mut last = 0;
        while !done.load(Ordering::Acquire) {
            let v = a.read();
            assert!(v >= last, "went back from {last} to {v}");
            last = v;
        }
        t.join().unwrap();
        assert!(a.read() >= 50 * 200_000);
    }
}
