//! quiver-bsp against its sequential reference on random graphs in every
//! direction, thread count and node count, and its partitioning against the
//! paper's rules.

mod distributed;
mod engine;
mod graphalytics;
mod partition;

use quiver_bsp::Values;

/// Asserts the engine's values equal the reference's: exactly for depths
/// and labels, within 1e-9 relative for reals (summation order is the
/// schedule's).
pub fn assert_close(engine: &Values, reference: &Values, what: &str) {
    match (engine, reference) {
        (Values::Reals(a), Values::Reals(b)) => {
            assert_eq!(a.len(), b.len(), "{what}: lengths differ");
            for (v, (x, y)) in a.iter().zip(b).enumerate() {
                let close = x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
                assert!(close, "{what}: vertex {v}: engine {x}, reference {y}");
            }
        }
        _ => assert_eq!(engine, reference, "{what}"),
    }
}
