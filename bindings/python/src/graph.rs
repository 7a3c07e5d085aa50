//! `quiver.Graph`: a `.qcsr` graph, its arrays as numpy views, and the
//! walker's applications as its methods.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use numpy::ndarray::Array2;
use numpy::{AllowTypeChange, IntoPyArray, PyArray1, PyArray2, PyArrayLike1};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use quiver_csr::format::Section;
use quiver_csr::VertexIds;
use quiver_walker::apps::{self, RawWalks, SimRank, VisitFrequency};
use tempfile::TempPath;

use crate::error::{error, invalid};
use crate::options::{count, vertex, walk_spec, SortArgs, WalkerArgs};
use crate::run::run;

/// A directed graph in a `.qcsr` file (checksummed CSR), opened and
/// verified. Vertices are stored as dense indexes `0..len(g)`; `offsets`,
/// `targets`, `weights` and `original_ids` are read-only numpy views of
/// the file. Where the graph has an id map (a Graphalytics dataset),
/// every method that takes or returns vertices names them by the
/// dataset's own ids, or by dense index with `dense=True`; arrays indexed
/// by vertex are in dense order (entry `i` is vertex `original_ids[i]`).
#[pyclass(frozen, module = "quiver")]
pub struct Graph {
    /// Its file: the walker reads graphs from files.
    path: PathBuf,
    /// What opening the file (and verifying all of it) found.
    shape: Shape,
    /// The graph mapped, for accessors and the bsp engine: mapped again on
    /// first use, so that a graph that is only walked holds none of its
    /// pages while the walker reads its own copy.
    mapped: PyOnceLock<quiver_csr::Graph>,
    /// The sections as numpy arrays, made on first use.
    views: PyOnceLock<Views>,
    /// How the graph names its vertices (its id map alone), read on first
    /// use.
    names: PyOnceLock<VertexIds>,
    /// The file of a graph made without a path, removed when the graph
    /// goes.
    temp: Option<TempPath>,
}

/// A graph's size and flags, as its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    num_vertices: u32,
    num_edges: u64,
    weighted: bool,
    undirected: bool,
}

impl Shape {
    fn of(graph: &quiver_csr::Graph) -> Shape {
        Shape {
            num_vertices: graph.num_vertices(),
            num_edges: graph.num_edges(),
            weighted: graph.is_weighted(),
            undirected: graph.is_undirected(),
        }
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("path", &self.path)
            .field("shape", &self.shape)
            .field("temp", &self.temp)
            .finish_non_exhaustive()
    }
}

/// A graph's sections as read-only numpy arrays over one mapping of its
/// file (Python's `mmap`, so that the arrays keep it alive).
#[derive(Debug)]
struct Views {
    offsets: Py<PyAny>,
    targets: Py<PyAny>,
    weights: Option<Py<PyAny>>,
    original_ids: Option<Py<PyAny>>,
}

/// Pads a walk named by the dataset's ids (`Graph.walks` on a graph with
/// an id map) after it stopped early: `2**64 - 1`.
pub const NO_ID: u64 = u64::MAX;

/// Where a graph is written: `path`, or a fresh temporary file that the
/// graph removes when it goes.
pub fn output(path: Option<PathBuf>) -> PyResult<(PathBuf, Option<TempPath>)> {
    match path {
        Some(path) => Ok((path, None)),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("quiver-")
                .suffix(".qcsr")
                .tempfile()
                .map_err(|e| error(&e))?
                .into_temp_path();
            Ok((temp.to_path_buf(), Some(temp)))
        }
    }
}

impl Graph {
    /// A graph this package has just written to `path`, known by its
    /// header alone: the writer checksummed every section, and whoever
    /// reads them (the walker, [`Graph::csr`]) verifies them then.
    /// Opening it would read and verify the whole file once more.
    pub fn written(py: Python<'_>, path: PathBuf, temp: Option<TempPath>) -> PyResult<Graph> {
        let header = run(py, |_| quiver_csr::read_header(&path))?;
        let shape = Shape {
            num_vertices: header.num_vertices,
            num_edges: header.num_edges,
            weighted: header.weighted(),
            undirected: header.undirected(),
        };
        Ok(Graph::with_shape(path, shape, temp))
    }

    /// The graph at `path` of `shape`, owning `temp` if it is a temporary
    /// file.
    fn with_shape(path: PathBuf, shape: Shape, temp: Option<TempPath>) -> Graph {
        Graph {
            path,
            shape,
            mapped: PyOnceLock::new(),
            views: PyOnceLock::new(),
            names: PyOnceLock::new(),
            temp,
        }
    }

    /// The graph mapped (verified again when first mapped, and refused if
    /// the file no longer holds the graph opened).
    pub fn csr(&self, py: Python<'_>) -> PyResult<&quiver_csr::Graph> {
        self.mapped.get_or_try_init(py, || {
            let graph = run(py, |_| quiver_csr::Graph::open(&self.path))?;
            if Shape::of(&graph) != self.shape {
                return Err(pyo3::exceptions::PyOSError::new_err(format!(
                    "{} changed since it was opened",
                    self.path.display()
                )));
            }
            Ok(graph)
        })
    }

    /// How the graph names its vertices: its header and id map alone,
    /// read (and verified) on first use, so that walking a graph does not
    /// map it.
    fn names(&self, py: Python<'_>) -> PyResult<&VertexIds> {
        self.names
            .get_or_try_init(py, || run(py, |_| VertexIds::open(&self.path)))
    }

    /// The names to give vertices a method returns: the id map's, unless
    /// the graph has none or `dense` asks for indexes.
    pub fn by_id(&self, py: Python<'_>, dense: bool) -> PyResult<Option<&VertexIds>> {
        let names = self.names(py)?;
        Ok((names.has_map() && !dense).then_some(names))
    }

    /// The dense index of the vertex `v` names (see [`vertex`]).
    pub fn vertex(
        &self,
        py: Python<'_>,
        v: &Bound<'_, PyAny>,
        parameter: &'static str,
        dense: bool,
    ) -> PyResult<u32> {
        vertex(v, self.names(py)?, dense, parameter)
    }

    fn views(&self, py: Python<'_>) -> PyResult<&Views> {
        self.views.get_or_try_init(py, || {
            let file = std::fs::File::open(&self.path).map_err(|e| error(&e))?;
            let mmap = py.import("mmap")?;
            let access = PyDict::new(py);
            access.set_item("access", mmap.getattr("ACCESS_READ")?)?;
            // mmap duplicates the descriptor: `file` may close.
            let map = mmap
                .getattr("mmap")?
                .call((file.as_raw_fd(), 0), Some(&access))?;
            let numpy = py.import("numpy")?;
            let view = |section: Section, dtype: &str, size: u64| -> PyResult<Py<PyAny>> {
                let args = PyDict::new(py);
                args.set_item("dtype", dtype)?;
                args.set_item("count", section.len / size)?;
                args.set_item("offset", section.offset)?;
                Ok(numpy
                    .getattr("frombuffer")?
                    .call((&map,), Some(&args))?
                    .unbind())
            };
            let graph = self.csr(py)?;
            let layout = graph.layout();
            Ok(Views {
                offsets: view(layout.offsets, "<u8", 8)?,
                targets: view(layout.targets, "<u4", 4)?,
                weights: match graph.is_weighted() {
                    true => Some(view(layout.weights, "<f4", 4)?),
                    false => None,
                },
                original_ids: match graph.original_ids() {
                    Some(_) => Some(view(layout.ids, "<u8", 8)?),
                    None => None,
                },
            })
        })
    }

    /// The slice `start..end` of the view `array`.
    fn slice<'py>(
        py: Python<'py>,
        array: &Py<PyAny>,
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        array.bind(py).get_item(pyo3::types::PySlice::new(
            py,
            isize::try_from(start).expect("an edge offset of a mapped file fits isize"),
            isize::try_from(end).expect("an edge offset of a mapped file fits isize"),
            1,
        ))
    }

    /// `walks_per_vertex` walks of `length` from every vertex (both
    /// checked as counts) of the shape given, and the settings the walker
    /// runs them with (the budget shared as `quiver walk corpus` shares it).
    fn corpus_args(
        (walks_per_vertex, length): (i64, i64),
        shape: (f64, f64, bool, &str),
        walker: &WalkerArgs<'_, '_>,
    ) -> PyResult<(u64, quiver_walker::WalkSpec, quiver_walker::Config, u64)> {
        let walks_per_vertex = count(walks_per_vertex, "walks_per_vertex")?;
        let (p, q, weighted, dead_end) = shape;
        let spec = walk_spec(
            RawWalks::new(0, count(length, "length")?).spec,
            p,
            q,
            weighted,
            dead_end,
        )?;
        let (config, max_bytes) = apps::split_corpus_budget(&walker.config()?);
        Ok((walks_per_vertex, spec, config, max_bytes))
    }

    /// Visit frequencies of `app`'s walks, indexed by vertex.
    fn frequencies<'py>(
        &self,
        py: Python<'py>,
        app: &VisitFrequency,
        walker: &WalkerArgs<'_, '_>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let config = walker.config()?;
        let report = run(py, |progress| {
            quiver_walker::run_with_progress(&self.path, &config, app, progress)
        })?;
        Ok(dense_frequencies(
            &report.result.counts,
            report.result.total_visits,
            self.shape.num_vertices,
        )
        .into_pyarray(py))
    }
}

/// Vertex ids given as an array (or anything numpy makes one of) as
/// `int64`: floats must be whole numbers, where numpy's cast would turn
/// 0.5 into 0 without a word.
fn whole_numbers<'py>(
    ids: &Bound<'py, PyAny>,
    parameter: &'static str,
) -> PyResult<PyArrayLike1<'py, i64, AllowTypeChange>> {
    let array = ids.py().import("numpy")?.call_method1("asarray", (ids,))?;
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    if kind == "f" {
        let floats: PyArrayLike1<'py, f64, AllowTypeChange> = array.extract()?;
        if let Some((i, x)) = floats
            .as_array()
            .iter()
            .enumerate()
            .find(|(_, x)| x.fract() != 0.0 || !x.is_finite())
        {
            return Err(invalid(
                parameter,
                format!("{parameter}[{i}] = {x} is not a whole number, so not a vertex id"),
            ));
        }
    }
    array.extract()
}

/// `counts` over `total`, one entry per vertex.
#[allow(clippy::cast_precision_loss)] // frequencies, not counts
fn dense_frequencies(counts: &HashMap<u32, u64>, total: u64, num_vertices: u32) -> Vec<f64> {
    let mut frequencies = vec![0.0; num_vertices as usize];
    for (&v, &count) in counts {
        frequencies[v as usize] = count as f64 / total.max(1) as f64;
    }
    frequencies
}

/// A report as a `dict` (through its JSON form, every field kept).
fn as_dict<'py>(py: Python<'py>, report: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(report).map_err(|e| error(&e))?;
    py.import("json")?.call_method1("loads", (text,))
}

#[pymethods]
impl Graph {
    /// Opens the `.qcsr` graph at `path`, verifying every checksum.
    ///
    /// Raises `OSError` if the file cannot be read or is not an intact
    /// `.qcsr` graph.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Graph> {
        // With the GIL released: opening verifies every checksum.
        let shape = run(py, |_| {
            quiver_csr::Graph::open(&path).map(|g| Shape::of(&g))
        })?;
        Ok(Graph::with_shape(path, shape, None))
    }

    /// Builds a graph from edge arrays `src[i] -> dst[i]` (any integer
    /// arrays or sequences), with `weights[i]` if given, and writes it to
    /// `path` (default: a temporary file removed with the graph).
    ///
    /// `num_vertices` fixes |V| (default: the largest id plus one);
    /// `undirected` adds the reverse of every edge; `dedupe` keeps one
    /// copy of each pair; `drop_self_loops` drops `v -> v`. Edges are
    /// sorted within `mem` bytes (default 1 GiB), spilling to `work_dir`.
    #[staticmethod]
    #[pyo3(signature = (src, dst, weights=None, *, num_vertices=None, undirected=false, dedupe=false, drop_self_loops=false, path=None, mem=None, work_dir=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn from_edges<'py>(
        py: Python<'py>,
        src: &Bound<'py, PyAny>,
        dst: &Bound<'py, PyAny>,
        weights: Option<PyArrayLike1<'py, f32, AllowTypeChange>>,
        num_vertices: Option<u64>,
        undirected: bool,
        dedupe: bool,
        drop_self_loops: bool,
        path: Option<PathBuf>,
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
        let (src, dst) = (whole_numbers(src, "src")?, whole_numbers(dst, "dst")?);
        let src = src.as_slice().map_err(|e| invalid("src", e.to_string()))?;
        let dst = dst.as_slice().map_err(|e| invalid("dst", e.to_string()))?;
        let weights = match &weights {
            Some(w) => Some(
                w.as_slice()
                    .map_err(|e| invalid("weights", e.to_string()))?,
            ),
            None => None,
        };
        if dst.len() != src.len() || weights.is_some_and(|w| w.len() != src.len()) {
            return Err(invalid(
                "dst",
                format!(
                    "src has {} edges, dst {}{}",
                    src.len(),
                    dst.len(),
                    weights.map_or(String::new(), |w| format!(", weights {}", w.len()))
                ),
            ));
        }
        let limit = num_vertices.unwrap_or(quiver_csr::MAX_VERTEX_ID + 1);
        let id = |ids: &[i64], i: usize, parameter: &'static str| {
            u64::try_from(ids[i])
                .ok()
                .filter(|&v| v < limit)
                .ok_or_else(|| {
                    invalid(
                        parameter,
                        format!(
                            "{parameter}[{i}] = {} is not a vertex id below {limit}",
                            ids[i]
                        ),
                    )
                })
        };
        let (path, temp) = crate::graph::output(path)?;
        let mut sorter = quiver_csr::EdgeSorter::new(sort.options(false, temp.is_some())?)
            .map_err(|e| error(&e))?;
        // The arrays are read with the GIL held (Python code could change
        // them otherwise); the sort and the write run without it.
        for i in 0..src.len() {
            let weight = weights.map(|w| w[i]);
            sorter
                .push(id(src, i, "src")?, id(dst, i, "dst")?, weight)
                .map_err(|e| error(&e))?;
            if i % (1 << 20) == (1 << 20) - 1 {
                py.check_signals()?;
            }
        }
        run(py, |progress| {
            sorter.finish(&path, num_vertices.unwrap_or(0), progress)
        })?;
        Graph::written(py, path, temp)
    }

    /// Number of vertices.
    fn __len__(&self) -> usize {
        self.shape.num_vertices as usize
    }

    fn __repr__(&self) -> String {
        format!(
            "quiver.Graph({:?}: {} vertices, {} edges{}{})",
            self.path.display().to_string(),
            self.shape.num_vertices,
            self.shape.num_edges,
            if self.shape.undirected {
                ", undirected"
            } else {
                ""
            },
            if self.shape.weighted {
                ", weighted"
            } else {
                ""
            },
        )
    }

    /// Number of vertices, |V|.
    #[getter]
    fn num_vertices(&self) -> u32 {
        self.shape.num_vertices
    }

    /// Number of edges, |E| (an undirected graph stores both directions).
    #[getter]
    fn num_edges(&self) -> u64 {
        self.shape.num_edges
    }

    /// The graph's `.qcsr` file.
    #[getter]
    fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file was made to be temporary (removed with the graph).
    #[getter]
    fn is_temporary(&self) -> bool {
        self.temp.is_some()
    }

    /// Whether edges carry weights.
    #[getter]
    fn weighted(&self) -> bool {
        self.shape.weighted
    }

    /// Whether every edge is stored in both directions.
    #[getter]
    fn undirected(&self) -> bool {
        self.shape.undirected
    }

    /// `uint64[|V| + 1]`: vertex `v`'s edges are `targets[offsets[v]:offsets[v + 1]]`.
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.views(py)?.offsets.bind(py).clone())
    }

    /// `uint32[|E|]`: every adjacency list in vertex order, each sorted.
    #[getter]
    fn targets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.views(py)?.targets.bind(py).clone())
    }

    /// `float32[|E|]` beside `targets`, or `None` for an unweighted graph.
    #[getter]
    fn weights<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self.views(py)?.weights.as_ref().map(|w| w.bind(py).clone()))
    }

    /// `uint64[|V|]`: the id each vertex had in the input (a Graphalytics
    /// dataset keeps its ids), or `None` when vertices kept their ids.
    #[getter]
    fn original_ids<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self
            .views(py)?
            .original_ids
            .as_ref()
            .map(|w| w.bind(py).clone()))
    }

    /// Out-degree of vertex `v` (by the dataset's id where the graph has
    /// an id map; `dense=True`: by index).
    #[pyo3(signature = (v, *, dense=false))]
    fn degree(&self, py: Python<'_>, v: &Bound<'_, PyAny>, dense: bool) -> PyResult<u64> {
        let v = self.vertex(py, v, "v", dense)?;
        Ok(self.csr(py)?.degree(v))
    }

    /// `uint64[|V|]`: every vertex's out-degree.
    fn degrees<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        Ok(self
            .csr(py)?
            .degrees()
            .collect::<Vec<u64>>()
            .into_pyarray(py))
    }

    /// Vertex `v`'s out-neighbours, in the order of `targets` (sorted by
    /// index): a read-only view of `targets`, or where the graph has an
    /// id map a `uint64` array of the dataset's ids (`v` named by its id
    /// too). `dense=True`: `v` an index, and the view.
    #[pyo3(signature = (v, *, dense=false))]
    fn neighbors<'py>(
        &self,
        py: Python<'py>,
        v: &Bound<'py, PyAny>,
        dense: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = self.vertex(py, v, "v", dense)?;
        if let Some(names) = self.by_id(py, dense)? {
            let ids: Vec<u64> = self
                .csr(py)?
                .neighbors(v)
                .iter()
                .map(|&t| names.original(t))
                .collect();
            return Ok(ids.into_pyarray(py).into_any());
        }
        let offsets = self.csr(py)?.offsets();
        let v = v as usize;
        Graph::slice(py, &self.views(py)?.targets, offsets[v], offsets[v + 1])
    }

    /// The weights of vertex `v`'s out-edges (beside `neighbors(v)`), or
    /// `None` for an unweighted graph. `v` as `neighbors` takes it.
    #[pyo3(signature = (v, *, dense=false))]
    fn edge_weights<'py>(
        &self,
        py: Python<'py>,
        v: &Bound<'py, PyAny>,
        dense: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let v = self.vertex(py, v, "v", dense)? as usize;
        let offsets = self.csr(py)?.offsets();
        match &self.views(py)?.weights {
            Some(weights) => Ok(Some(Graph::slice(py, weights, offsets[v], offsets[v + 1])?)),
            None => Ok(None),
        }
    }

    /// Random walks from every vertex as one `uint32` array of shape
    /// `(len(g) * walks_per_vertex, length + 1)`: row `i` is a walk from
    /// vertex `i // walks_per_vertex`, a vertex a column; a walk that
    /// stopped early (at a vertex without out-edges, with
    /// `dead_end="stop"`) is padded with `quiver.NO_VERTEX` (2**32 - 1).
    /// Where the graph has an id map, the walks are a `uint64` array of
    /// the dataset's ids instead, padded with `quiver.NO_ID` (2**64 - 1;
    /// a graph with a vertex of that id refuses and takes `dense=True`);
    /// `dense=True` returns the indexes.
    ///
    /// `p` and `q` are Node2Vec's return and in-out parameters (both 1:
    /// first-order DeepWalk walks); `weighted` draws edges by weight;
    /// `dead_end` is `"stop"`, `"restart"` (at the source) or `"jump"` (to
    /// a uniform vertex). The walks are exactly those `quiver walk corpus`
    /// writes with the same seed, budget and shape: `mem` (bytes or a
    /// string such as `"2GiB"`, default 512 MiB) is shared between walking
    /// and the rounds the walks are assembled in; smaller than the graph,
    /// the walker runs out of core. In memory mode, and in graphwalker mode
    /// when the walking half of `mem` holds the whole graph (about 2.7
    /// times the `.qcsr` file in all, for more than 100,000 walks), the
    /// graph is read once and walked in memory. `mode` is
    /// `"graphwalker"` (default),
    /// `"iteration"` or `"memory"`; `threads` defaults to one per core.
    /// The array itself is allocated once, beyond the budget.
    #[pyo3(signature = (walks_per_vertex=10, length=80, *, p=1.0, q=1.0, weighted=false, dead_end="stop", seed=None, mem=None, threads=None, mode=None, work_dir=None, dense=false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn walks<'py>(
        &self,
        py: Python<'py>,
        walks_per_vertex: i64,
        length: i64,
        p: f64,
        q: f64,
        weighted: bool,
        dead_end: &str,
        seed: Option<u64>,
        mem: Option<&Bound<'py, PyAny>>,
        threads: Option<usize>,
        mode: Option<&str>,
        work_dir: Option<PathBuf>,
        dense: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let names = self.by_id(py, dense)?;
        if names.is_some_and(|names| names.dense(NO_ID).is_some()) {
            return Err(invalid(
                "dense",
                "the graph names a vertex 2**64 - 1, which pads walks named by id: \
                 give dense=True for the walks by index",
            ));
        }
        let walker = WalkerArgs {
            seed,
            mem,
            threads,
            mode,
            work_dir,
        };
        let (walks_per_vertex, spec, config, max_bytes) = Graph::corpus_args(
            (walks_per_vertex, length),
            (p, q, weighted, dead_end),
            &walker,
        )?;
        let report = run(py, |progress| {
            apps::collect_walks(
                &self.path,
                &config,
                &spec,
                walks_per_vertex,
                max_bytes,
                progress,
            )
        })?;
        let walks = report.result;
        let rows = usize::try_from(walks.walks).expect("the walks are held in memory");
        let shape = (rows, walks.width);
        let invariant = "collect_walks returns rows * width positions";
        Ok(match names {
            Some(names) => {
                let named = walks
                    .paths
                    .iter()
                    .map(|&v| match v {
                        apps::NO_VERTEX => NO_ID,
                        v => names.original(v),
                    })
                    .collect();
                let array = Array2::from_shape_vec(shape, named).expect(invariant);
                PyArray2::from_owned_array(py, array).into_any()
            }
            None => {
                let array = Array2::from_shape_vec(shape, walks.paths).expect(invariant);
                PyArray2::from_owned_array(py, array).into_any()
            }
        })
    }

    /// The walks of `walks()`, written to the text file `path` instead (one
    /// walk a line, space-separated vertex ids (the dataset's, where the
    /// graph has an id map), in the same order; a walk
    /// that stopped early is a shorter line) in rounds that fit `mem`, for
    /// corpora larger than memory. Takes the arguments of `walks()`;
    /// returns the walker's report as a dict.
    #[pyo3(signature = (path, walks_per_vertex=10, length=80, *, p=1.0, q=1.0, weighted=false, dead_end="stop", seed=None, mem=None, threads=None, mode=None, work_dir=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn walk_corpus<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        walks_per_vertex: i64,
        length: i64,
        p: f64,
        q: f64,
        weighted: bool,
        dead_end: &str,
        seed: Option<u64>,
        mem: Option<&Bound<'py, PyAny>>,
        threads: Option<usize>,
        mode: Option<&str>,
        work_dir: Option<PathBuf>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let walker = WalkerArgs {
            seed,
            mem,
            threads,
            mode,
            work_dir,
        };
        let (walks_per_vertex, spec, config, max_bytes) = Graph::corpus_args(
            (walks_per_vertex, length),
            (p, q, weighted, dead_end),
            &walker,
        )?;
        let report = run(py, |progress| {
            apps::write_corpus(
                &self.path,
                &config,
                &spec,
                walks_per_vertex,
                &path,
                max_bytes,
                progress,
            )
        })?;
        as_dict(py, &report)
    }

    /// Personalized PageRank from `source` by visit frequency: `walks`
    /// walks of at most `length` steps, each stopping with probability
    /// `stop` per step (GraphWalker's setting by default). Returns a
    /// `float64` array indexed by vertex (dense order: entry `i` is vertex
    /// `original_ids[i]` where the graph has an id map): each vertex's
    /// share of all visits (the source's first included), summing to 1.
    /// `source` is the dataset's id where the graph has an id map, an
    /// index with `dense=True`.
    #[pyo3(signature = (source, walks=2000, length=10, stop=0.15, *, weighted=false, seed=None, mem=None, threads=None, mode=None, work_dir=None, dense=false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn ppr<'py>(
        &self,
        py: Python<'py>,
        source: &Bound<'py, PyAny>,
        walks: i64,
        length: i64,
        stop: f64,
        weighted: bool,
        seed: Option<u64>,
        mem: Option<&Bound<'py, PyAny>>,
        threads: Option<usize>,
        mode: Option<&str>,
        work_dir: Option<PathBuf>,
        dense: bool,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let mut app = VisitFrequency::ppr(
            self.vertex(py, source, "source", dense)?,
            count(walks, "walks")?,
            count(length, "length")?,
            stop,
            0,
        );
        app.spec = walk_spec(app.spec, 1.0, 1.0, weighted, "stop")?;
        let walker = WalkerArgs {
            seed,
            mem,
            threads,
            mode,
            work_dir,
        };
        self.frequencies(py, &app, &walker)
    }

    /// Random walk with restart from `source`: `walks` walks of `length`
    /// steps that jump back to the source with probability `restart` per
    /// step and at vertices without out-edges. Returns each vertex's share
    /// of all visits, as `ppr()` does.
    #[pyo3(signature = (source, walks=2000, length=20, restart=0.15, *, weighted=false, seed=None, mem=None, threads=None, mode=None, work_dir=None, dense=false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn rwr<'py>(
        &self,
        py: Python<'py>,
        source: &Bound<'py, PyAny>,
        walks: i64,
        length: i64,
        restart: f64,
        weighted: bool,
        seed: Option<u64>,
        mem: Option<&Bound<'py, PyAny>>,
        threads: Option<usize>,
        mode: Option<&str>,
        work_dir: Option<PathBuf>,
        dense: bool,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let mut app = VisitFrequency::rwr(
            self.vertex(py, source, "source", dense)?,
            count(walks, "walks")?,
            count(length, "length")?,
            restart,
            0,
        );
        app.spec = walk_spec(app.spec, 1.0, 1.0, weighted, "restart")?;
        let walker = WalkerArgs {
            seed,
            mem,
            threads,
            mode,
            work_dir,
        };
        self.frequencies(py, &app, &walker)
    }

    /// SimRank of `a` and `b` from the meeting times of `walks` walks of
    /// `length` steps from each, decaying by `decay` per step (walks follow
    /// out-edges, as GraphWalker's do). `a` and `b` as `ppr()` takes its
    /// source.
    #[pyo3(signature = (a, b, walks=2000, length=11, decay=0.8, *, seed=None, mem=None, threads=None, mode=None, work_dir=None, dense=false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn simrank<'py>(
        &self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        b: &Bound<'py, PyAny>,
        walks: i64,
        length: i64,
        decay: f64,
        seed: Option<u64>,
        mem: Option<&Bound<'py, PyAny>>,
        threads: Option<usize>,
        mode: Option<&str>,
        work_dir: Option<PathBuf>,
        dense: bool,
    ) -> PyResult<f64> {
        let app = SimRank::new(
            self.vertex(py, a, "a", dense)?,
            self.vertex(py, b, "b", dense)?,
            count(walks, "walks")?,
            count(length, "length")?,
            decay,
        );
        let config = WalkerArgs {
            seed,
            mem,
            threads,
            mode,
            work_dir,
        }
        .config()?;
        let report = run(py, |progress| {
            quiver_walker::run_with_progress(&self.path, &config, &app, progress)
        })?;
        Ok(report.result.similarity)
    }
}
