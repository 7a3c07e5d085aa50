//! Writing `.qcsr` files: streamed, checksummed, and atomic (temporary name,
//! fsync, rename), so a crash or an error never leaves a half-written graph
//! under the final name.

use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use quiver_io::align_up;
use tempfile::NamedTempFile;

use std::os::unix::fs::FileExt;

use crate::format::{
    Header, Layout, FLAG_DISTINCT_TARGETS, FLAG_UNDIRECTED, FLAG_WEIGHTED, VERSION,
};

use crate::{to_usize, Error, Graph, Result};

const BUF_BYTES: usize = 256 << 10;

/// Writes `graph` to `path` atomically.
pub fn write_graph(graph: &Graph, path: impl AsRef<Path>) -> Result<()> {
    let mut writer = CsrWriter::create(
        path.as_ref(),
        graph.num_vertices(),
        graph.is_weighted(),
        graph.is_undirected(),
    )?;
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
/// `8 * (|V| + 1)` bytes for the offsets plus two 1 MiB buffers; targets go
/// straight to the file and weights to a side file copied in at the end.
#[derive(Debug)]
pub struct CsrWriter {
    path: PathBuf,
    file: BufWriter<NamedTempFile>,
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
    targets_crc: u32,
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
        let temp = temp_beside(path).map_err(write_err)?;
        let mut file = BufWriter::with_capacity(BUF_BYTES, temp);
        let layout = Layout::new(num_vertices, 0, weighted);
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
            flags: if weighted { FLAG_WEIGHTED } else { 0 }
                | if undirected { FLAG_UNDIRECTED } else { 0 },
            degrees: vec![0; to_usize(u64::from(num_vertices)) + 1],
            last_source: 0,
            last_target: 0,
            repeated: false,
            num_edges: 0,
            pending: Vec::with_capacity(BUF_BYTES),
            targets_crc: 0,
        })
    }

    /// Appends the edge `source -> target`. Sources must come in
    /// non-decreasing order and both ends must be `< |V|`; the weight is
    /// ignored for an unweighted graph.
    pub fn push(&mut self, source: u32, target: u32, weight: f32) -> Result<()> {
        if source < self.last_source || source >= self.num_vertices || target >= self.num_vertices {
            return Err(Error::invalid(
                "edge",
                format!(
                "edge {source} -> {target} out of order or out of range (|V| = {}, last source {})",
                self.num_vertices, self.last_source
            ),
            ));
        }
        self.repeated |=
            self.num_edges > 0 && source == self.last_source && target == self.last_target;
        self.last_source = source;
        self.last_target = target;
        self.degrees[to_usize(u64::from(source)) + 1] += 1;
        self.num_edges += 1;
        self.pending.extend_from_slice(&target.to_le_bytes());
        if self.pending.len() >= BUF_BYTES {
            self.flush_targets()?;
        }
        if let Some(weights) = &mut self.weights {
            weights
                .write_all(&weight.to_le_bytes())
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
        self.targets_crc = crc32c::crc32c_append(self.targets_crc, &self.pending);
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

    /// Writes offsets, weights and header, fsyncs, and renames the file into
    /// place. Returns the header written.
    pub fn finish(mut self) -> Result<Header> {
        let layout = Layout::new(self.num_vertices, self.num_edges, self.weights.is_some());
        let result = self.finish_sections(&layout);
        let sections = result?;
        let pages_crc = self.write_page_checksums(&layout)?;
        let checksums = [sections[0], self.targets_crc, sections[2], pages_crc];
        let header = Header {
            version: VERSION,
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
        let temp = self
            .file
            .into_inner()
            .map_err(|e| write_err(e.into_error()))?;
        temp.as_file()
            .set_len(layout.file_len())
            .map_err(write_err)?;
        temp.as_file().sync_all().map_err(write_err)?;
        temp.persist(&path).map_err(|e| write_err(e.error))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Make the rename itself durable; not every filesystem allows it.
            if let Ok(dir) = File::open(dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(header)
    }

    /// Reads the graph data back (from the page cache, as just written),
    /// appends a checksum per page of it, and returns the checksum of that
    /// section.
    fn write_page_checksums(&mut self, layout: &Layout) -> Result<u32> {
        let path = self.path.clone();
        let write_err = |source| Error::Write {
            path: path.clone(),
            source,
        };
        self.file.flush().map_err(write_err)?;
        let mut crcs = Vec::with_capacity(to_usize(layout.pages.len / 4));
        let mut chunk = vec![0u8; BUF_BYTES];
        let mut at = layout.offsets.offset;
        while at < layout.data_end() {
            let n = to_usize((layout.data_end() - at).min(BUF_BYTES as u64));
            self.file
                .get_ref()
                .as_file()
                .read_exact_at(&mut chunk[..n], at)
                .map_err(write_err)?;
            crcs.extend(chunk[..n].chunks(quiver_io::ALIGN).map(crc32c::crc32c));
            at += n as u64;
        }
        let bytes: Vec<u8> = crcs.iter().flat_map(|c| c.to_le_bytes()).collect();
        self.file
            .seek(SeekFrom::Start(layout.pages.offset))
            .map_err(write_err)?;
        self.file.write_all(&bytes).map_err(write_err)?;
        let crc = crc32c::crc32c(&bytes);
        pad(&mut self.file, layout.pages.offset + layout.pages.len, crc).map_err(write_err)
    }

    /// Pads the targets, copies the weights in and writes the offsets;
    /// returns the section checksums (the targets' is filled in by the caller).
    fn finish_sections(&mut self, layout: &Layout) -> Result<[u32; 3]> {
        let path = self.path.clone();
        let write_err = |source| Error::Write {
            path: path.clone(),
            source,
        };
        let mut checksums = [0u32; 3];
        self.flush_targets()?;
        self.targets_crc = pad(
            &mut self.file,
            layout.targets.offset + layout.targets.len,
            self.targets_crc,
        )
        .map_err(write_err)?;
        if let Some(weights) = self.weights.take() {
            let mut side = weights
                .into_inner()
                .map_err(|e| write_err(e.into_error()))?;
            side.seek(SeekFrom::Start(0)).map_err(write_err)?;
            let mut crc = 0;
            let mut chunk = vec![0u8; BUF_BYTES];
            loop {
                let n = side.read(&mut chunk).map_err(write_err)?;
                if n == 0 {
                    break;
                }
                crc = crc32c::crc32c_append(crc, &chunk[..n]);
                self.file.write_all(&chunk[..n]).map_err(write_err)?;
            }
            checksums[2] = pad(
                &mut self.file,
                layout.weights.offset + layout.weights.len,
                crc,
            )
            .map_err(write_err)?;
        }
        for v in 1..self.degrees.len() {
            self.degrees[v] += self.degrees[v - 1];
        }
        self.file
            .seek(SeekFrom::Start(layout.offsets.offset))
            .map_err(write_err)?;
        let mut crc = 0;
        for chunk in self.degrees.chunks(BUF_BYTES / 8) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|o| o.to_le_bytes()).collect();
            crc = crc32c::crc32c_append(crc, &bytes);
            self.file.write_all(&bytes).map_err(write_err)?;
        }
        checksums[0] = pad(
            &mut self.file,
            layout.offsets.offset + layout.offsets.len,
            crc,
        )
        .map_err(write_err)?;
        Ok(checksums)
    }
}

/// Writes zeros from `end` (the current position) to the next 4 KiB boundary,
/// extending `crc` over them.
fn pad(out: &mut impl Write, end: u64, crc: u32) -> io::Result<u32> {
    let zeros = vec![0u8; to_usize(align_up(end) - end)];
    out.write_all(&zeros)?;
    Ok(crc32c::crc32c_append(crc, &zeros))
}

/// A temporary file in `path`'s directory, removed on drop unless persisted.
pub(crate) fn temp_beside(path: &Path) -> io::Result<NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or("graph".into(), |n| n.to_string_lossy());
    // 0o644 before the umask, as for a file created the ordinary way;
    // tempfile's default of 0o600 would hide graphs from other users.
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)
}
