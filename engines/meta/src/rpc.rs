//! The wire: the generated gRPC messages, client and server, and what the
//! client and the servers share about them (connections, split states,
//! limits).

mod generated {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("quiver.meta");
}
pub use generated::*;

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};
use tonic::Status;

use crate::error::{Error, Result};
use crate::tree::SplitState;
use meta_client::MetaClient;

/// The longest vertex id, attribute name or relation accepted.
pub const MAX_ID_BYTES: usize = 4096;

/// Lazily connected clients to `cluster`, with the timeouts every hop uses.
pub fn connect_lazy(cluster: &[String]) -> Result<Vec<MetaClient<Channel>>> {
    cluster
        .iter()
        .map(|addr| {
            let endpoint = Endpoint::from_shared(format!("http://{addr}")).map_err(|source| {
                Error::Address {
                    server: addr.clone(),
                    source,
                }
            })?;
            let channel = endpoint
                .connect_timeout(Duration::from_secs(2))
                .timeout(Duration::from_secs(120))
                .tcp_nodelay(true)
                .connect_lazy();
            Ok(MetaClient::new(channel)
                .max_decoding_message_size(256 << 20)
                .max_encoding_message_size(256 << 20))
        })
        .collect()
}

/// Whether `status` is a refused connection: the request was never sent.
pub(crate) fn refused(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        let io = e.downcast_ref::<std::io::Error>();
        if io.is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        source = e.source();
    }
    false
}

/// A split state for the wire.
pub(crate) fn split_bytes(x: SplitState) -> Vec<u8> {
    x.0.to_le_bytes().to_vec()
}

/// A split state from the wire; an empty field is the unsplit state.
pub fn split_from(bytes: &[u8]) -> Option<SplitState> {
    if bytes.is_empty() {
        return Some(SplitState::default());
    }
    Some(SplitState(u128::from_le_bytes(bytes.try_into().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request to a port nobody listens on is seen as refused (so it is
    /// tried again); a server's own Unavailable is not.
    #[tokio::test]
    async fn a_refused_connection_is_told_from_a_server_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let mut peer = connect_lazy(&[addr]).unwrap().remove(0);
        let status = peer.hello(HelloRequest {}).await.unwrap_err();
        assert!(refused(&status), "{status:?}");
        assert!(!refused(&Status::unavailable("reverse edges wait")));
    }
}
