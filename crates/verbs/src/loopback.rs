//! The `loopback` fabric: every node is a thread of this process and remote
//! memory is shared memory. Operations execute in the posting thread, at
//! once, against the target's registered words; multi-word accesses copy
//! word by word, so a READ racing a WRITE really can return a mix. With a
//! [`CostModel`], each operation also gets a modelled completion time on the
//! poster's virtual clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::counters::CounterTable;
use crate::error::{Error, Result, VerbError};
use crate::node::{Fabric, Node};
use crate::queue::{CompletionQueue, Mailbox};
use crate::region::{Region, Registry};
use crate::wr::{Completion, Op, Output, WorkRequest};
use crate::{CostModel, NodeRank};

/// A loopback job's shape.
#[derive(Debug, Clone)]
pub struct Config {
    /// Number of nodes (threads).
    pub nodes: u32,
    /// Model network time (`None`: no virtual clock).
    pub cost: Option<CostModel>,
    /// How long collectives and blocking calls wait.
    pub timeout: Duration,
}

impl Config {
    /// `nodes` nodes, no cost model, a 60 s timeout.
    pub fn new(nodes: u32) -> Self {
        Self {
            nodes,
            cost: None,
            timeout: Duration::from_secs(60),
        }
    }
}

/// Creates the nodes of a loopback job, by rank; hand each to its own thread.
///
/// # Errors
/// [`Error::InvalidArgument`] for zero nodes.
pub fn cluster(config: &Config) -> Result<Vec<Node>> {
    if config.nodes == 0 {
        return Err(Error::invalid("nodes", "a job needs at least one node"));
    }
    let n = config.nodes as usize;
    let shared = Arc::new(Shared {
        targets: (0..n)
            .map(|_| Target {
                registry: Arc::new(Registry::default()),
                mailbox: Mailbox::default(),
                departed: AtomicU64::new(0),
            })
            .collect(),
        gather: Mutex::new(Gather {
            generation: 0,
            slots: vec![None; n],
            arrived: 0,
            results: Arc::new(Vec::new()),
        }),
        gathered: Condvar::new(),
        cost: config.cost,
        departures: AtomicU64::new(0),
    });
    Ok((0..config.nodes)
        .map(|rank| {
            let fabric = Loopback {
                rank: NodeRank(rank),
                timeout: config.timeout,
                shared: Arc::clone(&shared),
            };
            let counters = Arc::new(CounterTable::new(config.nodes));
            Node::new(
                NodeRank(rank),
                config.nodes,
                "loopback",
                config.timeout,
                counters,
                Box::new(fabric),
            )
        })
        .collect())
}

/// Runs `body` on every node of a loopback job, each in its own thread, and
/// returns the results by rank. A panic in any node is propagated after all
/// threads ended (the others see that node leave the job).
///
/// # Errors
/// As [`cluster`].
pub fn run<T: Send>(config: &Config, body: impl Fn(Node) -> T + Sync) -> Result<Vec<T>> {
    let nodes = cluster(config)?;
    let body = &body;
    Ok(std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .into_iter()
            .map(|node| {
                std::thread::Builder::new()
                    .name(format!("node-{}", node.rank()))
                    .spawn_scoped(scope, move || body(node))
                    .expect("spawning a node thread")
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|handle| handle.join()).collect();
        results
            .into_iter()
            .map(|result| result.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    }))
}

#[derive(Debug)]
struct Shared {
    targets: Vec<Target>,
    gather: Mutex<Gather>,
    gathered: Condvar,
    cost: Option<CostModel>,
    departures: AtomicU64,
}

#[derive(Debug)]
struct Target {
    registry: Arc<Registry>,
    mailbox: Mailbox,
    /// 0 while the node is in the job, else its place in the order of
    /// departures (1 = first), so collectives blame the first to leave.
    departed: AtomicU64,
}

#[derive(Debug)]
struct Gather {
    generation: u64,
    slots: Vec<Option<Vec<u8>>>,
    arrived: usize,
    results: Arc<Vec<Vec<u8>>>,
}

#[derive(Debug)]
struct Loopback {
    rank: NodeRank,
    timeout: Duration,
    shared: Arc<Shared>,
}

impl Loopback {
    fn execute(&self, op: Op, done_at_ns: u64) -> Result<Output, VerbError> {
        let target_rank = op.target().unwrap_or(self.rank);
        let target = &self.shared.targets[target_rank.index()];
        if target.departed.load(Ordering::Acquire) != 0 {
            return Err(VerbError::PeerLost {
                node: target_rank,
                reason: "the node left the job".into(),
            });
        }
        match op {
            Op::Send { data, .. } => {
                target.mailbox.deliver(self.rank, data, done_at_ns);
                Ok(Output::Done)
            }
            one_sided => target.registry.serve(target_rank, one_sided),
        }
    }
}

impl Fabric for Loopback {
    fn register(&self, len: usize) -> Result<Region> {
        Ok(self.shared.targets[self.rank.index()]
            .registry
            .register(self.rank, len))
    }

    fn post(&self, cq: &Arc<CompletionQueue>, now_ns: u64, wrs: Vec<WorkRequest>) {
        for WorkRequest { wr_id, op } in wrs {
            let verb = op.verb();
            let mut done_at_ns = 0;
            if let (Some(model), Some(peer)) = (&self.shared.cost, op.target()) {
                let free = cq.nic_free_ns.load(Ordering::Relaxed);
                let (done, next_free) = model.issue(verb, op.payload_len(), now_ns, free);
                cq.nic_free_ns.store(next_free, Ordering::Relaxed);
                cq.counters().add_modelled(peer, verb, done - now_ns);
                done_at_ns = done;
            }
            if let Op::Recv { capacity } = op {
                self.shared.targets[self.rank.index()]
                    .mailbox
                    .post(wr_id, capacity, cq);
                continue;
            }
            let peer = op.target().unwrap_or(self.rank);
            let mut completion = Completion::new(wr_id, verb, peer, self.execute(op, done_at_ns));
            completion.done_at_ns = done_at_ns;
            cq.push(completion);
        }
    }

    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>> {
        let shared = &self.shared;
        let n = shared.targets.len();
        let mut gather = shared
            .gather
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        gather.slots[self.rank.index()] = Some(data);
        gather.arrived += 1;
        if gather.arrived == n {
            let results: Vec<Vec<u8>> = gather
                .slots
                .iter_mut()
                .map(|slot| slot.take().unwrap_or_default())
                .collect();
            gather.results = Arc::new(results);
            gather.arrived = 0;
            gather.generation += 1;
            shared.gathered.notify_all();
            return Ok(gather.results.to_vec());
        }
        let generation = gather.generation;
        let timeout = self.timeout;
        let deadline = Instant::now() + timeout;
        loop {
            let rank_of = |rank: usize| NodeRank(u32::try_from(rank).expect("ranks are u32"));
            let missing: Vec<NodeRank> = (0..n)
                .filter(|&rank| gather.slots[rank].is_none())
                .map(rank_of)
                .collect();
            let departed = missing
                .iter()
                .copied()
                .filter_map(|node| {
                    let order = shared.targets[node.index()]
                        .departed
                        .load(Ordering::Acquire);
                    (order != 0).then_some((order, node))
                })
                .min()
                .map(|(_, node)| node);
            let failure = match departed {
                Some(node) => Some(Error::NodeFailed {
                    node,
                    reason: "it left the job before reaching the collective".into(),
                }),
                None if Instant::now() >= deadline => Some(Error::NodeFailed {
                    node: missing.first().copied().unwrap_or(self.rank),
                    reason: format!("it did not reach the collective within {timeout:?}"),
                }),
                None => None,
            };
            if let Some(failure) = failure {
                // Withdraw, so that the collective cannot later complete
                // without this node's contribution.
                gather.slots[self.rank.index()] = None;
                gather.arrived -= 1;
                return Err(failure);
            }
            let now = Instant::now();
            gather = shared
                .gathered
                .wait_timeout(gather, deadline - now)
                .unwrap_or_else(|poison| poison.into_inner())
                .0;
            if gather.generation != generation {
                return Ok(gather.results.to_vec());
            }
        }
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        let order = self.shared.departures.fetch_add(1, Ordering::AcqRel) + 1;
        self.shared.targets[self.rank.index()]
            .departed
            .store(order, Ordering::Release);
        let _guard = self
            .shared
            .gather
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        self.shared.gathered.notify_all();
    }
}
