//! The Graph Translation Table (GraphSSD §3.2, Fig. 5): one entry per
//! graph page, keyed by the smallest vertex whose list the page holds,
//! sorted, looked up by binary search.
//!
//! An entry is 8 bytes, the paper's size: the key (`u32`) and one `u32`
//! packing the physical page number (29 bits, so a GTL area of up to 2^29
//! pages, 8 TiB of 16 KiB pages) with the dirty, extension and valid bits.
//! A dense vertex has one entry per page of its list, all with its key, in
//! consecutive positions.

use std::ops::Range;

use crate::flash::Ppn;

const VALID: u32 = 1;
const EXTENSION: u32 = 2;
const DIRTY: u32 = 4;
const FLAG_BITS: u32 = 3;

/// Physical pages a GTT entry can name.
pub const MAX_PAGES: u64 = 1 << (32 - FLAG_BITS);

/// One GTT entry: a start vertex, a physical page and three bits.
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

    /// The smallest vertex with a list in the page.
    pub fn vertex(&self) -> u32 {
        self.vertex
    }

    /// The physical page.
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
}

/// The sorted table.
///
/// Invariant: entries are sorted by vertex (equal keys only for the pages
/// of one dense vertex, consecutive).
#[derive(Clone, Debug, Default)]
pub struct Gtt {
    entries: Vec<GttEntry>,
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

    /// The entries, in order.
    pub fn entries(&self) -> &[GttEntry] {
        &self.entries
    }

    /// Entries (one per page).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The table's size in bytes.
    pub fn bytes(&self) -> usize {
        self.entries.len() * Self::ENTRY_BYTES
    }

    /// The positions of the pages holding `vertex`'s list: the last entry
    /// keyed at or below `vertex`, or, if that key is `vertex` itself,
    /// every entry with that key (a dense vertex's pages, in order).
    /// Empty if no entry is keyed at or below `vertex`.
    pub fn locate(&self, vertex: u32) -> Range<usize> {
        let upper = self.entries.partition_point(|e| e.vertex <= vertex);
        if upper == 0 {
            return 0..0;
        }
        if self.entries[upper - 1].vertex == vertex {
            let lower = self.entries.partition_point(|e| e.vertex < vertex);
            lower..upper
        } else {
            upper - 1..upper
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_eight_bytes_and_bits_round_trip() {
        assert_eq!(Gtt::ENTRY_BYTES, 8);
        let e = GttEntry::new(42, Ppn(MAX_PAGES - 1));
        assert_eq!((e.vertex(), e.ppn()), (42, Ppn(MAX_PAGES - 1)));
        assert!(e.valid() && !e.dirty() && !e.extension());
    }

    #[test]
    fn lookup_finds_the_covering_page_and_every_page_of_a_dense_vertex() {
        // The paper's Fig. 6: V1 -> P1, V3 -> P2, V6 -> P3 and P4.
        let mut gtt = Gtt::default();
        for (v, p) in [(1, 1), (3, 2), (6, 3), (6, 4)] {
            gtt.push(GttEntry::new(v, Ppn(p)));
        }
        assert_eq!(gtt.locate(0), 0..0);
        assert_eq!(gtt.locate(2), 0..1);
        assert_eq!(gtt.locate(3), 1..2);
        assert_eq!(gtt.locate(5), 1..2);
        assert_eq!(gtt.locate(6), 2..4);
        assert_eq!(
            gtt.locate(9),
            3..4,
            "vertices after a dense one share its last page"
        );
        assert_eq!(gtt.bytes(), 32);
    }
}
