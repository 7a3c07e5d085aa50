//! Deterministic graph generators: R-MAT / Kronecker, Erdős–Rényi G(n, m),
//! and small named shapes for tests. The same spec and seed always give the
//! same edges, in the same order.

use std::path::{Path, PathBuf};

use quiver_run::Stopwatch;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

use crate::format::{Layout, FLAG_UNDIRECTED, FLAG_WEIGHTED};
use crate::{Error, Result, SortOptions, SortStats};

/// Graph500 R-MAT quadrant probabilities `(a, b, c)`; `d = 1 - a - b - c`.
pub const GRAPH500: (f64, f64, f64) = (0.57, 0.19, 0.19);

/// What a generated graph needs on disk at most, known before it is drawn
/// ([`GraphSpec::disk_needs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskNeeds {
    /// Edges stored (each twice in an undirected graph).
    pub edges: u64,
    /// Bytes of the `.qcsr` file.
    pub graph_bytes: u64,
    /// Bytes of sort runs spilled on the way.
    pub spill_bytes: u64,
}

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub enum GraphSpec {
    /// R-MAT with `2^scale` vertices and `edge_factor * 2^scale` edges.
    Rmat {
        /// log2 of |V| (at most 31).
        scale: u32,
        /// Edges per vertex.
        edge_factor: u64,
        /// Quadrant probabilities `(a, b, c)`.
        probabilities: (f64, f64, f64),
        /// Relabel vertices by a random permutation drawn from the seed, as
        /// Graph500's generator does: otherwise the hubs sit at the lowest
        /// ids, a locality real graphs do not have and every cache enjoys.
        permute: bool,
    },
    /// `edges` edges with independent uniform endpoints over `vertices` vertices.
    ErdosRenyi {
        /// |V|.
        vertices: u32,
        /// Edges drawn (duplicates possible unless deduplicated).
        edges: u64,
    },
    /// `0 -> 1 -> ... -> n-1`.
    Path(u32),
    /// A path closed by `n-1 -> 0`.
    Cycle(u32),
    /// `0 -> i` for every `i` in `1..n`.
    Star(u32),
    /// A `rows x cols` grid, edges to the right and downward neighbours.
    Grid(u32, u32),
    /// Every ordered pair `i -> j`, `i != j`.
    Complete(u32),
}

/// The model in words, as a report shows it (`R-MAT, scale 14, edge
/// factor 16, a=0.57 b=0.19 c=0.19, ids permuted`).
impl std::fmt::Display for GraphSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GraphSpec::Rmat {
                scale,
                edge_factor,
                probabilities: (a, b, c),
                permute,
            } => write!(
                f,
                "R-MAT, scale {scale}, edge factor {edge_factor}, a={a} b={b} c={c}, {}",
                if *permute {
                    "ids permuted"
                } else {
                    "ids as drawn"
                }
            ),
            GraphSpec::ErdosRenyi { vertices, edges } => {
                write!(f, "Erdős–Rényi, {vertices} vertices, {edges} edges drawn")
            }
            GraphSpec::Path(n) => write!(f, "a path of {n} vertices"),
            GraphSpec::Cycle(n) => write!(f, "a cycle of {n} vertices"),
            GraphSpec::Star(n) => write!(f, "a star of {n} vertices"),
            GraphSpec::Grid(rows, cols) => write!(f, "a {rows}x{cols} grid"),
            GraphSpec::Complete(n) => write!(f, "the complete graph on {n} vertices"),
        }
    }
}

impl GraphSpec {
    /// |V| of the generated graph.
    pub fn num_vertices(&self) -> Result<u32> {
        let n = match *self {
            GraphSpec::Rmat { scale, .. } => 1u64 << scale,
            GraphSpec::ErdosRenyi { vertices, .. } => u64::from(vertices),
            GraphSpec::Path(n)
            | GraphSpec::Cycle(n)
            | GraphSpec::Star(n)
            | GraphSpec::Complete(n) => u64::from(n),
            GraphSpec::Grid(r, c) => u64::from(r) * u64::from(c),
        };
        u32::try_from(n)
            .ok()
            .filter(|&n| n < u32::MAX)
            .ok_or_else(|| {
                Error::invalid(
                    "num_vertices",
                    format!("{n} vertices exceed the u32 id space"),
                )
            })
    }

    /// Edges the generator emits (before symmetrising or deduplication).
    pub fn num_edges(&self) -> u64 {
        match *self {
            GraphSpec::Rmat {
                scale, edge_factor, ..
            } => edge_factor << scale,
            GraphSpec::ErdosRenyi { edges, .. } => edges,
            GraphSpec::Path(n) => u64::from(n.saturating_sub(1)),
            GraphSpec::Cycle(n) => u64::from(n),
            GraphSpec::Star(n) => u64::from(n.saturating_sub(1)),
            GraphSpec::Grid(r, c) => {
                let (r, c) = (u64::from(r), u64::from(c));
                r * c.saturating_sub(1) + c * r.saturating_sub(1)
            }
            GraphSpec::Complete(n) => u64::from(n) * u64::from(n.saturating_sub(1)),
        }
    }

    /// The disk a graph drawn from this spec (weighted or not) and sorted
    /// with `sort` takes at most: every edge kept (deduplication and
    /// dropped self-loops only make it smaller).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a spec with too many vertices.
    pub fn disk_needs(&self, weighted: bool, sort: &SortOptions) -> Result<DiskNeeds> {
        let edges = if sort.undirected {
            self.num_edges().saturating_mul(2)
        } else {
            self.num_edges()
        };
        let mut flags = 0;
        if weighted {
            flags |= FLAG_WEIGHTED;
        }
        if sort.undirected {
            flags |= FLAG_UNDIRECTED;
        }
        // No disk holds a quarter of u64::MAX bytes: the figure only has
        // to exceed them, and the layout's products must not overflow.
        let laid_out = edges.min(u64::MAX / 64);
        Ok(DiskNeeds {
            edges,
            graph_bytes: Layout::new(self.num_vertices()?, laid_out, flags).file_len(),
            spill_bytes: sort.spill_bytes(self.num_edges(), weighted),
        })
    }

    fn validate(&self) -> Result<()> {
        if self.num_vertices()? == 0 {
            return Err(Error::invalid(
                "num_vertices",
                "a graph needs at least one vertex",
            ));
        }
        if let GraphSpec::Rmat {
            scale,
            probabilities: (a, b, c),
            ..
        } = *self
        {
            if !(1..=31).contains(&scale) {
                return Err(Error::invalid(
                    "scale",
                    format!("R-MAT scale must be 1..=31, got {scale}"),
                ));
            }
            if ![a, b, c].iter().all(|p| (0.0..=1.0).contains(p)) || a + b + c > 1.0 {
                return Err(Error::invalid(
                    "probabilities",
                    format!(
                    "R-MAT probabilities a={a}, b={b}, c={c} must be in [0, 1] with a + b + c <= 1"
                ),
                ));
            }
        }
        Ok(())
    }

    /// Calls `sink(source, target, weight)` for every edge. Weights are
    /// uniform integers in `weights` (inclusive) when given, else 1.0.
    pub fn generate(
        &self,
        seed: u64,
        weights: Option<(u32, u32)>,
        sink: &mut dyn FnMut(u32, u32, f32) -> Result<()>,
    ) -> Result<()> {
        self.validate()?;
        if let Some((lo, hi)) = weights {
            if lo > hi {
                return Err(Error::invalid(
                    "weights",
                    format!("weight range {lo}..{hi} is empty"),
                ));
            }
        }
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        // Weights come from their own stream so that the edges of a spec and
        // seed do not depend on whether weights are asked for.
        let mut weight_rng = Pcg64Mcg::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
        let mut emit = |s: u32, t: u32| {
            #[allow(clippy::cast_precision_loss)]
            let w = weights.map_or(1.0, |(lo, hi)| weight_rng.random_range(lo..=hi) as f32);
            sink(s, t, w)
        };
        match *self {
            GraphSpec::Rmat {
                scale,
                edge_factor,
                probabilities: (a, b, c),
                permute,
            } => {
                let (ab, abc) = (a + b, a + b + c);
                let relabel = permute.then(|| Permutation::new(scale, seed));
                let label = |v: u32| relabel.as_ref().map_or(v, |p| p.apply(v));
                for _ in 0..edge_factor << scale {
                    let (mut s, mut t) = (0u32, 0u32);
                    for _ in 0..scale {
                        let r: f64 = rng.random();
                        let (sb, tb) = if r < a {
                            (0, 0)
                        } else if r < ab {
                            (0, 1)
                        } else if r < abc {
                            (1, 0)
                        } else {
                            (1, 1)
                        };
                        s = s << 1 | sb;
                        t = t << 1 | tb;
                    }
                    emit(label(s), label(t))?;
                }
            }
            GraphSpec::ErdosRenyi { vertices, edges } => {
                for _ in 0..edges {
                    let s = rng.random_range(0..vertices);
                    let t = rng.random_range(0..vertices);
                    emit(s, t)?;
                }
            }
            GraphSpec::Path(n) => (1..n).try_for_each(|i| emit(i - 1, i))?,
            GraphSpec::Cycle(n) => (0..n).try_for_each(|i| emit(i, (i + 1) % n))?,
            GraphSpec::Star(n) => (1..n).try_for_each(|i| emit(0, i))?,
            GraphSpec::Grid(rows, cols) => {
                for r in 0..rows {
                    for c in 0..cols {
                        let v = r * cols + c;
                        if c + 1 < cols {
                            emit(v, v + 1)?;
                        }
                        if r + 1 < rows {
                            emit(v, v + cols)?;
                        }
                    }
                }
            }
            GraphSpec::Complete(n) => {
                for i in 0..n {
                    for j in (0..n).filter(|&j| j != i) {
                        emit(i, j)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A keyed bijection of the `bits`-bit vertex ids: Graph500's random
/// relabelling of a Kronecker graph, without a table of `2^bits` entries.
/// Every round (odd multiply, xor-shift, add, all modulo `2^bits`) is a
/// bijection, so their composition is one.
#[derive(Clone, Debug)]
pub struct Permutation {
    mask: u64,
    shift: u32,
    keys: [u64; 4],
}

impl Permutation {
    /// The permutation of `0..2^bits` (`bits` in `1..=32`) drawn from `seed`.
    pub fn new(bits: u32, seed: u64) -> Permutation {
        assert!((1..=32).contains(&bits), "ids of {bits} bits");
        // Its own stream, so the edges drawn do not depend on relabelling.
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x5851_f42d_4c95_7f2d);
        Permutation {
            mask: (1u64 << bits) - 1,
            shift: (bits / 2).max(1),
            keys: std::array::from_fn(|_| rng.random::<u64>()),
        }
    }

    /// The new label of `v`.
    pub fn apply(&self, v: u32) -> u32 {
        let mut x = u64::from(v) & self.mask;
        for key in self.keys {
            x = x.wrapping_mul(key | 1) & self.mask;
            x ^= x >> self.shift;
            x = x.wrapping_add(key >> 32) & self.mask;
        }
        u32::try_from(x).expect("the mask keeps at most 32 bits")
    }
}

/// What generating a graph file did: `quiver generate --json`.
#[derive(Clone, Debug, Serialize)]
pub struct GenerateReport {
    /// The `.qcsr` file written.
    pub output: PathBuf,
    /// The model and its parameters, in words ([`GraphSpec`]'s `Display`).
    pub model: String,
    /// The seed the edges were drawn from.
    pub seed: u64,
    /// Vertices of the graph written.
    pub vertices: u32,
    /// Edges of the graph written (stored directed edges).
    pub edges: u64,
    /// No list holds a target twice (no parallel edges), as the header says.
    pub distinct_targets: bool,
    /// What the sort did.
    pub sort: SortStats,
    /// From the call to the report, in nanoseconds.
    pub wall_ns: u64,
    /// The process's peak resident memory in bytes, when Linux says.
    pub peak_mem_bytes: Option<u64>,
}

/// Generates `spec` into the `.qcsr` file `output` through the external
/// sorter (so `sort` may symmetrise, deduplicate and drop self-loops).
pub fn generate_to_file(
    spec: &GraphSpec,
    seed: u64,
    weights: Option<(u32, u32)>,
    sort: &SortOptions,
    output: &Path,
    progress: &dyn crate::Progress,
) -> Result<GenerateReport> {
    let wall = Stopwatch::start();
    let mut sorter = crate::EdgeSorter::new(SortOptions {
        relabel: false,
        ..sort.clone()
    })?;
    progress.start("generating", crate::Unit::Edges, Some(spec.num_edges()));
    let mut done = 0u64;
    spec.generate(seed, weights, &mut |s, t, w| {
        done += 1;
        if done.is_multiple_of(1 << 20) {
            progress.advance(1 << 20);
            progress.check()?;
        }
        sorter.push(u64::from(s), u64::from(t), weights.map(|_| w))
    })?;
    let sort = sorter.finish(output, u64::from(spec.num_vertices()?), progress)?;
    Ok(GenerateReport {
        output: output.to_owned(),
        model: spec.to_string(),
        seed,
        vertices: sort.vertices,
        edges: sort.edges_out,
        distinct_targets: crate::read_header(output)?.distinct_targets(),
        sort,
        wall_ns: wall.elapsed_ns(),
        peak_mem_bytes: quiver_run::peak_rss_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use super::{generate_to_file, GraphSpec};
    use crate::{NoProgress, SortOptions};

    #[test]
    fn disk_needs_are_the_written_file_and_the_runs_past_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let sort = SortOptions {
            undirected: true,
            ..SortOptions::default()
        };
        for (spec, weights) in [
            (GraphSpec::Grid(30, 40), None),
            (GraphSpec::Star(500), Some((1, 9))),
        ] {
            let needs = spec.disk_needs(weights.is_some(), &sort).unwrap();
            let out = dir.path().join("g.qcsr");
            let report = generate_to_file(&spec, 1, weights, &sort, &out, &NoProgress).unwrap();
            assert_eq!(needs.edges, report.edges, "{spec}");
            assert_eq!(
                needs.graph_bytes,
                std::fs::metadata(&out).unwrap().len(),
                "{spec}"
            );
            assert_eq!(needs.spill_bytes, 0, "{spec} fits 1 GiB");
        }
        // 10^10 edges in 8-byte keys, far past a 1 GiB budget.
        let complete = GraphSpec::Complete(100_000);
        let needs = complete.disk_needs(false, &SortOptions::default()).unwrap();
        assert_eq!(needs.edges, 9_999_900_000);
        assert_eq!(needs.spill_bytes, 8 * 9_999_900_000);
        assert!(needs.graph_bytes > 4 * 9_999_900_000);
        assert!(GraphSpec::Complete(u32::MAX - 1)
            .disk_needs(true, &sort)
            .is_ok_and(|n| n.graph_bytes > 1 << 60));
    }
}
