//! The write path: validation, queueing, group commit, and the answers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use prost::Message;
use tonic::Status;

use super::split::SplitJob;
use super::{internal, invalid, printable, Shared};
use crate::error::Result;
use crate::rpc::split_bytes;
use crate::rpc::{self, op};
use crate::store::{pending_id, Batch};
use crate::tree::Node;

/// Where a write's answer goes.
pub(super) type Answer = tokio::sync::oneshot::Sender<Result<rpc::WriteReply, Status>>;

/// A write waiting for a group commit, and where its answer goes.
pub(super) struct Queued {
    pub(super) req: rpc::WriteRequest,
    pub(super) reply: Answer,
}

/// What a group commit gathers before writing.
#[derive(Default)]
pub(super) struct Staged {
    pub(super) batch: Batch,
    /// Vertex types staged and not yet written (`None`: deleted), for the
    /// type check.
    pub(super) types: HashMap<Vec<u8>, Option<String>>,
    /// Partitions that grew: vertex, leaf, the request that grew it.
    pub(super) grown: Vec<(Vec<u8>, Node, usize)>,
    /// Reverse edges: the request, the pending entry's id, the edge.
    pub(super) reverse: Vec<(usize, Vec<u8>, rpc::EdgePut)>,
}

/// A committed group: each request's outcome, the reverse edges (pending
/// id, edge) and the splits to run, by vertex.
pub(super) struct Committed {
    pub(super) outcomes: Vec<Outcome>,
    pub(super) reverse: Vec<(Vec<u8>, rpc::EdgePut)>,
    pub(super) splits: BTreeMap<Vec<u8>, SplitJob>,
}

/// A committed request's answer, until it is sent.
pub(super) struct Outcome {
    pub(super) reply: Answer,
    pub(super) result: Result<rpc::WriteReply, Status>,
    /// Its reverse edges are being delivered.
    pub(super) delivers: bool,
    /// A partition it grew is splitting.
    pub(super) splits: bool,
}

impl Shared {
    /// Applies `req`: queued, then committed with every write queued
    /// beside it (a group commit: one RocksDB batch under the write lock,
    /// whose holder commits for everyone waiting), and answered once its
    /// reverse edges are delivered and the partitions it grew have split.
    pub(super) async fn write(
        self: &Arc<Self>,
        req: rpc::WriteRequest,
    ) -> Result<rpc::WriteReply, Status> {
        self.validate(&req)?;
        let (reply, mut replied) = tokio::sync::oneshot::channel();
        self.write_queue
            .lock()
            .expect("write queue lock")
            .push(Queued { req, reply });
        // The answer may come from another request's commit while this one
        // still waits for the lock.
        let answer = tokio::select! {
            biased;
            answer = &mut replied => answer,
            lock = self.write_lock.lock() => {
                self.commit_queue().await;
                drop(lock);
                replied.await
            }
        };
        answer.unwrap_or_else(|_| {
            Err(Status::internal(
                "the write's group commit ended without an answer",
            ))
        })
    }

    /// Commits every queued write as one group; the caller holds the write
    /// lock. Answers come from a task of their own.
    ///
    /// Boxed: the answers' task may run splits, which commit the writes
    /// that waited for them.
    pub(super) fn commit_queue(
        self: &Arc<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let group = std::mem::take(&mut *self.write_queue.lock().expect("write queue lock"));
            if !group.is_empty() {
                let committed = self.commit(group).await;
                tokio::spawn(self.clone().acknowledge(committed));
            }
        })
    }

    /// Commits `group` in order (the caller holds the write lock): each
    /// request's ops are staged whole or not at all, then written in one
    /// batch (before a vertex delete, what was staged is written first,
    /// so the delete sees every attribute). A request with an edge of a
    /// vertex that is splitting waits for the split, outside the group.
    /// Partitions that grew past the threshold are marked splitting; their
    /// splits run after the lock is released.
    pub(super) async fn commit(&self, group: Vec<Queued>) -> Committed {
        let mut staged = Staged::default();
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(group.len());
        // Requests staged but not yet written: their results wait on the write.
        let mut unwritten: Vec<usize> = Vec::new();
        for q in group {
            let Some(q) = self.unless_splitting(q) else {
                continue;
            };
            let deletes = q
                .req
                .ops
                .iter()
                .any(|o| matches!(o.op, Some(op::Op::DeleteVertex(_))));
            if deletes && !unwritten.is_empty() {
                self.write_staged(&mut staged, &mut unwritten, &mut outcomes);
            }
            let result = self.stage(&q.req, outcomes.len(), &mut staged).await;
            if result.is_ok() {
                unwritten.push(outcomes.len());
            }
            outcomes.push(Outcome {
                reply: q.reply,
                result,
                delivers: false,
                splits: false,
            });
        }
        self.write_staged(&mut staged, &mut unwritten, &mut outcomes);
        let Staged {
            mut grown, reverse, ..
        } = staged;
        // One entry per edge staged: each partition is checked once.
        grown.sort_unstable();
        grown.dedup();
        let mut splits: BTreeMap<Vec<u8>, SplitJob> = BTreeMap::new();
        for partition in grown.chunk_by(|a, b| (&a.0, a.1) == (&b.0, b.1)) {
            let (v, leaf, _) = &partition[0];
            if !self.over_threshold(v, *leaf) {
                continue;
            }
            for &(_, _, i) in partition {
                if outcomes[i].result.is_ok() {
                    let job = splits.entry(v.clone()).or_default();
                    job.leaves.insert(*leaf);
                    job.requests.push(i);
                    outcomes[i].splits = true;
                }
            }
        }
        {
            let mut splitting = self.splitting.lock().expect("splitting lock");
            for v in splits.keys() {
                splitting.insert(v.clone(), Vec::new());
            }
        }
        let mut to_deliver = Vec::with_capacity(reverse.len());
        for (i, id, edge) in reverse {
            if outcomes[i].result.is_ok() {
                outcomes[i].delivers = true;
                to_deliver.push((id, edge));
            }
        }
        Committed {
            outcomes,
            reverse: to_deliver,
            splits,
        }
    }

    /// Writes what `staged` holds; the requests in `unwritten` fail if the
    /// write does.
    pub(super) fn write_staged(
        &self,
        staged: &mut Staged,
        unwritten: &mut Vec<usize>,
        outcomes: &mut [Outcome],
    ) {
        let batch = std::mem::take(&mut staged.batch);
        staged.types.clear();
        let written = if batch.is_empty() {
            Ok(())
        } else {
            self.store.write(batch).map_err(internal)
        };
        for i in unwritten.drain(..) {
            if let Err(status) = &written {
                outcomes[i].result = Err(status.clone());
            }
        }
    }

    /// Adds request `req` (number `i` of its group) to `staged`: all of its
    /// ops, or, on an error, none.
    pub(super) async fn stage(
        &self,
        req: &rpc::WriteRequest,
        i: usize,
        staged: &mut Staged,
    ) -> Result<rpc::WriteReply, Status> {
        let mut reply = rpc::WriteReply::default();
        let ts = if req.reverse {
            let newest = req.ops.iter().filter_map(|o| match &o.op {
                Some(op::Op::Edge(e)) => Some(e.ts),
                _ => None,
            });
            let newest = newest.max().unwrap_or(0);
            self.clock.stamp(newest.saturating_sub(1));
            newest
        } else {
            self.clock.stamp(req.session_ts)
        };
        reply.ts = ts;
        // Everything that can fail comes before the first op is staged:
        // types (a batch may create a vertex and use it), partitions,
        // the attributes a delete tombstones.
        let mut live = Vec::new();
        for op in &req.ops {
            match op.op.as_ref().expect("validated") {
                op::Op::Vertex(v) => {
                    let old = match staged.types.get(&v.id) {
                        Some(t) => t.clone(),
                        None => self.store.vertex_type(&v.id).map_err(internal)?,
                    };
                    if let Some(old) = old.filter(|old| *old != v.vtype) {
                        return Err(invalid(format!(
                            "vertex {} is a {old}; a put cannot make it a {}",
                            printable(&v.id),
                            v.vtype
                        )));
                    }
                }
                op::Op::DeleteVertex(v) => {
                    live.push(self.store.live_attrs(&v.id, ts).map_err(internal)?);
                }
                op::Op::Edge(e) => {
                    if self.config.partitioner.splits() {
                        self.load_parts(&e.src).await?;
                    }
                }
            }
        }
        let mut live = live.into_iter();
        for (n, op) in req.ops.iter().enumerate() {
            match op.op.as_ref().expect("validated") {
                op::Op::Vertex(v) => {
                    staged.batch.put_type(&v.id, &v.vtype, ts);
                    staged.types.insert(v.id.clone(), Some(v.vtype.clone()));
                    for (name, value) in &v.attrs {
                        let section = self.config.schema.section(&v.vtype, name);
                        staged.batch.put_attr(&v.id, section, name, value, ts);
                    }
                }
                op::Op::DeleteVertex(v) => {
                    let live = live.next().expect("read above");
                    staged.batch.delete_vertex(&v.id, &live, ts);
                    staged.types.insert(v.id.clone(), None);
                }
                op::Op::Edge(e) => {
                    if self.config.partitioner.splits() {
                        let mut parts = self.parts.lock().expect("parts lock");
                        let p = parts.get_mut(&e.src).expect("loaded above");
                        let leaf = p
                            .x
                            .leaf_for(self.placement.tree(), self.placement.route(&e.src, &e.dst));
                        if self.placement.node_server(&e.src, leaf) != self.me() {
                            reply.stale.push(rpc::Stale {
                                op: u32::try_from(n).expect("ops fit a message"),
                                src: e.src.clone(),
                                split: split_bytes(p.x),
                            });
                            continue;
                        }
                        // An upper bound (a new version of an edge counts
                        // again); a split counts exactly before it runs.
                        *p.count(leaf) += 1;
                        staged.grown.push((e.src.clone(), leaf, i));
                    }
                    let version = if req.reverse { e.ts } else { ts };
                    let props = (!e.remove).then_some(&e.props);
                    staged
                        .batch
                        .put_edge(&e.src, &e.etype, &e.dst, props, version);
                    let back = (!req.reverse)
                        .then(|| self.config.schema.reverse(e, ts))
                        .flatten();
                    if let Some(back) = back {
                        let seq = self.pending_seq.fetch_add(1, Ordering::Relaxed);
                        let id = pending_id(ts, seq);
                        staged.batch.add_pending(id.clone(), back.encode_to_vec());
                        staged.reverse.push((i, id, back));
                    }
                }
            }
        }
        self.counters
            .writes
            .fetch_add(req.ops.len() as u64, Ordering::Relaxed);
        Ok(reply)
    }

    /// Answers a committed group: at once where there is nothing to wait
    /// for; after its reverse edges are delivered (one request per server
    /// for the whole group, [`DELIVERY_OPS`] edges at most) and the partitions it grew have split where
    /// there is. Each split counts in the reply of the first request that
    /// grew its vertex; a failed split fails every request that grew it.
    pub(super) async fn acknowledge(self: Arc<Self>, committed: Committed) {
        let Committed {
            outcomes,
            reverse,
            splits,
        } = committed;
        // By place in the group: those still waiting.
        let mut waiting: Vec<Option<Outcome>> = outcomes
            .into_iter()
            .map(|o| {
                if o.delivers || o.splits {
                    Some(o)
                } else {
                    let _ = o.reply.send(o.result);
                    None
                }
            })
            .collect();
        if waiting.iter().all(Option::is_none) {
            return;
        }
        let delivering = async {
            if reverse.is_empty() {
                return Ok(());
            }
            self.deliver(reverse).await.map_err(|e| {
                Status::unavailable(format!(
                    "the write is stored but its reverse edges wait for their server (delivered when it returns): {}",
                    quiver_run::chain(&e)
                ))
            })
        };
        let splitting = async {
            let mut done = Vec::with_capacity(splits.len());
            for (v, job) in &splits {
                done.push((job, self.split_job(v, job).await));
            }
            done
        };
        let (delivered, split) = tokio::join!(delivering, splitting);
        for (job, outcome) in split {
            match outcome {
                Ok(n) => {
                    if let Some(Outcome {
                        result: Ok(reply), ..
                    }) = &mut waiting[job.requests[0]]
                    {
                        reply.splits += n;
                    }
                }
                Err(status) => {
                    for &i in &job.requests {
                        if let Some(o) = &mut waiting[i] {
                            o.result = Err(status.clone());
                        }
                    }
                }
            }
        }
        for o in waiting.into_iter().flatten() {
            let result = match (&delivered, o.result) {
                (Err(status), Ok(_)) if o.delivers => Err(status.clone()),
                (_, result) => result,
            };
            let _ = o.reply.send(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::membership::Membership;
    use crate::server::{open, ServerConfig};

    fn vertex(id: &str, vtype: &str, attrs: &[(&str, &str)]) -> rpc::Op {
        rpc::Op {
            op: Some(op::Op::Vertex(rpc::VertexPut {
                id: id.as_bytes().to_vec(),
                vtype: vtype.into(),
                attrs: attrs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                    .collect(),
            })),
        }
    }

    /// A server alone in its cluster, not serving: its writes are called
    /// directly.
    fn one_server() -> (tempfile::TempDir, Arc<Shared>) {
        let dir = tempfile::tempdir().unwrap();
        let config = ServerConfig {
            cluster: Membership::fresh(&["127.0.0.1:1".into()], 0),
            data: dir.path().to_path_buf(),
            ..ServerConfig::default()
        };
        let shared = open(config).unwrap().shared;
        (dir, shared)
    }

    /// `ops` as a client's write for a group, and where its answer comes.
    fn queued(
        ops: Vec<rpc::Op>,
    ) -> (
        Queued,
        tokio::sync::oneshot::Receiver<Result<rpc::WriteReply, Status>>,
    ) {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let req = rpc::WriteRequest {
            session_ts: 0,
            ops,
            reverse: false,
        };
        (Queued { req, reply }, answer)
    }

    /// One group commit of requests that depend on each other: a delete
    /// tombstones what an earlier request of the group put, a type
    /// conflict with an earlier request refuses that request whole, and
    /// the others are stored, each at its own timestamp.
    #[tokio::test]
    async fn a_group_commits_each_request_whole_and_in_order() {
        let (_dir, shared) = one_server();
        let delete = rpc::Op {
            op: Some(op::Op::DeleteVertex(rpc::VertexDelete {
                id: b"/x".to_vec(),
            })),
        };
        let requests = [
            vec![vertex("/x", "file", &[("owner", "ann")])],
            vec![delete],
            vec![vertex("/x", "job", &[])],
            vec![vertex("/y", "file", &[])],
            vec![
                vertex("/z", "file", &[]),
                vertex("/y", "job", &[("owner", "bob")]),
            ],
        ];
        let (group, answers): (Vec<_>, Vec<_>) = requests.into_iter().map(queued).unzip();
        for q in &group {
            shared.validate(&q.req).unwrap();
        }
        let committed = shared.commit(group).await;
        tokio::spawn(shared.clone().acknowledge(committed));
        let mut stamps = Vec::new();
        for (i, answer) in answers.into_iter().enumerate() {
            match answer.await.unwrap() {
                Ok(reply) => stamps.push(reply.ts),
                Err(status) => {
                    assert_eq!(i, 4, "{status}");
                    assert!(status.message().contains("/y is a file"), "{status}");
                }
            }
        }
        assert_eq!(stamps.len(), 4);
        assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
        let now = shared.clock.read_time(0);
        let x = shared.store.read_vertex(b"/x", now).unwrap().unwrap();
        assert_eq!(x.vtype, "job");
        assert!(x.attrs.is_empty(), "the delete missed {:?}", x.attrs);
        let before_delete = shared.store.read_vertex(b"/x", stamps[0]).unwrap().unwrap();
        assert_eq!(before_delete.attrs.len(), 1);
        let y = shared.store.read_vertex(b"/y", now).unwrap().unwrap();
        assert_eq!((y.vtype.as_str(), y.attrs.len()), ("file", 0));
        assert_eq!(shared.store.read_vertex(b"/z", now).unwrap(), None);
    }

    /// A write with an edge of a vertex whose partition is splitting waits
    /// outside the group until the split ends, then is committed; the rest
    /// of the group is not held up.
    #[tokio::test]
    async fn an_edge_of_a_splitting_vertex_waits_for_the_split() {
        let (_dir, shared) = one_server();
        shared
            .splitting
            .lock()
            .unwrap()
            .insert(b"job:1".to_vec(), Vec::new());
        let edge = rpc::Op {
            op: Some(op::Op::Edge(rpc::EdgePut {
                src: b"job:1".to_vec(),
                etype: "contains".into(),
                dst: b"job:1/rank:0".to_vec(),
                ..Default::default()
            })),
        };
        let (group, mut answers): (Vec<_>, Vec<_>) =
            [vec![edge], vec![vertex("job:2", "job", &[])]]
                .into_iter()
                .map(queued)
                .unzip();
        let committed = shared.commit(group).await;
        tokio::spawn(shared.clone().acknowledge(committed));
        let mut edge_answer = answers.remove(0);
        answers.remove(0).await.unwrap().unwrap();
        let edges = |shared: &Shared| {
            shared
                .store
                .scan_edges(b"job:1", None, shared.clock.read_time(0))
                .unwrap()
                .len()
        };
        assert!(edge_answer.try_recv().is_err(), "answered during the split");
        assert_eq!(edges(&shared), 0);
        shared.end_split(b"job:1");
        let reply = edge_answer.await.unwrap().unwrap();
        assert!(reply.stale.is_empty());
        assert_eq!(edges(&shared), 1);
        // Its reverse edge was delivered (to this, the only server).
        let back = shared
            .store
            .scan_edges(b"job:1/rank:0", None, shared.clock.read_time(0))
            .unwrap();
        assert_eq!(back.len(), 1);
    }
}
