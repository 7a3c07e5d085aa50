//! Errors name what failed, and a file stays usable after one.

use std::error::Error as _;

use quiver_io::{AlignedBuf, Error, ReadFile, ReadOptions, ALIGN};

use crate::{configs, open, Fixture};

const LEN: usize = 64 * 1024 + 100;

#[test]
fn read_past_end_is_unexpected_eof() {
    let fx = Fixture::new(LEN, 21);
    for (backend, direct) in configs(&fx.path) {
        let f = open(&fx.path, backend, direct, 4);
        let mut buf = AlignedBuf::zeroed(2 * ALIGN);
        let offset = (LEN / ALIGN * ALIGN) as u64;
        let e = f.read_at(offset, &mut buf).unwrap_err();
        assert!(
            matches!(e, Error::UnexpectedEof { offset: o, len: 8192, .. } if o == offset),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&fx.path.display().to_string()) && msg.contains("8192"),
            "{msg}"
        );
        // Starting beyond the end, too.
        let e = f.read_at(1 << 40, &mut buf).unwrap_err();
        assert!(matches!(e, Error::UnexpectedEof { .. }), "{e:?}");
        // Still usable afterwards.
        f.read_at(0, &mut buf).unwrap();
        assert!(buf[..] == fx.data[..2 * ALIGN]);
    }
}

#[test]
fn file_shrunk_after_open_is_unexpected_eof_from_the_kernel() {
    // The length check passes (length taken at open); the kernel then
    // returns 0 bytes, which must become the same error, on every backend.
    for (backend, direct) in configs(&Fixture::new(ALIGN, 1).path) {
        let fx = Fixture::new(LEN, 22);
        let f = open(&fx.path, backend, direct, 4);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&fx.path)
            .unwrap()
            .set_len(ALIGN as u64)
            .unwrap();
        let mut bufs = [AlignedBuf::zeroed(ALIGN), AlignedBuf::zeroed(4 * ALIGN)];
        let [a, b] = &mut bufs;
        let mut reqs = [
            quiver_io::ReadRequest {
                offset: 0,
                buf: &mut a[..],
            },
            quiver_io::ReadRequest {
                offset: 4 * ALIGN as u64,
                buf: &mut b[..],
            },
        ];
        let e = f.read_batch(&mut reqs).unwrap_err();
        assert!(
            matches!(
                e,
                Error::UnexpectedEof {
                    offset: 16384,
                    len: 16384,
                    ..
                }
            ),
            "{backend} direct={direct}: {e:?}"
        );
        assert_eq!(
            f.stats().snapshot().read_calls,
            0,
            "a failed batch records nothing"
        );
    }
}

#[test]
fn misaligned_direct_reads_are_refused_before_the_kernel() {
    let fx = Fixture::new(LEN, 23);
    for (backend, direct) in configs(&fx.path) {
        if !direct {
            continue;
        }
        let f = open(&fx.path, backend, true, 4);
        let mut buf = AlignedBuf::zeroed(3 * ALIGN);
        let cases: [(u64, std::ops::Range<usize>); 3] = [
            (512, 0..ALIGN),   // offset
            (0, 1..ALIGN + 1), // address
            (0, 0..ALIGN + 1), // length, not at end of file
        ];
        for (offset, range) in cases {
            let e = f.read_at(offset, &mut buf[range.clone()]).unwrap_err();
            assert!(
                matches!(e, Error::Misaligned { .. }),
                "{offset} {range:?}: {e:?}"
            );
            assert!(e.to_string().contains("misaligned direct read"), "{e}");
        }
        // An unaligned length is fine when the read ends at end of file.
        let tail_start = LEN / ALIGN * ALIGN - ALIGN;
        let mut tail = AlignedBuf::zeroed(LEN - tail_start);
        f.read_at(tail_start as u64, &mut tail).unwrap();
        assert!(tail[..] == fx.data[tail_start..]);
        assert_eq!(f.stats().snapshot().read_calls, 1);
    }
}

#[test]
fn missing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-file.bin");
    let e = ReadFile::open(&path, &ReadOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Open { .. }), "{e:?}");
    assert!(e.to_string().contains("no-such-file.bin"), "{e}");
    let source = e
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .unwrap();
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
}
