//! The kernel's userfaultfd ABI (`linux/userfaultfd.h`, Linux 6.8): the
//! structures the `ioctl(2)` requests take, the request numbers and the
//! constants, as the kernel's uapi header spells them. The `libc` crate
//! carries none of it (0.2.191, nor its main branch of August 2026), so this is
//! the one hand-written copy: the runtime's idle-stack reclaim (`uffd.rs`)
//! and the lab's `os.mm.uffd` probe (`schedlab-probes`, which depends on this
//! crate) both take it from here. Definitions only: no calls, no state.
//!
//! Each request number is computed from its structure's size, as the
//! header's `_IOWR`/`_IOR` do, and checked at compile time against the value
//! the header gives on x86-64 and aarch64, so a structure laid out wrong does
//! not build.

use std::mem::size_of;

/// The `ioctl` type letter of every userfaultfd request.
const UFFDIO: libc::c_ulong = 0xAA;

/// `_IOWR(UFFDIO, nr, size)`: a request that reads and writes its structure.
const fn iowr(nr: libc::c_ulong, size: usize) -> libc::c_ulong {
    (3 << 30) | ((size as libc::c_ulong) << 16) | (UFFDIO << 8) | nr
}

/// `_IOR(UFFDIO, nr, size)`: the header's direction for `UNREGISTER` and
/// `WAKE` (historical: the kernel only reads their range).
const fn ior(nr: libc::c_ulong, size: usize) -> libc::c_ulong {
    (2 << 30) | ((size as libc::c_ulong) << 16) | (UFFDIO << 8) | nr
}

/// The API version `UFFDIO_API` must be given.
pub const UFFD_API: u64 = 0xAA;
/// `userfaultfd(2)` flag: only faults taken in user mode (Linux 5.11); what
/// an unprivileged process may ask for.
pub const UFFD_USER_MODE_ONLY: libc::c_int = 1;
/// The `UFFDIO_MOVE` feature (Linux 6.8), asked for in `UFFDIO_API`.
pub const UFFD_FEATURE_MOVE: u64 = 1 << 16;
/// `UFFDIO_REGISTER` mode: report missing-page faults.
pub const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
/// A message's event: a page fault.
pub const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

/// `struct uffdio_api`: the handshake.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct UffdioApi {
    /// In: [`UFFD_API`].
    pub api: u64,
    /// In: the features asked for; out: those granted.
    pub features: u64,
    /// Out: the requests the descriptor supports.
    pub ioctls: u64,
}

/// `struct uffdio_range`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct UffdioRange {
    /// Page aligned start.
    pub start: u64,
    /// Length, a multiple of the page size.
    pub len: u64,
}

/// `struct uffdio_register`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct UffdioRegister {
    /// The range to register.
    pub range: UffdioRange,
    /// `UFFDIO_REGISTER_MODE_*`.
    pub mode: u64,
    /// Out: the requests valid on the range.
    pub ioctls: u64,
}

/// `struct uffdio_copy` (and `struct uffdio_move`, the same layout with
/// `move` for `copy`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct UffdioCopy {
    /// Destination, in a registered range.
    pub dst: u64,
    /// Source.
    pub src: u64,
    /// Bytes, a multiple of the page size.
    pub len: u64,
    /// Mode flags (0: wake the waiters).
    pub mode: u64,
    /// Out: bytes copied (moved), or a negated errno.
    pub copy: i64,
}

/// `struct uffdio_zeropage`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct UffdioZeropage {
    /// The range to fill with zeros.
    pub range: UffdioRange,
    /// Mode flags (0: wake the waiters).
    pub mode: u64,
    /// Out: bytes zeroed, or a negated errno.
    pub zeropage: i64,
}

/// `struct uffd_msg` as a page-fault event reads (the only event a
/// `MISSING` registration without other features queues): 32 bytes.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct UffdMsg {
    /// [`UFFD_EVENT_PAGEFAULT`].
    pub event: u8,
    /// The header's three reserved fields.
    pub reserved: [u8; 7],
    /// `arg.pagefault.flags`.
    pub flags: u64,
    /// `arg.pagefault.address`: the faulting address.
    pub address: u64,
    /// `arg.pagefault.feat` (the thread id with `UFFD_FEATURE_THREAD_ID`).
    pub feat: u64,
}

/// Handshake: `_IOWR(UFFDIO, 0x3F, struct uffdio_api)`.
pub const UFFDIO_API: libc::c_ulong = iowr(0x3F, size_of::<UffdioApi>());
/// Register a range: `_IOWR(UFFDIO, 0x00, struct uffdio_register)`.
pub const UFFDIO_REGISTER: libc::c_ulong = iowr(0x00, size_of::<UffdioRegister>());
/// Unregister a range: `_IOR(UFFDIO, 0x01, struct uffdio_range)`.
pub const UFFDIO_UNREGISTER: libc::c_ulong = ior(0x01, size_of::<UffdioRange>());
/// Wake the waiters on a range: `_IOR(UFFDIO, 0x02, struct uffdio_range)`.
pub const UFFDIO_WAKE: libc::c_ulong = ior(0x02, size_of::<UffdioRange>());
/// Fill missing pages with a copy: `_IOWR(UFFDIO, 0x03, struct uffdio_copy)`.
pub const UFFDIO_COPY: libc::c_ulong = iowr(0x03, size_of::<UffdioCopy>());
/// Fill missing pages with zeros: `_IOWR(UFFDIO, 0x04, struct uffdio_zeropage)`.
pub const UFFDIO_ZEROPAGE: libc::c_ulong = iowr(0x04, size_of::<UffdioZeropage>());
/// Move pages into a range (Linux 6.8): `_IOWR(UFFDIO, 0x05, struct uffdio_move)`.
pub const UFFDIO_MOVE: libc::c_ulong = iowr(0x05, size_of::<UffdioCopy>());
/// A new userfaultfd from `/dev/userfaultfd` (Linux 6.1): `_IO(UFFDIO, 0x00)`.
pub const USERFAULTFD_IOC_NEW: libc::c_ulong = UFFDIO << 8;

// The header's values (x86-64 and aarch64 share the generic `_IOC` layout):
// a structure of the wrong size changes its request and stops the build.
const _: () = {
    assert!(UFFDIO_API == 0xC018_AA3F);
    assert!(UFFDIO_REGISTER == 0xC020_AA00);
    assert!(UFFDIO_UNREGISTER == 0x8010_AA01);
    assert!(UFFDIO_WAKE == 0x8010_AA02);
    assert!(UFFDIO_COPY == 0xC028_AA03);
    assert!(UFFDIO_ZEROPAGE == 0xC020_AA04);
    assert!(UFFDIO_MOVE == 0xC028_AA05);
    assert!(USERFAULTFD_IOC_NEW == 0xAA00);
    assert!(size_of::<UffdMsg>() == 32);
};
