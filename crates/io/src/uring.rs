//! The io_uring read engine: keeps up to `depth` reads in flight, reaps
//! completions, resubmits short reads, and never returns while the kernel may
//! still write into a caller's buffer.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

use crate::read::{is_retryable, SegError, Segment};

/// Entries queued or in flight on a ring. Dropping it (normally or while
/// unwinding) waits until the kernel has completed all of them, so that no
/// buffer is released while the kernel may still write it.
struct InFlight<'r> {
    ring: &'r mut IoUring,
    /// Entries pushed to the submission queue and not yet reaped.
    count: usize,
}

impl InFlight<'_> {
    /// Submits queued entries and waits for at least one completion.
    fn submit_and_wait(&mut self) -> io::Result<()> {
        match self.ring.submit_and_wait(1) {
            Ok(_) => Ok(()),
            // Busy: the completion queue is full; reaping makes room.
            Err(e) if is_retryable(&e) || e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::yield_now();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        while self.count > 0 {
            if let Err(e) = self.submit_and_wait() {
                // Returning would free buffers the kernel may still write:
                // the only sound way out is to stop the process.
                eprintln!(
                    "quiver-io: cannot wait for {} in-flight io_uring reads: {e}; aborting",
                    self.count
                );
                std::process::abort();
            }
            let reaped = self.ring.completion().count();
            self.count -= reaped;
        }
    }
}

/// Reads every segment to completion through `ring`, at most `depth` reads
/// of at most `max_io` bytes at once.
///
/// On return the ring has nothing queued and nothing in flight.
///
/// # Safety
/// Each segment's `ptr` must be valid for writes of `want` bytes, and that
/// memory must not be accessed by anyone else until this returns (or
/// unwinds). `max_io` must fit in a `u32`. `ring` must have at least `depth` submission entries and nothing
/// queued or in flight.
pub(crate) unsafe fn run(
    ring: &mut IoUring,
    fd: RawFd,
    segs: &mut [Segment],
    depth: usize,
    max_io: usize,
) -> Result<(), SegError> {
    let mut pending: VecDeque<usize> = (0..segs.len()).collect();
    let mut failure: Option<SegError> = None;
    let mut flight = InFlight { ring, count: 0 };
    loop {
        if failure.is_none() {
            let mut sq = flight.ring.submission();
            while flight.count < depth {
                let Some(i) = pending.pop_front() else { break };
                let (offset, ptr, len) = segs[i].next_read(max_io);
                let len =
                    u32::try_from(len).expect("reads are capped at max_io = MAX_IO < u32::MAX");
                let entry = opcode::Read::new(types::Fd(fd), ptr, len)
                    .offset(offset)
                    .build()
                    .user_data(i as u64);
                // SAFETY: `ptr..ptr+len` lies within segment `i`'s `want`
                // bytes, writable and untouched by others until we return (the
                // caller's contract). We return only after `flight` is empty:
                // either every entry is reaped below, or `InFlight::drop`
                // waits for the rest (aborting if it cannot). `fd` outlives
                // the call because the caller holds the file.
                let pushed = unsafe { sq.push(&entry) };
                pushed.expect("submission queue has room: at most depth entries are queued");
                flight.count += 1;
            }
        }
        if flight.count == 0 {
            break;
        }
        if let Err(e) = flight.submit_and_wait() {
            // `flight`'s drop waits for whatever the kernel did take.
            failure.get_or_insert(SegError::Submit(e));
            break;
        }
        for cqe in flight.ring.completion() {
            flight.count -= 1;
            let i = usize::try_from(cqe.user_data()).expect("user_data is a segment index");
            let seg = &mut segs[i];
            match usize::try_from(cqe.result()) {
                Ok(0) => {
                    failure.get_or_insert(SegError::Eof { req: seg.req });
                }
                Ok(n) => {
                    seg.done += n;
                    if seg.done < seg.need {
                        pending.push_back(i);
                    }
                }
                Err(_) => {
                    let source = io::Error::from_raw_os_error(-cqe.result());
                    if is_retryable(&source) {
                        pending.push_back(i);
                    } else {
                        failure.get_or_insert(SegError::Read {
                            req: seg.req,
                            source,
                        });
                    }
                }
            }
        }
    }
    drop(flight);
    failure.map_or(Ok(()), Err)
}
