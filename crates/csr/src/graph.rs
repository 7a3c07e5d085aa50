//! The CSR graph: owned in memory, or backed by a `.qcsr` file that is mapped
//! or read with aligned I/O.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use quiver_io::{AlignedBuf, Mmap, ReadFile, ReadOptions, ReadRequest};
use serde::Serialize;

use crate::format::{
    section_name, Header, Layout, PageChecksums, FLAG_DISTINCT_TARGETS, FLAG_ID_MAP,
    FLAG_UNDIRECTED, FLAG_WEIGHTED, HEADER_LEN,
};
use crate::ids::IdIndex;
use crate::{to_usize, Error, Result};

/// A directed graph in compressed sparse row form.
///
/// Invariants, established by every constructor: `offsets().len() == |V| + 1`,
/// `offsets()[0] == 0`, offsets are non-decreasing and end at
/// `targets().len() == |E|`; `weights()`, when present, has `|E|` entries.
/// Adjacency lists are sorted by target and targets are `< |V|`. A graph
/// built in memory sorts its lists; opening a file checks every page
/// checksum and that targets are `< |V|` before any accessor sees a byte,
/// and [`Graph::verify`] checks the order (every writer here sorts).
///
/// A graph may carry an id map ([`Graph::original_ids`]): the id each vertex
/// had in the input, `|V|` distinct `u64`s. Its index for
/// [`Graph::dense_id`] is built, and distinctness checked, when the graph is
/// made or opened: a map in increasing order (as Graphalytics ingest writes
/// it) is searched directly, any other costs 4 bytes a vertex.
#[derive(Debug)]
pub struct Graph {
    num_vertices: u32,
    flags: u32,
    storage: Storage,
    /// Present exactly when the graph has an id map.
    id_index: Option<IdIndex>,
}

#[derive(Debug)]
enum Storage {
    Owned {
        offsets: Vec<u64>,
        targets: Vec<u32>,
        weights: Option<Vec<f32>>,
        ids: Option<Vec<u64>>,
    },
    File {
        path: PathBuf,
        header: Header,
        bytes: FileBytes,
        pages: PageChecksums,
    },
}

/// Whether opening a mapped file leaves the pages it checked resident.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Residency {
    /// Checked pages stay mapped in, ready for reading.
    Kept,
    /// Each window leaves once checked ([`Graph::open_lazily`]).
    Released,
}

/// Bytes of a file checked at a time before they are released.
const CHECK_WINDOW: usize = 8 << 20;

#[derive(Debug)]
enum FileBytes {
    Mapped(Mmap),
    Loaded(AlignedBuf),
}

impl FileBytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(map) => map,
            FileBytes::Loaded(buf) => buf,
        }
    }
}

/// Summary statistics of the out-degree distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DegreeSummary {
    /// Smallest out-degree.
    pub min: u64,
    /// Largest out-degree.
    pub max: u64,
    /// Mean out-degree.
    pub mean: f64,
    /// Median out-degree.
    pub median: u64,
    /// 99th percentile out-degree.
    pub p99: u64,
    /// Vertices with out-degree zero (dead ends for walks).
    pub zero_out_degree: u64,
}

impl Graph {
    /// Builds a graph from CSR arrays, validating every invariant of [`Graph`]
    /// (adjacency lists are sorted here if they are not already).
    pub fn from_parts(
        offsets: Vec<u64>,
        mut targets: Vec<u32>,
        mut weights: Option<Vec<f32>>,
        undirected: bool,
    ) -> Result<Graph> {
        let num_vertices = offsets.len().checked_sub(1).ok_or_else(|| {
            Error::invalid("offsets", "offsets must have |V| + 1 entries, got none")
        })?;
        let num_vertices = u32::try_from(num_vertices).map_err(|_| {
            Error::invalid("offsets", format!("{num_vertices} vertices exceed u32"))
        })?;
        check_offsets(Path::new("<memory>"), &offsets, targets.len() as u64)?;
        if let Some(w) = &weights {
            if w.len() != targets.len() {
                return Err(Error::invalid(
                    "weights",
                    format!("{} weights for {} edges", w.len(), targets.len()),
                ));
            }
        }
        check_targets(Path::new("<memory>"), &targets, 0, num_vertices)?;
        for v in 0..to_usize(u64::from(num_vertices)) {
            let range = to_usize(offsets[v])..to_usize(offsets[v + 1]);
            sort_adjacency(
                &mut targets[range.clone()],
                weights.as_mut().map(|w| &mut w[range]),
            );
        }
        let distinct = offsets.windows(2).all(|w| {
            targets[to_usize(w[0])..to_usize(w[1])]
                .windows(2)
                .all(|pair| pair[0] != pair[1])
        });
        let flags = weights.as_ref().map_or(0, |_| FLAG_WEIGHTED)
            | if undirected { FLAG_UNDIRECTED } else { 0 }
            | if distinct { FLAG_DISTINCT_TARGETS } else { 0 };
        Ok(Graph {
            num_vertices,
            flags,
            storage: Storage::Owned {
                offsets,
                targets,
                weights,
                ids: None,
            },
            id_index: None,
        })
    }

    /// Gives a graph built in memory an id map: `ids[v]` is the id vertex
    /// `v` had in the input, one per vertex, all distinct, in any order. A
    /// graph opened from a file keeps the map its file holds (this returns
    /// an error for one).
    pub fn with_original_ids(mut self, ids: Vec<u64>) -> Result<Graph> {
        let Storage::Owned { ids: slot, .. } = &mut self.storage else {
            return Err(Error::invalid(
                "ids",
                "a graph opened from a file keeps the id map of its file",
            ));
        };
        let index = crate::ids::checked_index(&ids, self.num_vertices)?;
        *slot = Some(ids);
        self.flags |= FLAG_ID_MAP;
        self.id_index = Some(index);
        Ok(self)
    }

    /// Builds a graph with `num_vertices` vertices from `(source, target,
    /// weight)` triples; weights are kept only if `weighted`.
    pub fn from_edges(
        num_vertices: u32,
        edges: &[(u32, u32, f32)],
        weighted: bool,
        undirected: bool,
    ) -> Result<Graph> {
        let mut offsets = vec![0u64; to_usize(u64::from(num_vertices)) + 1];
        for &(s, t, _) in edges {
            if s >= num_vertices || t >= num_vertices {
                return Err(Error::invalid(
                    "edges",
                    format!("edge {s} -> {t} names a vertex >= |V| = {num_vertices}"),
                ));
            }
            offsets[to_usize(u64::from(s)) + 1] += 1;
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; edges.len()];
        let mut weights = vec![0f32; if weighted { edges.len() } else { 0 }];
        for &(s, t, w) in edges {
            let slot = &mut fill[to_usize(u64::from(s))];
            targets[to_usize(*slot)] = t;
            if weighted {
                weights[to_usize(*slot)] = w;
            }
            *slot += 1;
        }
        Graph::from_parts(offsets, targets, weighted.then_some(weights), undirected)
    }

    /// Opens a `.qcsr` file by memory-mapping it, after validating its header
    /// and offsets. The file must not be truncated while the graph is open.
    pub fn open(path: impl AsRef<Path>) -> Result<Graph> {
        Graph::open_mapped(path.as_ref(), Residency::Kept)
    }

    /// Opens a `.qcsr` file as [`Graph::open`] does, checking all of it the
    /// same, but releases the pages it checked from this process (8 MiB
    /// windows of the page checksums and targets, then the offsets), so
    /// that they come back only as the process touches them. Not released:
    /// the id map, which opening indexes, and a version 1 file's weights
    /// and ids. For a process that reads only part of the graph, such as
    /// one node of a distributed job, whose memory then holds that part;
    /// one that reads all of it pays a minor fault per 64 KiB again.
    pub fn open_lazily(path: impl AsRef<Path>) -> Result<Graph> {
        Graph::open_mapped(path.as_ref(), Residency::Released)
    }

    fn open_mapped(path: &Path, residency: Residency) -> Result<Graph> {
        let file = File::open(path).map_err(|source| Error::Open {
            path: path.to_owned(),
            source,
        })?;
        let map = quiver_io::map_readonly(&file).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        Graph::from_file_bytes(path, FileBytes::Mapped(map), residency)
    }

    /// Reads a whole `.qcsr` file into an aligned buffer through quiver-io
    /// (io_uring with O_DIRECT by default), validating header and offsets.
    pub fn load(path: impl AsRef<Path>, options: &ReadOptions) -> Result<Graph> {
        let path = path.as_ref();
        let io_err = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        let file = ReadFile::open(path, options).map_err(io_err)?;
        let len = file.len();
        if len < HEADER_LEN {
            // Too short for a header page; read what is there to say why.
            let bytes = std::fs::read(path).map_err(|source| Error::Read {
                path: path.to_owned(),
                source,
            })?;
            return Err(Header::decode(path, &bytes, len).expect_err("a short file never decodes"));
        }
        let mut page = AlignedBuf::zeroed(to_usize(HEADER_LEN));
        file.read_at(0, &mut page).map_err(io_err)?;
        let header = Header::decode(path, &page, len)?;
        let mut buf = AlignedBuf::zeroed(to_usize(header.layout.file_len()));
        const CHUNK: usize = 8 << 20;
        let mut requests: Vec<ReadRequest<'_>> = buf
            .chunks_mut(CHUNK)
            .enumerate()
            .map(|(i, chunk)| ReadRequest {
                offset: (i * CHUNK) as u64,
                buf: chunk,
            })
            .collect();
        file.read_batch(&mut requests).map_err(io_err)?;
        drop(requests);
        Graph::from_file_bytes(path, FileBytes::Loaded(buf), Residency::Kept)
    }

    /// Checks every byte of `bytes` before any accessor can see it: the
    /// header, every page (version 2 on) or section (version 1) checksum,
    /// the offsets, that every target names a vertex, and that no two
    /// vertices share an original id. Under [`Residency::Released`] each
    /// window of a version 2 file's pages and targets leaves the process's
    /// memory once checked.
    fn from_file_bytes(path: &Path, bytes: FileBytes, residency: Residency) -> Result<Graph> {
        let data = bytes.as_slice();
        let release = |part: &[u8]| {
            if let (FileBytes::Mapped(map), Residency::Released) = (&bytes, residency) {
                quiver_io::release_mapped(map, part);
            }
        };
        let header = Header::decode(path, data, data.len() as u64)?;
        let layout = header.layout;
        let graph_data = &data[to_usize(layout.offsets.offset)..to_usize(layout.data_end())];
        let pages = if header.version >= 2 {
            let table = &data[to_usize(layout.pages.offset)..to_usize(layout.pages.padded_end())];
            let pages = PageChecksums::decode(path, &header, table)?;
            for (i, window) in graph_data.chunks(CHECK_WINDOW).enumerate() {
                pages.verify(layout.offsets.offset + (i * CHECK_WINDOW) as u64, window)?;
                release(window);
            }
            pages
        } else {
            verify_sections(path, &header, data)?;
            PageChecksums::compute(path, layout, graph_data)
        };
        let num_vertices = header.num_vertices;
        let offsets = section::<u64>(&bytes, layout.offsets);
        let targets = section::<u32>(&bytes, layout.targets);
        check_offsets(path, offsets, targets.len() as u64)?;
        release(bytemuck::cast_slice(offsets));
        for (i, window) in targets.chunks(CHECK_WINDOW / 4).enumerate() {
            check_targets(path, window, (i * CHECK_WINDOW / 4) as u64, num_vertices)?;
            release(bytemuck::cast_slice(window));
        }
        let mut graph = Graph {
            num_vertices,
            flags: header.flags,
            storage: Storage::File {
                path: path.to_owned(),
                header,
                bytes,
                pages,
            },
            id_index: None,
        };
        if let Some(ids) = graph.original_ids() {
            let index = IdIndex::build(ids).map_err(|shared| Error::Corrupt {
                path: path.to_owned(),
                detail: format!("the id map is not one to one: {shared}"),
            })?;
            graph.id_index = Some(index);
        }
        Ok(graph)
    }

    /// The checksum of every page of the file's graph data, for engines
    /// that read the file again block by block or vertex by vertex; `None`
    /// for a graph built in memory.
    pub fn page_checksums(&self) -> Option<&PageChecksums> {
        match &self.storage {
            Storage::File { pages, .. } => Some(pages),
            Storage::Owned { .. } => None,
        }
    }

    /// Checks what opening does not: that every list is sorted, that a list
    /// holds no target twice when the header says so, and that every weight
    /// is finite. (Opening a file already checked every checksum, offset
    /// and target.)
    pub fn verify(&self) -> Result<()> {
        let path = self.path().unwrap_or(Path::new("<memory>"));
        // One pass over the lists for both checks.
        let distinct = self.has_distinct_targets();
        let bad = self.first_list_where(0..self.num_vertices, |a, b| a > b || (distinct && a == b));
        if let Some(v) = bad {
            let detail = if self.first_unsorted_list(v..v + 1).is_some() {
                format!("vertex {v}'s list is not sorted by target")
            } else {
                format!("the header says no list holds a target twice, but vertex {v}'s does")
            };
            return Err(Error::Corrupt {
                path: path.to_owned(),
                detail,
            });
        }
        if let Some(weights) = self.weights() {
            if let Some(i) = weights.iter().position(|w| !w.is_finite()) {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    detail: format!("weight of edge {i} is {}", weights[i]),
                });
            }
        }
        Ok(())
    }

    /// Takes the offsets, targets and weights of `vertices` out of this
    /// process's resident memory when the graph maps its file: they stay in
    /// the page cache and map back, unchanged, when read again. For a
    /// process that read lists it will not read again (a bsp node, after
    /// computing its partition from every offset or transposing the
    /// graph). A graph loaded or built in memory is left as it is. Pages
    /// that `vertices` shares with other vertices' entries are released
    /// too; they too map back when read.
    ///
    /// # Panics
    /// If `vertices` does not lie within `0..|V|`.
    pub fn release_lists(&self, vertices: Range<u32>) {
        let Some(map) = self.mapped() else {
            return;
        };
        if vertices.is_empty() {
            return;
        }
        let offsets = &self.offsets()[vertices.start as usize..=vertices.end as usize];
        quiver_io::release_mapped(map, bytemuck::cast_slice(offsets));
        self.release_targets(vertices);
    }

    /// As [`Graph::release_lists`], the targets and weights of `vertices`
    /// only: for a process that still reads their offsets (degrees) but
    /// not their lists.
    ///
    /// # Panics
    /// If `vertices` does not lie within `0..|V|`.
    pub fn release_targets(&self, vertices: Range<u32>) {
        let Some(map) = self.mapped() else {
            return;
        };
        if vertices.is_empty() {
            return;
        }
        let offsets = self.offsets();
        let edges =
            to_usize(offsets[vertices.start as usize])..to_usize(offsets[vertices.end as usize]);
        quiver_io::release_mapped(map, bytemuck::cast_slice(&self.targets()[edges.clone()]));
        if let Some(weights) = self.weights() {
            quiver_io::release_mapped(map, bytemuck::cast_slice(&weights[edges]));
        }
    }

    /// The file mapping this graph's arrays lie in, if it maps its file.
    fn mapped(&self) -> Option<&Mmap> {
        match &self.storage {
            Storage::File {
                bytes: FileBytes::Mapped(map),
                ..
            } => Some(map),
            _ => None,
        }
    }

    /// The first vertex of `vertices` whose list is not in ascending order
    /// of target, if any: [`Graph::verify`]'s check, for a reader that
    /// relies on the order of only some lists.
    pub fn first_unsorted_list(&self, vertices: Range<u32>) -> Option<u32> {
        self.first_list_where(vertices, |a, b| a > b)
    }

    /// The first vertex of `vertices` with two neighbouring targets `a, b`
    /// in its list for which `bad(a, b)`.
    fn first_list_where(
        &self,
        vertices: Range<u32>,
        bad: impl Fn(u32, u32) -> bool,
    ) -> Option<u32> {
        let (offsets, targets) = (self.offsets(), self.targets());
        vertices.into_iter().find(|&v| {
            let v = v as usize;
            targets[to_usize(offsets[v])..to_usize(offsets[v + 1])]
                .windows(2)
                .any(|pair| bad(pair[0], pair[1]))
        })
    }

    /// |V|.
    pub fn num_vertices(&self) -> u32 {
        self.num_vertices
    }

    /// |E| (directed edges; an undirected graph stores both directions).
    pub fn num_edges(&self) -> u64 {
        self.targets().len() as u64
    }

    /// Whether edges carry `f32` weights.
    pub fn is_weighted(&self) -> bool {
        self.flags & FLAG_WEIGHTED != 0
    }

    /// Whether the graph was symmetrised (every edge has its reverse).
    pub fn is_undirected(&self) -> bool {
        self.flags & FLAG_UNDIRECTED != 0
    }

    /// Whether no adjacency list holds a target twice, as the header says
    /// (files from before the flag say no).
    pub fn has_distinct_targets(&self) -> bool {
        self.flags & FLAG_DISTINCT_TARGETS != 0
    }

    /// Whether every edge has its reverse (of the same weight, as often):
    /// true of an undirected graph, and found for a directed one in one
    /// pass over its edges ([`crate::Symmetry`]).
    pub fn is_symmetric(&self) -> bool {
        if self.is_undirected() {
            return true;
        }
        let mut sums = crate::Symmetry::default();
        for v in 0..self.num_vertices() {
            let targets = self.neighbors(v);
            match self.edge_weights(v) {
                Some(weights) => {
                    for (&t, w) in targets.iter().zip(weights) {
                        sums.add(v, t, w.to_bits());
                    }
                }
                None => {
                    for &t in targets {
                        sums.add(v, t, 0);
                    }
                }
            }
        }
        sums.is_symmetric()
    }

    /// The file the graph was opened from, if any.
    pub fn path(&self) -> Option<&Path> {
        match &self.storage {
            Storage::Owned { .. } => None,
            Storage::File { path, .. } => Some(path),
        }
    }

    /// The on-disk layout of this graph (where a file of it puts each section).
    pub fn layout(&self) -> Layout {
        Layout::new(self.num_vertices, self.num_edges(), self.flags)
    }

    /// `offsets[v]..offsets[v + 1]` indexes `v`'s out-edges in [`Graph::targets`].
    pub fn offsets(&self) -> &[u64] {
        match &self.storage {
            Storage::Owned { offsets, .. } => offsets,
            Storage::File { header, bytes, .. } => section(bytes, header.layout.offsets),
        }
    }

    /// Edge targets, grouped by source.
    pub fn targets(&self) -> &[u32] {
        match &self.storage {
            Storage::Owned { targets, .. } => targets,
            Storage::File { header, bytes, .. } => section(bytes, header.layout.targets),
        }
    }

    /// Edge weights, parallel to [`Graph::targets`].
    pub fn weights(&self) -> Option<&[f32]> {
        match &self.storage {
            Storage::Owned { weights, .. } => weights.as_deref(),
            Storage::File { header, bytes, .. } => self
                .is_weighted()
                .then(|| section(bytes, header.layout.weights)),
        }
    }

    /// The id map: `original_ids()[v]` is the id vertex `v` had in the
    /// input; `None` when the graph has none (its ids are its own).
    pub fn original_ids(&self) -> Option<&[u64]> {
        match &self.storage {
            Storage::Owned { ids, .. } => ids.as_deref(),
            Storage::File { header, bytes, .. } => header
                .has_id_map()
                .then(|| section(bytes, header.layout.ids)),
        }
    }

    /// The id vertex `v` had in the input: `v` itself without an id map.
    /// Panics if `v >= |V|`.
    pub fn original_id(&self, v: u32) -> u64 {
        assert!(
            v < self.num_vertices,
            "vertex {v} out of range (|V| = {})",
            self.num_vertices
        );
        self.original_ids()
            .map_or(u64::from(v), |ids| ids[to_usize(u64::from(v))])
    }

    /// The vertex whose id in the input was `original`, if any: a binary
    /// search of the id map (or of its index); without an id map,
    /// `original` itself if it is below |V|.
    pub fn dense_id(&self, original: u64) -> Option<u32> {
        match (self.original_ids(), &self.id_index) {
            (Some(ids), Some(index)) => index.find(ids, original),
            _ => u32::try_from(original)
                .ok()
                .filter(|&v| v < self.num_vertices),
        }
    }

    /// Bytes of memory the index behind [`Graph::dense_id`] takes on top of
    /// the graph (0 without an id map, or with one in increasing order).
    pub fn id_index_bytes(&self) -> u64 {
        self.id_index.as_ref().map_or(0, IdIndex::memory_bytes)
    }

    /// Out-neighbours of `v`, sorted. Panics if `v >= |V|`.
    pub fn neighbors(&self, v: u32) -> &[u32] {
        &self.targets()[self.edge_range(v)]
    }

    /// Weights of `v`'s out-edges, parallel to [`Graph::neighbors`].
    pub fn edge_weights(&self, v: u32) -> Option<&[f32]> {
        let range = self.edge_range(v);
        self.weights().map(|w| &w[range])
    }

    /// Out-degree of `v`. Panics if `v >= |V|`.
    pub fn degree(&self, v: u32) -> u64 {
        let offsets = self.offsets();
        let v = to_usize(u64::from(v));
        offsets[v + 1] - offsets[v]
    }

    fn edge_range(&self, v: u32) -> std::ops::Range<usize> {
        let offsets = self.offsets();
        let v = to_usize(u64::from(v));
        to_usize(offsets[v])..to_usize(offsets[v + 1])
    }

    /// Summary of the out-degree distribution (all zeros for an empty graph).
    pub fn degree_summary(&self) -> DegreeSummary {
        let mut degrees: Vec<u64> = self.offsets().windows(2).map(|w| w[1] - w[0]).collect();
        if degrees.is_empty() {
            return DegreeSummary {
                min: 0,
                max: 0,
                mean: 0.0,
                median: 0,
                p99: 0,
                zero_out_degree: 0,
            };
        }
        degrees.sort_unstable();
        let n = degrees.len();
        DegreeSummary {
            min: degrees[0],
            max: degrees[n - 1],
            mean: self.num_edges() as f64 / n as f64,
            median: degrees[n / 2],
            p99: degrees[(n * 99 / 100).min(n - 1)],
            zero_out_degree: degrees.iter().take_while(|&&d| d == 0).count() as u64,
        }
    }

    /// The out-degree sequence, vertex by vertex.
    pub fn degrees(&self) -> impl Iterator<Item = u64> + '_ {
        self.offsets().windows(2).map(|w| w[1] - w[0])
    }
}

/// Views a validated section of the file as a typed slice. The header check
/// guarantees the section is in bounds and 4 KiB aligned, and the buffer
/// (a page-aligned map or an `AlignedBuf`) starts 4 KiB aligned, so the cast
/// cannot fail.
fn section<T: bytemuck::Pod>(bytes: &FileBytes, section: crate::format::Section) -> &[T] {
    let data = bytes.as_slice();
    bytemuck::cast_slice(&data[to_usize(section.offset)..to_usize(section.offset + section.len)])
}

/// Checks each section of a version 1 file against its checksum.
fn verify_sections(path: &Path, header: &Header, data: &[u8]) -> Result<()> {
    let layout = header.layout;
    for (i, section) in [layout.offsets, layout.targets, layout.weights]
        .iter()
        .enumerate()
    {
        let extent = &data[to_usize(section.offset)..to_usize(section.padded_end())];
        let computed = crc32c::crc32c(extent);
        if computed != header.checksums[i] {
            return Err(Error::Checksum {
                path: path.to_owned(),
                section: section_name(i),
                stored: header.checksums[i],
                computed,
            });
        }
    }
    Ok(())
}

pub(crate) fn check_offsets(path: &Path, offsets: &[u64], num_edges: u64) -> Result<()> {
    let corrupt = |detail: String| Error::Corrupt {
        path: path.to_owned(),
        detail,
    };
    if offsets[0] != 0 {
        return Err(corrupt(format!(
            "offsets start at {} instead of 0",
            offsets[0]
        )));
    }
    if let Some(v) = offsets.windows(2).position(|w| w[0] > w[1]) {
        return Err(corrupt(format!(
            "offsets decrease at vertex {v} ({} then {})",
            offsets[v],
            offsets[v + 1]
        )));
    }
    let last = offsets[offsets.len() - 1];
    if last != num_edges {
        return Err(corrupt(format!(
            "offsets end at {last} but |E| is {num_edges}"
        )));
    }
    Ok(())
}

/// Checks that `targets`, edges `first_edge..` of a graph of `num_vertices`
/// vertices, are its vertices.
pub(crate) fn check_targets(
    path: &Path,
    targets: &[u32],
    first_edge: u64,
    num_vertices: u32,
) -> Result<()> {
    match first_target_outside(targets, num_vertices) {
        Some(i) => Err(Error::Corrupt {
            path: path.to_owned(),
            detail: format!(
                "edge {} targets vertex {} but |V| is {num_vertices}",
                first_edge + i as u64,
                targets[i]
            ),
        }),
        None => Ok(()),
    }
}

/// The index of the first of `targets` that is not below `num_vertices`.
/// Runs of targets are checked by their maximum, which the compiler
/// vectorises (a search that stops at the first hit does not), on every
/// core (a block's load otherwise leaves the other threads idle while one
/// checks), and only a run holding a bad target is searched.
fn first_target_outside(targets: &[u32], num_vertices: u32) -> Option<usize> {
    use rayon::prelude::*;
    const RUN: usize = 256;
    let run = targets
        .par_chunks(RUN)
        .with_min_len(64)
        .position_first(|run| run.iter().fold(0, |max, &t| max.max(t)) >= num_vertices)?;
    let at = run * RUN;
    targets[at..]
        .iter()
        .position(|&t| t >= num_vertices)
        .map(|i| at + i)
}

/// Sorts one adjacency list by (target, weight bits), keeping weights paired.
fn sort_adjacency(targets: &mut [u32], weights: Option<&mut [f32]>) {
    match weights {
        None => targets.sort_unstable(),
        Some(weights) => {
            let mut pairs: Vec<(u32, u32)> = targets
                .iter()
                .zip(weights.iter())
                .map(|(&t, w)| (t, w.to_bits()))
                .collect();
            pairs.sort_unstable();
            for (i, (t, w)) in pairs.into_iter().enumerate() {
                targets[i] = t;
                weights[i] = f32::from_bits(w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::first_target_outside;

    proptest! {
        /// Checking runs by their maximum finds the first bad target a
        /// plain search finds, wherever it falls among the runs.
        #[test]
        fn the_first_bad_target_is_found_as_a_plain_search_finds_it(
            // Up to 390 runs: enough for the check to split across threads.
            len in 0u32..100_000,
            bad in prop::collection::vec((any::<prop::sample::Index>(), 100u32..=u32::MAX), 0..4),
            seed in any::<u32>(),
        ) {
            let num_vertices = 100;
            let mut targets: Vec<u32> = (0..len)
                .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed) % num_vertices)
                .collect();
            if !targets.is_empty() {
                for (at, value) in bad {
                    let at = at.index(targets.len());
                    targets[at] = value;
                }
            }
            let plain = targets.iter().position(|&t| t >= num_vertices);
            prop_assert_eq!(first_target_outside(&targets, num_vertices), plain);
        }
    }
}
