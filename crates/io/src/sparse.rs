//! A sparse file mapped for reading and writing: the backing store of a
//! simulated device larger than memory. The file is as long as the device
//! but takes disk space only where it was written; [`SparseFile::punch`]
//! gives a range's space back. It is scratch space: made fresh (never over
//! an existing file) and removed when dropped.

use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::{Error, Result};

/// A file of a fixed length, mapped whole, holes where never written.
///
/// Invariant: this value made the file (no file existed at its path) and
/// is its only user in this process, so the mapping's bytes change only
/// through [`SparseFile::bytes_mut`]; the file is removed on drop.
#[derive(Debug)]
pub struct SparseFile {
    path: PathBuf,
    file: File,
    map: MmapMut,
}

impl SparseFile {
    /// Creates `path`, which must not exist, as a file of `len` bytes that
    /// reads as zeros and takes no disk space until written, and maps it.
    ///
    /// # Errors
    /// [`Error::Exists`] if something is at `path` already,
    /// [`Error::Create`] if the file cannot be made that long, and
    /// [`Error::MapWritable`] if it cannot be mapped.
    pub fn create(path: &Path, len: u64) -> Result<SparseFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::AlreadyExists => Error::Exists {
                    path: path.to_owned(),
                },
                _ => Error::Create {
                    path: path.to_owned(),
                    source,
                },
            })?;
        // From here on the file is ours: removed if making it fails.
        let made = |file: File| -> Result<SparseFile> {
            file.set_len(len).map_err(|source| Error::Create {
                path: path.to_owned(),
                source,
            })?;
            // SAFETY: the mapping aliases the file, so it is sound only
            // while nobody truncates or writes the file other than through
            // it. The file was created just now (`create_new`: nothing of
            // anyone else's was at the path), and this value, its only user
            // in the process, holds it for the map's lifetime.
            let map = unsafe { MmapMut::map_mut(&file) }.map_err(|source| Error::MapWritable {
                path: path.to_owned(),
                source,
            })?;
            Ok(SparseFile {
                path: path.to_owned(),
                file,
                map,
            })
        };
        made(file).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
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

    /// Gives `range`'s disk space back: it reads as zeros again (an empty
    /// range does nothing).
    ///
    /// # Errors
    /// [`Error::Punch`] if the file system cannot punch holes.
    ///
    /// # Panics
    /// If `range` does not lie inside the file.
    pub fn punch(&mut self, range: Range<u64>) -> Result<()> {
        assert!(
            range.start <= range.end && range.end <= self.map.len() as u64,
            "the range to punch lies outside the file"
        );
        let len = range.end - range.start;
        if len == 0 {
            // fallocate refuses an empty range; there is nothing to give back.
            return Ok(());
        }
        let failed = |source| Error::Punch {
            path: self.path.clone(),
            offset: range.start,
            len,
            source,
        };
        // Inside a mapped file, so below isize::MAX.
        let (at, count) = (
            i64::try_from(range.start).expect("inside a mapped file"),
            i64::try_from(len).expect("inside a mapped file"),
        );
        // SAFETY: fallocate on a descriptor this value owns, with a range
        // inside the file (asserted above); punching keeps the file's
        // length, so the mapping stays valid and the range reads as zeros.
        let punched = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                at,
                count,
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

impl Drop for SparseFile {
    fn drop(&mut self) {
        // Scratch space: nothing in it outlives the device.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_ranges_take_space_and_punched_ones_give_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flash");
        let len = 64 << 20;
        let mut file = SparseFile::create(&path, len).unwrap();
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
        drop(file);
        assert!(!path.exists(), "scratch space is removed");
    }

    #[test]
    fn an_existing_file_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("graph.qcsr");
        std::fs::write(&path, b"not scratch").unwrap();
        let err = SparseFile::create(&path, 1 << 20).unwrap_err();
        assert!(matches!(err, Error::Exists { .. }), "{err}");
        assert!(err.to_string().contains("already exists"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"not scratch");
    }
}
