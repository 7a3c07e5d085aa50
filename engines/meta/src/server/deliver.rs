//! Reverse edges: delivering the pending entries a write left, now and
//! again after a crash or while a peer is unreachable.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use prost::Message;

use super::Shared;
use crate::error::{Error, Result};
use crate::rpc::split_from;
use crate::rpc::{self, op};
use crate::store::Batch;
use crate::tree::SplitState;

/// The most reverse edges one delivery request carries (a few MB).
pub(super) const DELIVERY_OPS: usize = 8192;

/// `ops` in requests of at most [`DELIVERY_OPS`], in order. Cut from the
/// end, so each op moves at most once and a delivery that fits is sent as
/// it is.
pub(super) fn delivery_chunks(mut ops: Vec<rpc::Op>) -> Vec<Vec<rpc::Op>> {
    let mut chunks = Vec::new();
    while !ops.is_empty() {
        let last = (ops.len() - 1) / DELIVERY_OPS * DELIVERY_OPS;
        chunks.push(ops.split_off(last));
    }
    chunks.reverse();
    chunks
}

/// Failed redelivery attempts (one a second) between warnings while a
/// peer stays unreachable.
pub(super) const REDELIVERY_WARN_EVERY: u64 = 30;

impl Shared {
    /// Delivers every pending reverse edge to its server, when some may
    /// wait that no delivery in flight will take (`redeliver`): at start,
    /// and after a delivery failed. Otherwise every pending entry belongs
    /// to a delivery in flight, and scanning them (once a second) would
    /// send them twice.
    pub(super) async fn deliver_pending(self: &Arc<Self>) -> Result<(), Error> {
        if !self.redeliver.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let scanned = self.scan_pending();
        if scanned.is_err() {
            self.redeliver.store(true, Ordering::SeqCst);
        }
        let pending = scanned?;
        if pending.is_empty() {
            return Ok(());
        }
        self.deliver(pending).await
    }

    /// The pending reverse edges, each with its id.
    fn scan_pending(&self) -> Result<Vec<(Vec<u8>, rpc::EdgePut)>, Error> {
        let store_error = |source| Error::Store {
            path: self.config.data.clone(),
            source,
        };
        let mut pending = Vec::new();
        for (id, value) in self.store.pending().map_err(store_error)? {
            let corrupt = || store_error(crate::store::StoreError::Corrupt(id.clone()));
            let ts = u64::from_be_bytes(
                id.get(..8)
                    .ok_or_else(corrupt)?
                    .try_into()
                    .expect("8 bytes"),
            );
            let mut edge = rpc::EdgePut::decode(value.as_slice()).map_err(|_| corrupt())?;
            // Its version is the one in its id (stores written before
            // edges carried one hold 0 in the value).
            edge.ts = ts;
            pending.push((id, edge));
        }
        Ok(pending)
    }

    /// Writes reverse edges, each stamped with its own `ts`, on their
    /// servers, one request per server ([`DELIVERY_OPS`] edges at most
    /// each), re-routing those that meet a split; then drops them from the
    /// pending family. On a failure they stay pending, and the upkeep
    /// delivers them again.
    pub(super) async fn deliver(
        self: &Arc<Self>,
        group: Vec<(Vec<u8>, rpc::EdgePut)>,
    ) -> Result<(), Error> {
        let delivered = self.send_reverse(group).await;
        if delivered.is_err() {
            self.redeliver.store(true, Ordering::SeqCst);
        }
        delivered
    }

    async fn send_reverse(
        self: &Arc<Self>,
        group: Vec<(Vec<u8>, rpc::EdgePut)>,
    ) -> Result<(), Error> {
        self.pause_point("delivery-pending").await;
        let mut known: HashMap<Vec<u8>, SplitState> = HashMap::new();
        let (ids, mut todo): (Vec<Vec<u8>>, Vec<rpc::EdgePut>) = group.into_iter().unzip();
        for _ in 0..64 {
            if todo.is_empty() {
                self.pause_point("delivery-sent").await;
                let mut batch = Batch::default();
                for id in ids {
                    batch.remove_pending(id);
                }
                return self.store.write(batch).map_err(|source| Error::Store {
                    path: self.config.data.clone(),
                    source,
                });
            }
            let mut by_server: BTreeMap<usize, Vec<rpc::Op>> = BTreeMap::new();
            for mut edge in todo.drain(..) {
                let x = known.get(&edge.src).copied().unwrap_or_default();
                let (server, node) = self.placement.edge(&edge.src, &edge.dst, x);
                edge.node = node.index();
                by_server.entry(server).or_default().push(rpc::Op {
                    op: Some(op::Op::Edge(edge)),
                });
            }
            let mut calls = tokio::task::JoinSet::new();
            // At most `DELIVERY_OPS` a request: a backlog redelivered after a
            // long outage stays far below the message size limit.
            let requests = by_server.into_iter().flat_map(|(server, ops)| {
                delivery_chunks(ops)
                    .into_iter()
                    .map(move |chunk| (server, chunk))
            });
            for (server, ops) in requests {
                let req = rpc::WriteRequest {
                    session_ts: 0,
                    ops,
                    reverse: true,
                };
                let shared = self.clone();
                calls.spawn(async move {
                    let reply = if server == shared.me() {
                        shared.write(req.clone()).await
                    } else {
                        shared
                            .call(server, &req, |mut peer, req| async move {
                                peer.write(req).await
                            })
                            .await
                    };
                    (server, req.ops, reply)
                });
            }
            while let Some(joined) = calls.join_next().await {
                let (server, mut ops, reply) = joined.expect("deliveries do not panic");
                let reply =
                    reply.map_err(|s| Error::rpc(&self.config.cluster.servers[server].addr, &s))?;
                for stale in reply.stale {
                    let x = split_from(&stale.split).unwrap_or_default();
                    let entry = known.entry(stale.src).or_default();
                    *entry = SplitState(entry.0 | x.0);
                    if let Some(op::Op::Edge(e)) =
                        ops.get_mut(stale.op as usize).and_then(|o| o.op.take())
                    {
                        todo.push(e);
                    }
                }
            }
        }
        Err(Error::Cluster(
            "reverse edges keep meeting stale partitions".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delivery of 9,000 edges goes in two requests, 8,192 then 808,
    /// every edge once and in order.
    #[test]
    fn a_large_delivery_is_cut_into_requests_in_order() {
        let ops: Vec<rpc::Op> = (0..9_000u64)
            .map(|ts| rpc::Op {
                op: Some(op::Op::Edge(rpc::EdgePut {
                    ts,
                    ..Default::default()
                })),
            })
            .collect();
        let chunks = delivery_chunks(ops.clone());
        let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
        assert_eq!(sizes, [DELIVERY_OPS, 9_000 - DELIVERY_OPS]);
        assert_eq!(chunks.concat(), ops);
        assert!(delivery_chunks(Vec::new()).is_empty());
    }
}
