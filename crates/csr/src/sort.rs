//! External sort of an edge stream into a `.qcsr` file within a memory budget.
//!
//! Edges are buffered up to the budget, sorted by `(source, target, weight
//! bits)` and spilled as runs; the runs are merged (in several passes if
//! there are more than the budget allows to read at once) straight into a
//! [`CsrWriter`]. With one run the merge is skipped, so a small input is
//! converted in memory by the same code.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use tempfile::TempDir;

use crate::write::CsrWriter;
use crate::{Error, Progress, Result};

/// The largest vertex id a `.qcsr` file can hold (|V| must fit `u32`).
pub const MAX_VERTEX_ID: u64 = u32::MAX as u64 - 1;
/// The smallest memory budget accepted.
pub const MIN_MEM_BUDGET: u64 = 2 << 20;

const RECORD_BYTES: usize = 20;
const SPILL_BUF: usize = 256 << 10;
const MERGE_BUF: usize = 64 << 10;

/// How an edge stream becomes a graph.
#[derive(Clone, Debug)]
pub struct SortOptions {
    /// Bytes of memory the sort may use for buffered edges and merge buffers
    /// (the writer's `8 * (|V| + 1)` bytes of offsets come on top).
    pub mem_budget: u64,
    /// Where spilled runs go (a fresh temporary directory inside it, removed
    /// on success and on error); `None` uses the system temporary directory.
    pub work_dir: Option<PathBuf>,
    /// Add the reverse of every edge.
    pub undirected: bool,
    /// Keep one copy of each `(source, target)` pair: the first in
    /// weight-bit order, which is the smallest weight for non-negative weights.
    pub dedupe: bool,
    /// Drop edges `v -> v`.
    pub drop_self_loops: bool,
    /// Map the distinct ids, in increasing order, onto `0..|V|`; ids may then
    /// be any `u64`. Needs 8 bytes per distinct id beyond the budget.
    pub relabel: bool,
}

impl Default for SortOptions {
    fn default() -> Self {
        SortOptions {
            mem_budget: 1 << 30,
            work_dir: None,
            undirected: false,
            dedupe: false,
            drop_self_loops: false,
            relabel: false,
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
    /// Vertices in the output.
    pub vertices: u32,
    /// Sorted runs spilled to disk (0: converted in memory).
    pub runs_spilled: u64,
    /// Bytes written to spill files.
    pub spill_bytes: u64,
    /// Merge passes over the data (0 without spilling).
    pub merge_passes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Record {
    src: u64,
    dst: u64,
    weight_bits: u32,
}

impl Record {
    fn encode(&self, out: &mut [u8; RECORD_BYTES]) {
        out[0..8].copy_from_slice(&self.src.to_le_bytes());
        out[8..16].copy_from_slice(&self.dst.to_le_bytes());
        out[16..20].copy_from_slice(&self.weight_bits.to_le_bytes());
    }

    fn decode(b: &[u8; RECORD_BYTES]) -> Record {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Record {
            src: u64_at(0),
            dst: u64_at(8),
            weight_bits: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")),
        }
    }
}

/// A sorted run on disk.
#[derive(Debug)]
struct Run {
    path: PathBuf,
    records: u64,
}

/// Collects edges and writes them, sorted, as a `.qcsr` file.
#[derive(Debug)]
pub struct EdgeSorter {
    options: SortOptions,
    buffer: Vec<Record>,
    capacity: usize,
    runs: Vec<Run>,
    /// Numbers run files uniquely across spills and merge passes.
    next_run: u64,
    work: Option<TempDir>,
    /// Sorted distinct ids seen so far, when relabelling.
    ids: Vec<u64>,
    max_id: Option<u64>,
    stats: SortStats,
}

impl EdgeSorter {
    /// A sorter with the given options; fails if the budget is below
    /// [`MIN_MEM_BUDGET`].
    pub fn new(options: SortOptions) -> Result<EdgeSorter> {
        if options.mem_budget < MIN_MEM_BUDGET {
            return Err(Error::InvalidArgument(format!(
                "memory budget of {} bytes is below the minimum of {MIN_MEM_BUDGET} (2 MiB)",
                options.mem_budget
            )));
        }
        // The spill writer's buffer and the input reader's are the fixed
        // overhead; the rest of the budget holds edges.
        let edge_bytes = options.mem_budget - 2 * SPILL_BUF as u64;
        let capacity = crate::to_usize(edge_bytes) / std::mem::size_of::<Record>();
        Ok(EdgeSorter {
            options,
            buffer: Vec::new(),
            capacity,
            runs: Vec::new(),
            next_run: 0,
            work: None,
            ids: Vec::new(),
            max_id: None,
            stats: SortStats::default(),
        })
    }

    /// Adds the edge `src -> dst`. Ids above [`MAX_VERTEX_ID`] must have been
    /// rejected by the caller unless relabelling (the caller knows the input
    /// line to blame).
    pub fn push(&mut self, src: u64, dst: u64, weight: f32) -> Result<()> {
        assert!(
            self.options.relabel || (src <= MAX_VERTEX_ID && dst <= MAX_VERTEX_ID),
            "caller must reject vertex ids above MAX_VERTEX_ID"
        );
        self.stats.edges_in += 1;
        if src == dst && self.options.drop_self_loops {
            self.stats.self_loops_dropped += 1;
            return Ok(());
        }
        let max = src.max(dst);
        self.max_id = Some(self.max_id.map_or(max, |m| m.max(max)));
        let weight_bits = weight.to_bits();
        self.insert(Record {
            src,
            dst,
            weight_bits,
        })?;
        if self.options.undirected && src != dst {
            self.insert(Record {
                src: dst,
                dst: src,
                weight_bits,
            })?;
        }
        Ok(())
    }

    fn insert(&mut self, record: Record) -> Result<()> {
        if self.buffer.capacity() == 0 {
            self.buffer.reserve_exact(self.capacity);
        }
        self.buffer.push(record);
        if self.buffer.len() >= self.capacity {
            self.spill()?;
        }
        Ok(())
    }

    /// Sorts the buffer (dropping duplicates if asked) and records its ids.
    fn sort_buffer(&mut self) {
        self.buffer.sort_unstable();
        if self.options.dedupe {
            let before = self.buffer.len();
            self.buffer.dedup_by_key(|r| (r.src, r.dst));
            self.stats.duplicates_dropped += (before - self.buffer.len()) as u64;
        }
        if self.options.relabel {
            let mut fresh: Vec<u64> = self.buffer.iter().flat_map(|r| [r.src, r.dst]).collect();
            fresh.sort_unstable();
            fresh.dedup();
            self.ids = merge_sorted_unique(&self.ids, &fresh);
        }
    }

    fn work_dir(&mut self) -> Result<&Path> {
        if self.work.is_none() {
            let builder = tempfile::Builder::new().prefix("quiver-sort-").tempdir_in(
                self.options
                    .work_dir
                    .clone()
                    .unwrap_or_else(std::env::temp_dir),
            );
            let dir = builder.map_err(|source| Error::Write {
                path: self
                    .options
                    .work_dir
                    .clone()
                    .unwrap_or_else(std::env::temp_dir),
                source,
            })?;
            self.work = Some(dir);
        }
        Ok(self
            .work
            .as_ref()
            .expect("work dir was just created")
            .path())
    }

    fn spill(&mut self) -> Result<()> {
        self.sort_buffer();
        let records = std::mem::take(&mut self.buffer);
        let run = self.write_run(records.into_iter().map(Ok))?;
        self.runs.push(run);
        self.stats.runs_spilled += 1;
        Ok(())
    }

    fn write_run(&mut self, records: impl Iterator<Item = Result<Record>>) -> Result<Run> {
        self.next_run += 1;
        let name = format!("run-{}", self.next_run);
        let path = self.work_dir()?.join(name);
        let write_err = |source| Error::Write {
            path: path.clone(),
            source,
        };
        let file = File::create(&path).map_err(write_err)?;
        let mut out = BufWriter::with_capacity(SPILL_BUF, file);
        let mut bytes = [0u8; RECORD_BYTES];
        let mut count = 0u64;
        for record in records {
            record?.encode(&mut bytes);
            out.write_all(&bytes).map_err(write_err)?;
            count += 1;
        }
        out.flush().map_err(write_err)?;
        self.stats.spill_bytes += count * RECORD_BYTES as u64;
        Ok(Run {
            path,
            records: count,
        })
    }

    /// Sorts what is left, merges, and writes the graph to `output`.
    /// `min_vertices` raises |V| above `max id + 1` (a Matrix Market file
    /// states its dimension); `weighted` keeps the weights.
    pub fn finish(
        mut self,
        output: &Path,
        min_vertices: u64,
        weighted: bool,
        progress: &dyn Progress,
    ) -> Result<SortStats> {
        let num_vertices = if self.options.relabel {
            // Ids of the unspilled buffer are merged in by sort_buffer below.
            None
        } else {
            Some(self.max_id.map_or(0, |m| m + 1).max(min_vertices))
        };
        if self.runs.is_empty() {
            self.sort_buffer();
            let records = std::mem::take(&mut self.buffer);
            let num_vertices = self.vertex_count(num_vertices)?;
            progress.start("writing", Some(records.len() as u64));
            return self.write_graph(
                records.into_iter().map(Ok),
                output,
                num_vertices,
                weighted,
                progress,
            );
        }
        if !self.buffer.is_empty() {
            self.spill()?;
        }
        self.buffer = Vec::new();
        let num_vertices = self.vertex_count(num_vertices)?;
        let fan_in = (crate::to_usize(self.options.mem_budget) / 2 / MERGE_BUF).clamp(2, 256);
        while self.runs.len() > fan_in {
            let group: Vec<Run> = self.runs.drain(..fan_in).collect();
            progress.start("merging runs", Some(group.iter().map(|r| r.records).sum()));
            let mut dropped = 0;
            let merged = DedupIter::new(merge(&group)?, self.options.dedupe, &mut dropped);
            let run = self.write_run(merged)?;
            self.stats.duplicates_dropped += dropped;
            for old in group {
                let _ = std::fs::remove_file(&old.path);
            }
            self.runs.push(run);
            self.stats.merge_passes += 1;
        }
        let total = self.runs.iter().map(|r| r.records).sum();
        progress.start("merging into the graph", Some(total));
        let runs = std::mem::take(&mut self.runs);
        let merged = merge(&runs)?;
        self.stats.merge_passes += 1;
        self.write_graph(merged, output, num_vertices, weighted, progress)
    }

    fn vertex_count(&self, from_ids: Option<u64>) -> Result<u32> {
        let count = from_ids.unwrap_or(self.ids.len() as u64);
        u32::try_from(count).map_err(|_| {
            Error::InvalidArgument(format!(
                "{count} distinct vertices exceed the u32 id space of .qcsr"
            ))
        })
    }

    fn write_graph(
        mut self,
        records: impl Iterator<Item = Result<Record>>,
        output: &Path,
        num_vertices: u32,
        weighted: bool,
        progress: &dyn Progress,
    ) -> Result<SortStats> {
        let mut writer =
            CsrWriter::create(output, num_vertices, weighted, self.options.undirected)?;
        let mut dropped = 0;
        let dedupe = self.options.dedupe;
        let mut done = 0u64;
        for record in DedupIter::new(records, dedupe, &mut dropped) {
            let record = record?;
            let (src, dst) = if self.options.relabel {
                (
                    dense_id(&self.ids, record.src),
                    dense_id(&self.ids, record.dst),
                )
            } else {
                (narrow(record.src), narrow(record.dst))
            };
            writer.push(src, dst, f32::from_bits(record.weight_bits))?;
            done += 1;
            if done % (1 << 20) == 0 {
                progress.advance(1 << 20);
            }
        }
        self.stats.duplicates_dropped += dropped;
        self.stats.edges_out = writer.num_edges();
        self.stats.vertices = num_vertices;
        writer.finish()?;
        Ok(self.stats)
    }
}

/// Drops consecutive records with the same `(src, dst)` when enabled,
/// counting them.
struct DedupIter<'a, I> {
    inner: I,
    enabled: bool,
    last: Option<(u64, u64)>,
    dropped: &'a mut u64,
}

impl<'a, I> DedupIter<'a, I> {
    fn new(inner: I, enabled: bool, dropped: &'a mut u64) -> Self {
        DedupIter {
            inner,
            enabled,
            last: None,
            dropped,
        }
    }
}

impl<I: Iterator<Item = Result<Record>>> Iterator for DedupIter<'_, I> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let record = match self.inner.next()? {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            let key = (record.src, record.dst);
            if self.enabled && self.last == Some(key) {
                *self.dropped += 1;
                continue;
            }
            self.last = Some(key);
            return Some(Ok(record));
        }
    }
}

/// A k-way merge of sorted runs.
fn merge(runs: &[Run]) -> Result<impl Iterator<Item = Result<Record>>> {
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
        if let Some(first) = reader.next_record()? {
            heap.push(Reverse((first, i)));
        }
        readers.push(reader);
    }
    Ok(std::iter::from_fn(move || {
        let Reverse((record, i)) = heap.pop()?;
        match readers[i].next_record() {
            Ok(Some(next)) => heap.push(Reverse((next, i))),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        Some(Ok(record))
    }))
}

struct RunReader {
    path: PathBuf,
    inner: BufReader<File>,
    left: u64,
}

impl RunReader {
    fn next_record(&mut self) -> Result<Option<Record>> {
        if self.left == 0 {
            return Ok(None);
        }
        let mut bytes = [0u8; RECORD_BYTES];
        self.inner
            .read_exact(&mut bytes)
            .map_err(|source| Error::Read {
                path: self.path.clone(),
                source,
            })?;
        self.left -= 1;
        Ok(Some(Record::decode(&bytes)))
    }
}

fn merge_sorted_unique(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn dense_id(ids: &[u64], id: u64) -> u32 {
    let i = ids
        .binary_search(&id)
        .expect("every id was recorded when its run was sorted");
    u32::try_from(i).expect("vertex_count checked that ids fit u32")
}

fn narrow(id: u64) -> u32 {
    u32::try_from(id).expect("push checked ids against MAX_VERTEX_ID")
}
