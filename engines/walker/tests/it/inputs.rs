//! Bad input gets a clear error.

use quiver_csr::Graph;
use quiver_walker::apps::{RawWalks, VisitFrequency};
use quiver_walker::{run, Config, IoMode, Mode};

use crate::write;

fn graph(dir: &std::path::Path) -> std::path::PathBuf {
    write(
        dir,
        &Graph::from_edges(4, &[(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0)], false, false).unwrap(),
    )
}

#[test]
fn a_source_out_of_range_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = graph(dir.path());
    let err = run(
        &path,
        &Config::default(),
        &VisitFrequency::ppr(9, 10, 5, 0.15, 5),
    )
    .unwrap_err();
    let quiver_walker::Error::InvalidArgument(err) = err else {
        panic!("not a usage error: {err}")
    };
    assert_eq!(err.parameter, "sources");
    assert!(
        err.reason.contains("source vertex 9 is out of range"),
        "{err}"
    );
}

#[test]
fn a_zero_budget_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = graph(dir.path());
    let config = Config {
        mem_budget: 0,
        ..Config::default()
    };
    let err = run(&path, &config, &VisitFrequency::ppr(0, 10, 5, 0.15, 5)).unwrap_err();
    let quiver_walker::Error::InvalidArgument(err) = err else {
        panic!("not a usage error: {err}")
    };
    assert_eq!(err.parameter, "mem_budget");
    assert!(err.reason.contains("memory budget"), "{err}");
}

#[test]
fn a_file_that_is_not_qcsr_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edges.txt");
    std::fs::write(&path, "0 1\n").unwrap();
    let err = run(
        &path,
        &Config::default(),
        &VisitFrequency::ppr(0, 10, 5, 0.15, 5),
    )
    .unwrap_err();
    assert!(err.to_string().contains("not a .qcsr graph"), "{err}");
}

#[test]
fn an_unwritable_work_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = graph(dir.path());
    let config = Config {
        work_dir: "/nonexistent/work".into(),
        block_size: Some(64),
        ..Config::default()
    };
    let err = run(&path, &config, &VisitFrequency::ppr(0, 10, 5, 0.15, 5)).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/work"), "{err}");
}

/// A file whose checksums hold but whose targets name no vertex (a buggy
/// writer): loading the whole graph or a block of it refuses it, naming the
/// edge, and never indexes out of bounds.
#[test]
fn targets_out_of_range_are_refused_when_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = graph(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    // Edge 0 -> 1 becomes 0 -> 7 in a graph of 4 vertices.
    quiver_csr::testing::set_target(&mut bytes, 0, 7);
    std::fs::write(&path, &bytes).unwrap();
    let configs = [
        (
            "memory",
            Config {
                mode: Mode::Memory,
                ..Config::default()
            },
        ),
        (
            "blocks",
            Config {
                mode: Mode::GraphWalker,
                block_size: Some(64),
                vertex_threshold: 0,
                ..Config::default()
            },
        ),
    ];
    // Read directly, and mapped through the page cache.
    let configs = configs.into_iter().flat_map(|(name, config)| {
        [IoMode::Direct, IoMode::Buffered].map(|io| {
            (
                name,
                Config {
                    io,
                    ..config.clone()
                },
            )
        })
    });
    for (name, config) in configs {
        let err = run(&path, &config, &VisitFrequency::ppr(0, 10, 5, 0.15, 5)).unwrap_err();
        assert!(
            err.to_string().contains("edge 0 targets vertex 7"),
            "{name}, {:?}: {err}",
            config.io
        );
    }
}

#[test]
fn targets_out_of_range_are_refused_when_read_list_by_list() {
    // A path long enough that its block costs more to read than the few
    // walks' single lists, so those are read one by one.
    let n: u32 = 200_000;
    let edges: Vec<(u32, u32, f32)> = (0..n - 1).map(|v| (v, v + 1, 1.0)).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        &Graph::from_edges(n, &edges, false, false).unwrap(),
    );
    let config = Config {
        mode: Mode::GraphWalker,
        block_size: Some(1 << 20),
        ..Config::default()
    };
    let ppr = VisitFrequency::ppr(0, 10, 5, 0.15, 5);
    // On the intact file, these walks read single lists and no block.
    let intact = run(&path, &config, &ppr).unwrap();
    assert!(
        intact.vertex_loads > 0 && intact.blocks_loaded == 0,
        "{:?}",
        (intact.vertex_loads, intact.blocks_loaded)
    );
    let mut bytes = std::fs::read(&path).unwrap();
    quiver_csr::testing::set_target(&mut bytes, 0, n + 5);
    std::fs::write(&path, &bytes).unwrap();
    let err = run(&path, &config, &ppr).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("edge 0 targets vertex {}", n + 5)),
        "{err}"
    );
}

/// A bad block found while it is read ahead (on the read-ahead thread, as
/// the last group's walks move) fails the run naming the edge, like one
/// found when loaded: each block in turn gets a bad target, and every run
/// fails cleanly, while the intact file's run reads most blocks ahead.
#[test]
fn targets_out_of_range_are_refused_when_read_ahead() {
    let n: u32 = 20_000;
    let edges: Vec<(u32, u32, f32)> = (0..n).map(|v| (v, (v + 1) % n, 1.0)).collect();
    let graph = Graph::from_edges(n, &edges, false, true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    let config = Config {
        mode: Mode::GraphWalker,
        block_size: Some(32 << 10),
        adaptive: false,
        mem_budget: 256 << 10,
        pool_capacity: 64,
        vertex_threshold: 0,
        work_dir: dir.path().to_owned(),
        ..Config::default()
    };
    let walks = RawWalks::new(4000, 30);
    let intact = run(&path, &config, &walks).unwrap();
    assert!(
        intact.blocks > 4 && 2 * intact.blocks_read_ahead > intact.blocks_loaded,
        "{} of {} loads of {} blocks read ahead",
        intact.blocks_read_ahead,
        intact.blocks_loaded,
        intact.blocks
    );
    let pristine = std::fs::read(&path).unwrap();
    let num_edges = usize::try_from(graph.num_edges()).unwrap();
    for k in 0..intact.blocks {
        let edge = num_edges * k / intact.blocks;
        let mut bytes = pristine.clone();
        quiver_csr::testing::set_target(&mut bytes, edge, n + 3);
        std::fs::write(&path, &bytes).unwrap();
        // Read directly, and mapped through the page cache.
        for io in [IoMode::Direct, IoMode::Buffered] {
            let config = Config {
                io,
                ..config.clone()
            };
            let err = run(&path, &config, &walks).unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("edge {edge} targets vertex {}", n + 3)),
                "block {k}, {io:?}: {err}"
            );
        }
    }
}
