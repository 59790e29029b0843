//! User-thread-local storage: [`LocalKey`].
//!
//! Rust's `thread_local!` belongs to the *kernel* thread. Inside a user
//! thread it is the current processor's, shared with every other user thread
//! that runs there, and it can change under your feet: after any call that
//! may switch (a `yield_now`, a lock, a channel operation) — and, with
//! preemption, at any instruction — the user thread may resume on another
//! kernel thread, and worse, the compiler may keep using the address of the
//! old kernel thread's variable it computed before. Do not hold a
//! `thread_local!` reference where the thread can switch or be preempted
//! (wrap such code in [`no_preempt`](crate::no_preempt)), and do not use
//! `thread_local!` for per-user-thread state.
//!
//! A [`LocalKey`] is the user thread's own: each user thread lazily gets its
//! own value, it moves with the thread between processors, and its
//! destructor runs on the thread, at its end, before `join` returns.
//!
//! ```
//! use schedlab_rt::{spawn, LocalKey, Runtime};
//! use std::cell::Cell;
//!
//! static COUNT: LocalKey<Cell<u32>> = LocalKey::new(|| Cell::new(0));
//!
//! let rt = Runtime::builder().processors(1).build().unwrap();
//! let n = rt.block_on(|| {
//!     COUNT.with(|c| c.set(c.get() + 1));
//!     let other = spawn(|| COUNT.with(|c| c.get())).join().unwrap();
//!     assert_eq!(other, 0, "another user thread has its own value");
//!     COUNT.with(|c| c.get())
//! }).unwrap();
//! assert_eq!(n, 1);
//! ```

use crate::processor;
use crate::task::{LocalMap, Task};
use std::any::Any;
use std::fmt;

/// A key for a user-thread-local value of type `T`; declare it as a `static`.
pub struct LocalKey<T: 'static> {
    init: fn() -> T,
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey").finish_non_exhaustive()
    }
}

impl<T: 'static> LocalKey<T> {
    /// A key whose value starts as `init()` in each user thread.
    pub const fn new(init: fn() -> T) -> LocalKey<T> {
        LocalKey { init }
    }

    /// Calls `f` with the calling user thread's value, creating it first if
    /// needed.
    ///
    /// # Panics
    ///
    /// When called outside a user thread.
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let task =
            processor::current_task_ptr().expect("LocalKey::with called outside a user thread");
        // SAFETY: the running task is alive while it runs, and we are it.
        let task: &Task = unsafe { task.as_ref() };
        let key = self as *const Self as usize;
        let value = match find(task, key) {
            Some(v) => v,
            None => {
                // Run `init` with no borrow of the map: it may use other keys.
                let boxed: Box<dyn Any> = Box::new((self.init)());
                let ptr: *const dyn Any = &*boxed;
                // SAFETY: only the task itself touches its locals, and no
                // other borrow of the map is live.
                unsafe { (*task.locals.get()).get_or_insert_with(Box::default).push((key, boxed)) };
                ptr
            }
        };
        // SAFETY: the value is boxed, so it stays put while the map grows, and
        // it is dropped only at the thread's end (`destroy_all`), which cannot
        // run while `f` does. It was created as a `T` for this key.
        let value =
            unsafe { &*value }.downcast_ref::<T>().expect("a LocalKey's value has the key's type");
        f(value)
    }
}

fn find(task: &Task, key: usize) -> Option<*const dyn Any> {
    // SAFETY: only the task itself touches its locals; the borrow ends here.
    let map: &LocalMap = unsafe { &*task.locals.get() };
    map.as_ref()?.iter().find(|(k, _)| *k == key).map(|(_, v)| &**v as *const dyn Any)
}

/// Drops the thread's local values, on the thread, at its end. Destructors
/// may create new values; those are dropped too, for a few rounds.
pub(crate) fn destroy_all(task: &Task) {
    for _ in 0..8 {
        // SAFETY: only the task itself touches its locals; no borrow is live.
        let Some(map) = (unsafe { (*task.locals.get()).take() }) else { return };
        drop(map);
    }
}
