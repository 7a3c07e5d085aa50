//! A zeroed buffer whose start is [`ALIGN`]-aligned, for direct I/O: on
//! the heap, or mapped on its own (and on huge pages) when large.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::ALIGN;

/// Buffers at least this large are mapped on their own, with transparent
/// huge pages asked for.
const HUGE_PAGE: usize = 2 << 20;

/// A zero-initialised buffer whose start is [`ALIGN`]-aligned.
///
/// A buffer whose capacity is 2 MiB or more is an anonymous mapping of its own, advised
/// to be backed by transparent huge pages (`MADV_HUGEPAGE`, honoured where
/// the kernel's setting is `madvise` or `always`) before any page is
/// touched: a walk's random reads of a loaded graph then miss the TLB far
/// less. One made by [`zeroed_sparse`](Self::zeroed_sparse) is advised off
/// them instead. The heap would not do: an over-aligned zeroed allocation is
/// zero-filled by hand, which places small pages first.
///
/// Invariants: `ptr` points to an allocation of `capacity` bytes, all
/// initialised: an anonymous mapping (of `mapped_len(capacity)` bytes)
/// when `capacity >= HUGE_PAGE`, else a heap allocation with layout
/// `(capacity, ALIGN)`; `capacity` is a non-zero multiple of [`ALIGN`] and
/// `len <= capacity`. The buffer owns
/// the allocation uniquely, like a `Box<[u8]>`. Because the capacity is
/// rounded up, a direct read of `align_up(len)` bytes into the allocation
/// always fits.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
}

// SAFETY: `AlignedBuf` uniquely owns its allocation (no shared pointers), so
// moving it to another thread moves that ownership, as for `Box<[u8]>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]` through `Deref`; mutation needs
// `&mut self`, so sharing across threads is as safe as for `Box<[u8]>`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zero bytes starting at an [`ALIGN`]-aligned address.
    ///
    /// # Panics
    /// If the rounded-up capacity overflows `isize`; aborts if the allocator
    /// or the kernel has no memory for it, like `Vec`.
    #[must_use]
    pub fn zeroed(len: usize) -> Self {
        Self::zeroed_with(len, libc::MADV_HUGEPAGE)
    }

    /// Allocates `len` zero bytes, as [`zeroed`](Self::zeroed), for a
    /// buffer of which only a few scattered pages will be written: when
    /// large, its mapping is advised onto small pages
    /// (`MADV_NOHUGEPAGE`), so that each page written costs one zeroed
    /// 4 KiB page, not a 2 MiB one, and the pages never written cost
    /// nothing. (A `vec![0; n]` would not do: the heap hands back memory
    /// it has used before, which it zero-fills whole by hand.)
    #[must_use]
    pub fn zeroed_sparse(len: usize) -> Self {
        Self::zeroed_with(len, libc::MADV_NOHUGEPAGE)
    }

    /// [`zeroed`](Self::zeroed), with `advice` given to the mapping of a
    /// large buffer before any of its pages is touched.
    fn zeroed_with(len: usize, advice: libc::c_int) -> Self {
        let capacity = len
            .checked_next_multiple_of(ALIGN)
            .expect("AlignedBuf capacity overflows usize")
            .max(ALIGN);
        let layout =
            Layout::from_size_align(capacity, ALIGN).expect("AlignedBuf capacity overflows isize");
        let raw = if capacity >= HUGE_PAGE {
            map_advised(capacity, advice)
        } else {
            // SAFETY: `layout` has a non-zero size (`capacity >= ALIGN`).
            unsafe { alloc::alloc_zeroed(layout) }
        };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Self { ptr, len, capacity }
    }

    /// The number of bytes the buffer dereferences to.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether [`len`](Self::len) is zero.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated: `len` rounded up to a multiple of [`ALIGN`] (at least
    /// one [`ALIGN`]) when made, kept by [`set_len`](Self::set_len).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Makes the buffer `len` bytes long within its allocation, for reuse
    /// by another read: the bytes are whatever it held, not zeroed, which
    /// saves the kernel faulting in and zeroing fresh pages.
    ///
    /// # Panics
    /// If `len` exceeds the [`capacity`](Self::capacity).
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity,
            "a buffer of {} bytes cannot hold {len}",
            self.capacity
        );
        // The type invariant holds: every byte of the allocation is
        // initialised, so any length up to the capacity is.
        self.len = len;
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: by the type invariant `ptr` is valid and initialised for
        // `capacity >= len` bytes, and `&self` forbids concurrent mutation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// Bytes of the mapping of a buffer of `capacity >= HUGE_PAGE` bytes: a
/// whole number of huge pages, so that the kernel places it on a huge-page
/// boundary and every huge page it spans can be used. The tail beyond
/// `capacity` is never touched and so costs no memory. `None` on
/// overflow.
fn mapped_len(capacity: usize) -> Option<usize> {
    capacity.checked_next_multiple_of(HUGE_PAGE)
}

/// A fresh anonymous mapping of `mapped_len(capacity)` zero bytes
/// (page-aligned, so [`ALIGN`]-aligned), given `advice` (onto huge pages
/// or off them); null if the kernel has no memory for it.
fn map_advised(capacity: usize, advice: libc::c_int) -> *mut u8 {
    let Some(len) = mapped_len(capacity) else {
        return std::ptr::null_mut();
    };
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing touches no existing memory.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    // The whole mapping, before any of its pages is touched. Best effort:
    // a kernel without transparent huge pages refuses either advice, and
    // the memory works the same.
    // SAFETY: the range is the mapping just made; the advice changes how
    // its pages are backed, never their contents.
    unsafe { libc::madvise(raw, len, advice) };
    raw.cast()
}

/// Asks the kernel to back the whole 2 MiB pages inside `memory` with
/// transparent huge pages (`MADV_HUGEPAGE`), for a large allocation made
/// elsewhere (a `Vec`, say) that will be written or read at random.
///
/// Call it before the memory is touched: the advice places huge pages
/// as pages are first faulted in, and a page already on small pages stays
/// there until the kernel's background collapse gets to it. Best effort
/// and harmless: where the kernel has no transparent huge pages, or the
/// memory spans no whole huge page, nothing changes.
pub fn advise_huge_pages<T>(memory: &[T]) {
    let start = memory.as_ptr() as usize;
    let Some(first) = start.checked_next_multiple_of(HUGE_PAGE) else {
        return;
    };
    let last = (start + std::mem::size_of_val(memory)) / HUGE_PAGE * HUGE_PAGE;
    if first < last {
        madvise_huge(first, last - first);
    }
}

/// Advises the `len` bytes from `start`, memory this process has mapped,
/// onto transparent huge pages. Best effort: a kernel without them
/// refuses, and the memory works the same on small pages.
fn madvise_huge(start: usize, len: usize) {
    // SAFETY: the range is memory this process has mapped; the advice
    // changes how its pages are backed, never their contents.
    unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.capacity >= HUGE_PAGE {
            let len = mapped_len(self.capacity).expect("map_advised mapped this length");
            // SAFETY: `ptr` is the mapping of `len` bytes `map_advised` made
            // (the type invariant), unmapped only here.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), len) };
            return;
        }
        // SAFETY: `ptr` was allocated in `zeroed_with` with exactly this layout
        // (the constructor checked it), and is freed only here.
        unsafe {
            alloc::dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.capacity, ALIGN),
            );
        }
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_is_aligned_zero_and_rounded() {
        for len in [0, 1, 4095, 4096, 4097, 3 * 4096 + 5] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.is_empty(), len == 0);
            assert_eq!(b.as_ptr() as usize % ALIGN, 0);
            assert!(b.capacity() >= len && b.capacity().is_multiple_of(ALIGN) && b.capacity() > 0);
            assert!(b.iter().all(|&x| x == 0));
            b.fill(7);
            assert!(b.iter().all(|&x| x == 7));
        }
    }

    /// The `VmFlags` of the mapping of `/proc/self/smaps` that holds `addr`.
    fn vm_flags(addr: usize) -> String {
        smaps_field(addr, "VmFlags:")
    }

    /// The value of `field` (`"Rss:"`, say) in the entry of
    /// `/proc/self/smaps` for the mapping that holds `addr`.
    fn smaps_field(addr: usize, field: &str) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = (lo..hi).contains(&addr);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(value) = line.strip_prefix(field) {
                    return value.trim().to_owned();
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn large_buffers_ask_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            return; // A kernel without transparent huge pages: nothing to ask.
        }
        let mut large = AlignedBuf::zeroed(2 * HUGE_PAGE + 5);
        let flags = vm_flags(large.as_ptr() as usize + HUGE_PAGE);
        assert!(
            flags.split_whitespace().any(|f| f == "hg"),
            "a {} byte buffer's mapping lacks the huge-page advice: {flags}",
            large.len()
        );
        assert_eq!(large.as_ptr() as usize % ALIGN, 0);
        // The boundary: a capacity of exactly one huge page is mapped and
        // advised, one a page smaller stays on the heap, unadvised.
        let exact = AlignedBuf::zeroed(HUGE_PAGE);
        assert!(vm_flags(exact.as_ptr() as usize)
            .split_whitespace()
            .any(|f| f == "hg"));
        let small = AlignedBuf::zeroed(HUGE_PAGE - ALIGN);
        assert!(!vm_flags(small.as_ptr() as usize)
            .split_whitespace()
            .any(|f| f == "hg"));
        assert!(large.iter().all(|&x| x == 0));
        large.fill(7);
        assert!(large.iter().all(|&x| x == 7));
    }

    #[test]
    fn a_sparse_buffer_costs_only_the_pages_written() {
        let mut sparse = AlignedBuf::zeroed_sparse(4 * HUGE_PAGE);
        let start = sparse.as_ptr() as usize;
        assert_eq!(start % ALIGN, 0);
        assert!(sparse.iter().step_by(ALIGN).all(|&x| x == 0));
        // Reading faulted in the shared zero page only; write one page.
        sparse[HUGE_PAGE + 5] = 7;
        let rss: usize = smaps_field(start, "Rss:")
            .trim_end_matches(" kB")
            .parse()
            .unwrap();
        assert!(
            rss <= 8,
            "one page written, yet the mapping holds {rss} kB resident"
        );
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            let flags = vm_flags(start);
            assert!(
                flags.split_whitespace().any(|f| f == "nh"),
                "a sparse buffer's mapping lacks the no-huge-page advice: {flags}"
            );
        }
        assert_eq!(sparse[HUGE_PAGE + 5], 7);
        assert_eq!(sparse[HUGE_PAGE + 4], 0);
    }

    #[test]
    fn a_vec_asks_for_huge_pages_for_its_whole_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            return; // A kernel without transparent huge pages: nothing to ask.
        }
        // Three huge pages' worth from wherever the allocator puts them:
        // at least the two in the middle are whole.
        let mut words = vec![0u64; 3 * HUGE_PAGE / 8];
        let middle = words.as_ptr() as usize + 3 * HUGE_PAGE / 2;
        let has_advice = |addr| vm_flags(addr).split_whitespace().any(|f| f == "hg");
        assert!(!has_advice(middle), "advised before asking");
        advise_huge_pages(&words);
        assert!(
            has_advice(middle),
            "the vector's middle lacks the huge-page advice"
        );
        words.fill(3);
        assert!(
            words.iter().all(|&w| w == 3),
            "the advice changed the contents"
        );
        // Memory spanning no whole huge page is left alone.
        let small = vec![1u8; 4096];
        advise_huge_pages(&small);
        assert!(!has_advice(small.as_ptr() as usize));
    }

    #[test]
    fn set_len_keeps_the_allocation_and_its_bytes() {
        for len in [100, 3 * HUGE_PAGE + 5] {
            let mut buf = AlignedBuf::zeroed(len);
            let (ptr, capacity) = (buf.as_ptr(), buf.capacity());
            buf.fill(9);
            buf.set_len(capacity);
            assert_eq!(
                (buf.as_ptr(), buf.len(), buf.capacity()),
                (ptr, capacity, capacity)
            );
            assert!(buf[..len].iter().all(|&x| x == 9));
            assert!(buf[len..].iter().all(|&x| x == 0), "never written: zero");
            buf.set_len(1);
            assert_eq!((buf.len(), buf.capacity(), buf[0]), (1, capacity, 9));
        }
    }

    #[test]
    #[should_panic(expected = "cannot hold")]
    fn set_len_refuses_more_than_the_capacity() {
        let mut buf = AlignedBuf::zeroed(10);
        let capacity = buf.capacity();
        buf.set_len(capacity + 1);
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<AlignedBuf>();
    }
}
