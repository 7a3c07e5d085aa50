//! Exact mode: every mode, block size, budget, thread count and pool size
//! produces the same walks as the in-memory reference; nothing is lost.

use proptest::prelude::*;
use quiver_walker::{run, Config, DeadEnd, IoMode, Kind, Mode, Node2Vec, Report, Starts, WalkSpec};

use crate::{arb_graph, write, Recorder};

fn arb_spec(n_hint: u32) -> impl Strategy<Value = WalkSpec> {
    (
        prop_oneof![
            (1u64..40).prop_map(|walks| Starts::Uniform { walks }),
            (1u64..3).prop_map(|walks_per_vertex| Starts::EveryVertex { walks_per_vertex }),
            (prop::collection::vec(0..n_hint, 1..3), 1u64..30).prop_map(
                |(sources, walks_per_source)| Starts::Sources {
                    sources,
                    walks_per_source
                }
            ),
        ],
        1u32..12,
        prop_oneof![Just(0.0), 0.05f64..0.4],
        prop_oneof![Just(0.0), 0.05f64..0.4],
        prop_oneof![
            Just(DeadEnd::Stop),
            Just(DeadEnd::Restart),
            Just(DeadEnd::Jump)
        ],
        prop::option::of((0.25f64..4.0, 0.25f64..4.0)),
    )
        .prop_map(
            |(starts, length, stop_probability, restart_probability, dead_end, node2vec)| {
                WalkSpec {
                    starts,
                    length,
                    stop_probability,
                    restart_probability,
                    kind: Kind::Unbiased,
                    node2vec: node2vec.map(|(p, q)| Node2Vec { p, q }),
                    dead_end,
                }
            },
        )
}

/// `base` in memory mode: the reference.
fn memory_mode(base: &Config) -> Config {
    Config {
        mode: Mode::Memory,
        ..base.clone()
    }
}

/// Asserts that `report` (a run with `config`) walked exactly as
/// `reference` and stayed within its budget.
fn assert_walked_like<O: PartialEq>(
    report: &Report<O>,
    reference: &Report<O>,
    config: &Config,
    what: &str,
) {
    assert!(
        report.result == reference.result,
        "{what}: walked differently from memory"
    );
    assert_eq!(report.steps, reference.steps, "{what}");
    // What was held is part of what was set aside, and that of the budget.
    assert!(
        report.summary.peak_mem_bytes <= report.mem_reserved_bytes
            && report.mem_reserved_bytes <= config.mem_budget,
        "{what}: peak {} held, {} set aside, of a budget of {}",
        report.summary.peak_mem_bytes,
        report.mem_reserved_bytes,
        config.mem_budget
    );
}

/// Cases of [`every_mode_walks_the_same_paths`].
const SAME_PATHS_CASES: u32 = 40;

#[test]
fn every_mode_walks_the_same_paths() {
    let strategy = (
        arb_graph(120, 600),
        arb_spec(2),
        any::<bool>(),
        32u64..2000,
        1usize..4,
        1usize..6,
        prop_oneof![Just(0u64), 0u64..200],
        0.0f64..1.0,
        any::<bool>(),
        prop_oneof![24u64 << 10..256 << 10, Just(1u64 << 20)],
        any::<bool>(),
        prop_oneof![Just(1u64 << 20), 8u64..2048],
    );
    // Out-of-core runs whose tiny budget could not hold a block and the
    // pools, and those that ran: the property must have been tested.
    let refused = std::cell::Cell::new(0u32);
    let ran_out_of_core = std::cell::Cell::new(0u32);
    // Runs that read a group ahead while the last one's walks moved.
    let read_ahead = std::cell::Cell::new(0u32);
    let mut runner =
        proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(SAME_PATHS_CASES));
    let outcome = runner.run(
        &strategy,
        |(
            graph,
            spec,
            weighted_walk,
            block_size,
            threads,
            pool_capacity,
            vertex_threshold,
            p_slowest,
            buffered,
            mem_budget,
            adaptive,
            partition_bytes,
        )| {
            let dir = tempfile::tempdir().unwrap();
            let path = write(dir.path(), &graph);
            let mut spec = spec;
            if weighted_walk && graph.is_weighted() {
                spec.kind = Kind::Weighted;
            }
            let app = Recorder(spec);
            let base = Config {
                exact: true,
                seed: 7,
                threads: 1,
                work_dir: dir.path().to_owned(),
                ..Config::default()
            };
            let reference = run(&path, &memory_mode(&base), &app).unwrap();
            let walks = reference.walks;
            // Conservation: every walk visits hops 0, 1, ... without gaps or repeats.
            let mut next_hop = vec![0u32; walks as usize];
            for &(id, hop, _) in &reference.result {
                prop_assert_eq!(
                    hop,
                    next_hop[id as usize],
                    "walk {} skipped or repeated a hop",
                    id
                );
                next_hop[id as usize] += 1;
            }
            prop_assert!(
                next_hop.iter().all(|&h| h >= 1),
                "every walk is visited at its start"
            );
            prop_assert_eq!(reference.steps, reference.result.len() as u64 - walks);
            // Memory mode again with small partitions (many of them) and
            // several threads; then out of core.
            for mode in [Mode::Memory, Mode::GraphWalker, Mode::Iteration] {
                let config = Config {
                    mode,
                    threads,
                    partition_bytes,
                    block_size: Some(block_size),
                    adaptive,
                    mem_budget,
                    pool_capacity,
                    vertex_threshold,
                    p_slowest,
                    io: if buffered {
                        IoMode::Buffered
                    } else {
                        IoMode::Direct
                    },
                    ..base.clone()
                };
                let report = match run(&path, &config, &app) {
                    Ok(report) => report,
                    // A tiny budget may not hold a block and the pools: that
                    // must be said (naming the budget), and is counted.
                    Err(quiver_walker::Error::InvalidArgument(e))
                        if e.parameter == "mem_budget" && mode != Mode::Memory =>
                    {
                        refused.set(refused.get() + 1);
                        if std::env::var_os("WALKER_TEST_VERBOSE").is_some() {
                            eprintln!("{mode:?}: refused, {e}");
                        }
                        continue;
                    }
                    Err(e) => panic!("{mode:?}: {e}"),
                };
                if mode != Mode::Memory {
                    ran_out_of_core.set(ran_out_of_core.get() + 1);
                }
                if report.blocks_read_ahead > 0 {
                    read_ahead.set(read_ahead.get() + 1);
                }
                prop_assert!(
                    report.result == reference.result,
                    "{:?} walked differently from memory",
                    mode
                );
                prop_assert_eq!(report.steps, reference.steps);
                prop_assert!(
                    report.summary.peak_mem_bytes <= config.mem_budget,
                    "peak {} over budget",
                    report.summary.peak_mem_bytes
                );
                // The runs really were out of core: several blocks, each read at least once
                // unless every walk was served vertex by vertex.
                prop_assert!(report.blocks_loaded + report.vertex_loads > 0);
                if std::env::var_os("WALKER_TEST_VERBOSE").is_some() {
                    eprintln!(
                        "{mode:?}: {} blocks, {} loads, {} vertex loads, {} spill bytes",
                        report.blocks,
                        report.blocks_loaded,
                        report.vertex_loads,
                        report.summary.bytes_written
                    );
                }
            }
            Ok(())
        },
    );
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    let (refused, ran, read_ahead) = (refused.get(), ran_out_of_core.get(), read_ahead.get());
    assert_eq!(
        refused + ran,
        2 * SAME_PATHS_CASES,
        "every out-of-core run either ran or was refused"
    );
    eprintln!(
        "out of core: {ran} runs compared with memory mode ({read_ahead} reading blocks ahead), \
         {refused} refused by their budget"
    );
    assert!(
        ran >= SAME_PATHS_CASES,
        "only {ran} of {} out-of-core runs fit their budget: the property is barely tested",
        2 * SAME_PATHS_CASES
    );
}

/// `walks` walks of `length` steps from uniform starts, of `kind` (or
/// Node2Vec's), that stop only at dead ends.
fn uniform_walks(walks: u64, length: u32, kind: Kind, node2vec: Option<Node2Vec>) -> WalkSpec {
    WalkSpec {
        starts: Starts::Uniform { walks },
        length,
        stop_probability: 0.0,
        restart_probability: 0.0,
        kind,
        node2vec,
        dead_end: DeadEnd::Stop,
    }
}

/// Exact-mode settings for runs that spill into `dir`.
fn exact_config(dir: &std::path::Path, seed: u64, threads: usize) -> Config {
    Config {
        exact: true,
        seed,
        threads,
        work_dir: dir.to_owned(),
        ..Config::default()
    }
}

/// `n` vertices, of which `0..hubs` are hubs: every other vertex `v` links
/// both ways to each hub `h` with `(v + h) % every == 0` and to the next
/// non-hub (a ring). Weights vary when `weighted`.
fn hubs_graph(n: u32, hubs: u32, every: u32, weighted: bool) -> quiver_csr::Graph {
    let mut edges = Vec::new();
    for v in hubs..n {
        for h in 0..hubs {
            if (v + h) % every == 0 {
                edges.push((v, h, (1 + v % 7) as f32));
                edges.push((h, v, (1 + v % 5) as f32));
            }
        }
        let next = if v + 1 < n { v + 1 } else { hubs };
        edges.push((v, next, 1.0));
    }
    quiver_csr::Graph::from_edges(n, &edges, weighted, false).unwrap()
}

/// Blocks of several MiB mapped from the page cache (checked when first
/// loaded, used as they are when loaded again) walk the paths memory mode
/// walks on the whole graph read directly, in one.
#[test]
fn blocks_mapped_from_the_page_cache_walk_like_memory() {
    // 3.2M weighted edges: 25 MiB of targets and weights.
    let graph = hubs_graph(40_000, 40, 1, true);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    let app = Recorder(uniform_walks(2000, 8, Kind::Weighted, None));
    let base = exact_config(dir.path(), 5, 2);
    let reference = run(&path, &memory_mode(&base), &app).unwrap();
    let config = Config {
        mode: Mode::GraphWalker,
        block_size: Some(3 << 20),
        mem_budget: 32 << 20,
        io: IoMode::Buffered,
        ..base.clone()
    };
    let report = run(&path, &config, &app).unwrap();
    assert!(
        report.blocks_loaded > report.blocks as u64,
        "{} loads of {} blocks: none loaded again",
        report.blocks_loaded,
        report.blocks
    );
    assert_walked_like(&report, &reference, &config, "mapped blocks of 3 MiB");
}

/// Node2Vec on a graph of hubs: the previous vertices' adjacency lists are
/// far larger than a block, so reading them vertex by vertex must stay
/// within the budget, and the walks that wait for them still walk the
/// reference's paths.
#[test]
fn second_order_walks_on_hubs_stay_within_the_budget() {
    let graph = hubs_graph(20_000, 40, 2, false);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    let app = Recorder(uniform_walks(
        1000,
        12,
        Kind::Unbiased,
        Some(Node2Vec { p: 0.5, q: 2.0 }),
    ));
    let base = exact_config(dir.path(), 3, 2);
    let reference = run(&path, &memory_mode(&base), &app).unwrap();
    for (mode, adaptive, vertex_threshold) in [
        (Mode::GraphWalker, true, 0),
        (Mode::GraphWalker, false, 0),
        (Mode::Iteration, false, 0),
        // Vertex passes, from the start or for the last walks.
        (Mode::GraphWalker, true, 1000),
        (Mode::GraphWalker, false, 100_000),
    ] {
        let config = Config {
            mode,
            adaptive,
            mem_budget: 512 << 10,
            block_size: Some(4 << 10),
            pool_capacity: 16,
            vertex_threshold,
            // Through the page cache: the test is about memory, not the disk.
            io: IoMode::Buffered,
            ..base.clone()
        };
        let report = run(&path, &config, &app).unwrap();
        if std::env::var_os("WALKER_TEST_VERBOSE").is_some() {
            eprintln!(
                "{mode:?} adaptive {adaptive} threshold {vertex_threshold}: peak {} of {}, {} blocks, \
                 {} loads, {} vertex loads, {} bytes read, {} spilled",
                report.summary.peak_mem_bytes,
                config.mem_budget,
                report.blocks,
                report.blocks_loaded,
                report.vertex_loads,
                report.summary.bytes_read,
                report.summary.bytes_written
            );
        }
        let what = format!("{mode:?} (adaptive {adaptive}, vertex threshold {vertex_threshold})");
        assert_walked_like(&report, &reference, &config, &what);
        assert!(report.vertex_loads > 0, "{what} read no previous vertex");
    }
}

/// Node2Vec out of core on block pairs: walks wait in pools by (block,
/// previous block), and a loaded pair holds both lists each of its walks'
/// steps needs, so no list is read on its own. Pools of a few walks spill
/// and are read back; the walks are the reference's, within the budget.
/// With many small blocks the pairs' pools do not fit the budget, and the
/// engine falls back to reading previous vertices one by one.
#[test]
fn second_order_walks_move_on_block_pairs() {
    let graph = hubs_graph(20_000, 40, 8, false);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    let app = Recorder(WalkSpec {
        restart_probability: 0.1,
        ..uniform_walks(3000, 10, Kind::Unbiased, Some(Node2Vec { p: 0.5, q: 2.0 }))
    });
    let base = exact_config(dir.path(), 5, 2);
    let reference = run(&path, &memory_mode(&base), &app).unwrap();
    for (block_size, paired) in [(64 << 10, true), (4 << 10, false)] {
        let config = Config {
            mode: Mode::GraphWalker,
            mem_budget: 512 << 10,
            block_size: Some(block_size),
            pool_capacity: 64,
            vertex_threshold: 0,
            io: IoMode::Buffered,
            ..base.clone()
        };
        let report = run(&path, &config, &app).unwrap();
        let what = format!("blocks of {block_size} bytes ({} blocks)", report.blocks);
        assert_eq!(report.paired, paired, "{what}");
        assert_walked_like(&report, &reference, &config, &what);
        if paired {
            assert!(report.blocks >= 4, "{what}");
            assert_eq!(report.vertex_loads, 0, "{what}: lists read on their own");
            assert!(report.summary.bytes_written > 0, "{what}: no pool spilled");
        } else {
            assert!(report.vertex_loads > 0, "{what}: no previous list read");
        }
    }
}

/// A hub's block is far larger than the fine block size: the adaptive rule
/// may group no more blocks than half the cache holds (first-order walks
/// too).
#[test]
fn adaptive_groups_of_hub_blocks_fit_the_cache() {
    let graph = hubs_graph(3203, 3, 1, true);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    let app = Recorder(uniform_walks(9, 8, Kind::Weighted, None));
    let base = exact_config(dir.path(), 3, 1);
    let reference = run(&path, &memory_mode(&base), &app).unwrap();
    let config = Config {
        mode: Mode::GraphWalker,
        adaptive: true,
        // (68,410 bytes before pools counted their bookkeeping.)
        mem_budget: 74_986,
        block_size: Some(968),
        pool_capacity: 1,
        vertex_threshold: 0,
        p_slowest: 0.0,
        ..base.clone()
    };
    let report = run(&path, &config, &app).unwrap();
    assert_walked_like(
        &report,
        &reference,
        &config,
        "adaptive groups of hub blocks",
    );
}

/// First-order walks in GraphWalker mode read the next group of blocks
/// while the last group's walks move, when the cache holds both; they walk
/// as memory mode does and stay within the budget.
#[test]
fn groups_are_read_ahead_while_walks_move() {
    let graph = hubs_graph(5_000, 40, 2, false);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    let app = Recorder(uniform_walks(4000, 8, Kind::Unbiased, None));
    let base = Config {
        io: IoMode::Buffered,
        ..exact_config(dir.path(), 5, 2)
    };
    let reference = run(&path, &memory_mode(&base), &app).unwrap();
    for adaptive in [false, true] {
        let config = Config {
            mode: Mode::GraphWalker,
            adaptive,
            mem_budget: 1 << 20,
            block_size: Some(64 << 10),
            vertex_threshold: 0,
            ..base.clone()
        };
        let report = run(&path, &config, &app).unwrap();
        assert!(
            report.blocks_read_ahead > 0 && report.blocks > 2,
            "adaptive {adaptive}: {} of {} loads of {} blocks read ahead",
            report.blocks_read_ahead,
            report.blocks_loaded,
            report.blocks
        );
        assert_walked_like(&report, &reference, &config, "read ahead");
    }
}

/// Node2Vec walks in GraphWalker mode given a budget and no block size get
/// the largest blocks two of which the cache holds (larger than the static
/// rule's quarter of the budget), are pooled by block pair, walk as memory
/// mode does and stay within the budget.
#[test]
fn node2vec_blocks_are_sized_for_pairs_in_the_cache() {
    let graph = hubs_graph(5_000, 40, 2, false);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    let app = Recorder(uniform_walks(
        2000,
        8,
        Kind::Unbiased,
        Some(Node2Vec { p: 2.0, q: 0.5 }),
    ));
    let base = Config {
        io: IoMode::Buffered,
        ..exact_config(dir.path(), 9, 2)
    };
    let reference = run(&path, &memory_mode(&base), &app).unwrap();
    let config = Config {
        mode: Mode::GraphWalker,
        mem_budget: 2 << 20,
        block_size: None,
        ..base.clone()
    };
    let report = run(&path, &config, &app).unwrap();
    assert!(report.paired, "not paired");
    assert!(
        report.block_size > config.mem_budget / 4 && report.blocks > 1,
        "{} blocks of {} bytes",
        report.blocks,
        report.block_size
    );
    assert_walked_like(&report, &reference, &config, "pairs in the cache");
}

/// Given a memory budget and no block size, every mode cuts the graph into
/// blocks the budget holds (a graph of about 1 MiB under 400 KiB used to be
/// refused with "lower the block size"; under 160 KiB the pools buffer
/// fewer walks, since their default 1024 a block would not leave room for
/// one), walks as memory mode does and stays within the budget. Memory
/// mode itself moves walks in batches that fit what the budget leaves
/// beside the graph.
#[test]
fn a_budget_without_a_block_size_gets_blocks_that_fit() {
    let graph = hubs_graph(5_000, 40, 2, false);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    let graph_bytes = std::fs::metadata(&path).unwrap().len();
    assert!(graph_bytes > 2 * (400 << 10), "{graph_bytes} bytes");
    let spec = |node2vec| uniform_walks(2000, 8, Kind::Unbiased, node2vec);
    let base = Config {
        io: IoMode::Buffered,
        ..exact_config(dir.path(), 5, 2)
    };
    for node2vec in [None, Some(Node2Vec { p: 0.5, q: 2.0 })] {
        let app = Recorder(spec(node2vec));
        let reference = run(&path, &memory_mode(&base), &app).unwrap();
        for (mode, adaptive, mem_budget) in [
            (Mode::GraphWalker, true, 400 << 10),
            (Mode::GraphWalker, false, 400 << 10),
            (Mode::Iteration, false, 400 << 10),
            (Mode::GraphWalker, false, 160 << 10),
            (Mode::Iteration, false, 160 << 10),
        ] {
            let config = Config {
                mode,
                adaptive,
                mem_budget,
                block_size: None,
                ..base.clone()
            };
            let what = format!(
                "{mode:?} (adaptive {adaptive}, node2vec {node2vec:?}, budget {mem_budget})"
            );
            let report = run(&path, &config, &app).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert!(report.blocks > 1, "{what}: {} block", report.blocks);
            assert_walked_like(&report, &reference, &config, &what);
        }
    }
    // Memory mode: a budget of the graph plus room for 100K walks' two
    // slots moves them in batches that keep the peak within it.
    let walks = 400_000;
    let app = Recorder(WalkSpec {
        starts: Starts::Uniform { walks },
        ..spec(None)
    });
    let unbounded = run(&path, &memory_mode(&base), &app).unwrap();
    let budget = graph_bytes + 100_000 * 2 * 24;
    let bounded = run(
        &path,
        &Config {
            mem_budget: budget,
            ..memory_mode(&base)
        },
        &app,
    )
    .unwrap();
    assert!(bounded.result == unbounded.result, "batches change no walk");
    assert!(
        unbounded.summary.peak_mem_bytes > budget,
        "{} bytes: the test needs a run that would pass the budget",
        unbounded.summary.peak_mem_bytes
    );
    assert!(
        bounded.summary.peak_mem_bytes <= budget,
        "peak {} over the budget of {budget}",
        bounded.summary.peak_mem_bytes
    );
}
