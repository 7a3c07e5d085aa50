//! The RocksDB key layout (paper §5.1, Fig. 4), byte-exact.
//!
//! ```text
//! vertex section   enc(vertex) 0x00 enc(name)            ~ts   system: the vertex's type, its split state
//! static attrs     enc(vertex) 0x01 enc(attr)            ~ts
//! user attrs       enc(vertex) 0x02 enc(attr)            ~ts
//! out-edges        enc(vertex) 0x03 enc(type) enc(dst)   ~ts   value: the edge's property map
//! ```
//!
//! `enc` is an order-preserving, prefix-free escape (`0x00` becomes
//! `0x00 0xFF`, the string ends with `0x00 0x01`), so `/a/b` never prefixes
//! `/a/b/c`'s keys and every component can be parsed back. `~ts` is
//! `u64::MAX - ts` big-endian: within one attribute or one (type, dst) the
//! newest version sorts first, and a seek to `~T` lands on the newest
//! version at or before `T`. The section byte puts the system entries and
//! static attributes before user attributes, and those before the edges,
//! so one prefix scan of a vertex returns its state and then its edges by
//! type.

/// Which part of a vertex's key range an entry lives in, in key order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// Entries the store keeps about the vertex (its type, its split state).
    System = 0,
    /// Attributes the vertex's type declares.
    Static = 1,
    /// Any other attribute.
    User = 2,
    /// Out-edges, by type then destination.
    Edge = 3,
}

impl Section {
    fn from_byte(b: u8) -> Option<Section> {
        match b {
            0 => Some(Section::System),
            1 => Some(Section::Static),
            2 => Some(Section::User),
            3 => Some(Section::Edge),
            _ => None,
        }
    }
}

const ESCAPE: u8 = 0x00;
const ESCAPED_ZERO: u8 = 0xFF;
const END: u8 = 0x01;

/// Appends `bytes` escaped and terminated: order-preserving and prefix-free.
pub fn put_component(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == ESCAPE {
            out.push(ESCAPED_ZERO);
        }
    }
    out.extend_from_slice(&[ESCAPE, END]);
}

/// The length of the component at the front of `key`, terminator
/// included, or `None` if `key` holds no whole, well-escaped one.
fn component_len(key: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < key.len() {
        if key[i] == ESCAPE {
            match *key.get(i + 1)? {
                ESCAPED_ZERO => {}
                END => return Some(i + 2),
                _ => return None,
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    None
}

/// Reads one component from the front of `key`, returning it and the rest.
fn take_component(key: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let len = component_len(key)?;
    let mut out = Vec::with_capacity(len - 2);
    let mut bytes = key[..len - 2].iter();
    while let Some(&b) = bytes.next() {
        out.push(b);
        if b == ESCAPE {
            // Its second byte is ESCAPED_ZERO (checked above).
            bytes.next();
        }
    }
    Some((out, &key[len..]))
}

/// `u64::MAX - ts`, big-endian: newer versions sort first.
pub fn reversed(ts: u64) -> [u8; 8] {
    (u64::MAX - ts).to_be_bytes()
}

/// The prefix every key of `vertex` starts with.
pub fn vertex_prefix(vertex: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(vertex.len() + 3);
    put_component(&mut k, vertex);
    k
}

/// The length of `key`'s vertex component (terminator included): the
/// part [`vertex_prefix`] builds, or `None` if `key` has no whole
/// component. RocksDB's prefix extractor, so that a vertex's entries hash
/// together in the memtable and its scans use the prefix filters.
pub fn vertex_part(key: &[u8]) -> Option<usize> {
    component_len(key)
}

/// The prefix of `vertex`'s entries in `section`.
pub fn section_prefix(vertex: &[u8], section: Section) -> Vec<u8> {
    let mut k = vertex_prefix(vertex);
    k.push(section as u8);
    k
}

/// The prefix of all versions of one named entry (system or attribute).
pub fn attr_prefix(vertex: &[u8], section: Section, name: &[u8]) -> Vec<u8> {
    debug_assert!(section != Section::Edge);
    let mut k = section_prefix(vertex, section);
    put_component(&mut k, name);
    k
}

/// The key of one version of a named entry.
pub fn attr_key(vertex: &[u8], section: Section, name: &[u8], ts: u64) -> Vec<u8> {
    let mut k = attr_prefix(vertex, section, name);
    k.extend_from_slice(&reversed(ts));
    k
}

/// The prefix of `vertex`'s edges of one type (all destinations).
pub fn edge_type_prefix(vertex: &[u8], edge_type: &[u8]) -> Vec<u8> {
    let mut k = section_prefix(vertex, Section::Edge);
    put_component(&mut k, edge_type);
    k
}

/// The prefix of all versions of one edge.
pub fn edge_prefix(vertex: &[u8], edge_type: &[u8], dst: &[u8]) -> Vec<u8> {
    let mut k = edge_type_prefix(vertex, edge_type);
    put_component(&mut k, dst);
    k
}

/// The key of one version of an edge.
pub fn edge_key(vertex: &[u8], edge_type: &[u8], dst: &[u8], ts: u64) -> Vec<u8> {
    let mut k = edge_prefix(vertex, edge_type, dst);
    k.extend_from_slice(&reversed(ts));
    k
}

/// A key taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedKey {
    /// The vertex the entry belongs to.
    pub vertex: Vec<u8>,
    /// Its section.
    pub section: Section,
    /// The entry's name (attribute or system name), or the edge type.
    pub name: Vec<u8>,
    /// The destination, for an edge.
    pub dst: Option<Vec<u8>>,
    /// The version.
    pub ts: u64,
}

/// Takes a key written by this module apart; `None` for any other bytes.
pub fn parse(key: &[u8]) -> Option<ParsedKey> {
    let (vertex, rest) = take_component(key)?;
    let (&tag, rest) = rest.split_first()?;
    let section = Section::from_byte(tag)?;
    let (name, rest) = take_component(rest)?;
    let (dst, rest) = if section == Section::Edge {
        let (dst, rest) = take_component(rest)?;
        (Some(dst), rest)
    } else {
        (None, rest)
    };
    let ts: [u8; 8] = rest.try_into().ok()?;
    Some(ParsedKey {
        vertex,
        section,
        name,
        dst,
        ts: u64::MAX - u64::from_be_bytes(ts),
    })
}

/// The smallest key greater than every key starting with `prefix`, for an
/// exclusive upper bound; `None` when no such key exists (all `0xFF`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        // Small alphabet with the escape bytes, so collisions and prefixes are common.
        prop::collection::vec(
            prop::sample::select(vec![0u8, 1, 2, 0xFE, 0xFF, b'/', b'a']),
            0..6,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn keys_round_trip(v in bytes(), name in bytes(), dst in bytes(), ts: u64, edge: bool) {
            let (key, want) = if edge {
                (edge_key(&v, &name, &dst, ts), ParsedKey { vertex: v.clone(), section: Section::Edge, name: name.clone(), dst: Some(dst.clone()), ts })
            } else {
                (attr_key(&v, Section::User, &name, ts), ParsedKey { vertex: v.clone(), section: Section::User, name: name.clone(), dst: None, ts })
            };
            prop_assert_eq!(parse(&key), Some(want));
        }

        #[test]
        fn component_order_is_byte_order_and_prefix_free(a in bytes(), b in bytes()) {
            let (mut ea, mut eb) = (Vec::new(), Vec::new());
            put_component(&mut ea, &a);
            put_component(&mut eb, &b);
            prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
            if a != b {
                prop_assert!(!eb.starts_with(&ea) && !ea.starts_with(&eb));
            }
        }

        /// Invariants 1–4 of the digest: per-vertex contiguity, section
        /// order, edges by (type, dst), newest first.
        #[test]
        fn keys_sort_by_vertex_section_name_then_newest_first(
            entries in prop::collection::vec((bytes(), 0u8..4, bytes(), bytes(), 0u64..4), 2..40)
        ) {
            type Order = (Vec<u8>, u8, Vec<u8>, Vec<u8>, std::cmp::Reverse<u64>);
            let mut keys: Vec<(Vec<u8>, Order)> = entries
                .into_iter()
                .map(|(v, s, name, dst, ts)| {
                    let section = Section::from_byte(s).unwrap();
                    let (key, dst) = if section == Section::Edge {
                        (edge_key(&v, &name, &dst, ts), dst)
                    } else {
                        (attr_key(&v, section, &name, ts), Vec::new())
                    };
                    (key, (v, s, name, dst, std::cmp::Reverse(ts)))
                })
                .collect();
            keys.sort();
            keys.dedup();
            for pair in keys.windows(2) {
                prop_assert!(pair[0].1 <= pair[1].1, "{:?} sorts before {:?}", pair[0].1, pair[1].1);
                let prefix = vertex_prefix(&pair[0].1 .0);
                prop_assert_eq!(pair[1].0.starts_with(&prefix), pair[0].1 .0 == pair[1].1 .0);
            }
        }
    }

    #[test]
    fn parse_refuses_foreign_bytes() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"abc"), None);
        let mut k = attr_key(b"v", Section::User, b"a", 7);
        k.pop();
        assert_eq!(parse(&k), None);
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
    }
}
