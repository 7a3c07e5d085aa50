//! One server's share of the graph in RocksDB, versioned (paper §5.1).
//!
//! Every write adds versions under [`crate::key`]'s layout and never
//! overwrites one: an update is a new version, a delete a tombstone
//! version. A read "as of T" takes, for each attribute and each (type,
//! destination) edge, the newest version at or before T, and drops it if it
//! is a tombstone. A vertex exists as of T if its `type` system entry does;
//! deleting it tombstones the type and every attribute it then had. The
//! write-ahead log is on: a write is in the log before it is acknowledged,
//! so it survives the server process being killed (`sync` also survives
//! the machine losing power, at the price of an fsync per write batch).
//!
//! A second column family, `pending`, holds the reverse edges a write has
//! still to deliver to other servers, written in the same batch as the
//! forward edge, so neither survives a crash without the other.
//!
//! Tuned for the write path, where inserting into the memtable was the
//! largest cost: the graph's keys are grouped by their vertex (RocksDB's
//! prefix extractor is the key's vertex component, so every scan stays in
//! one vertex, and the memtable is a hash of per-vertex skip lists, so an
//! insert searches one vertex's entries, not all of them), with prefix
//! Bloom filters in the tables; the pending family, written once and
//! deleted once per entry and read only when redelivering, keeps its
//! memtable as an unsorted vector.

use std::collections::BTreeMap;
use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, MemtableFactory, Options, ReadOptions,
    SliceTransform, WriteBatch, WriteOptions, DB,
};

use crate::key::{self, Section};
use crate::tree::SplitState;

const PENDING: &str = "pending";
const TYPE: &[u8] = b"type";
const SPLIT: &[u8] = b"split";
const LIVE: u8 = 1;
/// Versions an edge scan steps over before it seeks instead, as RocksDB's
/// own iterators do (`max_sequential_skip_in_iterations`).
const STEPS_BEFORE_SEEK: u32 = 8;
const TOMBSTONE: u8 = 0;

/// A store error: RocksDB's, or a value it holds that this crate did not
/// write.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// RocksDB failed.
    #[error("rocksdb")]
    Rocks(#[from] rocksdb::Error),
    /// A key or value is not in this crate's format.
    #[error("corrupt entry under key {0:02x?}")]
    Corrupt(Vec<u8>),
}

fn key_vertex(key: &[u8]) -> &[u8] {
    &key[..key::vertex_part(key).unwrap_or(key.len())]
}

fn has_vertex_prefix(key: &[u8]) -> bool {
    key::vertex_part(key).is_some()
}

/// The block cache of a server's graph.
const BLOCK_CACHE_BYTES: usize = 256 << 20;

/// A key and its value, as stored.
pub type RawEntry = (Vec<u8>, Vec<u8>);

/// What [`Store`] operations return.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A vertex as of some time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VertexState {
    /// Its type.
    pub vtype: String,
    /// Its live attributes, static and user-defined.
    pub attrs: BTreeMap<String, Vec<u8>>,
}

/// One edge as of some time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeVersion {
    /// Its relation.
    pub etype: String,
    /// Its destination.
    pub dst: Vec<u8>,
    /// Its properties (one map per version, as the paper stores them).
    pub props: BTreeMap<String, Vec<u8>>,
    /// The version's timestamp.
    pub ts: u64,
}

/// Encodes an edge's property map as its value.
pub fn encode_props(props: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut out = vec![LIVE];
    for (k, v) in props {
        for part in [k.as_bytes(), v] {
            out.extend_from_slice(
                &u32::try_from(part.len())
                    .expect("attribute sizes are checked below 4 GiB")
                    .to_le_bytes(),
            );
            out.extend_from_slice(part);
        }
    }
    out
}

fn decode_props(bytes: &[u8]) -> Option<BTreeMap<String, Vec<u8>>> {
    let mut props = BTreeMap::new();
    let mut rest = bytes;
    let take = |rest: &mut &[u8]| -> Option<Vec<u8>> {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
        let (part, tail) = (tail.get(..len)?, tail.get(len..)?);
        *rest = tail;
        Some(part.to_vec())
    };
    while !rest.is_empty() {
        let k = String::from_utf8(take(&mut rest)?).ok()?;
        let v = take(&mut rest)?;
        props.insert(k, v);
    }
    Some(props)
}

/// What an edge version's value holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EdgeValue {
    /// A live edge with its properties.
    Live(BTreeMap<String, Vec<u8>>),
    /// A deleted edge.
    Tombstone,
}

/// Decodes an edge version's value; `None` if it is not in this crate's
/// format.
pub fn decode_edge_value(value: &[u8]) -> Option<EdgeValue> {
    match value.split_first()? {
        (&LIVE, props) => decode_props(props).map(EdgeValue::Live),
        (&TOMBSTONE, []) => Some(EdgeValue::Tombstone),
        _ => None,
    }
}

/// The id of a pending reverse edge: its timestamp (which redelivery
/// reads back), then a sequence number unique on its server.
pub fn pending_id(ts: u64, seq: u64) -> Vec<u8> {
    let mut id = ts.to_be_bytes().to_vec();
    id.extend_from_slice(&seq.to_be_bytes());
    id
}

/// Writes gathered to be applied at once.
#[derive(Default)]
pub struct Batch {
    batch: WriteBatch,
    pending_puts: Vec<(Vec<u8>, Vec<u8>)>,
    pending_deletes: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("entries", &self.batch.len())
            .finish()
    }
}

impl Batch {
    /// Records that `id` is a `vtype` from `ts` on.
    pub fn put_type(&mut self, id: &[u8], vtype: &str, ts: u64) {
        let mut v = vec![LIVE];
        v.extend_from_slice(vtype.as_bytes());
        self.batch
            .put(key::attr_key(id, Section::System, TYPE, ts), v);
    }

    /// A version of an attribute.
    pub fn put_attr(&mut self, id: &[u8], section: Section, name: &str, value: &[u8], ts: u64) {
        let mut v = Vec::with_capacity(value.len() + 1);
        v.push(LIVE);
        v.extend_from_slice(value);
        self.batch
            .put(key::attr_key(id, section, name.as_bytes(), ts), v);
    }

    /// Deletes vertex `id` as of `ts`: tombstones for its type and for each
    /// attribute in `live` (section, name).
    pub fn delete_vertex(&mut self, id: &[u8], live: &[(Section, String)], ts: u64) {
        self.batch
            .put(key::attr_key(id, Section::System, TYPE, ts), [TOMBSTONE]);
        for (section, name) in live {
            self.batch.put(
                key::attr_key(id, *section, name.as_bytes(), ts),
                [TOMBSTONE],
            );
        }
    }

    /// A version of an edge: its properties, or a tombstone.
    pub fn put_edge(
        &mut self,
        src: &[u8],
        etype: &str,
        dst: &[u8],
        props: Option<&BTreeMap<String, Vec<u8>>>,
        ts: u64,
    ) {
        let value = props.map_or_else(|| vec![TOMBSTONE], encode_props);
        self.batch
            .put(key::edge_key(src, etype.as_bytes(), dst, ts), value);
    }

    /// The split state of `id` (at its home; one version, replaced).
    pub fn put_split(&mut self, id: &[u8], x: SplitState) {
        self.batch.put(
            key::attr_key(id, Section::System, SPLIT, 0),
            x.0.to_le_bytes(),
        );
    }

    /// A raw entry, as a split moves it.
    pub fn put_raw(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put(key, value);
    }

    /// Removes a raw entry that moved away.
    pub fn delete_raw(&mut self, key: &[u8]) {
        self.batch.delete(key);
    }

    /// A reverse edge still to deliver, under [`pending_id`].
    pub fn add_pending(&mut self, id: Vec<u8>, value: Vec<u8>) {
        self.pending_puts.push((id, value));
    }

    /// A reverse edge delivered.
    pub fn remove_pending(&mut self, id: Vec<u8>) {
        self.pending_deletes.push(id);
    }

    /// Whether nothing was gathered.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty() && self.pending_puts.is_empty() && self.pending_deletes.is_empty()
    }
}

/// One server's RocksDB.
pub struct Store {
    db: DB,
    write_options: WriteOptions,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.db.path())
            .finish()
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`. `sync` fsyncs the log on
    /// every write.
    pub fn open(dir: &Path, sync: bool) -> Result<Store> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.increase_parallelism(2);
        options.set_allow_concurrent_memtable_write(false);
        let mut graph = Options::default();
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(BLOCK_CACHE_BYTES)?);
        table.set_bloom_filter(10.0, false);
        graph.set_block_based_table_factory(&table);
        graph.set_prefix_extractor(SliceTransform::create(
            "quiver-meta-vertex",
            key_vertex,
            Some(has_vertex_prefix),
        ));
        graph.set_memtable_factory(MemtableFactory::HashSkipList {
            bucket_count: 1 << 20,
            height: 12,
            branching_factor: 4,
        });
        let mut pending = Options::default();
        pending.set_memtable_factory(MemtableFactory::Vector);
        let families = [
            ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, graph),
            ColumnFamilyDescriptor::new(PENDING, pending),
        ];
        let db = DB::open_cf_descriptors(&options, dir, families)?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(sync);
        Ok(Store { db, write_options })
    }

    /// Applies `batch` atomically.
    pub fn write(&self, batch: Batch) -> Result<()> {
        let Batch {
            mut batch,
            pending_puts,
            pending_deletes,
        } = batch;
        let pending = self.pending_family();
        for (k, v) in pending_puts {
            batch.put_cf(pending, k, v);
        }
        for k in pending_deletes {
            batch.delete_cf(pending, k);
        }
        self.db.write_opt(batch, &self.write_options)?;
        Ok(())
    }

    /// Reverse edges not yet delivered, in the order they were written.
    pub fn pending(&self) -> Result<Vec<RawEntry>> {
        let pending = self.pending_family();
        let mut out = Vec::new();
        for entry in self.db.iterator_cf(pending, rocksdb::IteratorMode::Start) {
            let (k, v) = entry?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    /// Calls `f(key, parsed, value)` for every entry under `prefix`, in key
    /// order, until it returns false.
    fn scan(
        &self,
        prefix: &[u8],
        mut f: impl FnMut(&[u8], key::ParsedKey, &[u8]) -> bool,
    ) -> Result<()> {
        let mut read = ReadOptions::default();
        read.set_prefix_same_as_start(true);
        let mut it = self.db.raw_iterator_opt(read);
        it.seek(prefix);
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if !k.starts_with(prefix) {
                break;
            }
            let parsed = key::parse(k).ok_or_else(|| StoreError::Corrupt(k.to_vec()))?;
            if !f(k, parsed, v) {
                break;
            }
            it.next();
        }
        it.status()?;
        Ok(())
    }

    /// Vertex `id` as of `as_of`, if it exists then.
    pub fn read_vertex(&self, id: &[u8], as_of: u64) -> Result<Option<VertexState>> {
        let mut vtype = None;
        let mut attrs = BTreeMap::new();
        let mut last: Option<(Section, Vec<u8>)> = None;
        let mut corrupt = None;
        let prefix = key::vertex_prefix(id);
        self.scan(&prefix, |k, p, v| {
            if p.section == Section::Edge {
                return false;
            }
            let entry = (p.section, p.name);
            if p.ts > as_of || last.as_ref() == Some(&entry) {
                return true;
            }
            let Some((&flag, value)) = v.split_first() else {
                corrupt = Some(k.to_vec());
                return false;
            };
            let (section, name) = &entry;
            match (section, flag) {
                (Section::System, LIVE) if name == TYPE => {
                    vtype = Some(String::from_utf8_lossy(value).into_owned())
                }
                (Section::Static | Section::User, LIVE) => {
                    attrs.insert(String::from_utf8_lossy(name).into_owned(), value.to_vec());
                }
                _ => {}
            }
            last = Some(entry);
            true
        })?;
        if let Some(k) = corrupt {
            return Err(StoreError::Corrupt(k));
        }
        Ok(vtype.map(|vtype| VertexState { vtype, attrs }))
    }

    /// The live attribute entries of `id` as of `as_of`, for a delete.
    pub fn live_attrs(&self, id: &[u8], as_of: u64) -> Result<Vec<(Section, String)>> {
        let Some(state) = self.read_vertex(id, as_of)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for section in [Section::Static, Section::User] {
            for name in state.attrs.keys() {
                let prefix = key::attr_prefix(id, section, name.as_bytes());
                let mut found = false;
                self.scan(&prefix, |_, _, _| {
                    found = true;
                    false
                })?;
                if found {
                    out.push((section, name.clone()));
                }
            }
        }
        Ok(out)
    }

    /// The edges of `src` this store holds, as of `as_of`: each (type,
    /// destination) once, at its newest version then, tombstones dropped;
    /// only `etype`'s when given.
    pub fn scan_edges(
        &self,
        src: &[u8],
        etype: Option<&str>,
        as_of: u64,
    ) -> Result<Vec<EdgeVersion>> {
        let prefix = match etype {
            Some(t) => key::edge_type_prefix(src, t.as_bytes()),
            None => key::section_prefix(src, Section::Edge),
        };
        let mut out = Vec::new();
        let mut read = ReadOptions::default();
        read.set_prefix_same_as_start(true);
        let mut it = self.db.raw_iterator_opt(read);
        it.seek(&prefix);
        // Versions of one edge are newest first. Those newer than `as_of`
        // and those older than the one read are passed over: a few by
        // stepping, more by one seek, so an edge with many versions costs
        // about what an edge with one does.
        let mut stepped = 0;
        // The edge (type, destination) whose version was read last.
        let mut read_edge: Option<(Vec<u8>, Vec<u8>)> = None;
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if !k.starts_with(&prefix) {
                break;
            }
            let p = key::parse(k).ok_or_else(|| StoreError::Corrupt(k.to_vec()))?;
            let dst = p.dst.unwrap_or_default();
            let past_versions = read_edge
                .as_ref()
                .is_some_and(|(etype, read)| *etype == p.name && *read == dst);
            if past_versions || p.ts > as_of {
                if stepped < STEPS_BEFORE_SEEK {
                    stepped += 1;
                    it.next();
                } else {
                    stepped = 0;
                    let edge = key::edge_prefix(src, &p.name, &dst);
                    match (past_versions, key::prefix_end(&edge)) {
                        (false, _) => it.seek(key::edge_key(src, &p.name, &dst, as_of)),
                        (true, Some(next_edge)) => it.seek(next_edge),
                        (true, None) => break,
                    }
                }
                continue;
            }
            stepped = 0;
            match decode_edge_value(v) {
                Some(EdgeValue::Live(props)) => out.push(EdgeVersion {
                    etype: String::from_utf8_lossy(&p.name).into_owned(),
                    dst: dst.clone(),
                    props,
                    ts: p.ts,
                }),
                Some(EdgeValue::Tombstone) => {}
                None => return Err(StoreError::Corrupt(k.to_vec())),
            }
            read_edge = Some((p.name, dst));
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    /// The newest version of one entry (`prefix` is the key without its
    /// timestamp): its value, through the prefix bloom filters.
    fn newest(&self, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut read = ReadOptions::default();
        read.set_prefix_same_as_start(true);
        let mut it = self.db.raw_iterator_opt(read);
        it.seek(prefix);
        let found = match (it.key(), it.value()) {
            (Some(k), Some(v)) if k.len() == prefix.len() + 8 && k.starts_with(prefix) => {
                Some(v.to_vec())
            }
            _ => None,
        };
        it.status()?;
        Ok(found)
    }

    /// The type of vertex `id` now, if it exists.
    pub fn vertex_type(&self, id: &[u8]) -> Result<Option<String>> {
        Ok(
            match self.newest(&key::attr_prefix(id, Section::System, TYPE))? {
                Some(v) if v.first() == Some(&LIVE) => {
                    Some(String::from_utf8_lossy(&v[1..]).into_owned())
                }
                _ => None,
            },
        )
    }

    /// Every stored version of `src`'s edges that `keep(type, dst)`
    /// accepts, raw, for a split to move.
    pub fn edge_entries(
        &self,
        src: &[u8],
        mut keep: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<Vec<RawEntry>> {
        let mut out = Vec::new();
        self.scan(&key::section_prefix(src, Section::Edge), |k, p, v| {
            if keep(&p.name, &p.dst.unwrap_or_default()) {
                out.push((k.to_vec(), v.to_vec()));
            }
            true
        })?;
        Ok(out)
    }

    /// The split state of `id` as its home records it.
    pub fn split_state(&self, id: &[u8]) -> Result<SplitState> {
        let k = key::attr_key(id, Section::System, SPLIT, 0);
        match self.db.get_pinned(&k)? {
            None => Ok(SplitState::default()),
            Some(v) => {
                let bytes: [u8; 16] = v
                    .as_ref()
                    .try_into()
                    .map_err(|_| StoreError::Corrupt(k.clone()))?;
                Ok(SplitState(u128::from_le_bytes(bytes)))
            }
        }
    }

    /// Checks that every entry is one this crate writes: each key parses;
    /// a type or attribute version is live (with a UTF-8 type) or a
    /// tombstone; an edge version decodes; a split state is 16 bytes;
    /// each pending entry decodes as a reverse edge. Returns the entries
    /// checked.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming the first entry that is not.
    pub fn check(&self) -> Result<u64> {
        let mut entries = 0;
        // Every entry, not the prefix-bounded order reads use.
        let mut all = ReadOptions::default();
        all.set_total_order_seek(true);
        for entry in self.db.iterator_opt(rocksdb::IteratorMode::Start, all) {
            let (k, v) = entry?;
            let parsed = key::parse(&k).ok_or_else(|| StoreError::Corrupt(k.to_vec()))?;
            let fine = match (parsed.section, parsed.name.as_slice()) {
                (Section::Edge, _) => decode_edge_value(&v).is_some(),
                (Section::System, SPLIT) => v.len() == 16,
                (Section::System, TYPE) => match v.split_first() {
                    Some((&LIVE, vtype)) => std::str::from_utf8(vtype).is_ok(),
                    Some((&TOMBSTONE, [])) => true,
                    _ => false,
                },
                _ => matches!(v.split_first(), Some((&LIVE, _)) | Some((&TOMBSTONE, []))),
            };
            if !fine {
                return Err(StoreError::Corrupt(k.to_vec()));
            }
            entries += 1;
        }
        for (k, v) in self.pending()? {
            if <crate::rpc::EdgePut as prost::Message>::decode(v.as_slice()).is_err() {
                return Err(StoreError::Corrupt(k));
            }
            entries += 1;
        }
        Ok(entries)
    }

    fn pending_family(&self) -> &rocksdb::ColumnFamily {
        self.db
            .cf_handle(PENDING)
            .expect("opened with the pending family")
    }

    /// Flushes both families' memtables to tables (on a graceful
    /// shutdown), so that nothing needs the log any more.
    pub fn flush(&self) -> Result<()> {
        self.db.flush()?;
        self.db.flush_cf(self.pending_family())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Attr(u8, u8, u8),
        DeleteVertex(u8),
        Edge(u8, u8, u8, u8),
        DeleteEdge(u8, u8, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..3, 0u8..3, any::<u8>()).prop_map(|(v, a, x)| Op::Attr(v, a, x)),
            (0u8..3).prop_map(Op::DeleteVertex),
            (0u8..3, 0u8..2, 0u8..4, any::<u8>()).prop_map(|(v, t, d, x)| Op::Edge(v, t, d, x)),
            (0u8..3, 0u8..2, 0u8..4).prop_map(|(v, t, d)| Op::DeleteEdge(v, t, d)),
        ]
    }

    /// The check passes every entry this module writes and names the
    /// first it did not: a key of no vertex, an edge value cut short, a
    /// split state of the wrong size.
    #[test]
    fn the_check_passes_what_the_store_writes_and_names_what_it_did_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), false).unwrap();
        let mut batch = Batch::default();
        batch.put_type(b"/a", "file", 5);
        batch.put_attr(b"/a", Section::User, "mode", b"0644", 5);
        batch.put_edge(b"/a", "has", b"/b", Some(&BTreeMap::new()), 6);
        batch.put_edge(b"/a", "has", b"/c", None, 7);
        batch.put_split(b"/a", SplitState(3));
        batch.delete_vertex(b"/a", &[(Section::User, "mode".into())], 8);
        store.write(batch).unwrap();
        assert_eq!(store.check().unwrap(), 7);
        let bad = [
            (b"not a key".to_vec(), b"x".to_vec()),
            (key::edge_key(b"/a", b"has", b"/d", 1), vec![LIVE, 9, 0]),
            (key::attr_key(b"/a", Section::System, SPLIT, 0), vec![1, 2]),
        ];
        for (k, v) in bad {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), false).unwrap();
            let mut batch = Batch::default();
            batch.put_raw(&k, &v);
            store.write(batch).unwrap();
            let err = store.check().unwrap_err();
            assert!(
                matches!(&err, StoreError::Corrupt(at) if *at == k),
                "{err:?}"
            );
        }
    }

    /// Edges with many versions (so a scan seeks past them), some
    /// deleted, read as of every time: each edge at its newest version
    /// then, as a brute-force model says.
    #[test]
    fn a_scan_seeks_past_many_versions_and_reads_the_right_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), false).unwrap();
        let dsts: [&[u8]; 3] = [b"/b", b"/c", b"/d"];
        // (dst, ts, live)
        let mut model: Vec<(usize, u64, bool)> = Vec::new();
        let mut batch = Batch::default();
        for ts in 1..=60u64 {
            for (d, dst) in dsts.iter().enumerate() {
                // /b: every time; /c: every 7th, deleted every 3rd of those;
                // /d: once.
                let live = match d {
                    0 => true,
                    1 if ts % 7 == 0 => ts % 21 != 0,
                    2 if ts == 30 => true,
                    _ => continue,
                };
                let props = BTreeMap::from([("n".to_string(), ts.to_le_bytes().to_vec())]);
                batch.put_edge(b"/a", "has", dst, live.then_some(&props), ts);
                model.push((d, ts, live));
            }
        }
        store.write(batch).unwrap();
        for as_of in 0..=61u64 {
            let mut want = Vec::new();
            for (d, dst) in dsts.iter().enumerate() {
                let newest = model
                    .iter()
                    .filter(|&&(m, ts, _)| m == d && ts <= as_of)
                    .max_by_key(|&&(_, ts, _)| ts);
                if let Some(&(_, ts, true)) = newest {
                    want.push((dst.to_vec(), ts));
                }
            }
            let got: Vec<(Vec<u8>, u64)> = store
                .scan_edges(b"/a", Some("has"), as_of)
                .unwrap()
                .into_iter()
                .map(|e| (e.dst, e.ts))
                .collect();
            assert_eq!(got, want, "as of {as_of}");
        }
    }

    fn id(v: u8) -> Vec<u8> {
        // Ids that prefix one another and hold the escape byte.
        [b"/a".to_vec(), b"/a/b".to_vec(), vec![b'/', 0, b'a']][v as usize].clone()
    }

    /// Invariants 5–9 of the digest: reads as of any time equal a map of
    /// every version kept by hand; deletes keep history.
    type Versions<T> = Vec<(u64, Option<T>)>;
    type EdgeKey = (Vec<u8>, String, Vec<u8>);

    #[derive(Default)]
    struct Model {
        vertices: BTreeMap<Vec<u8>, Versions<BTreeMap<String, Vec<u8>>>>,
        edges: BTreeMap<EdgeKey, Versions<Vec<u8>>>,
    }

    impl Model {
        fn vertex(&self, v: &[u8], t: u64) -> Option<BTreeMap<String, Vec<u8>>> {
            self.vertices
                .get(v)?
                .iter()
                .rev()
                .find(|(ts, _)| *ts <= t)?
                .1
                .clone()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn reads_as_of_any_time_match_a_model(ops in prop::collection::vec(op(), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), false).unwrap();
            let mut model = Model::default();
            for (i, op) in ops.iter().enumerate() {
                let ts = 10 * (i as u64 + 1);
                let mut b = Batch::default();
                match *op {
                    Op::Attr(v, a, x) => {
                        let mut attrs = model.vertex(&id(v), ts).unwrap_or_default();
                        attrs.insert(format!("a{a}"), vec![x]);
                        b.put_type(&id(v), "file", ts);
                        b.put_attr(&id(v), if a == 0 { Section::Static } else { Section::User }, &format!("a{a}"), &[x], ts);
                        model.vertices.entry(id(v)).or_default().push((ts, Some(attrs)));
                    }
                    Op::DeleteVertex(v) => {
                        let live = store.live_attrs(&id(v), ts).unwrap();
                        b.delete_vertex(&id(v), &live, ts);
                        model.vertices.entry(id(v)).or_default().push((ts, None));
                    }
                    Op::Edge(v, t, d, x) => {
                        let props = BTreeMap::from([("p".to_string(), vec![x])]);
                        b.put_edge(&id(v), &format!("t{t}"), &id(d % 3), Some(&props), ts);
                        model.edges.entry((id(v), format!("t{t}"), id(d % 3))).or_default().push((ts, Some(vec![x])));
                    }
                    Op::DeleteEdge(v, t, d) => {
                        b.put_edge(&id(v), &format!("t{t}"), &id(d % 3), None, ts);
                        model.edges.entry((id(v), format!("t{t}"), id(d % 3))).or_default().push((ts, None));
                    }
                }
                store.write(b).unwrap();
            }
            let end = 10 * (ops.len() as u64 + 2);
            // From the memtable, then from table files (and their filters).
            for flushed in [false, true] {
            if flushed {
                store.flush().unwrap();
            }
            for t in (0..end).step_by(5) {
                for v in 0..3 {
                    let got = store.read_vertex(&id(v), t).unwrap();
                    prop_assert_eq!(got.map(|s| s.attrs), model.vertex(&id(v), t), "vertex {} at {}", v, t);
                    for etype in [None, Some("t1")] {
                        let got: Vec<(String, Vec<u8>, Vec<u8>)> = store
                            .scan_edges(&id(v), etype, t)
                            .unwrap()
                            .into_iter()
                            .map(|e| (e.etype, e.dst, e.props["p"].clone()))
                            .collect();
                        let want: Vec<(String, Vec<u8>, Vec<u8>)> = model
                            .edges
                            .iter()
                            .filter(|((src, ty, _), _)| *src == id(v) && etype.is_none_or(|e| e == ty))
                            .filter_map(|((_, ty, dst), versions)| {
                                let (_, p) = versions.iter().rev().find(|(ts, _)| *ts <= t)?;
                                Some((ty.clone(), dst.clone(), p.clone()?))
                            })
                            .collect();
                        prop_assert_eq!(got, want, "edges of {} at {}", v, t);
                    }
                }
            }
            }
        }
    }

    /// After a flush the store needs no log: with every log file deleted,
    /// it reopens with the graph's entries and the pending reverse edges.
    #[test]
    fn a_flushed_store_needs_no_log() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), false).unwrap();
        let mut batch = Batch::default();
        batch.put_type(&id(1), "file", 5);
        batch.add_pending(b"p1".to_vec(), b"reverse".to_vec());
        store.write(batch).unwrap();
        store.flush().unwrap();
        drop(store);
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                std::fs::remove_file(path).unwrap();
            }
        }
        let store = Store::open(dir.path(), false).unwrap();
        assert_eq!(store.vertex_type(&id(1)).unwrap().as_deref(), Some("file"));
        assert_eq!(
            store.pending().unwrap(),
            [(b"p1".to_vec(), b"reverse".to_vec())]
        );
    }

    #[test]
    fn props_round_trip_and_garbage_is_refused() {
        let props = BTreeMap::from([
            ("k".to_string(), vec![0u8, 1, 2]),
            (String::new(), Vec::new()),
        ]);
        assert_eq!(
            decode_props(&encode_props(&props)[1..]),
            Some(props.clone())
        );
        assert_eq!(decode_props(&[9, 0, 0, 0, b'x']), None);
        assert_eq!(
            decode_edge_value(&encode_props(&props)),
            Some(EdgeValue::Live(props))
        );
        assert_eq!(decode_edge_value(&[TOMBSTONE]), Some(EdgeValue::Tombstone));
        for garbage in [&[][..], &[TOMBSTONE, 1], &[7], &[LIVE, 9, 0, 0, 0]] {
            assert_eq!(decode_edge_value(garbage), None, "{garbage:?}");
        }
    }
}
