//! Partition splits (DIDO, GIGA+), outside the write lock.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tonic::Status;

use super::write::Queued;
use super::{internal, Shared};
use crate::error::Result;
use crate::rpc::{self, op};
use crate::store::Batch;
use crate::tree::{Node, SplitState};

/// Partitions of one vertex to split, and the requests (by their place in
/// the group) that grew them.
#[derive(Default)]
pub(super) struct SplitJob {
    pub(super) leaves: BTreeSet<Node>,
    pub(super) requests: Vec<usize>,
}

impl Shared {
    /// `q`, unless it has an edge of a vertex that is splitting: then it
    /// waits for that split, which queues it again.
    pub(super) fn unless_splitting(&self, q: Queued) -> Option<Queued> {
        let mut splitting = self.splitting.lock().expect("splitting lock");
        if splitting.is_empty() {
            return Some(q);
        }
        let busy = q.req.ops.iter().find_map(|o| match &o.op {
            Some(op::Op::Edge(e)) if splitting.contains_key(&e.src) => Some(e.src.clone()),
            _ => None,
        });
        match busy {
            Some(v) => {
                splitting.get_mut(&v).expect("found above").push(q);
                None
            }
            None => Some(q),
        }
    }

    /// Whether partition `leaf` of `v` may hold more than the threshold
    /// (its count is an upper bound) and can split.
    pub(super) fn over_threshold(&self, v: &[u8], leaf: Node) -> bool {
        let parts = self.parts.lock().expect("parts lock");
        let Some(p) = parts.get(v) else {
            return false;
        };
        !p.x.is_split(leaf)
            && p.counted(leaf) > u64::from(self.config.threshold)
            && self.placement.tree().right_child(leaf).is_some()
    }

    /// Runs `job`'s splits of `v`, then queues the writes that waited
    /// for them and commits them.
    pub(super) async fn split_job(
        self: &Arc<Self>,
        v: &[u8],
        job: &SplitJob,
    ) -> Result<u32, Status> {
        let splits = async {
            let mut splits = 0;
            for &leaf in &job.leaves {
                splits += self.split_while_over(v, leaf).await?;
            }
            Ok(splits)
        }
        .await;
        self.end_split(v);
        splits
    }

    /// Ends `v`'s split: the writes that waited for it are queued again
    /// and committed.
    pub(super) fn end_split(self: &Arc<Self>, v: &[u8]) {
        let waiting = self
            .splitting
            .lock()
            .expect("splitting lock")
            .remove(v)
            .unwrap_or_default();
        if !waiting.is_empty() {
            self.write_queue
                .lock()
                .expect("write queue lock")
                .extend(waiting);
            let shared = self.clone();
            tokio::spawn(async move {
                let _lock = shared.write_lock.lock().await;
                shared.commit_queue().await;
            });
        }
    }

    /// Splits `leaf` of `v`, and its halves in turn, while one holds more
    /// than the threshold and can split. Returns the number of splits.
    pub(super) async fn split_while_over(&self, v: &[u8], leaf: Node) -> Result<u32, Status> {
        let tree = self.placement.tree();
        let mut todo = vec![leaf];
        let mut splits = 0;
        let threshold = u64::from(self.config.threshold);
        while let Some(node) = todo.pop() {
            let Some(right) = tree
                .right_child(node)
                .filter(|_| self.over_threshold(v, node))
            else {
                continue;
            };
            let exact = self.count_edges(v, node)?;
            if exact <= threshold {
                let mut parts = self.parts.lock().expect("parts lock");
                *parts.get_mut(v).expect("loaded by the write").count(node) = exact;
                continue;
            }
            self.split(v, node, right).await?;
            splits += 1;
            todo.push(tree.left_child(node));
            if self.placement.node_server(v, right) == self.me() {
                todo.push(right);
            }
        }
        Ok(splits)
    }

    /// The distinct edges (type, destination) in partition `node` of `v`.
    pub(super) fn count_edges(&self, v: &[u8], node: Node) -> Result<u64, Status> {
        let tree = self.placement.tree();
        let mut groups = Vec::new();
        self.store
            .edge_entries(v, |etype, dst| {
                if tree.in_subtree(self.placement.route(v, dst), node) && self.is_local(v, dst) {
                    groups.push((etype.to_vec(), dst.to_vec()));
                }
                false
            })
            .map_err(internal)?;
        groups.dedup();
        Ok(groups.len() as u64)
    }

    pub(super) async fn split(&self, v: &[u8], node: Node, right: Node) -> Result<(), Status> {
        let tree = self.placement.tree();
        let target = self.placement.node_server(v, right);
        let moving = self
            .store
            .edge_entries(v, |_, dst| {
                tree.in_subtree(self.placement.route(v, dst), right) && self.is_local(v, dst)
            })
            .map_err(internal)?;
        let mut groups: Vec<&[u8]> = moving.iter().map(|(k, _)| &k[..k.len() - 8]).collect();
        groups.dedup();
        let moved = groups.len() as u64;
        if target != self.me() {
            let req = rpc::AdoptRequest {
                src: v.to_vec(),
                node: right.index(),
                entries: moving
                    .iter()
                    .map(|(key, value)| rpc::RawEntry {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect(),
            };
            self.call(target, &req, |mut peer, req| async move {
                peer.adopt(req).await
            })
            .await?;
            self.pause_point("split-adopted").await;
        }
        {
            let mut parts = self.parts.lock().expect("parts lock");
            let p = parts.get_mut(v).expect("loaded by the write");
            p.x = p.x.with_split(node);
            let before = std::mem::take(p.count(node));
            *p.count(tree.left_child(node)) += before.saturating_sub(moved);
            if target == self.me() {
                *p.count(right) += moved;
            }
            p.counts.retain(|(n, _)| *n != node);
        }
        self.mark_split(v, node).await?;
        self.pause_point("split-marked").await;
        if target != self.me() {
            let mut batch = Batch::default();
            for (key, _) in &moving {
                batch.delete_raw(key);
            }
            self.store.write(batch).map_err(internal)?;
        }
        self.counters.splits.fetch_add(1, Ordering::Relaxed);
        self.counters
            .edges_moved
            .fetch_add(moved, Ordering::Relaxed);
        Ok(())
    }

    pub(super) async fn mark_split(&self, v: &[u8], node: Node) -> Result<(), Status> {
        let home = self.placement.home(v);
        if home == self.me() {
            // Two servers may split two partitions of one vertex at once.
            let _lock = self.split_lock.lock().expect("split lock");
            let x = self
                .store
                .split_state(v)
                .map_err(internal)?
                .with_split(node);
            let mut batch = Batch::default();
            batch.put_split(v, x);
            self.store.write(batch).map_err(internal)?;
            if let Some(p) = self.parts.lock().expect("parts lock").get_mut(v) {
                p.x = SplitState(p.x.0 | x.0);
            }
            Ok(())
        } else {
            let req = rpc::MarkSplitRequest {
                src: v.to_vec(),
                node: node.index(),
            };
            self.call(home, &req, |mut peer, req| async move {
                peer.mark_split(req).await
            })
            .await
            .map(drop)
        }
    }
}
