//! Positioned reads through io_uring or `pread`, optionally `O_DIRECT`.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use io_uring::IoUring;

use crate::{uring, AlignedBuf, Error, IoStats, Result, ALIGN, ALIGN_U64};

/// The largest single kernel read we issue: Linux caps one read at
/// `MAX_RW_COUNT` (`INT_MAX` rounded down to a page), a multiple of [`ALIGN`].
pub(crate) const MAX_IO: usize = 0x7fff_f000;

/// Which read backend the caller asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackendChoice {
    /// io_uring if it can be set up, else `pread` (with a warning).
    #[default]
    Auto,
    /// io_uring, or an error if it cannot be set up.
    Uring,
    /// `pread`, one request after another.
    Pread,
}

impl FromStr for BackendChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "uring" => Ok(BackendChoice::Uring),
            "pread" => Ok(BackendChoice::Pread),
            _ => Err(Error::ParseBackend {
                input: s.to_owned(),
            }),
        }
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Uring => "uring",
            BackendChoice::Pread => "pread",
        })
    }
}

/// The read backend a [`ReadFile`] actually uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// io_uring, up to `queue_depth` reads in flight.
    Uring,
    /// `pread`, one request after another.
    Pread,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Uring => "uring",
            Backend::Pread => "pread",
        })
    }
}

/// How to open a [`ReadFile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Backend to use; see [`BackendChoice`].
    pub backend: BackendChoice,
    /// Ask for `O_DIRECT` (bypassing the page cache); falls back to buffered
    /// reads if the filesystem refuses. Either way, reads must then follow
    /// the alignment rule in the crate docs.
    pub direct: bool,
    /// Most reads in flight at once on io_uring (0 is treated as 1).
    pub queue_depth: u32,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            backend: BackendChoice::Auto,
            direct: true,
            queue_depth: 64,
        }
    }
}

/// One read of a batch: fill all of `buf` from `offset`.
#[derive(Debug)]
pub struct ReadRequest<'a> {
    /// File offset of the first byte.
    pub offset: u64,
    /// Destination; its length is the number of bytes read.
    pub buf: &'a mut [u8],
}

/// A read-only file with positioned, optionally direct, batched reads.
///
/// The file must not change while open (see the crate docs). `&self` methods
/// may be called from several threads, and their batches run at once: on
/// io_uring each on a ring of its own (from the file's pool of rings), on
/// `pread` each in its own thread.
pub struct ReadFile {
    file: File,
    path: PathBuf,
    len: u64,
    backend: Backend,
    /// The descriptor really has `O_DIRECT`.
    direct: bool,
    /// `O_DIRECT` was requested, so the alignment rule applies.
    check_alignment: bool,
    queue_depth: usize,
    /// `Some` exactly when `backend == Backend::Uring`.
    rings: Option<Rings>,
    fallback_reason: Option<String>,
    stats: Arc<IoStats>,
}

impl fmt::Debug for ReadFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadFile")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("backend", &self.backend)
            .field("direct", &self.direct)
            .field("queue_depth", &self.queue_depth)
            .field("fallback_reason", &self.fallback_reason)
            .finish_non_exhaustive()
    }
}

impl ReadFile {
    /// Opens `path` read-only.
    ///
    /// With `opts.direct`, opens with `O_DIRECT` and probes one direct read;
    /// if the filesystem refuses (`EINVAL`), reopens buffered and logs a
    /// warning. With [`BackendChoice::Auto`], falls back to `pread` with a
    /// warning if io_uring cannot be set up (`EPERM` under seccomp, `ENOSYS`,
    /// an old kernel); with [`BackendChoice::Uring`] that is an error.
    pub fn open(path: &Path, opts: &ReadOptions) -> Result<ReadFile> {
        let mut reasons = Vec::new();
        let mut file = open_read(path, opts.direct);
        let mut direct = opts.direct;
        if direct {
            if let Err(e) = &file {
                if e.raw_os_error() == Some(libc::EINVAL) {
                    reasons.push(format!("O_DIRECT refused by the filesystem: {e}"));
                    direct = false;
                    file = open_read(path, false);
                }
            }
        }
        let mut file = file.map_err(|source| Error::Open {
            path: path.to_owned(),
            source,
        })?;
        let len = file
            .metadata()
            .map_err(|source| Error::Metadata {
                path: path.to_owned(),
                source,
            })?
            .len();
        if direct && len > 0 {
            // Some filesystems accept the flag and refuse the reads.
            let mut probe = AlignedBuf::zeroed(ALIGN);
            if let Err(e) = pread_some(file.as_raw_fd(), &mut probe, 0) {
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(Error::Read {
                        path: path.to_owned(),
                        offset: 0,
                        len: ALIGN,
                        source: e,
                    });
                }
                reasons.push(format!("O_DIRECT reads refused by the filesystem: {e}"));
                direct = false;
                file = open_read(path, false).map_err(|source| Error::Open {
                    path: path.to_owned(),
                    source,
                })?;
            }
        }
        if opts.direct && !direct {
            tracing::warn!(path = %path.display(), reason = %reasons[0], "falling back to buffered reads");
        }

        let queue_depth = opts.queue_depth.max(1);
        let ring = match opts.backend {
            BackendChoice::Pread => None,
            BackendChoice::Uring => {
                Some(setup_ring(queue_depth).map_err(|source| Error::UringSetup {
                    path: path.to_owned(),
                    queue_depth,
                    source,
                })?)
            }
            BackendChoice::Auto => match setup_ring(queue_depth) {
                Ok(ring) => Some(ring),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "io_uring unavailable, falling back to pread");
                    reasons.push(format!("io_uring unavailable: {e}"));
                    None
                }
            },
        };
        Ok(ReadFile {
            file,
            path: path.to_owned(),
            len,
            backend: if ring.is_some() {
                Backend::Uring
            } else {
                Backend::Pread
            },
            direct,
            check_alignment: opts.direct,
            queue_depth: usize::try_from(queue_depth).unwrap_or(usize::MAX),
            rings: ring.map(|ring| Rings {
                depth: queue_depth,
                idle: Mutex::new(vec![ring]),
                returned: Condvar::new(),
            }),
            fallback_reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
            stats: Arc::default(),
        })
    }

    /// The backend in use.
    #[must_use]
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether reads bypass the page cache (`O_DIRECT` was requested and the
    /// filesystem accepted it).
    #[must_use]
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The file's length in bytes, taken at open.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty at open.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The path the file was opened with.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Maps the open file read-only into memory ([`crate::map_readonly`],
    /// whose contract the caller takes on): the same file its reads see,
    /// not whatever the path names now.
    pub fn map_readonly(&self) -> Result<crate::Mmap> {
        crate::map_readonly(&self.file)
    }

    /// Why the file falls short of what was requested (buffered instead of
    /// direct, `pread` instead of io_uring under [`BackendChoice::Auto`]), or
    /// `None` if the options were honoured.
    #[must_use]
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// The file's read counters.
    #[must_use]
    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }

    /// Reads exactly `buf.len()` bytes at `offset`.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.read_batch(&mut [ReadRequest { offset, buf }])
    }

    /// Fills every request's buffer. On io_uring up to `queue_depth` reads
    /// are in flight at once and complete in any order; on `pread` they run
    /// in order. Short reads are continued.
    ///
    /// All requests are checked (end of file, alignment) before any is
    /// issued. On error, the contents of all buffers are unspecified.
    pub fn read_batch(&self, reqs: &mut [ReadRequest<'_>]) -> Result<()> {
        for r in reqs.iter() {
            self.check(r.offset, r.buf)?;
        }
        // A direct read that ends at an unaligned end of file reads its last
        // partial block into a bounce block, then copies the tail.
        let split = |r: &ReadRequest<'_>| -> Option<usize> {
            (self.direct && !r.buf.len().is_multiple_of(ALIGN)).then(|| r.buf.len() / ALIGN * ALIGN)
        };
        let tails = reqs.iter().filter(|r| split(r).is_some()).count();
        let mut bounce = AlignedBuf::zeroed(tails * ALIGN);
        let bounce_ptr = bounce.as_mut_ptr();
        let mut segs = Vec::with_capacity(reqs.len() + tails);
        let mut tail_no = 0;
        for (i, r) in reqs.iter_mut().enumerate() {
            let head = split(r).unwrap_or(r.buf.len());
            if head > 0 {
                segs.push(Segment::new(i, r.offset, r.buf.as_mut_ptr(), head, head));
            }
            if head < r.buf.len() {
                segs.push(Segment::new(
                    i,
                    r.offset + head as u64,
                    // Stays inside `bounce`, which has `tails * ALIGN` bytes.
                    bounce_ptr.wrapping_add(tail_no * ALIGN),
                    ALIGN,
                    r.buf.len() - head,
                ));
                tail_no += 1;
            }
        }

        let fd = self.file.as_raw_fd();
        let outcome = match &self.rings {
            Some(rings) => {
                let mut ring = rings.take();
                // SAFETY: each segment's `ptr` is either the start of a
                // distinct request buffer of at least `want` bytes, or a
                // distinct ALIGN-sized block of `bounce`; both stay borrowed
                // (`reqs` mutably, `bounce` owned here) and untouched until
                // `run` returns.
                unsafe { uring::run(ring.get(), fd, &mut segs, self.queue_depth, MAX_IO) }
            }
            // SAFETY: as above.
            None => unsafe { run_pread(fd, &mut segs, MAX_IO) },
        };
        outcome.map_err(|e| self.error(reqs, e))?;

        tail_no = 0;
        for r in reqs.iter_mut() {
            if let Some(head) = split(r) {
                let n = r.buf.len() - head;
                r.buf[head..].copy_from_slice(&bounce[tail_no * ALIGN..tail_no * ALIGN + n]);
                tail_no += 1;
            }
        }
        for r in reqs.iter() {
            self.stats.record_read(r.buf.len() as u64);
        }
        Ok(())
    }

    fn check(&self, offset: u64, buf: &[u8]) -> Result<()> {
        let len = buf.len();
        if len == 0 {
            return Ok(());
        }
        let end = offset.checked_add(len as u64);
        let addr = buf.as_ptr() as usize;
        if self.check_alignment
            && (!offset.is_multiple_of(ALIGN_U64)
                || !addr.is_multiple_of(ALIGN)
                || (!len.is_multiple_of(ALIGN) && end != Some(self.len)))
        {
            return Err(Error::Misaligned {
                path: self.path.clone(),
                offset,
                len,
                addr,
            });
        }
        if end.is_none_or(|end| end > self.len) {
            return Err(Error::UnexpectedEof {
                path: self.path.clone(),
                offset,
                len,
            });
        }
        Ok(())
    }

    fn error(&self, reqs: &[ReadRequest<'_>], e: SegError) -> Error {
        let path = self.path.clone();
        match e {
            SegError::Eof { req } => Error::UnexpectedEof {
                path,
                offset: reqs[req].offset,
                len: reqs[req].buf.len(),
            },
            SegError::Read { req, source } => Error::Read {
                path,
                offset: reqs[req].offset,
                len: reqs[req].buf.len(),
                source,
            },
            SegError::Submit(source) => Error::Submit { path, source },
        }
    }
}

/// A file's io_uring rings. A batch takes an idle ring, or sets up one more
/// when every ring is taken by another thread's batch, and gives it back
/// when done: batches from several threads then run at once (a read the
/// page cache holds is a copy made by the thread that submits it), each
/// with up to the queue depth in flight. Between batches a ring has
/// nothing queued and nothing in flight.
struct Rings {
    /// Entries of each ring.
    depth: u32,
    /// Rings no batch holds now.
    idle: Mutex<Vec<IoUring>>,
    /// Signalled when a ring is given back.
    returned: Condvar,
}

impl Rings {
    /// An idle ring, or a new one; if the kernel refuses one more (its
    /// limit on locked memory, say), the first ring given back.
    fn take(&self) -> TakenRing<'_> {
        let idle = self.idle().pop();
        let ring = idle
            .or_else(|| setup_ring(self.depth).ok())
            .unwrap_or_else(|| {
                let mut idle = self.idle();
                loop {
                    match idle.pop() {
                        Some(ring) => break ring,
                        None => {
                            idle = self
                                .returned
                                .wait(idle)
                                .unwrap_or_else(PoisonError::into_inner);
                        }
                    }
                }
            });
        TakenRing {
            rings: self,
            ring: Some(ring),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<IoUring>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A ring taken from [`Rings`] for one batch, given back when dropped
/// (also when a batch panics: `uring::run` drains the ring before it
/// unwinds, so the ring is consistent).
struct TakenRing<'a> {
    rings: &'a Rings,
    ring: Option<IoUring>,
}

impl TakenRing<'_> {
    fn get(&mut self) -> &mut IoUring {
        self.ring
            .as_mut()
            .expect("a taken ring is held until dropped")
    }
}

impl Drop for TakenRing<'_> {
    fn drop(&mut self) {
        if let Some(ring) = self.ring.take() {
            self.rings.idle().push(ring);
            self.rings.returned.notify_one();
        }
    }
}

fn open_read(path: &Path, direct: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

/// Sets up a ring and checks the kernel supports `IORING_OP_READ` (5.6+).
fn setup_ring(entries: u32) -> io::Result<IoUring> {
    let ring = IoUring::new(entries)?;
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    if !probe.is_supported(io_uring::opcode::Read::CODE) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "kernel lacks IORING_OP_READ",
        ));
    }
    Ok(ring)
}

/// One `pread` into `buf` (may be short), retrying `EINTR`/`EAGAIN`.
fn pread_some(fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    // SAFETY: `buf` is an exclusively borrowed slice, valid for writes of
    // `buf.len()` bytes for the whole call.
    unsafe { pread_raw(fd, buf.as_mut_ptr(), buf.len(), offset) }
}

/// # Safety
/// `ptr` must be valid for writes of `len` bytes for the duration of the call.
unsafe fn pread_raw(fd: RawFd, ptr: *mut u8, len: usize, offset: u64) -> io::Result<usize> {
    let offset = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset exceeds off_t"))?;
    loop {
        // SAFETY: the caller guarantees `ptr` is writable for `len` bytes;
        // the kernel writes at most `len` bytes there.
        let n = unsafe { libc::pread(fd, ptr.cast(), len, offset) };
        match usize::try_from(n) {
            Ok(n) => return Ok(n),
            Err(_) => {
                let e = io::Error::last_os_error();
                if !is_retryable(&e) {
                    return Err(e);
                }
            }
        }
    }
}

/// Errors a read or submission should simply be retried after.
pub(crate) fn is_retryable(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN))
}

/// One contiguous kernel read: `want` bytes at `offset` into `ptr`, of which
/// the first `need` must arrive (`need < want` only for a bounce block at end
/// of file, where the kernel returns fewer bytes). Invariant:
/// `need <= want` and `done <= want`; validity of `ptr` is the caller's
/// obligation when running segments.
#[derive(Debug)]
pub(crate) struct Segment {
    /// Index of the request this segment belongs to, for errors.
    pub req: usize,
    pub offset: u64,
    pub ptr: *mut u8,
    pub want: usize,
    pub need: usize,
    pub done: usize,
}

impl Segment {
    fn new(req: usize, offset: u64, ptr: *mut u8, want: usize, need: usize) -> Self {
        assert!(need <= want, "segment needs more than it reads");
        Segment {
            req,
            offset,
            ptr,
            want,
            need,
            done: 0,
        }
    }

    /// Offset, address and length of the next kernel read for this segment,
    /// at most `max_io` bytes.
    pub fn next_read(&self, max_io: usize) -> (u64, *mut u8, usize) {
        (
            self.offset + self.done as u64,
            // In bounds: `done <= want` and `ptr` covers `want` bytes.
            self.ptr.wrapping_add(self.done),
            (self.want - self.done).min(max_io),
        )
    }
}

/// Why running segments failed.
#[derive(Debug)]
pub(crate) enum SegError {
    /// The kernel returned 0 before `need` bytes arrived.
    Eof { req: usize },
    /// The kernel failed a read.
    Read { req: usize, source: io::Error },
    /// io_uring submission failed.
    Submit(io::Error),
}

/// Runs segments one after another with `pread`, at most `max_io` bytes per
/// system call.
///
/// # Safety
/// Each segment's `ptr` must be valid for writes of `want` bytes, and that
/// memory must not be accessed by anyone else until this returns.
unsafe fn run_pread(fd: RawFd, segs: &mut [Segment], max_io: usize) -> Result<(), SegError> {
    for seg in segs {
        while seg.done < seg.need {
            let (offset, ptr, len) = seg.next_read(max_io);
            // SAFETY: `ptr..ptr+len` lies within the segment's `want` bytes
            // (`next_read`), which the caller guarantees are writable.
            match unsafe { pread_raw(fd, ptr, len, offset) } {
                Ok(0) => return Err(SegError::Eof { req: seg.req }),
                Ok(n) => seg.done += n,
                Err(source) => {
                    return Err(SegError::Read {
                        req: seg.req,
                        source,
                    })
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_round_trip() {
        for b in [
            BackendChoice::Auto,
            BackendChoice::Uring,
            BackendChoice::Pread,
        ] {
            assert_eq!(b.to_string().parse::<BackendChoice>().unwrap(), b);
        }
        assert_eq!(
            "URING".parse::<BackendChoice>().unwrap(),
            BackendChoice::Uring
        );
        let e = "spdk".parse::<BackendChoice>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown io backend \"spdk\" (expected auto, uring or pread)"
        );
        assert_eq!(Backend::Uring.to_string(), "uring");
        assert_eq!(Backend::Pread.to_string(), "pread");
    }

    /// Both engines continue partial reads: with at most one block per kernel
    /// read, every multi-block segment needs several.
    #[test]
    fn engines_continue_partial_reads() {
        let data: Vec<u8> = (0..10 * ALIGN + 300)
            .map(|i| u8::try_from(i * 7 % 251).unwrap())
            .collect();
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, &data).unwrap();
        let fd = file.as_raw_fd();
        for uring_engine in [false, true] {
            let mut a = vec![0u8; 6 * ALIGN + 5];
            let mut b = vec![0u8; 2 * ALIGN];
            let mut segs = vec![
                Segment::new(0, 3, a.as_mut_ptr(), a.len(), a.len()),
                Segment::new(1, 8 * ALIGN as u64, b.as_mut_ptr(), b.len(), b.len()),
            ];
            let outcome = if uring_engine {
                let Ok(mut ring) = setup_ring(2) else {
                    eprintln!("io_uring unavailable, engine not tested");
                    continue;
                };
                // SAFETY: `a` and `b` outlive the call and are not touched
                // until it returns; the ring is fresh with 2 entries.
                unsafe { uring::run(&mut ring, fd, &mut segs, 2, ALIGN) }
            } else {
                // SAFETY: as above.
                unsafe { run_pread(fd, &mut segs, ALIGN) }
            };
            outcome.unwrap();
            assert!(segs.iter().all(|s| s.done == s.want));
            assert_eq!(a, data[3..3 + a.len()]);
            assert_eq!(b, data[8 * ALIGN..10 * ALIGN]);
        }
    }

    #[test]
    fn default_options() {
        let o = ReadOptions::default();
        assert_eq!(o.backend, BackendChoice::Auto);
        assert!(o.direct);
        assert_eq!(o.queue_depth, 64);
    }
}
