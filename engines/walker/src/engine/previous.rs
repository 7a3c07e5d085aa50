//! Node2Vec's previous lists: the adjacency of a walk's previous vertex,
//! read vertex by vertex in rounds that fit beside a reserve for the
//! largest list when it is not in the executing data.

use super::vertex::{offsets_in, VERTEX_READ_GROUP};
use super::walks::PooledWalk;
use super::{Contains, Engine};
use crate::app::WalkApp;
use crate::loaded::{edge_ranges, list_bytes, Scratch, Vertices};
use crate::spec::Adjacency;
use crate::Result;

/// The adjacency list of a walk's previous vertex `p`: in the executing
/// data, or read on its own.
pub(super) fn previous_list<'a, X: Adjacency + Contains>(
    exec: &'a X,
    prevs: &'a Vertices,
    p: u32,
) -> &'a [u32] {
    if exec.holds(p) {
        exec.neighbors(p)
    } else {
        prevs.neighbors(p)
    }
}

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    /// For second-order walks: the edge ranges of the previous vertices in
    /// `missing`, from the offsets in memory or read in groups whose pages
    /// fit what the budget leaves free.
    pub(super) fn previous_ranges(&mut self, missing: &[u32]) -> Result<Vec<(u64, u64)>> {
        let offsets = offsets_in(self.offsets.as_ref(), self.num_vertices);
        let page = quiver_io::ALIGN as u64;
        let mut ranges = Vec::with_capacity(missing.len());
        let mut scratch = Scratch::default();
        while ranges.len() < missing.len() {
            // Two pages each, if a pair of offsets straddles a page; the
            // previous-list reserve holds at least that.
            let room = self.config.mem_budget.saturating_sub(self.stats.mem_now);
            let len = usize::try_from(room / (2 * page))
                .unwrap_or(usize::MAX)
                .clamp(1, VERTEX_READ_GROUP)
                .min(missing.len() - ranges.len());
            let group = &missing[ranges.len()..ranges.len() + len];
            let (group_ranges, buffers) =
                edge_ranges(&self.file, &self.layout, group, offsets, &mut scratch)?;
            self.stats.hold(buffers);
            self.stats.release(buffers);
            ranges.extend(group_ranges);
        }
        Ok(ranges)
    }

    /// For second-order walks: the adjacency lists of a prefix of `missing`
    /// (previous vertices the executing data does not hold, with their
    /// edge `ranges`), as many as fit what the budget leaves free and at
    /// least one. Returns them, held in the stats, and how many were read.
    pub(super) fn previous_lists(
        &mut self,
        missing: &[u32],
        ranges: &[(u64, u64)],
    ) -> Result<(Vertices, usize)> {
        // Every batch starts with the previous-list reserve free, so the
        // first list always fits: reading it regardless cannot overshoot the
        // budget, and makes progress.
        let mut room = self.config.mem_budget.saturating_sub(self.stats.mem_now);
        let n = ranges
            .iter()
            .take_while(|&&(a, b)| {
                let size = list_bytes(b - a, false);
                let fits = size <= room;
                room = room.saturating_sub(size);
                fits
            })
            .count()
            .max(1)
            .min(missing.len());
        let mut prevs = Vertices::default();
        // A bounded number of reads in flight at once.
        for (group, group_ranges) in missing[..n]
            .chunks(VERTEX_READ_GROUP)
            .zip(ranges[..n].chunks(VERTEX_READ_GROUP))
        {
            let held = prevs.memory_bytes();
            let peak = prevs.read_lists(&self.file, &self.layout, false, group, group_ranges)?;
            self.stats.hold(peak);
            self.stats.release(peak);
            self.stats.hold(prevs.memory_bytes() - held);
        }
        self.stats.vertex_loads += n as u64;
        Ok((prevs, n))
    }
}
