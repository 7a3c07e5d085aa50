//! A region of erase blocks, the same range on every die, handed out page
//! by page and reclaimed greedily: the allocator under both the FTL and
//! the GTL's graph area.
//!
//! Writes are striped over the dies: each die has one active block, and
//! consecutive allocations go to consecutive dies (skipping a die with
//! neither room nor a free block), so pages written one after another sit
//! on different channels. The pool counts each block's valid pages (its
//! owner says which pages are valid) and names the greedy GC victim: the
//! closed block with the fewest valid pages.

use std::collections::VecDeque;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::flash::{to_index, BlockId, Flash, Geometry, Nanos, Ppn};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Active,
    Closed,
}

/// Page accounting of a region, recounted from scratch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accounting {
    /// Erased pages.
    pub free: u64,
    /// Programmed pages the owner still uses.
    pub valid: u64,
    /// Programmed pages nobody uses (GC reclaims them).
    pub invalid: u64,
    /// Pages of the region.
    pub total: u64,
}

/// A block of the region: its die and its index within the die.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub die: u32,
    pub block: u32,
}

/// Blocks `blocks` of every die, with their allocation state.
///
/// Invariants: `valid[s]` counts the pages of slot `s` its owner marked
/// valid and not since invalid; a die's active block is the only one of its
/// blocks being filled; a free block is erased.
#[derive(Debug)]
pub(crate) struct BlockPool {
    geometry: Geometry,
    blocks: Range<u32>,
    valid: Vec<u32>,
    state: Vec<State>,
    active: Vec<Option<u32>>,
    free: Vec<VecDeque<u32>>,
    cursor: u32,
}

impl BlockPool {
    /// Blocks `blocks` of every die of `geometry`, all free.
    pub fn new(geometry: &Geometry, blocks: Range<u32>) -> BlockPool {
        let dies = geometry.dies();
        let slots = to_index(u64::from(dies) * u64::from(blocks.end - blocks.start));
        BlockPool {
            geometry: geometry.clone(),
            valid: vec![0; slots],
            state: vec![State::Free; slots],
            active: vec![None; dies as usize],
            free: (0..dies).map(|_| blocks.clone().collect()).collect(),
            cursor: 0,
            blocks,
        }
    }

    /// The region as a power cut left it on `flash`, with `is_valid` its
    /// owner's valid pages: blocks with programmed pages are closed (their
    /// erased rest is not filled again until GC erases them), the others free.
    pub fn recover(
        geometry: &Geometry,
        blocks: Range<u32>,
        flash: &Flash,
        is_valid: impl Fn(Ppn) -> bool,
    ) -> BlockPool {
        let mut pool = BlockPool::new(geometry, blocks);
        for slot in 0..pool.state.len() {
            let block = pool.block_at(slot);
            if flash.written_pages(pool.id(block)) == 0 {
                continue;
            }
            pool.state[slot] = State::Closed;
            pool.free[block.die as usize].retain(|&b| b != block.block);
            let valid = pool.written(flash, block).filter(|&p| is_valid(p)).count();
            pool.valid[slot] = u32::try_from(valid).expect("a block's pages fit u32");
        }
        pool
    }

    /// The blocks of the region holding programmed pages.
    pub fn written_blocks(&self, flash: &Flash) -> Vec<BlockId> {
        (0..self.state.len())
            .map(|slot| self.id(self.block_at(slot)))
            .filter(|&id| flash.written_pages(id) > 0)
            .collect()
    }

    /// Every programmed page of the region.
    pub fn programmed(&self, flash: &Flash) -> Vec<Ppn> {
        (0..self.state.len())
            .flat_map(|slot| self.written(flash, self.block_at(slot)))
            .collect()
    }

    /// Pages of the region.
    pub fn pages(&self) -> u64 {
        self.state.len() as u64 * u64::from(self.geometry.pages_per_block)
    }

    fn per_die(&self) -> u32 {
        self.blocks.end - self.blocks.start
    }

    fn slot(&self, block: Block) -> usize {
        to_index(
            u64::from(block.die) * u64::from(self.per_die())
                + u64::from(block.block - self.blocks.start),
        )
    }

    fn block_at(&self, slot: usize) -> Block {
        let per_die = self.per_die() as usize;
        // Slots are below dies * per_die, both u32.
        Block {
            die: u32::try_from(slot / per_die).expect("a die index fits u32"),
            block: self.blocks.start + u32::try_from(slot % per_die).expect("fits u32"),
        }
    }

    fn id(&self, block: Block) -> BlockId {
        BlockId(
            u64::from(block.die) * u64::from(self.geometry.blocks_per_die) + u64::from(block.block),
        )
    }

    /// The block holding `ppn`.
    pub fn block_of(&self, ppn: Ppn) -> Block {
        self.block_at(self.slot_of(ppn))
    }

    fn slot_of(&self, ppn: Ppn) -> usize {
        let (id, _) = self.geometry.block_of(ppn);
        let die = self.geometry.die_of(id);
        // The remainder of a division by blocks_per_die fits u32.
        let block = u32::try_from(id.0 % u64::from(self.geometry.blocks_per_die))
            .expect("a remainder below blocks_per_die");
        self.slot(Block { die, block })
    }

    /// Whether `ppn` lies in the region.
    pub fn contains(&self, ppn: Ppn) -> bool {
        let (id, _) = self.geometry.block_of(ppn);
        let within = id.0 % u64::from(self.geometry.blocks_per_die);
        ppn.0 < self.geometry.pages()
            && (u64::from(self.blocks.start)..u64::from(self.blocks.end)).contains(&within)
    }

    /// Erased blocks waiting to be filled.
    pub fn free_blocks(&self) -> usize {
        self.free.iter().map(VecDeque::len).sum()
    }

    /// The next page to program, striped over the dies.
    pub fn allocate(&mut self, flash: &Flash) -> Result<Ppn> {
        let dies = self.geometry.dies();
        for _ in 0..dies {
            let die = self.cursor;
            self.cursor = (self.cursor + 1) % dies;
            if let Some(block) = self.active[die as usize] {
                let written = flash.written_pages(self.id(Block { die, block }));
                if written < self.geometry.pages_per_block {
                    return Ok(self.geometry.ppn(die, block, written));
                }
                let slot = self.slot(Block { die, block });
                self.state[slot] = State::Closed;
                self.active[die as usize] = None;
            }
            if let Some(block) = self.free[die as usize].pop_front() {
                let slot = self.slot(Block { die, block });
                self.state[slot] = State::Active;
                self.active[die as usize] = Some(block);
                return Ok(self.geometry.ppn(die, block, 0));
            }
        }
        Err(Error::DeviceFull)
    }

    /// Counts `ppn` as valid.
    pub fn validate(&mut self, ppn: Ppn) {
        let slot = self.slot_of(ppn);
        self.valid[slot] += 1;
    }

    /// Counts `ppn` as no longer valid.
    pub fn invalidate(&mut self, ppn: Ppn) {
        let slot = self.slot_of(ppn);
        self.valid[slot] -= 1;
    }

    /// The greedy victim: the closed block with the fewest valid pages, if
    /// one has an invalid page.
    pub fn victim(&self) -> Option<Block> {
        let ppb = self.geometry.pages_per_block;
        (0..self.state.len())
            .filter(|&s| self.state[s] == State::Closed && self.valid[s] < ppb)
            .min_by_key(|&s| self.valid[s])
            .map(|s| self.block_at(s))
    }

    /// The pages of `block` programmed since its erase.
    pub fn written(&self, flash: &Flash, block: Block) -> impl Iterator<Item = Ppn> {
        let geometry = self.geometry.clone();
        (0..flash.written_pages(self.id(block)))
            .map(move |page| geometry.ppn(block.die, block.block, page))
    }

    /// Erases `block`, whose valid pages have all moved, submitted at
    /// `at`, and frees it.
    pub fn reclaim(&mut self, flash: &mut Flash, block: Block, at: Nanos) -> Result<Nanos> {
        let slot = self.slot(block);
        assert_eq!(self.valid[slot], 0, "a GC victim keeps no valid page");
        let done = flash.erase(self.id(block), at)?;
        self.state[slot] = State::Free;
        self.free[block.die as usize].push_back(block.block);
        Ok(done)
    }

    /// Recounts the region against `flash` and `is_valid` (the owner's
    /// view of which pages are valid); panics naming the first block whose
    /// count or state is wrong.
    pub fn check(&self, flash: &Flash, is_valid: impl Fn(Ppn) -> bool) -> Accounting {
        let ppb = u64::from(self.geometry.pages_per_block);
        let (mut free, mut valid, mut invalid) = (0u64, 0u64, 0u64);
        for slot in 0..self.state.len() {
            let block = self.block_at(slot);
            let written = u64::from(flash.written_pages(self.id(block)));
            let mapped = self.written(flash, block).filter(|&p| is_valid(p)).count() as u64;
            assert_eq!(
                u64::from(self.valid[slot]),
                mapped,
                "valid count of die {} block {}",
                block.die,
                block.block
            );
            if self.state[slot] == State::Free {
                assert_eq!(written, 0, "free block {block:?} holds data");
            }
            free += ppb - written;
            valid += mapped;
            invalid += written - mapped;
        }
        let total = self.pages();
        assert_eq!(
            free + valid + invalid,
            total,
            "free + valid + invalid != total"
        );
        Accounting {
            free,
            valid,
            invalid,
            total,
        }
    }
}
