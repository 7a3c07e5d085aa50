//! A sparse file mapped for reading and writing: the backing store of a
//! simulated device larger than memory. The file is as long as the device
//! but takes disk space only where it was written; [`SparseFile::punch`]
//! gives a range's space back.

use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::{Error, Result};

/// A file of a fixed length, mapped whole, holes where never written.
///
/// Invariant: this value is the file's only user while it lives (it
/// creates or empties the file, and nothing else of this process opens
/// it), so the mapping's bytes change only through [`SparseFile::bytes_mut`].
#[derive(Debug)]
pub struct SparseFile {
    path: PathBuf,
    file: File,
    map: MmapMut,
}

impl SparseFile {
    /// Creates `path` (or empties it) as a file of `len` bytes that reads
    /// as zeros and takes no disk space until written, and maps it.
    ///
    /// # Errors
    /// [`Error::Create`] if the file cannot be made that long, and
    /// [`Error::Map`] if it cannot be mapped (`len` 0 included).
    pub fn create(path: &Path, len: u64) -> Result<SparseFile> {
        let create = |source| Error::Create {
            path: path.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(create)?;
        file.set_len(len).map_err(create)?;
        // SAFETY: the mapping aliases the file, so it is sound only while
        // nobody else truncates or writes it. The file was just created or
        // emptied here and is held for the map's lifetime; the type's
        // invariant makes this value its only user.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(|source| Error::Map {
            fd: file.as_raw_fd(),
            source,
        })?;
        Ok(SparseFile {
            path: path.to_owned(),
            file,
            map,
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The file's bytes, to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// Gives `range`'s disk space back: it reads as zeros again.
    ///
    /// # Errors
    /// [`Error::Write`] if the file system cannot punch holes.
    ///
    /// # Panics
    /// If `range` does not lie inside the file.
    pub fn punch(&mut self, range: Range<u64>) -> Result<()> {
        assert!(
            range.start <= range.end && range.end <= self.map.len() as u64,
            "the range to punch lies outside the file"
        );
        let failed = |source| Error::Write {
            path: self.path.clone(),
            offset: range.start,
            len: usize::try_from(range.end - range.start).unwrap_or(usize::MAX),
            source,
        };
        let at = i64::try_from(range.start)
            .map_err(|_| failed(std::io::ErrorKind::InvalidInput.into()))?;
        let len = i64::try_from(range.end - range.start)
            .map_err(|_| failed(std::io::ErrorKind::InvalidInput.into()))?;
        // SAFETY: fallocate on a descriptor this value owns, with a range
        // inside the file (asserted above); punching keeps the file's
        // length, so the mapping stays valid and the range reads as zeros.
        let punched = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                at,
                len,
            )
        };
        if punched != 0 {
            return Err(failed(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// The disk space the file takes, in bytes.
    ///
    /// # Errors
    /// [`Error::Metadata`] if the file cannot be looked at.
    pub fn allocated_bytes(&self) -> Result<u64> {
        let meta = self.file.metadata().map_err(|source| Error::Metadata {
            path: self.path.clone(),
            source,
        })?;
        Ok(meta.blocks() * 512)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_ranges_take_space_and_punched_ones_give_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let len = 64 << 20;
        let mut file = SparseFile::create(&dir.path().join("flash"), len).unwrap();
        assert_eq!(file.bytes().len() as u64, len);
        let empty = file.allocated_bytes().unwrap();
        assert!(empty < 1 << 20, "{empty} bytes taken by an unwritten file");
        file.bytes_mut()[1 << 20..2 << 20].fill(7);
        let written = file.allocated_bytes().unwrap();
        assert!(written >= empty + (1 << 20), "{written}");
        file.punch(1 << 20..2 << 20).unwrap();
        assert!(file.allocated_bytes().unwrap() < written);
        assert!(file.bytes()[1 << 20..2 << 20].iter().all(|&b| b == 0));
        // Written again after the punch, it reads back.
        file.bytes_mut()[(1 << 20) + 5] = 9;
        assert_eq!(file.bytes()[(1 << 20) + 5], 9);
    }
}
