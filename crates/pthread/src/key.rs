//! Thread-specific data: `pthread_key_create`, `pthread_key_delete`,
//! `pthread_getspecific`, `pthread_setspecific`, and the destructors run
//! when a user thread exits.
//!
//! A key is an index into a table of `PTHREAD_KEYS_MAX` slots, each with a
//! sequence number (odd while the key is in use) and a destructor. A thread
//! keeps `(sequence, value)` pairs by index (`ThreadData::keys`): a value
//! stored under an older sequence belongs to a deleted key and reads as
//! null, so `pthread_key_delete` needs to visit no thread (as glibc's).
//!
//! At exit, up to `PTHREAD_DESTRUCTOR_ITERATIONS` (4) rounds: every non-null
//! value of a live key with a destructor is set to null and the destructor
//! called with it; a destructor may store values again, which the next
//! round sees.

use crate::thread::{current, ThreadData};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const KEYS_MAX: usize = 1024;
const DESTRUCTOR_ITERATIONS: usize = 4;

static SEQ: [AtomicU64; KEYS_MAX] = [const { AtomicU64::new(0) }; KEYS_MAX];
static DTOR: [AtomicUsize; KEYS_MAX] = [const { AtomicUsize::new(0) }; KEYS_MAX];

/// `pthread_key_create`.
///
/// # Safety
///
/// C's contract.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_key_create(
    key: *mut libc::pthread_key_t,
    dtor: Option<unsafe extern "C" fn(*mut c_void)>,
) -> c_int {
    for (i, seq) in SEQ.iter().enumerate() {
        let s = seq.load(Ordering::Relaxed);
        if s % 2 == 0 && seq.compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            DTOR[i].store(dtor.map_or(0, |f| f as usize), Ordering::Release);
            // SAFETY: the caller's out-parameter.
            unsafe { *key = i as libc::pthread_key_t };
            return 0;
        }
    }
    libc::EAGAIN
}

/// `pthread_key_delete`.
#[no_mangle]
pub extern "C-unwind" fn pthread_key_delete(key: libc::pthread_key_t) -> c_int {
    let Some(seq) = SEQ.get(key as usize) else { return libc::EINVAL };
    let s = seq.load(Ordering::Relaxed);
    if s % 2 == 1 && seq.compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
        0
    } else {
        libc::EINVAL
    }
}

/// `pthread_getspecific`.
#[no_mangle]
pub extern "C-unwind" fn pthread_getspecific(key: libc::pthread_key_t) -> *mut c_void {
    let i = key as usize;
    let Some(seq) = SEQ.get(i) else { return std::ptr::null_mut() };
    let d = current();
    // SAFETY: only this thread touches its own values.
    let keys = unsafe { &*d.keys.get() };
    match keys.get(i) {
        Some(&(s, v)) if s == seq.load(Ordering::Acquire) => v,
        _ => std::ptr::null_mut(),
    }
}

/// `pthread_setspecific`.
#[no_mangle]
pub extern "C-unwind" fn pthread_setspecific(
    key: libc::pthread_key_t,
    value: *const c_void,
) -> c_int {
    let i = key as usize;
    let Some(seq) = SEQ.get(i) else { return libc::EINVAL };
    let s = seq.load(Ordering::Acquire);
    if s % 2 == 0 {
        return libc::EINVAL;
    }
    let d = current();
    // SAFETY: only this thread touches its own values.
    let keys = unsafe { &mut *d.keys.get() };
    if keys.len() <= i {
        if keys.try_reserve(i + 1 - keys.len()).is_err() {
            return libc::ENOMEM;
        }
        keys.resize(i + 1, (0, std::ptr::null_mut()));
    }
    keys[i] = (s, value.cast_mut());
    0
}

/// Runs the exiting thread's destructors (module docs).
pub(crate) fn run_destructors(d: &ThreadData) {
    for _ in 0..DESTRUCTOR_ITERATIONS {
        let mut called = false;
        let mut i = 0;
        // SAFETY: only this thread touches its own values; the borrow ends
        // before the destructor, which may call setspecific.
        while let Some(&(s, v)) = unsafe { (&*d.keys.get()).get(i) } {
            i += 1;
            if v.is_null() || s != SEQ[i - 1].load(Ordering::Acquire) {
                continue;
            }
            // SAFETY: as above.
            unsafe { (&mut *d.keys.get())[i - 1].1 = std::ptr::null_mut() };
            let f = DTOR[i - 1].load(Ordering::Acquire);
            if f != 0 {
                // SAFETY: the destructor the program registered for this key.
                let f: unsafe extern "C" fn(*mut c_void) = unsafe { std::mem::transmute(f) };
                // SAFETY: called with the value, as POSIX says.
                unsafe { f(v) };
                called = true;
            }
        }
        if !called {
            break;
        }
    }
}
