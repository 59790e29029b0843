//! The hand-written clearing loops are not `memset` in disguise: a structural check.
//!
//! This test binary defines its own `memset`, which counts calls made on the current thread
//! and clears with a volatile byte loop (it must not call itself). The static linker binds
//! every `memset` reference in the executable, the probes crate included, to this
//! definition rather than to libc's (an object file's definition wins over a shared
//! library's), so a clearing loop that LLVM had rewritten into a `memset` call would bump
//! the counter. `memset` and `write_bytes` are the control: they must bump it, or the
//! interposer is not in the path and the check would prove nothing.
//!
//! The C loops (`c_*`, built by build.rs with gcc/clang at -O0/-O2/-O3, no volatile) are
//! the exception by design: each must call memset exactly when `nm` found an undefined
//! `memset` in its object.
//!
//! The check is about the code the optimiser produced, so it means most in an optimised
//! build, the one `schedlab` ships: `cargo test --release -p schedlab-probes --test
//! no_memset`. (Unoptimised builds never form memset from loops; there it checks the
//! plumbing.) The benchmark gives the second, independent proof: `schedlab mem` prints each
//! loop's time per byte beside memset's.

use std::cell::Cell;

use schedlab_probes::mem::Routine;

thread_local! {
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

/// The interposed `memset`: counts, then clears byte by byte.
///
/// # Safety
/// `s` valid for writes of `n` bytes (C's contract).
#[no_mangle]
pub unsafe extern "C" fn memset(s: *mut u8, c: i32, n: usize) -> *mut u8 {
    // A const-initialised thread-local Cell needs no lazy initialisation and no destructor,
    // so this cannot allocate (or recurse into memset).
    CALLS.with(|k| k.set(k.get() + 1));
    for i in 0..n {
        // SAFETY: i < n, inside the caller's range; volatile so this loop is never itself
        // turned into a call to memset.
        unsafe { s.add(i).write_volatile(c as u8) };
    }
    s
}

fn calls() -> usize {
    CALLS.with(|k| k.get())
}

#[test]
fn hand_written_loops_never_call_memset_and_libc_ones_do() {
    let mut buf = vec![0xA5u8; (1 << 16) + 64];
    let p = buf.as_mut_ptr();
    for r in Routine::ALL.into_iter().filter(|r| !r.is_alloc()) {
        let Some(f) = r.clear_fn() else {
            eprintln!("{r}: {}", r.available().unwrap_err());
            continue;
        };
        let mut total = 0;
        for (off, len) in [(0, 31), (2, 100), (1, 200), (0, 4096), (3, 1000), (1, 65_535)] {
            let before = calls();
            // SAFETY: off + len < buf.len().
            unsafe { f(p.add(off), len) };
            let made = calls() - before;
            total += made;
            match r {
                // The C loops are what their compiler made of them: checked below, against
                // what `nm` found in their objects.
                Routine::C(_) => {}
                // The hybrid's wide half may be memset (a CPU without AVX2); its loop may not.
                Routine::Hybrid if len >= schedlab_probes::mem::routines::HYBRID_BELOW => {}
                _ if r.is_libc_memset() => assert!(
                    made >= 1,
                    "{r} did not reach the interposed memset: the check is vacuous"
                ),
                _ => assert_eq!(made, 0, "{r} called memset {made} times for {len} bytes"),
            }
        }
        // Issue 26: a C loop calls memset at run time exactly when build.rs's `nm -u` said
        // its object does (two independent looks at what the compiler did).
        if let Routine::C(c) = r {
            let said = c.calls_memset().expect("built");
            assert_eq!(total > 0, said, "{r}: nm said calls_memset={said}, the run made {total}");
        }
    }
    assert!(buf[..(1 << 16) - 1].iter().skip(1).all(|&b| b == 0));
}
