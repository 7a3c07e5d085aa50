//! Per-block walk pools: fixed-capacity buffers that spill to per-block
//! files by append, and the per-block counts the scheduler reads.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::marker::PhantomData;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::{Error, Result, WalkWord};

/// Spill traffic of a set of pools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Appends to spill files (each at least a full buffer's worth).
    pub spills: u64,
    /// Bytes appended to spill files.
    pub bytes_written: u64,
    /// Spill files read back.
    pub reloads: u64,
    /// Bytes read back from spill files.
    pub bytes_read: u64,
}

/// Spill files a set of pools keeps open at most.
const MAX_OPEN_SPILLS: usize = 256;

/// One pool per block: walks waiting for their block to be loaded.
///
/// Each block's buffer holds fewer than `capacity` walks (allocated on
/// first use, so memory follows the blocks that have walks); walks that
/// would fill it are appended, with it, to the block's spill file. Counts
/// and minimum hops cover both.
#[derive(Debug)]
pub struct WalkPools<W> {
    dir: TempDir,
    capacity: usize,
    buffers: Vec<Vec<W>>,
    /// Walks in each block's spill file not yet taken back.
    on_disk: Vec<u64>,
    /// Walks already taken from the front of each block's spill file.
    consumed: Vec<u64>,
    /// Spill files kept open between appends and reads (at most
    /// `MAX_OPEN_SPILLS`; the others are opened for each).
    files: Vec<Option<File>>,
    open: usize,
    min_hop: Vec<u64>,
    total: u64,
    stats: PoolStats,
    _walk: PhantomData<W>,
}

impl<W: WalkWord> WalkPools<W> {
    /// Pools for `num_blocks` blocks with buffers of `capacity` walks,
    /// spilling into a new private directory inside `work_dir`.
    pub fn new(num_blocks: usize, capacity: usize, work_dir: &Path) -> Result<WalkPools<W>> {
        if capacity == 0 {
            return Err(Error::InvalidArgument(
                "a walk pool needs room for at least one walk".into(),
            ));
        }
        let dir = tempfile::Builder::new()
            .prefix("quiver-walks-")
            .tempdir_in(work_dir)
            .map_err(|source| Error::WorkDir {
                path: work_dir.to_owned(),
                source,
            })?;
        Ok(WalkPools {
            dir,
            capacity,
            buffers: (0..num_blocks).map(|_| Vec::new()).collect(),
            on_disk: vec![0; num_blocks],
            consumed: vec![0; num_blocks],
            files: (0..num_blocks).map(|_| None).collect(),
            open: 0,
            min_hop: vec![u64::MAX; num_blocks],
            total: 0,
            stats: PoolStats::default(),
            _walk: PhantomData,
        })
    }

    fn file(&self, block: usize) -> PathBuf {
        self.dir.path().join(format!("block-{block}.walks"))
    }

    /// Adds a walk at hop `hop` to `block`'s pool (spilling it with the
    /// buffer if it would fill the buffer).
    pub fn push(&mut self, block: usize, walk: W, hop: u64) -> Result<()> {
        self.extend(block, std::slice::from_ref(&walk), hop)
    }

    /// Adds `walks` to `block`'s pool in order, given the smallest hop
    /// among them. When they would fill the buffer, the buffer and then
    /// `walks` are appended to the block's spill file (`walks` straight
    /// from the caller's memory), and the buffer is left empty.
    pub fn extend(&mut self, block: usize, walks: &[W], min_hop: u64) -> Result<()> {
        if walks.is_empty() {
            return Ok(());
        }
        self.min_hop[block] = self.min_hop[block].min(min_hop);
        self.total += walks.len() as u64;
        let buffer = &mut self.buffers[block];
        if buffer.len() + walks.len() < self.capacity {
            if buffer.capacity() == 0 {
                buffer.reserve_exact(self.capacity);
            }
            buffer.extend_from_slice(walks);
            return Ok(());
        }
        self.spill(block, walks)
    }

    /// Appends `block`'s buffer, then `walks`, to its spill file.
    fn spill(&mut self, block: usize, walks: &[W]) -> Result<()> {
        let path = self.file(block);
        let err = |source| Error::Spill {
            path: path.clone(),
            source,
        };
        let mut file = match self.files[block].take() {
            Some(file) => {
                self.open -= 1;
                file
            }
            None => OpenOptions::new()
                .create(true)
                .append(true)
                .read(true)
                .open(&path)
                .map_err(err)?,
        };
        for part in [&self.buffers[block][..], walks] {
            file.write_all(bytemuck::cast_slice(part)).map_err(err)?;
        }
        let count = self.buffers[block].len() + walks.len();
        self.stats.spills += 1;
        self.stats.bytes_written += (count * std::mem::size_of::<W>()) as u64;
        self.on_disk[block] += count as u64;
        self.buffers[block].clear();
        if self.open < MAX_OPEN_SPILLS {
            self.files[block] = Some(file);
            self.open += 1;
        }
        Ok(())
    }

    /// Removes and returns every walk of `block`: the spilled ones first,
    /// then the buffered ones, each in push order.
    pub fn take(&mut self, block: usize) -> Result<Vec<W>> {
        self.take_at_most(block, usize::MAX)
    }

    /// Removes and returns up to `max` of `block`'s walks, oldest first
    /// (spilled before buffered), so a block with more walks than memory
    /// allows can be drained in bounded batches.
    pub fn take_at_most(&mut self, block: usize, max: usize) -> Result<Vec<W>> {
        let size = std::mem::size_of::<W>() as u64;
        let count = usize::try_from(self.count(block)).unwrap_or(usize::MAX);
        let mut walks: Vec<W> = Vec::with_capacity(count.min(max));
        if self.on_disk[block] > 0 && max > 0 {
            let path = self.file(block);
            let err = |source| Error::Spill {
                path: path.clone(),
                source,
            };
            let n = self.on_disk[block].min(max as u64);
            // Read straight into the walks' memory.
            walks.resize(
                usize::try_from(n).expect("a batch fits memory"),
                W::zeroed(),
            );
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut walks[..]);
            let at = self.consumed[block] * size;
            match &self.files[block] {
                Some(file) => file.read_exact_at(bytes, at),
                None => File::open(&path).and_then(|file| file.read_exact_at(bytes, at)),
            }
            .map_err(err)?;
            self.stats.reloads += 1;
            self.stats.bytes_read += bytes.len() as u64;
            self.on_disk[block] -= n;
            self.consumed[block] += n;
            if self.on_disk[block] == 0 {
                if self.files[block].take().is_some() {
                    self.open -= 1;
                }
                std::fs::remove_file(&path).map_err(err)?;
                self.consumed[block] = 0;
            }
        }
        let from_buffer = (max - walks.len()).min(self.buffers[block].len());
        walks.extend(self.buffers[block].drain(..from_buffer));
        self.total -= walks.len() as u64;
        if self.count(block) == 0 {
            self.min_hop[block] = u64::MAX;
        }
        Ok(walks)
    }

    /// Walks waiting for `block` (buffered and spilled).
    pub fn count(&self, block: usize) -> u64 {
        self.on_disk[block] + self.buffers[block].len() as u64
    }

    /// Walks waiting for any of `blocks`.
    pub fn count_all(&self, blocks: &[usize]) -> u64 {
        blocks.iter().map(|&b| self.count(b)).sum()
    }

    /// The smallest hop among `block`'s walks, if it has any: exact unless
    /// part of the block was taken with [`WalkPools::take_at_most`] since it
    /// was last empty, in which case it is a lower bound.
    pub fn min_hop(&self, block: usize) -> Option<u64> {
        Some(self.min_hop[block]).filter(|&h| h != u64::MAX)
    }

    /// Walks waiting in all pools.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Number of blocks.
    pub fn num_blocks(&self) -> usize {
        self.buffers.len()
    }

    /// The block with the most waiting walks (lowest id on ties), leaving
    /// out those in `except`, if any waits.
    pub fn fullest(&self, except: &[usize]) -> Option<usize> {
        self.waiting(except)
            .max_by_key(|&b| (self.count(b), std::cmp::Reverse(b)))
    }

    /// The block holding the walk with the fewest hops (lowest id on ties),
    /// leaving out those in `except`, if any waits.
    pub fn slowest(&self, except: &[usize]) -> Option<usize> {
        self.waiting(except).min_by_key(|&b| (self.min_hop[b], b))
    }

    /// The blocks with waiting walks, leaving out those in `except`.
    fn waiting<'s>(&'s self, except: &'s [usize]) -> impl Iterator<Item = usize> + 's {
        (0..self.num_blocks()).filter(move |b| self.count(*b) > 0 && !except.contains(b))
    }

    /// Bytes of buffer memory allocated now.
    pub fn memory_bytes(&self) -> u64 {
        let per_walk = std::mem::size_of::<W>() as u64;
        self.buffers
            .iter()
            .map(|b| b.capacity() as u64 * per_walk)
            .sum::<u64>()
            + self.num_blocks() as u64 * 16
    }

    /// Spill traffic so far.
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// The spill directory (removed when the pools are dropped).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
