//! Progress bars for long work, drawn on stderr only when it is a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use quiver_run::{Progress, Unit};

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
}
