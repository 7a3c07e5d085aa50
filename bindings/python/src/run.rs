//! Running an engine with the GIL released, stoppable with Ctrl-C.
//!
//! Python runs signal handlers only on its main thread, and only when
//! that thread executes Python code or calls `PyErr_CheckSignals`. So the
//! engine runs on a thread of its own while the calling thread, GIL
//! released, waits for it and checks for signals every
//! [`SIGNAL_CHECK`]. When a handler raises (Ctrl-C's raises
//! `KeyboardInterrupt`), the engine is stopped at its next call to
//! [`Progress`], which every engine makes after each batch of walks,
//! superstep or megabyte of edges: that call unwinds out of the engine
//! (dropping its state, removing its temporary files) and the exception
//! is raised.
//!
//! The engines' contract has no way to ask a run to stop, so the stop is
//! an unwind with a private payload ([`Interrupted`]), started with
//! `resume_unwind` (which runs no panic hook and prints nothing) and
//! caught here; any other panic is passed on to pyo3, which raises it as
//! `PanicException`.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use pyo3::prelude::*;
use quiver_run::{Progress, Unit};

use crate::error::error;

/// How often the waiting thread checks for signals.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// The payload of the unwind that stops an interrupted run.
struct Interrupted;

/// The progress every engine run through [`run`] reports to: it ignores
/// the figures and stops the run once `stop` is set.
struct Stoppable {
    stop: AtomicBool,
}

impl Stoppable {
    fn check(&self) {
        // Relaxed: the flag carries no data; a report that misses it
        // stops the run at the next one.
        if self.stop.load(Ordering::Relaxed) {
            std::panic::resume_unwind(Box::new(Interrupted));
        }
    }
}

impl Progress for Stoppable {
    fn start(&self, _phase: &'static str, _unit: Unit, _total: Option<u64>) {
        self.check();
    }

    fn advance(&self, _delta: u64) {
        self.check();
    }

    fn note(&self, _note: &str) {
        self.check();
    }
}

/// Runs `work` with the GIL released and returns its result, or raises
/// its error as a Python exception ([`error`]) or the exception a signal
/// handler raised while it ran (then the run is stopped at its next
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
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| work(progress)));
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
            // The worker catches every unwind of `work`, so joining it
            // fails only if that failed; pass such a payload on as well.
            let outcome = worker.join().unwrap_or_else(Err);
            (outcome, signal)
        })
    });
    let outcome = match outcome {
        Err(payload) if !payload.is::<Interrupted>() => std::panic::resume_unwind(payload),
        outcome => outcome,
    };
    if let Some(raised) = signal {
        return Err(raised);
    }
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(error(&err)),
        Err(_) => unreachable!("a run is interrupted only after a signal was raised"),
    }
}
