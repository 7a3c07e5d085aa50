//! quiver-verbs integration tests: the conformance suite per fabric, and
//! what only some fabrics can show (torn reads, the cost model, processes).

mod loopback;
mod tcp;
