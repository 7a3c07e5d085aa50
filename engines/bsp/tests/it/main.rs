//! quiver-bsp against its sequential reference on random graphs in every
//! direction and thread count, and its partitioning against the paper's
//! rules.

mod engine;
mod partition;
