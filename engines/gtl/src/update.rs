//! GraphSSD's update commands on the [`Ssd`] (Table 1: AddEdge, AddVertex,
//! DeleteEdge, DeleteVertex, UpdateEdge, UpdateVertex), by either path:
//! [`UpdatePath::Delta`] appends the batch to the delta graph as whole
//! delta pages, to be merged later ([`Ssd::merge`]), and
//! [`UpdatePath::Direct`] writes the same records (the redo log), then
//! rewrites the changed lists' pages at once (the paper's Fig. 8, a
//! read-modify-write of whole pages).
//!
//! Semantics the paper leaves open, decided here:
//! - Vertex ids are dense: AddVertex creates vertex `|V|`; DeleteVertex
//!   empties a list (the id stays, with no edges); UpdateVertex replaces a
//!   list.
//! - Every edge `u -> v` is mirrored at `v`: in `v`'s list on an
//!   undirected graph (except a self-loop, stored once), in `v`'s in-list
//!   on a directed one. Every command keeps the mirrors in step: AddEdge
//!   adds it, DeleteEdge and UpdateEdge change it, DeleteVertex and
//!   UpdateVertex remove the vertex from its old neighbours' mirrors (and
//!   add it to its new ones'). On a directed graph DeleteVertex also
//!   removes the edges into the vertex (its in-list says which), so no
//!   edge names a deleted vertex; UpdateVertex replaces out-edges only.
//! - Lists may hold an edge more than once; DeleteEdge removes, and
//!   UpdateEdge reweights, the first edge to the target; AddEdge appends.
//! - Presence (§3.4): DeleteEdge and UpdateEdge of an edge that is not
//!   there, and DeleteVertex and UpdateVertex of a vertex at or beyond
//!   `|V|`, return false and change nothing. Presence is checked by reading
//!   the list as it stands, earlier commands of the same batch included.
//! - Weights are ignored on an unweighted graph, where UpdateEdge is an
//!   error; a target at or beyond `|V|` in an added edge is an error.

use std::collections::HashMap;

use crate::delta::{Adjacency, Edit, ListId};
use crate::device::Ssd;
use crate::error::{Error, Result};
use crate::flash::Nanos;
use crate::gtl::Merged;

/// One update command.
// The variants are the paper's command names (Table 1).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
    /// AddEdge: appends `source -> target`.
    AddEdge {
        /// The edge's source.
        source: u32,
        /// Its target.
        target: u32,
        /// Its weight (ignored on an unweighted graph).
        weight: f32,
    },
    /// DeleteEdge: removes the first `source -> target`.
    DeleteEdge {
        /// The edge's source.
        source: u32,
        /// Its target.
        target: u32,
    },
    /// UpdateEdge: sets the weight of the first `source -> target`.
    UpdateEdge {
        /// The edge's source.
        source: u32,
        /// Its target.
        target: u32,
        /// The new weight.
        weight: f32,
    },
    /// AddVertex: creates vertex `|V|` with out-edges `edges`.
    AddVertex {
        /// Its edges' targets and weights.
        edges: Vec<(u32, f32)>,
    },
    /// DeleteVertex: removes every edge of `vertex`.
    DeleteVertex {
        /// The vertex.
        vertex: u32,
    },
    /// UpdateVertex: replaces `vertex`'s edges with `edges`.
    UpdateVertex {
        /// The vertex.
        vertex: u32,
        /// Its new edges' targets and weights.
        edges: Vec<(u32, f32)>,
    },
}

impl std::fmt::Display for Update {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let edges = |edges: &[(u32, f32)]| {
            let shown: Vec<String> = edges.iter().map(|(t, w)| format!("{t}:{w}")).collect();
            shown.join(", ")
        };
        match self {
            Update::AddEdge {
                source,
                target,
                weight,
            } => write!(f, "AddEdge({source} -> {target}, weight {weight})"),
            Update::DeleteEdge { source, target } => write!(f, "DeleteEdge({source} -> {target})"),
            Update::UpdateEdge {
                source,
                target,
                weight,
            } => write!(f, "UpdateEdge({source} -> {target}, weight {weight})"),
            Update::AddVertex { edges: e } => write!(f, "AddVertex([{}])", edges(e)),
            Update::DeleteVertex { vertex } => write!(f, "DeleteVertex({vertex})"),
            Update::UpdateVertex { vertex, edges: e } => {
                write!(f, "UpdateVertex({vertex}, [{}])", edges(e))
            }
        }
    }
}

/// How updates reach the graph pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdatePath {
    /// Read-modify-write of the changed lists' pages, per call (behind
    /// the records of the redo log).
    Direct,
    /// Records in the delta graph, merged into the pages later.
    #[default]
    Delta,
}

/// Updates checked and expanded into edits, waiting to be written as one
/// unit ([`Ssd::stage`], [`Ssd::commit`]): the lists they read or changed
/// as they stand after them, the edits of lists not read yet, and the
/// directed edits to write.
#[derive(Debug)]
pub struct Batch {
    lists: HashMap<ListId, Adjacency>,
    pending: HashMap<ListId, Vec<Edit>>,
    vertices: u32,
    weighted: bool,
    undirected: bool,
    edits: Vec<(ListId, Edit)>,
}

impl Batch {
    /// The delta records the batch will write.
    pub fn records(&self) -> usize {
        self.edits.len()
    }

    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// |V| after the staged updates.
    pub fn vertices(&self) -> u32 {
        self.vertices
    }

    /// `vertex`'s targets as the batch sees them, given the device's list
    /// (`None` for a vertex the device does not have yet); `None` if the
    /// vertex does not exist even after the batch.
    pub fn overlay(&self, vertex: u32, device: Option<Vec<u32>>) -> Option<Vec<u32>> {
        let id = ListId::out(vertex);
        if let Some(list) = self.lists.get(&id) {
            return Some(list.targets.clone());
        }
        let device = Adjacency {
            targets: device?,
            weights: Vec::new(),
        };
        Some(self.with_pending(id, device).targets)
    }

    /// `device`, the device's copy of `list`, with the batch's edits of
    /// a list it has not read applied.
    fn with_pending(&self, list: ListId, mut device: Adjacency) -> Adjacency {
        let weighted = self.weighted && device.weights.len() == device.targets.len();
        for &edit in self.pending.get(&list).into_iter().flatten() {
            device.apply(edit, weighted);
        }
        device
    }
}

impl Ssd {
    /// Runs `updates` in order by `path`, as one batch, and returns for
    /// each whether it applied (see the module docs for when one does
    /// not): [`Ssd::stage`] each, then [`Ssd::commit`].
    pub fn update(&mut self, updates: &[Update], path: UpdatePath) -> Result<Vec<bool>> {
        let mut batch = self.batch()?;
        let applied = updates
            .iter()
            .map(|u| self.stage(&mut batch, u))
            .collect::<Result<Vec<bool>>>()?;
        self.commit(&batch, path)?;
        Ok(applied)
    }

    /// An empty batch on the device's graph.
    pub fn batch(&self) -> Result<Batch> {
        let gtl = self.gtl.as_ref().ok_or(Error::NoGraph)?;
        Ok(Batch {
            lists: HashMap::new(),
            pending: HashMap::new(),
            vertices: gtl.vertices(),
            weighted: gtl.weighted(),
            undirected: gtl.undirected(),
            edits: Vec::new(),
        })
    }

    /// Checks `update` against the graph as `batch` sees it (reading the
    /// lists its presence check needs from the device, now) and adds its
    /// edits to the batch; false if it names an edge or vertex that is
    /// not there (nothing is added).
    pub fn stage(&mut self, batch: &mut Batch, update: &Update) -> Result<bool> {
        let (start, mut done) = (self.now, self.now);
        let expanded = self.expand(update, batch, start, &mut done);
        self.now = done;
        let Some(edits) = expanded? else {
            return Ok(false);
        };
        for (list, edit) in edits {
            batch.apply(list, edit);
            batch.edits.push((list, edit));
        }
        Ok(true)
    }

    /// `vertex`'s list and weights as `batch` sees them: the device's,
    /// read now (the first time), with the batch's edits.
    pub fn staged_list(&mut self, batch: &mut Batch, vertex: u32) -> Result<Adjacency> {
        let (start, mut done) = (self.now, self.now);
        let list = self
            .current(batch, ListId::out(vertex), start, &mut done)
            .cloned();
        self.now = done;
        list
    }

    /// GetEdgeWeight(`source`, `target`) as `batch` sees it: the weight of
    /// the first `source -> target` in the source's list (read now, the
    /// first time, as [`Ssd::staged_list`] does), `None` if there is none.
    pub fn staged_weight(
        &mut self,
        batch: &mut Batch,
        source: u32,
        target: u32,
    ) -> Result<Option<f32>> {
        if !batch.weighted {
            return Err(Error::Unweighted);
        }
        for vertex in [target, source] {
            if vertex >= batch.vertices {
                return Err(Error::VertexOutOfRange {
                    vertex,
                    vertices: batch.vertices,
                });
            }
        }
        Ok(self.staged_list(batch, source)?.weight(target))
    }

    /// Writes `batch` by `path`: on the delta path its records as one
    /// unit of delta pages; on the direct path the same records, then each
    /// changed list's group of pages rewritten.
    pub fn commit(&mut self, batch: &Batch, path: UpdatePath) -> Result<()> {
        if batch.edits.is_empty() {
            return Ok(());
        }
        let gtl = self.gtl.as_mut().ok_or(Error::NoGraph)?;
        self.now = match path {
            UpdatePath::Delta => gtl.log(&mut self.flash, &batch.edits, self.now)?,
            UpdatePath::Direct => gtl.apply_direct(&mut self.flash, &batch.edits, self.now)?,
        };
        Ok(())
    }

    /// Merges the delta graph into the pages: at most `limit` dirty
    /// groups (all if `None`), in vertex order.
    pub fn merge(&mut self, limit: Option<usize>) -> Result<Merged> {
        let gtl = self.gtl.as_mut().ok_or(Error::NoGraph)?;
        let merged = gtl.merge(&mut self.flash, limit, self.now)?;
        self.now = merged.done;
        Ok(merged)
    }

    /// `list` as the batch sees it, read from the device (at `at`, its
    /// completion folded into `done`) the first time.
    fn current<'o>(
        &mut self,
        batch: &'o mut Batch,
        list: ListId,
        at: Nanos,
        done: &mut Nanos,
    ) -> Result<&'o Adjacency> {
        if !batch.lists.contains_key(&list) {
            let gtl = self.gtl.as_mut().expect("the caller checked the graph");
            let read = gtl.read_list(&mut self.flash, list, true, at)?;
            *done = (*done).max(read.done);
            let adjacency = batch.with_pending(list, read.value);
            batch.pending.remove(&list);
            batch.lists.insert(list, adjacency);
        }
        Ok(&batch.lists[&list])
    }

    /// The edits of `update`, or `None` if it names an edge or a vertex
    /// that is not there.
    fn expand(
        &mut self,
        update: &Update,
        batch: &mut Batch,
        at: Nanos,
        done: &mut Nanos,
    ) -> Result<Option<Vec<(ListId, Edit)>>> {
        let n = batch.vertices;
        let in_range = |vertex: u32| {
            if vertex < n {
                Ok(())
            } else {
                Err(Error::VertexOutOfRange {
                    vertex,
                    vertices: n,
                })
            }
        };
        Ok(Some(match *update {
            Update::AddEdge {
                source,
                target,
                weight,
            } => {
                in_range(source)?;
                in_range(target)?;
                let add = |target| Edit::Add { target, weight };
                batch.both(source, target, add(target), add(source))
            }
            Update::DeleteEdge { source, target } | Update::UpdateEdge { source, target, .. } => {
                let weight = match *update {
                    Update::UpdateEdge { weight, .. } => Some(weight),
                    _ => None,
                };
                if weight.is_some() && !batch.weighted {
                    return Err(Error::Unweighted);
                }
                if source >= n
                    || target >= n
                    || !self
                        .current(batch, ListId::out(source), at, done)?
                        .targets
                        .contains(&target)
                {
                    return Ok(None);
                }
                let edit = |target| match weight {
                    Some(weight) => Edit::Reweight { target, weight },
                    None => Edit::Delete { target },
                };
                batch.both(source, target, edit(target), edit(source))
            }
            Update::AddVertex { ref edges } => {
                // Checked before the batch counts the vertex.
                let links = batch.relink(n + 1, n, &[], edges)?;
                batch.vertices += 1;
                batch.lists.insert(ListId::out(n), Adjacency::default());
                if !batch.undirected {
                    batch
                        .lists
                        .insert(ListId::incoming(n), Adjacency::default());
                }
                std::iter::once((ListId::out(n), Edit::Create))
                    .chain(links)
                    .collect()
            }
            Update::DeleteVertex { vertex } | Update::UpdateVertex { vertex, .. } => {
                if vertex >= n {
                    return Ok(None);
                }
                let old = self
                    .current(batch, ListId::out(vertex), at, done)?
                    .targets
                    .clone();
                let edges: &[(u32, f32)] = match update {
                    Update::UpdateVertex { edges, .. } => edges,
                    _ => &[],
                };
                let mut edits = vec![(ListId::out(vertex), Edit::Clear)];
                edits.extend(batch.relink(n, vertex, &old, edges)?);
                if matches!(update, Update::DeleteVertex { .. }) && !batch.undirected {
                    // A directed graph's vertex also loses its in-edges.
                    let sources = self
                        .current(batch, ListId::incoming(vertex), at, done)?
                        .targets
                        .clone();
                    edits.push((ListId::incoming(vertex), Edit::Clear));
                    edits.extend(
                        sources
                            .into_iter()
                            .map(|s| (ListId::out(s), Edit::Delete { target: vertex })),
                    );
                }
                edits
            }
        }))
    }
}

impl Batch {
    /// The list that mirrors edge `u -> v` at `v`: `v`'s in-list on a
    /// directed graph, `v`'s list on an undirected one (none for a self-loop).
    fn mirror(&self, u: u32, v: u32) -> Option<ListId> {
        match (self.undirected, u == v) {
            (false, _) => Some(ListId::incoming(v)),
            (true, false) => Some(ListId::out(v)),
            (true, true) => None,
        }
    }

    /// `to_v` on `u`'s out-list and `to_u` on the list mirroring `u -> v`.
    fn both(&self, u: u32, v: u32, to_v: Edit, to_u: Edit) -> Vec<(ListId, Edit)> {
        std::iter::once((ListId::out(u), to_v))
            .chain(self.mirror(u, v).map(|l| (l, to_u)))
            .collect()
    }

    /// The edits giving `vertex`, whose out-list is now empty and was
    /// `old`, the edges `edges` (targets below `n`): its own adds, the
    /// mirrors of `old` removed and those of `edges` added.
    fn relink(
        &self,
        n: u32,
        vertex: u32,
        old: &[u32],
        edges: &[(u32, f32)],
    ) -> Result<Vec<(ListId, Edit)>> {
        let mut edits = Vec::new();
        for &(target, weight) in edges {
            if target >= n {
                return Err(Error::VertexOutOfRange {
                    vertex: target,
                    vertices: n,
                });
            }
            edits.push((ListId::out(vertex), Edit::Add { target, weight }));
        }
        for &t in old {
            edits.extend(
                self.mirror(vertex, t)
                    .map(|l| (l, Edit::Delete { target: vertex })),
            );
        }
        for &(t, weight) in edges {
            let add = Edit::Add {
                target: vertex,
                weight,
            };
            edits.extend(self.mirror(vertex, t).map(|l| (l, add)));
        }
        Ok(edits)
    }

    /// Applies `edit` to `list` if the batch holds it, else keeps it for
    /// when the list is read.
    fn apply(&mut self, list: ListId, edit: Edit) {
        match self.lists.get_mut(&list) {
            Some(adjacency) => {
                adjacency.apply(edit, self.weighted);
            }
            None => self.pending.entry(list).or_default().push(edit),
        }
    }
}
