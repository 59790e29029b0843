//! A bounded multi-producer multi-consumer [`channel`] for user threads,
//! including rendezvous channels (capacity 0).
//!
//! One ring buffer and two waiter queues under a spin lock. A sender that
//! finds no receiver waiting and the buffer full, or a receiver that finds
//! no value, queues itself with a *slot* on its own stack and parks. Values
//! are handed over under the lock, as Go's channels do (`runtime/chan.go`),
//! so a woken thread never takes the lock again to finish its operation:
//! - a sender that finds a receiver waiting puts the value in the receiver's
//!   slot (the buffer is then empty: receivers wait only on an empty one);
//! - a receiver that finds a sender waiting takes the head of the buffer and
//!   moves the sender's value in at the tail (FIFO is kept), or, with an
//!   empty buffer (capacity 0), takes the sender's value from its slot.
//!
//! Either way the waiting side is dequeued under the lock, then woken after
//! the lock is released; its slot (filled, or emptied) says that its
//! operation is done. Values only ever move under the lock, so none is lost
//! or duplicated; the slot is read by its owner only after the wake-up,
//! which orders it after the write (park.rs).
//!
//! Dropping the last [`Sender`] wakes every receiver with an empty slot
//! (they drain the buffer, then see [`RecvError`]); dropping the last
//! [`Receiver`] wakes every sender with its value still in its slot (they
//! get it back in [`SendError`]). Handing over a value per operation means
//! one lock acquisition per send or receive, where a woken thread used to
//! retry under the lock (channel ping-pong: 43.5 ns per switch before).
//!
//! # OS threads
//!
//! A channel made on an OS thread outside any runtime, or whose endpoint an
//! OS thread has cloned, dropped or waited on, is *external*: a user thread
//! waiting on it may be woken from outside, so the deadlock detector does not
//! count it as stuck (`runtime.rs`, "Deadlock detection"). A channel made on
//! a user thread whose endpoint is then *moved* to an OS thread is not known
//! to be external until that OS thread clones, drops or waits on it.

use crate::spin::SpinLock;
use crate::sync::wake_all;
use crate::task::WaitReason;
use crate::wait::{Waiter, WaiterRef};
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

/// A queued waiter and its slot: for a receiver, where a sender puts the
/// value it hands over; for a sender, the value it offers, which a receiver
/// takes (leaving `None`).
struct Waiting<T> {
    waiter: WaiterRef,
    slot: *mut Option<T>,
}

struct Inner<T> {
    buf: VecDeque<T>,
    cap: usize,
    senders: usize,
    receivers: usize,
    send_waiters: VecDeque<Waiting<T>>,
    recv_waiters: VecDeque<Waiting<T>>,
    /// An OS thread outside the runtime may use the channel (see "OS
    /// threads" above): set for good when the channel is made on one, or one
    /// clones, drops or waits on an endpoint.
    external: bool,
}

struct Chan<T> {
    inner: SpinLock<Inner<T>>,
}

// SAFETY: the raw slot pointers in the waiter queues are only dereferenced
// under the lock, while their waiters wait (module docs); values of `T` move
// between threads, hence `T: Send`.
unsafe impl<T: Send> Send for Chan<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Chan<T> {}

/// Creates a channel holding at most `capacity` values in flight; with
/// `capacity` 0, a rendezvous channel: a send completes only when a receiver
/// takes the value.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        inner: SpinLock::new(Inner {
            buf: VecDeque::with_capacity(capacity.min(1024)),
            cap: capacity,
            senders: 1,
            receivers: 1,
            send_waiters: VecDeque::new(),
            recv_waiters: VecDeque::new(),
            external: on_os_thread(),
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

/// Whether the caller is an OS thread outside any runtime.
#[inline]
fn on_os_thread() -> bool {
    crate::processor::current_task_ptr().is_none()
}

/// Wakes a dequeued waiter.
#[inline]
fn wake(w: WaiterRef) {
    // SAFETY: dequeued under the channel lock: woken only here, once.
    unsafe { w.wake() };
}

impl<T> Inner<T> {
    /// Hands `value` to the first waiting receiver, if any (its wake-up is
    /// returned: to do after unlocking); gives the value back otherwise.
    #[inline]
    fn hand_to_receiver(&mut self, value: T) -> Result<WaiterRef, T> {
        match self.recv_waiters.pop_front() {
            Some(w) => {
                // SAFETY: queued, so registered and not yet woken.
                if unsafe { w.waiter.is_cancelled() } {
                    return self.hand_to_live_receiver(value);
                }
                // SAFETY: the receiver waits, so its slot (on its stack) is
                // alive, and we hold the lock its slot is written under.
                unsafe { *w.slot = Some(value) };
                Ok(w.waiter)
            }
            None => Err(value),
        }
    }

    /// `hand_to_receiver` past a receiver of a dropped runtime (`runtime.rs`,
    /// `Drop`): handing it the value would lose it, as it never runs again.
    /// It is left out of the queue, unwoken.
    #[cold]
    #[inline(never)]
    fn hand_to_live_receiver(&mut self, value: T) -> Result<WaiterRef, T> {
        loop {
            let Some(w) = self.recv_waiters.pop_front() else { return Err(value) };
            // SAFETY: as in `hand_to_receiver`.
            if !unsafe { w.waiter.is_cancelled() } {
                // SAFETY: as in `hand_to_receiver`.
                unsafe { *w.slot = Some(value) };
                return Ok(w.waiter);
            }
        }
    }

    /// Takes the value of the first waiting sender, if any, with its
    /// wake-up (to do after unlocking).
    #[inline]
    fn take_from_sender(&mut self) -> Option<(T, WaiterRef)> {
        let w = self.send_waiters.pop_front()?;
        // SAFETY: as in `hand_to_receiver`; a queued sender's slot holds its value.
        let v = unsafe { (*w.slot).take() }.expect("a waiting sender offers a value");
        Some((v, w.waiter))
    }

    /// Receives under the lock: the head of the buffer (refilled from a
    /// waiting sender) or, with the buffer empty, a waiting sender's value.
    #[inline]
    fn take(&mut self) -> Option<(T, Option<WaiterRef>)> {
        match self.buf.pop_front() {
            Some(v) => {
                let woken = self.take_from_sender().map(|(sv, w)| {
                    self.buf.push_back(sv);
                    w
                });
                Some((v, woken))
            }
            None => self.take_from_sender().map(|(v, w)| (v, Some(w))),
        }
    }
}

impl<T> Sender<T> {
    /// Sends `value`, parking while the buffer is full (on a rendezvous
    /// channel, until a receiver takes it).
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut value = value;
        loop {
            let waiter: Waiter;
            let mut slot: Option<T>;
            {
                // One lock acquisition decides: hand over, buffer, fail, or queue.
                let mut g = self.chan.inner.lock();
                if g.receivers == 0 {
                    return Err(SendError(value));
                }
                value = match g.hand_to_receiver(value) {
                    Ok(w) => {
                        drop(g);
                        wake(w);
                        return Ok(());
                    }
                    Err(v) => v,
                };
                if g.buf.len() < g.cap {
                    g.buf.push_back(value);
                    return Ok(());
                }
                waiter = Waiter::new();
                if waiter.is_os() {
                    g.external = true;
                }
                let external = g.external;
                slot = Some(value);
                let slot_ptr = std::ptr::addr_of_mut!(slot);
                g.send_waiters.push_back(Waiting { waiter: waiter.as_ref(), slot: slot_ptr });
                let reason = WaitReason::ChannelSend(Arc::as_ptr(&self.chan) as usize);
                waiter.wait_unlocking_maybe_external(g, reason, external);
            }
            // A receiver took the value (the slot is empty), or every
            // receiver is gone and we were woken with it still there.
            match slot.take() {
                None => return Ok(()),
                Some(v) => value = v,
            }
        }
    }

    /// Sends `value` if that needs no waiting: a receiver waits, or the
    /// buffer has room.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut g = self.chan.inner.lock();
        if g.receivers == 0 {
            return Err(TrySendError::Disconnected(value));
        }
        let value = match g.hand_to_receiver(value) {
            Ok(w) => {
                drop(g);
                wake(w);
                return Ok(());
            }
            Err(v) => v,
        };
        if g.buf.len() >= g.cap {
            return Err(TrySendError::Full(value));
        }
        g.buf.push_back(value);
        Ok(())
    }
}

impl<T> Receiver<T> {
    /// Receives a value, parking while there is none.
    pub fn recv(&self) -> Result<T, RecvError> {
        loop {
            let waiter: Waiter;
            let mut slot: Option<T> = None;
            {
                // One lock acquisition decides: receive, fail, or queue.
                let mut g = self.chan.inner.lock();
                if let Some((v, woken)) = g.take() {
                    drop(g);
                    if let Some(w) = woken {
                        wake(w);
                    }
                    return Ok(v);
                }
                if g.senders == 0 {
                    return Err(RecvError);
                }
                waiter = Waiter::new();
                if waiter.is_os() {
                    g.external = true;
                }
                let external = g.external;
                let slot_ptr = std::ptr::addr_of_mut!(slot);
                g.recv_waiters.push_back(Waiting { waiter: waiter.as_ref(), slot: slot_ptr });
                let reason = WaitReason::ChannelRecv(Arc::as_ptr(&self.chan) as usize);
                waiter.wait_unlocking_maybe_external(g, reason, external);
            }
            // A sender handed us a value, or every sender is gone.
            if let Some(v) = slot.take() {
                return Ok(v);
            }
        }
    }

    /// Receives a value if one is there now (in the buffer, or offered by a
    /// waiting sender).
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut g = self.chan.inner.lock();
        match g.take() {
            Some((v, woken)) => {
                drop(g);
                if let Some(w) = woken {
                    wake(w);
                }
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
        let os = on_os_thread();
        let mut g = self.chan.inner.lock();
        g.senders += 1;
        g.external |= os;
        drop(g);
        Sender { chan: self.chan.clone() }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        let os = on_os_thread();
        let mut g = self.chan.inner.lock();
        g.receivers += 1;
        g.external |= os;
        drop(g);
        Receiver { chan: self.chan.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let os = on_os_thread();
        let mut g = self.chan.inner.lock();
        g.external |= os;
        g.senders -= 1;
        if g.senders == 0 {
            let all: VecDeque<WaiterRef> = g.recv_waiters.drain(..).map(|w| w.waiter).collect();
            wake_all(g, all);
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let os = on_os_thread();
        let mut g = self.chan.inner.lock();
        g.external |= os;
        g.receivers -= 1;
        if g.receivers == 0 {
            let all: VecDeque<WaiterRef> = g.send_waiters.drain(..).map(|w| w.waiter).collect();
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
