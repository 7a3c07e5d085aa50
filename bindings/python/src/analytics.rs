//! `quiver.bsp`: the LDBC Graphalytics algorithms of the bsp engine
//! (RGraph), on this machine, each returning a numpy array indexed by
//! vertex.

use numpy::IntoPyArray;
use pyo3::prelude::*;
use quiver_bsp::{Algorithm, Values};

use crate::graph::Graph;
use crate::options::vertex;
use crate::run::run;

/// Runs `algorithm` on `graph` with `threads` workers (default: one per
/// core) and returns its values as an array.
fn compute<'py>(
    py: Python<'py>,
    graph: &Graph,
    algorithm: Algorithm,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let defaults = quiver_bsp::Config::default();
    let config = quiver_bsp::Config {
        threads: threads.unwrap_or(defaults.threads),
        ..defaults
    };
    let graph = graph.csr(py)?;
    let (values, _report) = run(py, |progress| {
        quiver_bsp::run(graph, &algorithm, &config, progress)
    })?;
    Ok(match values {
        Values::Depths(depths) => depths
            .into_iter()
            .map(quiver_bsp::graphalytics_depth)
            .collect::<Vec<u64>>()
            .into_pyarray(py)
            .into_any(),
        Values::Labels(labels) => labels.into_pyarray(py).into_any(),
        Values::Reals(reals) => reals.into_pyarray(py).into_any(),
    })
}

/// Breadth-first search from `source`: a `uint64` array of each vertex's
/// depth along out-edges, `quiver.bsp.UNREACHED` (2**63 - 1, as
/// Graphalytics writes it) where none leads.
#[pyfunction]
#[pyo3(signature = (graph, source, *, threads=None))]
fn bfs<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    source: i64,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let g = graph.get();
    let source = vertex(source, g.csr(py)?.num_vertices(), "source")?;
    compute(py, g, Algorithm::Bfs { source }, threads)
}

/// PageRank for `iterations` iterations from 1/|V| with damping factor
/// `damping` (rank of vertices without out-edges spread over all): a
/// `float64` array.
#[pyfunction]
#[pyo3(signature = (graph, iterations=20, damping=0.85, *, threads=None))]
fn pagerank<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    iterations: u32,
    damping: f64,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let algorithm = Algorithm::PageRank {
        damping,
        iterations,
    };
    compute(py, graph.get(), algorithm, threads)
}

/// Weakly connected components: a `uint32` array labelling each vertex
/// with the smallest vertex of its component (edges taken both ways).
#[pyfunction]
#[pyo3(signature = (graph, *, threads=None))]
fn wcc<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    compute(py, graph.get(), Algorithm::Wcc, threads)
}

/// Single-source shortest paths from `source` over the edge weights
/// (the graph must be weighted, weights non-negative): a `float64`
/// array, `inf` where no path leads.
#[pyfunction]
#[pyo3(signature = (graph, source, *, threads=None))]
fn sssp<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    source: i64,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let g = graph.get();
    let source = vertex(source, g.csr(py)?.num_vertices(), "source")?;
    compute(py, g, Algorithm::Sssp { source }, threads)
}

/// Community detection by label propagation for `iterations` iterations:
/// a `uint32` array of labels (vertex ids; the most frequent label among
/// in- and out-neighbours, ties to the smallest).
#[pyfunction]
#[pyo3(signature = (graph, iterations=10, *, threads=None))]
fn cdlp<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    iterations: u32,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    compute(py, graph.get(), Algorithm::Cdlp { iterations }, threads)
}

/// Local clustering coefficient: a `float64` array, edges among each
/// vertex's neighbours over `d (d - 1)` (0 when `d < 2`).
#[pyfunction]
#[pyo3(signature = (graph, *, threads=None))]
fn lcc<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    compute(py, graph.get(), Algorithm::Lcc, threads)
}

/// The submodule `quiver.bsp`.
pub fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let module = PyModule::new(py, "bsp")?;
    module.add(
        "__doc__",
        "The LDBC Graphalytics algorithms on Quiver's bsp engine (RGraph's BSP \
         supersteps), each returning a numpy array indexed by vertex.",
    )?;
    module.add("UNREACHED", quiver_bsp::GRAPHALYTICS_UNREACHED)?;
    module.add_function(wrap_pyfunction!(bfs, &module)?)?;
    module.add_function(wrap_pyfunction!(pagerank, &module)?)?;
    module.add_function(wrap_pyfunction!(wcc, &module)?)?;
    module.add_function(wrap_pyfunction!(sssp, &module)?)?;
    module.add_function(wrap_pyfunction!(cdlp, &module)?)?;
    module.add_function(wrap_pyfunction!(lcc, &module)?)?;
    Ok(module)
}
