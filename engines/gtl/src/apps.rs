//! The paper's applications (GraphSSD §4.1) on any [`GraphSource`]: they
//! see adjacency lists only, requested through the host's [`Queues`]
//! ([`Submit`]: how many in flight, window or batches), and keep their
//! state (visited flags, ranks) in host memory. Sweeps (level-synchronous
//! searches, MIS, PageRank, random reads) and the walks are deterministic:
//! the same graph, parameters and seed give the same result on either
//! backend. The FIFO searches take lists as they arrive, so which
//! vertex is reached first, and at what depth, follows the device's
//! timing; the vertices reached and the components do not.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::error::{check_vertex, Result};
use crate::queues::{Queues, Submit};
use crate::source::GraphSource;

/// Fetches the lists of `vertices` through queues of `submit` and hands
/// each to `f` in the order asked (a list that arrives early waits for
/// the ones before it, on the host), so that a sweep's result does not
/// depend on the device's timing.
fn for_each_list(
    source: &mut dyn GraphSource,
    vertices: &[u32],
    submit: Submit,
    mut f: impl FnMut(u32, &[u32]),
) -> Result<()> {
    let mut queues = Queues::new(source, submit);
    let mut early: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    let (mut sent, mut handed) = (0, 0);
    loop {
        while !queues.is_full() && sent < vertices.len() {
            queues.request(sent, vertices[sent])?;
            sent += 1;
        }
        let Some(response) = queues.take()? else {
            break;
        };
        if response.token == handed {
            f(vertices[handed], &response.list);
            handed += 1;
        } else {
            early.insert(response.token, response.list);
        }
        while let Some(list) = early.remove(&handed) {
            f(vertices[handed], &list);
            handed += 1;
        }
    }
    queues.finish()
}

/// The order a search visits vertices in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// The paper's Algorithm 1: one FIFO queue; each list, as it arrives,
    /// queues the neighbours not yet visited, and the next queued vertex is
    /// requested whenever a request slot is free.
    #[default]
    Fifo,
    /// Level-synchronous (ours): each level's vertices sorted by id and
    /// swept, so a level reads the pages in their order.
    Levels,
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

/// A BFS's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bfs {
    /// Each vertex's depth, [`UNREACHED`] if the search did not reach it:
    /// the length of the path it was found by (in FIFO order with more
    /// than one request in flight, possibly longer than the shortest).
    pub depths: Vec<u32>,
    /// Vertices reached.
    pub reached: u64,
    /// Levels expanded (the largest depth whose list was requested + 1).
    pub levels: u32,
    /// Whether the target was reached.
    pub found: bool,
}

/// BFS from `root` along out-edges in `order`; stops when `target` is
/// found: in FIFO order when it reaches the front of the queue (the
/// paper's Algorithm 1), level by level as soon as a level reaches it.
pub fn bfs(
    source: &mut dyn GraphSource,
    root: u32,
    target: Option<u32>,
    order: Order,
    submit: Submit,
) -> Result<Bfs> {
    let n = source.vertices();
    check_vertex(root, n)?;
    let mut depths = vec![UNREACHED; n as usize];
    depths[root as usize] = 0;
    let search = match order {
        Order::Fifo => fifo_bfs(source, &mut depths, root, target, submit)?,
        Order::Levels => level_bfs(source, &mut depths, root, target, submit)?,
    };
    let (reached, levels, found) = search;
    Ok(Bfs {
        depths,
        reached,
        levels,
        found,
    })
}

/// Algorithm 1 from `root` (depth 0 in `depths`): vertices reached,
/// levels expanded, whether `target` was found.
fn fifo_bfs(
    source: &mut dyn GraphSource,
    depths: &mut [u32],
    root: u32,
    target: Option<u32>,
    submit: Submit,
) -> Result<(u64, u32, bool)> {
    let mut queue = VecDeque::from([root]);
    let mut queues = Queues::new(source, submit);
    let (mut reached, mut levels, mut found) = (1u64, 0u32, false);
    'search: loop {
        while !queues.is_full() {
            let Some(v) = queue.pop_front() else {
                break;
            };
            if target == Some(v) {
                found = true;
                break 'search;
            }
            levels = levels.max(depths[v as usize] + 1);
            queues.request(0, v)?;
        }
        let Some(response) = queues.take()? else {
            break;
        };
        let depth = depths[response.vertex as usize] + 1;
        for &u in &response.list {
            if depths[u as usize] == UNREACHED {
                depths[u as usize] = depth;
                reached += 1;
                queue.push_back(u);
            }
        }
    }
    queues.finish()?;
    Ok((reached, levels, found))
}

/// Level-synchronous BFS from `root` (depth 0 in `depths`): each level's
/// lists one sweep, the next level sorted by id.
fn level_bfs(
    source: &mut dyn GraphSource,
    depths: &mut [u32],
    root: u32,
    target: Option<u32>,
    submit: Submit,
) -> Result<(u64, u32, bool)> {
    let mut frontier = vec![root];
    let (mut reached, mut levels) = (1u64, 0u32);
    let mut found = target == Some(root);
    while !frontier.is_empty() && !found {
        let mut next = Vec::new();
        for_each_list(source, &frontier, submit, |_, list| {
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
    Ok((reached, levels, found))
}

/// Connected components: searches from the vertices not yet labelled,
/// taken in increasing order, joined where they meet; each vertex's label
/// is its component's smallest vertex. In FIFO order (the paper's
/// Algorithm 1 per search) a new search starts whenever the queue is empty
/// and a request slot free, so the device stays busy through the tail of
/// a search and through runs of isolated vertices; level by level (ours),
/// the searches from `in_flight` roots at a time run level-synchronously
/// together. Meant for undirected graphs (on a directed one, out-edges
/// only).
pub fn connected_components(
    source: &mut dyn GraphSource,
    order: Order,
    submit: Submit,
) -> Result<Vec<u32>> {
    let n = source.vertices();
    let mut labels = vec![UNREACHED; n as usize];
    // Each root's parent among the roots it is joined to; a tree's root is its smallest.
    let mut parent: Vec<u32> = (0..n).collect();
    let mut roots = 0..n;
    // The next vertex no search has reached, labelled as a new root.
    let mut new_root = |labels: &mut [u32]| {
        let root = roots.find(|&v| labels[v as usize] == UNREACHED)?;
        labels[root as usize] = root;
        Some(root)
    };
    match order {
        Order::Fifo => {
            let mut queue = VecDeque::new();
            let mut queues = Queues::new(source, submit);
            loop {
                while !queues.is_full() {
                    let Some(v) = queue.pop_front().or_else(|| new_root(&mut labels)) else {
                        break;
                    };
                    queues.request(0, v)?;
                }
                let Some(response) = queues.take()? else {
                    break;
                };
                let label = labels[response.vertex as usize];
                for &u in &response.list {
                    match labels[u as usize] {
                        UNREACHED => {
                            labels[u as usize] = label;
                            queue.push_back(u);
                        }
                        other => join(&mut parent, label, other),
                    }
                }
            }
            queues.finish()?;
        }
        Order::Levels => loop {
            let mut frontier: Vec<u32> = std::iter::from_fn(|| new_root(&mut labels))
                .take(submit.in_flight)
                .collect();
            if frontier.is_empty() {
                break;
            }
            while !frontier.is_empty() {
                let mut next = Vec::new();
                for_each_list(source, &frontier, submit, |v, list| {
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
        },
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

/// Random walks' result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walks {
    /// Where each walk ended.
    pub ends: Vec<u32>,
    /// Steps taken by all walks.
    pub steps: u64,
    /// Walks stopped early at a vertex without out-edges.
    pub stuck: u64,
}

/// `walks` random walks of up to `length` steps from starts drawn
/// uniformly with `seed` from `among` (every id when `None`), each on its own: a walk requests the list of the
/// vertex it stands on and, when it arrives, moves to a neighbour drawn
/// uniformly and requests the next, as long as a request slot is free
/// (walks wait their turn in a FIFO queue). Each walk draws from its own
/// generator, so where it goes does not depend on the device's timing.
pub fn random_walks(
    source: &mut dyn GraphSource,
    walks: u32,
    length: u32,
    seed: u64,
    among: Option<&[u32]>,
    submit: Submit,
) -> Result<Walks> {
    let mut rng = SplitMix::new(seed);
    let mut at = draw(&mut rng, u64::from(walks), among, source.vertices());
    let n = at.len();
    let mut draws: Vec<SplitMix> = (0..n).map(|_| SplitMix::new(rng.next_u64())).collect();
    let mut taken = vec![0u32; n];
    let mut waiting: VecDeque<usize> = if length == 0 {
        VecDeque::new()
    } else {
        (0..n).collect()
    };
    let (mut steps, mut stuck) = (0u64, 0u64);
    let mut queues = Queues::new(source, submit);
    loop {
        while !queues.is_full() {
            let Some(w) = waiting.pop_front() else {
                break;
            };
            queues.request(w, at[w])?;
        }
        let Some(response) = queues.take()? else {
            break;
        };
        let (w, list) = (response.token, response.list);
        if list.is_empty() {
            stuck += 1;
            continue;
        }
        // A list's length fits usize, and the draw is below it.
        let i = usize::try_from(draws[w].below(list.len() as u64)).expect("below a length");
        at[w] = list[i];
        steps += 1;
        taken[w] += 1;
        if taken[w] < length {
            waiting.push_back(w);
        }
    }
    queues.finish()?;
    Ok(Walks {
        ends: at,
        steps,
        stuck,
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
pub fn luby_mis(source: &mut dyn GraphSource, seed: u64, submit: Submit) -> Result<Mis> {
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
        for_each_list(source, &undecided, submit, |v, list| {
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
    submit: Submit,
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
        for_each_list(source, &active, submit, |v, list| {
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
/// `seed` from `among` (every id when `None`); returns the neighbours
/// returned.
pub fn random_reads(
    source: &mut dyn GraphSource,
    requests: u64,
    seed: u64,
    among: Option<&[u32]>,
    submit: Submit,
) -> Result<u64> {
    let vertices = draw(&mut SplitMix::new(seed), requests, among, source.vertices());
    let mut neighbours = 0u64;
    for_each_list(source, &vertices, submit, |_, list| {
        neighbours += list.len() as u64;
    })?;
    Ok(neighbours)
}

/// `count` vertices drawn uniformly with `rng` from `among`, or from
/// every id below `vertices` when `None`; none if there is none to draw.
pub(crate) fn draw(
    rng: &mut SplitMix,
    count: u64,
    among: Option<&[u32]>,
    vertices: u32,
) -> Vec<u32> {
    let n = among.map_or(u64::from(vertices), |a| a.len() as u64);
    if n == 0 {
        return Vec::new();
    }
    (0..count)
        .map(|_| {
            let i = rng.below(n);
            // Below a length or |V|.
            among.map_or_else(
                || u32::try_from(i).expect("below |V|"),
                |a| a[usize::try_from(i).expect("below a length")],
            )
        })
        .collect()
}
