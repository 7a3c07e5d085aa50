//! Partitions of the vertex range into contiguous blocks that never split an
//! adjacency list: by a byte budget (the walker's blocks) or by balancing
//! `alpha * |V_i| + |E_i|` over `k` chunks (the distributed engines' chunks).

use std::ops::Range;

use quiver_io::{align_up, ALIGN};
use serde::Serialize;

use crate::format::Layout;
use crate::{Error, FileHead, Graph, GraphIndex, Result};

/// Index of a block in its [`Blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct BlockId(pub u32);

/// A byte range of the file, 4 KiB aligned at both ends so that it can be
/// read with O_DIRECT in one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Extent {
    /// First byte (a multiple of 4096).
    pub offset: u64,
    /// Length in bytes (a multiple of 4096).
    pub len: u64,
}

impl Extent {
    /// The aligned extent that covers the bytes `start..end`.
    fn covering(start: u64, end: u64) -> Extent {
        let offset = start / ALIGN as u64 * ALIGN as u64;
        Extent {
            offset,
            len: align_up(end) - offset,
        }
    }
}

/// One block: a vertex range, its edges, and where its data lies on disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Block {
    /// Its index.
    pub id: BlockId,
    /// Vertices `start..end`.
    pub vertices: Range<u32>,
    /// Edge indices `offsets[start]..offsets[end]`.
    pub edges: Range<u64>,
    /// The aligned extent of `offsets[start..=end]`.
    pub offsets_extent: Extent,
    /// The aligned extent of the block's targets.
    pub targets_extent: Extent,
    /// The aligned extent of the block's weights, for a weighted graph.
    pub weights_extent: Option<Extent>,
}

impl Block {
    /// Vertices in the block.
    pub fn num_vertices(&self) -> u32 {
        self.vertices.end - self.vertices.start
    }

    /// Edges in the block.
    pub fn num_edges(&self) -> u64 {
        self.edges.end - self.edges.start
    }

    /// Exact bytes of CSR data the block holds (offsets, targets, weights).
    pub fn data_bytes(&self, weighted: bool) -> u64 {
        block_bytes(u64::from(self.num_vertices()), self.num_edges(), weighted)
    }

    /// Bytes an aligned read of the block transfers.
    pub fn extent_bytes(&self) -> u64 {
        self.offsets_extent.len + self.targets_extent.len + self.weights_extent.map_or(0, |e| e.len)
    }
}

/// A partition of `0..|V|` into blocks, in vertex order.
///
/// Invariants: blocks are contiguous, in order, start at vertex 0 and end at
/// |V|; every vertex is in exactly one block; no adjacency list is split.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocks {
    blocks: Vec<Block>,
    /// Each block's end vertex, packed for [`Blocks::find`].
    #[serde(skip)]
    ends: Vec<u32>,
    /// For each `1 << shift` consecutive vertices from 0, the first block
    /// that may hold one of them, where [`Blocks::find`] starts its scan.
    /// It runs once per walk filed, so it is kept small enough to stay in
    /// a core's L1 cache: at least [`FIND_ENTRIES_PER_BLOCK`] entries a
    /// block, at most twice that.
    #[serde(skip)]
    first: Vec<u32>,
    #[serde(skip)]
    shift: u32,
}

/// Entries of [`Blocks`]'s lookup table per block, at least.
const FIND_ENTRIES_PER_BLOCK: u64 = 8;

/// What cutting a graph into blocks reads of it: a whole [`Graph`], or
/// only the [`GraphIndex`] of a file that is read again block by block.
pub trait BlockSource {
    /// |V|.
    fn num_vertices(&self) -> u32;
    /// Whether the graph has edge weights (their extents are cut too).
    fn is_weighted(&self) -> bool;
    /// Where the file's sections are (a graph in memory has the layout it
    /// would be written with).
    fn layout(&self) -> Layout;
    /// `offsets[v]..offsets[v + 1]` are vertex `v`'s edges.
    fn offsets(&self) -> &[u64];
}

impl BlockSource for Graph {
    fn num_vertices(&self) -> u32 {
        Graph::num_vertices(self)
    }
    fn is_weighted(&self) -> bool {
        Graph::is_weighted(self)
    }
    fn layout(&self) -> Layout {
        Graph::layout(self)
    }
    fn offsets(&self) -> &[u64] {
        Graph::offsets(self)
    }
}

impl BlockSource for GraphIndex {
    fn num_vertices(&self) -> u32 {
        GraphIndex::num_vertices(self)
    }
    fn is_weighted(&self) -> bool {
        GraphIndex::is_weighted(self)
    }
    fn layout(&self) -> Layout {
        GraphIndex::layout(self)
    }
    fn offsets(&self) -> &[u64] {
        GraphIndex::offsets(self)
    }
}

impl Blocks {
    /// Greedy blocks of at most `budget` bytes of CSR data each (offsets,
    /// targets and weights of their vertices). A vertex whose data alone
    /// exceeds the budget gets a block of its own.
    pub fn by_bytes(graph: &impl BlockSource, budget: u64) -> Result<Blocks> {
        if budget == 0 {
            return Err(Error::invalid(
                "budget",
                "block budget must be at least one byte",
            ));
        }
        let weighted = graph.is_weighted();
        let offsets = graph.offsets();
        let mut bounds = vec![0u32];
        let mut start = 0usize;
        for v in 0..offsets.len() - 1 {
            let with_v = block_bytes(
                (v + 1 - start) as u64,
                offsets[v + 1] - offsets[start],
                weighted,
            );
            if with_v > budget && v > start {
                bounds.push(u32::try_from(v).expect("vertex index < |V| fits u32"));
                start = v;
            }
        }
        bounds.push(graph.num_vertices());
        Ok(Blocks::from_bounds(graph, &bounds))
    }

    /// One block of every vertex, planned from the file's head alone: for a
    /// reader that never loads a block whole, only the lists it visits.
    pub fn whole(head: &FileHead) -> Blocks {
        Blocks::cut(
            head.layout(),
            head.is_weighted(),
            &[0, head.num_vertices()],
            |i| {
                if i == 0 {
                    0
                } else {
                    head.num_edges()
                }
            },
        )
    }

    /// Exactly `k` chunks balancing `alpha * |V_i| + |E_i|`: chunk `i` ends
    /// at the first vertex where the running cost reaches `(i + 1) / k` of
    /// the total, so no chunk exceeds its share by more than one vertex's
    /// cost. Chunks may be empty when `k > |V|`.
    pub fn balanced(graph: &impl BlockSource, k: u32, alpha: f64) -> Result<Blocks> {
        if k == 0 {
            return Err(Error::invalid(
                "k",
                "the number of chunks must be at least 1",
            ));
        }
        if !(alpha.is_finite() && alpha >= 0.0) {
            return Err(Error::invalid(
                "alpha",
                format!("alpha must be finite and >= 0, got {alpha}"),
            ));
        }
        let offsets = graph.offsets();
        let cost = |v: usize| alpha * v as f64 + offsets[v] as f64;
        let n = offsets.len() - 1;
        let total = cost(n);
        let mut bounds = vec![0u32];
        let mut v = 0usize;
        for i in 1..k {
            let goal = total * f64::from(i) / f64::from(k);
            while v < n && cost(v + 1) <= goal {
                v += 1;
            }
            // Round to whichever side of the goal is closer.
            if v < n && goal - cost(v) > cost(v + 1) - goal {
                v += 1;
            }
            bounds.push(u32::try_from(v).expect("vertex index <= |V| fits u32"));
        }
        bounds.push(graph.num_vertices());
        Ok(Blocks::from_bounds(graph, &bounds))
    }

    /// Blocks with the given boundaries (`bounds[0] == 0`, non-decreasing,
    /// last `== |V|`).
    fn from_bounds(graph: &impl BlockSource, bounds: &[u32]) -> Blocks {
        let offsets = graph.offsets();
        Blocks::cut(graph.layout(), graph.is_weighted(), bounds, |i| {
            offsets[bounds[i] as usize]
        })
    }

    /// Blocks with the given boundaries, where `edge_at(i)` is the first
    /// edge of boundary `bounds[i]`.
    fn cut(
        layout: Layout,
        weighted: bool,
        bounds: &[u32],
        edge_at: impl Fn(usize) -> u64,
    ) -> Blocks {
        let blocks = bounds
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let (start, end) = (w[0], w[1]);
                let edges = edge_at(i)..edge_at(i + 1);
                let extent_of = |base: u64, width: u64, range: Range<u64>| {
                    Extent::covering(base + range.start * width, base + range.end * width)
                };
                Block {
                    id: BlockId(u32::try_from(i).expect("block count fits u32")),
                    vertices: start..end,
                    offsets_extent: extent_of(
                        layout.offsets.offset,
                        8,
                        u64::from(start)..u64::from(end) + 1,
                    ),
                    targets_extent: extent_of(layout.targets.offset, 4, edges.clone()),
                    weights_extent: weighted
                        .then(|| extent_of(layout.weights.offset, 4, edges.clone())),
                    edges,
                }
            })
            .collect();
        let ends = bounds[1..].to_vec();
        let vertices = u64::from(bounds[bounds.len() - 1]);
        let shift = (vertices / (FIND_ENTRIES_PER_BLOCK * ends.len() as u64))
            .max(1)
            .ilog2();
        let mut b = 0;
        let first = (0..=bounds[bounds.len() - 1] >> shift)
            .map(|chunk| {
                while b + 1 < ends.len() && ends[b] <= chunk << shift {
                    b += 1;
                }
                u32::try_from(b).expect("block count fits u32")
            })
            .collect();
        Blocks {
            blocks,
            ends,
            first,
            shift,
        }
    }

    /// The block holding vertex `v`: a table lookup, then a scan over the
    /// blocks that end in `v`'s chunk of the table before `v` (usually none
    /// or one; more only where small blocks of hubs crowd together).
    /// Panics if `v` is not below |V|.
    #[inline]
    pub fn find(&self, v: u32) -> BlockId {
        assert!(
            self.ends.last().is_some_and(|&end| v < end),
            "vertex {v} is beyond the last block"
        );
        let mut i = self.first[(v >> self.shift) as usize] as usize;
        while self.ends[i] <= v {
            i += 1;
        }
        BlockId(u32::try_from(i).expect("block count fits u32"))
    }

    /// The block with id `id`.
    pub fn get(&self, id: BlockId) -> &Block {
        &self.blocks[id.0 as usize]
    }

    /// All blocks in vertex order.
    pub fn iter(&self) -> std::slice::Iter<'_, Block> {
        self.blocks.iter()
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether there are no blocks (never true: even an empty graph has one).
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

/// Bytes of CSR data for `vertices` vertices with `edges` edges.
fn block_bytes(vertices: u64, edges: u64, weighted: bool) -> u64 {
    (vertices + 1) * 8 + edges * if weighted { 8 } else { 4 }
}
