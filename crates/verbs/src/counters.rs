//! Per-node counters of initiated verbs, by peer and by verb.

use std::sync::atomic::{AtomicU64, Ordering};

use std::collections::BTreeMap;

use serde::ser::{SerializeMap, Serializer};

use crate::wr::Verb;
use crate::NodeRank;

/// Operations, bytes and modelled time of one verb towards one peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerbCount {
    /// Work requests posted (receives: messages received).
    pub ops: u64,
    /// Payload bytes (atomics count 8).
    pub bytes: u64,
    /// Sum over operations of modelled post-to-completion time, in
    /// nanoseconds (0 unless the fabric has a cost model).
    pub modelled_ns: u64,
}

impl VerbCount {
    fn minus(self, earlier: VerbCount) -> VerbCount {
        VerbCount {
            ops: self.ops - earlier.ops,
            bytes: self.bytes - earlier.bytes,
            modelled_ns: self.modelled_ns - earlier.modelled_ns,
        }
    }

    fn plus(self, other: VerbCount) -> VerbCount {
        VerbCount {
            ops: self.ops + other.ops,
            bytes: self.bytes + other.bytes,
            modelled_ns: self.modelled_ns + other.modelled_ns,
        }
    }
}

/// A snapshot of a node's counters. Operations are counted when posted
/// (whether or not they then succeed), receives when a message is delivered
/// to one; `peer` is the target, or for receives the sender. Operations a
/// node addresses to itself are counted under its own rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    per_peer: Vec<[VerbCount; 6]>,
}

impl Counters {
    /// The count of `verb` towards `peer`.
    ///
    /// # Panics
    /// If `peer` is not a node of the job.
    pub fn get(&self, peer: NodeRank, verb: Verb) -> VerbCount {
        self.per_peer[peer.index()][verb.index()]
    }

    /// The count of `verb` over all peers.
    pub fn total(&self, verb: Verb) -> VerbCount {
        self.per_peer
            .iter()
            .fold(VerbCount::default(), |sum, peer| {
                sum.plus(peer[verb.index()])
            })
    }

    /// Operations of all verbs to all peers.
    pub fn total_ops(&self) -> u64 {
        Verb::ALL.iter().map(|&verb| self.total(verb).ops).sum()
    }

    /// What was counted after `earlier` (a snapshot of the same node).
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            per_peer: self
                .per_peer
                .iter()
                .zip(&earlier.per_peer)
                .map(|(now, then)| std::array::from_fn(|verb| now[verb].minus(then[verb])))
                .collect(),
        }
    }
}

/// Serialized as `{ "peers": [ { "read": {...}, "write": {...}, ... } ], "total": {...} }`.
impl serde::Serialize for Counters {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct ByVerb<'a>(&'a [VerbCount; 6]);
        impl serde::Serialize for ByVerb<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(6))?;
                for verb in Verb::ALL {
                    map.serialize_entry(verb.name(), &self.0[verb.index()])?;
                }
                map.end()
            }
        }
        let total: [VerbCount; 6] = std::array::from_fn(|verb| self.total(Verb::ALL[verb]));
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry(
            "peers",
            &self.per_peer.iter().map(ByVerb).collect::<Vec<_>>(),
        )?;
        map.serialize_entry("total", &ByVerb(&total))?;
        map.end()
    }
}

/// Read back from what [`Counters`] serializes to (the totals are derived,
/// so they are not read); a verb a peer's entry leaves out counts zero.
impl<'de> serde::Deserialize<'de> for Counters {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Wire {
            peers: Vec<BTreeMap<String, VerbCount>>,
        }
        let wire = Wire::deserialize(deserializer)?;
        let per_peer = wire
            .peers
            .into_iter()
            .map(|mut by_name| {
                let counts = std::array::from_fn(|verb| {
                    by_name.remove(Verb::ALL[verb].name()).unwrap_or_default()
                });
                match by_name.into_keys().next() {
                    Some(unknown) => Err(serde::de::Error::custom(format!(
                        "unknown verb {unknown:?} in counters"
                    ))),
                    None => Ok(counts),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Counters { per_peer })
    }
}

/// The live counters a node updates.
#[derive(Debug)]
pub(crate) struct CounterTable {
    cells: Vec<[[AtomicU64; 3]; 6]>,
}

impl CounterTable {
    pub(crate) fn new(size: u32) -> Self {
        Self {
            cells: (0..size)
                .map(|_| std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    /// Counts one operation of `bytes` payload bytes.
    pub(crate) fn add(&self, peer: NodeRank, verb: Verb, bytes: u64) {
        let cell = &self.cells[peer.index()][verb.index()];
        cell[0].fetch_add(1, Ordering::Relaxed);
        cell[1].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Adds modelled time to an operation already counted.
    pub(crate) fn add_modelled(&self, peer: NodeRank, verb: Verb, ns: u64) {
        self.cells[peer.index()][verb.index()][2].fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Counters {
        Counters {
            per_peer: self
                .cells
                .iter()
                .map(|peer| {
                    std::array::from_fn(|verb| {
                        let [ops, bytes, ns] = &peer[verb];
                        VerbCount {
                            ops: ops.load(Ordering::Relaxed),
                            bytes: bytes.load(Ordering::Relaxed),
                            modelled_ns: ns.load(Ordering::Relaxed),
                        }
                    })
                })
                .collect(),
        }
    }
}
