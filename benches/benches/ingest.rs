//! quiver-csr ingest on a text edge list of about a million edges (R-MAT,
//! scale 16, edge factor 16, exported as SNAP text): the text parser alone,
//! from memory, and whole conversions to `.qcsr` from a file, once with a
//! budget that keeps every edge in memory and once with 4 MiB, which spills
//! sorted runs and merges them. Throughput is bytes of text per second.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode, Throughput,
};
use quiver_csr::{
    ConvertOptions, EdgeFormat, ExportOptions, Graph, GraphSpec, NoProgress, SortOptions, GRAPH500,
};

const SCALE: u32 = 16;
const EDGE_FACTOR: u64 = 16;

/// The R-MAT graph as SNAP text, `source<TAB>target` per line.
fn edge_list() -> Vec<u8> {
    let spec = GraphSpec::Rmat {
        scale: SCALE,
        edge_factor: EDGE_FACTOR,
        probabilities: GRAPH500,
        permute: true,
    };
    let mut edges = Vec::new();
    spec.generate(1, None, &mut |s, t, w| {
        edges.push((s, t, w));
        Ok(())
    })
    .expect("generate R-MAT edges");
    let n = spec.num_vertices().expect("scale 16 fits u32 ids");
    let graph = Graph::from_edges(n, &edges, false, false).expect("build the graph");
    let mut text = Vec::new();
    quiver_csr::export(&graph, &mut text, ExportOptions::new(EdgeFormat::Snap))
        .expect("export to memory");
    text
}

fn configure(g: &mut BenchmarkGroup<'_, WallTime>, bytes: usize, seconds: u64) {
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(seconds))
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Bytes(bytes as u64));
}

fn parse(c: &mut Criterion, text: &[u8]) {
    let mut g = c.benchmark_group("ingest/parse_text");
    configure(&mut g, text.len(), 3);
    g.bench_function("rmat16", |b| {
        b.iter(|| {
            let mut reader = text;
            quiver_csr::parse::parse_text(
                &mut reader,
                Path::new("rmat16.txt"),
                quiver_csr::parse::TextIds::Dense,
                &NoProgress,
                // Typed by the sink's signature, whatever the weight type is.
                &mut |s, t, w| {
                    black_box((s, t, w));
                    Ok(())
                },
            )
            .expect("parse the edge list")
        });
    });
    g.finish();
}

fn convert(c: &mut Criterion, text: &[u8]) {
    // On disk (the default temp dir here), like a user's edge list.
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("rmat16.txt");
    std::fs::write(&input, text).expect("write the edge list");
    let output = dir.path().join("rmat16.qcsr");
    let mut g = c.benchmark_group("ingest/convert");
    configure(&mut g, text.len(), 5);
    for (name, budget) in [("in_memory_1GiB", 1u64 << 30), ("spill_4MiB", 4 << 20)] {
        let options = ConvertOptions {
            sort: SortOptions {
                mem_budget: budget,
                work_dir: Some(dir.path().to_owned()),
                ..SortOptions::default()
            },
            ..ConvertOptions::default()
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                quiver_csr::convert(&input, &output, &options, &NoProgress).expect("convert")
            });
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    let text = edge_list();
    parse(c, &text);
    convert(c, &text);
}

criterion_group!(ingest, benches);
criterion_main!(ingest);
