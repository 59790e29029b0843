//! The word behind a processor's next slot (`queue.rs`, [`LifoSlot`]): one
//! pointer that its owner puts and takes and other processors may steal,
//! with the owner's accesses as cheap as the protocol allows. Kept apart
//! from the typed slot so that `loom` can check it (`RUSTFLAGS="--cfg loom"`).
//!
//! # Protocol
//!
//! Only the owner stores a non-null pointer; a thief only replaces the
//! pointer it saw with null ([`RawSlot::take_if`], one compare-exchange).
//! So a slot the owner found empty stays empty until the owner itself puts
//! something there: a put into an empty slot is a plain release store, and
//! only a put that displaces a thread, or a take, needs the locked exchange
//! that decides between the owner and a thief. A put into an empty slot is
//! by far the common one (a hand-off: the woken thread goes in, the waker
//! parks, the owner takes it), and the locked exchange it no longer makes
//! was the largest part of what a second processor cost a hand-off: it
//! drained the store buffer the channel's send had just filled (a ring of
//! 503 threads on one active processor of two, on the lab's Intel host:
//! 77 ns a hop with the exchange, 62 ns without, 55 ns with one processor).
//!
//! A one-processor runtime has no thieves: `shared == false` takes and puts
//! with plain loads and stores.
//!
//! [`LifoSlot`]: crate::queue::LifoSlot

use crate::loom::{AtomicPtr, Ordering};
use std::ptr::NonNull;

/// A slot holding one `*mut T` or null. The pointer's ownership is the
/// caller's business (`queue.rs` keeps a task reference in it).
pub(crate) struct RawSlot<T>(AtomicPtr<T>);

impl<T> RawSlot<T> {
    /// An empty slot.
    pub(crate) fn new() -> RawSlot<T> {
        RawSlot(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The owner puts `new` and gets back what it displaced, if a thief did
    /// not take that first. `shared`: thieves may exist.
    #[inline]
    pub(crate) fn put(&self, new: NonNull<T>, shared: bool) -> Option<NonNull<T>> {
        // Relaxed: only the owner makes the slot non-null, so null seen here
        // stays null until the store below; a non-null value is decided by
        // the exchange.
        let cur = self.0.load(Ordering::Relaxed);
        let old = if cur.is_null() || !shared {
            // Release: a thief that takes `new` sees what the owner wrote
            // before (the thread's published context).
            self.0.store(new.as_ptr(), Ordering::Release);
            cur
        } else {
            self.0.swap(new.as_ptr(), Ordering::AcqRel)
        };
        NonNull::new(old)
    }

    /// The owner takes what the slot holds, if anything.
    #[inline]
    pub(crate) fn take(&self, shared: bool) -> Option<NonNull<T>> {
        let cur = self.0.load(Ordering::Relaxed);
        if cur.is_null() {
            return None;
        }
        let old = if shared {
            // Against a thief's compare-exchange: exactly one of the two gets it.
            self.0.swap(std::ptr::null_mut(), Ordering::Acquire)
        } else {
            self.0.store(std::ptr::null_mut(), Ordering::Relaxed);
            cur
        };
        NonNull::new(old)
    }

    /// What the slot holds, as an address to compare only (a hint).
    #[inline]
    pub(crate) fn peek(&self) -> *mut T {
        self.0.load(Ordering::Relaxed)
    }

    /// The owner takes `want` back if the slot still holds it (a joiner
    /// taking back the child it is about to join, `processor/inline.rs`):
    /// against a thief's [`RawSlot::take_if`], one compare-exchange decides,
    /// so exactly one of the two gets it. `shared`: thieves may exist.
    #[inline]
    pub(crate) fn take_back(&self, want: NonNull<T>, shared: bool) -> Option<NonNull<T>> {
        if !shared {
            if self.0.load(Ordering::Relaxed) != want.as_ptr() {
                return None;
            }
            self.0.store(std::ptr::null_mut(), Ordering::Relaxed);
            return Some(want);
        }
        self.take_if(want.as_ptr())
    }

    /// A thief takes what the slot holds if it is still `seen` (from
    /// [`RawSlot::peek`]).
    #[inline]
    pub(crate) fn take_if(&self, seen: *mut T) -> Option<NonNull<T>> {
        if seen.is_null() {
            return None;
        }
        // Acquire: pairs with the owner's release put.
        let old = self
            .0
            .compare_exchange(seen, std::ptr::null_mut(), Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        NonNull::new(old)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The owner puts into an empty slot (the plain store), displaces, and
    //! takes, while a thief steals: every item must come out exactly once,
    //! with what its producer wrote before the put.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    /// An item with a payload written before it is put, read by whoever
    /// takes it (the published context of a task).
    struct Item {
        id: usize,
        payload: UnsafeCell<usize>,
    }

    fn item(id: usize) -> NonNull<Item> {
        NonNull::from(Box::leak(Box::new(Item { id, payload: UnsafeCell::new(0) })))
    }

    /// Checks a taken item's payload and returns its id. (Items are freed
    /// at the model's end, so a protocol that hands one out twice fails the
    /// assertion below instead of freeing it twice.)
    fn claim(p: NonNull<Item>) -> usize {
        // SAFETY: items live until the model's end.
        let it = unsafe { p.as_ref() };
        // SAFETY: the taker owns the item now; the put released the write.
        let payload = it.payload.with(|v| unsafe { *v });
        assert_eq!(payload, it.id * 10, "a taker saw the item before its producer's write");
        it.id
    }

    fn publish(p: NonNull<Item>) {
        // SAFETY: the producer still owns the item (not yet put).
        let it = unsafe { p.as_ref() };
        // SAFETY: as above; nobody else reaches the item before the put.
        it.payload.with_mut(|v| unsafe { *v = it.id * 10 });
    }

    #[test]
    fn loom_owner_and_thief_take_each_item_once() {
        loom::model(|| {
            let slot = Arc::new(RawSlot::<Item>::new());
            let thief = {
                let slot = slot.clone();
                loom::thread::spawn(move || {
                    let mut got = Vec::new();
                    for _ in 0..2 {
                        let seen = slot.peek();
                        if let Some(p) = slot.take_if(seen) {
                            got.push(claim(p));
                        }
                        loom::thread::yield_now();
                    }
                    got
                })
            };
            let items: Vec<NonNull<Item>> = (1..=3).map(item).collect();
            let mut got = Vec::new();
            let put = |id: usize| {
                let p = items[id - 1];
                publish(p);
                slot.put(p, true).map(claim)
            };
            // Into the empty slot (the plain store), then displacing 1 unless
            // the thief took it (the exchange).
            got.extend(put(1));
            got.extend(put(2));
            got.extend(slot.take(true).map(claim));
            // Empty again (taken above, by us or the thief).
            got.extend(put(3));
            got.extend(slot.take(true).map(claim));
            got.extend(thief.join().unwrap());
            got.sort_unstable();
            assert_eq!(got, [1, 2, 3], "each item taken exactly once");
            for p in items {
                // SAFETY: leaked from a box by `item`; nobody uses it any more.
                drop(unsafe { Box::from_raw(p.as_ptr()) });
            }
        });
    }

    /// A joiner takes back the child it put, as a thief tries to steal it
    /// (`processor/inline.rs`): exactly one runs it, the winner sees what
    /// the spawner wrote, a joiner that lost sees the thief's completion
    /// before it goes on, and a take-back never takes another item.
    #[test]
    fn loom_joiner_takes_back_its_child_or_a_thief_has_it() {
        loom::model(|| {
            let slot = Arc::new(RawSlot::<Item>::new());
            let done = Arc::new(crate::loom::AtomicBool::new(false));
            let thief = {
                let (slot, done) = (slot.clone(), done.clone());
                loom::thread::spawn(move || {
                    let seen = slot.peek();
                    let got = slot.take_if(seen).map(claim);
                    if got == Some(1) {
                        // Runs the child and completes it (lifecycle.rs: release).
                        done.store(true, Ordering::Release);
                    }
                    got
                })
            };
            let (child, other) = (item(1), item(2));
            publish(child);
            assert!(slot.put(child, true).is_none());
            let inline = slot.take_back(child, true).map(claim);
            if inline.is_none() {
                // The thief has it: the join parks until its completion.
                while !done.load(Ordering::Acquire) {
                    loom::thread::yield_now();
                }
            }
            publish(other);
            let displaced = slot.put(other, true).map(claim);
            assert_eq!(displaced, None, "the child left the slot, to us or to the thief");
            assert!(slot.take_back(child, true).is_none(), "a take-back takes only its child");
            let stolen = thief.join().unwrap();
            let left = slot.take(true).map(claim);
            let mut got: Vec<usize> = [inline, stolen, left].into_iter().flatten().collect();
            got.sort_unstable();
            assert_eq!(got, [1, 2], "each item taken exactly once");
            assert_eq!(inline.is_some(), stolen != Some(1), "exactly one ran the child");
            for p in [child, other] {
                // SAFETY: leaked from a box by `item`; nobody uses it any more.
                drop(unsafe { Box::from_raw(p.as_ptr()) });
            }
        });
    }
}
