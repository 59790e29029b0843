//! Time-based cooperative yielding.
//!
//! A cooperative thread that computes for long must yield now and then, and the usual way
//! — every N iterations — ties the interval to the machine: seed 000 found Apple's sample,
//! yielding every 4096 iterations, yielding too little on slow Macs and too often on fast
//! ones, and advised yielding by time (docs/SOURCES.md). [`Yielder`] does that for a loop:
//! call [`Yielder::tick`] once per iteration and it yields once the thread has run for the
//! interval since its last yield.
//!
//! Reading a clock on every iteration would cost more than many loop bodies (a vDSO
//! `clock_gettime` is 15–25 ns), so the clock is read only every `stride` ticks, and the
//! stride adapts to the loop: it aims at [`CHECKS_PER_INTERVAL`] clock reads per interval,
//! from the time the last `stride` ticks took. A tick is then a decrement and a branch. The
//! stride at most doubles from one check to the next and shrinks at once; the price of the
//! sampling is that a loop whose iterations suddenly get k times slower yields late once, by
//! up to k/16 of an interval (preemption, where enabled, still bounds it by the quantum).

use std::time::{Duration, Instant};

/// Clock reads the stride aims at per interval: the yield comes at most about
/// 1/16 of the interval late for a loop of steady iterations.
pub const CHECKS_PER_INTERVAL: u64 = 16;

/// Longest stride, in ticks.
const MAX_STRIDE: u64 = 1 << 24;

/// Yields the calling thread once it has run for an interval, checking a clock only every
/// so many calls (see the module docs).
///
/// ```
/// use std::time::Duration;
/// let rt = schedlab_rt::Runtime::builder().processors(1).build().unwrap();
/// let (a, b) = rt.block_on(|| {
///     let work = |n: u64| {
///         let mut y = schedlab_rt::Yielder::new(Duration::from_micros(500));
///         let mut x = 0u64;
///         for i in 0..n {
///             x = x.wrapping_mul(31).wrapping_add(i);
///             y.tick();
///         }
///         x
///     };
///     let other = schedlab_rt::spawn(move || work(2_000_000));
///     (work(2_000_000), other.join().unwrap())
/// }).unwrap();
/// assert_eq!(a, b);
/// ```
#[derive(Debug, Clone)]
pub struct Yielder {
    interval_ns: u64,
    /// When the thread last resumed (the clock, in ns).
    started: u64,
    /// When the clock was last read.
    checked: u64,
    /// Ticks between clock reads.
    stride: u64,
    /// Ticks left before the next read.
    left: u64,
    yields: u64,
    clock: fn() -> u64,
}

/// Nanoseconds on the monotonic clock, from an origin fixed per process.
fn monotonic_ns() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

impl Yielder {
    /// A yielder that lets the thread run for `interval` between yields.
    pub fn new(interval: Duration) -> Yielder {
        Yielder::with_clock(interval, monotonic_ns)
    }

    fn with_clock(interval: Duration, clock: fn() -> u64) -> Yielder {
        let now = clock();
        Yielder {
            interval_ns: (interval.as_nanos() as u64).max(1),
            started: now,
            checked: now,
            stride: 1,
            left: 1,
            yields: 0,
            clock,
        }
    }

    /// Counts one iteration; yields (and returns `true`) when the thread has run for the
    /// interval since it last yielded here. Cheap: a clock is read every so many ticks.
    #[inline]
    pub fn tick(&mut self) -> bool {
        self.left -= 1;
        if self.left != 0 {
            return false;
        }
        self.check()
    }

    /// How many times it yielded.
    pub fn yields(&self) -> u64 {
        self.yields
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns)
    }

    #[cold]
    #[inline(never)]
    fn check(&mut self) -> bool {
        let now = (self.clock)();
        // Adapt: the last `stride` ticks took `now - checked`.
        let per_tick = (now.saturating_sub(self.checked) / self.stride).max(1);
        let want = (self.interval_ns / CHECKS_PER_INTERVAL / per_tick).clamp(1, MAX_STRIDE);
        self.stride = want.min(self.stride * 2);
        self.left = self.stride;
        self.checked = now;
        if now.saturating_sub(self.started) < self.interval_ns {
            return false;
        }
        crate::yield_now();
        self.yields += 1;
        // Count the next run from when the thread got the CPU back.
        let back = (self.clock)();
        self.started = back;
        self.checked = back;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static NOW: Cell<u64> = const { Cell::new(0) };
    }

    fn fake() -> u64 {
        NOW.with(Cell::get)
    }

    fn advance(ns: u64) {
        NOW.with(|n| n.set(n.get() + ns));
    }

    #[test]
    fn it_yields_once_per_interval_of_steady_ticks() {
        // 100 ns per tick, interval 1 ms: 10,000 ticks per interval.
        let mut y = Yielder::with_clock(Duration::from_millis(1), fake);
        let mut yields_at = Vec::new();
        for i in 0..100_000u64 {
            advance(100);
            if y.tick() {
                yields_at.push(i);
            }
        }
        assert_eq!(y.yields(), yields_at.len() as u64);
        assert!((9..=10).contains(&yields_at.len()), "{yields_at:?}");
        // Each yield at most 1/16 of the interval (625 ticks) plus the stride ramp late.
        for w in yields_at.windows(2) {
            let gap = w[1] - w[0];
            assert!((10_000..=10_000 + 700).contains(&gap), "gap of {gap} ticks");
        }
    }

    #[test]
    fn the_stride_settles_near_a_sixteenth_of_the_interval() {
        let mut y = Yielder::with_clock(Duration::from_millis(1), fake);
        for _ in 0..50_000 {
            advance(10);
            y.tick();
        }
        // 1 ms / 16 / 10 ns = 6,250 ticks.
        assert!((3_125..=6_250).contains(&y.stride), "stride {}", y.stride);
    }

    #[test]
    fn slower_iterations_shrink_the_stride_at_once() {
        let mut y = Yielder::with_clock(Duration::from_millis(1), fake);
        for _ in 0..50_000 {
            advance(10);
            y.tick();
        }
        // Iterations become 1,000x slower: the next check comes late once, then the stride
        // drops to match.
        let mut late = 0u64;
        let before = y.yields();
        let start = fake();
        while y.yields() == before {
            advance(10_000);
            y.tick();
            late = fake() - start;
        }
        assert!(late < 70_000_000, "first yield after {late} ns");
        // From then on it checks every 1 ms / 16 / 10 µs = 6 ticks, and yields on time.
        let start = fake();
        while y.yields() == before + 1 {
            advance(10_000);
            y.tick();
        }
        assert_eq!(y.stride, 6);
        assert!(fake() - start <= 1_000_000 + 70_000, "second yield after {} ns", fake() - start);
    }
}
