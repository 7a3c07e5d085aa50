//! quiver-verbs integration tests: the conformance suite per fabric, what
//! only some fabrics can show (torn reads, the cost model, processes), and
//! the job runner in each of its three ways of forming a job.

#[cfg(feature = "rdma")]
mod ibverbs;
mod job;
mod loopback;
#[cfg(feature = "mpi")]
mod mpi;
mod tcp;
