//! [`Barrier`]: lets `n` user threads wait for each other; reusable.

use crate::spin::SpinLock;
use crate::sync::wake_all;
use crate::task::WaitReason;
use crate::wait::{Waiter, WaiterRef};
use std::collections::VecDeque;
use std::fmt;

struct Inner {
    arrived: usize,
    waiters: VecDeque<WaiterRef>,
}

/// A barrier for `n` user threads.
pub struct Barrier {
    n: usize,
    inner: SpinLock<Inner>,
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").field("n", &self.n).finish_non_exhaustive()
    }
}

/// What [`Barrier::wait`] tells each thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// True for exactly one thread per round (the last to arrive).
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl Barrier {
    /// A barrier that releases its waiters once `n` have arrived (`n` of 0 or
    /// 1 never blocks).
    pub const fn new(n: usize) -> Barrier {
        Barrier { n, inner: SpinLock::new(Inner { arrived: 0, waiters: VecDeque::new() }) }
    }

    /// Waits until `n` threads have called `wait` in this round.
    pub fn wait(&self) -> BarrierWaitResult {
        let waiter = Waiter::new();
        let mut g = self.inner.lock();
        g.arrived += 1;
        if g.arrived >= self.n {
            g.arrived = 0;
            let all = std::mem::take(&mut g.waiters);
            wake_all(g, all);
            return BarrierWaitResult(true);
        }
        g.waiters.push_back(waiter.as_ref());
        waiter.wait_unlocking(g, WaitReason::Barrier(self as *const Self as usize));
        BarrierWaitResult(false)
    }
}
