//! Batches larger than the queue depth, shared files, and exact counters.

use quiver_io::{AlignedBuf, IoCounters, ReadFile, ReadRequest, ALIGN};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::{configs, open, Fixture};

const LEN: usize = 2 * 1024 * 1024;

/// `n` random aligned extents of 1..=4 blocks.
fn extents(n: usize, seed: u64) -> Vec<(u64, usize)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let blocks = rng.random_range(1..=4);
            let start = rng.random_range(0..=LEN / ALIGN - blocks);
            ((start * ALIGN) as u64, blocks * ALIGN)
        })
        .collect()
}

fn read_and_check(f: &ReadFile, data: &[u8], extents: &[(u64, usize)]) {
    let mut bufs: Vec<AlignedBuf> = extents
        .iter()
        .map(|&(_, n)| AlignedBuf::zeroed(n))
        .collect();
    let mut reqs: Vec<ReadRequest<'_>> = extents
        .iter()
        .zip(bufs.iter_mut())
        .map(|(&(offset, _), buf)| ReadRequest {
            offset,
            buf: &mut buf[..],
        })
        .collect();
    f.read_batch(&mut reqs).unwrap();
    for (&(offset, n), buf) in extents.iter().zip(&bufs) {
        let o = usize::try_from(offset).unwrap();
        assert!(buf[..] == data[o..o + n], "{f:?} differs at {offset}+{n}");
    }
}

#[test]
fn batch_beyond_queue_depth_is_correct_and_counted_exactly() {
    let fx = Fixture::new(LEN, 11);
    let ext = extents(500, 3);
    let bytes: u64 = ext.iter().map(|&(_, n)| n as u64).sum();
    for (backend, direct) in configs(&fx.path) {
        let f = open(&fx.path, backend, direct, 8);
        let before = f.stats().snapshot();
        read_and_check(&f, &fx.data, &ext);
        // An empty request is a completed request too.
        f.read_at(0, &mut []).unwrap();
        assert_eq!(
            f.stats().snapshot().since(&before),
            IoCounters {
                read_calls: 501,
                read_bytes: bytes,
                write_calls: 0,
                write_bytes: 0
            },
            "{backend} direct={direct}"
        );
    }
}

#[test]
fn one_file_shared_by_threads() {
    let fx = Fixture::new(LEN, 12);
    for (backend, direct) in configs(&fx.path) {
        let f = open(&fx.path, backend, direct, 4);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (f, data) = (&f, &fx.data);
                s.spawn(move || {
                    for round in 0..5 {
                        read_and_check(f, data, &extents(40, t * 100 + round));
                    }
                });
            }
        });
        assert_eq!(f.stats().snapshot().read_calls, 4 * 5 * 40);
    }
}

#[test]
fn large_single_read() {
    let fx = Fixture::new(LEN, 13);
    for (backend, direct) in configs(&fx.path) {
        let f = open(&fx.path, backend, direct, 2);
        let mut buf = AlignedBuf::zeroed(LEN);
        f.read_at(0, &mut buf).unwrap();
        assert!(buf[..] == fx.data[..], "{backend} direct={direct}");
    }
}
