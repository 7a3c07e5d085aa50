//! Progress bars for long work, drawn on stderr only when it is a terminal,
//! and the run's interruption: once [`catch_interrupts`] is called, Ctrl-C
//! (or SIGTERM) makes every bar say its run is cancelled, so the engine
//! stops at its next report and what the command made (spills, sort runs,
//! a partial output) is dropped and removed on the way out; the command
//! exits 130 (143 for SIGTERM). A second one ends the process at once.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use std::fmt::Write;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use quiver_io::size::format_byte_amount;
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
                // The one line an interrupt prints: what happens now. It
                // is written before the run can see the interrupt, so an
                // exit that follows at once cannot cut it off.
                eprintln!(
                    "\ninterrupted: stopping, and removing what the run made (again to quit at once)"
                );
                SIGNAL.store(signal, Ordering::Relaxed);
                INTERRUPTED.store(true, Ordering::Relaxed);
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
/// Nothing shows until a phase starts; a phase of unknown length is a
/// spinner and its count; rates are human (`141K edges/s`), an estimate of
/// the time left shows only once a tenth of the phase and two seconds
/// have passed, and the line never runs past the terminal's width.
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
        // Blank until the first phase says what it counts.
        bar.set_style(ProgressStyle::with_template("").expect("an empty template is valid"));
        bar.enable_steady_tick(Duration::from_millis(200));
        Bar { bar }
    }
}

/// `x` with a K, M or G suffix and three significant digits at most
/// (`141K`, `2.5M`).
fn human(x: f64) -> String {
    let (value, suffix) = match x {
        x if x >= 1e9 => (x / 1e9, "G"),
        x if x >= 1e6 => (x / 1e6, "M"),
        x if x >= 1e3 => (x / 1e3, "K"),
        x => return format!("{x:.0}"),
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{value:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text}{suffix}")
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for Bar {
    fn start(&self, phase: &'static str, unit: Unit, total: Option<u64>) {
        let (noun, bytes) = match unit {
            Unit::Bytes => ("", true),
            Unit::Edges => (" edges", false),
            Unit::Walks => (" walks", false),
            Unit::Vertices => (" vertices", false),
            Unit::Rounds => (" rounds", false),
            _ => ("", false),
        };
        let amount = move |x: f64| {
            if bytes {
                format_byte_amount(x)
            } else {
                human(x)
            }
        };
        let template = if total.is_some() {
            "{prefix:>14} [{bar:20}] {count} ({rate}{eta}) {wide_msg}"
        } else {
            "{prefix:>14} {spinner} {count} ({rate}) {wide_msg}"
        };
        #[allow(clippy::cast_precision_loss)] // Counts shown, not computed with.
        let style = ProgressStyle::with_template(template)
            .expect("progress templates are fixed and valid")
            .progress_chars("=> ")
            .with_key("count", move |state: &ProgressState, w: &mut dyn Write| {
                let _ = match state.len() {
                    Some(len) => write!(
                        w,
                        "{}/{}{noun}",
                        amount(state.pos() as f64),
                        amount(len as f64)
                    ),
                    None => write!(w, "{}{noun}", amount(state.pos() as f64)),
                };
            })
            .with_key("rate", move |state: &ProgressState, w: &mut dyn Write| {
                let _ = write!(w, "{}/s", amount(state.per_sec()));
            })
            .with_key("eta", |state: &ProgressState, w: &mut dyn Write| {
                // Early rates are noise: no estimate before a tenth of the
                // work and two seconds.
                if state.fraction() >= 0.1 && state.elapsed() >= Duration::from_secs(2) {
                    // Rounded up: work is left, so never "0s left".
                    let eta = state.eta();
                    let secs = eta.as_secs() + u64::from(eta.subsec_nanos() > 0);
                    let _ = if secs >= 60 {
                        write!(w, ", {}m{:02}s left", secs / 60, secs % 60)
                    } else {
                        write!(w, ", {secs}s left")
                    };
                }
            });
        self.bar.reset();
        self.bar.set_style(style);
        match total {
            Some(total) => self.bar.set_length(total),
            None => self.bar.unset_length(),
        }
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

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn amounts_read_as_people_write_them() {
        assert_eq!(human(0.0), "0");
        assert_eq!(human(999.4), "999");
        assert_eq!(human(141_037.524_8), "141K");
        assert_eq!(human(2_000_000.0), "2M");
        assert_eq!(human(2_540_000.0), "2.54M");
        assert_eq!(human(12_340.0), "12.3K");
        assert_eq!(human(3.5e9), "3.5G");
    }
}
