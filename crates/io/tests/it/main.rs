//! Integration tests for quiver-io: one binary, one module per concern.

mod batch;
mod equivalence;
mod errors;
mod fallback;
mod write;

use std::path::{Path, PathBuf};

use quiver_io::{BackendChoice, ReadFile, ReadOptions};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A file of random bytes on the temp dir (on disk here, so `O_DIRECT` works;
/// elsewhere the reads fall back to buffered and must still agree).
#[derive(Debug)]
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub data: Vec<u8>,
}

impl Fixture {
    pub fn new(len: usize, seed: u64) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.bin");
        let data = random_bytes(len, seed);
        std::fs::write(&path, &data).unwrap();
        // Compare against what the filesystem returns, not what we meant.
        assert_eq!(std::fs::read(&path).unwrap(), data);
        Fixture {
            _dir: dir,
            path,
            data,
        }
    }
}

pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut data = vec![0u8; len];
    Pcg64::seed_from_u64(seed).fill(&mut data[..]);
    data
}

pub fn open(path: &Path, backend: BackendChoice, direct: bool, queue_depth: u32) -> ReadFile {
    let opts = ReadOptions {
        backend,
        direct,
        queue_depth,
    };
    ReadFile::open(path, &opts).unwrap_or_else(|e| panic!("open {backend} direct={direct}: {e:#?}"))
}

/// Whether io_uring works on this machine, as `Auto` finds out.
pub fn uring_available(path: &Path) -> bool {
    let f = open(path, BackendChoice::Auto, false, 4);
    if f.backend() == quiver_io::Backend::Pread {
        eprintln!("io_uring unavailable here: {:?}", f.fallback_reason());
        false
    } else {
        true
    }
}

/// The (backend, direct) pairs testable here: pread always, uring if present.
pub fn configs(path: &Path) -> Vec<(BackendChoice, bool)> {
    let mut v = vec![(BackendChoice::Pread, true), (BackendChoice::Pread, false)];
    if uring_available(path) {
        v.extend([(BackendChoice::Uring, true), (BackendChoice::Uring, false)]);
    }
    v
}
