//! Conversion against a reference model: external-memory conversion equals
//! in-memory conversion equals a direct construction, and stays within its
//! memory budget.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use proptest::prelude::*;
use quiver_csr::{
    convert, ConvertOptions, EdgeFormat, ExportOptions, Graph, NoProgress, SortOptions,
};

use crate::{alloc::peak_heap_of, assert_same_graph, files_in};

/// What conversion must produce, built without the sorter: a map from
/// (source, target) to the weights seen, turned into a graph.
fn reference(
    edges: &[(u64, u64, f32)],
    o: &SortOptions,
    weighted: bool,
    min_vertices: u64,
) -> Graph {
    let mut all: Vec<(u64, u64, f32)> = Vec::new();
    for &(s, t, w) in edges {
        if s == t && o.drop_self_loops {
            continue;
        }
        all.push((s, t, w));
        if o.undirected && s != t {
            all.push((t, s, w));
        }
    }
    // Relabelling numbers ids by first appearance (source before target)
    // among the edges kept.
    let mut first_seen: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
    let mut max_id = None;
    for &(s, t, _) in edges {
        if s == t && o.drop_self_loops {
            continue;
        }
        for id in [s, t] {
            let next = first_seen.len() as u32;
            first_seen.entry(id).or_insert(next);
            max_id = max_id.max(Some(id));
        }
    }
    let map = |id: u64| -> u32 {
        if o.relabel {
            first_seen[&id]
        } else {
            id as u32
        }
    };
    let n = if o.relabel {
        first_seen.len() as u64
    } else {
        max_id.map_or(0, |m| m + 1).max(min_vertices)
    };
    let mut by_pair: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    for (s, t, w) in all {
        by_pair
            .entry((map(s), map(t)))
            .or_default()
            .push(w.to_bits());
    }
    let mut out = Vec::new();
    for ((s, t), mut ws) in by_pair {
        ws.sort_unstable();
        if o.dedupe {
            ws.truncate(1);
        }
        out.extend(ws.into_iter().map(|w| (s, t, f32::from_bits(w))));
    }
    Graph::from_edges(n as u32, &out, weighted, o.undirected).unwrap()
}

fn write_text(path: &Path, edges: &[(u64, u64, f32)], weighted: bool) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "# a test edge list\n% with two kinds of comment").unwrap();
    for (i, &(s, t, w)) in edges.iter().enumerate() {
        // Vary separators and line ends the way real files do.
        let sep = ["\t", " ", ",", "  \t "][i % 4];
        let end = if i % 3 == 0 { "\r\n" } else { "\n" };
        if weighted {
            write!(f, "{s}{sep}{t}{sep}{w}{end}").unwrap();
        } else {
            write!(f, "{s}{sep}{t}{end}").unwrap();
        }
    }
}

fn arb_options() -> impl Strategy<Value = SortOptions> {
    (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(undirected, dedupe, drop_self_loops, relabel)| SortOptions {
            undirected,
            dedupe,
            drop_self_loops,
            relabel,
            ..SortOptions::default()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// 140k-220k edges spill several runs under the 1 MiB minimum budget
    /// (64Ki keys per run, half that when weighted), and must give the same file as an
    /// in-memory conversion and the reference.
    #[test]
    fn external_conversion_equals_in_memory_and_reference(
        seed_edges in prop::collection::vec((0u64..3000, 0u64..3000, 0u32..50), 140_000..220_000),
        options in arb_options(),
        weighted in any::<bool>(),
        sparse in any::<bool>(),
    ) {
        // Sparse ids are spread over 64 bits and need --relabel.
        let options = SortOptions { relabel: options.relabel || sparse, ..options };
        let scale = if sparse { 1u64 << 40 } else { 1 };
        let edges: Vec<(u64, u64, f32)> =
            seed_edges.iter().map(|&(s, t, w)| (s * scale + 7 * u64::from(sparse), t * scale, w as f32 * 0.25)).collect();
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("edges.txt");
        write_text(&input, &edges, weighted);
        let expected = reference(&edges, &options, weighted, 0);

        let small = ConvertOptions {
            sort: SortOptions { mem_budget: quiver_csr::MIN_MEM_BUDGET, work_dir: Some(dir.path().to_owned()), ..options.clone() },
            ..ConvertOptions::default()
        };
        let report = convert(&input, &dir.path().join("external.qcsr"), &small, &NoProgress).unwrap();
        prop_assert!(report.sort.runs_spilled >= 2, "expected spilling, got {:?}", report.sort);
        let big = ConvertOptions { sort: SortOptions { mem_budget: 1 << 30, ..options.clone() }, ..ConvertOptions::default() };
        let report = convert(&input, &dir.path().join("memory.qcsr"), &big, &NoProgress).unwrap();
        prop_assert_eq!(report.sort.runs_spilled, 0);

        let external = Graph::open(dir.path().join("external.qcsr")).unwrap();
        let memory = Graph::open(dir.path().join("memory.qcsr")).unwrap();
        external.verify().unwrap();
        assert_same_graph(&expected, &external);
        assert_same_graph(&expected, &memory);
        let a = std::fs::read(dir.path().join("external.qcsr")).unwrap();
        let b = std::fs::read(dir.path().join("memory.qcsr")).unwrap();
        prop_assert!(a == b, "external and in-memory conversions differ byte-wise");
        prop_assert_eq!(files_in(dir.path()), vec!["edges.txt", "external.qcsr", "memory.qcsr"], "spill files removed");
    }
}

#[test]
fn conversion_stays_within_a_budget_far_below_the_input() {
    // 2.4M edges: 28 MiB of text, 55 MiB as sort records, converted
    // with 4 MiB. The writer's offsets (8 bytes per vertex) come on top of
    // the budget by contract; 50k vertices make them 0.4 MiB.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.txt");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    let mut x = 12345u64;
    for _ in 0..2_400_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        writeln!(f, "{}\t{}", (x >> 33) % 50_000, (x >> 13) % 50_000).unwrap();
    }
    drop(f);
    let input_bytes = std::fs::metadata(&input).unwrap().len();
    let budget = 4u64 << 20;
    let options = ConvertOptions {
        sort: SortOptions {
            mem_budget: budget,
            work_dir: Some(dir.path().to_owned()),
            ..SortOptions::default()
        },
        ..ConvertOptions::default()
    };
    let output = dir.path().join("big.qcsr");
    let (report, peak) = peak_heap_of(|| convert(&input, &output, &options, &NoProgress).unwrap());
    assert!(
        input_bytes > 5 * budget,
        "the input ({input_bytes} bytes) must dwarf the budget"
    );
    assert!(report.sort.runs_spilled > 5, "{:?}", report.sort);
    let allowed = (budget + 8 * 50_001) * 11 / 10;
    eprintln!("peak heap {peak} bytes for a {budget}-byte budget and {input_bytes} bytes of input");
    assert!(
        peak <= allowed,
        "peak heap {peak} bytes exceeds budget {budget} + offsets, +10% = {allowed}"
    );
    let graph = Graph::open(&output).unwrap();
    graph.verify().unwrap();
    assert_eq!(graph.num_edges(), 2_400_000);
}

/// An R-MAT graph of scale 10 (8 edges a vertex, ids permuted) written to
/// `path` with `seed`, weights drawn from `weights` and `options`.
fn rmat10(path: &Path, seed: u64, weights: Option<(u32, u32)>, options: &SortOptions) -> Graph {
    let spec = quiver_csr::GraphSpec::Rmat {
        scale: 10,
        edge_factor: 8,
        probabilities: quiver_csr::GRAPH500,
        permute: true,
    };
    quiver_csr::generate_to_file(&spec, seed, weights, options, path, &NoProgress).unwrap();
    Graph::open(path).unwrap()
}

#[test]
fn exported_edge_lists_convert_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    for weights in [None, Some((1, 100))] {
        let original = dir.path().join("g.qcsr");
        let graph = rmat10(&original, 3, weights, &SortOptions::default());
        for (format, name) in [(EdgeFormat::Snap, "g.txt"), (EdgeFormat::Bin, "g.bin")] {
            let exported = dir.path().join(name);
            quiver_csr::export_file(&graph, &exported, ExportOptions::new(format)).unwrap();
            let options = ConvertOptions {
                weighted_binary: weights.is_some(),
                min_vertices: u64::from(graph.num_vertices()),
                ..ConvertOptions::default()
            };
            let back = dir.path().join("back.qcsr");
            convert(&exported, &back, &options, &NoProgress).unwrap();
            assert_same_graph(&graph, &Graph::open(&back).unwrap());
        }
    }
}

/// An undirected graph exported with each edge once holds half its
/// edges (self-loops once) and converts back, reverses added, to itself;
/// a directed graph is refused.
#[test]
fn each_edge_once_converts_back_with_reverses_added() {
    let dir = tempfile::tempdir().unwrap();
    let undirected = SortOptions {
        undirected: true,
        dedupe: true,
        ..SortOptions::default()
    };
    for weights in [None, Some((1, 100))] {
        let graph = rmat10(&dir.path().join("g.qcsr"), 5, weights, &undirected);
        let loops: u64 = (0..graph.num_vertices())
            .map(|v| graph.neighbors(v).iter().filter(|&&t| t == v).count() as u64)
            .sum();
        assert!(loops > 0, "the test needs self-loops");
        let exported = dir.path().join("g.bin");
        let options = ExportOptions {
            format: EdgeFormat::Bin,
            each_edge_once: true,
        };
        let written = quiver_csr::export_file(&graph, &exported, options).unwrap();
        assert_eq!(written.edges, (graph.num_edges() - loops) / 2 + loops);
        let back = dir.path().join("back.qcsr");
        let convert_options = ConvertOptions {
            weighted_binary: weights.is_some(),
            min_vertices: u64::from(graph.num_vertices()),
            sort: undirected.clone(),
            ..ConvertOptions::default()
        };
        convert(&exported, &back, &convert_options, &NoProgress).unwrap();
        assert_same_graph(&graph, &Graph::open(&back).unwrap());
    }
    let directed = rmat10(&dir.path().join("d.qcsr"), 5, None, &SortOptions::default());
    let once = ExportOptions {
        format: EdgeFormat::Bin,
        each_edge_once: true,
    };
    let refusal = quiver_csr::export_refusal(&directed, once).expect("a directed graph is refused");
    assert!(refusal.contains("undirected"), "{refusal}");
    let output = dir.path().join("d.bin");
    assert!(quiver_csr::export_file(&directed, &output, once).is_err());
    assert!(!output.exists(), "a refused export leaves no file");
}

/// A hub's list is written in pieces: the list stays whole and sorted,
/// and a target repeated across two pieces still marks the graph as
/// repeating targets; without the repeat, it is marked distinct.
#[test]
fn a_hub_longer_than_a_written_piece_converts_whole() {
    let dir = tempfile::tempdir().unwrap();
    for repeat in [false, true] {
        let input = dir.path().join("hub.txt");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        for t in (1..=70_000u32).rev() {
            writeln!(f, "0 {t}").unwrap();
        }
        if repeat {
            // Sorted, the two copies sit at positions 65,535 and 65,536.
            writeln!(f, "0 65536").unwrap();
        }
        drop(f);
        let output = dir.path().join("hub.qcsr");
        convert(&input, &output, &ConvertOptions::default(), &NoProgress).unwrap();
        let graph = Graph::open(&output).unwrap();
        graph.verify().unwrap();
        let mut want: Vec<u32> = (1..=70_000).collect();
        if repeat {
            want.insert(65_535, 65_536);
        }
        assert!(graph.neighbors(0) == want.as_slice(), "the hub's list");
        assert_eq!(graph.has_distinct_targets(), !repeat);
    }
}

#[test]
fn gzip_input_reads_like_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let text = "# c\n0 1\n1 2\n2 0\n2 3\n";
    let plain = dir.path().join("e.txt");
    std::fs::write(&plain, text).unwrap();
    let gz = dir.path().join("e.txt.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap();
    let o = ConvertOptions::default();
    convert(&plain, &dir.path().join("a.qcsr"), &o, &NoProgress).unwrap();
    let report = convert(&gz, &dir.path().join("b.qcsr"), &o, &NoProgress).unwrap();
    assert_eq!(report.format, EdgeFormat::Snap);
    assert_eq!(
        report.input_bytes,
        text.len() as u64,
        "decompressed bytes are counted"
    );
    assert_same_graph(
        &Graph::open(dir.path().join("a.qcsr")).unwrap(),
        &Graph::open(dir.path().join("b.qcsr")).unwrap(),
    );
}

#[test]
fn matrix_market_symmetric_and_general() {
    let dir = tempfile::tempdir().unwrap();
    let sym = dir.path().join("s.mtx");
    std::fs::write(
        &sym,
        "%%MatrixMarket matrix coordinate real symmetric\n% c\n5 5 3\n2 1 0.5\n3 3 2\n5 2 1.5\n",
    )
    .unwrap();
    convert(
        &sym,
        &dir.path().join("s.qcsr"),
        &ConvertOptions::default(),
        &NoProgress,
    )
    .unwrap();
    let g = Graph::open(dir.path().join("s.qcsr")).unwrap();
    assert_eq!(g.num_vertices(), 5, "dimension, not max id, sets |V|");
    assert_eq!(g.num_edges(), 5, "off-diagonal entries count twice");
    assert_eq!(g.neighbors(1), &[0, 4]);
    assert_eq!(g.edge_weights(1), Some(&[0.5f32, 1.5][..]));
    assert_eq!(g.neighbors(2), &[2]);

    let gen = dir.path().join("g.mtx");
    std::fs::write(
        &gen,
        "%%MatrixMarket matrix coordinate pattern general\n3 4 2\n1 4\n3 1\n",
    )
    .unwrap();
    convert(
        &gen,
        &dir.path().join("g.qcsr"),
        &ConvertOptions::default(),
        &NoProgress,
    )
    .unwrap();
    let g = Graph::open(dir.path().join("g.qcsr")).unwrap();
    assert_eq!(
        (g.num_vertices(), g.num_edges(), g.is_weighted()),
        (4, 2, false)
    );
    assert_eq!(g.neighbors(0), &[3]);
}

#[test]
fn a_failed_conversion_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.txt");
    let mut text = String::new();
    for i in 0..200_000 {
        text.push_str(&format!("{i} {}\n", i + 1));
    }
    text.push_str("7 oops\n");
    std::fs::write(&input, text).unwrap();
    let options = ConvertOptions {
        sort: SortOptions {
            mem_budget: quiver_csr::MIN_MEM_BUDGET,
            work_dir: Some(dir.path().to_owned()),
            ..SortOptions::default()
        },
        ..ConvertOptions::default()
    };
    let err = convert(&input, &dir.path().join("out.qcsr"), &options, &NoProgress).unwrap_err();
    assert!(err.to_string().contains("line 200001"), "{err}");
    assert_eq!(
        files_in(dir.path()),
        vec!["bad.txt"],
        "no output, no spill files"
    );
}

#[test]
fn many_runs_merge_in_several_passes_and_still_match() {
    // 1.2M weighted edges with dedupe under the 1 MiB minimum: about 37
    // runs, more than the 8 the budget lets one pass read.
    let dir = tempfile::tempdir().unwrap();
    let mut x = 99u64;
    let edges: Vec<(u64, u64, f32)> = (0..1_200_000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (
                (x >> 40) % 20_000,
                (x >> 20) % 20_000,
                ((x >> 8) % 4) as f32,
            )
        })
        .collect();
    let input = dir.path().join("e.txt");
    write_text(&input, &edges, true);
    let options = SortOptions {
        dedupe: true,
        ..SortOptions::default()
    };
    let small = ConvertOptions {
        sort: SortOptions {
            mem_budget: quiver_csr::MIN_MEM_BUDGET,
            work_dir: Some(dir.path().to_owned()),
            ..options.clone()
        },
        ..ConvertOptions::default()
    };
    let report = convert(&input, &dir.path().join("g.qcsr"), &small, &NoProgress).unwrap();
    assert!(report.sort.merge_passes >= 2, "{:?}", report.sort);
    assert_same_graph(
        &reference(&edges, &options, true, 0),
        &Graph::open(dir.path().join("g.qcsr")).unwrap(),
    );
}

/// Asks the work to stop from the start.
struct CancelAtOnce;

impl quiver_csr::Progress for CancelAtOnce {
    fn cancelled(&self) -> bool {
        true
    }
}

/// A conversion whose caller asks it to stop ends with `Cancelled` after
/// its first read, and leaves neither the output nor a temporary file.
#[test]
fn a_cancelled_conversion_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edges.txt");
    let edges: Vec<(u64, u64, f32)> = (0..200_000u64)
        .map(|i| (i % 5000, (i * 7) % 5000, 1.0))
        .collect();
    write_text(&input, &edges, false);
    let output = dir.path().join("g.qcsr");
    let options = ConvertOptions {
        sort: SortOptions {
            work_dir: Some(dir.path().to_owned()),
            ..SortOptions::default()
        },
        ..ConvertOptions::default()
    };
    let err = convert(&input, &output, &options, &CancelAtOnce).unwrap_err();
    assert!(matches!(err, quiver_csr::Error::Cancelled(_)), "{err}");
    assert_eq!(files_in(dir.path()), ["edges.txt"]);
    convert(&input, &output, &options, &NoProgress).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// An edge list in which every edge has its reverse (of the same
    /// weight) is stored undirected, and says so; any other stays directed,
    /// as does every list with `keep_directed`. The lists are the
    /// reference's either way.
    #[test]
    fn a_symmetric_edge_list_is_stored_undirected(
        edges in prop::collection::vec((0u64..8, 0u64..8, 0u32..3), 1..30),
        mirror in any::<bool>(),
        options in arb_options(),
        weighted in any::<bool>(),
        keep_directed in any::<bool>(),
    ) {
        let mut edges: Vec<(u64, u64, f32)> =
            edges.iter().map(|&(s, t, w)| (s, t, w as f32 + 1.0)).collect();
        if mirror {
            let reverses: Vec<_> = edges.iter().map(|&(s, t, w)| (t, s, w)).collect();
            edges.extend(reverses);
        }
        let options = SortOptions { keep_directed, ..options };
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("edges.txt");
        write_text(&input, &edges, weighted);
        let directed = reference(&edges, &SortOptions { undirected: false, ..options.clone() }, weighted, 0);
        // The reference's own check: its edges, sorted, equal their reverses.
        let list = |reverse: bool| {
            let mut all: Vec<(u32, u32, u32)> = (0..directed.num_vertices())
                .flat_map(|v| {
                    let ws = directed.edge_weights(v).map(<[f32]>::to_vec);
                    directed.neighbors(v).iter().enumerate().map(move |(i, &t)| {
                        let w = ws.as_ref().map_or(0, |ws| ws[i].to_bits());
                        if reverse { (t, v, w) } else { (v, t, w) }
                    }).collect::<Vec<_>>()
                })
                .collect();
            all.sort_unstable();
            all
        };
        // Vacuously so without edges; stored undirected only with some.
        let mirrored = list(false) == list(true);
        let symmetric = directed.num_edges() > 0 && mirrored;
        let report = convert(
            &input,
            &dir.path().join("g.qcsr"),
            &ConvertOptions { sort: options.clone(), ..ConvertOptions::default() },
            &NoProgress,
        ).unwrap();
        let graph = Graph::open(dir.path().join("g.qcsr")).unwrap();
        let detected = !options.undirected && !keep_directed && symmetric;
        prop_assert_eq!(report.sort.symmetric, detected);
        prop_assert_eq!(graph.is_undirected(), options.undirected || detected);
        prop_assert_eq!(graph.is_symmetric(), options.undirected || mirrored);
        let expected = reference(&edges, &options, weighted, 0);
        for v in 0..expected.num_vertices() {
            prop_assert_eq!(graph.neighbors(v), expected.neighbors(v));
        }
    }
}
