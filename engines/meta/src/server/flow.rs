//! A server's part of an asynchronous traversal (GraphTrek's way; its
//! internals are not in the paper, so this is our design).
//!
//! There is no barrier. A `Flow` call drops a batch of entries into the
//! queue of its step and returns at once. One worker per traversal works
//! the queues, lowest step first, taking everything queued for a step in
//! one go, so batches that arrive while it is busy are merged. A batch is
//! visited (a per-step visited set gives each vertex one visit per step,
//! as the synchronous engine does), its local partitions are scanned, and
//! what it produces goes on as one batch per server: destinations to their
//! homes for the next step, and a split vertex to the servers of its other
//! partitions, which scan them (`scan` batches) and send their
//! destinations on themselves.
//!
//! **Termination by counting.** Each server counts the batches it has
//! sent (before sending) and the batches it has finished (after the sends
//! they caused were counted). The client polls every server (`Progress`);
//! when the finished count of one poll equals the sent count of the next
//! (with its own start batches added), no batch was unfinished at the end
//! of the first poll, and none can appear after, so the traversal is over
//! (Mattern's four-counter method). A poll waits for the server to go idle,
//! or 50 ms, so an ending traversal takes about two polls.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tonic::Status;

use super::step::TravelState;
use super::{internal, invalid, Shared};
use crate::rpc;

/// How long a `Progress` call waits for a busy server to go idle.
const PROGRESS_WAIT: Duration = Duration::from_millis(50);

/// A visit: step, vertex, path (empty unless paths are kept).
type Visit = (u32, Vec<u8>, Vec<Vec<u8>>);

/// One server's part of an asynchronous traversal.
#[derive(Debug, Default)]
pub(super) struct Flowing {
    /// What each step does; set by the first batch.
    plan: Arc<Vec<rpc::StepSpec>>,
    as_of: u64,
    paths: bool,
    /// Entries waiting, by (step, scan), with the number of batches they
    /// came in.
    queues: BTreeMap<(u32, bool), (Vec<rpc::Entry>, u64)>,
    /// A worker is draining the queues.
    working: bool,
    visited: HashSet<Visit>,
    sent: u64,
    done: u64,
    /// The first failure: its gRPC code and message.
    error: Option<(i32, String)>,
    /// Kept entries and counts not yet collected by `Progress`.
    kept: Vec<rpc::Kept>,
    work: BTreeMap<u32, rpc::StepCounts>,
}

impl Flowing {
    /// Adds a batch of `entries` to the queue of (`step`, `scan`).
    fn queue(&mut self, step: u32, scan: bool, entries: Vec<rpc::Entry>) {
        let queue = self.queues.entry((step, scan)).or_default();
        queue.0.extend(entries);
        queue.1 += 1;
    }

    fn fail(&mut self, status: &Status) {
        self.error
            .get_or_insert_with(|| (status.code() as i32, status.message().to_string()));
    }
}

/// Ends a worker that panicked as a failure the client hears of, instead
/// of a traversal that never finishes.
struct PanicGuard<'a>(&'a TravelState);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut f = self.0.flow.lock().unwrap_or_else(|p| p.into_inner());
            f.fail(&Status::internal("the traversal's worker panicked"));
            f.working = false;
            drop(f);
            self.0.flow_idle.notify_waiters();
        }
    }
}

/// Adds `c`'s counts into `into`.
fn add_counts(into: &mut rpc::StepCounts, c: &rpc::StepCounts) {
    into.vertex_reads += c.vertex_reads;
    into.partition_scans += c.partition_scans;
    into.edge_reads += c.edge_reads;
    into.edges += c.edges;
    into.stat_comm += c.stat_comm;
    into.messages += c.messages;
    into.bytes += c.bytes;
    into.prefetch_hits += c.prefetch_hits;
    into.prefetched += c.prefetched;
}

/// One batch taken from a queue.
struct Taken {
    step: u32,
    scan: bool,
    entries: Vec<rpc::Entry>,
    plan: Arc<Vec<rpc::StepSpec>>,
    as_of: u64,
    paths: bool,
}

impl Shared {
    fn flowing<'a>(&self, state: &'a TravelState) -> std::sync::MutexGuard<'a, Flowing> {
        state.flow.lock().expect("flow lock")
    }

    /// Queues a `Flow` batch, and starts the traversal's worker here if it
    /// is not running.
    pub(super) fn enqueue(self: &Arc<Self>, req: rpc::FlowRequest) -> Result<(), Status> {
        self.check_session(req.as_of)?;
        self.check_hops(req.plan.iter().map(|spec| &spec.hop))?;
        let Some(spec) = req.plan.get(req.step as usize) else {
            return Err(invalid(format!(
                "step {} is past the plan's {} steps",
                req.step,
                req.plan.len()
            )));
        };
        if req.scan && spec.hop.is_none() {
            return Err(invalid(format!(
                "a scan at step {}, which follows no edges",
                req.step
            )));
        }
        if req.plan.last().is_some_and(|last| last.hop.is_some()) {
            return Err(invalid("the plan's last step follows edges"));
        }
        if self.has_ended(req.travel) {
            // A late batch of a traversal its client has ended.
            return Ok(());
        }
        let state = self.travel(req.travel);
        let start = {
            let mut f = self.flowing(&state);
            if f.plan.is_empty() {
                f.plan = Arc::new(req.plan);
                f.as_of = req.as_of;
                f.paths = req.paths;
            } else if *f.plan != req.plan || (f.as_of, f.paths) != (req.as_of, req.paths) {
                return Err(invalid(format!(
                    "a batch of traversal {} with another plan",
                    req.travel
                )));
            }
            f.queue(req.step, req.scan, req.entries);
            !std::mem::replace(&mut f.working, true)
        };
        if start {
            tokio::spawn(self.clone().work_queues(req.travel, state));
        }
        Ok(())
    }

    /// Drains a traversal's queues until they are empty.
    async fn work_queues(self: Arc<Self>, travel: u64, state: Arc<TravelState>) {
        let _guard = PanicGuard(&state);
        loop {
            let (taken, batches) = {
                let mut f = self.flowing(&state);
                if self.has_ended(travel) {
                    f.queues.clear();
                }
                let Some(((step, scan), (entries, batches))) = f.queues.pop_first() else {
                    f.working = false;
                    drop(f);
                    state.flow_idle.notify_waiters();
                    return;
                };
                let taken = Taken {
                    step,
                    scan,
                    entries,
                    plan: f.plan.clone(),
                    as_of: f.as_of,
                    paths: f.paths,
                };
                (taken, batches)
            };
            let failed = self.run_batch(travel, &state, taken).await.err();
            let mut f = self.flowing(&state);
            if let Some(e) = failed {
                f.fail(&e);
            }
            f.done += batches;
        }
    }

    /// Visits (unless it is a scan), expands and sends on one taken batch;
    /// its kept entries and counts are recorded before it counts as done.
    async fn run_batch(
        self: &Arc<Self>,
        travel: u64,
        state: &TravelState,
        t: Taken,
    ) -> Result<(), Status> {
        let spec = t
            .plan
            .get(t.step as usize)
            .ok_or_else(|| invalid(format!("step {} is past the plan", t.step)))?;
        let mut counts = self.counts(t.step);
        let passed = if t.scan {
            t.entries
        } else {
            let fresh: Vec<rpc::Entry> = {
                let mut f = self.flowing(state);
                t.entries
                    .into_iter()
                    .filter(|e| {
                        let path = if t.paths { e.path.clone() } else { Vec::new() };
                        f.visited.insert((t.step, e.id.clone(), path))
                    })
                    .collect()
            };
            let passed = self.visit(state, fresh, &spec.vertex_filters, t.as_of, &mut counts)?;
            if spec.keep {
                self.flowing(state)
                    .kept
                    .extend(passed.iter().map(|e| rpc::Kept {
                        step: t.step,
                        entry: Some(e.clone()),
                    }));
            }
            passed
        };
        let mut out = Vec::new();
        if let Some(hop) = &spec.hop {
            if !t.scan {
                for (server, entries) in self.remote_partitions(&passed, &mut counts)? {
                    out.push((server, t.step, true, entries));
                }
            }
            let next = self
                .expand_local(state, &passed, hop, t.as_of, t.paths, &mut counts)
                .await?;
            for (server, entries) in next {
                out.push((server, t.step + 1, false, entries));
            }
        }
        let mut calls = tokio::task::JoinSet::new();
        for (server, step, scan, entries) in out {
            if server == self.me() {
                let mut f = self.flowing(state);
                f.sent += 1;
                f.queue(step, scan, entries);
                continue;
            }
            self.flowing(state).sent += 1;
            let req = rpc::FlowRequest {
                travel,
                step,
                as_of: t.as_of,
                paths: t.paths,
                plan: t.plan.to_vec(),
                entries,
                scan,
            };
            self.send_step(
                &mut calls,
                server,
                &mut counts,
                req,
                |mut peer, req| async move { peer.flow(req).await },
            );
        }
        add_counts(
            self.flowing(state)
                .work
                .entry(t.step)
                .or_insert_with(|| self.counts(t.step)),
            &counts,
        );
        while let Some(done) = calls.join_next().await {
            done.map_err(internal)??;
        }
        Ok(())
    }

    /// This server's progress on a traversal, once it is idle or after
    /// [`PROGRESS_WAIT`]; hands over the kept entries and counts gathered
    /// since the last call.
    pub(super) async fn progress(&self, travel: u64) -> rpc::ProgressReply {
        let state = self.travel(travel);
        let deadline = tokio::time::Instant::now() + PROGRESS_WAIT;
        loop {
            let idle = state.flow_idle.notified();
            if !self.flowing(&state).working {
                break;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                break;
            }
        }
        let mut f = self.flowing(&state);
        let (error_code, error) = f.error.clone().unwrap_or_default();
        rpc::ProgressReply {
            sent: f.sent,
            done: f.done,
            error,
            error_code,
            kept: std::mem::take(&mut f.kept),
            work: std::mem::take(&mut f.work).into_values().collect(),
            instance: self.instance,
        }
    }
}
