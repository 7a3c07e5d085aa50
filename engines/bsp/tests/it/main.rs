//! quiver-bsp against its sequential reference on random graphs in every
//! direction, thread count and node count, and its partitioning against the
//! paper's rules.

mod distributed;
mod engine;
mod graphalytics;
mod partition;

use std::time::Duration;

use quiver_bsp::Values;
use quiver_verbs::job::{Fabric, Job, Nodes, Program};

/// Asserts the engine's values equal the reference's: exactly for depths
/// and labels, within 1e-6 relative for reals (summation order is the
/// schedule's, and the engine's PageRank holds contributions as `f32`,
/// 2^-24 relative, where the reference computes the definition in `f64`;
/// Graphalytics allows 1e-4).
pub fn assert_close(engine: &Values, reference: &Values, what: &str) {
    match (engine, reference) {
        (Values::Reals(a), Values::Reals(b)) => {
            assert_eq!(a.len(), b.len(), "{what}: lengths differ");
            for (v, (x, y)) in a.iter().zip(b).enumerate() {
                // Equal infinities (unreached) only: any finite value is
                // within 1e-6 of infinity relative to infinity.
                let close = x == y
                    || (x.is_finite()
                        && y.is_finite()
                        && (x - y).abs() <= 1e-6 * x.abs().max(y.abs()));
                assert!(close, "{what}: vertex {v}: engine {x}, reference {y}");
            }
        }
        _ => assert_eq!(engine, reference, "{what}"),
    }
}

/// A job of `nodes` tcp node processes: this test binary re-run through
/// `distributed::node_entry`.
pub fn tcp_job(nodes: u32) -> Job {
    Job {
        timeout: Duration::from_secs(30),
        program: Some(
            Program::this_executable([
                "--exact",
                "distributed::node_entry",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .unwrap(),
        ),
        ..Job::new(Fabric::Tcp, Nodes::Local(nodes))
    }
}
