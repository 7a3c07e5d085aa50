//! Registered memory: the words a region is made of, the local handle
//! ([`Region`]), the descriptor peers use to reach it ([`RemoteRegion`]),
//! and the per-node table of registrations that remote operations look keys
//! up in.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::error::VerbError;
use crate::wr::{Op, Output};
use crate::NodeRank;

/// The memory of a region: 8-byte atomic words, so that local code, remote
/// operations and the NIC may all touch it at once without a data race.
/// Byte accesses copy word by word, so a multi-word access is not atomic: a
/// READ concurrent with a WRITE may observe some words old and some new, as
/// on real RDMA. Each 8-byte aligned word is atomic.
#[derive(Debug)]
pub(crate) struct Memory {
    words: Box<[AtomicU64]>,
    len: usize,
}

impl Memory {
    /// `len` bytes of zeros, taken from the allocator already zeroed: a
    /// large region is fresh pages of the OS, each committed only when
    /// first written, so room a region reserves but never uses costs no
    /// memory.
    pub(crate) fn zeroed(len: usize) -> Self {
        let count = len.div_ceil(8);
        if count == 0 {
            return Self {
                words: Box::new([]),
                len,
            };
        }
        let layout = std::alloc::Layout::array::<AtomicU64>(count).expect("a region fits memory");
        // SAFETY: `layout` has a non-zero size (count > 0). The memory it
        // gets is zeroed, and all-zero bytes are a valid `AtomicU64` (0,
        // with the size and alignment of a `u64`), so the slice of `count`
        // words over it is initialised; the global allocator gave it with
        // this layout, which is how a `Box<[AtomicU64]>` frees it.
        let words = unsafe {
            let ptr = std::alloc::alloc_zeroed(layout).cast::<AtomicU64>();
            if ptr.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, count))
        };
        Self { words, len }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Base address of the words, for fabrics that register memory with a NIC.
    #[cfg_attr(not(any(feature = "rdma", feature = "mpi")), allow(dead_code))]
    pub(crate) fn as_ptr(&self) -> *const AtomicU64 {
        self.words.as_ptr()
    }

    fn check(&self, offset: u64, len: usize) -> Result<usize, ()> {
        let end = offset.checked_add(len as u64).ok_or(())?;
        if end > self.len as u64 {
            return Err(());
        }
        usize::try_from(offset).map_err(|_| ())
    }

    /// Copies `out.len()` bytes at `offset` into `out`, word by word.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) {
        let mut pos = offset;
        let mut done = 0;
        while done < out.len() {
            let word = self.words[pos / 8].load(Ordering::Acquire).to_le_bytes();
            let start = pos % 8;
            let n = (8 - start).min(out.len() - done);
            out[done..done + n].copy_from_slice(&word[start..start + n]);
            done += n;
            pos += n;
        }
    }

    /// Copies `data` to `offset`, word by word; a partial word is merged
    /// atomically with its neighbouring bytes.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) {
        let mut pos = offset;
        let mut done = 0;
        while done < data.len() {
            let start = pos % 8;
            let n = (8 - start).min(data.len() - done);
            let word = &self.words[pos / 8];
            if n == 8 {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&data[done..done + 8]);
                word.store(u64::from_le_bytes(bytes), Ordering::Release);
            } else {
                let mut bytes = [0u8; 8];
                bytes[start..start + n].copy_from_slice(&data[done..done + n]);
                let value = u64::from_le_bytes(bytes);
                let mut mask_bytes = [0u8; 8];
                mask_bytes[start..start + n].fill(0xff);
                let mask = u64::from_le_bytes(mask_bytes);
                // The closure always returns Some, so fetch_update cannot fail.
                let _ = word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                    Some((old & !mask) | (value & mask))
                });
            }
            done += n;
            pos += n;
        }
    }

    /// The word holding byte `offset` (callers pass multiples of 8).
    pub(crate) fn word(&self, offset: usize) -> &AtomicU64 {
        &self.words[offset / 8]
    }
}

/// A registered memory region, local side. Remote nodes reach it through its
/// [`RemoteRegion`]; local code reads and writes it through this handle with
/// the same word-level atomicity as remote operations. Dropping the handle
/// deregisters the region: later remote operations on its key complete with
/// [`VerbError::UnknownKey`].
pub struct Region {
    memory: Arc<Memory>,
    remote: RemoteRegion,
    registry: Arc<Registry>,
    /// A fabric's own registration of the memory (an ibverbs memory region,
    /// an MPI window), released after the region leaves the registry.
    #[allow(dead_code)]
    fabric_registration: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Region {
    /// The descriptor to hand to peers (see `Node::exchange`).
    pub fn remote(&self) -> RemoteRegion {
        self.remote
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.memory.len()
    }

    /// Whether the region has no bytes (never true: registration refuses 0).
    pub fn is_empty(&self) -> bool {
        self.memory.len() == 0
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    ///
    /// # Panics
    /// If the range lies outside the region.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        self.assert_range(offset, out.len());
        self.memory.read(offset, out);
    }

    /// Copies `data` into the region at `offset`.
    ///
    /// # Panics
    /// If the range lies outside the region.
    pub fn write(&self, offset: usize, data: &[u8]) {
        self.assert_range(offset, data.len());
        self.memory.write(offset, data);
    }

    /// Loads the 8-byte word at `offset` (a multiple of 8).
    ///
    /// # Panics
    /// If `offset` is misaligned or out of range.
    pub fn load(&self, offset: usize) -> u64 {
        self.assert_word(offset);
        self.memory.word(offset).load(Ordering::Acquire)
    }

    /// Stores the 8-byte word at `offset` (a multiple of 8).
    ///
    /// # Panics
    /// If `offset` is misaligned or out of range.
    pub fn store(&self, offset: usize, value: u64) {
        self.assert_word(offset);
        self.memory.word(offset).store(value, Ordering::Release);
    }

    /// Local compare-and-swap on the word at `offset`; returns the previous
    /// value. On the loopback and tcp fabrics this is atomic with respect to
    /// remote CAS and FETCH_ADD too.
    ///
    /// # Panics
    /// If `offset` is misaligned or out of range.
    pub fn compare_swap(&self, offset: usize, expected: u64, new: u64) -> u64 {
        self.assert_word(offset);
        compare_swap(self.memory.word(offset), expected, new)
    }

    /// Local fetch-and-add on the word at `offset`; returns the previous value.
    ///
    /// # Panics
    /// If `offset` is misaligned or out of range.
    pub fn fetch_add(&self, offset: usize, add: u64) -> u64 {
        self.assert_word(offset);
        self.memory.word(offset).fetch_add(add, Ordering::AcqRel)
    }

    #[cfg_attr(not(any(feature = "rdma", feature = "mpi")), allow(dead_code))]
    pub(crate) fn memory(&self) -> &Arc<Memory> {
        &self.memory
    }

    /// Attaches a fabric's registration of this memory (kept until the
    /// region is dropped) and the base address peers must use.
    #[cfg_attr(not(any(feature = "rdma", feature = "mpi")), allow(dead_code))]
    pub(crate) fn attach_registration(
        &mut self,
        registration: Box<dyn std::any::Any + Send + Sync>,
        base: u64,
    ) {
        self.fabric_registration = Some(registration);
        self.remote.base = base;
    }

    fn assert_range(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len()),
            "local access of {len} bytes at offset {offset} outside region of {} bytes",
            self.len()
        );
    }

    fn assert_word(&self, offset: usize) {
        assert!(
            offset.is_multiple_of(8),
            "word access at misaligned offset {offset}"
        );
        self.assert_range(offset, 8);
    }
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.registry.remove(self.remote.key);
    }
}

fn compare_swap(word: &AtomicU64, expected: u64, new: u64) -> u64 {
    match word.compare_exchange(expected, new, Ordering::AcqRel, Ordering::Acquire) {
        Ok(old) | Err(old) => old,
    }
}

/// What a peer needs to address a region: its node, key, length and (for
/// fabrics that address by virtual address) base. Plain data: exchange it
/// with `Node::exchange`, or serialize it yourself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RemoteRegion {
    /// The node that owns the region.
    pub node: NodeRank,
    /// The region's remote key.
    pub key: u32,
    /// Its length in bytes.
    pub len: u64,
    /// Fabric-specific base address (0 where unused).
    pub base: u64,
}

/// A node's registered regions, by key. Keys are never reused, so an
/// operation on a deregistered region fails instead of landing in a newer one.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    regions: RwLock<HashMap<u32, Arc<Memory>>>,
    next_key: AtomicU32,
}

impl Registry {
    /// Registers zeroed memory of `len` bytes for `node`.
    pub(crate) fn register(self: &Arc<Self>, node: NodeRank, len: usize) -> Region {
        let memory = Arc::new(Memory::zeroed(len));
        let key = self.next_key.fetch_add(1, Ordering::Relaxed) + 1;
        self.regions
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(key, Arc::clone(&memory));
        Region {
            remote: RemoteRegion {
                node,
                key,
                len: len as u64,
                base: 0,
            },
            memory,
            registry: Arc::clone(self),
            fabric_registration: None,
        }
    }

    fn remove(&self, key: u32) {
        self.regions
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
            .remove(&key);
    }

    fn lookup(&self, node: NodeRank, key: u32) -> Result<Arc<Memory>, VerbError> {
        self.regions
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(&key)
            .cloned()
            .ok_or(VerbError::UnknownKey { node, key })
    }

    fn locate(
        &self,
        node: NodeRank,
        key: u32,
        offset: u64,
        len: usize,
    ) -> Result<(Arc<Memory>, usize), VerbError> {
        let memory = self.lookup(node, key)?;
        let start = memory
            .check(offset, len)
            .map_err(|()| VerbError::OutOfBounds {
                node,
                key,
                offset,
                len: len as u64,
                region_len: memory.len() as u64,
            })?;
        Ok((memory, start))
    }

    fn locate_word(
        &self,
        node: NodeRank,
        key: u32,
        offset: u64,
    ) -> Result<(Arc<Memory>, usize), VerbError> {
        let (memory, start) = self.locate(node, key, offset, 8)?;
        if start % 8 != 0 {
            return Err(VerbError::Misaligned { node, key, offset });
        }
        Ok((memory, start))
    }

    /// Carries out a one-sided operation against this node's memory, as the
    /// target's NIC would.
    ///
    /// # Panics
    /// On a SEND or RECV: they are matched by the mailbox, not served by memory.
    pub(crate) fn serve(&self, node: NodeRank, op: Op) -> Result<Output, VerbError> {
        match op {
            Op::Read {
                remote,
                offset,
                len,
            } => self
                .serve_read(node, remote.key, offset, len)
                .map(Output::Data),
            Op::Write {
                remote,
                offset,
                data,
            } => self
                .serve_write(node, remote.key, offset, &data)
                .map(|()| Output::Written(data)),
            Op::CompareSwap {
                remote,
                offset,
                expected,
                new,
            } => self
                .serve_compare_swap(node, remote.key, offset, expected, new)
                .map(Output::Value),
            Op::FetchAdd {
                remote,
                offset,
                add,
            } => self
                .serve_fetch_add(node, remote.key, offset, add)
                .map(Output::Value),
            Op::Send { .. } | Op::Recv { .. } => {
                unreachable!("two-sided operations are matched, not served")
            }
        }
    }

    /// Serves a READ against this node's memory (the target side of the verb).
    pub(crate) fn serve_read(
        &self,
        node: NodeRank,
        key: u32,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, VerbError> {
        let (memory, start) = self.locate(node, key, offset, len)?;
        let mut out = vec![0; len];
        memory.read(start, &mut out);
        Ok(out)
    }

    /// Serves a WRITE.
    pub(crate) fn serve_write(
        &self,
        node: NodeRank,
        key: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), VerbError> {
        let (memory, start) = self.locate(node, key, offset, data.len())?;
        memory.write(start, data);
        Ok(())
    }

    /// Serves a CAS.
    pub(crate) fn serve_compare_swap(
        &self,
        node: NodeRank,
        key: u32,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64, VerbError> {
        let (memory, start) = self.locate_word(node, key, offset)?;
        Ok(compare_swap(memory.word(start), expected, new))
    }

    /// Serves a FETCH_ADD.
    pub(crate) fn serve_fetch_add(
        &self,
        node: NodeRank,
        key: u32,
        offset: u64,
        add: u64,
    ) -> Result<u64, VerbError> {
        let (memory, start) = self.locate_word(node, key, offset)?;
        Ok(memory.word(start).fetch_add(add, Ordering::AcqRel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Byte-granular writes and reads at any offset agree with a plain
        /// byte array.
        #[test]
        fn bytes_match_a_plain_array(len in 1usize..100, ops in proptest::collection::vec((0usize..100, proptest::collection::vec(any::<u8>(), 0..40)), 1..20)) {
            let memory = Memory::zeroed(len);
            let mut model = vec![0u8; len];
            for (offset, data) in ops {
                let offset = offset % len;
                let n = data.len().min(len - offset);
                memory.write(offset, &data[..n]);
                model[offset..offset + n].copy_from_slice(&data[..n]);
                let mut out = vec![0; len - offset];
                memory.read(offset, &mut out);
                prop_assert_eq!(&out[..], &model[offset..]);
            }
        }
    }

    #[test]
    fn remote_errors_name_the_fault() {
        let registry = Arc::new(Registry::default());
        let region = registry.register(NodeRank(3), 20);
        let key = region.remote().key;
        assert_eq!(
            registry.serve_read(NodeRank(3), key, 16, 8),
            Err(VerbError::OutOfBounds {
                node: NodeRank(3),
                key,
                offset: 16,
                len: 8,
                region_len: 20
            })
        );
        assert_eq!(
            registry.serve_fetch_add(NodeRank(3), key, 4, 1),
            Err(VerbError::Misaligned {
                node: NodeRank(3),
                key,
                offset: 4
            })
        );
        assert!(registry.serve_read(NodeRank(3), key, u64::MAX, 2).is_err());
        drop(region);
        assert_eq!(
            registry.serve_read(NodeRank(3), key, 0, 1),
            Err(VerbError::UnknownKey {
                node: NodeRank(3),
                key
            })
        );
    }
}
