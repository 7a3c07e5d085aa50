//! Where vertices and edges live: virtual nodes on a consistent-hashing
//! ring, and the four partitioners the paper compares.
//!
//! A vertex hashes to one of the virtual nodes; the ring maps virtual
//! nodes to servers. Its attributes always live on that server, its home
//! `S_v`. DIDO's tree spans the servers themselves (round-robin from
//! `S_v`), so every split moves edges to another machine and a vertex
//! reaches its destinations' servers in `ceil(log2 servers)` splits; a tree
//! over virtual nodes would spend splits moving edges between virtual nodes
//! of one server.
//! Its out-edges live where the partitioner puts them:
//! - **DIDO**: in partitions along its tree ([`crate::tree`]), routed by the
//!   destination's virtual node, so splits move edges toward their
//!   destinations;
//! - **GIGA+**: the same incremental splitting, routed by a hash of the
//!   destination (even halves, no locality);
//! - **edge-cut**: all on the home, never split;
//! - **vertex-cut**: each edge on the server of a hash of (source,
//!   destination), never split.

use serde::{Deserialize, Serialize};

use crate::tree::{Node, SplitState, Tree};

/// How out-edges are placed; one per cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Partitioner {
    /// Destination-dependent incremental splitting (the paper's).
    Dido,
    /// Incremental splitting into even halves by hash (IndexFS's GIGA+).
    Giga,
    /// A vertex and all its out-edges on one server.
    EdgeCut,
    /// Each edge on the server a hash of its two ends picks.
    VertexCut,
}

impl Partitioner {
    /// Every partitioner, in the order reports list them.
    pub const ALL: [Partitioner; 4] = [
        Partitioner::Dido,
        Partitioner::EdgeCut,
        Partitioner::VertexCut,
        Partitioner::Giga,
    ];

    /// The name flags and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Partitioner::Dido => "dido",
            Partitioner::Giga => "giga",
            Partitioner::EdgeCut => "edge-cut",
            Partitioner::VertexCut => "vertex-cut",
        }
    }

    /// Whether partitions split as they grow.
    pub fn splits(self) -> bool {
        matches!(self, Partitioner::Dido | Partitioner::Giga)
    }
}

impl std::str::FromStr for Partitioner {
    type Err = String;
    fn from_str(s: &str) -> Result<Partitioner, String> {
        Partitioner::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown partitioner {s:?} (dido, edge-cut, vertex-cut, giga)"))
    }
}

/// A stable 64-bit hash (FNV-1a, then a SplitMix64 finaliser so that the
/// low bits mix): the same in every process and build.
pub fn stable_hash(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64 ^ seed;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

const VERTEX_SEED: u64 = 0;
const GIGA_SEED: u64 = 1;
const EDGE_SEED: u64 = 2;
const RING_POINTS: u32 = 64;

fn reduce(h: u64, n: u32) -> u32 {
    // The high bits of a 64 x 32 product: uniform, no modulo bias worth
    // naming, and always below `n`.
    u32::try_from((u128::from(h) * u128::from(n)) >> 64).expect("below n")
}

/// The cluster's placement: servers, virtual nodes, partitioner.
#[derive(Clone, Debug)]
pub struct Placement {
    servers: usize,
    owner: Vec<u32>,
    vnodes: u32,
    tree: Tree,
    partitioner: Partitioner,
}

impl Placement {
    /// Placement over `servers` (their ids, which name their points on the
    /// ring; never their addresses, so a cluster restarted on other ports
    /// places every vertex where it did) with `vnodes` virtual nodes.
    ///
    /// The ring is consistent hashing with bounded loads: each virtual node
    /// goes to the first server clockwise from its hash that holds fewer
    /// than `ceil(vnodes / servers)`. The cluster's membership is fixed for
    /// its life (the paper leaves migration open; so does this crate).
    pub fn new(servers: &[String], vnodes: u32, partitioner: Partitioner) -> Placement {
        assert!(!servers.is_empty(), "a cluster has servers");
        assert!(vnodes >= 1, "a ring has virtual nodes");
        let n = u32::try_from(servers.len()).expect("fewer than 2^32 servers");
        let tree = Tree::new(n);
        let mut points: Vec<(u64, u32)> = servers
            .iter()
            .zip(0..n)
            .flat_map(|(addr, s)| {
                (0..RING_POINTS).map(move |i| {
                    (
                        stable_hash(format!("{addr}#{i}").as_bytes(), VERTEX_SEED),
                        s,
                    )
                })
            })
            .collect();
        points.sort_unstable();
        let capacity = vnodes.div_ceil(n);
        let mut load = vec![0u32; servers.len()];
        let owner = (0..vnodes)
            .map(|v| {
                let h = stable_hash(format!("vnode#{v}").as_bytes(), VERTEX_SEED);
                let start = points.partition_point(|&(p, _)| p < h);
                let s = (0..points.len())
                    .map(|i| points[(start + i) % points.len()].1)
                    .find(|&s| load[s as usize] < capacity)
                    .expect("capacity * servers >= vnodes");
                load[s as usize] += 1;
                s
            })
            .collect();
        Placement {
            servers: servers.len(),
            owner,
            vnodes,
            tree,
            partitioner,
        }
    }

    /// The partitioner.
    pub fn partitioner(&self) -> Partitioner {
        self.partitioner
    }

    /// The partition tree every vertex's edges split along.
    pub fn tree(&self) -> Tree {
        self.tree
    }

    /// The virtual node `vertex` hashes to.
    pub fn vnode(&self, vertex: &[u8]) -> u32 {
        reduce(stable_hash(vertex, VERTEX_SEED), self.vnodes)
    }

    /// The server holding virtual node `vnode`.
    pub fn owner(&self, vnode: u32) -> usize {
        self.owner[vnode as usize] as usize
    }

    /// `S_v`: the server holding `vertex` and its attributes.
    pub fn home(&self, vertex: &[u8]) -> usize {
        self.owner(self.vnode(vertex))
    }

    /// The offset in `src`'s tree that routes the edge toward `dst`.
    pub fn route(&self, src: &[u8], dst: &[u8]) -> u32 {
        let k = self.tree.k();
        match self.partitioner {
            Partitioner::Giga => reduce(stable_hash(dst, GIGA_SEED), k),
            _ => (self.server_u32(self.home(dst)) + k - self.server_u32(self.home(src))) % k,
        }
    }

    fn server_u32(&self, server: usize) -> u32 {
        u32::try_from(server).expect("servers are counted in u32")
    }

    /// The server of a tree node of `src`: the tree spans the servers,
    /// round-robin from `src`'s home.
    pub fn node_server(&self, src: &[u8], node: Node) -> usize {
        (self.home(src) + self.tree.offset(node) as usize) % self.servers
    }

    /// The server and partition of edge `src -> dst` under split state `x`.
    pub fn edge(&self, src: &[u8], dst: &[u8], x: SplitState) -> (usize, Node) {
        match self.partitioner {
            Partitioner::EdgeCut => (self.home(src), Node::ROOT),
            Partitioner::VertexCut => {
                let mut both = src.to_vec();
                both.extend_from_slice(dst);
                let vnode = reduce(stable_hash(&both, EDGE_SEED), self.vnodes);
                (self.owner(vnode), Node::ROOT)
            }
            Partitioner::Dido | Partitioner::Giga => {
                let leaf = x.leaf_for(self.tree, self.route(src, dst));
                (self.node_server(src, leaf), leaf)
            }
        }
    }

    /// The servers a scan of `src`'s edges visits, home first.
    pub fn scan_servers(&self, src: &[u8], x: SplitState) -> Vec<usize> {
        let home = self.home(src);
        let mut out = vec![home];
        match self.partitioner {
            Partitioner::EdgeCut => {}
            Partitioner::VertexCut => out.extend((0..self.servers).filter(|&s| s != home)),
            Partitioner::Dido | Partitioner::Giga => {
                for leaf in x.leaves(self.tree) {
                    let s = self.node_server(src, leaf);
                    if !out.contains(&s) {
                        out.push(s);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addrs(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("127.0.0.1:{}", 7000 + i)).collect()
    }

    proptest! {
        /// No server holds more than its share of virtual nodes, rounded up.
        #[test]
        fn no_server_holds_more_than_its_share(n in 1usize..12, k in 1u32..=64) {
            let p = Placement::new(&addrs(n), k, Partitioner::Dido);
            let mut load = vec![0u32; n];
            for v in 0..k {
                load[p.owner(v)] += 1;
            }
            prop_assert!(*load.iter().max().unwrap() <= k.div_ceil(u32::try_from(n).unwrap()), "{:?}", load);
        }

        /// Invariant 15: under DIDO an edge's partition contains its
        /// destination's virtual node, and once the leaf cannot split the
        /// edge is on its destination's server.
        #[test]
        fn dido_moves_edges_toward_their_destinations(src: Vec<u8>, dsts in prop::collection::vec(any::<Vec<u8>>(), 1..50), n in 1usize..9) {
            let p = Placement::new(&addrs(n), 16, Partitioner::Dido);
            let mut x = SplitState::default();
            for dst in &dsts {
                let (_, leaf) = p.edge(&src, dst, x);
                if p.tree().right_child(leaf).is_some() {
                    x = x.with_split(leaf);
                }
            }
            for dst in &dsts {
                let (server, leaf) = p.edge(&src, dst, x);
                prop_assert!(p.tree().in_subtree(p.route(&src, dst), leaf));
                prop_assert!(p.scan_servers(&src, x).contains(&server));
                if p.tree().right_child(leaf).is_none() {
                    prop_assert_eq!(server, p.home(dst));
                }
            }
        }
    }

    #[test]
    fn hashes_are_stable_across_builds() {
        // Placement is on disk: a hash that changed would lose data.
        assert_eq!(
            stable_hash(b"/home/alice/out.h5", 0),
            9_743_867_366_453_144_429
        );
        assert_eq!("vertex-cut".parse(), Ok(Partitioner::VertexCut));
        assert!("metis"
            .parse::<Partitioner>()
            .unwrap_err()
            .contains("metis"));
    }
}
