//! The GTL's graph area: its blocks on every die, and what each valid page
//! holds (a neighbour page, a weight page or a delta page), which is what
//! GC needs to move a page and fix the table that names it (GraphSSD
//! §3.5: "one bit per flash page" says GraphSSD owns it; the page's start
//! vertex finds its GTT entry).

use std::collections::HashMap;
use std::ops::Range;

use crate::blocks::{Accounting, Block, BlockPool};
use crate::flash::{Flash, Geometry, Nanos, Ppn};
use crate::Result;

/// What a valid graph-area page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Neighbour lists, named by the adjacency GTT.
    Adjacency,
    /// Weights, named by the weight GTT.
    Weights,
    /// Delta records, named by the delta page table.
    Delta,
}

/// The graph area's blocks and the owner of each valid page.
///
/// Invariant: the pool counts exactly the pages in `owners` as valid.
#[derive(Debug)]
pub(crate) struct GraphArea {
    pool: BlockPool,
    owners: HashMap<u64, Owner>,
}

impl GraphArea {
    /// Blocks `blocks` of every die, all free.
    pub fn new(geometry: &Geometry, blocks: Range<u32>) -> GraphArea {
        GraphArea {
            pool: BlockPool::new(geometry, blocks),
            owners: HashMap::new(),
        }
    }

    /// Pages of the area.
    pub fn pages(&self) -> u64 {
        self.pool.pages()
    }

    /// Valid pages.
    pub fn valid(&self) -> u64 {
        self.owners.len() as u64
    }

    /// Erased blocks.
    pub fn free_blocks(&self) -> usize {
        self.pool.free_blocks()
    }

    /// What `ppn` holds, if it is valid.
    pub fn owner(&self, ppn: Ppn) -> Option<Owner> {
        self.owners.get(&ppn.0).copied()
    }

    /// Programs `data` for `owner` at the next free page, submitted at `at`.
    pub fn program(
        &mut self,
        flash: &mut Flash,
        owner: Owner,
        data: &[u8],
        at: Nanos,
    ) -> Result<(Ppn, Nanos)> {
        let ppn = self.pool.allocate(flash)?;
        let done = flash.program(ppn, data, &[], at)?;
        self.pool.validate(ppn);
        self.owners.insert(ppn.0, owner);
        Ok((ppn, done))
    }

    /// Marks `ppn` invalid: nothing names it any more.
    pub fn invalidate(&mut self, ppn: Ppn) {
        let owner = self.owners.remove(&ppn.0);
        assert!(owner.is_some(), "invalidating page {} twice", ppn.0);
        self.pool.invalidate(ppn);
    }

    /// The greedy GC victim, if a closed block has an invalid page.
    pub fn victim(&self) -> Option<Block> {
        self.pool.victim()
    }

    /// The programmed pages of `block`.
    pub fn written(&self, flash: &Flash, block: Block) -> Vec<Ppn> {
        self.pool.written(flash, block).collect()
    }

    /// Erases `block`, whose valid pages have moved.
    pub fn reclaim(&mut self, flash: &mut Flash, block: Block, at: Nanos) -> Result<Nanos> {
        self.pool.reclaim(flash, block, at)
    }

    /// Recounts the area against `flash`.
    pub fn check(&self, flash: &Flash) -> Accounting {
        for &ppn in self.owners.keys() {
            assert!(
                self.pool.contains(Ppn(ppn)) && flash.is_programmed(Ppn(ppn)),
                "valid page {ppn} is outside the area or erased"
            );
        }
        self.pool
            .check(flash, |ppn| self.owners.contains_key(&ppn.0))
    }
}
