//! Simulated NAND flash: geometry, physics, a timing model and counters.
//!
//! Pages live in memory, sparsely (a map from physical page number to its
//! bytes), so a big geometry costs only what is written; or, for a device
//! larger than memory, in a sparse file as long as the device
//! ([`Flash::on_file`], through quiver-io's [`SparseFile`]), where an
//! erase punches its block out. Dies are numbered
//! channel first: die `d` sits on channel `d % channels`, way
//! `d / channels`, so consecutive dies are on different channels and
//! striping over dies spreads over channels first.

use std::collections::HashMap;
use std::path::Path;

use quiver_io::SparseFile;

use quiver_run::InvalidArgument;

use crate::error::{Error, Result};

/// Modelled time in nanoseconds since the device was made.
pub type Nanos = u64;

/// A physical page number: `(die * blocks_per_die + block) * pages_per_block + page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ppn(pub u64);

/// A block number over the whole device: `die * blocks_per_die + block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u64);

/// The shape of the device.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Geometry {
    /// Independent channels (buses) between controller and dies.
    pub channels: u32,
    /// Dies (ways) on each channel.
    pub ways: u32,
    /// Erase blocks per die.
    pub blocks_per_die: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// Data bytes per page (16 KiB by default; tests use small pages).
    pub page_bytes: u32,
    /// Spare (out-of-band) bytes per page.
    pub spare_bytes: u32,
}

impl Default for Geometry {
    /// 8 channels x 4 ways x 1024 blocks x 256 pages of 16 KiB + 256 spare
    /// bytes (the spare area Cosmos+ OpenSSD leaves usable): 128 GiB,
    /// 2^23 pages.
    fn default() -> Geometry {
        Geometry {
            channels: 8,
            ways: 4,
            blocks_per_die: 1024,
            pages_per_block: 256,
            page_bytes: 16 * 1024,
            spare_bytes: 256,
        }
    }
}

impl std::fmt::Display for Geometry {
    /// `CHANNELSxWAYSxBLOCKSxPAGES`, the form [`Geometry`]'s `FromStr` reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{}x{}x{}",
            self.channels, self.ways, self.blocks_per_die, self.pages_per_block
        )
    }
}

impl std::str::FromStr for Geometry {
    type Err = String;

    /// `CHANNELSxWAYSxBLOCKSxPAGES` (channels, dies per channel, blocks per
    /// die, pages per block), with the default page and spare sizes.
    fn from_str(text: &str) -> Result<Geometry, String> {
        let parts: Vec<&str> = text.split('x').collect();
        let [channels, ways, blocks, pages] = parts[..] else {
            return Err(format!(
                "{text:?} is not CHANNELSxWAYSxBLOCKSxPAGES, e.g. {}",
                Geometry::default()
            ));
        };
        let number = |what: &str, part: &str| {
            part.parse::<u32>()
                .map_err(|_| format!("{what} {part:?} in {text:?} is not a number"))
        };
        let geometry = Geometry {
            channels: number("channels", channels)?,
            ways: number("ways", ways)?,
            blocks_per_die: number("blocks per die", blocks)?,
            pages_per_block: number("pages per block", pages)?,
            ..Geometry::default()
        };
        geometry.validate().map_err(|e| e.to_string())?;
        Ok(geometry)
    }
}

impl Geometry {
    /// Checks every field: at least one of each, pages of 64 bytes to
    /// 1 MiB in multiples of 8, and a block count that fits `u32`.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        let positive = [
            ("channels", self.channels),
            ("ways", self.ways),
            ("blocks_per_die", self.blocks_per_die),
            ("pages_per_block", self.pages_per_block),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(InvalidArgument::new(name, "must be at least 1"));
            }
        }
        if !(64..=1 << 20).contains(&self.page_bytes) || !self.page_bytes.is_multiple_of(8) {
            return Err(InvalidArgument::new(
                "page_bytes",
                format!(
                    "must be a multiple of 8 from 64 to 1 MiB, got {}",
                    self.page_bytes
                ),
            ));
        }
        if self.spare_bytes > self.page_bytes {
            return Err(InvalidArgument::new(
                "spare_bytes",
                "must not exceed page_bytes",
            ));
        }
        let dies = u64::from(self.channels) * u64::from(self.ways);
        let pages = dies * u64::from(self.blocks_per_die) * u64::from(self.pages_per_block);
        if dies > u64::from(u32::MAX) || pages > crate::gtt::MAX_PAGES {
            return Err(InvalidArgument::new(
                "geometry",
                format!(
                    "{pages} pages: a GTT entry's 29 bits name at most {}",
                    crate::gtt::MAX_PAGES
                ),
            ));
        }
        Ok(())
    }

    /// Dies in all (`channels * ways`).
    pub fn dies(&self) -> u32 {
        self.channels * self.ways
    }

    /// Blocks in all.
    pub fn blocks(&self) -> u64 {
        u64::from(self.dies()) * u64::from(self.blocks_per_die)
    }

    /// Pages in all.
    pub fn pages(&self) -> u64 {
        self.blocks() * u64::from(self.pages_per_block)
    }

    /// The page `page` of block `block` of die `die`.
    pub fn ppn(&self, die: u32, block: u32, page: u32) -> Ppn {
        Ppn(
            (u64::from(die) * u64::from(self.blocks_per_die) + u64::from(block))
                * u64::from(self.pages_per_block)
                + u64::from(page),
        )
    }

    /// The block holding `ppn` and the page's index within it.
    pub fn block_of(&self, ppn: Ppn) -> (BlockId, u32) {
        let ppb = u64::from(self.pages_per_block);
        // The remainder of a division by a u32 fits u32.
        let page = u32::try_from(ppn.0 % ppb).expect("a remainder below pages_per_block");
        (BlockId(ppn.0 / ppb), page)
    }

    /// The die of `block`.
    pub fn die_of(&self, block: BlockId) -> u32 {
        // Blocks fit u32 (validated), so their die does too.
        u32::try_from(block.0 / u64::from(self.blocks_per_die)).expect("validated: blocks fit u32")
    }

    /// The channel of die `die`.
    pub fn channel_of(&self, die: u32) -> u32 {
        die % self.channels
    }
}

/// Latencies and transfer rates of the timing model.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Timing {
    /// Array read time tR (40 us).
    pub read_ns: Nanos,
    /// Program time tPROG (200 us).
    pub program_ns: Nanos,
    /// Block erase time tBERS (2 ms).
    pub erase_ns: Nanos,
    /// One channel's transfer rate in bytes per second (800 MB/s, an
    /// NV-DDR2/Toggle 2.0 bus of 8 bits at 800 MT/s: 20.48 us per 16 KiB page).
    pub channel_bytes_per_s: u64,
    /// The host link's rate in bytes per second (4 GB/s, PCIe Gen2 x8 as
    /// on the paper's board: 4.096 us per 16 KiB page).
    pub host_bytes_per_s: u64,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            read_ns: 40_000,
            program_ns: 200_000,
            erase_ns: 2_000_000,
            channel_bytes_per_s: 800_000_000,
            host_bytes_per_s: 4_000_000_000,
        }
    }
}

impl Timing {
    /// Both rates must be positive.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        if self.channel_bytes_per_s == 0 {
            return Err(InvalidArgument::new(
                "channel_bytes_per_s",
                "must be positive",
            ));
        }
        if self.host_bytes_per_s == 0 {
            return Err(InvalidArgument::new("host_bytes_per_s", "must be positive"));
        }
        Ok(())
    }

    /// Nanoseconds to move `bytes` at `rate` bytes per second, rounded up.
    fn transfer_ns(bytes: u64, rate: u64) -> Nanos {
        let ns = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(rate));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// What the device has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlashCounters {
    /// NAND page reads.
    pub page_reads: u64,
    /// NAND page programs.
    pub programs: u64,
    /// Block erases.
    pub erases: u64,
    /// Bytes moved over the host link, both directions.
    pub host_bytes: u64,
    /// The latest completion time of any operation.
    pub modelled_ns: Nanos,
}

/// One page read: its bytes and when they reached the controller.
#[derive(Debug)]
pub struct PageRead<'a> {
    /// The page's data bytes.
    pub data: &'a [u8],
    /// The page's spare bytes.
    pub spare: &'a [u8],
    /// When the read completed (array read and channel transfer).
    pub done: Nanos,
}

/// The simulated NAND device.
///
/// Invariants: a block's pages `0..written[block]` are programmed and the
/// rest erased; a programmed page's bytes are what it was programmed with
/// (in memory, only programmed pages are kept; on a flash file, an erased
/// block is a hole); busy-until times never decrease.
#[derive(Debug)]
pub struct Flash {
    geometry: Geometry,
    timing: Timing,
    page_len: usize,
    pages: Pages,
    written: Vec<u32>,
    erase_counts: Vec<u32>,
    die_busy: Vec<Nanos>,
    channel_busy: Vec<Nanos>,
    host_busy: Nanos,
    counters: FlashCounters,
    power_cut_after: Option<u64>,
}

/// Where a device's programmed pages keep their bytes (whether a page is
/// programmed is the device's block counts' business, not theirs).
#[derive(Debug)]
enum Pages {
    /// Each programmed page in its own allocation.
    Memory(HashMap<u64, Box<[u8]>>),
    /// A sparse file, page `ppn` at `ppn * page_len`.
    File(SparseFile),
}

impl Pages {
    /// Page `ppn`'s bytes (it must have been put since its block was
    /// discarded).
    fn get(&self, ppn: u64, page_len: usize) -> &[u8] {
        match self {
            Pages::Memory(pages) => &pages[&ppn],
            Pages::File(file) => &file.bytes()[offset(ppn, page_len)..][..page_len],
        }
    }

    fn put(&mut self, ppn: u64, page_len: usize, bytes: Box<[u8]>) {
        match self {
            Pages::Memory(pages) => {
                pages.insert(ppn, bytes);
            }
            Pages::File(file) => {
                file.bytes_mut()[offset(ppn, page_len)..][..page_len].copy_from_slice(&bytes);
            }
        }
    }

    /// Forgets the `count` pages from `first` (an erased block's written
    /// ones): the file gets a hole there, so an erased block takes no disk
    /// space.
    fn discard(&mut self, first: u64, count: u64, page_len: usize) -> Result<()> {
        match self {
            Pages::Memory(pages) => {
                for ppn in first..first + count {
                    pages.remove(&ppn);
                }
            }
            Pages::File(file) => {
                let len = page_len as u64;
                file.punch(first * len..(first + count) * len)
                    .map_err(Error::FlashFile)?;
            }
        }
        Ok(())
    }
}

/// Where page `ppn` starts in a file of pages.
fn offset(ppn: u64, page_len: usize) -> usize {
    usize::try_from(ppn).expect("a device's pages fit the address space") * page_len
}

impl Flash {
    /// An erased device of `geometry` with `timing`, its pages in memory.
    pub fn new(geometry: Geometry, timing: Timing) -> Result<Flash> {
        geometry.validate()?;
        timing.validate()?;
        Ok(Flash::with_pages(
            geometry,
            timing,
            Pages::Memory(HashMap::new()),
        ))
    }

    /// An erased device of `geometry` with `timing`, its pages in the
    /// sparse file `path`, made fresh (nothing may be there yet) and
    /// removed when the device is dropped: page `ppn`'s data and spare
    /// bytes at `ppn` times their length, so the file is as long as the
    /// whole device but takes disk space only for programmed pages (an
    /// erase punches its block out). For devices larger than memory.
    pub fn on_file(geometry: Geometry, timing: Timing, path: &Path) -> Result<Flash> {
        geometry.validate()?;
        timing.validate()?;
        let page_len = u64::from(geometry.page_bytes + geometry.spare_bytes);
        let file =
            SparseFile::create(path, geometry.pages() * page_len).map_err(Error::FlashFile)?;
        Ok(Flash::with_pages(geometry, timing, Pages::File(file)))
    }

    /// An erased device of a validated `geometry` and `timing` on `pages`.
    fn with_pages(geometry: Geometry, timing: Timing, pages: Pages) -> Flash {
        let blocks = usize::try_from(geometry.blocks()).expect("validated: blocks fit u32");
        let dies = geometry.dies() as usize;
        Flash {
            page_len: (geometry.page_bytes + geometry.spare_bytes) as usize,
            written: vec![0; blocks],
            erase_counts: vec![0; blocks],
            die_busy: vec![0; dies],
            channel_busy: vec![0; geometry.channels as usize],
            host_busy: 0,
            pages,
            counters: FlashCounters::default(),
            power_cut_after: None,
            geometry,
            timing,
        }
    }

    /// The device's geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The device's timing parameters.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// The counters so far.
    pub fn counters(&self) -> &FlashCounters {
        &self.counters
    }

    /// Freezes the device once `programs` programs have completed (counted
    /// from the device's start): later programs and erases fail with
    /// [`Error::PowerCut`] and the pages programmed so far stay as they are.
    pub fn cut_power_after(&mut self, programs: u64) {
        self.power_cut_after = Some(programs);
    }

    /// A device as an image left it: its block counts and its programmed
    /// pages (data and spare bytes); errors name what does not fit
    /// `geometry` or the flash's rules.
    pub fn restore(
        geometry: Geometry,
        timing: Timing,
        written: Vec<u32>,
        erase_counts: Vec<u32>,
        pages: Vec<(u64, Box<[u8]>)>,
    ) -> Result<Flash> {
        let mut flash = Flash::new(geometry, timing)?;
        let blocks = flash.written.len();
        if written.len() != blocks || erase_counts.len() != blocks {
            return Err(InvalidArgument::new(
                "image",
                format!("block counts for {} blocks, not {blocks}", written.len()),
            )
            .into());
        }
        if written.iter().any(|&w| w > flash.geometry.pages_per_block) {
            return Err(InvalidArgument::new("image", "a block written past its end").into());
        }
        let programmed: u64 = written.iter().map(|&w| u64::from(w)).sum();
        if programmed != pages.len() as u64 {
            return Err(InvalidArgument::new(
                "image",
                format!("{} pages for {programmed} programs", pages.len()),
            )
            .into());
        }
        if pages.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(
                InvalidArgument::new("image", "page numbers not in increasing order").into(),
            );
        }
        for (ppn, bytes) in pages {
            let (block, page) = flash.check_ppn(Ppn(ppn))?;
            if page >= written[block] || bytes.len() != flash.page_len {
                return Err(InvalidArgument::new(
                    "image",
                    format!("page {ppn} is not a programmed page of its block"),
                )
                .into());
            }
            flash.pages.put(ppn, flash.page_len, bytes);
        }
        flash.written = written;
        flash.erase_counts = erase_counts;
        Ok(flash)
    }

    /// The programmed pages, in order.
    pub fn programmed_pages(&self) -> Vec<u64> {
        let ppb = u64::from(self.geometry.pages_per_block);
        (0u64..)
            .zip(&self.written)
            .flat_map(|(block, &w)| (0..u64::from(w)).map(move |page| block * ppb + page))
            .collect()
    }

    /// A programmed page's data and spare bytes (empty if erased).
    pub fn raw(&self, ppn: u64) -> &[u8] {
        if self.is_programmed(Ppn(ppn)) {
            self.pages.get(ppn, self.page_len)
        } else {
            &[]
        }
    }

    /// Pages programmed in each block since its erase.
    pub fn block_writes(&self) -> &[u32] {
        &self.written
    }

    /// Each block's erase count.
    pub fn block_erases(&self) -> &[u32] {
        &self.erase_counts
    }

    /// Brings power back after a cut: the pages programmed before it are
    /// there, and programs and erases work again.
    pub fn power_on(&mut self) {
        self.power_cut_after = None;
    }

    /// Whether a power cut has frozen the device.
    pub fn is_frozen(&self) -> bool {
        self.power_cut_after
            .is_some_and(|k| self.counters.programs >= k)
    }

    fn check_ppn(&self, ppn: Ppn) -> Result<(usize, u32)> {
        if ppn.0 >= self.geometry.pages() {
            return Err(Error::PageOutOfRange { ppn: ppn.0 });
        }
        let (block, page) = self.geometry.block_of(ppn);
        Ok((to_index(block.0), page))
    }

    /// Whether `ppn` holds programmed data: its block has been programmed
    /// past it since its erase.
    pub fn is_programmed(&self, ppn: Ppn) -> bool {
        if ppn.0 >= self.geometry.pages() {
            return false;
        }
        let (block, page) = self.geometry.block_of(ppn);
        page < self.written[to_index(block.0)]
    }

    /// Pages of `block` programmed since its last erase.
    pub fn written_pages(&self, block: BlockId) -> u32 {
        self.written[to_index(block.0)]
    }

    /// Times `block` was erased.
    pub fn erase_count(&self, block: BlockId) -> u32 {
        self.erase_counts[to_index(block.0)]
    }

    /// The data bytes of `ppn` without a modelled read (for tests and
    /// invariant checks; nothing is counted).
    pub fn peek(&self, ppn: Ppn) -> Option<&[u8]> {
        self.is_programmed(ppn)
            .then(|| &self.pages.get(ppn.0, self.page_len)[..self.geometry.page_bytes as usize])
    }

    /// The spare bytes of `ppn` without a modelled read.
    pub fn peek_spare(&self, ppn: Ppn) -> Option<&[u8]> {
        self.is_programmed(ppn)
            .then(|| &self.pages.get(ppn.0, self.page_len)[self.geometry.page_bytes as usize..])
    }

    fn finish(&mut self, done: Nanos) -> Nanos {
        self.counters.modelled_ns = self.counters.modelled_ns.max(done);
        done
    }

    /// Reads `ppn`, submitted at `at`: the die senses the page (tR) once
    /// it is free, then the page crosses its channel once that is free;
    /// the die stays busy until its page register is emptied.
    pub fn read(&mut self, ppn: Ppn, at: Nanos) -> Result<PageRead<'_>> {
        self.check_ppn(ppn)?;
        if !self.is_programmed(ppn) {
            return Err(Error::ReadErased { ppn: ppn.0 });
        }
        let die = self.geometry.die_of(self.geometry.block_of(ppn).0);
        let channel = self.geometry.channel_of(die) as usize;
        let die = die as usize;
        let sensed = at.max(self.die_busy[die]) + self.timing.read_ns;
        let start = sensed.max(self.channel_busy[channel]);
        let done = start
            + Timing::transfer_ns(
                u64::from(self.geometry.page_bytes),
                self.timing.channel_bytes_per_s,
            );
        self.channel_busy[channel] = done;
        self.die_busy[die] = done;
        self.counters.page_reads += 1;
        self.finish(done);
        let bytes = self.pages.get(ppn.0, self.page_len);
        let (data, spare) = bytes.split_at(self.geometry.page_bytes as usize);
        Ok(PageRead { data, spare, done })
    }

    /// Programs `ppn` with `data` (exactly a page) and `spare` (at most the
    /// spare area; the rest reads as zeros), submitted at `at`: the data
    /// crosses the channel into the die's register once both are free,
    /// then the die programs for tPROG. Returns the completion time.
    pub fn program(&mut self, ppn: Ppn, data: &[u8], spare: &[u8], at: Nanos) -> Result<Nanos> {
        let (block, page) = self.check_ppn(ppn)?;
        if data.len() != self.geometry.page_bytes as usize
            || spare.len() > self.geometry.spare_bytes as usize
        {
            return Err(Error::PageSize {
                data: data.len(),
                spare: spare.len(),
                page: self.geometry.page_bytes as usize,
                spare_area: self.geometry.spare_bytes as usize,
            });
        }
        if self.is_frozen() {
            return Err(Error::PowerCut {
                programs: self.counters.programs,
            });
        }
        let expected = self.written[block];
        if page < expected {
            return Err(Error::ProgramNotErased { ppn: ppn.0 });
        }
        if page > expected {
            return Err(Error::ProgramOutOfOrder {
                ppn: ppn.0,
                expected,
            });
        }
        let die = self.geometry.die_of(self.geometry.block_of(ppn).0);
        let channel = self.geometry.channel_of(die) as usize;
        let die = die as usize;
        let start = at.max(self.die_busy[die]).max(self.channel_busy[channel]);
        let moved = start
            + Timing::transfer_ns(
                u64::from(self.geometry.page_bytes),
                self.timing.channel_bytes_per_s,
            );
        let done = moved + self.timing.program_ns;
        self.channel_busy[channel] = moved;
        self.die_busy[die] = done;
        let mut bytes = vec![0u8; self.page_len].into_boxed_slice();
        bytes[..data.len()].copy_from_slice(data);
        bytes[data.len()..data.len() + spare.len()].copy_from_slice(spare);
        self.pages.put(ppn.0, self.page_len, bytes);
        self.written[block] = expected + 1;
        self.counters.programs += 1;
        Ok(self.finish(done))
    }

    /// Erases every page of `block`, submitted at `at`; returns the
    /// completion time.
    pub fn erase(&mut self, block: BlockId, at: Nanos) -> Result<Nanos> {
        if block.0 >= self.geometry.blocks() {
            return Err(Error::BlockOutOfRange { block: block.0 });
        }
        if self.is_frozen() {
            return Err(Error::PowerCut {
                programs: self.counters.programs,
            });
        }
        let index = to_index(block.0);
        let ppb = u64::from(self.geometry.pages_per_block);
        // Only the pages written since the last erase hold anything.
        let written = u64::from(self.written[index]);
        self.pages.discard(block.0 * ppb, written, self.page_len)?;
        self.written[index] = 0;
        self.erase_counts[index] += 1;
        let die = self.geometry.die_of(block) as usize;
        let done = at.max(self.die_busy[die]) + self.timing.erase_ns;
        self.die_busy[die] = done;
        self.counters.erases += 1;
        Ok(self.finish(done))
    }

    /// Moves `bytes` over the host link (one link, shared by every
    /// request), submitted at `at`; returns the completion time.
    pub fn host_transfer(&mut self, bytes: u64, at: Nanos) -> Nanos {
        let start = at.max(self.host_busy);
        let done = start + Timing::transfer_ns(bytes, self.timing.host_bytes_per_s);
        self.host_busy = done;
        self.counters.host_bytes += bytes;
        self.finish(done)
    }
}

/// A value read from the device, with what reading it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Fetched<T> {
    /// The value.
    pub value: T,
    /// NAND pages read for it.
    pub pages_read: u64,
    /// When the call was submitted.
    pub submitted: Nanos,
    /// When its last byte reached the host.
    pub done: Nanos,
}

impl<T> Fetched<T> {
    /// Modelled latency of the call.
    pub fn latency(&self) -> Nanos {
        self.done - self.submitted
    }
}

/// `value` as an index; the device's block and page counts fit memory.
pub(crate) fn to_index(value: u64) -> usize {
    usize::try_from(value).expect("a device index fits usize")
}
