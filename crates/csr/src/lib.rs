//! quiver-csr: the graph every engine reads. It owns the `.qcsr` on-disk CSR
//! format, the in-memory [`Graph`], vertex-range [`Blocks`], ingest of edge
//! lists users bring (SNAP text, binary, Matrix Market and LDBC Graphalytics
//! datasets, with an external sort for inputs larger than memory), export
//! back to edge lists, and deterministic generators.
//!
//! Invariants:
//! - Vertex ids are `u32` below |V|; edge offsets are `u64`; weights `f32`.
//! - A graph may keep the ids its vertices had in the input (an id map,
//!   [`Graph::original_ids`]): `u64`s, one per vertex, no two alike.
//! - A `.qcsr` file is a checksummed header page followed by the offsets,
//!   targets and (optional) weights and id map sections, each 4 KiB aligned
//!   and padded, then the page checksums, so any block can be read with
//!   O_DIRECT (see [`format`](mod@format)).
//! - Opening a file validates its header and offsets and verifies every
//!   page checksum and target, so no accessor reads out of bounds or sees
//!   unverified bytes; [`Graph::verify`] adds the checks that opening leaves
//!   (the distinct-targets claim, finite weights). No input, however
//!   corrupt, makes this crate panic.
//! - Files are written under a temporary name, fsynced, then renamed (a
//!   scratch graph, [`SortOptions::sync`] off, skips the fsync).
//! - This crate never opens a socket and holds no `unsafe` code (mapping
//!   files is quiver-io's job).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(not(all(target_endian = "little", target_pointer_width = "64")))]
compile_error!(
    "quiver-csr maps little-endian files directly and needs a 64-bit little-endian target"
);

mod blocks;
mod error;
pub mod format;
pub mod generate;
mod graph;
mod graphalytics;
mod ids;
mod index;
mod info;
mod ingest;
pub mod parse;
mod sort;
mod symmetry;
#[cfg(feature = "testing")]
pub mod testing;
mod write;

pub use blocks::{Block, BlockId, BlockSource, Blocks, Extent};
pub use error::{Error, Result};
pub use generate::{generate_to_file, DiskNeeds, GenerateReport, GraphSpec, Permutation, GRAPH500};
pub use graph::{DegreeSummary, Graph};
pub use graphalytics::{format_real, write_vertex_values};
pub use index::{read_header, FileHead, GraphIndex, VertexIds};
pub use info::{info, BlockReport, BlockRule, InfoOptions, InfoReport, Spread};
pub use ingest::{
    convert, export, export_file, export_refusal, open_input, ConvertOptions, ConvertReport,
    EdgeFormat, ExportOptions, ExportReport, Exported,
};
pub use sort::{EdgeSorter, SortOptions, SortStats, MAX_VERTEX_ID, MIN_MEM_BUDGET};
pub use symmetry::Symmetry;
pub use write::{write_graph, CsrWriter};

// The one progress contract, re-exported for callers that know only this crate.
pub use quiver_run::{NoProgress, Progress, Unit};

/// Converts a file offset or count to `usize`; lossless on the 64-bit
/// targets this crate compiles for.
#[allow(clippy::cast_possible_truncation)]
pub(crate) fn to_usize(x: u64) -> usize {
    x as usize
}
