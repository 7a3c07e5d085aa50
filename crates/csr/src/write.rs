//! Writing `.qcsr` files: streamed, checksummed, and atomic (temporary name,
//! fsync, rename), so a crash or an error never leaves a half-written graph
//! under the final name; a scratch graph may skip the fsync
//! ([`CsrWriter::without_sync`]).

use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use quiver_io::{align_up, Output, Shape, ALIGN};
use tempfile::NamedTempFile;

use crate::format::{
    version_for, Header, Layout, FLAG_DISTINCT_TARGETS, FLAG_ID_MAP, FLAG_UNDIRECTED, FLAG_WEIGHTED,
};
use crate::symmetry::Symmetry;
use crate::{to_usize, Error, Graph, Result};

const BUF_BYTES: usize = 256 << 10;

/// Writes `graph` (with its id map, if it has one) to `path` atomically.
pub fn write_graph(graph: &Graph, path: impl AsRef<Path>) -> Result<()> {
    let mut writer = CsrWriter::create(
        path.as_ref(),
        graph.num_vertices(),
        graph.is_weighted(),
        graph.is_undirected(),
    )?;
    if let Some(ids) = graph.original_ids() {
        writer = writer.with_original_ids(ids.to_vec())?;
    }
    for v in 0..graph.num_vertices() {
        let weights = graph.edge_weights(v);
        for (i, &t) in graph.neighbors(v).iter().enumerate() {
            writer.push(v, t, weights.map_or(1.0, |w| w[i]))?;
        }
    }
    writer.finish()?;
    Ok(())
}

/// Streams edges, sorted by source, into a new `.qcsr` file. Memory use is
/// `8 * (|V| + 1)` bytes for the offsets (and `8 * |V|` for an id map) plus
/// two 1 MiB buffers; targets go straight to the file and weights to a side
/// file copied in at the end.
#[derive(Debug)]
pub struct CsrWriter {
    path: PathBuf,
    file: BufWriter<Output>,
    weights: Option<BufWriter<NamedTempFile>>,
    num_vertices: u32,
    flags: u32,
    /// `degrees[v + 1]` counts `v`'s edges until `finish` turns it into offsets.
    degrees: Vec<u64>,
    last_source: u32,
    last_target: u32,
    /// Whether some source listed a target twice so far.
    repeated: bool,
    num_edges: u64,
    /// Target bytes not yet checksummed and written.
    pending: Vec<u8>,
    targets: SectionSums,
    /// The original id of each vertex, written after the weights.
    ids: Option<Vec<u64>>,
    /// Whether `finish` fsyncs the file and its directory.
    sync: bool,
    /// With [`CsrWriter::detecting_symmetry`]: the edges' symmetry sums.
    symmetry: Option<Symmetry>,
}

impl CsrWriter {
    /// Starts a graph of `num_vertices` vertices at `path` (written under a
    /// temporary name in the same directory until [`CsrWriter::finish`]).
    pub fn create(
        path: &Path,
        num_vertices: u32,
        weighted: bool,
        undirected: bool,
    ) -> Result<CsrWriter> {
        let write_err = |source| Error::Write {
            path: path.to_owned(),
            source,
        };
        let out = Output::create(path, Shape::Seekable).map_err(write_err)?;
        let mut file = BufWriter::with_capacity(BUF_BYTES, out);
        let flags =
            if weighted { FLAG_WEIGHTED } else { 0 } | if undirected { FLAG_UNDIRECTED } else { 0 };
        // Where the targets start depends on |V| alone.
        let layout = Layout::new(num_vertices, 0, flags);
        file.seek(SeekFrom::Start(layout.targets.offset))
            .map_err(write_err)?;
        let weights = if weighted {
            Some(BufWriter::with_capacity(
                BUF_BYTES,
                temp_beside(path).map_err(write_err)?,
            ))
        } else {
            None
        };
        Ok(CsrWriter {
            path: path.to_owned(),
            file,
            weights,
            num_vertices,
            flags,
            degrees: vec![0; to_usize(u64::from(num_vertices)) + 1],
            last_source: 0,
            last_target: 0,
            repeated: false,
            num_edges: 0,
            pending: Vec::with_capacity(BUF_BYTES),
            targets: SectionSums::default(),
            ids: None,
            sync: true,
            symmetry: None,
        })
    }

    /// Skips `finish`'s fsyncs, for a scratch graph removed when its owner
    /// is done with it. The graph still appears under its name whole or
    /// not at all; only its survival of a machine crash is given up.
    pub fn without_sync(mut self) -> CsrWriter {
        self.sync = false;
        self
    }

    /// Checks, as the edges go by, whether every edge has its reverse (of
    /// the same weight), and if so flags the graph undirected at
    /// [`CsrWriter::finish`] (a graph with no edge is left as it is).
    pub fn detecting_symmetry(mut self) -> CsrWriter {
        if self.flags & FLAG_UNDIRECTED == 0 {
            self.symmetry = Some(Symmetry::default());
        }
        self
    }

    /// Gives the graph an id map: `ids[v]` is the id vertex `v` had in the
    /// input. There must be one per vertex, all distinct, in any order
    /// (increasing order lets readers find vertices without an index).
    pub fn with_original_ids(mut self, ids: Vec<u64>) -> Result<CsrWriter> {
        crate::ids::checked_index(&ids, self.num_vertices)?;
        self.flags |= FLAG_ID_MAP;
        self.ids = Some(ids);
        Ok(self)
    }

    /// Appends the edge `source -> target`. Sources must come in
    /// non-decreasing order and both ends must be `< |V|`; the weight is
    /// ignored for an unweighted graph.
    pub fn push(&mut self, source: u32, target: u32, weight: f32) -> Result<()> {
        self.push_run(source, &[target], &[weight])
    }

    /// Appends the edges `source -> targets[i]` with weights `weights[i]`,
    /// in order, as [`CsrWriter::push`] would one at a time, only faster;
    /// an empty run appends nothing. `weights` is ignored (and may be
    /// empty) for an unweighted graph; for a weighted one it has a weight
    /// per target.
    pub fn push_run(&mut self, source: u32, targets: &[u32], weights: &[f32]) -> Result<()> {
        if self.weights.is_some() && weights.len() != targets.len() {
            return Err(Error::invalid(
                "weights",
                format!(
                    "{} weights for {} edges of {source}",
                    weights.len(),
                    targets.len()
                ),
            ));
        }
        let (Some(&first), Some(&last)) = (targets.first(), targets.last()) else {
            return Ok(());
        };
        let out_of_range = targets.iter().any(|&t| t >= self.num_vertices);
        if source < self.last_source || source >= self.num_vertices || out_of_range {
            let target = targets
                .iter()
                .copied()
                .find(|&t| t >= self.num_vertices)
                .unwrap_or(first);
            return Err(Error::invalid(
                "edge",
                format!(
                "edge {source} -> {target} out of order or out of range (|V| = {}, last source {})",
                self.num_vertices, self.last_source
            ),
            ));
        }
        self.repeated |=
            (self.num_edges > 0 && source == self.last_source && first == self.last_target)
                || targets.windows(2).any(|pair| pair[0] == pair[1]);
        self.last_source = source;
        self.last_target = last;
        if let Some(sums) = &mut self.symmetry {
            if self.weights.is_some() {
                for (&t, w) in targets.iter().zip(weights) {
                    sums.add(source, t, w.to_bits());
                }
            } else {
                for &t in targets {
                    sums.add(source, t, 0);
                }
            }
        }
        let count = targets.len() as u64;
        self.degrees[to_usize(u64::from(source)) + 1] += count;
        self.num_edges += count;
        // Little-endian on every target this crate builds for (lib.rs).
        let mut bytes: &[u8] = bytemuck::cast_slice(targets);
        while !bytes.is_empty() {
            let take = bytes.len().min(BUF_BYTES - self.pending.len());
            self.pending.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.pending.len() >= BUF_BYTES {
                self.flush_targets()?;
            }
        }
        if let Some(file) = &mut self.weights {
            file.write_all(bytemuck::cast_slice(weights))
                .map_err(|source| Error::Write {
                    path: self.path.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// Checksums and writes the buffered targets (checksumming a buffer at
    /// a time is several times faster than four bytes at a time).
    fn flush_targets(&mut self) -> Result<()> {
        self.targets.feed(&self.pending);
        let result = self.file.write_all(&self.pending);
        self.pending.clear();
        result.map_err(|source| self.write_err(source))
    }

    /// Edges pushed so far.
    pub fn num_edges(&self) -> u64 {
        self.num_edges
    }

    fn write_err(&self, source: io::Error) -> Error {
        Error::Write {
            path: self.path.clone(),
            source,
        }
    }

    /// Writes offsets, weights, id map and header, fsyncs (unless
    /// [`CsrWriter::without_sync`]), and renames the file into place.
    /// Returns the header written.
    pub fn finish(mut self) -> Result<Header> {
        if self.num_edges > 0 && self.symmetry.is_some_and(|s| s.is_symmetric()) {
            self.flags |= FLAG_UNDIRECTED;
        }
        let layout = Layout::new(self.num_vertices, self.num_edges, self.flags);
        let [offsets, targets, weights, ids] = self.finish_sections(&layout)?;
        let pages_crc = self.write_page_checksums(&layout, [&offsets, &targets, &weights, &ids])?;
        let checksums = [offsets.crc, targets.crc, weights.crc, pages_crc, ids.crc];
        let header = Header {
            version: version_for(self.flags),
            flags: self.flags
                | if self.repeated {
                    0
                } else {
                    FLAG_DISTINCT_TARGETS
                },
            num_vertices: self.num_vertices,
            num_edges: self.num_edges,
            layout,
            checksums,
        };
        let path = self.path.clone();
        let write_err = |source| Error::Write {
            path: path.clone(),
            source,
        };
        let file = &mut self.file;
        file.seek(SeekFrom::Start(0)).map_err(write_err)?;
        file.write_all(&header.encode()).map_err(write_err)?;
        let mut out = self
            .file
            .into_inner()
            .map_err(|e| write_err(e.into_error()))?;
        out.file().set_len(layout.file_len()).map_err(write_err)?;
        if !self.sync {
            out = out.without_sync();
        }
        out.commit().map_err(write_err)?;
        Ok(header)
    }

    /// Appends the page checksums the sections gathered as they were
    /// written (in file order) and returns the checksum of that section.
    fn write_page_checksums(
        &mut self,
        layout: &Layout,
        sections: [&SectionSums; 4],
    ) -> Result<u32> {
        let path = self.path.clone();
        let write_err = |source| Error::Write {
            path: path.clone(),
            source,
        };
        let bytes: Vec<u8> = sections
            .iter()
            .flat_map(|section| &section.pages)
            .flat_map(|crc| crc.to_le_bytes())
            .collect();
        debug_assert_eq!(bytes.len() as u64, layout.pages.len);
        self.file
            .seek(SeekFrom::Start(layout.pages.offset))
            .map_err(write_err)?;
        self.file.write_all(&bytes).map_err(write_err)?;
        let mut table = SectionSums::default();
        table.feed(&bytes);
        pad(
            &mut self.file,
            layout.pages.offset + layout.pages.len,
            &mut table,
        )
        .map_err(write_err)?;
        Ok(table.crc)
    }

    /// Pads the targets, copies the weights in, writes the id map and the
    /// offsets; returns the checksums of the offsets, targets, weights and
    /// id map sections.
    fn finish_sections(&mut self, layout: &Layout) -> Result<[SectionSums; 4]> {
        let path = self.path.clone();
        let write_err = |source| Error::Write {
            path: path.clone(),
            source,
        };
        self.flush_targets()?;
        let targets_end = layout.targets.offset + layout.targets.len;
        pad(&mut self.file, targets_end, &mut self.targets).map_err(write_err)?;
        let mut weights = SectionSums::default();
        if let Some(side) = self.weights.take() {
            let mut side = side.into_inner().map_err(|e| write_err(e.into_error()))?;
            side.seek(SeekFrom::Start(0)).map_err(write_err)?;
            let mut chunk = vec![0u8; BUF_BYTES];
            loop {
                let n = side.read(&mut chunk).map_err(write_err)?;
                if n == 0 {
                    break;
                }
                weights.feed(&chunk[..n]);
                self.file.write_all(&chunk[..n]).map_err(write_err)?;
            }
            let weights_end = layout.weights.offset + layout.weights.len;
            pad(&mut self.file, weights_end, &mut weights).map_err(write_err)?;
        }
        let mut ids = SectionSums::default();
        if let Some(map) = self.ids.take() {
            self.file
                .seek(SeekFrom::Start(layout.ids.offset))
                .map_err(write_err)?;
            write_words(&mut self.file, &map, &mut ids).map_err(write_err)?;
            let ids_end = layout.ids.offset + layout.ids.len;
            pad(&mut self.file, ids_end, &mut ids).map_err(write_err)?;
        }
        for v in 1..self.degrees.len() {
            self.degrees[v] += self.degrees[v - 1];
        }
        self.file
            .seek(SeekFrom::Start(layout.offsets.offset))
            .map_err(write_err)?;
        let mut offsets = SectionSums::default();
        write_words(&mut self.file, &self.degrees, &mut offsets).map_err(write_err)?;
        let offsets_end = layout.offsets.offset + layout.offsets.len;
        pad(&mut self.file, offsets_end, &mut offsets).map_err(write_err)?;
        Ok([offsets, std::mem::take(&mut self.targets), weights, ids])
    }
}

/// The checksums of one section, gathered as its bytes are written: the
/// CRC-32C of the whole padded section, and one per 4 KiB page (a section
/// starts page aligned and padding ends it on a page boundary).
#[derive(Debug, Default)]
struct SectionSums {
    crc: u32,
    pages: Vec<u32>,
    page_crc: u32,
    page_filled: usize,
}

impl SectionSums {
    /// Extends both checksums over the next `bytes` of the section.
    fn feed(&mut self, mut bytes: &[u8]) {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        while !bytes.is_empty() {
            let n = (ALIGN - self.page_filled).min(bytes.len());
            self.page_crc = crc32c::crc32c_append(self.page_crc, &bytes[..n]);
            self.page_filled += n;
            bytes = &bytes[n..];
            if self.page_filled == ALIGN {
                self.pages.push(self.page_crc);
                (self.page_crc, self.page_filled) = (0, 0);
            }
        }
    }
}

/// Writes `words` little-endian at the current position, extending `sums`
/// over them.
fn write_words(out: &mut impl Write, words: &[u64], sums: &mut SectionSums) -> io::Result<()> {
    for chunk in words.chunks(BUF_BYTES / 8) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_le_bytes()).collect();
        sums.feed(&bytes);
        out.write_all(&bytes)?;
    }
    Ok(())
}

/// Writes zeros from `end` (the current position) to the next 4 KiB
/// boundary, extending `sums` over them.
fn pad(out: &mut impl Write, end: u64, sums: &mut SectionSums) -> io::Result<()> {
    let zeros = vec![0u8; to_usize(align_up(end) - end)];
    out.write_all(&zeros)?;
    sums.feed(&zeros);
    debug_assert_eq!(sums.page_filled, 0, "padding ends a section on a page");
    Ok(())
}

/// A scratch file in `path`'s directory (a weighted graph's weights until
/// they are copied in), removed on drop.
fn temp_beside(path: &Path) -> io::Result<NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or("graph".into(), |n| n.to_string_lossy());
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".weights.tmp")
        .tempfile_in(dir)
}
