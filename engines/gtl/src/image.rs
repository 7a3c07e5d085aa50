//! A device image on disk: the simulated SSD between commands.
//!
//! What an image holds is what survives a power-off: the device's settings,
//! every programmed NAND page with its spare area, each block's program
//! count and erase count, and the host's note of where the baseline's CSR
//! file lies. The FTL's map and the GTL's tables are controller DRAM: an
//! opened image is mounted as after a power cut ([`Ssd::power_cycle`]),
//! which reads every graph page (its modelled time is the mount's).
//!
//! Format (little-endian): the 16-byte magic `QUIVER-GTL-IMG1\n`, the
//! header's length (`u64`), the header (JSON: settings, block counts, the
//! programmed pages' numbers in increasing order), each programmed page's
//! data and spare bytes in that order, and the CRC-32C of everything
//! before it (`u32`). Pages never
//! programmed take no space. [`Ssd::save`] writes a temporary file beside
//! the image and renames it over the image, so an image is always a
//! complete one: a process that dies mid-command leaves the one before.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use quiver_io::{Output, Shape};
use quiver_run::{Progress, Unit};
use serde::{Deserialize, Serialize};

use crate::baseline::CsrFile;
use crate::device::{Config, Ssd};
use crate::error::{Error, Result};
use crate::flash::{Flash, Nanos};

const MAGIC: &[u8; 16] = b"QUIVER-GTL-IMG1\n";

/// The image's header.
#[derive(Serialize, Deserialize)]
struct Header {
    config: Config,
    csr: Option<CsrFile>,
    written: Vec<u32>,
    erase_counts: Vec<u32>,
    pages: Vec<u64>,
}

/// An error about the image at `path`.
fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Image {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| bad(path, e.to_string())
}

impl Ssd {
    /// Writes the device to the image `path` (atomically: a temporary
    /// file beside it, then a rename). `progress` hears of the bytes
    /// written, and may stop the write every 64 pages
    /// ([`Error::Cancelled`]): the temporary file is removed and the image
    /// left as it was.
    pub fn save(&self, path: &Path, progress: &dyn Progress) -> Result<()> {
        let flash = self.flash();
        let header = Header {
            config: self.config().clone(),
            csr: self.csr().cloned(),
            written: flash.block_writes().to_vec(),
            erase_counts: flash.block_erases().to_vec(),
            pages: flash.programmed_pages(),
        };
        let json = serde_json::to_vec(&header).map_err(|e| bad(path, e.to_string()))?;
        let out = Output::create(path, Shape::Seekable).map_err(io(path))?;
        let mut out = BufWriter::new(out);
        let mut crc = 0;
        let len = (json.len() as u64).to_le_bytes();
        let parts = [MAGIC.as_slice(), len.as_slice(), json.as_slice()];
        let pages = header.pages.iter().map(|&ppn| flash.raw(ppn));
        let page_len =
            u64::from(self.config().geometry.page_bytes + self.config().geometry.spare_bytes);
        progress.start(
            "saving the image",
            Unit::Bytes,
            Some(header.pages.len() as u64 * page_len),
        );
        for (i, bytes) in parts.into_iter().chain(pages).enumerate() {
            crc = crc32c::crc32c_append(crc, bytes);
            out.write_all(bytes).map_err(io(path))?;
            if (i + 1) % 64 == 0 {
                progress.advance(64 * page_len);
                progress.check()?;
            }
        }
        out.write_all(&crc.to_le_bytes()).map_err(io(path))?;
        let out = out.into_inner().map_err(|e| bad(path, e.to_string()))?;
        out.commit().map_err(io(path))
    }

    /// Opens the image `path` and mounts it: the FTL and the GTL are
    /// rebuilt from its pages as after a power cut. Returns the device and
    /// the mount's modelled time.
    pub fn open(path: &Path) -> Result<(Ssd, Nanos)> {
        let mut input = BufReader::new(File::open(path).map_err(io(path))?);
        let mut magic = [0u8; 16];
        if input.read_exact(&mut magic).is_err() || &magic != MAGIC {
            return Err(bad(path, "not a quiver gtl device image (bad magic)"));
        }
        let mut len = [0u8; 8];
        input
            .read_exact(&mut len)
            .map_err(|_| bad(path, "truncated header"))?;
        let len = usize::try_from(u64::from_le_bytes(len))
            .ok()
            .filter(|&l| l < 1 << 30)
            .ok_or_else(|| bad(path, "a header longer than 1 GiB"))?;
        let mut crc = crc32c::crc32c_append(crc32c::crc32c(MAGIC), &(len as u64).to_le_bytes());
        let mut json = vec![0u8; len];
        input
            .read_exact(&mut json)
            .map_err(|_| bad(path, "truncated header"))?;
        crc = crc32c::crc32c_append(crc, &json);
        let header: Header =
            serde_json::from_slice(&json).map_err(|e| bad(path, format!("header: {e}")))?;
        header
            .config
            .validate()
            .map_err(|e| bad(path, format!("settings: {e}")))?;
        let geometry = &header.config.geometry;
        let page_len = (geometry.page_bytes + geometry.spare_bytes) as usize;
        let mut pages = Vec::with_capacity(header.pages.len());
        for &ppn in &header.pages {
            let mut bytes = vec![0u8; page_len].into_boxed_slice();
            input
                .read_exact(&mut bytes)
                .map_err(|_| bad(path, format!("truncated at page {ppn}")))?;
            crc = crc32c::crc32c_append(crc, &bytes);
            pages.push((ppn, bytes));
        }
        let mut stored = [0u8; 4];
        input
            .read_exact(&mut stored)
            .map_err(|_| bad(path, "truncated before its checksum"))?;
        if crc != u32::from_le_bytes(stored) || input.read(&mut [0u8; 1]).map_err(io(path))? != 0 {
            return Err(bad(path, "the image does not match its checksum"));
        }
        let flash = Flash::restore(
            geometry.clone(),
            header.config.timing.clone(),
            header.written,
            header.erase_counts,
            pages,
        )
        .map_err(|e| bad(path, e.to_string()))?;
        let mut ssd = Ssd::with_flash(&header.config, flash, header.csr)?;
        let mount = ssd.power_cycle()?;
        Ok((ssd, mount))
    }
}

/// Whether `path` starts as a device image does (a file that does not,
/// or cannot be read, is not one).
pub fn is_image(path: &Path) -> bool {
    let mut magic = [0u8; 16];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == MAGIC
}
