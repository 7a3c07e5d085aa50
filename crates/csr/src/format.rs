//! The `.qcsr` on-disk format.
//!
//! ```text
//! page 0        header (4096 bytes, little-endian, zero padded, checksummed)
//! offsets       u64[|V| + 1]   at a 4 KiB boundary
//! targets       u32[|E|]       at a 4 KiB boundary
//! weights       f32[|E|]       at a 4 KiB boundary (weighted graphs only)
//! ids           u64[|V|]       at a 4 KiB boundary (version 3, graphs with
//!                              an id map only): the original id of each
//!                              vertex
//! pages         u32[P]         at a 4 KiB boundary (version 2): the CRC-32C
//!                              of each of the P pages from offsets to the
//!                              end of the id map (or of weights)
//! ```
//!
//! Each section is padded with zeros to a 4 KiB boundary, and its checksum
//! (CRC-32C) covers the padded extent, so every byte of a file is covered by
//! a checksum: the header's or a section's. Version 2 adds a checksum per
//! 4 KiB page of graph data ([`PageChecksums`]): every read is of whole
//! aligned pages, so a reader verifies exactly the bytes it reads, whether
//! it maps the file, loads it whole, or reads it block by block or vertex by
//! vertex. Version 1 files (no page checksums) still open: they are verified
//! whole, section by section. The file length is the end of the last padded
//! section.
//!
//! Version 3 adds the optional id map ([`FLAG_ID_MAP`]): the id each vertex
//! had in the input (a Graphalytics `.v` file), as distinct `u64`s in any
//! order. It is graph data like the other sections, covered by the page
//! checksums, and opening checks that no two vertices share an id. A writer
//! writes the oldest version that holds its graph ([`version_for`]): a graph
//! without an id map is a version 2 file, byte for byte what earlier builds
//! wrote, so they still read it; a graph with one is version 3, which
//! earlier builds refuse by its version instead of misreading it.

use std::path::Path;

use quiver_io::{align_up, ALIGN};
use rayon::prelude::*;

use crate::{Error, Result};

/// The first eight bytes of every `.qcsr` file. The CR LF and 0x1a bytes
/// catch files mangled by text-mode transfers, as PNG's signature does.
pub const MAGIC: [u8; 8] = *b"QVCSR\r\n\x1a";
/// The newest format version this build reads and writes (it writes
/// version 2 for graphs without an id map: see [`version_for`]).
pub const VERSION: u32 = 3;
/// Bytes of graph data one page checksum covers: one aligned read unit.
pub const PAGE: u64 = ALIGN as u64;
/// Bytes of the header page.
pub const HEADER_LEN: u64 = ALIGN as u64;

/// Header flag: the graph has a weights section.
pub const FLAG_WEIGHTED: u32 = 1;
/// Header flag: every edge has its reverse (the graph was symmetrised).
pub const FLAG_UNDIRECTED: u32 = 1 << 1;
/// Header flag: no adjacency list holds a target twice (no parallel
/// edges). Writers set it when it holds; `Graph::verify` checks it.
pub const FLAG_DISTINCT_TARGETS: u32 = 1 << 2;
/// Header flag (version 3): the file has an id map section, the original id
/// of every vertex.
pub const FLAG_ID_MAP: u32 = 1 << 3;

/// Section names in the order of the header's records (and of
/// [`Header::checksums`]), for messages.
const SECTION_NAMES: [&str; 5] = [
    "offsets section",
    "targets section",
    "weights section",
    "page checksums section",
    "id map section",
];
const SECTIONS_AT: usize = 32;
const SECTION_RECORD: usize = 24;
const FILE_LEN_AT: usize = SECTIONS_AT + 3 * SECTION_RECORD;
const HEADER_CRC_AT: usize = FILE_LEN_AT + 8;
/// Version 2's fourth section record (the page checksums), after the CRC.
const PAGES_AT: usize = 128;
/// Version 3's fifth section record (the id map), after the fourth.
const IDS_AT: usize = PAGES_AT + SECTION_RECORD;

/// The format version a file with these header flags is written in: the
/// oldest that holds it, so older readers read every file they can.
pub fn version_for(flags: u32) -> u32 {
    if flags & FLAG_ID_MAP != 0 {
        3
    } else {
        2
    }
}

/// The flags files of `version` may set.
fn known_flags(version: u32) -> u32 {
    let flags = FLAG_WEIGHTED | FLAG_UNDIRECTED | FLAG_DISTINCT_TARGETS;
    if version >= 3 {
        flags | FLAG_ID_MAP
    } else {
        flags
    }
}

/// Section records in a header of `version`.
fn records(version: u32) -> usize {
    match version {
        1 => 3,
        2 => 4,
        _ => 5,
    }
}

/// Where one section lies in the file: `offset` is 4 KiB aligned and `len`
/// counts data bytes, without padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// Byte offset of the first data byte.
    pub offset: u64,
    /// Data bytes (padding excluded).
    pub len: u64,
}

impl Section {
    /// The section's padded extent end.
    pub fn padded_end(&self) -> u64 {
        align_up(self.offset + self.len)
    }
}

/// The placement of the sections for a graph of a given size: a pure function
/// of the format version, |V|, |E| and the flags that add sections (weighted,
/// id map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `u64[|V| + 1]`.
    pub offsets: Section,
    /// `u32[|E|]`.
    pub targets: Section,
    /// `f32[|E|]`, empty for an unweighted graph.
    pub weights: Section,
    /// `u64[|V|]`, empty for a graph without an id map.
    pub ids: Section,
    /// `u32` per page of graph data (version 2; empty in version 1).
    pub pages: Section,
}

impl Layout {
    /// Lays out a graph with `num_vertices` vertices, `num_edges` edges and
    /// header `flags` in the version a writer gives it ([`version_for`]).
    pub fn new(num_vertices: u32, num_edges: u64, flags: u32) -> Layout {
        Layout::of_version(version_for(flags), num_vertices, num_edges, flags)
    }

    /// The layout format `version` gives such a graph.
    pub fn of_version(version: u32, num_vertices: u32, num_edges: u64, flags: u32) -> Layout {
        let offsets = Section {
            offset: HEADER_LEN,
            len: (u64::from(num_vertices) + 1) * 8,
        };
        let targets = Section {
            offset: offsets.padded_end(),
            len: num_edges * 4,
        };
        let weights = Section {
            offset: targets.padded_end(),
            len: if flags & FLAG_WEIGHTED != 0 {
                num_edges * 4
            } else {
                0
            },
        };
        let ids = Section {
            offset: weights.padded_end(),
            len: if version >= 3 && flags & FLAG_ID_MAP != 0 {
                u64::from(num_vertices) * 8
            } else {
                0
            },
        };
        let data_pages = (ids.padded_end() - offsets.offset) / PAGE;
        let pages = Section {
            offset: ids.padded_end(),
            len: if version >= 2 { data_pages * 4 } else { 0 },
        };
        Layout {
            offsets,
            targets,
            weights,
            ids,
            pages,
        }
    }

    /// Total file length.
    pub fn file_len(&self) -> u64 {
        self.pages.padded_end()
    }

    /// The end of graph data (offsets, targets, weights and id map,
    /// padded): the range page checksums cover starts at the offsets and
    /// ends here.
    pub fn data_end(&self) -> u64 {
        self.ids.padded_end()
    }

    /// The sections in the order of the header's records.
    fn sections(&self) -> [Section; 5] {
        [
            self.offsets,
            self.targets,
            self.weights,
            self.pages,
            self.ids,
        ]
    }
}

/// The section of `layout` holding byte `offset`, for messages.
pub(crate) fn section_at(layout: &Layout, offset: u64) -> &'static str {
    let i = layout
        .sections()
        .iter()
        .position(|s| (s.offset..s.padded_end()).contains(&offset))
        .unwrap_or(3);
    SECTION_NAMES[i]
}

/// The decoded header of a `.qcsr` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version of the file (1 to 3).
    pub version: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// |V|.
    pub num_vertices: u32,
    /// |E|.
    pub num_edges: u64,
    /// Where the sections are.
    pub layout: Layout,
    /// CRC-32C of each section's padded extent, in the order of the
    /// header's records: offsets, targets, weights, page checksums, id map
    /// (0 for a record the version lacks).
    pub checksums: [u32; 5],
}

impl Header {
    /// Whether the graph carries edge weights.
    pub fn weighted(&self) -> bool {
        self.flags & FLAG_WEIGHTED != 0
    }

    /// Whether every edge's reverse is in the graph too.
    pub fn undirected(&self) -> bool {
        self.flags & FLAG_UNDIRECTED != 0
    }

    /// Whether the file holds an id map.
    pub fn has_id_map(&self) -> bool {
        self.flags & FLAG_ID_MAP != 0
    }

    /// Whether no list holds a target twice (no parallel edges).
    pub fn distinct_targets(&self) -> bool {
        self.flags & FLAG_DISTINCT_TARGETS != 0
    }

    /// Encodes the header page, computing the header checksum.
    pub fn encode(&self) -> Vec<u8> {
        let mut page = vec![0u8; ALIGN];
        page[0..8].copy_from_slice(&MAGIC);
        page[8..12].copy_from_slice(&self.version.to_le_bytes());
        page[12..16].copy_from_slice(&self.flags.to_le_bytes());
        page[16..24].copy_from_slice(&u64::from(self.num_vertices).to_le_bytes());
        page[24..32].copy_from_slice(&self.num_edges.to_le_bytes());
        for (i, (section, crc)) in self
            .layout
            .sections()
            .iter()
            .zip(self.checksums)
            .enumerate()
            .take(records(self.version))
        {
            let at = record_at(i);
            page[at..at + 8].copy_from_slice(&section.offset.to_le_bytes());
            page[at + 8..at + 16].copy_from_slice(&section.len.to_le_bytes());
            page[at + 16..at + 20].copy_from_slice(&crc.to_le_bytes());
        }
        page[FILE_LEN_AT..FILE_LEN_AT + 8].copy_from_slice(&self.layout.file_len().to_le_bytes());
        let crc = crc32c::crc32c(&page);
        page[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        page
    }

    /// Decodes and validates a header page read from `path`, whose length on
    /// disk is `file_len`. Every field is checked against the layout this
    /// build would write for the same |V|, |E| and flags, so a valid header
    /// can only describe in-bounds, aligned sections.
    pub fn decode(path: &Path, page: &[u8], file_len: u64) -> Result<Header> {
        let corrupt = |detail: String| Error::Corrupt {
            path: path.to_owned(),
            detail,
        };
        if page.len() < 8 || page[0..8] != MAGIC {
            return Err(Error::Foreign {
                path: path.to_owned(),
                found: page[..page.len().min(8)].to_vec(),
            });
        }
        if page.len() < ALIGN {
            return Err(Error::Truncated {
                path: path.to_owned(),
                expected: HEADER_LEN,
                actual: file_len,
            });
        }
        let page = &page[..ALIGN];
        let version = le_u32(page, 8);
        if version > VERSION {
            return Err(Error::FutureVersion {
                path: path.to_owned(),
                found: version,
                supported: VERSION,
            });
        }
        let stored_crc = le_u32(page, HEADER_CRC_AT);
        let mut zeroed = page.to_vec();
        zeroed[HEADER_CRC_AT..HEADER_CRC_AT + 4].fill(0);
        let computed = crc32c::crc32c(&zeroed);
        if stored_crc != computed {
            return Err(Error::Checksum {
                path: path.to_owned(),
                section: "header",
                stored: stored_crc,
                computed,
            });
        }
        if version == 0 {
            return Err(corrupt("format version 0 does not exist".into()));
        }
        let flags = le_u32(page, 12);
        if flags & !known_flags(version) != 0 {
            return Err(corrupt(format!(
                "unknown header flags {flags:#x} for format version {version}"
            )));
        }
        let num_vertices = u32::try_from(le_u64(page, 16))
            .map_err(|_| corrupt(format!("vertex count {} exceeds u32", le_u64(page, 16))))?;
        let num_edges = le_u64(page, 24);
        if num_edges > u64::MAX / 8 {
            return Err(corrupt(format!("edge count {num_edges} is impossible")));
        }
        let layout = Layout::of_version(version, num_vertices, num_edges, flags);
        let mut checksums = [0u32; 5];
        for (i, expected) in layout.sections().iter().enumerate().take(records(version)) {
            let at = record_at(i);
            let found = Section {
                offset: le_u64(page, at),
                len: le_u64(page, at + 8),
            };
            if found != *expected {
                return Err(corrupt(format!(
                    "{} is at {}+{} but |V|={num_vertices}, |E|={num_edges} place it at {}+{}",
                    SECTION_NAMES[i], found.offset, found.len, expected.offset, expected.len
                )));
            }
            checksums[i] = le_u32(page, at + 16);
        }
        let stated_len = le_u64(page, FILE_LEN_AT);
        if stated_len != layout.file_len() {
            return Err(corrupt(format!(
                "header states a file length of {stated_len}, the layout needs {}",
                layout.file_len()
            )));
        }
        if file_len < stated_len {
            return Err(Error::Truncated {
                path: path.to_owned(),
                expected: stated_len,
                actual: file_len,
            });
        }
        if file_len > stated_len {
            return Err(corrupt(format!(
                "{} bytes of trailing data after the last section",
                file_len - stated_len
            )));
        }
        Ok(Header {
            version,
            flags,
            num_vertices,
            num_edges,
            layout,
            checksums,
        })
    }
}

/// Where the header keeps section `i`'s record.
fn record_at(i: usize) -> usize {
    match i {
        0..=2 => SECTIONS_AT + i * SECTION_RECORD,
        3 => PAGES_AT,
        _ => IDS_AT,
    }
}

/// A CRC-32C for every 4 KiB page of a file's graph data (offsets, targets,
/// weights and id map): what lets a reader verify exactly the pages it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageChecksums {
    path: std::path::PathBuf,
    layout: Layout,
    crcs: Vec<u32>,
}

impl PageChecksums {
    /// Checksums of every page of `data`, the graph data of the file at
    /// `path` from the offsets section on (the writer's side, and version 1
    /// files once verified whole).
    pub fn compute(path: &Path, layout: Layout, data: &[u8]) -> PageChecksums {
        PageChecksums {
            path: path.to_owned(),
            layout,
            crcs: data.chunks(ALIGN).map(crc32c::crc32c).collect(),
        }
    }

    /// Decodes the page checksums section `bytes` (padded), checking it
    /// against `header`'s checksum of it: a copy into words, read as
    /// [`PageChecksums::from_words`] reads them.
    pub fn decode(path: &Path, header: &Header, bytes: &[u8]) -> Result<PageChecksums> {
        Self::from_words(path, header, bytemuck::pod_collect_to_vec(bytes))
    }

    /// The page checksums section as read into `words` (padded, as it
    /// lies in the file), checked against `header`'s checksum of it and
    /// kept without a copy: the table of a graph of 8 GiB is 8 MiB.
    pub fn from_words(path: &Path, header: &Header, mut words: Vec<u32>) -> Result<PageChecksums> {
        let computed = crc32c::crc32c(bytemuck::cast_slice(&words));
        if computed != header.checksums[3] {
            return Err(Error::Checksum {
                path: path.to_owned(),
                section: SECTION_NAMES[3],
                stored: header.checksums[3],
                computed,
            });
        }
        words.truncate(crate::to_usize(header.layout.pages.len / 4));
        for word in &mut words {
            *word = u32::from_le(*word);
        }
        Ok(PageChecksums {
            path: path.to_owned(),
            layout: header.layout,
            crcs: words,
        })
    }

    /// The section bytes: one little-endian `u32` per page.
    pub fn encode(&self) -> Vec<u8> {
        self.crcs.iter().flat_map(|c| c.to_le_bytes()).collect()
    }

    /// Checks `bytes`, read from file offset `offset`: both must be page
    /// aligned (every aligned read is) and inside the graph data.
    pub fn verify(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let start = self.layout.offsets.offset;
        let len = bytes.len() as u64;
        let inside = offset >= start
            && offset.is_multiple_of(PAGE)
            && len.is_multiple_of(PAGE)
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= self.layout.data_end());
        if !inside {
            return Err(Error::Corrupt {
                path: self.path.clone(),
                detail: format!(
                    "a read of {len} bytes at {offset} is not whole pages of graph data"
                ),
            });
        }
        let first = crate::to_usize((offset - start) / PAGE);
        let stored = &self.crcs[first..first + bytes.len() / ALIGN];
        // Pages are checked on every core: a block load otherwise leaves the
        // other threads idle while one computes its checksums.
        let bad = bytes
            .par_chunks(ALIGN)
            .zip(stored)
            .position_first(|(page, &crc)| crc32c::crc32c(page) != crc);
        match bad {
            None => Ok(()),
            Some(i) => {
                let at = offset + i as u64 * PAGE;
                Err(Error::PageChecksum {
                    path: self.path.clone(),
                    section: section_at(&self.layout, at),
                    offset: at,
                    stored: stored[i],
                    computed: crc32c::crc32c(&bytes[i * ALIGN..(i + 1) * ALIGN]),
                })
            }
        }
    }

    /// Bytes the table holds in memory.
    pub fn memory_bytes(&self) -> u64 {
        self.crcs.len() as u64 * 4
    }
}

/// A `.qcsr` file opened for reading again, block by block or vertex by
/// vertex: every read is checked against the page checksums before the
/// caller sees it.
#[derive(Debug)]
pub struct VerifiedFile {
    file: quiver_io::ReadFile,
    pages: PageChecksums,
}

impl VerifiedFile {
    /// Reads `file` (whose graph data `pages` describes) through checks.
    pub fn new(file: quiver_io::ReadFile, pages: PageChecksums) -> VerifiedFile {
        VerifiedFile { file, pages }
    }

    /// Reads every request in one batch and verifies each: no byte reaches
    /// the caller unchecked.
    pub fn read_batch(&self, requests: &mut [quiver_io::ReadRequest<'_>]) -> Result<()> {
        self.file.read_batch(requests).map_err(|source| Error::Io {
            path: self.pages.path.clone(),
            source,
        })?;
        requests
            .iter()
            .try_for_each(|r| self.pages.verify(r.offset, r.buf))
    }

    /// Checks that `targets`, edges `first_edge..` read from this file, are
    /// vertices of its graph. The page checksums say the bytes are those
    /// written; this says the writer wrote sense (opening a
    /// [`GraphIndex`](crate::GraphIndex) checks the offsets, not the
    /// targets).
    pub fn check_targets(&self, targets: &[u32], first_edge: u64) -> Result<()> {
        // A file's offsets section holds |V| + 1 entries.
        let entries = self.pages.layout.offsets.len / 8;
        let num_vertices = u32::try_from(entries.saturating_sub(1)).expect("|V| fits u32");
        crate::graph::check_targets(&self.pages.path, targets, first_edge, num_vertices)
    }

    /// The file underneath, for its backend and I/O counters.
    pub fn file(&self) -> &quiver_io::ReadFile {
        &self.file
    }

    /// The page checksums (their memory counts against a budget).
    pub fn pages(&self) -> &PageChecksums {
        &self.pages
    }
}

/// The name of section `i` in layout order, for messages.
pub(crate) fn section_name(i: usize) -> &'static str {
    SECTION_NAMES[i]
}

fn le_u32(page: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(
        page[at..at + 4]
            .try_into()
            .expect("4-byte slice of the header page"),
    )
}

fn le_u64(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(
        page[at..at + 8]
            .try_into()
            .expect("8-byte slice of the header page"),
    )
}
