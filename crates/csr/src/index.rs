//! A `.qcsr` file's index: its header, offsets and page checksums, read and
//! verified without its targets, weights or id map.
//!
//! An engine that reads the graph again block by block through a
//! [`VerifiedFile`](crate::format::VerifiedFile) plans its blocks from the
//! index alone: opening it reads `8 * (|V| + 1)` bytes of offsets and the
//! page table, not the whole file, so a graph larger than memory is not
//! read once just to be checked, and the process never maps all of it.
//! The pages a reader reads later are checked then, and the targets they
//! hold are the reader's to range-check. A reader that touches a few
//! vertices opens the [`FileHead`] alone (the header and the page table)
//! and reads their offsets page by page, checked as it reads them.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::format::{
    Header, Layout, PageChecksums, Section, FLAG_DISTINCT_TARGETS, FLAG_ID_MAP, FLAG_WEIGHTED,
};
use crate::graph::check_offsets;
use crate::ids::{checked_index, IdIndex};
use crate::{to_usize, Error, Graph, Result};

/// A graph file's header and page checksums, verified, without its
/// offsets: what a reader needs that reads a few vertices' offsets page by
/// page, checked as it reads them (a query walk from a few sources on a
/// graph far larger than memory), rather than all of them up front.
#[derive(Clone, Debug)]
pub struct FileHead {
    header: Header,
    pages: PageChecksums,
}

impl FileHead {
    /// Reads and verifies the header of the `.qcsr` file at `path` and its
    /// page table against it: a few pages, however large the graph. A
    /// version 1 file has no page table and is opened (and verified)
    /// whole.
    pub fn open(path: impl AsRef<Path>) -> Result<FileHead> {
        let path = path.as_ref();
        let (file, header) = open_header(path)?;
        if header.version < 2 {
            return Ok(FileHead::of_version_1(&Graph::open(path)?, header));
        }
        let pages = read_page_table(&file, path, &header)?;
        Ok(FileHead { header, pages })
    }

    fn of_version_1(graph: &Graph, header: Header) -> FileHead {
        let pages = graph
            .page_checksums()
            .expect("a graph opened from a file has page checksums")
            .clone();
        FileHead { header, pages }
    }

    /// |V|.
    pub fn num_vertices(&self) -> u32 {
        self.header.num_vertices
    }

    /// |E|.
    pub fn num_edges(&self) -> u64 {
        self.header.num_edges
    }

    /// Whether the file holds edge weights.
    pub fn is_weighted(&self) -> bool {
        self.header.flags & FLAG_WEIGHTED != 0
    }

    /// Whether the header says no list holds a target twice.
    pub fn has_distinct_targets(&self) -> bool {
        self.header.flags & FLAG_DISTINCT_TARGETS != 0
    }

    /// Where the file's sections are.
    pub fn layout(&self) -> Layout {
        self.header.layout
    }

    /// The checksum of every page of graph data, to read the file with.
    pub fn page_checksums(&self) -> &PageChecksums {
        &self.pages
    }

    /// The page checksums, taken without a copy of the table (a page's
    /// four bytes: 2 MiB for a graph of 2 GiB).
    pub fn into_page_checksums(self) -> PageChecksums {
        self.pages
    }
}

/// A graph file's header, offsets and page checksums (see the module docs).
#[derive(Clone, Debug)]
pub struct GraphIndex {
    head: FileHead,
    offsets: Vec<u64>,
}

impl GraphIndex {
    /// Reads and verifies the index of the `.qcsr` file at `path`: the
    /// header's checksum, the page table against the header, the offsets'
    /// pages against the table, and that the offsets climb from 0 to |E|.
    /// A version 1 file has no page table and is opened (and verified)
    /// whole.
    pub fn open(path: impl AsRef<Path>) -> Result<GraphIndex> {
        let path = path.as_ref();
        let (file, header) = open_header(path)?;
        if header.version < 2 {
            let graph = Graph::open(path)?;
            return Ok(GraphIndex {
                offsets: graph.offsets().to_vec(),
                head: FileHead::of_version_1(&graph, header),
            });
        }
        let pages = read_page_table(&file, path, &header)?;
        GraphIndex::read(FileHead { header, pages }, path)
    }

    /// The index of the file at `path` whose head was read already: its
    /// offsets read and verified as [`GraphIndex::open`] does (a version 1
    /// file is opened whole again).
    pub fn read(head: FileHead, path: impl AsRef<Path>) -> Result<GraphIndex> {
        let path = path.as_ref();
        if head.header.version < 2 {
            return GraphIndex::open(path);
        }
        let file = File::open(path).map_err(|source| Error::Open {
            path: path.to_owned(),
            source,
        })?;
        let offsets = read_words(&file, path, &head.pages, head.header.layout.offsets)?;
        check_offsets(path, &offsets, head.header.num_edges)?;
        Ok(GraphIndex { head, offsets })
    }

    /// The header and page checksums.
    pub fn head(&self) -> &FileHead {
        &self.head
    }

    /// |V|.
    pub fn num_vertices(&self) -> u32 {
        self.head.num_vertices()
    }

    /// Whether the file holds edge weights.
    pub fn is_weighted(&self) -> bool {
        self.head.is_weighted()
    }

    /// Where the file's sections are.
    pub fn layout(&self) -> Layout {
        self.head.layout()
    }

    /// `offsets[v]..offsets[v + 1]` are vertex `v`'s edges.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }
}

/// How a graph's vertices are named: by their dense index `0..|V|`, or,
/// when the file has an id map, by the id each had in the input (what
/// every engine takes and prints). Opening reads the header and the map
/// alone, its pages verified, so it costs 8 bytes a vertex however large
/// the graph.
#[derive(Debug)]
pub struct VertexIds {
    num_vertices: u32,
    map: Option<(Vec<u64>, IdIndex)>,
}

impl VertexIds {
    /// The naming of the `.qcsr` file at `path`.
    ///
    /// # Errors
    /// An unreadable or damaged header, page table or id map.
    pub fn open(path: impl AsRef<Path>) -> Result<VertexIds> {
        let path = path.as_ref();
        let (file, header) = open_header(path)?;
        let num_vertices = header.num_vertices;
        if header.flags & FLAG_ID_MAP == 0 {
            return Ok(VertexIds {
                num_vertices,
                map: None,
            });
        }
        let layout = header.layout;
        let pages = read_page_table(&file, path, &header)?;
        let ids = read_words(&file, path, &pages, layout.ids)?;
        let index = checked_index(&ids, num_vertices)?;
        Ok(VertexIds {
            num_vertices,
            map: Some((ids, index)),
        })
    }

    /// |V|.
    pub fn num_vertices(&self) -> u32 {
        self.num_vertices
    }

    /// Whether the graph names its vertices by an id map.
    pub fn has_map(&self) -> bool {
        self.map.is_some()
    }

    /// The dense vertex named `original`, if the graph has it.
    pub fn dense(&self, original: u64) -> Option<u32> {
        match &self.map {
            Some((ids, index)) => index.find(ids, original),
            None => u32::try_from(original)
                .ok()
                .filter(|&v| v < self.num_vertices),
        }
    }

    /// The name of dense vertex `v` (`v < |V|`).
    pub fn original(&self, v: u32) -> u64 {
        assert!(v < self.num_vertices, "vertex {v} out of range");
        self.map
            .as_ref()
            .map_or(u64::from(v), |(ids, _)| ids[to_usize(u64::from(v))])
    }
}

/// Reads the header of the `.qcsr` file at `path` alone, its checksum
/// verified: for a caller that needs only |V|, |E| or the flags.
pub fn read_header(path: impl AsRef<Path>) -> Result<Header> {
    open_header(path.as_ref()).map(|(_, header)| header)
}

/// Opens the file at `path` and reads its header.
fn open_header(path: &Path) -> Result<(File, Header)> {
    let file = File::open(path).map_err(|source| Error::Open {
        path: path.to_owned(),
        source,
    })?;
    let len = file
        .metadata()
        .map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?
        .len();
    let first = Section {
        offset: 0,
        len: len.min(crate::format::HEADER_LEN),
    };
    let header = Header::decode(path, &read_section(&file, path, first)?, len)?;
    Ok((file, header))
}

/// The page checksums of a version 2 or later file.
fn read_page_table(file: &File, path: &Path, header: &Header) -> Result<PageChecksums> {
    let pages = header.layout.pages;
    let mut words = vec![0u32; to_usize((pages.padded_end() - pages.offset) / 4)];
    read_exact(
        file,
        path,
        pages.offset,
        bytemuck::cast_slice_mut(&mut words),
    )?;
    PageChecksums::from_words(path, header, words)
}

/// The `u64` words of `section` of `file`, its pages verified: read (with
/// the page padding) straight into the words, checked as bytes, then cut
/// to the section.
fn read_words(
    file: &File,
    path: &Path,
    pages: &PageChecksums,
    section: Section,
) -> Result<Vec<u64>> {
    let padded = section.padded_end() - section.offset;
    let mut words = vec![0u64; to_usize(padded / 8)];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    read_exact(file, path, section.offset, bytes)?;
    pages.verify(section.offset, bytes)?;
    words.truncate(to_usize(section.len / 8));
    for word in &mut words {
        *word = u64::from_le(*word);
    }
    Ok(words)
}

/// The bytes of `section` of `file`, which must all be there.
fn read_section(file: &File, path: &Path, section: Section) -> Result<Vec<u8>> {
    let mut bytes = vec![0u8; to_usize(section.len)];
    read_exact(file, path, section.offset, &mut bytes)?;
    Ok(bytes)
}

/// Fills `buf` from `offset` of `file`, which must hold that much.
fn read_exact(file: &File, path: &Path, offset: u64, buf: &mut [u8]) -> Result<()> {
    file.read_exact_at(buf, offset)
        .map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })
}
