//! Graph data in memory: whole blocks, read with one aligned request per
//! section or mapped from the page cache, and single vertices read on
//! demand for straggler walks.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use quiver_csr::format::Layout;
use quiver_csr::format::VerifiedFile;
use quiver_csr::{Block, Extent};
use quiver_io::{AlignedBuf, ReadRequest, ALIGN};

use crate::spec::{cumulative_weights, Adjacency};
use crate::Result;

mod mapped;

pub use mapped::MappedGraph;
use mapped::MappedPart;

/// One block's offsets and targets (and cumulative weights), as read.
#[derive(Debug)]
pub struct LoadedBlock {
    pub(crate) vertices: Range<u32>,
    offsets: Section,
    /// Index of `offsets[vertices.start]` in the buffer, in u64 words.
    offsets_skip: usize,
    targets: Section,
    /// Index of the block's first target in the buffer, in u32 words.
    targets_skip: usize,
    /// Per-vertex inclusive prefix sums of the weights (weighted walks).
    cumulative: Vec<f32>,
    /// [`LoadedBlock::partitions`], worked out once: a cached block is
    /// walked in many batches.
    partition_bounds: OnceLock<(u64, Vec<u32>)>,
}

fn index(x: u64) -> usize {
    usize::try_from(x).expect("an in-memory index fits usize")
}

/// A loaded block's section: read into a buffer, or a checked part of the
/// graph file mapped into memory.
#[derive(Debug)]
enum Section {
    Read(AlignedBuf),
    Mapped(MappedPart),
}

impl std::ops::Deref for Section {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Section::Read(buf) => buf,
            Section::Mapped(part) => part.bytes(),
        }
    }
}

impl Section {
    /// Bytes of memory it holds (a mapped part's pages once touched).
    fn capacity(&self) -> usize {
        match self {
            Section::Read(buf) => buf.capacity(),
            Section::Mapped(part) => part.bytes().len(),
        }
    }
}

/// The buffers of evicted blocks, kept for the blocks read next: a read
/// into memory already faulted in spares the kernel zeroing fresh pages
/// (and the process unmapping the old ones). Spares are memory that the
/// budget no longer counts, so the engine keeps them only from an eviction
/// to the read it makes room for.
#[derive(Debug, Default)]
pub struct SpareBuffers(Mutex<Vec<AlignedBuf>>);

impl SpareBuffers {
    /// A buffer of `len` bytes: the smallest spare that holds it with at
    /// most an eighth more room than asked (the budget counts a block's
    /// buffers by their capacity), else a new zeroed one.
    fn take(&self, len: usize) -> AlignedBuf {
        let fits = |buf: &AlignedBuf| {
            let capacity = buf.capacity();
            capacity >= len && capacity - len <= len / 8 + ALIGN
        };
        let mut spares = self.spares();
        let best = (0..spares.len())
            .filter(|&i| fits(&spares[i]))
            .min_by_key(|&i| spares[i].capacity());
        match best {
            Some(i) => {
                let mut buf = spares.swap_remove(i);
                buf.set_len(len);
                buf
            }
            None => AlignedBuf::zeroed(len),
        }
    }

    /// Keeps `block`'s buffers if this was its last holder (a mapped
    /// block has none).
    pub fn recycle(&self, block: Arc<LoadedBlock>) {
        if let Ok(block) = Arc::try_unwrap(block) {
            self.spares()
                .extend(
                    [block.offsets, block.targets].into_iter().filter_map(
                        |section| match section {
                            Section::Read(buf) => Some(buf),
                            Section::Mapped(_) => None,
                        },
                    ),
                );
        }
    }

    /// Frees every spare.
    pub fn clear(&self) {
        self.spares().clear();
    }

    fn spares(&self) -> std::sync::MutexGuard<'_, Vec<AlignedBuf>> {
        // A panic while the list was held leaves it whole.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl LoadedBlock {
    /// Reads `block` of the graph in `file` (offsets and targets, and the
    /// weights when `weighted`) from `source`: pages of the mapped file,
    /// or reads into buffers (see [`Source`]).
    pub fn read(
        file: &VerifiedFile,
        source: Source<'_>,
        block: &Block,
        weighted: bool,
        layout: &Layout,
    ) -> Result<LoadedBlock> {
        // Weights are summed into `cumulative` and dropped.
        let weights_extent = block.weights_extent.filter(|_| weighted);
        let (offsets, targets, weights, check) = match source {
            Source::Mapped(mapped) => {
                let check = !mapped.checked(block);
                let part = |extent| mapped.part(file, extent, check).map(Section::Mapped);
                (
                    part(block.offsets_extent)?,
                    part(block.targets_extent)?,
                    weights_extent.map(part).transpose()?,
                    check,
                )
            }
            Source::Read(spare) => {
                let (offsets, targets, weights) =
                    read_sections(file, block, weights_extent, spare)?;
                (offsets, targets, weights, true)
            }
        };
        let offsets_skip = index(
            (layout.offsets.offset + u64::from(block.vertices.start) * 8
                - block.offsets_extent.offset)
                / 8,
        );
        let targets_skip = index(
            (layout.targets.offset + block.edges.start * 4 - block.targets_extent.offset) / 4,
        );
        if check {
            let all: &[u32] = bytemuck_cast(&targets);
            file.check_targets(
                &all[targets_skip..targets_skip + index(block.num_edges())],
                block.edges.start,
            )?;
            if let Source::Mapped(mapped) = source {
                mapped.mark_checked(block);
            }
        }
        let mut loaded = LoadedBlock {
            vertices: block.vertices.clone(),
            offsets,
            offsets_skip,
            targets,
            targets_skip,
            cumulative: Vec::new(),
            partition_bounds: OnceLock::new(),
        };
        if let (Some(weights), Some(extent)) = (weights, weights_extent) {
            let skip = index((layout.weights.offset + block.edges.start * 4 - extent.offset) / 4);
            let w: &[f32] = bytemuck_cast(&weights);
            let n = index(block.num_edges());
            loaded.cumulative = cumulative_weights(loaded.offsets(), &w[skip..skip + n]);
        }
        Ok(loaded)
    }

    /// `offsets[start..=end]` of the block (absolute edge indices).
    #[inline(always)]
    fn offsets(&self) -> &[u64] {
        let all: &[u64] = bytemuck_cast(&self.offsets);
        &all[self.offsets_skip
            ..self.offsets_skip + index(u64::from(self.vertices.end - self.vertices.start)) + 1]
    }

    /// Bytes of memory held.
    pub fn memory_bytes(&self) -> u64 {
        (self.offsets.capacity() + self.targets.capacity() + self.cumulative.capacity() * 4) as u64
    }

    /// Bytes of the block's offsets and lists (and cumulative weights), as
    /// walks read them: its buffers' bytes less their alignment.
    pub fn data_bytes(&self) -> u64 {
        let view = self.view();
        (8 * view.offsets.len() + 4 * view.targets.len() + 4 * self.cumulative.len()) as u64
    }

    /// Splits the block's vertices into consecutive ranges whose offsets and
    /// lists (and cumulative weights) take about `bytes` each: the bounds,
    /// from the first vertex to the end. A vertex with a longer list has a
    /// range of its own.
    /// Worked out on the first call; a block is cut for one size only.
    pub fn partitions(&self, bytes: u64) -> &[u32] {
        let (cut, bounds) = self
            .partition_bounds
            .get_or_init(|| (bytes, self.cut_partitions(bytes)));
        assert_eq!(*cut, bytes, "a block is partitioned for one size");
        bounds
    }

    fn cut_partitions(&self, bytes: u64) -> Vec<u32> {
        let per_edge = if self.cumulative.is_empty() { 4 } else { 8 };
        let mut bounds = vec![self.vertices.start];
        let mut held = 0;
        let view = self.view();
        for v in self.vertices.clone() {
            let range = view.edge_range(v);
            held += 8 + per_edge * (range.end - range.start) as u64;
            if held >= bytes {
                bounds.push(v + 1);
                held = 0;
            }
        }
        if bounds.last() != Some(&self.vertices.end) {
            bounds.push(self.vertices.end);
        }
        bounds
    }

    /// Reads the offsets and lists (and cumulative weights) of `vertices`
    /// from start to end, one word per cache line: a sequential sweep the
    /// hardware prefetcher streams, so the random reads of walks standing
    /// there that follow find the data in the CPU's caches.
    pub fn warm(&self, vertices: Range<u32>) {
        let view = self.view();
        let first = index(u64::from(vertices.start - self.vertices.start));
        let last = index(u64::from(vertices.end - self.vertices.start));
        let edges = index(view.offsets[first] - view.base)..index(view.offsets[last] - view.base);
        let mut sum = 0u64;
        for &offset in view.offsets[first..=last].iter().step_by(8) {
            sum = sum.wrapping_add(offset);
        }
        for &target in view.targets[edges.clone()].iter().step_by(16) {
            sum = sum.wrapping_add(u64::from(target));
        }
        if let Some(cumulative) = self.cumulative.get(edges) {
            for &c in cumulative.iter().step_by(16) {
                sum = sum.wrapping_add(u64::from(c.to_bits()));
            }
        }
        std::hint::black_box(sum);
    }
}

/// Where a block's bytes come from.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// Reads into buffers, those of evicted blocks where they fit: all at
    /// once when direct, in pieces on every thread through the page cache
    /// (see [`read_requests`]).
    Read(&'a SpareBuffers),
    /// The pages of the mapped file, in place.
    Mapped(&'a MappedGraph),
}

/// Reads `block`'s offsets and targets (and the weights in
/// `weights_extent`, if any) into `spare` buffers where they fit.
fn read_sections(
    file: &VerifiedFile,
    block: &Block,
    weights_extent: Option<Extent>,
    spare: &SpareBuffers,
) -> Result<(Section, Section, Option<Section>)> {
    let mut offsets = spare.take(index(block.offsets_extent.len));
    let mut targets = spare.take(index(block.targets_extent.len));
    let mut weights = weights_extent.map(|e| AlignedBuf::zeroed(index(e.len)));
    let mut requests = vec![
        ReadRequest {
            offset: block.offsets_extent.offset,
            buf: &mut offsets,
        },
        ReadRequest {
            offset: block.targets_extent.offset,
            buf: &mut targets,
        },
    ];
    if let (Some(buf), Some(extent)) = (weights.as_mut(), weights_extent) {
        requests.push(ReadRequest {
            offset: extent.offset,
            buf,
        });
    }
    requests.retain(|r| !r.buf.is_empty());
    read_requests(file, requests)?;
    Ok((
        Section::Read(offsets),
        Section::Read(targets),
        weights.map(Section::Read),
    ))
}

/// Pieces a read through the page cache is cut into.
const COPY_PIECE: usize = 1 << 20;

/// Reads `requests` from `file`. Direct reads go together, all in flight.
/// A read through the page cache is a copy, work for the CPU (and its
/// pages' checks are too), so it is shared among the worker threads: a
/// query's reads on io_uring in one batch a thread, each on its own ring,
/// all in flight (a query's pages are few, and those not cached wait on
/// the device); otherwise requests cut into pieces, read with `pread`.
fn read_requests(file: &VerifiedFile, mut requests: Vec<ReadRequest<'_>>) -> Result<()> {
    use rayon::prelude::*;
    if file.file().is_direct() {
        return Ok(file.read_batch(&mut requests)?);
    }
    if file.file().backend() == quiver_io::Backend::Uring {
        let share = requests.len().div_ceil(rayon::current_num_threads()).max(1);
        return Ok(requests
            .par_chunks_mut(share)
            .try_for_each(|batch| file.read_batch(batch))?);
    }
    let mut pieces: Vec<ReadRequest<'_>> = requests
        .into_iter()
        .flat_map(|r| {
            let offset = r.offset;
            r.buf
                .chunks_mut(COPY_PIECE)
                .zip((offset..).step_by(COPY_PIECE))
                .map(|(buf, offset)| ReadRequest { offset, buf })
        })
        .collect();
    pieces
        .par_iter_mut()
        .try_for_each(|piece| file.read_batch(std::slice::from_mut(piece)))?;
    Ok(())
}

fn bytemuck_cast<T: bytemuck::Pod>(buf: &[u8]) -> &[T] {
    // An AlignedBuf and a mapped part both start 4 KiB aligned and extents
    // are whole pages, so the cast cannot fail.
    bytemuck::cast_slice(buf)
}

impl Adjacency for LoadedBlock {
    fn prefetch(&self, v: u32) {
        // The walk's next read is this vertex's pair of offsets (a view
        // would cast the targets too, on every step out of core).
        prefetch_offsets(self.offsets(), self.vertices.start, v);
    }

    #[inline(always)]
    fn neighbors(&self, v: u32) -> &[u32] {
        self.view().list(v)
    }

    fn cumulative_weights(&self, v: u32) -> &[f32] {
        self.view().weights(v)
    }
}

impl LoadedBlock {
    /// The block's arrays, cast and cut once, for a loop that steps many
    /// walks on it: [`LoadedBlock::neighbors`](Adjacency::neighbors) casts
    /// the buffers and finds the block's start on every call.
    #[inline]
    pub fn view(&self) -> BlockView<'_> {
        let offsets = self.offsets();
        let targets: &[u32] = bytemuck_cast(&self.targets);
        let edges = index(offsets[offsets.len() - 1] - offsets[0]);
        BlockView {
            first: self.vertices.start,
            base: offsets[0],
            offsets,
            targets: &targets[self.targets_skip..self.targets_skip + edges],
            cumulative: &self.cumulative,
        }
    }
}

/// A [`LoadedBlock`]'s offsets, targets and cumulative weights as slices
/// ([`LoadedBlock::view`]).
#[derive(Clone, Copy, Debug)]
pub struct BlockView<'a> {
    /// The block's first vertex.
    first: u32,
    /// The edge index its first list starts at.
    base: u64,
    offsets: &'a [u64],
    /// From the block's first edge on.
    targets: &'a [u32],
    cumulative: &'a [f32],
}

impl<'a> BlockView<'a> {
    /// Where `v`'s list lies in `targets` (and `cumulative`).
    #[inline(always)]
    fn edge_range(&self, v: u32) -> Range<usize> {
        debug_assert!(
            v >= self.first && ((v - self.first) as usize) < self.offsets.len() - 1,
            "vertex {v} is not in the block starting at {}",
            self.first
        );
        let i = index(u64::from(v - self.first));
        // One bounds check for the pair.
        let [start, end] = self.offsets[i..i + 2] else {
            unreachable!("a two-element range has two elements")
        };
        index(start - self.base)..index(end - self.base)
    }

    /// `v`'s out-neighbours.
    #[inline(always)]
    fn list(&self, v: u32) -> &'a [u32] {
        &self.targets[self.edge_range(v)]
    }

    /// The inclusive prefix sums of `v`'s out-edge weights.
    #[inline]
    fn weights(&self, v: u32) -> &'a [f32] {
        &self.cumulative[self.edge_range(v)]
    }

    /// Whether `v` is one of the block's vertices.
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        index(u64::from(v.wrapping_sub(self.first))) < self.offsets.len() - 1
    }
}

/// Starts fetching vertex `v`'s offsets from `offsets`, a block's (whose
/// first vertex is `first`), if `v` is in it.
#[inline]
fn prefetch_offsets(offsets: &[u64], first: u32, v: u32) {
    if let Some(offset) = offsets.get(index(u64::from(v.wrapping_sub(first)))) {
        quiver_io::prefetch(offset);
    }
}

impl Adjacency for BlockView<'_> {
    #[inline]
    fn prefetch(&self, v: u32) {
        prefetch_offsets(self.offsets, self.first, v);
    }

    #[inline(always)]
    fn neighbors(&self, v: u32) -> &[u32] {
        self.list(v)
    }

    fn cumulative_weights(&self, v: u32) -> &[f32] {
        self.weights(v)
    }
}

/// Which of a run of vertex ranges holds a vertex, in constant time: the
/// first candidate for each 64 consecutive vertices, then a short scan.
#[derive(Debug)]
pub(crate) struct Locator {
    /// Where each range starts, then where the last one ends.
    bounds: Vec<u32>,
    /// For each 64 vertices from `bounds[0]`, the first range that may
    /// hold one of them.
    first: Vec<u32>,
}

impl Locator {
    const SHIFT: u32 = 6;

    /// For the ranges `bounds[i]..bounds[i + 1]` (at least one).
    pub(crate) fn new(bounds: Vec<u32>) -> Locator {
        assert!(bounds.len() >= 2, "a locator needs at least one range");
        let (base, end) = (bounds[0], bounds[bounds.len() - 1]);
        let mut p = 0;
        let first = (0..=(end - base) >> Self::SHIFT)
            .map(|chunk| {
                while p + 2 < bounds.len() && bounds[p + 1] <= base + (chunk << Self::SHIFT) {
                    p += 1;
                }
                u32::try_from(p).expect("ranges are fewer than vertices")
            })
            .collect();
        Locator { bounds, first }
    }

    /// Where each range starts, then where the last one ends.
    pub(crate) fn bounds(&self) -> &[u32] {
        &self.bounds
    }

    /// The range holding `v`, which must lie between the first range's
    /// start and the last one's end.
    #[inline]
    pub(crate) fn range(&self, v: u32) -> usize {
        let mut p = self.first[((v - self.bounds[0]) >> Self::SHIFT) as usize] as usize;
        while self.bounds[p + 1] <= v {
            p += 1;
        }
        p
    }
}

/// The vertices being executed: loaded blocks, in order. They are
/// consecutive (one block, or an adaptive group) or, for second-order
/// walks, a pair of blocks that may lie apart.
#[derive(Debug)]
pub struct Executing {
    blocks: Vec<Arc<LoadedBlock>>,
    /// Whether the blocks leave no gap, so membership is one range check.
    consecutive: bool,
    /// Which block a vertex falls in, every step looks it up: for
    /// consecutive blocks (its table takes 4 bytes per 64 vertices);
    /// `None` without blocks and for a pair that may lie apart.
    locator: Option<Locator>,
}

impl Executing {
    /// The data of `blocks` (in vertex order, disjoint).
    pub fn new(blocks: Vec<Arc<LoadedBlock>>) -> Executing {
        debug_assert!(blocks
            .windows(2)
            .all(|w| w[0].vertices.end <= w[1].vertices.start));
        let consecutive = blocks
            .windows(2)
            .all(|w| w[0].vertices.end == w[1].vertices.start);
        let locator = (consecutive && !blocks.is_empty()).then(|| {
            let starts = blocks.iter().map(|b| b.vertices.start);
            let end = blocks[blocks.len() - 1].vertices.end;
            Locator::new(starts.chain([end]).collect())
        });
        Executing {
            blocks,
            consecutive,
            locator,
        }
    }

    /// Whether `v` is in one of the blocks.
    pub fn contains(&self, v: u32) -> bool {
        let (Some(first), Some(last)) = (self.blocks.first(), self.blocks.last()) else {
            return false;
        };
        (first.vertices.start..last.vertices.end).contains(&v)
            && (self.consecutive || self.block(v).vertices.contains(&v))
    }

    /// The blocks, when they leave no gap.
    pub fn consecutive_blocks(&self) -> Option<Vec<&LoadedBlock>> {
        self.consecutive
            .then(|| self.blocks.iter().map(|b| &**b).collect())
    }

    /// The block holding `v`, which lies between the first block's start
    /// and the last one's end (in a gap between a pair: the one after).
    #[inline]
    fn block(&self, v: u32) -> &LoadedBlock {
        match &self.locator {
            Some(locator) => &self.blocks[locator.range(v)],
            None => &self.blocks[self.blocks.partition_point(|b| b.vertices.end <= v)],
        }
    }
}

impl Adjacency for Executing {
    #[inline]
    fn neighbors(&self, v: u32) -> &[u32] {
        self.block(v).neighbors(v)
    }

    #[inline]
    fn prefetch(&self, v: u32) {
        if self.contains(v) {
            self.block(v).prefetch(v);
        }
    }

    fn cumulative_weights(&self, v: u32) -> &[f32] {
        self.block(v).cumulative_weights(v)
    }
}

/// The 4-byte words of entries `entries` of the section at byte `base`,
/// out of `buf`, which holds the file from byte `at` on.
fn words_in(buf: &[u8], at: u64, base: u64, entries: Range<u64>) -> &[u32] {
    let words: &[u32] = bytemuck_cast(buf);
    let skip = index((base + entries.start * 4 - at) / 4);
    &words[skip..skip + index(entries.end - entries.start)]
}

/// Bytes each list held by [`Vertices`] takes besides its vectors' contents.
const LIST_OVERHEAD: u64 = 48;

/// Bytes reading one adjacency list of `degree` edges vertex by vertex takes
/// at its peak: the aligned buffers of its targets (and weights), which may
/// straddle a page at either end, and its copy.
pub fn list_bytes(degree: u64, weighted: bool) -> u64 {
    let sections = 1 + u64::from(weighted);
    sections * (2 * degree * 4 + 2 * ALIGN as u64) + LIST_OVERHEAD
}

/// What one [`Vertices::read_into`] did.
#[derive(Clone, Copy, Debug)]
pub struct ListsRead {
    /// How many of the vertices (a prefix) had their lists read.
    pub count: usize,
    /// The most bytes the read held at once besides the lists held before
    /// it: the offsets pages, or the data buffers with the new lists.
    pub peak: u64,
}

/// Adjacency lists of individual vertices, read on demand: whole, or, for
/// a pass whose walks' draws are known, only the pages of a long
/// unweighted list those draws read ([`Vertices::read_drawn`]).
#[derive(Debug, Default)]
pub struct Vertices {
    lists: HashMap<u32, (Vec<u32>, Vec<f32>)>,
    /// Lists of which only some pages were read, zeros elsewhere, for the
    /// pass that read them: where each lies in `arenas`, and the bytes it
    /// holds.
    parts: HashMap<u32, (usize, Range<usize>, u64)>,
    /// The lists read in part by one read each, end to end, each over the
    /// whole pages it spans, laid out as in the file. An arena is the
    /// kernel's fresh zero pages, each faulted in only where a page was
    /// read into it ([`AlignedBuf::zeroed_sparse`]): the heap would
    /// zero-fill it whole by hand, a hub's list at a time.
    arenas: Vec<AlignedBuf>,
    /// The buffer offsets and pages are read into.
    scratch: Scratch,
}

/// The page-aligned read covering bytes `start..end` of the file: its
/// offset and length.
fn covering(start: u64, end: u64) -> (u64, u64) {
    let page = ALIGN as u64;
    let offset = start / page * page;
    (offset, quiver_io::align_up(end) - offset)
}

/// One buffer that the reads of single vertices reuse, read after read: a
/// fresh buffer for each page would be zeroed by hand and faulted in, which
/// cost a query walk more than its reads did.
#[derive(Debug, Default)]
pub struct Scratch(Option<AlignedBuf>);

impl Scratch {
    /// Reads the page-aligned `extents` (offset, length) of `file` into the
    /// buffer (grown when too small), all in flight at once; returns each
    /// extent's bytes, in order.
    pub fn read(&mut self, file: &VerifiedFile, extents: &[(u64, u64)]) -> Result<Vec<&[u8]>> {
        let total = index(extents.iter().map(|&(_, len)| len).sum());
        if self.0.as_ref().is_none_or(|buf| buf.capacity() < total) {
            self.0 = Some(AlignedBuf::zeroed(total));
        }
        let buf = self.0.as_mut().expect("a buffer was made");
        buf.set_len(total);
        let mut rest: &mut [u8] = buf;
        let mut requests = Vec::with_capacity(extents.len());
        for &(offset, len) in extents {
            let (this, after) = rest.split_at_mut(index(len));
            if len > 0 {
                requests.push(ReadRequest { offset, buf: this });
            }
            rest = after;
        }
        read_requests(file, requests)?;
        let mut rest: &[u8] = buf;
        Ok(extents
            .iter()
            .map(|&(_, len)| {
                let (this, after) = rest.split_at(index(len));
                rest = after;
                this
            })
            .collect())
    }

    /// Bytes the buffer takes.
    pub fn bytes(&self) -> u64 {
        self.0.as_ref().map_or(0, |buf| buf.capacity() as u64)
    }
}

/// The edge range (first and last + 1 edge index) of each of `vertices`:
/// from the offsets in memory if given, else from a read of the pages
/// holding its two offsets into `scratch`, all in flight at once. Returns
/// the ranges and the bytes of the reads (up to two pages a vertex).
pub fn edge_ranges(
    file: &VerifiedFile,
    layout: &Layout,
    vertices: &[u32],
    offsets: Option<&[u64]>,
    scratch: &mut Scratch,
) -> Result<(Vec<(u64, u64)>, u64)> {
    if let Some(offsets) = offsets {
        let ranges = vertices
            .iter()
            .map(|&v| {
                let i = index(u64::from(v));
                (offsets[i], offsets[i + 1])
            })
            .collect();
        return Ok((ranges, 0));
    }
    let extents: Vec<(u64, u64)> = vertices
        .iter()
        .map(|&v| {
            let start = layout.offsets.offset + u64::from(v) * 8;
            covering(start, start + 16)
        })
        .collect();
    let bytes = extents.iter().map(|&(_, len)| len).sum();
    let read = scratch.read(file, &extents)?;
    let ranges = vertices
        .iter()
        .zip(extents.iter().zip(read))
        .map(|(&v, (&(offset, _), buf))| {
            let words: &[u64] = bytemuck_cast(buf);
            let i = index((layout.offsets.offset + u64::from(v) * 8 - offset) / 8);
            (words[i], words[i + 1])
        })
        .collect();
    Ok((ranges, bytes))
}

impl Vertices {
    /// Reads the adjacency lists of `vertices` (distinct, none held yet):
    /// first their edge ranges ([`edge_ranges`]), then their targets (and
    /// weights), every read of a phase in flight at once. `make_room` is
    /// told what each list takes at its peak ([`list_bytes`]) once the
    /// degrees are known, and answers how many of them (a prefix, possibly
    /// none) to read.
    pub fn read_into(
        &mut self,
        file: &VerifiedFile,
        vertices: &[u32],
        weighted: bool,
        layout: &Layout,
        offsets: Option<&[u64]>,
        make_room: &mut dyn FnMut(&[u64]) -> usize,
    ) -> Result<ListsRead> {
        let (ranges, offsets_bytes) =
            edge_ranges(file, layout, vertices, offsets, &mut self.scratch)?;
        // Now that the degrees are known, say what each list will take (its
        // buffers while read, then its copy) and read as many as fit.
        let sizes: Vec<u64> = ranges
            .iter()
            .map(|&(a, b)| list_bytes(b - a, weighted))
            .collect();
        let n = make_room(&sizes).min(vertices.len());
        let peak = self.read_lists(file, layout, weighted, &vertices[..n], &ranges[..n])?;
        Ok(ListsRead {
            count: n,
            peak: offsets_bytes.max(peak),
        })
    }

    /// Reads the adjacency lists of `vertices` (distinct, none held yet),
    /// whose edge ranges are `ranges`, all in flight at once. Returns the
    /// most bytes the read held at once: its buffers and the new lists,
    /// which take at most the sum of their [`list_bytes`].
    pub fn read_lists(
        &mut self,
        file: &VerifiedFile,
        layout: &Layout,
        weighted: bool,
        vertices: &[u32],
        ranges: &[(u64, u64)],
    ) -> Result<u64> {
        if vertices.is_empty() {
            return Ok(0);
        }
        let sections = if weighted {
            vec![layout.targets.offset, layout.weights.offset]
        } else {
            vec![layout.targets.offset]
        };
        // Every list's targets, then (weighted) every list's weights.
        let extents: Vec<(u64, u64)> = sections
            .iter()
            .flat_map(|&base| {
                ranges
                    .iter()
                    .map(move |&(a, b)| covering(base + a * 4, base + b * 4))
            })
            .collect();
        let data_bytes: u64 = extents.iter().map(|&(_, len)| len).sum();
        let Vertices { lists, scratch, .. } = self;
        let data = scratch.read(file, &extents)?;
        let mut lists_bytes = 0;
        for (i, (&v, &(a, b))) in vertices.iter().zip(ranges).enumerate() {
            let slice = |section: usize| {
                let at = section * ranges.len() + i;
                words_in(data[at], extents[at].0, sections[section], a..b)
            };
            let targets = slice(0).to_vec();
            file.check_targets(&targets, a)?;
            let cumulative = if weighted {
                // The prefix sums of `cumulative_weights`, without a copy of
                // the weights.
                let mut sum = 0f32;
                slice(1)
                    .iter()
                    .map(|&bits| {
                        sum += f32::from_bits(bits).max(0.0);
                        sum
                    })
                    .collect()
            } else {
                Vec::new()
            };
            lists_bytes += list_memory(targets.capacity(), cumulative.capacity());
            lists.insert(v, (targets, cumulative));
        }
        Ok(data_bytes + lists_bytes)
    }

    /// Reads, of each of `vertices` (distinct, none held yet, in an
    /// unweighted graph), the edges `draws(v, degree)` names: only the pages
    /// holding them when those are fewer than the whole list's, else the
    /// whole list. `make_room` is told what each read takes, as for
    /// [`Vertices::read_into`]. A list read in part serves the pass whose
    /// draws it was read for, and is dropped by [`Vertices::drop_parts`]
    /// before the next.
    pub fn read_drawn(
        &mut self,
        file: &VerifiedFile,
        vertices: &[u32],
        layout: &Layout,
        draws: &dyn Fn(u32, u64) -> Vec<u64>,
        make_room: &mut dyn FnMut(&[u64]) -> usize,
    ) -> Result<ListsRead> {
        let (ranges, offsets_bytes) = edge_ranges(file, layout, vertices, None, &mut self.scratch)?;
        let base = layout.targets.offset;
        let page = ALIGN as u64;
        // The pages each list's draws read, or `None` to read it whole.
        let pages: Vec<Option<Vec<u64>>> = vertices
            .iter()
            .zip(&ranges)
            .map(|(&v, &(a, b))| {
                let mut pages: Vec<u64> = draws(v, b - a)
                    .iter()
                    .map(|&i| (base + (a + i) * 4) / page)
                    .collect();
                pages.sort_unstable();
                pages.dedup();
                let whole = covering(base + a * 4, base + b * 4).1 / page;
                ((pages.len() as u64) < whole).then_some(pages)
            })
            .collect();
        let sizes: Vec<u64> = pages
            .iter()
            .zip(&ranges)
            .map(|(part, &(a, b))| match part {
                Some(pages) => pages.len() as u64 * page + LIST_OVERHEAD,
                None => list_bytes(b - a, false),
            })
            .collect();
        let n = make_room(&sizes).min(vertices.len());
        let (whole, part): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| pages[i].is_none());
        let peak = self.read_lists(
            file,
            layout,
            false,
            &whole.iter().map(|&i| vertices[i]).collect::<Vec<_>>(),
            &whole.iter().map(|&i| ranges[i]).collect::<Vec<_>>(),
        )?;
        // Each list read in part takes the span of pages its edges lie on,
        // each edge at its place in the page as in the file, so that a
        // drawn page is read straight into place and checked there.
        let spans: Vec<u64> = part
            .iter()
            .map(|&i| {
                let (a, b) = ranges[i];
                covering(base + a * 4, base + b * 4).1 / page
            })
            .collect();
        let mut arena = AlignedBuf::zeroed_sparse(index(spans.iter().sum::<u64>() * page));
        let mut requests = Vec::new();
        let mut rest: &mut [u8] = &mut arena;
        for (&i, &span) in part.iter().zip(&spans) {
            let (mut unread, after) = std::mem::take(&mut rest).split_at_mut(index(span * page));
            rest = after;
            // The file page `unread` starts with.
            let mut at = (base + ranges[i].0 * 4) / page;
            for &p in pages[i].iter().flatten() {
                let (this, after) = std::mem::take(&mut unread)
                    .split_at_mut(index((p - at) * page))
                    .1
                    .split_at_mut(ALIGN);
                requests.push(ReadRequest {
                    offset: p * page,
                    buf: this,
                });
                unread = after;
                at = p + 1;
            }
        }
        read_requests(file, requests)?;
        let words: &[u32] = bytemuck_cast(&arena);
        let mut span_start = 0;
        for (&i, &span) in part.iter().zip(&spans) {
            let (a, b) = ranges[i];
            let start = index((span_start + (base + a * 4) % page) / 4);
            for &p in pages[i].iter().flatten() {
                // The list's edges on this page.
                let first = a.max((p * page).saturating_sub(base).div_ceil(4));
                let end = b.min(((p + 1) * page - base) / 4);
                file.check_targets(
                    &words[start + index(first - a)..start + index(end - a)],
                    first,
                )?;
            }
            self.parts.insert(
                vertices[i],
                (self.arenas.len(), start..start + index(b - a), sizes[i]),
            );
            span_start += span * page;
        }
        self.arenas.push(arena);
        let parts_bytes: u64 = part.iter().map(|&i| sizes[i]).sum();
        Ok(ListsRead {
            count: n,
            peak: offsets_bytes.max(peak + parts_bytes),
        })
    }

    /// Whether `v`'s list is held (whole, or the part a pass reads).
    pub fn has(&self, v: u32) -> bool {
        self.lists.contains_key(&v) || self.parts.contains_key(&v)
    }

    /// Drops the lists read in part, which served the pass they were read
    /// for.
    pub fn drop_parts(&mut self) {
        self.parts = HashMap::new();
        self.arenas = Vec::new();
    }

    /// Drops every list, and the buffer they were read into.
    pub fn clear(&mut self) {
        self.lists = HashMap::new();
        self.scratch = Scratch::default();
        self.drop_parts();
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> u64 {
        self.lists
            .values()
            .map(|(t, c)| list_memory(t.capacity(), c.capacity()))
            .chain(self.parts.values().map(|(_, _, bytes)| *bytes))
            .sum::<u64>()
            + self.scratch.bytes()
    }
}

/// Bytes one held list takes, given its vectors' capacities.
fn list_memory(targets: usize, cumulative: usize) -> u64 {
    (targets + cumulative) as u64 * 4 + LIST_OVERHEAD
}

impl Adjacency for Vertices {
    fn neighbors(&self, v: u32) -> &[u32] {
        match self.lists.get(&v) {
            Some((targets, _)) => targets,
            None => {
                let (arena, range, _) = &self.parts[&v];
                &bytemuck_cast::<u32>(&self.arenas[*arena])[range.clone()]
            }
        }
    }

    fn cumulative_weights(&self, v: u32) -> &[f32] {
        &self.lists[&v].1
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, OnceLock};

    use proptest::prelude::*;
    use quiver_io::{AlignedBuf, ALIGN};

    use super::{LoadedBlock, Locator, ReadRequest, Section, SpareBuffers};

    /// A block holding buffers of `offsets` and `targets` bytes, each byte
    /// 7 (a new buffer is zeroed).
    fn block(offsets: usize, targets: usize) -> Arc<LoadedBlock> {
        let filled = |len| {
            let mut buf = AlignedBuf::zeroed(len);
            buf.fill(7);
            buf
        };
        Arc::new(LoadedBlock {
            vertices: 0..0,
            offsets: Section::Read(filled(offsets)),
            offsets_skip: 0,
            targets: Section::Read(filled(targets)),
            targets_skip: 0,
            cumulative: Vec::new(),
            partition_bounds: OnceLock::new(),
        })
    }

    #[test]
    fn a_read_takes_the_smallest_spare_that_fits_without_waste() {
        let spare = SpareBuffers::default();
        let (small, large) = (64 * ALIGN, 1024 * ALIGN);
        let evicted = block(small, large);
        let (small_at, large_at) = (evicted.offsets.as_ptr(), evicted.targets.as_ptr());
        spare.recycle(evicted);
        // A larger spare that would also fit the large reads below.
        spare.recycle(block(ALIGN, large + 64 * ALIGN));
        // Over an eighth of room to spare: a new buffer, zeroed.
        let fresh = spare.take(small / 2);
        assert_ne!(fresh.as_ptr(), small_at);
        assert!(fresh.iter().all(|&b| b == 0));
        // Too large for any: a new buffer, and the spares stay (the takes
        // below find them).
        let _new = spare.take(2 * large);
        // Each reuses the smallest spare that fits it.
        let reused = spare.take(large - ALIGN);
        assert_eq!((reused.as_ptr(), reused.len()), (large_at, large - ALIGN));
        assert_eq!(spare.take(small).as_ptr(), small_at);
    }

    /// A block still walked keeps its buffers (the type system sees to
    /// that); once its last holder recycles it, a read reuses them.
    #[test]
    fn a_blocks_last_holder_leaves_its_buffers_spare() {
        let spare = SpareBuffers::default();
        let held = block(ALIGN, ALIGN);
        let buffers = [held.offsets.as_ptr(), held.targets.as_ptr()];
        let walking = Arc::clone(&held);
        spare.recycle(held);
        spare.recycle(walking);
        let reused = spare.take(ALIGN);
        assert!(buffers.contains(&reused.as_ptr()));
        assert!(reused.iter().all(|&b| b == 7), "a new buffer, not a spare");
    }

    /// Reads through the page cache longer than a piece come back whole:
    /// the targets (1.6 MiB, cut into 1 MiB pieces read on every thread)
    /// and the offsets, in one call, equal the file's bytes.
    #[test]
    fn reads_through_the_page_cache_come_back_whole_from_their_pieces() {
        let n = 2000u32;
        let edges: Vec<(u32, u32, f32)> = (0..n)
            .flat_map(|v| (0..200).map(move |k| (v, (v + 7 * k + 1) % n, 1.0)))
            .collect();
        let graph = quiver_csr::testing::build(n, edges, false, false);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        quiver_csr::write_graph(&graph, &path).unwrap();
        let index = quiver_csr::GraphIndex::open(&path).unwrap();
        let layout = index.layout();
        let options = quiver_io::ReadOptions {
            backend: quiver_io::BackendChoice::Pread,
            direct: false,
            ..quiver_io::ReadOptions::default()
        };
        let file = quiver_csr::format::VerifiedFile::new(
            quiver_io::ReadFile::open(&path, &options).unwrap(),
            index.head().page_checksums().clone(),
        );
        let whole = |section: quiver_csr::format::Section| {
            let len = quiver_io::align_up(section.len);
            (
                section.offset,
                AlignedBuf::zeroed(usize::try_from(len).unwrap()),
            )
        };
        let mut reads = [whole(layout.targets), whole(layout.offsets)];
        assert!(
            reads[0].1.len() > super::COPY_PIECE * 3 / 2,
            "{}",
            reads[0].1.len()
        );
        let requests = reads
            .iter_mut()
            .map(|(offset, buf)| ReadRequest {
                offset: *offset,
                buf,
            })
            .collect();
        super::read_requests(&file, requests).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for (offset, buf) in &reads {
            let at = usize::try_from(*offset).unwrap();
            assert!(
                buf[..] == bytes[at..at + buf.len()],
                "the read at {offset} differs"
            );
        }
    }

    proptest! {
        #[test]
        fn a_locator_finds_the_range_holding_a_vertex(
            base in 0u32..1000,
            lens in prop::collection::vec(prop_oneof![Just(0u32), 1u32..200], 1..20),
        ) {
            let mut bounds = vec![base];
            for len in &lens {
                bounds.push(bounds[bounds.len() - 1] + len);
            }
            let locator = Locator::new(bounds.clone());
            for v in base..bounds[bounds.len() - 1] {
                let p = locator.range(v);
                prop_assert!(
                    (bounds[p]..bounds[p + 1]).contains(&v),
                    "vertex {} in range {} ({:?}) of {:?}",
                    v,
                    p,
                    bounds[p]..bounds[p + 1],
                    bounds
                );
            }
        }
    }
}
