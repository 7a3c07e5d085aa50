//! Every backend and mode returns the bytes `std::fs::read` sees.

use std::sync::OnceLock;

use proptest::prelude::*;
use quiver_io::{AlignedBuf, Backend, BackendChoice, ReadFile, ReadRequest, ALIGN};

use crate::{configs, open, Fixture};

/// 3 MiB plus an odd tail, so extents reaching the end exercise the
/// unaligned end-of-file path of direct reads.
const LEN: usize = 3 * 1024 * 1024 + 1234;
const BLOCKS: usize = LEN.div_ceil(ALIGN);

struct Env {
    fx: Fixture,
    files: Vec<((BackendChoice, bool), ReadFile)>,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let fx = Fixture::new(LEN, 7);
        let files = configs(&fx.path)
            .into_iter()
            .map(|(b, d)| ((b, d), open(&fx.path, b, d, 16)))
            .collect();
        Env { fx, files }
    })
}

/// Block-aligned extents, clipped at end of file.
fn aligned_extents() -> impl Strategy<Value = Vec<(u64, usize)>> {
    prop::collection::vec((0..BLOCKS, 1..=64usize), 1..40).prop_map(|v| {
        v.into_iter()
            .map(|(start, n)| {
                let offset = start * ALIGN;
                (offset as u64, (n * ALIGN).min(LEN - offset))
            })
            .collect()
    })
}

fn unaligned_extents() -> impl Strategy<Value = Vec<(u64, usize)>> {
    prop::collection::vec((0..LEN, 0..200_000usize), 1..40).prop_map(|v| {
        v.into_iter()
            .map(|(offset, len)| (offset as u64, len.min(LEN - offset)))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn aligned_extents_agree(extents in aligned_extents()) {
        let env = env();
        for (_, f) in &env.files {
            let mut bufs: Vec<AlignedBuf> = extents.iter().map(|&(_, n)| AlignedBuf::zeroed(n)).collect();
            let mut reqs: Vec<ReadRequest<'_>> = extents
                .iter()
                .zip(bufs.iter_mut())
                .map(|(&(offset, _), buf)| ReadRequest { offset, buf: &mut buf[..] })
                .collect();
            f.read_batch(&mut reqs).unwrap();
            for (&(offset, n), buf) in extents.iter().zip(&bufs) {
                let o = usize::try_from(offset).unwrap();
                prop_assert!(buf[..] == env.fx.data[o..o + n], "{f:?} differs at {offset}+{n}");
            }
            // read_at on the first extent goes through the same path.
            let (offset, n) = extents[0];
            let mut one = AlignedBuf::zeroed(n);
            f.read_at(offset, &mut one).unwrap();
            prop_assert!(one[..] == bufs[0][..]);
        }
    }

    #[test]
    fn unaligned_extents_agree_buffered(extents in unaligned_extents()) {
        let env = env();
        for (_, f) in env.files.iter().filter(|(_, f)| !f.is_direct()) {
            let mut bufs: Vec<Vec<u8>> = extents.iter().map(|&(_, n)| vec![0; n]).collect();
            let mut reqs: Vec<ReadRequest<'_>> = extents
                .iter()
                .zip(bufs.iter_mut())
                .map(|(&(offset, _), buf)| ReadRequest { offset, buf })
                .collect();
            f.read_batch(&mut reqs).unwrap();
            for (&(offset, n), buf) in extents.iter().zip(&bufs) {
                let o = usize::try_from(offset).unwrap();
                prop_assert!(buf[..] == env.fx.data[o..o + n], "{f:?} differs at {offset}+{n}");
            }
        }
    }
}

#[test]
fn options_are_honoured_or_explained() {
    let env = env();
    for &((backend, direct), ref f) in &env.files {
        if backend == BackendChoice::Uring {
            assert_eq!(f.backend(), Backend::Uring);
        }
        match (direct, f.is_direct(), f.fallback_reason()) {
            (false, false, None) | (true, true, None) => {}
            (true, false, Some(r)) => {
                assert!(r.contains("O_DIRECT"), "{r}");
                eprintln!("temp dir refuses O_DIRECT: {r}");
            }
            other => panic!("{f:?}: inconsistent {other:?}"),
        }
    }
}
