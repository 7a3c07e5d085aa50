//! The crate's one error enum.

use quiver_run::InvalidArgument;

/// What can go wrong on the simulated device. The flash-physics variants
/// (`ProgramNotErased`, `ProgramOutOfOrder`, `ReadErased`, ...) mean a bug
/// in a layer above the flash: they are reported, never papered over.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter that makes no sense.
    #[error("invalid argument")]
    InvalidArgument(#[from] InvalidArgument),
    /// A physical page number beyond the geometry.
    #[error("physical page {ppn} is outside the device")]
    PageOutOfRange {
        /// The page asked for.
        ppn: u64,
    },
    /// A block number beyond the geometry.
    #[error("block {block} is outside the device")]
    BlockOutOfRange {
        /// The block asked for.
        block: u64,
    },
    /// A program of a page that holds data (NAND programs only erased pages).
    #[error("programming physical page {ppn}, which is not erased")]
    ProgramNotErased {
        /// The page.
        ppn: u64,
    },
    /// A program that skips pages of its block (NAND programs a block in order).
    #[error("programming physical page {ppn} out of order: its block's next page is {expected}")]
    ProgramOutOfOrder {
        /// The page.
        ppn: u64,
        /// The index within the block that must be programmed next.
        expected: u32,
    },
    /// A read of a page that was never programmed since its block's erase.
    #[error("reading physical page {ppn}, which is erased")]
    ReadErased {
        /// The page.
        ppn: u64,
    },
    /// A program whose data or spare bytes do not fit the page.
    #[error(
        "a program of {data} data and {spare} spare bytes, for pages of {page} and {spare_area}"
    )]
    PageSize {
        /// Data bytes given.
        data: usize,
        /// Spare bytes given.
        spare: usize,
        /// The page's data bytes.
        page: usize,
        /// The page's spare bytes.
        spare_area: usize,
    },
    /// The device was frozen by a simulated power cut.
    #[error("the device lost power after program {programs}")]
    PowerCut {
        /// Programs that completed before the cut.
        programs: u64,
    },
    /// A logical page beyond the FTL's exported capacity.
    #[error("logical page {lba} is outside the {pages} logical pages")]
    LbaOutOfRange {
        /// The page asked for.
        lba: u64,
        /// The FTL's logical pages.
        pages: u64,
    },
    /// A block write to a logical page of the baseline's CSR file.
    #[error("logical page {lba} belongs to the baseline's CSR file (logical pages 0..{pages}); write past it")]
    CsrFilePage {
        /// The page asked for.
        lba: u64,
        /// The file's logical pages.
        pages: u64,
    },
    /// A CSR file over logical pages that block writes hold.
    #[error("logical page {lba} holds data, and the CSR file needs logical pages 0..{pages}; write it on a fresh device")]
    BlocksInUse {
        /// The first page in use.
        lba: u64,
        /// The file's logical pages.
        pages: u64,
    },
    /// No free block to write to: every page of the FTL's or the graph
    /// area's blocks is valid (the area is too small for the data).
    #[error("no free block left: every page of the area is in use")]
    DeviceFull,
    /// A vertex id at or above |V|.
    #[error("vertex {vertex} is out of range: the graph has {vertices} vertices")]
    VertexOutOfRange {
        /// The vertex asked for.
        vertex: u32,
        /// |V|.
        vertices: u32,
    },
    /// The graph area has no room for a write even after GC: its valid
    /// pages (the graph, unmerged deltas) fill it.
    #[error(
        "the graph area is full: {valid} of its {total} pages are in use and a write needs {needed} more; merge the delta graph or use a larger device"
    )]
    AreaFull {
        /// Pages the write needs.
        needed: u64,
        /// Valid pages in the area.
        valid: u64,
        /// Pages of the area.
        total: u64,
    },
    /// The graph area cannot be mounted: its pages do not make a graph.
    #[error("the graph area cannot be mounted: {reason}")]
    Unmountable {
        /// What is missing or inconsistent.
        reason: String,
    },
    /// AddVertex of a vertex other than the next id (ids are dense: a new
    /// vertex is |V|).
    #[error("vertex {vertex} cannot be added: the next vertex id is {next}")]
    NotNextVertex {
        /// The vertex asked for.
        vertex: u32,
        /// |V|, the only id a new vertex can take.
        next: u32,
    },
    /// The graph does not fit the part of the device meant for it.
    #[error("the graph needs {needed} pages but the {area} holds {available}")]
    GeometryTooSmall {
        /// `graph area` (GTL pages) or `block area` (the FTL's logical pages).
        area: &'static str,
        /// Pages the layout needs.
        needed: u64,
        /// Pages there are.
        available: u64,
    },
    /// A graph command before GraphInitialize (or a baseline read before the CSR file is written).
    #[error("no graph is loaded on the device")]
    NoGraph,
    /// GetEdgeWeight on a graph without weights.
    #[error("the graph has no edge weights")]
    Unweighted,
    /// A device image that cannot be read or written.
    #[error("device image {}: {reason}", path.display())]
    Image {
        /// The image.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The sparse file holding the simulated NAND's pages
    /// ([`crate::Config::flash_file`]) cannot be made or used.
    #[error("the simulated NAND's flash file")]
    FlashFile(#[source] quiver_io::Error),
    /// A `.qcsr` graph that cannot be opened or read.
    #[error("graph {}", path.display())]
    Graph {
        /// The graph.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: quiver_csr::Error,
    },
    /// A graph page whose footer does not decode.
    #[error("physical page {ppn} is not a valid graph page: {reason}")]
    CorruptPage {
        /// The page.
        ppn: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The caller asked the run to stop (its progress says so before a
    /// batch of reads, an update chunk or a merge step).
    #[error(transparent)]
    Cancelled(#[from] quiver_run::Cancelled),
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// [`Error::VertexOutOfRange`] unless `vertex` is below `vertices`.
pub(crate) fn check_vertex(vertex: u32, vertices: u32) -> Result<()> {
    if vertex >= vertices {
        return Err(Error::VertexOutOfRange { vertex, vertices });
    }
    Ok(())
}
