//! Progress bars for long work, drawn on stderr only when it is a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Draws one bar per phase reported through [`quiver_csr::Progress`].
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

impl quiver_csr::Progress for Bar {
    fn start(&self, phase: &'static str, total: Option<u64>) {
        let bytes = phase == "reading";
        let template = match (total.is_some(), bytes) {
            (true, true) => {
                "{msg:>22} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})"
            }
            (true, false) => {
                "{msg:>22} [{bar:30}] {human_pos}/{human_len} edges ({per_sec}, eta {eta})"
            }
            (false, true) => "{msg:>22} {spinner} {bytes} ({bytes_per_sec})",
            (false, false) => "{msg:>22} {spinner} {human_pos} edges ({per_sec})",
        };
        let style = ProgressStyle::with_template(template)
            .expect("progress templates are fixed and valid")
            .progress_chars("=> ");
        self.bar.reset();
        self.bar.set_style(style);
        self.bar.set_length(total.unwrap_or(0));
        self.bar.set_message(phase);
    }

    fn advance(&self, delta: u64) {
        self.bar.inc(delta);
    }
}
