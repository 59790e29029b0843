//! The x86_64 clearing routines: `rep stosb`, AVX2 and AVX-512F stores, and non-temporal
//! (streaming) stores, chosen at run time by CPU feature detection. Elsewhere, or on a CPU
//! without the feature, [`available`] gives the reason and the probe skips.
//!
//! This file and `routines.rs` are the only places with `unsafe` in the memory lab; the
//! inline assembly is one instruction (`rep stosb`) and an empty compiler barrier.
//!
//! # Shape of the vector routines (glibc's memset does the same)
//! Short lengths are cleared by two possibly overlapping stores of the largest width that
//! fits (1..=3 bytes: u16/u8; 4..=7: two u32; 8..=15: two u64; 16..=31: two 16-byte stores),
//! so no length needs a loop. From one vector width up: an unaligned vector store at `p` and
//! one ending at `p+len`, then aligned stores from the first boundary after `p`, four per
//! iteration, while a whole vector still fits; the tail store already covers what is left.
//! The aligned stores are volatile so that LLVM cannot turn the loop back into a `memset`
//! call (see `routines.rs`); they stay single `vmovdqa`/`vmovdqa64` instructions.
//!
//! Non-temporal stores write whole 64-byte lines around the cache (write-combining), so the
//! loop only streams full, aligned lines; the partial lines at both ends get ordinary stores,
//! never mixed with streaming stores on one line. An `sfence` at the end orders the
//! streaming stores before anything the caller does next.

use super::ClearFn;

/// The x86_64 routines, as `routines.rs`'s [`super::Routine`] names them (this file does
/// not import that list: the list imports this file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// `rep stosb`.
    RepStosb,
    /// AVX2 32-byte stores.
    Avx2,
    /// AVX-512F 64-byte stores.
    Avx512,
    /// Non-temporal SSE2 stores of whole lines.
    NonTemporal,
}

impl Isa {
    /// The routine's name, the `routine` parameter's value.
    pub fn name(self) -> &'static str {
        match self {
            Isa::RepStosb => "rep_stosb",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::NonTemporal => "nt",
        }
    }
}

/// `Ok` when `r` can run on this CPU, else why not.
pub fn available(r: Isa) -> Result<(), String> {
    imp::available(r)
}

/// The clearing function for an x86 routine that can run here.
pub fn clear_fn(r: Isa) -> Option<ClearFn> {
    imp::clear_fn(r)
}

/// The CPU features that decide how fast these routines are, for the notes of a result:
/// `erms`/`fsrm` (fast `rep stosb`), `avx2`, `avx512f`. Empty off x86_64.
pub fn features() -> Vec<&'static str> {
    imp::features()
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use super::*;

    pub fn available(r: Isa) -> Result<(), String> {
        Err(format!("{} is an x86_64 routine; this is {}", r.name(), std::env::consts::ARCH))
    }

    pub fn clear_fn(_: Isa) -> Option<ClearFn> {
        None
    }

    pub fn features() -> Vec<&'static str> {
        Vec::new()
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::*;
    use std::arch::x86_64::*;

    pub fn available(r: Isa) -> Result<(), String> {
        match r {
            // rep stosb and SSE2 are part of every x86_64 CPU (ERMS only makes rep fast).
            Isa::RepStosb | Isa::NonTemporal => Ok(()),
            Isa::Avx2 if is_x86_feature_detected!("avx2") => Ok(()),
            Isa::Avx2 => Err("the CPU lacks AVX2".into()),
            Isa::Avx512 if is_x86_feature_detected!("avx512f") => Ok(()),
            Isa::Avx512 => Err("the CPU lacks AVX-512F".into()),
        }
    }

    pub fn clear_fn(r: Isa) -> Option<ClearFn> {
        available(r).ok()?;
        Some(match r {
            Isa::RepStosb => rep_stosb,
            Isa::Avx2 => avx2,
            Isa::Avx512 => avx512,
            Isa::NonTemporal => non_temporal,
        })
    }

    pub fn features() -> Vec<&'static str> {
        static FEATURES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        FEATURES.get_or_init(read_features).clone()
    }

    fn read_features() -> Vec<&'static str> {
        let flags = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("flags"))
                    .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            })
            .unwrap_or_default();
        let mut v = Vec::new();
        for f in ["erms", "fsrm"] {
            if flags.iter().any(|x| x == f) {
                v.push(f);
            }
        }
        if is_x86_feature_detected!("avx2") {
            v.push("avx2");
        }
        if is_x86_feature_detected!("avx512f") {
            v.push("avx512f");
        }
        v
    }

    /// `rep stosb`: the microcoded string store, one instruction for the whole range. With
    /// ERMS (and FSRM for short lengths) the CPU stores whole lines internally.
    ///
    /// # Safety
    /// `p` valid for writes of `len` bytes.
    #[inline(never)]
    pub unsafe fn rep_stosb(p: *mut u8, len: usize) {
        // SAFETY: stores exactly `len` bytes of AL (0) from `p` upwards: the direction flag is
        // clear at every call boundary (SysV ABI, and Rust's asm! contract); rcx and rdi are
        // declared clobbered; no stack use, flags untouched.
        unsafe {
            std::arch::asm!(
                "rep stosb",
                inout("rcx") len => _,
                inout("rdi") p => _,
                in("al") 0u8,
                options(nostack, preserves_flags)
            );
        }
    }

    /// Clears `len < 32` bytes with two overlapping stores of the widest fitting size.
    ///
    /// # Safety
    /// `p` valid for writes of `len` bytes, `len < 32`.
    #[inline(always)]
    unsafe fn short(p: *mut u8, len: usize) {
        // SAFETY: in every arm each store lies in [p, p+len): the first starts at p, the
        // second ends at p+len, and neither is wider than len.
        unsafe {
            let end = p.add(len);
            if len >= 16 {
                _mm_storeu_si128(p.cast(), _mm_setzero_si128());
                _mm_storeu_si128(end.sub(16).cast(), _mm_setzero_si128());
            } else if len >= 8 {
                p.cast::<u64>().write_unaligned(0);
                end.sub(8).cast::<u64>().write_unaligned(0);
            } else if len >= 4 {
                p.cast::<u32>().write_unaligned(0);
                end.sub(4).cast::<u32>().write_unaligned(0);
            } else if len >= 2 {
                p.cast::<u16>().write_unaligned(0);
                end.sub(2).cast::<u16>().write_unaligned(0);
            } else if len == 1 {
                p.write(0);
            }
        }
    }

    /// Clears `len < 64` bytes with SSE2 stores (overlapping 16-byte pairs).
    ///
    /// # Safety
    /// `p` valid for writes of `len` bytes, `len < 64`.
    #[inline(always)]
    unsafe fn below_line(p: *mut u8, len: usize) {
        if len < 32 {
            // SAFETY: forwarded contract, len < 32.
            unsafe { short(p, len) };
            return;
        }
        // SAFETY: 32 <= len < 64: stores at 0, 16, len-32, len-16, each 16 bytes, all inside.
        unsafe {
            let z = _mm_setzero_si128();
            let end = p.add(len);
            _mm_storeu_si128(p.cast(), z);
            _mm_storeu_si128(p.add(16).cast(), z);
            _mm_storeu_si128(end.sub(32).cast(), z);
            _mm_storeu_si128(end.sub(16).cast(), z);
        }
    }

    /// Bytes from `q` to `end`.
    #[inline(always)]
    fn left(q: *mut u8, end: *mut u8) -> usize {
        end as usize - q as usize
    }

    /// The first `align`-byte boundary strictly after `p` (at most `align` bytes on).
    #[inline(always)]
    fn next_boundary(p: *mut u8, align: usize) -> *mut u8 {
        p.wrapping_add(align - (p as usize & (align - 1)))
    }

    /// AVX2: 32-byte stores (see the module doc for the shape).
    ///
    /// # Safety
    /// `p` valid for writes of `len` bytes; the CPU supports AVX2.
    #[inline(never)]
    #[target_feature(enable = "avx2")]
    pub unsafe fn avx2(p: *mut u8, len: usize) {
        if len < 32 {
            // SAFETY: forwarded contract, len < 32.
            unsafe { short(p, len) };
            return;
        }
        let z = _mm256_setzero_si256();
        // SAFETY: len >= 32, so the stores at p and at p+len-32 are inside the range; `q`
        // starts at most 32 bytes after p (so q <= end) and every aligned store in the loops
        // ends at or before `end`. Aligned volatile stores of __m256i need 32-byte alignment,
        // which `next_boundary` gives.
        unsafe {
            let end = p.add(len);
            _mm256_storeu_si256(p.cast(), z);
            _mm256_storeu_si256(end.sub(32).cast(), z);
            let mut q = next_boundary(p, 32);
            while left(q, end) >= 128 {
                let v = q.cast::<__m256i>();
                v.write_volatile(z);
                v.add(1).write_volatile(z);
                v.add(2).write_volatile(z);
                v.add(3).write_volatile(z);
                q = q.add(128);
            }
            while left(q, end) >= 32 {
                q.cast::<__m256i>().write_volatile(z);
                q = q.add(32);
            }
        }
    }

    /// AVX-512F: 64-byte stores (a whole cache line each).
    ///
    /// # Safety
    /// `p` valid for writes of `len` bytes; the CPU supports AVX-512F.
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512(p: *mut u8, len: usize) {
        if len < 32 {
            // SAFETY: forwarded contract, len < 32.
            unsafe { short(p, len) };
            return;
        }
        if len < 64 {
            let z = _mm256_setzero_si256();
            // SAFETY: 32 <= len < 64: two 32-byte stores, at p and ending at p+len.
            unsafe {
                _mm256_storeu_si256(p.cast(), z);
                _mm256_storeu_si256(p.add(len - 32).cast(), z);
            }
            return;
        }
        let z = _mm512_setzero_si512();
        // SAFETY: as in `avx2`, with 64-byte vectors and 64-byte alignment.
        unsafe {
            let end = p.add(len);
            _mm512_storeu_si512(p.cast(), z);
            _mm512_storeu_si512(end.sub(64).cast(), z);
            let mut q = next_boundary(p, 64);
            while left(q, end) >= 256 {
                let v = q.cast::<__m512i>();
                v.write_volatile(z);
                v.add(1).write_volatile(z);
                v.add(2).write_volatile(z);
                v.add(3).write_volatile(z);
                q = q.add(256);
            }
            while left(q, end) >= 64 {
                q.cast::<__m512i>().write_volatile(z);
                q = q.add(64);
            }
        }
    }

    /// Below this length streaming is pointless (a few lines) and ordinary stores are used.
    const NT_MIN: usize = 256;

    /// Non-temporal SSE2 stores (`movntdq`, baseline on x86_64) of whole aligned lines, with
    /// ordinary stores for the partial lines at both ends, then `sfence`.
    ///
    /// # Safety
    /// `p` valid for writes of `len` bytes.
    #[inline(never)]
    pub unsafe fn non_temporal(p: *mut u8, len: usize) {
        // SAFETY: every store below lies in [p, p+len): `below_line` gets sub-ranges of it
        // (each shorter than 64 bytes); the 16-byte stores sit at p and end at p+len, the
        // aligned loop stores 16 bytes only while 16 remain, the streaming loop 64 aligned
        // bytes only while 64 remain (`first` is 64-aligned, so every `q` is).
        unsafe {
            let z = _mm_setzero_si128();
            let end = p.add(len);
            if len < NT_MIN {
                if len < 64 {
                    below_line(p, len);
                    return;
                }
                _mm_storeu_si128(p.cast(), z);
                _mm_storeu_si128(end.sub(16).cast(), z);
                let mut q = next_boundary(p, 16);
                while left(q, end) >= 16 {
                    // Volatile: as a plain store, LLVM turns this loop into a memset call.
                    q.cast::<__m128i>().write_volatile(z);
                    q = q.add(16);
                }
                return;
            }
            // Head: the partial line before the first 64-byte boundary (0..63 bytes).
            let first = if (p as usize).is_multiple_of(64) { p } else { next_boundary(p, 64) };
            below_line(p, left(p, first));
            let mut q = first;
            while left(q, end) >= 64 {
                let v = q.cast::<__m128i>();
                _mm_stream_si128(v, z);
                _mm_stream_si128(v.add(1), z);
                _mm_stream_si128(v.add(2), z);
                _mm_stream_si128(v.add(3), z);
                q = q.add(64);
            }
            // Tail: the partial last line (0..63 bytes).
            below_line(q, left(q, end));
            _mm_sfence();
        }
    }
}
