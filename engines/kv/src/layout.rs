//! Where everything lives: which node is a key's home and which bucket
//! holds it ([`Placement`]), how a node's registered memory is divided
//! ([`Layout`]), and how an adjacency list is laid out as a value block.
//!
//! A node registers one region:
//!
//! ```text
//! key region    one table per shard of the job (see [`Placement`]): for
//!               each of its main buckets, in order, a group of adjacent
//!               buckets of 8 slots of 16 bytes (key word, address word),
//!               as many buckets as the keys hashed there fill (see
//!               [`Tables`])
//! reclaim rings one per node of the job: a head word (entries the owner
//!               has taken) and `ring_entries` 8-byte address words
//! value region  blocks of 8-byte words
//! ```
//!
//! A block is `[size][count][edges...]`: its size in words (the size word a
//! reader checks against its address word; 0 once invalidated), the
//! number of neighbours, and the edges: neighbour ids two to a word, or, in
//! a store of a weighted graph, one edge a word (the id, then the weight's
//! `f32` bits), so that a prefix of a block is a prefix of its edges.

use crate::addr::Addr;

/// Slots in a bucket.
pub const SLOTS: usize = 8;
#[allow(clippy::cast_possible_truncation)]
const SLOTS_U32: u32 = SLOTS as u32;
/// Bytes of a slot: the key word and the address word.
pub const SLOT_BYTES: usize = 16;
/// Bytes of a bucket.
pub const BUCKET_BYTES: usize = SLOTS * SLOT_BYTES;
/// Words of a block before its neighbour ids: size and count.
pub const HEADER_WORDS: u64 = 2;

/// Keys per main bucket on average, as a share of its slots: 3/4, so that
/// few main buckets' keys take a second bucket.
const LOAD: f64 = 0.75;

/// Shards per node of the job: the unit the `shard` baseline moves (the
/// paper's 100 per machine, §5).
pub const SHARDS_PER_NODE: u32 = 100;

/// Which shard holds a key, which node the shard is loaded on, and which
/// main bucket of the shard's table the key hashes to. The same on every
/// node: a function of the vertex count and the node count.
///
/// Keys are hashed to `SHARDS_PER_NODE` shards per node, and shard `s` is
/// loaded on node `s mod nodes`, so a key's first home is its hash modulo
/// the node count. Each shard has its own table at the same place in every
/// node's key region (see [`Tables`]): a shard moved to another node (the
/// `shard` baseline) is copied there verbatim, and every other policy
/// leaves the shards where they were loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    nodes: u32,
    table_main: u64,
}

impl Placement {
    /// Placement of `vertices` keys on `nodes` nodes.
    pub fn new(vertices: u32, nodes: u32) -> Placement {
        let nodes = nodes.max(1);
        let per_shard = f64::from(vertices) / f64::from(nodes * SHARDS_PER_NODE);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let table_main = (per_shard / (SLOTS as f64 * LOAD)).ceil() as u64 + 1;
        Placement { nodes, table_main }
    }

    /// Shards of the job.
    pub fn shards(&self) -> u32 {
        self.nodes * SHARDS_PER_NODE
    }

    /// Main buckets of the job: [`Placement::table_main`] a shard.
    pub fn main_buckets(&self) -> u64 {
        u64::from(self.shards()) * self.table_main
    }

    /// Main buckets of a shard's table.
    pub fn table_main(&self) -> u64 {
        self.table_main
    }

    /// The key's shard and the main bucket it hashes to (`H(key)` of the
    /// paper), numbered over every shard's table in shard order: shard
    /// `s`'s are `s * table_main ..` up to the next shard's.
    pub fn locate(&self, key: u32) -> (u32, u64) {
        let hash = mix(u64::from(key));
        let shards = u64::from(self.shards());
        let shard = u32::try_from(hash % shards).expect("below the shard count");
        let main = u64::from(shard) * self.table_main + (hash / shards) % self.table_main;
        (shard, main)
    }

    /// The node shard `shard` is loaded on.
    pub fn first_home(&self, shard: u32) -> u32 {
        shard % self.nodes
    }

    /// The node the key is loaded on: its home for good under every policy
    /// but `shard`.
    pub fn home_node(&self, key: u32) -> u32 {
        self.first_home(self.locate(key).0)
    }
}

/// Where each main bucket's keys lie in a node's key region: a *group* of
/// adjacent buckets, as many as the keys hashed to it fill (one for most),
/// so that one READ of its group finds any key, however many keys share
/// its main bucket. (DrTM's overflow chains cost a READ a hop, which broke
/// the paper's bound of five one-sided operations a migration for the
/// keys down a chain.) Keys are loaded once and never added, so the groups
/// are counted once, from the keys themselves, one hash a key.
///
/// Groups lie in main-bucket order, so a shard's table is its main
/// buckets' groups, one run of buckets. The same on every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tables {
    /// The first bucket of each main bucket's group, in main-bucket
    /// order, and then the bucket past the last group.
    starts: Vec<u32>,
    table_main: u64,
}

impl Tables {
    /// The groups of `vertices` keys placed by `placement`.
    ///
    /// # Panics
    /// If the buckets number 2^32 or more (keys are `u32`s, and each
    /// group but empty ones holds at least one).
    pub fn new(placement: &Placement, vertices: u32) -> Tables {
        let index = |main: u64| usize::try_from(main).expect("main buckets fit usize");
        let mut keys = vec![0u32; index(placement.main_buckets())];
        for key in 0..vertices {
            keys[index(placement.locate(key).1)] += 1;
        }
        let mut starts = Vec::with_capacity(keys.len() + 1);
        let mut next = 0u32;
        for k in keys {
            starts.push(next);
            let buckets = k.div_ceil(SLOTS_U32).max(1);
            next = next.checked_add(buckets).expect("fewer than 2^32 buckets");
        }
        starts.push(next);
        Tables {
            starts,
            table_main: placement.table_main(),
        }
    }

    /// Buckets of every shard's table, on every node.
    pub fn buckets(&self) -> u64 {
        u64::from(*self.starts.last().expect("the end is always there"))
    }

    /// The first bucket of main bucket `main`'s group and its bucket count.
    pub fn group(&self, main: u64) -> (u64, u64) {
        let i = usize::try_from(main).expect("main buckets fit usize");
        let first = u64::from(self.starts[i]);
        (first, u64::from(self.starts[i + 1]) - first)
    }

    /// The first bucket of shard `shard`'s table and its bucket count.
    pub fn table(&self, shard: u32) -> (u64, u64) {
        let first = self.group(u64::from(shard) * self.table_main).0;
        let end = self.group(u64::from(shard + 1) * self.table_main - 1);
        (first, end.0 + end.1 - first)
    }
}

/// SplitMix64's finaliser: consecutive ids land on unrelated nodes.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Byte offsets of the three parts of a node's region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Buckets of the key region: every shard's table.
    pub buckets: u64,
    /// Nodes of the job: one reclaim ring each.
    pub rings: u32,
    /// Address words per reclaim ring.
    pub ring_entries: u64,
    /// Words of the value region.
    pub value_words: u64,
}

impl Layout {
    /// Bytes of the key region.
    pub fn key_bytes(&self) -> u64 {
        self.buckets * BUCKET_BYTES as u64
    }

    /// Byte offset of bucket `index`.
    pub fn bucket(&self, index: u64) -> u64 {
        index * BUCKET_BYTES as u64
    }

    /// Byte offset of writer `writer`'s reclaim ring (its head word).
    pub fn ring(&self, writer: u32) -> u64 {
        self.key_bytes() + u64::from(writer) * (self.ring_entries + 1) * 8
    }

    /// Byte offset of entry `index` (counted from 0, wrapping) of `writer`'s ring.
    pub fn ring_entry(&self, writer: u32, index: u64) -> u64 {
        self.ring(writer) + 8 + (index % self.ring_entries) * 8
    }

    /// Byte offset of the value region.
    pub fn value_base(&self) -> u64 {
        self.ring(self.rings)
    }

    /// Byte offset of the block word `offset` words into the value region.
    pub fn value(&self, offset: u64) -> u64 {
        self.value_base() + offset * 8
    }

    /// Bytes of the whole region.
    pub fn bytes(&self) -> u64 {
        self.value_base() + self.value_words * 8
    }
}

/// An adjacency list as a value holds it: the neighbours in order and, in
/// a store of a weighted graph, each edge's weight (the one edge property
/// a `.qcsr` graph has).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Edges {
    /// The neighbours.
    pub ids: Vec<u32>,
    /// Each edge's weight, as long as `ids`; `None` in a store of an
    /// unweighted graph.
    pub weights: Option<Vec<f32>>,
}

impl Edges {
    /// Vertex `v`'s edges as `graph` has them, with its weights if it has
    /// them.
    pub fn of(graph: &quiver_csr::Graph, v: u32) -> Edges {
        Edges {
            ids: graph.neighbors(v).to_vec(),
            weights: graph.edge_weights(v).map(<[f32]>::to_vec),
        }
    }

    /// Keeps the first `len` edges.
    pub fn truncate(&mut self, len: usize) {
        self.ids.truncate(len);
        if let Some(weights) = &mut self.weights {
            weights.truncate(len);
        }
    }

    /// Appends the edge to `target`, of weight `weight` in a weighted list.
    pub fn push(&mut self, target: u32, weight: f32) {
        self.ids.push(target);
        if let Some(weights) = &mut self.weights {
            weights.push(weight);
        }
    }
}

/// Words of the block of a `count`-edge list, with weights or without
/// (saturating: `u64::MAX` edges stand for all of them).
pub fn block_words(count: u64, weighted: bool) -> u64 {
    HEADER_WORDS.saturating_add(if weighted { count } else { count.div_ceil(2) })
}

/// The block of `key`'s `edges`, size word included (weighted when it has
/// weights): `[size][key << 32 | count][edges]`. The key in the header
/// lets a reader refuse another key's block, and a leak scan name the key
/// of a block nothing points to (see [`block_header`]).
///
/// # Panics
/// If `edges` has weights, but not one for each id, or 2^32 edges or more
/// (a value of over 16 GiB: no address word names one).
pub fn encode_block(key: u32, edges: &Edges) -> Vec<u8> {
    if let Some(weights) = &edges.weights {
        assert_eq!(weights.len(), edges.ids.len(), "one weight an edge");
    }
    let count = u32::try_from(edges.ids.len()).expect("a value has fewer than 2^32 edges");
    let words = block_words(u64::from(count), edges.weights.is_some());
    let mut bytes = Vec::with_capacity(usize::try_from(words * 8).expect("a block fits memory"));
    bytes.extend_from_slice(&words.to_le_bytes());
    bytes.extend_from_slice(&(u64::from(key) << 32 | u64::from(count)).to_le_bytes());
    match &edges.weights {
        Some(weights) => {
            for (id, weight) in edges.ids.iter().zip(weights) {
                bytes.extend_from_slice(&id.to_le_bytes());
                bytes.extend_from_slice(&weight.to_le_bytes());
            }
        }
        None => {
            for id in &edges.ids {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
            if count % 2 == 1 {
                bytes.extend_from_slice(&[0; 4]);
            }
        }
    }
    bytes
}

/// The key and the edge count a block's second word holds.
pub fn block_header(word: u64) -> (u32, u64) {
    let key = u32::try_from(word >> 32).expect("32 bits");
    (key, word & u64::from(u32::MAX))
}

/// Bytes of a block prefix that holds its first `limit` edges.
pub fn prefix_bytes(addr: Addr, limit: u64, weighted: bool) -> usize {
    let words = addr.size().min(block_words(limit, weighted));
    usize::try_from(words * 8).expect("a block fits memory")
}

/// What `key`'s block read under `addr` holds: its edges (at most as many
/// as were read), or `None` if the size word is not `addr`'s size or the
/// block is another key's (it was invalidated or reused: the reader must
/// look the key up again).
pub fn decode_block(key: u32, addr: Addr, bytes: &[u8], weighted: bool) -> Option<Edges> {
    let word = |i: usize| {
        bytes
            .get(i * 8..i * 8 + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    if word(0)? != addr.size() {
        return None;
    }
    let (owner, count) = block_header(word(1)?);
    if owner != key || block_words(count, weighted) != addr.size() {
        return None;
    }
    let edge_bytes = if weighted { 8 } else { 4 };
    let available = (bytes.len() - 16) / edge_bytes;
    let take = usize::try_from(count).map_or(available, |c| c.min(available));
    let edges = bytes[16..16 + take * edge_bytes].chunks_exact(edge_bytes);
    let half = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    Some(Edges {
        ids: edges.clone().map(|e| half(&e[..4])).collect(),
        weights: weighted.then(|| edges.map(|e| f32::from_bits(half(&e[4..]))).collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn blocks_round_trip_and_prefixes_hold_the_first_edges(
            edges in proptest::collection::vec((any::<u32>(), any::<f32>()), 0..40),
            weighted in any::<bool>(),
            limit in 0u64..50,
            key in any::<u32>(),
        ) {
            let edges = Edges {
                ids: edges.iter().map(|&(id, _)| id).collect(),
                weights: weighted.then(|| edges.iter().map(|&(_, w)| w).collect()),
            };
            let block = encode_block(key, &edges);
            let count = edges.ids.len() as u64;
            let addr = Addr::Local { size: block_words(count, weighted), offset: 0 };
            prop_assert_eq!(block.len() as u64, addr.size() * 8);
            // Weights compare by bits: NaN is a weight too.
            let bits = |e: &Edges| (e.ids.clone(), e.weights.as_ref().map(|w| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>()));
            prop_assert_eq!(decode_block(key, addr, &block, weighted).map(|e| bits(&e)), Some(bits(&edges)));
            let prefix = &block[..prefix_bytes(addr, limit, weighted)];
            let got = decode_block(key, addr, prefix, weighted).unwrap();
            let want = edges.ids.len().min(usize::try_from(limit).unwrap());
            // At least the first `limit` edges, and nothing but a prefix
            // (the other half of an unweighted read's last word at most).
            prop_assert!(got.ids.len() >= want && got.ids.len() <= want + 1);
            let mut whole = edges.clone();
            whole.truncate(got.ids.len());
            prop_assert_eq!(bits(&got), bits(&whole));
        }
    }

    #[test]
    fn an_invalidated_resized_or_other_keys_block_is_refused() {
        let edges = Edges {
            ids: vec![1, 2, 3],
            weights: None,
        };
        let mut block = encode_block(7, &edges);
        let addr = Addr::Local { size: 4, offset: 0 };
        assert_eq!(decode_block(7, addr, &block, false), Some(edges));
        assert_eq!(
            block_header(u64::from_le_bytes(block[8..16].try_into().unwrap())),
            (7, 3)
        );
        // Another key's block of the same size.
        assert_eq!(decode_block(8, addr, &block, false), None);
        // Read as weighted, the count says 5 words, not 4.
        assert_eq!(decode_block(7, addr, &block, true), None);
        let wrong = Addr::Local { size: 5, offset: 0 };
        assert_eq!(decode_block(7, wrong, &block, false), None);
        block[..8].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(decode_block(7, addr, &block, false), None);
    }

    proptest! {
        /// Each main bucket's group holds its keys, the groups tile the
        /// key region in order, and a shard's table is its own groups.
        #[test]
        fn groups_hold_their_keys_and_tables_tile_the_region(
            vertices in 0u32..20_000,
            nodes in 1u32..9,
        ) {
            let placement = Placement::new(vertices, nodes);
            let tables = Tables::new(&placement, vertices);
            let mut keys = vec![0u64; usize::try_from(placement.main_buckets()).unwrap()];
            for key in 0..vertices {
                keys[usize::try_from(placement.locate(key).1).unwrap()] += 1;
            }
            let mut next = 0;
            for (main, &k) in keys.iter().enumerate() {
                let (first, buckets) = tables.group(main as u64);
                prop_assert_eq!(first, next);
                prop_assert!(buckets * SLOTS as u64 >= k && buckets >= 1);
                prop_assert!(buckets == 1 || (buckets - 1) * (SLOTS as u64) < k);
                next += buckets;
            }
            prop_assert_eq!(tables.buckets(), next);
            let mut next = 0;
            for shard in 0..placement.shards() {
                let (first, buckets) = tables.table(shard);
                let main = u64::from(shard) * placement.table_main();
                prop_assert_eq!(first, tables.group(main).0);
                prop_assert_eq!(first, next);
                next += buckets;
            }
            prop_assert_eq!(next, tables.buckets());
        }
    }

    #[test]
    fn homes_spread_keys_evenly() {
        let placement = Placement::new(80_000, 8);
        let mut per_node = [0u32; 8];
        let mut per_shard = vec![0u32; placement.shards() as usize];
        for key in 0..80_000 {
            let (shard, main) = placement.locate(key);
            let first = u64::from(shard) * placement.table_main();
            assert!((first..first + placement.table_main()).contains(&main));
            per_node[placement.home_node(key) as usize] += 1;
            per_shard[shard as usize] += 1;
        }
        for count in per_node {
            assert!((9_500..10_500).contains(&count), "{per_node:?}");
        }
        // 100 keys per shard on average.
        assert!(
            per_shard.iter().all(|&n| (50..150).contains(&n)),
            "{per_shard:?}"
        );
    }
}
