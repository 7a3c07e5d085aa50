//! Running an engine with the GIL released, stoppable with Ctrl-C.
//!
//! Python runs signal handlers only on its main thread, and only when
//! that thread executes Python code or calls `PyErr_CheckSignals`. So the
//! engine runs on a thread of its own while the calling thread, GIL
//! released, waits for it and checks for signals every
//! [`SIGNAL_CHECK`]. When a handler raises (Ctrl-C's raises
//! `KeyboardInterrupt`), the run's [`Progress`] says it is cancelled: every
//! engine looks where it reports progress (after each batch or round of
//! walks, superstep or megabyte of edges) and stops with its `Cancelled`
//! error, dropping its state and temporary files; the exception is raised.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use pyo3::prelude::*;
use quiver_run::Progress;

use crate::error::error;

/// How often the waiting thread checks for signals.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// The progress every engine run through [`run`] reports to: it ignores
/// the figures and asks the run to stop once `stop` is set.
struct Stoppable {
    stop: AtomicBool,
}

impl Progress for Stoppable {
    fn cancelled(&self) -> bool {
        // Relaxed: the flag carries no data; a check that misses it stops
        // the run at the next one.
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs `work` with the GIL released and returns its result, or raises
/// its error as a Python exception ([`error`]) or the exception a signal
/// handler raised while it ran (then the run is cancelled at its next
/// progress report, and its result, if it had finished, is dropped).
pub fn run<T, E>(
    py: Python<'_>,
    work: impl FnOnce(&dyn Progress) -> Result<T, E> + Send,
) -> PyResult<T>
where
    T: Send,
    E: std::error::Error + Send + 'static,
{
    let progress = Stoppable {
        stop: AtomicBool::new(false),
    };
    let (outcome, signal) = py.detach(|| {
        std::thread::scope(|scope| {
            let (done, finished) = mpsc::channel::<()>();
            let progress = &progress;
            let worker = scope.spawn(move || {
                let outcome = work(progress);
                // The receiver lives until this thread is joined.
                let _ = done.send(());
                outcome
            });
            let mut signal = None;
            while let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(SIGNAL_CHECK) {
                if signal.is_none() {
                    if let Err(raised) = Python::attach(|py| py.check_signals()) {
                        signal = Some(raised);
                        progress.stop.store(true, Ordering::Relaxed);
                    }
                }
            }
            // A panic in the engine is passed on (pyo3 raises it as
            // `PanicException`).
            let outcome = worker
                .join()
                .unwrap_or_else(|payload| std::panic::resume_unwind(payload));
            (outcome, signal)
        })
    });
    // An interrupted run ends with its `Cancelled` error (or its result,
    // if it finished first): either way the signal's exception is raised.
    if let Some(raised) = signal {
        return Err(raised);
    }
    outcome.map_err(|err| error(&err))
}
