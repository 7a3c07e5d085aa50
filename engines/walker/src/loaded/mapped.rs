//! Blocks read through the page cache as the mapped graph file's own
//! pages, not copies of them.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use quiver_csr::format::VerifiedFile;
use quiver_csr::{Block, Extent};
use quiver_io::{Mmap, ALIGN};
use rayon::prelude::*;

use super::index;
use crate::{Error, Result};

/// The graph file mapped into memory, for blocks read through the page
/// cache: a loaded block is the file's own pages, and evicting it takes
/// them out of the process's resident memory again.
///
/// A block's pages and targets are checked the first time it is loaded and
/// used as they are when it is loaded again, as a mapped `Graph` is checked
/// once when opened: the mapping's contract (`quiver_io::map_readonly`) is
/// that the file does not change while it is mapped. Two things differ from
/// reading blocks (`--io direct`, the default): pages the kernel reads
/// back from the device for a block loaded again are not checked again,
/// and a device error while a page is read back ends the process (SIGBUS)
/// instead of the run returning an error.
#[derive(Debug)]
pub struct MappedGraph {
    map: Arc<Mmap>,
    /// Per block, whether its pages and targets were checked.
    checked: Vec<AtomicBool>,
    /// Bytes of blocks loaded from the mapping.
    loaded_bytes: AtomicU64,
}

impl MappedGraph {
    /// Maps the graph `file` the engine reads, whose graph data ends at
    /// byte `data_end` (its header says so), cut into `blocks` blocks.
    pub fn open(file: &VerifiedFile, data_end: u64, blocks: usize) -> Result<MappedGraph> {
        let path = file.file().path();
        let map = file.file().map_readonly().map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        if (map.len() as u64) < data_end {
            return Err(Error::Graph(quiver_csr::Error::Corrupt {
                path: path.to_owned(),
                detail: format!(
                    "it has {} bytes now, fewer than the {data_end} its header gave when \
                     opened: it changed while in use",
                    map.len()
                ),
            }));
        }
        Ok(MappedGraph {
            map: Arc::new(map),
            checked: (0..blocks).map(|_| AtomicBool::new(false)).collect(),
            loaded_bytes: AtomicU64::new(0),
        })
    }

    /// Bytes of blocks loaded from the mapping so far (each load counts).
    pub fn loaded_bytes(&self) -> u64 {
        self.loaded_bytes.load(Ordering::Relaxed)
    }

    /// Whether `block` was checked when loaded before.
    pub(super) fn checked(&self, block: &Block) -> bool {
        self.checked[index(u64::from(block.id.0))].load(Ordering::Acquire)
    }

    /// Records that `block`'s pages and targets passed their checks.
    pub(super) fn mark_checked(&self, block: &Block) {
        self.checked[index(u64::from(block.id.0))].store(true, Ordering::Release);
    }

    /// The part `extent` (inside the graph data) of the file, its pages
    /// checked against their checksums if `check`, else touched: either
    /// way faulted in here, on every thread, rather than one at a time by
    /// the walks that reach them (evicted, they may have left the page
    /// cache). On a warm page cache the touch cost the Node2Vec
    /// benchmark 3-5% of its wall time in one set of alternating runs and
    /// nothing measurable in the next.
    pub(super) fn part(
        &self,
        file: &VerifiedFile,
        extent: Extent,
        check: bool,
    ) -> Result<MappedPart> {
        let range = index(extent.offset)..index(extent.offset + extent.len);
        let bytes = &self.map[range.clone()];
        if check {
            file.pages().verify(extent.offset, bytes)?;
        } else {
            let touched: u64 = bytes.par_chunks(ALIGN).map(|page| u64::from(page[0])).sum();
            std::hint::black_box(touched);
        }
        self.loaded_bytes.fetch_add(extent.len, Ordering::Relaxed);
        Ok(MappedPart {
            map: Arc::clone(&self.map),
            range,
        })
    }
}

/// Bytes `range` of the mapped graph file, taken out of the process's
/// resident memory again when dropped (they stay in the page cache).
#[derive(Debug)]
pub(super) struct MappedPart {
    map: Arc<Mmap>,
    range: Range<usize>,
}

impl MappedPart {
    #[inline]
    pub(super) fn bytes(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

impl Drop for MappedPart {
    fn drop(&mut self) {
        quiver_io::release_mapped(&self.map, self.bytes());
    }
}

#[cfg(test)]
mod tests {
    use quiver_csr::format::{Layout, VerifiedFile};
    use quiver_csr::{Blocks, GraphIndex};
    use quiver_io::{BackendChoice, ReadFile, ReadOptions};

    use super::super::{LoadedBlock, Section, Source, SpareBuffers};
    use super::MappedGraph;
    use crate::spec::Adjacency;

    /// A weighted graph of 20,000 vertices written into `dir`.
    fn written(dir: &std::path::Path) -> std::path::PathBuf {
        let n = 20_000u32;
        let edges: Vec<(u32, u32, f32)> = (0..n)
            .flat_map(|v| {
                (1..=(v % 7)).map(move |k| (v, (v * 31 + k * 977) % n, (k + v % 3) as f32))
            })
            .collect();
        let graph = quiver_csr::testing::build(n, edges, true, false);
        let path = dir.join("g.qcsr");
        quiver_csr::write_graph(&graph, &path).unwrap();
        path
    }

    /// The graph at `path` opened as the engine opens it through the page
    /// cache (its index, and the file read with `pread`).
    fn read_file(path: &std::path::Path) -> (GraphIndex, VerifiedFile) {
        let index = GraphIndex::open(path).unwrap();
        let options = ReadOptions {
            backend: BackendChoice::Pread,
            direct: false,
            ..ReadOptions::default()
        };
        let file = VerifiedFile::new(
            ReadFile::open(path, &options).unwrap(),
            index.head().page_checksums().clone(),
        );
        (index, file)
    }

    /// The graph at `path` cut into blocks of 16 KiB, read and mapped.
    fn opened(path: &std::path::Path) -> (Blocks, Layout, VerifiedFile, MappedGraph) {
        let (index, file) = read_file(path);
        let blocks = Blocks::by_bytes(&index, 16 << 10).unwrap();
        let layout = index.layout();
        let mapped = MappedGraph::open(&file, layout.data_end(), blocks.len()).unwrap();
        (blocks, layout, file, mapped)
    }

    /// Every block loaded from the mapped file, twice (the second time
    /// unchecked), holds the lists and cumulative weights a read block
    /// holds, and each load counts its bytes.
    #[test]
    fn mapped_blocks_hold_what_read_blocks_hold() {
        let dir = tempfile::tempdir().unwrap();
        let (blocks, layout, file, mapped) = opened(&written(dir.path()));
        assert!(blocks.len() > 8, "{} blocks", blocks.len());
        let spare = SpareBuffers::default();
        let mut bytes = 0;
        for _ in 0..2 {
            for block in blocks.iter() {
                let read =
                    LoadedBlock::read(&file, Source::Read(&spare), block, true, &layout).unwrap();
                let map = LoadedBlock::read(&file, Source::Mapped(&mapped), block, true, &layout)
                    .unwrap();
                assert!(matches!(map.targets, Section::Mapped(_)));
                assert!(mapped.checked(block));
                for v in block.vertices.clone() {
                    assert_eq!(map.neighbors(v), read.neighbors(v), "vertex {v}");
                    assert_eq!(
                        map.cumulative_weights(v),
                        read.cumulative_weights(v),
                        "vertex {v}"
                    );
                }
                assert_eq!(map.memory_bytes(), read.memory_bytes());
                bytes += block.offsets_extent.len
                    + block.targets_extent.len
                    + block.weights_extent.unwrap().len;
            }
        }
        assert_eq!(mapped.loaded_bytes(), bytes);
    }

    /// A block holding a bad page or target fails its load from the mapped
    /// file and stays unchecked, so it fails each time it is loaded; the
    /// other blocks load.
    #[test]
    fn a_bad_mapped_block_fails_every_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path());
        let pristine = std::fs::read(&path).unwrap();
        let targets = opened(&path).1.targets.offset;
        // A flipped byte of edge 5000's target (its page's checksum catches
        // it), or the target out of range in a resealed page.
        let at = targets + 5000 * 4;
        let flip = |bytes: &mut Vec<u8>| bytes[usize::try_from(at).unwrap()] ^= 0x40;
        let out_of_range =
            |bytes: &mut Vec<u8>| quiver_csr::testing::set_target(bytes, 5000, 1 << 30);
        for (damage, says) in [
            (&flip as &dyn Fn(&mut Vec<u8>), "checksum"),
            (&out_of_range, "edge 5000 targets vertex 1073741824"),
        ] {
            let mut bytes = pristine.clone();
            damage(&mut bytes);
            std::fs::write(&path, &bytes).unwrap();
            let (blocks, layout, file, mapped) = opened(&path);
            let load =
                |block| LoadedBlock::read(&file, Source::Mapped(&mapped), block, true, &layout);
            for block in blocks.iter() {
                // A checksum covers a whole page, which the blocks on either
                // side of a page boundary both load; a target is checked
                // by its own block.
                let extent = block.targets_extent;
                let bad = if says == "checksum" {
                    (extent.offset..extent.offset + extent.len).contains(&at)
                } else {
                    block.edges.contains(&5000)
                };
                match load(block) {
                    Ok(_) => assert!(!bad && mapped.checked(block), "{says}: {block:?}"),
                    Err(e) => {
                        let message = quiver_run::chain(&e);
                        assert!(bad && message.contains(says), "{block:?}: {message}");
                        assert!(!mapped.checked(block));
                        assert!(load(block).is_err(), "a bad block loaded the second time");
                    }
                }
            }
        }
    }

    /// A file shorter than its header said when the run opened it (it
    /// changed since) is refused when mapped, naming the file, instead of
    /// a block past its end being cut out of the mapping.
    #[test]
    fn a_file_cut_short_since_it_was_opened_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path());
        let (index, file) = read_file(&path);
        let data_end = index.layout().data_end();
        let writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        writer.set_len(data_end - 4096).unwrap();
        let err = MappedGraph::open(&file, data_end, 4).unwrap_err();
        let message = quiver_run::chain(&err);
        assert!(
            message.contains("g.qcsr") && message.contains("changed while in use"),
            "{message}"
        );
    }
}
