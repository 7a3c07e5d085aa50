//! The gRPC service: each call handed to the server's shared state.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::validate::check_step;
use super::{internal, invalid, node_from, printable, Shared};
use crate::error::Result;
use crate::key::Section;
use crate::rpc;
use crate::rpc::meta_server::Meta;
use crate::rpc::split_bytes;
use crate::store::Batch;
use crate::tree::SplitState;

#[derive(Clone)]
pub(super) struct Service(pub(super) Arc<Shared>);

#[tonic::async_trait]
impl Meta for Service {
    async fn hello(
        &self,
        _: Request<rpc::HelloRequest>,
    ) -> Result<Response<rpc::HelloReply>, Status> {
        let c = &self.0.config;
        Ok(Response::new(rpc::HelloReply {
            index: u32::try_from(c.index).expect("servers fit u32"),
            cluster: c.cluster.addrs(),
            cluster_id: c.cluster.id.clone(),
            ids: c.cluster.ids(),
            partitioner: c.partitioner.name().to_string(),
            vnodes: c.vnodes,
            threshold: c.threshold,
            now: self.0.clock.read_time(0),
            schema: serde_json::to_string(&c.schema).expect("a schema serialises"),
            max_value_bytes: c.max_value_bytes as u64,
        }))
    }

    async fn write(
        &self,
        req: Request<rpc::WriteRequest>,
    ) -> Result<Response<rpc::WriteReply>, Status> {
        // In its own task: a client that gives up must not cancel a group
        // commit that other requests wait on.
        let shared = self.0.clone();
        tokio::spawn(async move { shared.write(req.into_inner()).await })
            .await
            .map_err(|e| Status::internal(format!("the write failed: {e}")))?
            .map(Response::new)
    }

    async fn read_vertex(
        &self,
        req: Request<rpc::ReadVertexRequest>,
    ) -> Result<Response<rpc::ReadVertexReply>, Status> {
        let req = req.into_inner();
        self.0.check_home(&req.id)?;
        let ts = self.0.read_time(req.as_of, req.session_ts)?;
        let state = self.0.store.read_vertex(&req.id, ts).map_err(internal)?;
        Ok(Response::new(match state {
            Some(s) => rpc::ReadVertexReply {
                found: true,
                vtype: s.vtype,
                attrs: s.attrs,
                ts,
            },
            None => rpc::ReadVertexReply {
                ts,
                ..Default::default()
            },
        }))
    }

    async fn scan_edges(
        &self,
        req: Request<rpc::ScanEdgesRequest>,
    ) -> Result<Response<rpc::ScanEdgesReply>, Status> {
        let req = req.into_inner();
        let ts = self.0.read_time(req.as_of, req.session_ts)?;
        let etype = (!req.etype.is_empty()).then_some(req.etype.as_str());
        let edges = self.0.local_edges(&req.src, etype, ts).await?;
        let x = self
            .0
            .parts
            .lock()
            .expect("parts lock")
            .get(&req.src)
            .map_or_else(SplitState::default, |p| p.x);
        Ok(Response::new(rpc::ScanEdgesReply {
            edges: edges
                .into_iter()
                .map(|e| rpc::Edge {
                    etype: e.etype,
                    dst: e.dst,
                    props: e.props,
                    ts: e.ts,
                })
                .collect(),
            split: split_bytes(x),
            ts,
        }))
    }

    async fn get_split(
        &self,
        req: Request<rpc::GetSplitRequest>,
    ) -> Result<Response<rpc::GetSplitReply>, Status> {
        let req = req.into_inner();
        self.0.check_home(&req.id)?;
        let x = self.0.store.split_state(&req.id).map_err(internal)?;
        Ok(Response::new(rpc::GetSplitReply {
            split: split_bytes(x),
        }))
    }

    async fn adopt(&self, req: Request<rpc::AdoptRequest>) -> Result<Response<rpc::Ack>, Status> {
        let req = req.into_inner();
        let node = node_from(req.node)?;
        if node.depth == 0
            || node.pos % 2 == 0
            || self.0.placement.node_server(&req.src, node) != self.0.me()
        {
            return Err(invalid(format!(
                "partition {} of {} is not this server's to adopt",
                req.node,
                printable(&req.src)
            )));
        }
        // Learn the split before the entries land, so that loading the
        // vertex's partitions never counts them against the old state.
        self.0.load_parts(&req.src).await?;
        let mut batch = Batch::default();
        let mut groups = HashSet::new();
        for e in &req.entries {
            let parsed = crate::key::parse(&e.key)
                .filter(|p| p.vertex == req.src && p.section == Section::Edge);
            let Some(parsed) = parsed else {
                return Err(invalid("an adopted entry is not an edge of the vertex"));
            };
            if crate::store::decode_edge_value(&e.value).is_none() {
                return Err(invalid(format!(
                    "the adopted edge {} has a value that is not an edge version",
                    printable(&e.key)
                )));
            }
            groups.insert((parsed.name, parsed.dst));
            batch.put_raw(&e.key, &e.value);
        }
        {
            let mut parts = self.0.parts.lock().expect("parts lock");
            let p = parts.get_mut(&req.src).expect("loaded above");
            // This server may not have seen the splits above the parent,
            // made by other servers since it last looked.
            p.x = p.x.with_ancestors_of(node);
            *p.count(node) += groups.len() as u64;
        }
        self.0.store.write(batch).map_err(internal)?;
        Ok(Response::new(rpc::Ack {}))
    }

    async fn mark_split(
        &self,
        req: Request<rpc::MarkSplitRequest>,
    ) -> Result<Response<rpc::Ack>, Status> {
        let req = req.into_inner();
        self.0.check_home(&req.src)?;
        let node = node_from(req.node)?;
        // Servers trust each other (the cluster's network is private, as
        // the paper's is); this only refuses what no server would send.
        if self.0.placement.tree().right_child(node).is_none() {
            return Err(invalid(format!("partition {} cannot split", req.node)));
        }
        self.0.mark_split(&req.src, node).await?;
        Ok(Response::new(rpc::Ack {}))
    }

    async fn frontier(
        &self,
        req: Request<rpc::FrontierRequest>,
    ) -> Result<Response<rpc::Ack>, Status> {
        let req = req.into_inner();
        check_step(req.step)?;
        self.0.travel(req.travel).enqueue(req.step, req.entries);
        Ok(Response::new(rpc::Ack {}))
    }

    async fn expand(
        &self,
        req: Request<rpc::ExpandRequest>,
    ) -> Result<Response<rpc::ExpandReply>, Status> {
        let req = req.into_inner();
        check_step(req.step)?;
        self.0.expand(req).await.map(Response::new)
    }

    async fn flow(&self, req: Request<rpc::FlowRequest>) -> Result<Response<rpc::Ack>, Status> {
        let req = req.into_inner();
        check_step(req.step)?;
        self.0.enqueue(req)?;
        Ok(Response::new(rpc::Ack {}))
    }

    async fn progress(
        &self,
        req: Request<rpc::ProgressRequest>,
    ) -> Result<Response<rpc::ProgressReply>, Status> {
        Ok(Response::new(
            self.0.progress(req.into_inner().travel).await,
        ))
    }

    async fn run_step(
        &self,
        req: Request<rpc::RunStepRequest>,
    ) -> Result<Response<rpc::RunStepReply>, Status> {
        let req = req.into_inner();
        check_step(req.step)?;
        self.0.run_step(req).await.map(Response::new)
    }

    async fn end_travel(
        &self,
        req: Request<rpc::EndTravelRequest>,
    ) -> Result<Response<rpc::Ack>, Status> {
        self.0.end_travel(req.into_inner().travel).await;
        Ok(Response::new(rpc::Ack {}))
    }

    async fn stats(
        &self,
        _: Request<rpc::StatsRequest>,
    ) -> Result<Response<rpc::StatsReply>, Status> {
        let c = &self.0.counters;
        Ok(Response::new(rpc::StatsReply {
            writes: c.writes.load(Ordering::Relaxed),
            splits: c.splits.load(Ordering::Relaxed),
            messages: c.messages.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            edges_moved: c.edges_moved.load(Ordering::Relaxed),
            travels: self.0.travels.lock().expect("travels lock").len() as u64,
        }))
    }
}
