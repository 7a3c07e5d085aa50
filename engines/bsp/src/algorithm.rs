//! The six LDBC Graphalytics algorithms as a user asks for them, their
//! parameters' validation, and the per-vertex values they produce.

use quiver_csr::Graph;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Depth of a vertex BFS never reaches. Depths are held as `u32`: a
/// depth is below |V|, which is at most `u32::MAX` (ids are `u32`), so it
/// is never this. Graphalytics writes it as [`GRAPHALYTICS_UNREACHED`].
pub const UNREACHED: u32 = u32::MAX;

/// How Graphalytics writes the depth of a vertex BFS never reaches:
/// `9223372036854775807`.
pub const GRAPHALYTICS_UNREACHED: u64 = i64::MAX as u64;

/// A depth as Graphalytics writes it: itself, or
/// [`GRAPHALYTICS_UNREACHED`] for [`UNREACHED`].
pub fn graphalytics_depth(depth: u32) -> u64 {
    if depth == UNREACHED {
        GRAPHALYTICS_UNREACHED
    } else {
        u64::from(depth)
    }
}

/// One algorithm with its parameters. Vertex ids are dense (`0..|V|`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "algorithm")]
pub enum Algorithm {
    /// Breadth-first search: each vertex's depth from `source` along
    /// out-edges ([`UNREACHED`] if none).
    Bfs {
        /// The root.
        source: u32,
    },
    /// PageRank for a fixed number of iterations from 1/|V|, rank of
    /// vertices without out-edges spread over all vertices.
    PageRank {
        /// The damping factor `d` in [0, 1].
        damping: f64,
        /// Iterations (at least 1).
        iterations: u32,
    },
    /// Weakly connected components: each vertex labelled with the smallest
    /// vertex id of its component, edges taken in both directions.
    Wcc,
    /// Single-source shortest paths over the edge weights (`+∞` when
    /// unreachable). Needs a weighted graph with non-negative weights.
    Sssp {
        /// The root.
        source: u32,
    },
    /// Community detection by synchronous label propagation: each vertex
    /// takes the most frequent label among its in- and out-neighbours, ties
    /// to the smallest, for a fixed number of iterations.
    Cdlp {
        /// Iterations (at least 1).
        iterations: u32,
    },
    /// Local clustering coefficient: edges among a vertex's neighbours (in
    /// either direction) over `d·(d − 1)`, 0 when `d < 2`. Graphalytics
    /// defines it on neighbour sets: the `d` neighbours are distinct and
    /// exclude the vertex itself, and parallel edges and self-loops add no
    /// link, so it stays in [0, 1] on a multigraph.
    Lcc,
}

impl Algorithm {
    /// The algorithm's Graphalytics name (`BFS`, `PR`, ...), as its
    /// reference output files are suffixed.
    pub fn graphalytics_name(&self) -> &'static str {
        match self {
            Algorithm::Bfs { .. } => "BFS",
            Algorithm::PageRank { .. } => "PR",
            Algorithm::Wcc => "WCC",
            Algorithm::Sssp { .. } => "SSSP",
            Algorithm::Cdlp { .. } => "CDLP",
            Algorithm::Lcc => "LCC",
        }
    }

    /// Checks the parameters against `graph`: sources are vertices, SSSP
    /// has non-negative weights, counts are positive.
    pub fn validate(&self, graph: &Graph) -> Result<()> {
        let num_vertices = graph.num_vertices();
        let source_ok = |source: u32| {
            if source < num_vertices {
                Ok(())
            } else {
                Err(Error::invalid(
                    "source",
                    format!("vertex {source} is not in the graph (|V| = {num_vertices})"),
                ))
            }
        };
        match *self {
            Algorithm::Bfs { source } => source_ok(source),
            Algorithm::Sssp { source } => {
                let Some(weights) = graph.weights() else {
                    return Err(Error::invalid(
                        "algorithm",
                        "SSSP needs edge weights, and this graph has none",
                    ));
                };
                if let Some(w) = weights.iter().find(|w| **w < 0.0) {
                    return Err(Error::invalid(
                        "algorithm",
                        format!("SSSP needs non-negative weights, and this graph has {w}"),
                    ));
                }
                source_ok(source)
            }
            Algorithm::PageRank {
                damping,
                iterations,
            } => {
                if !(0.0..=1.0).contains(&damping) {
                    return Err(Error::invalid(
                        "damping",
                        format!("the damping factor must be in [0, 1], got {damping}"),
                    ));
                }
                positive_iterations(iterations)
            }
            Algorithm::Cdlp { iterations } => positive_iterations(iterations),
            Algorithm::Wcc | Algorithm::Lcc => Ok(()),
        }
    }
}

fn positive_iterations(iterations: u32) -> Result<()> {
    if iterations == 0 {
        Err(Error::invalid(
            "iterations",
            "at least 1 iteration is needed",
        ))
    } else {
        Ok(())
    }
}

/// One value per vertex, by dense id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Values {
    /// BFS depths ([`UNREACHED`] for unreached vertices; see
    /// [`graphalytics_depth`] for the benchmark's form).
    Depths(Vec<u32>),
    /// WCC and CDLP labels: dense vertex ids.
    Labels(Vec<u32>),
    /// PageRank, SSSP distances (`+∞` unreachable) and LCC. Serialized as
    /// the numbers' bits, so that infinities (which JSON has not) and every
    /// digit survive a node's report.
    Reals(#[serde(with = "bits")] Vec<f64>),
}

/// `f64`s (de)serialized as their bit patterns.
mod bits {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(reals: &[f64], serializer: S) -> Result<S::Ok, S::Error> {
        let bits: Vec<u64> = reals.iter().map(|x| x.to_bits()).collect();
        bits.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f64>, D::Error> {
        let bits = Vec::<u64>::deserialize(deserializer)?;
        Ok(bits.into_iter().map(f64::from_bits).collect())
    }
}

impl Values {
    /// Dense vertex `v`'s value as Graphalytics' reference outputs print
    /// it, on `graph` (labels by the graph's original ids).
    pub fn graphalytics_text(&self, graph: &Graph, v: u32) -> String {
        let i = v as usize;
        match self {
            Values::Depths(d) => graphalytics_depth(d[i]).to_string(),
            Values::Labels(l) => graph.original_id(l[i]).to_string(),
            Values::Reals(r) => quiver_csr::format_real(r[i]),
        }
    }

    /// Writes the Graphalytics output file of these values on `graph` at
    /// `path` (`ID VALUE` lines by original id, written then renamed).
    pub fn write_graphalytics(
        &self,
        graph: &Graph,
        path: &std::path::Path,
    ) -> quiver_csr::Result<()> {
        quiver_csr::write_vertex_values(path, graph, |v| self.graphalytics_text(graph, v))
    }

    /// Number of vertices.
    pub fn len(&self) -> usize {
        match self {
            Values::Depths(v) => v.len(),
            Values::Labels(v) => v.len(),
            Values::Reals(v) => v.len(),
        }
    }

    /// Whether there are no vertices.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One line about the values: reach, distinct labels, or the finite
    /// values' count, largest and sum.
    pub fn summary(&self) -> String {
        match self {
            Values::Depths(depths) => {
                let reached: Vec<u32> =
                    depths.iter().copied().filter(|&d| d != UNREACHED).collect();
                format!(
                    "{} vertices reached, deepest at depth {}",
                    reached.len(),
                    reached.iter().max().unwrap_or(&0)
                )
            }
            Values::Labels(labels) => {
                let mut distinct = labels.clone();
                distinct.sort_unstable();
                distinct.dedup();
                format!("{} distinct labels", distinct.len())
            }
            Values::Reals(reals) => {
                let finite: Vec<f64> = reals.iter().copied().filter(|x| x.is_finite()).collect();
                let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = finite.iter().sum();
                format!(
                    "{} finite values, largest {max:.6e}, sum {sum:.6e}",
                    finite.len()
                )
            }
        }
    }
}
