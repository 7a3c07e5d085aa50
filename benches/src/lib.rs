//! Criterion benchmarks for Quiver; see `benches/`.
