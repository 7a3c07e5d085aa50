//! A server's settings and their checks.

use std::path::PathBuf;
use std::time::Duration;

use quiver_run::InvalidArgument;

use crate::error::Result;
use crate::membership::Membership;
use crate::place::Partitioner;
use crate::schema::Schema;

/// A server's settings; [`ServerConfig::default`] holds every default.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The cluster: its id, and every server's id and address, in
    /// cluster-file order.
    pub cluster: Membership,
    /// This server's line in `cluster`.
    pub index: usize,
    /// Where its RocksDB lives.
    pub data: PathBuf,
    /// How out-edges are placed (the whole cluster agrees).
    pub partitioner: Partitioner,
    /// Virtual nodes on the ring, `1..=MAX_VNODES`.
    pub vnodes: u32,
    /// Edges a partition holds before it splits (paper default 128).
    pub threshold: u32,
    /// Vertex types and relations.
    pub schema: Schema,
    /// Fsync the write-ahead log on every write (survives power loss, not
    /// only a killed process).
    pub sync: bool,
    /// The largest attribute value or property accepted, in bytes.
    pub max_value_bytes: usize,
    /// A traversal's state here is dropped this long after its last
    /// request, so a client that dies mid-traversal leaves nothing behind.
    pub travel_idle: Duration,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            cluster: Membership::default(),
            index: 0,
            data: PathBuf::new(),
            partitioner: Partitioner::Dido,
            vnodes: 64,
            threshold: 128,
            schema: Schema::default(),
            sync: false,
            max_value_bytes: 64 << 10,
            travel_idle: Duration::from_secs(600),
        }
    }
}

/// The most virtual nodes a ring has.
pub const MAX_VNODES: u32 = 4096;

impl ServerConfig {
    /// Checks the settings, naming the first that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        if self.cluster.servers.is_empty() {
            return Err(InvalidArgument::new("cluster", "names no server"));
        }
        if self.index >= self.cluster.servers.len() {
            return Err(InvalidArgument::new(
                "index",
                format!(
                    "server {} of a {}-server cluster",
                    self.index,
                    self.cluster.servers.len()
                ),
            ));
        }
        if self.travel_idle < Duration::from_secs(1) {
            return Err(InvalidArgument::new(
                "travel_idle",
                "is at least 1 s (a shorter one drops traversals in progress)",
            ));
        }
        if self.cluster.servers.len() > crate::tree::MAX_SERVERS as usize {
            return Err(InvalidArgument::new(
                "cluster",
                format!(
                    "{} servers; a cluster has at most {}",
                    self.cluster.servers.len(),
                    crate::tree::MAX_SERVERS
                ),
            ));
        }
        if !(1..=MAX_VNODES).contains(&self.vnodes) {
            return Err(InvalidArgument::new(
                "vnodes",
                format!("{} is outside 1..={MAX_VNODES}", self.vnodes),
            ));
        }
        if self.threshold == 0 {
            return Err(InvalidArgument::new(
                "threshold",
                "a partition holds at least one edge",
            ));
        }
        Ok(())
    }
}
