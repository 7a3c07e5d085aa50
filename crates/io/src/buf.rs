//! A zeroed heap buffer whose start is [`ALIGN`]-aligned, for direct I/O.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::ALIGN;

/// A zero-initialised heap buffer whose start is [`ALIGN`]-aligned.
///
/// Invariants: `ptr` points to an allocation of `capacity` bytes with layout
/// `(capacity, ALIGN)`, all initialised; `capacity` is a non-zero multiple of
/// [`ALIGN`] and `len <= capacity`. The buffer owns the allocation uniquely,
/// like a `Box<[u8]>`. Because the capacity is rounded up, a direct read of
/// `align_up(len)` bytes into the allocation always fits.
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
    /// fails, like `Vec`.
    #[must_use]
    pub fn zeroed(len: usize) -> Self {
        let capacity = len
            .checked_next_multiple_of(ALIGN)
            .expect("AlignedBuf capacity overflows usize")
            .max(ALIGN);
        let layout =
            Layout::from_size_align(capacity, ALIGN).expect("AlignedBuf capacity overflows isize");
        // SAFETY: `layout` has a non-zero size (`capacity >= ALIGN`).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
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
    /// one [`ALIGN`]).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
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

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated in `zeroed` with exactly this layout
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
            assert!(b.capacity() >= len && b.capacity() % ALIGN == 0 && b.capacity() > 0);
            assert!(b.iter().all(|&x| x == 0));
            b.fill(7);
            assert!(b.iter().all(|&x| x == 7));
        }
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<AlignedBuf>();
    }
}
