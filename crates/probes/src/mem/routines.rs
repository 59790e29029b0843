//! The clearing routines of the memory lab, each clearing exactly `[p, p+len)`, and the
//! allocations that hand out zeroed memory.
//!
//! The portable routines live here; the x86_64 ones (`rep stosb`, AVX2, AVX-512, non-temporal)
//! in `super::x86`. Every routine is `#[inline(never)]`, so the benchmark times one real call
//! per clear, as the seed's 68K routines were called (seed 004).
//!
//! # Keeping the loops honest
//! LLVM, like the gcc of the seed's thread (which needed `-fno-builtin`), recognises a loop
//! that stores zeros and replaces it with a call to `memset` (LoopIdiomRecognize); with that,
//! the "byte loop" would measure glibc. Every store in the hand-written loops below is a
//! `write_volatile`. The language guarantees that volatile accesses are neither elided nor
//! merged, and LoopIdiomRecognize skips volatile stores outright (`isUnordered()` is false for
//! them), so each loop performs exactly one store of its width per element: the algorithm
//! the seed timed. Other ways cost more than they buy: `black_box` on the pointer every
//! iteration forces it through the stack (a store and a reload on the loop-carried chain,
//! ~5 cycles per byte), and an empty `asm!` barrier relies on how LLVM treats inline
//! assembly rather than on a documented guarantee. Volatile leaves the compiler free to
//! choose the loop shape (it may turn the down-counter into an end-pointer compare, as gcc
//! did in the seed's thread), but not the number or width of stores.
//!
//! The proof is twofold: `tests/no_memset.rs` interposes a counting `memset` and checks
//! that none of these routines calls it (with `memset` itself as the control), and
//! `schedlab mem` prints each loop's time per byte next to memset's, a slope no memset has.
//!
//! # Contract
//! `clear` routines: `p` valid for writes of `len` bytes, any alignment, `len` may be 0.
//! Nothing outside `[p, p+len)` is written (the property tests check the bytes on either
//! side). Allocation routines return `len` zero bytes that the caller owns.

use std::hint::black_box;

use super::cloops::CLoop;
use super::x86::{self, Isa};
use super::ClearFn;

/// Every routine the lab measures, in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Routine {
    /// One byte per iteration, counting the bytes left down to zero (seed: "Byte").
    ByteCount,
    /// One byte per iteration until the pointer reaches the end (seed: "ByteEndPtr").
    ByteEnd,
    /// 16-bit stores (seed: Apple's NewPtrClear, "AppleWord"), with a byte at an odd start
    /// and at an odd end, which Apple's could skip because the Memory Manager only handed
    /// out even addresses and lengths.
    Word16,
    /// Byte head to a 4-byte boundary, 32-bit stores unrolled by 8, 32-bit then byte tail
    /// (seed: the "fancy" Metrowerks/David routines).
    U32x8,
    /// The same with 64-bit stores: today's register width.
    U64x8,
    /// `core::ptr::write_bytes`, what Rust code writes; a call to libc `memset`.
    WriteBytes,
    /// libc `memset` (glibc picks an implementation for the CPU at load time).
    Memset,
    /// x86_64 `rep stosb` (fast with ERMS/FSRM).
    RepStosb,
    /// AVX2: 32-byte stores, aligned loop unrolled by 4, overlapping head and tail.
    Avx2,
    /// AVX-512F: the same with 64-byte stores.
    Avx512,
    /// Non-temporal (streaming) SSE2 stores of whole cache lines, then `sfence`.
    NonTemporal,
    /// `calloc` + touch every page + `free`.
    Calloc,
    /// `malloc` + `memset` + `free` (what calloc must do for recycled memory).
    MallocMemset,
    /// `mmap` of fresh anonymous pages + touch every page + `munmap`.
    Mmap,
    /// `vec![0u8; n]` + touch every page + drop (Rust's `alloc_zeroed`, i.e. calloc).
    VecZeroed,
    /// The hybrid of the seed's thread (issue 26): the simple 64-bit loop below
    /// [`HYBRID_BELOW`] bytes, the best wide routine of this CPU from there ([`hybrid`]).
    Hybrid,
    /// One of `csrc/clear_loops.c`'s loops as a C compiler built it ([`super::cloops`]).
    C(CLoop),
}

impl Routine {
    /// Every routine, in display order.
    pub const ALL: [Routine; 28] = [
        Routine::ByteCount,
        Routine::ByteEnd,
        Routine::Word16,
        Routine::U32x8,
        Routine::U64x8,
        Routine::WriteBytes,
        Routine::Memset,
        Routine::RepStosb,
        Routine::Avx2,
        Routine::Avx512,
        Routine::NonTemporal,
        Routine::Calloc,
        Routine::MallocMemset,
        Routine::Mmap,
        Routine::VecZeroed,
        // Issue 26: the hybrid, and the C loops per compiler and level.
        Routine::Hybrid,
        Routine::C(CLoop(0)),
        Routine::C(CLoop(1)),
        Routine::C(CLoop(2)),
        Routine::C(CLoop(3)),
        Routine::C(CLoop(4)),
        Routine::C(CLoop(5)),
        Routine::C(CLoop(6)),
        Routine::C(CLoop(7)),
        Routine::C(CLoop(8)),
        Routine::C(CLoop(9)),
        Routine::C(CLoop(10)),
        Routine::C(CLoop(11)),
    ];

    /// The stable name used as the `routine` parameter.
    pub fn name(self) -> &'static str {
        match self {
            Routine::ByteCount => "byte_count",
            Routine::ByteEnd => "byte_end",
            Routine::Word16 => "word16",
            Routine::U32x8 => "u32x8",
            Routine::U64x8 => "u64x8",
            Routine::WriteBytes => "write_bytes",
            Routine::Memset => "memset",
            Routine::RepStosb => Isa::RepStosb.name(),
            Routine::Avx2 => Isa::Avx2.name(),
            Routine::Avx512 => Isa::Avx512.name(),
            Routine::NonTemporal => Isa::NonTemporal.name(),
            Routine::Calloc => "calloc",
            Routine::MallocMemset => "malloc_memset",
            Routine::Mmap => "mmap",
            Routine::VecZeroed => "vec_zeroed",
            Routine::Hybrid => "hybrid",
            Routine::C(c) => c.name(),
        }
    }

    /// Parses [`Routine::name`].
    pub fn from_name(s: &str) -> Option<Routine> {
        Routine::ALL.into_iter().find(|r| r.name() == s)
    }

    /// True for the routines that allocate zeroed memory rather than clear a given buffer.
    pub fn is_alloc(self) -> bool {
        matches!(self, Routine::Calloc | Routine::MallocMemset | Routine::Mmap | Routine::VecZeroed)
    }

    /// True for the routines that are (or call) libc `memset`: the yardstick, not a
    /// competitor, when asking how close our own routines come to it.
    pub fn is_libc_memset(self) -> bool {
        matches!(self, Routine::Memset | Routine::WriteBytes)
    }

    /// The family the analysis groups it in: `loop` (hand-written, the seed's routines),
    /// `libc` (memset and what calls it), `isa` (x86_64-specific), `alloc`.
    pub fn kind(self) -> &'static str {
        match self {
            Routine::ByteCount
            | Routine::ByteEnd
            | Routine::Word16
            | Routine::U32x8
            | Routine::U64x8 => "loop",
            Routine::WriteBytes | Routine::Memset => "libc",
            Routine::RepStosb | Routine::Avx2 | Routine::Avx512 | Routine::NonTemporal => "isa",
            Routine::Calloc | Routine::MallocMemset | Routine::Mmap | Routine::VecZeroed => "alloc",
            Routine::Hybrid => "isa",
            // A loop the compiler made a call to memset is memset's figure.
            Routine::C(c) if c.calls_memset() == Some(true) => "libc",
            Routine::C(_) => "loop",
        }
    }

    /// The x86_64 routine this is, if it is one.
    fn isa(self) -> Option<Isa> {
        match self {
            Routine::RepStosb => Some(Isa::RepStosb),
            Routine::Avx2 => Some(Isa::Avx2),
            Routine::Avx512 => Some(Isa::Avx512),
            Routine::NonTemporal => Some(Isa::NonTemporal),
            _ => None,
        }
    }

    /// `Ok` when this routine can run on this CPU, else the reason it cannot.
    pub fn available(self) -> Result<(), String> {
        if let Some(isa) = self.isa() {
            return x86::available(isa);
        }
        match self {
            Routine::C(c) => c.function().map(|_| ()),
            _ => Ok(()),
        }
    }

    /// The clearing function, for the routines that clear a given buffer and can run here.
    pub fn clear_fn(self) -> Option<ClearFn> {
        if self.available().is_err() {
            return None;
        }
        Some(match self {
            Routine::ByteCount => byte_count,
            Routine::ByteEnd => byte_end,
            Routine::Word16 => word16,
            Routine::U32x8 => u32x8,
            Routine::U64x8 => u64x8,
            Routine::WriteBytes => write_bytes,
            Routine::Memset => memset,
            Routine::RepStosb | Routine::Avx2 | Routine::Avx512 | Routine::NonTemporal => {
                x86::clear_fn(self.isa()?)?
            }
            Routine::Hybrid => hybrid,
            Routine::C(c) => c.clear_fn()?,
            Routine::Calloc | Routine::MallocMemset | Routine::Mmap | Routine::VecZeroed => {
                return None
            }
        })
    }
}

impl std::fmt::Display for Routine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Tells the compiler that `p`'s memory may be read and written here, at no cost: no
/// instruction is emitted. Called before every timed call so that LLVM cannot treat a call
/// that rewrites the same zeros as a dead store and drop it, nor hoist it out of the loop.
/// (`black_box(p)` would do the same but spills the pointer to the stack on every call.)
#[inline(always)]
pub fn escape(p: *mut u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the assembly is empty: it reads no memory, writes none and touches no
    // register other than naming `p` as an input. Without `nomem`, the compiler must assume
    // it reads and writes any memory `p` can reach, which is the point.
    unsafe {
        std::arch::asm!("/* {0} */", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    black_box(p);
}

/// Seed 004's `MemorySetByteCounter`: store a byte, count down the bytes left.
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(never)]
pub unsafe fn byte_count(p: *mut u8, len: usize) {
    let mut q = p;
    let mut left = len;
    while left != 0 {
        // SAFETY: `left` bytes remain from `q`, all inside [p, p+len) by the caller's
        // contract; volatile keeps this one byte store (see the module doc).
        unsafe {
            q.write_volatile(0);
            q = q.add(1);
        }
        left -= 1;
    }
}

/// Seed 004's `MemorySetByteEndPtr`: store a byte, compare the pointer with the end.
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(never)]
pub unsafe fn byte_end(p: *mut u8, len: usize) {
    // SAFETY: `p + len` is the one-past-the-end pointer of the caller's valid range.
    let end = unsafe { p.add(len) };
    let mut q = p;
    while q != end {
        // SAFETY: p <= q < end, inside the caller's range.
        unsafe {
            q.write_volatile(0);
            q = q.add(1);
        }
    }
}

/// Apple's NewPtrClear loop (seed 004: `Clr.W` per word), made safe for any address and
/// length: a byte first when `p` is odd, then 16-bit stores, then a byte when one is left.
/// (Apple's relied on even addresses and lengths; Metrowerks' memset mishandled odd ones and
/// left the end bytes uncleared, the seed's bug. This one is checked byte-exact.)
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(never)]
pub unsafe fn word16(p: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: one past the end of the caller's range.
    let end = unsafe { p.add(len) };
    let mut q = p;
    if (q as usize) & 1 == 1 {
        // SAFETY: len >= 1, so p itself is in range.
        unsafe {
            q.write_volatile(0);
            q = q.add(1);
        }
    }
    let mut words = (end as usize - q as usize) / 2;
    let mut w = q.cast::<u16>();
    while words != 0 {
        // SAFETY: `w` is 2-aligned (q was made even) and two bytes remain before `end`.
        unsafe {
            w.write_volatile(0);
            w = w.add(1);
        }
        words -= 1;
    }
    let q = w.cast::<u8>();
    if q != end {
        // SAFETY: exactly one byte, q == end - 1, is left.
        unsafe { q.write_volatile(0) };
    }
}

/// A machine word the unrolled routines store.
trait Word: Copy {
    const ZERO: Self;
}
impl Word for u32 {
    const ZERO: u32 = 0;
}
impl Word for u64 {
    const ZERO: u64 = 0;
}

/// The seed's "fancy" algorithm, for words of type `W`:
/// 1. bytes until `p` is `W`-aligned (stores never straddle a word boundary);
/// 2. eight `W` stores per iteration while at least eight words remain;
/// 3. one `W` store per iteration while a word remains;
/// 4. bytes for the rest.
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(always)]
unsafe fn unrolled<W: Word>(p: *mut u8, len: usize) {
    let size = std::mem::size_of::<W>();
    // SAFETY: one past the end of the caller's range.
    let end = unsafe { p.add(len) };
    let mut q = p;
    while q != end && !(q as usize).is_multiple_of(size) {
        // SAFETY: q < end.
        unsafe {
            q.write_volatile(0);
            q = q.add(1);
        }
    }
    let mut words = (end as usize - q as usize) / size;
    let mut w = q.cast::<W>();
    while words >= 8 {
        // SAFETY: `w` is aligned for W and 8 whole words lie before `end`.
        unsafe {
            w.write_volatile(W::ZERO);
            w.add(1).write_volatile(W::ZERO);
            w.add(2).write_volatile(W::ZERO);
            w.add(3).write_volatile(W::ZERO);
            w.add(4).write_volatile(W::ZERO);
            w.add(5).write_volatile(W::ZERO);
            w.add(6).write_volatile(W::ZERO);
            w.add(7).write_volatile(W::ZERO);
            w = w.add(8);
        }
        words -= 8;
    }
    while words != 0 {
        // SAFETY: aligned, and one whole word lies before `end`.
        unsafe {
            w.write_volatile(W::ZERO);
            w = w.add(1);
        }
        words -= 1;
    }
    let mut q = w.cast::<u8>();
    while q != end {
        // SAFETY: q < end.
        unsafe {
            q.write_volatile(0);
            q = q.add(1);
        }
    }
}

/// `unrolled` with 32-bit words: the seed's Metrowerks/David routine.
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(never)]
pub unsafe fn u32x8(p: *mut u8, len: usize) {
    // SAFETY: the caller's contract is unrolled's.
    unsafe { unrolled::<u32>(p, len) }
}

/// `unrolled` with 64-bit words.
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(never)]
pub unsafe fn u64x8(p: *mut u8, len: usize) {
    // SAFETY: the caller's contract is unrolled's.
    unsafe { unrolled::<u64>(p, len) }
}

/// `core::ptr::write_bytes(p, 0, len)`: LLVM's memset intrinsic, a call to libc `memset`
/// for a length it does not know.
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(never)]
pub unsafe fn write_bytes(p: *mut u8, len: usize) {
    // SAFETY: the caller's contract; u8 has no alignment requirement.
    unsafe { std::ptr::write_bytes(p, 0, len) }
}

/// libc `memset(p, 0, len)`.
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(never)]
pub unsafe fn memset(p: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { libc::memset(p.cast(), 0, len) };
}

/// Below this many bytes [`hybrid`] runs the simple loop, from it the wide routine: where
/// `u64x8` stops being within noise of AVX-512 on the lab's host (AMD EPYC VM, quick sweep of
/// 2026-11-27: 2.1 against 1.7 ns at 64 B, 2.4 against 2.1 at 128 B, 4.3 against 1.9 at
/// 256 B; docs/MEMLAB.md, "The hybrid"). The loop never clearly beat the wide routines there.
pub const HYBRID_BELOW: usize = 128;

/// The wide routine [`hybrid`] hands large clears to: AVX-512 stores where the CPU has them,
/// else AVX2, else libc `memset` (the fastest from 4 KiB to 512 KiB on the lab's host, and
/// within noise of memset above). Chosen once.
fn hybrid_wide() -> ClearFn {
    static WIDE: std::sync::OnceLock<ClearFn> = std::sync::OnceLock::new();
    *WIDE.get_or_init(|| {
        [Isa::Avx512, Isa::Avx2].into_iter().find_map(x86::clear_fn).unwrap_or(memset)
    })
}

/// The hybrid the seed's thread proposed ("a clear length threshold, anything higher enters
/// a highly optimized clearer, anything shorter uses the original low-overhead version"):
/// [`u64x8`]'s loop inline below [`HYBRID_BELOW`] bytes, `hybrid_wide` from there.
///
/// # Safety
/// `p` valid for writes of `len` bytes.
#[inline(never)]
pub unsafe fn hybrid(p: *mut u8, len: usize) {
    if len < HYBRID_BELOW {
        // SAFETY: the caller's contract is unrolled's.
        unsafe { unrolled::<u64>(p, len) }
    } else {
        // SAFETY: the caller's contract is every clearing routine's.
        unsafe { hybrid_wide()(p, len) }
    }
}

/// The page size used to touch freshly allocated blocks.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}

/// A block of zeroed memory from one of the allocation routines, released on drop with the
/// call that matches how it was obtained.
pub struct Zeroed {
    ptr: *mut u8,
    len: usize,
    how: How,
}

enum How {
    /// From calloc or malloc: `free`.
    Libc,
    /// From mmap of `map_len` bytes: `munmap`.
    Mapped { map_len: usize },
    /// A Vec, dropped normally.
    Vec(#[allow(dead_code)] Vec<u8>),
}

impl Zeroed {
    /// Obtains `len` zeroed bytes with `routine` (an allocation routine).
    ///
    /// # Errors
    /// The allocation failed, or `routine` is not an allocation routine.
    pub fn new(routine: Routine, len: usize) -> Result<Zeroed, String> {
        // One byte at least: calloc(0)/malloc(0) may return NULL legitimately.
        let n = len.max(1);
        let (ptr, how) = match routine {
            Routine::Calloc => {
                // SAFETY: plain allocation; checked for NULL below.
                (unsafe { libc::calloc(n, 1) }.cast::<u8>(), How::Libc)
            }
            Routine::MallocMemset => {
                // SAFETY: plain allocation; checked for NULL before the memset.
                let p = unsafe { libc::malloc(n) }.cast::<u8>();
                if !p.is_null() {
                    // SAFETY: `p` is a fresh block of n >= len bytes.
                    unsafe { libc::memset(p.cast(), 0, len) };
                }
                (p, How::Libc)
            }
            Routine::Mmap => {
                let map_len = n.div_ceil(page_size()) * page_size();
                // SAFETY: a fresh private anonymous mapping at an address of the kernel's
                // choosing; nothing aliases it.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        map_len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                if p == libc::MAP_FAILED {
                    return Err(format!(
                        "mmap {map_len} bytes: {}",
                        std::io::Error::last_os_error()
                    ));
                }
                (p.cast::<u8>(), How::Mapped { map_len })
            }
            Routine::VecZeroed => {
                let mut v = vec![0u8; n];
                (v.as_mut_ptr(), How::Vec(v))
            }
            other => return Err(format!("{other} is not an allocation routine")),
        };
        if ptr.is_null() {
            return Err(format!("{routine} of {n} bytes returned NULL"));
        }
        Ok(Zeroed { ptr, len, how })
    }

    /// The block's address.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The block's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` holds at least `len` initialised (zeroed) bytes that we own, and no
        // mutable access exists while the borrow lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Writes a zero to one byte of every page the block spans, so memory the allocator got
    /// lazily from the kernel (calloc and malloc above the mmap threshold, mmap itself) is
    /// faulted in and zeroed by the kernel now, as it would be when first used. Without this,
    /// calloc of 64 MiB would look free: it only defers the cost to the first touch. A read
    /// would not do: it maps the shared zero page and zeroes nothing.
    pub fn touch(&self) {
        let page = page_size();
        let mut off = 0;
        while off < self.len {
            // SAFETY: off < len, inside the block; volatile so the store (and the fault it
            // causes) happens; writing 0 keeps the block zeroed.
            unsafe { self.ptr.add(off).write_volatile(0) };
            off += page;
        }
        if self.len > 0 {
            // SAFETY: the last byte of the block (its page may not be reached by the stride).
            unsafe { self.ptr.add(self.len - 1).write_volatile(0) };
        }
    }
}

impl Drop for Zeroed {
    fn drop(&mut self) {
        match self.how {
            // SAFETY: `ptr` came from calloc/malloc and is freed once, here.
            How::Libc => unsafe { libc::free(self.ptr.cast()) },
            // SAFETY: exactly the mapping `new` made, unmapped once, here.
            How::Mapped { map_len } => unsafe {
                libc::munmap(self.ptr.cast(), map_len);
            },
            How::Vec(_) => {}
        }
    }
}

/// One timed allocation cycle: obtain `len` zeroed bytes with `routine`, touch every page,
/// release. `#[inline(never)]` like the clearing routines.
///
/// # Errors
/// The allocation failed.
#[inline(never)]
pub fn alloc_cycle(routine: Routine, len: usize) -> Result<(), String> {
    let z = Zeroed::new(routine, len)?;
    z.touch();
    // The block is used as far as the compiler knows: it cannot elide the allocation.
    escape(black_box(z.ptr()));
    drop(z);
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Byte-exact checks of every routine: exhaustive over alignments 0..16 and lengths
    //! 0..300, randomised (proptest) over larger lengths, alignments and fill patterns, plus a
    //! few large fixed cases. Guard bytes on both sides must keep their pattern.
    use super::*;
    use proptest::prelude::*;

    /// Bytes checked on each side of the cleared range: more than any vector store could
    /// overshoot by (64).
    const GUARD: usize = 80;

    /// Clears `len` bytes at offset `align` from a 64-byte boundary of a buffer filled with
    /// `fill` (never zero) and returns an error naming the first wrong byte.
    fn check(routine: Routine, align: usize, len: usize, fill: u8) -> Result<(), String> {
        let f = routine.clear_fn().expect("available clear routine");
        // A 64-byte aligned start inside a Vec, with a guard before and after.
        let mut buf = vec![fill; GUARD + 64 + align + len + GUARD + 64];
        let base = buf.as_ptr() as usize;
        let start = (base + GUARD).next_multiple_of(64) - base + align;
        // SAFETY: [start, start+len) lies inside `buf` (GUARD + 64 slack before, GUARD after).
        unsafe { f(buf.as_mut_ptr().add(start), len) };
        for (i, &b) in buf.iter().enumerate() {
            let rel = i as isize - start as isize;
            if (start..start + len).contains(&i) {
                if b != 0 {
                    return Err(format!(
                        "{routine} align {align} len {len}: byte {rel} not cleared"
                    ));
                }
            } else if b != fill {
                return Err(format!(
                    "{routine} align {align} len {len}: wrote outside the range at offset {rel}"
                ));
            }
        }
        Ok(())
    }

    fn clear_routines() -> Vec<Routine> {
        Routine::ALL.into_iter().filter(|r| r.clear_fn().is_some()).collect()
    }

    #[test]
    fn every_clear_routine_is_byte_exact_for_small_lengths_and_all_alignments() {
        for r in clear_routines() {
            for align in 0..16 {
                for len in 0..300 {
                    check(r, align, len, 0xA5).unwrap();
                }
            }
        }
    }

    #[test]
    fn every_clear_routine_is_byte_exact_for_large_lengths() {
        for r in clear_routines() {
            for (align, len) in [(0, 4096), (1, 4097), (3, 65_535), (7, 65_536 + 63), (63, 1 << 20)]
            {
                check(r, align, len, 0x5A).unwrap();
            }
        }
    }

    #[test]
    fn names_round_trip_and_are_parameter_safe() {
        for r in Routine::ALL {
            assert_eq!(Routine::from_name(r.name()), Some(r));
            assert!(r
                .name()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
        }
        assert_eq!(Routine::from_name("nope"), None);
    }

    #[test]
    fn unavailable_routines_say_why() {
        for r in Routine::ALL {
            match r.available() {
                Ok(()) => assert!(r.is_alloc() || r.clear_fn().is_some(), "{r}"),
                Err(why) => {
                    assert!(!why.is_empty());
                    assert!(r.clear_fn().is_none());
                }
            }
        }
    }

    #[test]
    fn allocation_routines_return_zeroed_memory_even_when_recycled() {
        for r in Routine::ALL.into_iter().filter(|r| r.is_alloc()) {
            for len in [0, 1, 7, 100, 4095, 4096, 4097, 200_000, 3 << 20] {
                // Dirty the heap first so recycled blocks are not zero by luck.
                // SAFETY: plain allocation, filled and freed below; NULL checked.
                unsafe {
                    let d = libc::malloc(len.max(1)).cast::<u8>();
                    assert!(!d.is_null());
                    libc::memset(d.cast(), 0xEE, len.max(1));
                    libc::free(d.cast());
                }
                let z = Zeroed::new(r, len).unwrap();
                assert!(z.as_slice().iter().all(|&b| b == 0), "{r} len {len} not zeroed");
                z.touch();
                assert!(
                    z.as_slice().iter().all(|&b| b == 0),
                    "{r} len {len}: touch wrote non-zero"
                );
                alloc_cycle(r, len).unwrap();
            }
        }
        assert!(Zeroed::new(Routine::Memset, 8).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_lengths_alignments_and_fills_are_byte_exact(
            len in 0usize..70_000,
            align in 0usize..64,
            fill in 1u8..=255,
        ) {
            for r in clear_routines() {
                prop_assert!(check(r, align, len, fill).is_ok(), "{}", check(r, align, len, fill).unwrap_err());
            }
        }
    }
}
