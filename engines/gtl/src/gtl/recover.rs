//! Recovery after a power cut (GraphSSD §3.5): the GTL's tables live in
//! the controller's DRAM and are lost; they are rebuilt from what flash
//! holds, the pages' tags ([`Tag`]) and footers.
//!
//! The redo log is the delta graph: every update reaches flash first as
//! delta records (a direct update writes them too, then rewrites its
//! groups at once), and a rewritten group's pages hold every record of
//! their vertices older than their unit. Recovery therefore
//! 1. reads every programmed page of the area;
//! 2. drops the newest unit if any of its pages is missing (the write the
//!    power cut interrupted: GraphInitialize, a batch of records, or a
//!    rewrite, the paper's "crash during the new page write");
//! 3. gives each list to the newest unit whose pages hold it,
//!    and keeps exactly those pages (and their weight pages): an older
//!    copy is a page some later rewrite replaced;
//! 4. keeps as a delta chain every record newer than its list's unit
//!    (so a rewrite cut short, or one whose tables were not yet switched,
//!    is redone by the next merge, the paper's other recovery cases) and
//!    marks those vertices' pages dirty.
//!
//! Every other programmed page is invalid, for GC. Each unit's pages are
//! programmed one after another and a unit is acknowledged only when its
//! last page is, so what recovery keeps is exactly the acknowledged
//! updates, plus at most the one whose pages were all written when power
//! went.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Range;

use super::{tight_pages, Gtl, GtlCounters, Layout, Table};
use crate::area::{GraphArea, Owner, Tag};
use crate::blocks::Block;
use crate::delta::{Deltas, Dir, Edit, FoundPage, ListId};
use crate::error::{Error, Result};
use crate::flash::{Flash, Nanos, Ppn};
use crate::gtt::{Gtt, GttEntry};
use crate::page::{Page, PageFormat};

/// One programmed page of the area with its tag and bytes.
struct Found {
    ppn: Ppn,
    tag: Tag,
    data: Vec<u8>,
}

impl Gtl {
    /// Rebuilds the GTL of blocks `blocks` from `flash` after a power cut,
    /// reading every programmed page from `at`; `None` if GraphInitialize
    /// never completed. Returns when the scan finished.
    pub fn recover(
        flash: &mut Flash,
        blocks: Range<u32>,
        slack: f64,
        at: Nanos,
    ) -> Result<(Option<Gtl>, Nanos)> {
        let geometry = flash.geometry().clone();
        let format = PageFormat::new(geometry.page_bytes as usize, slack)?;
        let scan = GraphArea::recover(&geometry, blocks.clone(), flash, HashMap::new());
        let mut done = at;
        let mut found = Vec::new();
        let mut seen = HashSet::new();
        for ppn in scan.programmed(flash) {
            let read = flash.read(ppn, at)?;
            done = done.max(read.done);
            // A page without a tag, or a second copy GC made, adds nothing.
            if let Some(tag) = Tag::decode(read.spare) {
                if seen.insert((tag.seq, tag.index)) {
                    found.push(Found {
                        ppn,
                        tag,
                        data: read.data.to_vec(),
                    });
                }
            }
        }
        // Numbers are never reused, not even a torn unit's.
        let next_seq = found.iter().map(|f| f.tag.seq).max().map_or(0, |s| s + 1);
        let mut next_record = 0;
        for f in found.iter().filter(|f| f.tag.owner == Owner::Delta) {
            let (first, records) = Deltas::decode_page(&f.data, f.ppn)?;
            next_record = next_record.max(first + u32::try_from(records.len()).expect("fits u32"));
        }
        let mut torn = Vec::new();
        if let Some(newest) = found.iter().map(|f| f.tag).max_by_key(|t| t.seq) {
            let written = found.iter().filter(|f| f.tag.seq == newest.seq).count();
            if written < newest.count as usize {
                torn = found
                    .iter()
                    .filter(|f| f.tag.seq == newest.seq)
                    .map(|f| f.ppn)
                    .collect();
                found.retain(|f| f.tag.seq != newest.seq);
            }
        }
        let Some(kind) = found.first().map(|f| f.tag.graph) else {
            return Ok((None, done));
        };

        // Each list's newest unit, from the neighbour pages' footers.
        let dirs: &[Dir] = if kind.undirected {
            &[Dir::Out]
        } else {
            &[Dir::Out, Dir::In]
        };
        let side = |dir: Dir| usize::from(dir == Dir::In && !kind.undirected);
        let mut pages: Vec<(&Found, Page)> = Vec::new();
        for f in found.iter().filter(|f| f.tag.owner != Owner::Delta) {
            pages.push((f, Page::decode(&f.data, f.ppn.0)?));
        }
        pages.sort_by_key(|(f, _)| f.tag.seq);
        let mut units: Vec<Vec<u64>> = Vec::new();
        for &dir in dirs {
            let mut unit_of: Vec<Option<u64>> = Vec::new();
            for (f, page) in pages
                .iter()
                .filter(|(f, _)| f.tag.owner == Owner::Adjacency(dir))
            {
                let end = (page.vsid + page.vertices()) as usize;
                if unit_of.len() < end {
                    unit_of.resize(end, None);
                }
                unit_of[page.vsid as usize..end].fill(Some(f.tag.seq));
            }
            let unit_of: Vec<u64> = unit_of
                .into_iter()
                .enumerate()
                .map(|(v, u)| {
                    u.ok_or_else(|| Error::Unmountable {
                        reason: format!("no graph page holds vertex {v}'s {dir:?} list"),
                    })
                })
                .collect::<Result<_>>()?;
            if unit_of.is_empty() {
                if dir == Dir::Out {
                    return Ok((None, done));
                }
                return Err(Error::Unmountable {
                    reason: "a directed graph's out-lists are here but not its in-lists".into(),
                });
            }
            units.push(unit_of);
        }
        // A vertex past a direction's pages was added since its last group
        // was written: that group's unit is the one to compare with.
        let unit_at = |list: ListId| {
            let units = &units[side(list.dir)];
            units[(list.vertex as usize).min(units.len() - 1)]
        };

        // The pages each list's unit wrote, by direction, in key and page order.
        let mut valid = HashMap::new();
        let mut tables: Vec<Table> = dirs
            .iter()
            .map(|_| Table {
                gtt: Gtt::default(),
                weights: kind.weighted.then(Gtt::default),
            })
            .collect();
        let mut live: Vec<(Dir, &Found, &Page)> = Vec::new();
        for (f, page) in &pages {
            let (Owner::Adjacency(dir) | Owner::Weights(dir)) = f.tag.owner else {
                continue;
            };
            if unit_at(ListId {
                dir,
                vertex: page.vsid,
            }) == f.tag.seq
            {
                live.push((dir, f, page));
            }
        }
        live.sort_by_key(|(dir, f, page)| (*dir, page.vsid, f.tag.index));
        let data_bytes = live
            .iter()
            .map(|(_, _, p)| p.entries.len() as u64 * 4)
            .sum();
        let adjacency_bytes: u64 = live
            .iter()
            .filter(|(_, f, _)| matches!(f.tag.owner, Owner::Adjacency(_)))
            .map(|(_, _, p)| p.entries.len() as u64 * 4)
            .sum();
        for (dir, f, page) in live {
            valid.insert(f.ppn.0, f.tag.owner);
            let table = &mut tables[side(dir)];
            let gtt = match f.tag.owner {
                Owner::Weights(_) => table.weights.as_mut().ok_or_else(|| Error::CorruptPage {
                    ppn: f.ppn.0,
                    reason: "a weight page of an unweighted graph".into(),
                })?,
                _ => &mut table.gtt,
            };
            gtt.push(GttEntry::new(page.vsid, f.ppn));
        }

        // Records newer than their list's unit are its chain.
        let covered = units
            .iter()
            .map(|u| u32::try_from(u.len()).expect("vertex ids fit u32"))
            .max()
            .expect("a direction");
        let mut vertices = covered;
        let mut delta_pages = Vec::new();
        let mut chained = BTreeSet::new();
        for f in found.iter().filter(|f| f.tag.owner == Owner::Delta) {
            let (first, records) = Deltas::decode_page(&f.data, f.ppn)?;
            let count = u32::try_from(records.len()).expect("fits u32");
            let unmerged: Vec<(u32, ListId)> = (first..)
                .zip(records)
                .filter(|&(_, (list, _))| f.tag.seq > unit_at(list))
                .map(|(r, (list, edit))| {
                    if edit == Edit::Create {
                        vertices = vertices.max(list.vertex + 1);
                    }
                    chained.insert(list);
                    (r, list)
                })
                .collect();
            if !unmerged.is_empty() {
                valid.insert(f.ppn.0, Owner::Delta);
                delta_pages.push(FoundPage {
                    first,
                    count,
                    ppn: f.ppn,
                    unmerged,
                });
            }
        }
        for list in &chained {
            let gtt = &mut tables[side(list.dir)].gtt;
            let pos = gtt.locate(list.vertex)[0];
            gtt.set(pos, gtt.get(pos).with_dirty(true));
        }
        let invalidated = scan.programmed(flash);
        let area = GraphArea::recover(&geometry, blocks, flash, valid);
        let mut gtl = Gtl {
            format,
            vertices,
            weighted: kind.weighted,
            undirected: kind.undirected,
            layout: Layout {
                pages: tables.iter().map(|t| t.gtt.len() as u64).sum(),
                weight_pages: tables
                    .iter()
                    .map(|t| t.weights.as_ref().map_or(0, |w| w.len() as u64))
                    .sum(),
                gtt_bytes: 0,
                data_bytes,
                tight_pages: 0,
                done,
            },
            tables,
            area,
            deltas: Deltas::recover(delta_pages, next_record),
            invalidated,
            empty: Vec::new(),
            counters: GtlCounters::default(),
            seq: next_seq,
        };
        gtl.layout.gtt_bytes = gtl.gtt_bytes();
        let lists = u32::try_from(dirs.len()).expect("1 or 2");
        gtl.layout.tight_pages = tight_pages(&gtl.format, adjacency_bytes, vertices * lists);
        // A torn unit's pages must never count at a later mount, when a
        // newer unit would hide that they are torn: erase their blocks now.
        let blocks: BTreeSet<(u32, u32)> = torn
            .iter()
            .map(|&ppn| {
                let b = gtl.area.block_of(ppn);
                (b.die, b.block)
            })
            .collect();
        for (die, block) in blocks {
            gtl.collect(flash, Block { die, block }, done)?;
        }
        Ok((Some(gtl), done))
    }
}
