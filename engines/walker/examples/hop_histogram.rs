//! A walk application in a few lines: at which hops do random walks from
//! uniform starts stand on a given vertex? Run with
//! `cargo run -p quiver-walker --example hop_histogram`.

use quiver_csr::{generate_to_file, GraphSpec, NoProgress, SortOptions, GRAPH500};
use quiver_walker::{run, Config, DeadEnd, Kind, Starts, Visit, WalkApp, WalkSpec};

/// Counts, per hop, the walks standing on `target`.
struct HopHistogram {
    target: u32,
    walks: u64,
    length: u32,
}

impl WalkApp for HopHistogram {
    type State = Vec<u64>;
    type Output = Vec<u64>;

    fn spec(&self) -> WalkSpec {
        WalkSpec {
            starts: Starts::Uniform { walks: self.walks },
            length: self.length,
            stop_probability: 0.0,
            restart_probability: 0.0,
            kind: Kind::Unbiased,
            node2vec: None,
            dead_end: DeadEnd::Restart,
        }
    }

    fn new_state(&self) -> Vec<u64> {
        vec![0; self.length as usize + 1]
    }

    fn visit(&self, hits: &mut Vec<u64>, visit: &Visit) {
        if visit.vertex == self.target {
            hits[visit.hop as usize] += 1;
        }
    }

    fn merge(&self, into: &mut Vec<u64>, other: Vec<u64>) {
        for (a, b) in into.iter_mut().zip(other) {
            *a += b;
        }
    }

    fn finish(&self, hits: Vec<u64>) -> quiver_walker::Result<Vec<u64>> {
        Ok(hits)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let graph = dir.path().join("rmat.qcsr");
    let spec = GraphSpec::Rmat {
        scale: 14,
        edge_factor: 8,
        probabilities: GRAPH500,
        permute: true,
    };
    let shape = SortOptions {
        undirected: true,
        dedupe: true,
        ..SortOptions::default()
    };
    generate_to_file(&spec, 1, None, &shape, &graph, &NoProgress)?;
    let app = HopHistogram {
        target: 0,
        walks: 200_000,
        length: 8,
    };
    let config = Config {
        mem_budget: 1 << 20,
        block_size: Some(64 << 10),
        work_dir: dir.path().to_owned(),
        ..Config::default()
    };
    let report = run(&graph, &config, &app)?;
    println!(
        "{} walks, {} steps, {} block loads",
        report.walks, report.steps, report.blocks_loaded
    );
    for (hop, hits) in report.result.iter().enumerate() {
        println!("hop {hop}: {hits} walks on vertex 0");
    }
    Ok(())
}
