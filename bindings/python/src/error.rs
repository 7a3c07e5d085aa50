//! Library errors as Python exceptions, with the library's message.

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::PyErr;

/// `err` as the exception a Python user expects: `ValueError` when any
/// cause is a `quiver_run::InvalidArgument` (the caller's mistake),
/// `OSError` when a cause is an I/O error (with its errno, so that a
/// missing file is a `FileNotFoundError`) or a quiver-csr error (a file
/// that is corrupt, foreign or truncated), `RuntimeError` otherwise. The
/// message is the whole chain, as the driver prints it.
pub fn error(err: &(dyn std::error::Error + 'static)) -> PyErr {
    let message = quiver_run::chain(err);
    if quiver_run::is_invalid_argument(err) {
        return PyValueError::new_err(message);
    }
    let mut file_error = false;
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.raw_os_error() {
                Some(errno) => PyOSError::new_err((errno, message)),
                None => PyOSError::new_err(message),
            };
        }
        file_error |= e.is::<quiver_csr::Error>();
        cause = e.source();
    }
    if file_error {
        PyOSError::new_err(message)
    } else {
        PyRuntimeError::new_err(message)
    }
}

/// A `ValueError` naming the parameter, worded as the libraries word
/// theirs (`parameter: reason`).
pub fn invalid(parameter: &'static str, reason: impl Into<String>) -> PyErr {
    PyValueError::new_err(quiver_run::InvalidArgument::new(parameter, reason).to_string())
}
