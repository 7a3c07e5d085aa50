//! The crate's error type.

use std::path::PathBuf;

use quiver_run::InvalidArgument;

use crate::store::StoreError;

/// Why a meta operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request makes no sense; nothing was stored.
    #[error("invalid request")]
    Invalid(#[from] InvalidArgument),
    /// The server's RocksDB failed.
    #[error("store in {}", path.display())]
    Store {
        /// The store's directory.
        path: PathBuf,
        /// What RocksDB said.
        #[source]
        source: StoreError,
    },
    /// A server answered with an error, or could not be reached.
    #[error("server {server} answered {code:?}: {message}")]
    Rpc {
        /// The server's address.
        server: String,
        /// The gRPC status code (`Unavailable` when it is down).
        code: tonic::Code,
        /// Its message.
        message: String,
    },
    /// A server's address is not a valid endpoint.
    #[error("server address {server:?}")]
    Address {
        /// The address as given.
        server: String,
        /// Why it is not one.
        #[source]
        source: tonic::transport::Error,
    },
    /// Listening or serving failed.
    #[error("serving on {addr}")]
    Serve {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The benchmark's graph could not be generated or opened.
    #[error("the benchmark's graph")]
    Graph(#[source] quiver_csr::Error),
    /// The caller asked the work to stop (its `Progress` said cancelled).
    #[error("stopped")]
    Cancelled(#[from] quiver_run::Cancelled),
    /// The servers of a cluster disagree, or a cluster file is wrong.
    #[error("cluster: {0}")]
    Cluster(String),
    /// A load stopped on an error after the servers had acknowledged
    /// `acknowledged` of its writes. Those are stored; so may be some of
    /// the writes in flight when it stopped (the failed batch in part, and
    /// with several clients the others' batches).
    #[error("the load stopped after {acknowledged} acknowledged writes")]
    Interrupted {
        /// Writes acknowledged before the error.
        acknowledged: u64,
        /// The error.
        #[source]
        source: Box<Error>,
    },
}

/// What this crate's operations return.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error a server's status becomes at the client.
    pub fn rpc(server: &str, status: &tonic::Status) -> Error {
        Error::Rpc {
            server: server.to_string(),
            code: status.code(),
            message: status.message().to_string(),
        }
    }

    /// Whether the failure was the server being unreachable (worth a retry
    /// once it is back), not the request.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Rpc { code, .. } => {
                matches!(
                    code,
                    tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
                )
            }
            Error::Interrupted { source, .. } => source.is_unavailable(),
            _ => false,
        }
    }
}
