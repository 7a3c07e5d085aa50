//! External sort of an edge stream into a `.qcsr` file within a memory budget.
//!
//! Each edge becomes one integer sort key: `source << 32 | target` (a `u64`)
//! for an unweighted graph, with the weight's bits appended (a `u128`) for a
//! weighted one, so sorting keys sorts edges by (source, target, weight
//! bits). Keys are buffered up to the budget, sorted and spilled as runs;
//! the runs are merged (in several passes if there are more than the budget
//! can read at once) straight into a [`CsrWriter`]. With no spilled run the
//! merge is skipped, so a small input is converted in memory by the same
//! code. Relabelling maps ids to dense `u32` ids in order of first
//! appearance before they are packed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rdst::RadixSort;
use serde::Serialize;
use tempfile::TempDir;

use crate::write::CsrWriter;
use crate::{to_usize, Error, Progress, Result, Unit};

/// The largest vertex id a `.qcsr` file can hold (|V| must fit `u32`).
pub const MAX_VERTEX_ID: u64 = u32::MAX as u64 - 1;
/// The smallest memory budget accepted.
pub const MIN_MEM_BUDGET: u64 = 1 << 20;
// The fixed overhead leaves the smallest budget room for keys.
const _: () = assert!(MIN_MEM_BUDGET > (SPILL_BUF + crate::parse::READ_AHEAD_BYTES) as u64);

const SPILL_BUF: usize = 256 << 10;
const MERGE_BUF: usize = 64 << 10;

/// How an edge stream becomes a graph.
#[derive(Clone, Debug)]
pub struct SortOptions {
    /// Bytes of memory for buffered edges, spill and merge buffers. The
    /// writer's `8 * (|V| + 1)` bytes of offsets, the id map when
    /// relabelling, and original ids given to the sorter, come on top.
    pub mem_budget: u64,
    /// Where spilled runs go (a fresh temporary directory inside it, removed
    /// on success and on error); `None` uses the system temporary directory.
    pub work_dir: Option<PathBuf>,
    /// Add the reverse of every edge.
    pub undirected: bool,
    /// Keep the graph directed even if every edge has its reverse (by
    /// default such a graph is stored undirected, [`SortStats::symmetric`]).
    pub keep_directed: bool,
    /// Keep one copy of each `(source, target)` pair: the first in
    /// weight-bit order, which is the smallest weight for non-negative weights.
    pub dedupe: bool,
    /// Drop edges `v -> v`.
    pub drop_self_loops: bool,
    /// Map ids (any `u64`) onto `0..|V|` in order of first appearance. The
    /// map takes about 32 bytes per distinct id beyond the budget.
    pub relabel: bool,
    /// Make the graph durable before it takes its name (fsync the file
    /// and its directory). Off for a scratch graph removed when its owner
    /// is done with it: the fsync can cost as much as the sort.
    pub sync: bool,
}

impl SortOptions {
    /// Bytes of sort runs that sorting `edges` edges (each twice when
    /// `undirected`) spills within this budget, known before the first edge
    /// arrives: none when every key fits in memory, else every key once (a
    /// merge in several passes writes more).
    pub fn spill_bytes(&self, edges: u64, weighted: bool) -> u64 {
        let keys = if self.undirected {
            edges.saturating_mul(2)
        } else {
            edges
        };
        let key_bytes: u64 = if weighted { 16 } else { 8 };
        let room = self
            .mem_budget
            .saturating_sub((SPILL_BUF + crate::parse::READ_AHEAD_BYTES) as u64);
        if keys <= room / key_bytes {
            0
        } else {
            keys.saturating_mul(key_bytes)
        }
    }
}

impl Default for SortOptions {
    fn default() -> Self {
        SortOptions {
            mem_budget: 1 << 30,
            work_dir: None,
            undirected: false,
            keep_directed: false,
            dedupe: false,
            drop_self_loops: false,
            relabel: false,
            sync: true,
        }
    }
}

/// What a conversion did, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SortStats {
    /// Edges offered to the sorter (before symmetrising).
    pub edges_in: u64,
    /// Self-loops dropped.
    pub self_loops_dropped: u64,
    /// Duplicate edges dropped.
    pub duplicates_dropped: u64,
    /// Edges in the output.
    pub edges_out: u64,
    /// Every edge had its reverse (of the same weight) without being
    /// asked to add them: the graph was stored undirected.
    pub symmetric: bool,
    /// Vertices in the output.
    pub vertices: u32,
    /// Sorted runs spilled to disk (0: converted in memory).
    pub runs_spilled: u64,
    /// Bytes written to spill files.
    pub spill_bytes: u64,
    /// Merge passes over the data (0 without spilling).
    pub merge_passes: u64,
}

/// An edge packed into an integer whose order is the edge order.
trait Key: Copy + Ord + Send + Sync + std::fmt::Debug + rdst::RadixKey {
    const BYTES: usize;
    /// Whether the key carries a weight.
    const WEIGHTED: bool;
    fn pack(src: u32, dst: u32, weight_bits: u32) -> Self;
    fn src(self) -> u32;
    fn dst(self) -> u32;
    fn weight(self) -> f32;
    fn write_le(self, out: &mut impl Write) -> io::Result<()>;
    fn read_le(bytes: &[u8]) -> Self;

    fn pair(self) -> (u32, u32) {
        (self.src(), self.dst())
    }
}

#[allow(clippy::cast_possible_truncation)] // Extracting packed u32 fields.
impl Key for u64 {
    const BYTES: usize = 8;
    const WEIGHTED: bool = false;
    fn pack(src: u32, dst: u32, _weight_bits: u32) -> Self {
        u64::from(src) << 32 | u64::from(dst)
    }
    fn src(self) -> u32 {
        (self >> 32) as u32
    }
    fn dst(self) -> u32 {
        self as u32
    }
    fn weight(self) -> f32 {
        1.0
    }
    fn write_le(self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.to_le_bytes())
    }
    fn read_le(bytes: &[u8]) -> Self {
        u64::from_le_bytes(bytes.try_into().expect("a run record is 8 bytes"))
    }
}

#[allow(clippy::cast_possible_truncation)] // Extracting packed u32 fields.
impl Key for u128 {
    const BYTES: usize = 12;
    const WEIGHTED: bool = true;
    fn pack(src: u32, dst: u32, weight_bits: u32) -> Self {
        u128::from(src) << 64 | u128::from(dst) << 32 | u128::from(weight_bits)
    }
    fn src(self) -> u32 {
        (self >> 64) as u32
    }
    fn dst(self) -> u32 {
        (self >> 32) as u32
    }
    fn weight(self) -> f32 {
        f32::from_bits(self as u32)
    }
    fn write_le(self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.to_le_bytes()[..12])
    }
    fn read_le(bytes: &[u8]) -> Self {
        let mut full = [0u8; 16];
        full[..12].copy_from_slice(bytes);
        u128::from_le_bytes(full)
    }
}

/// A sorted run on disk.
#[derive(Debug)]
struct Run {
    path: PathBuf,
    records: u64,
}

/// Buffered keys and the runs spilled so far, for one key type.
#[derive(Debug)]
struct Runs<K> {
    buffer: Vec<K>,
    capacity: usize,
    spilled: Vec<Run>,
}

#[derive(Debug)]
enum Keys {
    /// No edge yet: the key type is chosen by the first edge's weight.
    Empty,
    Plain(Runs<u64>),
    Weighted(Runs<u128>),
}

/// Where runs are spilled, and the counters every phase updates.
#[derive(Debug)]
struct Spill {
    options: SortOptions,
    dir: Option<TempDir>,
    next_run: u64,
    stats: SortStats,
}

/// Collects edges and writes them, sorted, as a `.qcsr` file.
#[derive(Debug)]
pub struct EdgeSorter {
    spill: Spill,
    keys: Keys,
    /// First-appearance ids, when relabelling.
    ids: Option<HashMap<u64, u32>>,
    max_id: Option<u32>,
    /// The id map to write with the graph, which then has one vertex per id.
    original_ids: Option<Vec<u64>>,
}

impl EdgeSorter {
    /// A sorter with the given options; fails if the budget is below
    /// [`MIN_MEM_BUDGET`].
    pub fn new(options: SortOptions) -> Result<EdgeSorter> {
        if options.mem_budget < MIN_MEM_BUDGET {
            return Err(Error::invalid(
                "mem_budget",
                format!(
                    "memory budget of {} bytes is below the minimum of {MIN_MEM_BUDGET} (1 MiB)",
                    options.mem_budget
                ),
            ));
        }
        Ok(EdgeSorter {
            ids: options.relabel.then(HashMap::new),
            spill: Spill {
                options,
                dir: None,
                next_run: 0,
                stats: SortStats::default(),
            },
            keys: Keys::Empty,
            max_id: None,
            original_ids: None,
        })
    }

    /// Gives the graph an id map (see [`CsrWriter::with_original_ids`]):
    /// `ids[v]` is the original id of vertex `v`, and the graph has exactly
    /// one vertex per id. Edges must use the dense ids, so relabelling
    /// cannot be on.
    pub fn set_original_ids(&mut self, ids: Vec<u64>) -> Result<()> {
        if self.ids.is_some() {
            return Err(Error::invalid(
                "relabel",
                "relabelling numbers vertices by first appearance, original ids by a given map",
            ));
        }
        self.original_ids = Some(ids);
        Ok(())
    }

    /// Adds the edge `src -> dst`, weighted or not; every edge of one
    /// stream must agree on that. Ids above [`MAX_VERTEX_ID`] must have been
    /// rejected by the caller unless relabelling (the caller knows the input
    /// line to blame).
    pub fn push(&mut self, src: u64, dst: u64, weight: Option<f32>) -> Result<()> {
        self.spill.stats.edges_in += 1;
        if src == dst && self.spill.options.drop_self_loops {
            self.spill.stats.self_loops_dropped += 1;
            return Ok(());
        }
        let (s, d) = match &mut self.ids {
            Some(ids) => (dense_id(ids, src)?, dense_id(ids, dst)?),
            None => (narrow(src), narrow(dst)),
        };
        self.max_id = Some(self.max_id.unwrap_or(0).max(s).max(d));
        let weight_bits = weight.map_or(0, f32::to_bits);
        if let Keys::Empty = self.keys {
            let budget = to_usize(self.spill.options.mem_budget);
            // The spill writer's buffer and the input reader's are the fixed
            // overhead; the rest of the budget holds keys.
            let key_bytes = budget - SPILL_BUF - crate::parse::READ_AHEAD_BYTES;
            self.keys = match weight {
                None => Keys::Plain(Runs::new(key_bytes)),
                Some(_) => Keys::Weighted(Runs::new(key_bytes)),
            };
        }
        let undirected = self.spill.options.undirected && s != d;
        match &mut self.keys {
            Keys::Plain(runs) if weight.is_none() => {
                runs.add(s, d, weight_bits, undirected, &mut self.spill)
            }
            Keys::Weighted(runs) if weight.is_some() => {
                runs.add(s, d, weight_bits, undirected, &mut self.spill)
            }
            _ => Err(Error::invalid(
                "edges",
                "an edge stream mixes weighted and unweighted edges",
            )),
        }
    }

    /// Merges everything and writes the graph to `output`, with at least
    /// `min_vertices` vertices when not relabelling (a Matrix Market file
    /// states its dimension; an edge list cannot name isolated vertices at
    /// the top of the id range).
    pub fn finish(
        mut self,
        output: &Path,
        min_vertices: u64,
        progress: &dyn Progress,
    ) -> Result<SortStats> {
        let used = self.max_id.map_or(0, |m| u64::from(m) + 1);
        let count = match (&self.ids, &self.original_ids) {
            (Some(ids), _) => ids.len() as u64,
            (None, Some(original)) => {
                let listed = original.len() as u64;
                if used.max(min_vertices) > listed {
                    return Err(Error::invalid(
                        "original_ids",
                        format!(
                            "{listed} original ids for a graph of {} vertices",
                            used.max(min_vertices)
                        ),
                    ));
                }
                listed
            }
            (None, None) => used.max(min_vertices),
        };
        let num_vertices = u32::try_from(count)
            .ok()
            .filter(|&n| u64::from(n) <= MAX_VERTEX_ID + 1)
            .ok_or_else(|| {
                Error::invalid(
                    "num_vertices",
                    format!("{count} vertices exceed the u32 id space of .qcsr"),
                )
            })?;
        let undirected = self.spill.options.undirected;
        let detect = !undirected && !self.spill.options.keep_directed;
        let original_ids = self.original_ids.take();
        let sync = self.spill.options.sync;
        let writer = |weighted| {
            let mut writer = CsrWriter::create(output, num_vertices, weighted, undirected)?;
            if !sync {
                writer = writer.without_sync();
            }
            if detect {
                writer = writer.detecting_symmetry();
            }
            match original_ids {
                Some(ids) => writer.with_original_ids(ids),
                None => Ok(writer),
            }
        };
        match std::mem::replace(&mut self.keys, Keys::Empty) {
            Keys::Empty => {
                writer(false)?.finish()?;
            }
            Keys::Plain(runs) => runs.finish(writer(false)?, &mut self.spill, progress)?,
            Keys::Weighted(runs) => runs.finish(writer(true)?, &mut self.spill, progress)?,
        }
        self.spill.stats.vertices = num_vertices;
        Ok(self.spill.stats)
    }
}

impl<K: Key> Runs<K> {
    fn new(bytes: usize) -> Runs<K> {
        Runs {
            buffer: Vec::new(),
            capacity: (bytes / std::mem::size_of::<K>()).max(1),
            spilled: Vec::new(),
        }
    }

    fn add(
        &mut self,
        s: u32,
        d: u32,
        weight_bits: u32,
        reverse: bool,
        spill: &mut Spill,
    ) -> Result<()> {
        self.insert(K::pack(s, d, weight_bits), spill)?;
        if reverse {
            self.insert(K::pack(d, s, weight_bits), spill)?;
        }
        Ok(())
    }

    fn insert(&mut self, key: K, spill: &mut Spill) -> Result<()> {
        if self.buffer.capacity() == 0 {
            self.reserve();
        }
        self.buffer.push(key);
        if self.buffer.len() >= self.capacity {
            self.spill(spill)?;
        }
        Ok(())
    }

    /// Reserves the whole share of the budget once: growing by doubling
    /// would briefly hold old and new buffers, half again the budget.
    #[cold]
    fn reserve(&mut self) {
        self.buffer.reserve_exact(self.capacity);
        // The radix sort reaches all over the buffer: huge pages spare it
        // most TLB misses and, once the buffer is freed, serve the next
        // large allocations (a loaded graph, say) without being faulted in
        // afresh.
        quiver_io::advise_huge_pages(self.buffer.spare_capacity_mut());
    }

    /// Sorts the buffer. Duplicates are dropped as the sorted keys stream
    /// out ([`Dedup`]), to a run or to the graph, as a merge drops them.
    fn sort_buffer(&mut self) {
        // An in-place radix sort on all threads: 2-2.5x faster than
        // `sort_unstable` on a Kronecker graph's 7.6M keys, with no buffer
        // beside the keys (the low-memory tuner), so the budget holds.
        self.buffer.radix_sort_builder().with_low_mem_tuner().sort();
    }

    fn spill(&mut self, spill: &mut Spill) -> Result<()> {
        self.sort_buffer();
        let mut dropped = 0;
        let keys = Dedup::new(
            self.buffer.drain(..).map(Ok),
            spill.options.dedupe,
            &mut dropped,
        );
        let run = spill.write_run(keys)?;
        spill.stats.duplicates_dropped += dropped;
        tracing::debug!(run = %run.path.display(), edges = run.records, "spilled a sorted run");
        self.spilled.push(run);
        spill.stats.runs_spilled += 1;
        Ok(())
    }

    fn finish(
        mut self,
        writer: CsrWriter,
        spill: &mut Spill,
        progress: &dyn Progress,
    ) -> Result<()> {
        if self.spilled.is_empty() {
            self.sort_buffer();
            progress.start("writing", Unit::Edges, Some(self.buffer.len() as u64));
            let keys = std::mem::take(&mut self.buffer);
            return write_keys(keys.into_iter().map(Ok), writer, spill, progress);
        }
        if !self.buffer.is_empty() {
            self.spill(spill)?;
        }
        self.buffer = Vec::new();
        let fan_in = (to_usize(spill.options.mem_budget) / 2 / MERGE_BUF).clamp(2, 256);
        while self.spilled.len() > fan_in {
            let group: Vec<Run> = self.spilled.drain(..fan_in).collect();
            progress.start(
                "merging runs",
                Unit::Edges,
                Some(group.iter().map(|r| r.records).sum()),
            );
            let mut dropped = 0;
            let merged = Dedup::new(merge::<K>(&group)?, spill.options.dedupe, &mut dropped);
            let run = spill.write_run(merged)?;
            spill.stats.duplicates_dropped += dropped;
            for old in group {
                // Best effort: the work directory goes away at the end anyway.
                let _ = std::fs::remove_file(&old.path);
            }
            tracing::debug!(runs = fan_in, edges = run.records, "merged runs into one");
            self.spilled.push(run);
            spill.stats.merge_passes += 1;
        }
        progress.start(
            "merging into the graph",
            Unit::Edges,
            Some(self.spilled.iter().map(|r| r.records).sum()),
        );
        spill.stats.merge_passes += 1;
        tracing::info!(
            runs = self.spilled.len(),
            "merging sorted runs into the graph"
        );
        write_keys(merge::<K>(&self.spilled)?, writer, spill, progress)
    }
}

impl Spill {
    fn dir(&mut self) -> Result<&Path> {
        if self.dir.is_none() {
            let parent = self
                .options
                .work_dir
                .clone()
                .unwrap_or_else(std::env::temp_dir);
            let dir = tempfile::Builder::new()
                .prefix("quiver-sort-")
                .tempdir_in(&parent)
                .map_err(|source| Error::Write {
                    path: parent,
                    source,
                })?;
            self.dir = Some(dir);
        }
        Ok(self.dir.as_ref().expect("work dir was just created").path())
    }

    fn write_run<K: Key>(&mut self, keys: impl Iterator<Item = Result<K>>) -> Result<Run> {
        self.next_run += 1;
        let name = format!("run-{}", self.next_run);
        let path = self.dir()?.join(name);
        let write_err = |source| Error::Write {
            path: path.clone(),
            source,
        };
        let mut out = BufWriter::with_capacity(SPILL_BUF, File::create(&path).map_err(write_err)?);
        let mut records = 0u64;
        for key in keys {
            key?.write_le(&mut out).map_err(write_err)?;
            records += 1;
        }
        out.flush().map_err(write_err)?;
        self.stats.spill_bytes += records * K::BYTES as u64;
        Ok(Run { path, records })
    }
}

/// Edges [`write_keys`] hands the writer at once: a hub's list goes in
/// pieces, so that its copy stays small beside the budget's keys.
const RUN_PIECE: usize = 1 << 16;

/// Writes a stream of sorted keys, dropping duplicates if asked, a
/// source's edges (in pieces of at most [`RUN_PIECE`]) at a time.
fn write_keys<K: Key>(
    keys: impl Iterator<Item = Result<K>>,
    mut writer: CsrWriter,
    spill: &mut Spill,
    progress: &dyn Progress,
) -> Result<()> {
    let mut dropped = 0;
    let mut source = 0;
    let mut targets = Vec::new();
    let mut weights = Vec::new();
    let mut unreported = 0;
    for key in Dedup::new(keys, spill.options.dedupe, &mut dropped) {
        let key = key?;
        if key.src() != source || targets.len() == RUN_PIECE {
            writer.push_run(source, &targets, &weights)?;
            unreported += targets.len() as u64;
            targets.clear();
            weights.clear();
            source = key.src();
            if unreported >= 1 << 20 {
                progress.advance(unreported);
                progress.check()?;
                unreported = 0;
            }
        }
        targets.push(key.dst());
        if K::WEIGHTED {
            weights.push(key.weight());
        }
    }
    writer.push_run(source, &targets, &weights)?;
    progress.advance(unreported + targets.len() as u64);
    spill.stats.duplicates_dropped += dropped;
    spill.stats.edges_out = writer.num_edges();
    let header = writer.finish()?;
    spill.stats.symmetric = header.undirected() && !spill.options.undirected;
    Ok(())
}

/// Drops keys whose `(src, dst)` repeats the previous one, when enabled,
/// counting them.
struct Dedup<'a, I> {
    inner: I,
    enabled: bool,
    last: Option<(u32, u32)>,
    dropped: &'a mut u64,
}

impl<'a, I> Dedup<'a, I> {
    fn new(inner: I, enabled: bool, dropped: &'a mut u64) -> Self {
        Dedup {
            inner,
            enabled,
            last: None,
            dropped,
        }
    }
}

impl<K: Key, I: Iterator<Item = Result<K>>> Iterator for Dedup<'_, I> {
    type Item = Result<K>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let key = match self.inner.next()? {
                Ok(k) => k,
                Err(e) => return Some(Err(e)),
            };
            if self.enabled && self.last == Some(key.pair()) {
                *self.dropped += 1;
                continue;
            }
            self.last = Some(key.pair());
            return Some(Ok(key));
        }
    }
}

/// A k-way merge of sorted runs.
fn merge<K: Key>(runs: &[Run]) -> Result<impl Iterator<Item = Result<K>>> {
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (i, run) in runs.iter().enumerate() {
        let file = File::open(&run.path).map_err(|source| Error::Read {
            path: run.path.clone(),
            source,
        })?;
        let mut reader = RunReader {
            path: run.path.clone(),
            inner: BufReader::with_capacity(MERGE_BUF, file),
            left: run.records,
        };
        if let Some(first) = reader.next_key::<K>()? {
            heap.push(Reverse((first, i)));
        }
        readers.push(reader);
    }
    Ok(std::iter::from_fn(move || {
        let Reverse((key, i)) = heap.pop()?;
        match readers[i].next_key() {
            Ok(Some(next)) => heap.push(Reverse((next, i))),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        Some(Ok(key))
    }))
}

struct RunReader {
    path: PathBuf,
    inner: BufReader<File>,
    left: u64,
}

impl RunReader {
    fn next_key<K: Key>(&mut self) -> Result<Option<K>> {
        if self.left == 0 {
            return Ok(None);
        }
        let mut bytes = [0u8; 16];
        self.inner
            .read_exact(&mut bytes[..K::BYTES])
            .map_err(|source| Error::Read {
                path: self.path.clone(),
                source,
            })?;
        self.left -= 1;
        Ok(Some(K::read_le(&bytes[..K::BYTES])))
    }
}

/// The dense id of `id`, assigning the next one on first sight.
fn dense_id(ids: &mut HashMap<u64, u32>, id: u64) -> Result<u32> {
    let next = ids.len();
    if let Some(&dense) = ids.get(&id) {
        return Ok(dense);
    }
    let dense = u32::try_from(next)
        .ok()
        .filter(|&d| u64::from(d) <= MAX_VERTEX_ID)
        .ok_or_else(|| {
            Error::invalid(
                "vertex ids",
                "more distinct ids than a u32 vertex id space holds",
            )
        })?;
    ids.insert(id, dense);
    Ok(dense)
}

fn narrow(id: u64) -> u32 {
    assert!(
        id <= MAX_VERTEX_ID,
        "caller must reject vertex ids above MAX_VERTEX_ID"
    );
    u32::try_from(id).expect("checked against MAX_VERTEX_ID")
}
