//! Python arguments as the libraries' settings. An argument left `None`
//! takes the library's default (its `Config::default()` or
//! `SortOptions::default()`), never a copy of it.

use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};
use quiver_csr::VertexIds;
use quiver_walker::{Config, DeadEnd, IoMode, Kind, Mode, Node2Vec, WalkSpec};

use crate::error::invalid;

/// A count given from Python (walks, steps): an `int` of 0 or more that
/// fits `T`, or a `ValueError` naming `parameter` (pyo3's own conversion
/// to an unsigned type raises `OverflowError` for -1).
pub fn count<T: TryFrom<i64>>(n: i64, parameter: &'static str) -> PyResult<T> {
    T::try_from(n).map_err(|_| {
        let bits = 8 * std::mem::size_of::<T>();
        invalid(
            parameter,
            format!("{n} is not a count: give a whole number from 0 to 2**{bits} - 1"),
        )
    })
}

/// A size in bytes: an `int`, or a string such as `"512MiB"` as the
/// driver's flags take.
pub fn bytes(value: Option<&Bound<'_, PyAny>>, parameter: &'static str) -> PyResult<Option<u64>> {
    let Some(value) = value else {
        return Ok(None);
    };
    if let Ok(text) = value.cast::<PyString>() {
        let text = text.to_cow()?;
        return quiver_io::size::parse_bytes(&text)
            .map(Some)
            .map_err(|reason| invalid(parameter, reason));
    }
    match value.extract::<i128>() {
        Ok(n) => u64::try_from(n)
            .map(Some)
            .map_err(|_| invalid(parameter, format!("{n} is not a number of bytes"))),
        Err(_) => Err(invalid(
            parameter,
            "a size is an int of bytes or a string such as \"512MiB\"",
        )),
    }
}

/// The graph's vertex named `v` (any Python `int`: a dataset's ids span
/// all of `u64`), or a `ValueError` naming `parameter` (a `TypeError` for
/// what is not an `int`): by the dataset's own ids where the graph has an
/// id map (`names`) and `dense` is not asked for, by dense index `0..|V|`
/// otherwise.
pub fn vertex(
    v: &Bound<'_, PyAny>,
    names: &VertexIds,
    dense: bool,
    parameter: &'static str,
) -> PyResult<u32> {
    if !v.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{parameter}: a vertex is an int, not {}",
            v.get_type().name()?
        )));
    }
    let n = names.num_vertices();
    let by_id = names.has_map() && !dense;
    let found = match v.extract::<u64>() {
        Ok(id) if by_id => names.dense(id),
        Ok(index) => u32::try_from(index).ok().filter(|&v| v < n),
        // Negative, or past u64.
        Err(_) => None,
    };
    found.ok_or_else(|| {
        let how = if by_id {
            format!("it names its {n} vertices by the dataset's own ids; dense=True takes an index")
        } else {
            format!("|V| = {n}")
        };
        invalid(parameter, format!("vertex {v} is not in the graph ({how})"))
    })
}

/// The walker's settings every walk method takes.
pub struct WalkerArgs<'a, 'py> {
    /// Seed of every random choice.
    pub seed: Option<u64>,
    /// Memory budget.
    pub mem: Option<&'a Bound<'py, PyAny>>,
    /// Worker threads.
    pub threads: Option<usize>,
    /// `"graphwalker"`, `"iteration"` or `"memory"`.
    pub mode: Option<&'a str>,
    /// Directory for spilled walks.
    pub work_dir: Option<PathBuf>,
}

impl WalkerArgs<'_, '_> {
    /// The walker's `Config`: its defaults, with what was given, reading
    /// through the page cache (a graph a script just converted or
    /// generated is there: reading it whole took half the time of direct
    /// reads, 33-36 ms against 50-66 ms on a 32 MB graph, when blocks were
    /// still copied out of the page cache rather than mapped).
    pub fn config(&self) -> PyResult<Config> {
        let defaults = Config::default();
        Ok(Config {
            mode: match self.mode {
                None => defaults.mode,
                Some("graphwalker") => Mode::GraphWalker,
                Some("iteration") => Mode::Iteration,
                Some("memory") => Mode::Memory,
                Some(other) => {
                    return Err(invalid(
                        "mode",
                        format!(
                            "unknown mode {other:?} (expected graphwalker, iteration or memory)"
                        ),
                    ))
                }
            },
            seed: self.seed.unwrap_or(defaults.seed),
            threads: self.threads.unwrap_or(defaults.threads),
            mem_budget: bytes(self.mem, "mem")?.unwrap_or(defaults.mem_budget),
            work_dir: self.work_dir.clone().unwrap_or(defaults.work_dir.clone()),
            io: IoMode::Buffered,
            ..defaults
        })
    }
}

/// How walks move, as `quiver walk` shapes them: a Node2Vec walk unless
/// `p` and `q` are both 1 (then the first-order walk that Node2Vec is).
pub fn walk_spec(
    mut spec: WalkSpec,
    p: f64,
    q: f64,
    weighted: bool,
    dead_end: &str,
) -> PyResult<WalkSpec> {
    if weighted {
        spec.kind = Kind::Weighted;
    }
    #[allow(clippy::float_cmp)] // exactly 1 is the first-order walk
    if p != 1.0 || q != 1.0 {
        spec.node2vec = Some(Node2Vec { p, q });
    }
    spec.dead_end = match dead_end {
        "stop" => DeadEnd::Stop,
        "restart" => DeadEnd::Restart,
        "jump" => DeadEnd::Jump,
        other => {
            return Err(invalid(
                "dead_end",
                format!("unknown dead-end policy {other:?} (expected stop, restart or jump)"),
            ))
        }
    };
    Ok(spec)
}

/// How edges become a graph (quiver-csr's `SortOptions`).
pub struct SortArgs<'a, 'py> {
    /// Add the reverse of every edge.
    pub undirected: bool,
    /// Keep one copy of each `(source, target)` pair.
    pub dedupe: bool,
    /// Drop edges `v -> v`.
    pub drop_self_loops: bool,
    /// Memory budget of the external sort.
    pub mem: Option<&'a Bound<'py, PyAny>>,
    /// Directory for spilled runs.
    pub work_dir: Option<PathBuf>,
}

impl SortArgs<'_, '_> {
    /// quiver-csr's `SortOptions`: its defaults, with what was given. A
    /// graph written to a temporary file (`scratch`) is not fsynced: it
    /// goes away with its `Graph`, and the fsync took as long as the sort
    /// (123 ms for a 32 MB graph converted from text).
    pub fn options(&self, relabel: bool, scratch: bool) -> PyResult<quiver_csr::SortOptions> {
        let defaults = quiver_csr::SortOptions::default();
        Ok(quiver_csr::SortOptions {
            mem_budget: bytes(self.mem, "mem")?.unwrap_or(defaults.mem_budget),
            work_dir: self.work_dir.clone().or(defaults.work_dir.clone()),
            undirected: self.undirected,
            dedupe: self.dedupe,
            drop_self_loops: self.drop_self_loops,
            relabel,
            sync: !scratch,
            ..defaults
        })
    }
}
