//! Buffered positioned writes.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{Error, IoStats, Result};

/// A file created for buffered positioned writes (`pwrite`), counted in its
/// [`IoStats`].
#[derive(Debug)]
pub struct WriteFile {
    file: File,
    path: PathBuf,
    stats: Arc<IoStats>,
}

impl WriteFile {
    /// Creates `path`, truncating it if it exists.
    pub fn create(path: &Path) -> Result<WriteFile> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|source| Error::Create {
                path: path.to_owned(),
                source,
            })?;
        Ok(WriteFile {
            file,
            path: path.to_owned(),
            stats: Arc::default(),
        })
    }

    /// Writes all of `data` at `offset` (continuing short writes), counted as
    /// one write call.
    pub fn write_all_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, offset)
            .map_err(|source| Error::Write {
                path: self.path.clone(),
                offset,
                len: data.len(),
                source,
            })?;
        self.stats.record_write(data.len() as u64);
        Ok(())
    }

    /// Flushes data and metadata to disk (`fsync`).
    pub fn sync(&self) -> Result<()> {
        self.file.sync_all().map_err(|source| Error::Sync {
            path: self.path.clone(),
            source,
        })
    }

    /// The path the file was created at.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's write counters.
    #[must_use]
    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
