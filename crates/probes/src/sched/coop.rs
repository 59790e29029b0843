//! `sched.coop_vs_preempt`: seed 000's Thread Manager study on today's machine.
//!
//! The article timed a fixed calculation under the Mac OS Thread Manager's cooperative and
//! preemptive threads, with the application in the foreground and in the background, and
//! normalized every time to the fastest way: a cooperative thread that never yields (1.0).
//! Here the calculation is [`kernel`] (integer, branch, string and record work in the
//! spirit of Dhrystone, written for this probe), run for a fixed number of passes
//! calibrated in setup to take `work_ms` alone (100 ms by default, 50 ms in the quick suite), under one `method`:
//!
//! | method | the worker |
//! |---|---|
//! | `coop-never` | a schedlab-rt user thread, cooperative runtime, never yields (seed: the 1.0 reference) |
//! | `coop-4096` | yields every 4096 passes (the Apple sample's `(i & 0xFFF) == 0`) |
//! | `coop-20ms` | reads the clock every pass and yields when it has run 20 ms since it got the CPU back (the article's way, with its listing's one flaw fixed: it counted from before the yield) |
//! | `yielder` | `schedlab_rt::Yielder` with a 20 ms interval (by time, on a cheap clock) |
//! | `preempt-10ms`, `preempt-1ms` | never yields; the runtime preempts it at that quantum |
//! | `os` | an OS thread, never yields; the kernel's scheduler shares the CPU |
//!
//! and in one `mode`, everything pinned to one CPU:
//!
//! | mode | beside the worker |
//! |---|---|
//! | `fg` | an idle event loop, which yields to the worker at once whenever it runs (seed: the application in front, nothing else running) |
//! | `bg` | the same, both at nice 10, while an OS thread at nice 0 spins on the CPU (the application behind another one) |
//! | `worst` | a busy main loop running the same kernel and yielding by the same method (seed Figure 3: an even split scores 2.0) |
//!
//! Each sample times the work done alone on the probe's own thread (the reference), then
//! under the method and mode; the value is the second time, and the note `score` is the
//! median of the paired ratios over every sample (`score_min`, `score_max` their range).
//! The article's table is the `score` column of the `fg` and `bg` rows, its Figure 3 the
//! `worst` rows; `main_share` there is the main loop's share of the passes while the worker
//! ran (0.5 is an even split, 0 a starved main loop).
//!
//! **Responsiveness, not only throughput** (issue 25): the article's main loop exists to
//! answer the user, so each method is also judged by how long an event waits for it. Events
//! arrive every [`EVENT_EVERY`] (1 ms) while the worker runs; the main loop (the idle event
//! loop of `fg`/`bg`, the busy one of `worst`) handles every event that has arrived each
//! time it gets the CPU — after each yield, or after each pass of its own work — and an
//! event's latency is from its arrival to that moment. Events that arrive after the worker
//! is done are not counted; one still waiting then is handled, and counted, when the main
//! loop next runs. The notes give the nearest-rank `event_p50_us` and `event_p99_us` over
//! every event of every sample (`events`): a cooperative worker that never yields makes an
//! event wait for the whole calculation, a 1 ms quantum about a millisecond.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schedlab_measure::model::{Metric, Params, Unit};
use schedlab_measure::sampler::Settings;
use schedlab_measure::stats;
use schedlab_measure::sys::{self, PinGuard};
use schedlab_measure::{ProbeError, Timing, Workload};

use crate::{Context, Info, Instance, Probe, Suite};

/// How long the work takes alone, about, unless `work_ms=` says otherwise.
const WORK_MS: u64 = 100;

/// The article's yield interval: 20 ticks was a third of a second; 20 ms keeps its count of
/// yields per quantum of today's schedulers.
const INTERVAL: Duration = Duration::from_millis(20);

/// How often an event arrives for the main loop while the worker runs.
pub const EVENT_EVERY: Duration = Duration::from_millis(1);

/// The events of one run of the worker: they arrive every [`EVENT_EVERY`] from `start`
/// until `end` (set when the worker is done); [`Events::handle`] is the main loop's check.
struct Events {
    start: u64,
    end: Arc<AtomicU64>,
    next: u64,
    latencies: Vec<u64>,
}

impl Events {
    /// Events from `start`, taken before the worker starts: the main loop may first run
    /// only when the worker is done (a cooperative worker that never yields), and its events
    /// waited from their arrival all the same.
    fn new(start: u64, end: Arc<AtomicU64>) -> Events {
        Events { start, end, next: 0, latencies: Vec::new() }
    }

    /// Handles every event that has arrived by now (and before the worker's end), recording
    /// how long each waited.
    #[inline]
    fn handle(&mut self) {
        self.handle_at(sys::now_ns());
    }

    fn handle_at(&mut self, now: u64) {
        let end = self.end.load(Ordering::Relaxed);
        let every = EVENT_EVERY.as_nanos() as u64;
        loop {
            let at = self.start + (self.next + 1) * every;
            if at > now || (end != 0 && at > end) {
                break;
            }
            self.latencies.push(now - at);
            self.next += 1;
        }
    }
}

const METHODS: &[&str] =
    &["coop-never", "coop-4096", "coop-20ms", "yielder", "preempt-10ms", "preempt-1ms", "os"];
const MODES: &[&str] = &["fg", "bg", "worst"];

/// The quick suite's methods: no yield, a cooperative yield interval, the yielder thread,
/// a preemptive quantum and OS threads. `coop-20ms` and `preempt-1ms`, the slowest to
/// measure (a 20 ms yield interval at nice 10 is two fifths of the probe's time), are the
/// same mechanisms at another interval, and run in the full suite and the study.
const QUICK_METHODS: &[&str] = &["coop-never", "coop-4096", "yielder", "preempt-10ms", "os"];

/// The nice value of the measured side in `bg`.
const BG_NICE: i32 = 10;

pub(super) struct CoopVsPreempt;

impl Probe for CoopVsPreempt {
    fn info(&self) -> Info {
        Info {
            id: "sched.coop_vs_preempt",
            doc: "Seed 000's table: a fixed Dhrystone-like calculation (work_ms, 100 ms alone by default) under cooperative user threads (never yielding, every 4096 passes, every 20 ms by the clock, Yielder), preemptive ones (10 ms, 1 ms quanta) and an OS thread, beside an idle event loop (fg), at nice 10 against a competing spinner (bg) or beside a busy main loop (worst), one CPU; time to finish, score = paired ratio to the work alone; event_p50_us/event_p99_us = how long an event arriving every 1 ms waited for the main loop; quick: work_ms 50, without coop-20ms and preempt-1ms",
            unit: Unit::Nanos,
            mirrors: "- (seed 000: Thread Manager cooperative vs preemptive, foreground/background, worst case)",
            requires: "-",
        }
    }

    fn variants(&self, suite: Suite) -> Vec<Params> {
        let (methods, modes): (&[&str], &[&str]) = match suite {
            Suite::Smoke => (METHODS, &["fg", "worst"]),
            Suite::Quick => (QUICK_METHODS, MODES),
            Suite::Full => (METHODS, MODES),
        };
        // Smoke runs a short calculation: the methods' mechanics, not their costs.
        // The quick suite halves it: in `bg` the worker gets a tenth of the CPU (nice 10
        // against nice 0), so each sample lasts ten times the work.
        let work_ms = match suite {
            Suite::Smoke => 2,
            Suite::Quick => WORK_MS / 2,
            Suite::Full => WORK_MS,
        };
        modes
            .iter()
            .flat_map(|m| {
                methods.iter().map(move |w| {
                    Params::new().with("method", w).with("mode", m).with("work_ms", work_ms)
                })
            })
            .collect()
    }

    fn sampling(&self, suite: Suite, default: &Settings) -> Settings {
        // One pair (work alone, work under the method) per sample; the sampler's own
        // iteration scaling would only repeat it (its one-pair calibration was a sixth of
        // the probe's time).
        let mut s = default.clone();
        if suite != Suite::Smoke {
            s.fixed_iters = Some(1);
            s.target = Duration::from_millis(1);
            s.samples = if suite == Suite::Quick { 5 } else { 9 };
            s.warmup = Duration::ZERO;
        }
        s
    }

    fn setup(&self, params: &Params, _ctx: &Context) -> Result<Box<dyn Instance>, ProbeError> {
        let method = params.get("method").unwrap_or("coop-never");
        let method = Method::parse(method).ok_or_else(|| {
            ProbeError::Failed(format!("method={method}: one of {}", METHODS.join(", ")))
        })?;
        let mode = params.get("mode").unwrap_or("fg");
        let mode = Mode::parse(mode).ok_or_else(|| {
            ProbeError::Failed(format!("mode={mode}: one of {}", MODES.join(", ")))
        })?;
        let allowed = sys::allowed_cpus();
        let cpu = *allowed.first().ok_or_else(|| ProbeError::Failed("no usable CPU".into()))?;
        // Everything shares one CPU: threads and runtimes made from here on inherit the mask.
        let pin = PinGuard::pin(cpu)?;
        let work_ms = match params.get("work_ms") {
            None => WORK_MS,
            Some(v) => {
                v.parse::<u64>().ok().filter(|&ms| (1..=60_000).contains(&ms)).ok_or_else(|| {
                    ProbeError::Failed(format!("work_ms={v}: a whole number of ms, 1 to 60000"))
                })?
            }
        };
        let passes = calibrate(Duration::from_millis(work_ms));
        let mut notes = Params::new().with("cpu", cpu).with("work_passes", passes);
        if mode == Mode::Bg {
            // Probe the privilege now: raising nice needs none, but say so if it fails.
            let probe = std::thread::spawn(|| sys::set_nice(BG_NICE));
            probe
                .join()
                .map_err(|_| ProbeError::Failed("nice probe thread panicked".into()))?
                .map_err(|e| ProbeError::io("setpriority(nice 10)", e))?;
            notes.set("nice", BG_NICE);
        }
        let rt = match method {
            Method::Os => None,
            m => Some(build_runtime(m, mode)?),
        };
        let competitor = if mode == Mode::Bg { Some(Competitor::start()?) } else { None };
        Ok(Box::new(Run {
            method,
            mode,
            passes,
            rt,
            competitor,
            notes,
            live: Mutex::new(Live::default()),
            _pin: pin,
        }))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Method {
    CoopNever,
    Coop4096,
    Coop20ms,
    Yielder,
    Preempt(Duration),
    Os,
}

impl Method {
    fn parse(s: &str) -> Option<Method> {
        Some(match s {
            "coop-never" => Method::CoopNever,
            "coop-4096" => Method::Coop4096,
            "coop-20ms" => Method::Coop20ms,
            "yielder" => Method::Yielder,
            "preempt-10ms" => Method::Preempt(Duration::from_millis(10)),
            "preempt-1ms" => Method::Preempt(Duration::from_millis(1)),
            "os" => Method::Os,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Fg,
    Bg,
    Worst,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "fg" => Mode::Fg,
            "bg" => Mode::Bg,
            "worst" => Mode::Worst,
            _ => return None,
        })
    }
}

/// A one-processor runtime for the method, its kernel thread at nice 10 in `bg`.
fn build_runtime(method: Method, mode: Mode) -> Result<schedlab_rt::Runtime, ProbeError> {
    let preemption = match method {
        Method::Preempt(q) => schedlab_rt::Preemption::Quantum(q),
        _ => schedlab_rt::Preemption::Cooperative,
    };
    let build = move || -> Result<schedlab_rt::Runtime, ProbeError> {
        if mode == Mode::Bg {
            // The processor's kernel thread inherits the nice value of the thread that
            // creates it.
            sys::set_nice(BG_NICE).map_err(|e| ProbeError::io("setpriority(nice 10)", e))?;
        }
        schedlab_rt::Runtime::builder()
            .processors(1)
            .preemption(preemption)
            .build()
            .map_err(|e| ProbeError::io("building the schedlab-rt runtime", e))
    };
    std::thread::spawn(build)
        .join()
        .map_err(|_| ProbeError::Failed("runtime builder thread panicked".into()))?
}

/// The paired ratios and the main loop's shares over every sample so far.
#[derive(Default)]
struct Live {
    scores: Vec<f64>,
    shares: Vec<f64>,
    /// Every event's wait for the main loop, ns.
    events: Vec<u64>,
}

struct Run {
    method: Method,
    mode: Mode,
    passes: u64,
    rt: Option<schedlab_rt::Runtime>,
    competitor: Option<Competitor>,
    notes: Params,
    live: Mutex<Live>,
    _pin: PinGuard,
}

impl Workload for Run {
    fn run(&mut self, iters: u64) -> Result<Timing, ProbeError> {
        let (mut alone, mut under) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..iters {
            let t = Instant::now();
            work_alone(self.passes);
            let a = t.elapsed();
            if let Some(c) = &self.competitor {
                c.set(true);
            }
            let r = self.under();
            if let Some(c) = &self.competitor {
                c.set(false);
            }
            let (u, share, events) = r?;
            let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
            live.events.extend_from_slice(&events);
            live.scores.push(u.as_secs_f64() / a.as_secs_f64().max(1e-9));
            if let Some(s) = share {
                live.shares.push(s);
            }
            alone += a;
            under += u;
        }
        Ok(Timing { elapsed: alone + under, migrated: false, overhead: alone })
    }
}

impl Run {
    /// The work under the method and mode: its time, in `worst` the main loop's share, and
    /// how long each event waited for the main loop.
    fn under(&self) -> Result<(Duration, Option<f64>, Vec<u64>), ProbeError> {
        let (passes, method, mode) = (self.passes, self.method, self.mode);
        match &self.rt {
            Some(rt) => rt
                .block_on(move || {
                    let stop = Arc::new(AtomicBool::new(false));
                    let main_passes = Arc::new(AtomicU64::new(0));
                    let end = Arc::new(AtomicU64::new(0));
                    let (s, m, e) = (stop.clone(), main_passes.clone(), end.clone());
                    let start = sys::now_ns();
                    let companion = schedlab_rt::spawn(move || {
                        let mut ev = Events::new(start, e);
                        match mode {
                            Mode::Fg | Mode::Bg => {
                                while !s.load(Ordering::Relaxed) {
                                    ev.handle();
                                    schedlab_rt::yield_now();
                                }
                            }
                            Mode::Worst => busy_main(method, &s, &m, &mut ev),
                        }
                        ev.handle();
                        ev.latencies
                    });
                    let t = Instant::now();
                    work(method, passes);
                    let took = t.elapsed();
                    end.store(sys::now_ns(), Ordering::Relaxed);
                    stop.store(true, Ordering::Relaxed);
                    let events = companion.join().unwrap_or_default();
                    (took, share(mode, passes, main_passes.load(Ordering::Relaxed)), events)
                })
                .map_err(|d| ProbeError::Failed(d.to_string())),
            None => {
                let stop = Arc::new(AtomicBool::new(false));
                let main_passes = Arc::new(AtomicU64::new(0));
                let end = Arc::new(AtomicU64::new(0));
                let (s, m, e) = (stop.clone(), main_passes.clone(), end.clone());
                let nice = if mode == Mode::Bg { BG_NICE } else { 0 };
                let start = sys::now_ns();
                let companion = std::thread::spawn(move || {
                    let _ = sys::set_nice(nice);
                    let mut ev = Events::new(start, e);
                    match mode {
                        Mode::Fg | Mode::Bg => {
                            while !s.load(Ordering::Relaxed) {
                                ev.handle();
                                std::thread::yield_now();
                            }
                        }
                        Mode::Worst => busy_main(Method::Os, &s, &m, &mut ev),
                    }
                    ev.handle();
                    ev.latencies
                });
                let worker = std::thread::spawn(move || {
                    let _ = sys::set_nice(nice);
                    let t = Instant::now();
                    work(Method::Os, passes);
                    t.elapsed()
                });
                let took = worker.join();
                end.store(sys::now_ns(), Ordering::Relaxed);
                stop.store(true, Ordering::Relaxed);
                let events = companion.join().unwrap_or_default();
                let took = took.map_err(|_| ProbeError::Failed("worker panicked".into()))?;
                Ok((took, share(mode, passes, main_passes.load(Ordering::Relaxed)), events))
            }
        }
    }
}

fn share(mode: Mode, worker: u64, main: u64) -> Option<f64> {
    (mode == Mode::Worst).then(|| main as f64 / (main + worker).max(1) as f64)
}

impl Instance for Run {
    fn metric(&self) -> Metric {
        Metric::per_ops(1.0)
    }

    fn notes(&self) -> Params {
        let mut n = self.notes.clone();
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if !live.scores.is_empty() {
            let mut s = live.scores.clone();
            s.sort_by(f64::total_cmp);
            n.set("score", format!("{:.3}", stats::median(&s).unwrap_or(f64::NAN)));
            n.set("score_min", format!("{:.3}", s[0]));
            n.set("score_max", format!("{:.3}", s[s.len() - 1]));
        }
        if !live.events.is_empty() {
            let mut e = live.events.clone();
            e.sort_unstable();
            n.set("events", e.len());
            n.set("event_p50_us", format!("{:.0}", stats::nearest_rank(&e, 50.0) as f64 / 1e3));
            n.set("event_p99_us", format!("{:.0}", stats::nearest_rank(&e, 99.0) as f64 / 1e3));
        }
        if !live.shares.is_empty() {
            let mut s = live.shares.clone();
            s.sort_by(f64::total_cmp);
            n.set("main_share", format!("{:.3}", stats::median(&s).unwrap_or(f64::NAN)));
        }
        n
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // The competitor first: it spins at nice 0 on the runtime's CPU.
        self.competitor.take();
    }
}

/// The busy main loop of `worst`: the same kernel, yielding by the same method, until the
/// worker is done.
fn busy_main(method: Method, stop: &AtomicBool, passes: &AtomicU64, events: &mut Events) {
    let mut st = KState::new();
    let mut y = Yield::new(method);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        kernel(&mut st);
        events.handle();
        n += 1;
        if n.is_multiple_of(64) {
            passes.store(n, Ordering::Relaxed);
        }
        y.after_pass(n);
    }
    passes.store(n, Ordering::Relaxed);
}

/// `passes` passes of the kernel, yielding by the method.
fn work(method: Method, passes: u64) {
    let mut st = KState::new();
    let mut y = Yield::new(method);
    for i in 1..=passes {
        kernel(&mut st);
        y.after_pass(i);
    }
    std::hint::black_box(st.checksum());
}

/// The reference: the work on the calling thread, never yielding.
fn work_alone(passes: u64) {
    let mut st = KState::new();
    for _ in 0..passes {
        kernel(&mut st);
    }
    std::hint::black_box(st.checksum());
}

/// The passes that take about `target` alone (the fastest of a few tries).
fn calibrate(target: Duration) -> u64 {
    const TRY: u64 = 2000;
    let mut best = u64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        work_alone(TRY);
        best = best.min(t.elapsed().as_nanos() as u64);
    }
    ((target.as_nanos() as u64 * TRY) / best.max(1)).max(1)
}

/// When a cooperative method yields.
enum Yield {
    Never,
    EveryN(u64),
    Clock { last: Instant },
    Yielder(schedlab_rt::Yielder),
}

impl Yield {
    fn new(method: Method) -> Yield {
        match method {
            Method::CoopNever | Method::Preempt(_) | Method::Os => Yield::Never,
            Method::Coop4096 => Yield::EveryN(4096),
            Method::Coop20ms => Yield::Clock { last: Instant::now() },
            Method::Yielder => Yield::Yielder(schedlab_rt::Yielder::new(INTERVAL)),
        }
    }

    #[inline]
    fn after_pass(&mut self, pass: u64) {
        match self {
            Yield::Never => {}
            Yield::EveryN(n) => {
                if pass.is_multiple_of(*n) {
                    schedlab_rt::yield_now();
                }
            }
            Yield::Clock { last } => {
                if last.elapsed() >= INTERVAL {
                    schedlab_rt::yield_now();
                    // Counted from when the thread got the CPU back. The article's listing
                    // stores the time before it yields: back from a busy peer's 20 ms, the
                    // thread then yields again after one pass, every turn (the worst case
                    // never ends).
                    *last = Instant::now();
                }
            }
            Yield::Yielder(y) => {
                y.tick();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The kernel.
// ---------------------------------------------------------------------------------------

/// The kinds a record can be of (Dhrystone's enumeration, in spirit).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ident1,
    Ident2,
    Ident3,
}

/// A record, copied and updated each pass.
#[derive(Clone, Copy)]
struct Record {
    kind: Kind,
    int_comp: i64,
    text: [u8; 30],
}

/// The kernel's state across passes.
struct KState {
    glob: Record,
    next: Record,
    array: [i64; 50],
    grid: [[i64; 50]; 8],
    s1: [u8; 30],
    s2: [u8; 30],
    int_glob: i64,
    bool_glob: bool,
    pass: u64,
}

impl KState {
    fn new() -> KState {
        let mut s1 = *b"SCHEDLAB PROGRAM, 1'ST STRING ";
        s1[29] = b'.';
        KState {
            glob: Record {
                kind: Kind::Ident3,
                int_comp: 40,
                text: *b"SCHEDLAB PROGRAM, SOME STRING ",
            },
            next: Record { kind: Kind::Ident1, int_comp: 0, text: [b' '; 30] },
            array: [0; 50],
            grid: [[0; 50]; 8],
            s1,
            s2: *b"SCHEDLAB PROGRAM, 2'ND STRING ",
            int_glob: 0,
            bool_glob: false,
            pass: 0,
        }
    }

    fn checksum(&self) -> i64 {
        self.int_glob
            ^ self.glob.int_comp
            ^ self.array.iter().sum::<i64>()
            ^ self.grid[3].iter().sum::<i64>()
            ^ self.next.text[7] as i64
    }
}

/// One pass: integer arithmetic, branches on an enumeration, a record copied and updated, a
/// string built and compared byte by byte, arrays indexed by computed subscripts.
#[inline(never)]
fn kernel(st: &mut KState) {
    st.pass = st.pass.wrapping_add(1);
    let p = st.pass as i64;
    // Integers and branches.
    let mut a = 2 + (p & 7);
    let mut b = 3;
    let c = a * b - (p & 3);
    // Ends: `a` gains at least 6 a turn while `b * 5` gains 5, from a gap of at most 13.
    while a < b * 5 {
        a += c % 7 + 6;
        b += 1;
    }
    let kind = match (a + b + c) % 3 {
        0 => Kind::Ident1,
        1 => Kind::Ident2,
        _ => Kind::Ident3,
    };
    // A record: copy, update by kind, link back.
    st.next = st.glob;
    st.next.int_comp = match kind {
        Kind::Ident1 => st.glob.int_comp + a,
        Kind::Ident2 => st.glob.int_comp - b,
        Kind::Ident3 => st.glob.int_comp ^ c,
    };
    st.next.kind = if st.next.int_comp & 1 == 0 { kind } else { Kind::Ident3 };
    st.glob.int_comp = st.next.int_comp % 1000 + 40;
    // A string: build it from the pass number, compare it with the reference.
    let mut digits = p;
    for slot in st.s2[20..28].iter_mut().rev() {
        *slot = b'0' + (digits % 10) as u8;
        digits /= 10;
    }
    let mut differ = 0usize;
    for (x, y) in st.s1.iter().zip(st.s2.iter()) {
        if x != y {
            differ += 1;
        }
    }
    st.bool_glob = differ > 10 || st.next.kind == Kind::Ident2;
    st.next.text[(p % 30) as usize] = st.s2[differ % 30];
    // Arrays with computed subscripts.
    let i = (a as usize + differ) % 42;
    st.array[i] = st.array[i].wrapping_add(c);
    st.array[i + 1] = st.array[i];
    st.array[i + 8] = i as i64;
    let row = (b as usize) % 8;
    st.grid[row][i] = st.grid[row][i].wrapping_add(1);
    st.grid[(row + 1) % 8][i + 8] = st.array[i];
    st.int_glob = st.int_glob.wrapping_add(if st.bool_glob { a } else { b } + st.grid[row][i]);
}

/// An OS thread at nice 0 that spins on the probe's CPU while set, and sleeps otherwise.
struct Competitor {
    state: Arc<(Mutex<(bool, bool)>, std::sync::Condvar)>,
    spinning: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Competitor {
    fn start() -> Result<Competitor, ProbeError> {
        let state = Arc::new((Mutex::new((false, false)), std::sync::Condvar::new()));
        let spinning = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), spinning.clone());
        let thread = std::thread::Builder::new()
            .name("competitor".into())
            .spawn(move || loop {
                // (run, quit)
                let (run, quit) = {
                    let g = st.0.lock().unwrap_or_else(|e| e.into_inner());
                    let g =
                        st.1.wait_while(g, |(run, quit)| !*run && !*quit)
                            .unwrap_or_else(|e| e.into_inner());
                    *g
                };
                if quit {
                    return;
                }
                if run {
                    let mut x = 1u64;
                    while sp.load(Ordering::Relaxed) {
                        for _ in 0..1000 {
                            x = std::hint::black_box(x.wrapping_mul(3).wrapping_add(1));
                        }
                    }
                    let mut g = st.0.lock().unwrap_or_else(|e| e.into_inner());
                    if !sp.load(Ordering::Relaxed) {
                        g.0 = false;
                    }
                }
            })
            .map_err(|e| ProbeError::io("spawning the competitor", e))?;
        Ok(Competitor { state, spinning, thread: Some(thread) })
    }

    fn set(&self, run: bool) {
        self.spinning.store(run, Ordering::Relaxed);
        let mut g = self.state.0.lock().unwrap_or_else(|e| e.into_inner());
        g.0 = run;
        self.state.1.notify_all();
    }
}

impl Drop for Competitor {
    fn drop(&mut self) {
        self.spinning.store(false, Ordering::Relaxed);
        {
            let mut g = self.state.0.lock().unwrap_or_else(|e| e.into_inner());
            g.1 = true;
            self.state.1.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_is_deterministic_and_does_work() {
        let (mut a, mut b) = (KState::new(), KState::new());
        for _ in 0..1000 {
            kernel(&mut a);
            kernel(&mut b);
        }
        assert_eq!(a.checksum(), b.checksum());
        let fresh = KState::new().checksum();
        assert_ne!(a.checksum(), fresh, "1000 passes change the state");
    }

    #[test]
    fn every_4096_yields_by_count_and_never_never() {
        // Cooperative, as the probe builds it for the coop methods: a quantum would add turns.
        let rt = schedlab_rt::Runtime::builder()
            .processors(1)
            .preemption(schedlab_rt::Preemption::Cooperative)
            .build()
            .unwrap();
        let yields = rt
            .block_on(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let turns = Arc::new(AtomicU64::new(0));
                let (s, t) = (stop.clone(), turns.clone());
                let other = schedlab_rt::spawn(move || {
                    while !s.load(Ordering::Relaxed) {
                        t.fetch_add(1, Ordering::Relaxed);
                        schedlab_rt::yield_now();
                    }
                });
                schedlab_rt::yield_now(); // let the other thread start
                let start = turns.load(Ordering::Relaxed);
                work(Method::Coop4096, 4096 * 5);
                let every = turns.load(Ordering::Relaxed) - start;
                let before_never = turns.load(Ordering::Relaxed);
                work(Method::CoopNever, 4096 * 5);
                let never = turns.load(Ordering::Relaxed) - before_never;
                stop.store(true, Ordering::Relaxed);
                other.join().unwrap();
                (every, never)
            })
            .unwrap();
        assert_eq!(
            yields,
            (5, 0),
            "one turn for the other thread per 4096 passes, none without yields"
        );
    }

    #[test]
    fn coop_20ms_counts_its_interval_from_when_it_got_the_cpu_back() {
        let rt = schedlab_rt::Runtime::builder()
            .processors(1)
            .preemption(schedlab_rt::Preemption::Cooperative)
            .build()
            .unwrap();
        let runs = rt
            .block_on(|| {
                let stop = Arc::new(AtomicBool::new(false));
                let turns = Arc::new(AtomicU64::new(0));
                let (s, t) = (stop.clone(), turns.clone());
                // A busy peer: 20 ms of its own per turn, then it yields.
                let peer = schedlab_rt::spawn(move || {
                    while !s.load(Ordering::Relaxed) {
                        let start = Instant::now();
                        while start.elapsed() < INTERVAL {
                            std::hint::spin_loop();
                        }
                        t.fetch_add(1, Ordering::Relaxed);
                        schedlab_rt::yield_now();
                    }
                });
                // The worker: passes between the peer's turns.
                let mut st = KState::new();
                let mut y = Yield::new(Method::Coop20ms);
                let (mut since, mut runs) = (0u64, Vec::new());
                for pass in 1.. {
                    kernel(&mut st);
                    since += 1;
                    let before = turns.load(Ordering::Relaxed);
                    y.after_pass(pass);
                    if turns.load(Ordering::Relaxed) != before {
                        runs.push(since);
                        since = 0;
                        if runs.len() == 4 {
                            break;
                        }
                    }
                }
                stop.store(true, Ordering::Relaxed);
                peer.join().unwrap();
                runs
            })
            .unwrap();
        // Back from the peer's 20 ms, the worker works its own 20 ms (thousands of passes)
        // before it yields again, not one pass.
        assert!(runs[1..].iter().all(|&n| n > 100), "passes per turn: {runs:?}");
    }

    #[test]
    fn bad_parameters_are_refused_with_the_choices() {
        let ctx = Context::for_tests();
        let p = CoopVsPreempt;
        let e = p.setup(&Params::new().with("method", "sometimes"), &ctx).err().unwrap();
        assert!(e.to_string().contains("coop-4096"), "{e}");
        let e = p.setup(&Params::new().with("mode", "sideways"), &ctx).err().unwrap();
        assert!(e.to_string().contains("worst"), "{e}");
    }
}

#[cfg(test)]
mod smoke {
    use super::*;
    use crate::testkit;

    #[test]
    fn every_method_and_mode_runs_in_smoke_settings() {
        let ctx = Context::for_tests();
        let p = CoopVsPreempt;
        for params in p.variants(Suite::Smoke) {
            eprintln!("{params}");
            let inst = testkit::smoke_one(&p, &params, &ctx)
                .unwrap_or_else(|| panic!("[{params}] skipped"));
            let notes = inst.notes();
            eprintln!("  {notes}");
            // The work lasts 2 ms or more, so at least one event (due at 1 ms) arrived
            // while it ran, whatever the method (a worker that never yields included).
            assert!(notes.get("event_p99_us").is_some(), "[{params}] no event: {notes}");
        }
    }

    #[test]
    fn an_event_waits_from_its_arrival_until_the_main_loop_runs_and_none_after_the_work() {
        let ms = 1_000_000;
        let end = Arc::new(AtomicU64::new(0));
        let mut ev = Events::new(10 * ms, end.clone());
        // Before the first arrival: nothing.
        ev.handle_at(10 * ms + ms / 2);
        assert!(ev.latencies.is_empty());
        // The main loop first runs 3.5 ms in (a worker that kept the CPU): three events,
        // waiting 2.5, 1.5 and 0.5 ms.
        ev.handle_at(13 * ms + ms / 2);
        assert_eq!(ev.latencies, [5 * ms / 2, 3 * ms / 2, ms / 2]);
        // The worker ends at 14.2 ms; at 20 ms only the event of 14 ms is still counted.
        end.store(14 * ms + ms / 5, Ordering::Relaxed);
        ev.handle_at(20 * ms);
        assert_eq!(ev.latencies.len(), 4);
        assert_eq!(ev.latencies[3], 6 * ms);
        ev.handle_at(30 * ms);
        assert_eq!(ev.latencies.len(), 4, "no event after the work");
    }
}
