//! A server's part of a level-synchronous traversal: the step's frontier,
//! visits, local and remote expansion, and prefetching (paper §4.6).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::Status;

use super::flow;
use super::{internal, invalid, printable, Shared};
use crate::error::Result;
use crate::rpc;
use crate::store::{EdgeVersion, VertexState};
use crate::travel::{edge_passes, vertex_passes, Filter};
use crate::tree::SplitState;

/// What a prefetch loaded for one step: vertices, and (vertex, relation)
/// local edges.
#[derive(Debug, Default)]
pub(super) struct Cache {
    pub(super) vertices: HashMap<Vec<u8>, Option<VertexState>>,
    pub(super) edges: HashMap<(Vec<u8>, String), Vec<EdgeVersion>>,
}

#[derive(Debug, Default)]
pub(super) struct TravelState {
    /// When a request last named it, in ms since the server started.
    pub(super) last_used_ms: AtomicU64,
    pub(super) frontier: Mutex<HashMap<u32, Vec<rpc::Entry>>>,
    pub(super) cache: Arc<Mutex<Cache>>,
    pub(super) prefetch: Mutex<Option<(Arc<AtomicBool>, tokio::task::JoinHandle<u64>)>>,
    /// The asynchronous engine's queues and counts.
    pub(super) flow: Mutex<flow::Flowing>,
    /// Notified when the asynchronous engine's worker goes idle.
    pub(super) flow_idle: tokio::sync::Notify,
}

impl TravelState {
    /// Adds `entries` to step `step`'s frontier here.
    pub(super) fn enqueue(&self, step: u32, entries: Vec<rpc::Entry>) {
        self.frontier
            .lock()
            .expect("frontier lock")
            .entry(step)
            .or_default()
            .extend(entries);
    }

    /// Tells the traversal's prefetcher, if one runs, to stop; returns its
    /// task, which ends with the vertices it prefetched.
    fn stop_prefetch(&self) -> Option<tokio::task::JoinHandle<u64>> {
        let (stop, task) = self.prefetch.lock().expect("prefetch lock").take()?;
        stop.store(true, Ordering::Relaxed);
        Some(task)
    }
}

impl Shared {
    pub(super) fn travel(&self, id: u64) -> Arc<TravelState> {
        let mut travels = self.travels.lock().expect("travels lock");
        let state = travels.entry(id).or_default();
        // Under the lock, so the upkeep never drops a state being used.
        state
            .last_used_ms
            .store(self.uptime_ms(), Ordering::Relaxed);
        state.clone()
    }

    pub(super) fn has_ended(&self, travel: u64) -> bool {
        self.ended.lock().expect("ended lock").contains_key(&travel)
    }

    /// Drops a traversal's state at its client's request; its late
    /// batches are dropped too.
    pub(super) async fn end_travel(&self, travel: u64) {
        self.ended
            .lock()
            .expect("ended lock")
            .insert(travel, self.uptime_ms());
        let removed = self.travels.lock().expect("travels lock").remove(&travel);
        if let Some(state) = removed {
            if let Some(task) = state.stop_prefetch() {
                task.await.ok();
            }
        }
    }

    pub(super) fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Drops the state of traversals no request has named for
    /// `travel_idle` (their client died mid-traversal), stopping their
    /// prefetchers, and forgets ended traversals as old.
    pub(super) fn drop_idle_travels(&self) {
        let now = self.uptime_ms();
        let idle = u64::try_from(self.config.travel_idle.as_millis()).unwrap_or(u64::MAX);
        self.travels
            .lock()
            .expect("travels lock")
            .retain(|_, state| {
                let keep = now.saturating_sub(state.last_used_ms.load(Ordering::Relaxed)) < idle;
                if !keep {
                    state.stop_prefetch();
                }
                keep
            });
        self.ended
            .lock()
            .expect("ended lock")
            .retain(|_, at| now.saturating_sub(*at) < idle);
    }

    /// Sends `entries` (by home server) as step `step`'s frontier.
    pub(super) async fn send_frontier(
        self: &Arc<Self>,
        travel: u64,
        step: u32,
        by_server: HashMap<usize, Vec<rpc::Entry>>,
        counts: &mut rpc::StepCounts,
    ) -> Result<(), Status> {
        let mut calls = tokio::task::JoinSet::new();
        for (server, entries) in by_server {
            if server == self.me() {
                self.travel(travel).enqueue(step, entries);
                continue;
            }
            let req = rpc::FrontierRequest {
                travel,
                step,
                entries,
            };
            self.send_step(
                &mut calls,
                server,
                counts,
                req,
                |mut peer, req| async move { peer.frontier(req).await },
            );
        }
        while let Some(done) = calls.join_next().await {
            done.map_err(internal)??;
        }
        Ok(())
    }

    /// Scans the local partition of each entry's vertex for `hop`, and
    /// returns the destinations by their home server.
    pub(super) async fn expand_local(
        &self,
        travel: &TravelState,
        entries: &[rpc::Entry],
        hop: &rpc::Hop,
        as_of: u64,
        paths: bool,
        counts: &mut rpc::StepCounts,
    ) -> Result<HashMap<usize, Vec<rpc::Entry>>, Status> {
        let filters: Vec<Filter> = hop
            .edge_filters
            .iter()
            .filter_map(Filter::from_rpc)
            .collect();
        let mut out: HashMap<usize, Vec<rpc::Entry>> = HashMap::new();
        for entry in entries {
            let cached = travel
                .cache
                .lock()
                .expect("cache lock")
                .edges
                .remove(&(entry.id.clone(), hop.etype.clone()));
            let edges = match cached {
                Some(edges) => {
                    counts.prefetch_hits += 1;
                    edges
                }
                None => self.local_edges(&entry.id, Some(&hop.etype), as_of).await?,
            };
            counts.partition_scans += 1;
            counts.edge_reads += edges.len() as u64;
            for edge in edges {
                if !edge_passes(&filters, &edge.props) {
                    continue;
                }
                counts.edges += 1;
                let home = self.placement.home(&edge.dst);
                if home != self.me() {
                    counts.stat_comm += 1;
                }
                let path = if paths {
                    let mut p = entry.path.clone();
                    p.push(entry.id.clone());
                    p
                } else {
                    Vec::new()
                };
                out.entry(home)
                    .or_default()
                    .push(rpc::Entry { id: edge.dst, path });
            }
        }
        Ok(out)
    }

    pub(super) fn prefetch(
        self: &Arc<Self>,
        travel: u64,
        step: u32,
        hop: Option<rpc::Hop>,
        as_of: u64,
    ) {
        let state = self.travel(travel);
        let stop = Arc::new(AtomicBool::new(false));
        let shared = self.clone();
        let flag = stop.clone();
        let cache = state.cache.clone();
        let task = tokio::task::spawn_blocking(move || {
            let mut loaded = 0u64;
            let mut seen = HashSet::new();
            // A client that vanished mid-traversal never stops it: give up.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !flag.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
                let ids: Vec<Vec<u8>> = {
                    let frontier = state.frontier.lock().expect("frontier lock");
                    frontier
                        .get(&step)
                        .into_iter()
                        .flatten()
                        .filter(|e| !seen.contains(&e.id))
                        .map(|e| e.id.clone())
                        .collect()
                };
                if ids.is_empty() {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                for id in ids {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    seen.insert(id.clone());
                    loaded += shared.prefetch_vertex(&cache, &id, hop.as_ref(), as_of);
                }
            }
            loaded
        });
        *self.travel(travel).prefetch.lock().expect("prefetch lock") = Some((stop, task));
    }

    /// Loads `id`, its local edges of the hop and their local destinations
    /// into `cache`; returns the entries loaded. Skips what needs another
    /// server (the paper prefetches nothing remote).
    pub(super) fn prefetch_vertex(
        &self,
        cache: &Mutex<Cache>,
        id: &[u8],
        hop: Option<&rpc::Hop>,
        as_of: u64,
    ) -> u64 {
        let mut loaded = 0;
        let mut load_vertex = |v: &[u8]| {
            if cache.lock().expect("cache lock").vertices.contains_key(v) {
                return;
            }
            if let Ok(state) = self.store.read_vertex(v, as_of) {
                cache
                    .lock()
                    .expect("cache lock")
                    .vertices
                    .insert(v.to_vec(), state);
                loaded += 1;
            }
        };
        load_vertex(id);
        let Some(hop) = hop else { return loaded };
        let known = !self.config.partitioner.splits()
            || self.parts.lock().expect("parts lock").contains_key(id)
            || self.placement.home(id) == self.me();
        if !known {
            return loaded;
        }
        let Ok(mut edges) = self.store.scan_edges(id, Some(&hop.etype), as_of) else {
            return loaded;
        };
        edges.retain(|e| self.is_local(id, &e.dst));
        for e in &edges {
            if self.placement.home(&e.dst) == self.me() {
                load_vertex(&e.dst);
            }
        }
        cache
            .lock()
            .expect("cache lock")
            .edges
            .insert((id.to_vec(), hop.etype.clone()), edges);
        loaded + 1
    }

    pub(super) fn counts(&self, step: u32) -> rpc::StepCounts {
        rpc::StepCounts {
            server: u32::try_from(self.me()).expect("servers fit u32"),
            step,
            ..Default::default()
        }
    }

    /// Reads each entry's vertex as of `as_of` (from the prefetch cache when
    /// it is there) and keeps those that exist and pass `filters`.
    pub(super) fn visit(
        &self,
        state: &TravelState,
        entries: Vec<rpc::Entry>,
        filters: &[rpc::Filter],
        as_of: u64,
        counts: &mut rpc::StepCounts,
    ) -> Result<Vec<rpc::Entry>, Status> {
        let filters: Vec<Filter> = filters.iter().filter_map(Filter::from_rpc).collect();
        let mut passed = Vec::new();
        for entry in entries {
            if self.placement.home(&entry.id) != self.me() {
                return Err(invalid(format!(
                    "vertex {} is not homed here",
                    printable(&entry.id)
                )));
            }
            let cached = state
                .cache
                .lock()
                .expect("cache lock")
                .vertices
                .remove(&entry.id);
            let vertex = match cached {
                Some(v) => {
                    counts.prefetch_hits += 1;
                    v
                }
                None => self.store.read_vertex(&entry.id, as_of).map_err(internal)?,
            };
            counts.vertex_reads += 1;
            if vertex.is_some_and(|v| vertex_passes(&filters, &v.vtype, &v.attrs)) {
                passed.push(entry);
            }
        }
        Ok(passed)
    }

    /// The entries whose vertices have partitions on other servers, by
    /// server (this is the vertices' home, which knows their split state).
    pub(super) fn remote_partitions(
        &self,
        passed: &[rpc::Entry],
        counts: &mut rpc::StepCounts,
    ) -> Result<HashMap<usize, Vec<rpc::Entry>>, Status> {
        let mut remote: HashMap<usize, Vec<rpc::Entry>> = HashMap::new();
        for entry in passed {
            let x = if self.config.partitioner.splits() {
                self.store.split_state(&entry.id).map_err(internal)?
            } else {
                SplitState::default()
            };
            for server in self
                .placement
                .scan_servers(&entry.id, x)
                .into_iter()
                .skip(1)
            {
                counts.stat_comm += 1;
                remote.entry(server).or_default().push(entry.clone());
            }
        }
        Ok(remote)
    }

    /// Sends `remote` partitions of this step's vertices to be expanded,
    /// and returns the counts of the servers that expanded them.
    pub(super) async fn expand_remote(
        self: &Arc<Self>,
        req: (u64, u32, u64, bool),
        hop: &rpc::Hop,
        remote: HashMap<usize, Vec<rpc::Entry>>,
        counts: &mut rpc::StepCounts,
    ) -> Result<Vec<rpc::StepCounts>, Status> {
        let (travel, step, as_of, paths) = req;
        let mut calls = tokio::task::JoinSet::new();
        for (server, entries) in remote {
            let req = rpc::ExpandRequest {
                travel,
                step,
                hop: Some(hop.clone()),
                as_of,
                entries,
                paths,
            };
            self.send_step(
                &mut calls,
                server,
                counts,
                req,
                |mut peer, req| async move { peer.expand(req).await },
            );
        }
        let mut work = Vec::new();
        while let Some(done) = calls.join_next().await {
            work.extend(done.map_err(internal)??.counts);
        }
        Ok(work)
    }

    pub(super) async fn run_step(
        self: &Arc<Self>,
        req: rpc::RunStepRequest,
    ) -> Result<rpc::RunStepReply, Status> {
        self.check_session(req.as_of)?;
        self.check_hops([&req.hop, &req.next_hop])?;
        let state = self.travel(req.travel);
        let mut counts = self.counts(req.step);
        counts.prefetched = match state.stop_prefetch() {
            Some(task) => task.await.unwrap_or(0),
            None => 0,
        };
        let mut entries = state
            .frontier
            .lock()
            .expect("frontier lock")
            .remove(&req.step)
            .unwrap_or_default();
        if req.paths {
            entries.sort_by(|a, b| (&a.id, &a.path).cmp(&(&b.id, &b.path)));
            entries.dedup_by(|a, b| a.id == b.id && a.path == b.path);
        } else {
            entries.sort_by(|a, b| a.id.cmp(&b.id));
            entries.dedup_by(|a, b| a.id == b.id);
        }
        let passed = self.visit(&state, entries, &req.vertex_filters, req.as_of, &mut counts)?;
        let mut reply = rpc::RunStepReply::default();
        if let Some(hop) = &req.hop {
            let mut next = self
                .expand_local(&state, &passed, hop, req.as_of, req.paths, &mut counts)
                .await?;
            let remote = self.remote_partitions(&passed, &mut counts)?;
            reply.work = self
                .expand_remote(
                    (req.travel, req.step, req.as_of, req.paths),
                    hop,
                    remote,
                    &mut counts,
                )
                .await?;
            let step = req.step + 1;
            let mine = next.remove(&self.me());
            self.send_frontier(req.travel, step, next, &mut counts)
                .await?;
            if let Some(mine) = mine {
                state.enqueue(step, mine);
            }
            if req.prefetch && self.prefetches {
                self.prefetch(req.travel, step, req.next_hop.clone(), req.as_of);
            }
        }
        if req.keep {
            reply.kept = passed;
        }
        reply.work.push(counts);
        Ok(reply)
    }

    pub(super) async fn expand(
        self: &Arc<Self>,
        req: rpc::ExpandRequest,
    ) -> Result<rpc::ExpandReply, Status> {
        let hop = req.hop.ok_or_else(|| invalid("expand names no hop"))?;
        let state = self.travel(req.travel);
        let mut counts = self.counts(req.step);
        let next = self
            .expand_local(
                &state,
                &req.entries,
                &hop,
                req.as_of,
                req.paths,
                &mut counts,
            )
            .await?;
        self.send_frontier(req.travel, req.step + 1, next, &mut counts)
            .await?;
        Ok(rpc::ExpandReply {
            counts: Some(counts),
        })
    }
}
