//! Walk pools against a model: a map from block to the list of walks pushed.

use std::collections::BTreeMap;

use proptest::prelude::*;
use quiver_walkstate::{ExactWalk, WalkPools};

#[derive(Clone, Debug)]
enum Op {
    Push {
        block: usize,
        walk: u64,
        hop: u64,
    },
    Extend {
        block: usize,
        walks: Vec<(u64, u64)>,
    },
    Take {
        block: usize,
    },
    TakeSome {
        block: usize,
        max: usize,
    },
}

fn ops(blocks: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            8 => (0..blocks, any::<u64>(), 0u64..100).prop_map(|(block, walk, hop)| Op::Push { block, walk, hop }),
            2 => (0..blocks, prop::collection::vec((any::<u64>(), 0u64..100), 0..20))
                .prop_map(|(block, walks)| Op::Extend { block, walks }),
            1 => (0..blocks).prop_map(|block| Op::Take { block }),
            1 => (0..blocks, 0usize..6).prop_map(|(block, max)| Op::TakeSome { block, max }),
        ],
        0..600,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// No walk lost or duplicated across spills and reloads; order, counts
    /// and minimum hops exact.
    #[test]
    fn pools_behave_like_a_map_of_lists(capacity in 1usize..9, ops in ops(5)) {
        let work = tempfile::tempdir().unwrap();
        let mut pools = WalkPools::<u64>::new(5, capacity, work.path()).unwrap();
        let mut model: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
        // Blocks partly taken since they were last empty: min hop is then a bound.
        let mut partly = [false; 5];
        for op in ops {
            match op {
                Op::Push { block, walk, hop } => {
                    pools.push(block, walk, hop).unwrap();
                    model.entry(block).or_default().push((walk, hop));
                }
                Op::Extend { block, walks } => {
                    let words: Vec<u64> = walks.iter().map(|&(w, _)| w).collect();
                    let min_hop = walks.iter().map(|&(_, h)| h).min().unwrap_or(u64::MAX);
                    pools.extend(block, &words, min_hop).unwrap();
                    model.entry(block).or_default().extend(walks);
                }
                Op::Take { block } => {
                    let expected: Vec<u64> = model.remove(&block).unwrap_or_default().into_iter().map(|(w, _)| w).collect();
                    prop_assert_eq!(pools.take(block).unwrap(), expected);
                    partly[block] = false;
                }
                Op::TakeSome { block, max } => {
                    let list = model.entry(block).or_default();
                    let n = max.min(list.len());
                    let expected: Vec<u64> = list.drain(..n).map(|(w, _)| w).collect();
                    prop_assert_eq!(pools.take_at_most(block, max).unwrap(), expected);
                    partly[block] = !list.is_empty();
                }
            }
            let total: usize = model.values().map(Vec::len).sum();
            prop_assert_eq!(pools.total(), total as u64);
            for (b, &partly_taken) in partly.iter().enumerate() {
                let walks = model.get(&b).map_or(&[][..], Vec::as_slice);
                prop_assert_eq!(pools.count(b), walks.len() as u64);
                let true_min = walks.iter().map(|&(_, h)| h).min();
                if partly_taken {
                    prop_assert!(pools.min_hop(b).is_some() && pools.min_hop(b) <= true_min);
                } else {
                    prop_assert_eq!(pools.min_hop(b), true_min);
                }
            }
            let fullest_except = |except: &[usize]| (0..5)
                .filter(|b| !except.contains(b) && model.get(b).is_some_and(|w| !w.is_empty()))
                .max_by_key(|&b| (model[&b].len(), std::cmp::Reverse(b)));
            let fullest = fullest_except(&[]);
            prop_assert_eq!(pools.fullest(&[]), fullest);
            // And the fullest of the others, and how many wait in a few.
            let except = [fullest.unwrap_or(0)];
            prop_assert_eq!(pools.fullest(&except), fullest_except(&except));
            let some = [0, 2, 4];
            let waiting: usize = some.iter().filter_map(|b| model.get(b)).map(Vec::len).sum();
            prop_assert_eq!(pools.count_all(&some), waiting as u64);
            // Without partial takes, the slowest is exact: the smallest
            // minimum hop among the others (lowest block on ties).
            if !partly.iter().any(|&p| p) {
                let slowest = (0..5)
                    .filter(|b| !except.contains(b))
                    .filter_map(|b| model.get(&b).and_then(|w| w.iter().map(|&(_, h)| h).min()).map(|h| (h, b)))
                    .min()
                    .map(|(_, b)| b);
                prop_assert_eq!(pools.slowest(&except), slowest);
            }
        }
        // Every spill writes at least a full buffer's worth, whole walks.
        let stats = pools.stats();
        prop_assert!(stats.bytes_written >= stats.spills * capacity as u64 * 8);
        prop_assert_eq!(stats.bytes_written % 8, 0);
    }
}

#[test]
fn exact_walks_survive_a_spill_round_trip() {
    let work = tempfile::tempdir().unwrap();
    let mut pools = WalkPools::<ExactWalk>::new(2, 3, work.path()).unwrap();
    let walks: Vec<ExactWalk> = (0..10)
        .map(|i| ExactWalk {
            word: i * 7,
            id: 1000 + i,
        })
        .collect();
    for w in &walks {
        pools.push(1, *w, 0).unwrap();
    }
    assert_eq!(pools.stats().spills, 3);
    assert_eq!(pools.take(1).unwrap(), walks);
    assert_eq!(pools.take(0).unwrap(), vec![]);
}

#[test]
fn the_spill_directory_is_removed_on_drop() {
    let work = tempfile::tempdir().unwrap();
    let dir;
    {
        let mut pools = WalkPools::<u64>::new(1, 1, work.path()).unwrap();
        pools.push(0, 1, 0).unwrap();
        dir = pools.dir().to_owned();
        assert!(dir.join("block-0.walks").exists());
    }
    assert!(!dir.exists());
    assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0);
}

#[test]
fn bad_arguments_are_clear_errors() {
    let err = WalkPools::<u64>::new(1, 1, std::path::Path::new("/nonexistent/dir")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/dir"), "{err}");
    let work = tempfile::tempdir().unwrap();
    assert!(WalkPools::<u64>::new(1, 0, work.path()).is_err());
}

/// More pools spill than files are kept open (256): those beyond reopen
/// their file for each append and read, and every walk comes back in order.
#[test]
fn many_spilling_pools_keep_their_walks() {
    let work = tempfile::tempdir().unwrap();
    let blocks = 600;
    let mut pools = WalkPools::<u64>::new(blocks, 1, work.path()).unwrap();
    for i in 0..3 * blocks {
        let walk = i as u64;
        pools.push(i % blocks, walk, (i / blocks) as u64).unwrap();
    }
    assert_eq!(pools.stats().spills, 3 * blocks as u64);
    for block in 0..blocks {
        let first = pools.take_at_most(block, 1).unwrap();
        let rest = pools.take(block).unwrap();
        let b = block as u64;
        let n = blocks as u64;
        assert_eq!(first, vec![b], "block {block}");
        assert_eq!(rest, vec![b + n, b + 2 * n], "block {block}");
    }
    assert_eq!(pools.total(), 0);
    assert_eq!(
        std::fs::read_dir(pools.dir()).unwrap().count(),
        0,
        "spill files left"
    );
}
