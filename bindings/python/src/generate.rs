//! `quiver.convert` and `quiver.generate`: graphs from edge-list files and
//! from quiver-csr's generators, as `quiver convert` and `quiver
//! generate` make them.

use std::path::PathBuf;

use pyo3::prelude::*;
use quiver_csr::{ConvertOptions, EdgeFormat, GraphSpec};

use crate::error::invalid;
use crate::graph::{output, Graph};
use crate::options::SortArgs;
use crate::run::run;

/// Converts the edge list `input` (SNAP text, binary `u32` pairs, Matrix
/// Market or an LDBC Graphalytics dataset `NAME.e`; `.gz` is decompressed)
/// into a `.qcsr` graph at `output` (default: a temporary file removed
/// with the graph), and opens it.
///
/// `format` is `"snap"`, `"bin"`, `"mtx"` or `"graphalytics"` (default:
/// guessed from the name); `weighted_binary` reads binary
/// `(u32, u32, f32)` triples; `ignore_weights` drops weights;
/// `num_vertices` gives at least that many vertices; `relabel` maps
/// sparse ids onto `0..|V|`; `undirected`, `dedupe`, `drop_self_loops`,
/// `mem` and `work_dir` as for `Graph.from_edges`.
#[pyfunction]
#[pyo3(signature = (input, output=None, *, format=None, weighted_binary=false, ignore_weights=false, num_vertices=0, relabel=false, undirected=false, dedupe=false, drop_self_loops=false, mem=None, work_dir=None))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments
pub fn convert<'py>(
    py: Python<'py>,
    input: PathBuf,
    output: Option<PathBuf>,
    format: Option<&str>,
    weighted_binary: bool,
    ignore_weights: bool,
    num_vertices: u64,
    relabel: bool,
    undirected: bool,
    dedupe: bool,
    drop_self_loops: bool,
    mem: Option<&Bound<'py, PyAny>>,
    work_dir: Option<PathBuf>,
) -> PyResult<Graph> {
    let sort = SortArgs {
        undirected,
        dedupe,
        drop_self_loops,
        mem,
        work_dir,
    };
    let (path, temp) = crate::graph::output(output)?;
    let options = ConvertOptions {
        format: format
            .map(str::parse::<EdgeFormat>)
            .transpose()
            .map_err(|reason| invalid("format", reason))?,
        weighted_binary,
        ignore_weights,
        min_vertices: num_vertices,
        sort: sort.options(relabel, temp.is_some())?,
    };
    run(py, |progress| {
        quiver_csr::convert(&input, &path, &options, progress)
    })?;
    Graph::written(py, path, temp)
}

/// Generates `spec` into `path` (or a temporary file) and opens it.
fn generate(
    py: Python<'_>,
    spec: &GraphSpec,
    seed: u64,
    weights: Option<(u32, u32)>,
    sort: &SortArgs<'_, '_>,
    path: Option<PathBuf>,
) -> PyResult<Graph> {
    let (path, temp) = output(path)?;
    let options = sort.options(false, temp.is_some())?;
    run(py, |progress| {
        quiver_csr::generate_to_file(spec, seed, weights, &options, &path, progress)
    })?;
    Graph::written(py, path, temp)
}

/// An R-MAT (Kronecker) graph with `2**scale` vertices and
/// `edge_factor * 2**scale` edges, Graph500's quadrant probabilities `a`,
/// `b`, `c` by default and its random permutation of vertex ids unless
/// `permute=False`. The same seed gives the same graph as `quiver
/// generate rmat`. `weights=(lo, hi)` draws integer weights in that
/// range; `path`, `undirected`, `dedupe`, `drop_self_loops`, `mem` and
/// `work_dir` as for `Graph.from_edges`.
#[pyfunction]
#[pyo3(signature = (scale, edge_factor=16, *, a=None, b=None, c=None, permute=true, seed=1, weights=None, path=None, undirected=false, dedupe=false, drop_self_loops=false, mem=None, work_dir=None))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments
fn rmat<'py>(
    py: Python<'py>,
    scale: u32,
    edge_factor: u64,
    a: Option<f64>,
    b: Option<f64>,
    c: Option<f64>,
    permute: bool,
    seed: u64,
    weights: Option<(u32, u32)>,
    path: Option<PathBuf>,
    undirected: bool,
    dedupe: bool,
    drop_self_loops: bool,
    mem: Option<&Bound<'py, PyAny>>,
    work_dir: Option<PathBuf>,
) -> PyResult<Graph> {
    let (ga, gb, gc) = quiver_csr::GRAPH500;
    let spec = GraphSpec::Rmat {
        scale,
        edge_factor,
        probabilities: (a.unwrap_or(ga), b.unwrap_or(gb), c.unwrap_or(gc)),
        permute,
    };
    let sort = SortArgs {
        undirected,
        dedupe,
        drop_self_loops,
        mem,
        work_dir,
    };
    generate(py, &spec, seed, weights, &sort, path)
}

/// An Erdős–Rényi G(n, m) graph: `edges` edges with uniform random
/// endpoints over `vertices` vertices. Other arguments as for `rmat`.
#[pyfunction]
#[pyo3(signature = (vertices, edges, *, seed=1, weights=None, path=None, undirected=false, dedupe=false, drop_self_loops=false, mem=None, work_dir=None))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments
fn erdos_renyi<'py>(
    py: Python<'py>,
    vertices: u32,
    edges: u64,
    seed: u64,
    weights: Option<(u32, u32)>,
    path: Option<PathBuf>,
    undirected: bool,
    dedupe: bool,
    drop_self_loops: bool,
    mem: Option<&Bound<'py, PyAny>>,
    work_dir: Option<PathBuf>,
) -> PyResult<Graph> {
    let sort = SortArgs {
        undirected,
        dedupe,
        drop_self_loops,
        mem,
        work_dir,
    };
    let spec = GraphSpec::ErdosRenyi { vertices, edges };
    generate(py, &spec, seed, weights, &sort, path)
}

/// A small named shape: `"path"` (0 -> 1 -> ... -> n-1), `"cycle"` (the
/// path closed), `"star"` (0 -> i), `"complete"` (every ordered pair) of
/// `n` vertices, or `"grid"` of `n` rows and `cols` columns (edges to
/// the right and down). Other arguments as for `rmat`.
#[pyfunction]
#[pyo3(signature = (kind, n, cols=None, *, seed=1, weights=None, path=None, undirected=false, dedupe=false, drop_self_loops=false, mem=None, work_dir=None))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments
fn shape<'py>(
    py: Python<'py>,
    kind: &str,
    n: u32,
    cols: Option<u32>,
    seed: u64,
    weights: Option<(u32, u32)>,
    path: Option<PathBuf>,
    undirected: bool,
    dedupe: bool,
    drop_self_loops: bool,
    mem: Option<&Bound<'py, PyAny>>,
    work_dir: Option<PathBuf>,
) -> PyResult<Graph> {
    let spec = match (kind, cols) {
        ("grid", Some(cols)) => GraphSpec::Grid(n, cols),
        ("grid", None) => return Err(invalid("cols", "a grid needs its number of columns")),
        (_, Some(_)) => return Err(invalid("cols", format!("a {kind} has no columns"))),
        ("path", None) => GraphSpec::Path(n),
        ("cycle", None) => GraphSpec::Cycle(n),
        ("star", None) => GraphSpec::Star(n),
        ("complete", None) => GraphSpec::Complete(n),
        (other, None) => {
            return Err(invalid(
                "kind",
                format!("unknown shape {other:?} (expected path, cycle, star, grid or complete)"),
            ))
        }
    };
    let sort = SortArgs {
        undirected,
        dedupe,
        drop_self_loops,
        mem,
        work_dir,
    };
    generate(py, &spec, seed, weights, &sort, path)
}

/// The submodule `quiver.generate`.
pub fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let module = PyModule::new(py, "generate")?;
    module.add(
        "__doc__",
        "Deterministic graph generators (quiver-csr's): the same arguments and \
         seed give the same graph as `quiver generate`.",
    )?;
    module.add_function(wrap_pyfunction!(rmat, &module)?)?;
    module.add_function(wrap_pyfunction!(erdos_renyi, &module)?)?;
    module.add_function(wrap_pyfunction!(shape, &module)?)?;
    Ok(module)
}
