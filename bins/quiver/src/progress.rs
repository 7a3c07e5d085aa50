//! Progress bars for long work, drawn on stderr only when it is a terminal,
//! and the run's interruption: once [`catch_interrupts`] is called, Ctrl-C
//! (or SIGTERM) makes every bar say its run is cancelled, so the engine
//! stops at its next report and what the command made (spills, sort runs,
//! a partial output) is dropped and removed on the way out; the command
//! exits 130 (143 for SIGTERM). A second one ends the process at once.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use quiver_run::{Progress, Unit};

/// Set by the first Ctrl-C or SIGTERM once [`catch_interrupts`] was called.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The signal that interrupted the run (2 for SIGINT, 15 for SIGTERM).
static SIGNAL: AtomicU8 = AtomicU8::new(0);

/// The run was interrupted (Ctrl-C or SIGTERM).
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Whether Ctrl-C or SIGTERM arrived since [`catch_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// The exit code of a run the signal stopped: 128 plus its number (130
/// for Ctrl-C, 143 for SIGTERM), as shells report a process it killed.
pub fn interrupted_exit_code() -> u8 {
    128 + SIGNAL.load(Ordering::Relaxed)
}

/// `Err(Interrupted)` once Ctrl-C or SIGTERM arrived: for the points
/// between a command's steps.
pub fn check_interrupted() -> Result<(), Interrupted> {
    if interrupted() {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Turns Ctrl-C and SIGTERM into a request to stop (see the module docs),
/// from now on. A thread of its own waits for them.
pub fn catch_interrupts() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let (ready, listening) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("interrupts".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build();
            let runtime = match runtime {
                Ok(runtime) => runtime,
                Err(err) => return ready.send(Err(err)).unwrap_or(()),
            };
            runtime.block_on(async move {
                let handlers = signal(SignalKind::interrupt())
                    .and_then(|int| Ok((int, signal(SignalKind::terminate())?)));
                let (mut int, mut term) = match handlers {
                    Ok(handlers) => handlers,
                    Err(err) => return ready.send(Err(err)).unwrap_or(()),
                };
                // The caller goes on once the handlers are in place.
                let _ = ready.send(Ok(()));
                let signal = tokio::select! { _ = int.recv() => 2, _ = term.recv() => 15 };
                SIGNAL.store(signal, Ordering::Relaxed);
                INTERRUPTED.store(true, Ordering::Relaxed);
                eprintln!("\ninterrupted: stopping and cleaning up (again to quit at once)");
                let signal = tokio::select! { _ = int.recv() => 2, _ = term.recv() => 15 };
                std::process::exit(128 + signal);
            });
        })
        .map_err(anyhow::Error::from)
        .and_then(|_| {
            listening
                .recv()
                .map_err(anyhow::Error::from)?
                .map_err(anyhow::Error::from)
        })
        .map_err(|err| err.context("listening for Ctrl-C"))
}

/// Draws one bar per phase reported through [`Progress`], for every library.
#[derive(Debug)]
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar on stderr (hidden when stderr is not a terminal, or with `--json`).
    pub fn new(hidden: bool) -> Bar {
        let target = if hidden {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr_with_hz(5)
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.enable_steady_tick(Duration::from_millis(200));
        Bar { bar }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for Bar {
    fn start(&self, phase: &'static str, unit: Unit, total: Option<u64>) {
        let count = match unit {
            Unit::Bytes => "{bytes}/{total_bytes} ({bytes_per_sec}",
            Unit::Edges => "{human_pos}/{human_len} edges ({per_sec}",
            Unit::Walks => "{human_pos}/{human_len} walks ({per_sec}",
            Unit::Vertices => "{human_pos}/{human_len} vertices ({per_sec}",
            Unit::Rounds => "{human_pos}/{human_len} rounds ({per_sec}",
            _ => "{human_pos}/{human_len} ({per_sec}",
        };
        let template = if total.is_some() {
            format!("{{prefix:>22}} [{{bar:30}}] {count}, eta {{eta}}) {{msg}}")
        } else {
            // No total: a spinner and the count so far.
            let count = count
                .replace("/{total_bytes}", "")
                .replace("/{human_len}", "");
            format!("{{prefix:>22}} {{spinner}} {count}) {{msg}}")
        };
        let style = ProgressStyle::with_template(&template)
            .expect("progress templates are fixed and valid")
            .progress_chars("=> ");
        self.bar.reset();
        self.bar.set_style(style);
        self.bar.set_length(total.unwrap_or(0));
        self.bar.set_prefix(phase);
        self.bar.set_message("");
    }

    fn advance(&self, delta: u64) {
        self.bar.inc(delta);
    }

    fn note(&self, note: &str) {
        self.bar.set_message(note.to_owned());
    }

    fn cancelled(&self) -> bool {
        interrupted()
    }
}
