//! Scoped user threads: [`scope`], the runtime's `std::thread::scope`.
//!
//! A scope lets user threads borrow from the stack of the thread that opens
//! it, because `scope` does not return before every thread spawned in it has
//! finished — also when the closure or one of the threads panics. Parallel
//! divide-and-conquer (split a slice, sum the halves in two threads) then
//! needs neither `'static` data nor `Arc`s.
//!
//! # Why borrowing is sound
//!
//! A scoped thread's closure is boxed and its lifetime erased to `'static` to
//! go through the ordinary spawn path. Nothing with the scope's lifetimes
//! outlives `scope`:
//! 1. the closure is consumed (its captures dropped) inside the thread's body;
//! 2. its result, which may borrow too, lives in a [`Packet`] shared by the
//!    thread and its [`ScopedJoinHandle`]; the packet is dropped by whichever
//!    lets go last, before `scope` returns (a handle cannot leave the scope's
//!    closure except into another scoped thread, which `scope` also waits for);
//! 3. the count of running threads is lowered after 1 and after the thread's
//!    own reference to the packet is gone, and `scope` waits for it to reach
//!    zero after its closure has returned.
//!
//! Panics follow `std::thread::scope`: a thread whose panic nobody observed
//! through [`ScopedJoinHandle::join`] makes `scope` panic once every thread
//! has finished; a panic of the closure itself is resumed after that.

use crate::processor::{self, SpawnOptions, Target};
use crate::sync::{Condvar, Mutex};
use crate::JoinHandle;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A scope to spawn user threads that borrow from the caller (see [`scope`]).
pub struct Scope<'scope, 'env: 'scope> {
    data: Arc<ScopeData>,
    /// Invariance over `'scope`, as in `std::thread::Scope`: a scope cannot be
    /// shrunk to a shorter lifetime and its threads then outlive it.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// What the threads of one scope share with it.
struct ScopeData {
    running: Mutex<usize>,
    all_done: Condvar,
    /// A thread panicked and nobody joined it.
    unobserved_panic: AtomicBool,
}

impl ScopeData {
    fn finished(&self) {
        let mut n = self.running.lock();
        *n -= 1;
        if *n == 0 {
            self.all_done.notify_all();
        }
    }
}

/// Where a scoped thread leaves its result for its handle.
struct Packet<'scope, T> {
    result: std::sync::Mutex<Option<std::thread::Result<T>>>,
    scope: Arc<ScopeData>,
    _scope: PhantomData<&'scope ()>,
}

impl<T> Drop for Packet<'_, T> {
    fn drop(&mut self) {
        let result = self.result.get_mut().unwrap_or_else(|e| e.into_inner());
        if matches!(result, Some(Err(_))) {
            self.scope.unobserved_panic.store(true, Ordering::Relaxed);
        }
        // Drop a result that borrows from the scope here, where it is still
        // alive; a panic payload's destructor must not unwind out of drop.
        if let Some(r) = result.take() {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(r)));
        }
    }
}

/// Owned permission to join a scoped thread.
pub struct ScopedJoinHandle<'scope, T> {
    inner: JoinHandle<()>,
    packet: Arc<Packet<'scope, T>>,
}

/// Opens a scope for user threads that may borrow from the calling thread,
/// calls `f` with it, waits for every thread spawned in it, and returns what
/// `f` returned.
///
/// Must be called on a user thread (like [`spawn`](crate::spawn)).
///
/// ```
/// let rt = schedlab_rt::Runtime::new().unwrap();
/// let sum = rt
///     .block_on(|| {
///         let data: Vec<u64> = (1..=1000).collect();
///         let (left, right) = data.split_at(500);
///         schedlab_rt::scope(|s| {
///             let a = s.spawn(|| left.iter().sum::<u64>());
///             let b = s.spawn(|| right.iter().sum::<u64>());
///             a.join().unwrap() + b.join().unwrap()
///         })
///     })
///     .unwrap();
/// assert_eq!(sum, 500_500);
/// ```
///
/// # Panics
///
/// If `f` panics (after every thread has finished, with `f`'s payload), or
/// if a thread spawned in the scope panicked and was not joined; outside a
/// user thread.
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    assert!(
        crate::try_current().is_some(),
        "schedlab_rt::scope called outside a user thread; call it inside Runtime::block_on"
    );
    let scope = Scope {
        data: Arc::new(ScopeData {
            running: Mutex::new(0),
            all_done: Condvar::new(),
            unobserved_panic: AtomicBool::new(false),
        }),
        scope: PhantomData,
        env: PhantomData,
    };
    let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    {
        let mut n = scope.data.running.lock();
        while *n > 0 {
            n = scope.data.all_done.wait(n);
        }
    }
    match result {
        Err(payload) => resume_unwind(payload),
        Ok(_) if scope.data.unobserved_panic.load(Ordering::Relaxed) => {
            panic!("a scoped thread panicked")
        }
        Ok(value) => value,
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawns a user thread that may borrow anything that outlives the scope.
    ///
    /// # Panics
    ///
    /// If no stack can be mapped for the thread.
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let packet: Arc<Packet<'scope, T>> = Arc::new(Packet {
            result: std::sync::Mutex::new(None),
            scope: self.data.clone(),
            _scope: PhantomData,
        });
        let theirs = packet.clone();
        let data = self.data.clone();
        *self.data.running.lock() += 1;
        let body = move || {
            let result = catch_unwind(AssertUnwindSafe(f));
            *theirs.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            // Our reference first: if the handle is gone, the result (which
            // may borrow from the scope) is dropped now, before the count.
            drop(theirs);
            data.finished();
        };
        let body: Box<dyn FnOnce() + Send + 'scope> = Box::new(body);
        // SAFETY: only the lifetime changes. `scope` does not return before
        // `finished` has run, which is the last thing `body` does with
        // anything borrowed from the scope (module docs, "Why borrowing is
        // sound").
        let body: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(body) };
        let inner = match processor::spawn(Target::Current, SpawnOptions::default(), body) {
            Ok(h) => h,
            Err(e) => {
                self.data.finished();
                panic!("failed to map a stack for a scoped user thread: {e}");
            }
        };
        ScopedJoinHandle { inner, packet }
    }
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the thread to finish and returns its result, or the payload
    /// of its panic (which then does not make [`scope`] panic).
    pub fn join(self) -> std::thread::Result<T> {
        let cancelled = self.inner.join().err();
        let taken = self.packet.result.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (taken, cancelled) {
            (Some(r), _) => r,
            (None, Some(payload)) => Err(payload),
            (None, None) => unreachable!("a scoped thread finished without a result"),
        }
    }

    /// Whether the thread has finished running its closure.
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// The thread's id.
    pub fn id(&self) -> crate::ThreadId {
        self.inner.thread().id()
    }
}

impl<T> std::fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedJoinHandle").field("id", &self.id()).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope").field("running", &*self.data.running.lock()).finish()
    }
}
