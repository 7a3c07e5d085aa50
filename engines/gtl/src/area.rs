//! The GTL's graph area: its blocks on every die, and what each valid page
//! holds (a neighbour page, a weight page or a delta page), which is what
//! GC needs to move a page and fix the table that names it (GraphSSD
//! §3.5: "one bit per flash page" says GraphSSD owns it; the page's start
//! vertex finds its GTT entry).
//!
//! Every page the GTL programs carries a [`Tag`] in its spare area: its
//! owner and the *unit* it was written in (GraphInitialize, one batch of
//! delta records, one group rewrite), as the unit's sequence number, the
//! page's index in it and the unit's page count. The tags are what
//! recovery rebuilds the GTL from after a power cut.

use std::collections::HashMap;
use std::ops::Range;

use crate::blocks::{Accounting, Block, BlockPool};
use crate::delta::Dir;
use crate::error::Result;
use crate::flash::{Flash, Geometry, Nanos, Ppn};

/// What a valid graph-area page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Neighbour lists of one direction, named by its adjacency GTT.
    Adjacency(Dir),
    /// Weights of one direction, named by its weight GTT.
    Weights(Dir),
    /// Delta records, named by the delta page table.
    Delta,
}

impl Owner {
    fn code(self) -> u32 {
        match self {
            Owner::Adjacency(Dir::Out) => 1,
            Owner::Weights(Dir::Out) => 2,
            Owner::Delta => 3,
            Owner::Adjacency(Dir::In) => 4,
            Owner::Weights(Dir::In) => 5,
        }
    }
}

/// What every tag says of the graph, so that recovery knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GraphKind {
    /// Lists carry weights.
    pub weighted: bool,
    /// Each edge is in both lists.
    pub undirected: bool,
}

/// A graph-area page's spare-area tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    /// What the page holds.
    pub owner: Owner,
    /// The unit's sequence number (units are numbered in write order).
    pub seq: u64,
    /// The page's index in its unit.
    pub index: u32,
    /// Pages in the unit.
    pub count: u32,
    /// The graph's kind.
    pub graph: GraphKind,
}

impl Tag {
    /// Spare bytes a tag takes.
    pub const BYTES: usize = 24;

    /// The tag's spare-area bytes.
    pub fn encode(&self) -> [u8; Tag::BYTES] {
        let mut out = [0u8; Tag::BYTES];
        out[..4].copy_from_slice(&self.owner.code().to_le_bytes());
        out[4..8].copy_from_slice(&self.index.to_le_bytes());
        out[8..12].copy_from_slice(&self.count.to_le_bytes());
        let kind = u32::from(self.graph.weighted) | u32::from(self.graph.undirected) << 1;
        out[12..16].copy_from_slice(&kind.to_le_bytes());
        out[16..].copy_from_slice(&self.seq.to_le_bytes());
        out
    }

    /// The tag in `spare`, if it holds one (an FTL page's spare does not).
    pub fn decode(spare: &[u8]) -> Option<Tag> {
        let word = |i: usize| u32::from_le_bytes(spare[i..i + 4].try_into().expect("4 bytes"));
        let owner = match word(0) {
            1 => Owner::Adjacency(Dir::Out),
            2 => Owner::Weights(Dir::Out),
            3 => Owner::Delta,
            4 => Owner::Adjacency(Dir::In),
            5 => Owner::Weights(Dir::In),
            _ => return None,
        };
        Some(Tag {
            owner,
            index: word(4),
            count: word(8),
            graph: GraphKind {
                weighted: word(12) & 1 != 0,
                undirected: word(12) & 2 != 0,
            },
            seq: u64::from_le_bytes(spare[16..24].try_into().expect("8 bytes")),
        })
    }
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
    /// Blocks `blocks` of every die of `flash`, erased first where they
    /// hold pages (an earlier graph, or one a power cut left half written),
    /// from `at`; returns the empty area and when the erases finished.
    pub fn format(flash: &mut Flash, blocks: Range<u32>, at: Nanos) -> Result<(GraphArea, Nanos)> {
        let geometry = flash.geometry().clone();
        let written = BlockPool::recover(&geometry, blocks.clone(), flash, |_| false);
        let mut done = at;
        for block in written.written_blocks(flash) {
            done = done.max(flash.erase(block, at)?);
        }
        let area = GraphArea {
            pool: BlockPool::new(&geometry, blocks),
            owners: HashMap::new(),
        };
        Ok((area, done))
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

    /// Programs `data` tagged `tag` at the next free page, submitted at `at`.
    pub fn program(
        &mut self,
        flash: &mut Flash,
        tag: Tag,
        data: &[u8],
        at: Nanos,
    ) -> Result<(Ppn, Nanos)> {
        let ppn = self.pool.allocate(flash)?;
        let done = flash.program(ppn, data, &tag.encode(), at)?;
        self.pool.validate(ppn);
        self.owners.insert(ppn.0, tag.owner);
        Ok((ppn, done))
    }

    /// The area as a power cut left it on `flash`, with `valid` its valid
    /// pages (what recovery found named): every programmed block closed.
    pub fn recover(
        geometry: &Geometry,
        blocks: Range<u32>,
        flash: &Flash,
        valid: HashMap<u64, Owner>,
    ) -> GraphArea {
        let pool = BlockPool::recover(geometry, blocks, flash, |ppn| valid.contains_key(&ppn.0));
        GraphArea {
            pool,
            owners: valid,
        }
    }

    /// Every programmed page of the area.
    pub fn programmed(&self, flash: &Flash) -> Vec<Ppn> {
        self.pool.programmed(flash)
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

    /// The block holding `ppn`.
    pub fn block_of(&self, ppn: Ppn) -> Block {
        self.pool.block_of(ppn)
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
