//! The Graph Translation Layer: GraphInitialize packs a CSR graph's lists
//! into pages and builds the GTT; GetAdjacencyList and GetEdgeWeight read
//! them back through the GTT.
//!
//! Packing (GraphSSD §3.2): lists go in vertex order; a list that does not
//! fit the rest of the current page starts a new page (never split); a
//! list longer than [`PageFormat::max_list`] starts a new page, fills as
//! many pages alone as it needs, and its last part opens a page that later
//! lists may share. Weight pages mirror the neighbour pages one for one
//! (same boundaries, same keys) under their own GTT. Page `i` of the
//! layout is the `i / dies`-th page of die `i % dies` in the GTL's blocks,
//! so consecutive pages are on different channels.

use std::ops::Range;

use quiver_csr::Graph;

use crate::flash::{Flash, Geometry, Nanos, Ppn};
use crate::gtt::{Gtt, GttEntry, MAX_PAGES};
use crate::page::{Page, PageFormat, CONTINUED, CONTINUES};
use crate::{Error, Fetched, Result};

/// One page of the layout before it is written.
#[derive(Debug)]
struct Plan {
    vsid: u32,
    flags: u32,
    /// Each list's range in the graph's targets.
    lists: Vec<Range<usize>>,
}

/// The pages of `graph` under `format`.
fn plan(graph: &Graph, format: &PageFormat) -> Vec<Plan> {
    let offsets = graph.offsets();
    let max = format.max_list();
    let mut pages = Vec::new();
    let mut open: Option<(Plan, usize)> = None;
    for v in 0..graph.num_vertices() {
        let start = usize::try_from(offsets[v as usize]).expect("an offset fits usize");
        let end = usize::try_from(offsets[v as usize + 1]).expect("an offset fits usize");
        let len = end - start;
        if len > max {
            pages.extend(open.take().map(|(p, _)| p));
            let mut at = start;
            while end - at > max {
                let flags = CONTINUES | if at > start { CONTINUED } else { 0 };
                pages.push(Plan {
                    vsid: v,
                    flags,
                    lists: one(at..at + max),
                });
                at += max;
            }
            open = Some((
                Plan {
                    vsid: v,
                    flags: CONTINUED,
                    lists: one(at..end),
                },
                end - at,
            ));
            continue;
        }
        match &mut open {
            Some((page, entries)) if format.fits(page.lists.len() + 1, *entries + len) => {
                page.lists.push(start..end);
                *entries += len;
            }
            _ => {
                pages.extend(open.take().map(|(p, _)| p));
                open = Some((
                    Plan {
                        vsid: v,
                        flags: 0,
                        lists: one(start..end),
                    },
                    len,
                ));
            }
        }
    }
    pages.extend(open.map(|(p, _)| p));
    pages
}

/// What GraphInitialize did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Neighbour pages (= adjacency GTT entries).
    pub pages: u64,
    /// Weight pages (0 for an unweighted graph).
    pub weight_pages: u64,
    /// Bytes of the adjacency GTT and the weight GTT.
    pub gtt_bytes: u64,
    /// Bytes of graph data (entries, both kinds) in those pages.
    pub data_bytes: u64,
    /// When the last page was programmed.
    pub done: Nanos,
}

/// The GTL of one loaded graph.
#[derive(Debug)]
pub struct Gtl {
    format: PageFormat,
    vertices: u32,
    gtt: Gtt,
    weight_gtt: Option<Gtt>,
    layout: Layout,
}

impl Gtl {
    /// GraphInitialize: writes `graph`'s out-lists (and weights) with
    /// `slack` to blocks `blocks` of every die, submitted at `at`. Each page
    /// crosses the host link and is programmed; all are issued at once, so
    /// the dies work in parallel.
    pub fn initialize(
        flash: &mut Flash,
        blocks: Range<u32>,
        graph: &Graph,
        slack: f64,
        at: Nanos,
    ) -> Result<Gtl> {
        let geometry = flash.geometry().clone();
        if geometry.pages() > MAX_PAGES {
            return Err(quiver_run::InvalidArgument::new(
                "geometry",
                format!(
                    "{} pages do not fit a GTT entry's 29 bits",
                    geometry.pages()
                ),
            )
            .into());
        }
        let format = PageFormat::new(geometry.page_bytes as usize, slack)?;
        let plans = plan(graph, &format);
        let weights = graph.weights();
        let pages = plans.len() as u64;
        let needed = pages * if weights.is_some() { 2 } else { 1 };
        let available = u64::from(geometry.dies())
            * u64::from(blocks.end - blocks.start)
            * u64::from(geometry.pages_per_block);
        if needed > available {
            return Err(Error::GeometryTooSmall {
                area: "graph area",
                needed,
                available,
            });
        }
        let targets = graph.targets();
        let mut done = at;
        let mut gtt = Gtt::default();
        let mut weight_gtt = weights.map(|_| Gtt::default());
        for (i, p) in plans.iter().enumerate() {
            let lists: Vec<&[u32]> = p.lists.iter().map(|r| &targets[r.clone()]).collect();
            let ppn = place(&geometry, &blocks, i as u64);
            done = done.max(write(
                flash,
                ppn,
                &format.encode(p.vsid, p.flags, &lists),
                at,
            )?);
            gtt.push(GttEntry::new(p.vsid, ppn));
        }
        if let (Some(weights), Some(wgtt)) = (weights, &mut weight_gtt) {
            for (i, p) in plans.iter().enumerate() {
                let bits: Vec<Vec<u32>> = p
                    .lists
                    .iter()
                    .map(|r| weights[r.clone()].iter().map(|w| w.to_bits()).collect())
                    .collect();
                let lists: Vec<&[u32]> = bits.iter().map(Vec::as_slice).collect();
                let ppn = place(&geometry, &blocks, pages + i as u64);
                done = done.max(write(
                    flash,
                    ppn,
                    &format.encode(p.vsid, p.flags, &lists),
                    at,
                )?);
                wgtt.push(GttEntry::new(p.vsid, ppn));
            }
        }
        let gtt_bytes = (gtt.bytes() + weight_gtt.as_ref().map_or(0, Gtt::bytes)) as u64;
        let entries = graph.num_edges() * if weights.is_some() { 2 } else { 1 };
        let layout = Layout {
            pages,
            weight_pages: if weights.is_some() { pages } else { 0 },
            gtt_bytes,
            data_bytes: entries * 4,
            done,
        };
        Ok(Gtl {
            format,
            vertices: graph.num_vertices(),
            gtt,
            weight_gtt,
            layout,
        })
    }

    /// The page format (size, budget).
    pub fn format(&self) -> &PageFormat {
        &self.format
    }

    /// The adjacency GTT.
    pub fn gtt(&self) -> &Gtt {
        &self.gtt
    }

    /// The weight GTT, for a weighted graph.
    pub fn weight_gtt(&self) -> Option<&Gtt> {
        self.weight_gtt.as_ref()
    }

    /// What GraphInitialize wrote.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// |V|.
    pub fn vertices(&self) -> u32 {
        self.vertices
    }

    fn check(&self, vertex: u32) -> Result<()> {
        if vertex >= self.vertices {
            return Err(Error::VertexOutOfRange {
                vertex,
                vertices: self.vertices,
            });
        }
        Ok(())
    }

    /// The GTT positions of the pages holding `vertex`'s list.
    pub fn pages_of(&self, vertex: u32) -> Result<Range<usize>> {
        self.check(vertex)?;
        let range = self.gtt.locate(vertex);
        assert!(!range.is_empty(), "the GTT covers every vertex");
        Ok(range)
    }

    /// GetAdjacencyList(`vertex`), submitted at `at`: one GTT lookup, then
    /// every page of the list read and sent to the host in parallel.
    pub fn get_adjacency_list(
        &self,
        flash: &mut Flash,
        vertex: u32,
        at: Nanos,
    ) -> Result<Fetched<Vec<u32>>> {
        let range = self.pages_of(vertex)?;
        let (chunks, done) = read_lists(flash, &self.gtt, range.clone(), vertex, at)?;
        Ok(Fetched {
            value: chunks.concat(),
            pages_read: range.len() as u64,
            submitted: at,
            done,
        })
    }

    /// GetEdgeWeight(`source`, `target`), submitted at `at`: the source's
    /// neighbour pages, then the one weight page holding the first
    /// occurrence of `target` (its position in the list is its position
    /// in the weights). `None` if there is no such edge.
    pub fn get_edge_weight(
        &self,
        flash: &mut Flash,
        source: u32,
        target: u32,
        at: Nanos,
    ) -> Result<Fetched<Option<f32>>> {
        let weight_gtt = self.weight_gtt.as_ref().ok_or(Error::Unweighted)?;
        self.check(target)?;
        let range = self.pages_of(source)?;
        let (chunks, found) = read_lists(flash, &self.gtt, range.clone(), source, at)?;
        let mut fetched = Fetched {
            value: None,
            pages_read: range.len() as u64,
            submitted: at,
            done: found,
        };
        let hit = chunks
            .iter()
            .enumerate()
            .find_map(|(k, chunk)| chunk.iter().position(|&t| t == target).map(|i| (k, i)));
        if let Some((k, i)) = hit {
            let page = range.start + k;
            let (weights, done) = read_lists(flash, weight_gtt, page..page + 1, source, found)?;
            fetched.value = Some(f32::from_bits(weights[0][i]));
            fetched.pages_read += 1;
            fetched.done = done;
        }
        Ok(fetched)
    }
}

/// The `i`-th page of the layout: die `i % dies`, its `i / dies`-th page in `blocks`.
fn place(geometry: &Geometry, blocks: &Range<u32>, i: u64) -> Ppn {
    let dies = u64::from(geometry.dies());
    let ppb = u64::from(geometry.pages_per_block);
    let (die, k) = (i % dies, i / dies);
    // The caller checked the layout fits the area, so these fit u32.
    let die = u32::try_from(die).expect("a die index fits u32");
    let block = blocks.start + u32::try_from(k / ppb).expect("a block fits u32");
    let page = u32::try_from(k % ppb).expect("a page index fits u32");
    geometry.ppn(die, block, page)
}

/// Sends `page` over the host link and programs it at `ppn`.
fn write(flash: &mut Flash, ppn: Ppn, page: &[u8], at: Nanos) -> Result<Nanos> {
    let arrived = flash.host_transfer(page.len() as u64, at);
    flash.program(ppn, page, &[], arrived)
}

/// Reads the pages of GTT positions `range` in parallel, submitted at `at`,
/// and returns `vertex`'s list in each, and when the last reached the host.
fn read_lists(
    flash: &mut Flash,
    gtt: &Gtt,
    range: Range<usize>,
    vertex: u32,
    at: Nanos,
) -> Result<(Vec<Vec<u32>>, Nanos)> {
    let mut done = at;
    let mut chunks = Vec::with_capacity(range.len());
    for entry in &gtt.entries()[range] {
        let ppn = entry.ppn();
        let read = flash.read(ppn, at)?;
        let page = Page::decode(read.data, ppn.0)?;
        let nand = read.done;
        chunks.push(list_of(&page, entry, vertex)?.to_vec());
        let bytes = u64::from(flash.geometry().page_bytes);
        done = done.max(flash.host_transfer(bytes, nand));
    }
    Ok((chunks, done))
}

/// `vertex`'s list in `page`, read through GTT `entry`, after checking that
/// the page is the one the entry names (it starts at the entry's vertex).
pub(crate) fn list_of<'p>(page: &'p Page, entry: &GttEntry, vertex: u32) -> Result<&'p [u32]> {
    let ppn = entry.ppn().0;
    if page.vsid != entry.vertex() {
        return Err(Error::CorruptPage {
            ppn,
            reason: format!(
                "starts at vertex {}, its GTT entry at {}",
                page.vsid,
                entry.vertex()
            ),
        });
    }
    page.list(vertex).ok_or_else(|| Error::CorruptPage {
        ppn,
        reason: format!("holds no list of vertex {vertex}"),
    })
}

/// A page's list of ranges holding `range` alone.
fn one(range: Range<usize>) -> Vec<Range<usize>> {
    std::iter::once(range).collect()
}
