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
//! costs no system call; each processor owns one (no locking).

use crate::registry::{Registry, Slot};
use crate::task::Task;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// The smallest usable stack a user thread gets (bytes, before rounding to pages).
///
/// Rust's panic machinery (formatting the message, the default hook) needs a
/// few kilobytes; 16 KiB leaves room for it and for modest user code.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

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

/// The usable size a [`Stack::new`] of `size` bytes gets.
pub(crate) fn rounded_size(size: usize) -> usize {
    size.max(MIN_STACK_SIZE).next_multiple_of(page_size())
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
        let base = NonNull::new(ptr.cast::<u8>()).expect("mmap never returns null on success");
        // From here on `stack` owns the mapping: an early return unmaps it.
        let stack = Stack { base, len, guard: page, slot: None };
        stack.install_guard()?;
        Ok(stack)
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
            unsafe { crate::registry::set_owner(slot, task) };
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
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            // SAFETY: registered by `new_registered`, whose caller keeps the
            // registry alive; the slot dies with the stack.
            unsafe { Registry::unregister(slot) };
        }
        // SAFETY: we own the whole mapping and nobody runs on it any more
        // (a stack is only dropped once its thread has switched away for good).
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        debug_assert_eq!(rc, 0, "munmap of a stack failed");
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

    /// A stack from the pool, else from the depot, else a new one
    /// registered in `registry`.
    ///
    /// # Safety
    ///
    /// `registry` must outlive the stack (see [`Stack::new_registered`]).
    #[inline]
    pub(crate) unsafe fn get(&mut self, depot: &Depot, registry: &Registry) -> io::Result<Stack> {
        if let Some(s) = self.free.pop() {
            return Ok(s);
        }
        depot.refill(&mut self.free, self.cap.div_ceil(2));
        match self.free.pop() {
            Some(s) => Ok(s),
            // SAFETY: forwarded from the caller.
            None => unsafe { Stack::new_registered(self.size, registry) },
        }
    }

    /// Returns a stack for reuse (spilling half the pool to the depot when
    /// full); unmaps it if it has another size.
    #[inline]
    pub(crate) fn put(&mut self, stack: Stack, depot: &Depot) {
        if stack.size() != self.size {
            return;
        }
        if self.free.len() >= self.cap {
            depot.spill(&mut self.free, self.cap.div_ceil(2));
        }
        self.free.push(stack);
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

/// Stacks shared by the pools of one runtime, traded in batches.
#[derive(Debug)]
pub(crate) struct Depot {
    stacks: std::sync::Mutex<Vec<Stack>>,
    cap: usize,
}

impl Depot {
    /// An empty depot keeping at most `cap` stacks.
    pub(crate) fn new(cap: usize) -> Depot {
        Depot { stacks: std::sync::Mutex::new(Vec::new()), cap }
    }

    fn refill(&self, into: &mut Vec<Stack>, n: usize) {
        let mut s = self.stacks.lock().unwrap_or_else(|e| e.into_inner());
        let keep = s.len().saturating_sub(n);
        into.extend(s.drain(keep..));
    }

    fn spill(&self, from: &mut Vec<Stack>, n: usize) {
        let keep = from.len().saturating_sub(n);
        let excess: Vec<Stack> = {
            let mut s = self.stacks.lock().unwrap_or_else(|e| e.into_inner());
            s.extend(from.drain(keep..));
            let over = s.len().saturating_sub(self.cap);
            s.drain(..over).collect()
        };
        // Unmapped outside the lock.
        drop(excess);
    }

    /// Unmaps every stack kept (shutdown).
    pub(crate) fn clear(&self) {
        let all = std::mem::take(&mut *self.stacks.lock().unwrap_or_else(|e| e.into_inner()));
        drop(all);
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
        let depot = Depot::new(0);
        let registry = Registry::new();
        let mut pool = StackPool::new(MIN_STACK_SIZE, 2);
        // SAFETY: the registry outlives the pool and its stacks.
        let a = unsafe { pool.get(&depot, &registry) }.unwrap();
        let a_top = a.top();
        pool.put(a, &depot);
        assert_eq!(pool.len(), 1);
        // SAFETY: as above.
        assert_eq!(unsafe { pool.get(&depot, &registry) }.unwrap().top(), a_top);
        pool.put(Stack::new(MIN_STACK_SIZE * 4).unwrap(), &depot);
        assert_eq!(pool.len(), 0, "a stack of another size is not kept");
        for _ in 0..3 {
            pool.put(Stack::new(MIN_STACK_SIZE).unwrap(), &depot);
        }
        assert_eq!(pool.len(), 2, "a full pool spills half (the empty depot drops it)");
    }

    #[test]
    fn pools_trade_stacks_through_the_depot() {
        let depot = Depot::new(16);
        let mut full = StackPool::new(MIN_STACK_SIZE, 4);
        let mut empty = StackPool::new(MIN_STACK_SIZE, 4);
        for _ in 0..5 {
            full.put(Stack::new(MIN_STACK_SIZE).unwrap(), &depot);
        }
        assert_eq!(full.len(), 3, "spilled 2 of 4, then kept the fifth");
        let registry = Registry::new();
        // SAFETY: the registry outlives the stack.
        let s = unsafe { empty.get(&depot, &registry) }.unwrap();
        assert_eq!(empty.len(), 1, "refilled 2 from the depot, handed out one");
        drop(s);
    }
}
