//! The baseline's storage: the graph's CSR written as a file of logical
//! pages through the FTL, as the paper's baseline keeps it.
//!
//! Layout in logical pages: `rowPtr` (`u64` LE, |V| + 1 of them) from LBA
//! 0, then `colIdx` (`u32` LE) from the next page, then the weights (`f32`
//! LE) from the next page, if any. GetAdjacencyList reads exactly the pages
//! covering `rowPtr[v..=v+1]`, then (dependent on them) the pages covering
//! the list in `colIdx`. The host's cache sits above this, in `source`.

use std::ops::Range;

use quiver_csr::Graph;
use quiver_run::{Progress, Unit};

use crate::error::{check_vertex, Error, Result};
use crate::flash::{Fetched, Flash, Nanos};
use crate::ftl::{Ftl, Lba};

/// The CSR file on the FTL (where its sections lie: the host's knowledge
/// of the file, kept in a device image).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CsrFile {
    page_bytes: u64,
    vertices: u32,
    col_start: u64,
    weight_start: Option<u64>,
    pages: u64,
}

impl CsrFile {
    /// Writes `graph`'s CSR through `ftl` at logical pages 0 on (all
    /// unwritten), every page submitted at `at`. Returns the file and when
    /// its last page was programmed. `progress` hears of every 64 pages,
    /// and may stop the writes there ([`Error::Cancelled`]).
    pub fn write(
        ftl: &mut Ftl,
        flash: &mut Flash,
        graph: &Graph,
        at: Nanos,
        progress: &dyn Progress,
    ) -> Result<(CsrFile, Nanos)> {
        let page_bytes = u64::from(flash.geometry().page_bytes);
        let pages_for = |bytes: u64| bytes.div_ceil(page_bytes);
        let row_bytes = (u64::from(graph.num_vertices()) + 1) * 8;
        let col_bytes = graph.num_edges() * 4;
        let col_start = pages_for(row_bytes);
        let weight_start = graph.weights().map(|_| col_start + pages_for(col_bytes));
        let pages = col_start + pages_for(col_bytes) * if weight_start.is_some() { 2 } else { 1 };
        if pages > ftl.logical_pages() {
            return Err(Error::GeometryTooSmall {
                area: "block area",
                needed: pages,
                available: ftl.logical_pages(),
            });
        }
        if let Some(lba) = (0..pages).find(|&lba| ftl.lookup(Lba(lba)).is_some()) {
            return Err(Error::BlocksInUse { lba, pages });
        }
        let mut done = at;
        let rows: Vec<u8> = graph
            .offsets()
            .iter()
            .flat_map(|o| o.to_le_bytes())
            .collect();
        let cols: Vec<u8> = graph
            .targets()
            .iter()
            .flat_map(|t| t.to_le_bytes())
            .collect();
        let mut sections = vec![(0, rows), (col_start, cols)];
        if let (Some(start), Some(weights)) = (weight_start, graph.weights()) {
            sections.push((
                start,
                weights.iter().flat_map(|w| w.to_le_bytes()).collect(),
            ));
        }
        let len = usize::try_from(page_bytes).expect("a page fits usize");
        progress.start(
            "writing the CSR file",
            Unit::Bytes,
            Some(pages * page_bytes),
        );
        for (start, bytes) in sections {
            for (i, chunk) in bytes.chunks(len).enumerate() {
                let mut page = chunk.to_vec();
                page.resize(len, 0);
                done = done.max(ftl.write(flash, Lba(start + i as u64), &page, at)?);
                if (i + 1) % 64 == 0 {
                    progress.advance(64 * page_bytes);
                    progress.check()?;
                }
            }
        }
        let file = CsrFile {
            page_bytes,
            vertices: graph.num_vertices(),
            col_start,
            weight_start,
            pages,
        };
        Ok((file, done))
    }

    /// Logical pages of the file.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// The first logical page of `colIdx`.
    pub fn col_start(&self) -> u64 {
        self.col_start
    }

    /// |V|.
    pub fn vertices(&self) -> u32 {
        self.vertices
    }

    /// Reads bytes `bytes` of the section starting at LBA `start`: every
    /// page covering them, in parallel, submitted at `at`.
    fn read(
        &self,
        ftl: &mut Ftl,
        flash: &mut Flash,
        start: u64,
        bytes: Range<u64>,
        at: Nanos,
    ) -> Result<(Vec<u8>, u64, Nanos)> {
        if bytes.is_empty() {
            return Ok((Vec::new(), 0, at));
        }
        let first = bytes.start / self.page_bytes;
        let last = (bytes.end - 1) / self.page_bytes;
        let mut data = Vec::new();
        let mut done = at;
        for page in first..=last {
            let (bytes, finished) = ftl.read(flash, Lba(start + page), at)?;
            data.extend_from_slice(&bytes);
            done = done.max(finished);
        }
        let skip = usize::try_from(bytes.start - first * self.page_bytes).expect("within a page");
        let len = usize::try_from(bytes.end - bytes.start).expect("a read fits memory");
        Ok((data[skip..skip + len].to_vec(), last - first + 1, done))
    }

    fn check(&self, vertex: u32) -> Result<()> {
        check_vertex(vertex, self.vertices)
    }

    /// `rowPtr[v]` and `rowPtr[v + 1]`, read from the device.
    fn row(
        &self,
        ftl: &mut Ftl,
        flash: &mut Flash,
        v: u32,
        at: Nanos,
    ) -> Result<(Range<u64>, u64, Nanos)> {
        let at_byte = u64::from(v) * 8;
        let (bytes, pages, done) = self.read(ftl, flash, 0, at_byte..at_byte + 16, at)?;
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        Ok((word(0)..word(8), pages, done))
    }

    /// The list of `vertex` and where it sits in `colIdx`, with pages read and completion.
    fn list(
        &self,
        ftl: &mut Ftl,
        flash: &mut Flash,
        vertex: u32,
        at: Nanos,
    ) -> Result<(Range<u64>, Vec<u32>, u64, Nanos)> {
        self.check(vertex)?;
        let (row, row_pages, found) = self.row(ftl, flash, vertex, at)?;
        let (bytes, col_pages, done) = self.read(
            ftl,
            flash,
            self.col_start,
            row.start * 4..row.end * 4,
            found,
        )?;
        let list = bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        Ok((row, list, row_pages + col_pages, done))
    }

    /// GetAdjacencyList(`vertex`) on the CSR file, submitted at `at`.
    pub fn get_adjacency_list(
        &self,
        ftl: &mut Ftl,
        flash: &mut Flash,
        vertex: u32,
        at: Nanos,
    ) -> Result<Fetched<Vec<u32>>> {
        let (_, list, pages_read, done) = self.list(ftl, flash, vertex, at)?;
        Ok(Fetched {
            value: list,
            pages_read,
            submitted: at,
            done,
        })
    }

    /// GetEdgeWeight(`source`, `target`) on the CSR file: the list as
    /// above, then the weight page at the first occurrence of `target`.
    pub fn get_edge_weight(
        &self,
        ftl: &mut Ftl,
        flash: &mut Flash,
        source: u32,
        target: u32,
        at: Nanos,
    ) -> Result<Fetched<Option<f32>>> {
        let weights = self.weight_start.ok_or(Error::Unweighted)?;
        self.check(target)?;
        let (row, list, pages_read, found) = self.list(ftl, flash, source, at)?;
        let mut result = Fetched {
            value: None,
            pages_read,
            submitted: at,
            done: found,
        };
        if let Some(i) = list.iter().position(|&t| t == target) {
            let byte = (row.start + i as u64) * 4;
            let (bytes, pages, done) = self.read(ftl, flash, weights, byte..byte + 4, found)?;
            result.value = Some(f32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")));
            result.pages_read += pages;
            result.done = done;
        }
        Ok(result)
    }
}
