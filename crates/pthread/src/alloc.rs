//! The library's own memory (its Rust code's and the runtime's) comes from
//! glibc's `malloc` — `__libc_malloc` and its kin, which glibc exports for
//! this — whatever `malloc` the program links.
//!
//! A program may bring its own allocator: `rustc` links jemalloc in place of
//! glibc's, and jemalloc keeps per-thread state in the executable's TLS,
//! registered under a `pthread` key and torn down by that key's destructor
//! at a thread's exit. Through the `malloc` symbol the library's exit path
//! (the runtime's completion of the thread, the joiner's wake-up) allocated
//! and freed on the exiting thread's block after that teardown: jemalloc
//! made the state again, linked into its lists, and the block was then
//! reused for a new thread with its TLS copied afresh under those lists.
//! Every `rustc` under `schedlab exec` died so, or hung. glibc's allocator
//! is the one the library already manages per block (`glibc.rs`, "malloc's
//! per-thread state"), and no thread exit tears it down.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
}

/// glibc's `malloc` for the library's own allocations (module docs).
pub(crate) struct GlibcMalloc;

/// The alignment glibc's `malloc` gives every block on x86-64.
const MIN_ALIGN: usize = 16;

/// Whether plain `malloc` gives `layout` its alignment (as `std`'s `System`
/// decides).
fn plain(layout: Layout) -> bool {
    layout.align() <= MIN_ALIGN && layout.align() <= layout.size()
}

// SAFETY: each method returns memory from glibc's allocator of at least the
// layout's size and alignment (or null), and frees only what it returned.
unsafe impl GlobalAlloc for GlibcMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: glibc's allocator; sizes are non-zero (GlobalAlloc's contract).
        unsafe {
            if plain(layout) {
                __libc_malloc(layout.size()).cast()
            } else {
                __libc_memalign(layout.align(), layout.size()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(layout) {
            // SAFETY: as in `alloc`; calloc zeroes.
            return unsafe { __libc_calloc(1, layout.size()).cast() };
        }
        // SAFETY: as in `alloc`; the block is ours, `size` bytes long.
        unsafe {
            let p = self.alloc(layout);
            if !p.is_null() {
                std::ptr::write_bytes(p, 0, layout.size());
            }
            p
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: a block `alloc` returned (GlobalAlloc's contract).
        unsafe { __libc_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = Layout::from_size_align(new_size, layout.align());
        if new.is_ok_and(plain) {
            // SAFETY: a block `alloc` returned, kept at malloc's alignment.
            return unsafe { __libc_realloc(ptr.cast(), new_size).cast() };
        }
        // SAFETY: GlobalAlloc's contract: `new_size` with `layout`'s
        // alignment is a valid layout; copy the smaller size, free the old.
        unsafe {
            let new = Layout::from_size_align_unchecked(new_size, layout.align());
            let p = self.alloc(new);
            if !p.is_null() {
                std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            p
        }
    }
}

/// glibc's `malloc` itself, for the probe of its per-thread words
/// (`glibc::find_malloc_words`), whatever `malloc` the program calls.
pub(crate) fn libc_malloc(size: usize) -> *mut c_void {
    // SAFETY: glibc's allocator.
    unsafe { __libc_malloc(size) }
}

/// glibc's `free`, for what [`libc_malloc`] returned.
///
/// # Safety
///
/// `p` came from [`libc_malloc`] (or is null).
pub(crate) unsafe fn libc_free(p: *mut c_void) {
    // SAFETY: forwarded.
    unsafe { __libc_free(p) }
}

/// The address of glibc's `malloc`, to find the object (libc) whose TLS
/// holds its per-thread words.
pub(crate) fn libc_malloc_address() -> *const c_void {
    __libc_malloc as *const c_void
}
