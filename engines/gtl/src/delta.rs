//! The delta graph (GraphSSD §3.4, after LLAMA): `deltaUpdates`, an
//! append-only log of edit records in flash pages, each pointing to its
//! vertex's previous record, and `deltaPointer`, each vertex's latest
//! record, in the controller's DRAM.
//!
//! A record is 20 bytes: vertex, kind (with a bit for an in-list's
//! record), target, weight bits and the index of the list's previous
//! record (`u32::MAX` for none). A delta page holds
//! records from the front and ends with the index of its first record and
//! its record count. The host flushes a batch of records at a time; each
//! batch is programmed as whole delta pages, so a batch's records are
//! durable together. Reading a vertex's chain follows the pointers from the
//! newest record back, reading each delta page it touches once, one after
//! the other (the next page is known only from the record before it): long
//! chains cost latency, which is why the delta graph is merged.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::flash::{Flash, Nanos, Ppn};

/// Which of a vertex's lists: its out-neighbours, or (on a directed
/// graph, which keeps both, GraphSSD §3.2) its in-neighbours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// Out-neighbours (every graph).
    #[default]
    Out,
    /// In-neighbours (directed graphs).
    In,
}

/// One list of the graph: a vertex's list in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListId {
    /// The direction.
    pub dir: Dir,
    /// The vertex.
    pub vertex: u32,
}

impl ListId {
    /// `vertex`'s out-list.
    pub fn out(vertex: u32) -> ListId {
        ListId {
            dir: Dir::Out,
            vertex,
        }
    }

    /// `vertex`'s in-list.
    pub fn incoming(vertex: u32) -> ListId {
        ListId {
            dir: Dir::In,
            vertex,
        }
    }
}

/// One change to one list.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Edit {
    /// The vertex comes into being with an empty list (AddVertex).
    Create,
    /// Appends an edge to `target` (GraphSSD inserts at the list's end).
    Add {
        /// The edge's target.
        target: u32,
        /// Its weight (ignored on an unweighted graph).
        weight: f32,
    },
    /// Removes the first edge to `target`.
    Delete {
        /// The edge's target.
        target: u32,
    },
    /// Sets the weight of the first edge to `target`.
    Reweight {
        /// The edge's target.
        target: u32,
        /// The new weight.
        weight: f32,
    },
    /// Empties the list.
    Clear,
}

/// An out-list with its weights (no weights on an unweighted graph).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Adjacency {
    /// The targets, in list order.
    pub targets: Vec<u32>,
    /// `targets.len()` weights on a weighted graph, none otherwise.
    pub weights: Vec<f32>,
}

impl Adjacency {
    /// The weight of the first edge to `target` (GetEdgeWeight); `None`
    /// if there is none, or if the list carries no weights.
    pub fn weight(&self, target: u32) -> Option<f32> {
        let i = self.targets.iter().position(|&t| t == target)?;
        self.weights.get(i).copied()
    }

    /// Applies `edit`; false, changing nothing, if it names an edge the
    /// list does not have.
    pub fn apply(&mut self, edit: Edit, weighted: bool) -> bool {
        let find = |targets: &[u32], target| targets.iter().position(|&t| t == target);
        match edit {
            Edit::Create => true,
            Edit::Add { target, weight } => {
                self.targets.push(target);
                if weighted {
                    self.weights.push(weight);
                }
                true
            }
            Edit::Delete { target } => match find(&self.targets, target) {
                Some(i) => {
                    self.targets.remove(i);
                    if weighted {
                        self.weights.remove(i);
                    }
                    true
                }
                None => false,
            },
            Edit::Reweight { target, weight } => match find(&self.targets, target) {
                Some(i) => {
                    if weighted {
                        self.weights[i] = weight;
                    }
                    true
                }
                None => false,
            },
            Edit::Clear => {
                self.targets.clear();
                self.weights.clear();
                true
            }
        }
    }
}

/// Bytes of one record.
pub const RECORD: usize = 20;
const NONE: u32 = u32::MAX;
/// Bytes after a delta page's records: its first record's index and its count.
const FOOTER: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Record {
    list: ListId,
    edit: Edit,
    prev: u32,
}

/// The kind word's bit for an in-list's record.
const IN_LIST: u32 = 1 << 8;

impl Record {
    fn encode(&self, out: &mut [u8]) {
        let (kind, target, weight) = match self.edit {
            Edit::Create => (0, 0, 0.0),
            Edit::Add { target, weight } => (1, target, weight),
            Edit::Delete { target } => (2, target, 0.0),
            Edit::Reweight { target, weight } => (3, target, weight),
            Edit::Clear => (4, 0, 0.0),
        };
        let kind = kind | if self.list.dir == Dir::In { IN_LIST } else { 0 };
        for (i, word) in [
            self.list.vertex,
            kind,
            target,
            f32::to_bits(weight),
            self.prev,
        ]
        .into_iter()
        .enumerate()
        {
            out[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
        }
    }

    fn decode(bytes: &[u8], ppn: Ppn) -> Result<Record> {
        let word =
            |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        let (target, weight) = (word(2), f32::from_bits(word(3)));
        let dir = if word(1) & IN_LIST != 0 {
            Dir::In
        } else {
            Dir::Out
        };
        let edit = match word(1) & !IN_LIST {
            0 => Edit::Create,
            1 => Edit::Add { target, weight },
            2 => Edit::Delete { target },
            3 => Edit::Reweight { target, weight },
            4 => Edit::Clear,
            kind => {
                return Err(Error::CorruptPage {
                    ppn: ppn.0,
                    reason: format!("delta record of unknown kind {kind}"),
                })
            }
        };
        Ok(Record {
            list: ListId {
                dir,
                vertex: word(0),
            },
            edit,
            prev: word(4),
        })
    }
}

/// One delta page: which records it holds, where, and how many of them
/// are not merged yet.
#[derive(Clone, Debug)]
struct DeltaPage {
    first: u32,
    count: u32,
    ppn: Ppn,
    live: u32,
}

/// Delta pages read during one command, by their place in the page
/// table, with when each was read: a merge reads each page once.
pub(crate) type DeltaBuffer = HashMap<usize, (Vec<u8>, Nanos)>;

/// A vertex's chain, read from flash.
#[derive(Debug)]
pub(crate) struct Chain {
    /// The edits, oldest first.
    pub edits: Vec<Edit>,
    /// Record indices, newest first.
    pub records: Vec<u32>,
    /// Delta pages read.
    pub pages_read: u64,
    /// When the last page reached the controller.
    pub done: Nanos,
}

/// A delta page as recovery found it: its records' range, where it is,
/// and its unmerged records (index, list).
#[derive(Debug)]
pub(crate) struct FoundPage {
    pub first: u32,
    pub count: u32,
    pub ppn: Ppn,
    pub unmerged: Vec<(u32, ListId)>,
}

/// `deltaUpdates` (as its page table) and `deltaPointer`.
///
/// Invariants: pages are in record order, each holding records
/// `first..first + count` (after a recovery, pages whose records were all
/// merged may be missing); `pointer` maps exactly the lists with
/// unmerged records, to their newest; a page's `live` counts its records
/// still on some vertex's chain.
#[derive(Debug, Default)]
pub(crate) struct Deltas {
    pages: Vec<DeltaPage>,
    next: u32,
    pointer: HashMap<ListId, u32>,
}

impl Deltas {
    /// Records a delta page of `page_bytes` holds.
    pub fn per_page(page_bytes: usize) -> usize {
        (page_bytes - FOOTER) / RECORD
    }

    /// Whether `list` has unmerged records.
    pub fn has_chain(&self, list: ListId) -> bool {
        self.pointer.contains_key(&list)
    }

    /// Lists with unmerged records.
    pub fn chained(&self) -> usize {
        self.pointer.len()
    }

    /// The lists with unmerged records.
    pub fn chained_lists(&self) -> impl Iterator<Item = ListId> + '_ {
        self.pointer.keys().copied()
    }

    /// The delta pages still holding unmerged records.
    pub fn live_pages(&self) -> impl Iterator<Item = Ppn> + '_ {
        self.pages.iter().filter(|p| p.live > 0).map(|p| p.ppn)
    }

    /// Links `edits` into their vertices' chains and lays them out in
    /// delta pages of `page_bytes`, each with its first record's index; the
    /// caller programs each page and reports where with [`Deltas::placed`].
    pub fn append(&mut self, edits: &[(ListId, Edit)], page_bytes: usize) -> Vec<(u32, Vec<u8>)> {
        let per_page = Self::per_page(page_bytes);
        edits
            .chunks(per_page)
            .map(|chunk| {
                let mut page = vec![0u8; page_bytes];
                let first = self.next;
                for (i, &(list, edit)) in chunk.iter().enumerate() {
                    let prev = self.pointer.insert(list, self.next).unwrap_or(NONE);
                    Record { list, edit, prev }.encode(&mut page[i * RECORD..]);
                    self.next += 1;
                }
                let count =
                    u32::try_from(chunk.len()).expect("a page holds fewer than 2^32 records");
                page[page_bytes - 8..page_bytes - 4].copy_from_slice(&first.to_le_bytes());
                page[page_bytes - 4..].copy_from_slice(&count.to_le_bytes());
                self.pages.push(DeltaPage {
                    first,
                    count,
                    ppn: Ppn(u64::MAX),
                    live: count,
                });
                (first, page)
            })
            .collect()
    }

    /// Says that the page holding record `first` was programmed at `ppn`.
    pub fn placed(&mut self, first: u32, ppn: Ppn) {
        let i = self.page_of(first);
        self.pages[i].ppn = ppn;
    }

    fn page_of(&self, record: u32) -> usize {
        let i = self.pages.partition_point(|p| p.first <= record) - 1;
        assert!(
            record < self.pages[i].first + self.pages[i].count,
            "delta record {record} is on no page"
        );
        i
    }

    /// The delta graph recovery found: `pages` (in any order), the
    /// records after them numbered from `next`.
    pub fn recover(mut pages: Vec<FoundPage>, next: u32) -> Deltas {
        pages.sort_by_key(|p| p.first);
        let mut pointer = HashMap::new();
        for p in &pages {
            for &(record, list) in &p.unmerged {
                let newest = pointer.entry(list).or_insert(record);
                *newest = (*newest).max(record);
            }
        }
        Deltas {
            pages: pages
                .into_iter()
                .map(|p| DeltaPage {
                    first: p.first,
                    count: p.count,
                    ppn: p.ppn,
                    live: u32::try_from(p.unmerged.len()).expect("fits u32"),
                })
                .collect(),
            next,
            pointer,
        }
    }

    /// The records of delta page `bytes` (at `ppn`): its first record's
    /// index and each record's list and edit.
    pub fn decode_page(bytes: &[u8], ppn: Ppn) -> Result<(u32, Vec<(ListId, Edit)>)> {
        let len = bytes.len();
        let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let (first, count) = (word(len - 8), word(len - 4) as usize);
        if count > Self::per_page(len) {
            return Err(Error::CorruptPage {
                ppn: ppn.0,
                reason: format!("a delta page of {count} records"),
            });
        }
        let records = (0..count)
            .map(|i| {
                Record::decode(&bytes[i * RECORD..(i + 1) * RECORD], ppn).map(|r| (r.list, r.edit))
            })
            .collect::<Result<_>>()?;
        Ok((first, records))
    }

    /// Reads `list`'s chain, submitted at `at`: each delta page it
    /// touches is read from flash once its record before is known, unless
    /// `buffer` holds it already (then it is ready when its read was).
    pub fn chain(
        &self,
        flash: &mut Flash,
        list: ListId,
        at: Nanos,
        buffer: &mut DeltaBuffer,
    ) -> Result<Chain> {
        let mut chain = Chain {
            edits: Vec::new(),
            records: Vec::new(),
            pages_read: 0,
            done: at,
        };
        let mut next = self.pointer.get(&list).copied().unwrap_or(NONE);
        while next != NONE {
            let page = self.page_of(next);
            if let std::collections::hash_map::Entry::Vacant(slot) = buffer.entry(page) {
                let got = flash.read(self.pages[page].ppn, chain.done)?;
                chain.pages_read += 1;
                slot.insert((got.data.to_vec(), got.done));
            }
            let (bytes, ready) = &buffer[&page];
            chain.done = chain.done.max(*ready);
            let at = (next - self.pages[page].first) as usize * RECORD;
            let record = Record::decode(&bytes[at..at + RECORD], self.pages[page].ppn)?;
            if record.list != list {
                return Err(Error::CorruptPage {
                    ppn: self.pages[page].ppn.0,
                    reason: format!(
                        "delta record {next} is {:?}'s, on {list:?}'s chain",
                        record.list
                    ),
                });
            }
            chain.edits.push(record.edit);
            chain.records.push(next);
            next = record.prev;
        }
        chain.edits.reverse();
        Ok(chain)
    }

    /// Drops `list`'s chain (merged into its pages); returns the delta
    /// pages left with no unmerged record, which are now invalid.
    pub fn merged(&mut self, list: ListId, records: &[u32]) -> Vec<Ppn> {
        self.pointer.remove(&list);
        let mut dead = Vec::new();
        for &r in records {
            let i = self.page_of(r);
            let page = &mut self.pages[i];
            page.live -= 1;
            if page.live == 0 {
                dead.push(page.ppn);
            }
        }
        dead
    }

    /// Says that GC moved the delta page at `from` to `to`.
    pub fn relocated(&mut self, from: Ppn, to: Ppn) {
        let page = self
            .pages
            .iter_mut()
            .find(|p| p.ppn == from && p.live > 0)
            .expect("GC moves only live delta pages");
        page.ppn = to;
    }
}
