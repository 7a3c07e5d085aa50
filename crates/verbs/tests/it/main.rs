//! quiver-verbs integration tests: the conformance suite per fabric, and
//! what only some fabrics can show (torn reads, the cost model, processes).

#[cfg(feature = "rdma")]
mod ibverbs;
mod loopback;
#[cfg(feature = "mpi")]
mod mpi;
mod tcp;
