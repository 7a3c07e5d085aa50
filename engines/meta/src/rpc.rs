//! The wire: the generated gRPC messages, client and server, and what the
//! client and the servers share about them (connections, split states,
//! limits).

mod generated {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("quiver.meta");
}
pub use generated::*;

use std::time::Duration;

use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use crate::error::{Error, Result};
use crate::membership::Membership;
use crate::tree::SplitState;
use meta_client::MetaClient;

/// The longest vertex id, attribute name or relation accepted.
pub const MAX_ID_BYTES: usize = 4096;

/// The request header that carries the cluster's token.
pub const TOKEN_HEADER: &str = "x-quiver-token";

/// A connection to one server, every request carrying the cluster's token.
pub type Peer = MetaClient<InterceptedService<Channel, Token>>;

/// Adds the cluster's token to each request (none for a cluster without
/// one).
#[derive(Clone, Debug)]
pub struct Token(Option<AsciiMetadataValue>);

impl Interceptor for Token {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = &self.0 {
            req.metadata_mut().insert(TOKEN_HEADER, token.clone());
        }
        Ok(req)
    }
}

/// Lazily connected clients to every server of `cluster`, with the
/// timeouts every hop uses and the cluster's token.
///
/// # Errors
/// [`Error::Address`] for an address that is no endpoint;
/// [`Error::Cluster`] for a token that cannot be a header.
pub fn connect_lazy(cluster: &Membership) -> Result<Vec<Peer>> {
    let token =
        if cluster.token.is_empty() {
            None
        } else {
            Some(cluster.token.parse().map_err(|_| {
                Error::Cluster("the cluster file's token is not printable text".into())
            })?)
        };
    cluster
        .servers
        .iter()
        .map(|server| {
            let addr = &server.addr;
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
            Ok(MetaClient::with_interceptor(channel, Token(token.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES))
        })
        .collect()
}

/// The largest request or answer, encoded.
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Whether `req` carries `token` (every request does where the cluster
/// has none). Compares in time independent of where they differ.
pub(crate) fn authorized<T>(req: &Request<T>, token: &str) -> bool {
    if token.is_empty() {
        return true;
    }
    let given = req
        .metadata()
        .get(TOKEN_HEADER)
        .map_or(&[][..], AsciiMetadataValue::as_bytes);
    given.len() == token.len()
        && given
            .iter()
            .zip(token.as_bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
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
        let mut peer = connect_lazy(&Membership::of_addresses(&[addr]))
            .unwrap()
            .remove(0);
        let status = peer.hello(HelloRequest {}).await.unwrap_err();
        assert!(refused(&status), "{status:?}");
        assert!(!refused(&Status::unavailable("reverse edges wait")));
    }
}
