//! `quiver.bsp`: the LDBC Graphalytics algorithms of the bsp engine
//! (RGraph), on this machine, each returning a numpy array indexed by
//! vertex (dense order). Where the graph has an id map, a source is named
//! and labels are given by the dataset's ids, or by index with
//! `dense=True`.

use numpy::IntoPyArray;
use pyo3::prelude::*;
use quiver_bsp::{Algorithm, Values};

use crate::graph::Graph;
use crate::run::run;

/// Runs `algorithm` on `graph` with `threads` workers (default: one per
/// core) and returns its values as an array; labels (vertices) by the
/// dataset's ids where the graph has an id map, unless `dense`.
fn compute<'py>(
    py: Python<'py>,
    graph: &Graph,
    algorithm: Algorithm,
    threads: Option<usize>,
    dense: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let defaults = quiver_bsp::Config::default();
    let config = quiver_bsp::Config {
        threads: threads.unwrap_or(defaults.threads),
        ..defaults
    };
    let csr = graph.csr(py)?;
    let (values, _report) = run(py, |progress| {
        quiver_bsp::run(csr, &algorithm, &config, progress)
    })?;
    Ok(match values {
        Values::Depths(depths) => depths
            .into_iter()
            .map(quiver_bsp::graphalytics_depth)
            .collect::<Vec<u64>>()
            .into_pyarray(py)
            .into_any(),
        Values::Labels(labels) => match graph.by_id(py, dense)? {
            Some(names) => labels
                .into_iter()
                .map(|v| names.original(v))
                .collect::<Vec<u64>>()
                .into_pyarray(py)
                .into_any(),
            None => labels.into_pyarray(py).into_any(),
        },
        Values::Reals(reals) => reals.into_pyarray(py).into_any(),
    })
}

/// Breadth-first search from `source`: a `uint64` array of each vertex's
/// depth along out-edges, `quiver.bsp.UNREACHED` (2**63 - 1, as
/// Graphalytics writes it) where none leads. `source` is the dataset's id
/// where the graph has an id map, an index with `dense=True`.
#[pyfunction]
#[pyo3(signature = (graph, source, *, threads=None, dense=false))]
fn bfs<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    source: &Bound<'py, PyAny>,
    threads: Option<usize>,
    dense: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let g = graph.get();
    let source = g.vertex(py, source, "source", dense)?;
    compute(py, g, Algorithm::Bfs { source }, threads, dense)
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
    compute(py, graph.get(), algorithm, threads, false)
}

/// Weakly connected components: an array labelling each vertex with the
/// smallest vertex of its component (edges taken both ways): `uint32`
/// indexes, or where the graph has an id map `uint64` dataset ids
/// (`dense=True`: indexes).
#[pyfunction]
#[pyo3(signature = (graph, *, threads=None, dense=false))]
fn wcc<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    threads: Option<usize>,
    dense: bool,
) -> PyResult<Bound<'py, PyAny>> {
    compute(py, graph.get(), Algorithm::Wcc, threads, dense)
}

/// Single-source shortest paths from `source` over the edge weights
/// (the graph must be weighted, weights non-negative): a `float64`
/// array, `inf` where no path leads. `source` as `bfs` takes it.
#[pyfunction]
#[pyo3(signature = (graph, source, *, threads=None, dense=false))]
fn sssp<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    source: &Bound<'py, PyAny>,
    threads: Option<usize>,
    dense: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let g = graph.get();
    let source = g.vertex(py, source, "source", dense)?;
    compute(py, g, Algorithm::Sssp { source }, threads, dense)
}

/// Community detection by label propagation for `iterations` iterations:
/// an array of labels (vertices, named as `wcc` names them; the most
/// frequent label among in- and out-neighbours, ties to the smallest).
#[pyfunction]
#[pyo3(signature = (graph, iterations=10, *, threads=None, dense=false))]
fn cdlp<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    iterations: u32,
    threads: Option<usize>,
    dense: bool,
) -> PyResult<Bound<'py, PyAny>> {
    compute(
        py,
        graph.get(),
        Algorithm::Cdlp { iterations },
        threads,
        dense,
    )
}

/// Local clustering coefficient: a `float64` array, edges among each
/// vertex's distinct neighbours (itself excluded) over `d (d - 1)` (0 when
/// `d < 2`), in [0, 1] on multigraphs too.
#[pyfunction]
#[pyo3(signature = (graph, *, threads=None))]
fn lcc<'py>(
    py: Python<'py>,
    graph: &Bound<'py, Graph>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    compute(py, graph.get(), Algorithm::Lcc, threads, false)
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
