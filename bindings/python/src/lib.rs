//! quiver-python: the Python package `quiver`, Quiver's engines as numpy
//! arrays for the people who train embeddings (PyO3, built by maturin as
//! an abi3 wheel for CPython >= 3.9).
//!
//! A thin binding: every operation calls an engine library (quiver-csr
//! for graphs, generators and conversion, quiver-walker for walks and
//! walk applications, quiver-bsp for the Graphalytics algorithms), and
//! this crate only converts arguments and results. The extension module
//! is `quiver._quiver`; `python/quiver/__init__.py` re-exports it with
//! its submodules `quiver.generate` and `quiver.bsp`, beside the type
//! stubs.
//!
//! Invariants:
//! - Engines run with the GIL released, on a thread of their own, while
//!   the calling thread waits and checks for signals (module `run`): Ctrl-C
//!   stops a run at its next progress report and raises
//!   `KeyboardInterrupt`.
//! - Every library error becomes a Python exception carrying the whole
//!   chain of messages (module `error`): `ValueError` for a bad argument,
//!   `OSError` for a file that cannot be read, written or trusted,
//!   `RuntimeError` for the rest. No input makes the interpreter crash;
//!   without numpy, `import quiver` raises `ImportError`.
//! - Arrays are handed to numpy without a copy where Rust produced them
//!   (walks, results), and graph sections are read-only views of the
//!   mapped `.qcsr` file.
//!
//! The crate holds no `unsafe` of its own; the workspace lint denies it
//! (it is not `forbid`, which would also refuse the `allow` that pyo3's
//! macros put on the code they generate). No features.

#![warn(missing_docs)]

mod analytics;
mod error;
mod generate;
mod graph;
mod options;
mod run;

use pyo3::prelude::*;

/// The extension module: `Graph`, `convert`, `NO_VERTEX`, `NO_ID`, and the
/// submodules `generate` and `bsp`.
#[pymodule]
#[pyo3(name = "_quiver")]
fn quiver_module(py: Python<'_>, module: &Bound<'_, PyModule>) -> PyResult<()> {
    // Every array goes through numpy's C API, which panics when numpy is
    // missing: refuse the import instead, saying what to install.
    py.import("numpy").map_err(|e| {
        let err = pyo3::exceptions::PyImportError::new_err(format!(
            "quiver needs numpy (pip install numpy): {e}"
        ));
        err.set_cause(py, Some(e));
        err
    })?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add("NO_VERTEX", quiver_walker::apps::NO_VERTEX)?;
    module.add("NO_ID", graph::NO_ID)?;
    module.add_class::<graph::Graph>()?;
    module.add_function(wrap_pyfunction!(generate::convert, module)?)?;
    module.add_submodule(&generate::module(py)?)?;
    module.add_submodule(&analytics::module(py)?)?;
    Ok(())
}
