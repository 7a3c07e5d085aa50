//! What a walk is: where walks start, how each step is drawn, and when a
//! walk ends. [`step`] is the one place a step is decided, shared by every
//! mode, so that exact mode can compare them walk for walk.

use serde::Serialize;

use crate::rng::KeyedRng;

/// Where walks start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Starts {
    /// `walks_per_source` walks from each listed vertex (query apps).
    Sources {
        /// The source vertices; a walk's source index points into this list.
        sources: Vec<u32>,
        /// Walks from each source.
        walks_per_source: u64,
    },
    /// `walks_per_vertex` walks from every vertex (RWD, corpus generation).
    EveryVertex {
        /// Walks from each vertex.
        walks_per_vertex: u64,
    },
    /// `walks` walks from vertices drawn uniformly at random.
    Uniform {
        /// Number of walks.
        walks: u64,
    },
}

impl Starts {
    /// Total number of walks on a graph of `num_vertices` vertices.
    pub fn total(&self, num_vertices: u32) -> u64 {
        match self {
            Starts::Sources {
                sources,
                walks_per_source,
            } => sources.len() as u64 * walks_per_source,
            Starts::EveryVertex { walks_per_vertex } => u64::from(num_vertices) * walks_per_vertex,
            Starts::Uniform { walks } => *walks,
        }
    }

    /// Size of the source table a walk word indexes (the listed sources, or
    /// every vertex when walks start everywhere).
    pub fn num_sources(&self, num_vertices: u32) -> u64 {
        match self {
            Starts::Sources { sources, .. } => sources.len() as u64,
            _ => u64::from(num_vertices),
        }
    }

    /// The vertex of source index `index`.
    #[allow(clippy::cast_possible_truncation)] // Source indices of vertex tables are vertex ids.
    pub fn source_vertex(&self, index: u64) -> u32 {
        match self {
            Starts::Sources { sources, .. } => {
                sources[usize::try_from(index).expect("source index fits usize")]
            }
            _ => index as u32,
        }
    }

    /// The source index of walk `walk`, a pure function of its id.
    pub fn source_of(&self, walk: u64, seed: u64, num_vertices: u32) -> u64 {
        match self {
            Starts::Sources {
                walks_per_source, ..
            } => walk / walks_per_source,
            Starts::EveryVertex { walks_per_vertex } => walk / walks_per_vertex,
            Starts::Uniform { .. } => {
                KeyedRng::new(seed, walk, u64::MAX).below(u64::from(num_vertices))
            }
        }
    }
}

/// What a walk does at a vertex with no out-edges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeadEnd {
    /// The walk ends there.
    #[default]
    Stop,
    /// The walk jumps back to its source (and goes on counting hops).
    Restart,
    /// The walk jumps to a vertex drawn uniformly at random.
    Jump,
}

/// How the next vertex is chosen among the out-neighbours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Uniformly.
    #[default]
    Unbiased,
    /// In proportion to the edge weights (O(log d) per step by binary search
    /// over per-vertex cumulative weights).
    Weighted,
}

/// Node2Vec's second-order bias: after moving `t -> v`, a neighbour `x` of
/// `v` is taken with weight `1/p` if `x == t`, `1` if `x` is a neighbour of
/// `t`, and `1/q` otherwise (times its edge weight for weighted walks),
/// sampled by rejection with the return weight folded out (see
/// `node2vec_step`). Both must be finite and positive.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Node2Vec {
    /// Return parameter.
    pub p: f64,
    /// In-out parameter.
    pub q: f64,
}

/// Everything that decides a walk's path, except the graph and the seed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WalkSpec {
    /// Where walks start.
    pub starts: Starts,
    /// The longest walk, in steps.
    pub length: u32,
    /// Chance of ending at each step, before moving.
    pub stop_probability: f64,
    /// Chance of jumping back to the source at each step (random walk with
    /// restart), drawn after the stop chance.
    pub restart_probability: f64,
    /// How neighbours are chosen.
    pub kind: Kind,
    /// Node2Vec's second-order bias on top of `kind`, if any.
    pub node2vec: Option<Node2Vec>,
    /// What happens at a vertex without out-edges.
    pub dead_end: DeadEnd,
}

/// The out-edges a step may look at.
pub trait Adjacency {
    /// Out-neighbours of `v` (which the caller guarantees is present).
    fn neighbors(&self, v: u32) -> &[u32];
    /// Inclusive prefix sums of `v`'s out-edge weights, for weighted walks.
    fn cumulative_weights(&self, v: u32) -> &[f32];
    /// Starts fetching `v`'s adjacency from memory ahead of a step there
    /// (a hint; the default does nothing).
    fn prefetch(&self, _v: u32) {}
}

/// Where one step takes a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Along an edge to this vertex.
    Move(u32),
    /// To this vertex without an edge (a restart or a jump): there is no
    /// previous vertex for a second-order walk.
    Teleport(u32),
    /// Nowhere: the walk ends where it is.
    Stop,
}

/// The vertex a second-order walk came from, and its out-neighbours.
#[derive(Clone, Copy, Debug)]
pub struct Prev<'a> {
    /// The previous vertex.
    pub vertex: u32,
    /// Its out-neighbours, sorted.
    pub neighbors: &'a [u32],
    /// Whether a candidate is among `neighbors`, if looked up ahead of
    /// the step (see [`look_ahead`]).
    pub known: Option<(u32, bool)>,
    /// Whether no list of the graph holds a vertex twice (its header says
    /// so): a current vertex then has at most one edge back.
    pub distinct: bool,
}

/// Draws one step of a walk at `v` with source `source` (and previous
/// vertex `prev`, for Node2Vec). Draws, in order: the stop chance, the
/// restart chance, then the neighbour (Node2Vec: rounds of the return
/// outlier, candidate and acceptance until one accepts), or the jump
/// target at a dead end.
#[inline(always)]
pub fn step(
    spec: &WalkSpec,
    adjacency: &impl Adjacency,
    num_vertices: u32,
    source: u32,
    v: u32,
    prev: Option<Prev<'_>>,
    rng: &mut KeyedRng,
) -> Step {
    if let Some(early) = stop_or_restart(spec, source, rng) {
        return early;
    }
    let neighbors = adjacency.neighbors(v);
    if neighbors.is_empty() {
        return match spec.dead_end {
            DeadEnd::Stop => Step::Stop,
            DeadEnd::Restart => Step::Teleport(source),
            DeadEnd::Jump => Step::Teleport(narrow(rng.below(u64::from(num_vertices)))),
        };
    }
    let (Some(bias), Some(prev)) = (spec.node2vec, prev) else {
        return Step::Move(neighbors[candidate(spec.kind, adjacency, v, neighbors.len(), rng)]);
    };
    node2vec_step(spec.kind, bias, adjacency, v, neighbors, prev, rng)
}

/// Node2Vec's biased choice among `v`'s `neighbors`, by rejection.
///
/// Candidates are drawn by edge weight and accepted with their bias over
/// a bound. The bound is `max(1, 1/q)`, not `max(1/p, 1, 1/q)`: when the
/// return weight `1/p` is larger, the excess of the edges back to the
/// previous vertex (as many as `v`'s list holds, weights and all) is an
/// outlier area of its own (KnightKing's outlier folding), drawn first,
/// which keeps acceptance high for small `p`. A candidate other than the
/// previous vertex whose dart falls below `min(1, 1/q)`, the smaller bias
/// it can have, is accepted without looking at the previous vertex's
/// list (the previous vertex itself is known by its id). Draws per
/// round: the outlier's (whenever `1/p` exceeds the bound, even if `v` has
/// no edge back), the candidate, the acceptance.
fn node2vec_step(
    kind: Kind,
    bias: Node2Vec,
    adjacency: &impl Adjacency,
    v: u32,
    neighbors: &[u32],
    prev: Prev<'_>,
    rng: &mut KeyedRng,
) -> Step {
    let sampler = Sampler::new(
        kind,
        bias,
        adjacency,
        v,
        neighbors,
        prev.vertex,
        prev.distinct,
    );
    loop {
        match sampler.round(adjacency, v, neighbors, prev.vertex, rng) {
            Round::Move(x) => return Step::Move(x),
            Round::Again => {}
            Round::Ask { x, dart } => {
                let is_neighbor = match prev.known {
                    Some((known, answer)) if known == x => answer,
                    _ => prev.neighbors.binary_search(&x).is_ok(),
                };
                if dart < sampler.weight(is_neighbor) {
                    return Step::Move(x);
                }
            }
        }
    }
}

/// One Node2Vec step's rejection sampler (see [`node2vec_step`]).
struct Sampler {
    kind: Kind,
    return_weight: f64,
    out_weight: f64,
    bound: f64,
    /// The smaller bias a candidate other than the previous vertex can
    /// have: `min(1, 1/q)`.
    lowest: f64,
    /// Whether the return weight exceeds the bound, so that the return
    /// edges' excess is an outlier area of its own (possibly empty).
    folded: bool,
    /// Whether the outlier area is there for an edge back `v` may not
    /// have: a dart in it then checks.
    unsure_of_back: bool,
    /// The return edges' outlier area, and the whole area.
    outlier: f64,
    area: f64,
}

/// The draws a round of [`Sampler`] starts with.
enum Draw {
    /// A dart in the return edges' outlier area.
    Outlier,
    /// The neighbour at `index` of the current vertex's list, with its
    /// acceptance dart.
    Candidate { index: usize, dart: f64 },
}

/// What one round of [`Sampler`] decided.
enum Round {
    /// Accepted.
    Move(u32),
    /// Rejected: the candidate was the previous vertex and its dart fell
    /// above the bound's share of the return weight, or a dart fell in the
    /// outlier area of an edge back that `v` does not have.
    Again,
    /// Candidate `x` with acceptance `dart`, which depends on whether `x`
    /// is a neighbour of the previous vertex.
    Ask { x: u32, dart: f64 },
}

impl Sampler {
    fn new(
        kind: Kind,
        bias: Node2Vec,
        adjacency: &impl Adjacency,
        v: u32,
        neighbors: &[u32],
        prev: u32,
        distinct: bool,
    ) -> Sampler {
        let (return_weight, out_weight) = (1.0 / bias.p, 1.0 / bias.q);
        let bound = out_weight.max(1.0);
        let excess = (return_weight - bound).max(0.0);
        // The edges back to the previous vertex (a list may hold an edge
        // more than once): their weight, when the return weight exceeds
        // the bound.
        let back = || {
            let first = neighbors.partition_point(|&x| x < prev);
            first..first + neighbors[first..].partition_point(|&x| x == prev)
        };
        let (total_weight, outlier) = match kind {
            // At most one edge back: its area is there whether `v` has the
            // edge or not, and a dart in it looks (see `round`), so that
            // `v`'s list is searched only then.
            Kind::Unbiased if distinct => (neighbors.len() as f64, excess),
            Kind::Unbiased => {
                let copies = if excess > 0.0 { back().len() } else { 0 };
                (neighbors.len() as f64, excess * copies as f64)
            }
            Kind::Weighted => {
                let cumulative = adjacency.cumulative_weights(v);
                let back_weight = if excess > 0.0 {
                    let edges = back();
                    let before = |i: usize| if i == 0 { 0.0 } else { cumulative[i - 1] };
                    if edges.is_empty() {
                        0.0
                    } else {
                        cumulative[edges.end - 1] - before(edges.start)
                    }
                } else {
                    0.0
                };
                (
                    f64::from(cumulative[neighbors.len() - 1]),
                    f64::from(back_weight) * excess,
                )
            }
        };
        Sampler {
            kind,
            return_weight,
            out_weight,
            bound,
            lowest: out_weight.min(1.0),
            folded: excess > 0.0,
            unsure_of_back: distinct && kind == Kind::Unbiased,
            outlier,
            area: total_weight * bound + outlier,
        }
    }

    /// A round's draws: the outlier's (whenever the return weight exceeds
    /// the bound, edge back or not, so the draws that follow do not depend
    /// on the list), then a candidate and its dart.
    fn draw(&self, adjacency: &impl Adjacency, v: u32, degree: usize, rng: &mut KeyedRng) -> Draw {
        if self.folded && rng.unit() * self.area < self.outlier {
            return Draw::Outlier;
        }
        let index = candidate(self.kind, adjacency, v, degree, rng);
        Draw::Candidate {
            index,
            dart: rng.unit() * self.bound,
        }
    }

    fn round(
        &self,
        adjacency: &impl Adjacency,
        v: u32,
        neighbors: &[u32],
        prev: u32,
        rng: &mut KeyedRng,
    ) -> Round {
        let (index, dart) = match self.draw(adjacency, v, neighbors.len(), rng) {
            Draw::Outlier => {
                return if !self.unsure_of_back || neighbors.binary_search(&prev).is_ok() {
                    Round::Move(prev)
                } else {
                    Round::Again
                };
            }
            Draw::Candidate { index, dart } => (index, dart),
        };
        let x = neighbors[index];
        if x == prev {
            // The return edge's share below the bound; the outlier holds
            // the rest.
            if dart < self.return_weight.min(self.bound) {
                Round::Move(x)
            } else {
                Round::Again
            }
        } else if self.asks(dart) {
            Round::Ask { x, dart }
        } else {
            Round::Move(x)
        }
    }

    /// Whether a candidate with `dart` other than the previous vertex
    /// (known by its id) needs the previous vertex's list to be accepted
    /// or not: below the smaller bias it can have, it is accepted as is.
    fn asks(&self, dart: f64) -> bool {
        dart >= self.lowest
    }

    /// A candidate's bias other than the return edge's.
    fn weight(&self, is_neighbor: bool) -> f64 {
        if is_neighbor {
            1.0
        } else {
            self.out_weight
        }
    }
}

/// Whether each `(list, key)` has `key` in its sorted `list`, searched
/// side by side: every round moves each search one level down and
/// prefetches its next probe, so the searches' cache misses overlap
/// instead of following one another.
pub fn contains_all(queries: &[(&[u32], u32)], found: &mut Vec<bool>) {
    // (first index of the range left, its length)
    let mut ranges: Vec<(usize, usize)> = queries.iter().map(|(list, _)| (0, list.len())).collect();
    let mut active = true;
    while active {
        active = false;
        for ((list, key), (base, len)) in queries.iter().zip(ranges.iter_mut()) {
            if *len > 1 {
                let half = *len / 2;
                if list[*base + half] <= *key {
                    *base += half;
                }
                *len -= half;
                if *len > 1 {
                    quiver_io::prefetch(&list[*base + *len / 2]);
                    active = true;
                }
            }
        }
    }
    found.clear();
    found.extend(
        queries
            .iter()
            .zip(&ranges)
            .map(|((list, key), &(base, len))| len == 1 && list[base] == *key),
    );
}

/// The draws every step starts with: the walk may stop, or restart at
/// `source`, before it looks at any edge.
#[inline(always)]
fn stop_or_restart(spec: &WalkSpec, source: u32, rng: &mut KeyedRng) -> Option<Step> {
    if spec.stop_probability > 0.0 && rng.chance(spec.stop_probability) {
        return Some(Step::Stop);
    }
    if spec.restart_probability > 0.0 && rng.chance(spec.restart_probability) {
        return Some(Step::Teleport(source));
    }
    None
}

/// What the next step of an unbiased walk at `v` reads first, drawn on a
/// copy of the walk's stream (so the step itself draws the same).
#[derive(Clone, Debug)]
pub struct Lookahead<'a> {
    /// The neighbour it draws: a first-order walk moves there; a Node2Vec
    /// walk considers it first.
    pub candidate: &'a u32,
    /// Whether (for a Node2Vec walk) accepting the candidate depends on
    /// the previous vertex's list. When not, a candidate other than the
    /// previous vertex is accepted; the previous vertex itself is accepted
    /// or not by the return weight alone.
    pub asks: bool,
    /// For a first-order step (no Node2Vec bias, or no previous vertex),
    /// whose candidate is where [`step`] moves: the stream where the step
    /// leaves it, so that a caller can take the step from the lookahead
    /// alone. `None` for a Node2Vec candidate.
    pub drawn: Option<KeyedRng>,
}

/// Looks ahead at the step of an unbiased walk at `v` (a Node2Vec walk
/// that came from `prev`, in a graph whose lists hold no target twice when
/// `distinct`): lets the caller prefetch the candidate while other walks
/// step and, for Node2Vec, look up many walks' answers at once
/// ([`contains_all`]) to hand them to the step in [`Prev::known`]. `None`
/// when the step draws no neighbour first.
#[inline(always)]
pub fn look_ahead<'a>(
    spec: &WalkSpec,
    adjacency: &'a impl Adjacency,
    v: u32,
    prev: Option<u32>,
    distinct: bool,
    rng: &KeyedRng,
) -> Option<Lookahead<'a>> {
    let mut rng = past_stop_and_restart(spec, rng)?;
    let neighbors = adjacency.neighbors(v);
    if neighbors.is_empty() {
        return None;
    }
    let (Some(bias), Some(prev)) = (spec.node2vec, prev) else {
        // `unbiased_draw`'s draw, the list read only once the step draws.
        let index = narrow_usize(rng.below(neighbors.len() as u64));
        return Some(Lookahead {
            candidate: &neighbors[index],
            asks: false,
            drawn: Some(rng),
        });
    };
    let sampler = Sampler::new(spec.kind, bias, adjacency, v, neighbors, prev, distinct);
    match sampler.draw(adjacency, v, neighbors.len(), &mut rng) {
        Draw::Outlier => None,
        Draw::Candidate { index, dart } => Some(Lookahead {
            candidate: &neighbors[index],
            // (Not reading the candidate, which is only prefetched: a
            // candidate that is the previous vertex asks for nothing.)
            asks: sampler.asks(dart),
            drawn: None,
        }),
    }
}

/// The neighbour index an unbiased first-order step draws at a vertex of
/// `degree` out-edges, from a copy of the walk's stream `rng`: `None` when
/// the step draws no neighbour (weighted walks, a stop or restart, a dead
/// end). [`look_ahead`] draws the same
/// (the list's length read only past the stop and restart draws), and a
/// reader that fetches only the part of a long list a walk's step reads
/// draws by it.
#[inline(always)]
pub(crate) fn unbiased_draw(spec: &WalkSpec, rng: &KeyedRng, degree: u64) -> Option<u64> {
    let mut rng = past_stop_and_restart(spec, rng)?;
    (degree > 0).then(|| rng.below(degree))
}

/// For a lookahead of an unbiased walk's step: a copy of its stream past
/// the stop and restart draws; `None` when the step stops or restarts, or
/// the walk is weighted.
#[inline(always)]
fn past_stop_and_restart(spec: &WalkSpec, rng: &KeyedRng) -> Option<KeyedRng> {
    if spec.kind != Kind::Unbiased {
        return None;
    }
    let mut rng = rng.clone();
    stop_or_restart(spec, 0, &mut rng).is_none().then_some(rng)
}

/// Index of a neighbour of `v` (of `degree > 0`), uniform or by weight.
#[inline(always)]
fn candidate(
    kind: Kind,
    adjacency: &impl Adjacency,
    v: u32,
    degree: usize,
    rng: &mut KeyedRng,
) -> usize {
    match kind {
        Kind::Unbiased => narrow_usize(rng.below(degree as u64)),
        Kind::Weighted => {
            let cumulative = adjacency.cumulative_weights(v);
            let total = cumulative[cumulative.len() - 1];
            #[allow(clippy::cast_possible_truncation)] // A draw in [0, total) of an f32 total.
            let r = (rng.unit() * f64::from(total)) as f32;
            cumulative.partition_point(|&c| c <= r).min(degree - 1)
        }
    }
}

#[inline]
fn narrow(x: u64) -> u32 {
    u32::try_from(x).expect("a draw below |V| fits u32")
}

#[inline]
fn narrow_usize(x: u64) -> usize {
    usize::try_from(x).expect("a draw below a degree fits usize")
}

/// Inclusive prefix sums of `weights`, restarting at every vertex boundary
/// of `offsets` (relative to `weights`).
pub fn cumulative_weights(offsets: &[u64], weights: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; weights.len()];
    let base = offsets[0];
    for pair in offsets.windows(2) {
        let range = usize::try_from(pair[0] - base).expect("edge index fits usize")
            ..usize::try_from(pair[1] - base).expect("edge index fits usize");
        let mut sum = 0f32;
        for i in range {
            sum += weights[i].max(0.0);
            out[i] = sum;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Adjacency lists held as vectors.
    struct Lists(Vec<Vec<u32>>);

    impl Adjacency for Lists {
        fn neighbors(&self, v: u32) -> &[u32] {
            &self.0[v as usize]
        }
        fn cumulative_weights(&self, _: u32) -> &[f32] {
            unreachable!("unbiased walks only")
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Searching side by side finds what one search at a time finds.
        #[test]
        fn contains_all_agrees_with_binary_search(
            lists in prop::collection::vec(prop::collection::btree_set(0u32..200, 0..70), 1..12),
            keys in prop::collection::vec((any::<prop::sample::Index>(), 0u32..200), 0..40),
        ) {
            let lists: Vec<Vec<u32>> = lists.into_iter().map(|l| l.into_iter().collect()).collect();
            let queries: Vec<(&[u32], u32)> = keys
                .iter()
                .map(|(i, key)| (&lists[i.index(lists.len())][..], *key))
                .collect();
            let mut found = vec![true; 3];
            contains_all(&queries, &mut found);
            let expected: Vec<bool> = queries.iter().map(|(l, k)| l.binary_search(k).is_ok()).collect();
            prop_assert_eq!(found, expected);
        }

        /// The prefetch hint names exactly the neighbour the step then
        /// moves to, whatever stop and restart probabilities consume first.
        #[test]
        fn look_ahead_names_where_step_moves(
            lists in prop::collection::vec(prop::collection::vec(0u32..20, 0..6), 20),
            v in 0u32..20,
            stop in prop_oneof![Just(0.0), 0.0f64..0.5],
            restart in prop_oneof![Just(0.0), 0.0f64..0.5],
            seed in any::<u64>(),
            prev in prop::option::of((0u32..20, 0.25f64..4.0, 0.25f64..4.0)),
            distinct in any::<bool>(),
        ) {
            let spec = WalkSpec {
                starts: Starts::Uniform { walks: 1 },
                length: 5,
                stop_probability: stop,
                restart_probability: restart,
                kind: Kind::Unbiased,
                node2vec: prev.map(|(_, p, q)| Node2Vec { p, q }),
                dead_end: DeadEnd::Jump,
            };
            // Sorted, as a graph's lists are, and without repeats when the
            // graph says so.
            let lists = Lists(lists.into_iter().map(|mut l| {
                l.sort_unstable();
                if distinct {
                    l.dedup();
                }
                l
            }).collect());
            let came_from = prev.map(|(p, _, _)| Prev { vertex: p, neighbors: lists.neighbors(p), known: None, distinct });
            let rng = KeyedRng::new(seed, 1, 2);
            let ahead = look_ahead(&spec, &lists, v, came_from.map(|p| p.vertex), distinct, &rng);
            let mut stepped = rng.clone();
            let moved = match step(&spec, &lists, 20, 0, v, came_from, &mut stepped) {
                Step::Move(next) => Some(next),
                Step::Teleport(_) | Step::Stop => None,
            };
            // A first-order walk looks ahead exactly when it moves along an
            // edge, to where it moves; a Node2Vec candidate other than the
            // previous vertex that needs no list is where the step goes (one
            // that does may be rejected, and so may the previous vertex).
            if came_from.is_none() {
                prop_assert_eq!(ahead.as_ref().map(|a| *a.candidate), moved);
                prop_assert!(ahead.as_ref().is_none_or(|a| !a.asks));
                // ... and leaves the stream where the step does.
                if let Some(ahead) = &ahead {
                    let mut drawn = ahead.drawn.clone().expect("a first-order step");
                    prop_assert_eq!(drawn.next_u64(), stepped.next_u64());
                }
            } else if let Some(ahead) = ahead
                .filter(|a| !a.asks && Some(*a.candidate) != came_from.map(|p| p.vertex))
            {
                prop_assert!(ahead.drawn.is_none());
                prop_assert_eq!(moved, Some(*ahead.candidate));
            }
        }
    }
}
