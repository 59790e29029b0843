//! The process's one runtime, started by the first `pthread_create`.
//!
//! Until then the library has done nothing: no thread, no signal handler, no
//! allocation. The runtime then lives as long as the process (its kernel
//! threads end with it). After a `fork` the child has none of the parent's
//! kernel threads, so it starts afresh at its own first `pthread_create`
//! (`thread.rs`, `fork`).

use schedlab_rt::{Preemption, Runtime};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::time::Duration;

/// The runtime, once started (leaked: it lives as long as the process).
static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());
/// Guards the start (a plain spin: the start is once per process).
static STARTING: AtomicUsize = AtomicUsize::new(0);

/// The settings read from the environment at start.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) processors: usize,
    pub(crate) preemption: Preemption,
    pub(crate) stack_size: usize,
}

fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    match v.trim().parse::<u64>() {
        Ok(n) => Some(n),
        Err(_) => crate::fatal(&format!("{name}={v:?} is not a whole number")),
    }
}

impl Settings {
    fn from_env() -> Settings {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let processors = match env_number("SCHEDLAB_RT_PROCESSORS") {
            Some(n @ 1..=64) => n as usize,
            Some(n) => crate::fatal(&format!("SCHEDLAB_RT_PROCESSORS={n}: give 1 to 64")),
            None => cpus.min(64),
        };
        let preempt = std::env::var("SCHEDLAB_RT_PREEMPT").map_or(true, |v| v != "0");
        let preemption = match (preempt, env_number("SCHEDLAB_RT_QUANTUM_MS")) {
            (false, _) => Preemption::Cooperative,
            (true, Some(ms @ 1..=10_000)) => Preemption::Quantum(Duration::from_millis(ms)),
            (true, Some(ms)) => {
                crate::fatal(&format!("SCHEDLAB_RT_QUANTUM_MS={ms}: give 1 to 10000"))
            }
            (true, None) => Preemption::default(),
        };
        Settings { processors, preemption, stack_size: stack_size() }
    }
}

/// The runtime, starting it if this is the first call.
pub(crate) fn get() -> &'static Runtime {
    let p = RUNTIME.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: set once below to a leaked runtime, never freed.
        return unsafe { &*p };
    }
    start()
}

/// Default stack size of a new user thread (glibc's default: what
/// `pthread_attr_getstacksize` of a fresh attribute says).
pub(crate) fn stack_size() -> usize {
    static SIZE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SIZE.get_or_init(crate::thread::default_stack_size)
}

/// The runtime if it was started, with the calling kernel thread attached
/// to it (`schedlab_rt::shared::attach`: its runtime block, one `rdgsbase`
/// when it has one). Every call into the runtime from a thread that may be
/// a kernel thread goes through here first; before the first
/// `pthread_create` there is no runtime and nothing of it is touched (not
/// even `rdgsbase`, which faults where the kernel did not enable it).
#[inline]
pub(crate) fn enter() -> Option<&'static Runtime> {
    let rt = started()?;
    // A user thread runs on one of the runtime's kernel threads, attached
    // when it started; `attach` must be asked on a kernel thread's own
    // context (it tells its block by the kernel thread's thread pointer).
    if !crate::thread::on_user_thread() {
        schedlab_rt::shared::attach();
    }
    Some(rt)
}

/// The runtime if it was started.
pub(crate) fn started() -> Option<&'static Runtime> {
    let p = RUNTIME.load(Ordering::Acquire);
    // SAFETY: as in `get`.
    (!p.is_null()).then(|| unsafe { &*p })
}

#[cold]
fn start() -> &'static Runtime {
    while STARTING.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::thread::yield_now();
    }
    let p = RUNTIME.load(Ordering::Acquire);
    if !p.is_null() {
        STARTING.store(0, Ordering::Release);
        // SAFETY: as in `get`.
        return unsafe { &*p };
    }
    if !schedlab_rt::shared::fsgsbase_usable() {
        crate::fatal(
            "this kernel or CPU does not allow user-space rdfsbase/wrfsbase (FSGSBASE, \
             Linux 5.9 or later on a CPU that has it), which user threads with their own \
             thread-local storage need; run the program without LD_PRELOAD",
        );
    }
    if !crate::tls::check() {
        crate::fatal(
            "the library must be loaded with the program (LD_PRELOAD), not by dlopen: \
             its thread-local word needs the static TLS block",
        );
    }
    crate::glibc::check();
    let s = Settings::from_env();
    let mut b = Runtime::builder()
        .processors(s.processors)
        .stack_size(s.stack_size)
        .preemption(s.preemption)
        .deadlock_detection(false);
    if let Some(hook) = crate::events::hook(s.processors) {
        b = b.on_event(hook);
    }
    // Before the runtime installs its handler (`urg.rs`).
    schedlab_rt::shared::set_foreign_signal_hook(crate::urg::accept, crate::urg::entry);
    let rt = match b.build() {
        Ok(rt) => rt,
        Err(e) => crate::fatal(&format!("cannot start the runtime: {e}")),
    };
    schedlab_rt::shared::set_resume_hook(crate::signal::deliver_pending);
    schedlab_rt::shared::set_preempt_hook(crate::cancel::at_preemption);
    schedlab_rt::shared::set_quiet_hook(crate::procsig::take_stranded);
    let p = Box::into_raw(Box::new(rt));
    RUNTIME.store(p, Ordering::Release);
    crate::procsig::start();
    STARTING.store(0, Ordering::Release);
    // SAFETY: just leaked.
    unsafe { &*p }
}

/// In a child after `fork`: the parent's runtime is gone with its kernel
/// threads; forget it (leaking its memory in the child) so the child's first
/// `pthread_create` starts its own.
pub(crate) fn forget_after_fork() {
    RUNTIME.store(std::ptr::null_mut(), Ordering::Release);
    STARTING.store(0, Ordering::Release);
}
