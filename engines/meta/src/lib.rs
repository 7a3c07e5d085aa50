//! quiver-meta: GraphMeta's versioned metadata graph (TPDS 2019).
#![forbid(unsafe_code)]

pub mod clock;
pub mod key;
pub mod place;
pub mod schema;
pub mod store;
pub mod tree;

/// The generated gRPC messages, client and server.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod rpc {
    tonic::include_proto!("quiver.meta");
}
