//! A bounded multi-producer multi-consumer [`channel`] for user threads.
//!
//! One ring buffer and two waiter queues under a spin lock. A sender that
//! finds the buffer full, or a receiver that finds it empty, queues itself
//! and parks; every successful send wakes one queued receiver and every
//! successful receive wakes one queued sender. A woken thread tries again
//! (another thread may have taken the slot or the value first), so nothing
//! is handed over behind the lock's back and no value can be lost: values
//! only ever enter and leave the buffer under the lock.
//!
//! Dropping the last [`Sender`] wakes every receiver (they drain the buffer,
//! then see [`RecvError`]); dropping the last [`Receiver`] wakes every sender
//! (they get their value back in [`SendError`]).

use crate::spin::SpinLock;
use crate::sync::wake_all;
use crate::task::WaitReason;
use crate::wait::{Waiter, WaiterRef};
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

struct Inner<T> {
    buf: VecDeque<T>,
    cap: usize,
    senders: usize,
    receivers: usize,
    send_waiters: VecDeque<WaiterRef>,
    recv_waiters: VecDeque<WaiterRef>,
}

struct Chan<T> {
    inner: SpinLock<Inner<T>>,
}

/// Creates a channel holding at most `capacity` values in flight.
///
/// # Panics
///
/// If `capacity` is 0 (rendezvous channels are not implemented).
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    assert!(capacity > 0, "channel capacity must be at least 1");
    let chan = Arc::new(Chan {
        inner: SpinLock::new(Inner {
            buf: VecDeque::with_capacity(capacity.min(1024)),
            cap: capacity,
            senders: 1,
            receivers: 1,
            send_waiters: VecDeque::new(),
            recv_waiters: VecDeque::new(),
        }),
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// The sending half; clone it for more producers.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half; clone it for more consumers.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

/// The value could not be sent: every receiver is gone.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

/// Nothing more will arrive: the buffer is empty and every sender is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvError;

/// Why [`Sender::try_send`] failed; the value comes back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// The buffer is full.
    Full(T),
    /// Every receiver is gone.
    Disconnected(T),
}

/// Why [`Receiver::try_recv`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryRecvError {
    /// The buffer is empty.
    Empty,
    /// The buffer is empty and every sender is gone.
    Disconnected,
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}
impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel with no receiver")
    }
}
impl<T> std::error::Error for SendError<T> {}
impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel with no sender")
    }
}
impl std::error::Error for RecvError {}
impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

fn wake_one(w: Option<WaiterRef>) {
    if let Some(w) = w {
        // SAFETY: dequeued under the channel lock: woken only here.
        unsafe { w.wake() };
    }
}

impl<T> Sender<T> {
    /// Sends `value`, parking while the buffer is full.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        loop {
            let waiter: Waiter;
            {
                // One lock acquisition decides: send, fail, or queue.
                let mut g = self.chan.inner.lock();
                if g.receivers == 0 {
                    return Err(SendError(value));
                }
                if g.buf.len() < g.cap {
                    g.buf.push_back(value);
                    let w = g.recv_waiters.pop_front();
                    drop(g);
                    wake_one(w);
                    return Ok(());
                }
                waiter = Waiter::new();
                g.send_waiters.push_back(waiter.as_ref());
            }
            waiter.wait(WaitReason::ChannelSend(Arc::as_ptr(&self.chan) as usize));
        }
    }

    /// Sends `value` if there is room now.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut g = self.chan.inner.lock();
        if g.receivers == 0 {
            return Err(TrySendError::Disconnected(value));
        }
        if g.buf.len() >= g.cap {
            return Err(TrySendError::Full(value));
        }
        g.buf.push_back(value);
        let w = g.recv_waiters.pop_front();
        drop(g);
        wake_one(w);
        Ok(())
    }
}

impl<T> Receiver<T> {
    /// Receives a value, parking while the buffer is empty.
    pub fn recv(&self) -> Result<T, RecvError> {
        loop {
            let waiter: Waiter;
            {
                // One lock acquisition decides: receive, fail, or queue.
                let mut g = self.chan.inner.lock();
                if let Some(v) = g.buf.pop_front() {
                    let w = g.send_waiters.pop_front();
                    drop(g);
                    wake_one(w);
                    return Ok(v);
                }
                if g.senders == 0 {
                    return Err(RecvError);
                }
                waiter = Waiter::new();
                g.recv_waiters.push_back(waiter.as_ref());
            }
            waiter.wait(WaitReason::ChannelRecv(Arc::as_ptr(&self.chan) as usize));
        }
    }

    /// Receives a value if one is there now.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut g = self.chan.inner.lock();
        match g.buf.pop_front() {
            Some(v) => {
                let w = g.send_waiters.pop_front();
                drop(g);
                wake_one(w);
                Ok(v)
            }
            None if g.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// An iterator that receives until every sender is gone.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.inner.lock().senders += 1;
        Sender { chan: self.chan.clone() }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.inner.lock().receivers += 1;
        Receiver { chan: self.chan.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut g = self.chan.inner.lock();
        g.senders -= 1;
        if g.senders == 0 {
            let all = std::mem::take(&mut g.recv_waiters);
            wake_all(g, all);
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut g = self.chan.inner.lock();
        g.receivers -= 1;
        if g.receivers == 0 {
            let all = std::mem::take(&mut g.send_waiters);
            wake_all(g, all);
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}
