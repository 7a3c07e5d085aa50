//! The read path: a list's pages through the GTT, its delta chain, and
//! GetAdjacencyList and GetEdgeWeight on the device.

use super::Gtl;
use crate::delta::{Adjacency, Chain, DeltaBuffer, Dir, ListId};
use crate::error::{check_vertex, Error, Result};
use crate::flash::{Fetched, Flash, Nanos};
use crate::gtt::GttEntry;
use crate::page::Page;

impl Gtl {
    fn check(&self, vertex: u32) -> Result<()> {
        check_vertex(vertex, self.vertices)
    }

    /// The GTT entries of the pages holding `vertex`'s out-list, in order.
    pub fn pages_of(&self, vertex: u32) -> Result<Vec<GttEntry>> {
        self.pages_of_list(ListId::out(vertex))
    }

    /// The GTT entries of the pages holding `list`, in order.
    pub fn pages_of_list(&self, list: ListId) -> Result<Vec<GttEntry>> {
        self.check(list.vertex)?;
        let gtt = &self.table(list.dir).gtt;
        let pages: Vec<GttEntry> = gtt
            .locate(list.vertex)
            .into_iter()
            .map(|p| gtt.get(p))
            .collect();
        assert!(!pages.is_empty(), "the GTT covers every vertex");
        Ok(pages)
    }

    /// The list an undirected graph keeps for `list` (its in-lists are its
    /// out-lists).
    fn stored(&self, list: ListId) -> ListId {
        ListId {
            dir: if self.side(list.dir) == 0 {
                Dir::Out
            } else {
                Dir::In
            },
            ..list
        }
    }

    /// `list`'s unmerged chain, read from flash at `at`, if its pages
    /// `pages` are dirty (for the host, which reads the pages itself).
    pub(crate) fn chain(
        &mut self,
        flash: &mut Flash,
        list: ListId,
        pages: &[GttEntry],
        at: Nanos,
    ) -> Result<Option<Chain>> {
        let list = self.stored(list);
        if !pages.iter().any(GttEntry::dirty) || !self.deltas.has_chain(list) {
            return Ok(None);
        }
        let chain = self
            .deltas
            .chain(flash, list, at, &mut DeltaBuffer::new())?;
        self.counters.delta_pages_read += chain.pages_read;
        Ok(Some(chain))
    }

    /// `list` and its weights as they are now, submitted at `at`: its
    /// pages (and weight pages, if `with_weights`) read in parallel and
    /// sent to the host, then its delta chain if its pages are dirty.
    pub fn read_list(
        &mut self,
        flash: &mut Flash,
        list: ListId,
        with_weights: bool,
        at: Nanos,
    ) -> Result<Fetched<Adjacency>> {
        let list = self.stored(list);
        let vertex = list.vertex;
        let pages = self.pages_of_list(list)?;
        let page_bytes = u64::from(flash.geometry().page_bytes);
        let mut read_list = Adjacency::default();
        let mut done = at;
        let mut pages_read = 0;
        for entry in &pages {
            let (page, read) = read_page(flash, *entry, at)?;
            read_list
                .targets
                .extend_from_slice(list_of(&page, entry, vertex)?);
            done = done.max(flash.host_transfer(page_bytes, read));
            pages_read += 1;
        }
        if with_weights && self.weighted {
            let wgtt = self.table(list.dir).weights.as_ref().expect("weighted");
            let entries: Vec<GttEntry> = wgtt
                .locate(vertex)
                .into_iter()
                .map(|p| wgtt.get(p))
                .collect();
            for entry in entries {
                let (page, read) = read_page(flash, entry, at)?;
                let bits = list_of(&page, &entry, vertex)?;
                read_list
                    .weights
                    .extend(bits.iter().map(|&b| f32::from_bits(b)));
                done = done.max(flash.host_transfer(page_bytes, read));
                pages_read += 1;
            }
        }
        if let Some(chain) = self.chain(flash, list, &pages, done)? {
            for &edit in &chain.edits {
                read_list.apply(edit, with_weights && self.weighted);
            }
            pages_read += chain.pages_read;
            done = flash.host_transfer(chain.pages_read * page_bytes, chain.done);
        }
        Ok(Fetched {
            value: read_list,
            pages_read,
            submitted: at,
            done,
        })
    }

    /// GetAdjacencyList(`vertex`), submitted at `at`: one GTT lookup, then
    /// every page of the list read and sent to the host in parallel (and
    /// the delta chain, if the pages are dirty).
    pub fn get_adjacency_list(
        &mut self,
        flash: &mut Flash,
        vertex: u32,
        at: Nanos,
    ) -> Result<Fetched<Vec<u32>>> {
        let fetched = self.read_list(flash, ListId::out(vertex), false, at)?;
        Ok(Fetched {
            value: fetched.value.targets,
            pages_read: fetched.pages_read,
            submitted: fetched.submitted,
            done: fetched.done,
        })
    }

    /// GetEdgeWeight(`source`, `target`), submitted at `at`: the source's
    /// neighbour pages, then the one weight page holding the first
    /// occurrence of `target` (its position in the list is its position
    /// in the weights). `None` if there is no such edge. A source with
    /// unmerged deltas reads its whole list with weights and its chain.
    pub fn get_edge_weight(
        &mut self,
        flash: &mut Flash,
        source: u32,
        target: u32,
        at: Nanos,
    ) -> Result<Fetched<Option<f32>>> {
        if !self.weighted {
            return Err(Error::Unweighted);
        }
        self.check(target)?;
        let pages = self.pages_of(source)?;
        if pages.iter().any(GttEntry::dirty) {
            let fetched = self.read_list(flash, ListId::out(source), true, at)?;
            return Ok(Fetched {
                value: fetched.value.weight(target),
                pages_read: fetched.pages_read,
                submitted: at,
                done: fetched.done,
            });
        }
        let page_bytes = u64::from(flash.geometry().page_bytes);
        let mut found = at;
        let mut hit = None;
        for (k, entry) in pages.iter().enumerate() {
            let (page, read) = read_page(flash, *entry, at)?;
            let list = list_of(&page, entry, source)?;
            found = found.max(flash.host_transfer(page_bytes, read));
            if hit.is_none() {
                hit = list.iter().position(|&t| t == target).map(|i| (k, i));
            }
        }
        let mut fetched = Fetched {
            value: None,
            pages_read: pages.len() as u64,
            submitted: at,
            done: found,
        };
        if let Some((k, i)) = hit {
            let weight_gtt = self.tables[0].weights.as_ref().expect("weighted");
            let entry = weight_gtt.get(weight_gtt.locate(source)[k]);
            let (page, read) = read_page(flash, entry, found)?;
            fetched.value = Some(f32::from_bits(list_of(&page, &entry, source)?[i]));
            fetched.pages_read += 1;
            fetched.done = flash.host_transfer(page_bytes, read);
        }
        Ok(fetched)
    }
}

/// Reads and decodes the page `entry` names, submitted at `at`.
pub(super) fn read_page(flash: &mut Flash, entry: GttEntry, at: Nanos) -> Result<(Page, Nanos)> {
    let ppn = entry.ppn();
    let read = flash.read(ppn, at)?;
    Ok((Page::decode(read.data, ppn.0)?, read.done))
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
    Ok(page.list(vertex).unwrap_or(&[]))
}
