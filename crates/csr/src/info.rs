//! What `quiver info` reports of a graph: its size and shape, its
//! out-degrees and, when asked, how it cuts into blocks.

use std::path::PathBuf;

use quiver_io::size::format_bytes;
use serde::Serialize;

use crate::{Block, Blocks, DegreeSummary, Graph, Result};

/// How [`info`] cuts a graph into blocks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BlockRule {
    /// Blocks of at most this many bytes (the walker's).
    Bytes(u64),
    /// This many chunks balancing `alpha * |V_i| + |E_i|` (the distributed
    /// engines').
    Balanced {
        /// Chunks.
        chunks: u32,
        /// Weight of a vertex against an edge.
        alpha: f64,
    },
}

/// What [`info`] looks at beyond the header and the degrees.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InfoOptions {
    /// Run [`Graph::verify`] first (the checks opening leaves).
    pub verify: bool,
    /// Cut the graph into blocks by this rule.
    pub blocks: Option<BlockRule>,
    /// List every block, not only their spread.
    pub list_blocks: bool,
}

/// A graph's size, shape and degrees: `quiver info --json`.
#[derive(Clone, Debug, Serialize)]
pub struct InfoReport {
    /// The graph's file (`None` for a graph made in memory).
    pub path: Option<PathBuf>,
    /// The file's length in bytes.
    pub file_bytes: u64,
    /// |V|.
    pub vertices: u32,
    /// |E| (stored directed edges).
    pub edges: u64,
    /// Whether it carries edge weights.
    pub weighted: bool,
    /// Whether it is stored undirected (both directions of every edge).
    pub undirected: bool,
    /// No list holds a target twice (no parallel edges), as the header says.
    pub distinct_targets: bool,
    /// Every edge has its reverse (true of an undirected graph; checked for
    /// a directed one).
    pub symmetric: bool,
    /// The graph keeps its vertices' original ids (an id map).
    pub id_map: bool,
    /// The out-degree distribution.
    pub degrees: DegreeSummary,
    /// The blocks, when asked for.
    pub blocks: Option<BlockReport>,
    /// Whether [`Graph::verify`] ran (and passed).
    pub verified: bool,
}

/// How a graph cuts into blocks by one rule.
#[derive(Clone, Debug, Serialize)]
pub struct BlockReport {
    /// The rule, in words.
    pub rule: String,
    /// Blocks.
    pub count: usize,
    /// Vertices per block.
    pub vertices: Spread,
    /// Edges per block.
    pub edges: Spread,
    /// Bytes of a block's aligned reads.
    pub extent_bytes: Spread,
    /// Every block, when asked for.
    pub list: Option<Vec<Block>>,
}

/// Minimum, mean and maximum of a quantity over blocks.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// The smallest.
    pub min: u64,
    /// The mean.
    pub mean: f64,
    /// The largest.
    pub max: u64,
}

impl Spread {
    fn of(values: impl Iterator<Item = u64> + Clone) -> Spread {
        #[allow(clippy::cast_precision_loss)] // a mean, not an exact count
        let n = values.clone().count().max(1) as f64;
        #[allow(clippy::cast_precision_loss)]
        let sum = values.clone().sum::<u64>() as f64;
        Spread {
            min: values.clone().min().unwrap_or(0),
            mean: sum / n,
            max: values.max().unwrap_or(0),
        }
    }
}

/// Reports `graph`'s size, shape and degrees, verified and cut into blocks
/// as `options` ask.
pub fn info(graph: &Graph, options: &InfoOptions) -> Result<InfoReport> {
    if options.verify {
        graph.verify()?;
    }
    let blocks = match options.blocks {
        Some(BlockRule::Bytes(size)) => Some((
            format!("at most {} per block", format_bytes(size)),
            Blocks::by_bytes(graph, size)?,
        )),
        Some(BlockRule::Balanced { chunks, alpha }) => Some((
            format!("{chunks} chunks balancing {alpha}*|V|+|E|"),
            Blocks::balanced(graph, chunks, alpha)?,
        )),
        None => None,
    };
    Ok(InfoReport {
        path: graph.path().map(Into::into),
        file_bytes: graph.layout().file_len(),
        vertices: graph.num_vertices(),
        edges: graph.num_edges(),
        weighted: graph.is_weighted(),
        undirected: graph.is_undirected(),
        distinct_targets: graph.has_distinct_targets(),
        symmetric: graph.is_symmetric(),
        id_map: graph.original_ids().is_some(),
        degrees: graph.degree_summary(),
        blocks: blocks.map(|(rule, blocks)| BlockReport {
            rule,
            count: blocks.len(),
            vertices: Spread::of(blocks.iter().map(|b| u64::from(b.num_vertices()))),
            edges: Spread::of(blocks.iter().map(Block::num_edges)),
            extent_bytes: Spread::of(blocks.iter().map(Block::extent_bytes)),
            list: options
                .list_blocks
                .then(|| blocks.iter().cloned().collect()),
        }),
        verified: options.verify,
    })
}
