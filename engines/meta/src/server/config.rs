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
    /// When traversals that ask for prefetching get it.
    pub prefetch: Prefetch,
}

/// When a server prefetches a traversal's next step while it waits at
/// the barrier (paper §4.6), for traversals that ask for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Prefetch {
    /// When this host has a core to spare: fewer of the cluster's servers
    /// on it than cores. Otherwise the wait at the barrier is other
    /// servers' steps running, and a prefetch takes their CPU (measured
    /// with 8 servers on 2 cores: 8-step traversals 10-25% slower).
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

impl Prefetch {
    /// Its name, as [`str::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Prefetch::Auto => "auto",
            Prefetch::On => "on",
            Prefetch::Off => "off",
        }
    }

    /// Whether server `index` of `cluster` prefetches, on a host of
    /// `cores` cores (servers on one host have addresses with one host
    /// part).
    pub fn enabled(self, cluster: &Membership, index: usize, cores: usize) -> bool {
        match self {
            Prefetch::On => true,
            Prefetch::Off => false,
            Prefetch::Auto => {
                let host = |addr: &str| addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string();
                let mine = host(&cluster.servers[index].addr);
                let here = cluster
                    .servers
                    .iter()
                    .filter(|m| host(&m.addr) == mine)
                    .count();
                here < cores
            }
        }
    }
}

impl std::str::FromStr for Prefetch {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefetch, String> {
        [Prefetch::Auto, Prefetch::On, Prefetch::Off]
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown prefetch policy {s:?} (auto, on, off)"))
    }
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
            prefetch: Prefetch::Auto,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Auto prefetches where the host has a core beyond its servers: one
    /// server a machine does, 8 servers on a 2-core machine do not; a
    /// server counts only the servers on its own host.
    #[test]
    fn auto_prefetches_only_with_a_core_to_spare() {
        let addrs = |hosts: &[&str]| -> Vec<String> {
            hosts
                .iter()
                .enumerate()
                .map(|(i, h)| format!("{h}:{}", 7000 + i))
                .collect()
        };
        let spread = Membership::fresh(&addrs(&["10.0.0.1", "10.0.0.2", "10.0.0.3"]), 0);
        assert!(Prefetch::Auto.enabled(&spread, 1, 2));
        let local = Membership::fresh(&addrs(&["127.0.0.1"; 8]), 0);
        assert!(!Prefetch::Auto.enabled(&local, 0, 2));
        assert!(Prefetch::Auto.enabled(&local, 0, 16));
        assert!(!Prefetch::Auto.enabled(&local, 0, 8));
        let mixed = Membership::fresh(&addrs(&["a", "a", "a", "b"]), 0);
        assert!(!Prefetch::Auto.enabled(&mixed, 0, 2));
        assert!(Prefetch::Auto.enabled(&mixed, 3, 2));
        assert!(Prefetch::On.enabled(&local, 0, 1));
        assert!(!Prefetch::Off.enabled(&spread, 0, 64));
        for p in [Prefetch::Auto, Prefetch::On, Prefetch::Off] {
            assert_eq!(p.name().parse::<Prefetch>(), Ok(p));
        }
    }
}
