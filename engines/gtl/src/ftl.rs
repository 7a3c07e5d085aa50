//! A conventional page-mapped FTL (LBA -> PPN) for block reads and writes
//! of whole logical pages: the path the CSR baseline takes.
//!
//! The FTL owns the same range of blocks on every die (the rest of the
//! device belongs to the GTL), allocated by a `BlockPool` (writes
//! striped over the dies, greedy victims). Of the region's
//! `P` physical pages it exports `L = floor(P * (1 - over_provisioning))`
//! logical pages, and it requires `P - L >= (2 * dies + 1) * pages_per_block`:
//! when the free blocks fall to one per die, the closed blocks then hold
//! more than `L + pages_per_block` pages, so some page is invalid and the
//! greedy victim (the closed block with fewest valid pages) frees at least
//! one page each round. GC relocates valid pages inside the device (read,
//! program, no host transfer) and erases the victim. The LBA of each page
//! is also written to its spare area with a sequence number, as a real FTL
//! does, and [`Ftl::recover`] rebuilds the map from them after a power cut.

use std::collections::HashMap;
use std::ops::Range;

use quiver_run::InvalidArgument;

pub use crate::blocks::Accounting;
use crate::blocks::BlockPool;
use crate::error::{Error, Result};
use crate::flash::{Flash, Geometry, Nanos, Ppn};

/// A logical page number of the block interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lba(pub u64);

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

/// The page-mapped FTL.
///
/// Invariants: `l2p` and `p2l` are inverse maps (no physical page is
/// mapped twice); the pool counts exactly the mapped pages as valid; every
/// mapped page is programmed.
#[derive(Debug)]
pub struct Ftl {
    geometry: Geometry,
    logical_pages: u64,
    l2p: HashMap<u64, u64>,
    p2l: HashMap<u64, u64>,
    pool: BlockPool,
    counters: FtlCounters,
    /// The next program's sequence number (in each page's spare area).
    seq: u64,
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
        if geometry.spare_bytes < 16 {
            return Err(InvalidArgument::new(
                "spare_bytes",
                "the FTL keeps each page's LBA and sequence number in 16 spare bytes",
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
        let pool = BlockPool::new(geometry, blocks);
        let physical = pool.pages();
        // Rounding a product of a page count below 2^53 is exact enough here.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let logical = (physical as f64 * (1.0 - over_provisioning)).floor() as u64;
        let reserve = gc_reserve(geometry);
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
        Ok(Ftl {
            geometry: geometry.clone(),
            logical_pages: logical,
            l2p: HashMap::new(),
            p2l: HashMap::new(),
            pool,
            counters: FtlCounters::default(),
            seq: 0,
        })
    }

    /// The FTL over blocks `blocks` as a power cut left it on `flash`:
    /// each LBA maps to its newest page, by the sequence number in the
    /// spare area.
    pub fn recover(
        geometry: &Geometry,
        blocks: Range<u32>,
        over_provisioning: f64,
        flash: &Flash,
    ) -> Result<Ftl> {
        let mut ftl = Ftl::new(geometry, blocks.clone(), over_provisioning)?;
        let scan = BlockPool::recover(geometry, blocks.clone(), flash, |_| false);
        let mut newest: HashMap<u64, (u64, u64)> = HashMap::new();
        for ppn in scan.programmed(flash) {
            let spare = flash
                .peek_spare(ppn)
                .ok_or(Error::ReadErased { ppn: ppn.0 })?;
            let lba = u64::from_le_bytes(spare[..8].try_into().expect("8 bytes"));
            let seq = u64::from_le_bytes(spare[8..16].try_into().expect("8 bytes"));
            ftl.seq = ftl.seq.max(seq + 1);
            let entry = newest.entry(lba).or_insert((seq, ppn.0));
            if seq >= entry.0 {
                *entry = (seq, ppn.0);
            }
        }
        for (lba, (_, ppn)) in newest {
            ftl.l2p.insert(lba, ppn);
            ftl.p2l.insert(ppn, lba);
        }
        ftl.pool = BlockPool::recover(geometry, blocks, flash, |ppn| ftl.p2l.contains_key(&ppn.0));
        Ok(ftl)
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

    /// Programs `data` at a fresh page for `lba` and remaps it.
    fn place(&mut self, flash: &mut Flash, lba: u64, data: &[u8], at: Nanos) -> Result<Nanos> {
        let ppn = self.pool.allocate(flash)?;
        let mut spare = [0u8; 16];
        spare[..8].copy_from_slice(&lba.to_le_bytes());
        spare[8..].copy_from_slice(&self.seq.to_le_bytes());
        self.seq += 1;
        let done = flash.program(ppn, data, &spare, at)?;
        if let Some(old) = self.l2p.insert(lba, ppn.0) {
            self.p2l.remove(&old);
            self.pool.invalidate(Ppn(old));
        }
        self.p2l.insert(ppn.0, lba);
        self.pool.validate(ppn);
        Ok(done)
    }

    /// Reclaims one block greedily; false if no closed block has an invalid page.
    fn collect_one(&mut self, flash: &mut Flash, at: Nanos) -> Result<bool> {
        let Some(victim) = self.pool.victim() else {
            return Ok(false);
        };
        let mut at_done = at;
        let pages: Vec<Ppn> = self.pool.written(flash, victim).collect();
        for ppn in pages {
            let Some(&lba) = self.p2l.get(&ppn.0) else {
                continue;
            };
            let read = flash.read(ppn, at)?;
            let (data, read_done) = (read.data.to_vec(), read.done);
            let done = self.place(flash, lba, &data, read_done)?;
            at_done = at_done.max(done);
            self.counters.relocated += 1;
        }
        self.pool.reclaim(flash, victim, at_done)?;
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
        let mut rounds = self.pool.pages() * 2 + 2;
        while self.pool.free_blocks() <= reserve {
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
            assert!(
                self.pool.contains(Ppn(ppn)),
                "lba {lba} maps outside the region"
            );
        }
        self.pool.check(flash, |ppn| self.p2l.contains_key(&ppn.0))
    }
}

/// Spare pages greedy GC needs in a region of `geometry`'s dies: two
/// blocks per die and one more.
pub(crate) fn gc_reserve(geometry: &Geometry) -> u64 {
    (2 * u64::from(geometry.dies()) + 1) * u64::from(geometry.pages_per_block)
}
