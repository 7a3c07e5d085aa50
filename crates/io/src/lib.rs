//! Quiver's one door to the disk: aligned buffers, positioned reads through
//! io_uring or `pread` (with `O_DIRECT` when the filesystem allows it),
//! positioned writes, I/O counters, the workspace's only `mmap`s (a
//! read-only map, and [`SparseFile`]'s writable one), and the free space
//! of a filesystem ([`available_bytes`]).
//!
//! Invariants:
//! - This is one of the two crates allowed to use `unsafe`; every block has a
//!   `// SAFETY:` comment arguing its preconditions.
//! - A buffer handed to the kernel stays exclusively borrowed until its
//!   completion has been reaped: [`ReadFile::read_batch`] returns (or unwinds)
//!   only after every read it submitted has completed, even on error. If the
//!   kernel refuses to let it wait for its reads, the process aborts rather
//!   than hand back memory the kernel may still write.
//! - A [`ReadFile`] assumes its file does not change while open: its length
//!   is taken once, at open, and reads past it fail with
//!   [`Error::UnexpectedEof`] before touching the kernel.
//! - When `O_DIRECT` is requested, every read must have an offset and buffer
//!   address that are multiples of [`ALIGN`], and a length that is a multiple
//!   of [`ALIGN`] unless the read ends exactly at end of file. This is checked
//!   before submission whether or not the filesystem honoured `O_DIRECT`, so a
//!   misaligned caller fails the same way on every filesystem.
//! - [`IoStats`] counts one read call per completed [`ReadRequest`] and one
//!   write call per [`WriteFile::write_all_at`], however many system calls
//!   were needed; a failed batch records nothing.
//!
//! The crate has no features.
#![warn(missing_docs)]

#[allow(unsafe_code)] // aligned allocation and io_uring, argued at each block
mod buf;
pub mod output;
#[allow(unsafe_code)] // aligned allocation and io_uring, argued at each block
mod read;
pub mod size;
#[allow(unsafe_code)] // one statvfs call, argued at its block
mod space;
#[allow(unsafe_code)] // a writable mapping and hole punching, argued at each block
mod sparse;
mod stats;
#[allow(unsafe_code)] // aligned allocation and io_uring, argued at each block
mod uring;
mod write;

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

pub use buf::{advise_huge_pages, AlignedBuf};
pub use memmap2::Mmap;
pub use output::{Output, Shape};
pub use read::{Backend, BackendChoice, ReadFile, ReadOptions, ReadRequest};
pub use space::available_bytes;
pub use sparse::SparseFile;
pub use stats::{IoCounters, IoStats};
pub use write::WriteFile;

/// Alignment, in bytes, of offsets, lengths and buffer addresses for direct
/// I/O. 4 KiB covers the logical block size of every disk we run on.
pub const ALIGN: usize = 4096;

/// [`ALIGN`] as a file offset.
const ALIGN_U64: u64 = 4096;

/// Rounds `x` up to the next multiple of [`ALIGN`].
///
/// `x` must be at most `u64::MAX - 4095`; larger values overflow (a panic in
/// debug builds).
#[must_use]
pub fn align_up(x: u64) -> u64 {
    x.next_multiple_of(ALIGN_U64)
}

/// Errors from quiver-io. Each variant names the operation that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening a file for reading failed.
    #[error("failed to open {} for reading", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Reading a file's metadata (its length) failed.
    #[error("failed to stat {}", path.display())]
    Metadata {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// io_uring was requested explicitly but could not be set up.
    #[error("failed to set up io_uring with {queue_depth} entries for {}", path.display())]
    UringSetup {
        /// The file being opened.
        path: PathBuf,
        /// The requested queue depth.
        queue_depth: u32,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A direct read broke the alignment rule (see the crate docs).
    #[error(
        "misaligned direct read of {len} bytes at offset {offset} into address {addr:#x} from {}: \
         offset and address must be multiples of 4096, and so must the length unless the read \
         ends at end of file",
        path.display()
    )]
    Misaligned {
        /// The file.
        path: PathBuf,
        /// The requested offset.
        offset: u64,
        /// The requested length.
        len: usize,
        /// The buffer's address.
        addr: usize,
    },
    /// A read reached end of file before filling its buffer.
    #[error("unexpected end of file reading {len} bytes at offset {offset} from {}", path.display())]
    UnexpectedEof {
        /// The file.
        path: PathBuf,
        /// The requested offset.
        offset: u64,
        /// The requested length.
        len: usize,
    },
    /// The kernel failed a read.
    #[error("failed to read {len} bytes at offset {offset} from {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The requested offset.
        offset: u64,
        /// The requested length.
        len: usize,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Submitting reads to io_uring failed.
    #[error("failed to submit io_uring reads for {}", path.display())]
    Submit {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Creating a file for writing failed.
    #[error("failed to create {}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Writing to a file failed.
    #[error("failed to write {len} bytes at offset {offset} to {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The requested offset.
        offset: u64,
        /// The requested length.
        len: usize,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Flushing a file to disk failed.
    #[error("failed to sync {}", path.display())]
    Sync {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A flash file ([`SparseFile`]) already exists: one is always made
    /// fresh, so no file given by mistake is ever truncated.
    #[error("{} already exists: a sparse file is made fresh (remove it, or name another)", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// Mapping a sparse file for writing failed.
    #[error("failed to map {} for writing", path.display())]
    MapWritable {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Giving a range of a sparse file's space back failed.
    #[error("failed to punch {len} bytes at offset {offset} out of {}", path.display())]
    Punch {
        /// The file.
        path: PathBuf,
        /// Where the range starts.
        offset: u64,
        /// Its length.
        len: u64,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Memory-mapping a file failed.
    #[error("failed to map file descriptor {fd} read-only")]
    Map {
        /// The file descriptor.
        fd: i32,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Dropping a file's pages from the page cache failed.
    #[error("failed to drop page cache of file descriptor {fd}")]
    DropPageCache {
        /// The file descriptor.
        fd: i32,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A backend name did not parse.
    #[error("unknown io backend {input:?} (expected auto, uring or pread)")]
    ParseBackend {
        /// The text that failed to parse.
        input: String,
    },
}

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Maps `file` read-only into memory.
///
/// With [`SparseFile::create`], one of the two places in the workspace that
/// call `mmap`. The caller must
/// ensure the file is not truncated (or written) while the map lives: pages
/// beyond a shrunken end of file raise `SIGBUS` when touched, which kills the
/// process, and writes by others show through the `&[u8]`. Callers document
/// that their files are immutable while mapped.
#[allow(unsafe_code)] // argued at the block
pub fn map_readonly(file: &File) -> Result<Mmap> {
    // SAFETY: `Mmap::map` is unsafe because the mapping aliases the file: the
    // returned `&[u8]` is only sound while nobody truncates or writes the
    // file. That is the documented contract of this function, passed on to
    // every caller; a concurrent truncation raises SIGBUS, not silent UB in
    // safe code we can prevent here.
    unsafe { Mmap::map(file) }.map_err(|source| Error::Map {
        fd: file.as_raw_fd(),
        source,
    })
}

/// Takes the pages of `part`, a slice of `map`, out of this process's
/// resident memory: they stay in the page cache, and a later touch maps
/// them again, unchanged, by a minor fault (the kernel maps up to 64 KiB
/// around each). For reading a large mapped file through once (checking
/// it) without keeping all of it resident. Pages only partly inside `part`
/// are released too. Best effort: if the kernel refuses, the pages stay.
///
/// # Panics
/// If `part` does not lie inside `map`.
#[allow(unsafe_code)] // argued at the block
pub fn release_mapped(map: &Mmap, part: &[u8]) {
    const PAGE: usize = 4096;
    let base = map.as_ptr() as usize;
    let start = part.as_ptr() as usize;
    assert!(
        start >= base && start + part.len() <= base + map.len(),
        "the part to release lies outside the mapping"
    );
    let from = (start - base) / PAGE * PAGE;
    let to = (start - base + part.len()).min(map.len());
    if to <= from {
        return;
    }
    // SAFETY: MADV_DONTNEED discards a mapping's private copies of pages;
    // this mapping is read-only, so it has none, and the pages read back
    // from the file are the bytes they held (the file is immutable while
    // mapped: `map_readonly`'s contract). Borrows of the mapping therefore
    // see no change.
    let _ =
        unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from) };
}

/// Asks the kernel to drop `file`'s clean pages from the page cache, so that
/// the next buffered read goes to the disk (benchmarks use this to be honest).
///
/// Dirty pages are not dropped: call [`WriteFile::sync`] first.
#[allow(unsafe_code)] // argued at the block
pub fn drop_page_cache(file: &File) -> Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is an open descriptor, borrowed from `file` for the whole
    // call; posix_fadvise only reads its scalar arguments.
    let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
    // posix_fadvise returns the error number instead of setting errno.
    if rc != 0 {
        return Err(Error::DropPageCache {
            fd,
            source: io::Error::from_raw_os_error(rc),
        });
    }
    Ok(())
}

/// Hints the CPU to start bringing the cache line holding `data` into the
/// cache, so a later read does not wait on memory. A hint only: it never
/// faults, never changes a value, and does nothing on other architectures.
#[allow(unsafe_code)] // argued at the block
#[inline]
pub fn prefetch<T>(data: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that cannot fault or write; the pointer
    // comes from a live reference in any case.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            std::ptr::from_ref(data).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_up_rounds_to_next_multiple() {
        assert_eq!(align_up(0), 0);
        assert_eq!(align_up(1), 4096);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(4097), 8192);
    }

    #[test]
    fn errors_name_path_offset_and_len() {
        let e = Error::UnexpectedEof {
            path: PathBuf::from("/x/y.bin"),
            offset: 8192,
            len: 4096,
        };
        assert_eq!(
            e.to_string(),
            "unexpected end of file reading 4096 bytes at offset 8192 from /x/y.bin"
        );
    }

    #[test]
    fn map_and_drop_cache_on_a_small_file() {
        let mut f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut f, b"hello").unwrap();
        let m = map_readonly(&f).unwrap();
        assert_eq!(&m[..], b"hello");
        drop_page_cache(&f).unwrap();
    }

    #[test]
    fn map_empty_file() {
        let f = tempfile::tempfile().unwrap();
        assert!(map_readonly(&f).unwrap().is_empty());
    }
}
