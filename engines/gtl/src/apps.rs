//! The paper's applications (GraphSSD §4.1) on any [`GraphSource`]: they
//! see adjacency lists only, fetched in batches of at most `batch`
//! requests, and keep their state (visited flags, ranks) in host memory.
//! Every one is deterministic: the same graph, parameters and seed give
//! the same result on either backend.

use serde::{Deserialize, Serialize};

use crate::source::GraphSource;
use crate::Result;

/// Fetches the lists of `vertices` in batches of `batch` and hands each to `f`.
fn for_each_list(
    source: &mut dyn GraphSource,
    vertices: &[u32],
    batch: usize,
    mut f: impl FnMut(u32, &[u32]),
) -> Result<()> {
    for chunk in vertices.chunks(batch.max(1)) {
        for (&v, list) in chunk.iter().zip(source.get_many(chunk)?) {
            f(v, &list);
        }
    }
    Ok(())
}

/// A small seeded generator (SplitMix64): the applications' only
/// randomness, so that runs repeat exactly.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value below `bound` (> 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        // Multiply-shift: the high half of a 128-bit product is below `bound`.
        u64::try_from((u128::from(self.next_u64()) * u128::from(bound)) >> 64)
            .expect("below a u64 bound")
    }
}

/// Marks a vertex no search reached.
pub const UNREACHED: u32 = u32::MAX;

/// Level-synchronous BFS result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bfs {
    /// Each vertex's depth, [`UNREACHED`] if the search did not reach it.
    pub depths: Vec<u32>,
    /// Vertices reached.
    pub reached: u64,
    /// Levels expanded (the depth of the last frontier whose lists were fetched + 1).
    pub levels: u32,
    /// Whether the target was reached.
    pub found: bool,
}

/// BFS from `source` along out-edges, each level's lists one batch (or
/// several of `batch`); stops as soon as `target` is reached.
pub fn bfs(
    source: &mut dyn GraphSource,
    root: u32,
    target: Option<u32>,
    batch: usize,
) -> Result<Bfs> {
    let n = source.vertices();
    if root >= n {
        return Err(crate::Error::VertexOutOfRange {
            vertex: root,
            vertices: n,
        });
    }
    let mut depths = vec![UNREACHED; n as usize];
    depths[root as usize] = 0;
    let mut frontier = vec![root];
    let (mut reached, mut levels) = (1u64, 0u32);
    let mut found = target == Some(root);
    while !frontier.is_empty() && !found {
        let mut next = Vec::new();
        for_each_list(source, &frontier, batch, |_, list| {
            for &u in list {
                if depths[u as usize] == UNREACHED {
                    depths[u as usize] = levels + 1;
                    next.push(u);
                }
            }
        })?;
        levels += 1;
        reached += next.len() as u64;
        found = target.is_some_and(|t| depths[t as usize] != UNREACHED);
        next.sort_unstable();
        frontier = next;
    }
    Ok(Bfs {
        depths,
        reached,
        levels,
        found,
    })
}

/// Connected components: searches from the vertices not yet labelled,
/// taken in increasing order `batch` at a time and run together (so a
/// scan over isolated vertices costs a batch per `batch` of them, not a
/// request each); searches that meet are joined, and each vertex's label
/// is its component's smallest vertex. Meant for undirected graphs (on a
/// directed one, out-edges only).
pub fn connected_components(source: &mut dyn GraphSource, batch: usize) -> Result<Vec<u32>> {
    let n = source.vertices();
    let mut labels = vec![UNREACHED; n as usize];
    // Each root's parent among the roots it is joined to; a tree's root is its smallest.
    let mut parent: Vec<u32> = (0..n).collect();
    let mut next_root = 0;
    loop {
        let mut frontier = Vec::new();
        while next_root < n && frontier.len() < batch.max(1) {
            if labels[next_root as usize] == UNREACHED {
                labels[next_root as usize] = next_root;
                frontier.push(next_root);
            }
            next_root += 1;
        }
        if frontier.is_empty() {
            break;
        }
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for_each_list(source, &frontier, batch, |v, list| {
                let label = labels[v as usize];
                for &u in list {
                    match labels[u as usize] {
                        UNREACHED => {
                            labels[u as usize] = label;
                            next.push(u);
                        }
                        other => join(&mut parent, label, other),
                    }
                }
            })?;
            next.sort_unstable();
            frontier = next;
        }
    }
    for label in &mut labels {
        *label = root_of(&mut parent, *label);
    }
    Ok(labels)
}

/// The smallest root `x` is joined to (halving the path on the way).
fn root_of(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        parent[x as usize] = parent[parent[x as usize] as usize];
        x = parent[x as usize];
    }
    x
}

/// Joins the trees of roots `a` and `b` under the smaller root.
fn join(parent: &mut [u32], a: u32, b: u32) {
    let (a, b) = (root_of(parent, a), root_of(parent, b));
    let (low, high) = (a.min(b), a.max(b));
    parent[high as usize] = low;
}

/// DrunkardMob-style random walks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walks {
    /// Where each walk ended.
    pub ends: Vec<u32>,
    /// Steps taken by all walks.
    pub steps: u64,
    /// Walks stopped early at a vertex without out-edges.
    pub stuck: u64,
    /// Rounds run.
    pub rounds: u32,
}

/// `walks` random walks of up to `length` steps from starts drawn
/// uniformly with `seed`, in lock-step rounds: each round fetches the
/// lists of the distinct vertices the live walks stand on (one batch, or
/// several of `batch`), then moves every walk, in order, to a neighbour
/// drawn uniformly (DrunkardMob processes all walks at a vertex together).
pub fn random_walks(
    source: &mut dyn GraphSource,
    walks: u32,
    length: u32,
    seed: u64,
    batch: usize,
) -> Result<Walks> {
    let n = source.vertices();
    let mut rng = SplitMix::new(seed);
    let mut at: Vec<u32> = (0..walks)
        .map(|_| u32::try_from(rng.below(u64::from(n.max(1)))).expect("below |V|"))
        .collect();
    let mut live: Vec<usize> = if n == 0 {
        Vec::new()
    } else {
        (0..at.len()).collect()
    };
    let (mut steps, mut stuck, mut rounds) = (0u64, 0u64, 0u32);
    let mut lists: std::collections::HashMap<u32, Vec<u32>> = std::collections::HashMap::new();
    while rounds < length && !live.is_empty() {
        let mut here: Vec<u32> = live.iter().map(|&w| at[w]).collect();
        here.sort_unstable();
        here.dedup();
        lists.clear();
        for_each_list(source, &here, batch, |v, list| {
            lists.insert(v, list.to_vec());
        })?;
        live.retain(|&w| {
            let list = &lists[&at[w]];
            if list.is_empty() {
                stuck += 1;
                return false;
            }
            // A list's length fits usize, and the draw is below it.
            let i = usize::try_from(rng.below(list.len() as u64)).expect("below a length");
            at[w] = list[i];
            steps += 1;
            true
        });
        rounds += 1;
    }
    Ok(Walks {
        ends: at,
        steps,
        stuck,
        rounds,
    })
}

/// A maximal independent set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mis {
    /// Whether each vertex is in the set.
    pub members: Vec<bool>,
    /// Its size.
    pub size: u64,
    /// Rounds run.
    pub rounds: u32,
}

/// Luby's algorithm with priorities drawn once from `seed`: each round
/// fetches the lists of the undecided vertices; an undecided vertex whose
/// priority beats every undecided neighbour's (ties broken by id) joins,
/// and its neighbours drop out. At least the smallest undecided vertex
/// joins each round, so it ends. Needs an undirected graph; self-loops are
/// ignored.
pub fn luby_mis(source: &mut dyn GraphSource, seed: u64, batch: usize) -> Result<Mis> {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum State {
        Undecided,
        In,
        Out,
    }
    let n = source.vertices();
    let mut rng = SplitMix::new(seed);
    let priority: Vec<(u64, u32)> = (0..n).map(|v| (rng.next_u64(), v)).collect();
    let mut state = vec![State::Undecided; n as usize];
    let mut undecided: Vec<u32> = (0..n).collect();
    let mut rounds = 0u32;
    while !undecided.is_empty() {
        let mut joined = Vec::new();
        let mut lists = Vec::with_capacity(undecided.len());
        for_each_list(source, &undecided, batch, |v, list| {
            let wins = list.iter().all(|&u| {
                u == v
                    || state[u as usize] != State::Undecided
                    || priority[v as usize] < priority[u as usize]
            });
            if wins {
                joined.push(v);
            }
            lists.push(list.to_vec());
        })?;
        for &v in &joined {
            state[v as usize] = State::In;
        }
        for (&v, list) in undecided.iter().zip(&lists) {
            if state[v as usize] == State::In {
                for &u in list {
                    if u != v && state[u as usize] == State::Undecided {
                        state[u as usize] = State::Out;
                    }
                }
            }
        }
        undecided.retain(|&v| state[v as usize] == State::Undecided);
        rounds += 1;
    }
    let members: Vec<bool> = state.iter().map(|&s| s == State::In).collect();
    let size = members.iter().filter(|&&m| m).count() as u64;
    Ok(Mis {
        members,
        size,
        rounds,
    })
}

/// Threshold PageRank's result.
#[derive(Clone, Debug, PartialEq)]
pub struct PageRank {
    /// Each vertex's rank (mean near 1).
    pub ranks: Vec<f64>,
    /// Vertices that sent updates, per iteration.
    pub active: Vec<u64>,
}

/// PageRank that sends an update only when it is large enough (GraphSSD
/// §4.1: "sends edge updates if they are greater than a certain threshold
/// (0.4)", at most 5 iterations). Ranks are on GraphChi's scale, `rank(v)
/// = (1 - d) + d * sum over in-neighbours u of rank(u) / outdeg(u)`,
/// starting at 1. A vertex is active when its rank moved by more than
/// `threshold` since it last sent (every vertex is active at first, its
/// whole rank unsent); an active vertex fetches its out-list and sends the
/// change, `d * change / outdeg`, to each neighbour. New ranks take effect
/// after the iteration. Stops after `iterations` or when nothing is active.
pub fn threshold_pagerank(
    source: &mut dyn GraphSource,
    damping: f64,
    threshold: f64,
    iterations: u32,
    batch: usize,
) -> Result<PageRank> {
    let n = source.vertices() as usize;
    let mut ranks = vec![1.0f64; n];
    let mut sent = vec![0.0f64; n];
    let mut received = vec![0.0f64; n];
    let mut active_counts = Vec::new();
    for _ in 0..iterations {
        let active: Vec<u32> = (0..n)
            .filter(|&v| (ranks[v] - sent[v]).abs() > threshold)
            .map(|v| u32::try_from(v).expect("a vertex id fits u32"))
            .collect();
        if active.is_empty() {
            break;
        }
        active_counts.push(active.len() as u64);
        for_each_list(source, &active, batch, |v, list| {
            let v = v as usize;
            let change = ranks[v] - sent[v];
            sent[v] = ranks[v];
            if !list.is_empty() {
                #[allow(clippy::cast_precision_loss)] // A degree far below 2^52.
                let share = damping * change / list.len() as f64;
                for &u in list {
                    received[u as usize] += share;
                }
            }
        })?;
        for (rank, got) in ranks.iter_mut().zip(&received) {
            *rank = (1.0 - damping) + got;
        }
    }
    Ok(PageRank {
        ranks,
        active: active_counts,
    })
}

/// What an application found, for the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "app", rename_all = "kebab-case")]
pub enum Summary {
    /// BFS to a target.
    Bfs {
        /// The root.
        source: u32,
        /// The target, picked at `target_depth`.
        target: u32,
        /// The target's depth from the root.
        target_depth: u32,
        /// The graph's BFS depth from the root (its deepest level).
        max_depth: u32,
        /// Whether the target was reached.
        found: bool,
        /// Vertices reached before stopping.
        reached: u64,
        /// Levels expanded.
        levels: u32,
    },
    /// Connected components.
    Cc {
        /// Components.
        components: u64,
        /// Vertices of the largest.
        largest: u64,
    },
    /// Random walks.
    Rw {
        /// Walks.
        walks: u32,
        /// Steps taken by all walks.
        steps: u64,
        /// Walks stopped at a vertex without out-edges.
        stuck: u64,
        /// Rounds.
        rounds: u32,
    },
    /// Maximal independent set.
    Mis {
        /// Its size.
        size: u64,
        /// Rounds.
        rounds: u32,
    },
    /// Threshold PageRank.
    Pagerank {
        /// Iterations run.
        iterations: u32,
        /// Active vertices per iteration.
        active: Vec<u64>,
        /// The sum of ranks.
        sum: f64,
        /// The largest rank.
        max: f64,
    },
    /// Random GetAdjacencyList calls.
    RandomReads {
        /// Calls.
        requests: u64,
        /// Neighbours returned.
        neighbours: u64,
    },
}

/// `requests` GetAdjacencyList calls on vertices drawn uniformly with
/// `seed`, in batches of `batch`; returns the neighbours returned.
pub fn random_reads(
    source: &mut dyn GraphSource,
    requests: u64,
    seed: u64,
    batch: usize,
) -> Result<u64> {
    let n = u64::from(source.vertices());
    let mut rng = SplitMix::new(seed);
    let mut left = requests;
    let mut neighbours = 0u64;
    while left > 0 && n > 0 {
        let take = left.min(batch.max(1) as u64);
        let vertices: Vec<u32> = (0..take)
            .map(|_| u32::try_from(rng.below(n)).expect("below |V|"))
            .collect();
        for list in source.get_many(&vertices)? {
            neighbours += list.len() as u64;
        }
        left -= take;
    }
    Ok(neighbours)
}
