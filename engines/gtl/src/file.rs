//! The `file` device: GraphSSD's page format and GTT laid on a real file,
//! read through quiver-io (io_uring, `O_DIRECT`), with no timing model,
//! so the layout can be measured on a real disk; and its baseline, the
//! graph's own `.qcsr` file read as a CSR file (rowPtr, then colIdx).
//!
//! A GTL file: a header page (the magic `QUIVER-GTL-FILE1`, the page
//! size, 16 KiB by default as the paper's NAND pages or any power of two
//! from 4 KiB to 64 KiB, |V|, page count, the GTT's offset), the graph pages packed as
//! GraphInitialize packs them (page `i` at `(1 + i) * page_bytes`), then
//! the GTT, one 8-byte entry (start vertex, page index) per page. Weights
//! are not written: the file device serves GetAdjacencyList.
//!
//! [`bench`](mod@bench) times random GetAdjacencyList calls on both layouts.
//!
//! Reads come in batches: every page of every request in a batch is in
//! flight at once (up to the file's queue depth). A CSR request reads the
//! 4 KiB blocks holding `rowPtr[v]` and `rowPtr[v + 1]`, then those holding
//! its targets; a batch does the first step for all its requests, then the
//! second.

use std::os::unix::fs::FileExt;
use std::path::Path;

use quiver_csr::format::Header;
use quiver_csr::Graph;
use quiver_io::{AlignedBuf, ReadFile, ReadOptions, ReadRequest, ALIGN};

use crate::error::{check_vertex, Error, Result};
use crate::flash::Ppn;
use crate::gtl::{encode_pages, list_of, plan};
use crate::gtt::{Gtt, GttEntry, MAX_PAGES};
use crate::page::{Page, PageFormat};

pub mod bench;

const MAGIC: &[u8; 16] = b"QUIVER-GTL-FILE1";
/// The page size of a GTL file by default: the paper's 16 KiB NAND page.
pub const PAGE_BYTES: usize = 16 << 10;
/// The page sizes a GTL file may have: a power of two in this range.
const PAGE_SIZES: std::ops::RangeInclusive<usize> = ALIGN..=(64 << 10);

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Image {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// What a read batch cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Read requests issued (pages for the GTL, 4 KiB blocks for the CSR).
    pub reads: u64,
    /// Bytes read.
    pub bytes: u64,
}

/// A GTL file opened for reading, with its GTT in memory (the host's copy).
#[derive(Debug)]
pub struct GtlFile {
    file: ReadFile,
    vertices: u32,
    page_bytes: usize,
    /// One entry per page: its start vertex and its index in the file.
    gtt: Gtt,
}

impl GtlFile {
    /// Lays `graph`'s out-lists out at `path` in pages of `page_bytes` (a
    /// power of two from 4 KiB to 64 KiB; the paper's is [`PAGE_BYTES`])
    /// with `slack` (written under a temporary name and renamed); returns
    /// the page count.
    pub fn write(graph: &Graph, path: &Path, page_bytes: usize, slack: f64) -> Result<u64> {
        if !page_bytes.is_power_of_two() || !PAGE_SIZES.contains(&page_bytes) {
            return Err(quiver_run::InvalidArgument::new(
                "page_bytes",
                format!("{page_bytes} is not a power of two from 4 KiB to 64 KiB"),
            )
            .into());
        }
        let format = PageFormat::new(page_bytes, slack)?;
        let plans = plan(0, crate::gtl::lens(graph.offsets()), &format);
        let pages = encode_pages(&plans, graph.targets(), &format);
        let count = pages.len() as u64;
        let gtt_offset = (1 + count) * page_bytes as u64;
        let mut header = vec![0u8; page_bytes];
        header[..16].copy_from_slice(MAGIC);
        // A page size from PAGE_SIZES fits u32.
        let size = u32::try_from(page_bytes).expect("at most 64 KiB");
        header[16..20].copy_from_slice(&size.to_le_bytes());
        header[20..24].copy_from_slice(&graph.num_vertices().to_le_bytes());
        header[24..32].copy_from_slice(&count.to_le_bytes());
        header[32..40].copy_from_slice(&gtt_offset.to_le_bytes());
        let gtt: Vec<u8> = plans
            .iter()
            .zip(0u32..)
            .flat_map(|(p, i)| [p.vsid.to_le_bytes(), i.to_le_bytes()].concat())
            .collect();
        let io = |e: std::io::Error| bad(path, e.to_string());
        let out = quiver_io::Output::create(path, quiver_io::Shape::Seekable).map_err(io)?;
        let file = out.file();
        file.write_all_at(&header, 0).map_err(io)?;
        for (i, page) in (1u64..).zip(&pages) {
            file.write_all_at(page, i * page_bytes as u64).map_err(io)?;
        }
        file.write_all_at(&gtt, gtt_offset).map_err(io)?;
        out.commit().map_err(io)?;
        Ok(count)
    }

    /// Opens the GTL file `path` with `options` and loads its GTT.
    pub fn open(path: &Path, options: &ReadOptions) -> Result<GtlFile> {
        let file = ReadFile::open(path, options).map_err(|e| bad(path, e.to_string()))?;
        // The header's fields are in its first aligned block.
        let mut header = AlignedBuf::zeroed(ALIGN);
        if file.len() < ALIGN as u64 {
            return Err(bad(path, "too short for a GTL file"));
        }
        file.read_at(0, &mut header)
            .map_err(|e| bad(path, e.to_string()))?;
        if &header[..16] != MAGIC {
            return Err(bad(path, "not a GTL file (bad magic)"));
        }
        let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        let long = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
        let (page_bytes, vertices, count, gtt_offset) = (word(16), word(20), long(24), long(32));
        let page_bytes = page_bytes as usize;
        let pages_end = count
            .checked_add(1)
            .and_then(|p| p.checked_mul(page_bytes as u64));
        if !page_bytes.is_power_of_two()
            || !PAGE_SIZES.contains(&page_bytes)
            || pages_end != Some(gtt_offset)
            || count > file.len()
            || count >= MAX_PAGES
        {
            return Err(bad(path, "a header that does not describe the file"));
        }
        let gtt_len = usize::try_from(count * 8).map_err(|_| bad(path, "a GTT too large"))?;
        if file.len() != gtt_offset + gtt_len as u64 {
            return Err(bad(
                path,
                format!(
                    "{} bytes, not the {} its header says",
                    file.len(),
                    gtt_offset + gtt_len as u64
                ),
            ));
        }
        let mut gtt = AlignedBuf::zeroed(gtt_len.next_multiple_of(ALIGN));
        let mut requests = [ReadRequest {
            offset: gtt_offset,
            buf: &mut gtt[..gtt_len],
        }];
        file.read_batch(&mut requests)
            .map_err(|e| bad(path, e.to_string()))?;
        let keys: Vec<u32> = gtt[..gtt_len]
            .chunks_exact(8)
            .map(|e| u32::from_le_bytes(e[..4].try_into().expect("4 bytes")))
            .collect();
        if keys.first() != Some(&0) || keys.windows(2).any(|w| w[0] > w[1]) {
            return Err(bad(path, "a GTT out of order"));
        }
        let mut gtt = Gtt::default();
        for (page, &key) in (0..).zip(&keys) {
            gtt.push(GttEntry::new(key, Ppn(page)));
        }
        Ok(GtlFile {
            file,
            vertices,
            page_bytes,
            gtt,
        })
    }

    /// |V|.
    pub fn vertices(&self) -> u32 {
        self.vertices
    }

    /// Whether reads bypass the page cache (`O_DIRECT` was granted).
    pub fn is_direct(&self) -> bool {
        self.file.is_direct()
    }

    /// The out-lists of `vertices`, read as one batch.
    pub fn get_many(&self, vertices: &[u32]) -> Result<(Vec<Vec<u32>>, Cost)> {
        let mut wanted = Vec::new();
        for &v in vertices {
            check_vertex(v, self.vertices)?;
            let pages: Vec<GttEntry> = self
                .gtt
                .locate(v)
                .into_iter()
                .map(|p| self.gtt.get(p))
                .collect();
            wanted.push(pages);
        }
        let pages: usize = wanted.iter().map(|r| r.len()).sum();
        let page_bytes = self.page_bytes;
        let mut buf = AlignedBuf::zeroed(pages * page_bytes);
        let mut requests: Vec<ReadRequest<'_>> = buf
            .chunks_mut(page_bytes)
            .zip(wanted.iter().flatten())
            .map(|(buf, entry)| ReadRequest {
                offset: (1 + entry.ppn().0) * page_bytes as u64,
                buf,
            })
            .collect();
        self.file
            .read_batch(&mut requests)
            .map_err(|e| bad(self.file.path(), e.to_string()))?;
        let mut chunks = buf.chunks(page_bytes);
        let mut lists = Vec::with_capacity(vertices.len());
        for (&v, entries) in vertices.iter().zip(&wanted) {
            let mut list = Vec::new();
            for entry in entries {
                let bytes = chunks.next().expect("a buffer per page");
                let page = Page::decode(bytes, entry.ppn().0)?;
                list.extend_from_slice(list_of(&page, entry, v)?);
            }
            lists.push(list);
        }
        let cost = Cost {
            reads: pages as u64,
            bytes: (pages * page_bytes) as u64,
        };
        Ok((lists, cost))
    }
}

/// A `.qcsr` file read as a CSR file: rowPtr (its offsets section), then
/// colIdx (its targets section), in 4 KiB blocks.
#[derive(Debug)]
pub struct CsrReader {
    file: ReadFile,
    header: Header,
}

impl CsrReader {
    /// Opens the graph file `path` with `options`.
    pub fn open(path: &Path, options: &ReadOptions) -> Result<CsrReader> {
        let file = ReadFile::open(path, options).map_err(|e| bad(path, e.to_string()))?;
        let mut page = AlignedBuf::zeroed(ALIGN);
        file.read_at(0, &mut page)
            .map_err(|e| bad(path, e.to_string()))?;
        let header =
            Header::decode(path, &page, file.len()).map_err(|e| bad(path, e.to_string()))?;
        Ok(CsrReader { file, header })
    }

    /// |V|.
    pub fn vertices(&self) -> u32 {
        self.header.num_vertices
    }

    /// Whether reads bypass the page cache (`O_DIRECT` was granted).
    pub fn is_direct(&self) -> bool {
        self.file.is_direct()
    }

    /// Reads the blocks covering `ranges` (byte ranges of the file) as one
    /// batch; returns each range's bytes.
    fn read_ranges(&self, ranges: &[(u64, u64)]) -> Result<(Vec<Vec<u8>>, Cost)> {
        let align = ALIGN as u64;
        let spans: Vec<(u64, u64)> = ranges
            .iter()
            .map(|&(start, end)| (start / align * align, end.div_ceil(align) * align))
            .collect();
        let total: u64 = spans.iter().map(|(s, e)| e - s).sum();
        let mut buf = AlignedBuf::zeroed(usize::try_from(total).expect("fits memory"));
        let mut requests = Vec::new();
        let mut rest: &mut [u8] = &mut buf;
        for &(start, end) in &spans {
            let (head, tail) = rest.split_at_mut(usize::try_from(end - start).expect("fits"));
            requests.extend(
                head.chunks_mut(ALIGN)
                    .zip((start..).step_by(ALIGN))
                    .map(|(buf, offset)| ReadRequest { offset, buf }),
            );
            rest = tail;
        }
        let cost = Cost {
            reads: requests.len() as u64,
            bytes: total,
        };
        let file_len = self.file.len();
        for r in &mut requests {
            // The last block may end at the file's end.
            let keep = usize::try_from(file_len.saturating_sub(r.offset)).unwrap_or(usize::MAX);
            if keep < r.buf.len() {
                r.buf = &mut std::mem::take(&mut r.buf)[..keep];
            }
        }
        self.file
            .read_batch(&mut requests)
            .map_err(|e| bad(self.file.path(), e.to_string()))?;
        drop(requests);
        let mut out = Vec::with_capacity(ranges.len());
        let mut at = 0;
        for (&(start, end), &(s, e)) in ranges.iter().zip(&spans) {
            let skip = usize::try_from(start - s).expect("below a block");
            let len = usize::try_from(end - start).expect("fits");
            out.push(buf[at + skip..at + skip + len].to_vec());
            at += usize::try_from(e - s).expect("fits");
        }
        Ok((out, cost))
    }

    /// The out-lists of `vertices`: their rowPtr entries as one batch,
    /// then their targets as another.
    pub fn get_many(&self, vertices: &[u32]) -> Result<(Vec<Vec<u32>>, Cost)> {
        let n = self.vertices();
        let layout = self.header.layout;
        let mut rows = Vec::with_capacity(vertices.len());
        for &v in vertices {
            check_vertex(v, n)?;
            let at = layout.offsets.offset + u64::from(v) * 8;
            rows.push((at, at + 16));
        }
        let (bounds, mut cost) = self.read_ranges(&rows)?;
        let edges = self.header.num_edges;
        let targets: Vec<(u64, u64)> = bounds
            .iter()
            .zip(vertices)
            .map(|(b, &v)| {
                let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
                let (start, end) = (word(0), word(8));
                if start > end || end > edges {
                    return Err(bad(
                        self.file.path(),
                        format!("rowPtr of vertex {v} is {start}..{end} among {edges} edges"),
                    ));
                }
                let at = |k: u64| layout.targets.offset + k * 4;
                Ok((at(start), at(end)))
            })
            .collect::<Result<_>>()?;
        let non_empty: Vec<(u64, u64)> = targets.iter().copied().filter(|(s, e)| s < e).collect();
        let (bytes, second) = self.read_ranges(&non_empty)?;
        cost.reads += second.reads;
        cost.bytes += second.bytes;
        let mut bytes = bytes.into_iter();
        let lists = targets
            .iter()
            .map(|(s, e)| {
                if s == e {
                    return Vec::new();
                }
                let b = bytes.next().expect("bytes per non-empty list");
                b.chunks_exact(4)
                    .map(|t| u32::from_le_bytes(t.try_into().expect("4 bytes")))
                    .collect()
            })
            .collect();
        Ok((lists, cost))
    }
}
