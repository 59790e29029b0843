//! Stacks for user threads, and a pool of them.
//!
//! Contract of a [`Stack`]:
//! - it is one anonymous private mapping: a guard region of one page at the
//!   low end, then at least the requested number of usable bytes, rounded up
//!   to whole pages and never below [`MIN_STACK_SIZE`];
//! - touching the guard page raises `SIGSEGV` (the handler in `guard.rs`
//!   turns that into a message naming the thread), so an overflow can never
//!   silently run into a neighbouring mapping;
//! - the mapping is freed in `Drop`, and a failure while setting up the guard
//!   unmaps it before returning the error, so no path leaks it.
//!
//! The guard is installed with `madvise(MADV_GUARD_INSTALL)` where the kernel
//! has it (Linux 6.13+): such guards do not split the mapping into two VMAs,
//! which matters because `vm.max_map_count` (65530 by default) would otherwise
//! cap the number of live user threads near 32,000. Older kernels fall back
//! to `mprotect(PROT_NONE)`.
//!
//! [`StackPool`] keeps stacks of one size for reuse so that spawning a thread
//! costs no system call; each processor owns one (no locking). Behind the
//! pools, the runtime's [`Depot`] carves stacks of the runtime's size from
//! large reservations and keeps every stack it ever carved, so that neither
//! a burst of a hundred thousand live threads nor its end costs a system
//! call per thread (before, each stack past the pools was one `mmap` plus a
//! guard `madvise` to create and one `munmap` to free: 6.7 µs and 8 µs per
//! thread). Memory of idle stacks beyond a bound is given back in the
//! background by the monitor ([`Depot::scavenge`]).

use crate::hooks::{Registry, Slot, Task};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// The smallest usable stack a user thread gets (bytes, before rounding to pages).
///
/// Rust's panic machinery (formatting the message, the default hook) touches
/// 8 KiB, which 16 KiB leaves room for beside modest user code; a panic that
/// prints its backtrace (`RUST_BACKTRACE=1`) touches 16–20 KiB and overflows
/// a stack of this size (measured: `tests/stack_usage.rs`). See
/// [`DEFAULT_STACK_SIZE`](crate::DEFAULT_STACK_SIZE).
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// The largest usable stack a user thread may ask for (bytes): 1 GiB, 128 times a
/// kernel thread's default 8 MiB. A runtime or a spawn asking for more fails with
/// `InvalidInput` rather than reserving address space no thread will use (the depot
/// reserves stacks of the runtime's size in batches).
pub const MAX_STACK_SIZE: usize = 1 << 30;

/// `MADV_GUARD_INSTALL` from Linux 6.13's uapi (`asm-generic/mman-common.h`).
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Set once `MADV_GUARD_INSTALL` has been refused, so we stop trying it.
static NO_GUARD_ADVICE: AtomicBool = AtomicBool::new(false);

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v <= 0 {
        4096
    } else {
        v as usize
    }
}

/// Maps `len` bytes of fresh, private, lazily committed memory for stacks
/// (one stack, or a depot's reservation of many).
fn map_stack_memory(len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing touches no existing memory.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(NonNull::new(ptr.cast::<u8>()).expect("mmap never returns null on success"))
}

/// The usable size a [`Stack::new`] of `size` bytes gets (`size` at most
/// [`MAX_STACK_SIZE`], so the rounding cannot wrap).
pub(crate) fn rounded_size(size: usize) -> usize {
    size.max(MIN_STACK_SIZE).next_multiple_of(page_size())
}

/// The usable size of a stack asked for as `size` bytes through `knob` (a builder
/// method's name, for the error): at least [`MIN_STACK_SIZE`], rounded up to pages; more
/// than [`MAX_STACK_SIZE`] is refused with `InvalidInput` naming the knob and the value.
pub(crate) fn checked_size(size: usize, knob: &str) -> io::Result<usize> {
    if size > MAX_STACK_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{knob} must be at most {MAX_STACK_SIZE} bytes (MAX_STACK_SIZE, 1 GiB), not {size}"
            ),
        ));
    }
    Ok(rounded_size(size))
}

/// A mapped stack with a guard page below it. See the module docs for the contract.
#[derive(Debug)]
pub struct Stack {
    /// Lowest address of the mapping (the start of the guard page).
    base: NonNull<u8>,
    /// Length of the whole mapping, guard included.
    len: usize,
    /// Length of the guard region at `base`.
    guard: usize,
    /// Its slot in a runtime's registry (`registry.rs`), if registered.
    slot: Option<NonNull<Slot>>,
    /// Whose memory it is, which says what happens when it drops and
    /// whether it may be reused.
    memory: Memory,
}

/// Whose memory a [`Stack`] is.
#[derive(Debug)]
enum Memory {
    /// A mapping of its own, unmapped when the stack drops.
    Mapped,
    /// A slot of a [`Depot`]'s reservation, which the depot unmaps when it drops.
    Depot,
    /// Memory the spawner lent ([`Stack::lent`], POSIX's
    /// `pthread_attr_setstack`): never unmapped, never pooled for another
    /// thread; the flag is raised when the stack drops, which is after the
    /// thread's last switch away from it.
    Lent(StackReleased),
}

/// Raised once a thread's lent stack (`Builder::stack_memory`, `shared-library` build) is no
/// longer used: after the thread's last switch away from it, which comes
/// after its join returns (the exit wakes the joiner before it switches), so
/// a spawner that reuses the memory for another thread waits for this first.
#[derive(Debug, Clone, Default)]
pub struct StackReleased(std::sync::Arc<AtomicBool>);

impl StackReleased {
    /// A flag not raised yet.
    pub fn new() -> StackReleased {
        StackReleased::default()
    }

    /// Whether the stack is released.
    pub fn is_released(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Waits until the stack is released: the rest of an exit, a few hundred
    /// nanoseconds unless the kernel preempts its kernel thread, so a user
    /// thread yields and an OS thread yields its CPU meanwhile.
    pub fn wait(&self) {
        while !self.is_released() {
            if crate::hooks::try_current().is_some() {
                crate::hooks::yield_now();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

// SAFETY: a Stack is an owned region of memory with no thread affinity; the
// raw pointer is only an address until someone switches onto it.
unsafe impl Send for Stack {}

impl Stack {
    /// Maps a stack with at least `size` usable bytes (rounded up to whole
    /// pages, at least [`MIN_STACK_SIZE`]) and a guard page below them.
    pub fn new(size: usize) -> io::Result<Stack> {
        let page = page_size();
        let usable = size
            .max(MIN_STACK_SIZE)
            .checked_next_multiple_of(page)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "stack size overflows"))?;
        let len = usable + page;
        let base = map_stack_memory(len)?;
        // From here on `stack` owns the mapping: an early return unmaps it.
        let stack = Stack { base, len, guard: page, slot: None, memory: Memory::Mapped };
        stack.install_guard()?;
        Ok(stack)
    }

    /// A stack on memory the caller lends: `len` bytes at `base`, with no
    /// guard page (the caller's memory is what it is) and nothing unmapped
    /// when the stack drops. Its top is rounded down to 16 bytes, as the
    /// ABI wants it. Returns `None` when less than [`MIN_STACK_SIZE`] remains.
    /// `released` is raised when the stack drops.
    ///
    /// # Safety
    ///
    /// `base..base + len` must be writable memory that nothing else uses
    /// until the stack has dropped (its thread has exited and switched away
    /// for good).
    #[cfg_attr(not(feature = "shared-library"), allow(dead_code))]
    pub(crate) unsafe fn lent(
        base: NonNull<u8>,
        len: usize,
        released: StackReleased,
    ) -> Option<Stack> {
        let top = (base.as_ptr() as usize).checked_add(len)? & !15;
        let len = top - base.as_ptr() as usize;
        (len >= MIN_STACK_SIZE).then_some(Stack {
            base,
            len,
            guard: 0,
            slot: None,
            memory: Memory::Lent(released),
        })
    }

    /// Whether a later thread may run on this stack (not lent memory).
    pub(crate) fn reusable(&self) -> bool {
        !matches!(self.memory, Memory::Lent(_))
    }

    /// [`Stack::new`], registered in `registry` (see `registry.rs`).
    ///
    /// # Safety
    ///
    /// The registry must outlive the stack.
    pub(crate) unsafe fn new_registered(size: usize, registry: &Registry) -> io::Result<Stack> {
        let mut stack = Stack::new(size)?;
        // SAFETY: forwarded from the caller.
        stack.slot = Some(unsafe { registry.register() });
        Ok(stack)
    }

    /// Records `task` (null: nobody) as the thread that owns this stack, if
    /// it is registered.
    #[inline]
    pub(crate) fn set_owner(&self, task: *const Task) {
        if let Some(slot) = self.slot {
            // SAFETY: our slot is registered until we drop.
            unsafe { crate::hooks::set_owner(slot, task) };
        }
    }

    fn install_guard(&self) -> io::Result<()> {
        let base = self.base.as_ptr().cast::<libc::c_void>();
        if !NO_GUARD_ADVICE.load(Ordering::Relaxed) {
            // SAFETY: the first page of our own mapping; the advice only
            // changes how accesses to it fault.
            if unsafe { libc::madvise(base, self.guard, MADV_GUARD_INSTALL) } == 0 {
                return Ok(());
            }
            NO_GUARD_ADVICE.store(true, Ordering::Relaxed);
        }
        // SAFETY: as above; PROT_NONE on the first page of our own mapping.
        if unsafe { libc::mprotect(base, self.guard, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The exclusive upper end of the stack (stacks grow down), page aligned.
    pub fn top(&self) -> *mut u8 {
        // SAFETY: `base + len` is one past the end of our mapping.
        unsafe { self.base.as_ptr().add(self.len) }
    }

    /// Usable bytes (the mapping less its guard page).
    pub fn size(&self) -> usize {
        self.len - self.guard
    }

    /// The address range of the guard page.
    pub fn guard_range(&self) -> std::ops::Range<usize> {
        let b = self.base.as_ptr() as usize;
        b..b + self.guard
    }

    /// Bytes of the usable part whose pages are resident: what threads that
    /// ran on this stack touched (pages stay resident until released).
    pub(crate) fn touched(&self) -> usize {
        let page = page_size();
        let lo = self.base.as_ptr() as usize + self.guard;
        let len = self.len - self.guard;
        let mut v = vec![0u8; len / page];
        // SAFETY: `lo..lo + len` is our mapping, page aligned; `v` has one
        // byte per page.
        let rc = unsafe { libc::mincore(lo as *mut libc::c_void, len, v.as_mut_ptr()) };
        if rc != 0 {
            return 0;
        }
        v.iter().filter(|&&b| b & 1 == 1).count() * page
    }

    /// The whole slot, guard included, as an address range.
    fn range(&self) -> std::ops::Range<usize> {
        let b = self.base.as_ptr() as usize;
        b..b + self.len
    }
}

/// Gives the pages of idle `stacks` back to the kernel (`MADV_DONTNEED`):
/// they read as zeros when touched again. Neighbouring slots of a
/// reservation are released with one call, guards included: guard markers
/// and `PROT_NONE` both survive the advice (a test checks the guard).
fn release_memory(stacks: &mut [Stack]) {
    stacks.sort_unstable_by_key(|s| s.base.as_ptr() as usize);
    let mut i = 0;
    while i < stacks.len() {
        let start = stacks[i].range().start;
        let mut end = stacks[i].range().end;
        i += 1;
        while i < stacks.len() && stacks[i].range().start == end {
            end = stacks[i].range().end;
            i += 1;
        }
        // SAFETY: `start..end` is covered by idle stacks we own (each a
        // mapping or a slot of one), on which nobody runs; their contents
        // are dead.
        let rc =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) of idle stacks failed");
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            // SAFETY: registered by `new_registered`, whose caller keeps the
            // registry alive; the slot dies with the stack.
            unsafe { Registry::unregister(slot) };
        }
        if let Memory::Lent(released) = &self.memory {
            // Nobody runs on it any more: the memory is its owner's again.
            released.0.store(true, Ordering::Release);
        }
        if matches!(self.memory, Memory::Mapped) {
            // SAFETY: we own the whole mapping and nobody runs on it any more
            // (a stack is only dropped once its thread has switched away for good).
            let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
            debug_assert_eq!(rc, 0, "munmap of a stack failed");
        }
    }
}

/// A cache of stacks of one size, owned by one processor.
///
/// A stack goes back to the pool of the processor where its thread *ended*,
/// which need not be the one that spawned it; with work stealing one pool
/// fills while another drains. So pools trade stacks in batches through the
/// runtime's [`Depot`]: a full pool spills half its stacks there, an empty
/// one refills from there before it maps new ones. (Without this, a spawner
/// on one processor and exits on another cost an `mmap` plus an `munmap`,
/// with its cross-CPU TLB shootdown, per thread: ~20 µs.)
#[derive(Debug)]
pub(crate) struct StackPool {
    size: usize,
    cap: usize,
    free: Vec<Stack>,
}

impl StackPool {
    /// An empty pool for stacks of `size` usable bytes keeping at most `cap` of them.
    pub(crate) fn new(size: usize, cap: usize) -> StackPool {
        StackPool { size: rounded_size(size), cap, free: Vec::new() }
    }

    /// The usable size of the stacks this pool hands out.
    pub(crate) fn stack_size(&self) -> usize {
        self.size
    }

    /// A stack from the pool, else a batch from the depot (which carves new
    /// ones registered in `registry` when it has none).
    ///
    /// # Safety
    ///
    /// `registry` must outlive the stack (see [`Stack::new_registered`]).
    #[inline]
    pub(crate) unsafe fn get(&mut self, depot: &Depot, registry: &Registry) -> io::Result<Stack> {
        if let Some(s) = self.free.pop() {
            return Ok(s);
        }
        if self.size != depot.size || self.cap == 0 {
            // SAFETY: forwarded from the caller.
            return unsafe { Stack::new_registered(self.size, registry) };
        }
        // SAFETY: forwarded from the caller.
        unsafe { depot.refill(&mut self.free, self.cap.div_ceil(2), registry)? };
        Ok(self.free.pop().expect("the depot refilled the pool"))
    }

    /// A pooled stack, if the pool has one (no system call).
    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<Stack> {
        self.free.pop()
    }

    /// Returns a stack for reuse (spilling half the pool to the depot when
    /// full); one of another size goes to the depot's stacks of other sizes
    /// ([`Depot::keep_other`]), and lent memory goes back to its owner.
    #[inline]
    pub(crate) fn put(&mut self, stack: Stack, depot: &Depot) {
        if stack.size() != self.size || !stack.reusable() {
            depot.keep_other(stack);
            return;
        }
        if self.free.len() >= self.cap {
            depot.spill(&mut self.free, self.cap.div_ceil(2));
            if depot.has_excess() && !depot.background.load(Ordering::Relaxed) {
                depot.release(usize::MAX, false);
            }
        }
        self.free.push(stack);
    }

    /// Hands all but `keep` of the pool's stacks to the depot: a processor
    /// that runs out of work trims its pool, so that idle stacks beyond
    /// the depot's bound give their memory back however the processors
    /// shared them out (the pools themselves are never scavenged).
    pub(crate) fn trim(&mut self, keep: usize, depot: &Depot) {
        let excess = self.free.len().saturating_sub(keep);
        if excess > 0 {
            depot.spill(&mut self.free, excess);
        }
    }

    /// Takes `stack` back if that needs neither the depot nor an unmap
    /// (it has the pool's size and the pool has room); gives it back
    /// otherwise. Unlike [`StackPool::put`], nothing leaves the pool's owner,
    /// so the owner may hand back a stack it still runs on, provided it
    /// switches away before it takes a stack from the pool again.
    #[inline]
    pub(crate) fn put_local(&mut self, stack: Stack) -> Result<(), Stack> {
        if stack.size() != self.size || self.free.len() >= self.cap {
            return Err(stack);
        }
        self.free.push(stack);
        Ok(())
    }

    /// Number of stacks kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.free.len()
    }
}

/// What a runtime's depot of stacks holds: its stacks of the default size
/// (`Runtime::stack_stats`). Stacks in the processors' own pools (up to 1,024
/// each) and in use count as carved, neither idle nor released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackStats {
    /// Usable bytes of each stack.
    pub stack_size: usize,
    /// Stacks ever handed out (each carved once, then reused).
    pub carved: usize,
    /// Slots reserved (address space only until carved).
    pub reserved: usize,
    /// Idle stacks in the depot that keep the pages their threads touched.
    pub idle_resident: usize,
    /// Idle stacks in the depot whose memory was given back.
    pub idle_released: usize,
}

/// The runtime's stacks of its default size, shared by the processors'
/// pools (traded in batches) and carved from large reservations.
///
/// - **Carving**: a reservation ("chunk") is one `mmap` of many slots, each
///   a guard page and a stack; chunks double from [`FIRST_CHUNK`] to
///   [`MAX_CHUNK`] slots, and a slot's guard is installed once, when it is
///   first handed out. With `MADV_GUARD_INSTALL` a whole chunk stays one
///   VMA; with the `mprotect` fallback each slot splits it, as separate
///   mappings would.
/// - **Keeping**: a stack the pools return is kept, never unmapped; the
///   chunks are unmapped when the depot drops, with the runtime's last
///   reference (after every task and so every stack).
/// - **Giving memory back**: idle stacks beyond `retain` that stayed idle
///   for a whole period have their pages released with `MADV_DONTNEED` by
///   [`Depot::scavenge`], which the monitor calls once a period while there
///   are more than `retain`; released stacks are handed out last. "Stayed
///   idle" is the low-water mark of the idle count over the period, so a
///   program that runs bursts of threads keeps the stacks it reuses, and
///   one whose burst is over gives them back a period or two later.
#[derive(Debug)]
pub(crate) struct Depot {
    /// Usable bytes of each stack.
    size: usize,
    inner: std::sync::Mutex<DepotInner>,
    /// Idle stacks kept with their memory.
    retain: usize,
    /// Set when more than `retain` idle stacks hold memory.
    excess: AtomicBool,
    /// A monitor scavenges in the background; without one, the processor
    /// that spills past the bound gives the excess back itself.
    background: AtomicBool,
    /// Idle stacks of other sizes (`Builder::stack_size`, C's
    /// `pthread_attr_setstacksize`), most recently returned last, kept up
    /// to [`OTHER_SIZES_BYTES`] so that a program creating threads of its
    /// own stack size does not map and unmap one per thread (an `munmap`
    /// costs a TLB shootdown on every CPU the process ran on).
    others: std::sync::Mutex<Vec<Stack>>,
}

/// The usable bytes of idle stacks of other sizes a depot keeps: glibc's
/// stack cache keeps 40 MiB of any size for the same reason.
const OTHER_SIZES_BYTES: usize = 40 << 20;

#[derive(Debug, Default)]
struct DepotInner {
    /// Reservations, as (base, length).
    chunks: Vec<(NonNull<u8>, usize)>,
    /// Slots of the last chunk not handed out yet.
    uncarved: usize,
    /// Idle stacks whose pages may be resident, most recently returned last.
    warm: Vec<Stack>,
    /// Idle stacks whose pages were given back.
    cold: Vec<Stack>,
    /// The fewest stacks `warm` held since the last scavenging period began:
    /// that many were not needed during the period.
    min_warm: usize,
}

// SAFETY: the chunk pointers are addresses of mappings the depot owns; they
// are only dereferenced through the stacks carved from them.
unsafe impl Send for DepotInner {}

/// Slots in the first reservation.
const FIRST_CHUNK: usize = 64;
/// Most slots in one reservation.
const MAX_CHUNK: usize = 4096;

impl Depot {
    /// An empty depot for stacks of `size` usable bytes (rounded like
    /// [`Stack::new`]), keeping the memory of at most `retain` idle ones.
    pub(crate) fn new(size: usize, retain: usize) -> Depot {
        Depot {
            size: rounded_size(size),
            inner: std::sync::Mutex::new(DepotInner::default()),
            retain,
            excess: AtomicBool::new(false),
            background: AtomicBool::new(false),
            others: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// An idle stack of `size` usable bytes (rounded as [`Stack::new`]) that is
    /// not the depot's size, the one most recently returned, if one is kept.
    pub(crate) fn take_other(&self, size: usize) -> Option<Stack> {
        let mut others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        let i = others.iter().rposition(|s| s.size() == size)?;
        Some(others.remove(i))
    }

    /// Keeps an idle stack that is not of the depot's size for a later
    /// thread of its size, letting the oldest go (unmapped) beyond
    /// [`OTHER_SIZES_BYTES`]. Lent memory is never kept.
    pub(crate) fn keep_other(&self, stack: Stack) {
        if !stack.reusable() || stack.size() == self.size || stack.size() > OTHER_SIZES_BYTES {
            return;
        }
        let mut others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        let mut total: usize = others.iter().map(Stack::size).sum::<usize>() + stack.size();
        let mut gone = 0;
        while total > OTHER_SIZES_BYTES {
            total -= others[gone].size();
            gone += 1;
        }
        let evicted: Vec<Stack> = others.drain(..gone).collect();
        others.push(stack);
        drop(others);
        // Unmapped outside the lock.
        drop(evicted);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DepotInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves `n` stacks into `into`: idle ones with memory first, then
    /// released ones, then newly carved ones registered in `registry`.
    ///
    /// # Safety
    ///
    /// `registry` must outlive the stacks (see [`Stack::new_registered`]).
    unsafe fn refill(
        &self,
        into: &mut Vec<Stack>,
        n: usize,
        registry: &Registry,
    ) -> io::Result<()> {
        let mut d = self.lock();
        let warm = d.warm.len().min(n);
        let keep = d.warm.len() - warm;
        into.extend(d.warm.drain(keep..));
        d.min_warm = d.min_warm.min(keep);
        let cold = d.cold.len().min(n - warm);
        let keep = d.cold.len() - cold;
        into.extend(d.cold.drain(keep..));
        for _ in warm + cold..n {
            // SAFETY: forwarded from the caller.
            into.push(unsafe { self.carve(&mut d, registry)? });
        }
        Ok(())
    }

    /// A stack from the depot (for a spawn outside any processor).
    ///
    /// # Safety
    ///
    /// As [`Depot::refill`].
    pub(crate) unsafe fn get(&self, registry: &Registry) -> io::Result<Stack> {
        let mut one = Vec::with_capacity(1);
        // SAFETY: forwarded from the caller.
        unsafe { self.refill(&mut one, 1, registry)? };
        Ok(one.pop().expect("refill of one gives one"))
    }

    /// The next never-used slot, from the last chunk or a new one.
    ///
    /// # Safety
    ///
    /// As [`Depot::refill`].
    unsafe fn carve(&self, d: &mut DepotInner, registry: &Registry) -> io::Result<Stack> {
        let page = page_size();
        let slot_len = self.size + page;
        if d.uncarved == 0 {
            let slots =
                d.chunks.last().map_or(FIRST_CHUNK, |c| (c.1 / slot_len * 2).min(MAX_CHUNK));
            let len = slots * slot_len;
            let base = map_stack_memory(len)?;
            d.chunks.push((base, len));
            d.uncarved = slots;
        }
        let (base, len) = *d.chunks.last().expect("a chunk was just ensured");
        let index = len / slot_len - d.uncarved;
        // SAFETY: `index` is below the chunk's slot count, so the slot lies
        // inside the chunk's mapping.
        let slot = unsafe { NonNull::new_unchecked(base.as_ptr().add(index * slot_len)) };
        let mut stack =
            Stack { base: slot, len: slot_len, guard: page, slot: None, memory: Memory::Depot };
        stack.install_guard()?;
        d.uncarved -= 1;
        // SAFETY: forwarded from the caller.
        stack.slot = Some(unsafe { registry.register() });
        Ok(stack)
    }

    /// Takes `n` stacks from the end of `from`. Stacks of another size are
    /// dropped (unmapped).
    fn spill(&self, from: &mut Vec<Stack>, n: usize) {
        let keep = from.len().saturating_sub(n);
        let mut d = self.lock();
        for s in from.drain(keep..) {
            if s.size() == self.size {
                d.warm.push(s);
            }
        }
        if d.warm.len() > self.retain {
            self.excess.store(true, Ordering::Relaxed);
        }
    }

    /// Called by the monitor: it will call [`Depot::scavenge`] from now on.
    pub(crate) fn scavenge_in_background(&self) {
        self.background.store(true, Ordering::Relaxed);
    }

    /// Whether [`Depot::scavenge`] has work: more than `retain` idle stacks
    /// hold memory.
    pub(crate) fn has_excess(&self) -> bool {
        self.excess.load(Ordering::Relaxed)
    }

    /// Ends a scavenging period: gives back the memory of the idle stacks
    /// beyond `retain` that stayed idle through the whole period, at most
    /// `budget` of them, the longest idle first, and begins the next period.
    /// Returns how many. One `madvise` per run of neighbouring slots, made
    /// without the lock held.
    pub(crate) fn scavenge(&self, budget: usize) -> usize {
        self.release(budget, true)
    }

    /// Gives back the memory of idle stacks beyond `retain` (at most
    /// `budget`), the longest idle first, idle for a whole period (`aged`)
    /// or not.
    fn release(&self, budget: usize, aged: bool) -> usize {
        let mut batch: Vec<Stack> = {
            let mut d = self.lock();
            let idle = if aged { d.min_warm.min(d.warm.len()) } else { d.warm.len() };
            let n = idle.saturating_sub(self.retain).min(budget);
            d.warm.drain(..n).collect()
        };
        release_memory(&mut batch);
        let n = batch.len();
        let mut d = self.lock();
        d.cold.extend(batch);
        d.min_warm = d.warm.len();
        self.excess.store(d.warm.len() > self.retain, Ordering::Relaxed);
        n
    }

    /// What the depot holds now.
    pub(crate) fn stats(&self) -> StackStats {
        let d = self.lock();
        let slot = self.size + page_size();
        let reserved = d.chunks.iter().map(|c| c.1 / slot).sum::<usize>();
        StackStats {
            stack_size: self.size,
            carved: reserved - d.uncarved,
            reserved,
            idle_resident: d.warm.len(),
            idle_released: d.cold.len(),
        }
    }

    /// Idle stacks kept (with memory, released).
    #[cfg(test)]
    fn idle(&self) -> (usize, usize) {
        let d = self.lock();
        (d.warm.len(), d.cold.len())
    }

    /// Drops every idle stack (shutdown); the reservations stay mapped until
    /// the depot drops.
    pub(crate) fn clear(&self) {
        let (warm, cold) = {
            let mut d = self.lock();
            (std::mem::take(&mut d.warm), std::mem::take(&mut d.cold))
        };
        drop((warm, cold));
        drop(std::mem::take(&mut *self.others.lock().unwrap_or_else(|e| e.into_inner())));
    }
}

impl Drop for Depot {
    fn drop(&mut self) {
        let d = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        d.warm.clear();
        d.cold.clear();
        for &(base, len) in &d.chunks {
            // SAFETY: our reservation. The depot drops with the runtime's
            // last reference, after every task, so no stack carved from it
            // is in use (stacks dropped earlier only unregistered).
            let rc = unsafe { libc::munmap(base.as_ptr().cast(), len) };
            debug_assert_eq!(rc, 0, "munmap of a stack reservation failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_size_is_page_rounded_and_at_least_the_minimum() {
        let page = page_size();
        let s = Stack::new(1).unwrap();
        assert_eq!(s.size(), MIN_STACK_SIZE.next_multiple_of(page));
        let s = Stack::new(MIN_STACK_SIZE + 1).unwrap();
        assert_eq!(s.size(), (MIN_STACK_SIZE + 1).next_multiple_of(page));
        assert_eq!(s.top() as usize % page, 0);
        assert_eq!(s.guard_range().len(), page);
        assert_eq!(s.guard_range().end + s.size(), s.top() as usize);
    }

    #[test]
    fn stack_memory_is_writable_up_to_the_guard() {
        let s = Stack::new(MIN_STACK_SIZE).unwrap();
        let lo = s.guard_range().end as *mut u8;
        // SAFETY: [guard end, top) is our writable mapping.
        unsafe {
            lo.write(1);
            s.top().sub(1).write(2);
            assert_eq!(lo.read() + s.top().sub(1).read(), 3);
        }
    }

    #[test]
    fn pool_reuses_stacks_of_its_size_and_drops_others() {
        // Declared first, so dropped last: the depot's stacks are registered in it.
        let registry = Registry::new();
        let depot = Depot::new(MIN_STACK_SIZE, 0);
        let mut pool = StackPool::new(MIN_STACK_SIZE, 2);
        // SAFETY: the registry outlives the pool and its stacks.
        let a = unsafe { pool.get(&depot, &registry) }.unwrap();
        let a_top = a.top();
        assert_eq!(pool.len(), 0, "a refill of cap/2 = 1 stack, handed out");
        pool.put(a, &depot);
        assert_eq!(pool.len(), 1);
        // SAFETY: as above.
        assert_eq!(unsafe { pool.get(&depot, &registry) }.unwrap().top(), a_top);
        pool.put(Stack::new(MIN_STACK_SIZE * 4).unwrap(), &depot);
        assert_eq!(pool.len(), 0, "a stack of another size is not kept");
        for _ in 0..3 {
            pool.put(Stack::new(MIN_STACK_SIZE).unwrap(), &depot);
        }
        assert_eq!(pool.len(), 2, "a full pool spills half to the depot");
        assert_eq!(depot.idle(), (0, 1), "no monitor and retain 0: released at once");
    }

    #[test]
    fn pools_trade_stacks_through_the_depot() {
        // Declared first, so dropped last: the depot's stacks are registered in it.
        let registry = Registry::new();
        let depot = Depot::new(MIN_STACK_SIZE, 16);
        let mut full = StackPool::new(MIN_STACK_SIZE, 4);
        let mut empty = StackPool::new(MIN_STACK_SIZE, 4);
        for _ in 0..5 {
            full.put(Stack::new(MIN_STACK_SIZE).unwrap(), &depot);
        }
        assert_eq!(full.len(), 3, "spilled 2 of 4, then kept the fifth");
        assert_eq!(depot.idle(), (2, 0));
        // SAFETY: the registry outlives the stack.
        let s = unsafe { empty.get(&depot, &registry) }.unwrap();
        assert_eq!(empty.len(), 1, "refilled 2 from the depot, handed out one");
        drop(s);
    }

    /// Whether each page of `range` is resident (mincore).
    fn resident(range: std::ops::Range<usize>) -> Vec<bool> {
        let page = page_size();
        let mut v = vec![0u8; range.len().div_ceil(page)];
        // SAFETY: `range` is page aligned and mapped; `v` has one byte per page.
        let rc =
            unsafe { libc::mincore(range.start as *mut libc::c_void, range.len(), v.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        v.iter().map(|b| b & 1 == 1).collect()
    }

    #[test]
    fn the_depot_carves_neighbouring_slots_from_one_reservation() {
        // Declared first, so dropped last: the depot's stacks are registered in it.
        let registry = Registry::new();
        let depot = Depot::new(MIN_STACK_SIZE, 0);
        let mut v = Vec::new();
        // SAFETY: the registry outlives the stacks (dropped below, before it).
        unsafe { depot.refill(&mut v, FIRST_CHUNK + 1, &registry) }.unwrap();
        let slot = MIN_STACK_SIZE + page_size();
        for w in v[..FIRST_CHUNK].windows(2) {
            assert_eq!(w[1].guard_range().start, w[0].top() as usize, "slots are neighbours");
        }
        assert_eq!(v[0].size(), MIN_STACK_SIZE);
        let chunks = depot.lock().chunks.clone();
        assert_eq!(chunks.len(), 2, "the 65th slot opened a second reservation");
        assert_eq!(chunks[0].1, FIRST_CHUNK * slot);
        assert_eq!(chunks[1].1, 2 * FIRST_CHUNK * slot, "reservations double");
        drop(v);
    }

    #[test]
    fn stacks_of_other_sizes_are_kept_for_reuse_up_to_a_bound() {
        let depot = Depot::new(MIN_STACK_SIZE, 0);
        let size = 4 * MIN_STACK_SIZE;
        let a = Stack::new(size).unwrap();
        let base = a.top();
        depot.keep_other(a);
        assert!(depot.take_other(2 * MIN_STACK_SIZE).is_none(), "only an exact size is reused");
        let again = depot.take_other(size).expect("the stack kept");
        assert_eq!(again.top(), base, "the same mapping, no new one");
        assert!(depot.take_other(size).is_none(), "handed out once");
        // The depot's own size and lent memory are never kept here.
        depot.keep_other(Stack::new(MIN_STACK_SIZE).unwrap());
        assert!(depot.take_other(MIN_STACK_SIZE).is_none());
        let mut mem = vec![0u8; 2 * MIN_STACK_SIZE];
        let released = StackReleased::new();
        // SAFETY: our vector, alive past the stack, which nothing runs on.
        let lent = unsafe {
            Stack::lent(NonNull::new(mem.as_mut_ptr()).unwrap(), mem.len(), released.clone())
        };
        let lent = lent.expect("enough memory");
        let lent_size = lent.size();
        assert!(!released.is_released());
        depot.keep_other(lent);
        assert!(depot.take_other(lent_size).is_none(), "lent memory goes back to its owner");
        assert!(released.is_released(), "and its owner is told");
        // Past the bound, the oldest go.
        let big = OTHER_SIZES_BYTES / 4;
        let tops: Vec<_> = (0..5)
            .map(|_| {
                let s = Stack::new(big).unwrap();
                let top = s.top();
                depot.keep_other(s);
                top
            })
            .collect();
        let kept: Vec<_> = std::iter::from_fn(|| depot.take_other(big)).map(|s| s.top()).collect();
        assert_eq!(kept, [tops[4], tops[3], tops[2], tops[1]], "newest first; the oldest let go");
        drop(mem);
    }

    #[test]
    fn idle_stacks_past_the_bound_give_their_memory_back() {
        // Declared first, so dropped last: the depot's stacks are registered in it.
        let registry = Registry::new();
        let depot = Depot::new(MIN_STACK_SIZE, 2);
        depot.scavenge_in_background();
        let mut v = Vec::new();
        // SAFETY: the registry outlives the stacks (the depot is dropped first).
        unsafe { depot.refill(&mut v, 8, &registry) }.unwrap();
        for s in &v {
            let lo = s.guard_range().end;
            // SAFETY: the usable part of a stack we hold.
            unsafe { std::ptr::write_bytes(lo as *mut u8, 0xAB, s.size()) };
            assert!(resident(lo..s.top() as usize).iter().all(|&r| r));
        }
        let ranges: Vec<_> = v.iter().map(|s| s.guard_range().end..s.top() as usize).collect();
        depot.spill(&mut v, 8);
        assert!(depot.has_excess(), "8 idle, 2 retained");
        assert_eq!(depot.scavenge(100), 0, "none was idle for a whole period yet");
        // A period in which a burst took 7 of the 8 and gave them back: all were needed.
        // SAFETY: as above.
        unsafe { depot.refill(&mut v, 7, &registry) }.unwrap();
        depot.spill(&mut v, 7);
        assert_eq!(depot.scavenge(100), 0, "only one stayed idle, below the bound");
        // A quiet period.
        assert_eq!(depot.scavenge(4), 4, "at most the budget");
        assert_eq!(depot.scavenge(100), 2, "down to the bound");
        assert!(!depot.has_excess());
        assert_eq!(depot.idle(), (2, 6));
        let released = ranges.iter().filter(|r| resident((*r).clone()).iter().all(|&p| !p)).count();
        assert_eq!(released, 6, "the six longest idle gave their pages back");
        // A released stack is handed out last, and reads as zeros.
        let mut again = Vec::new();
        // SAFETY: as above.
        unsafe { depot.refill(&mut again, 3, &registry) }.unwrap();
        let last = again.last().unwrap();
        // SAFETY: the usable part of a stack we hold.
        assert_eq!(unsafe { (last.guard_range().end as *const u8).read() }, 0);
        drop(again);
    }

    #[test]
    fn a_released_stack_keeps_its_guard() {
        // Declared first, so dropped last: the depot's stacks are registered in it.
        let registry = Registry::new();
        let depot = Depot::new(MIN_STACK_SIZE, 0);
        depot.scavenge_in_background();
        let mut v = Vec::new();
        // SAFETY: the registry outlives the stacks.
        unsafe { depot.refill(&mut v, 3, &registry) }.unwrap();
        let guard = v[1].guard_range().start;
        depot.spill(&mut v, 3);
        assert_eq!(depot.scavenge(3), 0, "the first period begins");
        assert_eq!(depot.scavenge(3), 3, "one madvise over three neighbours and their guards");
        // SAFETY: fork in a test; the child only writes to memory and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: a deliberate write to the guard page: it must fault.
            unsafe {
                std::ptr::write_volatile(guard as *mut u8, 1);
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFSIGNALED(status)
                && matches!(libc::WTERMSIG(status), libc::SIGSEGV | libc::SIGBUS),
            "writing to a released stack's guard page must fault (status {status:#x})"
        );
    }
}
