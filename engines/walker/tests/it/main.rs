//! quiver-walker against its in-memory reference and exact answers.

// Test graphs are small; casts between their counts are lossless.
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss
)]

mod apps;
mod distribution;
mod exact;
mod inputs;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use quiver_csr::{testing, write_graph, Graph};
use quiver_walker::{Visit, WalkApp, WalkSpec};

/// Records every visit: (walk id, hop, vertex), sorted at the end.
#[derive(Debug)]
pub struct Recorder(pub WalkSpec);

impl WalkApp for Recorder {
    type State = Vec<(u64, u32, u32)>;
    type Output = Vec<(u64, u32, u32)>;

    fn spec(&self) -> WalkSpec {
        self.0.clone()
    }
    fn needs_walk_ids(&self) -> bool {
        true
    }
    fn new_state(&self) -> Self::State {
        Vec::new()
    }
    fn visit(&self, state: &mut Self::State, visit: &Visit) {
        state.push((visit.walk.unwrap(), visit.hop, visit.vertex));
    }
    fn merge(&self, into: &mut Self::State, mut other: Self::State) {
        into.append(&mut other);
    }
    fn finish(&self, mut state: Self::State) -> quiver_walker::Result<Self::Output> {
        state.sort_unstable();
        Ok(state)
    }
}

/// A random directed graph with dead ends likely: up to `max_v` vertices.
pub fn arb_graph(max_v: u32, max_e: usize) -> impl Strategy<Value = Graph> {
    testing::arb_graph(testing::Shape::new(max_v, max_e).directed_with_dead_ends())
}

/// Writes `graph` into `dir` and returns its path.
pub fn write(dir: &Path, graph: &Graph) -> PathBuf {
    let path = dir.join("g.qcsr");
    write_graph(graph, &path).unwrap();
    path
}
