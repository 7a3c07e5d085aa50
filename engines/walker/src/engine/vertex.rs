//! Vertex passes: when a block's few walks cost less that way, their
//! vertices' lists are read on their own (or served from cached blocks in
//! place), with the offsets section kept in memory when it fits.

use std::collections::HashMap;
use std::sync::Arc;

use quiver_csr::Blocks;
use quiver_io::{AlignedBuf, ReadRequest};
use quiver_walkstate::{WalkLayout, WalkPools};

use super::budget::{Budget, Cache};
use super::walks::PooledWalk;
use super::{Contains, Engine, InFlight};
use crate::app::WalkApp;
use crate::loaded::{LoadedBlock, Vertices};
use crate::rng::KeyedRng;
use crate::spec::{unbiased_draw, Adjacency, Kind, WalkSpec};
use crate::Result;

/// What moving one walk one step by single-vertex reads is taken to cost,
/// against a whole block read that moves each of its walks several steps:
/// two pages (offsets, targets) per step, for about four steps a walk takes
/// inside a loaded block.
pub(super) const VERTEX_READ_BYTES: u64 = 4 * 2 * quiver_io::ALIGN as u64;

/// Most vertices whose lists are read at once in a vertex pass (fewer when
/// the budget is small: see `read_group`).
pub(super) const VERTEX_READ_GROUP: usize = 256;

/// The `|V| + 1` offsets in `buf`, if the section was read. The buffer
/// starts 4 KiB aligned and holds whole words, so the cast cannot fail.
pub(super) fn offsets_in(buf: Option<&AlignedBuf>, num_vertices: u32) -> Option<&[u64]> {
    let words: &[u64] = bytemuck::cast_slice(&buf?[..]);
    Some(&words[..usize::try_from(num_vertices).expect("|V| fits usize") + 1])
}

/// What a vertex pass reads adjacency from: cached blocks, then lists read
/// vertex by vertex.
pub(super) struct PassData<'a> {
    pub(super) blocks: Arc<Blocks>,
    pub(super) cached: &'a HashMap<usize, Arc<LoadedBlock>>,
    pub(super) lists: &'a Vertices,
}

impl PassData<'_> {
    pub(super) fn block(&self, v: u32) -> Option<&LoadedBlock> {
        self.cached
            .get(&(self.blocks.find(v).0 as usize))
            .map(AsRef::as_ref)
    }
}

impl Adjacency for PassData<'_> {
    fn neighbors(&self, v: u32) -> &[u32] {
        match self.block(v) {
            Some(block) => block.neighbors(v),
            None => self.lists.neighbors(v),
        }
    }

    fn cumulative_weights(&self, v: u32) -> &[f32] {
        match self.block(v) {
            Some(block) => block.cumulative_weights(v),
            None => self.lists.cumulative_weights(v),
        }
    }
}

impl Contains for PassData<'_> {
    fn contains(&self, _v: u32) -> bool {
        // Vertex passes move every walk one step, so nothing is "inside".
        false
    }

    fn holds(&self, v: u32) -> bool {
        self.block(v).is_some() || self.lists.has(v)
    }
}

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    /// Bytes of the offsets held in memory.
    pub(super) fn offsets_bytes(&self) -> u64 {
        self.offsets.as_ref().map_or(0, |b| b.capacity() as u64)
    }

    /// Reads the whole offsets section if it takes at most half of the
    /// cache, making room for it first; never for a run that reads only
    /// the lists its few walks visit (their offsets' pages are read with
    /// them).
    pub(super) fn load_offsets(
        &mut self,
        cache: &mut Cache,
        pools: &WalkPools<W>,
        budget: &Budget,
    ) -> Result<()> {
        let bytes = quiver_io::align_up(self.layout.offsets.len);
        if self.lists_only || self.offsets.is_some() || bytes > budget.cache / 2 {
            return Ok(());
        }
        let freed = cache.shrink_to(
            budget.cache - bytes,
            &self.pooling.walks_per_block(pools),
            &[],
            None,
        );
        self.stats.release(freed);
        let mut buf = AlignedBuf::zeroed(usize::try_from(bytes).expect("the offsets fit memory"));
        const CHUNK_BYTES: usize = 8 << 20;
        let base = self.layout.offsets.offset;
        let mut requests: Vec<ReadRequest<'_>> = buf
            .chunks_mut(CHUNK_BYTES)
            .enumerate()
            .map(|(i, chunk)| ReadRequest {
                offset: base + (i * CHUNK_BYTES) as u64,
                buf: chunk,
            })
            .collect();
        self.file.read_batch(&mut requests)?;
        drop(requests);
        self.stats.hold(buf.capacity() as u64);
        self.offsets = Some(buf);
        Ok(())
    }

    /// Few walks left: read only the adjacency lists of the vertices they
    /// stand on (from cached blocks when possible) and move each one step.
    /// Returns whether any walk moved: when not even one list fits what the
    /// budget leaves, the walks go back to their pools and a block load
    /// must serve them.
    pub(super) fn vertex_pass(
        &mut self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        cache: &mut Cache,
        budget: &Budget,
        candidates: &[usize],
    ) -> Result<bool> {
        let walks = self.take_batch(pools, candidates, budget.batch_walks)?;
        // Lists read in part served the last pass's draws only.
        cache.lists.drop_parts();
        let mut distinct: Vec<u32> = walks.iter().map(|&(_, v)| v).collect();
        distinct.sort_unstable();
        distinct.dedup();
        self.load_offsets(cache, pools, budget)?;
        let block_of = |v: u32| self.blocks.find(v).0 as usize;
        // Lists kept from earlier passes may take at most half the cache,
        // and no more than the blocks and the offsets leave of it.
        let lists_now = cache.lists.memory_bytes();
        if lists_now > budget.cache / 2
            || lists_now + cache.blocks.bytes + self.offsets_bytes() > budget.cache
        {
            self.stats.release(cache.lists.memory_bytes());
            cache.lists.clear();
        }
        // Lists read in earlier passes are used again.
        distinct.retain(|&v| !cache.lists.has(v));
        // Vertices of cached blocks are read from the blocks, which stay.
        let mut keep: Vec<usize> = Vec::new();
        let mut missing = Vec::new();
        for v in distinct {
            let b = block_of(v);
            if cache.blocks.map.contains_key(&b) {
                keep.push(b);
            } else {
                missing.push(v);
            }
        }
        keep.dedup();
        // The walks in flight will need their share once they move.
        let walk_bytes = 2 * (walks.len() * std::mem::size_of::<InFlight<W>>()) as u64;
        // The previous-list reserve stays free for the walks' previous
        // vertices (second-order walks).
        let (file, layout, weighted, mem_budget) = (
            &self.file,
            &self.layout,
            self.weighted,
            self.config.mem_budget.saturating_sub(self.prev_reserve),
        );
        let offsets = offsets_in(self.offsets.as_ref(), self.num_vertices);
        let draws = (self.lists_only && self.spec.kind == Kind::Unbiased)
            .then(|| drawn_edges(&self.spec, &self.word, self.config.seed, &walks));
        let walks_per_block = self.pooling.walks_per_block(pools);
        let stats = &mut self.stats;
        // Read in groups so the aligned I/O buffers stay small, making room
        // (by evicting cached data) first for a group's offsets pages, then,
        // with the degrees known, for its lists.
        // Enough reads in flight to keep the device busy, few enough that a
        // group's pages take at most an eighth of the cache.
        let read_group = usize::try_from(budget.cache / 8 / (2 * quiver_io::ALIGN as u64))
            .unwrap_or(usize::MAX)
            .clamp(1, VERTEX_READ_GROUP);
        let mut read = 0;
        while read < missing.len() {
            let group = &missing[read..(read + read_group).min(missing.len())];
            // This pass's lists stay; only blocks make room now. When even
            // that is not enough, the pass stops reading and the walks it
            // could not serve wait for the next one.
            let lists = cache.lists.memory_bytes();
            let blocks = &mut cache.blocks;
            let mut make_room = |sizes: &[u64]| {
                let others = stats.mem_now - blocks.bytes;
                let total: u64 = sizes.iter().sum();
                let limit = mem_budget.saturating_sub(others + walk_bytes + total);
                let freed = blocks.shrink_to(limit, &walks_per_block, &keep, None);
                stats.release(freed);
                // As many lists as fit in what is left.
                let mut room = mem_budget.saturating_sub(others + walk_bytes + blocks.bytes);
                sizes
                    .iter()
                    .take_while(|&&size| {
                        let fits = size <= room;
                        room = room.saturating_sub(size);
                        fits
                    })
                    .count()
            };
            let pages = vec![2 * quiver_io::ALIGN as u64; group.len()];
            let fit = make_room(&pages);
            if fit == 0 {
                break;
            }
            let done = match &draws {
                Some(draws) => {
                    cache
                        .lists
                        .read_drawn(file, &group[..fit], layout, draws, &mut make_room)?
                }
                None => cache.lists.read_into(
                    file,
                    &group[..fit],
                    weighted,
                    layout,
                    offsets,
                    &mut make_room,
                )?,
            };
            stats.hold(done.peak);
            stats.release(done.peak);
            stats.hold(cache.lists.memory_bytes() - lists);
            read += done.count;
            if done.count < group.len() {
                break;
            }
        }
        drop(draws);
        let missing = &missing[..read];
        // Walks standing where nothing was read go back to their pools.
        let (walks, later): (Vec<_>, Vec<_>) = walks.into_iter().partition(|&(_, v)| {
            cache.lists.has(v)
                || cache
                    .blocks
                    .map
                    .contains_key(&(self.blocks.find(v).0 as usize))
        });
        self.file(pools, later)?;
        self.stats.vertex_loads += missing.len() as u64;
        if walks.is_empty() {
            return Ok(false);
        }
        let pass = PassData {
            blocks: Arc::clone(&self.blocks),
            cached: &cache.blocks.map,
            lists: &cache.lists,
        };
        self.advance_and_file(pools, state, &pass, walks, true)?;
        Ok(true)
    }
}

/// For a run that reads only the lists its walks visit ([`visits_few`]),
/// with unbiased walks, whose draws are keyed by walk and hop and so known
/// before the step: the edge indices the steps of `walks` draw at each
/// vertex, given its degree, so that only their pages of a long list are
/// read.
///
/// [`visits_few`]: super::visits_few
fn drawn_edges<'s, W: PooledWalk>(
    spec: &'s WalkSpec,
    word: &WalkLayout,
    seed: u64,
    walks: &[InFlight<W>],
) -> impl Fn(u32, u64) -> Vec<u64> + 's {
    let mut at: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for &(walk, v) in walks {
        let hop = word.hop(walk.word());
        if hop < u64::from(spec.length) {
            let id = walk
                .id()
                .expect("a run that reads lists alone keys draws by walk");
            at.entry(v)
                .or_default()
                .push((KeyedRng::key(seed, id), hop));
        }
    }
    move |v: u32, degree: u64| {
        at.get(&v)
            .into_iter()
            .flatten()
            .filter_map(|&(key, hop)| unbiased_draw(spec, &KeyedRng::at(key, hop), degree))
            .collect()
    }
}
