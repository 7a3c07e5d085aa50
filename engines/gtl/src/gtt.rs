//! The Graph Translation Table (GraphSSD §3.2–3.3, Fig. 5 and 7): one
//! entry per graph page, keyed by the smallest vertex whose list the page
//! holds, sorted, looked up by binary search; and the extended GTT, which
//! takes the entries of split pages without shifting the sorted table.
//!
//! An entry is 8 bytes, the paper's size: the key (`u32`) and one `u32`
//! packing the physical page number (29 bits, so a GTL area of up to 2^29
//! pages, 8 TiB of 16 KiB pages) with the dirty, extension and valid bits.
//! A dense vertex has one entry per page of its list, all with its key, in
//! consecutive positions.
//!
//! **Groups and the extended GTT.** A page is rewritten together with
//! every page sharing its key (a dense vertex's pages and its tail page),
//! its *group*, which covers whole lists. When a rewrite changes the
//! group's page count, the group's first main entry takes the extension
//! bit, its page field becomes the index of an extended list holding the
//! new pages' entries, and the group's other main entries lose their valid
//! bit (they keep their key, so the table stays sorted). A later rewrite of
//! pages in an extended list splices that list, which is short. An
//! extended list under a main key `k` holds keys from `k` up to the next
//! valid main key, so lookup is two binary searches.
//!
//! Invariants: valid main entries are sorted by key; for each key, its
//! valid main entries are either all plain or one extended entry; each
//! extended list is sorted and non-empty, its first key the main key; the
//! leaves (valid plain main entries and extended entries, in order) are
//! sorted, with equal keys only for one dense vertex's pages.

use crate::flash::Ppn;

const VALID: u32 = 1;
const EXTENSION: u32 = 2;
const DIRTY: u32 = 4;
const FLAG_BITS: u32 = 3;

/// Physical pages a GTT entry can name.
pub const MAX_PAGES: u64 = 1 << (32 - FLAG_BITS);

/// One GTT entry: a start vertex, a physical page (or an extended list)
/// and three bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GttEntry {
    vertex: u32,
    slot: u32,
}

impl GttEntry {
    /// A valid, clean, unextended entry mapping `vertex` to `ppn`.
    /// Panics if `ppn` does not fit 29 bits (the device checks its size first).
    pub fn new(vertex: u32, ppn: Ppn) -> GttEntry {
        assert!(ppn.0 < MAX_PAGES, "page {} does not fit a GTT entry", ppn.0);
        // Checked just above: the page fits 29 bits.
        let ppn = u32::try_from(ppn.0).expect("below 2^29");
        GttEntry {
            vertex,
            slot: ppn << FLAG_BITS | VALID,
        }
    }

    fn extended(vertex: u32, list: usize) -> GttEntry {
        let list = u32::try_from(list)
            .ok()
            .filter(|&l| u64::from(l) < MAX_PAGES)
            .expect("fewer than 2^29 extended lists");
        GttEntry {
            vertex,
            slot: list << FLAG_BITS | EXTENSION | VALID,
        }
    }

    /// The smallest vertex with a list in the page.
    pub fn vertex(&self) -> u32 {
        self.vertex
    }

    /// The physical page (for an extended entry, its list's index).
    pub fn ppn(&self) -> Ppn {
        Ppn(u64::from(self.slot >> FLAG_BITS))
    }

    /// D: a delta graph holds updates for the page's vertices.
    pub fn dirty(&self) -> bool {
        self.slot & DIRTY != 0
    }

    /// E: the page field points to an extended-GTT list.
    pub fn extension(&self) -> bool {
        self.slot & EXTENSION != 0
    }

    /// V: the entry is in use.
    pub fn valid(&self) -> bool {
        self.slot & VALID != 0
    }

    /// The same entry with the dirty bit `dirty`.
    pub fn with_dirty(self, dirty: bool) -> GttEntry {
        GttEntry {
            slot: if dirty {
                self.slot | DIRTY
            } else {
                self.slot & !DIRTY
            },
            ..self
        }
    }

    /// The same entry naming page `ppn` (flags kept).
    pub fn with_ppn(self, ppn: Ppn) -> GttEntry {
        let flags = self.slot & ((1 << FLAG_BITS) - 1);
        GttEntry {
            slot: GttEntry::new(self.vertex, ppn).slot & !VALID | flags,
            ..self
        }
    }

    fn list(&self) -> usize {
        (self.slot >> FLAG_BITS) as usize
    }
}

/// Where a leaf entry sits: a main position, and its place in that
/// entry's extended list if it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    main: usize,
    extended: Option<usize>,
}

/// The sorted table and its extended lists.
#[derive(Clone, Debug, Default)]
pub struct Gtt {
    entries: Vec<GttEntry>,
    extended: Vec<Vec<GttEntry>>,
}

impl Gtt {
    /// Bytes of one entry.
    pub const ENTRY_BYTES: usize = std::mem::size_of::<GttEntry>();

    /// Appends `entry`; panics if it would break the order.
    pub fn push(&mut self, entry: GttEntry) {
        if let Some(last) = self.entries.last() {
            assert!(last.vertex <= entry.vertex, "GTT entries out of order");
        }
        self.entries.push(entry);
    }

    /// The main table's entries, in order (extended and invalid ones included).
    pub fn entries(&self) -> &[GttEntry] {
        &self.entries
    }

    /// The leaf entries, one per page, in order.
    pub fn leaves(&self) -> impl Iterator<Item = (Pos, GttEntry)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.valid())
            .flat_map(move |(main, e)| {
                let list: &[GttEntry] = if e.extension() {
                    &self.extended[e.list()]
                } else {
                    std::slice::from_ref(e)
                };
                let extended = e.extension();
                list.iter().enumerate().map(move |(j, &leaf)| {
                    let pos = Pos {
                        main,
                        extended: extended.then_some(j),
                    };
                    (pos, leaf)
                })
            })
    }

    /// Pages mapped (leaf entries).
    pub fn len(&self) -> usize {
        self.leaves().count()
    }

    /// Whether the table maps no page.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The table's size in bytes: main entries and extended lists.
    pub fn bytes(&self) -> usize {
        (self.entries.len() + self.extended.iter().map(Vec::len).sum::<usize>()) * Self::ENTRY_BYTES
    }

    /// The leaf at `pos`.
    pub fn get(&self, pos: Pos) -> GttEntry {
        match pos.extended {
            None => self.entries[pos.main],
            Some(j) => self.extended[self.entries[pos.main].list()][j],
        }
    }

    /// Replaces the leaf at `pos` (same key).
    pub fn set(&mut self, pos: Pos, entry: GttEntry) {
        let leaf = match pos.extended {
            None => &mut self.entries[pos.main],
            Some(j) => {
                let list = self.entries[pos.main].list();
                &mut self.extended[list][j]
            }
        };
        assert_eq!(leaf.vertex, entry.vertex, "a GTT entry keeps its key");
        *leaf = entry;
    }

    /// The pages holding `vertex`'s list, in order: the last leaf keyed
    /// at or below `vertex`, or, if that key is `vertex` itself, every leaf
    /// with that key (a dense vertex's pages). Empty if no leaf is keyed at
    /// or below `vertex`.
    pub fn locate(&self, vertex: u32) -> Vec<Pos> {
        let upper = self.entries.partition_point(|e| e.vertex <= vertex);
        let Some(main) = (0..upper).rev().find(|&i| self.entries[i].valid()) else {
            return Vec::new();
        };
        let entry = self.entries[main];
        if entry.extension() {
            let list = &self.extended[entry.list()];
            let up = list.partition_point(|e| e.vertex <= vertex);
            let lower = if list[up - 1].vertex == vertex {
                list.partition_point(|e| e.vertex < vertex)
            } else {
                up - 1
            };
            return (lower..up)
                .map(|j| Pos {
                    main,
                    extended: Some(j),
                })
                .collect();
        }
        let mut lower = main;
        if entry.vertex == vertex {
            while lower > 0 && self.entries[lower - 1].vertex == vertex {
                lower -= 1;
            }
        }
        (lower..=main)
            .map(|main| Pos {
                main,
                extended: None,
            })
            .collect()
    }

    /// The group of `vertex`'s pages: every leaf sharing the key of its
    /// first page, so whole lists (a dense vertex's pages and its tail).
    pub fn group(&self, vertex: u32) -> Vec<Pos> {
        match self.locate(vertex).first() {
            Some(&first) => self.locate(self.get(first).vertex),
            None => Vec::new(),
        }
    }

    /// Whether the group `group` holds the table's last page.
    pub fn is_last(&self, group: &[Pos]) -> bool {
        group.last().is_some_and(|last| {
            let beyond_main = self.entries[last.main + 1..].iter().all(|e| !e.valid());
            let beyond_list = last
                .extended
                .is_none_or(|j| j + 1 == self.extended[self.entries[last.main].list()].len());
            beyond_main && beyond_list
        })
    }

    /// Puts `pages` (sorted, the first keyed as the group) in place of the
    /// group `group`, as [`Gtt::group`] returned it.
    pub fn replace(&mut self, group: &[Pos], pages: &[GttEntry]) {
        let (first, last) = (group[0], group[group.len() - 1]);
        let key = self.get(first).vertex;
        assert!(
            pages.first().is_some_and(|p| p.vertex == key)
                && pages.windows(2).all(|w| w[0].vertex <= w[1].vertex),
            "a group's new pages start at its key, in order"
        );
        let same_keys = group.len() == pages.len()
            && group
                .iter()
                .zip(pages)
                .all(|(&pos, page)| self.get(pos).vertex == page.vertex);
        if same_keys {
            for (&pos, &page) in group.iter().zip(pages) {
                self.set(pos, page);
            }
            return;
        }
        match (first.extended, last.extended) {
            (Some(j0), Some(j1)) => {
                let list = self.entries[first.main].list();
                self.extended[list].splice(j0..=j1, pages.iter().copied());
            }
            (None, None) => {
                self.entries[first.main] = GttEntry::extended(key, self.extended.len());
                self.extended.push(pages.to_vec());
                for e in &mut self.entries[first.main + 1..=last.main] {
                    e.slot &= !VALID;
                }
            }
            _ => unreachable!("a group lies in the main table or in one extended list"),
        }
    }

    /// The leaf keyed `vertex` that maps page `ppn`, if any.
    pub fn find(&self, vertex: u32, ppn: Ppn) -> Option<Pos> {
        self.locate(vertex)
            .into_iter()
            .find(|&pos| self.get(pos).vertex == vertex && self.get(pos).ppn() == ppn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pages of `positions`.
    fn pages(gtt: &Gtt, positions: &[Pos]) -> Vec<u64> {
        positions.iter().map(|&p| gtt.get(p).ppn().0).collect()
    }

    /// The paper's Fig. 6: V1 -> P1, V3 -> P2, V6 -> P3 and P4.
    fn figure_six() -> Gtt {
        let mut gtt = Gtt::default();
        for (v, p) in [(1, 1), (3, 2), (6, 3), (6, 4)] {
            gtt.push(GttEntry::new(v, Ppn(p)));
        }
        gtt
    }

    #[test]
    fn entries_are_eight_bytes_and_bits_round_trip() {
        assert_eq!(Gtt::ENTRY_BYTES, 8);
        let e = GttEntry::new(42, Ppn(MAX_PAGES - 1));
        assert_eq!((e.vertex(), e.ppn()), (42, Ppn(MAX_PAGES - 1)));
        assert!(e.valid() && !e.dirty() && !e.extension());
        let d = e.with_dirty(true).with_ppn(Ppn(7));
        assert!(d.valid() && d.dirty() && !d.extension());
        assert_eq!((d.vertex(), d.ppn()), (42, Ppn(7)));
        assert!(!d.with_dirty(false).dirty());
    }

    #[test]
    fn lookup_finds_the_covering_page_and_every_page_of_a_dense_vertex() {
        let gtt = figure_six();
        assert!(gtt.locate(0).is_empty());
        assert_eq!(pages(&gtt, &gtt.locate(2)), [1]);
        assert_eq!(pages(&gtt, &gtt.locate(3)), [2]);
        assert_eq!(pages(&gtt, &gtt.locate(5)), [2]);
        assert_eq!(pages(&gtt, &gtt.locate(6)), [3, 4]);
        assert_eq!(
            pages(&gtt, &gtt.locate(9)),
            [4],
            "vertices after a dense one share its last page"
        );
        assert_eq!(
            pages(&gtt, &gtt.group(9)),
            [3, 4],
            "a tail page's group is the dense vertex's pages"
        );
        assert_eq!(gtt.bytes(), 32);
        assert!(gtt.is_last(&gtt.group(7)) && !gtt.is_last(&gtt.group(3)));
    }

    #[test]
    fn a_split_goes_to_an_extended_list_and_later_splits_splice_it() {
        // Fig. 7: P2 (V3..V5) overflows and splits into P5 (V3) and P6 (V4, V5).
        let mut gtt = figure_six();
        let group = gtt.group(4);
        gtt.replace(
            &group,
            &[GttEntry::new(3, Ppn(5)), GttEntry::new(4, Ppn(6))],
        );
        let main = gtt.entries()[1];
        assert!(main.extension() && main.valid() && main.vertex() == 3);
        assert_eq!(gtt.entries().len(), 4, "the sorted table did not shift");
        assert_eq!(pages(&gtt, &gtt.locate(3)), [5]);
        assert_eq!(pages(&gtt, &gtt.locate(5)), [6]);
        assert_eq!(pages(&gtt, &gtt.locate(6)), [3, 4]);
        // P6 splits again, in its extended list.
        let group = gtt.group(5);
        gtt.replace(
            &group,
            &[GttEntry::new(4, Ppn(7)), GttEntry::new(5, Ppn(8))],
        );
        assert_eq!(pages(&gtt, &gtt.locate(4)), [7]);
        assert_eq!(pages(&gtt, &gtt.locate(5)), [8]);
        let leaves: Vec<(u32, u64)> = gtt.leaves().map(|(_, e)| (e.vertex(), e.ppn().0)).collect();
        assert_eq!(leaves, [(1, 1), (3, 5), (4, 7), (5, 8), (6, 3), (6, 4)]);
        assert_eq!(gtt.len(), 6);
        assert_eq!(gtt.bytes(), 8 * (4 + 3));
        // A dense vertex's pages shrink to one: the others lose their valid bit.
        let group = gtt.group(6);
        gtt.replace(&group, &[GttEntry::new(6, Ppn(9))]);
        assert_eq!(pages(&gtt, &gtt.locate(6)), [9]);
        assert_eq!(pages(&gtt, &gtt.locate(8)), [9]);
        assert!(!gtt.entries()[3].valid());
        assert!(gtt.is_last(&gtt.group(6)));
        assert_eq!(gtt.find(4, Ppn(7)).map(|p| gtt.get(p).ppn()), Some(Ppn(7)));
        assert_eq!(gtt.find(4, Ppn(6)), None);
    }
}
