//! quiver-io read backends on a 256 MiB file on disk, with `O_DIRECT`:
//! sequential 8 MiB block loads and random 4 KiB reads at queue depth 32,
//! io_uring against `pread`. A backend that cannot be opened here (io_uring
//! missing) is skipped with a message; a buffered fallback is reported.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode, Throughput,
};
use quiver_io::{AlignedBuf, BackendChoice, ReadFile, ReadOptions, ReadRequest, WriteFile, ALIGN};

const FILE_LEN: usize = 256 << 20;
const BLOCK: usize = 8 << 20;
/// Reads in flight per io_uring batch (and the ring's depth).
const DEPTH: usize = 32;

/// Deterministic filler, so the file is not all zeros (no dedup or sparse
/// tricks below us).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn write_file(path: &Path) {
    let w = WriteFile::create(path).expect("create bench file");
    let mut state = 1;
    let mut chunk = vec![0u8; BLOCK];
    for i in 0..FILE_LEN / BLOCK {
        for word in chunk.chunks_exact_mut(8) {
            word.copy_from_slice(&splitmix(&mut state).to_le_bytes());
        }
        w.write_all_at((i * BLOCK) as u64, &chunk)
            .expect("write bench file");
    }
    w.sync().expect("sync bench file");
}

fn open(path: &Path, backend: BackendChoice) -> Option<ReadFile> {
    let opts = ReadOptions {
        backend,
        direct: true,
        queue_depth: 32,
    };
    match ReadFile::open(path, &opts) {
        Ok(f) => {
            if let Some(reason) = f.fallback_reason() {
                eprintln!("note: {backend} runs degraded: {reason}");
            }
            Some(f)
        }
        Err(e) => {
            eprintln!("skipping {backend}: {e}");
            None
        }
    }
}

fn configure(g: &mut BenchmarkGroup<'_, WallTime>, bytes: usize) {
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Bytes(bytes as u64));
}

fn sequential(c: &mut Criterion, path: &Path) {
    let mut g = c.benchmark_group("io/seq_8MiB_direct");
    configure(&mut g, BLOCK);
    let blocks = FILE_LEN / BLOCK;
    let mut buf = AlignedBuf::zeroed(BLOCK);
    for backend in [BackendChoice::Pread, BackendChoice::Uring] {
        let Some(f) = open(path, backend) else {
            continue;
        };
        let mut next = 0;
        g.bench_function(format!("{backend}_1x8MiB"), |b| {
            b.iter(|| {
                let offset = (next % blocks * BLOCK) as u64;
                next += 1;
                f.read_at(offset, &mut buf).expect("read block");
                black_box(buf[0]);
            });
        });
        if backend == BackendChoice::Uring {
            // The same block as eight 1 MiB reads in flight together.
            g.bench_function("uring_8x1MiB", |b| {
                b.iter(|| {
                    let base = (next % blocks * BLOCK) as u64;
                    next += 1;
                    let mut reqs: Vec<ReadRequest<'_>> = buf
                        .chunks_mut(1 << 20)
                        .enumerate()
                        .map(|(i, chunk)| ReadRequest {
                            offset: base + (i << 20) as u64,
                            buf: chunk,
                        })
                        .collect();
                    f.read_batch(&mut reqs).expect("read block");
                    black_box(buf[0]);
                });
            });
        }
    }
    g.finish();
}

fn random(c: &mut Criterion, path: &Path) {
    let mut g = c.benchmark_group("io/rand_4KiB_qd32_direct");
    configure(&mut g, DEPTH * ALIGN);
    let mut state = 7;
    let offsets: Vec<u64> = (0..64 * DEPTH)
        .map(|_| splitmix(&mut state) % (FILE_LEN / ALIGN) as u64 * ALIGN as u64)
        .collect();
    let mut buf = AlignedBuf::zeroed(DEPTH * ALIGN);
    let mut round = 0;
    if let Some(f) = open(path, BackendChoice::Uring) {
        g.bench_function("uring_batch32", |b| {
            b.iter(|| {
                let batch = &offsets[round % 64 * DEPTH..][..DEPTH];
                round += 1;
                let mut reqs: Vec<ReadRequest<'_>> = buf
                    .chunks_mut(ALIGN)
                    .zip(batch)
                    .map(|(chunk, &offset)| ReadRequest { offset, buf: chunk })
                    .collect();
                f.read_batch(&mut reqs).expect("random reads");
                black_box(buf[0]);
            });
        });
    }
    if let Some(f) = open(path, BackendChoice::Pread) {
        g.bench_function("pread_1by1", |b| {
            b.iter(|| {
                let batch = &offsets[round % 64 * DEPTH..][..DEPTH];
                round += 1;
                for (chunk, &offset) in buf.chunks_mut(ALIGN).zip(batch) {
                    f.read_at(offset, chunk).expect("random read");
                }
                black_box(buf[0]);
            });
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    // On disk (the default temp dir here), so O_DIRECT reaches the device.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("io-bench.bin");
    write_file(&path);
    sequential(c, &path);
    random(c, &path);
}

criterion_group!(io, benches);
criterion_main!(io);
