//! The seed's loops as a C compiler builds them (seed 004, issue 26: the thread found that
//! CodeWarrior 7 emitted two instructions per store where Gold 11 emitted one, and that gcc
//! at `-O2` turned a byte loop into a call to `memset` unless given `-fno-builtin`).
//!
//! `csrc/clear_loops.c` holds a byte loop and a 32-bit word loop in plain C (no volatile, no
//! flags). `build.rs` compiles each with gcc and clang (whichever is on PATH when schedlab is
//! built) at `-O0`, `-O2` and `-O3`, one object per loop, links them in, and reads each
//! object's undefined symbols with `nm -u`: an undefined `memset` is a loop the compiler
//! replaced by a call. Each becomes a `mem.clear` routine named `c_{byte,word}_{gcc,clang}_o{0,2,3}`,
//! whose notes say the compiler, its version and `calls_memset=yes|no`; one that was not
//! built is skipped with the reason.

use super::ClearFn;

/// One loop of `csrc/clear_loops.c` as built: the compiler, the level and the loop, and
/// its function with whether it calls `memset`, or why it was not built.
pub struct CLoopBuilt {
    /// `gcc` or `clang`.
    pub compiler: &'static str,
    /// The compiler's first `--version` line (empty when absent).
    pub version: &'static str,
    /// `O0`, `O2`, `O3`.
    pub level: &'static str,
    /// `byte` or `word`.
    pub loop_: &'static str,
    /// The function and whether its object calls `memset`.
    pub built: Result<(unsafe extern "C" fn(*mut u8, usize), bool), &'static str>,
}

include!(concat!(env!("OUT_DIR"), "/clear_loops.rs"));

/// The routine names, in [`BUILT`]'s order (compiler, then level, then loop).
const NAMES: [&str; 12] = [
    "c_byte_gcc_o0",
    "c_word_gcc_o0",
    "c_byte_gcc_o2",
    "c_word_gcc_o2",
    "c_byte_gcc_o3",
    "c_word_gcc_o3",
    "c_byte_clang_o0",
    "c_word_clang_o0",
    "c_byte_clang_o2",
    "c_word_clang_o2",
    "c_byte_clang_o3",
    "c_word_clang_o3",
];

/// A compiled loop: an index into `BUILT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CLoop(pub u8);

impl CLoop {
    fn built(self) -> &'static CLoopBuilt {
        &BUILT[usize::from(self.0)]
    }

    /// The `routine` parameter.
    pub fn name(self) -> &'static str {
        NAMES[usize::from(self.0)]
    }

    /// The compiler's name and version line.
    pub fn compiler(self) -> String {
        let b = self.built();
        if b.version.is_empty() {
            b.compiler.to_string()
        } else {
            b.version.to_string()
        }
    }

    /// Whether the compiler turned the loop into a call to `memset`; `None` when not built.
    pub fn calls_memset(self) -> Option<bool> {
        self.built().built.as_ref().ok().map(|b| b.1)
    }

    /// The C function, or why it was not built.
    pub fn function(self) -> Result<unsafe extern "C" fn(*mut u8, usize), String> {
        self.built().built.as_ref().map(|b| b.0).map_err(|why| (*why).to_string())
    }

    /// The routine as a [`ClearFn`]: a Rust shim calling the C function, chosen by index
    /// (a `ClearFn` is a plain `fn` pointer, so each index has its own shim).
    pub fn clear_fn(self) -> Option<ClearFn> {
        self.function().ok()?;
        Some(SHIMS[usize::from(self.0)])
    }
}

/// Calls [`BUILT`]`[I]`'s function.
///
/// # Safety
/// `p` valid for writes of `len` bytes, and entry `I` built (checked by `clear_fn`).
unsafe fn shim<const I: usize>(p: *mut u8, len: usize) {
    if let Ok((f, _)) = BUILT[I].built {
        // SAFETY: the C loop writes exactly [p, p+len) (its source), the caller's range.
        unsafe { f(p, len) }
    }
}

const SHIMS: [ClearFn; 12] = [
    shim::<0>, shim::<1>, shim::<2>, shim::<3>, shim::<4>, shim::<5>, shim::<6>, shim::<7>,
    shim::<8>, shim::<9>, shim::<10>, shim::<11>,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's order is the names' order.
    #[test]
    fn names_follow_the_build_table() {
        assert_eq!(BUILT.len(), NAMES.len());
        for (b, name) in BUILT.iter().zip(NAMES) {
            assert_eq!(name, format!("c_{}_{}_{}", b.loop_, b.compiler, b.level.to_lowercase()));
        }
    }

    /// Every loop that was built clears exactly its range at every alignment and length up
    /// to 300, whatever the compiler made of it.
    #[test]
    fn built_loops_clear_exactly_their_range() {
        let mut any = false;
        for i in 0..BUILT.len() {
            let c = CLoop(i as u8);
            let Some(f) = c.clear_fn() else {
                eprintln!("{}: {}", c.name(), c.function().unwrap_err());
                continue;
            };
            any = true;
            for align in 0..8 {
                for len in 0..300 {
                    let mut buf = vec![0xA5u8; len + 16];
                    // SAFETY: [align, align + len) lies inside buf.
                    unsafe { f(buf.as_mut_ptr().add(align), len) };
                    assert!(buf[..align].iter().all(|&b| b == 0xA5), "{} before", c.name());
                    assert!(buf[align..align + len].iter().all(|&b| b == 0), "{}", c.name());
                    assert!(buf[align + len..].iter().all(|&b| b == 0xA5), "{} after", c.name());
                }
            }
        }
        // A compiler that was found (it answered --version) built every loop it was given.
        for b in BUILT.iter().filter(|b| !b.version.is_empty()) {
            assert!(
                b.built.is_ok(),
                "{} -{} {}: {:?}",
                b.compiler,
                b.level,
                b.loop_,
                b.built.err()
            );
        }
        assert!(any || BUILT.iter().all(|b| b.version.is_empty()), "a compiler but no loop");
    }

    /// At -O0 no compiler calls memset for a loop (nothing is optimised).
    #[test]
    fn unoptimised_loops_are_loops() {
        for (i, b) in BUILT.iter().enumerate() {
            let c = CLoop(i as u8);
            if b.level == "O0" {
                assert_ne!(c.calls_memset(), Some(true), "{}", c.name());
            }
        }
    }
}
