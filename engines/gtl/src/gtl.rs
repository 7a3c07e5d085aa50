//! The Graph Translation Layer: GraphInitialize packs a CSR graph's lists
//! into pages and builds the GTT; GetAdjacencyList and GetEdgeWeight read
//! them back through the GTT (and the delta graph); updates rewrite pages
//! out of place (the direct path) or go to the delta graph, which merges
//! into the pages later; GC moves graph pages and fixes the tables.
//!
//! Packing (GraphSSD §3.2): lists go in vertex order; a list that does not
//! fit the rest of the current page starts a new page (never split); a
//! list longer than [`PageFormat::max_list`] starts a new page, fills as
//! many pages alone as it needs, and its last part opens a page that later
//! lists may share. Weight pages mirror the neighbour pages one for one
//! (same boundaries, same keys) under their own GTT. Pages are allocated
//! striped over the dies, so consecutive pages are on different channels.
//!
//! Rewrites (GraphSSD §3.3, Fig. 8): an update or a merge reads the
//! group of pages holding the changed lists (see [`crate::gtt`]), applies
//! the changes and the group's unmerged delta chains, and writes the
//! group's lists to new pages: one page if they fit; else, if no list is
//! longer than a page holds, two pages split at the vertex boundary that
//! leaves their free space most equal (the paper's balanced split); else
//! as GraphInitialize packs. The old pages become invalid, the group's
//! entries now name the new pages (an extended list if their number
//! changed), and the new entries are clean.
//!
//! GC (GraphSSD §3.5): before a write, while the area's free blocks are
//! fewer than one per die plus the blocks the write needs, the closed block
//! with the fewest valid pages is reclaimed: its valid pages are copied
//! inside the device, a graph page's entry found by its start vertex and
//! old page, a delta page's by its old page, and the erased pages are
//! queued for the host to drop from its cache.
//!
//! This file holds the GTL's state, GraphInitialize and the accessors; by
//! concern: `plan` (packing), `read` (the read path), `rewrite` (the delta
//! log, direct rewrites, merges, GC), `check` (the structure check) and
//! `recover` (recovery from flash alone).

mod check;
mod plan;
mod read;
mod recover;
mod rewrite;

pub(crate) use plan::{encode_pages, lens, pages_needed, plan, Plan};
use plan::{plan_rewrite, tight_pages, transpose};
pub(crate) use read::list_of;

use std::ops::Range;

use quiver_csr::Graph;
use quiver_run::{Progress, Unit};

use crate::area::{GraphArea, GraphKind, Owner, Tag};
use crate::delta::{Adjacency, Deltas, Dir, ListId};
use crate::error::{Error, Result};
use crate::flash::{Flash, Nanos, Ppn};
use crate::ftl::gc_reserve;
use crate::gtt::{Gtt, GttEntry};
use crate::page::{PageFormat, ENTRY};

/// Pages a unit programs between reports to its progress (1 MiB of 16 KiB
/// pages): where a cancelled GraphInitialize stops.
const PAGES_A_REPORT: u32 = 64;

/// What GraphInitialize did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Neighbour pages (= adjacency GTT entries), of both directions on a
    /// directed graph.
    pub pages: u64,
    /// Weight pages (0 for an unweighted graph).
    pub weight_pages: u64,
    /// Bytes of the adjacency GTT and the weight GTT.
    pub gtt_bytes: u64,
    /// Bytes of graph data (entries, both kinds) in those pages.
    pub data_bytes: u64,
    /// Neighbour pages a packing free to split any list anywhere would
    /// fill to the same budget (each page still with its footer and End
    /// tuple): what never splitting a list that fits a page costs is
    /// `pages / tight_pages - 1` (the paper's 4.8–4.9%, §6.4).
    pub tight_pages: u64,
    /// When the last page was programmed.
    pub done: Nanos,
}

/// What the GTL has done since GraphInitialize.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GtlCounters {
    /// Neighbour and weight pages read by rewrites (direct updates, merges).
    pub pages_read: u64,
    /// Neighbour and weight pages programmed by rewrites.
    pub pages_written: u64,
    /// Groups rewritten (one per direct update, one per merged group).
    pub rewrites: u64,
    /// Rewrites that wrote more pages than they replaced.
    pub splits: u64,
    /// Delta records appended.
    pub delta_records: u64,
    /// Delta pages programmed.
    pub delta_pages: u64,
    /// Delta pages read while following chains.
    pub delta_pages_read: u64,
    /// Blocks GC reclaimed.
    pub gc_runs: u64,
    /// Valid pages GC moved.
    pub relocated: u64,
}

/// What a merge (or part of one) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Merged {
    /// Groups rewritten.
    pub groups: u64,
    /// Groups still dirty.
    pub remaining: u64,
    /// When the last rewrite completed.
    pub done: Nanos,
}

/// The GTTs of one direction's lists: the adjacency GTT and, on a
/// weighted graph, the weight GTT, the same shape (GraphSSD §3.2: separate
/// in and out GTTs for directed graphs, a separate one for weights).
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub gtt: Gtt,
    pub weights: Option<Gtt>,
}

/// A group of pages as read: the lists (and weights) of every vertex it
/// covers from `first`, with the merged chains' lists and records, the
/// pages it took, and when the last arrived.
struct GroupRead {
    first: u32,
    lists: Vec<Adjacency>,
    chains: Vec<(ListId, Vec<u32>)>,
    pages_read: u64,
    delta_pages_read: u64,
    done: Nanos,
}

/// The GTL of one loaded graph.
#[derive(Debug)]
pub struct Gtl {
    format: PageFormat,
    vertices: u32,
    weighted: bool,
    undirected: bool,
    /// The out-lists' table, and on a directed graph the in-lists'.
    tables: Vec<Table>,
    area: GraphArea,
    deltas: Deltas,
    invalidated: Vec<Ppn>,
    layout: Layout,
    counters: GtlCounters,
    /// The next unit's sequence number.
    seq: u64,
    /// Empty marks (ours, when asked for): a bit per vertex, set for an
    /// out-list that GraphInitialize laid out empty and no edit has named
    /// since, so the host need not read a page to learn it is empty. Not
    /// kept through a power cut (recovery starts with none set).
    empty: Vec<u64>,
}

impl Gtl {
    /// GraphInitialize: writes `graph`'s out-lists (and a directed graph's
    /// in-lists, and the weights of both) with
    /// `slack` to blocks `blocks` of every die, submitted at `at`. Each page
    /// crosses the host link and is programmed; all are issued at once, so
    /// the dies work in parallel. The area keeps room for GC. `progress`
    /// hears of the pages programmed, and stops the work between pages
    /// ([`Error::Cancelled`]) when it asks.
    pub fn initialize(
        flash: &mut Flash,
        blocks: Range<u32>,
        graph: &Graph,
        (slack, mark_empty): (f64, bool),
        at: Nanos,
        progress: &dyn Progress,
    ) -> Result<Gtl> {
        let geometry = flash.geometry().clone();
        if graph.num_vertices() == 0 {
            return Err(
                quiver_run::InvalidArgument::new("graph", "has no vertices to lay out").into(),
            );
        }
        let format = PageFormat::new(geometry.page_bytes as usize, slack)?;
        let weighted = graph.is_weighted();
        // The lists of each direction: out-lists, and a directed graph's in-lists.
        let transposed = if graph.is_undirected() {
            None
        } else {
            Some(transpose(graph, progress)?)
        };
        let mut sides = vec![(Dir::Out, graph.offsets(), graph.targets(), graph.weights())];
        if let Some((offsets, targets, weights)) = &transposed {
            sides.push((Dir::In, offsets, targets, weights.as_deref()));
        }
        let plans: Vec<Vec<Plan>> = sides
            .iter()
            .map(|(_, offsets, ..)| plan(0, lens(offsets), &format))
            .collect();
        let kinds = 1 + u64::from(weighted);
        let pages: u64 = plans.iter().map(|p| p.len() as u64).sum();
        let needed = pages * kinds;
        let area_pages = u64::from(geometry.dies())
            * u64::from(blocks.end - blocks.start)
            * u64::from(geometry.pages_per_block);
        let available = area_pages.saturating_sub(gc_reserve(&geometry));
        if needed > available {
            return Err(Error::GeometryTooSmall {
                area: "graph area",
                needed,
                available,
            });
        }
        let (area, at) = GraphArea::format(flash, blocks, at)?;
        let mut gtl = Gtl {
            format,
            vertices: graph.num_vertices(),
            weighted,
            undirected: graph.is_undirected(),
            tables: Vec::new(),
            area,
            deltas: Deltas::default(),
            invalidated: Vec::new(),
            // Filled in below, once the pages are written.
            layout: Layout::default(),
            counters: GtlCounters::default(),
            seq: 0,
            empty: Vec::new(),
        };
        if mark_empty {
            gtl.empty = vec![0; graph.num_vertices().div_ceil(64) as usize];
            for v in (0..graph.num_vertices()).filter(|&v| graph.degree(v) == 0) {
                gtl.empty[v as usize / 64] |= 1 << (v % 64);
            }
        }
        let mut unit = Vec::with_capacity(usize::try_from(needed).expect("fits memory"));
        for ((dir, _, targets, weights), plans) in sides.iter().zip(&plans) {
            let pages = encode_pages(plans, targets, &gtl.format);
            unit.extend(pages.into_iter().map(|page| (Owner::Adjacency(*dir), page)));
            progress.check()?;
            if let Some(weights) = weights {
                let bits: Vec<u32> = weights.iter().map(|w| w.to_bits()).collect();
                let pages = encode_pages(plans, &bits, &gtl.format);
                unit.extend(pages.into_iter().map(|page| (Owner::Weights(*dir), page)));
                progress.check()?;
            }
        }
        let bytes = needed * u64::from(geometry.page_bytes);
        progress.start("writing graph pages", Unit::Bytes, Some(bytes));
        let (ppns, done) = gtl.write_unit(flash, &unit, true, at, progress)?;
        let mut ppns = ppns.into_iter();
        for plans in &plans {
            let mut table = Table::default();
            for p in plans {
                table
                    .gtt
                    .push(GttEntry::new(p.vsid, ppns.next().expect("a page each")));
            }
            if weighted {
                let mut wgtt = Gtt::default();
                for p in plans {
                    wgtt.push(GttEntry::new(p.vsid, ppns.next().expect("a page each")));
                }
                table.weights = Some(wgtt);
            }
            gtl.tables.push(table);
        }
        let lists = sides.len() as u64;
        let entry_bytes = graph.num_edges() * ENTRY as u64 * lists;
        gtl.layout = Layout {
            pages,
            weight_pages: if weighted { pages } else { 0 },
            gtt_bytes: gtl.gtt_bytes(),
            data_bytes: entry_bytes * kinds,
            tight_pages: tight_pages(
                &gtl.format,
                entry_bytes,
                graph.num_vertices() * u32::try_from(lists).expect("1 or 2"),
            ),
            done,
        };
        Ok(gtl)
    }

    /// Programs `pages` as one unit (tagged with the next sequence
    /// number), submitted at `at`, each first sent over the host link if
    /// `upload`; returns where they went and when the last was programmed.
    /// `progress` hears of every [`PAGES_A_REPORT`] pages, and may stop the
    /// unit there: a unit cut short is incomplete, as after a power cut.
    fn write_unit(
        &mut self,
        flash: &mut Flash,
        pages: &[(Owner, Vec<u8>)],
        upload: bool,
        at: Nanos,
        progress: &dyn Progress,
    ) -> Result<(Vec<Ppn>, Nanos)> {
        let seq = self.seq;
        self.seq += 1;
        let count = u32::try_from(pages.len()).expect("a unit has fewer than 2^32 pages");
        let mut done = at;
        let mut ppns = Vec::with_capacity(pages.len());
        for (index, (owner, data)) in (0..).zip(pages) {
            let arrived = if upload {
                flash.host_transfer(data.len() as u64, at)
            } else {
                at
            };
            let tag = Tag {
                owner: *owner,
                seq,
                index,
                count,
                graph: self.kind(),
            };
            let (ppn, written) = self.area.program(flash, tag, data, arrived)?;
            ppns.push(ppn);
            done = done.max(written);
            if (index + 1) % PAGES_A_REPORT == 0 {
                progress.advance(u64::from(PAGES_A_REPORT) * data.len() as u64);
                progress.check()?;
            }
        }
        Ok((ppns, done))
    }

    /// The graph's kind, as every tag records it.
    fn kind(&self) -> GraphKind {
        GraphKind {
            weighted: self.weighted,
            undirected: self.undirected,
        }
    }

    /// The page format (size, budget).
    pub fn format(&self) -> &PageFormat {
        &self.format
    }

    /// The out-lists' adjacency GTT.
    pub fn gtt(&self) -> &Gtt {
        &self.tables[0].gtt
    }

    /// The out-lists' weight GTT, for a weighted graph.
    pub fn weight_gtt(&self) -> Option<&Gtt> {
        self.tables[0].weights.as_ref()
    }

    /// The table of `dir`'s lists.
    pub(crate) fn table(&self, dir: Dir) -> &Table {
        &self.tables[self.side(dir)]
    }

    fn table_mut(&mut self, dir: Dir) -> &mut Table {
        let side = self.side(dir);
        &mut self.tables[side]
    }

    /// Where `dir`'s table is: the in-lists' are the out-lists' on an
    /// undirected graph.
    fn side(&self, dir: Dir) -> usize {
        match dir {
            Dir::In if self.tables.len() > 1 => 1,
            _ => 0,
        }
    }

    /// Whether `vertex`'s out-list is marked empty (see
    /// [`Config::mark_empty`](crate::Config::mark_empty)).
    pub fn marked_empty(&self, vertex: u32) -> bool {
        self.empty
            .get(vertex as usize / 64)
            .is_some_and(|word| word & (1 << (vertex % 64)) != 0)
    }

    /// Bytes of the empty marks (0 when not kept).
    pub fn empty_mark_bytes(&self) -> u64 {
        self.empty.len() as u64 * 8
    }

    /// Bytes of every GTT now (extended lists included).
    pub fn gtt_bytes(&self) -> u64 {
        let table = |t: &Table| t.gtt.bytes() + t.weights.as_ref().map_or(0, Gtt::bytes);
        self.tables.iter().map(table).sum::<usize>() as u64
    }

    /// What GraphInitialize wrote.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// What the GTL has done since.
    pub fn counters(&self) -> &GtlCounters {
        &self.counters
    }

    /// |V|, vertices added since GraphInitialize included.
    pub fn vertices(&self) -> u32 {
        self.vertices
    }

    /// Whether lists carry weights.
    pub fn weighted(&self) -> bool {
        self.weighted
    }

    /// Whether the graph changed since GraphInitialize (any unit written
    /// after its own).
    pub fn updated(&self) -> bool {
        self.seq > 1
    }

    /// Whether the graph is undirected (each edge in both lists).
    pub fn undirected(&self) -> bool {
        self.undirected
    }

    /// Lists with unmerged delta records.
    pub fn chained(&self) -> usize {
        self.deltas.chained()
    }

    /// Pages erased since the last call: a host caching pages by physical
    /// page drops these (GraphSSD's host cache invalidation requests).
    pub fn take_invalidated(&mut self) -> Vec<Ppn> {
        std::mem::take(&mut self.invalidated)
    }
}
