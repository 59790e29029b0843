//! What the library needs of glibc itself: the functions it stands in front
//! of (found with `dlsym(RTLD_NEXT)`, for callers and objects that are not
//! ours), and thread control blocks for user threads.
//!
//! # A thread control block per user thread
//!
//! glibc keeps a thread's state at its thread pointer (`fs` base): the
//! thread control block (`struct pthread`, whose first words are
//! `tcbhead_t`) with the static TLS block of every loaded object below it —
//! `errno`, malloc's per-thread cache, stdio's lock owners, and every
//! `__thread` / C++ `thread_local` of the program and its libraries. A user
//! thread that resumes on another kernel thread must find its own, so each
//! one gets a block made by the dynamic loader itself (`_dl_allocate_tls`:
//! the TLS images copied, the DTV set up, the control block zeroed), and the
//! runtime switches `fs` with the thread's stack (`schedlab_rt`'s
//! `shared-library` build). Of the control block we fill what glibc's code
//! reads on the running thread:
//!
//! | `tcbhead_t` field (x86_64) | offset | value                                      |
//! |----------------------------|--------|--------------------------------------------|
//! | `tcb`, `self`              | 0, 16  | the block itself (`THREAD_SELF`, `pthread_self`) |
//! | `multiple_threads`         | 24     | copied: glibc must take its locks            |
//! | `sysinfo`                  | 32     | copied                                       |
//! | `stack_guard`              | 40     | copied: `-fstack-protector` canaries compare it |
//! | `pointer_guard`            | 48     | copied: `setjmp`/`longjmp` mangle with it     |
//! | `feature_1`                | 72     | copied (CET state)                           |
//!
//! A new thread also runs `__ctype_init` on its block first
//! ([`thread_start`]), as glibc's `start_thread` does.
//!
//! # malloc's per-thread state
//!
//! glibc's thread exit frees malloc's per-thread cache and detaches the
//! thread from its arena (`__libc_thread_freeres`), which is not exported
//! since 2.34. Without it, every user thread that called malloc or free
//! would leave its cache (640 bytes) behind and take a fresh one, growing
//! the arenas page by page (17,000 page faults over 100,000 short threads).
//! So a kept block carries malloc's two words (`tcache`, `thread_arena`)
//! from one user thread to the next, as a long-lived kernel thread keeps
//! them: the cache and the arena belong to the block, at most
//! [`CACHE_MAX`] of them. The words' places in libc's TLS block are not
//! published; the first fresh block finds them ([`find_malloc_words`]) by
//! running one malloc and free on it with every signal blocked and taking
//! the words that changed — exactly two, zero before and set after; on a C
//! library where it finds anything else nothing is carried and each
//! thread's cache is left behind as before. The probe runs glibc's `malloc`
//! (`__libc_malloc`), the one the library's own allocations use (`alloc.rs`),
//! whatever `malloc` the program links (jemalloc, tcmalloc).
//!
//! In `struct pthread`: `list` (just before `tid`) is linked to itself, so
//! that `fork`'s unlinking of the calling thread's block from glibc's lists
//! is harmless in a child forked from a user thread; `tid` (the offset glibc
//! publishes for `libthread_db`, `_thread_db_pthread_tid`) gets a number
//! unique to the thread, above any real thread id (`pid_max` is at most
//! 2^22) and never 0 (0 means "exited" to glibc): glibc's own owner checks
//! (an error-checking mutex, a read-write lock's writer) compare it. The `rseq` area's `cpu_id` gets
//! `RSEQ_CPU_ID_REGISTRATION_FAILED`, so `sched_getcpu` asks the kernel
//! instead of reading a CPU number the kernel never writes there.
//!
//! glibc 2.34 to 2.40 have this layout (checked at start: the sizes it
//! publishes must be sane); another C library is refused.

use schedlab_rt::shared::{SpinGuard, SpinLock};
use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

/// Looks up glibc's own definition of `name`, the one this library hides.
///
/// # Panics
///
/// If the symbol is missing (not glibc): nothing could work.
pub(crate) fn next(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        crate::fatal(&format!("glibc has no {}", name.to_string_lossy()));
    }
    p
}

/// A GLIBC_PRIVATE symbol of the loader or libc (`RTLD_DEFAULT`).
fn private(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        crate::fatal(&format!(
            "this C library has no {} (glibc 2.34 or later is needed)",
            name.to_string_lossy()
        ));
    }
    p
}

/// Declares a lazily resolved pointer to glibc's definition of a function.
macro_rules! real {
    ($name:ident : fn($($arg:ty),*) -> $ret:ty) => {
        #[allow(non_snake_case, missing_docs)]
        pub(crate) fn $name() -> unsafe extern "C" fn($($arg),*) -> $ret {
            static P: std::sync::atomic::AtomicPtr<std::ffi::c_void> =
                std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
            let mut p = P.load(std::sync::atomic::Ordering::Relaxed);
            if p.is_null() {
                let name = concat!(stringify!($name), "\0");
                p = $crate::glibc::next(
                    std::ffi::CStr::from_bytes_with_nul(name.as_bytes()).expect("a C name"),
                );
                P.store(p, std::sync::atomic::Ordering::Relaxed);
            }
            // SAFETY: glibc's definition of this very function, whose C
            // signature is the one declared.
            unsafe { std::mem::transmute::<*mut std::ffi::c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p) }
        }
    };
}
pub(crate) use real;

/// The control block layout, read once.
struct Layout {
    /// Offset of `struct pthread`'s `tid`.
    tid: usize,
    /// Offset of the `rseq` area from the thread pointer, if glibc registers one.
    rseq: Option<isize>,
    allocate: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
    init: unsafe extern "C" fn(*mut c_void, bool) -> *mut c_void,
    /// `sizeof (struct pthread)`.
    size: usize,
    deallocate: unsafe extern "C" fn(*mut c_void, bool),
    call_tls_dtors: unsafe extern "C" fn(),
    ctype_init: unsafe extern "C" fn(),
}

fn layout() -> &'static Layout {
    static L: OnceLock<Layout> = OnceLock::new();
    L.get_or_init(|| {
        // `_thread_db_pthread_tid` is `{ size in bits, count, offset }`
        // (glibc's nptl_db/db_info.c).
        let desc = private(c"_thread_db_pthread_tid").cast::<[u32; 3]>();
        // SAFETY: glibc's descriptor, three words of read-only data.
        let [bits, _, tid] = unsafe { desc.read() };
        let size = private(c"_thread_db_sizeof_pthread").cast::<u32>();
        // SAFETY: a read-only u32 of glibc's.
        let size = unsafe { size.read() } as usize;
        if bits != 32 || tid < 16 || tid as usize + 4 > size || !(0x300..=0x4000).contains(&size) {
            crate::fatal("this glibc's struct pthread is not one the library knows");
        }
        let rseq_size = private(c"__rseq_size").cast::<u32>();
        let rseq_offset = private(c"__rseq_offset").cast::<isize>();
        // SAFETY: glibc's read-only variables (2.35 and later).
        let rseq = unsafe { (rseq_size.read() > 0).then(|| rseq_offset.read()) };
        // SAFETY: the loader's and libc's private functions with these
        // signatures (`_dl_allocate_tls (void *)`, `_dl_deallocate_tls (void
        // *, bool)`, `__call_tls_dtors (void)`).
        unsafe {
            Layout {
                tid: tid as usize,
                size,
                rseq,
                init: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_void, bool) -> *mut c_void,
                >(private(c"_dl_allocate_tls_init")),
                allocate: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_void) -> *mut c_void,
                >(private(c"_dl_allocate_tls")),
                deallocate: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_void, bool),
                >(private(c"_dl_deallocate_tls")),
                call_tls_dtors: std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(
                    private(c"__call_tls_dtors"),
                ),
                ctype_init: std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(private(
                    c"__ctype_init",
                )),
            }
        }
    })
}

/// Checks, once, that glibc is one whose layout we know (fatal otherwise).
pub(crate) fn check() {
    layout();
}

/// Blocks of exited user threads, kept for the next ones (as glibc keeps
/// the stacks of exited threads): a new thread's block costs a
/// re-initialisation instead of an allocation, and a `pthread_t` of a joined
/// thread still points at mapped memory whose word says so ([`GONE`]), so
/// using it again answers `ESRCH` instead of reading freed memory. Each block
/// is kept with a companion word its owner gave [`free_tcb`] (the library's
/// per-thread data, `thread.rs`), handed back with the block by [`new_tcb`]:
/// the next thread reuses both, and neither costs a `malloc` and a `free`.
static CACHE: SpinLock<Vec<(usize, usize)>> = SpinLock::new(Vec::new());
/// Holds the kept blocks' lock across a `fork` (`fork.rs`), as glibc holds
/// malloc's: a child forked while another thread was inside [`new_tcb`] or
/// [`free_tcb`] would otherwise inherit the lock taken, by a thread it does
/// not have, and hang in its first `pthread_create`.
pub(crate) fn hold_cache_for_fork() -> SpinGuard<'static, Vec<(usize, usize)>> {
    CACHE.lock()
}
/// At most this many blocks are kept (each the process's static TLS size
/// plus glibc's `struct pthread`, a few KiB); more are freed.
const CACHE_MAX: usize = 4096;
/// The library's thread-local word in a kept block: "a thread of ours that
/// was joined or, detached, has ended" (`thread::gone`).
pub(crate) const GONE: usize = 1;

/// The calling thread's `tid` as glibc records it in a mutex it locks
/// (`__data.__owner`): its control block's, which for a user thread is the
/// number the library gave it (module docs).
pub(crate) fn own_tid() -> i32 {
    // SAFETY: pthread_self has no preconditions; its block holds `tid` at
    // the offset glibc publishes.
    unsafe { ((libc::pthread_self() as usize + layout().tid) as *const i32).read() }
}

/// The `tid` in the control block `tcb` (a kernel thread's: its kernel thread id).
pub(crate) fn tid_of(tcb: usize) -> i32 {
    // SAFETY: a live thread's control block holds `tid` at the offset glibc publishes.
    unsafe { ((tcb + layout().tid) as *const i32).read() }
}

/// A new thread control block with fresh TLS, as glibc's `pthread_create`
/// would make, its header copied from the calling thread's (module docs).
/// Returns the thread pointer and the companion word a kept block was kept
/// with (0 for a new block), or `None` when out of memory.
pub(crate) fn new_tcb(tid: i32) -> Option<(usize, usize)> {
    let l = layout();
    let kept = CACHE.lock().pop();
    let companion = kept.map_or(0, |(_, c)| c);
    let tcb = match kept {
        // SAFETY: a block of ours that no thread uses any more.
        Some((tcb, _)) => unsafe { reinit(l, tcb) },
        None => {
            // SAFETY: `_dl_allocate_tls(NULL)` allocates and initialises a block.
            unsafe { (l.allocate)(std::ptr::null_mut()) as usize }
        }
    };
    if tcb == 0 {
        // The companion is lost with the block (reinit failed: out of memory).
        return None;
    }
    let fresh = kept.is_none();
    // glibc's own `pthread_self` of the calling thread: its control block.
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as usize;
    // SAFETY: `tcb` is a fresh block of at least `sizeof (struct pthread)`
    // bytes, ours alone; `me` is the calling thread's live block.
    unsafe {
        let w = |off: usize, v: usize| ((tcb + off) as *mut usize).write(v);
        let r = |off: usize| ((me + off) as *const usize).read();
        w(0, tcb); // tcb
        w(16, tcb); // self
        ((tcb + 24) as *mut i32).write(1); // multiple_threads
        w(32, r(32)); // sysinfo
        w(40, r(40)); // stack_guard
        w(48, r(48)); // pointer_guard
        ((tcb + 72) as *mut u32).write(((me + 72) as *const u32).read()); // feature_1
        ((tcb + l.tid) as *mut i32).write(tid);
        // `struct pthread`'s `list` (the link on glibc's lists of threads,
        // `list_t`, two pointers right before `tid`) points at itself: the
        // block is on none of glibc's lists, and `fork`'s `reclaim_stacks`
        // does `list_del (&self->list)` in a child forked from a user thread,
        // which on the zeroed link wrote through a null pointer.
        let list = tcb + l.tid - 16;
        (list as *mut usize).write(list);
        ((list + 8) as *mut usize).write(list);
        if let Some(off) = l.rseq {
            // struct rseq { u32 cpu_id_start; u32 cpu_id; ... }
            ((tcb as isize + off + 4) as *mut i32).write(-2);
        }
    }
    if fresh {
        // SAFETY: a fresh block, its header filled, no thread on it yet.
        MALLOC_WORDS.get_or_init(|| unsafe { find_malloc_words(tcb) });
        // SAFETY: the block's DTV, as in `reinit`.
        START_GENERATION.get_or_init(|| unsafe { start_generation(tcb) });
    }
    Some((tcb, companion))
}

/// The TLS generation of the objects loaded at start, when no object has
/// been loaded since (`None` otherwise: [`reinit`] then always walks the
/// DTV). glibc gives each object with TLS the generation it was loaded in:
/// `_dl_allocate_tls_init` sets a DTV's `dtv[0].counter` to the newest of
/// the loaded objects', and `__tls_get_addr` raises it
/// (`_dl_update_slotinfo`) before it allocates a dynamic block for an object
/// loaded since. Objects loaded at start live in static TLS (no block to
/// free), and any object loaded later has a newer generation; so a DTV
/// whose counter is still this one has had no dynamic block, and none of
/// its slots but the start objects' was ever written.
static START_GENERATION: OnceLock<Option<usize>> = OnceLock::new();

/// [`START_GENERATION`], from the first fresh block (made by
/// `_dl_allocate_tls`, so its counter is the generation when it was made),
/// if no object was loaded by then: the loader's count of objects ever added
/// (`dlpi_adds`) is still the number of objects it holds, and none was
/// removed. Read after the block was made, so no `dlopen` can come between.
///
/// # Safety
///
/// `tcb` is a fresh block from `_dl_allocate_tls`.
unsafe fn start_generation(tcb: usize) -> Option<usize> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> i32 {
        // SAFETY: the loader's record of one object, valid during the call;
        // `data` is our counts.
        unsafe {
            let counts = &mut *data.cast::<(u64, u64, u64)>();
            counts.0 += 1;
            counts.1 = (*info).dlpi_adds;
            counts.2 = (*info).dlpi_subs;
        }
        0
    }
    let mut counts = (0u64, 0u64, 0u64);
    // SAFETY: `each` follows dl_iterate_phdr's contract.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut counts as *mut (u64, u64, u64)).cast()) };
    let (objects, adds, subs) = counts;
    // SAFETY: the block's DTV (`reinit`'s layout).
    let generation = unsafe { (*((tcb + 8) as *const *const [usize; 2]).read())[0] };
    (objects > 0 && adds == objects && subs == 0).then_some(generation)
}

/// Where malloc's per-thread words (`tcache`, `thread_arena`) are, as
/// offsets from the thread pointer: found on the first fresh block (module
/// docs), `None` when they could not be found with confidence.
static MALLOC_WORDS: OnceLock<Option<[isize; 2]>> = OnceLock::new();

/// libc's static TLS block: its offset from the thread pointer and its size,
/// when `malloc` is libc's own.
fn libc_tls() -> Option<(isize, usize)> {
    struct Found {
        base: usize,
        tls: Option<(usize, usize)>,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> i32 {
        // SAFETY: the loader's record of one object, valid during the call;
        // `data` is our `Found`.
        unsafe {
            let info = &*info;
            let found = &mut *data.cast::<Found>();
            if info.dlpi_addr as usize != found.base || info.dlpi_tls_data.is_null() {
                return 0;
            }
            let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            if let Some(tls) = phdrs.iter().find(|p| p.p_type == libc::PT_TLS) {
                found.tls = Some((info.dlpi_tls_data as usize, tls.p_memsz as usize));
            }
            1
        }
    }
    // The object that defines glibc's `malloc` (libc, unless this is not
    // glibc), whatever `malloc` the program calls: the library's own
    // allocations are glibc's (`alloc.rs`).
    // SAFETY: an all-zero `Dl_info` is valid; dladdr fills it.
    let mut di: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr reads the loader's tables.
    if unsafe { libc::dladdr(crate::alloc::libc_malloc_address(), &mut di) } == 0
        || di.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: a NUL-terminated name from the loader.
    let name = unsafe { CStr::from_ptr(di.dli_fname) }.to_bytes();
    if !name.ends_with(b"/libc.so.6") && name != b"libc.so.6" {
        return None;
    }
    let mut found = Found { base: di.dli_fbase as usize, tls: None };
    // SAFETY: `each` follows dl_iterate_phdr's contract.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut found as *mut Found).cast()) };
    let (data, size) = found.tls?;
    // SAFETY: pthread_self has no preconditions; it is the calling thread's
    // thread pointer, the one `data` was computed from.
    let tp = unsafe { libc::pthread_self() } as usize;
    Some((data as isize - tp as isize, size))
}

/// Finds malloc's two per-thread words by running a malloc and a free on
/// `tcb` (module docs).
///
/// # Safety
///
/// `tcb` is a fresh block from [`new_tcb`], header filled, used by no thread.
unsafe fn find_malloc_words(tcb: usize) -> Option<[isize; 2]> {
    let (off, size) = libc_tls()?;
    let words = size / 8;
    let start = (tcb as isize + off) as *const usize;
    // SAFETY: libc's block inside `tcb`'s static TLS, `size` bytes.
    let read = || (0..words).map(|i| unsafe { start.add(i).read_unaligned() }).collect::<Vec<_>>();
    let before = read();
    // SAFETY: every signal blocked so no handler runs on the borrowed block;
    // the thread pointer moved to `tcb` (a complete block) for one malloc
    // and free, which touch only libc's state, then put back. The calls in
    // between are raw system calls and libc's malloc and free: no code of
    // ours reads its TLS meanwhile. Preemption stops at no point inside
    // libc or this object (the runtime's safe points).
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &all, &mut old, 8);
        let mut fs = 0usize;
        if libc::syscall(libc::SYS_arch_prctl, 0x1003 /* ARCH_GET_FS */, &mut fs) == 0
            && libc::syscall(libc::SYS_arch_prctl, 0x1002 /* ARCH_SET_FS */, tcb) == 0
        {
            // glibc's own, never the program's (jemalloc would make its
            // state on the borrowed block). black_box: the compiler may drop
            // a malloc whose block is only freed.
            crate::alloc::libc_free(std::hint::black_box(crate::alloc::libc_malloc(32)));
            libc::syscall(libc::SYS_arch_prctl, 0x1002 /* ARCH_SET_FS */, fs);
        }
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &old,
            std::ptr::null_mut::<libc::sigset_t>(),
            8,
        );
    }
    let after = read();
    let changed: Vec<usize> = (0..words).filter(|&i| before[i] != after[i]).collect();
    match changed[..] {
        [a, b] if before[a] == 0 && before[b] == 0 && after[a] != 0 && after[b] != 0 => {
            Some([off + 8 * a as isize, off + 8 * b as isize])
        }
        _ => None,
    }
}

/// Makes a kept block new again, as glibc's stack cache does before reuse:
/// frees the dynamic TLS blocks of `dlopen`ed objects, clears the DTV and
/// `struct pthread`, and copies every object's TLS image afresh.
///
/// # Safety
///
/// `tcb` was made by [`new_tcb`] and no thread uses it.
unsafe fn reinit(l: &Layout, tcb: usize) -> usize {
    let carried = MALLOC_WORDS.get().copied().flatten();
    // SAFETY: offsets inside the block's static TLS (`find_malloc_words`).
    let kept =
        carried.map(|w| w.map(|off| unsafe { ((tcb as isize + off) as *const usize).read() }));
    // SAFETY: the block's header and its DTV, laid out as glibc's
    // `dtv_t` (16 bytes: `counter`, or `val` and `to_free`) with the
    // length in `dtv[-1].counter`.
    let tcb = unsafe {
        let dtv = ((tcb + 8) as *const *mut [usize; 2]).read();
        // `dtv[0].counter` is the TLS generation the DTV is up to date with
        // ([`START_GENERATION`]): a DTV still at the objects' loaded at
        // start names no dynamic block and no slot that the init below would
        // not write back with the same value, so its walk and clear (about
        // 130 instructions per thread: one slot per loaded object, and 14
        // spare) are skipped.
        if Some((*dtv)[0]) != START_GENERATION.get().copied().flatten() {
            let n = (*dtv.offset(-1))[0];
            for i in 0..n {
                // Most slots are empty (no `dlopen`ed object's TLS was made on
                // this block): a call to free(NULL) each is 8 instructions.
                let to_free = (*dtv.add(1 + i))[1] as *mut c_void;
                if !to_free.is_null() {
                    libc::free(to_free);
                }
            }
            std::ptr::write_bytes(dtv, 0, n + 1);
        }
        std::ptr::write_bytes(tcb as *mut u8, 0, l.size);
        ((tcb + 8) as *mut *mut [usize; 2]).write(dtv);
        (l.init)(tcb as *mut c_void, true) as usize
    };
    if let (Some(offs), Some(vals), true) = (carried, kept, tcb != 0) {
        for (off, v) in offs.into_iter().zip(vals) {
            // SAFETY: as above; the block is ours alone.
            unsafe { ((tcb as isize + off) as *mut usize).write(v) };
        }
    }
    tcb
}

/// Keeps a block made by [`new_tcb`] for a later thread, with `companion`
/// (the next [`new_tcb`] that takes the block returns it), marking it
/// [`GONE`]; or, when enough are kept, frees the block and returns
/// `companion` for the caller to free.
///
/// # Safety
///
/// No thread uses `tcb` as its thread pointer any more, now or later.
#[must_use = "a companion not kept must be freed by the caller"]
pub(crate) unsafe fn free_tcb(tcb: usize, companion: usize) -> Option<usize> {
    // SAFETY: forwarded; the block is ours.
    unsafe { crate::tls::set_in(tcb, GONE) };
    let mut kept = CACHE.lock();
    if kept.len() < CACHE_MAX {
        kept.push((tcb, companion));
        return None;
    }
    drop(kept);
    // SAFETY: forwarded; `true` frees the block with its DTV.
    unsafe { (layout().deallocate)(tcb as *mut c_void, true) };
    Some(companion)
}

/// What glibc's `start_thread` does on a new thread's own block before the
/// start routine: `__ctype_init` points the thread's `<ctype.h>` table
/// pointers (`__libc_tsd_CTYPE_B`...) at the current locale's; `isdigit`,
/// `printf`'s number formatting and friends read them.
pub(crate) fn thread_start() {
    // SAFETY: glibc's function, on the calling thread's own block.
    unsafe { (layout().ctype_init)() }
}

/// Runs the C++ `thread_local` destructors (and any `__cxa_thread_atexit`
/// registration) of the calling thread's block, as glibc does at a thread's
/// exit.
pub(crate) fn call_tls_dtors() {
    // SAFETY: glibc's function, on the calling thread's own block.
    unsafe { (layout().call_tls_dtors)() }
}

/// Defines `$alias` as another name of the library's `$target`: glibc
/// exports some functions under a second name too (`__pthread_mutex_lock`,
/// `pthread_mutex_consistent_np`...), which binaries linked against older
/// glibc still call, and which must not reach glibc's code with one of the
/// library's objects.
macro_rules! alias {
    ($alias:ident = $target:path : fn($($arg:ident : $ty:ty),*) -> $ret:ty) => {
        #[doc = concat!("`", stringify!($alias), "`: glibc's other name of `", stringify!($target), "`.")]
        ///
        /// # Safety
        ///
        /// C's contract.
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $alias($($arg: $ty),*) -> $ret {
            // SAFETY: forwarded unchanged.
            unsafe { $target($($arg),*) }
        }
    };
}
pub(crate) use alias;
