//! Updates and space: the delta log, direct rewrites, merges, and GC of
//! graph pages.

use std::collections::BTreeSet;

use quiver_run::NoProgress;

use super::read::read_page;
use super::{plan_rewrite, GroupRead, Gtl, Merged};
use crate::area::{Owner, Tag};
use crate::blocks::Block;
use crate::delta::{Adjacency, DeltaBuffer, Deltas, Dir, Edit, ListId};
use crate::error::{Error, Result};
use crate::flash::{Flash, Nanos, Ppn};
use crate::gtt::{GttEntry, Pos};
use crate::page::{Page, CONTINUED};

impl Gtl {
    /// The delta path: appends `edits` (the host's flushed batch, checked
    /// by the host) to the delta graph, submitted at `at`: the records
    /// cross the host link as whole delta pages and are programmed; each
    /// edited list's first page is marked dirty. An edit may name vertex
    /// `|V|`, after a [`Edit::Create`] for it earlier in the batch.
    pub fn log(&mut self, flash: &mut Flash, edits: &[(ListId, Edit)], at: Nanos) -> Result<Nanos> {
        let vertices = check_edits(self.vertices, edits.iter().copied())?;
        let page_bytes = flash.geometry().page_bytes as usize;
        let delta_pages = edits.len().div_ceil(Deltas::per_page(page_bytes));
        self.make_room(flash, delta_pages as u64, at)?;
        self.vertices = vertices;
        let pages = self.deltas.append(edits, page_bytes);
        let unit: Vec<(Owner, Vec<u8>)> = pages
            .iter()
            .map(|(_, p)| (Owner::Delta, p.clone()))
            .collect();
        let (ppns, done) = self.write_unit(flash, &unit, true, at, &NoProgress)?;
        for ((first, _), ppn) in pages.iter().zip(ppns) {
            self.deltas.placed(*first, ppn);
        }
        self.counters.delta_records += edits.len() as u64;
        self.counters.delta_pages += pages.len() as u64;
        for &(list, _) in edits {
            if let Some(word) = self.empty.get_mut(list.vertex as usize / 64) {
                *word &= !(1 << (list.vertex % 64));
            }
            let gtt = &mut self.table_mut(list.dir).gtt;
            let pos = gtt.locate(list.vertex)[0];
            gtt.set(pos, gtt.get(pos).with_dirty(true));
        }
        Ok(done)
    }

    /// The direct path (GraphSSD Fig. 8, behind the redo log of §3.5):
    /// writes `edits` to the log as delta records, then rewrites the group
    /// of every edited list at once, submitted at `at`.
    pub fn apply_direct(
        &mut self,
        flash: &mut Flash,
        edits: &[(ListId, Edit)],
        at: Nanos,
    ) -> Result<Nanos> {
        let logged = self.log(flash, edits, at)?;
        let keys: BTreeSet<(Dir, u32)> = edits
            .iter()
            .map(|&(list, _)| (list.dir, self.group_key(list)))
            .collect();
        self.rewrite_groups(flash, keys, logged)
    }

    /// Merges the delta graph into the pages, submitted at `at`: rewrites
    /// the groups holding dirty pages, out-lists' then in-lists', in vertex
    /// order, at most `limit` of them (all if `None`), one after the other.
    pub fn merge(&mut self, flash: &mut Flash, limit: Option<usize>, at: Nanos) -> Result<Merged> {
        let mut keys = BTreeSet::new();
        for dir in self.dirs() {
            for (_, e) in self.table(dir).gtt.leaves().filter(|(_, e)| e.dirty()) {
                keys.insert((
                    dir,
                    self.group_key(ListId {
                        dir,
                        vertex: e.vertex(),
                    }),
                ));
            }
        }
        let take = limit.unwrap_or(keys.len()).min(keys.len());
        let done = self.rewrite_groups(flash, keys.iter().copied().take(take), at)?;
        Ok(Merged {
            groups: take as u64,
            remaining: (keys.len() - take) as u64,
            done,
        })
    }

    /// The directions the graph keeps lists of.
    pub(super) fn dirs(&self) -> Vec<Dir> {
        [Dir::Out, Dir::In][..self.tables.len()].to_vec()
    }

    /// The key of the group holding `list`.
    fn group_key(&self, list: ListId) -> u32 {
        let gtt = &self.table(list.dir).gtt;
        gtt.get(gtt.group(list.vertex)[0]).vertex()
    }

    /// Rewrites the groups keyed `keys` (direction, key) one after the
    /// other from `at` (each read, merged with its chains, and written out
    /// of place).
    fn rewrite_groups(
        &mut self,
        flash: &mut Flash,
        keys: impl IntoIterator<Item = (Dir, u32)>,
        at: Nanos,
    ) -> Result<Nanos> {
        let mut done = at;
        let mut buffer = DeltaBuffer::new();
        for (dir, key) in keys {
            let group = self.table(dir).gtt.group(key);
            let read = self.read_group(flash, dir, &group, done, &mut buffer)?;
            self.counters.pages_read += read.pages_read;
            self.counters.delta_pages_read += read.delta_pages_read;
            let lists = (read.first, read.lists.as_slice());
            done = self.write_group(flash, dir, &group, lists, read.chains, read.done)?;
        }
        Ok(done)
    }

    /// Every out-list with its weights as it is now, read group by group
    /// from `at` (each page read once), and when the last arrived.
    pub(crate) fn read_all(
        &mut self,
        flash: &mut Flash,
        at: Nanos,
    ) -> Result<(Vec<Adjacency>, Nanos)> {
        let mut lists = Vec::with_capacity(self.vertices as usize);
        let mut done = at;
        let mut buffer = DeltaBuffer::new();
        while lists.len() < self.vertices as usize {
            let next = u32::try_from(lists.len()).expect("below |V|");
            let group = self.tables[0].gtt.group(next);
            let read = self.read_group(flash, Dir::Out, &group, at, &mut buffer)?;
            done = done.max(read.done);
            lists.extend(read.lists);
        }
        Ok((lists, done))
    }

    /// Reads the group `group` of `dir`'s table in parallel at `at`, its
    /// lists' unmerged chains applied (delta pages through `buffer`).
    fn read_group(
        &mut self,
        flash: &mut Flash,
        dir: Dir,
        group: &[Pos],
        at: Nanos,
        buffer: &mut DeltaBuffer,
    ) -> Result<GroupRead> {
        let mut done = at;
        let mut lists: Vec<Adjacency> = Vec::new();
        let table = &self.tables[self.side(dir)];
        let first = table.gtt.get(group[0]).vertex();
        let mut pages_read = 0;
        for &pos in group {
            let (page, read) = read_page(flash, table.gtt.get(pos), at)?;
            done = done.max(read);
            let weights = match &table.weights {
                Some(wgtt) => {
                    let (w, read) = read_page(flash, wgtt.get(pos), at)?;
                    done = done.max(read);
                    Some(w)
                }
                None => None,
            };
            pages_read += 1 + u64::from(weights.is_some());
            for i in 0..page.vertices() as usize {
                let range = page.offsets[i] as usize..page.offsets[i + 1] as usize;
                if !(i == 0 && page.flags & CONTINUED != 0) {
                    lists.push(Adjacency::default());
                }
                let list = lists.last_mut().expect("a list was opened");
                list.targets.extend_from_slice(&page.entries[range.clone()]);
                if let Some(w) = &weights {
                    list.weights
                        .extend(w.entries[range].iter().map(|&b| f32::from_bits(b)));
                }
            }
        }
        if table.gtt.is_last(group) {
            lists.resize((self.vertices - first) as usize, Adjacency::default());
        }
        let mut chains = Vec::new();
        let mut delta_pages_read = 0;
        let start = done;
        for (vertex, list) in (first..).zip(&mut lists) {
            let id = ListId { dir, vertex };
            if self.deltas.has_chain(id) {
                let chain = self.deltas.chain(flash, id, start, buffer)?;
                delta_pages_read += chain.pages_read;
                done = done.max(chain.done);
                for &edit in &chain.edits {
                    list.apply(edit, self.weighted);
                }
                chains.push((id, chain.records));
            }
        }
        Ok(GroupRead {
            first,
            lists,
            chains,
            pages_read,
            delta_pages_read,
            done,
        })
    }

    /// Writes `lists` (vertices `first..`) in place of the group `group`
    /// of `dir`'s table, submitted at `at`, and retires the merged `chains`.
    fn write_group(
        &mut self,
        flash: &mut Flash,
        dir: Dir,
        group: &[Pos],
        (first, lists): (u32, &[Adjacency]),
        chains: Vec<(ListId, Vec<u32>)>,
        at: Nanos,
    ) -> Result<Nanos> {
        let lens: Vec<usize> = lists.iter().map(|l| l.targets.len()).collect();
        let plans = plan_rewrite(first, &lens, &self.format);
        let kinds = 1 + usize::from(self.weighted);
        self.make_room(flash, (plans.len() * kinds) as u64, at)?;
        let targets: Vec<u32> = lists
            .iter()
            .flat_map(|l| l.targets.iter().copied())
            .collect();
        let bits: Vec<u32> = lists
            .iter()
            .flat_map(|l| l.weights.iter().map(|w| w.to_bits()))
            .collect();
        let mut unit = Vec::with_capacity(plans.len() * kinds);
        for p in &plans {
            let lists: Vec<&[u32]> = p.lists.iter().map(|r| &targets[r.clone()]).collect();
            unit.push((
                Owner::Adjacency(dir),
                self.format.encode(p.vsid, p.flags, &lists),
            ));
            if self.weighted {
                let lists: Vec<&[u32]> = p.lists.iter().map(|r| &bits[r.clone()]).collect();
                unit.push((
                    Owner::Weights(dir),
                    self.format.encode(p.vsid, p.flags, &lists),
                ));
            }
        }
        let (ppns, done) = self.write_unit(flash, &unit, false, at, &NoProgress)?;
        let entries: Vec<GttEntry> = plans
            .iter()
            .zip(ppns.chunks(kinds))
            .map(|(p, ppns)| GttEntry::new(p.vsid, ppns[0]))
            .collect();
        let weight_entries: Vec<GttEntry> = plans
            .iter()
            .zip(ppns.chunks(kinds))
            .filter_map(|(p, ppns)| ppns.get(1).map(|&ppn| GttEntry::new(p.vsid, ppn)))
            .collect();
        let side = self.side(dir);
        let table = &mut self.tables[side];
        let mut old: Vec<Ppn> = group.iter().map(|&p| table.gtt.get(p).ppn()).collect();
        table.gtt.replace(group, &entries);
        if let Some(wgtt) = &mut table.weights {
            old.extend(group.iter().map(|&p| wgtt.get(p).ppn()));
            wgtt.replace(group, &weight_entries);
        }
        for ppn in old {
            self.area.invalidate(ppn);
        }
        for (list, records) in chains {
            for ppn in self.deltas.merged(list, &records) {
                self.area.invalidate(ppn);
            }
        }
        self.counters.rewrites += 1;
        self.counters.splits += u64::from(plans.len() > group.len());
        self.counters.pages_written += (plans.len() * kinds) as u64;
        Ok(done)
    }

    /// Runs GC, submitted at `at`, until the area has a free block per die
    /// and one more besides the blocks `pages` more pages need (or no
    /// block has an invalid page); then fails, changing nothing else, if
    /// the free blocks cannot hold those pages.
    fn make_room(&mut self, flash: &mut Flash, pages: u64, at: Nanos) -> Result<()> {
        let ppb = u64::from(flash.geometry().pages_per_block);
        let needed = pages.div_ceil(ppb);
        let want = u64::from(flash.geometry().dies()) + needed + 1;
        while (self.area.free_blocks() as u64) < want {
            let Some(victim) = self.area.victim() else {
                break;
            };
            self.collect(flash, victim, at)?;
        }
        if (self.area.free_blocks() as u64) < needed + 1 {
            return Err(Error::AreaFull {
                needed: pages,
                valid: self.area.valid(),
                total: self.area.pages(),
            });
        }
        Ok(())
    }

    /// Reclaims `block`, submitted at `at`: its valid pages are copied
    /// inside the device (tags kept) and the tables naming them fixed, a
    /// graph page's entry found by its start vertex and old page; then the
    /// block is erased and its pages queued for the host to drop.
    pub(super) fn collect(&mut self, flash: &mut Flash, block: Block, at: Nanos) -> Result<()> {
        let mut moved = at;
        for ppn in self.area.written(flash, block) {
            let Some(owner) = self.area.owner(ppn) else {
                continue;
            };
            let read = flash.read(ppn, at)?;
            let tag = Tag::decode(read.spare).ok_or_else(|| Error::CorruptPage {
                ppn: ppn.0,
                reason: "a valid graph page without its tag".into(),
            })?;
            let (data, read_done) = (read.data.to_vec(), read.done);
            let (to, written) = self.area.program(flash, tag, &data, read_done)?;
            moved = moved.max(written);
            match owner {
                Owner::Adjacency(dir) | Owner::Weights(dir) => {
                    let vsid = Page::decode(&data, ppn.0)?.vsid;
                    let table = self.table_mut(dir);
                    let gtt = match owner {
                        Owner::Adjacency(_) => &mut table.gtt,
                        _ => table
                            .weights
                            .as_mut()
                            .expect("weight pages need a weight GTT"),
                    };
                    let pos = gtt.find(vsid, ppn).ok_or_else(|| Error::CorruptPage {
                        ppn: ppn.0,
                        reason: format!("valid, but no GTT entry keyed {vsid} names it"),
                    })?;
                    gtt.set(pos, gtt.get(pos).with_ppn(to));
                }
                Owner::Delta => self.deltas.relocated(ppn, to),
            }
            self.area.invalidate(ppn);
            self.counters.relocated += 1;
        }
        self.invalidated.extend(self.area.written(flash, block));
        self.area.reclaim(flash, block, moved)?;
        self.counters.gc_runs += 1;
        Ok(())
    }
}

/// Checks `edits` against a graph of `vertices` vertices and returns the
/// count they grow it to: each [`Edit::Create`] names the next new id (as
/// an out-list), and every other list and target is below the count at
/// that point.
fn check_edits(mut vertices: u32, edits: impl IntoIterator<Item = (ListId, Edit)>) -> Result<u32> {
    for (list, edit) in edits {
        let v = list.vertex;
        if edit == Edit::Create {
            if v != vertices || list.dir != Dir::Out {
                return Err(Error::NotNextVertex {
                    vertex: v,
                    next: vertices,
                });
            }
            vertices += 1;
            continue;
        }
        let target = match edit {
            Edit::Add { target, .. } | Edit::Delete { target } | Edit::Reweight { target, .. } => {
                target
            }
            Edit::Create | Edit::Clear => v,
        };
        for vertex in [v, target] {
            if vertex >= vertices {
                return Err(Error::VertexOutOfRange { vertex, vertices });
            }
        }
    }
    Ok(vertices)
}
