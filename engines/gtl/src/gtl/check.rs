//! The structure check: every page, entry and chain accounted for.

use super::Gtl;
use crate::area::Owner;
use crate::blocks::Accounting;
use crate::flash::Flash;
use crate::gtt::{Gtt, GttEntry, Pos};
use crate::page::Page;

impl Gtl {
    /// Checks the GTL's structure against `flash` and returns the area's
    /// page accounting; panics naming the first broken invariant: leaves
    /// sorted, each naming a valid page of its kind that starts at its key;
    /// the weight GTT shaped as the adjacency GTT; no page named twice; the
    /// valid pages exactly the named ones and the live delta pages; a
    /// dirty bit exactly on the first page of each list with a chain.
    pub fn check_structure(&self, flash: &Flash) -> Accounting {
        let mut named = std::collections::HashSet::new();
        for dir in self.dirs() {
            let table = self.table(dir);
            let mut gtts = vec![(&table.gtt, Owner::Adjacency(dir))];
            gtts.extend(table.weights.as_ref().map(|w| (w, Owner::Weights(dir))));
            for (gtt, owner) in gtts {
                let leaves: Vec<GttEntry> = gtt.leaves().map(|(_, e)| e).collect();
                assert!(
                    leaves.windows(2).all(|w| w[0].vertex() <= w[1].vertex()),
                    "{owner:?} GTT leaves out of order"
                );
                assert_eq!(
                    leaves.first().map(GttEntry::vertex),
                    Some(0),
                    "vertex 0 is covered"
                );
                for e in leaves {
                    let ppn = e.ppn();
                    assert!(named.insert(ppn.0), "page {} named twice", ppn.0);
                    assert_eq!(
                        self.area.owner(ppn),
                        Some(owner),
                        "page {} of {owner:?}",
                        ppn.0
                    );
                    let page = Page::decode(flash.peek(ppn).expect("programmed"), ppn.0)
                        .expect("a named page decodes");
                    assert_eq!(page.vsid, e.vertex(), "page {} starts at its key", ppn.0);
                    if e.dirty() {
                        assert_eq!(
                            owner,
                            Owner::Adjacency(dir),
                            "only adjacency pages are dirty"
                        );
                    }
                }
            }
            if let Some(wgtt) = &table.weights {
                let shape = |g: &Gtt| -> Vec<(Pos, u32)> {
                    g.leaves().map(|(p, e)| (p, e.vertex())).collect()
                };
                assert_eq!(shape(wgtt), shape(&table.gtt), "the weight GTT's shape");
            }
            let dirty: std::collections::BTreeSet<u64> = table
                .gtt
                .leaves()
                .filter(|(_, e)| e.dirty())
                .map(|(_, e)| e.ppn().0)
                .collect();
            let chained: std::collections::BTreeSet<u64> = self
                .deltas
                .chained_lists()
                .filter(|l| l.dir == dir)
                .map(|l| table.gtt.get(table.gtt.locate(l.vertex)[0]).ppn().0)
                .collect();
            assert_eq!(
                dirty, chained,
                "{dir:?}: dirty pages are the first pages of chained lists"
            );
        }
        for ppn in self.deltas.live_pages() {
            assert!(named.insert(ppn.0), "delta page {} named twice", ppn.0);
            assert_eq!(self.area.owner(ppn), Some(Owner::Delta));
        }
        assert_eq!(
            named.len() as u64,
            self.area.valid(),
            "valid pages nobody names"
        );
        self.area.check(flash)
    }
}
