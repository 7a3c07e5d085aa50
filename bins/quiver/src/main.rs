//! `quiver`: the driver. A thin clap front-end over the engine libraries: it
//! parses arguments, draws progress, prints reports (human or `--json`) and
//! turns errors into messages and exit codes (0 success, 2 usage, 1 other).

#![forbid(unsafe_code)]

mod bsp;
mod cli;
mod commands;
mod demo;
mod gtl;
mod job;
mod kv;
mod meta;
mod progress;
mod report;
mod units;
mod verbs;
mod walk;

use std::process::ExitCode;

use clap::Parser;
use quiver_verbs::job::Entry;

/// The hidden subcommand that a local job's spawned nodes run: this program
/// re-executed, to run the task the job names.
const NODE_ENTRY: &str = "__node";

/// Every task that a local job's spawned nodes can run, by name: the hidden
/// node entry looks the task up here. A distributed engine adds its tasks.
const TASKS: &[Entry] = &[
    Entry::of::<quiver_verbs::conformance::Suite>(),
    Entry::of::<quiver_verbs::bench::Bench>(),
    Entry::of::<quiver_bsp::job::BspTask>(),
    Entry::of::<quiver_kv::KvTask>(),
    Entry::of::<quiver_kv::speed::SpeedTask>(),
    Entry::of::<quiver_kv::control::ServeTask>(),
];

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let cli = cli::Cli::parse();
    init_logging(cli.global.verbose);
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The signal's handler said what happens; the exit code says it
        // is done.
        Err(_) if progress::interrupted() => ExitCode::from(progress::interrupted_exit_code()),
        Err(err) => {
            eprintln!("error: {err:#}");
            if is_usage_error(&err) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// A report printed into a pipe whose reader has gone (`quiver … | head`)
/// ends the program quietly with success, as Unix tools do. Rust ignores
/// SIGPIPE, so `println!` meets EPIPE and panics; this hook sees that panic
/// first and exits 0 instead of printing a backtrace. Every other panic
/// goes to the default hook.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// An argument a library rejected is a usage error, like one clap rejects:
/// every library wraps it as a `quiver_run::InvalidArgument` source.
fn is_usage_error(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        quiver_run::is_invalid_argument(cause)
            || cause.downcast_ref::<report::UsageError>().is_some()
    })
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("QUIVER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Colour only on a terminal, and never under NO_COLOR.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}
