//! A small spin lock for the runtime's short internal critical sections
//! (wait queues of the `sync` primitives).
//!
//! Held only for a few dozen instructions and never across a context switch.
//! A holder can still lose its CPU to the kernel, so a waiter that has spun
//! for a while yields its kernel thread instead of burning the time slice
//! (the backoff of crossbeam-utils). When preemption of user threads arrives,
//! holding one of these will also hold off preemption on that processor.

use crossbeam_utils::Backoff;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// A spin lock protecting a `T`.
#[derive(Debug, Default)]
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `value` to one holder at a time, as a
// mutex does, so it is Sync when `T` may be sent between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock owns the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// An unlocked lock around `value`.
    pub const fn new(value: T) -> SpinLock<T> {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Acquires the lock.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    /// The value, through exclusive access (no lock needed).
    #[cfg(feature = "shared-library")]
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// Acquires the lock if it is free now (for a nesting that takes the two
    /// locks in the other order elsewhere: `sync/chain.rs`).
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(SpinGuard { lock: self })
    }

    /// Spins, then gives way. On a user thread outside any runtime section
    /// it gives way to the *runtime* (a user-level yield), not to the kernel:
    /// the holder may be a user thread preempted on this very processor,
    /// which only a switch lets finish; a `sched_yield` would also keep the
    /// spinner in the kernel, where the preemption signal cannot find a safe
    /// point (preempt.rs).
    #[cold]
    fn lock_contended(&self) {
        let backoff = Backoff::new();
        loop {
            while self.locked.load(Ordering::Relaxed) {
                if !backoff.is_completed() {
                    backoff.snooze();
                } else if !crate::hooks::yield_if_free() {
                    give_way();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

std::thread_local! {
    /// This kernel thread runs ahead of user code on its CPU (the monitor,
    /// `monitor.rs`, `ask_to_run_promptly`).
    static RAISED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling kernel thread as one that runs ahead of user code on
/// its CPU (a real-time policy, or the shortest slice): its waits for a
/// spin lock sleep instead of calling `sched_yield`.
pub(crate) fn raised_priority() {
    RAISED.with(|r| r.set(true));
}

/// How long a raised thread sleeps between looks at a lock it waits for:
/// lock holders keep it for well under a microsecond once they have a CPU.
const RAISED_NAP: std::time::Duration = std::time::Duration::from_micros(20);

/// A kernel thread's wait for a holder that may have lost its CPU. Usually
/// `sched_yield`; but the holder may be a processor preempted on this very
/// CPU by a thread of a higher class (the monitor, under `SCHED_FIFO`,
/// delivering I/O readiness into a slot a user thread had locked), and
/// `sched_yield` only gives the CPU to threads of the caller's own class:
/// the monitor then spun until the kernel's real-time throttling gave the
/// holder its 5%, and took a third of the echo server's CPU doing so
/// (docs/PERFORMANCE.md, issue 29). A raised thread sleeps instead.
#[cold]
fn give_way() {
    if RAISED.with(|r| r.get()) {
        std::thread::sleep(RAISED_NAP);
    } else {
        std::thread::yield_now();
    }
}

/// Holds a [`SpinLock`]; unlocks on drop.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinGuard<'_, T> {
    /// Gives up the guard *without* unlocking; returns the lock word, which
    /// the caller must later unlock with [`unlock_word`] (`wait.rs`: a user
    /// thread parks holding its wait queue's lock, and the next context on
    /// its processor unlocks it).
    #[inline]
    pub(crate) fn into_locked_word(self) -> NonNull<AtomicBool> {
        let word = NonNull::from(&self.lock.locked);
        std::mem::forget(self);
        word
    }
}

/// Unlocks a lock given up by [`SpinGuard::into_locked_word`].
///
/// # Safety
///
/// `word` must come from `into_locked_word` and be unlocked once; its lock
/// must be alive (its owner cannot free it while it is locked).
#[inline]
pub(crate) unsafe fn unlock_word(word: NonNull<AtomicBool>) {
    // SAFETY: the caller's guarantee.
    unsafe { word.as_ref() }.store(false, Ordering::Release);
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and `&mut self` makes this the only access.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn spin_lock_counts_across_os_threads() {
        let l = Arc::new(SpinLock::new(0u64));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 20_000);
    }

    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: reads this thread's CPU clock into a timespec of ours.
        assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) }, 0);
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    fn pin_to(cpu: usize) {
        // SAFETY: a zeroed cpu_set_t is empty; we set one CPU and apply it
        // to the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set), 0);
        }
    }

    /// The monitor's case (`give_way`): a `SCHED_FIFO` thread waits for a
    /// lock held by an ordinary thread of its own CPU, which needs that CPU
    /// to finish. It must leave the CPU to the holder, not spin on it: with
    /// `sched_yield` it kept 95% of the CPU (until the kernel's real-time
    /// throttling) and the holder crept on in the remaining 5%. The check
    /// is on the share of the wait the waiter spent on the CPU, not on how
    /// long the wait took. Its bound is 85%: each 20 µs nap costs the
    /// waiter a timer, a wake-up and a switch, which on a loaded VM (the
    /// harness's other tests, or a CPU hog, on the same CPU) came to 62% of
    /// the wait at worst, while the spin this guards against keeps at least
    /// the 95% throttling allows. Needs the privilege to set `SCHED_FIFO`
    /// (skips otherwise).
    #[test]
    fn a_raised_waiter_leaves_its_cpu_to_the_holder() {
        // SAFETY: reads the calling thread's affinity into a set of ours.
        let cpu = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set), 0);
            (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)).unwrap()
        };
        let lock = Arc::new(SpinLock::new(()));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                pin_to(cpu);
                let _g = lock.lock();
                held_tx.send(()).unwrap();
                // Computes 20 ms of CPU time holding the lock.
                let start = thread_cpu();
                while thread_cpu() - start < Duration::from_millis(20) {
                    std::hint::spin_loop();
                }
            })
        };
        let waiter = std::thread::spawn(move || {
            pin_to(cpu);
            let fifo = libc::sched_param { sched_priority: 1 };
            // SAFETY: sets this thread's policy from a valid parameter block.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } != 0 {
                // Let the holder finish; nothing to check.
                let _ = held_rx.recv();
                return None;
            }
            raised_priority();
            held_rx.recv().unwrap();
            let (wall, cpu) = (std::time::Instant::now(), thread_cpu());
            drop(lock.lock());
            Some((wall.elapsed(), thread_cpu() - cpu))
        });
        let r = waiter.join().unwrap();
        holder.join().unwrap();
        let Some((wall, on_cpu)) = r else {
            eprintln!("skipped: SCHED_FIFO needs CAP_SYS_NICE or RLIMIT_RTPRIO");
            return;
        };
        assert!(
            on_cpu < wall * 17 / 20,
            "the waiter kept its CPU for {on_cpu:?} of a {wall:?} wait for the holder"
        );
    }
}
