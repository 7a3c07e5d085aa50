//! The error type of quiver-csr.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while reading, writing, converting or
/// partitioning a graph. Messages name the file and the fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened.
    #[error("failed to open {}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Reading an input or a graph file failed at the operating-system level.
    #[error("failed to read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Writing an output or a spill file failed.
    #[error("failed to write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Aligned or mapped I/O through quiver-io failed.
    #[error("i/o on {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: quiver_io::Error,
    },
    /// The file does not start with the `.qcsr` magic bytes.
    #[error("{} is not a .qcsr graph (its first bytes are {found:02x?})", path.display())]
    Foreign {
        /// The file.
        path: PathBuf,
        /// The first bytes found (up to eight).
        found: Vec<u8>,
    },
    /// The file was written by a newer format version.
    #[error("{} has .qcsr format version {found}; this build reads up to version {supported}", path.display())]
    FutureVersion {
        /// The file.
        path: PathBuf,
        /// The version in the header.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The file is shorter than its header says.
    #[error("{} is truncated: the header describes {expected} bytes but the file has {actual}", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes the header describes.
        expected: u64,
        /// Bytes present.
        actual: u64,
    },
    /// A stored checksum does not match the bytes.
    #[error("{}: checksum mismatch in the {section} (stored {stored:#010x}, computed {computed:#010x})", path.display())]
    Checksum {
        /// The file.
        path: PathBuf,
        /// Which part of the file (`header`, `offsets section`, ...).
        section: &'static str,
        /// The stored checksum.
        stored: u32,
        /// The checksum of the bytes on disk.
        computed: u32,
    },
    /// A structural fault: bad offsets, targets out of range, an impossible header field.
    #[error("{} is corrupt: {detail}", path.display())]
    Corrupt {
        /// The file (or `<memory>` for an in-memory graph).
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// An input edge list could not be parsed.
    #[error("{}: {location}: {detail}", path.display())]
    Parse {
        /// The input (`-` for standard input).
        path: PathBuf,
        /// Where: `line 12`, `record 7`.
        location: String,
        /// What was wrong.
        detail: String,
    },
    /// A page of graph data does not match its checksum.
    #[error(
        "{} is corrupt: the page at byte {offset} ({section}) has CRC-32C {computed:#010x}, \
         its checksum says {stored:#010x}",
        path.display()
    )]
    PageChecksum {
        /// The file.
        path: PathBuf,
        /// The section holding the page.
        section: &'static str,
        /// File offset of the page.
        offset: u64,
        /// Checksum in the file.
        stored: u32,
        /// Checksum of the bytes read.
        computed: u32,
    },
    /// An argument makes no sense (zero budget, zero chunks, an empty graph shape...).
    #[error("invalid argument")]
    InvalidArgument(#[from] quiver_run::InvalidArgument),
    /// The caller asked the work to stop ([`quiver_run::Progress::cancelled`]).
    #[error(transparent)]
    Cancelled(#[from] quiver_run::Cancelled),
}

impl Error {
    /// The argument `parameter` makes no sense because of `reason`.
    pub(crate) fn invalid(parameter: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument(quiver_run::InvalidArgument::new(parameter, reason))
    }
}

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
