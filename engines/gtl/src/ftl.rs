//! A conventional page-mapped FTL (LBA -> PPN) for block reads and writes
//! of whole logical pages: the path the CSR baseline takes.
//!
//! The FTL owns the same range of blocks on every die (the rest of the
//! device belongs to the GTL). Writes are striped over the dies: each die
//! has one active block, and consecutive writes go to consecutive dies
//! (skipping a die with neither room nor a free block). Of the region's
//! `P` physical pages it exports `L = floor(P * (1 - over_provisioning))`
//! logical pages, and it requires `P - L >= (2 * dies + 1) * pages_per_block`:
//! when the free blocks fall to one per die, the closed blocks then hold
//! more than `L + pages_per_block` pages, so some page is invalid and the
//! greedy victim (the closed block with fewest valid pages) frees at least
//! one page each round. GC relocates valid pages inside the device (read,
//! program, no host transfer) and erases the victim. The LBA of each page
//! is also written to its spare area, as a real FTL does for recovery.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use quiver_run::InvalidArgument;

use crate::flash::{to_index, BlockId, Flash, Geometry, Nanos, Ppn};
use crate::{Error, Result};

/// A logical page number of the block interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lba(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Active,
    Closed,
}

/// What the FTL has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FtlCounters {
    /// Logical pages written by the host.
    pub host_writes: u64,
    /// Logical pages read by the host.
    pub host_reads: u64,
    /// Blocks reclaimed by GC.
    pub gc_runs: u64,
    /// Valid pages GC moved.
    pub relocated: u64,
}

/// Page accounting of the FTL's region, recounted from scratch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accounting {
    /// Erased pages.
    pub free: u64,
    /// Programmed pages some LBA maps to.
    pub valid: u64,
    /// Programmed pages no LBA maps to.
    pub invalid: u64,
    /// Pages of the region.
    pub total: u64,
}

/// The page-mapped FTL.
///
/// Invariants: `l2p` and `p2l` are inverse maps (no physical page is
/// mapped twice); `valid[b]` counts the mapped pages of block `b`; every
/// mapped page is programmed; a die's active block is the only one of its
/// blocks being filled.
#[derive(Debug)]
pub struct Ftl {
    geometry: Geometry,
    blocks: Range<u32>,
    logical_pages: u64,
    l2p: HashMap<u64, u64>,
    p2l: HashMap<u64, u64>,
    valid: Vec<u32>,
    state: Vec<State>,
    active: Vec<Option<u32>>,
    free: Vec<VecDeque<u32>>,
    cursor: u32,
    counters: FtlCounters,
}

impl Ftl {
    /// The default over-provisioning: 7% of the region's pages.
    pub const DEFAULT_OVER_PROVISIONING: f64 = 0.07;

    /// An FTL over blocks `blocks` of every die of `geometry`, exporting
    /// `1 - over_provisioning` of their pages.
    pub fn new(geometry: &Geometry, blocks: Range<u32>, over_provisioning: f64) -> Result<Ftl> {
        geometry.validate()?;
        if blocks.is_empty() || blocks.end > geometry.blocks_per_die {
            return Err(InvalidArgument::new(
                "ftl_blocks_per_die",
                format!(
                    "the FTL's blocks {blocks:?} must be a non-empty part of each die's {}",
                    geometry.blocks_per_die
                ),
            )
            .into());
        }
        if geometry.spare_bytes < 8 {
            return Err(InvalidArgument::new(
                "spare_bytes",
                "the FTL keeps each page's LBA in 8 spare bytes",
            )
            .into());
        }
        if !(0.0..1.0).contains(&over_provisioning) {
            return Err(InvalidArgument::new(
                "over_provisioning",
                format!("must be in [0, 1), got {over_provisioning}"),
            )
            .into());
        }
        let dies = geometry.dies();
        let per_die = blocks.end - blocks.start;
        let physical = u64::from(dies) * u64::from(per_die) * u64::from(geometry.pages_per_block);
        // Rounding a product of a page count below 2^53 is exact enough here.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let logical = (physical as f64 * (1.0 - over_provisioning)).floor() as u64;
        let reserve = (2 * u64::from(dies) + 1) * u64::from(geometry.pages_per_block);
        if physical - logical < reserve {
            return Err(InvalidArgument::new(
                "over_provisioning",
                format!(
                    "leaves {} spare pages of {physical}; greedy GC needs {reserve} (2 blocks per die and one more)",
                    physical - logical
                ),
            )
            .into());
        }
        let region_blocks = to_index(u64::from(dies) * u64::from(per_die));
        Ok(Ftl {
            geometry: geometry.clone(),
            logical_pages: logical,
            l2p: HashMap::new(),
            p2l: HashMap::new(),
            valid: vec![0; region_blocks],
            state: vec![State::Free; region_blocks],
            active: vec![None; dies as usize],
            free: (0..dies).map(|_| blocks.clone().collect()).collect(),
            cursor: 0,
            counters: FtlCounters::default(),
            blocks,
        })
    }

    /// Logical pages the FTL exports.
    pub fn logical_pages(&self) -> u64 {
        self.logical_pages
    }

    /// What the FTL has done so far.
    pub fn counters(&self) -> &FtlCounters {
        &self.counters
    }

    /// The physical page `lba` maps to, if it was written.
    pub fn lookup(&self, lba: Lba) -> Option<Ppn> {
        self.l2p.get(&lba.0).copied().map(Ppn)
    }

    fn per_die(&self) -> u32 {
        self.blocks.end - self.blocks.start
    }

    /// The region index of block `block` of die `die`.
    fn slot(&self, die: u32, block: u32) -> usize {
        to_index(u64::from(die) * u64::from(self.per_die()) + u64::from(block - self.blocks.start))
    }

    fn slot_of(&self, ppn: Ppn) -> usize {
        let (block, _) = self.geometry.block_of(ppn);
        let die = self.geometry.die_of(block);
        // The remainder of a division by blocks_per_die fits u32.
        let within = u32::try_from(block.0 % u64::from(self.geometry.blocks_per_die))
            .expect("a remainder below blocks_per_die");
        self.slot(die, within)
    }

    fn free_blocks(&self) -> usize {
        self.free.iter().map(VecDeque::len).sum()
    }

    /// The next physical page to program, striped over the dies.
    fn allocate(&mut self, flash: &Flash) -> Result<Ppn> {
        let dies = self.geometry.dies();
        for _ in 0..dies {
            let die = self.cursor;
            self.cursor = (self.cursor + 1) % dies;
            if let Some(block) = self.active[die as usize] {
                let id = BlockId(
                    u64::from(die) * u64::from(self.geometry.blocks_per_die) + u64::from(block),
                );
                let written = flash.written_pages(id);
                if written < self.geometry.pages_per_block {
                    return Ok(self.geometry.ppn(die, block, written));
                }
                let slot = self.slot(die, block);
                self.state[slot] = State::Closed;
                self.active[die as usize] = None;
            }
            if let Some(block) = self.free[die as usize].pop_front() {
                let slot = self.slot(die, block);
                self.state[slot] = State::Active;
                self.active[die as usize] = Some(block);
                return Ok(self.geometry.ppn(die, block, 0));
            }
        }
        Err(Error::DeviceFull)
    }

    /// Programs `data` at a fresh page for `lba` and remaps it.
    fn place(&mut self, flash: &mut Flash, lba: u64, data: &[u8], at: Nanos) -> Result<Nanos> {
        let ppn = self.allocate(flash)?;
        let done = flash.program(ppn, data, &lba.to_le_bytes(), at)?;
        if let Some(old) = self.l2p.insert(lba, ppn.0) {
            self.p2l.remove(&old);
            let slot = self.slot_of(Ppn(old));
            self.valid[slot] -= 1;
        }
        self.p2l.insert(ppn.0, lba);
        let slot = self.slot_of(ppn);
        self.valid[slot] += 1;
        Ok(done)
    }

    /// Reclaims one block greedily; false if no closed block has an invalid page.
    fn collect_one(&mut self, flash: &mut Flash, at: Nanos) -> Result<bool> {
        let ppb = self.geometry.pages_per_block;
        let victim = (0..self.state.len())
            .filter(|&s| self.state[s] == State::Closed && self.valid[s] < ppb)
            .min_by_key(|&s| self.valid[s]);
        let Some(slot) = victim else {
            return Ok(false);
        };
        let per_die = self.per_die() as usize;
        // Region slots are below dies * per_die, both u32.
        let die = u32::try_from(slot / per_die).expect("a die index fits u32");
        let block = self.blocks.start + u32::try_from(slot % per_die).expect("fits u32");
        let mut at_done = at;
        for page in 0..ppb {
            let ppn = self.geometry.ppn(die, block, page);
            let Some(&lba) = self.p2l.get(&ppn.0) else {
                continue;
            };
            let read = flash.read(ppn, at)?;
            let (data, read_done) = (read.data.to_vec(), read.done);
            let done = self.place(flash, lba, &data, read_done)?;
            at_done = at_done.max(done);
            self.counters.relocated += 1;
        }
        assert_eq!(self.valid[slot], 0, "a GC victim keeps no valid page");
        let id =
            BlockId(u64::from(die) * u64::from(self.geometry.blocks_per_die) + u64::from(block));
        flash.erase(id, at_done)?;
        self.state[slot] = State::Free;
        self.free[die as usize].push_back(block);
        self.counters.gc_runs += 1;
        Ok(true)
    }

    /// Writes one logical page, submitted at `at`: the page crosses the
    /// host link, then is programmed out of place (after GC, if the free
    /// blocks are down to one per die). Returns the completion time.
    pub fn write(&mut self, flash: &mut Flash, lba: Lba, data: &[u8], at: Nanos) -> Result<Nanos> {
        if lba.0 >= self.logical_pages {
            return Err(Error::LbaOutOfRange {
                lba: lba.0,
                pages: self.logical_pages,
            });
        }
        if data.len() != self.geometry.page_bytes as usize {
            return Err(Error::PageSize {
                data: data.len(),
                spare: 0,
                page: self.geometry.page_bytes as usize,
                spare_area: self.geometry.spare_bytes as usize,
            });
        }
        let arrived = flash.host_transfer(data.len() as u64, at);
        let reserve = self.geometry.dies() as usize;
        // Each round frees at least one page net; the bound catches a broken rule.
        let mut rounds = self.state.len() * 2 + 2;
        while self.free_blocks() <= reserve {
            if !self.collect_one(flash, arrived)? {
                break;
            }
            rounds -= 1;
            assert!(rounds > 0, "greedy GC made no progress");
        }
        self.counters.host_writes += 1;
        self.place(flash, lba.0, data, arrived)
    }

    /// Reads one logical page, submitted at `at`, and moves it to the host.
    /// A page never written reads as zeros without touching NAND, as on a
    /// real SSD. Returns the bytes and the completion time.
    pub fn read(&mut self, flash: &mut Flash, lba: Lba, at: Nanos) -> Result<(Vec<u8>, Nanos)> {
        if lba.0 >= self.logical_pages {
            return Err(Error::LbaOutOfRange {
                lba: lba.0,
                pages: self.logical_pages,
            });
        }
        self.counters.host_reads += 1;
        let bytes = u64::from(self.geometry.page_bytes);
        match self.l2p.get(&lba.0) {
            None => Ok((
                vec![0; self.geometry.page_bytes as usize],
                flash.host_transfer(bytes, at),
            )),
            Some(&ppn) => {
                let read = flash.read(Ppn(ppn), at)?;
                let (data, done) = (read.data.to_vec(), read.done);
                Ok((data, flash.host_transfer(bytes, done)))
            }
        }
    }

    /// Recounts the region's pages and checks every invariant of [`Ftl`]
    /// against `flash`; panics naming the first broken one.
    pub fn check(&self, flash: &Flash) -> Accounting {
        let ppb = self.geometry.pages_per_block;
        let (mut free, mut valid, mut invalid) = (0u64, 0u64, 0u64);
        assert_eq!(self.l2p.len(), self.p2l.len(), "l2p and p2l differ in size");
        for (&lba, &ppn) in &self.l2p {
            assert_eq!(
                self.p2l.get(&ppn),
                Some(&lba),
                "physical page {ppn} mapped twice or not back"
            );
            assert!(
                flash.is_programmed(Ppn(ppn)),
                "lba {lba} maps to erased page {ppn}"
            );
        }
        for die in 0..self.geometry.dies() {
            for block in self.blocks.clone() {
                let slot = self.slot(die, block);
                let id = BlockId(
                    u64::from(die) * u64::from(self.geometry.blocks_per_die) + u64::from(block),
                );
                let written = flash.written_pages(id);
                let mapped = (0..written)
                    .filter(|&p| self.p2l.contains_key(&self.geometry.ppn(die, block, p).0))
                    .count() as u64;
                assert_eq!(
                    u64::from(self.valid[slot]),
                    mapped,
                    "valid count of die {die} block {block}"
                );
                if self.state[slot] == State::Free {
                    assert_eq!(written, 0, "free block {block} of die {die} holds data");
                }
                free += u64::from(ppb - written);
                valid += mapped;
                invalid += u64::from(written) - mapped;
            }
        }
        let total = u64::from(self.geometry.dies()) * u64::from(self.per_die()) * u64::from(ppb);
        assert_eq!(
            valid,
            self.p2l.len() as u64,
            "a mapped page outside the region"
        );
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
